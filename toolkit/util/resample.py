"""TFLite's RESIZE_BILINEAR sampling positions and RESIZE_NEAREST_NEIGHBOR source indices
along one axis, and the DEPTH_TO_SPACE / SPACE_TO_DEPTH arrangements, shared by the NumPy
kernels and the native generator's index tables (both must pick the same pixels and
weights)."""

from __future__ import annotations

import numpy as np


def bilinear_axis_float(out: int, size: int, align: bool, half: bool
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float RESIZE_BILINEAR along one axis of ``size`` pixels resized to ``out``.

    Returns (low index, high index, weight of the high pixel): int64, int64 and float32
    arrays of length ``out``, computed in float32 as TFLite's ``ResizeBilinear`` does
    (``align`` = alignCorners, ``half`` = halfPixelCenters)."""
    scale = np.float32((size - 1) / (out - 1)) if align and out > 1 else np.float32(size / out)
    v = np.arange(out, dtype=np.float32)
    pos = ((v + np.float32(0.5)) * scale - np.float32(0.5) if half else v * scale
           ).astype(np.float32)
    lo = np.maximum(np.floor(pos).astype(np.int64), 0)
    hi = np.minimum(np.ceil(pos).astype(np.int64), size - 1)
    return lo, hi, (pos - lo.astype(np.float32)).astype(np.float32)


def bilinear_axis_int(out: int, size: int, align: bool, half: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TFLite's ``ResizeBilinearInteger`` along one axis (positions in 1/1024 of a pixel).

    Returns (low index, high index, weight of the high pixel in 1/1024): int64, int64 and
    int32 arrays of length ``out``."""
    if align and out > 1:
        scale = ((1 << 10) * (size - 1) + (out - 1) // 2) // (out - 1)
    else:
        scale = ((1 << 10) * size + out // 2) // out
    v = np.arange(out, dtype=np.int64)
    pos = v * scale + scale // 2 - (1 << 9) if half else v * scale
    lo = np.maximum(np.trunc(pos / (1 << 10)).astype(np.int64), 0)
    hi = np.minimum(np.trunc((pos + (1 << 10) - 1) / (1 << 10)).astype(np.int64), size - 1)
    return lo, hi, (pos - (1 << 10) * lo).astype(np.int32)


def nearest_source_indices(out: int, size: int, align_corners: bool,
                           half_pixel_centers: bool) -> np.ndarray:
    """The int64 source index along one axis of each of ``out`` output positions resized
    from ``size``: position ``(i + 0.5 if half_pixel_centers) * scale`` in float32, rounded
    half away from zero with ``align_corners`` (else floored), clamped to ``[0, size)``."""
    scale = np.float32((size - 1) / (out - 1)) if align_corners and out > 1 else \
        np.float32(size / out)
    off = np.float32(0.5) if half_pixel_centers else np.float32(0)
    pos = (np.arange(out, dtype=np.float32) + off) * scale
    if align_corners:
        idx = np.sign(pos) * np.floor(np.abs(pos) + np.float32(0.5))
    else:
        idx = np.floor(pos)
    idx = np.minimum(idx.astype(np.int64), size - 1)
    return np.maximum(idx, 0) if half_pixel_centers else idx


def depth_to_space(x: np.ndarray, block: int) -> np.ndarray:
    """TFLite's DEPTH_TO_SPACE of an NHWC array (DCR order): channel ``(i * block + j) * C
    + c`` of pixel ``(h, w)`` goes to pixel ``(h * block + i, w * block + j)``, channel c."""
    n, h, w, c = x.shape
    co = c // (block * block)
    y = x.reshape(n, h, w, block, block, co).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h * block, w * block, co)


def space_to_depth(x: np.ndarray, block: int) -> np.ndarray:
    """TFLite's SPACE_TO_DEPTH of an NHWC array (the inverse of :func:`depth_to_space`)."""
    n, h, w, c = x.shape
    y = x.reshape(n, h // block, block, w // block, block, c).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h // block, w // block, block * block * c)
