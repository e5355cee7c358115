"""Merge the partial results of a fleet join exactly, refusing partials that do not belong.

Integer sums add in any order; the per-run tables of the partitions are concatenated (a run
lives in one partition); percentiles are computed once over the merged per-run table
(:mod:`toolkit.trace.fleet._stats`). Guards: every partial must come from the same compiled
model (:func:`~toolkit.trace.fleet.partial.provenance_digest`) and the same join options, and
no run may appear in two partitions (a partition holds whole runs; a run split over two files
would have its statistics computed from halves).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.trace.fleet.partial import (
    SUMMARY_COUNTS,
    PartialJoin,
    PerRun,
    provenance_digest,
    provenance_snapshot,
)
from toolkit.trace.join.catalog import Catalog
from toolkit.trace.join.run_cells import view_cells

__all__ = ["MergedJoin", "merge_partials", "check_partials", "RUN_MODES"]


@dataclass
class MergedJoin:
    """The exact merge of a fleet's partials (see
    :class:`~toolkit.trace.fleet.join_many.FleetAttribution` for the views built on it).

    ``partials``: the partials, in source order (``order``, then ``device``), each with its
    compact per-run table (:class:`~toolkit.trace.join.run_cells.RunCells`); ``runs``: every run
    value of the fleet, ascending; ``run_codes``: per partial, the fleet run code of each of
    its runs; ``counts``: the summed :data:`~toolkit.trace.fleet.partial.SUMMARY_COUNTS`;
    ``layer_inclusive_ns``, ``reasons``, ``overhead``: summed. A view's merged per-run cells
    come from :meth:`view` (derived once per view, on first use).
    """

    digest: str
    options: dict[str, Any]
    partials: list[PartialJoin]
    runs: np.ndarray
    run_codes: list[np.ndarray]
    counts: dict[str, int]
    nested: bool
    key_used: str
    layer_inclusive_ns: np.ndarray
    reasons: dict[str, tuple[int, int]]
    overhead: dict[str, tuple[int, int, int]]
    _views: dict[str, tuple[PerRun, np.ndarray]] = dataclasses.field(default_factory=dict)

    def view(self, by: str, cat: Catalog) -> tuple[PerRun, np.ndarray]:
        """``(cells, bounds)``: the merged per-run cells of view ``by`` (``run``: a code into
        :attr:`runs`; each partition's cells sorted by row then run) and where each
        partition's cells lie (partition ``i``: ``bounds[i]:bounds[i + 1]``)."""
        if by not in self._views:
            rows, runs, ns, events = [], [], [], []
            for p, codes in zip(self.partials, self.run_codes):
                row, run, n, e = view_cells(p.cells, cat, by)
                rows.append(row.astype(np.int32))
                runs.append(codes[run].astype(np.int32))
                ns.append(n)
                events.append(e)
            bounds = np.cumsum([0, *(len(r) for r in rows)]).astype(np.int64)
            self._views[by] = (PerRun(np.concatenate(rows), np.concatenate(runs),
                                      np.concatenate(ns), np.concatenate(events)), bounds)
        return self._views[by]


def check_partials(partials: list[PartialJoin], digest: str | None = None,
                   distinct_runs: bool = True) -> None:
    """Raise :class:`ToolkitError` unless the partials can be merged: one compiled model
    (equal to ``digest`` when given), one set of join options, and (with
    ``distinct_runs``) no run in two partitions."""
    if not partials:
        raise ToolkitError("no partial results to merge", fix="give at least one trace")
    first = partials[0]
    want = digest or first.digest
    for p in partials:
        if p.digest != want:
            raise ToolkitError(
                f"partial {p.label!r} was joined against another compiled model "
                f"(digest {p.digest[:12]}, expected {want[:12]})", where=p.label,
                fix="join every partition against the same compiled model")
        if p.options != first.options:
            raise ToolkitError(
                f"partial {p.label!r} was joined with options {p.options}, partial "
                f"{first.label!r} with {first.options}", where=p.label,
                fix="join every partition with the same policy, key, overlaps, strict and "
                    "skip_runs")
    if not distinct_runs:
        return
    sizes = [len(p.runs) for p in partials]
    runs = np.concatenate([p.runs for p in partials]) if partials else np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(partials)), sizes)
    order = np.argsort(runs, kind="stable")
    runs, owner = runs[order], owner[order]
    dup = np.flatnonzero(runs[1:] == runs[:-1])
    if len(dup):
        a, b = partials[int(owner[dup[0]])], partials[int(owner[dup[0] + 1])]
        raise ToolkitError(
            f"run {int(runs[dup[0]])} appears in two partitions: {a.label!r}"
            f"{f' ({a.device})' if a.device else ''} and {b.label!r}"
            f"{f' ({b.device})' if b.device else ''}", where=b.label,
            fix="keep each run (and each device session) in one file; number the runs of "
                "different sessions apart, or merge with runs='per-partition' (each "
                "session numbers its runs from its own start), or name the session column "
                "with partition_by")


