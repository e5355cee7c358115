"""The partition explorer's widget: no pyplot state, one run per change, debounced text."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

pytest.importorskip("ipywidgets")

import toolkit as tk
from toolkit.viz.partition_explorer import experiment, explorer, figure_png

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"


@pytest.fixture(scope="module")
def cnn() -> tk.Model:
    return tk.load(SAMPLES / "cnn.tflite")


def _controls(box):  # type: ignore[no-untyped-def]
    c = box.controls
    return c["backends"], c["default"], c["comply"], c["opcode"]


def test_figure_is_not_a_pyplot_figure(cnn: tk.Model) -> None:
    plt.close("all")
    ex = experiment(cnn, backends=["cpu", "npu"], default="npu", opcode={"SOFTMAX": "cpu"},
                    repeat=1)
    fig = ex.figure()
    assert plt.get_fignums() == []          # never registered with pyplot
    assert len(fig.axes) == 3
    png = figure_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") > 600   # a real, full-width picture


def test_each_change_runs_once_and_shows_a_complete_figure(cnn: tk.Model) -> None:
    plt.close("all")
    box = explorer(cnn, backends=("cpu", "npu"), default="npu", repeat=1)
    status, picture = box.status, box.figure
    assert status.value.startswith("run 1:")
    first = picture.value
    backends_box, default_dd, comply, rules = _controls(box)
    default_dd.value = "cpu"
    assert status.value.startswith("run 2:")
    assert picture.value != first and picture.value[:8] == b"\x89PNG\r\n\x1a\n"
    rules["ADD"].value = "npu"
    assert status.value.startswith("run 3:")
    assert box.experiment.spec.opcode == {"ADD": "npu"}
    # a new backend list re-runs once, although every dropdown gets new options
    backends_box.value = "npu,cpu,dsp"
    assert status.value.startswith("run 4:")
    assert list(default_dd.options) == ["npu", "cpu", "dsp"]
    assert box.experiment.spec.backends == ["npu", "cpu", "dsp"]
    assert plt.get_fignums() == []
    # the text field only reports its value on Enter (or when it loses focus)
    assert backends_box.continuous_update is False
    # every control is usable again after a run
    assert not any(c.disabled for c in (backends_box, default_dd, comply, *rules.values()))


def test_bad_backends_are_reported_not_raised(cnn: tk.Model) -> None:
    box = tk.explore(SAMPLES / "cnn.tflite", ["cpu", "npu"], "npu", repeat=1)   # a path will do
    assert box.experiment.verified and len(box.experiment.model.graph) == len(cnn.graph)
    status = box.status
    backends_box = box.controls["backends"]
    backends_box.value = " , "
    assert "no backend" in status.value
    backends_box.value = "cpu,cpu"
    assert "error" in status.value



def test_comply_switches_which_rules_are_live(cnn: tk.Model) -> None:
    box = explorer(cnn, backends=("cpu", "npu"), default="npu", repeat=1)
    left = box.children[0].children[0]
    rules = left.children[4]
    c = box.controls
    assert list(rules.children) == list(c["opcode"].values())
    c["opcode"]["ADD"].value = "cpu"
    assert box.experiment.spec.opcode == {"ADD": "cpu"}
    c["comply"].value = "opname"           # the [OPCODE] rules leave the screen and the spec
    assert list(rules.children) == list(c["opname"].values())
    assert box.experiment.spec.comply == "opname" and box.experiment.spec.opcode == {}
    c["opname"]["cnn/stem_conv/Conv2D"].value = "cpu"
    assert box.experiment.spec.opname == {"cnn/stem_conv/Conv2D": "cpu"}
    c["comply"].value = "opcode"           # and come back as they were
    assert list(rules.children) == list(c["opcode"].values())
    assert box.experiment.spec.opcode == {"ADD": "cpu"}


def test_controls_sit_beside_the_figure(cnn: tk.Model) -> None:
    box = explorer(cnn, backends=("cpu", "npu"), default="npu", repeat=1)
    row, table = box.children
    left, right = row.children
    assert table is box.table
    assert box.controls["backends"] in left.children and box.figure in right.children
    assert left.layout.width == "330px"
    # the figure fits the rest of a 1280-pixel window at its natural size or less
    png = box.figure.value
    width = int.from_bytes(png[16:20], "big")
    height = int.from_bytes(png[20:24], "big")
    assert width > 600 and height / width < 0.75


def test_export_goes_to_a_scratch_folder(cnn: tk.Model, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    box = explorer(cnn, backends=("cpu", "npu"), default="npu", repeat=1)
    box.controls["export"].click()
    written = box.export_dir / "experiment.part"
    assert written.is_file() and "wrote" in box.status.value
    assert not list(tmp_path.iterdir()), "nothing is written into the working folder"
    assert written.read_text() == box.experiment.part_file_text


def test_nothing_cut_draws_no_empty_axes(cnn: tk.Model) -> None:
    ex = experiment(cnn, backends=["cpu", "npu"], default="npu", repeat=1)
    assert len(ex.result.parts) == 1
    fig = ex.figure()
    assert len(fig.axes) == 2                      # the graph and the time per backend
    assert all(a.has_data() for a in fig.axes)
    assert "nothing is cut" in fig.axes[0].get_title()
