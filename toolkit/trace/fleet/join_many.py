"""Fleets of traces: join many device sessions on a process pool or a Dask cluster, exactly.

    fleet = trace_join_many("nightly/*.parquet", compiled, engine="local", workers=2)
    fleet.by_layer()            # as Attribution.by_layer(), over every run of every device
    fleet.by_partition()        # one row per file (or device)
    fleet.layer_by_partition("model/conv")   # the per-device spread of a layer's time

Each partition (a file, or one device of a file with ``partition_by``) is joined on a worker
by :func:`~toolkit.trace.fleet.partial.join_partition` (the toolkit's own join kernel); the
small partial results are merged exactly (:mod:`toolkit.trace.fleet.merge`) and the per-run
statistics are computed once over the merged per-run table (:mod:`toolkit.trace.fleet._stats`).
The result equals one :func:`~toolkit.trace.join.join.trace_join` over the concatenated fleet:
the same integer nanoseconds and counts, the same per-run statistics to the bit.

The rule that makes this exact: **one device session per partition**: a partition holds whole
tracks and whole runs, and a run value appears in one partition only (the merge refuses a run
seen twice).
"""

from __future__ import annotations

import glob as _glob
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.fleet._stats import DEFAULT_MEMORY_BUDGET, fleet_stats_frame
from toolkit.trace.fleet.merge import MergedJoin, merge_partials
from toolkit.trace.fleet.partial import (
    PER_RUN_VIEWS,
    PartialJoin,
    PerRun,
    join_partition,
    provenance_digest,
    provenance_snapshot,
    raise_at,
)
from toolkit.trace.join.catalog import catalog_of
from toolkit.trace.join.layer_views import LayerAttribution
from toolkit.trace.join.run_cells import view_total
from toolkit.trace.join.stats import STAT_COLUMNS, outlier_runs, p50_share, stats_frame
from toolkit.trace.join.tables import ProvenanceTables

__all__ = ["FleetAttribution", "trace_join_many", "expand_sources", "ENGINES"]

ENGINES: tuple[str, ...] = ("local", "dask")
_TRACE_SUFFIXES = (".json", ".json.gz", ".csv", ".csv.gz", ".parquet")
_STR = pd.Series([""]).dtype
_ID_DROP = (*STAT_COLUMNS, "inclusive_ns", "first_ms", "first_run_outlier", "p50_share",
            "outlier_runs")


def _empty_attribution(tables: ProvenanceTables) -> Any:
    """An :class:`Attribution` of no events against ``tables``: the views' id columns."""
    from toolkit.trace.join.join import trace_join
    from toolkit.trace.readers.read import read_trace

    empty = np.zeros(0, dtype=np.int64)
    return trace_join(read_trace(pd.DataFrame({"start_ns": empty, "dur_ns": empty,
                                               "command_id": empty})), tables)


#: what to do when a fleet's figures do not add up (only a modified result or a bug does that)
_TAMPERED = ("the fleet's partials or tables were modified after the join, or this is a bug: "
             "join the fleet again; if it persists, report it with one of its files and the "
             "model")

