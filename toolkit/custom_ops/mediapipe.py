"""MediaPipe's TFLite custom ops (``mediapipe/util/tflite/operations/``), registered on import.

Each kernel follows the public C++ source in float32, operation by operation (sums in the
source's order, ``double`` where the source mixes in ``double`` constants), so results agree
with MediaPipe's kernels to the last bits of float32 where the math library agrees:

===============================  ==============================================================
custom code                      what it computes
===============================  ==============================================================
Convolution2DTransposeBias       TRANSPOSE_CONV with a bias; options = TfLiteTransposeConvParams
                                 (int32 padding 1=SAME/2=VALID, stride_w, stride_h); output
                                 ``stride*(in-1) + k - pad`` with ``pad = max(0, k - (in-1) %
                                 stride - 1)`` for SAME, offset by ``pad // 2``
MaxPoolingWithArgmax2D           max pooling and the argmax in the window (``y * filter_w + x +
                                 0.1`` as float32); options = TfLitePoolParams (padding, strides,
                                 filter w/h, fused activation)
MaxUnpooling2D                   scatter of input 0 to the argmax positions of input 1 (float
                                 indices), output ``in * filter``; options = TfLitePoolParams
Landmarks2TransformMatrix (v2)   4x4 matrix from [1, N, 3] landmarks: rotation from two
                                 landmarks, crop centre and size from a subset; options =
                                 FlexBuffers map (left/right_rotation_idx, subset_idxs,
                                 output_height/width, scale_x/y, target_rotation_radians)
TransformLandmarks (v2)          [1, N, D] landmarks through the first two rows of a 4x4 matrix
                                 (D = 2 or 3, z copied); no options
TransformTensorBilinear (v2)     [1, H, W, C] sampled bilinearly (zero outside) at the matrix's
                                 image of each output pixel (align-corners corrected); options =
                                 FlexBuffers map (output_height, output_width)
===============================  ==============================================================

C++ emitters: Convolution2DTransposeBias calls the op library's float transpose convolution;
the other five emit their own small loops, written as MediaPipe's kernels are.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.custom_ops import CustomOptionsError, decode_options, register_custom_op
from toolkit.errors import RuntimeInputError, UnsupportedOpError
from toolkit.ir import Op

__all__ = ["TransposeConvParams", "PoolParams"]

F32 = np.float32
_SAME, _VALID = 1, 2
_ACT = {0: (None, None), 1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def _where(op: Op) -> str:
    return f"custom op {op.custom_code} {op.name!r}"


def _bad(op: Op, what: str) -> RuntimeInputError:
    return RuntimeInputError(what, where=_where(op),
                             fix="check the inputs' shapes against the op's (see "
                                 "toolkit.custom_ops.mediapipe)")


def _float_input(op: Op, args: list[np.ndarray | None], i: int, rank: int) -> np.ndarray:
    if i >= len(args) or args[i] is None:
        raise _bad(op, f"input {i} is missing")
    a = np.asarray(args[i])
    if a.dtype != F32 or a.ndim != rank:
        raise _bad(op, f"input {i} must be a rank-{rank} float32 array, got {a.dtype} "
                       f"{list(a.shape)}")
    return a


# ------------------------------------------------------------------------ options
@dataclass(frozen=True)
class TransposeConvParams:
    """TfLiteTransposeConvParams: padding (1 SAME, 2 VALID) and strides."""

    padding: int
    stride_w: int
    stride_h: int


@dataclass(frozen=True)
class PoolParams:
    """TfLitePoolParams: padding, strides, filter size and fused activation."""

    padding: int
    stride_w: int
    stride_h: int
    filter_w: int
    filter_h: int
    activation: int


def _ints(op: Op, count: int, what: str) -> tuple[int, ...]:
    raw = op.custom_options or b""
    if len(raw) < 4 * count:
        raise CustomOptionsError(f"{what} needs {4 * count} bytes, the blob has {len(raw)}")
    return struct.unpack_from(f"<{count}i", raw, 0)


def _transpose_conv_options(op: Op) -> TransposeConvParams:
    pad, sw, sh = _ints(op, 3, "TfLiteTransposeConvParams")
    if pad not in (_SAME, _VALID) or sw < 1 or sh < 1:
        raise CustomOptionsError(f"padding {pad} (1 SAME or 2 VALID) and strides {sw}x{sh} "
                                 "(>= 1) do not make a transpose convolution")
    return TransposeConvParams(pad, sw, sh)


def _pool_options(op: Op) -> PoolParams:
    pad, sw, sh, fw, fh, act = _ints(op, 6, "TfLitePoolParams")
    if pad not in (_SAME, _VALID) or min(sw, sh, fw, fh) < 1 or act not in _ACT:
        raise CustomOptionsError(f"padding {pad}, strides {sw}x{sh}, filter {fw}x{fh}, "
                                 f"activation {act} do not make a pooling")
    return PoolParams(pad, sw, sh, fw, fh, act)


def _flex(op: Op, keys: Sequence[str]) -> dict[str, Any]:
    from flatbuffers import flexbuffers

    raw = op.custom_options
    if not raw:
        raise CustomOptionsError("the op has no custom_options (a FlexBuffers map is needed)")
    try:
        value = flexbuffers.Loads(bytes(raw))
    except Exception as e:  # the FlexBuffers decoder raises anything on bad bytes
        raise CustomOptionsError(f"not a FlexBuffers map ({type(e).__name__}: {e})") from None
    if not isinstance(value, dict):
        raise CustomOptionsError(f"FlexBuffers value is a {type(value).__name__}, not a map")
    missing = [k for k in keys if k not in value]
    if missing:
        raise CustomOptionsError(f"FlexBuffers map lacks {missing}")
    return value


def _l2m_options(op: Op) -> dict[str, Any]:
    if op.version != 2:
        raise CustomOptionsError(f"version {op.version}: only version 2 is implemented")
    v = _flex(op, ["left_rotation_idx", "right_rotation_idx", "subset_idxs", "output_height",
                   "output_width", "scale_x", "scale_y"])
    subset = [int(i) for i in v["subset_idxs"]]
    if len(subset) % 2:  # an odd count pairs its last index with itself (as MediaPipe)
        subset.append(subset[-1])
    ints = [int(v["left_rotation_idx"]), int(v["right_rotation_idx"]), *subset]
    if not subset or min(ints) < 0 or int(v["output_height"]) <= 0 \
            or int(v["output_width"]) <= 0 or float(v["scale_x"]) <= 0 \
            or float(v["scale_y"]) <= 0:
        raise CustomOptionsError("indices must be >= 0, sizes and scales > 0")
    return {"left": ints[0], "right": ints[1], "subset": subset,
            "out_h": int(v["output_height"]), "out_w": int(v["output_width"]),
            "scale_x": F32(v["scale_x"]), "scale_y": F32(v["scale_y"]),
            "target": F32(v.get("target_rotation_radians", 0.0))}


def _bilinear_options(op: Op) -> tuple[int, int]:
    if op.version != 2:
        raise CustomOptionsError(f"version {op.version}: only version 2 is implemented")
    v = _flex(op, ["output_height", "output_width"])
    h, w = int(v["output_height"]), int(v["output_width"])
    if h <= 0 or w <= 0:
        raise CustomOptionsError(f"output size {h}x{w}")
    return h, w


def _landmarks_options(op: Op) -> None:
    if op.version != 2:
        raise CustomOptionsError(f"version {op.version}: only version 2 is implemented")


# --------------------------------------------------------------- transpose conv
def _tconv_geometry(op: Op, x_shape: Sequence[int], w_shape: Sequence[int]
                    ) -> tuple[int, int, int, int]:
    """Output height, width and the top/left offsets of Convolution2DTransposeBias."""
    p = decode_options(op)
    _, ih, iw, _ = x_shape
    _, kh, kw, _ = w_shape
    ph = pw = 0
    if p.padding == _SAME:
        ph = max(0, kh - (ih - 1) % p.stride_h - 1)
        pw = max(0, kw - (iw - 1) % p.stride_w - 1)
    return p.stride_h * (ih - 1) + kh - ph, p.stride_w * (iw - 1) + kw - pw, ph // 2, pw // 2


def _tconv_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    x = _float_input(op, args, 0, 4)
    w = _float_input(op, args, 1, 4)
    b = _float_input(op, args, 2, 1)
    n, ih, iw, c = x.shape
    o, kh, kw, c2 = w.shape
    if c2 != c or b.size != o:
        raise _bad(op, f"filter {list(w.shape)} and bias {list(b.shape)} do not fit input "
                       f"{list(x.shape)}")
    p = decode_options(op)
    oh, ow, pt, pl = _tconv_geometry(op, x.shape, w.shape)
    # every input pixel adds x . w[:, fy, fx, :] at (iy*s - pt + fy, ix*s - pl + fx)
    full_h, full_w = (ih - 1) * p.stride_h + kh, (iw - 1) * p.stride_w + kw
    acc = np.zeros((n, full_h, full_w, o), dtype=F32)
    for fy in range(kh):
        for fx in range(kw):
            contrib = (x.reshape(-1, c) @ w[:, fy, fx, :].T).reshape(n, ih, iw, o)
            acc[:, fy:fy + (ih - 1) * p.stride_h + 1:p.stride_h,
                fx:fx + (iw - 1) * p.stride_w + 1:p.stride_w] += contrib
    # (pt + oh <= full_h: the crop stays inside the full image)
    out = b.reshape(1, 1, 1, o) + acc[:, pt:pt + oh, pl:pl + ow]
    return [np.ascontiguousarray(out, dtype=F32)]


def _tconv_shapes(op: Op, shapes: Sequence[Sequence[int] | None]) -> list[tuple[int, ...]]:
    x, w = shapes[0], shapes[1]
    assert x is not None and w is not None
    oh, ow, _, _ = _tconv_geometry(op, x, w)
    return [(int(x[0]), oh, ow, int(w[0]))]


def _tconv_macs(op: Op) -> int:
    x, w = op.inputs[0], op.inputs[1]
    if x is None or w is None or len(w.shape) != 4:
        return 0
    return math.prod(x.shape) * int(w.shape[0]) * int(w.shape[1]) * int(w.shape[2])


def _tconv_emit(e: Any, step: Any) -> str:
    op = step.op
    x, w, b, out = op.inputs[0], op.inputs[1], op.inputs[2], op.outputs[0]
    if w is None or b is None or w.data is None or b.data is None:
        raise UnsupportedOpError("Convolution2DTransposeBias needs constant weights and bias",
                                 where=_where(op), fix="compute the weights before the op")
    n, ih, iw, c = x.shape
    o, kh, kw, _ = w.shape
    p = decode_options(op)
    oh, ow, pt, pl = _tconv_geometry(op, x.shape, w.shape)
    geom = (f"tk::TConvGeom{{{n}, {ih}, {iw}, {c}, {kh}, {kw}, {o}, {p.stride_h}, "
            f"{p.stride_w}, {oh}, {ow}, {pt}, {pl}}}")
    nr, wp = e.transpose_conv_filter(np.asarray(w.data, dtype=F32))
    bp = e.param(np.ascontiguousarray(b.data, dtype=F32).reshape(-1), "float")
    return (f"tk::transpose_conv_f32_gemm({geom}, {e.ptr(x)}, {wp}, {nr}, {bp}, 0, "
            f"{e.ptr(out, False)});")


# ---------------------------------------------------------------------- pooling
def _compute_padding(stride: int, in_size: int, filt: int, out_size: int) -> int:
    return max(0, ((out_size - 1) * stride + filt - in_size) // 2)


def _pool_out(p: PoolParams, h: int, w: int) -> tuple[int, int]:
    if p.padding == _SAME:
        return (h + p.stride_h - 1) // p.stride_h, (w + p.stride_w - 1) // p.stride_w
    return (h - p.filter_h + p.stride_h) // p.stride_h, (w - p.filter_w + p.stride_w) // p.stride_w


def _argmax_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    x = _float_input(op, args, 0, 4)
    p = decode_options(op)
    n, h, w, c = x.shape
    oh, ow = _pool_out(p, h, w)
    pt = _compute_padding(p.stride_h, h, p.filter_h, oh)
    pl = _compute_padding(p.stride_w, w, p.filter_w, ow)
    best = np.full((n, oh, ow, c), np.finfo(F32).min, dtype=F32)
    arg = np.zeros((n, oh, ow, c), dtype=np.int64)
    oy = np.arange(oh) * p.stride_h - pt
    ox = np.arange(ow) * p.stride_w - pl
    for fy in range(p.filter_h):
        iy = oy + fy
        vy = (iy >= 0) & (iy < h)
        for fx in range(p.filter_w):
            ix = ox + fx
            vx = (ix >= 0) & (ix < w)
            cur = x[:, np.clip(iy, 0, h - 1)][:, :, np.clip(ix, 0, w - 1)]
            take = (cur > best) & vy[None, :, None, None] & vx[None, None, :, None]
            best = np.where(take, cur, best)
            arg = np.where(take, fy * p.filter_w + fx, arg)
    lo, hi = _ACT[p.activation]
    if lo is not None:
        best = np.maximum(best, F32(lo))
    if hi is not None:
        best = np.minimum(best, F32(hi))
    return [best.astype(F32), (arg.astype(F32) + F32(0.1)).astype(F32)]


def _argmax_shapes(op: Op, shapes: Sequence[Sequence[int] | None]) -> list[tuple[int, ...]]:
    x = shapes[0]
    assert x is not None
    oh, ow = _pool_out(decode_options(op), int(x[1]), int(x[2]))
    return [(int(x[0]), oh, ow, int(x[3]))] * 2


def _unpool_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    x = _float_input(op, args, 0, 4)
    idx = _float_input(op, args, 1, 4)
    if idx.shape != x.shape:
        raise _bad(op, f"indices {list(idx.shape)} differ from the input {list(x.shape)}")
    p = decode_options(op)
    n, h, w, c = x.shape
    oh, ow = h * p.filter_h, w * p.filter_w
    pt = _compute_padding(p.stride_h, oh, p.filter_h, h)
    pl = _compute_padding(p.stride_w, ow, p.filter_w, w)
    k = idx.astype(np.int64)  # C++ float -> int truncates toward zero
    my, mx = k // p.filter_w, k % p.filter_w
    if (k < 0).any():  # C++ division truncates; Python floors
        my = np.trunc(k / p.filter_w).astype(np.int64)
        mx = k - my * p.filter_w
    yy = np.arange(h).reshape(1, h, 1, 1) * p.stride_h - pt + my
    xx = np.arange(w).reshape(1, 1, w, 1) * p.stride_w - pl + mx
    ok = (yy >= 0) & (yy < oh) & (xx >= 0) & (xx < ow)
    out = np.zeros((n, oh, ow, c), dtype=F32)
    b, _, _, ch = np.nonzero(ok)
    sel = ok
    out[b, yy[sel], xx[sel], ch] = x[sel]
    return [out]


def _unpool_shapes(op: Op, shapes: Sequence[Sequence[int] | None]) -> list[tuple[int, ...]]:
    x = shapes[0]
    assert x is not None
    p = decode_options(op)
    return [(int(x[0]), int(x[1]) * p.filter_h, int(x[2]) * p.filter_w, int(x[3]))]


# -------------------------------------------------------------------- landmarks
def _mat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Square float32 matrices multiplied as MediaPipe's Mat3/Mat4 do (sum from k = 0)."""
    n = a.shape[0]
    out = np.zeros((n, n), dtype=F32)
    for r in range(n):
        for c in range(n):
            s = F32(0)
            for k in range(n):
                s = F32(s + F32(a[r, k] * b[k, c]))
            out[r, c] = s
    return out


