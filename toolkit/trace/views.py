"""What every attribution of runtime to original layers offers, whichever runtime the trace
came from: :class:`~toolkit.trace.attribution.Attribution` (the toolkit's own join),
:class:`~toolkit.trace.et_attribution.ExecutorchAttribution` (ETDump ticks),
:class:`~toolkit.trace.ort_join.OrtAttribution` (ONNX Runtime profiles) and
:class:`~toolkit.trace.fleet.FleetAttribution` (fleets of traces).

Code written against :class:`LayerAttribution` (a report, a plot, a notebook cell) works on
any of them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pandas as pd

from toolkit.trace.stats import STAT_COLUMNS

__all__ = ["LayerAttribution", "LAYER_COLUMNS", "UNATTRIBUTED_COLUMNS", "SUMMARY_KEYS"]

#: columns every ``by_layer()`` has (beside its own): the layer, then the statistics
LAYER_COLUMNS: tuple[str, ...] = ("layer", *STAT_COLUMNS)
#: columns every ``unattributed()`` has: the reason (one row per event left out, with
#: ``event_id``, ``run``, ``name`` and ``dur_ns``; a fleet keeps one row per reason)
UNATTRIBUTED_COLUMNS: tuple[str, ...] = ("reason",)
#: keys every ``summary()`` has
SUMMARY_KEYS: tuple[str, ...] = ("events", "attributed_events", "runs", "total_ns",
                                 "attributed_ns", "unattributed_ns", "overhead_ns", "policy")


class LayerAttribution(ABC):
    """Runtime attributed to the original layers of a model: the views every attribution has.

    ``by_layer()`` has :data:`LAYER_COLUMNS` (``total_ns`` in integer ns, ``share`` of the
    attributed time, ``events``, per-run ``avg_ms`` ... ``max_ms``); ``by_op()`` has
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
