"""Element-wise math and activations the TensorFlow converter writes: FLOOR, CEIL, ROUND,
SIN, COS, LOG, SQUARE, ELU, PRELU and LOG_SOFTMAX.

Float kernels compute in float32. Quantized unary ops go through a table of every input
value (LiteRT's ``LUTPopulate``: dequantize, apply, round, add the zero point); PRELU is
TFLite's integer arithmetic (two fixed-point multipliers, for the positive and the negative
side); quantized LOG_SOFTMAX is computed in float32 from the dequantized input and
quantized to the output (within one step of LiteRT's fixed-point kernel).
"""

from __future__ import annotations

import numpy as np

from toolkit.fixed_point import single_precision_ratio
from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    dequantize,
    int_range,
    is_quantized,
    need,
    norm_axis,
    out_dtype,
    qparams,
    quantize_float,
)
from toolkit.runtime.kernels.elementwise import unary
from toolkit.runtime.kernels.fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier

__all__ = ["log_softmax_f", "elu_f"]

Args = list[np.ndarray | None]


@register("FLOOR")
def floor(op: Op, args: Args) -> list[np.ndarray]:
    """FLOOR."""
    return unary(op, args, np.floor)


@register("CEIL")
def ceil(op: Op, args: Args) -> list[np.ndarray]:
    """CEIL."""
    return unary(op, args, np.ceil)


@register("ROUND")
def round_op(op: Op, args: Args) -> list[np.ndarray]:
    """ROUND: half to even, as TFLite's ``RoundToNearest``."""
    return unary(op, args, np.round)


@register("SIN")
def sin(op: Op, args: Args) -> list[np.ndarray]:
    """SIN."""
    return unary(op, args, np.sin)


@register("COS")
def cos(op: Op, args: Args) -> list[np.ndarray]:
    """COS."""
    return unary(op, args, np.cos)


@register("LOG")
def log(op: Op, args: Args) -> list[np.ndarray]:
    """LOG (natural logarithm)."""
    return unary(op, args, np.log)


@register("SQUARE")
def square(op: Op, args: Args) -> list[np.ndarray]:
    """SQUARE; plain integers multiplied as they are."""
    return unary(op, args, np.square, lambda v: np.square(v.astype(np.int64)))


def elu_f(x: np.ndarray) -> np.ndarray:
    """ELU with alpha 1: ``x`` for positive values, ``exp(x) - 1`` below zero (float32)."""
    x = np.asarray(x, dtype=np.float32)
    return np.where(x < 0, np.expm1(x), x).astype(np.float32)


@register("ELU")
def elu(op: Op, args: Args) -> list[np.ndarray]:
    """ELU."""
    return unary(op, args, elu_f)


@register("PRELU")
def prelu(op: Op, args: Args) -> list[np.ndarray]:
    """PRELU: ``x`` where ``x >= 0``, else ``alpha * x`` (alpha broadcast)."""
    x, alpha = need(op, args, 0), need(op, args, 1)
    if x.dtype == np.float32:
        return [np.where(x >= 0, x, x * alpha.astype(np.float32)).astype(np.float32)]
    iq, aq, oq = (qparams(op, t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    dt = out_dtype(op)
    m1, s1 = quantize_multiplier(single_precision_ratio(iq.s, oq.s))
    m2, s2 = quantize_multiplier(single_precision_ratio(iq.s, oq.s, aq.s))
    xv = x.astype(np.int64) - iq.zp
    av = alpha.astype(np.int64) - aq.zp
    pos = multiply_by_quantized_multiplier(xv, m1, s1)
    neg = multiply_by_quantized_multiplier(xv * av, m2, s2)
    lo, hi = int_range(dt)
    return [np.clip(np.where(xv >= 0, pos, neg) + oq.zp, lo, hi).astype(dt)]


def log_softmax_f(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` in float32."""
    x = np.asarray(x, dtype=np.float32)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(
        np.float32)


@register("LOG_SOFTMAX")
def log_softmax(op: Op, args: Args) -> list[np.ndarray]:
    """LOG_SOFTMAX over the last axis."""
    x = need(op, args, 0)
    axis = norm_axis(op, -1, x.ndim)
    if x.dtype == np.float32:
        return [log_softmax_f(x, axis)]
    if not (is_quantized(op.inputs[0]) and is_quantized(op.outputs[0])):
        from toolkit.runtime.kernels.common import unsupported

        raise unsupported(op, f"LOG_SOFTMAX on non-quantized {x.dtype} input")
    real = dequantize(x, qparams(op, op.inputs[0]))
    with np.errstate(all="ignore"):
        y = log_softmax_f(real, axis)
    return [quantize_float(y, qparams(op, op.outputs[0]), out_dtype(op))]
