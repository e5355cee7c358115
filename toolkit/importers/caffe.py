"""Caffe networks (``NetParameter`` messages) -> the toolkit's IR.

:func:`load_caffe` reads a ``.prototxt`` (with an optional ``.caffemodel`` of weights matched
to its layers by name) or a self-contained ``.caffemodel``; :func:`import_net` converts
messages already parsed by :mod:`toolkit.formats.caffe`.

Graph inputs and outputs keep Caffe's blob names and Caffe's N, C, H, W shapes. Inside, 4-D
blobs live in the toolkit's NHWC layout: an input is transposed once by its Input layer, an
output is transposed back by the layer that wrote it, and a layer that needs Caffe's order
(Flatten, Reshape, Permute, ...) transposes where it reads. Weights are converted once, when
the model is built. Each Caffe layer is one source op origin (origin id = the layer's index
among the layers kept for the TEST phase, named after the layer); every op made for a layer,
in-place layers included, carries that origin. Layers that compute nothing at inference
(Dropout, Split, an identity Power) are recorded in ``graph.removed_origins`` with the reason.

Layers with no single TFLite builtin are written as a few primitive ops (all with the layer's
origin), so that the reference runtime, LiteRT and the compiler's passes handle them as they
are: PReLU and ELU from RELU/MINIMUM/MUL/EXP, LRN as a 1x1 convolution of squares and POW
(within channels: an average pool of squares), BNLL from RELU/ABS/EXP/LOG, ArgMax as
ARG_MAX + CAST, BatchNorm as MUL + ADD, Deconvolution as zero insertion + a convolution with
the flipped kernel, a grouped convolution as SPLIT + CONV_2D per group + CONCATENATION (one
input channel per group: DEPTHWISE_CONV_2D). Caffe's symmetric padding becomes SAME where
TFLite's SAME pads the same way, else PAD/PADV2 + a VALID op; AVE pooling over padding
multiplies by Caffe's divisor correction (Caffe counts the padding, TFLite does not).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.errors import ModelFormatError, ToolkitError, UnsupportedOpError
from toolkit.formats import caffe as cf
from toolkit.ir import Graph, Model, Tensor
from toolkit.layer_names import name_layers
from toolkit.schema import OPTIONS_CLASS

__all__ = ["load_caffe", "import_net", "SUPPORTED_LAYERS"]

_F32_MIN = float(np.finfo(np.float32).min)
_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)
_AXIS_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # Caffe (NCHW) axis -> axis of the NHWC tensor

_DEFAULT_LAYER = cf.caffe_pb2.LayerParameter()
_MAX_DERIVED = 1 << 24  # elements of a constant the importer derives (not read from a blob)
_DATA_LAYERS = frozenset({"Data", "ImageData", "HDF5Data", "MemoryData", "WindowData",
                          "DummyData", "Python"})


def load_caffe(path: str | os.PathLike[str], weights: str | os.PathLike[str] | None = None
               ) -> Model:
    """Read a Caffe model; return it as a :class:`~toolkit.ir.Model`.

    Args:
        path: a ``.prototxt`` (network in text format) or a ``.caffemodel`` (binary network
            with its blobs).
        weights: a ``.caffemodel`` whose layers' blobs are matched to ``path``'s layers by
            name (layers it has and ``path`` lacks, such as Data or loss layers of a
            training snapshot, are ignored).

    Returns a model whose graph inputs and outputs are named by Caffe's blob names, with
    Caffe's NCHW shapes; ``model.source_table`` maps origin ids to layer names. Raises
    :class:`ToolkitError` for unreadable files and unsupported layers (naming the layer and
    its type).
    """
    net = cf.read_net(path)
    wnet = cf.read_net(weights) if weights is not None else None
    model = import_net(net, wnet, where=str(path))
    model.path = str(path)
    return model


def import_net(net: Any, weights: Any = None, *, where: str = "<net>") -> Model:
    """Convert a ``NetParameter`` (and optionally one holding the weights) into a Model whose
    origins are its layers (``model.origin(i).layers``: the Caffe layer's name)."""
    model = _Importer(net, weights, where).run()
    return name_layers(model, "caffe")


_OPTIONS = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "ADD": "AddOptions", "SUB": "SubOptions",
    "MUL": "MulOptions", "POW": "PowOptions", "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions", "MAX_POOL_2D": "Pool2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "SOFTMAX": "SoftmaxOptions",
    "RESHAPE": "ReshapeOptions", "TRANSPOSE": "TransposeOptions",
    "CONCATENATION": "ConcatenationOptions", "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "SLICE": "SliceOptions", "LEAKY_RELU": "LeakyReluOptions", "CAST": "CastOptions",
    "ARG_MAX": "ArgMaxOptions",
}


def options_for(op_type: str, **fields: Any) -> Any:
    """The object-API options of ``op_type`` with ``fields`` set (None for ops without)."""
    name = _OPTIONS.get(op_type)
    if name is None:
        return None
    obj = OPTIONS_CLASS[name]()
    for k, v in fields.items():
        if not hasattr(obj, k):  # pragma: no cover (a mistake in this module)
            raise AttributeError(f"{name} has no field {k!r}")
        setattr(obj, k, v)
    return obj


# ---------------------------------------------------------------------------- layers
@dataclass
class _Layer:
    """One Caffe layer, new or V1 format, with its blobs (from the weights net if given)."""

    index: int
    name: str
    type: str
    bottom: list[str]
    top: list[str]
    msg: Any
    blobs: list[Any]

    def param(self, field: str) -> Any:
        """The layer's ``<field>`` parameter message (defaults when absent or not in V1)."""
        if self.msg is not None and field in self.msg.DESCRIPTOR.fields_by_name:
            return getattr(self.msg, field)
        return getattr(_DEFAULT_LAYER, field)

    @property
    def where(self) -> str:
        return f"layer {self.name!r} ({self.type})"


def _included(msg: Any) -> bool:
    """Caffe's NetState filtering for the TEST phase, level 0, no stages."""
    def matches(rule: Any) -> bool:
        if rule.HasField("phase") and rule.phase != cf.caffe_pb2.TEST:
            return False
        if rule.HasField("min_level") and rule.min_level > 0:
            return False
        if rule.HasField("max_level") and rule.max_level < 0:
            return False
        return not rule.stage

    if len(msg.include):
        return any(matches(r) for r in msg.include)
    return not any(matches(r) for r in msg.exclude)


def _text(v: Any, where: str) -> str:
    """A string field's value; protobuf returns invalid UTF-8 of proto2 strings as bytes."""
    if isinstance(v, str):
        return v
    raise ModelFormatError(f"a name is not valid UTF-8 text: {bytes(v)[:40]!r}", where=where,
                           fix="the file is damaged")


def _texts(vs: Any, where: str) -> list[str]:
    return [_text(v, where) for v in vs]


def _layers_of(net: Any, where: str) -> list[tuple[str, str, list[str], list[str], Any]]:
    if len(net.layer) and len(net.layers):
        raise ModelFormatError("net mixes new `layer` and legacy V1 `layers` entries",
                               where=where, fix="upgrade the net with Caffe's upgrade tools")
    out = []
    for m in net.layer:
        if _included(m):
            out.append((_text(m.name, where), _text(m.type, where), _texts(m.bottom, where),
                        _texts(m.top, where), m))
    for m in net.layers:
        if _included(m):
            t = cf.V1_TYPE_NAMES.get(int(m.type), f"V1 type {int(m.type)}")
            out.append((_text(m.name, where), t, _texts(m.bottom, where),
                        _texts(m.top, where), m))
    return out


