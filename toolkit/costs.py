"""Per-op work figures: multiply-accumulates, bytes, kernel and output-feature-map dims.

These are the numbers every provenance table reports (``macs``, ``output_bytes``,
``kernel_w``/``kernel_h``, ``ofm_w``/``ofm_h``/``ofm_d``) and the inputs of the lowering's cost
model. They are static: computed from shapes, never from data.

MACs of one inference (``op_macs``):

===============================================  ===========================================
op                                               MACs
===============================================  ===========================================
CONV_2D                                          out elements × kh × kw × filter in-channels
DEPTHWISE_CONV_2D                                out elements × kh × kw
TRANSPOSE_CONV                                   input elements × out-channels × kh × kw
FULLY_CONNECTED, BATCH_MATMUL                    out elements × reduced dim
MAX_POOL_2D, AVERAGE_POOL_2D, L2_POOL_2D         out elements × filter h × filter w
MEAN, SUM, REDUCE_*                              input elements
SOFTMAX, LOG_SOFTMAX                             3 × elements
INSTANCE_NORM, LAYER_NORM                        5 × elements
elementwise arithmetic and activations           out elements
data movement (RESHAPE, TRANSPOSE, CONCAT, ...)  0
DEQUANTIZE, DENSIFY of constant weights          0 (computed once, when the model is prepared)
registered custom ops                            their ``macs`` (:mod:`toolkit.custom_ops`)
===============================================  ===========================================

Dimensions follow Vela's ``Shape4D``: a shape of rank below 4 gets leading 1s, so ``[N, C]``
has ``ofm_h = 1``, ``ofm_w = N``, ``ofm_d = C``; above rank 4 the middle axes multiply into
``ofm_h``.
"""

from __future__ import annotations

import math

from toolkit.custom_ops import custom_op
from toolkit.ir import Op, Tensor

__all__ = [
    "op_macs", "nbytes", "op_output_bytes", "op_input_bytes", "op_const_bytes", "kernel_dims",
    "ofm_dims", "shape4d", "MOVEMENT_OPS", "ELEMENTWISE_OPS", "REDUCE_OPS", "WEIGHT_OPS",
    "stored_bytes",
]

MOVEMENT_OPS = frozenset({
    "RESHAPE", "TRANSPOSE", "CONCATENATION", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "SQUEEZE",
    "EXPAND_DIMS", "PAD", "PADV2", "MIRROR_PAD", "SLICE", "STRIDED_SLICE", "GATHER",
    "GATHER_ND", "TILE", "BROADCAST_TO", "SHAPE", "CAST", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE",
    "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "REVERSE_V2", "RESIZE_NEAREST_NEIGHBOR",
    "DENSIFY",
})
ELEMENTWISE_OPS = frozenset({
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW", "RELU",
    "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "TANH", "LOGISTIC", "QUANTIZE", "DEQUANTIZE",
    "RSQRT", "SQRT", "EXP", "LOG", "ABS", "NEG", "LEAKY_RELU", "HARD_SWISH", "GELU", "PRELU",
    "FLOOR", "CEIL", "ROUND", "SQUARE", "SIN", "COS", "FLOOR_DIV", "FLOOR_MOD",
})
#: ops that turn a stored weight into its working form (0 MACs when they read constants)
WEIGHT_OPS = frozenset({"DEQUANTIZE", "DENSIFY"})
REDUCE_OPS = frozenset({"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "ARG_MAX",
                        "ARG_MIN", "REDUCE_ANY", "REDUCE_ALL"})
_POOLS = frozenset({"MAX_POOL_2D", "AVERAGE_POOL_2D", "L2_POOL_2D"})


def _size(t: Tensor | None) -> int:
    return 0 if t is None else math.prod(map(int, t.shape))


def nbytes(t: Tensor | None) -> int:
    """Return the size of ``t`` in bytes (0 for None or types of unknown size)."""
    if t is None:
        return 0
    dt = t.dtype
    return math.prod(map(int, t.shape)) * dt.itemsize if dt is not None else 0


def _first_out(op: Op) -> Tensor | None:
    return op.outputs[0] if op.outputs else None


