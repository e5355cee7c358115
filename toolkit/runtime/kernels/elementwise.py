"""Element-wise binary and unary math ops (NumPy broadcasting, as TFLite's up-to-6-D
broadcast).

Float ops compute in float32 like TFLite (``RSQRT`` is ``1.f / sqrt(x)``,
``SQUARED_DIFFERENCE`` is ``d * d``). Quantized (int8/uint8/int16) ops:

* ADD / SUB: TFLite's rescaling: each input ``(q - zp) << left_shift`` (20 for 8-bit, 15 for
  16-bit) times its fixed-point multiplier ``s_i / (2 max(s1, s2))``, sum or difference, times
  ``2 max(s1, s2) / (2**left_shift s_out)``, plus ``zp_out``, clamped to the activation range.
* MUL: ``MultiplyByQuantizedMultiplier((q1 - zp1) (q2 - zp2), s1 s2 / s_out) + zp_out``.
* MINIMUM / MAXIMUM compare the raw stored values, as LiteRT does (it assumes the inputs and
  the output share their quantization, as the converter guarantees).
* NEG negates the raw stored value with wrap-around, as LiteRT does.
* ABS: TFLite's ``|q - zp_in|`` rescaled by ``s_in / s_out``.
* DIV, SQUARED_DIFFERENCE, POW: dequantize, compute in float32, quantize.
  SQUARED_DIFFERENCE is within one unit of LiteRT's fixed-point kernel; LiteRT's int8 DIV
  is not followed (its reciprocal-based kernel returns the type minimum when
  ``q1 - zp1 == -1``).
* RSQRT, SQRT, EXP: a table over every input value built from the float function (TFLite's
  ``LUTPopulate``: dequantize in float32, transform, ``round(y * (1 / s_out)) + zp_out``);
  exact for EXP and RSQRT, within one unit for SQRT.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    dequantize,
    float_activation,
    int_range,
    is_quantized,
    need,
    out_dtype,
    qparams,
    quant_activation_range,
    quantize_float,
    requantize,
    unsupported,
)
from toolkit.runtime.kernels.fixedpoint import (
    c_div,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
)

__all__ = ["lut_unary", "quantized_via_float", "FloatFn"]

FloatFn = Callable[[np.ndarray], np.ndarray]


# ------------------------------------------------------------------ helpers
def _int_activation(op: Op, y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Fused activation on a non-quantized integer result (TFLite clamps)."""
    code = op.activation
    lo, hi = int_range(dt)
    if code == 1:
        lo = max(lo, 0)
    elif code == 2:
        lo, hi = max(lo, -1), min(hi, 1)
    elif code == 3:
        lo, hi = max(lo, 0), min(hi, 6)
    elif code != 0:
        raise unsupported(op, f"fused activation {code} on integer tensors")
    return np.clip(y, lo, hi)


def quantized_via_float(op: Op, args: list[np.ndarray], fn: Callable[..., np.ndarray]
                        ) -> np.ndarray:
    """Dequantize the inputs, apply ``fn`` and the fused activation in float32, quantize."""
    reals = [dequantize(a, qparams(op, t)) for a, t in zip(args, op.inputs, strict=False)]
    with np.errstate(all="ignore"):
        y = np.asarray(fn(*reals), dtype=np.float32)
    y = float_activation(op, y)
    out = op.outputs[0]
    lo, hi = quant_activation_range(op, out)
    return quantize_float(y, qparams(op, out), out_dtype(op), lo, hi)