class FleetAttribution(LayerAttribution):
    """The time of a fleet of traces attributed to original layers: the views of
    :class:`~toolkit.trace.join.attribution.Attribution` over every run of every partition, plus
    per-partition (file, device) slices.

    Attributes (as :class:`Attribution`): ``policy``, ``key_used``, ``overlaps``,
    ``total_ns``, ``attributed_ns``, ``overhead_ns``, ``unattributed_ns`` (``int``;
    attributed + overhead + unattributed == total exactly), ``runs``, ``nested``,
    ``match_score``, ``skipped_runs`` (warm-up runs dropped, summed over partitions), and
    ``partitions`` (number of partitions), ``digest`` (the compiled model's).
    """

    def __init__(self, merged: MergedJoin, tables: ProvenanceTables,
                 memory_budget: int = DEFAULT_MEMORY_BUDGET) -> None:
        self._m = merged
        self._tables = tables
        self._template = _empty_attribution(tables)
        self._cache: dict[str, pd.DataFrame] = {}
        self.memory_budget = int(memory_budget)
        c = merged.counts
        self.policy = str(merged.options["policy"])
        self.overlaps = str(merged.options["overlaps"])
        self.key_used = merged.key_used
        self.total_ns = c["total_ns"]
        self.attributed_ns = c["attributed_ns"]
        self.overhead_ns = c["overhead_ns"]
        self.unattributed_ns = c["unattributed_ns"]
        self.runs = len(merged.runs)
        self.nested = merged.nested
        self.match_score = (c["matched_events"] / c["keyed_events"] if c["keyed_events"]
                            else float("nan"))
        self.skipped_runs = c["skipped_runs"]
        self.partitions = len(merged.partials)
        self.digest = merged.digest

    def __repr__(self) -> str:
        return (f"<FleetAttribution policy={self.policy!r} key={self.key_used!r}: "
                f"{self.attributed_ns} of {self.total_ns} ns attributed over {self.runs} "
                f"run(s) in {self.partitions} partition(s), match {self.match_score:.0%}>")

    # ------------------------------------------------------------------ views
    def _ids(self, view: str) -> pd.DataFrame:
        t = self._template
        table = {"layer": t.by_layer, "source_op": t.by_source_op, "op": t.by_op,
                 "command": t.by_command}[view]()
        return table[[c for c in table.columns if c not in _ID_DROP]]

    def _cells(self, view: str) -> PerRun:
        """The merged per-run cells of ``view`` (raises for an unknown view)."""
        if view not in PER_RUN_VIEWS:
            raise ToolkitError(f"unknown per-run view {view!r}",
                               fix="use 'layer', 'source_op', 'op', 'command' or 'backend'")
        return self._m.view(view, catalog_of(self._tables))[0]

    def _stats(self, view: str, n_rows: int) -> pd.DataFrame:
        cells = self._cells(view)
        events = np.zeros(n_rows, dtype=np.int64)
        np.add.at(events, cells.row, cells.events)
        return fleet_stats_frame(cells.row, cells.run, cells.ns, n_rows, self.runs, events,
                                 self.total_ns, self.memory_budget)

    @staticmethod
    def _join(ids: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
        return pd.concat([ids.reset_index(drop=True), stats], axis=1)

    def by_layer(self) -> pd.DataFrame:
        """One row per original layer, columns as :meth:`Attribution.by_layer`
        (``first_ms``: the layer's time in the fleet's first run, the smallest run value)."""
        if "layer" not in self._cache:
            ids = self._ids("layer")
            n = len(ids)
            stats = self._stats("layer", n)
            ids["inclusive_ns"] = self._m.layer_inclusive_ns
            cells = self._cells("layer")
            first = np.zeros(n, dtype=np.int64)
            at = cells.run == 0
            np.add.at(first, cells.row[at], cells.ns[at])
            ids["first_ms"] = first / 1e6
            median = stats["p50_ms"].to_numpy(dtype=np.float64)
            ids["first_run_outlier"] = (self.runs >= 3) & (first / 1e6 > 2 * median) & (
                first > 0)
            ids["p50_share"] = p50_share(median)
            ids["outlier_runs"] = outlier_runs(cells.row, cells.run, cells.ns, n, self.runs,
                                               median)
            self._cache["layer"] = self._join(ids, stats)
        return self._cache["layer"].copy()

    def by_source_op(self) -> pd.DataFrame:
        """One row per source op, columns as :meth:`Attribution.by_source_op`."""
        if "source_op" not in self._cache:
            ids = self._ids("source_op")
            self._cache["source_op"] = self._join(ids, self._stats("source_op", len(ids)))
        return self._cache["source_op"].copy()

    def by_op(self) -> pd.DataFrame:
        """One row per compiled op, columns as :meth:`Attribution.by_op`."""
        if "op" not in self._cache:
            ids = self._ids("op")
            self._cache["op"] = self._join(ids, self._stats("op", len(ids)))
        return self._cache["op"].copy()

    def by_command(self) -> pd.DataFrame:
        """One row per command, columns as :meth:`Attribution.by_command`."""
        if "command" not in self._cache:
            ids = self._ids("command")
            self._cache["command"] = self._join(ids, self._stats("command", len(ids)))
        return self._cache["command"].copy()

    def by_backend(self) -> pd.DataFrame:
        """One row per backend, columns as :meth:`Attribution.by_backend` (time of members
        without a compiled op in a last row ``""``, present only when it has time)."""
        if "backend" not in self._cache:

            _codes, names = pd.factorize(pd.Series(catalog_of(self._tables).op_backend,
                                                   dtype=object))
            labels = [str(x) for x in list(names)]
            ids = pd.DataFrame({"backend": pd.Series([*labels, ""], dtype=_STR)})
            table = self._join(ids, self._stats("backend", len(ids)))
            if table["total_ns"].iloc[-1] == 0:
                table = table.iloc[:-1].reset_index(drop=True)
            self._cache["backend"] = table
        return self._cache["backend"].copy()

    def per_run(self, by: str = "layer") -> pd.DataFrame:
        """The fleet's per-run table, columns as :meth:`Attribution.per_run` (``row``, the
        view's id column, ``run``, ``ns``, ``events``), sorted by ``row`` then ``run``."""
        cells = self._cells(by)
        if by == "backend":

            _codes, names = pd.factorize(pd.Series(catalog_of(self._tables).op_backend,
                                                   dtype=object))
            ids = [str(x) for x in list(names)] + [""]
            id_column, values = "backend", pd.Series(np.asarray(ids, dtype=object)[cells.row],
                                                     dtype=_STR)
        else:
            frame = self._ids(by)
            id_column = frame.columns[0]
            raw = frame[id_column].to_numpy()[cells.row]
            values = (pd.Series(raw, dtype=_STR) if id_column == "layer"
                      else pd.Series(np.asarray(raw, dtype=np.int64)))
        order = np.lexsort((cells.run, cells.row))
        return pd.DataFrame({"row": cells.row[order].astype(np.int64),
                             id_column: values.iloc[order].to_numpy(),
                             "run": self._m.runs[cells.run[order]],
                             "ns": cells.ns[order],
                             "events": cells.events[order]})

    def run_values(self) -> np.ndarray:
        """Every run value of the fleet, ascending (``int64``)."""
        return self._m.runs.copy()

    def unattributed(self) -> pd.DataFrame:
        """The unattributed events of the fleet, one row per reason (a fleet keeps counts,
        not the events; join one partition with :func:`trace_join` to list them).

        Columns: ``reason`` (str, as :meth:`Attribution.unattributed`), ``events`` (int64),
        ``self_ns`` (int64; sums to :attr:`unattributed_ns`), sorted by reason."""
        items = list(self._m.reasons.items())
        return pd.DataFrame({"reason": pd.Series([k for k, _ in items], dtype=_STR),
                             "events": np.array([v[0] for _, v in items], dtype=np.int64),
                             "self_ns": np.array([v[1] for _, v in items], dtype=np.int64)})

    def overhead(self) -> pd.DataFrame:
        """Dispatch overhead per span name, sorted by name: ``bucket``, ``name`` (str),
        ``total_ns`` (int64; sums to :attr:`overhead_ns`), ``share`` (float64), ``events``,
        ``inclusive_ns`` (int64). Totals only (no per-run statistics)."""
        items = list(self._m.overhead.items())
        total = np.array([v[1] for _, v in items], dtype=np.int64)
        return pd.DataFrame({
            "bucket": pd.Series([f"dispatch overhead of {k}" for k, _ in items], dtype=_STR),
            "name": pd.Series([k for k, _ in items], dtype=_STR),
            "total_ns": total,
            "share": total / self.total_ns if self.total_ns else np.zeros(len(items)),
            "events": np.array([v[0] for _, v in items], dtype=np.int64),
            "inclusive_ns": np.array([v[2] for _, v in items], dtype=np.int64)})

    # ------------------------------------------------------------------ slices
    def by_partition(self) -> pd.DataFrame:
        """One row per partition (file, or device of a file), in source order.

        Columns: ``source`` (str: the path or ``trace <i>``), ``device`` (str: the
        ``partition_by`` value, ``""`` without one), ``runs``, ``events`` (int64),
        ``total_ns``, ``attributed_ns``, ``overhead_ns``, ``unattributed_ns`` (int64),
        ``match_score`` (float64), ``skipped_runs`` (int64), ``first_start_ns``,
        ``last_end_ns`` (int64, -1 when the partition has no events), ``nested`` (bool),
        ``worker_pid`` and ``worker_peak_rss_bytes`` (int64: the process that joined the
        partition and its peak resident memory when it had, as that process read it; -1 when
        not recorded).
        """
        ps = self._m.partials

        def col(k: str) -> np.ndarray:
            return np.array([p.counts[k] for p in ps], dtype=np.int64)

        keyed, matched = col("keyed_events"), col("matched_events")
        return pd.DataFrame({
            "source": pd.Series([p.label for p in ps], dtype=_STR),
            "device": pd.Series([p.device for p in ps], dtype=_STR),
            "runs": col("runs"), "events": col("events"), "total_ns": col("total_ns"),
            "attributed_ns": col("attributed_ns"), "overhead_ns": col("overhead_ns"),
            "unattributed_ns": col("unattributed_ns"),
            "match_score": np.where(keyed > 0, matched / np.maximum(keyed, 1), np.nan),
            "skipped_runs": col("skipped_runs"),
            "first_start_ns": np.array([-1 if p.start_ns is None else p.start_ns for p in ps],
                                       dtype=np.int64),
            "last_end_ns": np.array([-1 if p.end_ns is None else p.end_ns for p in ps],
                                    dtype=np.int64),
            "nested": np.array([p.nested for p in ps], dtype=bool),
            "worker_pid": np.array([p.worker.get("pid", -1) for p in ps], dtype=np.int64),
            "worker_peak_rss_bytes": np.array([p.worker.get("peak_rss_bytes", -1) for p in ps],
                                              dtype=np.int64)})

    def layer_by_partition(self, layer: str | None = None) -> pd.DataFrame:
        """The per-partition (per-device) slice of :meth:`by_layer`: one row per
        (partition, layer) with time, or for ``layer`` only, one row per partition.

        Columns: ``source``, ``device`` (str), ``layer`` (str), ``runs`` (int64: the
        partition's runs), ``total_ns`` (int64), then ``avg_ms`` ... ``max_ms`` over the
        partition's runs (float64, as :data:`~toolkit.trace.join.stats.RUN_STAT_COLUMNS`).
        """
        names = self._ids("layer")["layer"].tolist()
        rows: list[pd.DataFrame] = []
        wanted = None
        if layer is not None:
            if layer not in names:
                raise ToolkitError(f"no layer {layer!r} in the compiled model",
                                   fix="pick a name of by_layer()['layer']")
            wanted = names.index(layer)
        merged, bounds = self._m.view("layer", catalog_of(self._tables))
        for i, p in enumerate(self._m.partials):
            at = slice(int(bounds[i]), int(bounds[i + 1]))
            row, run, ns = merged.row[at], merged.run[at], merged.ns[at]
            keep = row == wanted if wanted is not None else np.ones(len(row), bool)
            used = np.unique(row[keep]) if wanted is None else np.array([wanted])
            code = np.searchsorted(np.searchsorted(self._m.runs, p.runs), run[keep])
            local = np.searchsorted(used, row[keep])
            stats = stats_frame(local, code, ns[keep], len(used), len(p.runs),
                                np.zeros(len(used), np.int64), 0)
            rows.append(pd.DataFrame({
                "source": pd.Series([p.label] * len(used), dtype=_STR),
                "device": pd.Series([p.device] * len(used), dtype=_STR),
                "layer": pd.Series([names[i] for i in used.tolist()], dtype=_STR),
                "runs": np.full(len(used), len(p.runs), dtype=np.int64),
                "total_ns": stats["total_ns"].to_numpy(dtype=np.int64),
                **{c: stats[c].to_numpy() for c in
                   ("avg_ms", "min_ms", "p10_ms", "p50_ms", "p90_ms", "max_ms")}}))
        return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()

    # ------------------------------------------------------------------ checks
    def summary(self) -> dict[str, Any]:
        """The headline figures of :meth:`Attribution.summary`, summed over partitions,
        plus ``partitions`` and ``digest``."""
        c = self._m.counts
        return {**c, "runs": self.runs, "policy": self.policy, "key_used": self.key_used,
                "match_score": self.match_score, "nested": self.nested,
                "partitions": self.partitions, "digest": self.digest}

    def check(self) -> None:
        """Verify conservation over the fleet; raise :class:`ToolkitError` naming the first
        failure.

        Checks: every partition passed :meth:`Attribution.check` on its worker; attributed
        + overhead + unattributed = total; the per-run cells are >= 0, name known rows and
        runs, and sum to the attributed time in the layer and source-op views (the op view
        to at most it); the reasons sum to the unattributed time and the overhead buckets to
        the overhead; the runs of the partitions add up to the fleet's runs.
        """
        m = self._m
        bad = [p.label for p in m.partials if not p.checked]
        if bad:
            raise ToolkitError(f"partition {bad[0]!r} was not checked on its worker",
                               fix="join partitions with check=True")
        if self.attributed_ns + self.overhead_ns + self.unattributed_ns != self.total_ns:
            raise ToolkitError(f"attributed {self.attributed_ns} + overhead {self.overhead_ns} "
                               f"+ unattributed {self.unattributed_ns} != total "
                               f"{self.total_ns} ns", fix=_TAMPERED)
        if sum(len(p.runs) for p in m.partials) != self.runs:
            raise ToolkitError("the partitions' runs do not add up to the fleet's runs",
                               fix=_TAMPERED)
        cat = catalog_of(self._tables)
        for view in PER_RUN_VIEWS:
            got = 0
            for p in m.partials:
                c = p.cells
                if any(a.dtype == np.int64 and a.size and int(a.min()) < 0 for a in
                       (c.member_ns, c.target_events, c.command_ns, c.command_events)):
                    raise ToolkitError(f"a negative per-run cell in partition {p.label!r}",
                                       fix=_TAMPERED)
                got += view_total(c, cat, view)
            if view in ("layer", "source_op") and got != self.attributed_ns:
                raise ToolkitError(f"the {view} per-run table sums to {got} ns, attributed is "
                                   f"{self.attributed_ns} ns", fix=_TAMPERED)
            if view in ("op", "backend") and got > self.attributed_ns:
                raise ToolkitError(f"the {view} per-run table sums to {got} ns, more than the "
                                   f"attributed {self.attributed_ns} ns", fix=_TAMPERED)
        if sum(v[1] for v in m.reasons.values()) != self.unattributed_ns:
            raise ToolkitError("the unattributed reasons do not sum to the unattributed time",
                               fix=_TAMPERED)
        if sum(v[1] for v in m.overhead.values()) != self.overhead_ns:
            raise ToolkitError("the overhead buckets do not sum to the overhead time",
                               fix=_TAMPERED)
        for view, cached in self._cache.items():
            if view in ("layer", "source_op") and \
                    int(cached["total_ns"].sum()) != self.attributed_ns:
                raise ToolkitError(f"by_{view}() sums to {int(cached['total_ns'].sum())} ns, "
                                   f"attributed is {self.attributed_ns} ns", fix=_TAMPERED)


def expand_sources(sources: Any) -> list[Any]:
    """Return the list of traces named by ``sources``: a glob pattern or a directory (its
    trace files, sorted), a path, a :class:`~toolkit.trace.readers.read.Trace` or DataFrame, or a
    list of any of these. Raises :class:`ToolkitError` when a pattern matches nothing."""
    if isinstance(sources, (str, os.PathLike)):
        text = os.fspath(sources)
        if Path(text).is_dir():
            found = sorted(str(p) for p in Path(text).iterdir()
                           if p.name.lower().endswith(_TRACE_SUFFIXES))
        elif any(ch in text for ch in "*?["):
            found = sorted(_glob.glob(text, recursive=True))
        else:
            found = [text]
        if not found:
            raise ToolkitError("no trace files match", where=text,
                               fix="check the pattern (quote it so the shell does not "
                                   "expand it) or the folder")
        return list(found)
    if isinstance(sources, Sequence) and not isinstance(sources, (bytes, pd.DataFrame)):
        out: list[Any] = []
        for item in sources:
            out.extend(expand_sources(item) if isinstance(item, (str, os.PathLike))
                       else [item])
        if not out:
            raise ToolkitError("no traces given", fix="pass paths, a glob or traces")
        return out
    return [sources]


def trace_join_many(sources: Any, compiled: Any, *, engine: str = "local",
                    client: Any | None = None, workers: int | None = None,
                    partition_by: str | None = None, policy: str = "macs",
                    key: str | None = None, overlaps: str = "self", strict: bool = True,
                    skip_runs: int = 0, runs: str = "distinct",
                    memory_budget: int = DEFAULT_MEMORY_BUDGET,
                    progress: Callable[[PartialJoin, int, int], None] | None = None
                    ) -> FleetAttribution:
    """Join a fleet of traces with one compiled model, partition by partition, exactly.

    Args:
        sources: paths, a glob (``"nightly/*.parquet"``), a folder, or a list of traces
            (Chrome JSON/.gz, CSV, Parquet, :class:`~toolkit.trace.readers.read.Trace`, DataFrame).
            One device session per file: a file holds whole tracks and whole runs, and no
            run value appears in two files.
        compiled: the compiled (or partitioned) model, or a path (as
            :func:`~toolkit.trace.join.join.trace_join`).
        engine: ``"local"`` (a process pool of ``workers`` spawned processes; ``workers=0``
            joins in this process) or ``"dask"`` (``client.map`` on ``client``, a
            ``distributed.Client``, or on a ``LocalCluster`` of ``workers`` processes started
            without ``MALLOC_TRIM_THRESHOLD_``; needs ``toolkit[dask]``).
        client: the Dask client for ``engine="dask"``.
        workers: processes (default: ``os.cpu_count()``, at most the number of sources).
        partition_by: a column naming the device (session) of each event, for files that
            hold several devices: each (file, device) is its own partition.
        policy, key, overlaps, strict, skip_runs: as :func:`~toolkit.trace.join.join.trace_join`;
            ``skip_runs`` drops the first runs of every partition (each device's warm-up).
        runs: ``"distinct"`` (run values name runs across the fleet; a run value in two
            partitions is refused) or ``"per-partition"`` (every session numbers its runs
            from its own start, as a runtime does: runs are numbered again through the
            partitions in source order; see :func:`~toolkit.trace.fleet.merge.merge_partials`).
        memory_budget: bytes of per-run matrix computed in memory; above, DuckDB.
        progress: called as ``progress(partial, done, total)`` after each partition.

    Returns:
        A :class:`FleetAttribution`.

    Raises:
        ToolkitError: an unknown engine or runs mode; no sources; a partition's join error
            (naming the file); partitions that cannot be merged
            (:func:`~toolkit.trace.fleet.merge.check_partials`).
    """
    from toolkit.trace.fleet.engines import run_dask, run_local
    from toolkit.trace.fleet.merge import RUN_MODES

    if engine not in ENGINES:
        raise ToolkitError(f"unknown engine {engine!r}", fix=f"use one of {ENGINES}")
    if runs not in RUN_MODES:
        raise ToolkitError(f"unknown runs mode {runs!r}", fix=f"use one of {RUN_MODES}")
    if workers is not None and (isinstance(workers, bool) or int(workers) < 0):
        raise ToolkitError(f"workers must be >= 0, got {workers!r}",
                           fix="pass workers=0 (in this process) or the number of worker "
                               "processes")
    items = expand_sources(sources)
    tables = provenance_snapshot(compiled)
    digest = provenance_digest(tables)
    options = {"policy": policy, "key": key, "overlaps": overlaps, "strict": strict,
               "skip_runs": int(skip_runs), "partition_by": partition_by, "digest": digest}
    if engine == "local":
        partials = run_local(items, tables, options, workers, progress)
    else:
        partials = run_dask(items, tables, options, workers, client, progress)
    return FleetAttribution(merge_partials(partials, runs=runs), tables, memory_budget)


def join_source(source: Any, order: int, tables: ProvenanceTables,
                options: dict[str, Any]) -> list[PartialJoin]:
    """Join one source into its partials (one, or one per ``partition_by`` value): the task
    each worker runs."""
    from toolkit.trace.readers.read import Trace, read_trace

    label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"trace {order}"
    opts = {k: options[k] for k in ("policy", "key", "overlaps", "strict", "skip_runs")}
    by = options.get("partition_by")
    try:
        trace = source if isinstance(source, Trace) else read_trace(source)
    except ToolkitError as exc:
        raise_at(exc, label)
    if not by:
        return _stamped([join_partition(trace, tables, label=label, order=order,
                                        digest=options["digest"], **opts)])
    events = trace.events
    if by not in events.columns:
        raise ToolkitError(f"the trace has no column {by!r} to partition by", where=label,
                           fix=f"name one of its columns: {list(events.columns)}")
    values = events[by].astype(object).where(events[by].notna(), "")
    out = []
    for device, rows in values.groupby(values.astype(str), sort=True).indices.items():
        part = Trace(events.iloc[np.sort(rows)].reset_index(drop=True),
                     {**trace.meta, "device": device})
        out.append(join_partition(part, tables, label=label, device=str(device), order=order,
                                  digest=options["digest"], **opts))
    return _stamped(out)


def _peak_rss_bytes(maxrss_kb: int) -> int:
    """This process's peak resident memory in bytes: ``VmHWM`` of ``/proc/self/status``
    (this process image only; ``ru_maxrss`` keeps the high-water mark of the parent a
    spawned worker was forked from), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(maxrss_kb) * 1024


def _stamped(partials: list[PartialJoin]) -> list[PartialJoin]:
    """``partials`` with the process that joined them recorded (``worker``: ``pid``, peak
    resident memory ``peak_rss_bytes`` and ``cpu_ns`` so far, read in that process)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    stamp = {"pid": os.getpid(), "peak_rss_bytes": _peak_rss_bytes(usage.ru_maxrss),
             "cpu_ns": int((usage.ru_utime + usage.ru_stime) * 1e9)}
    for p in partials:
        p.worker = dict(stamp)
    return partials
