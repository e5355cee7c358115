"""TFLite's rounding and multiplier arithmetic, shared by the NumPy kernels and the C++
generator (which must produce the same integers bit for bit)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["round_half_away", "quantize_multiplier"]


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
