"""The per-run table of a join as compact dense arrays, and every view's cells derived from it.

A join sums each piece of split time per (run, member) (:class:`~toolkit.trace.join._accumulate.
CellSums`); every view (layer, source op, compiled op, backend) is those member columns added
into the view's rows, and its per-run event counts are the matched events per (target, run)
fanned out to the rows each target covers. :class:`RunCells` keeps just these bases: the
(run, member) ns matrix, the (target, run) event counts and the (command, run) ns and event
counts, each in the narrowest integer type that holds it (``uint8`` .. ``int64``), about a
tenth of the five views' (row, run, ns, events) cells. :func:`view_cells` derives a view's
cells from it, equal to :meth:`Attribution.per_run <toolkit.trace.join.attribution.Attribution.
per_run>`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.trace.join._accumulate import CellSums
from toolkit.trace.join.catalog import Catalog
from toolkit.trace.join.split import group_sum

__all__ = ["RunCells", "build_run_cells", "view_cells", "view_rows", "view_total", "narrow",
           "VIEWS"]

#: The views :func:`view_cells` derives (those of :meth:`Attribution.per_run`).
VIEWS: tuple[str, ...] = ("layer", "source_op", "op", "command", "backend")
_UNSIGNED = (np.uint8, np.uint16, np.uint32)
_BLOCK = 1 << 16


def narrow(values: np.ndarray) -> np.ndarray:
    """``values`` (integers) in the narrowest of ``uint8``, ``uint16``, ``uint32`` that holds
    them all, else ``int64``; read back exactly with ``astype(np.int64)``."""
    values = np.asarray(values)
    if values.size == 0:
        return values.astype(np.uint8)
    low, high = int(values.min()), int(values.max())
    if low >= 0:
        for dtype in _UNSIGNED:
            if high <= np.iinfo(dtype).max:
                return values.astype(dtype)
    return values.astype(np.int64)


@dataclass
class RunCells:
    """A join's per-run table as dense bases (``R`` runs).

    Attributes:
        runs: the run values, ascending (``int64``, ``R``); run code ``i`` is ``runs[i]``.
        members: catalog member positions with time or events (``int64``, ``C``), ascending.
        member_ns: ``(R, C)`` ns per (run code, member), narrowed (see :func:`narrow`).
        targets: catalog target positions with matched events (``int64``, ``T``).
        target_events: ``(T, R)`` matched events per (target, run code), narrowed.
        commands: command positions (rows of ``Catalog.commands``) with matched events
            (``int64``, ``K``).
        command_ns, command_events: ``(K, R)`` ns (self time) and matched events per
            (command, run code), narrowed.
    """

    runs: np.ndarray
    members: np.ndarray
    member_ns: np.ndarray
    targets: np.ndarray
    target_events: np.ndarray
    commands: np.ndarray
    command_ns: np.ndarray
    command_events: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return int(sum(getattr(self, f).nbytes for f in self.__dataclass_fields__))


def _codes_table(present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values ascending, code of each value 0 .. len(present) - 1)`` from a
    presence table of non-negative integers."""
    return np.flatnonzero(present).astype(np.int64), np.cumsum(present) - 1