def lut_unary(op: Op, x: np.ndarray, fn: FloatFn) -> np.ndarray:
    """Apply ``fn`` to quantized ``x`` through a table over every input value (LUTPopulate)."""
    iq = qparams(op, op.inputs[0])
    oq = qparams(op, op.outputs[0])
    dt = out_dtype(op)
    qmin, qmax = int_range(x.dtype)
    if qmax - qmin > 65535:
        raise unsupported(op, f"table lookup on {x.dtype} inputs")
    vals = np.arange(qmin, qmax + 1, dtype=np.int64)
    deq = np.float32(iq.s) * (vals - iq.zp).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(deq), dtype=np.float32)
        inv = np.float32(1) / np.float32(oq.s)
        r = round_half_away(y * inv)
        r = np.clip(np.nan_to_num(r, nan=0.0), -(2.0**40), 2.0**40)
    omin, omax = int_range(dt)
    table = np.clip(r.astype(np.int64) + oq.zp, omin, omax).astype(dt)
    return table[x.astype(np.int64) - qmin]


# ------------------------------------------------------------------ binary
def _quant_add_sub(op: Op, a: np.ndarray, b: np.ndarray, sign: int) -> np.ndarray:
    if op.activation == 4:  # TANH cannot be a clamp: apply it to the real values
        return quantized_via_float(op, [a, b], np.add if sign > 0 else np.subtract)
    out = op.outputs[0]
    dt = out_dtype(op)
    q1, q2, qo = qparams(op, op.inputs[0]), qparams(op, op.inputs[1]), qparams(op, out)
    left_shift = 15 if dt == np.int16 else 20
    twice_max = 2.0 * np.float64(max(q1.s, q2.s))
    m1, s1 = quantize_multiplier(np.float64(q1.s) / twice_max)
    m2, s2 = quantize_multiplier(np.float64(q2.s) / twice_max)
    mo, so = quantize_multiplier(twice_max / (float(1 << left_shift) * np.float64(qo.s)))
    v1 = multiply_by_quantized_multiplier((a.astype(np.int64) - q1.zp) << left_shift, m1, s1)
    v2 = multiply_by_quantized_multiplier((b.astype(np.int64) - q2.zp) << left_shift, m2, s2)
    raw = v1 + v2 if sign > 0 else v1 - v2
    y = multiply_by_quantized_multiplier(raw, mo, so) + qo.zp
    lo, hi = quant_activation_range(op, out)
    return np.clip(y, lo, hi).astype(dt)


