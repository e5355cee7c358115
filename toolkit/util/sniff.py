"""What kind of file a path names, from its first bytes (and, for folders, what they hold).

Used to say "this is a model, not a trace (arguments swapped?)" when a user passes one kind
of file where another is expected, instead of the reader's own complaint about bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["path_kind", "KIND_NAMES"]

#: A phrase per kind, for messages: "this is <phrase>".
KIND_NAMES = {
    "model": "a model file",
    "compiled": "a compiled output folder (toolkit compile -o)",
    "folder": "a folder",
    "npz": "an .npz array archive",
    "npy": "a single .npy array",
    "connection": "a connection file of a partitioned model",
    "part": "a .part partition file",
}

_MODEL_IDENTIFIERS = (b"TFL3", b"CIR0")


def path_kind(path: str | os.PathLike[str]) -> str | None:
    """Return the kind of what ``path`` names, or None when it is not one the toolkit knows
    by its bytes (or cannot be read): ``"model"`` (a .tflite/.circle FlatBuffer by its file
    identifier, an .onnx/.caffemodel/.prototxt by its suffix), ``"compiled"`` (a folder holding
    ``*_debug.xml``), ``"folder"`` (any
    other folder), ``"npz"``, ``"npy"``, ``"connection"`` (``.conn.json``/``.conn.ini``) or
    ``"part"`` (``.part``). Never raises."""
    p = Path(path)
    try:
        if p.is_dir():
            if any(p.glob("*_debug.xml")):
                return "compiled"
            return "folder"
        if not p.is_file():
            return None
        name = p.name.lower()
        if name.endswith((".conn.json", ".conn.ini")):
            return "connection"
        if name.endswith(".part"):
            return "part"
        if name.endswith((".onnx", ".caffemodel", ".prototxt")):
            return "model"
        with open(p, "rb") as f:
            head = f.read(16)
    except (OSError, ValueError):
        return None
    if len(head) >= 8 and head[4:8] in _MODEL_IDENTIFIERS:
        return "model"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")) and p.suffix.lower() == ".npz":
        return "npz"
    return None
