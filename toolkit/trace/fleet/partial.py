"""One partition of a fleet join: whole tracks and whole runs joined, as a small partial result.

A fleet (thousands of device sessions) is joined one partition at a time, each on its own
worker, with :func:`join_partition`; the :class:`PartialJoin` it returns is small (integer
sums, the per-run table, reason and overhead counts), picklable and merges exactly in any
order (:mod:`toolkit.trace.fleet.merge`). A partition must hold whole tracks and whole runs
(one device session per file): then every event's split depends only on its own time and its
target's integer weights, and the sums of partitions are the sums of the whole.

    partial = join_partition("device17.parquet", tables, policy="macs")

``tables`` is best a :class:`~toolkit.trace.join.tables.ProvenanceTables` made once with
:func:`provenance_snapshot` (plain DataFrames: cheap to ship to workers, and its digest names
the compiled model so that partials of different models are never merged).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.provenance import Provenance
from toolkit.trace.join.run_cells import RunCells
from toolkit.trace.join.tables import ProvenanceTables

__all__ = ["PartialJoin", "join_partition", "provenance_snapshot", "provenance_digest",
           "PER_RUN_VIEWS", "SUMMARY_COUNTS"]

#: The views whose per-run tables a partial carries (those of :meth:`Attribution.per_run`).
PER_RUN_VIEWS: tuple[str, ...] = ("layer", "source_op", "op", "command", "backend")
#: Integer counts of :meth:`Attribution.summary` that add up over partitions.
SUMMARY_COUNTS: tuple[str, ...] = (
    "events", "attributed_events", "runs", "total_ns", "attributed_ns", "overhead_ns",
    "unattributed_ns", "keyed_events", "matched_events", "overlapping_events", "tracks",
    "skipped_runs", "skipped_events", "skipped_ns")
_TABLES = ("source_ops", "layers", "optimised_ops", "origins", "commands", "debug_handles",
           "removed")


def raise_at(exc: ToolkitError, where: str) -> NoReturn:
    """Raise ``exc`` again, naming ``where`` when it names no place."""
    if exc.where is not None:
        raise exc
    raise type(exc)(exc.what, where=where, fix=exc.fix) from exc


def provenance_snapshot(provenance: Any) -> ProvenanceTables:
    """Return the seven provenance tables of ``provenance`` as a
    :class:`~toolkit.trace.join.tables.ProvenanceTables` (plain DataFrames, picklable).

    ``provenance`` is anything :func:`toolkit.trace.join.join.as_provenance` accepts (a compiled
    or partitioned model, a path, provenance tables). The join reads only these tables, so
    joining against the snapshot gives the same result as joining against the original.
    """
    if isinstance(provenance, ProvenanceTables):
        return provenance
    from toolkit.trace.join.join import as_provenance

    prov: Provenance = as_provenance(provenance)
    frames = [getattr(prov, name)().reset_index(drop=True) for name in _TABLES]
    return ProvenanceTables(*frames)


def _hash_frame(h: Any, frame: pd.DataFrame) -> None:
    h.update(repr([(str(c), str(frame[c].dtype)) for c in frame.columns]).encode())
    h.update(str(len(frame)).encode())
    for column in frame.columns:
        values = frame[column]
        if isinstance(values.dtype, np.dtype) and values.dtype.kind in "biuf":
            h.update(np.ascontiguousarray(values.to_numpy()).tobytes())
        else:
            h.update("\x1f".join(repr(v) for v in values.astype(object).tolist()).encode())


def provenance_digest(tables: ProvenanceTables) -> str:
    """Return the SHA-256 (hex) of the seven tables: columns, dtypes and values, in order.

    Two compiles that differ in any op, origin, command, weight or name differ here."""
    h = hashlib.sha256()
    for name in _TABLES:
        h.update(name.encode())
        _hash_frame(h, getattr(tables, f"{name}_df"))
    return h.hexdigest()


@dataclass
class PerRun:
    """One view's per-run cells: parallel arrays, one element per (row, run) with time or
    events (see :meth:`Attribution.per_run`): ``row`` (``int32``, position in the view),
    ``run`` (``int32``, a run code), ``ns`` (``int64``), ``events`` (``int64``)."""

    row: np.ndarray
    run: np.ndarray
    ns: np.ndarray
    events: np.ndarray


@dataclass
class PartialJoin:
    """What one partition of a fleet contributes; merges exactly with others.

    Attributes:
        digest: :func:`provenance_digest` of the compiled model joined against.
        options: the join's options (``policy``, ``key``, ``overlaps``, ``strict``,
            ``skip_runs``); partials merge only with equal options.
        label: where the partition came from (a path, ``trace <i>``), ``device``: the value
            of the ``partition_by`` column (``""`` without one); ``order``: the source's
            position in the list given (for stable output order).
        runs: the partition's run values (``int64``, ascending, after ``skip_runs``).
        counts: the integer counts of :data:`SUMMARY_COUNTS`.
        nested: some spans nest. ``key_used``: as :attr:`Attribution.key_used`.
        cells: the per-run table as compact dense bases
            (:class:`~toolkit.trace.join.run_cells.RunCells`, run codes into ``runs``), from
            which every view of :data:`PER_RUN_VIEWS` is derived at the merge.
        layer_inclusive_ns: ``int64`` per layer (:meth:`Attribution.by_layer`'s
            ``inclusive_ns``).
        reasons: ``{reason: (events, self_ns)}`` of the unattributed events.
        overhead: ``{span name: (events, self_ns, inclusive_ns)}`` of dispatch overhead.
        start_ns, end_ns: the earliest start and latest end of the partition's events
            (``None`` when it has none).
        checked: :meth:`Attribution.check` passed on the partition.
        worker: the process that joined it, when recorded by the engine: ``pid``,
            ``peak_rss_bytes`` (its peak resident memory so far), ``cpu_ns`` (its CPU time so
            far).
    """

    digest: str
    options: dict[str, Any]
    label: str
    device: str
    order: int
    runs: np.ndarray
    counts: dict[str, int]
    nested: bool
    key_used: str
    cells: RunCells
    layer_inclusive_ns: np.ndarray
    reasons: dict[str, tuple[int, int]] = field(default_factory=dict)
    overhead: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    start_ns: int | None = None
    end_ns: int | None = None
    checked: bool = False
    worker: dict[str, int] = field(default_factory=dict)


def join_partition(trace: Any, compiled: Any, *, policy: str = "macs", key: str | None = None,
                   overlaps: str = "self", strict: bool = True, skip_runs: int = 0,
                   check: bool = True, label: str | None = None, device: str = "",
                   order: int = 0, digest: str | None = None) -> PartialJoin:
    """Join one partition (whole tracks, whole runs) and return its :class:`PartialJoin`.

    Args:
        trace: a :class:`~toolkit.trace.readers.read.Trace` or anything
            :func:`~toolkit.trace.readers.read.read_trace` reads (Chrome JSON/.gz, CSV, Parquet,
            a DataFrame such as one batch of Spark's ``mapInPandas``).
        compiled: the compiled model (anything :func:`~toolkit.trace.join.join.trace_join`
            accepts); best a :func:`provenance_snapshot` made once.
        policy, key, overlaps, strict, skip_runs: as :func:`~toolkit.trace.join.join.trace_join`
            (``skip_runs`` drops the warm-up runs of this partition).
        check: run :meth:`Attribution.check` on the partition (a tenth of the join).
        label, device, order: recorded in the partial (default label: the path, or
            ``"trace"``).
        digest: the snapshot's :func:`provenance_digest` when already known.

    Returns:
        A :class:`PartialJoin` (picklable; merge with
        :func:`toolkit.trace.fleet.merge.merge_partials`).

    Raises:
        ToolkitError: as :func:`~toolkit.trace.join.join.trace_join`, naming the partition.
    """
    from toolkit.trace.join.join import trace_join
    from toolkit.trace.readers.read import Trace, read_trace

    tables = provenance_snapshot(compiled)
    if digest is None:
        digest = provenance_digest(tables)
    if label is None:
        label = str(trace) if isinstance(trace, (str, bytes)) or hasattr(trace, "__fspath__") \
            else "trace"
    try:
        if not isinstance(trace, Trace):
            trace = read_trace(trace)
        att = trace_join(trace, tables, policy=policy, key=key, overlaps=overlaps,
                         strict=strict, skip_runs=skip_runs)
        if check:
            att.check()
    except ToolkitError as exc:
        raise_at(exc, label)
    summary = att.summary()
    runs = att.run_values()
    cells = att.run_cells()
    inclusive = att.layer_inclusive_ns()
    unatt = att.unattributed()
    reasons = {str(k): (int(v["size"]), int(v["sum"])) for k, v in
               unatt.groupby("reason", observed=True)["self_ns"].agg(["size", "sum"])
               .iterrows()}
    over = att.overhead()
    overhead = {str(n): (int(e), int(s), int(i)) for n, e, s, i in
                zip(over["name"], over["events"], over["total_ns"], over["inclusive_ns"])}
    events = trace.events
    start = events["start_ns"].to_numpy(dtype=np.int64)
    end = start + events["dur_ns"].to_numpy(dtype=np.int64)
    return PartialJoin(
        digest=digest,
        options={"policy": policy, "key": key, "overlaps": overlaps, "strict": strict,
                 "skip_runs": int(skip_runs)},
        label=label, device=str(device), order=int(order), runs=runs,
        counts={k: int(summary[k]) for k in SUMMARY_COUNTS}, nested=bool(att.nested),
        key_used=att.key_used, cells=cells, layer_inclusive_ns=inclusive,
        reasons=reasons, overhead=overhead,
        start_ns=int(start.min()) if len(start) else None,
        end_ns=int(np.maximum(end, start).max()) if len(start) else None,
        checked=bool(check))