RUN_MODES: tuple[str, ...] = ("distinct", "per-partition")


def _renumber(items: list[PartialJoin]) -> list[PartialJoin]:
    """Copies of ``items`` whose runs are numbered 0, 1, ... across the partitions in order."""
    out = []
    offset = 0
    for p in items:  # the cells hold run codes into p.runs: only the values change
        out.append(dataclasses.replace(
            p, runs=np.arange(offset, offset + len(p.runs), dtype=np.int64)))
        offset += len(p.runs)
    return out


def merge_partials(partials: Iterable[PartialJoin], compiled: Any | None = None,
                   runs: str = "distinct") -> MergedJoin:
    """Merge partial results exactly (any order gives the same result).

    Args:
        partials: :class:`~toolkit.trace.fleet.partial.PartialJoin` objects from
            :func:`~toolkit.trace.fleet.partial.join_partition`.
        compiled: the compiled model (or its snapshot); when given, every partial must have
            been joined against it.
        runs: ``"distinct"``: run values identify runs across the fleet (no run in two
            partitions); ``"per-partition"``: every partition numbers its runs from its own
            start (each device session from run 0): the runs are numbered again 0, 1, ...
            through the partitions in source order (``order``, ``device``), and a run is
            a (partition, run) pair.

    Returns:
        A :class:`MergedJoin`.

    Raises:
        ToolkitError: no partials; partials of different compiled models or join options;
            a run in two partitions.
    """
    if runs not in RUN_MODES:
        raise ToolkitError(f"unknown runs mode {runs!r}", fix=f"use one of {RUN_MODES}")
    items = sorted(partials, key=lambda p: (p.order, p.device, p.label))
    digest = provenance_digest(provenance_snapshot(compiled)) if compiled is not None else None
    if runs == "per-partition":
        check_partials(items, digest, distinct_runs=False)
        items = _renumber(items)
    check_partials(items, digest)
    all_runs = np.unique(np.concatenate([p.runs for p in items]))
    run_codes = [np.searchsorted(all_runs, p.runs).astype(np.int64) for p in items]
    counts = {k: int(sum(p.counts[k] for p in items)) for k in SUMMARY_COUNTS}
    reasons: dict[str, tuple[int, int]] = {}
    for p in items:
        for text, (n, ns) in p.reasons.items():
            old = reasons.get(text, (0, 0))
            reasons[text] = (old[0] + n, old[1] + ns)
    overhead: dict[str, tuple[int, int, int]] = {}
    for p in items:
        for name, (n, ns, inc) in p.overhead.items():
            o = overhead.get(name, (0, 0, 0))
            overhead[name] = (o[0] + n, o[1] + ns, o[2] + inc)
    kinds = sorted({k for p in items for k in p.key_used.split("+") if k})
    from toolkit.trace.join.keys import KEY_KINDS

    key_used = items[0].options.get("key") or "+".join(k for k in KEY_KINDS if k in kinds)
    return MergedJoin(
        digest=items[0].digest, options=dict(items[0].options),
        partials=items, runs=all_runs, run_codes=run_codes, counts=counts,
        nested=any(p.nested for p in items),
        key_used=key_used,
        layer_inclusive_ns=np.asarray(np.sum([p.layer_inclusive_ns for p in items], axis=0,
                                             dtype=np.int64)),
        reasons=dict(sorted(reasons.items())), overhead=dict(sorted(overhead.items())))
