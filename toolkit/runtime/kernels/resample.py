"""Kernels that change the spatial size: TRANSPOSE_CONV, CONV_3D, RESIZE_BILINEAR and
RESIZE_NEAREST_NEIGHBOR.

TRANSPOSE_CONV scatters each input pixel's products with the filter into the output
(``cols = x @ w``, then one strided add per filter tap) and crops the padding TFLite
computes from the requested output shape; quantized, it accumulates ``(q - zp_in) * w``
exactly in integers and requantizes per output channel. RESIZE_BILINEAR on int8 is TFLite's
``ResizeBilinearInteger`` (10-bit fixed-point positions, products rounded half away from
zero at 20 bits); on float32 its reference arithmetic. CONV_3D sums as LiteRT's optimized
kernel does (im2col, then a GEMM whose accumulators start at the bias): for each output, the
bias, then one fused multiply-add per (depth, row, column, channel) tap in that order, then
the activation's clamp; bit-exact. Each multiply-add is a pass over the output in float64, so
an op of more than :data:`FMA_BUDGET` multiply-adds sums one BLAS product per filter position
instead (the bias added last), within float32 rounding of LiteRT.
"""

from __future__ import annotations

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    bad_input,
    conv_out_and_pad,
    float_activation,
    int_matmul,
    is_quantized,
    need,
    opt,
    out_dtype,
    padding_same,
    qparams,
    unsupported,
)
from toolkit.runtime.kernels.conv import channel_multipliers, quantized_output
from toolkit.util.resample import (
    bilinear_axis_float,
    bilinear_axis_int,
    depth_to_space,
    nearest_source_indices,
    space_to_depth,
)

__all__: list[str] = []

Args = list[np.ndarray | None]
_F32 = np.dtype(np.float32)


# ------------------------------------------------------------------ transpose conv
def _scatter(cols: np.ndarray, n: int, h: int, w: int, o: int, kh: int, kw: int,
             sh: int, sw: int, out_h: int, out_w: int, pt: int, pl: int) -> np.ndarray:
    """Add ``cols`` ([n, h, w, o, kh, kw]) into the strided output and crop the padding."""
    full_h = max((h - 1) * sh + kh, pt + out_h)
    full_w = max((w - 1) * sw + kw, pl + out_w)
    buf = np.zeros((n, full_h, full_w, o), dtype=cols.dtype)
    for ky in range(kh):
        for kx in range(kw):
            buf[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (w - 1) * sw + 1:sw, :] += \
                cols[..., ky, kx]
    return buf[:, pt:pt + out_h, pl:pl + out_w, :]


@register("TRANSPOSE_CONV")
def transpose_conv(op: Op, args: Args) -> list[np.ndarray]:
    """TRANSPOSE_CONV(output_shape, filter [O, KH, KW, C], input, bias?)."""
    out_shape = [int(v) for v in need(op, args, 0).reshape(-1)]
    wgt, x = need(op, args, 1), need(op, args, 2)
    bias = args[3] if len(args) > 3 else None
    if x.ndim != 4 or wgt.ndim != 4 or len(out_shape) != 4:
        raise bad_input(op, f"TRANSPOSE_CONV takes 4-d tensors, got input {list(x.shape)}, "
                            f"filter {list(wgt.shape)}, output shape {out_shape}")
    n, h, w, c = x.shape
    o, kh, kw, c2 = wgt.shape
    if c != c2 or out_shape[3] != o or out_shape[0] != n:
        raise bad_input(op, f"filter {list(wgt.shape)} does not fit input {list(x.shape)} "
                            f"and output shape {out_shape}")
    sh, sw = int(opt(op, "strideH", 1)), int(opt(op, "strideW", 1))
    out_h, out_w = out_shape[1], out_shape[2]
    same = padding_same(op)
    # TFLite: the padding of a convolution from the output size back to the input size
    _, pt, _ = conv_out_and_pad(out_h, kh, sh, 1, same)
    _, pl, _ = conv_out_and_pad(out_w, kw, sw, 1, same)
    if x.dtype == _F32:
        cols = (x.reshape(-1, c) @ wgt.reshape(o * kh * kw, c).T.astype(np.float32))
        cols = cols.reshape(n, h, w, o, kh, kw)
        y = _scatter(cols, n, h, w, o, kh, kw, sh, sw, out_h, out_w, pt, pl)
        if bias is not None:
            y = y + bias.astype(np.float32)
        return [np.ascontiguousarray(float_activation(op, y.astype(np.float32)))]
    if not (is_quantized(op.inputs[2]) and is_quantized(op.outputs[0])):
        raise unsupported(op, f"TRANSPOSE_CONV on non-quantized {x.dtype} input")
    iq, wq, oq = (qparams(op, t) for t in (op.inputs[2], op.inputs[1], op.outputs[0]))
    xv = x.astype(np.int64) - iq.zp
    wv = wgt.astype(np.int64) - (wq.zero_point.reshape(-1, 1, 1, 1)
                                 if wq.zero_point.size == o else int(wq.zp))
    cols = int_matmul(xv.reshape(-1, c), wv.reshape(o * kh * kw, c).T)
    acc = _scatter(cols.reshape(n, h, w, o, kh, kw), n, h, w, o, kh, kw, sh, sw,
                   out_h, out_w, pt, pl)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    mult = channel_multipliers(op, iq, wq, oq, o)
    return [quantized_output(op, np.ascontiguousarray(acc), mult)]


