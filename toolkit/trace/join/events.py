"""The one event table every trace is read into: :class:`Trace`.

Readers (:mod:`toolkit.trace.readers`) make it; the join (:mod:`toolkit.trace.join.join`) takes
it. It lives below both so that the engine needs no reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Trace", "EVENT_COLUMNS", "TIME_UNITS"]

#: The leading columns of :attr:`Trace.events` (other columns of the source follow).
EVENT_COLUMNS: tuple[str, ...] = ("event_id", "run", "key", "key_kind", "name", "start_ns",
                                  "dur_ns", "problem")
#: Nanoseconds per unit of a time column.
TIME_UNITS: dict[str, int] = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}

_STR = pd.Series([""]).dtype  # pandas' default text dtype


@dataclass
class Trace:
    """Events of a trace, one row each, and what is known about where they came from.

    ``events`` columns (then every other column of the source, e.g. ``arg_*``, ``pid``,
    ``tid``, ``cat``):

    ============ ==================================================================================
    event_id     ``int64``: row identity, the event's position in the source (0, 1, ...)
    run          ``int64``: inference index (from a run column, else the k-th occurrence of the
                 event's key is run k; 0 for a single inference)
    key          the key value: ``int64`` when every event has an integer key, else ``object``
                 (``int`` or ``str``; ``None`` when the event has none)
    key_kind     categorical: ``command_id``, ``part_op``, ``op_index``, ``debug_handle``,
                 ``part``, ``name`` (see :mod:`toolkit.trace.join.keys`) or ``""`` (no key)
    name         categorical of ``str``: the event name (interned)
    start_ns     ``int64`` nanoseconds
    dur_ns       ``int64`` nanoseconds (may be negative: see ``problem``)
    problem      categorical of ``str``: ``""`` when the row is fine, else what is wrong
                 (unpaired ``B``/``E``, negative duration, missing time, ...)
    ============ ==================================================================================

    ``meta``: ``source`` (path or kind of object), ``format`` (``chrome``, ``csv``,
    ``records``, ``frame``, ``tracer``), ``run_from`` (how ``run`` was found), ``key_column``
    (when the caller named one) and the Chrome reader's attributes (``ignored_events`` ...).
    """

    events: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    #: The keys as ``int64`` (0 where an event has none) when every keyed event has an integer
    #: key, else None: lets a join skip reading ``events.key`` object by object.
    int_keys: np.ndarray | None = field(default=None, repr=False)
    #: With ``int_keys``, the ``bool`` mask of the events whose key is an integer when other
    #: keyed events have text keys (None: ``int_keys`` holds every key): a join reads only
    #: the text keys object by object.
    int_key_rows: np.ndarray | None = field(default=None, repr=False)
    #: The runtime's own record when the trace was made by ``tk.run``: its
    #: :class:`~toolkit.runtime.tracer.EventTracer` (raw events: ``runtime.to_frame()``), a
    #: partition chain's DataFrame of part calls, or ONNX Runtime's ``OrtRun``; else None.
    runtime: Any = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def runs(self) -> int:
        """Number of distinct runs (inferences) in the trace; events outside every run
        (``run`` -1, as in a truncated ONNX Runtime profile) are in none."""
        if not len(self.events):
            return 0
        run = self.events["run"]
        return int(run[run >= 0].nunique())

    def to_frame(self) -> pd.DataFrame:
        """The recorder's own event table: for a trace ``tk.run`` recorded with an
        :class:`~toolkit.runtime.tracer.EventTracer`, the tracer's ``to_frame()`` (``key``,
        ``start_ns``, ``dur_ns``, ``run``, ``track`` and each event's arguments, as written
        to Chrome/CSV/Parquet trace files); for a partition chain's part calls, that
        DataFrame; for any other trace, a copy of :attr:`events`."""
        from toolkit.runtime.tracer import EventTracer

        if isinstance(self.runtime, EventTracer):
            return self.runtime.to_frame()
        if isinstance(self.runtime, pd.DataFrame):
            return self.runtime.copy()
        return self.events.copy()

    @property
    def optimized_path(self) -> Any:
        """ONNX Runtime: the graph it saved for the profiled session (a ``Path``), which a
        join of this trace uses; None for other traces."""
        return self.meta.get("optimized_path")

    @property
    def timings(self) -> pd.DataFrame | None:
        """ONNX Runtime run by ``tk.run``: one row per measured run, ``unprofiled_ns`` and
        ``profiled_ns`` (wall time without and with the profiler) and ``kernel_ns``; None for
        other traces."""
        return self.meta.get("timings")

    def key_kinds(self) -> pd.DataFrame:
        """Return one row per key kind present: ``key_kind`` (str), ``events`` (int64)."""
        counts = self.events["key_kind"].value_counts(sort=False)
        counts = counts[counts > 0]
        return pd.DataFrame({"key_kind": pd.Series(counts.index.astype(str), dtype=_STR),
                             "events": counts.to_numpy(dtype=np.int64)})

    def __repr__(self) -> str:
        kinds = ", ".join(f"{k}={n}" for k, n in self.key_kinds().itertuples(index=False))
        return (f"<Trace {len(self.events)} events, {self.runs} run(s), keys: {kinds or '-'}, "
                f"from {self.meta.get('source', '?')}>")

    def _repr_html_(self) -> str:
        """Rich view: summary line and event names by total duration (largest first)."""
        from toolkit.reprs import html_bars, html_table, html_view

        ev = self.events
        by_name = (ev.groupby("name", observed=True)
                   .agg(events=("event_id", "size"), total_ns=("dur_ns", "sum"))
                   .reset_index())
        span = int((ev["start_ns"] + ev["dur_ns"]).max() - ev["start_ns"].min()) if len(ev) else 0
        kinds = ", ".join(f"{k}={n}" for k, n in self.key_kinds().itertuples(index=False))
        problems = int((ev["problem"].astype(str) != "").sum()) if len(ev) else 0
        summary = (f"{len(ev):,} events, {self.runs} run(s), {span / 1e6:,.3f} ms from first "
                   f"start to last end, keys: {kinds or '-'}, {problems} problem row(s), "
                   f"from {self.meta.get('source', '?')}")
        top = by_name.sort_values("total_ns", ascending=False, kind="stable").head(8)
        return html_view("Trace", summary, [
            ("time per event name", html_table(by_name, "total_ns", 10)),
        ], figure=html_bars(top["name"].astype(str).tolist(), (top["total_ns"] / 1e3).tolist(),
                            unit=" µs", title="total duration per event name"))