def _weights_by_name(wnet: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for m in list(wnet.layer) + list(wnet.layers):
        if len(m.blobs) and isinstance(m.name, str):
            found.setdefault(m.name, list(m.blobs))
    return found


# --------------------------------------------------------------------------- blobs
@dataclass
class _Blob:
    """A Caffe blob's current tensor; ``nhwc``: a 4-D blob stored in NHWC order."""

    tensor: Tensor
    nhwc: bool
    writer: int  # origin id of the layer that last wrote it

    @property
    def shape(self) -> tuple[int, ...]:
        """The blob's Caffe shape (NCHW for 4-D blobs)."""
        s = self.tensor.shape
        return (s[0], s[3], s[1], s[2]) if self.nhwc else s


def _norm_axis(axis: int, rank: int, layer: _Layer, what: str = "axis") -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ToolkitError(f"{what} {axis} is out of range for a {rank}-D blob",
                           where=layer.where,
                           fix=(f"give {what} between {-rank} and {rank - 1} (negative values "
                                "count from the last axis)"))
    return a


class _Importer:
    """One conversion: walks the layers in order, keeps each blob's current tensor (in-place
    layers replace it), and names tensors so that net inputs and outputs keep blob names."""

    def __init__(self, net: Any, weights: Any, where: str) -> None:
        self.net = net
        self.where = where
        self.graph = Graph("main")
        self.model = Model([self.graph], description=f"Caffe net {net.name!r}"
                           if net.name else "Caffe net")
        self.blobs: dict[str, _Blob] = {}
        self.used_names: set[str] = set()
        self.reserved: set[str] = set()
        self.converted: dict[tuple[int, str], Tensor] = {}
        self.oid = -1
        self.layer: _Layer | None = None
        wts = _weights_by_name(weights) if weights is not None else {}
        raw = _layers_of(net, where)
        layers: list[_Layer] = []
        if len(net.input):
            # net-level inputs become one Input layer named "input", as Caffe's upgrade does
            layers.append(_Layer(0, "input", "Input", [], _texts(net.input, where), None, []))
        for name, typ, bottom, top, msg in raw:
            blobs = wts.get(name) or list(msg.blobs)
            layers.append(_Layer(len(layers), name, typ, bottom, top, msg, blobs))
        if not layers:
            raise ModelFormatError("net has no layers", where=where,
                                   fix="pass a Caffe .prototxt or .caffemodel")
        self.layers = layers

    # -------------------------------------------------------------- names
    def _name(self, base: str) -> str:
        base = base or "t"
        cand, i = base, 0
        while cand in self.used_names or cand in self.reserved:
            i += 1
            cand = f"{base}_{i}"
        self.used_names.add(cand)
        return cand

    def _exact(self, name: str) -> str:
        self.used_names.add(name)
        return name

    # ------------------------------------------------------------ tensors
    def const(self, suffix: str, data: Any, dtype: Any = np.float32) -> Tensor:
        """A constant of the current layer, named ``<layer>/<suffix>``."""
        assert self.layer is not None
        arr = np.ascontiguousarray(np.asarray(data, dtype=dtype))
        return self.graph.add_tensor(self._name(f"{self.layer.name}/{suffix}"), arr.shape,
                                     arr.dtype, data=arr)

    def op(self, type: str, inputs: Sequence[Tensor | None], shape: Sequence[int], *,
           name: str | None = None, dtype: Any = np.float32, **fields: Any) -> Tensor:
        """Add an op of the current layer; return its (single) output tensor."""
        assert self.layer is not None
        if any(d <= 0 for d in shape):
            raise ToolkitError(f"output shape {list(shape)} of {type} is empty",
                               where=self.layer.where,
                               fix="check the layer's parameters against its input shape")
        if int(np.prod(shape, dtype=np.float64)) > cf.MAX_ELEMENTS:
            raise ToolkitError(f"output shape {list(shape)} is too large",
                               where=self.layer.where,
                               fix=("check kernel_size, stride, num_output and the input shape: "
                                    "a blob holds at most 2**31 elements"))
        out = self.graph.add_tensor(name or self._name(self.layer.name), shape, dtype)
        self.graph.add_op(type, inputs, [out], options_for(type, **fields),
                          origins=(self.oid,))
        return out

    def multi_op(self, type: str, inputs: Sequence[Tensor | None],
                 shapes: Sequence[Sequence[int]], names: Sequence[str], **fields: Any
                 ) -> list[Tensor]:
        """Add an op with several outputs; return them."""
        outs = [self.graph.add_tensor(n, s, np.float32) for n, s in zip(names, shapes)]
        self.graph.add_op(type, inputs, outs, options_for(type, **fields), origins=(self.oid,))
        return outs

    def transpose(self, x: Tensor, perm: Sequence[int], name: str | None = None) -> Tensor:
        p = self.const("perm", np.asarray(perm, dtype=np.int32), np.int32)
        return self.op("TRANSPOSE", [x, p], [x.shape[i] for i in perm], name=name)

    def reshape(self, x: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
        s = self.const("shape", np.asarray(shape, dtype=np.int32), np.int32)
        return self.op("RESHAPE", [x, s], shape, name=name, newShape=[int(d) for d in shape])

    def binary(self, type: str, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        fields = {"fusedActivationFunction": 0} if type in ("ADD", "SUB", "MUL", "DIV") else {}
        return self.op(type, [a, b], shape, name=name, **fields)

    def scalar(self, suffix: str, value: float) -> Tensor:
        return self.const(suffix, np.asarray([value], dtype=np.float32))

    # ------------------------------------------------------------- layouts
    def nhwc(self, b: _Blob) -> Tensor:
        """The blob as an NHWC tensor (4-D blobs only)."""
        assert self.layer is not None
        if b.nhwc:
            return b.tensor
        if len(b.tensor.shape) != 4:
            raise ToolkitError(f"needs a 4-D input, got shape {list(b.tensor.shape)}",
                               where=self.layer.where,
                               fix=("this layer works on 4-D N,C,H,W blobs: reshape or flatten "
                                    "the bottom to 4-D before it (Reshape layer), or use a layer "
                                    "that accepts this rank"))
        key = (id(b.tensor), "nhwc")
        if key not in self.converted:
            self.converted[key] = self.transpose(b.tensor, _TO_NHWC,
                                                 self._name(b.tensor.name + "/nhwc"))
        return self.converted[key]

    def nchw(self, b: _Blob) -> Tensor:
        """The blob as a tensor in Caffe's order."""
        if not b.nhwc:
            return b.tensor
        key = (id(b.tensor), "nchw")
        if key not in self.converted:
            self.converted[key] = self.transpose(b.tensor, _TO_NCHW,
                                                 self._name(b.tensor.name + "/nchw"))
        return self.converted[key]

    def channel_const(self, b: _Blob, values: np.ndarray, suffix: str, axis: int = 1
                      ) -> Tensor:
        """A constant over Caffe axes ``axis..axis+values.ndim`` of ``b``, shaped to
        broadcast against ``b``'s stored tensor (leading 1s dropped)."""
        rank = len(b.shape)
        full = np.asarray(values, dtype=np.float32).reshape(
            (1,) * axis + values.shape + (1,) * (rank - axis - values.ndim))
        if b.nhwc:
            full = full.transpose(_TO_NHWC)
        shape = list(full.shape)
        while len(shape) > 1 and shape[0] == 1:
            shape.pop(0)
        return self.const(suffix, full.reshape(shape))

    # --------------------------------------------------------------- blobs
    def bottom(self, i: int = 0) -> _Blob:
        assert self.layer is not None
        lay = self.layer
        if i >= len(lay.bottom):
            raise ToolkitError(f"needs at least {i + 1} bottom blob(s), has {len(lay.bottom)}",
                               where=lay.where, fix="add the missing `bottom:` entries")
        name = lay.bottom[i]
        if name not in self.blobs:
            raise ToolkitError(f"bottom blob {name!r} is not produced by an earlier layer",
                               where=lay.where,
                               fix="check the layer order and the blob names (top/bottom)")
        return self.blobs[name]

    def out_name(self, top: str, nhwc: bool) -> str:
        """Name for the tensor of ``top`` written by the current layer: the blob name itself
        when it is a net output in Caffe's layout, else a fresh name."""
        if (not nhwc and top in self.reserved and self.final_writer.get(top) == self.oid
                and top not in self.used_names):
            return self._exact(top)
        return self._name(top)

    def set_top(self, t: Tensor, nhwc: bool, i: int = 0) -> None:
        assert self.layer is not None
        self.blobs[self.layer.top[i]] = _Blob(t, nhwc, self.oid)

    def need_tops(self, n: int) -> None:
        assert self.layer is not None
        if len(self.layer.top) != n:
            raise ToolkitError(f"has {len(self.layer.top)} top blob(s), expected {n}",
                               where=self.layer.where,
                               fix=f"give the layer {n} `top:` entries")

    def weight(self, i: int, shape: Sequence[int], what: str) -> np.ndarray:
        """Blob ``i`` of the current layer reshaped to ``shape`` (legacy dims accepted)."""
        lay = self.layer
        assert lay is not None
        if i >= len(lay.blobs):
            raise ToolkitError(f"has no {what} blob (blob {i}; it has {len(lay.blobs)})",
                               where=lay.where,
                               fix="pass the trained .caffemodel with weights=, or a "
                                   "caffemodel that holds this layer's blobs")
        arr = cf.blob_array(lay.blobs[i], where=f"{self.where}: {lay.where}: blob {i}")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ToolkitError(f"{what} blob has shape {list(arr.shape)}, expected "
                               f"{list(shape)}", where=lay.where,
                               fix="the weights do not belong to this network definition")
        return arr.reshape(tuple(shape))

    # ----------------------------------------------------------------- run
    def run(self) -> Model:
        self._plan_outputs()
        for lay in self.layers:
            self.model.source_table[lay.index] = lay.name
        for lay in self.layers:
            self.layer, self.oid = lay, lay.index
            conv = _CONVERTERS.get(lay.type)
            if conv is None:
                fix = ("use the deploy prototxt (no data or loss layers) with weights="
                       if lay.type in _DATA_LAYERS or "Loss" in lay.type or
                       lay.type in ("Accuracy", "Silence") else
                       f"supported layer types: {', '.join(sorted(_CONVERTERS))}")
                raise UnsupportedOpError(f"layer type {lay.type!r} is not supported",
                                         where=f"{self.where}: {lay.where}", fix=fix)
            if lay.msg is not None and (unknown := cf.unknown_fields(lay.msg)):
                warnings.warn(f"{self.where}: {lay.where}: fields {unknown} are not read by "
                              "the toolkit and were ignored", stacklevel=3)
            try:
                conv(self)
            except ToolkitError as e:
                if e.where and self.where in e.where:
                    raise
                raise type(e)(e.what, where=f"{self.where}: {e.where or lay.where}",
                              fix=e.fix) from None
            except (ValueError, IndexError, OverflowError, ZeroDivisionError,
                    MemoryError) as e:
                raise ToolkitError(f"cannot import the layer ({type(e).__name__}: {e})",
                                   where=f"{self.where}: {lay.where}",
                                   fix="check the layer's parameters and blobs") from None
        self._finish_outputs()
        try:
            self.model.verify()
        except ToolkitError as e:
            raise ToolkitError(f"the imported graph is invalid: {e.what}", where=self.where,
                               fix="check the network's blob names") from None
        return self.model

    def _plan_outputs(self) -> None:
        """Find the net outputs (blobs written and not read afterwards) and their writers."""
        available: dict[str, int] = {}
        for lay in self.layers:
            for b in lay.bottom:
                available.pop(b, None)
            for t in lay.top:
                available.pop(t, None)
                available[t] = lay.index
        self.outputs = list(available)
        self.final_writer = dict(available)
        self.reserved = set(self.outputs)
        for lay in self.layers:
            if lay.type == "Input":
                self.reserved.update(lay.top)

    def _finish_outputs(self) -> None:
        g = self.graph
        seen: set[Tensor] = set()
        for name in self.outputs:
            b = self.blobs[name]
            self.layer = next(la for la in self.layers if la.index == b.writer)
            self.oid = b.writer
            t = b.tensor
            if b.nhwc:
                t = self.transpose(t, _TO_NCHW, self._exact(name) if name not in
                                   self.used_names else self._name(name))
            elif t in seen or t.name != name:
                # an alias (Split, Dropout) or a second output of one tensor: copy it
                nm = self._exact(name) if name not in self.used_names else self._name(name)
                t = self.reshape(t, t.shape, nm)
            seen.add(t)
            g.outputs.append(t)
        live = g.live_origins()
        for lay in self.layers:
            if lay.index in live:  # e.g. a Split whose top is a net output owns its copy
                g.removed_origins.pop(lay.index, None)
            elif lay.index not in g.removed_origins:
                g.removed_origins[lay.index] = f"{lay.type} layer: no op at inference"


# ---------------------------------------------------------------- converters
_CONVERTERS: dict[str, Callable[[_Importer], None]] = {}


def _converter(*types: str) -> Callable[[Callable[[_Importer], None]],
                                         Callable[[_Importer], None]]:
    def deco(fn: Callable[[_Importer], None]) -> Callable[[_Importer], None]:
        for t in types:
            _CONVERTERS[t] = fn
        return fn
    return deco


def _shape_of(msg: Any) -> list[int]:
    dims = [int(d) for d in msg.dim]
    if not dims or any(d <= 0 or d > cf.MAX_ELEMENTS for d in dims):
        raise ToolkitError(f"input shape {dims} is not a positive static shape",
                           fix="give every input dimension as a positive integer")
    return dims


@_converter("Input")
def _input(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    if lay.msg is None:  # net-level `input:` fields
        net = im.net
        if len(net.input_shape):
            shapes = [_shape_of(s) for s in net.input_shape]
        else:
            dims = [int(d) for d in net.input_dim]
            if len(dims) != 4 * len(net.input):
                raise ToolkitError(f"{len(net.input)} input(s) need {4 * len(net.input)} "
                                   f"input_dim values, got {len(dims)}", where="net inputs",
                                   fix="give input_shape { dim: ... } for every input")
            shapes = [_shape_of(_Dims(dims[4 * i:4 * i + 4])) for i in range(len(net.input))]
    else:
        shapes = [_shape_of(s) for s in lay.msg.input_param.shape]
    if len(shapes) == 1 and len(lay.top) > 1:
        shapes = shapes * len(lay.top)
    if len(shapes) != len(lay.top):
        raise ToolkitError(f"{len(lay.top)} input blob(s) but {len(shapes)} shape(s)",
                           where=lay.where, fix="give one shape per top blob")
    for top, shape in zip(lay.top, shapes):
        if int(np.prod(shape, dtype=np.float64)) > cf.MAX_ELEMENTS:
            raise ToolkitError(
                f"input shape {shape} is too large", where=lay.where,
                fix=(
                    "give a smaller input shape (batch 1 and the deployed resolution): a blob "
                    "holds at most 2**31 elements"
                ),
            )
        if top in im.blobs:
            raise ToolkitError(
                f"input blob {top!r} is defined twice", where=lay.where,
                fix=(
                    "rename one of the inputs: every `top:` of the net must name a new blob "
                    "(in-place layers aside)"
                ),
            )
        t = im.graph.add_tensor(im._exact(top), shape, np.float32)
        im.graph.inputs.append(t)
        b = _Blob(t, False, im.oid)
        if len(shape) == 4:
            b = _Blob(im.nhwc(b), True, im.oid)
        im.blobs[top] = b


@dataclass
class _Dims:
    """Four ``input_dim`` values in the shape of a ``BlobShape``."""

    dim: list[int]


def _pair(p: Any, name: str, default: int | None, layer: _Layer) -> tuple[int, int]:
    """Caffe's spellings of a 2-D parameter: ``name_h``/``name_w``, or repeated ``name``."""
    h_f, w_f = f"{name}_h", f"{name}_w"
    rep_name = {"kernel": "kernel_size"}.get(name, name)
    fields = p.DESCRIPTOR.fields_by_name
    has_hw = h_f in fields and (p.HasField(h_f) or p.HasField(w_f))
    rep = getattr(p, rep_name)
    rep_list = list(rep) if not isinstance(rep, int) else ([rep] if p.HasField(rep_name)
                                                            else [])
    if has_hw:
        if rep_list:
            raise ToolkitError(f"both {rep_name} and {h_f}/{w_f} are given", where=layer.where,
                               fix="give one spelling")
        if not (p.HasField(h_f) and p.HasField(w_f)) and name == "kernel":
            raise ToolkitError(
                f"{h_f} and {w_f} must be given together", where=layer.where,
                fix=f"give both {h_f} and {w_f}, or one {rep_name} for a square kernel",
            )
        return int(getattr(p, h_f)), int(getattr(p, w_f))
    if not rep_list:
        if default is None:
            raise ToolkitError(f"{rep_name} is not given", where=layer.where,
                               fix=f"set {rep_name} or {h_f}/{w_f}")
        return default, default
    if len(rep_list) == 1:
        return int(rep_list[0]), int(rep_list[0])
    if len(rep_list) == 2:
        return int(rep_list[0]), int(rep_list[1])
    raise ToolkitError(f"{rep_name} has {len(rep_list)} values; only 2-D is supported",
                       where=layer.where,
                       fix=(f"give {rep_name} once (square) or twice (height, width), or use "
                            f"{h_f} and {w_f}; 3-D and higher convolutions are not supported"))


def _check_conv_param(p: Any, layer: _Layer) -> None:
    if p.axis != 1 or p.force_nd_im2col:
        raise UnsupportedOpError("only channel axis 1 (2-D convolution) is supported",
                                 where=layer.where,
                                 fix=("set axis: 1 (the default) and remove force_nd_im2col; N-D "
                                      "convolution is not supported"))


def _same_pads(size: int, k_eff: int, s: int, before: int, after: int) -> bool:
    """True when TFLite's SAME padding pads ``before``/``after`` and gives the same output
    size as explicit padding (Caffe's symmetric pad, odd kernels)."""
    out = -(-size // s)
    total = max((out - 1) * s + k_eff - size, 0)
    explicit = (size + before + after - k_eff) // s + 1
    return total // 2 == before and total - total // 2 == after and explicit == out


def _conv_core(im: _Importer, x: Tensor, w: np.ndarray, bias: np.ndarray, stride: tuple[int, int],
               dil: tuple[int, int], group: int, name: str, same: bool = False) -> Tensor:
    """Convolution of NHWC ``x`` with Caffe weights ``w`` [O, C/group, kh, kw]: VALID, or
    SAME when ``same`` (the caller checked it pads as Caffe does)."""
    n, h, wd, c = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    dh, dw = dil
    if same:
        oh, ow = -(-h // sh), -(-wd // sw)
    else:
        oh = (h - ((kh - 1) * dh + 1)) // sh + 1
        ow = (wd - ((kw - 1) * dw + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ToolkitError(f"kernel {kh}x{kw} (dilation {dh}x{dw}) does not fit the "
                           f"{h}x{wd} input", fix="check kernel, pad and dilation")
    fields: dict[str, Any] = dict(padding=0 if same else 1, strideH=sh, strideW=sw,
                                  dilationHFactor=dh, dilationWFactor=dw,
                                  fusedActivationFunction=0)
    if cg * group != c or o % group:
        raise ToolkitError(f"weights [{o}, {cg}, {kh}, {kw}] with group {group} do not fit "
                           f"{c} input channels",
                           fix=("the weights blob must be [num_output, input channels / group, "
                                "kh, kw] with num_output divisible by group: check group and "
                                "that the weights were trained for this input"))
    if group == 1:
        wt = im.const("weights", w.transpose(0, 2, 3, 1))
        return im.op("CONV_2D", [x, wt, im.const("bias", bias)], (n, oh, ow, o), name=name,
                     **fields)
    if cg == 1:  # one input channel per group: a depthwise convolution
        wt = im.const("weights", w.transpose(1, 2, 3, 0))
        return im.op("DEPTHWISE_CONV_2D", [x, wt, im.const("bias", bias)], (n, oh, ow, o),
                     name=name, depthMultiplier=o // c, **fields)
    axis = im.const("split_axis", np.asarray(3, dtype=np.int32), np.int32)
    parts = im.multi_op("SPLIT", [axis, x], [(n, h, wd, cg)] * group,
                        [im._name(f"{im.layer.name}/group{g}") for g in range(group)]
                        if im.layer else [], numSplits=group)
    og = o // group
    outs = []
    for g, part in enumerate(parts):
        wt = im.const(f"weights{g}", w[g * og:(g + 1) * og].transpose(0, 2, 3, 1))
        bg = im.const(f"bias{g}", bias[g * og:(g + 1) * og])
        outs.append(im.op("CONV_2D", [part, wt, bg], (n, oh, ow, og), **fields))
    return im.op("CONCATENATION", outs, (n, oh, ow, o), name=name, axis=3,
                 fusedActivationFunction=0)


def _pad(im: _Importer, x: Tensor, top: int, bottom: int, left: int, right: int,
         value: float = 0.0) -> Tensor:
    """Pad (or crop, for negative amounts) the H and W axes of NHWC ``x``."""
    n, h, w, c = x.shape
    if min(top, bottom, left, right) < 0:
        ct, cb, cl, cr = (max(-v, 0) for v in (top, bottom, left, right))
        begin = im.const("begin", np.asarray([0, ct, cl, 0], dtype=np.int32), np.int32)
        size = [n, h - ct - cb, w - cl - cr, c]
        sz = im.const("size", np.asarray(size, dtype=np.int32), np.int32)
        x = im.op("SLICE", [x, begin, sz], size)
        n, h, w, c = x.shape
        top, bottom, left, right = (max(v, 0) for v in (top, bottom, left, right))
    if top == bottom == left == right == 0:
        return x
    pads = im.const("pads", np.asarray([[0, 0], [top, bottom], [left, right], [0, 0]],
                                       dtype=np.int32), np.int32)
    shape = (n, h + top + bottom, w + left + right, c)
    if value == 0.0:
        return im.op("PAD", [x, pads], shape)
    return im.op("PADV2", [x, pads, im.const("pad_value", np.asarray([value], np.float32))],
                 shape)


@_converter("Convolution")
def _convolution(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("convolution_param")
    _check_conv_param(p, lay)
    b = im.bottom()
    x = im.nhwc(b)
    c = x.shape[3]
    kh, kw = _pair(p, "kernel", None, lay)
    sh, sw = _pair(p, "stride", 1, lay)
    ph, pw = _pair(p, "pad", 0, lay)
    dh, dw = _pair(p, "dilation", 1, lay)
    group = int(p.group)
    o = int(p.num_output)
    if min(kh, kw, sh, sw, dh, dw, group, o) <= 0 or c % group or o % group:
        raise ToolkitError(f"invalid parameters: kernel {kh}x{kw}, stride {sh}x{sw}, "
                           f"dilation {dh}x{dw}, group {group}, num_output {o} for {c} "
                           "input channels", where=lay.where,
                           fix=("kernel, stride, dilation, group and num_output must be "
                                "positive, and group must divide both the input channels and "
                                "num_output"))
    w = im.weight(0, (o, c // group, kh, kw), "weights")
    bias = im.weight(1, (o,), "bias") if p.bias_term else np.zeros(o, np.float32)
    same = (_same_pads(x.shape[1], (kh - 1) * dh + 1, sh, ph, ph)
            and _same_pads(x.shape[2], (kw - 1) * dw + 1, sw, pw, pw))
    xp = x if same else _pad(im, x, ph, ph, pw, pw)
    y = _conv_core(im, xp, w, bias, (sh, sw), (dh, dw), group, im.out_name(lay.top[0], True),
                   same=same and (ph or pw) > 0)
    im.set_top(y, True)


@_converter("Deconvolution")
def _deconvolution(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("convolution_param")
    _check_conv_param(p, lay)
    x = im.nhwc(im.bottom())
    n, h, wd, c = x.shape
    kh, kw = _pair(p, "kernel", None, lay)
    sh, sw = _pair(p, "stride", 1, lay)
    ph, pw = _pair(p, "pad", 0, lay)
    dh, dw = _pair(p, "dilation", 1, lay)
    group = int(p.group)
    o = int(p.num_output)
    if min(kh, kw, sh, sw, dh, dw, group, o) <= 0 or c % group or o % group:
        raise ToolkitError(
            "invalid deconvolution parameters", where=lay.where,
            fix=(
                "kernel, stride, dilation, group and num_output must be positive, and group must "
                "divide both the input channels and num_output"
            ),
        )
    og, cg = o // group, c // group
    wd_ = im.weight(0, (c, og, kh, kw), "weights")
    bias = im.weight(1, (o,), "bias") if p.bias_term else np.zeros(o, np.float32)
    # the equivalent convolution: weights [O, C/group, kh, kw], spatially flipped
    w = np.empty((o, cg, kh, kw), np.float32)
    for g in range(group):
        blk = wd_[g * cg:(g + 1) * cg]  # [cg, og, kh, kw]
        w[g * og:(g + 1) * og] = blk.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
    # insert stride-1 zeros between input rows and columns
    if sh > 1:
        r = im.reshape(x, (n, h, 1, wd * c))
        r = im.op("PAD", [r, im.const("pads", np.asarray([[0, 0], [0, 0], [0, sh - 1], [0, 0]],
                                                          np.int32), np.int32)],
                  (n, h, sh, wd * c))
        x = im.reshape(r, (n, h * sh, wd, c))
    if sw > 1:
        hh = x.shape[1]
        r = im.reshape(x, (n * hh, wd, 1, c))
        r = im.op("PAD", [r, im.const("pads", np.asarray([[0, 0], [0, 0], [0, sw - 1], [0, 0]],
                                                          np.int32), np.int32)],
                  (n * hh, wd, sw, c))
        x = im.reshape(r, (n, hh, wd * sw, c))
    eh, ew = (kh - 1) * dh, (kw - 1) * dw
    xp = _pad(im, x, eh - ph, eh - ph - (sh - 1), ew - pw, ew - pw - (sw - 1))
    y = _conv_core(im, xp, w, bias, (1, 1), (dh, dw), group, im.out_name(lay.top[0], True))
    exp_h = sh * (h - 1) + eh + 1 - 2 * ph
    exp_w = sw * (wd - 1) + ew + 1 - 2 * pw
    if (y.shape[1], y.shape[2]) != (exp_h, exp_w):  # pragma: no cover (shape bookkeeping)
        raise ToolkitError(f"deconvolution output {y.shape} != {(exp_h, exp_w)}",
                           where=lay.where,
                           fix=("this is a bug in the deconvolution import: report it with the "
                                "prototxt"))
    im.set_top(y, True)


def _pool_size(size: int, k: int, s: int, p: int, ceil: bool, any_pad: bool) -> int:
    """Caffe's pooled size: rounded up (or down), then one less when the last window would
    start in the padding (checked when either axis has padding, as Caffe does)."""
    if ceil:
        out = -(-(size + 2 * p - k) // s) + 1
    else:
        out = (size + 2 * p - k) // s + 1
    if any_pad and (out - 1) * s >= size + p:
        out -= 1
    return out


@_converter("Pooling")
def _pooling(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("pooling_param")
    x = im.nhwc(im.bottom())
    n, h, w, c = x.shape
    if p.global_pooling:
        if p.HasField("kernel_size") or p.HasField("kernel_h") or p.HasField("kernel_w"):
            raise ToolkitError("global_pooling takes no kernel size", where=lay.where,
                               fix="remove kernel_size or global_pooling")
        kh, kw, sh, sw, ph, pw = h, w, 1, 1, 0, 0
    else:
        kh, kw = _pair(p, "kernel", None, lay)
        sh, sw = _pair(p, "stride", 1, lay)
        ph, pw = _pair(p, "pad", 0, lay)
    if min(kh, kw, sh, sw) <= 0 or ph >= kh or pw >= kw:
        raise ToolkitError(f"invalid pooling: kernel {kh}x{kw}, stride {sh}x{sw}, pad "
                           f"{ph}x{pw}", where=lay.where, fix="the pad must be below the kernel")
    ceil = p.round_mode == cf.caffe_pb2.PoolingParameter.CEIL
    any_pad = ph > 0 or pw > 0
    oh, ow = _pool_size(h, kh, sh, ph, ceil, any_pad), _pool_size(w, kw, sw, pw, ceil, any_pad)
    if oh <= 0 or ow <= 0:
        raise ToolkitError(
            f"kernel {kh}x{kw} does not fit the {h}x{w} input", where=lay.where,
            fix=(
                f"use a kernel no larger than the padded {h}x{w} input, add pad, or set "
                "global_pooling: true"
            ),
        )
    bottom_pad = (oh - 1) * sh + kh - h - ph
    right_pad = (ow - 1) * sw + kw - w - pw
    name = im.out_name(lay.top[0], True)
    fields: dict[str, Any] = dict(padding=1, strideH=sh, strideW=sw, filterHeight=kh,
                                  filterWidth=kw, fusedActivationFunction=0)
    if p.pool == cf.caffe_pb2.PoolingParameter.MAX:
        if (ph or pw or bottom_pad or right_pad) and _same_pads(h, kh, sh, ph, bottom_pad) \
                and _same_pads(w, kw, sw, pw, right_pad):
            # TFLite's SAME max pool skips the padding, as Caffe's does
            fields["padding"] = 0
            xp = x
        else:
            xp = _pad(im, x, ph, bottom_pad, pw, right_pad, _F32_MIN)
        y = im.op("MAX_POOL_2D", [xp], (n, oh, ow, c), name=name, **fields)
    elif p.pool == cf.caffe_pb2.PoolingParameter.AVE:
        xp = _pad(im, x, ph, bottom_pad, pw, right_pad)
        # Caffe divides by the window clipped to the padded input (not to the data)
        if oh * ow > _MAX_DERIVED:
            raise UnsupportedOpError(f"padded AVE pooling to {oh}x{ow} is too large",
                                     where=lay.where,
                                     fix=("pad the input with a separate layer and pool without "
                                          f"pad, or use MAX pooling; the limit is {_MAX_DERIVED} "
                                          "elements"))
        rows = np.array([min(i * sh - ph + kh, h + ph) - (i * sh - ph) for i in range(oh)])
        cols = np.array([min(j * sw - pw + kw, w + pw) - (j * sw - pw) for j in range(ow)])
        corr = (kh * kw) / np.outer(rows, cols).astype(np.float64)
        if np.all(corr == 1.0):
            y = im.op("AVERAGE_POOL_2D", [xp], (n, oh, ow, c), name=name, **fields)
        else:
            a = im.op("AVERAGE_POOL_2D", [xp], (n, oh, ow, c), **fields)
            y = im.binary("MUL", a, im.const("divisor", corr.reshape(oh, ow, 1)), name=name)
    else:
        raise UnsupportedOpError("STOCHASTIC pooling is not supported", where=lay.where,
                                 fix="use MAX or AVE pooling")
    im.set_top(y, True)


@_converter("InnerProduct")
def _inner_product(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("inner_product_param")
    b = im.bottom()
    shape = b.shape
    axis = _norm_axis(int(p.axis), len(shape), lay)
    m = int(np.prod(shape[:axis], dtype=np.int64))
    k = int(np.prod(shape[axis:], dtype=np.int64))
    o = int(p.num_output)
    if o <= 0:
        raise ToolkitError(
            "num_output must be positive", where=lay.where,
            fix="set num_output to the number of outputs (a positive integer)",
        )
    w = im.weight(0, (k, o) if p.transpose else (o, k), "weights")
    if p.transpose:
        w = w.T
    bias = im.weight(1, (o,), "bias") if p.bias_term else np.zeros(o, np.float32)
    if b.nhwc and axis == 1:
        # flatten the NHWC tensor directly: reorder the weights' columns (C,H,W -> H,W,C)
        _, c, hh, ww = shape
        w = w.reshape(o, c, hh, ww).transpose(0, 2, 3, 1).reshape(o, k)
        x = b.tensor
    else:
        x = im.nchw(b)
    if x.shape != (m, k):
        x = im.reshape(x, (m, k))
    out_shape = (*shape[:axis], o)
    direct = out_shape == (m, o)
    y = im.op("FULLY_CONNECTED", [x, im.const("weights", np.ascontiguousarray(w)),
                                  im.const("bias", bias)], (m, o),
              name=im.out_name(lay.top[0], False) if direct else None,
              fusedActivationFunction=0, keepNumDims=False)
    if not direct:
        y = im.reshape(y, out_shape, im.out_name(lay.top[0], False))
    im.set_top(y, False)


def _unary(im: _Importer, type: str, **fields: Any) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    b = im.bottom()
    y = im.op(type, [b.tensor], b.tensor.shape, name=im.out_name(lay.top[0], b.nhwc), **fields)
    im.set_top(y, b.nhwc)


@_converter("ReLU")
def _relu(im: _Importer) -> None:
    assert im.layer is not None
    slope = float(im.layer.param("relu_param").negative_slope)
    if slope == 0.0:
        _unary(im, "RELU")
    else:
        _unary(im, "LEAKY_RELU", alpha=slope)


@_converter("Sigmoid")
def _sigmoid(im: _Importer) -> None:
    _unary(im, "LOGISTIC")


@_converter("TanH")
def _tanh(im: _Importer) -> None:
    _unary(im, "TANH")


@_converter("AbsVal")
def _absval(im: _Importer) -> None:
    _unary(im, "ABS")


@_converter("BNLL")
def _bnll(im: _Importer) -> None:
    # log(1 + exp(x)) computed as relu(x) + log(1 + exp(-|x|)), as Caffe does
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    b = im.bottom()
    x = b.tensor
    r = im.op("RELU", [x], x.shape)
    a = im.op("ABS", [x], x.shape)
    e = im.op("EXP", [im.op("NEG", [a], x.shape)], x.shape)
    lg = im.op("LOG", [im.binary("ADD", e, im.scalar("one", 1.0))], x.shape)
    y = im.binary("ADD", r, lg, name=im.out_name(lay.top[0], b.nhwc))
    im.set_top(y, b.nhwc)


@_converter("ELU")
def _elu(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    alpha = float(lay.param("elu_param").alpha)
    b = im.bottom()
    x = b.tensor
    r = im.op("RELU", [x], x.shape)
    m = im.binary("MINIMUM", x, im.scalar("zero", 0.0))
    e = im.op("EXP", [m], x.shape)
    t = im.binary("SUB", im.binary("MUL", e, im.scalar("alpha", alpha)),
                  im.scalar("alpha", alpha))
    y = im.binary("ADD", r, t, name=im.out_name(lay.top[0], b.nhwc))
    im.set_top(y, b.nhwc)


@_converter("PReLU")
def _prelu(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    b = im.bottom()
    x = b.tensor
    if len(b.shape) < 2:
        raise ToolkitError(
            "PReLU needs an input with a channel axis", where=lay.where,
            fix="give PReLU a bottom of at least 2 dims (N, C, ...)",
        )
    shared = bool(lay.param("prelu_param").channel_shared)
    c = b.shape[1]
    slope = im.weight(0, (1,) if shared else (c,), "slope")
    sc = im.scalar("slope", float(slope[0])) if shared else im.channel_const(b, slope, "slope")
    r = im.op("RELU", [x], x.shape)
    m = im.binary("MINIMUM", x, im.scalar("zero", 0.0))
    y = im.binary("ADD", r, im.binary("MUL", m, sc), name=im.out_name(lay.top[0], b.nhwc))
    im.set_top(y, b.nhwc)


@_converter("Power")
def _power(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("power_param")
    b = im.bottom()
    x = b.tensor
    steps: list[tuple[str, float]] = []
    if p.scale != 1.0:
        steps.append(("MUL", float(p.scale)))
    if p.shift != 0.0:
        steps.append(("ADD", float(p.shift)))
    if p.power != 1.0:
        steps.append(("POW", float(p.power)))
    if not steps:
        im.blobs[lay.top[0]] = _Blob(x, b.nhwc, im.oid)
        im.graph.removed_origins[im.oid] = "Power layer with power 1, scale 1, shift 0: " \
                                           "the identity"
        return
    for i, (kind, v) in enumerate(steps):
        last = i == len(steps) - 1
        x = im.binary(kind, x, im.scalar(kind.lower(), v),
                      name=im.out_name(lay.top[0], b.nhwc) if last else None)
    im.set_top(x, b.nhwc)


@_converter("Softmax")
def _softmax(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    b = im.bottom()
    axis = _norm_axis(int(lay.param("softmax_param").axis), len(b.shape), lay)
    x = b.tensor
    stored_axis = _AXIS_NHWC[axis] if b.nhwc else axis
    name = im.out_name(lay.top[0], b.nhwc)
    last = len(x.shape) - 1
    if stored_axis == last:
        y = im.op("SOFTMAX", [x], x.shape, name=name, beta=1.0)
    else:
        perm = [i for i in range(len(x.shape)) if i != stored_axis] + [stored_axis]
        inv = [perm.index(i) for i in range(len(perm))]
        t = im.transpose(x, perm)
        s = im.op("SOFTMAX", [t], t.shape, beta=1.0)
        y = im.transpose(s, inv, name)
    im.set_top(y, b.nhwc)


@_converter("LRN")
def _lrn(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("lrn_param")
    size = int(p.local_size)
    if size <= 0 or size % 2 == 0:
        raise ToolkitError(
            f"local_size {size} must be odd and positive", where=lay.where,
            fix="set local_size to an odd positive number (the default is 5)",
        )
    x = im.nhwc(im.bottom())
    if p.norm_region == cf.caffe_pb2.LRNParameter.WITHIN_CHANNEL:
        _lrn_within_channel(im, x, size, float(p.alpha), float(p.beta))
        return
    if p.norm_region != cf.caffe_pb2.LRNParameter.ACROSS_CHANNELS:
        raise UnsupportedOpError(f"LRN norm_region {p.norm_region} is not supported",
                                 where=lay.where,
                                 fix=("set norm_region to ACROSS_CHANNELS (the default) or "
                                      "WITHIN_CHANNEL"))
    c = x.shape[3]
    if c * c > _MAX_DERIVED:
        raise UnsupportedOpError(f"LRN over {c} channels is too wide for the channel-window "
                                 "convolution", where=lay.where,
                                 fix=(f"LRN is supported up to {int(_MAX_DERIVED ** 0.5)} "
                                      "channels: reduce the channels or remove the LRN layer"))
    pre = (size - 1) // 2
    band = np.zeros((c, 1, 1, c), np.float32)
    for o in range(c):
        band[o, 0, 0, max(0, o - pre):min(c, o - pre + size)] = float(p.alpha) / size
    sq = im.binary("MUL", x, x)
    s = im.op("CONV_2D", [sq, im.const("window", band),
                          im.const("k", np.full(c, float(p.k), np.float32))], x.shape,
              padding=1, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1,
              fusedActivationFunction=0)
    pw = im.binary("POW", s, im.scalar("neg_beta", -float(p.beta)))
    y = im.binary("MUL", x, pw, name=im.out_name(lay.top[0], True))
    im.set_top(y, True)


def _lrn_within_channel(im: _Importer, x: Tensor, size: int, alpha: float, beta: float
                        ) -> None:
    """Caffe's WITHIN_CHANNEL LRN: ``x * (1 + alpha * mean(x^2 over a size x size window,
    zero-padded))^-beta`` (Caffe ignores ``k`` here; with stride 1 and this padding its
    average always divides by ``size * size``)."""
    lay = im.layer
    assert lay is not None
    pre = (size - 1) // 2
    sq = _pad(im, im.binary("MUL", x, x), pre, pre, pre, pre)
    avg = im.op("AVERAGE_POOL_2D", [sq], x.shape, padding=1, strideH=1, strideW=1,
                filterHeight=size, filterWidth=size, fusedActivationFunction=0)
    s = im.binary("ADD", im.binary("MUL", avg, im.scalar("alpha", alpha)),
                  im.scalar("one", 1.0))
    pw = im.binary("POW", s, im.scalar("neg_beta", -beta))
    im.set_top(im.binary("MUL", x, pw, name=im.out_name(lay.top[0], True)), True)


@_converter("BatchNorm")
def _batch_norm(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("batch_norm_param")
    if p.HasField("use_global_stats") and not p.use_global_stats:
        raise UnsupportedOpError("BatchNorm with use_global_stats: false normalizes by the "
                                 "statistics of the batch", where=lay.where,
                                 fix="remove use_global_stats (inference uses global stats)")
    b = im.bottom()
    if len(b.shape) < 2:
        raise ToolkitError(
            "BatchNorm needs an input with a channel axis", where=lay.where,
            fix="give BatchNorm a bottom of at least 2 dims (N, C, ...)",
        )
    c = b.shape[1]
    mean = im.weight(0, (c,), "mean").astype(np.float64)
    var = im.weight(1, (c,), "variance").astype(np.float64)
    sf = float(im.weight(2, (1,), "moving average factor")[0])
    factor = 0.0 if sf == 0.0 else 1.0 / sf
    mean, var = mean * factor, var * factor
    if np.any(var + p.eps < 0):
        raise ToolkitError(
            "variance + eps is negative", where=lay.where,
            fix=(
                "the variance blob or the moving average factor (third blob) is negative: the "
                "weights file is damaged; save the .caffemodel again from the trained net"
            ),
        )
    scale = (1.0 / np.sqrt(var + float(np.float32(p.eps)))).astype(np.float32)
    shift = (-mean * scale).astype(np.float32)
    m = im.binary("MUL", b.tensor, im.channel_const(b, scale, "scale"))
    y = im.binary("ADD", m, im.channel_const(b, shift, "shift"),
                  name=im.out_name(lay.top[0], b.nhwc))
    im.set_top(y, b.nhwc)


@_converter("Scale")
def _scale(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    if len(lay.bottom) not in (1, 2):
        raise ToolkitError(f"Scale takes one or two bottoms, got {len(lay.bottom)}",
                           where=lay.where,
                           fix=("give Scale one bottom (with the scale in blobs) or two (the "
                                "second is the scale)"))
    p = lay.param("scale_param")
    b = im.bottom()
    rank = len(b.shape)
    axis = _norm_axis(int(p.axis), rank, lay)
    name = im.out_name(lay.top[0], b.nhwc)
    if len(lay.bottom) == 2:  # the scale is the second bottom, over axes axis..
        s_blob = im.bottom(1)
        pshape = s_blob.shape
        if tuple(b.shape[axis:axis + len(pshape)]) != tuple(pshape):
            raise ToolkitError(f"scale shape {list(pshape)} does not match input axes "
                               f"{axis}.. of {list(b.shape)}", where=lay.where,
                               fix=(f"give the scale blob the shape of input axes {axis}.. (set "
                                    "axis and num_axes in scale_param to select them)"))
        full = [1] * axis + list(pshape) + [1] * (rank - axis - len(pshape))
        factor = im.reshape(im.nchw(s_blob), full)
        if b.nhwc:
            factor = im.transpose(factor, _TO_NHWC)
        y = im.binary("MUL", b.tensor, factor, name=None if p.bias_term else name)
        bias_index = 0
    else:
        end = rank if p.num_axes == -1 else axis + int(p.num_axes)
        if not axis <= end <= rank:
            raise ToolkitError(f"num_axes {p.num_axes} does not fit a {rank}-D blob",
                               where=lay.where,
                               fix=(f"set num_axes so that axis + num_axes is at most {rank} (-1 "
                                    "means to the last axis)"))
        pshape = b.shape[axis:end]
        scale = im.weight(0, pshape, "scale")
        y = im.binary("MUL", b.tensor, im.channel_const(b, scale, "scale", axis),
                      name=None if p.bias_term else name)
        bias_index = 1
    if p.bias_term:
        bias = im.weight(bias_index, pshape, "bias")
        y = im.binary("ADD", y, im.channel_const(b, bias, "bias", axis), name=name)
    im.set_top(y, b.nhwc)


def _same_layout(im: _Importer, blobs: list[_Blob]) -> tuple[list[Tensor], bool]:
    if any(b.nhwc for b in blobs) and all(len(b.shape) == 4 for b in blobs):
        return [im.nhwc(b) for b in blobs], True
    return [im.nchw(b) for b in blobs], False


@_converter("Eltwise")
def _eltwise(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("eltwise_param")
    blobs = [im.bottom(i) for i in range(len(lay.bottom))]
    if len(blobs) < 2:
        raise ToolkitError(
            "Eltwise needs at least two bottoms", where=lay.where,
            fix="give Eltwise two or more `bottom:` entries, or remove the layer",
        )
    if any(b.shape != blobs[0].shape for b in blobs):
        raise ToolkitError(f"bottom shapes differ: {[list(b.shape) for b in blobs]}",
                           where=lay.where,
                           fix=("Eltwise needs bottoms of one shape: reshape the bottoms first, "
                                "or use Scale for a per-channel product"))
    xs, nhwc = _same_layout(im, blobs)
    coeff = [float(c) for c in p.coeff]
    op = int(p.operation)
    E = cf.caffe_pb2.EltwiseParameter
    if coeff and (op != E.SUM or len(coeff) != len(xs)):
        raise ToolkitError(
            "coeff is for SUM only, one per bottom", where=lay.where,
            fix="remove coeff, or use operation: SUM with one coeff per bottom",
        )
    name = im.out_name(lay.top[0], nhwc)
    if op == E.SUM:
        coeff = coeff or [1.0] * len(xs)
        terms = [x if c == 1.0 else im.binary("MUL", x, im.scalar("coeff", c))
                 for x, c in zip(xs, coeff)]
        acc = terms[0]
        for i, t in enumerate(terms[1:], 1):
            acc = im.binary("ADD", acc, t, name=name if i == len(terms) - 1 else None)
    elif op in (E.PROD, E.MAX):
        kind = "MUL" if op == E.PROD else "MAXIMUM"
        acc = xs[0]
        for i, t in enumerate(xs[1:], 1):
            acc = im.binary(kind, acc, t, name=name if i == len(xs) - 1 else None)
    else:
        raise UnsupportedOpError(
            f"Eltwise operation {op} is not supported", where=lay.where,
            fix="set operation to PROD, SUM or MAX",
        )
    im.set_top(acc, nhwc)


@_converter("Concat")
def _concat(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("concat_param")
    blobs = [im.bottom(i) for i in range(len(lay.bottom))]
    rank = len(blobs[0].shape)
    axis_v = int(p.concat_dim) if p.HasField("concat_dim") and not p.HasField("axis") \
        else int(p.axis)
    axis = _norm_axis(axis_v, rank, lay)
    for b in blobs:
        if len(b.shape) != rank or any(d != e for i, (d, e) in
                                       enumerate(zip(b.shape, blobs[0].shape)) if i != axis):
            raise ToolkitError(f"bottom shapes {[list(b.shape) for b in blobs]} do not "
                               f"concatenate along axis {axis}", where=lay.where,
                               fix=("all bottoms must have the same rank and equal sizes except "
                                    f"along axis {axis}: check concat_dim/axis and the bottoms' "
                                    "shapes"))
    xs, nhwc = _same_layout(im, blobs)
    ax = _AXIS_NHWC[axis] if nhwc else axis
    shape = list(xs[0].shape)
    shape[ax] = sum(x.shape[ax] for x in xs)
    if len(xs) == 1:
        y = im.reshape(xs[0], shape, im.out_name(lay.top[0], nhwc))
    else:
        y = im.op("CONCATENATION", xs, shape, name=im.out_name(lay.top[0], nhwc), axis=ax,
                  fusedActivationFunction=0)
    im.set_top(y, nhwc)


@_converter("Slice")
def _slice(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    p = lay.param("slice_param")
    b = im.bottom()
    rank = len(b.shape)
    axis_v = int(p.slice_dim) if p.HasField("slice_dim") and not p.HasField("axis") \
        else int(p.axis)
    axis = _norm_axis(axis_v, rank, lay)
    dim = b.shape[axis]
    n = len(lay.top)
    points = [int(v) for v in p.slice_point]
    if points:
        if len(points) != n - 1 or points != sorted(points) or points[0] <= 0 \
                or points[-1] >= dim:
            raise ToolkitError(f"slice_point {points} does not cut {dim} into {n} parts",
                               where=lay.where,
                               fix=(f"give {n - 1} increasing slice_point values strictly "
                                    f"between 0 and {dim} (one fewer than the tops)"))
        sizes = [e - s for s, e in zip([0, *points], [*points, dim])]
    else:
        if n == 0 or dim % n:
            raise ToolkitError(f"{dim} cannot be sliced into {n} equal parts",
                               where=lay.where, fix="give slice_point")
        sizes = [dim // n] * n
    x = b.tensor
    ax = _AXIS_NHWC[axis] if b.nhwc else axis
    shapes = []
    for s in sizes:
        sh = list(x.shape)
        sh[ax] = s
        shapes.append(sh)
    if n == 1:
        outs = [im.reshape(x, shapes[0], im.out_name(lay.top[0], b.nhwc))]
    else:
        outs = im.multi_op("SPLIT_V", [x, im.const("sizes", np.asarray(sizes, np.int32),
                                                   np.int32),
                                       im.const("axis", np.asarray(ax, np.int32), np.int32)],
                           shapes, [im.out_name(t, b.nhwc) for t in lay.top], numSplits=n)
    for i, t in enumerate(outs):
        im.set_top(t, b.nhwc, i)


def _alias(im: _Importer, reason: str) -> None:
    lay = im.layer
    assert lay is not None
    b = im.bottom()
    for top in lay.top:
        im.blobs[top] = _Blob(b.tensor, b.nhwc, im.oid)
    im.graph.removed_origins[im.oid] = reason


@_converter("Split")
def _split(im: _Importer) -> None:
    _alias(im, "Split layer: its tops are copies of its bottom, no op")


@_converter("Dropout")
def _dropout(im: _Importer) -> None:
    assert im.layer is not None
    im.need_tops(1)
    _alias(im, "Dropout layer: the identity at inference")


@_converter("Flatten")
def _flatten(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("flatten_param")
    b = im.bottom()
    shape = b.shape
    a = _norm_axis(int(p.axis), len(shape), lay)
    e = _norm_axis(int(p.end_axis), len(shape), lay, "end_axis")
    if e < a:
        raise ToolkitError(
            f"end_axis {p.end_axis} is before axis {p.axis}", where=lay.where,
            fix="set end_axis to axis or a later axis (-1 is the last)",
        )
    new = (*shape[:a], int(np.prod(shape[a:e + 1], dtype=np.int64)), *shape[e + 1:])
    y = im.reshape(im.nchw(b), new, im.out_name(lay.top[0], False))
    im.set_top(y, False)


@_converter("Reshape")
def _reshape(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("reshape_param")
    b = im.bottom()
    shape = b.shape
    rank = len(shape)
    start = int(p.axis) + rank + 1 if p.axis < 0 else int(p.axis)
    end = rank if p.num_axes == -1 else start + int(p.num_axes)
    if not 0 <= start <= end <= rank:
        raise ToolkitError(f"axis {p.axis}, num_axes {p.num_axes} do not fit a {rank}-D blob",
                           where=lay.where,
                           fix=("give axis and num_axes so that axis..axis+num_axes lies within "
                                f"the {rank} axes (num_axes: -1 means to the end)"))
    spec = [int(d) for d in p.shape.dim]
    mid: list[int] = []
    for i, d in enumerate(spec):
        if d == 0:
            if start + i >= rank:
                raise ToolkitError(f"dim {i} copies an input axis that does not exist",
                                   where=lay.where,
                                   fix=("dim: 0 copies an input axis: use it only where the "
                                        "input has that axis, or give the size"))
            mid.append(shape[start + i])
        elif d == -1 or d > 0:
            mid.append(d)
        else:
            raise ToolkitError(
                f"invalid reshape dim {d}", where=lay.where,
                fix="give each dim as a positive size, 0 (copy the input's) or -1 (infer)",
            )
    new = [*shape[:start], *mid, *shape[end:]]
    total = int(np.prod(shape, dtype=np.int64))
    if new.count(-1) > 1:
        raise ToolkitError(
            "more than one -1 in the shape", where=lay.where,
            fix="give at most one -1 (inferred) dim in reshape_param.shape",
        )
    if -1 in new:
        known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise ToolkitError(f"cannot infer -1 in {spec} for {total} elements",
                               where=lay.where,
                               fix=(f"the known dims must divide {total}: fix the sizes in "
                                    "reshape_param.shape"))
        new[new.index(-1)] = total // known
    if int(np.prod(new, dtype=np.int64)) != total:
        raise ToolkitError(
            f"shape {new} does not hold {total} elements", where=lay.where,
            fix=f"the dims' product must be {total}: fix the sizes in reshape_param.shape",
        )
    y = im.reshape(im.nchw(b), new, im.out_name(lay.top[0], False))
    im.set_top(y, False)


@_converter("Permute")
def _permute(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    b = im.bottom()
    rank = len(b.shape)
    order = [int(o) for o in lay.param("permute_param").order]
    if any(o >= rank for o in order) or len(set(order)) != len(order):
        raise ToolkitError(f"order {order} is not a permutation of {rank} axes",
                           where=lay.where,
                           fix=f"give order as a permutation of 0..{rank - 1}, each axis once")
    order += [i for i in range(rank) if i not in order]
    y = im.transpose(im.nchw(b), order, im.out_name(lay.top[0], False))
    im.set_top(y, False)


@_converter("ArgMax")
def _argmax(im: _Importer) -> None:
    lay = im.layer
    assert lay is not None
    im.need_tops(1)
    p = lay.param("argmax_param")
    if p.top_k != 1 or p.out_max_val:
        raise UnsupportedOpError("ArgMax supports top_k: 1 without out_max_val",
                                 where=lay.where,
                                 fix=("set top_k: 1 and out_max_val: false (the default), or "
                                      "compute the top-k after the toolkit's graph"))
    b = im.bottom()
    shape = b.shape
    if p.HasField("axis"):
        axis = _norm_axis(int(p.axis), len(shape), lay)
        x = b.tensor
        ax = _AXIS_NHWC[axis] if b.nhwc else axis
        out_shape = [d for i, d in enumerate(x.shape) if i != ax]
        nhwc = b.nhwc
        keep = list(x.shape)
        keep[ax] = 1
    else:  # over all but the first axis: output [N, 1, 1] (one more 1 per axis beyond 3)
        x = im.nchw(b)
        n = shape[0]
        x = im.reshape(x, (n, int(np.prod(shape[1:], dtype=np.int64))))
        ax, out_shape, nhwc = 1, [n], False
        keep = [n] + [1] * (max(len(shape), 3) - 1)
    idx = im.op("ARG_MAX", [x, im.const("axis", np.asarray([ax], np.int32), np.int32)],
                out_shape, dtype=np.int32, outputType=2)
    f = im.op("CAST", [idx], out_shape, inDataType=2, outDataType=0)
    y = im.reshape(f, keep, im.out_name(lay.top[0], nhwc))
    im.set_top(y, nhwc)


SUPPORTED_LAYERS: tuple[str, ...] = tuple(sorted(_CONVERTERS))
"""Caffe layer types the importer converts."""


