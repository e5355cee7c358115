"""Custom ops: one registry that every verb reads (run, compile, partition, codegen, costs).

A TFLite/circle ``CUSTOM`` op is known by its custom code (``Convolution2DTransposeBias``) and
carries an opaque ``custom_options`` blob. Register what the toolkit needs to know about one
with :func:`register_custom_op` (``tk.register_custom_op``)::

    def kernel(op, args):          # NumPy: one array per input -> one array per output
        x, = args
        return [np.maximum(x, 0) * 2]

    tk.register_custom_op("DoubleRelu", kernel,
                          macs=lambda op: 2 * math.prod(op.outputs[0].shape),  # optional
                          emit=None)                          # optional C++ emitter

* ``kernel(op, args) -> outputs``: the reference runtime's kernel (same contract as the
  builtin kernels: ``args`` in the tensors' storage dtypes, None for an absent input; one
  array per output, in the output tensor's dtype). Compiling, partition chains and the
  reference runtime run it.
* ``shapes(op, input_shapes) -> output_shapes`` (optional): output shapes without running
  the kernel; by default the kernel is run on zero-filled inputs.
* ``macs(op) -> int`` (optional): multiply-accumulates of one inference, for the cost model
  and the ``by MACs`` trace split (default: one per output element).
* ``options(op) -> object`` (optional): decode and check ``op.custom_options``; raise
  :class:`CustomOptionsError` (or any ValueError) for a malformed blob. ``tk.load`` calls it
  for every registered op, so a bad blob is refused when the model is loaded, naming the op.
* ``emit(emitter, step) -> str`` (optional): the C++ statements of the op for the native
  backend (see :mod:`toolkit.generator.ops` for the emitter's ``ptr``/``param`` helpers).
  Without it, ``tk.codegen`` refuses the op and says so.

Unknown custom ops still load, compile and partition (they are opaque ops); running one
raises an :class:`~toolkit.errors.UnsupportedOpError` that names the op and this registry.
MediaPipe's ops are registered on import (:mod:`toolkit.custom_ops.mediapipe`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.errors import ModelFormatError, ToolkitError, UnsupportedOpError
from toolkit.ir import Model, Op

__all__ = ["CustomOp", "CustomOptionsError", "CUSTOM_OPS", "register_custom_op",
           "unregister_custom_op", "custom_op", "check_custom_options", "REGISTER_FIX"]

Kernel = Callable[[Op, list[np.ndarray | None]], list[np.ndarray]]
Shapes = Callable[[Op, Sequence[Sequence[int] | None]], list[tuple[int, ...]]]

#: how to supply what is missing, for every "unregistered custom op" error
REGISTER_FIX = ("register it: tk.register_custom_op({code!r}, kernel, shapes=..., macs=..., "
                "emit=...) (see toolkit.custom_ops)")


class CustomOptionsError(ValueError):
    """A custom op's ``custom_options`` blob cannot be decoded (the message says why)."""


@dataclass(frozen=True)
class CustomOp:
    """What the toolkit knows about one custom op (see the module docs)."""

    code: str
    kernel: Kernel
    shapes: Shapes | None = None
    macs: Callable[[Op], int] | None = None
    options: Callable[[Op], Any] | None = None
    emit: Callable[[Any, Any], str] | None = None
    doc: str = ""


CUSTOM_OPS: dict[str, CustomOp] = {}
"""Every registered custom op, keyed by custom code."""


def register_custom_op(code: str, kernel: Kernel, *, shapes: Shapes | None = None,
                       macs: Callable[[Op], int] | None = None,
                       options: Callable[[Op], Any] | None = None,
                       emit: Callable[[Any, Any], str] | None = None, doc: str = "",
                       replace: bool = True) -> CustomOp:
    """Register the custom op ``code`` (see the module docs); returns its record.

    Raises ToolkitError for an empty code, a kernel that is not callable, or (with
    ``replace=False``) a code already registered."""
    if not isinstance(code, str) or not code:
        raise ToolkitError(f"custom op code must be a non-empty string, got {code!r}",
                           fix="pass the op's custom code as the file names it")
    if not callable(kernel):
        raise ToolkitError(f"the kernel of custom op {code!r} is not callable",
                           fix="pass a function kernel(op, args) -> list of arrays")
    for name, fn in (("shapes", shapes), ("macs", macs), ("options", options), ("emit", emit)):
        if fn is not None and not callable(fn):
            raise ToolkitError(f"{name}= of custom op {code!r} is not callable",
                               fix=f"pass a function or None as {name}=")
    if not replace and code in CUSTOM_OPS:
        raise ToolkitError(f"custom op {code!r} is already registered",
                           fix="pass replace=True to replace it")
    rec = CustomOp(code, kernel, shapes, macs, options, emit, doc)
    CUSTOM_OPS[code] = rec
    return rec


def unregister_custom_op(code: str) -> None:
    """Forget the custom op ``code`` (nothing happens when it is not registered)."""
    CUSTOM_OPS.pop(code, None)


def custom_op(op: Op) -> CustomOp | None:
    """The registry record of a CUSTOM op (None for builtin ops and unregistered codes)."""
    if op.type != "CUSTOM" or not op.custom_code:
        return None
    return CUSTOM_OPS.get(op.custom_code)


def unregistered(op: Op, what: str) -> UnsupportedOpError:
    """The error for a custom op the registry does not know, when ``what`` needs it."""
    code = op.custom_code or "CUSTOM"
    first = op.outputs[0].name if op.outputs else "<none>"
    return UnsupportedOpError(
        f"{what} needs custom op {code!r} (op {op.name!r}, first output {first!r}), which is "
        "not registered", where=f"custom op {code} {op.name!r}",
        fix=REGISTER_FIX.format(code=code))


_DECODED: weakref.WeakKeyDictionary[Op, tuple[Any, Any, Any]] = weakref.WeakKeyDictionary()


def decode_options(op: Op) -> Any:
    """``options(op)`` of a registered op (decoded once per op and blob), a ToolkitError
    naming the op for a bad blob."""
    rec = custom_op(op)
    if rec is None or rec.options is None:
        return None
    hit = _DECODED.get(op)
    if hit is not None and hit[0] is rec.options and hit[1] == op.custom_options:
        return hit[2]
    try:
        value = rec.options(op)
        _DECODED[op] = (rec.options, op.custom_options, value)
        return value
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
        n = 0 if op.custom_options is None else len(op.custom_options)
        raise ModelFormatError(
            f"custom op {op.custom_code} {op.name!r}: malformed custom_options "
            f"({n} bytes): {e}", where=f"custom op {op.custom_code} {op.name!r}",
            fix="the file's options do not match the op's kernel: convert the model again "
                "with the converter the op's kernel expects") from None


def check_custom_options(model: Model, where: str = "<model>") -> None:
    """Decode the options of every registered custom op of ``model`` (every subgraph);
    raises ModelFormatError naming the first op whose blob is malformed."""
    for s, g in enumerate(model.subgraphs):
        for i, op in enumerate(g.ops):
            if op.type == "CUSTOM":
                try:
                    decode_options(op)
                except ModelFormatError as e:
                    raise ModelFormatError(e.what, where=f"{where}: subgraph {s} op {i}",
                                           fix=e.fix) from None


def _register_builtin_sets() -> None:
    from toolkit.custom_ops import mediapipe  # noqa: F401  (registers its ops)


_register_builtin_sets()
