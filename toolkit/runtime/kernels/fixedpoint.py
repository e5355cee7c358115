"""TFLite's integer arithmetic, vectorised in int64 NumPy.

These are exact ports of the helpers TFLite's quantized kernels use (double-rounding variant,
the default build):

* :func:`quantize_multiplier` -- ``tflite::QuantizeMultiplier``: a real multiplier becomes an
  int32 Q31 mantissa and a power-of-two exponent.
* :func:`srdhm` -- gemmlowp's ``SaturatingRoundingDoublingHighMul``.
* :func:`rounding_divide_by_pot` -- gemmlowp's ``RoundingDivideByPOT``.
* :func:`multiply_by_quantized_multiplier` -- ``tflite::MultiplyByQuantizedMultiplier``.
* :func:`round_half_away` -- ``TfLiteRound`` (``std::round``: ties away from zero).
* :func:`c_div` -- C integer division (truncates toward zero).

All integer helpers take and return int64 arrays (values in int32 range where TFLite uses
int32) and broadcast their arguments, so per-channel multipliers are just arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "INT32_MIN",
    "INT32_MAX",
    "round_half_away",
    "quantize_multiplier",
    "srdhm",
    "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier",
    "wrap_int32",
    "c_div",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def round_half_away(x: np.ndarray | float) -> np.ndarray:
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


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Wrap int64 values to int32 two's complement (as C int32 arithmetic does)."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def c_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero (C semantics), int64."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def srdhm(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values held in int64."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    res = c_div(ab + nudge, 1 << 31)
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, res)


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: np.ndarray | int,
                                     shift: np.ndarray | int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier(int32 x, int32 multiplier, int shift)``."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    xs = wrap_int32(np.asarray(x, dtype=np.int64) << left)
    return rounding_divide_by_pot(srdhm(xs, multiplier), right)
