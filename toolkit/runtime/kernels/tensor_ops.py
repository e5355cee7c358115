"""Shape arithmetic, data movement and logic ops the TensorFlow converter writes: SHAPE,
TILE, BROADCAST_TO, REVERSE_V2, MIRROR_PAD, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND,
ZEROS_LIKE, ONES_LIKE, FILL, RANGE, GATHER_ND, SELECT, SELECT_V2, CUMSUM, ARG_MAX,
ARG_MIN, the comparisons (EQUAL ... LESS_EQUAL), LOGICAL_AND/OR/NOT, FLOOR_MOD and
FLOOR_DIV.

Data movement keeps quantized values unchanged (SPACE_TO_BATCH_ND pads quantized tensors
with the output zero point, as LiteRT does). Comparisons of quantized tensors rescale both
sides as TFLite's ``ComparisonQuantized`` does (``((q - zp) << 8)`` times each input's
scale as a fixed-point multiplier).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    bad_input,
    is_quantized,
    need,
    norm_axis,
    opt,
    out_dtype,
    qparams,
)
from toolkit.runtime.kernels.fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier

__all__: list[str] = []

Args = list[np.ndarray | None]


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous, keeping 0-d arrays 0-d (``np.ascontiguousarray`` makes them 1-d)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy()


def _ints(a: np.ndarray | None) -> list[int]:
    return [] if a is None else [int(v) for v in np.asarray(a).reshape(-1).tolist()]


@register("DENSIFY")
def densify(op: Op, args: Args) -> list[np.ndarray]:
    """DENSIFY: the dense form of a sparse constant. The reader stores a sparse constant's
    dense array as its data (its kept values and sparsity stay with the tensor for writing
    the file back; see :mod:`toolkit.formats.sparsity`), so this copies it."""
    x = need(op, args, 0)
    out = op.outputs[0]
    if out.dtype is not None and x.dtype != out.dtype:
        raise bad_input(op, f"DENSIFY from {x.dtype} to {out.dtype}")
    return [np.array(x, copy=True)]


@register("SHAPE")
def shape(op: Op, args: Args) -> list[np.ndarray]:
    """SHAPE: the input's shape as an int32 (or int64, ``outType``) vector."""
    x = need(op, args, 0)
    return [np.asarray(x.shape, dtype=out_dtype(op))]


@register("TILE")
def tile(op: Op, args: Args) -> list[np.ndarray]:
    """TILE by the multiples of input 1."""
    x = need(op, args, 0)
    reps = _ints(need(op, args, 1))
    if len(reps) != x.ndim or min(reps, default=1) < 0:
        raise bad_input(op, f"multiples {reps} do not fit a rank-{x.ndim} input")
    return [np.tile(x, reps)]


@register("BROADCAST_TO")
def broadcast_to(op: Op, args: Args) -> list[np.ndarray]:
    """BROADCAST_TO the shape of input 1."""
    x = need(op, args, 0)
    target = _ints(need(op, args, 1))
    try:
        return [_contiguous(np.broadcast_to(x, target))]
    except ValueError:
        raise bad_input(op, f"cannot broadcast {list(x.shape)} to {target}") from None


@register("REVERSE_V2")
def reverse_v2(op: Op, args: Args) -> list[np.ndarray]:
    """REVERSE_V2 along the axes of input 1."""
    x = need(op, args, 0)
    axes = tuple(norm_axis(op, a, x.ndim) for a in _ints(need(op, args, 1)))
    return [_contiguous(np.flip(x, axes))]


@register("MIRROR_PAD")
def mirror_pad(op: Op, args: Args) -> list[np.ndarray]:
    """MIRROR_PAD by the [rank, 2] paddings of input 1, REFLECT (mode 0) or SYMMETRIC."""
    x = need(op, args, 0)
    pads = np.asarray(need(op, args, 1)).reshape(-1, 2).astype(np.int64)
    if pads.shape[0] != x.ndim:
        raise bad_input(op, f"paddings {pads.tolist()} do not fit a rank-{x.ndim} input")
    widths = [(int(a), int(b)) for a, b in pads]
    if int(opt(op, "mode", 0)) == 0:
        return [np.pad(x, widths, mode="reflect")]
    return [np.pad(x, widths, mode="symmetric")]


def _pad_value(op: Op) -> int:
    if is_quantized(op.outputs[0]):
        return qparams(op, op.outputs[0]).zp
    return 0


