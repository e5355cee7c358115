"""QUANTIZE and DEQUANTIZE.

* QUANTIZE float -> int, per-tensor: LiteRT's optimized ``AffineQuantize``,
  ``clamp(round(x / scale) + zp)``, computed as its code does: the SIMD body (whole blocks
  of 8 values) multiplies by ``float32(1 / scale)`` in float32 and rounds ties to even; the
  scalar tail (the last ``size % 8`` values) divides in double and rounds ties away from
  zero. Both are reproduced, so the result is bit-exact.
* QUANTIZE float -> int, per-channel: ``clamp(round(x / scale[c]) + zp[c])`` with ties away
  from zero (TFLite's ``PerChannelQuantize``).
* QUANTIZE int -> int (requantize): ``MultiplyByQuantizedMultiplier(q - zp_in,
  s_in / s_out) + zp_out``, clamped, as TFLite's ``Requantize``; LiteRT's SIMD body (whole
  blocks of 16 values) rounds the final shift's ties upward, the scalar tail away from zero.
* DEQUANTIZE: ``float32(double(scale) * (q - zp))`` (TFLite's scalar code), except that for
  per-tensor 8-bit inputs LiteRT's SIMD body (whole blocks of 8 values) computes
  ``q * scale + (-zp * scale)`` in float32, which is reproduced; float16 inputs are widened
  to float32.
"""

from __future__ import annotations

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    dequantize,
    int_range,
    is_quantized,
    need,
    out_dtype,
    qparams,
    quantize_float,
    unsupported,
)
from toolkit.runtime.kernels.fixedpoint import (
    quantize_multiplier,
    round_half_away,
    split_rounding,
)


def affine_quantize(x: np.ndarray, scale: np.float32, zp: int, dt: np.dtype) -> np.ndarray:
    """LiteRT's optimized per-tensor float -> int quantization (see the module docstring)."""
    flat = x.reshape(-1)
    body = flat.size - flat.size % 8
    r = np.empty(flat.shape, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        r[:body] = np.rint(flat[:body] * (np.float32(1) / np.float32(scale)))
        r[body:] = round_half_away(flat[body:].astype(np.float64) / np.float64(scale))
        r = np.clip(np.nan_to_num(r, nan=0.0), -(2.0**40), 2.0**40)
    lo, hi = int_range(dt)
    return np.clip(r.astype(np.int64) + zp, lo, hi).astype(dt).reshape(x.shape)


@register("QUANTIZE")
def quantize(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """QUANTIZE: float -> int, or int -> int requantization."""
    x = need(op, args, 0)
    dt = out_dtype(op)
    oq = qparams(op, op.outputs[0])
    if np.issubdtype(x.dtype, np.floating):
        if oq.scale.size > 1:
            return [quantize_float(x.astype(np.float32), oq, dt)]
        return [affine_quantize(x.astype(np.float32), oq.s, oq.zp, dt)]
    if not is_quantized(op.inputs[0]):
        raise unsupported(op, f"QUANTIZE of a non-quantized {x.dtype} tensor")
    iq = qparams(op, op.inputs[0])
    if iq.scale.size > 1 or oq.scale.size > 1:
        raise unsupported(op, "per-channel requantization is not supported")
    lo, hi = int_range(dt)
    mult, shift = quantize_multiplier(np.float64(iq.s) / np.float64(oq.s))
    v = (x.astype(np.int64) - iq.zp).reshape(-1)
    y = split_rounding(v, mult, shift, 16) + oq.zp
    return [np.clip(y, lo, hi).astype(dt).reshape(x.shape)]


@register("DEQUANTIZE")
def dequantize_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """DEQUANTIZE: int -> float32 (per-tensor or per-channel), or float16 -> float32."""
    x = need(op, args, 0)
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        return [x.astype(dt)]
    qp = qparams(op, op.inputs[0])
    y = dequantize(x, qp)
    if qp.scale.size == 1 and x.dtype in (np.int8, np.uint8):
        flat = y.reshape(-1)
        body = flat.size - flat.size % 8
        xs = x.reshape(-1)[:body].astype(np.float32)
        flat[:body] = xs * qp.s + np.float32(-qp.zp) * qp.s
        y = flat.reshape(x.shape)
    return [y.astype(dt)]
