"""ONNX converters of element-wise ops, activations, normalisations, softmax and reductions
(see :mod:`toolkit.importers.onnx_lower`): NHWC values stay NHWC, constants are permuted to
match."""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from toolkit.importers.onnx_lower import _Lowerer

from toolkit.importers.onnx_lower_base import (
    _AXIS_NHWC,
    _TO_NCHW,
    _V,
    _binary_operands,
    _lowers,
    _NoLoweringError,
    _norm,
    _same_layout,
)

# activations and unary ops ------------------------------------------------------------
_UNARY = {"Relu": "RELU", "Sigmoid": "LOGISTIC", "Tanh": "TANH", "Exp": "EXP", "Log": "LOG",
          "Sqrt": "SQRT", "Neg": "NEG", "Abs": "ABS", "Floor": "FLOOR", "Ceil": "CEIL",
          "Sin": "SIN", "Cos": "COS", "HardSwish": "HARD_SWISH", "Not": "LOGICAL_NOT",
          "Round": "ROUND"}


@_lowers(*_UNARY)
def _unary(lw: _Lowerer) -> None:
    assert lw.op is not None
    x, nhwc = _same_layout(lw, lw.need(0))
    lw.set(0, lw.emit(_UNARY[lw.op.type], [x], x.shape, x.dtype), nhwc)


@_lowers("Identity", "Dropout")
def _identity(lw: _Lowerer) -> None:
    assert lw.op is not None
    v = lw.need(0)
    lw.vals[lw.op.outputs[0].name] = v
    if len(lw.op.outputs) > 1:
        raise _NoLoweringError("its mask output is read")


@_lowers("LeakyRelu")
def _leaky(lw: _Lowerer) -> None:
    x, nhwc = _same_layout(lw, lw.need(0))
    lw.set(0, lw.emit("LEAKY_RELU", [x], x.shape, alpha=float(lw.attr("alpha", 0.01))), nhwc)


@_lowers("Elu")
def _elu(lw: _Lowerer) -> None:
    if float(lw.attr("alpha", 1.0)) != 1.0:
        raise _NoLoweringError("alpha other than 1")
    x, nhwc = _same_layout(lw, lw.need(0))
    lw.set(0, lw.emit("ELU", [x], x.shape), nhwc)


@_lowers("Gelu")
def _gelu(lw: _Lowerer) -> None:
    approx = lw.attr("approximate", "none")
    x, nhwc = _same_layout(lw, lw.need(0))
    lw.set(0, lw.emit("GELU", [x], x.shape, approximate=approx == "tanh"), nhwc)


@_lowers("Clip")
def _clip(lw: _Lowerer) -> None:
    if lw.opset < 11:
        lo, hi = lw.attr("min", None), lw.attr("max", None)
    else:
        a, b = lw.const_of(1, "min"), lw.const_of(2, "max")
        lo = None if a is None else float(a)
        hi = None if b is None else float(b)
    x, nhwc = _same_layout(lw, lw.need(0))
    kind = {(0.0, 6.0): "RELU6", (0.0, None): "RELU", (-1.0, 1.0): "RELU_N1_TO_1",
            (0.0, 1.0): "RELU_0_TO_1"}.get((lo, hi))
    if kind is not None and x.dtype == np.float32:
        lw.set(0, lw.emit(kind, [x], x.shape), nhwc)
        return
    y = x
    if lo is not None:
        y = lw.emit("MAXIMUM", [y, lw.const(np.asarray([lo], x.dtype), suffix="min")], x.shape,
                    x.dtype)
    if hi is not None:
        y = lw.emit("MINIMUM", [y, lw.const(np.asarray([hi], x.dtype), suffix="max")], x.shape,
                    x.dtype)
    if y is x:
        y = lw.emit("RESHAPE", [x, lw.i32(x.shape, "shape")], x.shape, x.dtype,
                    newShape=list(x.shape))
    lw.set(0, y, nhwc)


