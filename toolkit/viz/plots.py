"""Matplotlib figures for attribution results: time per layer, command timelines, policies.

Every function takes DataFrames (as returned by the attribution and trace APIs), draws on
``ax`` (a new figure when None) and returns the Axes. Times are shown in milliseconds or
microseconds, with the unit in the axis label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from toolkit.viz.graph import palette

__all__ = ["plot_layer_bars", "plot_timeline", "timeline_segments", "plot_policy_split",
           "layer_colors", "timeline_stats", "plot_timeline_stats", "layer_run_stats",
           "plot_layer_median", "OUTLIER_FACTOR"]


def layer_colors(layers: Sequence[str]) -> dict[str, Any]:
    """Return a colour per layer name (in the order given)."""
    uniq = list(dict.fromkeys(layers))
    return dict(zip(uniq, palette(len(uniq))))


def plot_layer_bars(by_layer: pd.DataFrame, *, value: str = "total_ns", label: str = "layer",
                    top: int = 20, ax: Axes | None = None, title: str | None = None,
                    colors: Mapping[str, Any] | None = None, unit: str = "ms",
                    per_run: bool = False) -> Axes:
    """Horizontal bars of ``value`` per ``label`` row, largest first, with share labels.

    ``value`` ending in ``_ns`` is converted to ``unit`` (``ms`` or ``us``); with
    ``per_run=True`` the per-run average column ``avg_ms`` is drawn instead. Other values
    (cycles, MACs) are drawn as they are.
    """
    df = by_layer.copy()
    col = "avg_ms" if per_run and "avg_ms" in df else value
    vals = df[col].astype(float)
    xlabel = col
    if col.endswith("_ns"):
        scale = {"ms": 1e-6, "us": 1e-3}[unit]
        vals = vals * scale
        xlabel = f"time ({unit}, total over all runs)"
    elif col == "avg_ms":
        xlabel = "time per inference (ms, mean over runs)"
    df = df.assign(_v=vals).sort_values("_v", ascending=False).head(top)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.32 * len(df) + 1.2))
    names = df[label].astype(str).tolist()
    cmap = dict(colors) if colors else layer_colors(names)
    ax.barh(range(len(df)), df["_v"], color=[cmap.get(n, "0.6") for n in names])
    ax.set_yticks(range(len(df)), [n if len(n) < 48 else "…" + n[-47:] for n in names],
                  fontsize=8)
    ax.invert_yaxis()
    total = float(vals.sum()) or 1.0
    for i, v in enumerate(df["_v"]):
        ax.text(v, i, f" {100 * v / total:.1f}%", va="center", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel({"layer": "original layer"}.get(label, label.replace("_", " ")))
    ax.set_title(title or f"{xlabel.split(' (')[0]} per {label.replace('_', ' ')}")
    shown = f"{len(df)} of {len(vals)} shown, largest first" if len(df) < len(vals) else \
        "largest first"
    ax.legend(handles=[Patch(facecolor="none", edgecolor="none",
                             label=f"% = share of the total; {shown}")],
              loc="lower right", fontsize=8, frameon=False, handlelength=0)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def timeline_segments(events: pd.DataFrame, joined: pd.DataFrame, run: int = 0
                      ) -> pd.DataFrame:
    """Cut each trace event of one run into per-layer segments.

    ``events``: the trace events (``event_id``, ``run``, ``start_ns``, ``dur_ns`` and a row
    label such as ``op_name``); ``joined``: the attribution's long form (``event_id``,
    ``layer``, ``attributed_ns``). Returns one row per segment: ``event_id``, ``row`` (the
    event's op name), ``layer``, ``start_us`` (from the run's first event), ``dur_us``.
    """
    ev = events[events["run"] == run]
    j = joined[joined["event_id"].isin(ev["event_id"])]
    j = j.groupby(["event_id", "layer"], sort=False, observed=True)["attributed_ns"].sum()
    j = j.reset_index()
    rowcol = next((c for c in ("op_name", "arg_op_name", "name") if c in ev.columns), None)
    base = ev[["event_id", "start_ns"] + ([rowcol] if rowcol else [])]
    m = j.merge(base, on="event_id", how="left").sort_values(["event_id", "layer"])
    offset = m.groupby("event_id", sort=False)["attributed_ns"].cumsum() - m["attributed_ns"]
    t0 = int(ev["start_ns"].min()) if len(ev) else 0
    return pd.DataFrame({
        "event_id": m["event_id"].to_numpy(),
        "row": m[rowcol].astype(str).to_numpy() if rowcol else m["event_id"].astype(str),
        "layer": m["layer"].astype(str).to_numpy(),
        "start_us": (m["start_ns"].to_numpy() + offset.to_numpy() - t0) / 1e3,
        "dur_us": m["attributed_ns"].to_numpy() / 1e3,
    })


def plot_timeline(segments: pd.DataFrame, *, ax: Axes | None = None,
                  colors: Mapping[str, Any] | None = None, title: str | None = None,
                  legend: bool = True) -> Axes:
    """Gantt chart of :func:`timeline_segments`: one row per compiled op, time along x,
    each event's bar cut into the original layers it is attributed to."""
    rows = list(dict.fromkeys(segments["row"]))
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.35 * len(rows) + 1.5))
    cmap = dict(colors) if colors else layer_colors(segments["layer"].tolist())
    y = {r: i for i, r in enumerate(rows)}
    for layer, g in segments.groupby("layer", sort=False):
        color = cmap.get(layer, "0.6")
        for s, d, r in zip(g["start_us"], g["dur_us"], g["row"]):
            ax.broken_barh([(s, d)], (y[r] - 0.4, 0.8), facecolors=color, edgecolor="white",
                           linewidth=0.3)
    ax.set_yticks(range(len(rows)), [r if len(r) < 40 else "…" + r[-39:] for r in rows],
                  fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time since the start of the run (µs)")
    ax.set_ylabel("compiled op")
    ax.set_title(title or "commands over time, coloured by original layer")
    ax.spines[["top", "right"]].set_visible(False)
    if legend:
        handles = [Patch(facecolor=cmap[k], label=k if len(k) < 40 else "…" + k[-39:])
                   for k in dict.fromkeys(segments["layer"])]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
                  frameon=False, title="original layer")
    return ax


