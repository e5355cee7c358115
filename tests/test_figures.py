"""Figures: skip edges drawn beside the boxes, legible labels, the median-run timeline, and a
title, axis labels and a legend on every figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Text

import toolkit as tk
from toolkit.viz.graph import LABEL_SIZE, SKIP_COLOR, draw_graph
from toolkit.viz.plots import (
    plot_layer_bars,
    plot_policy_split,
    plot_timeline_stats,
    timeline_stats,
)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"


def _axes() -> Axes:
    return Figure(figsize=(8, 8)).add_subplot()


def _skip_lines(ax: Axes) -> list:  # type: ignore[type-arg]
    return [ln for ln in ax.get_lines() if to_rgba(ln.get_color()) == to_rgba(SKIP_COLOR)]


def _labels(ax: Axes) -> list[Text]:
    """The boxes' texts (annotations, which draw the arrows, are Text too)."""
    return [t for t in ax.texts if type(t) is Text]


def _box_of(ax: Axes, text: str) -> tuple[float, float]:
    return next(t for t in _labels(ax) if t.get_text().startswith(text)).get_position()


def test_residual_edge_goes_beside_the_column() -> None:
    cnn = tk.load(SAMPLES / "cnn.tflite")
    ax = draw_graph(cnn, color_by="type", ax=_axes(), vertical=True)
    (line,) = _skip_lines(ax)                 # relu -> residual add skips 5 levels
    xs, ys = line.get_data()
    box_x = _box_of(ax, "CONV_2D")[0]
    # the vertical run of the edge lies right of every box (boxes are 1.2 wide)
    assert min(xs[1:]) > box_x + 0.6
    relu_y = _box_of(ax, "RELU")[1]
    add_y = [t.get_position()[1] for t in _labels(ax) if t.get_text() == "ADD"][-1]
    assert ys[0] == pytest.approx(relu_y) and ys[-1] == pytest.approx(add_y)
    assert all(t.get_fontsize() >= LABEL_SIZE >= 9 for t in _labels(ax))
    assert "edge skipping levels (1)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_no_skip_edge_without_skips() -> None:
    from toolkit.builder import ModelBuilder

    mb = ModelBuilder("chain")
    x = mb.input("x", [1, 4])
    y = mb.unary("RELU", mb.unary("ABS", x, name="a"), name="b")
    mb.output(y)
    ax = draw_graph(mb.build(), color_by="type", ax=_axes())
    assert _skip_lines(ax) == []
    assert ax.get_title()


def test_horizontal_skip_edges_run_above_the_boxes() -> None:
    m = tk.load(SAMPLES / "two_branch.tflite")
    ax = draw_graph(m, color_by="type", ax=_axes(), vertical=False)
    lines = _skip_lines(ax)
    assert lines
    top = max(t.get_position()[1] for t in _labels(ax))
    for ln in lines:
        _, ys = ln.get_data()
        assert max(ys) > top + 0.25           # the lane is above the highest box


@pytest.fixture(scope="module")
def attribution():  # type: ignore[no-untyped-def]
    c = tk.compile(tk.load(SAMPLES / "cnn.tflite"), target=tk.Target(buffer_bytes=4096))
    _, trace = tk.run(c, trace=True, repeat=6)
    return tk.trace_join(trace, c)


def test_timeline_stats_is_the_median_run(attribution) -> None:  # type: ignore[no-untyped-def]
    ev, joined = attribution.trace.events, attribution.events()
    stats = timeline_stats(ev, joined).set_index("layer")
    per_run = joined.groupby(["layer", "run"], observed=True)["attributed_ns"].sum() / 1e3
    for layer, row in stats.iterrows():
        times = per_run.loc[layer]
        assert row["runs"] == 6
        assert row["dur_us"] == pytest.approx(float(np.median(times)))
        assert (row["min_us"], row["max_us"]) == pytest.approx((times.min(), times.max()))
    # layers run in model order: median starts grow along the chain of convolutions
    starts = stats["start_us"]
    assert (starts["stem_conv"] < starts["dw_conv"] < starts["project_conv"]
            < starts["softmax"])


def _labelled(ax: Axes) -> None:
    assert ax.get_title(), "title"
    assert "(" in ax.get_xlabel(), f"x label with a unit: {ax.get_xlabel()!r}"
    assert ax.get_ylabel(), "y label"
    assert ax.get_legend() is not None, "legend"


