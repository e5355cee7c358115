"""MAX_POOL_2D and AVERAGE_POOL_2D (NHWC, Pool2DOptions: filter, strides, padding, fused
activation).

Padded positions never count: max pooling pads with the lowest value, average pooling
divides by the number of in-image taps. Quantized average pooling is TFLite's: the int32 sum
of the raw values divided by the tap count, rounding half away from zero, clamped to the
activation range (input and output share their quantization in TFLite).
"""

from __future__ import annotations

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    bad_input,
    float_activation,
    int_range,
    is_quantized,
    need,
    opt,
    out_dtype,
    padding_same,
    quant_activation_range,
)
from toolkit.runtime.kernels.conv import windows
from toolkit.runtime.kernels.fixedpoint import c_div


def _params(op: Op, x: np.ndarray) -> tuple[int, int, int, int, bool]:
    if x.ndim != 4:
        raise bad_input(op, f"pooling needs a 4-D NHWC input, got shape {x.shape}")
    fh = int(opt(op, "filterHeight", 1)) or 1
    fw = int(opt(op, "filterWidth", 1)) or 1
    sh = int(opt(op, "strideH", 1)) or 1
    sw = int(opt(op, "strideW", 1)) or 1
    return fh, fw, sh, sw, padding_same(op)


def _taps(v: np.ndarray) -> np.ndarray:
    """[N, OH, OW, C, KH, KW] -> [N, OH, OW, C, KH*KW]."""
    return v.reshape(*v.shape[:4], -1)


@register("MAX_POOL_2D")
def max_pool2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MAX_POOL_2D."""
    x = need(op, args, 0)
    fh, fw, sh, sw, same = _params(op, x)
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        xf = x.astype(np.float32)
        v = windows(xf, fh, fw, sh, sw, 1, 1, same, -np.inf)
        y = _taps(v).max(axis=-1)
        return [float_activation(op, y).astype(dt)]
    lo_t, _ = int_range(x.dtype)
    v = windows(x, fh, fw, sh, sw, 1, 1, same, lo_t)
    y = _taps(v).max(axis=-1).astype(np.int64)
    if is_quantized(op.outputs[0]):
        lo, hi = quant_activation_range(op, op.outputs[0])
        y = np.clip(y, lo, hi)
    return [y.astype(dt)]


@register("AVERAGE_POOL_2D")
def average_pool2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """AVERAGE_POOL_2D."""
    x = need(op, args, 0)
    fh, fw, sh, sw, same = _params(op, x)
    dt = out_dtype(op)
    ones = np.ones((1, x.shape[1], x.shape[2], 1), dtype=np.int64)
    count = _taps(windows(ones, fh, fw, sh, sw, 1, 1, same, 0)).sum(axis=-1)
    if np.issubdtype(x.dtype, np.floating):
        v = windows(x.astype(np.float32), fh, fw, sh, sw, 1, 1, same, 0.0)
        t = _taps(v)
        total = np.zeros(t.shape[:-1], dtype=np.float32)
        for i in range(t.shape[-1]):
            total += t[..., i]
        with np.errstate(invalid="ignore", divide="ignore"):
            y = total / count.astype(np.float32)
        return [float_activation(op, y).astype(dt)]
    v = windows(x, fh, fw, sh, sw, 1, 1, same, 0)
    acc = _taps(v).astype(np.int64).sum(axis=-1)
    cnt = np.maximum(count, 1)
    half = cnt // 2
    y = np.where(acc > 0, c_div(acc + half, cnt), c_div(acc - half, cnt))
    if is_quantized(op.outputs[0]):
        lo, hi = quant_activation_range(op, op.outputs[0])
    else:
        lo, hi = int_range(dt)
    return [np.clip(y, lo, hi).astype(dt)]
