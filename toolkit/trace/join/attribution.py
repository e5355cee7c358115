"""The result of trace-join: attributed time as DataFrames, one method per view.

Every grouped view (:meth:`Attribution.by_layer`, :meth:`~Attribution.by_source_op`,
:meth:`~Attribution.by_op`, :meth:`~Attribution.by_command`, :meth:`~Attribution.by_backend`)
ends with the same columns:

=========== =========== ============================================================================
total_ns    ``int64``   nanoseconds attributed to the row over the whole trace
share       ``float64`` ``total_ns / Attribution.total_ns`` (all event time, matched or not)
events      ``int64``   matched events whose op includes the row (even when the policy gave the
                        row 0 ns of one)
avg_ms ...  ``float64`` ``avg_ms``, ``min_ms``, ``p10_ms``, ``p50_ms``, ``p90_ms``, ``max_ms``:
                        the row's time per run (inference), in milliseconds; a run without time
                        for the row counts 0 (see :mod:`toolkit.trace.join.stats`)
=========== =========== ============================================================================

Tables are computed on first use and cached; empty results keep their columns and dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.join._accumulate import CellSums
from toolkit.trace.join.catalog import Catalog
from toolkit.trace.join.keys import KEY_KINDS
from toolkit.trace.join.layer_views import LayerAttribution
from toolkit.trace.join.overlaps import track_codes
from toolkit.trace.join.run_cells import RunCells, build_run_cells, view_rows
from toolkit.trace.join.split import TargetWeights, group_sum, split_targets
from toolkit.trace.join.stats import (
    STAT_COLUMNS,
    matrix_stats_frame,
    outlier_runs,
    p50_share,
    stats_frame,
)

if TYPE_CHECKING:  # the join takes a Trace; its class lives with the reader
    from toolkit.trace.readers.read import Trace

__all__ = ["Attribution", "JoinResult", "STAT_COLUMNS"]

_STR = pd.Series([""]).dtype
_KIND_CATEGORIES = pd.Index(["", *KEY_KINDS], dtype=_STR)
_BLOCK = 1 << 16
_CELLS_PER_BLOCK = 1 << 22
_DENSE_ROWS_RUNS = 1 << 26  # rows x runs above which views are built sparse
_DENSE_CELLS = 1 << 24  # cells above which the per-run table is built sparse
_EXACT_FLOAT = 1 << 53  # integer sums below this are exact in float64


# The fix for a failed conservation check: the join's numbers cannot disagree unless the
# attribution was changed after the join or the join has a bug
_TAMPERED = ("the attribution was modified after the join, or this is a bug: join again; if it "
             "persists, report it with the trace and the model")


@dataclass
class JoinResult:
    """What trace-join computes.

    Per event: ``target`` (``int32``, -1 when unattributed), ``command`` (``int32`` command
    row, -1), ``kind_code`` (``int8``: 0 no key, else 1 + index in ``KEY_KINDS``),
    ``reason_code`` (``int32`` index into ``reason_texts``; 0 = attributed). ``runs``: the run
    codes. ``weight``: the policy's weight per member; ``weights``: the same laid out per target.
    ``target_events``: matched events per target; ``hit_members``: the catalog members of the
    targets hit, one column each of ``sums`` (nanoseconds per (run, column)). ``time_ns``: the
    time each event counts (its self time when spans nest, else its duration);
    ``overhead``: events whose self time is dispatch overhead (unmatched spans with
    children); ``overlapping``: rows of spans that overlap without nesting;
    ``keyed_events`` / ``matched_events``: the match score's terms; ``skipped``: the
    warm-up runs dropped (``skipped_runs``, ``skipped_events``, ``skipped_ns``).
    """

    trace: Trace
    catalog: Catalog
    provenance: Any
    policy: str
    key: str | None
    overlaps: str
    target: np.ndarray
    command: np.ndarray
    kind_code: np.ndarray
    reason_code: np.ndarray
    reason_texts: list[str]
    runs: Any
    weight: np.ndarray
    weights: TargetWeights
    target_events: np.ndarray
    hit_members: np.ndarray
    sums: CellSums
    time_ns: np.ndarray | None = None
    overhead: np.ndarray | None = None
    nested: bool = False
    overlapping: np.ndarray | None = None
    keyed_events: int = 0
    matched_events: int = 0
    skipped: dict[str, int] | None = None
    parent: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.target)
        if self.time_ns is None:
            self.time_ns = self.trace.events["dur_ns"].to_numpy(dtype=np.int64)
        if self.overhead is None:
            self.overhead = np.zeros(n, dtype=bool)
        if self.overlapping is None:
            self.overlapping = np.zeros(0, dtype=np.int64)
        if self.skipped is None:
            self.skipped = {"skipped_runs": 0, "skipped_events": 0, "skipped_ns": 0}


def _str_column(values: Any) -> pd.Series:
    return pd.Series(list(values), dtype=_STR)


def _row_matrix(sums: CellSums, column_row: np.ndarray, n_rows: int) -> np.ndarray:
    """``(n_rows, runs)`` ns matrix: the columns of ``sums`` added into their rows (-1: none)."""
    runs = sums.runs
    out = np.zeros((n_rows, runs), dtype=np.int64)
    cols = np.flatnonzero(column_row >= 0)
    if len(cols) == 0 or runs == 0:
        return out
    rows = column_row[cols]
    order = np.argsort(rows, kind="stable")
    cols, rows = cols[order], rows[order]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    used = rows[starts]
    if sums.dense is not None:
        matrix = sums.matrix()
        step = max(1, _CELLS_PER_BLOCK // max(len(cols), 1))
        for r0 in range(0, runs, step):
            r1 = min(runs, r0 + step)
            block = np.add.reduceat(matrix[r0:r1][:, cols], starts, axis=1)
            out[used, r0:r1] = block.T
        return out
    run, column, ns = sums.triplets()
    row_of = column_row[column]
    keep = row_of >= 0
    np.add.at(out, (row_of[keep], run[keep]), ns[keep])
    return out


def _cell_table(size: int, *pairs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Sum each ``(cells, values)`` pair per cell (``int64``, exact); return the cells used by
    any pair (ascending) and one sum array per pair. Dense below :data:`_DENSE_CELLS`
    cells, else sparse."""
    if size <= _DENSE_CELLS:
        sums = []
        used = np.zeros(size, dtype=bool)
        for cells, values in pairs:
            values = values.astype(np.int64, copy=False)
            if len(values) == 0 or int(np.abs(values).sum()) < _EXACT_FLOAT:
                total = np.bincount(cells, weights=values, minlength=size).astype(np.int64)
            else:
                total = np.zeros(size, dtype=np.int64)
                np.add.at(total, cells, values)
            used[cells] = True
            sums.append(total)
        uniq = np.flatnonzero(used)
        return (uniq, *(total[uniq] for total in sums))
    uniq = np.unique(np.concatenate([cells for cells, _ in pairs]))
    out = []
    for cells, values in pairs:
        total = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(total, np.searchsorted(uniq, cells), values.astype(np.int64, copy=False))
        out.append(total)
    return (uniq, *out)