def test_every_plot_has_title_labels_units_and_legend(attribution) -> None:  # type: ignore[no-untyped-def]
    stats = timeline_stats(attribution.trace.events, attribution.events())
    ax = plot_timeline_stats(stats, ax=_axes())
    _labelled(ax)
    assert "µs" in ax.get_xlabel()
    ax = plot_layer_bars(attribution.by_layer(), per_run=True, top=5, ax=_axes())
    _labelled(ax)
    assert "5 of 12 shown" in ax.get_legend().get_texts()[0].get_text()
    splits = {"equal": pd.Series({"a": 10, "b": 10}), "macs": pd.Series({"a": 18, "b": 2})}
    _labelled(plot_policy_split(splits, ax=_axes()))


def test_explorer_figure_is_fully_labelled() -> None:
    from toolkit.viz.partition_explorer import experiment

    ex = experiment(tk.load(SAMPLES / "cnn.tflite"), backends=["cpu", "npu"], default="npu",
                    opcode={"MAX_POOL_2D": "cpu"}, repeat=2)
    graph_ax, cuts_ax, time_ax = ex.figure().axes
    assert graph_ax.get_title() and graph_ax.get_legend() is not None
    assert _skip_lines(graph_ax)
    for ax in (cuts_ax, time_ax):
        assert ax.get_title() and "(" in ax.get_xlabel() and ax.get_ylabel()


def test_layer_run_stats_are_robust_to_a_slow_run() -> None:
    """One run 100x slower moves the median of no layer, is flagged, and skip_runs drops it."""
    import numpy as np

    import toolkit as tk
    from toolkit.viz.plots import OUTLIER_FACTOR, layer_run_stats, plot_layer_median

    compiled = tk.compile(SAMPLES / "cnn.tflite")
    _, trace = tk.run(compiled, trace=True, repeat=7)
    events = trace.to_frame()
    first = events["run"] == events["run"].min()
    slow = events.assign(dur_ns=np.where(first, events["dur_ns"] * 100, events["dur_ns"]))
    # durations grow, so later starts move: keep each run's events after the slow one's end
    att = tk.trace_join(slow.assign(start_ns=slow["start_ns"] * 100), compiled)
    base = tk.trace_join(events.assign(start_ns=events["start_ns"] * 100), compiled)
    stats = layer_run_stats(att).set_index("layer").sort_index()
    calm = layer_run_stats(base).set_index("layer").sort_index()
    assert (stats["runs"] == 7).all()
    assert (stats["outlier_runs"] >= 1).all()            # the slow run, for every layer
    assert (stats["median_ms"] <= OUTLIER_FACTOR * calm["median_ms"] + 1e-9).all()
    skipped = layer_run_stats(att, skip_runs=1).set_index("layer").sort_index()
    assert (skipped["runs"] == 6).all()
    assert (skipped["max_ms"] < stats["max_ms"]).all()
    ax = plot_layer_median(att, skip_runs=1)
    assert "median of 6 runs, first 1 skipped as warm-up" in ax.texts[0].get_text()
    # the subtitle stays well inside the axes' width (room for longer layer names on the
    # left): the figure's width does not follow the counts in it
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    assert (ax.texts[0].get_window_extent(renderer).width
            < 0.7 * ax.get_window_extent(renderer).width)
    assert ax.get_title() and ax.get_xlabel().startswith("time per inference")
    # the outlier marks sit inside the axes: the saved (tight) figure is as wide with them as
    # without (every layer of att is marked when its slow first run counts)
    marked, bare = plot_layer_median(att), plot_layer_median(att)
    assert sum(t.get_text().startswith("▲") for t in marked.texts) == len(stats)
    for mark in [t for t in bare.texts if t.get_text().startswith("▲")]:
        mark.remove()
    widths = []
    for a in (marked, bare):
        a.figure.canvas.draw()
        widths.append(a.figure.get_tightbbox(a.figure.canvas.get_renderer()).width)  # type: ignore[attr-defined]
    assert widths[0] == pytest.approx(widths[1], abs=1.0)


def test_one_style_and_a_palette_that_stays_distinct() -> None:
    import matplotlib as mpl
    from matplotlib.colors import to_rgb

    from toolkit.viz import palette, use_style
    from toolkit.viz.style import PALETTE

    use_style()
    cycle = [c["color"] for c in mpl.rcParams["axes.prop_cycle"]]
    assert cycle == list(PALETTE) and mpl.rcParams["font.size"] >= 10
    colours = [to_rgb(c) for c in palette(20)]
    worst = min(sum((a - b) ** 2 for a, b in zip(x, y)) ** 0.5
                for i, x in enumerate(colours) for y in colours[i + 1:])
    assert worst > 0.12, worst      # no two of the 20 look alike (tab20's pairs are ~0.1)
