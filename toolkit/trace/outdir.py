"""Provenance from files: a compiled output folder or a model path, for ``trace-join``."""

from __future__ import annotations

import os
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.provenance import Provenance

__all__ = ["load_provenance"]

_MODEL_SUFFIXES = (".circle", ".tflite")


def load_provenance(path: str | os.PathLike[str]) -> Provenance:
    """Return the provenance stored at ``path``.

    ``path`` is a folder written by ``CompiledModel.save`` / ``toolkit compile -o``, or a
    ``.circle``/``.tflite`` file: one with a ``<stem>_debug.xml`` beside it is read back as
    that compiled output; any other model is compiled now with the default passes and target
    (as ``toolkit compile`` would), so a trace of that compile joins to it.

    Raises:
        ToolkitError: the path does not exist, is not a model or compiled folder, or its files
            do not belong together.
    """
    from toolkit.compiler import compile_model, load_compiled

    p = Path(path)
    if p.is_dir():
        return load_compiled(p)
    if not p.is_file():
        raise ToolkitError("no such file or folder", where=str(p),
                           fix="pass the -o folder of `toolkit compile` or a model file")
    if p.suffix not in _MODEL_SUFFIXES:
        raise ToolkitError(f"cannot take provenance from a {p.suffix or 'suffix-less'} file",
                           where=str(p), fix="pass a compiled output folder, a .circle or a "
                                              ".tflite")
    if (p.parent / f"{p.stem}_debug.xml").is_file():
        return load_compiled(p.parent, stem=p.stem)
    from toolkit.formats.flatbuffer_read import load

    return compile_model(load(p))