def build_run_cells(sums: CellSums, hit_members: np.ndarray, target: np.ndarray,
                    command: np.ndarray, run: np.ndarray,
                    code_of: Callable[[np.ndarray], np.ndarray], time_ns: np.ndarray,
                    runs: np.ndarray) -> RunCells:
    """Return the :class:`RunCells` of a join.

    Args:
        sums: the join's (run code, column) sums; column ``j`` is member ``hit_members[j]``.
        hit_members: member position of each column of ``sums`` (ascending).
        target, command: per event, the matched target and command position (-1: none).
        run: per event, its run value; ``code_of`` maps run values to run codes
            (``0 .. len(runs) - 1``).
        time_ns: per event, the time it counts (its self time).
        runs: the run values (``int64``, ascending).

    The events are counted block by block (no temporary as long as the trace).
    """
    n_runs = len(runs)
    if sums.dense is not None:
        matrix = sums.matrix()
    else:  # sparse sums (a very large runs x members table): laid out densely, once
        matrix = np.zeros((sums.runs, sums.columns), dtype=np.int64)
        r_, column, ns = sums.triplets()
        matrix[r_, column] = ns
    n = len(target)
    t_seen = np.zeros(int(target.max()) + 1 if n else 0, dtype=bool)
    c_seen = np.zeros(int(command.max()) + 1 if n else 0, dtype=bool)
    for b0 in range(0, n, _BLOCK):
        t = target[b0:b0 + _BLOCK]
        t_seen[t[t >= 0]] = True
        c = command[b0:b0 + _BLOCK]
        c_seen[c[c >= 0]] = True
    targets, t_code = _codes_table(t_seen)
    commands, c_code = _codes_table(c_seen)
    width = max(n_runs, 1)
    # run-major while counting (a block of events covers a few runs: a short span of cells)
    t_events = np.zeros(width * len(targets), dtype=np.int64)
    c_ns = np.zeros(width * len(commands), dtype=np.int64)
    c_events = np.zeros(width * len(commands), dtype=np.int64)
    for b0 in range(0, n, _BLOCK):
        b1 = min(n, b0 + _BLOCK)
        code = code_of(run[b0:b1]).astype(np.int64, copy=False)
        t = target[b0:b1]
        hit = t >= 0
        _add_counts(t_events, code[hit] * len(targets) + t_code[t[hit]], None)
        c = command[b0:b1]
        rows = np.flatnonzero(c >= 0)
        if len(rows):
            cells = code[rows] * len(commands) + c_code[c[rows]]
            _add_counts(c_events, cells, None)
            _add_counts(c_ns, cells, time_ns[b0:b1][rows])
    t_events = _by_row(t_events, width, len(targets))
    c_ns = _by_row(c_ns, width, len(commands))
    c_events = _by_row(c_events, width, len(commands))
    return RunCells(
        runs=np.asarray(runs, dtype=np.int64).copy(),
        members=np.asarray(hit_members, dtype=np.int64).copy(),
        member_ns=narrow(matrix[:, :] if n_runs else matrix.reshape(0, len(hit_members))),
        targets=targets,
        target_events=narrow(t_events[:, :n_runs]),
        commands=commands, command_ns=narrow(c_ns[:, :n_runs]),
        command_events=narrow(c_events[:, :n_runs]))


def _add_counts(out: np.ndarray, cells: np.ndarray, ns: np.ndarray | None) -> None:
    """Add 1 (``ns`` None) or ``ns[i]`` to ``out[cells[i]]`` for every ``i``, exactly."""
    if len(cells) == 0:
        return
    low, high = int(cells.min()), int(cells.max())
    span = high - low + 1
    if ns is None:
        if span <= 8 * len(cells) + 4096:
            out[low:high + 1] += np.bincount(cells - low, minlength=span)
        else:
            np.add.at(out, cells, 1)
        return
    if span <= 8 * len(cells) + 4096:
        out[low:high + 1] += group_sum(cells - low, ns, span)
    else:
        uniq, inverse = np.unique(cells, return_inverse=True)
        out[uniq] += group_sum(inverse.reshape(-1), ns, len(uniq))


def _by_row(counts: np.ndarray, width: int, rows: int) -> np.ndarray:
    """Run-major ``counts`` (``width * rows``) as a C-ordered ``(rows, width)`` matrix."""
    return np.ascontiguousarray(counts.reshape(width, rows).T)


def view_rows(cat: Catalog, by: str) -> tuple[np.ndarray, int]:
    """``(member_row, n_rows)``: each catalog member's row in view ``by`` (-1: none) and the
    view's number of rows (``backend``: one row per backend in order of first appearance,
    then the row ``""`` of members without a compiled op)."""
    if by == "layer":
        return cat.member_layer, len(cat.layer_names)
    if by == "source_op":
        return cat.member_source, len(cat.source_id)
    if by == "op":
        return cat.member_op, len(cat.op_ids)
    if by == "backend":
        import pandas as pd

        codes, names = pd.factorize(pd.Series(cat.op_backend, dtype=object))
        codes = np.asarray(codes, dtype=np.int64)
        n = len(names)
        member_row = np.where(cat.member_op >= 0,
                              codes[np.maximum(cat.member_op, 0)] if len(codes) else 0, n)
        return member_row, n + 1
    raise ToolkitError(f"unknown per-run view {by!r}",
                       fix="use 'layer', 'source_op', 'op', 'command' or 'backend'")