def timeline_stats(events: pd.DataFrame, joined: pd.DataFrame) -> pd.DataFrame:
    """Each original layer's place in a run, over all runs.

    ``events``: trace events (``event_id``, ``run``, ``start_ns``); ``joined``: the
    attribution's long form (``event_id``, ``layer``, ``attributed_ns``). An event shared by
    several layers is cut into consecutive segments in the join's order (as
    :func:`timeline_segments` does). For each run and layer, the layer starts at its first
    segment (from the run's first event) and takes the sum of its attributed time.
    Returns one row per layer, by median start: ``layer`` (str), ``runs`` (int64),
    ``start_us`` (median start), ``dur_us`` (median time), ``min_us`` / ``max_us`` (fewest /
    most time in one run), all float64 microseconds.
    """
    ev = events[["event_id", "run", "start_ns"]]
    t0 = ev.groupby("run")["start_ns"].transform("min")
    ev = ev.assign(offset_ns=ev["start_ns"] - t0)
    j = joined[["event_id", "layer", "attributed_ns"]].merge(ev, on="event_id")
    within = j.groupby("event_id", sort=False)["attributed_ns"].cumsum() - j["attributed_ns"]
    j = j.assign(offset_ns=j["offset_ns"] + within)
    per = j.groupby(["run", "layer"], observed=True).agg(
        start_ns=("offset_ns", "min"), dur_ns=("attributed_ns", "sum")).reset_index()
    g = per.groupby("layer", observed=True)
    out = pd.DataFrame({
        "runs": g["run"].nunique().astype("int64"),
        "start_us": g["start_ns"].median() / 1e3,
        "dur_us": g["dur_ns"].median() / 1e3,
        "min_us": g["dur_ns"].min() / 1e3,
        "max_us": g["dur_ns"].max() / 1e3,
    }).reset_index()
    out["layer"] = out["layer"].astype(str)
    return out.sort_values(["start_us", "layer"], kind="stable").reset_index(drop=True)