@register("SPACE_TO_BATCH_ND")
def space_to_batch_nd(op: Op, args: Args) -> list[np.ndarray]:
    """SPACE_TO_BATCH_ND: pad the spatial axes, then move block offsets into the batch."""
    x = need(op, args, 0)
    block = _ints(need(op, args, 1))
    pads = np.asarray(need(op, args, 2)).reshape(-1, 2).astype(np.int64)
    m = len(block)
    widths = [(0, 0)] + [(int(a), int(b)) for a, b in pads] + [(0, 0)] * (x.ndim - 1 - m)
    xp = np.pad(x, widths, constant_values=_pad_value(op))
    n = x.shape[0]
    spatial = xp.shape[1:1 + m]
    if any(s % b for s, b in zip(spatial, block)):
        raise bad_input(op, f"padded spatial shape {list(spatial)} is not a multiple of the "
                            f"block {block}")
    rest = xp.shape[1 + m:]
    shape = [n]
    for s, b in zip(spatial, block):
        shape += [s // b, b]
    y = xp.reshape(shape + list(rest))
    # [n, s0/b0, b0, s1/b1, b1, ..., rest] -> [b0, b1, ..., n, s0/b0, s1/b1, ..., rest]
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    out_shape = [n * int(np.prod(block))] + [s // b for s, b in zip(spatial, block)]
    return [_contiguous(y).reshape(out_shape + list(rest))]


@register("BATCH_TO_SPACE_ND")
def batch_to_space_nd(op: Op, args: Args) -> list[np.ndarray]:
    """BATCH_TO_SPACE_ND: move block offsets from the batch back into space, then crop."""
    x = need(op, args, 0)
    block = _ints(need(op, args, 1))
    crops = np.asarray(need(op, args, 2)).reshape(-1, 2).astype(np.int64)
    m = len(block)
    prod = int(np.prod(block))
    if x.shape[0] % prod:
        raise bad_input(op, f"batch {x.shape[0]} is not a multiple of the block {block}")
    n = x.shape[0] // prod
    spatial = x.shape[1:1 + m]
    rest = x.shape[1 + m:]
    y = x.reshape([*list(block), n, *list(spatial), *list(rest)])
    # [b0, b1, .., n, s0, s1, .., rest] -> [n, s0, b0, s1, b1, .., rest]
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = _contiguous(y.transpose(perm)).reshape(
        [n] + [s * b for s, b in zip(spatial, block)] + list(rest))
    index = [slice(None)] + [slice(int(a), y.shape[1 + i] - int(b))
                             for i, (a, b) in enumerate(crops)]
    return [_contiguous(y[tuple(index)])]


@register("ZEROS_LIKE")
def zeros_like(op: Op, args: Args) -> list[np.ndarray]:
    """ZEROS_LIKE."""
    return [np.zeros_like(need(op, args, 0), dtype=out_dtype(op))]


@register("ONES_LIKE")
def ones_like(op: Op, args: Args) -> list[np.ndarray]:
    """ONES_LIKE."""
    return [np.ones_like(need(op, args, 0), dtype=out_dtype(op))]


@register("FILL")
def fill(op: Op, args: Args) -> list[np.ndarray]:
    """FILL the shape of input 0 with the scalar of input 1."""
    dims = _ints(need(op, args, 0))
    value = need(op, args, 1).reshape(-1)[0]
    return [np.full(dims, value, dtype=out_dtype(op))]


@register("RANGE")
def range_op(op: Op, args: Args) -> list[np.ndarray]:
    """RANGE(start, limit, delta)."""
    start, limit, delta = (need(op, args, i).reshape(-1)[0] for i in range(3))
    if delta == 0:
        raise bad_input(op, "RANGE with delta 0")
    return [np.arange(start, limit, delta).astype(out_dtype(op))]


@register("GATHER_ND")
def gather_nd(op: Op, args: Args) -> list[np.ndarray]:
    """GATHER_ND: slices of input 0 at the index tuples of the last axis of input 1."""
    x = need(op, args, 0)
    idx = need(op, args, 1).astype(np.int64)
    k = idx.shape[-1]
    if k > x.ndim:
        raise bad_input(op, f"index depth {k} exceeds the params rank {x.ndim}")
    flat = idx.reshape(-1, k)
    for d in range(k):
        if flat.size and (flat[:, d].min() < 0 or flat[:, d].max() >= x.shape[d]):
            raise bad_input(op, f"GATHER_ND index out of range on axis {d}")
    picked = x[tuple(flat[:, d] for d in range(k))]
    return [_contiguous(picked.reshape(idx.shape[:-1] + x.shape[k:]))]


@register("SELECT", "SELECT_V2")
def select(op: Op, args: Args) -> list[np.ndarray]:
    """SELECT / SELECT_V2: ``cond ? a : b`` with broadcasting (values moved unchanged)."""
    cond = need(op, args, 0).astype(bool)
    a, b = need(op, args, 1), need(op, args, 2)
    if op.type == "SELECT" and cond.ndim == 1 and a.ndim > 1:
        cond = cond.reshape((-1,) + (1,) * (a.ndim - 1))
    return [np.where(cond, a, b).astype(out_dtype(op))]


@register("CUMSUM")
def cumsum(op: Op, args: Args) -> list[np.ndarray]:
    """CUMSUM along the axis of input 1 (``exclusive``, ``reverse`` options)."""
    x = need(op, args, 0)
    axis = norm_axis(op, _ints(need(op, args, 1))[0], x.ndim)
    rev = bool(opt(op, "reverse", False))
    excl = bool(opt(op, "exclusive", False))
    v = np.flip(x, axis) if rev else x
    acc_t = np.float32 if np.issubdtype(x.dtype, np.floating) else np.int64
    y = np.cumsum(v, axis=axis, dtype=acc_t)
    if excl:
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis=axis)),
                            np.take(y, range(y.shape[axis] - 1), axis=axis)], axis=axis)
    if rev:
        y = np.flip(y, axis)
    return [_contiguous(y).astype(out_dtype(op))]


