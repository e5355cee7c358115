"""What a "model" argument may be: one set of rules for every library function and CLI verb.

A user passes a model in many spellings: a :class:`~toolkit.ir.Model`, a
:class:`~toolkit.compiler.CompiledModel`, a :class:`~toolkit.partitioner.PartitionResult`, a
``.tflite``/``.circle`` path, the output folder of ``toolkit compile -o`` (or the ``.circle``
inside it, which has ``<stem>_debug.xml`` beside it), or a ``.conn.json``/``.conn.ini``
connection file of a partitioned model. :func:`resolve_model` tells them apart once and
returns a :class:`ModelArg`; each entry point says which kinds it takes, and anything else gets
the same message: what was passed, what the entry point takes, how to fix it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from toolkit.errors import ToolkitError
from toolkit.ir import Model
from toolkit.util.files import os_error

if TYPE_CHECKING:
    from toolkit.compiler import CompiledModel
    from toolkit.partitioner import PartitionResult

__all__ = ["ModelArg", "Kind", "KINDS", "resolve_model", "as_model", "as_compiled", "as_partition",
           "is_connection_path", "load_model_file"]

Kind = Literal["model", "compiled", "partition", "connection"]
#: Every kind, in the order the messages list them.
KINDS: tuple[Kind, ...] = ("model", "compiled", "partition", "connection")

MODEL_SUFFIXES = (".tflite", ".circle", ".prototxt", ".caffemodel", ".onnx")
_CAFFE_SUFFIXES = (".prototxt", ".caffemodel")
CONNECTION_SUFFIXES = (".conn.json", ".conn.ini")

_SPELLINGS: dict[Kind, str] = {
    "model": "a Model or a model file (.tflite, .circle, .prototxt, .caffemodel, .onnx)",
    "compiled": "a CompiledModel or a compiled output folder (toolkit compile -o)",
    "partition": "a PartitionResult",
    "connection": "a .conn.json/.conn.ini connection file of a partitioned model",
}


@dataclass(frozen=True)
class ModelArg:
    """A resolved model argument.

    Attributes:
        kind: ``"model"`` (``value`` is a :class:`Model`), ``"compiled"`` (a
            ``CompiledModel``), ``"partition"`` (a ``PartitionResult``) or ``"connection"``
            (the :class:`~pathlib.Path` of a connection file).
        value: the object of that kind (files are loaded; connection files are not read).
        where: what the user passed, for messages (a path, or the type's name).
    """

    kind: Kind
    value: Any
    where: str

    @property
    def model(self) -> Model:
        """The model to run or inspect: the Model, or a compiled model's compiled graph."""
        if self.kind == "model":
            return self.value
        if self.kind == "compiled":
            return self.value.model
        if self.kind == "partition":
            return self.value.source
        raise ToolkitError("a connection file holds several part models, not one",
                           where=self.where, fix="pass one part's .circle file, or the source "
                                                 "model")


def is_connection_path(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` names a ``.conn.json`` or ``.conn.ini`` file (by its name)."""
    return Path(path).name.lower().endswith(CONNECTION_SUFFIXES)


def _accepted(accept: tuple[Kind, ...]) -> str:
    return "; or ".join(_SPELLINGS[k] for k in accept)


def _refuse(what: str, where: str, purpose: str, accept: tuple[Kind, ...]) -> ToolkitError:
    return ToolkitError(f"{purpose} cannot take {what}", where=where,
                        fix=f"pass {_accepted(accept)}")


def _kind_of_object(obj: Any) -> Kind | None:
    if isinstance(obj, Model):
        return "model"
    from toolkit.compiler.compiled import CompiledModel
    from toolkit.partitioner import PartitionResult

    if isinstance(obj, CompiledModel):
        return "compiled"
    if isinstance(obj, PartitionResult):
        return "partition"
    return None


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:  # a name too long, a folder that cannot be read
        return False


def _resolve_path(p: Path, purpose: str, accept: tuple[Kind, ...]) -> ModelArg:
    where = str(p)
    if "\0" in where:
        raise ToolkitError("the path contains a NUL byte", where=repr(where),
                           fix="pass a real file name")
    try:
        mode: int | None = os.stat(p).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:  # permission, a name too long, a link loop ...
        raise os_error(p, e, what="model path", fix=f"pass {_accepted(accept)}") from None
    if is_connection_path(p):
        if "connection" not in accept:
            raise _refuse("a connection file", where, purpose, accept)
        if mode is None:
            raise ToolkitError("no such connection file", where=where,
                               fix="pass the .conn.json written by `toolkit partition`")
        return ModelArg("connection", p, where)
    if mode is not None and stat.S_ISDIR(mode):
        if "compiled" not in accept:
            raise _refuse("a folder", where, purpose, accept)
        from toolkit.compiler import load_compiled

        return ModelArg("compiled", load_compiled(p), where)
    if mode is None:
        from toolkit.util.suggest import path_suggestion

        near = path_suggestion(p)
        raise ToolkitError("no such file or folder", where=where,
                           fix=f"did you mean {near}?" if near else
                           f"check the path; pass {_accepted(accept)}")
    if p.suffix.lower() not in MODEL_SUFFIXES:
        raise _refuse(f"a {p.suffix or 'suffix-less'} file", where, purpose, accept)
    if "compiled" in accept and _is_file(p.parent / f"{p.stem}_debug.xml"):
        from toolkit.compiler import load_compiled

        return ModelArg("compiled", load_compiled(p.parent, stem=p.stem), where)
    if "model" not in accept:
        raise _refuse("a plain model file", where, purpose, accept)
    return ModelArg("model", load_model_file(p), where)


def load_model_file(path: str | os.PathLike[str], *,
                    weights: str | os.PathLike[str] | None = None) -> Model:
    """Load a model file by its suffix: ``.tflite``/``.circle`` (FlatBuffers), ``.prototxt``
    (Caffe text, blobs from ``weights``), ``.caffemodel`` (Caffe binary) or ``.onnx``.

    Raises:
        ToolkitError: an unknown suffix, ``weights`` for a file that takes none, or what the
            reader raises for a bad file.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in _CAFFE_SUFFIXES:
        from toolkit.importers.caffe import load_caffe

        return load_caffe(p, weights)
    if suffix == ".onnx" and weights is None:
        from toolkit.importers.onnx import load_onnx

        return load_onnx(p)
    if weights is not None:
        raise ToolkitError(f"weights= is for a Caffe .prototxt, not a {suffix or 'suffix-less'}"
                           " file", where=str(p), fix="leave weights out")
    from toolkit.custom_ops import check_custom_options
    from toolkit.formats.flatbuffer_read import load
    from toolkit.layer_names import name_layers

    model = name_layers(load(p))
    check_custom_options(model, str(p))  # a malformed blob of a registered op: refused now
    return model


def resolve_model(obj: Any, *, purpose: str = "this function",
                  accept: tuple[Kind, ...] = KINDS) -> ModelArg:
    """Resolve what the user passed as a model.

    Args:
        obj: a ``Model``, ``CompiledModel``, ``PartitionResult``, a ``ModelArg``, or a path
            (``str`` / ``os.PathLike``): a ``.conn.json``/``.conn.ini`` is a connection; a
            folder is a compiled output folder; a ``.tflite``/``.circle`` with
            ``<stem>_debug.xml`` beside it is that compiled output when ``"compiled"`` is
            accepted, else a plain model; any other ``.tflite``/``.circle`` is a model.
        purpose: the entry point, for messages (``"tk.run"``, ``"toolkit trace-join"`` ...).
        accept: the kinds the entry point takes.

    Returns:
        A :class:`ModelArg`.

    Raises:
        ToolkitError: a kind the entry point does not take, a missing file, an unknown suffix,
            an object of another type (the message lists what ``purpose`` takes).
    """
    if isinstance(obj, ModelArg):
        if obj.kind not in accept:
            raise _refuse(_SPELLINGS[obj.kind], obj.where, purpose, accept)
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return _resolve_path(Path(obj), purpose, accept)
    kind = _kind_of_object(obj)
    if kind is None:
        raise _refuse(f"a {type(obj).__name__}", type(obj).__name__, purpose, accept)
    if kind not in accept:
        raise _refuse(f"a {type(obj).__name__}", type(obj).__name__, purpose, accept)
    return ModelArg(kind, obj, type(obj).__name__)


def as_model(obj: Any, *, purpose: str = "this function") -> Model:
    """Return the :class:`Model` that ``obj`` (a Model or a .tflite/.circle path) names.

    Raises:
        ToolkitError: as :func:`resolve_model` with ``accept=("model",)``.
    """
    return resolve_model(obj, purpose=purpose, accept=("model",)).value


def as_compiled(obj: Any, *, purpose: str = "this function") -> CompiledModel:
    """Return the ``CompiledModel`` that ``obj`` (a CompiledModel or compiled output) names."""
    return resolve_model(obj, purpose=purpose, accept=("compiled",)).value


def as_partition(obj: Any, *, purpose: str = "this function") -> PartitionResult:
    """Return the ``PartitionResult`` ``obj`` is (no file spelling exists for one)."""
    return resolve_model(obj, purpose=purpose, accept=("partition",)).value