def plot_timeline_stats(stats: pd.DataFrame, *, ax: Axes | None = None,
                        colors: Mapping[str, Any] | None = None, title: str | None = None
                        ) -> Axes:
    """The median run as a timeline: one row per layer (:func:`timeline_stats`), a bar from
    its median start lasting its median time, and a whisker from its fewest to its most
    microseconds in any run."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.34 * len(stats) + 1.6))
    names = stats["layer"].tolist()
    cmap = dict(colors) if colors else layer_colors(names)
    y = range(len(stats))
    ax.barh(y, stats["dur_us"], left=stats["start_us"], color=[cmap.get(n, "0.6") for n in names],
            edgecolor="white", linewidth=0.5)
    end = stats["start_us"] + stats["dur_us"]
    # the axis fits the median run; a whisker reaching past it (a warm-up run, say) is cut at
    # the edge with an arrow and its value written there
    right = float((stats["start_us"] + stats["max_us"].clip(
        upper=3 * stats["dur_us"])).max()) * 1.1 if len(stats) else 1.0
    right = max(right, float(end.max()) * 1.1 if len(stats) else 1.0)
    tip = (stats["start_us"] + stats["max_us"]).clip(upper=right)
    lo = (stats["dur_us"] - stats["min_us"]).clip(lower=0)
    hi = (tip - end).clip(lower=0)
    ax.errorbar(end, list(y), xerr=[lo, hi], fmt="none", ecolor="0.15", elinewidth=1,
                capsize=3)
    for i, (full, at) in enumerate(zip(stats["start_us"] + stats["max_us"], tip)):
        if full > at:
            ax.annotate(f"{stats['max_us'].iloc[i]:,.0f} µs", xy=(at, i), xytext=(-3, 3),
                        textcoords="offset points", ha="right", va="bottom", fontsize=7,
                        arrowprops=None)
            ax.plot([at], [i], marker=">", color="0.15", markersize=4)
    ax.set_xlim(0, right)
    ax.set_yticks(list(y), [n if len(n) < 40 else "…" + n[-39:] for n in names], fontsize=8)
    ax.invert_yaxis()
    runs = int(stats["runs"].max()) if len(stats) else 0
    ax.set_xlabel("time since the start of the run (µs)")
    ax.set_ylabel("original layer")
    ax.set_title(title or f"the median of {runs} runs: when each layer runs and for how long")
    ax.legend(handles=[Patch(facecolor="0.6", label="median start and time of the layer"),
                       Line2D([], [], color="0.15", marker="|", markersize=8, lw=1,
                              label="its time: fewest to most µs in one run")],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def plot_policy_split(splits: Mapping[str, pd.Series], *, ax: Axes | None = None,
                      title: str | None = None, unit: str = "us") -> Axes:
    """Stacked bars: how one fused op's time is split over its source ops by each policy.

    ``splits`` maps a policy name to a Series (index: source op or layer name, values: ns).
    """
    names = list(dict.fromkeys(n for s in splits.values() for n in s.index))
    cmap = layer_colors(names)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1.0 + 0.6 * len(splits)))
    scale = {"ms": 1e-6, "us": 1e-3}[unit]
    for i, s in enumerate(splits.values()):
        left = 0.0
        for n in names:
            v = float(s.get(n, 0)) * scale
            ax.barh(i, v, left=left, color=cmap[n], edgecolor="white")
            if v > 0:
                ax.text(left + v / 2, i, f"{v:.0f}", ha="center", va="center", fontsize=7)
            left += v
    ax.set_yticks(range(len(splits)), list(splits), fontsize=9)
    ax.set_ylabel("policy")
    ax.invert_yaxis()
    ax.set_xlabel(f"attributed time ({'µs' if unit == 'us' else unit}, total over all runs)")
    ax.set_title(title or "one fused op's time, split by each policy")
    ax.legend(handles=[Patch(facecolor=cmap[n], label=n) for n in names], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


OUTLIER_FACTOR = 3.0
"""A run of a layer is flagged as an outlier when it took more than this many times the
layer's median run."""


