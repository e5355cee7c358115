"""Data-movement ops: RESHAPE, TRANSPOSE, SQUEEZE, EXPAND_DIMS, CONCATENATION, SPLIT,
SPLIT_V, UNPACK, PACK, PAD, PADV2, STRIDED_SLICE, SLICE, GATHER and CAST.

They work on any dtype and move quantized values unchanged, except where TFLite rescales:
CONCATENATION requantizes an input whose scale or zero point differs from the output's
(``round(q s_i / s_o - zp_i s_i / s_o) + zp_o`` in float32), and PAD fills quantized tensors
with the output zero point.
"""

from __future__ import annotations

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    bad_input,
    cached_plan,
    float_activation,
    int_range,
    is_quantized,
    need,
    norm_axis,
    opt,
    out_dtype,
    qparams,
    quant_activation_range,
    store_plan,
    unsupported,
)
from toolkit.runtime.kernels.fixedpoint import round_half_away
from toolkit.util.slicing import slice_index, strided_slice_index


def _ints(a: np.ndarray | None) -> list[int]:
    return [] if a is None else [int(v) for v in np.asarray(a).reshape(-1).tolist()]


@register("RESHAPE")
def reshape(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RESHAPE to the shape of input 1, else the newShape option, else the output tensor."""
    x = need(op, args, 0)
    shape_arg = args[1] if len(args) > 1 else None
    const = shape_arg is None or (len(op.inputs) > 1 and op.inputs[1] is not None
                                  and op.inputs[1].is_const)
    key = (op.options, op.inputs, op.outputs, x.shape)
    plan = cached_plan(op, key) if const else None
    if plan is not None and plan[0] is shape_arg:
        new = plan[1]
    else:
        new = _new_shape(op, shape_arg)
        if const:
            store_plan(op, key, (shape_arg, new))
    try:
        return [x.reshape(new)]
    except ValueError:
        raise bad_input(op, f"cannot reshape {x.shape} ({x.size} values) to {new}") from None


def _new_shape(op: Op, shape_arg: np.ndarray | None) -> list[int]:
    """The target shape of RESHAPE."""
    if shape_arg is not None and (np.asarray(shape_arg).ndim == 1 or
                                  np.asarray(shape_arg).size > 0):
        return _ints(shape_arg)
    if opt(op, "newShape") is not None and len(opt(op, "newShape")) > 0:
        return _ints(np.asarray(opt(op, "newShape")))
    return list(op.outputs[0].shape)


@register("TRANSPOSE")
def transpose(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """TRANSPOSE by the permutation of input 1."""
    x = need(op, args, 0)
    perm = _ints(need(op, args, 1))
    if sorted(perm) != list(range(x.ndim)):
        raise bad_input(op, f"permutation {perm} does not match rank {x.ndim}")
    return [np.ascontiguousarray(x.transpose(perm))]


@register("SQUEEZE")
def squeeze(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SQUEEZE the squeezeDims axes (every size-1 axis when none are given)."""
    x = need(op, args, 0)
    dims = opt(op, "squeezeDims")
    if dims is None or len(dims) == 0:
        return [x.reshape([d for d in x.shape if d != 1])]
    axes = sorted({norm_axis(op, int(d), x.ndim) for d in np.asarray(dims).reshape(-1)})
    for a in axes:
        if x.shape[a] != 1:
            raise bad_input(op, f"cannot squeeze axis {a} of size {x.shape[a]}")
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]


