"""TFLite's rounding, multiplier arithmetic and quantization parameters, shared by the NumPy
kernels and the C++ generator (which must produce the same integers bit for bit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["round_half_away", "quantize_multiplier", "QParams", "qparams_of"]


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
