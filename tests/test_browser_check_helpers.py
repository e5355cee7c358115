"""The browser check's own judgement, without a browser: a half-drawn figure is told apart
from a complete one, and the figure log records what a rendering showed."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.figure import Figure

sys.path.insert(0, str(Path(__file__).resolve().parent / "browser"))

import check_notebooks as bc
import figure_log

HERE = Path(__file__).resolve().parent


def _figure(panels: int, labels: bool = True) -> Figure:
    fig = Figure(figsize=(6, 3))
    gs = fig.add_gridspec(2, 2)
    left = fig.add_subplot(gs[:, 0])
    left.barh(range(5), [3, 1, 4, 1, 5])
    if labels:
        left.set_title("left")
        left.set_xlabel("x (ms)")
    if panels > 1:
        fig.add_subplot(gs[0, 1]).plot([0, 1, 2], [2, 0, 1], lw=6)
        fig.add_subplot(gs[1, 1]).bar(range(4), [1, 3, 2, 4])
    return fig


def _structure(fig: Figure) -> list[dict[str, object]]:
    return [figure_log.axes_structure(ax) for ax in fig.axes]


def test_half_drawn_figure_is_told_apart() -> None:
    full = _structure(_figure(3))
    assert bc.structure_changes(_structure(_figure(3)), full) == []
    gone = bc.structure_changes(_structure(_figure(1, labels=False)), full)
    assert "axes 0: no title" in gone and "axes 0: no xlabel" in gone


def test_measured_data_do_not_look_half_drawn() -> None:
    """One slow run's whisker squeezes every bar: the pixels change, the structure does not."""
    def spread(slowest: float) -> Figure:
        fig = Figure(figsize=(8, 3))
        ax = fig.add_subplot()
        avg = [1.0, 1.1, 0.9, 1.0, 1.05, 1.0]
        ax.bar(range(6), avg, yerr=[[0.1] * 6, [0.2, 0.2, 0.2, slowest, 0.2, 0.2]])
        ax.set_title("spread")
        ax.set_ylabel("ms")
        return fig

    assert bc.structure_changes(_structure(spread(30.0)), _structure(spread(0.2))) == []


def test_compare_figure_reports_axes_size_and_structure() -> None:
    ref, half = _figure(3), _figure(1, labels=False)
    expected = {"sha1": "ref", "width": 240, "height": 120, "axes": 3, "texts": 20,
                "artists": _structure(ref)}
    logged = {"half": {"sha1": "half", "axes": 1, "texts": 5, "artists": _structure(half)},
              "ref": {"sha1": "ref", "axes": 3, "texts": 20, "artists": _structure(ref)}}
    report = bc.Report()
    bc.compare_figure(report, "x", {"sha1": "half", "width": 240, "height": 120}, expected,
                      logged)
    (failure,) = report.failures
    assert "1 axes (off-screen: 3)" in failure and "5 text labels" in failure
    assert "axes 0: no title" in failure
    report = bc.Report()
    bc.compare_figure(report, "x", {"sha1": "ref", "width": 241, "height": 120}, expected,
                      logged)
    assert report.failures == [] and report.notes
    bc.compare_figure(report, "x", {"sha1": "unknown", "width": 1, "height": 1}, expected,
                      logged)
    assert "not a figure the kernel rendered" in report.failures[0]


def test_explorer_states_give_experiment_arguments() -> None:
    start, steps = bc.explorer_steps()
    assert start.kwargs()["opcode"] == {}  # the explorer as it opens: no state forced
    assert len(steps) == 6
    assert steps[2].state.kwargs()["comply"] == "opname"
    assert steps[2].state.kwargs()["opcode"] is None
    assert steps[-1].state.kwargs()["backends"] == ["npu", "cpu"]
    # consecutive states differ, so every interaction must change what is shown
    states = [start, *(s.state for s in steps)]
    assert all(a.kwargs() != b.kwargs() for a, b in itertools.pairwise(states))


def test_figure_log_records_axes_when_rendering_starts(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import runpy

    from matplotlib.backend_bases import FigureCanvasBase

    log = tmp_path / "figures.jsonl"
    monkeypatch.setenv("TOOLKIT_FIGURE_LOG", str(log))
    # the start-up file patches print_figure; monkeypatch puts the original back afterwards
    monkeypatch.setattr(FigureCanvasBase, "print_figure", FigureCanvasBase.print_figure)
    runpy.run_path(str(HERE / "browser" / "figure_log.py"))
    f = Figure(figsize=(2, 1))
    f.add_subplot(121)
    f.add_subplot(122).set_title("t")
    f.canvas.print_figure(io.BytesIO(), format="png", dpi=30)
    (row,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["axes"] == 2 and row["texts"] >= 1
    assert [a["title"] for a in row["artists"]] == [False, True]
    assert (tmp_path / "figures" / f"{row['sha1']}.png").is_file()


def test_chromium_is_installed_with_apt_get_as_root(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "chromium"
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if "install" in cmd:
            target.write_text("")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(bc.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bc.subprocess, "run", fake_run)
    assert bc.ensure_chromium(str(target)) == str(target)
    assert calls == [["apt-get", "-q", "update"],
                     ["apt-get", "-q", "install", "-y", "--no-install-recommends", "chromium"]]
    calls.clear()
    assert bc.ensure_chromium(str(target)) == str(target) and calls == []   # already there


def test_chromium_missing_without_root_says_how_to_get_it(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(bc.os, "geteuid", lambda: 1000)
    with pytest.raises(bc.SetupError, match=r"apt-get install chromium"):
        bc.ensure_chromium(str(tmp_path / "nope"))
    monkeypatch.setattr(bc.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bc.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 100, "", "E: Unable to locate package chromium"))
    with pytest.raises(bc.SetupError, match="Unable to locate package"):
        bc.ensure_chromium(str(tmp_path / "nope"))
