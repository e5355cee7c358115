"""TFLite's rounding, multiplier arithmetic and quantization parameters, and gemmlowp's
int16 fixed-point logistic, tanh and inverse square root, shared by the NumPy kernels and the
C++ generator (which must produce the same integers bit for bit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["round_half_away", "quantize_multiplier", "QParams", "qparams_of", "c_div",
           "rounding_divide_by_pot", "hard_swish_fixed_point", "dequantize_filter",
           "wrap16", "sat16", "rdbpot", "squared_difference_int8", "single_precision_ratio"]


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


def single_precision_ratio(num: float | np.floating[Any], den: float | np.floating[Any],
                           factor: float | np.floating[Any] = 1.0) -> float:
    """``num * factor / den`` computed as TFLite's MUL and PRELU kernels compute their real
    multipliers: in float32 arithmetic (their scales are C ``float``), the result widened to
    double. The same quotient in double precision gives another multiplier for some scales,
    and outputs 1 apart where a product lands near a rounding tie."""
    with np.errstate(all="ignore"):
        return float((np.float32(num) * np.float32(factor)) / np.float32(den))


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


def _scale_down(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (``shift <= 0``) on int32
    values held in int64: gemmlowp's ``SaturatingRoundingDoublingHighMul`` (the multiplier
    is positive, so it never saturates), then ``RoundingDivideByPOT(-shift)``."""
    high = (np.asarray(x, dtype=np.int64) * np.int64(multiplier) + (1 << 30)) >> 31
    return rounding_divide_by_pot(high, -int(shift))


def squared_difference_int8(a: np.ndarray, b: np.ndarray, qa: QParams, qb: QParams,
                            qo: QParams) -> np.ndarray:
    """TFLite's int8 SQUARED_DIFFERENCE (``squared_difference.cc``) on per-tensor quantized
    ``a`` and ``b`` (broadcasting): each input ``(q - zp) << 7`` rescaled by
    ``s_i / (2 max(sa, sb))``, the difference squared in int32, rescaled by
    ``(2 max(sa, sb))**2 / (2**14 s_out)``, plus ``zp_out``, clamped to int8 (no fused
    activation). Returns an int8 array of the broadcast shape."""
    left_shift = 7
    twice_max = 2.0 * np.float64(max(qa.s, qb.s))
    ma, sa = quantize_multiplier(np.float64(qa.s) / twice_max)
    mb, sb = quantize_multiplier(np.float64(qb.s) / twice_max)
    mo, so = quantize_multiplier(twice_max * twice_max
                                 / (float(1 << (2 * left_shift)) * np.float64(qo.s)))
    va = _scale_down((np.asarray(a, dtype=np.int64) - qa.zp) << left_shift, int(ma), int(sa))
    vb = _scale_down((np.asarray(b, dtype=np.int64) - qb.zp) << left_shift, int(mb), int(sb))
    d = va - vb
    y = _scale_down(d * d, int(mo), int(so)) + qo.zp
    return np.clip(y, -128, 127).astype(np.int8)


