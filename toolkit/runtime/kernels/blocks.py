"""Blocked constants: operands that let NumPy ufuncs run long contiguous inner loops.

A binary ufunc on a contiguous array and a scalar, or a short vector broadcast along the
last axis (a per-channel bias on NHWC data), runs an inner loop per row of that vector and
misses NumPy's SIMD paths. Viewing the array as ``[size / L, L]`` against an ``L``-long
tiled copy of the constant gives the same element-wise results with long inner loops.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["block_len", "const_block", "tile_block", "per_channel"]

_BLOCK = 8192
_MIN_BLOCK = 128


@lru_cache(maxsize=1024)
def block_len(size: int, period: int = 1) -> int:
    """A row length for applying a constant that repeats every ``period`` elements to a flat
    array of ``size`` elements: the largest multiple of ``period`` that divides ``size`` and
    is at most ``max(8192, period)``; 0 when that is shorter than 128 elements (and not the
    whole array) or ``size`` is not a multiple of ``period``."""
    if period <= 0 or size <= 0 or size % period:
        return 0
    rows = size // period
    k = min(rows, max(1, _BLOCK // period))
    while rows % k:
        k -= 1
    length = k * period
    return length if length >= _MIN_BLOCK or length == size else 0


@lru_cache(maxsize=256)
def const_block(value: float | int, dtype: np.dtype, length: int) -> np.ndarray:
    """A read-only array of ``length`` copies of ``value`` (shared between callers)."""
    a = np.full(length, value, dtype=dtype)
    a.setflags(write=False)
    return a


def tile_block(vec: np.ndarray, length: int) -> np.ndarray:
    """One period ``vec`` repeated to ``length`` elements (a multiple of its size), read-only."""
    a = np.ascontiguousarray(np.tile(vec.reshape(-1), length // vec.size))
    a.setflags(write=False)
    return a


def per_channel(v: np.ndarray, length: int) -> np.ndarray | int:
    """An int64 per-channel constant as a Python int when all channels agree, else tiled to
    ``length`` elements or, when ``length`` is 0, as is."""
    v = np.asarray(v, dtype=np.int64).reshape(-1)
    if v.size == 1 or bool((v == v[0]).all()):
        return int(v[0])
    return tile_block(v, length) if length else v
