"""Draw a graph with matplotlib, ops coloured by origin, backend or any value.

The layout is layered: an op's column is its depth (longest path from a graph input), ops of
one column are stacked. An op with several origins is drawn as a box striped with the colour
of each origin, so a fused op shows at a glance which source ops it came from. An edge that
skips levels (a residual connection) is routed beside the boxes it passes, never under them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Patch, Rectangle

from toolkit.ir import Graph, Model, Op
from toolkit.viz.style import PALETTE

__all__ = ["layout", "draw_graph", "origin_colors", "palette", "SKIP_COLOR", "LABEL_SIZE"]

SKIP_COLOR = "#7b3294"
"""Colour of edges that skip levels (residual connections)."""
LABEL_SIZE = 10
"""Font size (points) of the text in each op's box: legible at notebook width (figures are
at least 1 inch per column of ops, so a box's label is never scaled below it)."""


def palette(n: int) -> list[Any]:
    """Return ``n`` colours: the 20 of :data:`toolkit.viz.style.PALETTE`, which stay distinct
    from one another, then the same hues lightened and darkened in turn (a legend of more than
    20 entries is read by its labels)."""
    from matplotlib.colors import to_rgb

    base = [to_rgb(c) for c in PALETTE]
    out: list[Any] = []
    for i in range(n):
        r, g, b = base[i % len(base)]
        round_ = i // len(base)
        if round_ == 0:
            out.append((r, g, b))
        else:  # alternate lighter and darker versions of the hue
            f = 0.45 if round_ % 2 else -0.35
            out.append(tuple(c + (1 - c) * f if f > 0 else c * (1 + f) for c in (r, g, b)))
    return out


def origin_colors(origin_ids: list[int] | set[int]) -> dict[int, Any]:
    """Return a colour per origin id (stable: sorted ids get palette colours in order)."""
    ids = sorted(origin_ids)
    return dict(zip(ids, palette(len(ids))))


def layout(graph: Graph) -> dict[Op, tuple[float, float]]:
    """Return (x, y) per op: x = depth from the inputs, y = rank within the column."""
    depth: dict[Op, int] = {}
    for op in graph.ops:
        d = 0
        for t in op.inputs:
            if t is not None and t.producer is not None and t.producer in depth:
                d = max(d, depth[t.producer] + 1)
        depth[op] = d
    columns: dict[int, list[Op]] = {}
    for op in graph.ops:
        columns.setdefault(depth[op], []).append(op)
    pos = {}
    for d, ops in columns.items():
        n = len(ops)
        for i, op in enumerate(ops):
            pos[op] = (float(d), (n - 1) / 2 - i)
    return pos