def _srdhm16(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int16 values."""
    ab = a * np.asarray(b, dtype=np.int64)
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


# ---------------------------------------------------------------- gemmlowp int16 functions
def wrap16(x: np.ndarray) -> np.ndarray:
    """``x`` wrapped to int16's range, as a cast to ``int16_t`` does (same dtype as ``x``)."""
    return (x + 32768) % 65536 - 32768


def sat16(x: np.ndarray) -> np.ndarray:
    """``x`` saturated to int16's range (same dtype as ``x``)."""
    return np.clip(x, -32768, 32767)


def rdbpot(x: np.ndarray, e: int) -> np.ndarray:
    """:func:`rounding_divide_by_pot` by ``2**e`` for ``e > 0``; ``x`` itself otherwise."""
    return rounding_divide_by_pot(x, e) if e > 0 else x


def _srmpot(x: np.ndarray, e: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<e>`` on int16 values."""
    if e < 0:
        return rdbpot(x, -e)
    if e == 0:
        return x
    threshold = (1 << (15 - e)) - 1
    r = wrap16(x << e)
    return np.where(x > threshold, 32767, np.where(x < -threshold, -32768, r))


def _const16(raw32: int) -> int:
    """gemmlowp's int16 constant of an int32 raw value (RoundingDivideByPOT by 16)."""
    return int(rounding_divide_by_pot(np.asarray(raw32, dtype=np.int64), 16))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """gemmlowp ``exp_on_interval_between_negative_one_quarter_and_0_excl`` (Q0.15)."""
    constant_term = _const16(1895147668)
    one_third = _const16(715827883)
    x = wrap16(a + (1 << 12))
    x2 = _srdhm16(x, x)
    x3 = _srdhm16(x2, x)
    x4 = _srdhm16(x2, x2)
    x4_over_4 = _srmpot(x4, -2)
    poly = _srmpot(wrap16(_srdhm16(wrap16(x4_over_4 + x3), one_third) + x2), -1)
    return sat16(constant_term + _srdhm16(np.asarray(constant_term, dtype=np.int64),
                                           wrap16(x + poly)))


def _exp_negative(a: np.ndarray, int_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values`` of Q(int_bits) int16 values: Q0.15."""
    frac = 15 - int_bits
    quarter = 1 << (frac - 2)
    a_mod = wrap16((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_srmpot(a_mod, int_bits))
    remainder = wrap16(a_mod - a)
    for exponent, mult in _EXP_BARREL:
        if int_bits > exponent:
            bit = 1 << (frac + exponent)
            result = np.where(remainder & bit, _srdhm16(result, _const16(mult)), result)
    if int_bits > 5:
        result = np.where(a < _const16(-(1 << (36 - int_bits))), 0, result)
    return np.where(a == 0, 32767, result)


def _newton(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shared Newton-Raphson part of gemmlowp's ``1 / (1 + a)`` and
    ``(1 - a) / (1 + a)`` for Q0.15 ``a`` in [0, 1]: (x ~ 1 / half_denominator in Q2.13)."""
    s = a + 32767
    half = c_div(s + np.where(s >= 0, 1, -1), 2)
    x = wrap16(_const16(1515870810) + _srdhm16(half, _const16(-1010580540)))
    for _ in range(3):
        one_minus = wrap16(8192 - _srdhm16(half, x))
        x = wrap16(x + _srmpot(_srdhm16(x, one_minus), 2))
    return x, half


def int16_logistic(raw: np.ndarray, int_bits: int = 3) -> np.ndarray:
    """gemmlowp ``logistic`` of int16 Q(int_bits) values (TFLite's ``ApplySigmoid`` takes
    Q3.12): int64 Q0.15 results."""
    a = np.asarray(raw, dtype=np.int64)
    pos = a > 0
    abs_in = np.where(pos, a, wrap16(-a))
    x, _ = _newton(_exp_negative(wrap16(-abs_in), int_bits))
    rp = _srmpot(x, 1)
    rn = wrap16(32767 - rp)
    return np.where(a == 0, _const16(1 << 30), np.where(pos, rp, rn))


def int16_tanh(raw: np.ndarray, int_bits: int) -> np.ndarray:
    """gemmlowp ``tanh`` of int16 Q(int_bits) values (TFLite's ``ApplyTanh``): int64 Q0.15
    results."""
    a = np.asarray(raw, dtype=np.int64)
    neg = a < 0
    n = np.where(neg, a, wrap16(-a))
    x, _ = _newton(_exp_negative(n, int_bits + 1))
    t = _srmpot(wrap16(x - 8192), 2)
    return np.where(a == 0, 0, np.where(neg, wrap16(-t), t))


# ---------------------------------------------------------------- inverse square root
def _wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def _srdhm32(a: int, b: int) -> int:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` of int32 values (Python ints)."""
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b + ((1 << 30) if a * b >= 0 else 1 - (1 << 30))
    q = abs(ab) // (1 << 31)
    return q if ab >= 0 else -q


def _srmpot32(x: int, e: int) -> int:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<e>`` (e > 0) of an int32 value."""
    threshold = (1 << (31 - e)) - 1
    return 2**31 - 1 if x > threshold else -(2**31) if x < -threshold else x << e


def inv_sqrt_multiplier(v: int) -> tuple[int, int]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp(v, reverse_shift=-1)``: (multiplier,
    shift) with ``1 / sqrt(v) ~ multiplier * 2**(shift - 31)`` (gemmlowp's Newton-Raphson
    in Q3.28)."""
    if v <= 1:
        return 2**31 - 1, 0
    shift = 11
    while v >= (1 << 29):
        v //= 4
        shift += 1
    pairs = (32 - v.bit_length() - 1) // 2 - 1
    shift -= pairs
    v <<= 2 * pairs
    half_input = int(rounding_divide_by_pot(np.asarray(v >> 1, dtype=np.int64), 1))
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28
    for _ in range(5):
        x3 = _srmpot32(_srdhm32(_srdhm32(x, x), x), 6)
        x = _srmpot32(_wrap32(_srdhm32(half_three, x) - _srdhm32(half_input, x3)), 3)
    x = _srdhm32(x, 1518500250)
    if shift < 0:
        x = _wrap32(x << -shift)
        shift = 0
    return x, -shift
