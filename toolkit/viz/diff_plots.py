"""The figure of a :class:`~toolkit.trace.views.diff.LayerDiff`: a waterfall of the largest deltas.

From a's time per run (top bar) to b's (bottom bar), each of the ``top`` layers with the
largest ``|delta|`` moves the running total by its delta; the other layers are one bar. Red:
slower beyond noise; green: faster beyond noise; grey: within noise or no verdict (hatched).
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from toolkit.viz.style import layer_label

__all__ = ["plot_diff", "SLOWER", "FASTER", "NOISE"]

SLOWER, FASTER, NOISE, TOTAL = "#d62728", "#2ca02c", "#9a9a9a", "#4c78a8"


def _table(diff: Any, view: str) -> tuple[pd.DataFrame, tuple[str, str], str]:
    if isinstance(diff, pd.DataFrame):
        return diff, ("a", "b"), str(diff.columns[0])
    table = getattr(diff, f"by_{view}")()
    labels = getattr(diff, "labels", ("a", "b"))
    return table, (str(labels[0]), str(labels[1])), str(table.columns[0])


def plot_diff(diff: Any, *, view: str = "layer", top: int = 12, ax: Axes | None = None,
              title: str | None = None) -> Axes:
    """Draw the waterfall of a diff's ``by_<view>()`` table (or of such a table) on ``ax`` (a
    new figure when None); times in ms per run. Returns the Axes."""
    table, (la, lb), label = _table(diff, view)
    t = table.assign(_abs=table["delta_ns"].abs()).sort_values("_abs", ascending=False,
                                                               kind="stable")
    head, rest = t.head(top), t.iloc[top:]
    a_total = float(table["a_mean_ms"].sum())
    b_total = float(table["b_mean_ms"].sum())
    names = [f"{la} (total)"]
    starts, widths, colors, hatches = [0.0], [a_total], [TOTAL], [""]
    level = a_total
    marks = head["beyond_noise"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    for (_, row), marked in zip(head.iterrows(), marks):
        d = float(row["delta_ns"]) / 1e6
        starts.append(level if d >= 0 else level + d)
        widths.append(abs(d))
        colors.append((SLOWER if d > 0 else FASTER) if marked else NOISE)
        hatches.append("" if marked else "//")
        name = layer_label(str(row[label]))
        names.append(name if len(name) < 40 else "…" + name[-39:])
        level += d
    if len(rest):
        d = float(rest["delta_ns"].sum()) / 1e6
        starts.append(level if d >= 0 else level + d)
        widths.append(abs(d))
        colors.append(NOISE)
        hatches.append("..")
        names.append(f"{len(rest)} other {label}s")
        level += d
    names.append(f"{lb} (total)")
    starts.append(0.0)
    widths.append(b_total)
    colors.append(TOTAL)
    hatches.append("")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.34 * len(names) + 1.4))
    y = np.arange(len(names))
    bars = ax.barh(y, widths, left=starts, color=colors, edgecolor="white")
    for bar, hatch in zip(bars, hatches):
        if hatch:
            bar.set_hatch(hatch)
            bar.set_edgecolor("#555555")
    for i in range(1, len(names) - 1):  # delta labels
        sign = "+" if (i <= len(head) and float(head["delta_ns"].iloc[i - 1]) >= 0) or (
            i > len(head) and float(rest["delta_ns"].sum()) >= 0) else "−"
        ax.text(starts[i] + widths[i], i, f" {sign}{widths[i] * 1e3:,.1f} us", va="center",
                fontsize=7)
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time per run (ms, mean over runs)")
    pct = 100 * (b_total - a_total) / a_total if a_total else float("nan")
    ax.set_title(title or f"{la} → {lb}: {b_total - a_total:+.3f} ms per run ({pct:+.1f} %), "
                          f"largest {label} deltas")
    ax.legend(handles=[Patch(color=SLOWER, label="slower, beyond noise"),
                       Patch(color=FASTER, label="faster, beyond noise"),
                       Patch(facecolor=NOISE, hatch="//", edgecolor="#555555",
                             label="within noise / no verdict")],
              loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=7,
              frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return ax
