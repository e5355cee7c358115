"""ONNX converters of convolutions, pooling, matrix products, quantization (QDQ,
QLinearConv, QLinearMatMul) (see :mod:`toolkit.importers.onnx_lower`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.ir import Op, Quantization, Tensor

if TYPE_CHECKING:
    from toolkit.importers.onnx_lower import _Lowerer

from toolkit.importers.onnx_lower_base import (
    _AXIS_NHWC,
    _F32_MIN,
    _V,
    LOWERERS,
    _binary_operands,
    _dequantize_array,
    _lowers,
    _NoLoweringError,
    _norm,
    _options,
    _same_layout,
)


# convolutions and pooling ---------------------------------------------------------------
def _pads_2d(lw: _Lowerer, hw: tuple[int, int], k: tuple[int, int], s: tuple[int, int],
             d: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) explicit padding of a 2-D window op."""
    auto = lw.attr("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        res = []
        for size, kk, ss, dd in zip(hw, k, s, d, strict=True):
            out = -(-size // ss)
            total = max((out - 1) * ss + (kk - 1) * dd + 1 - size, 0)
            small = total // 2
            res.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return res[0][0], res[1][0], res[0][1], res[1][1]
    if auto == "VALID":
        return 0, 0, 0, 0
    pads = [int(p) for p in (lw.attr("pads") or [0, 0, 0, 0])]
    if len(pads) != 4:
        raise _NoLoweringError(f"pads {pads} (2-D windows only)")
    return pads[0], pads[1], pads[2], pads[3]


def _same(size: int, k_eff: int, s: int, before: int, after: int) -> bool:
    out = -(-size // s)
    total = max((out - 1) * s + k_eff - size, 0)
    explicit = (size + before + after - k_eff) // s + 1
    return total // 2 == before and total - total // 2 == after and explicit == out


def _pad_nhwc(lw: _Lowerer, x: Tensor, t: int, left: int, b: int, r: int,
              value: float = 0.0) -> Tensor:
    if t == b == left == r == 0:
        return x
    if min(t, b, left, r) < 0:
        raise _NoLoweringError("negative pads")
    n, h, w, c = x.shape
    pads = lw.i32(np.asarray([[0, 0], [t, b], [left, r], [0, 0]]), "pads")
    shape = (n, h + t + b, w + left + r, c)
    if value == 0.0:
        return lw.emit("PAD", [x, pads], shape, x.dtype)
    return lw.emit("PADV2", [x, pads, lw.const(np.asarray([value], x.dtype), suffix="pad_value")],
                   shape, x.dtype)


def _window(lw: _Lowerer, x: Tensor, k: tuple[int, int], s: tuple[int, int],
            d: tuple[int, int], pad_value: float | None) -> tuple[Tensor, int]:
    """Pad ``x`` (NHWC) as the node asks; return it and the TFLite padding (0 SAME, 1 VALID).
    ``pad_value`` None: the op cannot take explicit padding (it must be SAME or none)."""
    hw = (x.shape[1], x.shape[2])
    t, left, b, r = _pads_2d(lw, hw, k, s, d)
    if t == left == b == r == 0:
        return x, 1
    keff = [(kk - 1) * dd + 1 for kk, dd in zip(k, d, strict=True)]
    if _same(hw[0], keff[0], s[0], t, b) and _same(hw[1], keff[1], s[1], left, r):
        return x, 0
    if pad_value is None:
        raise _NoLoweringError(f"padding {[t, left, b, r]} is neither SAME nor none")
    return _pad_nhwc(lw, x, t, left, b, r, pad_value), 1


def _out_size(size: int, k_eff: int, s: int, padding: int) -> int:
    return -(-size // s) if padding == 0 else (size - k_eff) // s + 1


@_lowers("Conv")
def _conv(lw: _Lowerer) -> None:
    xv = lw.need(0)
    w = lw.const_of(1, "weights")
    assert w is not None
    if w.ndim == 3:
        _as_2d(lw, "Conv", w)
        return
    if w.ndim != 4:
        raise _NoLoweringError(f"{w.ndim - 2}-D convolution (1-D and 2-D only)")
    b = lw.const_of(2, "bias")
    o, cg, kh, kw = w.shape
    group = int(lw.attr("group", 1))
    k = (kh, kw)
    s = tuple(int(v) for v in (lw.attr("strides") or [1, 1]))
    d = tuple(int(v) for v in (lw.attr("dilations") or [1, 1]))
    x = lw.nhwc_of(xv)
    n, c = x.shape[0], x.shape[3]
    if cg * group != c or o % group:
        raise ToolkitError(f"weights {list(w.shape)} with group {group} do not fit {c} input "
                           "channels", where=lw.where, fix="check the exported weights")
    xp, padding = _window(lw, x, k, s, d, 0.0)  # type: ignore[arg-type]
    oh = _out_size(xp.shape[1], (kh - 1) * d[0] + 1, s[0], padding)
    ow = _out_size(xp.shape[2], (kw - 1) * d[1] + 1, s[1], padding)
    bias = np.zeros(o, np.float32) if b is None else np.asarray(b, np.float32)
    fields: dict[str, Any] = dict(padding=padding, strideH=s[0], strideW=s[1],
                                  dilationHFactor=d[0],
                  dilationWFactor=d[1], fusedActivationFunction=0)
    name = lw.name(lw.op.outputs[0].name) if lw.op is not None else None
    if group == 1:
        y = lw.emit("CONV_2D", [xp, lw.const(w.transpose(0, 2, 3, 1), np.float32, "weights"),
                                lw.const(bias, np.float32, "bias")], (n, oh, ow, o), name=name,
                    **fields)
    elif cg == 1:
        y = lw.emit("DEPTHWISE_CONV_2D",
                    [xp, lw.const(w.transpose(1, 2, 3, 0), np.float32, "weights"),
                     lw.const(bias, np.float32, "bias")], (n, oh, ow, o), name=name,
                    depthMultiplier=o // c, **fields)
    else:
        axis = lw.i32(np.asarray(3), "split_axis")
        shape = (n, xp.shape[1], xp.shape[2], cg)
        outs = [lw.graph.add_tensor(lw.name(f"{xp.name}/group{g}"), shape, np.float32)
                for g in range(group)]
        lw.graph.add_op("SPLIT", [axis, xp], outs, _options("SPLIT", numSplits=group),
                        origins=lw.origins)
        og = o // group
        parts = []
        for g, part in enumerate(outs):
            wt = lw.const(w[g * og:(g + 1) * og].transpose(0, 2, 3, 1), np.float32, "weights")
            parts.append(lw.emit("CONV_2D", [part, wt, lw.const(bias[g * og:(g + 1) * og],
                                                                 np.float32, "bias")],
                                 (n, oh, ow, og), **fields))
        y = lw.emit("CONCATENATION", parts, (n, oh, ow, o), name=name, axis=3,
                    fusedActivationFunction=0)
    lw.set(0, y, True)


def _as_2d(lw: _Lowerer, op_type: str, w: np.ndarray | None = None) -> None:
    """A 1-D Conv or pooling node (N, C, L) as its 2-D form on (N, C, 1, L); the result is
    read back in ONNX order (N, C', L')."""
    assert lw.op is not None
    xv = lw.need(0)
    if len(xv.shape) != 3:
        raise _NoLoweringError(f"a {len(xv.shape)}-D input of a 1-D window")
    n, c, length = xv.shape
    x = lw.tensor_of(xv)
    x4 = lw.emit("RESHAPE", [x, lw.i32([n, c, 1, length], "shape")], (n, c, 1, length),
                 x.dtype, newShape=[n, c, 1, length])
    attrs = dict(lw.op.extra.get("attributes") or {})
    for key, one in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        if key in attrs:
            attrs[key] = [one, *attrs[key]]
    if "pads" in attrs:
        a, b = attrs["pads"]
        attrs["pads"] = [0, a, 0, b]
    ins: list[_V | None] = [_V(x4, False, None, (n, c, 1, length), x4.dtype)]
    if w is not None:
        w4 = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
        ins.append(_V(None, False, w4, tuple(w4.shape), w4.dtype))
        b = lw.inp(2)
        ins.append(b)
    y = _as_float_node(lw, op_type, ins, attrs)
    t = lw.tensor_of(y)
    out = [t.shape[0], t.shape[1], t.shape[3]]
    lw.set(0, lw.emit("RESHAPE", [t, lw.i32(out, "shape")], out, t.dtype,
                      name=lw.name(lw.op.outputs[0].name), newShape=out))


@_lowers("ConvTranspose")
def _conv_transpose(lw: _Lowerer) -> None:
    """TRANSPOSE_CONV without padding (the full output), then the ONNX pads cropped off."""
    assert lw.op is not None
    w = lw.const_of(1, "weights")
    assert w is not None
    if w.ndim != 4:
        raise _NoLoweringError(f"{w.ndim - 2}-D transposed convolution (2-D only)")
    if int(lw.attr("group", 1)) != 1:
        raise _NoLoweringError("groups")
    if any(int(d) != 1 for d in lw.attr("dilations") or [1, 1]):
        raise _NoLoweringError("dilations")
    auto = lw.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto not in ("NOTSET", "VALID") or lw.attr("output_shape") is not None:
        raise _NoLoweringError(f"auto_pad {auto} or output_shape")
    b = lw.const_of(2, "bias")
    _, o, kh, kw = w.shape
    s = [int(v) for v in (lw.attr("strides") or [1, 1])]
    pads = [int(v) for v in (lw.attr("pads") or [0, 0, 0, 0])] if auto == "NOTSET" else [0] * 4
    extra = [int(v) for v in (lw.attr("output_padding") or [0, 0])]
    if extra[0] > pads[2] or extra[1] > pads[3]:
        raise _NoLoweringError("output_padding past the end padding")
    x = lw.nhwc_of(lw.need(0))
    n, h, wd, _ = x.shape
    full = (n, (h - 1) * s[0] + kh, (wd - 1) * s[1] + kw, o)
    ins: list[Tensor | None] = [
        lw.i32(full, "output_shape"),
        lw.const(np.ascontiguousarray(w.transpose(1, 2, 3, 0)), np.float32, "weights"), x,
        lw.const(np.asarray(b, np.float32), np.float32, "bias") if b is not None else None]
    y = lw.emit("TRANSPOSE_CONV", ins, full, padding=1, strideH=s[0], strideW=s[1],
                fusedActivationFunction=0)
    oh = full[1] - pads[0] - pads[2] + extra[0]
    ow = full[2] - pads[1] - pads[3] + extra[1]
    if (oh, ow) != full[1:3]:
        y = lw.emit("STRIDED_SLICE", [y, lw.i32([0, pads[0], pads[1], 0], "begin"),
                                      lw.i32([n, pads[0] + oh, pads[1] + ow, o], "end"),
                                      lw.i32([1, 1, 1, 1], "strides")], (n, oh, ow, o),
                    beginMask=0, endMask=0, ellipsisMask=0, newAxisMask=0, shrinkAxisMask=0,
                    offset=False)
    lw.set(0, y, True)


def _pool_params(lw: _Lowerer) -> tuple[tuple[int, int], tuple[int, int]]:
    k = tuple(int(v) for v in lw.attr("kernel_shape") or [])
    if len(k) != 2:
        raise _NoLoweringError(f"kernel_shape {list(k)} (2-D pooling only)")
    s = tuple(int(v) for v in (lw.attr("strides") or [1, 1]))
    if int(lw.attr("ceil_mode", 0)):
        raise _NoLoweringError("ceil_mode=1")
    if any(int(v) != 1 for v in (lw.attr("dilations") or [1, 1])):
        raise _NoLoweringError("dilated pooling")
    return (k[0], k[1]), (s[0], s[1])


@_lowers("MaxPool")
def _max_pool(lw: _Lowerer) -> None:
    assert lw.op is not None
    if len(lw.op.outputs) > 1:
        raise _NoLoweringError("its Indices output")
    if len(lw.attr("kernel_shape") or []) == 1:
        _as_2d(lw, "MaxPool")
        return
    k, s = _pool_params(lw)
    x = lw.nhwc_of(lw.need(0))
    xp, padding = _window(lw, x, k, s, (1, 1), _F32_MIN)
    n, h, w, c = xp.shape
    y = lw.emit("MAX_POOL_2D", [xp], (n, _out_size(h, k[0], s[0], padding),
                                      _out_size(w, k[1], s[1], padding), c),
                padding=padding, strideH=s[0], strideW=s[1], filterHeight=k[0],
                filterWidth=k[1], fusedActivationFunction=0)
    lw.set(0, y, True)


@_lowers("AveragePool")
def _avg_pool(lw: _Lowerer) -> None:
    if len(lw.attr("kernel_shape") or []) == 1:
        _as_2d(lw, "AveragePool")
        return
    k, s = _pool_params(lw)
    x = lw.nhwc_of(lw.need(0))
    t, left, b, r = _pads_2d(lw, (x.shape[1], x.shape[2]), k, s, (1, 1))
    if (t or left or b or r) and int(lw.attr("count_include_pad", 0)):
        raise _NoLoweringError("count_include_pad=1 with padding")
    xp, padding = _window(lw, x, k, s, (1, 1), None)
    n, h, w, c = xp.shape
    y = lw.emit("AVERAGE_POOL_2D", [xp], (n, _out_size(h, k[0], s[0], padding),
                                          _out_size(w, k[1], s[1], padding), c),
                padding=padding, strideH=s[0], strideW=s[1], filterHeight=k[0],
                filterWidth=k[1], fusedActivationFunction=0)
    lw.set(0, y, True)


@_lowers("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(lw: _Lowerer) -> None:
    assert lw.op is not None
    x = lw.nhwc_of(lw.need(0))
    n, _, _, c = x.shape
    kind = "MEAN" if lw.op.type == "GlobalAveragePool" else "REDUCE_MAX"
    lw.set(0, lw.emit(kind, [x, lw.i32([1, 2], "axes")], (n, 1, 1, c), keepDims=True), True)


# matrix products -------------------------------------------------------------------------
def _fully_connected(lw: _Lowerer, x: Tensor, w_nk: np.ndarray, bias: np.ndarray | None,
                     name: str | None = None) -> Tensor:
    """x [..., K] times w_nk.T ([N, K] weights) plus bias: FULLY_CONNECTED."""
    n = w_nk.shape[0]
    ins = [x, lw.const(np.ascontiguousarray(w_nk, np.float32), np.float32, "weights"),
           lw.const(bias, np.float32, "bias") if bias is not None else None]
    return lw.emit("FULLY_CONNECTED", ins, (*x.shape[:-1], n), name=name,
                   fusedActivationFunction=0, keepNumDims=len(x.shape) > 2)


@_lowers("Gemm")
def _gemm(lw: _Lowerer) -> None:
    assert lw.op is not None
    alpha, beta = float(lw.attr("alpha", 1.0)), float(lw.attr("beta", 1.0))
    ta, tb = int(lw.attr("transA", 0)), int(lw.attr("transB", 0))
    av = lw.need(0)
    bv = lw.need(1)
    cv = lw.inp(2)
    a = lw.tensor_of(av)
    if ta:
        a = lw.emit("TRANSPOSE", [a, lw.i32([1, 0], "perm")], a.shape[::-1], a.dtype)
    name = lw.name(lw.op.outputs[0].name)
    if bv.const is not None and (cv is None or cv.const is not None):
        w = bv.const.astype(np.float32)
        w_nk = (w if tb else w.T) * np.float32(alpha)
        n = w_nk.shape[0]
        bias = None
        if cv is not None:
            c = cv.const.astype(np.float32) * np.float32(beta)  # type: ignore[union-attr]
            if c.size in (1, n) and (c.ndim < 2 or c.shape[0] == 1):
                bias = np.broadcast_to(c.reshape(-1), (n,)).copy()
            else:
                y = _fully_connected(lw, a, w_nk, None)
                cc = lw.const(c, np.float32, "c")
                lw.set(0, lw.emit("ADD", [y, cc], y.shape, name=name,
                                  fusedActivationFunction=0))
                return
        lw.set(0, _fully_connected(lw, a, w_nk, bias, name))
        return
    if alpha != 1.0 or (cv is not None and beta != 1.0):
        raise _NoLoweringError("alpha/beta with computed operands")
    b = lw.tensor_of(bv)
    m = a.shape[0]
    n = b.shape[0] if tb else b.shape[1]
    y = lw.emit("BATCH_MATMUL", [a, b], (m, n), adjointLhs=False, adjointRhs=bool(tb))
    if cv is not None:
        (p, q), shape, _ = _binary_operands(lw, [_V(y, False, None, (m, n), np.float32), cv])
        y = lw.emit("ADD", [p, q], shape, name=name, fusedActivationFunction=0)
    lw.set(0, y)


@_lowers("MatMul")
def _matmul(lw: _Lowerer) -> None:
    assert lw.op is not None
    av, bv = lw.need(0), lw.need(1)
    if len(av.shape) < 2 or len(bv.shape) < 2:
        raise _NoLoweringError("1-D operands")
    a = lw.tensor_of(av)
    name = lw.name(lw.op.outputs[0].name)
    if bv.const is not None and bv.const.ndim == 2:
        lw.set(0, _fully_connected(lw, a, bv.const.T, None, name))
        return
    b = lw.tensor_of(bv)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = (*batch, a.shape[-2], b.shape[-1])
    lw.set(0, lw.emit("BATCH_MATMUL", [a, b], shape, name=name, adjointLhs=False,
                      adjointRhs=False))


# quantization -------------------------------------------------------------------------------
def _qparams(lw: _Lowerer, v: _V, si: int, zi: int) -> tuple[np.ndarray, np.ndarray, int, Any]:
    """(scale, zero point, quantized axis of the stored tensor, integer dtype) of a
    Quantize/DequantizeLinear node."""
    scale = lw.const_of(si, "scale")
    assert scale is not None
    zp = lw.const_of(zi, "zero_point")
    if int(lw.attr("block_size", 0) or 0):
        raise _NoLoweringError("blocked quantization")
    dtype = np.dtype(zp.dtype) if zp is not None else np.dtype(np.uint8)
    out_type = int(lw.attr("output_dtype", 0) or 0)
    if zp is None and out_type:
        from toolkit.formats.onnx_model import ONNX_DTYPES

        dtype = np.dtype(ONNX_DTYPES.get(out_type, "uint8"))
    if dtype not in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16)):
        raise _NoLoweringError(f"{dtype} quantization")
    zp = np.zeros_like(scale, dtype=dtype) if zp is None else zp
    axis = 0
    if scale.size > 1:
        axis = _norm(int(lw.attr("axis", 1)), len(v.shape))
        if v.nhwc:
            axis = _AXIS_NHWC[axis]
    return (np.asarray(scale, np.float32).reshape(-1), np.asarray(zp).reshape(-1).astype(np.int64),
            axis, dtype)


@_lowers("QuantizeLinear")
def _quantize(lw: _Lowerer) -> None:
    v = lw.need(0)
    x, nhwc = _same_layout(lw, v)
    if nhwc is False and v.nhwc:  # pragma: no cover (_same_layout keeps NHWC)
        nhwc = False
    vv = _V(x, nhwc, None, v.shape, x.dtype)
    scale, zp, axis, dtype = _qparams(lw, vv, 1, 2)
    q = Quantization(scale, zp, axis)
    lw.set(0, lw.emit("QUANTIZE", [x], x.shape, dtype, quant=q), nhwc)


@_lowers("DequantizeLinear")
def _dequantize(lw: _Lowerer) -> None:
    v = lw.need(0)
    x, nhwc = _same_layout(lw, v)
    vv = _V(x, nhwc, None, v.shape, x.dtype)
    scale, zp, axis, _ = _qparams(lw, vv, 1, 2)
    q = x.quant
    if q is not None and np.array_equal(q.scale.reshape(-1), scale) and np.array_equal(
            q.zero_point.reshape(-1), zp) and (scale.size == 1 or q.quantized_dimension == axis):
        lw.set(0, lw.emit("DEQUANTIZE", [x], x.shape, np.float32), nhwc)
        return
    # an integer tensor without the same parameters: (float(x) - zp) * scale
    shape = [1] * len(x.shape)
    if scale.size > 1:
        shape[axis] = scale.size
    f = lw.emit("CAST", [x], x.shape, np.float32)
    if np.any(zp):
        f = lw.emit("SUB", [f, lw.const(zp.astype(np.float32).reshape(shape), np.float32, "zp")],
                    x.shape, fusedActivationFunction=0)
    lw.set(0, lw.emit("MUL", [f, lw.const(scale.reshape(shape), np.float32, "scale")], x.shape,
                      fusedActivationFunction=0), nhwc)


def _float_value(lw: _Lowerer, xi: int, si: int, zi: int, axis: int = 1) -> _V:
    """Input ``xi`` of a QLinear node dequantized with inputs ``si``/``zi``: a float constant,
    or a DEQUANTIZE (the tensor's own parameters) / CAST, SUB, MUL of the tensor."""
    v = lw.need(xi)
    scale = lw.const_of(si, "scale")
    zp = lw.const_of(zi, "zero_point")
    assert scale is not None
    if v.const is not None:
        arr = _dequantize_array(v.const, scale, zp, axis)
        return _V(None, False, arr, tuple(arr.shape), np.float32)
    x, nhwc = _same_layout(lw, v)
    s = np.asarray(scale, np.float32).reshape(-1)
    z = (np.zeros_like(s, np.int64) if zp is None else np.asarray(zp).reshape(-1)
         .astype(np.int64))
    if s.size > 1:
        raise _NoLoweringError("per-channel activations")
    q = x.quant
    if q is not None and np.array_equal(q.scale.reshape(-1), s) and np.array_equal(
            q.zero_point.reshape(-1), z):
        y = lw.emit("DEQUANTIZE", [x], x.shape, np.float32)
    else:
        y = lw.emit("CAST", [x], x.shape, np.float32)
        if z[0]:
            y = lw.emit("SUB", [y, lw.const(z.astype(np.float32), np.float32, "zp")], x.shape,
                        fusedActivationFunction=0)
        y = lw.emit("MUL", [y, lw.const(s, np.float32, "scale")], x.shape,
                    fusedActivationFunction=0)
    return _V(y, nhwc, None, v.shape, np.float32)


def _as_float_node(lw: _Lowerer, op_type: str, ins: list[_V | None], attrs: dict[str, Any]
                   ) -> _V:
    """Lower an ``op_type`` node on the values ``ins`` (a QLinear node's dequantized
    operands, a 1-D node's 2-D form) with ``attrs``, by the converter of that op type, with
    the current node's origins; return its output value."""
    real = lw.op
    assert real is not None
    tensors: list[Tensor | None] = []
    for k, v in enumerate(ins):
        if v is None:
            tensors.append(None)
            continue
        t = Tensor(lw.name(f"{real.outputs[0].name}/float_in{k}"), (), 0)
        lw.vals[t.name] = v
        tensors.append(t)
    out = Tensor(lw.name(f"{real.outputs[0].name}/float"), (), 0)
    lw.op = Op(op_type, tensors, [out], extra={**real.extra, "attributes": attrs})
    try:
        LOWERERS[op_type](lw)
    finally:
        lw.op = real
    return lw.vals[out.name]


def _requantize(lw: _Lowerer, y: _V, si: int, zi: int) -> None:
    """Quantize the float result ``y`` with inputs ``si``/``zi`` into output 0."""
    x, nhwc = _same_layout(lw, y)
    scale, zp, _, dtype = _qparams(lw, _V(x, nhwc, None, y.shape, x.dtype), si, zi)
    if scale.size > 1:
        raise _NoLoweringError("per-channel output quantization")
    lw.set(0, lw.emit("QUANTIZE", [x], x.shape, dtype, quant=Quantization(scale, zp, 0)), nhwc)


@_lowers("QLinearConv")
def _qlinear_conv(lw: _Lowerer) -> None:
    x = _float_value(lw, 0, 1, 2)
    w = _float_value(lw, 3, 4, 5, axis=0)
    bias = None
    b = lw.const_of(8, "bias")
    if b is not None:
        xs, ws = lw.const_of(1, "x_scale"), lw.const_of(4, "w_scale")
        assert xs is not None and ws is not None
        arr = (b.astype(np.float64) * float(np.asarray(xs).reshape(-1)[0])
               * np.asarray(ws, np.float64).reshape(-1)).astype(np.float32)
        bias = _V(None, False, arr, tuple(arr.shape), np.float32)
    attrs = dict(lw.op.extra.get("attributes") or {}) if lw.op is not None else {}
    y = _as_float_node(lw, "Conv", [x, w, bias], attrs)
    _requantize(lw, y, 6, 7)


@_lowers("QLinearMatMul")
def _qlinear_matmul(lw: _Lowerer) -> None:
    a = _float_value(lw, 0, 1, 2)
    b = _float_value(lw, 3, 4, 5, axis=-1)
    y = _as_float_node(lw, "MatMul", [a, b], {})
    _requantize(lw, y, 6, 7)
