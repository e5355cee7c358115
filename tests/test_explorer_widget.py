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
    backends_box, default_dd = box.children[0].children
    comply = box.children[1]
    opcode_rules = box.children[2].children[0].children
    return backends_box, default_dd, comply, {d.description: d for d in opcode_rules}


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
    status, picture = box.children[4], box.children[6]
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
    status = box.children[4]
    backends_box = box.children[0].children[0]
    backends_box.value = " , "
    assert "no backend" in status.value
    backends_box.value = "cpu,cpu"
    assert "error" in status.value