@_lowers("HardSigmoid")
def _hard_sigmoid(lw: _Lowerer) -> None:
    alpha, beta = float(lw.attr("alpha", 0.2)), float(lw.attr("beta", 0.5))
    x, nhwc = _same_layout(lw, lw.need(0))
    y = lw.emit("MUL", [x, lw.const(np.asarray([alpha], np.float32), suffix="alpha")], x.shape,
                fusedActivationFunction=0)
    y = lw.emit("ADD", [y, lw.const(np.asarray([beta], np.float32), suffix="beta")], x.shape,
                fusedActivationFunction=0)
    lw.set(0, lw.emit("RELU_0_TO_1", [y], x.shape), nhwc)


@_lowers("Reciprocal")
def _reciprocal(lw: _Lowerer) -> None:
    x, nhwc = _same_layout(lw, lw.need(0))
    one = lw.const(np.asarray([1.0], np.float32), suffix="one")
    lw.set(0, lw.emit("DIV", [one, x], x.shape, fusedActivationFunction=0), nhwc)


@_lowers("PRelu")
def _prelu(lw: _Lowerer) -> None:
    x = lw.need(0)
    slope = lw.const_of(1, "slope")
    assert slope is not None
    ops = _binary_operands(lw, [x, _V(None, False, slope, tuple(slope.shape), slope.dtype)])
    (a, b), shape, nhwc = ops
    lw.set(0, lw.emit("PRELU", [a, b], shape), nhwc)


# element-wise binary ops ----------------------------------------------------------------
_BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Pow": "POW",
           "Max": "MAXIMUM", "Min": "MINIMUM", "Equal": "EQUAL", "Less": "LESS",
           "Greater": "GREATER", "LessOrEqual": "LESS_EQUAL",
           "GreaterOrEqual": "GREATER_EQUAL", "And": "LOGICAL_AND", "Or": "LOGICAL_OR"}
_FUSED_ACT = frozenset({"ADD", "SUB", "MUL", "DIV"})
_BOOL_OUT = frozenset({"EQUAL", "LESS", "GREATER", "LESS_EQUAL", "GREATER_EQUAL",
                       "LOGICAL_AND", "LOGICAL_OR"})


@_lowers(*_BINARY)
def _binary(lw: _Lowerer) -> None:
    assert lw.op is not None
    kind = _BINARY[lw.op.type]
    vals = [v for v in (lw.val(t) for t in lw.op.inputs) if v is not None]
    if len(vals) == 1:
        _identity(lw)
        return
    if kind == "POW" and vals[1].const is not None and vals[1].const.size == 1:
        e = float(vals[1].const.reshape(-1)[0])
        if e == 2.0:
            x, nhwc = _same_layout(lw, vals[0])
            lw.set(0, lw.emit("MUL", [x, x], x.shape, x.dtype, fusedActivationFunction=0),
                   nhwc)
            return
    dtype = np.result_type(*(v.dtype for v in vals))
    acc, shape, nhwc = _binary_operands(lw, vals[:2])
    fields: dict[str, Any] = {"fusedActivationFunction": 0} if kind in _FUSED_ACT else {}
    out_dtype = np.bool_ if kind in _BOOL_OUT else dtype
    y = lw.emit(kind, acc, shape, out_dtype, **fields)
    for v in vals[2:]:  # variadic Max/Min
        (a, b), shape, nhwc2 = _binary_operands(
            lw, [_V(y, nhwc, None, tuple(y.shape[i] for i in _TO_NCHW) if nhwc else y.shape,
                    y.dtype), v])
        nhwc = nhwc2
        y = lw.emit(kind, [a, b], shape, out_dtype, **fields)
    lw.set(0, y, nhwc)


@_lowers("Mod")
def _mod(lw: _Lowerer) -> None:
    if int(lw.attr("fmod", 0)):
        raise _NoLoweringError("fmod=1")
    (a, b), shape, nhwc = _binary_operands(lw, [lw.need(0), lw.need(1)])
    lw.set(0, lw.emit("FLOOR_MOD", [a, b], shape, a.dtype), nhwc)


@_lowers("Where")
def _where(lw: _Lowerer) -> None:
    vals = [lw.need(0), lw.need(1), lw.need(2)]
    ts = [lw.tensor_of(v) for v in vals]
    shape = tuple(np.broadcast_shapes(*(v.shape for v in vals)))
    lw.set(0, lw.emit("SELECT_V2", ts, shape, ts[1].dtype))


