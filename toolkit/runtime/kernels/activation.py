"""Activation ops: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LEAKY_RELU, HARD_SWISH, GELU, TANH,
LOGISTIC and SOFTMAX.

Float kernels compute in float32 with TFLite's formulas (``hard_swish = x * relu6(x + 3) / 6``,
``gelu = 0.5 x erfc(-x / sqrt 2)`` or the tanh approximation, softmax subtracts the row
maximum). Quantized kernels:

* RELU family: TFLite's ``ReluX``: ``MultiplyByQuantizedMultiplier(q - zp_in, s_in / s_out)
  + zp_out`` clamped to the quantized activation bounds.
* LEAKY_RELU: TFLite's ``QuantizeLeakyRelu`` (identity and alpha multipliers).
* TANH, LOGISTIC, GELU: a table over every input value built from the float function, as
  TFLite's ``LUTPopulate``.
* HARD_SWISH: TFLite's 16-bit fixed-point algorithm (``reference_ops::HardSwish``).
* SOFTMAX: float softmax of the dequantized input, quantized to the output parameters
  (TFLite uses scale 1/256, zero point -128 for int8); within one unit of LiteRT's
  table-based kernel, and usually equal.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from toolkit.fixed_point import hard_swish_fixed_point
from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    GENERAL,
    FloatClamp,
    General,
    QParams,
    dequantize,
    int_range,
    is_quantized,
    need,
    opt,
    out_dtype,
    qparams,
    quantize_float,
    requantize,
    single_input_plan,
    unsupported,
    value_table,
)
from toolkit.runtime.kernels.elementwise import lut_unary, unary, unary_table
from toolkit.runtime.kernels.fixedpoint import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
)

__all__ = ["erfc", "gelu_f", "logistic_f", "hard_swish_f", "softmax_f"]


# ------------------------------------------------------------------ float functions
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def erfc(x: np.ndarray) -> np.ndarray:
    """Complementary error function in float64: the C library's ``erfc`` (within an ulp)
    applied to each value."""
    x = np.asarray(x, dtype=np.float64)
    return np.asarray(_ERFC(x), dtype=np.float64).reshape(x.shape)


def gelu_f(x: np.ndarray, approximate: bool = False) -> np.ndarray:
    """GELU in float32: ``0.5 x erfc(-x / sqrt 2)`` or the tanh approximation."""
    x = np.asarray(x, dtype=np.float32)
    half = np.float32(0.5)
    if approximate:
        k = np.float32(math.sqrt(2.0 / math.pi))
        inner = k * (x + np.float32(0.044715) * x * x * x)
        return half * x * (np.float32(1) + np.tanh(inner))
    e = erfc((x * np.float32(-math.sqrt(0.5))).astype(np.float64)).astype(np.float32)
    return half * x * e


def logistic_f(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` in float32."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore"):
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def hard_swish_f(x: np.ndarray) -> np.ndarray:
    """``x * min(6, max(0, x + 3)) / 6`` in float32."""
    x = np.asarray(x, dtype=np.float32)
    r = np.minimum(np.float32(6), np.maximum(np.float32(0), x + np.float32(3)))
    return x * r / np.float32(6)


def softmax_f(x: np.ndarray, beta: float) -> np.ndarray:
    """Softmax over the last axis in float32: ``exp((x - max) * beta) / sum``."""
    x = np.asarray(x, dtype=np.float32)
    # one row: reducing the whole array is the same reduction, with less overhead
    axis = None if x.ndim and x.size == x.shape[-1] and x.flags.c_contiguous else -1
    # NumPy's stubs type ``keepdims`` of ufunc.reduce only as a literal True or False
    keep = cast(Any, axis is not None)
    e = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=keep))
    if beta != 1.0:  # multiplying by 1 changes no value
        np.multiply(e, np.float32(beta), out=e)
    np.exp(e, out=e)
    np.divide(e, np.add.reduce(e, axis=axis, keepdims=keep, dtype=np.float32), out=e)
    return e


# ------------------------------------------------------------------ RELU family
def _relu_x(op: Op, args: list[np.ndarray | None], lo: float, hi: float) -> list[np.ndarray]:
    x = args[0] if len(args) == 1 else None
    if type(x) is np.ndarray:
        plan = single_input_plan(op, x, _relu_plan, lo, hi)
        if isinstance(plan, FloatClamp):
            if x.flags.c_contiguous:
                return [plan.of(x)]
        elif isinstance(plan, np.ndarray):
            return [plan[x.astype(np.intp)]]
    return [_relu_general(op, args, lo, hi)]


_F32 = np.dtype(np.float32)


def _relu_plan(op: Op, x: np.ndarray, lo: float, hi: float) -> FloatClamp | np.ndarray | General:
    """A float32 clamp, a table over every 8/16-bit input value, or ``GENERAL``."""
    dt = op.outputs[0].dtype if len(op.outputs) == 1 else None
    if x.dtype == _F32 and dt == _F32:
        return FloatClamp(None if lo == -math.inf else lo, None if hi == math.inf else hi,
                          False, x.size, _F32, x.shape)
    if x.dtype in (np.int8, np.uint8, np.int16) and is_quantized(op.inputs[0]) \
            and is_quantized(op.outputs[0]):
        return value_table(lambda v: _relu_general(op, [v], lo, hi), x.dtype)
    return GENERAL


def _relu_general(op: Op, args: list[np.ndarray | None], lo: float, hi: float
                  ) -> np.ndarray:
    x = need(op, args, 0)
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        y = x.astype(np.float32)
        y = np.maximum(y, np.float32(lo)) if lo != -math.inf else y
        y = np.minimum(y, np.float32(hi)) if hi != math.inf else y
        return y.astype(dt)
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
        qmin, qmax = int_range(dt)
        qlo = max(qmin, oq.zp + int(round_half_away(np.float32(lo) / oq.s))) \
            if lo != -math.inf else qmin
        qhi = min(qmax, oq.zp + int(round_half_away(np.float32(hi) / oq.s))) \
            if hi != math.inf else qmax
        real = np.float64(iq.s) / np.float64(oq.s)
        return requantize(x.astype(np.int64) - iq.zp, real, oq.zp, qlo, qhi, dt)
    lo_i = int(lo) if lo != -math.inf else None
    hi_i = int(hi) if hi != math.inf else None
    return np.clip(x, lo_i, hi_i).astype(dt)


@register("RELU")
def relu(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RELU: ``max(x, 0)``."""
    return _relu_x(op, args, 0.0, math.inf)


