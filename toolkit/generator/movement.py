"""Source index maps of ops that only move data (STRIDED_SLICE, SLICE, REVERSE_V2,
SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, MIRROR_PAD, BROADCAST_TO, RESIZE_NEAREST_NEIGHBOR,
DEPTH_TO_SPACE, SPACE_TO_DEPTH).

:func:`index_map` applies the op's arrangement to the flat indices of its input, so element
``i`` of the result is the input element output element ``i`` copies (``-1``: the pad
value). :func:`affine_map` recognises a map that is one strided walk of the input (a slice,
a reversal), which the generated code computes with ``tk::transpose``; any other map is
stored in the parameters file and followed by ``tk::gather_map``.
"""

from __future__ import annotations

import numpy as np

from toolkit.errors import UnsupportedOpError
from toolkit.ir import Op
from toolkit.util.resample import depth_to_space, nearest_source_indices, space_to_depth
from toolkit.util.slicing import slice_index, strided_slice_index

__all__ = ["MOVEMENT", "index_map", "affine_map"]

#: the op kinds :func:`index_map` arranges
MOVEMENT = frozenset({"STRIDED_SLICE", "SLICE", "REVERSE_V2", "SPACE_TO_BATCH_ND",
                      "BATCH_TO_SPACE_ND", "MIRROR_PAD", "BROADCAST_TO",
                      "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH"})


def _unsupported(op: Op, what: str) -> UnsupportedOpError:
    return UnsupportedOpError(what, where=f"op {op.kind} {op.name!r}",
                              fix="compute this op with the reference runtime "
                                  "(toolkit.runtime.interpreter.run)")


def _ints(op: Op, i: int) -> list[int]:
    t = op.inputs[i] if i < len(op.inputs) else None
    if t is None or t.data is None:
        raise _unsupported(op, f"input {i} must be a constant for code generation")
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def _opt(op: Op, name: str) -> int:
    v = getattr(op.options, name, 0) if op.options is not None else 0
    return int(v or 0)


def _strided_slice(op: Op, idx: np.ndarray) -> np.ndarray:
    begin, end = _ints(op, 1), _ints(op, 2)
    strides = _ints(op, 3) if len(op.inputs) > 3 and op.inputs[3] is not None \
        else [1] * len(begin)
    if not len(begin) == len(end) == len(strides) or 0 in strides:
        raise _unsupported(op, "begin, end and strides of different lengths, or a 0 stride")
    offset = bool(getattr(op.options, "offset", False)) if op.options is not None else False
    index = strided_slice_index(
        begin, end, strides, begin_mask=_opt(op, "beginMask"), end_mask=_opt(op, "endMask"),
        ellipsis_mask=_opt(op, "ellipsisMask"), new_axis_mask=_opt(op, "newAxisMask"),
        shrink_axis_mask=_opt(op, "shrinkAxisMask"), offset=offset)
    try:
        return np.asarray(idx[index])
    except IndexError as exc:
        raise _unsupported(op, f"slice out of range: {exc}") from None


def _slice(op: Op, idx: np.ndarray) -> np.ndarray:
    try:
        return idx[slice_index(_ints(op, 1), _ints(op, 2), idx.shape)]
    except ValueError as exc:
        raise _unsupported(op, str(exc)) from None