def _grouped_stats(sums: CellSums, column_row: np.ndarray, n_rows: int, counts: np.ndarray,
                   total_ns: int) -> pd.DataFrame:
    """:data:`STAT_COLUMNS` per row, the columns of ``sums`` added into their rows."""
    if n_rows * sums.runs <= _DENSE_ROWS_RUNS:
        return matrix_stats_frame(_row_matrix(sums, column_row, n_rows), counts, total_ns)
    run, column, ns = sums.triplets()  # many rows x many runs: sparse, in row blocks
    rows = column_row[column]
    keep = rows >= 0
    return stats_frame(rows[keep], run[keep], ns[keep], n_rows, sums.runs, counts, total_ns)


class Attribution(LayerAttribution):
    """Time of a trace attributed to original layers, source ops, compiled ops and commands.

    Attributes:
        policy: the split policy (``equal``, ``macs``, ``bytes``).
        key_used: the key kind(s) the join used, ``"+"``-joined when events differ
            (``"command_id"``, ``"command_id+name"``); ``""`` when no event had a key.
        overlaps: the overlap mode (``leaves`` or ``keep``).
        trace: the :class:`~toolkit.trace.readers.read.Trace` joined.
        provenance: the provenance joined against.
        total_ns: time of all events (``int``): the sum of their self times, that is the
            wall time of the top-level spans of each track (the sum of ``dur_ns`` when no
            span nests).
        attributed_ns: time split over layers (``int``).
        overhead_ns: self time of unmatched spans with children (:meth:`overhead`).
        unattributed_ns: time of the events in :meth:`unattributed` (``int``);
            ``attributed_ns + overhead_ns + unattributed_ns == total_ns`` exactly.
        runs: number of runs (inferences) in the trace (after ``skip_runs``).
        nested: True when some spans nest (times are then exclusive: see
            :mod:`toolkit.trace.join.nesting`).
        match_score: events matched / events keyed (``float``; NaN when no event has a
            key): the share of events whose key names an op of the model and whose own op
            name, type, part ... agree with it.
        skipped_runs: warm-up runs dropped by ``trace_join(..., skip_runs=N)``.
    """

    def __init__(self, result: JoinResult) -> None:
        self._r = result
        self._cache: dict[str, pd.DataFrame] = {}
        self._target_runs: tuple[np.ndarray, np.ndarray] | None = None
        r = result
        time_ns = r.time_ns
        assert time_ns is not None and r.overhead is not None and r.skipped is not None
        self._unattributed = (r.reason_code != 0) & ~r.overhead
        self.policy = r.policy
        self.overlaps = r.overlaps
        self.trace = r.trace
        self.provenance = r.provenance
        self.total_ns = int(time_ns.sum())
        self.attributed_ns = r.sums.total()
        self.overhead_ns = int(time_ns[r.overhead].sum())
        self.unattributed_ns = int(time_ns[self._unattributed].sum())
        self.runs = len(r.runs)
        self.nested = r.nested
        self.match_score = (r.matched_events / r.keyed_events if r.keyed_events
                            else float("nan"))
        self.skipped_runs = int(r.skipped["skipped_runs"])
        if r.key is not None:
            self.key_used = r.key
        else:
            codes = r.kind_code
            self.key_used = "+".join(kind for i, kind in enumerate(KEY_KINDS)
                                     if bool(np.any(codes == i + 1)))

    def __repr__(self) -> str:
        return (f"<Attribution policy={self.policy!r} key={self.key_used!r}: "
                f"{self.attributed_ns} of {self.total_ns} ns attributed over {self.runs} "
                f"run(s), {int(self._unattributed.sum())} event(s) unattributed, match "
                f"{self.match_score:.0%}"
                + (f", {self.skipped_runs} warm-up run(s) skipped" if self.skipped_runs else "")
                + ">")

    # ------------------------------------------------------------------ internals
    def _event_counts(self, member_row: np.ndarray, n_rows: int) -> np.ndarray:
        """Matched events per row, where ``member_row`` gives each member's row (-1: none)."""
        r = self._r
        members = r.hit_members
        rows = member_row[members]
        valid = rows >= 0
        if not valid.any() or n_rows == 0:
            return np.zeros(n_rows, dtype=np.int64)
        member_target = np.repeat(np.arange(r.catalog.targets, dtype=np.int64),
                                  r.catalog.target_sizes())[members]
        cells = np.unique(member_target[valid] * n_rows + rows[valid])
        t, row = np.divmod(cells, n_rows)
        return group_sum(row, r.target_events[t], n_rows)

    def _grouped(self, member_row: np.ndarray, n_rows: int) -> pd.DataFrame:
        """Statistics per row of members mapped by ``member_row`` (rows < 0 left out)."""
        r = self._r
        return _grouped_stats(r.sums, member_row[r.hit_members], n_rows,
                              self._event_counts(member_row, n_rows), self.total_ns)

    def _blocks(self, inclusive: bool = False) -> Any:
        """Yield ``(b0, b1, rows, member, ns)`` per block ``[b0, b1)`` of events: the
        attributed events split again, one element per (event, member) piece (their self
        time, or with ``inclusive`` their whole duration)."""
        r = self._r
        ptr = r.catalog.target_ptr
        dur = (r.trace.events["dur_ns"].to_numpy(dtype=np.int64) if inclusive
               else np.asarray(r.time_ns))
        n = len(dur)
        for b0 in range(0, n, _BLOCK):
            b1 = min(n, b0 + _BLOCK)
            rows = np.flatnonzero(r.target[b0:b1] >= 0) + b0
            if len(rows) == 0:
                continue
            t = r.target[rows].astype(np.int64)
            parts = []
            for rows_k, share in split_targets(dur[rows], t, r.weights):
                k = share.shape[0]
                member = ptr[t[rows_k]][None, :] + np.arange(k)[:, None]
                parts.append((np.tile(rows[rows_k], k), member.ravel(), share.ravel()))
            yield (b0, b1, *(np.concatenate([p[i] for p in parts]) for i in range(3)))

    @staticmethod
    def _join(ids: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
        return pd.concat([ids.reset_index(drop=True), stats], axis=1)

    # ------------------------------------------------------------------ views
    def by_layer(self) -> pd.DataFrame:
        """One row per original layer, in the order of the provenance's ``layers()``.

        Columns: ``layer`` (str), ``inclusive_ns`` (int64: the layer's events counted whole,
        children included; equal to ``total_ns``, the exclusive (self) time, unless the
        layer's events hold other events), ``first_ms`` (float64: the layer's time in the
        first run), ``first_run_outlier`` (bool: with 3 runs or more, the first run took more
        than twice the median run: warm-up; join with ``skip_runs=1`` or run with
        ``warmup=``), ``p50_share`` (float64: the layer's median run ``p50_ms`` over the sum
        of every layer's ``p50_ms``: a share a few slow runs do not move), ``outlier_runs``
        (int64: runs that took more than twice the layer's median run, counted with 3 runs or
        more), then :data:`STAT_COLUMNS` (``share`` is the share of ``total_ns``, the sum
        over runs, i.e. of the mean run; ``p50_ms`` is beside ``avg_ms``). ``total_ns`` sums
        to :attr:`attributed_ns`.
        A source op with several layers splits its share by the policy (``macs``: its main
        layer, e.g. the convolution of a fused conv + batch norm + activation, takes it all;
        :mod:`toolkit.trace.join.policies`); :meth:`by_group` shows fused layers as one row.
        """
        if "layer" not in self._cache:
            cat = self._r.catalog
            n_rows = len(cat.layer_names)
            ids = pd.DataFrame({"layer": _str_column(cat.layer_names)})
            r = self._r
            matrix = None
            if n_rows * r.sums.runs <= _DENSE_ROWS_RUNS:  # one (layer, run) matrix for both
                matrix = _row_matrix(r.sums, cat.member_layer[r.hit_members], n_rows)
                stats = matrix_stats_frame(matrix, self._event_counts(cat.member_layer, n_rows),
                                           self.total_ns)
            else:
                stats = self._grouped(cat.member_layer, n_rows)
            ids["inclusive_ns"] = (self.layer_inclusive_ns() if self.nested
                                   else stats["total_ns"].to_numpy(dtype=np.int64))
            first = self._first_run(cat.member_layer, n_rows)
            ids["first_ms"] = first / 1e6
            median = stats["p50_ms"].to_numpy(dtype=np.float64)
            ids["first_run_outlier"] = (self.runs >= 3) & (first / 1e6 > 2 * median) & (
                first > 0)
            ids["p50_share"] = p50_share(median)
            if matrix is not None and self.runs >= 3:
                limit = 2 * np.nan_to_num(median) * 1e6
                ids["outlier_runs"] = ((matrix > limit[:, None]) & (matrix > 0)).sum(
                    axis=1).astype(np.int64)
            else:
                ids["outlier_runs"] = self._outlier_runs(cat.member_layer, n_rows, median)
            table = self._join(ids, stats)
            self._cache["layer"] = table
        return self._cache["layer"].copy()

    def _outlier_runs(self, member_row: np.ndarray, n_rows: int,
                      median_ms: np.ndarray) -> np.ndarray:
        """``int64`` per row: runs above twice the row's median run (0 below 3 runs)."""
        r = self._r
        run, column, ns = r.sums.triplets()
        rows = member_row[r.hit_members][column]
        keep = rows >= 0
        return outlier_runs(rows[keep], run[keep], ns[keep], n_rows, self.runs, median_ms)

    def by_group(self) -> pd.DataFrame:
        """One row per set of original layers that ran as one kernel (a fused op's layers,
        ``"Conv1 + bn_Conv1 + Conv1_relu"``), each event's time given whole to its set: no
        split, whatever the policy.

        Columns: ``group`` (str, the layers `` + ``-joined in the order they ran),
        ``layers`` (int64, how many), then :data:`STAT_COLUMNS`. ``total_ns`` sums to
        :attr:`attributed_ns`, to the ns.
        """
        if "group" not in self._cache:
            cat = self._r.catalog
            sizes = cat.target_sizes()
            codes: dict[tuple[str, ...], int] = {}
            target_group = np.full(len(sizes), -1, dtype=np.int64)
            ptr = cat.target_ptr.tolist()
            names = cat.layer_names
            for t in np.flatnonzero(sizes > 0).tolist():
                key = tuple(dict.fromkeys(names[cat.member_layer[ptr[t]:ptr[t + 1]]].tolist()))
                target_group[t] = codes.setdefault(key, len(codes))
            member_group = np.repeat(target_group, sizes)
            groups = list(codes)
            ids = pd.DataFrame({"group": _str_column(" + ".join(g) for g in groups),
                                "layers": np.array([len(g) for g in groups], dtype=np.int64)})
            self._cache["group"] = self._join(ids, self._grouped(member_group, len(groups)))
        return self._cache["group"].copy()

    def layer_inclusive_ns(self) -> np.ndarray:
        """``int64`` ns per original layer (rows of :meth:`by_layer`) with every attributed
        event counted whole, children included (:meth:`by_layer`'s ``inclusive_ns``).

        An event's whole duration is split again only where it differs from its self time
        (spans with children): the rest of the layer's inclusive time is its self time."""
        r = self._r
        cat = r.catalog
        n_rows = len(cat.layer_names)
        rows = cat.member_layer[r.hit_members]
        keep = rows >= 0
        out = group_sum(rows[keep], r.sums.column_totals()[keep], n_rows)
        dur = r.trace.events["dur_ns"].to_numpy(dtype=np.int64)
        time_ns = np.asarray(r.time_ns)
        wrapped = np.flatnonzero((r.target >= 0) & (dur != time_ns))
        if len(wrapped):
            t = r.target[wrapped].astype(np.int64)
            ptr = cat.target_ptr
            for values, sign in ((dur[wrapped], 1), (time_ns[wrapped], -1)):
                for rows_k, share in split_targets(values, t, r.weights):
                    k = share.shape[0]
                    member = (ptr[t[rows_k]][None, :] + np.arange(k)[:, None]).ravel()
                    layer = cat.member_layer[member]
                    ok = layer >= 0
                    out += sign * group_sum(layer[ok], share.ravel()[ok], n_rows)
        return out

    def run_cells(self) -> RunCells:
        """The per-run table as compact dense bases (:class:`~toolkit.trace.join.run_cells.
        RunCells`: (run, member) ns, (target, run) and (command, run) counts, narrowed), from
        which :func:`~toolkit.trace.join.run_cells.view_cells` derives every view's
        :meth:`per_run` cells; about a tenth of their size (what a fleet partition ships)."""
        r = self._r
        run = r.trace.events["run"].to_numpy(dtype=np.int64)
        return build_run_cells(r.sums, r.hit_members, r.target, r.command, run, r.runs.codes,
                               np.asarray(r.time_ns), np.asarray(r.runs.values, np.int64))

    def _first_run(self, member_row: np.ndarray, n_rows: int) -> np.ndarray:
        """``int64`` ns per row in the first run (run code 0)."""
        r = self._r
        run, column, ns = r.sums.triplets()
        rows = member_row[r.hit_members][column]
        keep = (run == 0) & (rows >= 0)
        return group_sum(rows[keep], ns[keep], n_rows)

    def by_source_op(self) -> pd.DataFrame:
        """One row per source op (every origin id of the provenance), by ``source_id``.

        Columns: ``source_id`` (int64), ``name``, ``operator`` (str), ``op_index`` (int64, -1
        if unknown), ``layers`` (str, ``;``-joined), ``removed`` (str: the pass's reason when a
        pass removed the op, whose time is then 0; else ``""``), then :data:`STAT_COLUMNS`.
        ``total_ns`` sums to :attr:`attributed_ns`.
        """
        if "source" not in self._cache:
            cat = self._r.catalog
            names = cat.layer_names
            layers = [";".join(names[cat.source_layers[a:b]].tolist()) for a, b in
                      zip(cat.source_layers_ptr[:-1].tolist(), cat.source_layers_ptr[1:].tolist())]
            ids = pd.DataFrame({
                "source_id": cat.source_id.astype(np.int64),
                "name": _str_column(cat.source_name),
                "operator": _str_column(cat.source_operator),
                "op_index": cat.source_op_index.astype(np.int64),
                "layers": _str_column(layers),
                "removed": _str_column(cat.removed),
            })
            self._cache["source"] = self._join(
                ids, self._grouped(cat.member_source, len(cat.source_id)))
        return self._cache["source"].copy()

    def by_op(self) -> pd.DataFrame:
        """One row per compiled op, in ``optimised_ops()`` order.

        Columns: ``optimised_id`` (int64), ``operator``, ``name``, ``backend`` (str), ``part``
        and ``part_op_index`` (int64, partitioned models only), ``source_ids`` (object: tuple of
        origin ids), then :data:`STAT_COLUMNS`. An event keyed by an op gives it all its time;
        one keyed by a debug handle or a part that spans several ops is split between them.
        Time of events keyed by a source op carried by no single compiled op is in no row.
        """
        if "op" not in self._cache:
            cat = self._r.catalog
            o = len(cat.op_ids)
            ops = cat.ops
            ids = pd.DataFrame({
                "optimised_id": cat.op_ids.astype(np.int64),
                "operator": _str_column(ops["operator"].astype(object).fillna("")
                                        if "operator" in ops else [""] * o),
                "name": _str_column(ops["name"].astype(object).fillna("")
                                    if "name" in ops else [""] * o),
                "backend": _str_column(cat.op_backend),
            })
            for column in ("part", "part_op_index"):
                if column in ops.columns:
                    ids[column] = ops[column].fillna(-1).to_numpy(dtype=np.int64)
            sources: list[tuple[int, ...]] = [()] * o
            op_targets = cat.target_kind == 0
            for t in np.flatnonzero(op_targets).tolist():
                a, b = cat.target_ptr[t], cat.target_ptr[t + 1]
                sources[int(cat.target_op[t])] = tuple(
                    dict.fromkeys(cat.source_id[cat.member_source[a:b]].tolist()))
            ids["source_ids"] = pd.Series(sources, dtype=object)
            self._cache["op"] = self._join(ids, self._grouped(cat.member_op, o))
        return self._cache["op"].copy()

    def by_command(self) -> pd.DataFrame:
        """One row per command of the queue, in queue order.

        Columns: ``command_id``, ``optimised_id``, ``stripe`` (int64; stripe -1 when the
        provenance has none), then :data:`STAT_COLUMNS`. Only events keyed by a command id
        count here.
        """
        if "command" not in self._cache:
            r = self._r
            cat = r.catalog
            cmd = cat.commands
            c = len(cmd)
            ids = pd.DataFrame({
                "command_id": cmd["command_id"].to_numpy(dtype=np.int64) if c else
                np.zeros(0, np.int64),
                "optimised_id": cmd["optimised_id"].to_numpy(dtype=np.int64) if c else
                np.zeros(0, np.int64),
                "stripe": cmd["stripe"].fillna(-1).to_numpy(dtype=np.int64)
                if "stripe" in cmd.columns and c else np.full(c, -1, np.int64),
            })
            sums = CellSums(self.runs, c)
            dur = np.asarray(r.time_ns)
            run = r.trace.events["run"].to_numpy(dtype=np.int64)
            counts = np.zeros(c, dtype=np.int64)
            for b0 in range(0, len(dur), _BLOCK):
                b1 = min(len(dur), b0 + _BLOCK)
                rows = np.flatnonzero(r.command[b0:b1] >= 0) + b0
                if len(rows):
                    cmd = r.command[rows].astype(np.int64)
                    sums.add(r.runs.codes(run[rows]), cmd, dur[rows])
                    counts += np.bincount(cmd, minlength=c)
            stats = _grouped_stats(sums, np.arange(c), c, counts, self.total_ns)
            self._cache["command"] = self._join(ids, stats)
        return self._cache["command"].copy()

    def by_backend(self) -> pd.DataFrame:
        """One row per backend of ``optimised_ops().backend`` (a partitioned run's parts, or
        the compile target), in order of first appearance.

        Columns: ``backend`` (str), then :data:`STAT_COLUMNS`. Time of members without a
        compiled op is in a row with backend ``""`` (present only when it has time).
        """
        if "backend" not in self._cache:
            cat = self._r.catalog
            codes, names = pd.factorize(pd.Series(cat.op_backend, dtype=object))
            codes = np.asarray(codes, dtype=np.int64)
            labels = [str(x) for x in list(names)]
            n = len(labels)
            member_row = np.where(cat.member_op >= 0,
                                  codes[np.maximum(cat.member_op, 0)] if len(codes) else 0, n)
            table = self._join(pd.DataFrame({"backend": _str_column([*labels, ""])}),
                               self._grouped(member_row, n + 1))
            if table["total_ns"].iloc[-1] == 0:
                table = table.iloc[:-1].reset_index(drop=True)
            self._cache["backend"] = table
        return self._cache["backend"].copy()

    def unattributed(self) -> pd.DataFrame:
        """Every event that was not attributed, in trace order.

        Columns: ``event_id``, ``run`` (int64), ``key`` (as in the trace), ``key_kind``
        (categorical), ``name`` (categorical), ``start_ns``, ``dur_ns`` (int64), ``reason``
        (categorical str: the reader's problem, ``negative duration``, ``no key``,
        ``unknown <kind>``, ``ambiguous <kind>``, ``<kind> key is not an integer``, ``its op
        has no origins``, ``overlaps an earlier event on its track``, ``encloses other events
        on its track``, ``trace event names <type> '<name>', model op <id> is ...`` when what
        the event says disagrees with the op its key names), ``self_ns`` (int64: the time
        the event counts, its duration minus its children's). ``self_ns`` sums to
        :attr:`unattributed_ns` (as ``dur_ns`` does when no span nests). Unmatched spans with
        children are in :meth:`overhead`, not here.
        """
        r = self._r
        rows = np.flatnonzero(self._unattributed)
        ev = r.trace.events
        return pd.DataFrame({
            "event_id": ev["event_id"].to_numpy(dtype=np.int64)[rows],
            "run": ev["run"].to_numpy(dtype=np.int64)[rows],
            "key": ev["key"].iloc[rows].reset_index(drop=True),
            "key_kind": pd.Categorical.from_codes(r.kind_code[rows].astype(np.int64),
                                                  categories=_KIND_CATEGORIES),
            "name": ev["name"].iloc[rows].reset_index(drop=True),
            "start_ns": ev["start_ns"].to_numpy(dtype=np.int64)[rows],
            "dur_ns": ev["dur_ns"].to_numpy(dtype=np.int64)[rows],
            "reason": pd.Categorical.from_codes(
                r.reason_code[rows].astype(np.int64),
                categories=pd.Index(r.reason_texts, dtype=_STR)),
            "self_ns": np.asarray(r.time_ns)[rows],
        })

    def overhead(self) -> pd.DataFrame:
        """Dispatch overhead: the self time of spans that hold other spans and match no op
        (``Method::execute``, a delegate call without a key, a profiler's wrapper), one row
        per span name.

        Columns: ``bucket`` (str: ``dispatch overhead of <name>``), ``name`` (str),
        ``total_ns`` (int64: self time, which sums to :attr:`overhead_ns`), ``share``
        (float64, of :attr:`total_ns`), ``events`` (int64), ``inclusive_ns`` (int64: the
        spans' whole durations), ``avg_ms`` ... ``max_ms`` (per run, as :data:`STAT_COLUMNS`).
        """
        if "overhead" not in self._cache:
            r = self._r
            assert r.overhead is not None
            rows = np.flatnonzero(r.overhead)
            ev = r.trace.events
            names = ev["name"].astype(object).to_numpy()[rows]
            codes, uniques = pd.factorize(pd.Series(names, dtype=object).astype(str))
            codes = np.asarray(codes, dtype=np.int64)
            k = len(uniques)
            run = r.runs.codes(ev["run"].to_numpy(dtype=np.int64)[rows]) if len(rows) else \
                np.zeros(0, np.int64)
            self_ns = np.asarray(r.time_ns)[rows]
            dur = ev["dur_ns"].to_numpy(dtype=np.int64)[rows]
            stats = stats_frame(codes, run, self_ns, k, self.runs,
                                np.bincount(codes, minlength=k), self.total_ns)
            labels = [str(u) for u in list(uniques)]
            table = pd.concat([pd.DataFrame({
                "bucket": _str_column([f"dispatch overhead of {u}" for u in labels]),
                "name": _str_column(labels)}), stats], axis=1)
            table.insert(5, "inclusive_ns", group_sum(codes, dur, k))
            self._cache["overhead"] = table
        return self._cache["overhead"].copy()

    def events(self) -> pd.DataFrame:
        """The join in long form: one row per (attributed event, compiled op, source op,
        layer), events in trace order.

        Columns: ``event_id``, ``run`` (int64), ``key_kind`` (categorical), ``optimised_id``
        (int64, -1 when the piece has no compiled op), ``source_id`` (int64), ``layer``
        (categorical str), ``attributed_ns`` (int64; the pieces of one event sum to its
        ``dur_ns``). Computed again from the split on each call (a trace of n events gives
        about n x members-per-op rows).
        """
        r = self._r
        cat = r.catalog
        ev = r.trace.events
        event_id = ev["event_id"].to_numpy(dtype=np.int64)
        run = ev["run"].to_numpy(dtype=np.int64)
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("row", "member", "ns")}
        for _b0, _b1, rows, member, ns in self._blocks():
            order = np.argsort(rows, kind="stable")
            parts["row"].append(rows[order])
            parts["member"].append(member[order])
            parts["ns"].append(ns[order])
        empty = np.zeros(0, dtype=np.int64)
        rows = np.concatenate(parts["row"]) if parts["row"] else empty
        m = np.concatenate(parts["member"]) if parts["member"] else empty
        ns = np.concatenate(parts["ns"]) if parts["ns"] else empty
        op = cat.member_op[m]
        return pd.DataFrame({
            "event_id": event_id[rows],
            "run": run[rows],
            "key_kind": pd.Categorical.from_codes(r.kind_code[rows].astype(np.int64),
                                                  categories=_KIND_CATEGORIES),
            "optimised_id": np.where(op >= 0, cat.op_ids[np.maximum(op, 0)]
                                     if len(cat.op_ids) else -1, -1).astype(np.int64),
            "source_id": cat.source_id[cat.member_source[m]].astype(np.int64),
            "layer": pd.Categorical.from_codes(cat.member_layer[m],
                                               categories=pd.Index(cat.layer_names, dtype=_STR)),
            "attributed_ns": ns.astype(np.int64),
        })

    def keys(self) -> pd.DataFrame:
        """One row per key kind the events carry: ``key_kind`` (str; ``""`` for events
        without a key), ``events``, ``attributed_events``, ``unattributed_events``,
        ``total_ns``, ``attributed_ns`` (int64)."""
        r = self._r
        dur = np.asarray(r.time_ns)
        size = len(KEY_KINDS) + 1
        kind = r.kind_code.astype(np.int64)
        ok = r.reason_code == 0
        table = pd.DataFrame({
            "key_kind": _str_column(["", *KEY_KINDS]),
            "events": np.bincount(kind, minlength=size),
            "attributed_events": np.bincount(kind[ok], minlength=size),
            "unattributed_events": np.bincount(kind[~ok], minlength=size),
            "total_ns": group_sum(kind, dur, size),
            "attributed_ns": group_sum(kind[ok], dur[ok], size),
        })
        return table[table["events"] > 0].reset_index(drop=True)

    def event_layers(self) -> pd.DataFrame:
        """One row per event of the trace with what it was joined to (for exports).

        Columns: ``event_id``, ``run`` (int64), ``key_kind`` (categorical), ``optimised_id``
        (int64, -1 when not one op), ``layers`` and ``source_ids`` (categorical of tuples: the
        layers / origin ids of the event's target, ``()`` when unattributed), ``reason``
        (categorical str, ``""`` when attributed).
        """
        r = self._r
        cat = r.catalog
        ev = r.trace.events
        t = r.target
        ptr = cat.target_ptr
        used = np.unique(t[t >= 0])
        layer_tuples: list[tuple[str, ...]] = []
        source_tuples: list[tuple[int, ...]] = []
        for target in used.tolist():
            a, b = int(ptr[target]), int(ptr[target + 1])
            layer_tuples.append(tuple(dict.fromkeys(
                cat.layer_names[cat.member_layer[a:b]].tolist())))
            source_tuples.append(tuple(dict.fromkeys(
                cat.source_id[cat.member_source[a:b]].tolist())))
        codes = np.full(len(t), len(used), dtype=np.int64)
        attributed = t >= 0
        codes[attributed] = np.searchsorted(used, t[attributed])

        def tuples(items: list[Any]) -> pd.Categorical:
            unique = list(dict.fromkeys([*items, ()]))
            where = {v: i for i, v in enumerate(unique)}
            table = np.array([where[v] for v in [*items, ()]], dtype=np.int64)
            return pd.Categorical.from_codes(
                table[codes], categories=pd.Index(unique, tupleize_cols=False, dtype=object))

        op = np.where(attributed, cat.target_op[np.maximum(t, 0)], -1)
        return pd.DataFrame({
            "event_id": ev["event_id"].to_numpy(dtype=np.int64),
            "run": ev["run"].to_numpy(dtype=np.int64),
            "key_kind": pd.Categorical.from_codes(r.kind_code.astype(np.int64),
                                                  categories=_KIND_CATEGORIES),
            "optimised_id": np.where(op >= 0, cat.op_ids[np.maximum(op, 0)]
                                     if len(cat.op_ids) else -1, -1).astype(np.int64),
            "layers": tuples(layer_tuples),
            "source_ids": tuples(source_tuples),
            "reason": pd.Categorical.from_codes(r.reason_code.astype(np.int64),
                                                categories=pd.Index(r.reason_texts, dtype=_STR)),
        })

    # ------------------------------------------------------------------ per-run table
    def run_values(self) -> np.ndarray:
        """The run (inference) values of the trace after ``skip_runs``, ascending (``int64``);
        run code ``i`` of :meth:`per_run` is ``run_values()[i]``."""
        return np.asarray(self._r.runs.values, dtype=np.int64).copy()

    def _view_rows(self, by: str) -> tuple[np.ndarray, int, pd.Series | np.ndarray, str]:
        """``(member_row, n_rows, row ids, id column)`` of a grouped view (not ``command``)."""
        cat = self._r.catalog
        member_row, n_rows = view_rows(cat, by)
        if by == "layer":
            return member_row, n_rows, _str_column(cat.layer_names), "layer"
        if by == "source_op":
            return member_row, n_rows, cat.source_id.astype(np.int64), "source_id"
        if by == "op":
            return member_row, n_rows, cat.op_ids.astype(np.int64), "optimised_id"
        _codes, names = pd.factorize(pd.Series(cat.op_backend, dtype=object))  # as view_rows
        return member_row, n_rows, _str_column([*(str(x) for x in names), ""]), "backend"

    def _target_run_events(self) -> tuple[np.ndarray, np.ndarray]:
        """Matched events per (target, run code): the cells ``target * runs + run`` used,
        ascending, and their counts (computed once)."""
        if self._target_runs is None:
            r = self._r
            width = max(len(r.runs), 1)
            hit = np.flatnonzero(r.target >= 0)
            code = r.runs.codes(r.trace.events["run"].to_numpy(dtype=np.int64)[hit]) \
                if len(hit) else np.zeros(0, np.int64)
            tr, count = _cell_table(
                r.catalog.targets * width,
                (r.target[hit].astype(np.int64) * width + code, np.ones(len(hit), np.int64)))
            self._target_runs = (tr, count)
        return self._target_runs

    def per_run(self, by: str = "layer", ids: bool = True) -> pd.DataFrame:
        """The per-run table: one row per (row of a view, run) that has time or events.

        ``by``: ``"layer"``, ``"source_op"``, ``"op"``, ``"command"`` or ``"backend"`` (the
        rows of :meth:`by_layer`, :meth:`by_source_op`, :meth:`by_op`, :meth:`by_command`,
        :meth:`by_backend`, in that order; ``backend`` has the row ``""`` last).

        Columns: ``row`` (int64: position of the row in that view), the view's id column
        (``layer`` str, ``source_id``, ``optimised_id``, ``command_id`` int64 or ``backend``
        str), ``run`` (int64: the trace's run value), ``ns`` (int64: time attributed to the
        row in that run), ``events`` (int64: matched events of that run whose op includes
        the row). Sorted by ``row`` then ``run``. Per row, ``ns`` sums to the view's
        ``total_ns`` and ``events`` to its ``events``; a (row, run) pair absent here has 0 of
        both. Runs without any row are in :meth:`run_values`. With ``ids=False`` the id
        column is left out (cheaper for large tables).
        """
        r = self._r
        runs = len(r.runs)
        width = max(runs, 1)
        if by == "command":
            cmd = r.catalog.commands
            c = len(cmd)
            id_values: pd.Series | np.ndarray = (
                cmd["command_id"].to_numpy(dtype=np.int64) if c else np.zeros(0, np.int64))
            id_column = "command_id"
            rows = np.flatnonzero(r.command >= 0)
            row = r.command[rows].astype(np.int64)
            code = r.runs.codes(r.trace.events["run"].to_numpy(dtype=np.int64)[rows]) \
                if len(rows) else np.zeros(0, np.int64)
            cells = row * width + code
            uniq, ns, events = _cell_table(c * width, (cells, np.asarray(r.time_ns)[rows]),
                                           (cells, np.ones(len(cells), dtype=np.int64)))
        else:
            member_row, n_rows, id_values, id_column = self._view_rows(by)
            run, column, cell_ns = r.sums.triplets()
            row_of = member_row[r.hit_members][column]
            keep = row_of >= 0
            ns_cells = row_of[keep] * width + run[keep]
            # events per (run, target), spread over the distinct rows of each target
            cat = r.catalog
            tr, tr_count = self._target_run_events()
            tr_target, tr_run = np.divmod(tr, width)
            member_target = np.repeat(np.arange(cat.targets, dtype=np.int64),
                                      cat.target_sizes())
            valid = member_row >= 0
            pairs = np.unique(member_target[valid] * max(n_rows, 1) + member_row[valid])
            pair_t, pair_row = np.divmod(pairs, max(n_rows, 1))
            ptr = np.searchsorted(pair_t, np.arange(cat.targets + 1))
            fan = ptr[tr_target + 1] - ptr[tr_target]
            first = np.repeat(ptr[tr_target], fan)
            offset = np.arange(int(fan.sum())) - np.repeat(np.cumsum(fan) - fan, fan)
            ev_cells = pair_row[first + offset] * width + np.repeat(tr_run, fan)
            uniq, ns, events = _cell_table(n_rows * width, (ns_cells, cell_ns[keep]),
                                           (ev_cells, np.repeat(tr_count, fan)))
        row, code = np.divmod(uniq, width)
        table = {"row": row.astype(np.int64)}
        if ids:
            picked = np.asarray(id_values)[row]
            table[id_column] = (_str_column(picked) if id_column in ("layer", "backend")
                                else np.asarray(picked, dtype=np.int64))
        table["run"] = (np.asarray(r.runs.values, dtype=np.int64)[code] if len(code)
                        else np.zeros(0, np.int64))
        table["ns"] = ns.astype(np.int64)
        table["events"] = events.astype(np.int64)
        return pd.DataFrame(table)

    # ------------------------------------------------------------------ checks
    def summary(self) -> dict[str, Any]:
        """Return the headline figures: ``events``, ``attributed_events``, ``runs``,
        ``total_ns``, ``attributed_ns``, ``overhead_ns``, ``unattributed_ns``, ``policy``,
        ``key_used``, ``match_score``, ``keyed_events``, ``matched_events``, ``nested``,
        ``overlapping_events`` (spans that overlap without nesting), ``tracks``, and the
        warm-up runs dropped: ``skipped_runs``, ``skipped_events``, ``skipped_ns``."""
        r = self._r
        ok = r.reason_code == 0
        assert r.overlapping is not None and r.skipped is not None
        tracks = track_codes(r.trace.events)
        return {"events": len(ok), "attributed_events": int(ok.sum()), "runs": self.runs,
                "total_ns": self.total_ns, "attributed_ns": self.attributed_ns,
                "overhead_ns": self.overhead_ns,
                "unattributed_ns": self.unattributed_ns, "policy": self.policy,
                "key_used": self.key_used, "match_score": self.match_score,
                "keyed_events": r.keyed_events, "matched_events": r.matched_events,
                "nested": self.nested, "overlapping_events": len(r.overlapping),
                "tracks": len(np.unique(tracks)) if tracks is not None else 1,
                **{k: int(v) for k, v in r.skipped.items()}}

    def check(self) -> None:
        """Verify conservation; raise :class:`ToolkitError` naming the first failure.

        Checks: attributed + overhead + unattributed = total; the self times of nested spans
        add up to the durations of the top-level spans; per target, the sums hold exactly the
        time of the events matched to it, and no (run, member) cell is negative; splitting the
        first block of attributed events again gives pieces >= 0 that sum to each event's time;
        ``by_layer``, ``by_source_op`` and (with pieces that have no compiled op) ``by_op``
        sum to :attr:`attributed_ns` (their row totals from the cells; the tables themselves
        when already built). Costs a fraction of the join (no second split of every event, no
        per-run statistics).
        """
        r = self._r
        ev = r.trace.events
        time_ns = np.asarray(r.time_ns)
        if self.attributed_ns + self.overhead_ns + self.unattributed_ns != self.total_ns:
            raise ToolkitError(f"attributed {self.attributed_ns} + overhead {self.overhead_ns} "
                               f"+ unattributed {self.unattributed_ns} != total "
                               f"{self.total_ns} ns",
                               fix=_TAMPERED)
        if r.parent is not None:
            dur = np.maximum(ev["dur_ns"].to_numpy(dtype=np.int64), 0)  # negative: 0 ns
            child = r.parent >= 0
            top = int(dur.sum()) - int(dur[child].sum())
            if top != self.total_ns:
                raise ToolkitError(f"the self times sum to {self.total_ns} ns, the top-level "
                                   f"spans last {top} ns",
                                   fix=_TAMPERED)
        cat = r.catalog
        t = r.target
        hit = t >= 0
        per_target = group_sum(t[hit].astype(np.int64), time_ns[hit], cat.targets)
        member_target = np.repeat(np.arange(cat.targets, dtype=np.int64),
                                  cat.target_sizes())
        n_cols = len(r.hit_members)
        if r.sums.dense is not None:  # per-column totals straight from the matrix
            if len(r.sums.dense) and int(r.sums.dense.min()) < 0:
                raise ToolkitError(
                    "a negative time was attributed to a (run, member) cell",
                    fix=_TAMPERED,
                )
            cell_ns = r.sums.matrix().sum(axis=0) if r.sums.runs else \
                np.zeros(n_cols, np.int64)
        else:
            _run, cells, ns_of_cells = r.sums.triplets()
            if len(ns_of_cells) and int(ns_of_cells.min()) < 0:
                raise ToolkitError(
                    "a negative time was attributed to a (run, member) cell",
                    fix=_TAMPERED,
                )
            cell_ns = group_sum(cells, ns_of_cells, n_cols)
        column = np.arange(n_cols)
        got = group_sum(member_target[r.hit_members], cell_ns, cat.targets)
        bad = np.flatnonzero(got != per_target)
        if len(bad):
            raise ToolkitError(f"target {int(bad[0])} holds {int(got[bad[0]])} ns, its events "
                               f"{int(per_target[bad[0]])} ns",
                               fix=_TAMPERED)
        for b0, b1, rows, _member, ns in self._blocks():
            if len(ns) and int(ns.min()) < 0:
                raise ToolkitError("a negative share was attributed", fix=_TAMPERED)
            got = group_sum(rows - b0, ns, b1 - b0)
            want = np.where(t[b0:b1] >= 0, time_ns[b0:b1], 0)
            wrong = np.flatnonzero(got != want)
            if len(wrong):
                i = b0 + int(wrong[0])
                raise ToolkitError(f"event {i} has {int(got[wrong[0]])} ns attributed for a "
                                   f"time of {int(time_ns[i])} ns",
                                   where=f"event_id {int(ev['event_id'].iloc[i])}",
                                   fix=_TAMPERED)
            break
        # the views' row totals: from the cells (cheap), and from the tables when built
        hit_op = cat.member_op[r.hit_members]
        no_op = int(cell_ns[hit_op[column] < 0].sum())
        for view, member_row, n_rows, extra in (
                ("by_layer", cat.member_layer, len(cat.layer_names), 0),
                ("by_source_op", cat.member_source, len(cat.source_id), 0),
                ("by_op", cat.member_op, len(cat.op_ids), no_op)):
            rows = member_row[r.hit_members][column]
            ok = rows >= 0
            totals = group_sum(rows[ok], cell_ns[ok], n_rows)
            got_ns = int(totals.sum()) + extra
            cached = self._cache.get(view[3:] if view != "by_source_op" else "source")
            if cached is not None and \
                    cached["total_ns"].to_numpy(dtype=np.int64).tolist() != totals.tolist():
                raise ToolkitError(f"{view}() disagrees with the attributed cells", fix=_TAMPERED)
            if got_ns != self.attributed_ns:
                what = "plus time without an op " if extra else ""
                raise ToolkitError(f"{view}() {what}sums to {got_ns} ns, attributed is "
                                   f"{self.attributed_ns} ns",
                                   fix=_TAMPERED)
