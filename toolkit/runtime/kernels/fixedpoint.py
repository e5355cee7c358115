"""TFLite's integer arithmetic, vectorised in int64 NumPy.

These are exact ports of the helpers TFLite's quantized kernels use (double-rounding variant,
the default build):

* :func:`quantize_multiplier` -- ``tflite::QuantizeMultiplier``: a real multiplier becomes an
  int32 Q31 mantissa and a power-of-two exponent.
* :func:`srdhm` -- gemmlowp's ``SaturatingRoundingDoublingHighMul``.
* :func:`rounding_divide_by_pot` -- gemmlowp's ``RoundingDivideByPOT``.
* :func:`multiply_by_quantized_multiplier` -- ``tflite::MultiplyByQuantizedMultiplier``.
* :func:`multiply_by_quantized_multiplier_upward` -- the same with the final rounding shift
  rounding ties upward (toward +inf) instead of away from zero. LiteRT's optimized kernels
  compute it so wherever they are vectorised: ruy's GEMM output stage (CONV_2D,
  FULLY_CONNECTED) and the SIMD bodies of DEPTHWISE_CONV_2D (whole blocks of 8 output
  channels), MEAN over H, W (blocks of 16 channels) and int8 requantization (blocks of 16
  values); their scalar tails use :func:`multiply_by_quantized_multiplier`.
* :func:`split_rounding` -- applies the upward variant to the leading whole SIMD blocks of
  an axis and the standard one to the tail.
* :func:`round_half_away` -- ``TfLiteRound`` (``std::round``: ties away from zero).
* :func:`c_div` -- C integer division (truncates toward zero).
* :class:`Requantizer` -- bias, :func:`split_rounding`, zero point, clamp and cast for
  accumulators of one shape, with its constants prepared once.

All integer helpers take and return int64 arrays (values in int32 range where TFLite uses
int32) and broadcast their arguments, so per-channel multipliers are just arrays.
"""

from __future__ import annotations

import numpy as np

from toolkit.fixed_point import (
    c_div,
    quantize_multiplier,
    round_half_away,
    rounding_divide_by_pot,
)
from toolkit.runtime.kernels.blocks import block_len, per_channel