def _space_to_batch(op: Op, idx: np.ndarray) -> np.ndarray:
    block = _ints(op, 1)
    pads = np.asarray(_ints(op, 2), dtype=np.int64).reshape(-1, 2)
    m = len(block)
    if pads.shape[0] != m or idx.ndim < 1 + m or (pads < 0).any() or min(block, default=1) < 1:
        raise _unsupported(op, f"block {block} and paddings {pads.tolist()} for rank {idx.ndim}")
    widths = [(0, 0)] + [(int(a), int(b)) for a, b in pads] + [(0, 0)] * (idx.ndim - 1 - m)
    xp = np.pad(idx, widths, constant_values=-1)
    n = idx.shape[0]
    spatial = xp.shape[1:1 + m]
    if any(s % b for s, b in zip(spatial, block, strict=True)):
        raise _unsupported(op, f"padded shape {list(spatial)} is not a multiple of {block}")
    rest = list(xp.shape[1 + m:])
    shape = [n]
    for s, b in zip(spatial, block, strict=True):
        shape += [s // b, b]
    y = xp.reshape(shape + rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, y.ndim))
    out_shape = [n * int(np.prod(block))] + [s // b for s, b in zip(spatial, block, strict=True)]
    return y.transpose(perm).reshape(out_shape + rest)


def _batch_to_space(op: Op, idx: np.ndarray) -> np.ndarray:
    block = _ints(op, 1)
    crops = np.asarray(_ints(op, 2), dtype=np.int64).reshape(-1, 2)
    m = len(block)
    prod = int(np.prod(block))
    if crops.shape[0] != m or idx.ndim < 1 + m or prod < 1 or idx.shape[0] % prod:
        raise _unsupported(op, f"block {block} and crops {crops.tolist()} for input "
                               f"{list(idx.shape)}")
    n = idx.shape[0] // prod
    spatial = list(idx.shape[1:1 + m])
    rest = list(idx.shape[1 + m:])
    y = idx.reshape([*block, n, *spatial, *rest])
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape([n] + [s * b for s, b in zip(spatial, block, strict=True)]
                                  + rest)
    index = [slice(None)] + [slice(int(a), y.shape[1 + i] - int(b))
                             for i, (a, b) in enumerate(crops)]
    return y[tuple(index)]


def _reverse(op: Op, idx: np.ndarray) -> np.ndarray:
    axes = []
    for a in _ints(op, 1):
        if not -idx.ndim <= a < max(idx.ndim, 1):
            raise _unsupported(op, f"axis {a} for rank {idx.ndim}")
        axes.append(a % idx.ndim)
    return np.flip(idx, tuple(axes))


def _mirror_pad(op: Op, idx: np.ndarray) -> np.ndarray:
    pads = np.asarray(_ints(op, 1), dtype=np.int64).reshape(-1, 2)
    if pads.shape[0] != idx.ndim or (pads < 0).any():
        raise _unsupported(op, f"paddings {pads.tolist()} for rank {idx.ndim}")
    widths = [(int(a), int(b)) for a, b in pads]
    mode = int(getattr(op.options, "mode", 0) or 0) if op.options is not None else 0
    try:
        return np.pad(idx, widths, mode="reflect" if mode == 0 else "symmetric")
    except ValueError as exc:
        raise _unsupported(op, f"paddings {pads.tolist()}: {exc}") from None


def _broadcast_to(op: Op, idx: np.ndarray) -> np.ndarray:
    target = _ints(op, 1)
    try:
        return np.broadcast_to(idx, target)
    except ValueError:
        raise _unsupported(op, f"cannot broadcast {list(idx.shape)} to {target}") from None


def _resize_nearest(op: Op, idx: np.ndarray) -> np.ndarray:
    size = _ints(op, 1)
    if idx.ndim != 4 or len(size) != 2 or min(size) < 1:
        raise _unsupported(op, f"RESIZE_NEAREST_NEIGHBOR of {list(idx.shape)} to {size}")
    align = bool(getattr(op.options, "alignCorners", False)) if op.options is not None \
        else False
    half = bool(getattr(op.options, "halfPixelCenters", False)) if op.options is not None \
        else False
    ys = nearest_source_indices(size[0], idx.shape[1], align, half)
    xs = nearest_source_indices(size[1], idx.shape[2], align, half)
    return idx[:, ys][:, :, xs]


def _block(op: Op, idx: np.ndarray) -> int:
    b = _opt(op, "blockSize")
    if idx.ndim != 4 or b < 1:
        raise _unsupported(op, f"{op.type} of {list(idx.shape)} with block size {b}")
    return b


def _depth_to_space(op: Op, idx: np.ndarray) -> np.ndarray:
    b = _block(op, idx)
    c = idx.shape[3]
    if c % (b * b):
        raise _unsupported(op, f"{c} channels for block size {b}")
    return depth_to_space(idx, b)


def _space_to_depth(op: Op, idx: np.ndarray) -> np.ndarray:
    b = _block(op, idx)
    h, w = idx.shape[1:3]
    if h % b or w % b:
        raise _unsupported(op, f"{h}x{w} for block size {b}")
    return space_to_depth(idx, b)


_ARRANGE = {"STRIDED_SLICE": _strided_slice, "SLICE": _slice, "REVERSE_V2": _reverse,
            "SPACE_TO_BATCH_ND": _space_to_batch, "BATCH_TO_SPACE_ND": _batch_to_space,
            "MIRROR_PAD": _mirror_pad, "BROADCAST_TO": _broadcast_to,
            "RESIZE_NEAREST_NEIGHBOR": _resize_nearest, "DEPTH_TO_SPACE": _depth_to_space,
            "SPACE_TO_DEPTH": _space_to_depth}


def index_map(op: Op) -> np.ndarray:
    """The int64 flat input index of every output element of ``op`` (C order, -1 for the
    pad value), checked against the output's shape (UnsupportedOpError otherwise)."""
    x, out = op.inputs[0], op.outputs[0]
    if x is None:
        raise _unsupported(op, "no input")
    idx = np.arange(int(np.prod(x.shape, dtype=np.int64)), dtype=np.int64).reshape(x.shape)
    y = np.asarray(_ARRANGE[op.kind](op, idx))
    if not y.flags.c_contiguous:  # (np.ascontiguousarray would make a scalar 1-d)
        y = y.copy()
    if tuple(y.shape) != tuple(out.shape):
        raise _unsupported(op, f"the arrangement gives shape {list(y.shape)}, the output is "
                               f"{list(out.shape)}")
    return y


def affine_map(m: np.ndarray) -> tuple[int, list[int], list[int]] | None:
    """``(offset, shape6, strides6)`` when ``m`` (no -1) is ``offset + sum(i_d stride_d)``
    over at most 6 axes of length > 1, else None."""
    if m.size == 0 or (m < 0).any():
        return None
    dims = [(d, s) for d, s in enumerate(m.shape) if s > 1]
    if len(dims) > 6:
        return None
    offset = int(m.reshape(-1)[0])
    shape, strides = [], []
    for d, s in dims:
        step = [0] * m.ndim
        step[d] = 1
        shape.append(s)
        strides.append(int(m[tuple(step)]) - offset)
    expect = np.full(m.shape, offset, dtype=np.int64)
    for (d, _), st in zip(dims, strides, strict=True):
        view = [1] * m.ndim
        view[d] = m.shape[d]
        expect = expect + np.arange(m.shape[d], dtype=np.int64).reshape(view) * st
    if not np.array_equal(expect, m):
        return None
    pad = 6 - len(shape)
    return offset, [1] * pad + shape, [0] * pad + strides