def _quant_mul(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = op.outputs[0]
    dt = out_dtype(op)
    q1, q2, qo = qparams(op, op.inputs[0]), qparams(op, op.inputs[1]), qparams(op, out)
    if op.activation == 4:
        return quantized_via_float(op, [a, b], np.multiply)
    real = np.float64(q1.s) * np.float64(q2.s) / np.float64(qo.s)
    prod = (a.astype(np.int64) - q1.zp) * (b.astype(np.int64) - q2.zp)
    lo, hi = quant_activation_range(op, out)
    return requantize(prod, real, qo.zp, lo, hi, dt)


def _binary(op: Op, args: list[np.ndarray | None], ffn: Callable[..., np.ndarray],
            ifn: Callable[..., np.ndarray] | None = None) -> list[np.ndarray]:
    a, b = need(op, args, 0), need(op, args, 1)
    dt = out_dtype(op)
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        with np.errstate(all="ignore"):
            y = ffn(a.astype(np.float32), b.astype(np.float32))
        return [float_activation(op, np.asarray(y, dtype=np.float32)).astype(dt)]
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        return [quantized_via_float(op, [a, b], ffn)]
    if ifn is None:
        raise unsupported(op, f"{op.type} on {a.dtype} tensors")
    wide = np.int64 if a.dtype != np.uint64 else np.uint64
    with np.errstate(all="ignore"):
        y = ifn(a.astype(wide), b.astype(wide))
    return [_int_activation(op, y, dt).astype(dt)]


def _quantized_pair(op: Op) -> bool:
    return is_quantized(op.inputs[0]) and is_quantized(op.inputs[1]) \
        and is_quantized(op.outputs[0])


@register("ADD")
def add(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """ADD with broadcasting and fused activation."""
    if _quantized_pair(op):
        return [_quant_add_sub(op, need(op, args, 0), need(op, args, 1), +1)]
    return _binary(op, args, np.add, np.add)


@register("SUB")
def sub(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SUB with broadcasting and fused activation."""
    if _quantized_pair(op):
        return [_quant_add_sub(op, need(op, args, 0), need(op, args, 1), -1)]
    return _binary(op, args, np.subtract, np.subtract)


@register("MUL")
def mul(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MUL with broadcasting and fused activation."""
    if _quantized_pair(op):
        return [_quant_mul(op, need(op, args, 0), need(op, args, 1))]
    return _binary(op, args, np.multiply, np.multiply)


@register("DIV")
def div(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """DIV (integer division truncates toward zero, as C)."""
    return _binary(op, args, np.divide, c_div)


@register("SQUARED_DIFFERENCE")
def squared_difference(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SQUARED_DIFFERENCE: ``(a - b) * (a - b)``."""

    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = a - b
        return d * d

    return _binary(op, args, f, f)


@register("POW")
def power(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """POW: ``a ** b``."""
    return _binary(op, args, np.power, np.power)


def _min_max(op: Op, args: list[np.ndarray | None], fn: Callable[..., np.ndarray]
             ) -> list[np.ndarray]:
    a, b = need(op, args, 0), need(op, args, 1)
    return [fn(a, b).astype(out_dtype(op))]


@register("MINIMUM")
def minimum(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MINIMUM (element-wise, broadcasting)."""
    return _min_max(op, args, np.minimum)


@register("MAXIMUM")
def maximum(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MAXIMUM (element-wise, broadcasting)."""
    return _min_max(op, args, np.maximum)


# ------------------------------------------------------------------ unary
def unary(op: Op, args: list[np.ndarray | None], ffn: FloatFn,
          ifn: Callable[[np.ndarray], np.ndarray] | None = None) -> list[np.ndarray]:
    """Run a unary float function on float, quantized (table) or plain integer input."""
    x = need(op, args, 0)
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        with np.errstate(all="ignore"):
            return [np.asarray(ffn(x.astype(np.float32)), dtype=np.float32).astype(dt)]
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        return [lut_unary(op, x, ffn)]
    if ifn is None:
        raise unsupported(op, f"{op.type} on non-quantized {x.dtype} input")
    return [ifn(x).astype(dt)]


def rsqrt_f(x: np.ndarray) -> np.ndarray:
    """``1.f / sqrt(x)`` in float32."""
    return np.float32(1) / np.sqrt(x)


@register("RSQRT")
def rsqrt(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RSQRT: ``1 / sqrt(x)``."""
    return unary(op, args, rsqrt_f)


@register("SQRT")
def sqrt(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SQRT."""
    return unary(op, args, np.sqrt)


@register("EXP")
def exp(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """EXP."""
    return unary(op, args, np.exp)


@register("NEG")
def neg(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """NEG; integer (also quantized) values are negated raw, wrapping as LiteRT does."""
    x = need(op, args, 0)
    if np.issubdtype(x.dtype, np.floating):
        return unary(op, args, np.negative)
    return [np.negative(x.astype(np.int64)).astype(x.dtype).astype(out_dtype(op))]


@register("ABS")
def absolute(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """ABS; quantized as TFLite: ``|q - zp_in|`` rescaled by ``s_in / s_out``."""
    x = need(op, args, 0)
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
        dt = out_dtype(op)
        lo, hi = int_range(dt)
        v = np.abs(x.astype(np.int64) - iq.zp)
        if iq.s == oq.s and iq.zp == oq.zp:
            return [np.clip(v + oq.zp, lo, hi).astype(dt)]
        return [requantize(v, np.float64(iq.s) / np.float64(oq.s), oq.zp, lo, hi, dt)]
    return unary(op, args, np.abs, lambda v: np.abs(v.astype(np.int64)))