@register("RELU6")
def relu6(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RELU6: ``min(max(x, 0), 6)``."""
    return _relu_x(op, args, 0.0, 6.0)


@register("RELU_N1_TO_1")
def relu_n1_to_1(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RELU_N1_TO_1: ``min(max(x, -1), 1)``."""
    return _relu_x(op, args, -1.0, 1.0)


@register("RELU_0_TO_1")
def relu_0_to_1(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RELU_0_TO_1: ``min(max(x, 0), 1)``."""
    return _relu_x(op, args, 0.0, 1.0)


@register("LEAKY_RELU")
def leaky_relu(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """LEAKY_RELU: ``x > 0 ? x : alpha * x``."""
    x = need(op, args, 0)
    alpha = np.float32(opt(op, "alpha", 0.2))
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        xf = x.astype(np.float32)
        return [np.where(xf > 0, xf, xf * alpha).astype(dt)]
    if not (is_quantized(op.inputs[0]) and is_quantized(op.outputs[0])):
        raise unsupported(op, f"LEAKY_RELU on non-quantized {x.dtype} input")
    y = unary_table(op, args, lambda v: _leaky_relu_quantized(op, v, alpha))
    return [_leaky_relu_quantized(op, x, alpha) if y is None else y]


def _leaky_relu_quantized(op: Op, x: np.ndarray, alpha: np.float32) -> np.ndarray:
    """TFLite's ``QuantizeLeakyRelu``."""
    dt = out_dtype(op)
    iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
    m_id, s_id = quantize_multiplier(np.float64(np.float32(iq.s) / np.float32(oq.s)))
    m_al, s_al = quantize_multiplier(
        np.float64(np.float32(iq.s) * alpha / np.float32(oq.s)))
    v = x.astype(np.int64) - iq.zp
    y = np.where(v >= 0, multiply_by_quantized_multiplier(v, m_id, s_id),
                 multiply_by_quantized_multiplier(v, m_al, s_al)) + oq.zp
    lo, hi = int_range(dt)
    return np.clip(y, lo, hi).astype(dt)


def hard_swish_quantized(x: np.ndarray, in_s: np.float32, in_zp: int, out_s: np.float32,
                         out_zp: int, dt: np.dtype) -> np.ndarray | None:
    """TFLite's fixed-point int8/uint8 HARD_SWISH (None when TFLite would reject the scales)."""
    y = hard_swish_fixed_point(x, float(in_s), in_zp, float(out_s), out_zp)
    if y is None:
        return None
    lo, hi = int_range(dt)
    return np.clip(y, lo, hi).astype(dt)


@register("HARD_SWISH")
def hard_swish(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """HARD_SWISH: ``x * relu6(x + 3) / 6``."""
    x = need(op, args, 0)
    if x.dtype in (np.int8, np.uint8) and is_quantized(op.inputs[0]) \
            and is_quantized(op.outputs[0]):
        y = unary_table(op, args, lambda v: _hard_swish_8bit(op, v))
        return [_hard_swish_8bit(op, x) if y is None else y]
    return unary(op, args, hard_swish_f)


def _hard_swish_8bit(op: Op, x: np.ndarray) -> np.ndarray:
    """Quantized 8-bit HARD_SWISH: fixed point, or the float table where TFLite's fixed-point
    kernel does not apply."""
    iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
    y = hard_swish_quantized(x, iq.s, iq.zp, oq.s, oq.zp, out_dtype(op))
    return lut_unary(op, x, hard_swish_f) if y is None else y


@register("GELU")
def gelu(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """GELU (exact erfc form, or the tanh approximation when ``approximate``)."""
    approx = bool(opt(op, "approximate", False))
    return unary(op, args, lambda v: gelu_f(v, approx))


@register("TANH")
def tanh(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """TANH."""
    return unary(op, args, np.tanh)


@register("LOGISTIC")
def logistic(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """LOGISTIC (sigmoid)."""
    return unary(op, args, logistic_f)


@register("SOFTMAX")
def softmax(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SOFTMAX over the last axis with ``beta``."""
    x = args[0] if len(args) == 1 else None
    if type(x) is np.ndarray:
        plan = single_input_plan(op, x, _softmax_plan)
        if isinstance(plan, tuple) and x.flags.c_contiguous:
            beta, iq, oq, dt = plan
            if iq is None or oq is None:  # float32: the plan sets both or neither
                return [softmax_f(x, beta)]
            return [quantize_float(softmax_f(dequantize(x, iq), beta), oq, dt)]
    x = need(op, args, 0)
    beta = float(opt(op, "beta", 1.0))
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        return [softmax_f(x, beta).astype(dt)]
    if not (is_quantized(op.inputs[0]) and is_quantized(op.outputs[0])):
        raise unsupported(op, f"SOFTMAX on non-quantized {x.dtype} input")
    real = dequantize(x, qparams(op, op.inputs[0]))
    return [quantize_float(softmax_f(real, beta), qparams(op, op.outputs[0]), dt)]


SoftmaxPlan = tuple[float, QParams | None, QParams | None, np.dtype]
"""``(beta, input qparams, output qparams, output dtype)`` of a prepared SOFTMAX."""


def _softmax_plan(op: Op, x: np.ndarray) -> SoftmaxPlan | General:
    """``(beta, input qparams, output qparams, output dtype)``, or ``GENERAL``."""
    if x.ndim == 0 or len(op.outputs) != 1:
        return GENERAL
    beta = float(opt(op, "beta", 1.0))
    dt = op.outputs[0].dtype
    if x.dtype == _F32 and dt == _F32:
        return beta, None, None, dt
    if dt is not None and x.dtype.kind in "iu" and is_quantized(op.inputs[0]) \
            and is_quantized(op.outputs[0]):
        return beta, qparams(op, op.inputs[0]), qparams(op, op.outputs[0]), dt
    return GENERAL