@register("EXPAND_DIMS")
def expand_dims(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """EXPAND_DIMS at the axis of input 1."""
    x = need(op, args, 0)
    axis = _ints(need(op, args, 1))
    if len(axis) != 1:
        raise bad_input(op, f"EXPAND_DIMS needs one axis, got {axis}")
    a = axis[0] + x.ndim + 1 if axis[0] < 0 else axis[0]
    if not 0 <= a <= x.ndim:
        raise bad_input(op, f"axis {axis[0]} is out of range for rank {x.ndim}")
    return [np.expand_dims(x, a)]


@register("CONCATENATION")
def concatenation(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """CONCATENATION along the axis option (quantized inputs rescaled to the output)."""
    xs = [need(op, args, i) for i in range(len(op.inputs))]
    rank = xs[0].ndim
    axis = norm_axis(op, int(opt(op, "axis", 0)), rank)
    dt = out_dtype(op)
    if is_quantized(op.outputs[0]):
        oq = qparams(op, op.outputs[0])
        qmin, qmax = int_range(dt)
        parts = []
        for x, t in zip(xs, op.inputs, strict=False):
            iq = qparams(op, t) if is_quantized(t) else oq
            if iq.s == oq.s and iq.zp == oq.zp:
                parts.append(x.astype(np.int64))
                continue
            scale = np.float32(iq.s) * (np.float32(1) / np.float32(oq.s))
            bias = np.float32(-iq.zp) * scale
            v = round_half_away(x.astype(np.float32) * scale + bias).astype(np.int64) + oq.zp
            parts.append(np.clip(v, qmin, qmax))
        y = np.concatenate(parts, axis=axis)
        if op.activation:
            lo, hi = quant_activation_range(op, op.outputs[0])
            y = np.clip(y, lo, hi)
        return [y.astype(dt)]
    y = np.concatenate(xs, axis=axis)
    if np.issubdtype(y.dtype, np.floating):
        y = float_activation(op, y.astype(np.float32))
    return [y.astype(dt)]


@register("SPLIT")
def split(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SPLIT (inputs: axis, value) into equal parts, one per output."""
    axis_arr, x = need(op, args, 0), need(op, args, 1)
    axis = norm_axis(op, _ints(axis_arr)[0], x.ndim)
    n = len(op.outputs) or int(opt(op, "numSplits", 1))
    if x.shape[axis] % n:
        raise bad_input(op, f"axis {axis} of size {x.shape[axis]} cannot be split in {n}")
    return [np.ascontiguousarray(p) for p in np.split(x, n, axis=axis)]


@register("SPLIT_V")
def split_v(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SPLIT_V (inputs: value, size_splits, axis); one size may be -1."""
    x = need(op, args, 0)
    sizes = _ints(need(op, args, 1))
    axis = norm_axis(op, _ints(need(op, args, 2))[0], x.ndim)
    if sizes.count(-1) > 1:
        raise bad_input(op, f"size_splits {sizes} has more than one -1")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - sum(s for s in sizes if s != -1)
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise bad_input(op, f"size_splits {sizes} do not add up to {x.shape[axis]}")
    cuts = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(p) for p in np.split(x, cuts, axis=axis)]


@register("UNPACK")
def unpack(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """UNPACK along the axis option."""
    x = need(op, args, 0)
    axis = norm_axis(op, int(opt(op, "axis", 0)), x.ndim)
    return [np.ascontiguousarray(np.take(x, i, axis=axis)) for i in range(x.shape[axis])]


@register("PACK")
def pack(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """PACK (stack) the inputs along the axis option."""
    xs = [need(op, args, i) for i in range(len(op.inputs))]
    axis = int(opt(op, "axis", 0))
    if axis < 0:
        axis += xs[0].ndim + 1
    return [np.stack(xs, axis=axis).astype(out_dtype(op))]


def _pad(op: Op, x: np.ndarray, paddings: np.ndarray, value: float | int) -> np.ndarray:
    p = np.asarray(paddings).astype(np.int64).reshape(-1, 2)
    if p.shape[0] != x.ndim:
        raise bad_input(op, f"paddings have {p.shape[0]} rows for a rank-{x.ndim} input")
    if (p < 0).any():
        raise bad_input(op, "paddings must not be negative")
    return np.pad(x, [(int(a), int(b)) for a, b in p], constant_values=value)


@register("PAD")
def pad(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """PAD with zeros (the output zero point for quantized tensors)."""
    x = need(op, args, 0)
    value: float | int = 0
    if is_quantized(op.outputs[0]):
        value = qparams(op, op.outputs[0]).zp
    return [_pad(op, x, need(op, args, 1), value).astype(out_dtype(op))]


@register("PADV2")
def padv2(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """PADV2 with the constant of input 2 (stored like the input)."""
    x = need(op, args, 0)
    c = args[2] if len(args) > 2 else None
    if c is not None:
        value = np.asarray(c).reshape(-1)[0].item()
    else:
        value = qparams(op, op.outputs[0]).zp if is_quantized(op.outputs[0]) else 0
    return [_pad(op, x, need(op, args, 1), value).astype(out_dtype(op))]


@register("STRIDED_SLICE")
def strided_slice(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """STRIDED_SLICE with begin/end/ellipsis/new-axis/shrink masks and ``offset``."""
    x = need(op, args, 0)
    begin = _ints(need(op, args, 1))
    end = _ints(need(op, args, 2))
    strides = _ints(args[3]) if len(args) > 3 and args[3] is not None else [1] * len(begin)
    if not (len(begin) == len(end) == len(strides)):
        raise bad_input(op, "begin, end and strides must have the same length")
    if any(s == 0 for s in strides):
        raise bad_input(op, "strides must not be 0")
    index = strided_slice_index(
        begin, end, strides, begin_mask=int(opt(op, "beginMask", 0)),
        end_mask=int(opt(op, "endMask", 0)), ellipsis_mask=int(opt(op, "ellipsisMask", 0)),
        new_axis_mask=int(opt(op, "newAxisMask", 0)),
        shrink_axis_mask=int(opt(op, "shrinkAxisMask", 0)), offset=bool(opt(op, "offset", False)))
    try:
        y = x[index]
    except IndexError as exc:
        raise bad_input(op, f"slice out of range: {exc}") from None
    y = np.asarray(y)  # a scalar when every axis shrinks (ascontiguousarray would add one)
    if not y.flags.c_contiguous:
        y = y.copy()
    return [y.astype(out_dtype(op), copy=False)]


@register("SLICE")
def slice_op(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SLICE by begin and size (size -1 runs to the end)."""
    x = need(op, args, 0)
    try:
        index = slice_index(_ints(need(op, args, 1)), _ints(need(op, args, 2)), x.shape)
    except ValueError as exc:
        raise bad_input(op, str(exc)) from None
    return [np.ascontiguousarray(x[index])]


@register("GATHER")
def gather(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """GATHER along the axis option, with batchDims."""
    x = need(op, args, 0)
    idx = need(op, args, 1).astype(np.int64)
    axis = norm_axis(op, int(opt(op, "axis", 0)), x.ndim)
    bd = int(opt(op, "batchDims", 0))
    if bd < 0:
        bd += idx.ndim
    if (idx < 0).any() or (idx >= x.shape[axis]).any():
        raise bad_input(op, f"gather index out of range [0, {x.shape[axis]})")
    if bd == 0:
        return [np.take(x, idx, axis=axis)]
    if bd > axis or x.shape[:bd] != idx.shape[:bd]:
        raise unsupported(op, f"GATHER with batch_dims={bd} and axis={axis}")
    bshape = x.shape[:bd]
    nb = int(np.prod(bshape, dtype=np.int64))
    pre = x.shape[bd:axis]
    post = x.shape[axis + 1:]
    xr = x.reshape(nb, int(np.prod(pre, dtype=np.int64)), x.shape[axis],
                   int(np.prod(post, dtype=np.int64)))
    ir = idx.reshape(nb, -1)
    g = xr[np.arange(nb)[:, None], :, ir, :]  # [B, I, pre, post]
    g = g.transpose(0, 2, 1, 3)  # [B, pre, I, post]
    out = g.reshape(*bshape, *pre, *idx.shape[bd:], *post)
    return [np.ascontiguousarray(out)]


@register("CAST")
def cast(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """CAST to the output dtype (float to int truncates, as C)."""
    x = need(op, args, 0)
    dt = out_dtype(op)
    if dt == np.bool_:
        return [x != 0]
    with np.errstate(invalid="ignore", over="ignore"):
        return [x.astype(dt)]
