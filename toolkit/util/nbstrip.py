"""Notebooks as they are committed: no outputs, no execution counts, no per-run metadata.

:func:`strip_notebook` is what ``nbstripout`` does, for the notebooks of this repository (a
test checks every committed notebook is already stripped). :func:`pre_save_hook` applies it
when JupyterLab saves a notebook (``make lab`` installs it), so running the notebooks, or
JupyterLab's autosave, never leaves them dirty in git.
"""

from __future__ import annotations

from typing import Any

__all__ = ["strip_notebook", "pre_save_hook", "CELL_KEYS_KEPT", "NOTEBOOK_KEYS_KEPT"]

CELL_KEYS_KEPT = ("tags", "jupyter")
"""Cell metadata kept (a cell's tags and hidden-input flags are content, not a run's trace)."""

NOTEBOOK_KEYS_KEPT = ("kernelspec", "language_info")
"""Notebook metadata kept (``language_info`` is cut to its ``name``)."""


def strip_notebook(nb: dict[str, Any]) -> dict[str, Any]:
    """Strip the notebook ``nb`` (nbformat 4, as JSON, a dict) in place and return it: code
    cells lose their outputs and execution counts; cells keep only the metadata in
    :data:`CELL_KEYS_KEPT`; the notebook keeps only :data:`NOTEBOOK_KEYS_KEPT`."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = cell.get("metadata", {})
        cell["metadata"] = {k: v for k, v in meta.items() if k in CELL_KEYS_KEPT}
    meta = nb.get("metadata", {})
    kept = {k: v for k, v in meta.items() if k in NOTEBOOK_KEYS_KEPT}
    if isinstance(kept.get("language_info"), dict):
        kept["language_info"] = {"name": kept["language_info"].get("name", "python")}
    nb["metadata"] = kept
    return nb


def pre_save_hook(model: dict[str, Any], **kwargs: Any) -> None:
    """A Jupyter server ``ContentsManager.pre_save_hook``: strip a notebook before it is
    written (``model["content"]`` is the notebook, a dict or an nbformat node)."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    strip_notebook(model["content"])
