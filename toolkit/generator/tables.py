"""Lookup tables of int8 ops the C++ kernels compute by indexing (TFLite's arithmetic).

An int8 op with per-tensor quantization has at most 256 (unary) or 65536 (binary) distinct
results, so the generator computes them here, exactly as TFLite does, and the kernel looks
them up (``tk::lut_q8``, ``tk::lookup2_q8``). Unary tables are indexed by ``x + 128``; binary
tables by ``(a + 128) * 256 + (b + 128)``. Every function returns an int8 array.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.fixed_point import (
    QParams,
    hard_swish_fixed_point,
    quantize_multiplier,
    round_half_away,
    rounding_divide_by_pot,
)

__all__ = ["hard_swish_table", "abs_table", "float_pair_table", "float_activation_f32"]

_ALL = np.arange(-128, 128, dtype=np.int64)


def _float_lut(iq: QParams, oq: QParams, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """TFLite's ``LUTPopulate``: dequantize in float32, ``fn``, ``round(y * (1 / s_out))``."""
    deq = np.float32(iq.s) * (_ALL - iq.zp).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(deq), dtype=np.float32)
        r = round_half_away(y * (np.float32(1) / np.float32(oq.s)))
        r = np.clip(np.nan_to_num(r, nan=0.0), -(2.0**40), 2.0**40)
    return np.clip(r.astype(np.int64) + oq.zp, -128, 127).astype(np.int8)


def _hard_swish_f(x: np.ndarray) -> np.ndarray:
    r = np.minimum(np.float32(6), np.maximum(np.float32(0), x + np.float32(3)))
    return x * r / np.float32(6)


def hard_swish_table(iq: QParams, oq: QParams) -> np.ndarray:
    """int8 HARD_SWISH over the 256 inputs: TFLite's 16-bit fixed-point
    ``reference_ops::HardSwish``, or the float table where TFLite's fixed point does not
    apply (an output multiplier above 1)."""
    y = hard_swish_fixed_point(_ALL, float(iq.s), iq.zp, float(oq.s), oq.zp)
    if y is None:
        return _float_lut(iq, oq, _hard_swish_f)
    return np.clip(y, -128, 127).astype(np.int8)


def _mbqm(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` (int32 wrap of the left shift)."""
    if shift > 0:
        x = ((x << shift) + 2**31) % 2**32 - 2**31
    p = (x * np.int64(multiplier) + (1 << 30)) >> 31
    return rounding_divide_by_pot(p, max(-shift, 0))


def abs_table(iq: QParams, oq: QParams) -> np.ndarray:
    """int8 ABS over the 256 inputs (TFLite): ``|q - zp_in|``, rescaled by ``s_in / s_out``
    unless both tensors share their quantization, plus ``zp_out``, clamped."""
    v = np.abs(_ALL - iq.zp)
    if iq.s == oq.s and iq.zp == oq.zp:
        return np.clip(v + oq.zp, -128, 127).astype(np.int8)
    m, s = quantize_multiplier(np.float64(iq.s) / np.float64(oq.s))
    return np.clip(_mbqm(v, int(m), int(s)) + oq.zp, -128, 127).astype(np.int8)


def float_activation_f32(x: np.ndarray, code: int) -> np.ndarray:
    """A fused activation (TFLite's numbering) applied to float32 values."""
    if code == 1:
        return np.maximum(x, np.float32(0))
    if code == 2:
        return np.minimum(np.maximum(x, np.float32(-1)), np.float32(1))
    if code == 3:
        return np.minimum(np.maximum(x, np.float32(0)), np.float32(6))
    if code == 4:
        return np.tanh(x)
    return x


def float_pair_table(qa: QParams, qb: QParams, qo: QParams, act: int, lo: int, hi: int,
                     fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """An int8 binary op computed in float over every pair (65536 values): both inputs
    dequantized (``s * (q - zp)`` in float64, rounded to float32), ``fn`` and the fused
    activation ``act`` in float32, quantized (``round(y / s_out) + zp_out``) and clamped
    to ``[lo, hi]``."""
    a = np.repeat(_ALL, 256)
    b = np.tile(_ALL, 256)
    ra = (np.float64(qa.s) * (a - qa.zp)).astype(np.float32)
    rb = (np.float64(qb.s) * (b - qb.zp)).astype(np.float32)
    with np.errstate(all="ignore"):
        y = float_activation_f32(np.asarray(fn(ra, rb), dtype=np.float32), act)
        r = round_half_away(y / np.float32(qo.s))
    r = np.where(np.isnan(r), 0.0, r)
    r = np.clip(r, -(2.0**40), 2.0**40)
    q = r.astype(np.int64) + qo.zp
    return np.clip(q, lo, hi).astype(np.int8)
