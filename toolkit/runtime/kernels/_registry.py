"""The kernel registry: op kind (builtin name, or custom code for CUSTOM ops) to kernel.

CUSTOM ops without a kernel here take their kernel from :mod:`toolkit.custom_ops` (the one
registry of custom ops every verb reads)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from toolkit.custom_ops import custom_op, unregistered
from toolkit.errors import UnsupportedOpError
from toolkit.ir import Op

__all__ = ["Kernel", "KERNELS", "register", "get_kernel", "run_kernel", "infer_shapes",
           "Bound", "Binder", "BINDERS", "binds", "bind_kernel"]

Kernel = Callable[[Op, list[np.ndarray | None]], list[np.ndarray]]
"""A kernel: ``kernel(op, args) -> outputs``.

``args`` holds one array per op input, in the tensor's storage dtype (int8 for quantized
tensors), or None for an absent optional input. The kernel returns one array per op output,
in the output tensor's dtype; output shapes are derived from the inputs."""

KERNELS: dict[str, Kernel] = {}
"""Every registered kernel, keyed by op type (``CONV_2D``) or custom code (``LAYER_NORM``)."""


def register(*names: str) -> Callable[[Kernel], Kernel]:
    """Decorator: register a kernel under one or more op kinds."""

    def deco(fn: Kernel) -> Kernel:
        for n in names:
            KERNELS[n] = fn
        return fn

    return deco


Bound = Callable[..., np.ndarray]
"""A kernel bound to one op and to inputs of fixed shapes and dtypes: ``bound(*args)``
returns the op's single output for arrays shaped like those it was bound to, the constant
inputs being the very arrays it was bound to.

Bound kernels skip the per-call checks and plan lookups of :data:`Kernel`, may keep scratch
buffers (one bound kernel must not run in two threads at once) and expect NumPy's
floating-point errors to be ignored by the caller (see :func:`.common.quiet`). They compute
exactly what the op's kernel computes, bit for bit."""

Binder = Callable[[Op, list[np.ndarray | None]], Bound | None]
"""Makes a :data:`Bound` kernel for an op and example inputs, or returns None (the op's
kernel is then called as it is)."""

BINDERS: dict[str, Binder] = {}
"""Binders by op kind, for the ops whose kernels have a specialised form."""


def binds(*names: str) -> Callable[[Binder], Binder]:
    """Decorator: register a binder under one or more op kinds."""

    def deco(fn: Binder) -> Binder:
        for n in names:
            BINDERS[n] = fn
        return fn

    return deco


def bind_kernel(op: Op, args: Sequence[np.ndarray | None]) -> Bound | None:
    """The kernel of ``op`` bound to inputs like ``args`` (see :data:`Bound`), or None when
    the op has no binder or its binder does not take such inputs."""
    if len(op.outputs) != 1:
        return None
    binder = BINDERS.get(_op_key(op))
    return None if binder is None else binder(op, list(args))


def _op_key(op: Op) -> str:
    if op.type == "CUSTOM":
        return op.custom_code or "CUSTOM"
    return op.type


def get_kernel(op: Op) -> Kernel:
    """Return the kernel of ``op`` (UnsupportedOpError naming the op when there is none)."""
    key = _op_key(op)
    kernel = KERNELS.get(key)
    if kernel is None and op.type == "CUSTOM":
        rec = custom_op(op)
        if rec is None:
            raise unregistered(op, "the reference runtime")
        return rec.kernel
    if kernel is None:
        kind = f"custom op {key!r}" if op.type == "CUSTOM" else f"op type {key}"
        first = op.outputs[0].name if op.outputs else "<none>"
        if "node_name" in op.extra or "onnx_op_types" in op.extra:  # an ONNX node
            raise UnsupportedOpError(
                f"the reference runtime has no kernel for ONNX op {key} (node "
                f"{op.extra.get('node_name') or op.name!r})", where=f"{key} op {op.name!r}",
                fix="run the model with tk.run(model, inputs, runtime='onnxruntime'), or pass "
                    "the model of tk.load('m.onnx') to tk.run, which lowers it")
        raise UnsupportedOpError(
            f"the reference runtime has no kernel for {kind} (op {op.name!r}, first output "
            f"tensor {first!r})",
            where=f"{key} op {op.name!r}",
            fix="replace the op with supported ops, or register a kernel for "
                f"{key!r} in toolkit.runtime.kernels.KERNELS",
        )
    return kernel


def run_kernel(op: Op, args: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Run the kernel of ``op`` on ``args`` and return its outputs."""
    return get_kernel(op)(op, list(args))


def infer_shapes(op: Op, in_shapes: Sequence[Sequence[int] | None]) -> list[tuple[int, ...]]:
    """Return the output shapes of ``op`` for inputs of the given shapes.

    Kernels derive their output shapes from their inputs, so this runs the kernel on
    zero-filled inputs; constant inputs (shape tensors, axes, paddings) keep their data.
    """
    rec = custom_op(op)
    if rec is not None and rec.shapes is not None:
        return [tuple(int(d) for d in s) for s in rec.shapes(op, list(in_shapes))]
    args: list[np.ndarray | None] = []
    for t, shape in zip(op.inputs, in_shapes, strict=False):
        if t is None or shape is None:
            args.append(None)
        elif t.data is not None and tuple(t.data.shape) == tuple(shape):
            args.append(np.asarray(t.data))
        else:
            dt = t.dtype if t.dtype is not None else np.dtype(np.float32)
            fill = 0
            if t.quant is not None and t.quant.zero_point.size:
                fill = int(t.quant.zero_point.reshape(-1)[0])
            args.append(np.full(tuple(shape), fill, dtype=dt))
    with np.errstate(all="ignore"):
        outs = run_kernel(op, args)
    return [tuple(int(d) for d in o.shape) for o in outs]