def _arg(op: Op, args: Args, fn: Callable[..., np.ndarray]) -> list[np.ndarray]:
    x = need(op, args, 0)
    axis = norm_axis(op, _ints(need(op, args, 1))[0], x.ndim)
    return [fn(x, axis=axis).astype(out_dtype(op))]


@register("ARG_MAX")
def arg_max(op: Op, args: Args) -> list[np.ndarray]:
    """ARG_MAX along the axis of input 1 (first index of the maximum)."""
    return _arg(op, args, np.argmax)


@register("ARG_MIN")
def arg_min(op: Op, args: Args) -> list[np.ndarray]:
    """ARG_MIN along the axis of input 1 (first index of the minimum)."""
    return _arg(op, args, np.argmin)


def _rescaled(op: Op, i: int, x: np.ndarray) -> np.ndarray:
    """TFLite ComparisonQuantized's value of quantized input ``i``: ``((q - zp) << 8)``
    times its scale as a fixed-point multiplier."""
    qp = qparams(op, op.inputs[i])
    mult, shift = quantize_multiplier(float(qp.s))
    shifted = (x.astype(np.int64) - qp.zp) * (1 << 8)
    return multiply_by_quantized_multiplier(shifted, mult, shift)


def _compare(op: Op, args: Args, fn: Callable[..., np.ndarray]) -> list[np.ndarray]:
    a, b = need(op, args, 0), need(op, args, 1)
    if is_quantized(op.inputs[0]) and is_quantized(op.inputs[1]):
        a, b = _rescaled(op, 0, a), _rescaled(op, 1, b)
    return [np.asarray(fn(a, b), dtype=np.bool_)]


for _name, _fn in (("EQUAL", np.equal), ("NOT_EQUAL", np.not_equal), ("LESS", np.less),
                   ("LESS_EQUAL", np.less_equal), ("GREATER", np.greater),
                   ("GREATER_EQUAL", np.greater_equal)):
    def _kernel(op: Op, args: Args, fn: Callable[..., np.ndarray] = _fn) -> list[np.ndarray]:
        return _compare(op, args, fn)

    _kernel.__doc__ = f"{_name} (quantized inputs rescaled as TFLite does)."
    register(_name)(_kernel)


@register("LOGICAL_AND")
def logical_and(op: Op, args: Args) -> list[np.ndarray]:
    """LOGICAL_AND."""
    return [np.logical_and(need(op, args, 0), need(op, args, 1))]


@register("LOGICAL_OR")
def logical_or(op: Op, args: Args) -> list[np.ndarray]:
    """LOGICAL_OR."""
    return [np.logical_or(need(op, args, 0), need(op, args, 1))]


@register("LOGICAL_NOT")
def logical_not(op: Op, args: Args) -> list[np.ndarray]:
    """LOGICAL_NOT."""
    return [np.logical_not(need(op, args, 0))]


def _int_or_float(op: Op, args: Args) -> tuple[np.ndarray, np.ndarray]:
    a, b = need(op, args, 0), need(op, args, 1)
    if np.issubdtype(a.dtype, np.integer) and np.any(b == 0):
        raise bad_input(op, f"{op.type} by zero")
    return a, b


@register("FLOOR_MOD")
def floor_mod(op: Op, args: Args) -> list[np.ndarray]:
    """FLOOR_MOD: the remainder with the divisor's sign (Python's ``%``)."""
    a, b = _int_or_float(op, args)
    if np.issubdtype(a.dtype, np.floating):
        r = np.fmod(a, b)
        r = np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
        return [r.astype(out_dtype(op))]
    return [np.mod(a, b).astype(out_dtype(op))]


@register("FLOOR_DIV")
def floor_div(op: Op, args: Args) -> list[np.ndarray]:
    """FLOOR_DIV: the quotient rounded down."""
    a, b = _int_or_float(op, args)
    if np.issubdtype(a.dtype, np.floating):
        return [np.floor(a / b).astype(out_dtype(op))]
    return [np.floor_divide(a, b).astype(out_dtype(op))]