def draw_graph(graph: Graph | Model, *, color_by: str | Mapping[Op, Any] |
               Callable[[Op], Any] = "origin", ax: Axes | None = None,
               origin_names: Mapping[int, str] | None = None, title: str | None = None,
               colors: Mapping[Any, Any] | None = None, legend: bool = True,
               label: Callable[[Op], str] | None = None, vertical: bool | None = None,
               legend_title: str | None = None) -> Axes:
    """Draw ``graph`` (or a model's main graph) and return the matplotlib Axes.

    ``color_by``: ``"origin"`` (one stripe per origin id, colours from ``colors`` or
    :func:`origin_colors`), ``"type"`` (op type), a mapping op → category, or a function
    op → category (e.g. the backend of a partition). ``label`` gives each box's text
    (default: the op type). ``vertical`` draws depth downwards (default: when the graph is
    more than 12 ops deep). ``legend_title`` names the colours (default from ``color_by``).
    Edges that skip levels are drawn in :data:`SKIP_COLOR` beside the boxes they pass.
    """
    if isinstance(graph, Model):
        if origin_names is None:
            origin_names = graph.source_table
        graph = graph.graph
    pos = layout(graph)
    ncol = max((int(x) for x, _ in pos.values()), default=0) + 1
    nrow = max((sum(1 for p in pos.values() if p[0] == c) for c in range(ncol)), default=1)
    if vertical is None:
        vertical = ncol > 12
    depth_of = {op: int(x) for op, (x, _) in pos.items()}
    if vertical:
        pos = {op: (-y * 1.5, -x * 0.9) for op, (x, y) in pos.items()}
    if ax is None:
        size = (max(5, 1.7 * nrow + 2.5), max(3, 0.62 * ncol + 1)) if vertical else \
            (max(6, 1.7 * ncol), max(2.5, 1.0 * nrow + 1))
        _, ax = plt.subplots(figsize=size)
    w, h = (1.2, 0.5) if vertical else (0.9, 0.5)
    # edges first, under the boxes; an edge skipping levels goes round the boxes between, in
    # its own lane beside the column (vertical) or above the row (horizontal)
    skips = 0
    edge_x = max((p[0] for p in pos.values()), default=0.0) + w / 2
    edge_y = max((p[1] for p in pos.values()), default=0.0) + h / 2
    for op in graph.ops:
        x1, y1 = pos[op]
        for t in op.inputs:
            if t is None or t.producer is None or t.producer not in pos:
                continue
            x0, y0 = pos[t.producer]
            span = depth_of[op] - depth_of[t.producer]
            if span > 1:
                lane = 0.22 + 0.16 * (skips % 4)
                skips += 1
                if vertical:   # out of the right side, down the lane, back in
                    lx = edge_x + lane
                    path = [(x0 + w / 2, y0), (lx, y0), (lx, y1)]
                    end = (x1 + w / 2, y1)
                else:          # out of the top, along the lane, back down
                    ly = edge_y + lane
                    path = [(x0, y0 + h / 2), (x0, ly), (x1, ly)]
                    end = (x1, y1 + h / 2)
                ax.plot(*zip(*path), color=SKIP_COLOR, lw=1.2, solid_joinstyle="round")
                ax.annotate("", xy=end, xytext=path[-1],
                            arrowprops={"arrowstyle": "->", "color": SKIP_COLOR, "lw": 1.2,
                                        "shrinkA": 0, "shrinkB": 0})
                continue
            if vertical:
                xy, xytext = (x1, y1 + h / 2), (x0, y0 - h / 2)
            else:
                xy, xytext = (x1 - w / 2, y1), (x0 + w / 2, y0)
            ax.annotate("", xy=xy, xytext=xytext,
                        arrowprops={"arrowstyle": "->", "color": "0.45", "lw": 0.8})
    cats: dict[Any, Any] = {}
    if color_by == "origin":
        cmap = dict(colors) if colors else origin_colors(set(graph.live_origins()) |
                                                         set(graph.removed_origins))
        for op in graph.ops:
            x, y = pos[op]
            org = sorted(op.origins)
            sw = w / len(org)
            for i, o in enumerate(org):
                ax.add_patch(Rectangle((x - w / 2 + i * sw, y - h / 2), sw, h,
                                       facecolor=cmap.get(o, "0.8"), edgecolor="none"))
                cats[o] = cmap.get(o, "0.8")
            ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                        facecolor="none", edgecolor="0.2", lw=0.8))
        names = origin_names or {}
        handles: list[Artist] = [Patch(facecolor=c, label=f"{o}: {names.get(o, '')}"[:40])
                                 for o, c in sorted(cats.items())]
    else:
        key: Callable[[Op], Any]
        if color_by == "type":
            def key(op: Op) -> Any:
                return op.kind
        elif callable(color_by):
            key = color_by
        else:
            mapping = cast(Mapping[Op, Any], color_by)

            def key(op: Op) -> Any:
                return mapping.get(op)
        values = [key(op) for op in graph.ops]
        uniq = list(dict.fromkeys(values))
        cmap = dict(colors) if colors else dict(zip(uniq, palette(len(uniq))))
        for op, v in zip(graph.ops, values):
            x, y = pos[op]
            ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                        facecolor=cmap.get(v, "0.8"), edgecolor="0.2", lw=0.8))
        handles = [Patch(facecolor=cmap.get(v, "0.8"), label=str(v)) for v in uniq]
    for op in graph.ops:
        x, y = pos[op]
        text = label(op) if label else op.kind
        ax.text(x, y, text, ha="center", va="center", fontsize=LABEL_SIZE,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.75})
    xs = [p[0] for p in pos.values()] or [0]
    ys = [p[1] for p in pos.values()] or [0]
    # room for skip edges beside (vertical) or above (horizontal) the boxes
    ax.set_xlim(min(xs) - 0.8, max(xs) + (1.4 if vertical and skips else 0.8))
    ax.set_ylim(min(ys) - 0.8, max(ys) + (1.3 if not vertical and skips else 0.8))
    if vertical:
        ax.set_xticks([])
        ax.set_ylabel("depth (ops from the inputs, downwards)")
        ax.set_yticks([])
    else:
        ax.set_xlabel("depth (ops from the inputs)")
        ax.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    what = legend_title or {"origin": "source op (origin)", "type": "op type"}.get(
        color_by if isinstance(color_by, str) else "", "category")
    ax.set_title(title or f"{graph.name or 'graph'}: {len(graph.ops)} ops coloured by {what}")
    if skips:
        handles.append(Line2D([], [], color=SKIP_COLOR, lw=1.2,
                              label=f"edge skipping levels ({skips})"))
    if legend and handles:
        ax.legend(handles=handles[:31], loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize=9, frameon=False, title=what)
    return ax
