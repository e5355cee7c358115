"""Build valid models in code.

    from toolkit.builder import ModelBuilder
    mb = ModelBuilder()
    x = mb.input("Input", [1, 8, 8, 3])
    y = mb.conv2d(x, weights, bias, padding="SAME", activation="RELU", name="conv")
    mb.output(y)
    model = mb.build()

Every op the builder adds is a source op: op *i* gets origin id *i*, named after its output
tensor (as :func:`toolkit.load` does for a file without ONE tables). Helpers infer output
shapes; :meth:`ModelBuilder.op` adds any op with an explicit output shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.ir import Graph, Model, Op, Quantization, Tensor
from toolkit.schema import ACTIVATION_CODES, OPTIONS_CLASS

__all__ = ["ModelBuilder", "options_for", "DEFAULT_OPTIONS"]

# builtin op -> options table name, for ops that have options
DEFAULT_OPTIONS: dict[str, str] = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "ADD": "AddOptions", "SUB": "SubOptions",
    "MUL": "MulOptions", "DIV": "DivOptions", "SQUARED_DIFFERENCE": "SquaredDifferenceOptions",
    "POW": "PowOptions", "MEAN": "ReducerOptions", "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions", "MAX_POOL_2D": "Pool2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "SOFTMAX": "SoftmaxOptions", "RESHAPE": "ReshapeOptions",
    "TRANSPOSE": "TransposeOptions", "BATCH_MATMUL": "BatchMatMulOptions",
    "CONCATENATION": "ConcatenationOptions", "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions", "UNPACK": "UnpackOptions", "PACK": "PackOptions",
    "INSTANCE_NORM": "InstanceNormOptions", "SQUEEZE": "SqueezeOptions",
    "STRIDED_SLICE": "StridedSliceOptions", "PAD": "PadOptions", "GATHER": "GatherOptions",
    "LEAKY_RELU": "LeakyReluOptions", "CAST": "CastOptions", "QUANTIZE": "QuantizeOptions",
    "DEQUANTIZE": "DequantizeOptions", "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions", "EXPAND_DIMS": "ExpandDimsOptions",
    "GELU": "GeluOptions", "HARD_SWISH": "HardSwishOptions", "SLICE": "SliceOptions",
}

_PADDING = {"SAME": 0, "VALID": 1}


def options_for(op_type: str, **fields: Any) -> Any:
    """Return the object-API options object of ``op_type`` with ``fields`` set (camelCase
    schema names, e.g. ``fusedActivationFunction``), or None for ops without options."""
    name = DEFAULT_OPTIONS.get(op_type)
    if name is None:
        if fields:
            raise ToolkitError(
                f"op {op_type} takes no builtin options, got {sorted(fields)}",
                fix=(
                    f"remove the option fields: {op_type} has no builtin options (see "
                    "DEFAULT_OPTIONS for the ops that do)"
                ),
            )
        return None
    obj = OPTIONS_CLASS[name]()
    for k, v in fields.items():
        if not hasattr(obj, k):
            raise ToolkitError(f"{name} has no field {k!r}",
                               fix=f"fields are {sorted(vars(obj))}")
        setattr(obj, k, v)
    return obj


def _act(activation: str | int | None) -> int:
    if activation is None:
        return 0
    if isinstance(activation, int):
        return activation
    try:
        return ACTIVATION_CODES[activation.upper()]
    except KeyError:
        raise ToolkitError(f"unknown activation {activation!r}",
                           fix=f"use one of {sorted(ACTIVATION_CODES)}") from None


def _broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ToolkitError(
            f"shapes {list(a)} and {list(b)} do not broadcast",
            fix=(
                "give inputs whose shapes broadcast (NumPy rules: trailing dims equal or 1), or "
                "reshape one first"
            ),
        ) from None


def _conv_out(size: int, k: int, stride: int, dilation: int, padding: str) -> int:
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        return math.ceil(size / stride)
    return (size - eff) // stride + 1


class ModelBuilder:
    """Assemble a one-subgraph model op by op. Tensors are :class:`toolkit.ir.Tensor`."""

    def __init__(self, name: str = "main", *, description: str | None = "toolkit builder"
                 ) -> None:
        self.graph = Graph(name)
        self.model = Model([self.graph], description=description)
        self._next_origin = 0

    # --------------------------------------------------------------- tensors
    def input(self, name: str, shape: Sequence[int], dtype: Any = np.float32,
              quant: Quantization | None = None) -> Tensor:
        """Add a graph input and return its tensor."""
        t = self.graph.add_tensor(name, shape, dtype, quant=quant)
        self.graph.inputs.append(t)
        return t

    def const(self, name: str, data: Any, dtype: Any = None,
              quant: Quantization | None = None) -> Tensor:
        """Add a constant tensor (float64 data becomes float32) and return it."""
        return self.graph.add_const(self.graph.unique_name(name), data, dtype=dtype, quant=quant)

    def output(self, *tensors: Tensor) -> None:
        """Mark tensors as graph outputs (in order)."""
        self.graph.outputs.extend(tensors)

    def build(self) -> Model:
        """Verify the graph and return the model."""
        self.model.verify()
        return self.model

    # ------------------------------------------------------------------ ops
    @overload
    def op(self, type: str, inputs: Sequence[Tensor | None], shape: Sequence[int] | None = None,
           *, name: str | None = None, dtype: Any = None, options: Any = None,
           quant: Quantization | None = None, outputs: None = None,
           custom_code: str | None = None, custom_options: bytes | None = None,
           **fields: Any) -> Tensor: ...

    @overload
    def op(self, type: str, inputs: Sequence[Tensor | None], shape: Sequence[int] | None = None,
           *, name: str | None = None, dtype: Any = None, options: Any = None,
           quant: Quantization | None = None, outputs: Sequence[tuple[str, Sequence[int]]],
           custom_code: str | None = None, custom_options: bytes | None = None,
           **fields: Any) -> list[Tensor]: ...

    def op(self, type: str, inputs: Sequence[Tensor | None], shape: Sequence[int] | None = None,
           *, name: str | None = None, dtype: Any = None, options: Any = None,
           quant: Quantization | None = None, outputs: Sequence[tuple[str, Sequence[int]]] |
           None = None, custom_code: str | None = None, custom_options: bytes | None = None,
           **fields: Any) -> Tensor | list[Tensor]:
        """Add an op; return its output tensor (or list, when ``outputs`` names several).

        ``shape`` is the output shape; ``dtype`` defaults to the first input's. Options come
        from ``options`` or from ``fields`` (camelCase names of the options table).
        """
        first = next((t for t in inputs if t is not None), None)
        if dtype is None:
            dtype = first.dtype if first is not None else np.float32
        if quant is None and first is not None and first.quant is not None and \
                np.dtype(dtype) == first.dtype and type not in ("QUANTIZE", "DEQUANTIZE"):
            quant = first.quant
        if options is None and type != "CUSTOM":
            options = options_for(type, **fields)
        base = name or type.lower()
        outs: list[Tensor] = []
        if outputs is None:
            if shape is None:
                raise ToolkitError(
                    f"op {type} needs an output shape",
                    fix="pass shape= (the output shape) or outputs= (existing output tensors)",
                )
            outputs = [(base, shape)]
        for oname, oshape in outputs:
            outs.append(self.graph.add_tensor(self.graph.unique_name(oname), oshape, dtype,
                                              quant=quant))
        oid = self._next_origin
        self._next_origin += 1
        op: Op = self.graph.add_op(type, inputs, outs, options, origins=(oid,),
                                   custom_code=custom_code, custom_options=custom_options)
        self.model.source_table[oid] = op.name
        return outs[0] if len(outs) == 1 else outs

    # ------------------------------------------------------ shaped helpers
    def conv2d(self, x: Tensor, w: Tensor, b: Tensor | None = None, *, stride: int = 1,
               padding: str = "SAME", dilation: int = 1, activation: str | None = None,
               name: str | None = None, quant: Quantization | None = None) -> Tensor:
        """CONV_2D: x [N,H,W,C], w [O,kh,kw,C], b [O]."""
        n, h, wd, _ = x.shape
        o, kh, kw, _ = w.shape
        shape = (n, _conv_out(h, kh, stride, dilation, padding),
                 _conv_out(wd, kw, stride, dilation, padding), o)
        return self.op("CONV_2D", [x, w, b], shape, name=name or "conv2d", quant=quant,
                       padding=_PADDING[padding], strideW=stride, strideH=stride,
                       dilationWFactor=dilation, dilationHFactor=dilation,
                       fusedActivationFunction=_act(activation))

    def depthwise_conv2d(self, x: Tensor, w: Tensor, b: Tensor | None = None, *, stride: int = 1,
                         padding: str = "SAME", depth_multiplier: int = 1, dilation: int = 1,
                         activation: str | None = None, name: str | None = None,
                         quant: Quantization | None = None) -> Tensor:
        """DEPTHWISE_CONV_2D: x [N,H,W,C], w [1,kh,kw,C*m], b [C*m]."""
        n, h, wd, _ = x.shape
        _, kh, kw, oc = w.shape
        shape = (n, _conv_out(h, kh, stride, dilation, padding),
                 _conv_out(wd, kw, stride, dilation, padding), oc)
        return self.op("DEPTHWISE_CONV_2D", [x, w, b], shape, name=name or "depthwise",
                       quant=quant, padding=_PADDING[padding], strideW=stride, strideH=stride,
                       depthMultiplier=depth_multiplier, dilationWFactor=dilation,
                       dilationHFactor=dilation, fusedActivationFunction=_act(activation))

    def fully_connected(self, x: Tensor, w: Tensor, b: Tensor | None = None, *,
                        activation: str | None = None, keep_num_dims: bool = False,
                        name: str | None = None, quant: Quantization | None = None) -> Tensor:
        """FULLY_CONNECTED: w [out, in]; output [batch, out] (or keeps leading dims)."""
        out_f = w.shape[0]
        if keep_num_dims:
            shape = (*x.shape[:-1], out_f)
        else:
            shape = (x.size // w.shape[1], out_f)
        return self.op("FULLY_CONNECTED", [x, w, b], shape, name=name or "fc", quant=quant,
                       fusedActivationFunction=_act(activation), keepNumDims=keep_num_dims)

    def binary(self, type: str, a: Tensor, b: Tensor, *, activation: str | None = None,
               name: str | None = None, quant: Quantization | None = None) -> Tensor:
        """Elementwise binary op with broadcasting (ADD, SUB, MUL, DIV, POW, ...)."""
        fields: dict[str, Any] = {}
        if type in ("ADD", "SUB", "MUL", "DIV"):
            fields["fusedActivationFunction"] = _act(activation)
        elif activation:
            raise ToolkitError(
                f"{type} has no fused activation",
                fix=(
                    f"apply the activation as its own op after {type} (e.g. RELU), or leave "
                    "activation unset"
                ),
            )
        return self.op(type, [a, b], _broadcast(a.shape, b.shape), name=name or type.lower(),
                       quant=quant, **fields)

    def add(self, a: Tensor, b: Tensor, **kw: Any) -> Tensor:
        """ADD."""
        return self.binary("ADD", a, b, **kw)

    def sub(self, a: Tensor, b: Tensor, **kw: Any) -> Tensor:
        """SUB."""
        return self.binary("SUB", a, b, **kw)

    def mul(self, a: Tensor, b: Tensor, **kw: Any) -> Tensor:
        """MUL."""
        return self.binary("MUL", a, b, **kw)

    def div(self, a: Tensor, b: Tensor, **kw: Any) -> Tensor:
        """DIV."""
        return self.binary("DIV", a, b, **kw)

    def unary(self, type: str, x: Tensor, *, name: str | None = None,
              quant: Quantization | None = None, **fields: Any) -> Tensor:
        """Elementwise unary op (RELU, RELU6, TANH, RSQRT, SQRT, EXP, LOGISTIC, ...)."""
        return self.op(type, [x], x.shape, name=name or type.lower(), quant=quant, **fields)

    def reduce(self, type: str, x: Tensor, axes: Sequence[int], *, keep_dims: bool = True,
               name: str | None = None, quant: Quantization | None = None) -> Tensor:
        """MEAN / SUM / REDUCE_MAX over ``axes``."""
        axes_n = sorted(a % len(x.shape) for a in axes)
        ax = self.const((name or type.lower()) + "/axes", np.asarray(axes_n, dtype=np.int32))
        if keep_dims:
            shape = tuple(1 if i in axes_n else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes_n)
        return self.op(type, [x, ax], shape, name=name or type.lower(), quant=quant,
                       keepDims=keep_dims)

    def mean(self, x: Tensor, axes: Sequence[int], **kw: Any) -> Tensor:
        """MEAN."""
        return self.reduce("MEAN", x, axes, **kw)

    def pool(self, type: str, x: Tensor, size: int, stride: int | None = None, *,
             padding: str = "VALID", activation: str | None = None, name: str | None = None
             ) -> Tensor:
        """MAX_POOL_2D / AVERAGE_POOL_2D."""
        stride = stride or size
        n, h, w, c = x.shape
        shape = (n, _conv_out(h, size, stride, 1, padding), _conv_out(w, size, stride, 1, padding),
                 c)
        return self.op(type, [x], shape, name=name or type.lower(), padding=_PADDING[padding],
                       strideW=stride, strideH=stride, filterWidth=size, filterHeight=size,
                       fusedActivationFunction=_act(activation))

    def softmax(self, x: Tensor, beta: float = 1.0, *, name: str | None = None,
                quant: Quantization | None = None) -> Tensor:
        """SOFTMAX over the last axis."""
        return self.op("SOFTMAX", [x], x.shape, name=name or "softmax", quant=quant, beta=beta)

    def reshape(self, x: Tensor, shape: Sequence[int], *, name: str | None = None) -> Tensor:
        """RESHAPE with the new shape as a second (int32 constant) input and in options."""
        shape = list(shape)
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1]))
            shape[shape.index(-1)] = x.size // known
        s = self.const((name or "reshape") + "/shape", np.asarray(shape, dtype=np.int32))
        return self.op("RESHAPE", [x, s], shape, name=name or "reshape", newShape=list(shape))

    def transpose(self, x: Tensor, perm: Sequence[int], *, name: str | None = None) -> Tensor:
        """TRANSPOSE."""
        p = self.const((name or "transpose") + "/perm", np.asarray(perm, dtype=np.int32))
        return self.op("TRANSPOSE", [x, p], [x.shape[i] for i in perm],
                       name=name or "transpose")

    def batch_matmul(self, a: Tensor, b: Tensor, *, adj_x: bool = False, adj_y: bool = False,
                     name: str | None = None) -> Tensor:
        """BATCH_MATMUL with broadcasting batch dims."""
        m = a.shape[-1] if adj_x else a.shape[-2]
        n = b.shape[-2] if adj_y else b.shape[-1]
        batch = _broadcast(a.shape[:-2], b.shape[:-2])
        return self.op("BATCH_MATMUL", [a, b], (*batch, m, n), name=name or "batch_matmul",
                       adjointLhs=adj_x, adjointRhs=adj_y)

    def concat(self, xs: Sequence[Tensor], axis: int, *, activation: str | None = None,
               name: str | None = None) -> Tensor:
        """CONCATENATION along ``axis``."""
        shape = list(xs[0].shape)
        ax = axis % len(shape)
        shape[ax] = sum(t.shape[ax] for t in xs)
        return self.op("CONCATENATION", list(xs), shape, name=name or "concat", axis=ax,
                       fusedActivationFunction=_act(activation))

    def split(self, x: Tensor, num: int, axis: int, *, name: str | None = None) -> list[Tensor]:
        """SPLIT into ``num`` equal parts (one op, several outputs)."""
        ax = axis % len(x.shape)
        a = self.const((name or "split") + "/axis", np.asarray(ax, dtype=np.int32))
        shape = list(x.shape)
        shape[ax] //= num
        base = name or "split"
        outs = [(base if i == 0 else f"{base}:{i}", shape) for i in range(num)]
        res = self.op("SPLIT", [a, x], name=base, outputs=outs, numSplits=num, dtype=x.dtype,
                      quant=x.quant)
        return res if isinstance(res, list) else [res]

    def instance_norm(self, x: Tensor, gamma: Tensor, beta: Tensor, epsilon: float = 1e-5, *,
                      activation: str | None = None, name: str | None = None) -> Tensor:
        """circle's INSTANCE_NORM (circle-only: save as .circle)."""
        return self.op("INSTANCE_NORM", [x, gamma, beta], x.shape, name=name or "instance_norm",
                       epsilon=epsilon, fusedActivationFunction=_act(activation))