def _view_matrices(cells: RunCells, cat: Catalog, by: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, ns, events)``: the view rows with time or events and their ``(rows, R)``
    ``int64`` ns and event matrices."""
    n_runs = len(cells.runs)
    if by == "command":
        return (cells.commands, cells.command_ns.astype(np.int64),
                cells.command_events.astype(np.int64))
    member_row, _n_rows = view_rows(cat, by)
    column_row = member_row[cells.members]
    cols = np.flatnonzero(column_row >= 0)
    order = np.argsort(column_row[cols], kind="stable")
    cols = cols[order]
    col_rows = column_row[cols]
    starts = np.flatnonzero(np.r_[True, col_rows[1:] != col_rows[:-1]]) if len(cols) else \
        np.zeros(0, np.int64)
    ns_rows = col_rows[starts]
    ns = (np.add.reduceat(cells.member_ns[:, cols], starts, axis=1, dtype=np.int64).T
          if len(cols) and n_runs else np.zeros((len(ns_rows), n_runs), np.int64))
    # events: each (target, row) pair once, the target's counts added into the row
    sizes = cat.target_sizes()
    member_target = np.repeat(np.arange(cat.targets, dtype=np.int64), sizes)
    valid = member_row >= 0
    width = int(max(_n_rows, 1))
    pairs = np.unique(member_target[valid] * width + member_row[valid])
    pair_t, pair_row = np.divmod(pairs, width)
    at = np.searchsorted(cells.targets, pair_t)
    hit = (at < len(cells.targets)) & (cells.targets[np.minimum(at, len(cells.targets) - 1)]
                                       == pair_t) if len(cells.targets) else \
        np.zeros(len(pair_t), bool)
    at, pair_row = at[hit], pair_row[hit]
    order = np.argsort(pair_row, kind="stable")
    at, pair_row = at[order], pair_row[order]
    ev_starts = np.flatnonzero(np.r_[True, pair_row[1:] != pair_row[:-1]]) if len(at) else \
        np.zeros(0, np.int64)
    ev_rows = pair_row[ev_starts]
    events = (np.add.reduceat(cells.target_events[at], ev_starts, axis=0, dtype=np.int64)
              if len(at) and n_runs else np.zeros((len(ev_rows), n_runs), np.int64))
    rows = np.union1d(ns_rows, ev_rows)
    out_ns = np.zeros((len(rows), n_runs), dtype=np.int64)
    out_ev = np.zeros((len(rows), n_runs), dtype=np.int64)
    out_ns[np.searchsorted(rows, ns_rows)] = ns
    out_ev[np.searchsorted(rows, ev_rows)] = events
    return rows, out_ns, out_ev


def view_cells(cells: RunCells, cat: Catalog, by: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the per-run cells of view ``by`` (``layer``, ``source_op``, ``op``,
    ``command``, ``backend``): ``(row, run, ns, events)`` (``int64``; ``row``: position in
    the view, ``run``: run code), one element per (row, run) with time or events, sorted by
    row then run, as :meth:`Attribution.per_run` lists them."""
    if by not in VIEWS:
        view_rows(cat, by)  # raises
    rows, ns, events = _view_matrices(cells, cat, by)
    present = (ns != 0) | (events != 0)
    r, run = np.nonzero(present)
    return rows[r].astype(np.int64), run.astype(np.int64), ns[present], events[present]


def view_total(cells: RunCells, cat: Catalog, by: str) -> int:
    """The ns of view ``by`` summed over its rows and runs (``int``), straight from the
    bases (no cells derived)."""
    if by == "command":
        return int(cells.command_ns.sum(dtype=np.int64))
    member_row, _n_rows = view_rows(cat, by)
    cols = member_row[cells.members] >= 0
    return int(cells.member_ns[:, cols].sum(dtype=np.int64))
