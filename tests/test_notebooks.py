"""The notebooks run top to bottom (their cells assert the key results)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from toolkit.util.nbrun import execute_notebook

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
