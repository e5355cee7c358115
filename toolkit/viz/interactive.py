"""An interactive timeline (plotly, the ``interactive`` extra): hover shows each segment's
original layer, compiled op, command and time.

    from toolkit.viz.interactive import plot_timeline_interactive
    plot_timeline_interactive(att)            # the median run; run=N for another one

The figure draws one run: each trace event cut into the original layers it is attributed to
(the same cutting as :func:`toolkit.viz.plots.timeline_segments`), one row per compiled op.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.viz.plots import layer_colors

__all__ = ["median_run", "hover_segments", "plot_timeline_interactive"]


def median_run(events: pd.DataFrame) -> int:
    """Return the run whose total event time (sum of ``dur_ns``) is the median of all runs
    (the lower of the two middle runs for an even count; the first such run on ties)."""
    if not len(events):
        raise ToolkitError("the trace has no events", where="plot_timeline_interactive",
                           fix="record a trace with tk.run(..., trace=True)")
    totals = events.groupby("run", sort=True)["dur_ns"].sum()
    order = totals.sort_values(kind="stable")
    return int(order.index[(len(order) - 1) // 2])


def hover_segments(events: pd.DataFrame, joined: pd.DataFrame, run: int) -> pd.DataFrame:
    """Cut the events of ``run`` into per-layer segments, with what a hover shows.

    ``events``: trace events (``event_id``, ``run``, ``start_ns``, ``dur_ns``; ``op_name``,
    ``op_type``, ``command_id`` or ``key`` when present); ``joined``: the attribution's long
    form (``event_id``, ``layer``, ``attributed_ns``). Returns one row per segment, in event
    order: ``event_id`` (int64), ``layer``, ``op`` (the event's op name), ``op_type``,
    ``command`` (the command id, else the event's key, as text), ``start_us`` (from the run's
    first event), ``dur_us`` (the segment) and ``event_us`` (the whole event), float64
    microseconds.
    """
    ev = events[events["run"] == run]
    if not len(ev):
        runs = sorted(int(r) for r in events["run"].unique())
        raise ToolkitError(f"run {run} has no events", where="plot_timeline_interactive",
                           fix=f"pass run= one of {runs[:10]}")
    j = joined[joined["event_id"].isin(ev["event_id"])]
    j = j.groupby(["event_id", "layer"], sort=False, observed=True)["attributed_ns"].sum()
    j = j.reset_index()

    def column(name: str, *fallbacks: str) -> pd.Series:
        for c in (name, *fallbacks):
            if c in ev.columns:
                return ev[c].astype(str)
        return pd.Series([""] * len(ev), index=ev.index)

    base = pd.DataFrame({"event_id": ev["event_id"], "start_ns": ev["start_ns"],
                         "event_ns": ev["dur_ns"], "op": column("op_name", "name"),
                         "op_type": column("op_type"),
                         "command": column("command_id", "key")})
    m = j.merge(base, on="event_id", how="left").sort_values(["start_ns", "event_id"],
                                                             kind="stable")
    offset = m.groupby("event_id", sort=False)["attributed_ns"].cumsum() - m["attributed_ns"]
    t0 = int(ev["start_ns"].min())
    return pd.DataFrame({
        "event_id": m["event_id"].to_numpy(dtype=np.int64),
        "layer": m["layer"].astype(str).to_numpy(),
        "op": m["op"].to_numpy(),
        "op_type": m["op_type"].to_numpy(),
        "command": m["command"].to_numpy(),
        "start_us": (m["start_ns"].to_numpy() + offset.to_numpy() - t0) / 1e3,
        "dur_us": m["attributed_ns"].to_numpy() / 1e3,
        "event_us": m["event_ns"].to_numpy() / 1e3,
    }).reset_index(drop=True)


def _plotly() -> Any:
    try:
        return importlib.import_module("plotly.graph_objects")
    except ImportError:
        raise ToolkitError("the interactive timeline needs plotly", where="plotly",
                           fix="pip install 'toolkit[interactive]' (or use "
                               "toolkit.viz.plots.plot_timeline_stats, matplotlib)") from None


def plot_timeline_interactive(att: Any, run: int | None = None, *,
                              colors: Mapping[str, Any] | None = None,
                              title: str | None = None) -> Any:
    """Return a plotly Figure of one run of ``att`` (an Attribution: its ``trace.events`` and
    ``events()``): one horizontal bar per segment (:func:`hover_segments`), a row per
    compiled op, a legend entry per original layer; hovering a bar shows its layer, op, op
    type, command, start and time in µs. ``run`` defaults to :func:`median_run`. Raises
    ToolkitError when plotly is missing or the run has no events."""
    go = _plotly()
    events = att.trace.events
    chosen = median_run(events) if run is None else int(run)
    seg = hover_segments(events, att.events(), chosen)
    cmap = dict(colors) if colors else layer_colors(seg["layer"].tolist())

    def css(c: Any) -> str:
        if isinstance(c, str):
            return c
        r, g, b = (round(255 * float(v)) for v in tuple(c)[:3])
        return f"rgb({r},{g},{b})"

    fig = go.Figure()
    rows = list(dict.fromkeys(seg["op"]))
    for layer, g in seg.groupby("layer", sort=False):
        fig.add_trace(go.Bar(
            name=str(layer), orientation="h", y=g["op"], x=g["dur_us"], base=g["start_us"],
            marker={"color": css(cmap.get(str(layer), "grey")),
                    "line": {"color": "white", "width": 0.5}},
            customdata=np.stack([g["layer"], g["op_type"], g["command"], g["event_us"]],
                                axis=-1),
            hovertemplate=("layer: %{customdata[0]}<br>op: %{y} (%{customdata[1]})<br>"
                           "command: %{customdata[2]}<br>start: %{base:.2f} µs<br>"
                           "time: %{x:.2f} µs of the event's %{customdata[3]:.2f} µs"
                           "<extra></extra>")))
    runs = int(events["run"].nunique())
    fig.update_layout(
        title=title or (f"run {chosen} ({'the median' if run is None else 'one'} of {runs} "
                        "runs): commands over time, coloured by original layer"),
        xaxis_title="time since the start of the run (µs)", yaxis_title="compiled op",
        legend_title_text="original layer", barmode="overlay",
        height=int(160 + 22 * max(len(rows), min(len(cmap), 30))),
        template="plotly_white")
    fig.update_yaxes(categoryorder="array", categoryarray=rows, autorange="reversed")
    return fig