@_lowers("Cast")
def _cast(lw: _Lowerer) -> None:
    from toolkit.formats.onnx_model import ONNX_DTYPES

    to = ONNX_DTYPES.get(int(lw.attr("to", 1)))
    if to is None or to in ("complex64", "complex128"):
        raise _NoLoweringError(f"cast to ONNX type {lw.attr('to')}")
    x, nhwc = _same_layout(lw, lw.need(0))
    lw.set(0, lw.emit("CAST", [x], x.shape, np.dtype(to)), nhwc)


@_lowers("BatchNormalization")
def _batch_norm(lw: _Lowerer) -> None:
    assert lw.op is not None
    if len([t for t in lw.op.outputs if t.consumers or t in lw.src.graph.outputs]) > 1:
        raise _NoLoweringError("training-mode outputs")
    gamma, beta, mean, var = (lw.const_of(i, n) for i, n in
                              ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")))
    assert gamma is not None and beta is not None and mean is not None and var is not None
    eps = float(lw.attr("epsilon", 1e-5))
    scale = (gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
    shift = beta.astype(np.float64) - mean.astype(np.float64) * scale
    xv = lw.need(0)
    rank = len(xv.shape)
    cshape = (-1,) + (1,) * (rank - 2)
    sc = _V(None, False, scale.astype(np.float32).reshape(cshape), (), np.float32)
    sh = _V(None, False, shift.astype(np.float32).reshape(cshape), (), np.float32)
    sc.shape, sh.shape = tuple(sc.const.shape), tuple(sh.const.shape)  # type: ignore[union-attr]
    (a, m), shape, nhwc = _binary_operands(lw, [xv, sc])
    y = lw.emit("MUL", [a, m], shape, fusedActivationFunction=0)
    yv = _V(y, nhwc, None, xv.shape, np.float32)
    (a2, s2), shape, nhwc = _binary_operands(lw, [yv, sh])
    lw.set(0, lw.emit("ADD", [a2, s2], shape, fusedActivationFunction=0), nhwc)


@_lowers("InstanceNormalization")
def _instance_norm(lw: _Lowerer) -> None:
    xv = lw.need(0)
    gamma, beta = lw.const_of(1, "scale"), lw.const_of(2, "bias")
    x = lw.nhwc_of(xv)
    lw.set(0, lw.emit("INSTANCE_NORM", [x, lw.const(gamma, np.float32, "gamma"),
                                        lw.const(beta, np.float32, "beta")], x.shape,
                      epsilon=float(lw.attr("epsilon", 1e-5)), fusedActivationFunction=0), True)


@_lowers("LayerNormalization")
def _layer_norm(lw: _Lowerer) -> None:
    assert lw.op is not None

    if len([t for t in lw.op.outputs if t.consumers or t in lw.src.graph.outputs]) > 1:
        raise _NoLoweringError("its Mean / InvStdDev outputs are read")
    xv = lw.need(0)
    if _norm(int(lw.attr("axis", -1)), len(xv.shape)) != len(xv.shape) - 1:
        raise _NoLoweringError("normalisation over more than the last axis")
    gamma = lw.const_of(1, "scale")
    beta = lw.const_of(2, "bias")
    d = xv.shape[-1]
    g = np.broadcast_to(np.asarray(gamma, np.float32).reshape(-1), (d,)) if gamma is not None \
        else np.ones(d, np.float32)
    b = np.broadcast_to(np.asarray(beta, np.float32).reshape(-1), (d,)) if beta is not None \
        else np.zeros(d, np.float32)
    x = lw.tensor_of(xv)
    eps = float(lw.attr("epsilon", 1e-5))
    y = lw.emit("CUSTOM", [x, lw.const(g, np.float32, "gamma"), lw.const(b, np.float32, "beta")],
                x.shape, custom_code="LAYER_NORM", custom_options=struct.pack("<f", eps))
    lw.set(0, y)


# softmax -----------------------------------------------------------------------------------
@_lowers("Softmax", "LogSoftmax")
def _softmax(lw: _Lowerer) -> None:
    assert lw.op is not None
    kind = "SOFTMAX" if lw.op.type == "Softmax" else "LOG_SOFTMAX"
    fields: dict[str, Any] = {"beta": 1.0} if kind == "SOFTMAX" else {}
    xv = lw.need(0)
    rank = len(xv.shape)
    axis = _norm(int(lw.attr("axis", -1 if lw.opset >= 13 else 1)), rank)
    if xv.nhwc and axis == 1 and rank == 4:
        x = xv.t
        assert x is not None
        lw.set(0, lw.emit(kind, [x], x.shape, **fields), True)
        return
    x = lw.tensor_of(xv)
    if axis == rank - 1:
        lw.set(0, lw.emit(kind, [x], x.shape, **fields))
        return
    if lw.opset < 13:  # softmax of the 2-D flattening at axis
        flat = (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
        r = lw.emit("RESHAPE", [x, lw.i32(flat, "shape")], flat, newShape=list(flat))
        y = lw.emit(kind, [r], flat, **fields)
        lw.set(0, lw.emit("RESHAPE", [y, lw.i32(x.shape, "shape")], x.shape,
                          newShape=list(x.shape)))
        return
    perm = [i for i in range(rank) if i != axis] + [axis]
    inv = list(np.argsort(perm))
    t = lw.emit("TRANSPOSE", [x, lw.i32(perm, "perm")], [x.shape[i] for i in perm])
    y = lw.emit(kind, [t], t.shape, **fields)
    lw.set(0, lw.emit("TRANSPOSE", [y, lw.i32(inv, "perm")], x.shape))


# reductions ----------------------------------------------------------------------------------
_REDUCE = {"ReduceMean": "MEAN", "ReduceSum": "SUM", "ReduceMax": "REDUCE_MAX",
           "ReduceMin": "REDUCE_MIN", "ReduceProd": "REDUCE_PROD"}


@_lowers(*_REDUCE)
def _reduce(lw: _Lowerer) -> None:
    assert lw.op is not None
    v = lw.need(0)
    rank = len(v.shape)
    in_input = lw.opset >= 18 or (lw.op.type == "ReduceSum" and lw.opset >= 13)
    if in_input:
        a = lw.const_of(1, "axes")
        axes = None if a is None or a.size == 0 else [int(x) for x in a.reshape(-1)]
    else:
        axes = lw.attr("axes")
    if axes is None:
        if int(lw.attr("noop_with_empty_axes", 0)):
            _identity(lw)
            return
        axes = list(range(rank))
    axes = sorted({_norm(int(a), rank) for a in axes})
    keep = bool(int(lw.attr("keepdims", 1)))
    nhwc = v.nhwc and rank == 4 and keep
    if nhwc:
        assert v.t is not None
        x = v.t
        stored = sorted(_AXIS_NHWC[a] for a in axes)
        shape = [1 if i in stored else d for i, d in enumerate(x.shape)]
    else:
        x = lw.tensor_of(v)
        stored = axes
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in axes]
    lw.set(0, lw.emit(_REDUCE[lw.op.type], [x, lw.i32(stored, "axes")], shape, x.dtype,
                      keepDims=keep), nhwc)


@_lowers("ArgMax", "ArgMin")
def _argmax(lw: _Lowerer) -> None:
    assert lw.op is not None
    if int(lw.attr("select_last_index", 0)):
        raise _NoLoweringError("select_last_index=1")
    v = lw.need(0)
    rank = len(v.shape)
    axis = _norm(int(lw.attr("axis", 0)), rank)
    keep = bool(int(lw.attr("keepdims", 1)))
    x = lw.tensor_of(v)
    kind = "ARG_MAX" if lw.op.type == "ArgMax" else "ARG_MIN"
    shape = [d for i, d in enumerate(x.shape) if i != axis]
    y = lw.emit(kind, [x, lw.i32(np.asarray([axis]), "axis")], shape, np.int64,
                outputType=4)
    if keep:
        full = [1 if i == axis else d for i, d in enumerate(x.shape)]
        y = lw.emit("RESHAPE", [y, lw.i32(full, "shape")], full, np.int64, newShape=full)
    lw.set(0, y)