def op_macs(op: Op) -> int:
    """Return the multiply-accumulates of one inference of ``op`` (see the module table)."""
    rec = custom_op(op)
    if rec is not None and rec.macs is not None:
        return int(rec.macs(op))
    if op.type in WEIGHT_OPS and op.inputs and all(t is not None and t.is_const
                                                    for t in op.inputs):
        return 0  # a weight's form (float16, sparse): computed once, when LiteRT prepares
    out = _first_out(op)
    n_out = _size(out)
    kind = op.kind
    w = op.inputs[1] if len(op.inputs) > 1 else None
    if kind == "CONV_2D" and w is not None and len(w.shape) == 4:
        return n_out * w.shape[1] * w.shape[2] * w.shape[3]
    if kind == "DEPTHWISE_CONV_2D" and w is not None and len(w.shape) == 4:
        return n_out * w.shape[1] * w.shape[2]
    if kind == "TRANSPOSE_CONV" and len(op.inputs) > 2:
        wt, x = op.inputs[1], op.inputs[2]
        if wt is not None and x is not None and len(wt.shape) == 4:
            return _size(x) * wt.shape[0] * wt.shape[1] * wt.shape[2]
        return 0
    if kind == "FULLY_CONNECTED" and w is not None and len(w.shape) == 2:
        return n_out * w.shape[1]
    if kind == "BATCH_MATMUL" and w is not None and op.inputs[0] is not None:
        a = op.inputs[0]
        adj_x = bool(getattr(op.options, "adjointLhs", False)) if op.options else False
        k = a.shape[-2] if adj_x else a.shape[-1] if a.shape else 1
        return n_out * int(k)
    if kind in _POOLS:
        o = op.options
        return n_out * int(getattr(o, "filterHeight", 1) or 1) * int(
            getattr(o, "filterWidth", 1) or 1)
    if kind in REDUCE_OPS:
        return _size(op.inputs[0] if op.inputs else None)
    if kind in ("SOFTMAX", "LOG_SOFTMAX"):
        return 3 * n_out
    if kind in ("INSTANCE_NORM", "LAYER_NORM", "L2_NORMALIZATION", "RMS_NORM"):
        return 5 * n_out
    if kind in MOVEMENT_OPS:
        return 0
    if kind in ELEMENTWISE_OPS:
        return n_out
    return n_out


def op_output_bytes(op: Op) -> int:
    """Return the bytes ``op`` writes: the summed size of its output tensors."""
    return sum(nbytes(t) for t in op.outputs)


def op_input_bytes(op: Op) -> int:
    """Return the bytes of ``op``'s non-constant inputs (activations read)."""
    return sum(nbytes(t) for t in op.inputs if t is not None and not t.is_const)


def stored_bytes(t: Tensor | None) -> int:
    """Bytes ``t`` takes in the model file: its stored values for a sparse constant, else
    :func:`nbytes` (a float16 weight: 2 bytes a value)."""
    if t is not None and t.extra.get("sparse_values") is not None:
        return int(t.extra["sparse_values"].nbytes)
    return nbytes(t)


def op_const_bytes(op: Op) -> int:
    """Return the bytes of ``op``'s constant inputs (weights, biases, parameters) as the file
    stores them (:func:`stored_bytes`)."""
    return sum(stored_bytes(t) for t in op.inputs if t is not None and t.is_const)


def kernel_dims(op: Op) -> tuple[int, int]:
    """Return ``(kernel_w, kernel_h)``: filter width and height, (1, 1) for ops without one."""
    kind = op.kind
    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV") and len(op.inputs) > 1:
        w = op.inputs[1]
        if w is not None and len(w.shape) == 4:
            return int(w.shape[2]), int(w.shape[1])
    if kind in _POOLS and op.options is not None:
        o = op.options
        return int(getattr(o, "filterWidth", 1) or 1), int(getattr(o, "filterHeight", 1) or 1)
    return 1, 1


def shape4d(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """Return ``shape`` as (N, H, W, C) the way Vela's ``Shape4D`` does (see module doc)."""
    s = tuple(int(d) for d in shape)
    if len(s) <= 4:
        s = (1,) * (4 - len(s)) + s
        return s[0], s[1], s[2], s[3]
    return s[0], math.prod(s[1:-2]), s[-2], s[-1]


def ofm_dims(op: Op) -> tuple[int, int, int]:
    """Return ``(ofm_w, ofm_h, ofm_d)`` of ``op``'s first output (0s when it has none)."""
    out = _first_out(op)
    if out is None:
        return 0, 0, 0
    _, h, w, d = shape4d(out.shape)
    return w, h, d
