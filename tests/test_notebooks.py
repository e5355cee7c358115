"""The notebooks run top to bottom (their cells assert the key results)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
import pytest

from toolkit.util.nbrun import execute_notebook
from toolkit.util.nbstrip import pre_save_hook, strip_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_there() -> None:
    assert [p.name for p in NOTEBOOKS] == ["01_provenance_tables.ipynb",
                                           "02_runtime_attribution.ipynb",
                                           "03_partition_experiments.ipynb",
                                           "04_executorch.ipynb",
                                           "05_onnx.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "notebooks are committed without outputs"
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