# ------------------------------------------------------------------ conv 3d
FMA_BUDGET = 1 << 24
"""CONV_3D ops of at most this many multiply-adds sum in LiteRT's order, one at a time."""


def fma_f32(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``fmaf(a, b, acc)`` element-wise (broadcasting): float32 ``acc`` plus the exact product
    of float32 values ``a`` and ``b`` (given as float64), rounded once to float32.

    The product is exact in float64. Rounding the float64 sum to float32 is the single
    rounding of the exact sum except where the float64 sum landed exactly on a float32 tie (or
    in float32's subnormal range) while inexact; there the sum is rounded to odd instead (its
    error found by TwoSum: an inexact sum with an even last bit moves one float64 step toward
    the exact value), which rounds to float32 as the exact sum does."""
    p = a * b
    r = acc.astype(np.float64)
    r += p
    bits = r.view(np.int64)
    tie = (bits & 0x1FFFFFFF) == 0x10000000
    tiny = np.abs(r) < 2.0**-125
    fix = tie | (tiny & (r != 0))
    if fix.any():
        acc64 = np.broadcast_to(acc, r.shape)[fix].astype(np.float64)
        pf = np.broadcast_to(p, r.shape)[fix]
        rf = r[fix]
        bp = rf - acc64
        err = (acc64 - (rf - bp)) + (pf - bp)
        odd = (err == 0) | ((rf.view(np.int64) & 1) == 1) | ~np.isfinite(rf)
        r[fix] = np.where(odd, rf, np.nextafter(rf, np.where(err > 0, np.inf, -np.inf)))
    return r.astype(np.float32)


@register("CONV_3D")
def conv_3d(op: Op, args: Args) -> list[np.ndarray]:
    """CONV_3D(input [N, D, H, W, C], filter [KD, KH, KW, C, O], bias?) in float32."""
    x, wgt = need(op, args, 0), need(op, args, 1)
    bias = args[2] if len(args) > 2 else None
    if x.dtype != _F32:
        raise unsupported(op, f"CONV_3D on {x.dtype} input (float32 only)")
    if x.ndim != 5 or wgt.ndim != 5 or wgt.shape[3] != x.shape[4]:
        raise bad_input(op, f"filter {list(wgt.shape)} does not fit input {list(x.shape)}")
    kd, kh, kw, _c, o = wgt.shape
    strides = [int(opt(op, f"stride{a}", 1)) for a in "DHW"]
    dil = [int(opt(op, f"dilation{a}Factor", 1)) for a in "DHW"]
    same = padding_same(op)
    dims = [conv_out_and_pad(s, k, st, d, same)
            for s, k, st, d in zip(x.shape[1:4], (kd, kh, kw), strides, dil)]
    xp = np.pad(x, [(0, 0)] + [(p0, p1) for _, p0, p1 in dims] + [(0, 0)])
    od, oh, ow = (d[0] for d in dims)
    y = np.zeros((x.shape[0], od, oh, ow, o), dtype=np.float32)
    in_order = y.size * kd * kh * kw * _c <= FMA_BUDGET
    if in_order and bias is not None:
        y += bias.astype(np.float32)
    w64 = wgt.astype(np.float64)
    for a in range(kd):
        for b in range(kh):
            for e in range(kw):
                sl = xp[:, a * dil[0]:a * dil[0] + (od - 1) * strides[0] + 1:strides[0],
                        b * dil[1]:b * dil[1] + (oh - 1) * strides[1] + 1:strides[1],
                        e * dil[2]:e * dil[2] + (ow - 1) * strides[2] + 1:strides[2], :]
                if not in_order:
                    y += sl @ wgt[a, b, e].astype(np.float32)
                    continue
                sl = sl.astype(np.float64)
                for c in range(_c):
                    y = fma_f32(y, sl[..., c:c + 1], w64[a, b, e, c])
    if bias is not None and not in_order:
        y += bias.astype(np.float32)
    return [float_activation(op, y)]


# ------------------------------------------------------------------ resize
def _size(op: Op, args: Args) -> tuple[int, int]:
    size = [int(v) for v in need(op, args, 1).reshape(-1)]
    if len(size) != 2 or min(size) < 1:
        raise bad_input(op, f"size {size} is not [new_height, new_width]")
    return size[0], size[1]


def _bilinear_float(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    _n, h, w, _c = x.shape

    y0, y1, fy = bilinear_axis_float(oh, h, align, half)
    x0, x1, fx = bilinear_axis_float(ow, w, align, half)
    dy = fy.reshape(1, oh, 1, 1)
    dx = fx.reshape(1, 1, ow, 1)
    one = np.float32(1)
    top_l = x[:, y0][:, :, x0]
    top_r = x[:, y0][:, :, x1]
    bot_l = x[:, y1][:, :, x0]
    bot_r = x[:, y1][:, :, x1]
    out = (top_l * (one - dy) * (one - dx) + bot_l * dy * (one - dx)
           + top_r * (one - dy) * dx + bot_r * dy * dx)
    return out.astype(np.float32)


def _bilinear_int(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    """TFLite ``ResizeBilinearInteger``."""
    _n, h, w, _c = x.shape

    y0, y1, wy = bilinear_axis_int(oh, h, align, half)
    x0, x1, wx = bilinear_axis_int(ow, w, align, half)
    fy = wy.astype(np.int64).reshape(1, oh, 1, 1)
    fx = wx.astype(np.int64).reshape(1, 1, ow, 1)
    one = 1 << 10
    v = x.astype(np.int64)
    acc = (v[:, y0][:, :, x0] * (one - fy) * (one - fx) + v[:, y1][:, :, x0] * fy * (one - fx)
           + v[:, y0][:, :, x1] * (one - fy) * fx + v[:, y1][:, :, x1] * fy * fx)
    rnd = np.where(acc > 0, 1 << 19, -(1 << 19))
    q = (acc + rnd)
    return (np.sign(q) * (np.abs(q) // (1 << 20))).astype(x.dtype)


@register("RESIZE_BILINEAR")
def resize_bilinear(op: Op, args: Args) -> list[np.ndarray]:
    """RESIZE_BILINEAR to the [height, width] of input 1 (alignCorners, halfPixelCenters)."""
    x = need(op, args, 0)
    if x.ndim != 4:
        raise bad_input(op, f"RESIZE_BILINEAR takes an NHWC input, got {list(x.shape)}")
    oh, ow = _size(op, args)
    align = bool(opt(op, "alignCorners", False))
    half = bool(opt(op, "halfPixelCenters", False))
    if x.dtype == _F32:
        return [_bilinear_float(x, oh, ow, align, half)]
    if x.dtype in (np.dtype(np.int8), np.dtype(np.int16)):
        return [_bilinear_int(x, oh, ow, align, half).astype(out_dtype(op))]
    if x.dtype == np.dtype(np.uint8):
        return [_bilinear_int(x, oh, ow, align, half).astype(out_dtype(op))]
    raise unsupported(op, f"RESIZE_BILINEAR on {x.dtype} input")


@register("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest_neighbor(op: Op, args: Args) -> list[np.ndarray]:
    """RESIZE_NEAREST_NEIGHBOR to the [height, width] of input 1 (values moved as they are)."""
    x = need(op, args, 0)
    if x.ndim != 4:
        raise bad_input(op, f"RESIZE_NEAREST_NEIGHBOR takes an NHWC input, got "
                            f"{list(x.shape)}")
    oh, ow = _size(op, args)
    align = bool(opt(op, "alignCorners", False))
    half = bool(opt(op, "halfPixelCenters", False))
    ys = nearest_source_indices(oh, x.shape[1], align, half)
    xs = nearest_source_indices(ow, x.shape[2], align, half)
    return [np.ascontiguousarray(x[:, ys][:, :, xs])]


def _block_size(op: Op, x: np.ndarray) -> int:
    b = int(opt(op, "blockSize", 0) or 0)
    if x.ndim != 4 or b < 1:
        raise bad_input(op, f"{op.type} takes an NHWC input and a block size >= 1, got "
                            f"{list(x.shape)} and {b}")
    return b


@register("DEPTH_TO_SPACE")
def depth_to_space_kernel(op: Op, args: Args) -> list[np.ndarray]:
    """DEPTH_TO_SPACE (NHWC, DCR order as TFLite): values moved as they are."""
    x = need(op, args, 0)
    b = _block_size(op, x)
    if x.shape[3] % (b * b):
        raise bad_input(op, f"DEPTH_TO_SPACE of {x.shape[3]} channels by block {b}")
    return [np.ascontiguousarray(depth_to_space(x, b))]


@register("SPACE_TO_DEPTH")
def space_to_depth_kernel(op: Op, args: Args) -> list[np.ndarray]:
    """SPACE_TO_DEPTH (NHWC): values moved as they are."""
    x = need(op, args, 0)
    b = _block_size(op, x)
    if x.shape[1] % b or x.shape[2] % b:
        raise bad_input(op, f"SPACE_TO_DEPTH of {x.shape[1]}x{x.shape[2]} by block {b}")
    return [np.ascontiguousarray(space_to_depth(x, b))]
