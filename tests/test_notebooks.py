"""The notebooks run top to bottom, and their key results are checked here.

The notebooks teach; the checks of what they show live in :data:`CHECKS`, a cell per notebook
that the test appends (in memory, never committed) and runs in the same kernel after the last
cell, with every variable the notebook made.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
import pytest

from toolkit.util.nbrun import execute_notebook
from toolkit.util.nbstrip import pre_save_hook, strip_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

CHECKS: dict[str, str] = {
    "01_provenance_tables": """
assert set(examples.index) == {"absorb", "fuse", "replace", "remove"}
assert live | removed == all_sources
assert (per_op["macs"] == ops.loc[per_op.index, "macs"]).all()   # stripes add up to the op
assert [op.origins for op in back.graph.ops] == [op.origins for op in compiled.model.graph.ops]
assert sorted(caffe_model.source_table.values()) == sorted(layers)
assert [t.name for t in caffe_model.graph.inputs] == ["data"]
assert [(t.name, t.shape) for t in caffe_model.graph.outputs] == [("prob", (1, 5))]
assert any(set(v) == {"conv1", "bn1", "scale1", "relu1"} for v in caffe_table["Caffe layers"])
assert list(caffe_compiled.removed()["source_id"]) == [layers.index("drop1")]
""",
    "02_runtime_attribution": """
assert len(trace_from_file.events) == len(events)
assert (stats["runs"] == 20).all() and (stats["min_us"] <= stats["dur_us"]).all()
for policy, split in splits.items():
    assert int(split.sum()) == op_total, policy
summary = att_bad.summary()
assert summary["attributed_ns"] + summary["unattributed_ns"] == summary["total_ns"]
assert abs(side["Vela estimate (NPU)"].sum() - 1) < 1e-9
assert fleet.runs == 6 * 5 and fleet.partitions == 6
assert spread["total_ns"].sum() == fleet_layers["total_ns"].iloc[0]
""",
    "03_partition_experiments": """
first = experiment(inorm, backends=["cpu", "acl_cl"], default="cpu", opcode={"DIV": "acl_cl"})
assert first.verified
assert [(p.backend, p.inputs, p.outputs) for p in first.result.parts] == [
    ("cpu", ["Input"], ["Pow", "Sub"]), ("acl_cl", ["Sub", "Pow"], ["Div"]),
    ("cpu", ["Div"], ["Add_as_terminal"])]
assert ex.verified, ex.max_abs_diff
assert by_backend["total_ns"].sum() == ex.attribution.summary()["total_ns"]
assert ex2.verified
assert (WORK / "cnn.conn.json").is_file() and (WORK / "cnn.conn.ini").is_file()
assert all(np.array_equal(chained[k], direct[k]) for k in direct)
assert box.experiment.verified
""",
    "04_executorch": """
assert (table.loc[table["is_delegated_op"], "module_hierarchy"].map(len) == 0).all()
assert (att.delegate_ops()["xnode"] >= 0).all()   # every per-op event mapped
assert addmm.groupby("run").size().eq(3).all() and len(kept) == loop.runs
""",
    "05_onnx": """
for level, att in levels.items():
    assert len(att.unattributed()) == 0, level
    assert (att.by_layer()["total_ns"] > 0).all(), level
""",
}


def test_the_notebooks_are_there() -> None:
    assert [p.name for p in NOTEBOOKS] == ["01_provenance_tables.ipynb",
                                           "02_runtime_attribution.ipynb",
                                           "03_partition_experiments.ipynb",
                                           "04_executorch.ipynb",
                                           "05_onnx.ipynb",
                                           "06_numerics.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "notebooks are committed without outputs"
    nb.cells.append(nbformat.v4.new_code_cell(CHECKS.get(path.stem, "")))
    execute_notebook(nb, path.parent)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert images, "each notebook shows at least one figure"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_stripped(path: Path) -> None:
    """As nbstripout would leave it: no outputs, execution counts or per-run metadata."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    assert strip_notebook(copy.deepcopy(nb)) == nb, \
        f"{path.name} holds outputs or run metadata: strip it (toolkit.util.nbstrip)"


def test_saving_from_jupyterlab_strips(tmp_path: Path) -> None:
    """make lab's pre-save hook: an executed notebook is saved without its outputs."""
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    nb.cells = nb.cells[:2]
    execute_notebook(nb, NOTEBOOKS[0].parent)
    nb.metadata["widgets"] = {"state": {}}
    nb.cells[1].metadata["ExecuteTime"] = {"end_time": "2026-01-01"}
    content = json.loads(nbformat.writes(nb))
    assert content["cells"][1]["outputs"] or content["cells"][1]["execution_count"]
    model = {"type": "notebook", "content": content}
    pre_save_hook(model, path="notebooks/x.ipynb", contents_manager=None)
    cell = model["content"]["cells"][1]
    assert cell["outputs"] == [] and cell["execution_count"] is None and not cell["metadata"]
    assert set(model["content"]["metadata"]) <= {"kernelspec", "language_info"}


def test_an_executed_notebook_leaves_no_kernel_and_no_socket(tmp_path: Path) -> None:
    """The kernel talks over IPC sockets in a private folder and is stopped afterwards (a
    kernel left running prints "Parent appears to have exited" when the process ends)."""
    import os
    import time

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os; print(os.getpid())")]
    execute_notebook(nb, tmp_path)
    pid = int(nb.cells[0].outputs[0]["text"])
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}")
    assert not list(tmp_path.iterdir()), "no kernel-ipc-* socket in the working folder"
