"""The interactive timeline (plotly): the median run, cut per layer, with what hover shows."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.errors import ToolkitError
from toolkit.viz.interactive import hover_segments, median_run, plot_timeline_interactive


@pytest.fixture(scope="module")
def att() -> tk.Attribution:
    compiled = tk.compile(tk.load(SAMPLES / "cnn.tflite"), target=tk.Target(buffer_bytes=4096))
    _, trace = tk.run(compiled, trace=True, repeat=5, warmup=1)
    return tk.trace_join(trace, compiled, policy="macs")


def test_median_run_is_the_run_with_the_median_total() -> None:
    ev = pd.DataFrame({"run": [0, 0, 1, 2, 2, 3], "dur_ns": [5, 5, 30, 1, 1, 12]})
    # totals 10, 30, 2, 12: sorted 2 (run 2), 10 (run 0), 12 (run 3), 30: lower middle = run 0
    assert median_run(ev) == 0
    assert median_run(ev[ev["run"] != 3]) == 0  # 2, 10, 30
    with pytest.raises(ToolkitError, match="no events"):
        median_run(ev.iloc[:0])


def test_segments_cut_each_event_by_layer(att: tk.Attribution) -> None:
    events, joined = att.trace.events, att.events()
    run = median_run(events)
    seg = hover_segments(events, joined, run)
    ev = events[events["run"] == run].set_index("event_id")
    # every nanosecond of the run's attributed time is in a segment, event by event
    per_event = seg.groupby("event_id")["dur_us"].sum()
    want = joined[joined["run"] == run].groupby("event_id")["attributed_ns"].sum() / 1e3
    pd.testing.assert_series_equal(per_event.sort_index(), want.sort_index(),
                                   check_names=False)
    # segments of one event sit end to end inside it, and carry its op and command
    first = seg[seg["event_id"] == seg["event_id"].iloc[0]]
    e = ev.loc[int(first["event_id"].iloc[0])]
    t0 = ev["start_ns"].min()
    assert first["start_us"].iloc[0] == pytest.approx((e["start_ns"] - t0) / 1e3)
    np.testing.assert_allclose(first["start_us"].to_numpy()[1:],
                               (first["start_us"] + first["dur_us"]).to_numpy()[:-1])
    assert set(first["op"]) == {e["op_name"]} and set(first["command"]) == {str(e["command_id"])}
    assert len(first) > 1  # the stem conv carries its folded batch norm: several layers
    with pytest.raises(ToolkitError, match="run 99 has no events"):
        hover_segments(events, joined, 99)


def test_figure_hover_shows_layer_op_command_and_time(att: tk.Attribution) -> None:
    fig = plot_timeline_interactive(att)
    run = median_run(att.trace.events)
    seg = hover_segments(att.trace.events, att.events(), run)
    assert {t.name for t in fig.data} == set(seg["layer"])     # a legend entry per layer
    assert sum(float(np.sum(t.x)) for t in fig.data) == pytest.approx(seg["dur_us"].sum())
    for t in fig.data:
        for word in ("layer:", "op:", "command:", "time:", "µs"):
            assert word in t.hovertemplate
        assert all(row[0] == t.name for row in t.customdata)
    lay = fig.layout
    assert f"run {run}" in lay.title.text and "median" in lay.title.text
    assert "(µs)" in lay.xaxis.title.text and lay.yaxis.title.text == "compiled op"
    assert lay.legend.title.text == "original layer"
    other = plot_timeline_interactive(att, run=0)
    assert "run 0 (one of 5 runs)" in other.layout.title.text


def test_without_plotly_the_error_says_how_to_install(att: tk.Attribution,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(ToolkitError, match=r"toolkit\[interactive\]"):
        plot_timeline_interactive(att)
