"""ONNX converters of shape and data-movement ops: Reshape, Flatten, (Un)Squeeze, Transpose,
Concat, Split, Slice, Gather, Expand, Tile, Pad, Resize (see
:mod:`toolkit.importers.onnx_lower`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.errors import ToolkitError

if TYPE_CHECKING:
    from toolkit.importers.onnx_lower import _Lowerer

from toolkit.importers.onnx_lower_base import (
    _AXIS_NHWC,
    _TO_NHWC,
    _V,
    _lowers,
    _NoLoweringError,
    _norm,
    _options,
)
from toolkit.importers.onnx_lower_math import _identity


# shape ops ---------------------------------------------------------------------------------
def _reshape_to(lw: _Lowerer, v: _V, shape: Sequence[int]) -> None:
    x = lw.tensor_of(v)
    shape = [int(d) for d in shape]
    if math.prod(shape) != math.prod(x.shape):
        raise ToolkitError(f"cannot reshape {list(x.shape)} to {shape}", where=lw.where,
                           fix="check the target shape against the input")
    lw.set(0, lw.emit("RESHAPE", [x, lw.i32(shape, "shape")], shape, x.dtype,
                      name=lw.name(lw.op.outputs[0].name) if lw.op else None, newShape=shape))


@_lowers("Reshape")
def _reshape(lw: _Lowerer) -> None:
    v = lw.need(0)
    if lw.opset < 5:
        target = list(lw.attr("shape") or [])
    else:
        s = lw.const_of(1, "shape")
        assert s is not None
        target = [int(d) for d in s.reshape(-1)]
    allowzero = int(lw.attr("allowzero", 0))
    out = []
    for i, d in enumerate(target):
        out.append(v.shape[i] if d == 0 and not allowzero else d)
    if out.count(-1) == 1:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(v.shape) // max(known, 1)
    _reshape_to(lw, v, out)


@_lowers("Flatten")
def _flatten(lw: _Lowerer) -> None:
    v = lw.need(0)
    axis = _norm(int(lw.attr("axis", 1)), len(v.shape) + 1)
    _reshape_to(lw, v, [math.prod(v.shape[:axis]), math.prod(v.shape[axis:])])


@_lowers("Squeeze", "Unsqueeze")
def _squeeze(lw: _Lowerer) -> None:
    assert lw.op is not None
    v = lw.need(0)
    if lw.opset >= 13:
        a = lw.const_of(1, "axes")
        axes = None if a is None else [int(x) for x in a.reshape(-1)]
    else:
        axes = lw.attr("axes")
    if lw.op.type == "Squeeze":
        rank = len(v.shape)
        drop = ({_norm(a, rank) for a in axes} if axes is not None
                else {i for i, d in enumerate(v.shape) if d == 1})
        shape = [d for i, d in enumerate(v.shape) if i not in drop]
    else:
        assert axes is not None
        rank = len(v.shape) + len(axes)
        add = {_norm(a, rank) for a in axes}
        it = iter(v.shape)
        shape = [1 if i in add else next(it) for i in range(rank)]
    _reshape_to(lw, v, shape)


@_lowers("Transpose")
def _transpose(lw: _Lowerer) -> None:
    v = lw.need(0)
    rank = len(v.shape)
    perm = [int(p) for p in (lw.attr("perm") or list(range(rank))[::-1])]
    if v.nhwc:  # compose with the NHWC storage: one TRANSPOSE of the stored tensor
        assert v.t is not None
        stored = [_AXIS_NHWC[p] for p in perm]
        x = v.t
        lw.set(0, lw.emit("TRANSPOSE", [x, lw.i32(stored, "perm")],
                          [x.shape[i] for i in stored], x.dtype,
                          name=lw.name(lw.op.outputs[0].name) if lw.op else None))
        return
    x = lw.tensor_of(v)
    lw.set(0, lw.emit("TRANSPOSE", [x, lw.i32(perm, "perm")], [x.shape[i] for i in perm],
                      x.dtype, name=lw.name(lw.op.outputs[0].name) if lw.op else None))


@_lowers("Concat")
def _concat(lw: _Lowerer) -> None:
    assert lw.op is not None
    vals = [v for v in (lw.val(t) for t in lw.op.inputs) if v is not None]
    vals = [v for v in vals if math.prod(v.shape) > 0 or len(vals) == 1]
    rank = len(vals[0].shape)
    axis = _norm(int(lw.attr("axis", 0)), rank)
    shape = list(vals[0].shape)
    shape[axis] = sum(v.shape[axis] for v in vals)
    computed = [v for v in vals if v.const is None]
    if rank == 4 and computed and all(v.nhwc for v in computed):
        ts = [v.t if v.const is None else lw.const(np.transpose(v.const, _TO_NHWC),
                                                   v.const.dtype, "operand") for v in vals]
        out = [shape[i] for i in _TO_NHWC]
        y = lw.emit("CONCATENATION", ts, out, ts[0].dtype, axis=_AXIS_NHWC[axis],  # type: ignore
                    fusedActivationFunction=0)
        lw.set(0, y, True)
        return
    ts = [lw.tensor_of(v) for v in vals]
    lw.set(0, lw.emit("CONCATENATION", ts, shape, ts[0].dtype, axis=axis,  # type: ignore
                      fusedActivationFunction=0))


@_lowers("Split")
def _split(lw: _Lowerer) -> None:
    assert lw.op is not None
    v = lw.need(0)
    rank = len(v.shape)
    axis = _norm(int(lw.attr("axis", 0)), rank)
    n = len(lw.op.outputs)
    if lw.opset >= 13:
        s = lw.const_of(1, "split")
        sizes = None if s is None else [int(x) for x in s.reshape(-1)]
    else:
        sizes = lw.attr("split")
    if sizes is None:
        num = int(lw.attr("num_outputs", n))
        each = -(-v.shape[axis] // num)
        sizes = [min(each, v.shape[axis] - i * each) for i in range(num)]
    nhwc = v.nhwc and rank == 4
    x = v.t if nhwc else lw.tensor_of(v)
    assert x is not None
    ax = _AXIS_NHWC[axis] if nhwc else axis
    outs = []
    for i, sz in enumerate(sizes):
        shape = list(x.shape)
        shape[ax] = sz
        outs.append(lw.graph.add_tensor(lw.name(lw.op.outputs[i].name), shape, x.dtype))
    lw.graph.add_op("SPLIT_V", [x, lw.i32(sizes, "sizes"), lw.i32(np.asarray(ax), "axis")],
                    outs, _options("SPLIT_V", numSplits=len(sizes)), origins=lw.origins)
    for i, t in enumerate(outs):
        lw.set(i, t, nhwc)


@_lowers("Slice")
def _slice(lw: _Lowerer) -> None:
    v = lw.need(0)
    rank = len(v.shape)
    if lw.opset < 10:
        starts, ends = lw.attr("starts"), lw.attr("ends")
        axes, steps = lw.attr("axes"), None
    else:
        starts, ends = lw.const_of(1, "starts"), lw.const_of(2, "ends")
        axes, steps = lw.const_of(3, "axes"), lw.const_of(4, "steps")
    starts = [int(s) for s in np.asarray(starts).reshape(-1)]
    ends = [int(s) for s in np.asarray(ends).reshape(-1)]
    axes_l = list(range(len(starts))) if axes is None else [
        _norm(int(a), rank) for a in np.asarray(axes).reshape(-1)]
    steps_l = [1] * len(starts) if steps is None else [int(s) for s in
                                                       np.asarray(steps).reshape(-1)]
    begin, end, stride = [0] * rank, list(v.shape), [1] * rank
    end_mask = 0
    shape = list(v.shape)
    for a, s0, e0, st in zip(axes_l, starts, ends, steps_l, strict=False):
        dim = v.shape[a]
        s0 = max(min(s0, 2**62), -(2**62))
        e0 = max(min(e0, 2**62), -(2**62))
        b, e, step = slice(s0, e0, st).indices(dim)
        begin[a], stride[a] = b, step
        if step < 0 and e < 0:
            end[a] = 0
            end_mask |= 1 << a
        else:
            end[a] = e
        shape[a] = len(range(b, e, step))
    nhwc = v.nhwc and rank == 4
    if nhwc:
        assert v.t is not None
        x = v.t
        begin, end, stride = ([lst[i] for i in _TO_NHWC] for lst in (begin, end, stride))
        end_mask = sum(1 << _AXIS_NHWC.get(a, a) for a in range(4) if end_mask >> a & 1)
        shape = [shape[i] for i in _TO_NHWC]
    else:
        x = lw.tensor_of(v)
    y = lw.emit("STRIDED_SLICE", [x, lw.i32(begin, "begin"), lw.i32(end, "end"),
                                  lw.i32(stride, "strides")], shape, x.dtype,
                beginMask=0, endMask=end_mask, ellipsisMask=0, newAxisMask=0, shrinkAxisMask=0,
                offset=False)
    lw.set(0, y, nhwc)


@_lowers("Gather")
def _gather(lw: _Lowerer) -> None:
    v = lw.need(0)
    iv = lw.need(1)
    rank = len(v.shape)
    axis = _norm(int(lw.attr("axis", 0)), rank)
    x = lw.tensor_of(v)
    if iv.const is not None:
        idx = np.asarray(iv.const).astype(np.int64)
        idx = np.where(idx < 0, idx + v.shape[axis], idx).astype(np.int32)
        ishape = idx.shape
        if idx.ndim == 0:  # a scalar index: gather one, then drop the axis
            shape = (*v.shape[:axis], 1, *v.shape[axis + 1:])
            y = lw.emit("GATHER", [x, lw.const(idx.reshape(1), np.int32, "indices")], shape,
                        x.dtype, axis=axis, batchDims=0)
            out = [d for i, d in enumerate(shape) if i != axis]
            lw.set(0, lw.emit("RESHAPE", [y, lw.i32(out, "shape")], out, x.dtype,
                              newShape=out))
            return
        it = lw.const(idx, np.int32, "indices")
    else:
        it = lw.tensor_of(iv)
        ishape = iv.shape
    shape = (*v.shape[:axis], *ishape, *v.shape[axis + 1:])
    lw.set(0, lw.emit("GATHER", [x, it], shape, x.dtype, axis=axis, batchDims=0))


@_lowers("Expand")
def _expand(lw: _Lowerer) -> None:
    v = lw.need(0)
    s = lw.const_of(1, "shape")
    assert s is not None
    shape = tuple(np.broadcast_shapes(v.shape, tuple(int(d) for d in s.reshape(-1))))
    x = lw.tensor_of(v)
    if tuple(shape) == tuple(x.shape):
        _identity(lw)
        return
    lw.set(0, lw.emit("BROADCAST_TO", [x, lw.i32(shape, "shape")], shape, x.dtype))


@_lowers("Tile")
def _tile(lw: _Lowerer) -> None:
    v = lw.need(0)
    r = lw.const_of(1, "repeats")
    assert r is not None
    reps = [int(d) for d in r.reshape(-1)]
    x = lw.tensor_of(v)
    shape = [d * k for d, k in zip(x.shape, reps, strict=True)]
    lw.set(0, lw.emit("TILE", [x, lw.i32(reps, "multiples")], shape, x.dtype))


@_lowers("Pad")
def _pad(lw: _Lowerer) -> None:
    v = lw.need(0)
    rank = len(v.shape)
    mode = lw.attr("mode", "constant")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if lw.opset < 11:
        pads = [int(p) for p in lw.attr("pads") or []]
        value = float(lw.attr("value", 0.0))
    else:
        p = lw.const_of(1, "pads")
        assert p is not None
        pads = [int(x) for x in p.reshape(-1)]
        c = lw.const_of(2, "constant_value")
        value = 0.0 if c is None or c.size == 0 else float(c.reshape(-1)[0])
        a = lw.const_of(3, "axes")
        if a is not None:
            axes = [_norm(int(x), rank) for x in a.reshape(-1)]
            full = [0] * (2 * rank)
            for j, ax in enumerate(axes):
                full[ax], full[ax + rank] = pads[j], pads[j + len(axes)]
            pads = full
    if min(pads) < 0:
        raise _NoLoweringError("negative pads")
    pairs = [[pads[i], pads[i + rank]] for i in range(rank)]
    nhwc = v.nhwc and rank == 4
    if nhwc:
        assert v.t is not None
        x = v.t
        pairs = [pairs[i] for i in _TO_NHWC]
    else:
        x = lw.tensor_of(v)
    shape = [d + a + b for d, (a, b) in zip(x.shape, pairs, strict=True)]
    pt = lw.i32(np.asarray(pairs), "pads")
    if mode == "constant":
        if value == 0.0:
            y = lw.emit("PAD", [x, pt], shape, x.dtype)
        else:
            y = lw.emit("PADV2", [x, pt, lw.const(np.asarray([value], x.dtype),
                                                  suffix="value")], shape, x.dtype)
    elif mode == "reflect":
        y = lw.emit("MIRROR_PAD", [x, pt], shape, x.dtype, mode=0)
    else:
        raise _NoLoweringError(f"mode {mode!r}")
    lw.set(0, y, nhwc)


@_lowers("ConstantOfShape")
def _constant_of_shape(lw: _Lowerer) -> None:
    raise _NoLoweringError("a shape computed at run time")


@_lowers("Resize", "Upsample")
def _resize(lw: _Lowerer) -> None:
    assert lw.op is not None
    v = lw.need(0)
    if len(v.shape) != 4:
        raise _NoLoweringError("a resize of other than 4-D")
    mode = lw.attr("mode", "nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = lw.attr("coordinate_transformation_mode", "half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    nearest_mode = lw.attr("nearest_mode", "round_prefer_floor")
    nearest_mode = nearest_mode.decode() if isinstance(nearest_mode, bytes) else nearest_mode
    if lw.op.type == "Upsample" or lw.opset < 11:
        ctm = "asymmetric"
        nearest_mode = "floor"
        scales = lw.const_of(1, "scales") if lw.opset >= 9 else np.asarray(lw.attr("scales"))
        sizes = None
    else:
        scales = lw.const_of(2, "scales")
        sizes = lw.const_of(3, "sizes")
    if sizes is not None and sizes.size:
        out = [int(d) for d in sizes.reshape(-1)]
    elif scales is not None and scales.size:
        out = [math.floor(d * float(s)) for d, s in zip(v.shape, scales.reshape(-1),
                                                             strict=True)]
    else:
        raise _NoLoweringError("neither scales nor sizes")
    if out[:2] != list(v.shape[:2]):
        raise _NoLoweringError("a resize of the batch or channel axis")
    fields: dict[str, Any]
    if mode == "nearest" and ctm == "asymmetric" and nearest_mode == "floor":
        kind, fields = "RESIZE_NEAREST_NEIGHBOR", dict(alignCorners=False, halfPixelCenters=False)
    elif mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel") and \
            min(out[2:]) > 1:
        kind, fields = "RESIZE_BILINEAR", dict(alignCorners=False, halfPixelCenters=True)
    elif mode == "linear" and ctm == "align_corners":
        kind, fields = "RESIZE_BILINEAR", dict(alignCorners=True, halfPixelCenters=False)
    elif mode == "linear" and ctm == "asymmetric":
        kind, fields = "RESIZE_BILINEAR", dict(alignCorners=False, halfPixelCenters=False)
    else:
        raise _NoLoweringError(f"mode {mode!r} with coordinate_transformation_mode {ctm!r} and "
                          f"nearest_mode {nearest_mode!r}")
    x = lw.nhwc_of(v)
    y = lw.emit(kind, [x, lw.i32(out[2:], "size")], (out[0], out[2], out[3], out[1]),
                **fields)
    lw.set(0, y, True)