def _mat_vec(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a @ v`` for the columns of ``v`` (3 x N), summed from k = 0 in float32."""
    out = np.empty_like(v)
    for r in range(3):
        s = np.zeros(v.shape[1:], dtype=F32)
        for k in range(3):
            s = (s + a[r, k] * v[k]).astype(F32)
        out[r] = s
    return out


def l2m_matrix(landmarks: np.ndarray, o: dict[str, Any]) -> np.ndarray:
    """Landmarks2TransformMatrix v2 of [N, 3] float32 landmarks: the 4x4 matrix."""
    lm = landmarks
    left, right = lm[o["left"]], lm[o["right"]]
    rot = F32(math.atan2(float(F32(right[1] - left[1])), float(F32(right[0] - left[0]))))
    rot = F32(o["target"] - rot)
    pts = lm[o["subset"]].T.astype(F32).copy()  # 3 x 2K (pairs flattened)
    pts[2] = F32(1.0)
    cos, sin = F32(math.cos(rot)), F32(math.sin(rot))
    cos_n, sin_n = F32(math.cos(-rot)), F32(math.sin(-rot))
    t_rot = np.array([[cos, -sin, 0], [sin, cos, 0], [0, 0, 1]], dtype=F32)
    t_inv = np.array([[cos_n, -sin_n, 0], [sin_n, cos_n, 0], [0, 0, 1]], dtype=F32)
    pts = _mat_vec(t_rot, pts)
    mx, mn = pts.max(axis=1), pts.min(axis=1)
    mx[2] = mn[2] = pts[2, 0]
    crop_w, crop_h = F32(mx[0] - mn[0]), F32(mx[1] - mn[1])
    centre = mn.copy()
    centre[0] = F32(F32(centre[0] + mx[0]) / F32(2))
    centre[1] = F32(F32(centre[1] + mx[1]) / F32(2))
    centre = _mat_vec(t_inv, centre.reshape(3, 1)).reshape(3)
    r = F32(-rot)
    cr, sr = F32(math.cos(r)), F32(math.sin(r))
    eye = np.eye(4, dtype=F32)
    t = eye.copy()
    shift = eye.copy()
    shift[0, 3], shift[1, 3] = centre[0], centre[1]
    t = _mat_mul(t, shift)
    rot4 = eye.copy()
    rot4[:2, :2] = [[cr, -sr], [sr, cr]]
    t = _mat_mul(t, rot4)
    sx = F32(F32(o["scale_x"] * crop_w) / F32(o["out_w"]))
    sy = F32(F32(o["scale_y"] * crop_h) / F32(o["out_h"]))
    t = _mat_mul(t, np.diag(np.array([sx, sy, 1, 1], dtype=F32)))
    shift2 = eye.copy()
    shift2[0, 3], shift2[1, 3] = F32(-1.0 * (o["out_w"] / 2.0)), F32(-1.0 * (o["out_h"] / 2.0))
    return _mat_mul(t, shift2)


def _l2m_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    x = _float_input(op, args, 0, 3)
    o = decode_options(op)
    lm = x.reshape(-1, 3)
    top = max(o["left"], o["right"], *o["subset"])
    if top >= lm.shape[0]:
        raise _bad(op, f"landmark index {top} for {lm.shape[0]} landmarks")
    return [l2m_matrix(lm, o).reshape(1, 4, 4)]


def _dot4(row: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MediaPipe's DotProduct of ``row`` with (x, y, 0, 1), in float32 from the left."""
    s = (row[0] * x).astype(F32)
    s = (s + row[1] * y).astype(F32)
    s = (s + row[2] * F32(0)).astype(F32)
    return (s + row[3] * F32(1)).astype(F32)


def _landmarks_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    x = _float_input(op, args, 0, 3)
    m = _float_input(op, args, 1, 3)
    decode_options(op)
    d = x.shape[2]
    if d not in (2, 3) or m.size != 16:
        raise _bad(op, f"landmarks of {d} values (2 or 3) and a 4x4 matrix are needed, got "
                       f"{list(x.shape)} and {list(m.shape)}")
    mat = m.reshape(4, 4)
    lm = x.reshape(-1, d)
    out = lm.copy()
    out[:, 0] = _dot4(mat[0], lm[:, 0], lm[:, 1])
    out[:, 1] = _dot4(mat[1], lm[:, 0], lm[:, 1])
    return [out.reshape(x.shape)]


def bilinear_sample(x: np.ndarray, mat: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """TransformTensorBilinear v2 of one [H, W, C] float32 image: the [oh, ow, C] samples."""
    h, w, _ = x.shape
    xt = mat[0].astype(F32).copy()
    yt = mat[1].astype(F32).copy()
    xt[3] = F32(float(xt[3]) + (float(xt[0]) * 0.5 + float(xt[1]) * 0.5 - 0.5))
    yt[3] = F32(float(yt[3]) + (float(yt[0]) * 0.5 + float(yt[1]) * 0.5 - 0.5))
    gy, gx = np.meshgrid(np.arange(oh, dtype=F32), np.arange(ow, dtype=F32), indexing="ij")
    tx, ty = _dot4(xt, gx, gy), _dot4(yt, gx, gy)
    out_b = (tx < 0) | (tx > w - 1) | (ty < 0) | (ty > h - 1)
    fx, fy = np.floor(tx), np.floor(ty)
    x0, y0 = fx.astype(np.int64), fy.astype(np.int64)

    def read(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
        ok = (yy >= 0) & (xx >= 0) & (yy < h) & (xx < w) & ~out_b
        v = x[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
        return np.where(ok[..., None], v, F32(0)).astype(F32)

    q11, q21 = read(y0, x0), read(y0, x0 + 1)
    q12, q22 = read(y0 + 1, x0), read(y0 + 1, x0 + 1)
    rc = (tx - fx).astype(F32)[..., None]
    lc = (ty - fy).astype(F32)[..., None]
    d = np.float64
    upper = ((1.0 - rc.astype(d)) * q11 + (rc * q21).astype(F32)).astype(F32)
    lower = ((1.0 - rc.astype(d)) * q12 + (rc * q22).astype(F32)).astype(F32)
    res = ((lc * lower).astype(F32).astype(d) + (1.0 - lc.astype(d)) * upper).astype(F32)
    return np.where(out_b[..., None], F32(0), res).astype(F32)


def _bilinear_kernel(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    x = _float_input(op, args, 0, 4)
    m = _float_input(op, args, 1, 3)
    oh, ow = decode_options(op)
    if m.size != 16 or x.shape[0] != 1:
        raise _bad(op, f"a [1, H, W, C] input and a 4x4 matrix are needed, got "
                       f"{list(x.shape)} and {list(m.shape)}")
    return [bilinear_sample(x[0], m.reshape(4, 4), oh, ow)[None]]


def _bilinear_shapes(op: Op, shapes: Sequence[Sequence[int] | None]) -> list[tuple[int, ...]]:
    x = shapes[0]
    assert x is not None
    oh, ow = decode_options(op)
    return [(int(x[0]), oh, ow, int(x[3]))]


# ------------------------------------------------------------------ C++ emitters
def _landmarks_emit(e: Any, step: Any) -> str:
    op = step.op
    x, m, out = op.inputs[0], op.inputs[1], op.outputs[0]
    decode_options(op)
    n, d = int(x.shape[1]), int(x.shape[2])
    return f"""{{ // TransformLandmarks v2: DotProduct(row, (x, y, 0, 1)) as MediaPipe sums it
  const float* x = {e.ptr(x)}; const float* m = {e.ptr(m)}; float* y = {e.ptr(out, False)};
  for (int i = 0; i < {n}; ++i) {{
    const float lx = x[i * {d}], ly = x[i * {d} + 1];
    float ox = m[0] * lx; ox = ox + m[1] * ly; ox = ox + m[2] * 0.0f; ox = ox + m[3] * 1.0f;
    float oy = m[4] * lx; oy = oy + m[5] * ly; oy = oy + m[6] * 0.0f; oy = oy + m[7] * 1.0f;
    {"const float lz = x[i * 3 + 2];" if d == 3 else ""}
    y[i * {d}] = ox; y[i * {d} + 1] = oy;{" y[i * 3 + 2] = lz;" if d == 3 else ""}
  }}
}}"""


def _bilinear_emit(e: Any, step: Any) -> str:
    op = step.op
    x, m, out = op.inputs[0], op.inputs[1], op.outputs[0]
    oh, ow = decode_options(op)
    _, h, w, c = (int(v) for v in x.shape)
    return f"""{{ // TransformTensorBilinear v2 (MediaPipe's float/double arithmetic)
  const float* x = {e.ptr(x)}; const float* m = {e.ptr(m)}; float* y = {e.ptr(out, False)};
  float xt[4] = {{m[0], m[1], m[2], m[3]}}, yt[4] = {{m[4], m[5], m[6], m[7]}};
  xt[3] += xt[0] * 0.5 + xt[1] * 0.5 - 0.5;
  yt[3] += yt[0] * 0.5 + yt[1] * 0.5 - 0.5;
  for (int oy = 0; oy < {oh}; ++oy) {{
    for (int ox = 0; ox < {ow}; ++ox) {{
      const float cx = static_cast<float>(ox), cy = static_cast<float>(oy);
      float tx = xt[0] * cx; tx = tx + xt[1] * cy; tx = tx + xt[2] * 0.0f; tx = tx + xt[3] * 1.0f;
      float ty = yt[0] * cx; ty = ty + yt[1] * cy; ty = ty + yt[2] * 0.0f; ty = ty + yt[3] * 1.0f;
      const bool oob = tx < 0.0 || tx > {w} - 1 || ty < 0.0 || ty > {h} - 1;
      const float fx = std::floor(tx), fy = std::floor(ty);
      const int x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
      const float rc = tx - fx, lc = ty - fy;
      float* o = y + (static_cast<int64_t>(oy) * {ow} + ox) * {c};
      for (int k = 0; k < {c}; ++k) {{
        float r = 0;
        if (!oob) {{
          auto at = [&](int hh, int ww) -> float {{
            return hh < 0 || ww < 0 || hh >= {h} || ww >= {w} ? 0
                : x[(static_cast<int64_t>(hh) * {w} + ww) * {c} + k];
          }};
          const float q11 = at(y0, x0), q21 = at(y0, x0 + 1);
          const float q12 = at(y0 + 1, x0), q22 = at(y0 + 1, x0 + 1);
          const float upper = (1.0 - rc) * q11 + rc * q21;
          const float lower = (1.0 - rc) * q12 + rc * q22;
          r = lc * lower + (1.0 - lc) * upper;
        }}
        o[k] = r;
      }}
    }}
  }}
}}"""


def _l2m_emit(e: Any, step: Any) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    o = decode_options(op)
    n = math.prod(x.shape) // 3
    top = max(o["left"], o["right"], *o["subset"])
    if top >= n:
        raise UnsupportedOpError(f"landmark index {top} for {n} landmarks", where=_where(op),
                                 fix="check the op's options against its input")
    subset = e.param(np.asarray(o["subset"], dtype=np.int32), "int32_t")
    k = len(o["subset"])
    return f"""{{ // Landmarks2TransformMatrix v2 (MediaPipe's Mat3/Mat4 float arithmetic)
  const float* lm = {e.ptr(x)}; float* y = {e.ptr(out, False)};
  const int32_t* sub = {subset};
  auto mat3 = [](const float* a, const float* v, float* r) {{
    for (int i = 0; i < 3; ++i) {{
      float s = 0;
      for (int j = 0; j < 3; ++j) s += a[i * 3 + j] * v[j];
      r[i] = s;
    }}
  }};
  auto mat4 = [](float* t, const float* b) {{
    float r[16];
    for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) {{
      float s = 0;
      for (int q = 0; q < 4; ++q) s += t[i * 4 + q] * b[q * 4 + j];
      r[i * 4 + j] = s;
    }}
    std::memcpy(t, r, sizeof(r));
  }};
  const float* lft = lm + 3 * {o["left"]}; const float* rgt = lm + 3 * {o["right"]};
  float rot = std::atan2(rgt[1] - lft[1], rgt[0] - lft[0]);
  rot = {float(o["target"])!r}f - rot;
  const float c = std::cos(rot), s = std::sin(rot), cn = std::cos(-rot), sn = std::sin(-rot);
  const float tr[9] = {{c, -s, 0, s, c, 0, 0, 0, 1}};
  const float ti[9] = {{cn, -sn, 0, sn, cn, 0, 0, 0, 1}};
  float mx[3], mn[3];
  for (int i = 0; i < {k}; ++i) {{
    const float v[3] = {{lm[3 * sub[i]], lm[3 * sub[i] + 1], 1.0f}};
    float p[3]; mat3(tr, v, p);
    if (i == 0) {{ std::memcpy(mx, p, sizeof(p)); std::memcpy(mn, p, sizeof(p)); continue; }}
    if (mx[0] < p[0]) mx[0] = p[0]; if (mx[1] < p[1]) mx[1] = p[1];
    if (mn[0] > p[0]) mn[0] = p[0]; if (mn[1] > p[1]) mn[1] = p[1];
  }}
  const float cw = mx[0] - mn[0], ch = mx[1] - mn[1];
  float cxy[3] = {{mn[0], mn[1], mn[2]}};
  cxy[0] += mx[0]; cxy[1] += mx[1]; cxy[0] /= 2; cxy[1] /= 2;
  float cc[3]; mat3(ti, cxy, cc);
  float t[16] = {{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}};
  const float sh[16] = {{1, 0, 0, cc[0], 0, 1, 0, cc[1], 0, 0, 1, 0, 0, 0, 0, 1}};
  mat4(t, sh);
  const float r = -rot, cr = std::cos(r), sr = std::sin(r);
  const float r4[16] = {{cr, -sr, 0, 0, sr, cr, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}};
  mat4(t, r4);
  const float sx = {float(o["scale_x"])!r}f * cw / {o["out_w"]};
  const float sy = {float(o["scale_y"])!r}f * ch / {o["out_h"]};
  const float sc[16] = {{sx, 0, 0, 0, 0, sy, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}};
  mat4(t, sc);
  const float s2x = -1.0 * ({o["out_w"]} / 2.0), s2y = -1.0 * ({o["out_h"]} / 2.0);
  const float sh2[16] = {{1, 0, 0, s2x, 0, 1, 0, s2y, 0, 0, 1, 0, 0, 0, 0, 1}};
  mat4(t, sh2);
  std::memcpy(y, t, sizeof(t));
}}"""


def _argmax_emit(e: Any, step: Any) -> str:
    op = step.op
    x, (val, arg) = op.inputs[0], op.outputs
    p = decode_options(op)
    n, h, w, c = (int(v) for v in x.shape)
    oh, ow = _pool_out(p, h, w)
    pt = _compute_padding(p.stride_h, h, p.filter_h, oh)
    pl = _compute_padding(p.stride_w, w, p.filter_w, ow)
    lo, hi = _ACT[p.activation]
    clamp = "".join([f" if (best < {lo!r}f) best = {lo!r}f;" if lo is not None else "",
                     f" if (best > {hi!r}f) best = {hi!r}f;" if hi is not None else ""])
    return f"""{{ // MaxPoolingWithArgmax2D (MediaPipe's loop)
  const float* x = {e.ptr(x)}; float* v = {e.ptr(val, False)}; float* a = {e.ptr(arg, False)};
  for (int b = 0; b < {n}; ++b) for (int oy = 0; oy < {oh}; ++oy)
  for (int ox = 0; ox < {ow}; ++ox) for (int ch = 0; ch < {c}; ++ch) {{
    const int iy0 = oy * {p.stride_h} - {pt}, ix0 = ox * {p.stride_w} - {pl};
    const int fy0 = std::max(0, -iy0), fy1 = std::min({p.filter_h}, {h} - iy0);
    const int fx0 = std::max(0, -ix0), fx1 = std::min({p.filter_w}, {w} - ix0);
    float best = std::numeric_limits<float>::lowest();
    int my = 0, mx = 0;
    for (int fy = fy0; fy < fy1; ++fy) for (int fx = fx0; fx < fx1; ++fx) {{
      const float cur = x[((static_cast<int64_t>(b) * {h} + iy0 + fy) * {w} + ix0 + fx) * {c} + ch];
      if (cur > best) {{ best = cur; my = fy; mx = fx; }}
    }}{clamp}
    const int64_t o = ((static_cast<int64_t>(b) * {oh} + oy) * {ow} + ox) * {c} + ch;
    v[o] = best;
    a[o] = my * {p.filter_w} + mx + 0.1f;
  }}
}}"""


def _unpool_emit(e: Any, step: Any) -> str:
    op = step.op
    x, idx, out = op.inputs[0], op.inputs[1], op.outputs[0]
    p = decode_options(op)
    n, h, w, c = (int(v) for v in x.shape)
    oh, ow = h * p.filter_h, w * p.filter_w
    pt = _compute_padding(p.stride_h, oh, p.filter_h, h)
    pl = _compute_padding(p.stride_w, ow, p.filter_w, w)
    return f"""{{ // MaxUnpooling2D (MediaPipe's loop: out-of-range indices skipped)
  const float* x = {e.ptr(x)}; const float* k = {e.ptr(idx)}; float* y = {e.ptr(out, False)};
  std::memset(y, 0, sizeof(float) * {n * oh * ow * c});
  for (int b = 0; b < {n}; ++b) for (int iy = 0; iy < {h}; ++iy)
  for (int ix = 0; ix < {w}; ++ix) for (int ch = 0; ch < {c}; ++ch) {{
    const int64_t i = ((static_cast<int64_t>(b) * {h} + iy) * {w} + ix) * {c} + ch;
    const int id = static_cast<int>(k[i]);
    const int oy = iy * {p.stride_h} - {pt} + id / {p.filter_w};
    const int ox = ix * {p.stride_w} - {pl} + id % {p.filter_w};
    if (oy >= 0 && oy < {oh} && ox >= 0 && ox < {ow})
      y[((static_cast<int64_t>(b) * {oh} + oy) * {ow} + ox) * {c} + ch] = x[i];
  }}
}}"""


def _out_elements(op: Op) -> int:
    return sum(math.prod(t.shape) for t in op.outputs)


def _bilinear_macs(op: Op) -> int:
    return 4 * math.prod(op.outputs[0].shape)


register_custom_op("Convolution2DTransposeBias", _tconv_kernel, shapes=_tconv_shapes,
                   macs=_tconv_macs, options=_transpose_conv_options, emit=_tconv_emit,
                   doc="MediaPipe: TRANSPOSE_CONV with bias (float32)")
register_custom_op("MaxPoolingWithArgmax2D", _argmax_kernel, shapes=_argmax_shapes,
                   macs=_out_elements, options=_pool_options, emit=_argmax_emit,
                   doc="MediaPipe: max pooling with argmax (float32)")
register_custom_op("MaxUnpooling2D", _unpool_kernel, shapes=_unpool_shapes,
                   macs=_out_elements, options=_pool_options, emit=_unpool_emit,
                   doc="MediaPipe: max unpooling by argmax (float32)")
register_custom_op("Landmarks2TransformMatrix", _l2m_kernel,
                   shapes=lambda op, s: [(1, 4, 4)], macs=lambda op: 0,
                   options=_l2m_options, emit=_l2m_emit,
                   doc="MediaPipe: crop matrix from landmarks (v2, float32)")
register_custom_op("TransformLandmarks", _landmarks_kernel,
                   shapes=lambda op, s: [tuple(int(d) for d in s[0] or ())],
                   macs=lambda op: 2 * math.prod(op.inputs[0].shape) if op.inputs[0] else 0,
                   options=_landmarks_options, emit=_landmarks_emit,
                   doc="MediaPipe: landmarks through a 4x4 matrix (v2, float32)")
register_custom_op("TransformTensorBilinear", _bilinear_kernel, shapes=_bilinear_shapes,
                   macs=_bilinear_macs, options=_bilinear_options, emit=_bilinear_emit,
                   doc="MediaPipe: bilinear crop by a 4x4 matrix (v2, float32)")
