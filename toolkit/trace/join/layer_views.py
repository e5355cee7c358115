"""What every attribution of runtime to original layers offers, whichever runtime the trace
came from: :class:`~toolkit.trace.join.attribution.Attribution` (the one join,
:mod:`toolkit.trace.join.join`) and its runtime adapters' subclasses,
:class:`~toolkit.trace.readers.executorch.attribution.ExecutorchAttribution` (ETDump ticks) and
:class:`~toolkit.trace.readers.ort.attribution.OrtAttribution` (ONNX Runtime profiles), and
:class:`~toolkit.trace.fleet.join_many.FleetAttribution` (fleets of traces).

Code written against :class:`LayerAttribution` (a report, a plot, a notebook cell, a diff of
two attributions) works on any of them: each view starts with the columns listed here, in
this order, whatever the source; a source's own columns come after them.

================== ===========================================================================
view               leading columns
================== ===========================================================================
``by_layer()``     :data:`LAYER_COLUMNS`: ``layer`` (str: an original layer, from the
                   ``Origin`` records; ``(no layer)`` for source ops of none),
                   ``inclusive_ns`` (int64: the layer's events counted whole), ``first_ms``
                   (float64: its time in the first run),
                   ``first_run_outlier`` (bool), ``p50_share`` (float64: the median run's
                   share), ``outlier_runs`` (int64: runs over twice the layer's median run),
                   then :data:`~toolkit.trace.join.stats.STAT_COLUMNS`
                   (``total_ns`` int64 exclusive ns, ``share`` of all time, ``events``,
                   per-run ``avg_ms``, ``min_ms``, ``p10_ms``, ``p50_ms``, ``p90_ms``,
                   ``max_ms``); ExecuTorch adds ``module_type``, ``nodes``, ``kernel_ns``,
                   ``dispatch_ns``, ``delegate_ns``, ``reason``
``by_op()``        :data:`OP_COLUMNS`: one row per compiled unit the runtime ran (a compiled op,
                   a node ORT ran, an ExecuTorch instruction or XNNPACK node): ``optimised_id``
                   (int64), ``operator``, ``name``, ``backend`` (str), ``source_ids`` (tuple),
                   then the statistics
``unattributed()`` :data:`UNATTRIBUTED_EVENT_COLUMNS` (one row per event; a fleet keeps one
                   row per reason: :data:`UNATTRIBUTED_COLUMNS`, ``events``, ``self_ns``)
``overhead()``     :data:`OVERHEAD_COLUMNS`: a wrapper span's own time (``Method::execute``,
                   a ``DELEGATE_CALL`` around its op events, a profiler's wrapper)
``summary()``      :data:`SUMMARY_KEYS`, where ``total_ns = attributed_ns + overhead_ns +
                   unattributed_ns``
================== ===========================================================================
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pandas as pd

from toolkit.trace.join.stats import STAT_COLUMNS

__all__ = ["LayerAttribution", "LAYER_COLUMNS", "OP_COLUMNS", "UNATTRIBUTED_COLUMNS",
           "UNATTRIBUTED_EVENT_COLUMNS", "OVERHEAD_COLUMNS", "SUMMARY_KEYS"]

#: the leading columns of every ``by_layer()``, in order
LAYER_COLUMNS: tuple[str, ...] = ("layer", "inclusive_ns", "first_ms", "first_run_outlier",
                                  "p50_share", "outlier_runs", *STAT_COLUMNS)
#: the leading columns of every ``by_op()``, in order
OP_COLUMNS: tuple[str, ...] = ("optimised_id", "operator", "name", "backend", "source_ids",
                               *STAT_COLUMNS)
#: columns every ``unattributed()`` has: the reason
UNATTRIBUTED_COLUMNS: tuple[str, ...] = ("reason",)
#: the columns of ``unattributed()`` of one trace (one row per event), in order
UNATTRIBUTED_EVENT_COLUMNS: tuple[str, ...] = ("event_id", "run", "key", "key_kind", "name",
                                               "start_ns", "dur_ns", "reason", "self_ns")
#: the leading columns of every ``overhead()``, in order
OVERHEAD_COLUMNS: tuple[str, ...] = ("bucket", "name", "total_ns", "share", "events",
                                     "inclusive_ns")
#: keys every ``summary()`` has
SUMMARY_KEYS: tuple[str, ...] = ("events", "attributed_events", "runs", "total_ns",
                                 "attributed_ns", "unattributed_ns", "overhead_ns", "policy",
                                 "key_used", "match_score", "keyed_events", "matched_events",
                                 "nested", "overlapping_events", "tracks", "skipped_runs",
                                 "skipped_events", "skipped_ns")


class LayerAttribution(ABC):
    """Runtime attributed to the original layers of a model: the views every attribution has.

    ``by_layer()`` has :data:`LAYER_COLUMNS` (``total_ns`` in integer ns, ``share`` of the
    trace's time, ``events``, per-run ``avg_ms`` ... ``max_ms``); ``by_op()`` has
    ``total_ns`` and the same statistics per op of the graph the runtime ran;
    ``unattributed()`` has :data:`UNATTRIBUTED_COLUMNS`; ``summary()`` has
    :data:`SUMMARY_KEYS`, where ``total_ns = attributed_ns + overhead_ns + unattributed_ns``
    (overhead: a wrapper's or runtime's own time, named in ``by_layer()`` or ``overhead()``);
    ``check()`` raises when the time does not add up, to the ns."""

    @abstractmethod
    def by_layer(self) -> pd.DataFrame:
        """One row per original layer: :data:`LAYER_COLUMNS`, and the class's own columns."""

    @abstractmethod
    def by_op(self) -> pd.DataFrame:
        """One row per op the runtime ran: ``total_ns``, ``share`` and the statistics."""

    @abstractmethod
    def unattributed(self) -> pd.DataFrame:
        """What was not attributed, with its reason: one row per event (``event_id``, ``run``,
        ``name``, ``dur_ns``, ``reason``), or for a fleet one row per reason."""

    @abstractmethod
    def summary(self) -> dict[str, Any]:
        """Counts and totals: :data:`SUMMARY_KEYS`, and the class's own keys."""

    @abstractmethod
    def check(self) -> None:
        """Raise ToolkitError when attributed and unattributed time do not add up to the
        trace's time, to the ns."""

    def top_layers(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` layers with the most time, largest first: ``layer``, ``total_ns``
        (int64 ns), ``share`` (of the attributed time) and ``events``."""
        layers = self.by_layer()
        return (layers.sort_values("total_ns", ascending=False, kind="stable")
                .head(n)[["layer", "total_ns", "share", "events"]].reset_index(drop=True))

    def _repr_html_(self) -> str:
        """Rich view: the summary line, layers by time (largest first) with their statistics,
        the unattributed events when there are any, and a bar chart of the largest shares."""
        from toolkit.reprs import html_bars, html_table, html_view

        s = self.summary()
        layers = self.by_layer()
        total = int(s["total_ns"])
        key = f", key {s.get('key_used') or '-'}" if "key_used" in s else ""
        line = (f"{total / 1e6:,.3f} ms over {s['runs']} run(s), "
                f"{100 * int(s['attributed_ns']) / (total or 1):.1f} % attributed to "
                f"{len(layers)} original layers (policy {s['policy']}{key}), "
                f"{int(s['events']) - int(s['attributed_events'])} event(s) unattributed")
        cols = [c for c in ("layer", "total_ns", "share", "events", "avg_ms", "min_ms",
                            "p50_ms", "max_ms") if c in layers.columns]
        sections = [("time per original layer", html_table(layers, "total_ns", 10,
                                                           columns=cols))]
        missing = self.unattributed()
        if len(missing):
            sections.append(("unattributed", html_table(missing, "dur_ns", 5)))
        top = self.top_layers(8)
        return html_view(type(self).__name__, line, sections,
                         figure=html_bars(top["layer"].astype(str).tolist(),
                                          (100 * top["share"]).tolist(), unit=" %",
                                          title="share of the attributed time"))