def layer_run_stats(att: Any, *, skip_runs: int = 0) -> pd.DataFrame:
    """Robust per-layer statistics over runs, from ``att.per_run("layer")``.

    Every run counts (a run in which a layer has no time counts 0 ns); the first
    ``skip_runs`` runs of the attribution are left out as warm-up. Returns one row per layer:
    ``layer`` (str), ``median_ms`` (median time per run), ``p25_ms``, ``p75_ms``,
    ``runs`` (int, runs counted), ``outlier_runs`` (int, runs over :data:`OUTLIER_FACTOR`
    times the median), ``max_ms``; sorted by ``median_ms``, largest first.
    """
    import numpy as np

    per = att.per_run("layer")
    runs = [int(r) for r in att.run_values()][skip_runs:]
    cols = ["layer", "median_ms", "p25_ms", "p75_ms", "runs", "outlier_runs", "max_ms"]
    if not runs or not len(per):
        return pd.DataFrame(columns=cols)
    per = per[per["run"].isin(runs)]
    grid = per.pivot_table(index="layer", columns="run", values="ns", aggfunc="sum",
                           fill_value=0).reindex(columns=runs, fill_value=0)
    ms = grid.to_numpy(dtype=np.float64) / 1e6
    median = np.median(ms, axis=1)
    out = pd.DataFrame({
        "layer": grid.index.astype(str), "median_ms": median,
        "p25_ms": np.percentile(ms, 25, axis=1), "p75_ms": np.percentile(ms, 75, axis=1),
        "runs": len(runs),
        "outlier_runs": (ms > OUTLIER_FACTOR * median[:, None]).sum(axis=1).astype(int),
        "max_ms": ms.max(axis=1)})
    return out.sort_values("median_ms", ascending=False, kind="stable").reset_index(drop=True)


def plot_layer_median(att: Any, *, skip_runs: int = 0, top: int = 15, ax: Axes | None = None,
                      title: str | None = None) -> Axes:
    """The headline figure: each layer's median time per run (robust to a slow run), with a
    whisker from the 25th to the 75th percentile of its runs; layers with outlier runs (over
    :data:`OUTLIER_FACTOR` times their median) are marked ``▲`` and counted. The subtitle says
    which statistic is drawn, over how many runs, and how many were skipped as warm-up.
    Returns the Axes."""
    from toolkit.viz.style import layer_label

    stats = layer_run_stats(att, skip_runs=skip_runs).head(top)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.34 * len(stats) + 1.6))
    names = [layer_label(n) for n in stats["layer"]]
    colors = layer_colors(names)
    y = range(len(stats))
    ax.barh(y, stats["median_ms"], color=[colors[n] for n in names])
    ax.errorbar(stats["median_ms"], y, xerr=[stats["median_ms"] - stats["p25_ms"],
                                              stats["p75_ms"] - stats["median_ms"]],
                fmt="none", ecolor="0.25", elinewidth=1, capsize=2)
    labels = [n if len(n) < 40 else n[:19] + "…" + n[-19:] for n in names]
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    top_median = float(stats["median_ms"].max()) if len(stats) else 0.0
    if top_median > 0:  # scaled to the medians: a noisy layer's whisker runs off the edge
        ax.set_xlim(0, 1.6 * top_median)
    ax.set_xlabel("time per inference (ms): median over runs, whisker p25-p75 (clipped)")
    ax.set_ylabel("original layer")
    runs = int(stats["runs"].iloc[0]) if len(stats) else 0
    skipped = f", first {skip_runs} skipped as warm-up" if skip_runs else ""
    flagged = int((stats["outlier_runs"] > 0).sum())
    ax.set_title(title or "time per original layer", pad=32)
    # two short lines, narrower than the axes: the figure's width does not follow the counts
    ax.text(0, 1.01, f"median of {runs} runs{skipped}\n▲k: k runs over "
            f"{OUTLIER_FACTOR:g}x the layer's median ({flagged} layer(s))",
            transform=ax.transAxes, fontsize=9, color="0.3", va="bottom")
    # the outlier marks beside the bars, inside the axes (in the tick labels they made the
    # figure's width follow which layers had outlier runs)
    for yi, (med, k) in enumerate(zip(stats["median_ms"], stats["outlier_runs"])):
        if k:
            ax.annotate(f"▲{k}", (float(med), yi), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=8, color="0.25")
    return ax