__all__ = [
    "INT32_MIN",
    "INT32_MAX",
    "round_half_away",
    "quantize_multiplier",
    "srdhm",
    "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_upward",
    "rounding_shift_right_upward",
    "split_rounding",
    "wrap_int32",
    "c_div",
    "Requantizer",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Wrap int64 values to int32 two's complement (as C int32 arithmetic does)."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)



def srdhm(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values held in int64.

    gemmlowp adds a nudge of ``2**30`` (``1 - 2**30`` for negative products) and truncates
    toward zero; that equals ``floor((a b + 2**30) / 2**31)`` for every product, which is
    what is computed here. The one overflow case (both ``INT32_MIN``) saturates.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    res = (a * b + (1 << 30)) >> 31
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, res) if overflow.any() else res



def _shift_left(x: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``x * 2**max(shift, 0)`` in int32 arithmetic (wrapping, as C)."""
    x = np.asarray(x, dtype=np.int64)
    if not (shift > 0).any():
        return x
    return wrap_int32(x << np.maximum(shift, 0))


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: np.ndarray | int,
                                     shift: np.ndarray | int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier(int32 x, int32 multiplier, int shift)``."""
    shift = np.asarray(shift, dtype=np.int64)
    right = np.maximum(-shift, 0)
    return rounding_divide_by_pot(srdhm(_shift_left(x, shift), multiplier), right)


def rounding_shift_right_upward(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """``x / 2**exponent`` rounded to nearest, ties toward +inf (NEON ``vrshl``)."""
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    nudge = np.where(e > 0, np.int64(1) << np.maximum(e - 1, 0), 0)
    return (x + nudge) >> e


def multiply_by_quantized_multiplier_upward(x: np.ndarray, multiplier: np.ndarray | int,
                                            shift: np.ndarray | int) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier`` whose final right shift rounds ties upward."""
    shift = np.asarray(shift, dtype=np.int64)
    right = np.maximum(-shift, 0)
    return rounding_shift_right_upward(srdhm(_shift_left(x, shift), multiplier), right)


def split_rounding(x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int,
                   block: int, axis: int = -1) -> np.ndarray:
    """Requantize ``x`` as a SIMD kernel with ``block``-wide vectors along ``axis`` does:
    the leading ``(n // block) * block`` entries with ties rounded upward, the tail with
    TFLite's scalar ``MultiplyByQuantizedMultiplier``. ``multiplier`` and ``shift`` broadcast
    against ``x``."""
    x = np.asarray(x, dtype=np.int64)
    m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64), x.shape)
    s = np.broadcast_to(np.asarray(shift, dtype=np.int64), x.shape)
    axis = axis % x.ndim
    n = x.shape[axis]
    body = (n // block) * block
    if body == n:
        return multiply_by_quantized_multiplier_upward(x, m, s)
    if body == 0:
        return multiply_by_quantized_multiplier(x, m, s)
    head = (slice(None),) * axis + (slice(0, body),)
    tail = (slice(None),) * axis + (slice(body, None),)
    out = np.empty_like(x)
    out[head] = multiply_by_quantized_multiplier_upward(x[head], m[head], s[head])
    out[tail] = multiply_by_quantized_multiplier(x[tail], m[tail], s[tail])
    return out


class Requantizer:
    """``clamp(split_rounding(acc + bias, M, shift, block) + zp, lo, hi)`` cast to ``dtype``.

    Prepared for accumulators of ``size`` elements whose last axis holds ``channels``
    channels; ``multiplier``, ``shift`` and the optional ``bias`` hold one value per channel
    (or one for all). The accumulators are int64, or floats holding exact integers. The
    result equals :func:`split_rounding` with the same arguments followed by
    ``np.clip(... + zp, lo, hi).astype(dtype)``.

    ``acc_bound``, a bound on ``|acc + bias|`` when known, lets the constants fold when every
    channel rounds ties upward: ``floor((floor((a M + 2**30) / 2**31) + nudge) / 2**r) + zp``
    is ``floor((a M + 2**30 + nudge 2**31 + zp 2**(31 + r)) / 2**(31 + r))`` and ``a = acc +
    bias`` puts ``bias M`` into that constant, as long as nothing overflows int64 (checked).
    """

    __slots__ = ("away", "away_all", "bias", "block", "dtype", "fused", "general",
                 "has_away", "has_right", "hi", "length", "lo", "mult", "nudge", "right",
                 "shift", "zp")

    def __init__(self, multiplier: np.ndarray | int, shift: np.ndarray | int, block: int,
                 zp: int, lo: int, hi: int, dtype: np.dtype, size: int, channels: int,
                 acc_bound: int | None = None, bias: np.ndarray | None = None) -> None:
        m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64).reshape(-1),
                            (channels,)).copy()
        s = np.broadcast_to(np.asarray(shift, dtype=np.int64).reshape(-1), (channels,)).copy()
        b = None if bias is None else \
            np.broadcast_to(np.asarray(bias, dtype=np.int64).reshape(-1), (channels,)).copy()
        self.mult: np.ndarray | int = m
        self.shift, self.block, self.bias = s, block, b
        self.zp, self.lo, self.hi, self.dtype = int(zp), int(lo), int(hi), dtype
        # a left shift wraps in int32 arithmetic: that (rare) case goes to split_rounding
        self.general = channels == 0 or size % channels != 0 or bool((s > 0).any())
        if self.general:
            return
        length = block_len(size, channels)
        self.length = length
        right = -s
        upward = np.arange(channels) < (channels // block) * block
        nudge = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
        away = np.where(~upward & (right > 0), np.int64(-1), np.int64(0))
        self.fused = False
        if bool(upward.all()) and acc_bound is not None:
            total = (1 << 30) + (int(nudge.max(initial=0)) << 31)
            if b is not None:
                total += int(np.abs(b).max(initial=0)) * int(m.max(initial=0))
            total += abs(self.zp) << (31 + int(right.max(initial=0)))
            self.fused = int(acc_bound) * int(m.max(initial=0)) + total < (1 << 63)
        if self.fused:
            const = (1 << 30) + (nudge << 31) + (self.zp << (right + 31))
            if b is not None:
                const = const + b * m
            nudge, right, self.zp, self.bias = const, right + 31, 0, None
        elif b is not None:
            self.bias = per_channel(b, length)  # type: ignore[assignment]
        self.has_right = self.fused or bool((right > 0).any())
        self.has_away = bool(away.any())
        self.away_all = bool((away == -1).all())
        self.nudge = per_channel(nudge, length)
        self.right = per_channel(right, length)
        self.away = per_channel(away, length)
        self.mult = per_channel(m, length)

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        """Requantize the accumulators ``acc`` (of the prepared size and channels)."""
        if self.general:
            a = acc.astype(np.int64)
            if self.bias is not None:
                a = a + self.bias
            y = split_rounding(a, self.mult, self.shift, self.block, axis=-1) + self.zp
            return np.clip(y, self.lo, self.hi).astype(self.dtype)
        a = acc.reshape(-1, self.length) if self.length else acc
        if self.bias is not None:
            a = np.add(a, self.bias, dtype=np.int64, casting="unsafe")
        p = np.multiply(a, self.mult, dtype=np.int64, casting="unsafe")
        if not self.fused:
            p += 1 << 30
            p >>= 31
            if self.has_away:
                neg = p >> 63  # -1 where negative: there ties round away from zero
                if not self.away_all:
                    neg &= self.away
                p += neg
        if self.has_right:
            p += self.nudge
            p >>= self.right
        if self.zp:
            p += self.zp
        np.maximum(p, self.lo, out=p)
        np.minimum(p, self.hi, out=p)
        return p.astype(self.dtype).reshape(acc.shape)
