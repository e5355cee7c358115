"""TFLite's rounding, multiplier arithmetic and quantization parameters, shared by the NumPy
kernels and the C++ generator (which must produce the same integers bit for bit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["round_half_away", "quantize_multiplier", "QParams", "qparams_of", "c_div",
           "rounding_divide_by_pot", "hard_swish_fixed_point", "dequantize_filter"]


def round_half_away(x: np.ndarray | float | np.floating[Any]) -> np.ndarray:
    """Round to the nearest integer, ties away from zero (C ``std::round``), in x's dtype."""
    x = np.asarray(x)
    t = np.trunc(x)
    frac = x - t  # exact for binary floats
    return np.where(np.abs(frac) >= 0.5, t + np.sign(x), t)


def quantize_multiplier(m: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(mantissa, shift)`` int64 arrays with ``m ~= mantissa * 2**(shift - 31)``.

    ``mantissa`` is in ``[2**30, 2**31)`` (0 for a zero multiplier); a multiplier below
    ``2**-31`` flushes to ``(0, 0)``, as TFLite does.
    """
    m = np.asarray(m, dtype=np.float64)
    q, shift = np.frexp(m)
    shift = shift.astype(np.int64)
    q_fixed = round_half_away(q * float(1 << 31)).astype(np.int64)
    full = q_fixed == (1 << 31)
    q_fixed = np.where(full, q_fixed // 2, q_fixed)
    shift = np.where(full, shift + 1, shift)
    tiny = shift < -31
    q_fixed = np.where(tiny, 0, q_fixed)
    shift = np.where(tiny | (m == 0), 0, shift)
    q_fixed = np.where(m == 0, 0, q_fixed)
    return q_fixed.astype(np.int64), shift.astype(np.int64)


@dataclass(frozen=True)
class QParams:
    """Per-tensor (or per-channel) affine parameters as arrays: float32 scale, int64 zp."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int = 0

    @property
    def s(self) -> np.float32:
        """The (first) scale as a float32 scalar."""
        return np.float32(self.scale.reshape(-1)[0])

    @property
    def zp(self) -> int:
        """The (first) zero point."""
        return int(self.zero_point.reshape(-1)[0])


def qparams_of(quant: Any) -> QParams:
    """The :class:`QParams` of a tensor's quantization (``scale``, ``zero_point``,
    ``quantized_dimension``; a missing zero point is 0)."""
    zp = quant.zero_point
    if zp.size == 0:
        zp = np.zeros(1, dtype=np.int64)
    return QParams(np.asarray(quant.scale, dtype=np.float32).reshape(-1),
                   np.asarray(zp, dtype=np.int64).reshape(-1), int(quant.quantized_dimension))


def dequantize_filter(w: np.ndarray, wq: QParams, axis: int) -> np.ndarray:
    """The float32 values of a quantized filter ``w``: ``scale * (w - zero_point)`` computed in
    float64, per tensor or per channel (along ``wq.axis``, or ``axis`` when ``wq.axis`` is not
    a dimension of ``w``)."""
    scale = wq.scale.astype(np.float64)
    zp = wq.zero_point.astype(np.int64)
    if scale.size > 1:
        shape = [1] * w.ndim
        shape[wq.axis if wq.axis < w.ndim else axis] = scale.size
        scale = scale.reshape(shape)
        zp = zp.reshape(shape) if zp.size > 1 else zp.reshape(-1)[0]
    return (scale * (w.astype(np.int64) - zp)).astype(np.float32)


def c_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero (C semantics), int64."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int16 values."""
    ab = a * np.int64(b)
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    r = c_div(ab + nudge, 1 << 15)
    return np.where((a == -32768) & (b == -32768), 32767, r)


def _to_int16_multiplier(m: int) -> int:
    """TFLite ``DownScaleInt32ToInt16Multiplier``."""
    return 32767 if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16


def hard_swish_fixed_point(x: np.ndarray, in_s: float, in_zp: int, out_s: float,
                           out_zp: int) -> np.ndarray | None:
    """TFLite's 16-bit fixed-point ``reference_ops::HardSwish`` of quantized values ``x``:
    int64 outputs before clipping to the output type, or None where TFLite's fixed point does
    not apply (an output multiplier above 1; TFLite then uses a float table)."""
    hires = np.float32(1.0 / 128.0) * np.float32(in_s)
    reluish_scale = np.float32(3.0) / np.float32(32768.0)
    om, oe_m = quantize_multiplier(np.float64(hires / np.float32(out_s)))
    rm, re_m = quantize_multiplier(np.float64(hires / reluish_scale))
    oe, re = int(oe_m), int(re_m)
    if oe > 0:
        return None
    om16, rm16 = _to_int16_multiplier(int(om)), _to_int16_multiplier(int(rm))
    hires_v = (np.asarray(x, dtype=np.int64) - in_zp) * 128
    preshift = _srdhm16(hires_v, om16)
    rv = hires_v
    if re > 0:
        rv = np.clip(rv << (re - 1), -32768, 32767)
    rv = _srdhm16(rv, rm16)
    if re > 0:
        rv = np.clip(rv * 2, -32768, 32767)
    if re < 0:
        rv = rounding_divide_by_pot(rv, -re)
    rv = (rv + (1 << 15)) >> 1
    prod = rv * preshift
    pre_out = np.where((rv == -32768) & (preshift == -32768), 32767, c_div(prod, 1 << 15))
    return rounding_divide_by_pot(pre_out, -oe) + out_zp
