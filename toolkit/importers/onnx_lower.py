"""Lower an ONNX model (as :func:`~toolkit.importers.onnx.load_onnx` reads it) into the
toolkit's IR op set, so that the reference runtime, the compiler, the partitioner, the costs
and the native generator take it.

    lowered = lower_onnx(load_onnx("cnn.onnx"), shapes={"input": (1, 3, 224, 224)})

Every lowered op carries as origins the ONNX node(s) it came from: node ``i`` of the main
graph keeps origin id ``i`` of the ONNX model, so tables of both models agree, and
``lowered.origins[i]`` is the node's :class:`~toolkit.ir.Origin` (its name, its layers, format
``"onnx"``). Layers are read from the ONNX model's records (:meth:`Model.origin`) when it has
them, else from the layers the importer found (``op.extra["layer"]``): naming is not done here.

**Layout** (see ``docs/onnx.md``): graph inputs and outputs keep ONNX's order. Inside, a 4-D
value that a convolution, pooling or resize writes stays in the IR's NHWC order; element-wise
ops, activations, concatenations and reductions keep it NHWC (their constants and axes are
permuted once, at import). A TRANSPOSE is made only where an op needs ONNX's order (Reshape,
Flatten, Transpose, MatMul ...) or NHWC (the first Conv after such an op), with the origin of
the node that needs it. A compiled NCHW CNN has no transpose pair left: the compiler's
``cancel_transposes`` pass removes any pair that still composes to the identity.

**Shapes**: free dimensions take the sizes of ``shapes`` (else the graph input's static
shape); ``Shape``, ``Size`` and every node whose inputs are all constants are evaluated at
import with ``onnx.reference`` (the shape arithmetic that follows ``Shape`` folds away).

**Nodes without a lowering** (an op type, an attribute or an opset the importer does not
handle, see :data:`LOWERED_OPS`) become one ``CUSTOM`` op ``ONNX_REFERENCE`` each, which the
reference runtime runs with ``onnx.reference`` (``op.extra["reference_only"]`` says why);
compile, partition and codegen refuse a model holding one, naming the node and the reason.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.builder import options_for as _builder_options
from toolkit.errors import ToolkitError, UnsupportedOpError
from toolkit.ir import Graph, Model, Op, Origin, Quantization, Tensor
from toolkit.schema import OPTIONS_CLASS

__all__ = ["lower_onnx", "LOWERED_OPS", "REFERENCE_OP", "OPSET_RANGE", "onnx_origin_records",
           "reference_only_ops", "check_no_reference_ops"]

#: ``custom_code`` of the CUSTOM op that runs one ONNX node with ``onnx.reference``.
REFERENCE_OP = "ONNX_REFERENCE"
#: The ai.onnx opsets the lowering knows (inclusive); a node of another opset runs
#: reference-only.
OPSET_RANGE = (7, 21)
_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)
_AXIS_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # ONNX (NCHW) axis -> axis of the NHWC tensor
_F32_MIN = float(np.finfo(np.float32).min)
_FOLD_MAX = 1 << 22  # elements: larger constant results stay ops

_OPTIONS = {
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "MIRROR_PAD": "MirrorPadOptions", "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions",
    "PADV2": "PadV2Options", "SPLIT_V": "SplitVOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "TILE": "TileOptions", "SELECT_V2": "SelectV2Options",
    "BROADCAST_TO": None, "LOG_SOFTMAX": "LogSoftmaxOptions", "FILL": "FillOptions",
    "RANGE": "RangeOptions",
}


_KEEPS_QUANT = frozenset({"RESHAPE", "TRANSPOSE", "STRIDED_SLICE", "SLICE", "PAD", "GATHER",
                          "MAX_POOL_2D", "SQUEEZE", "EXPAND_DIMS", "BROADCAST_TO", "TILE"})


class _NoLoweringError(Exception):
    """A node the lowering does not handle: it runs reference-only (the message says why)."""


def _options(op_type: str, **fields: Any) -> Any:
    if op_type in _OPTIONS:
        name = _OPTIONS[op_type]
        if name is None or name not in OPTIONS_CLASS:
            return None
        obj = OPTIONS_CLASS[name]()
        for k, v in fields.items():
            setattr(obj, k, v)
        return obj
    return _builder_options(op_type, **fields)


@dataclass
class _V:
    """An ONNX value: its IR tensor (``nhwc``: a 4-D value held in NHWC order) and, for a
    constant, its data in ONNX order."""

    t: Tensor | None
    nhwc: bool = False
    const: np.ndarray | None = None
    shape: tuple[int, ...] = ()
    dtype: Any = np.float32


def onnx_origin_records(model: Model) -> dict[int, Origin]:
    """The :class:`~toolkit.ir.Origin` of every node of an ONNX model of ``load_onnx``.

    The model's own records when it has them (``model.origins``), else one per node made
    from the node name and the layer the importer found (``op.extra["layer"]``).
    """
    exporter = _exporter(model)
    out: dict[int, Origin] = {}
    for g in model.subgraphs:
        for op in g.ops:
            for oid in op.origins:
                if oid in model.origins:
                    out[oid] = model.origins[oid]
                    continue
                layer = op.extra.get("layer") or ""
                out[oid] = Origin(oid, model.source_table.get(oid, op.extra.get("node_name", "")),
                                  (layer,) if layer else (), "onnx", exporter,
                                  str(op.extra.get("layer_from", "")))
    return out


def _exporter(model: Model) -> str:
    producer = str(model.extra.get("producer") or "").lower()
    if "pytorch" in producer:
        dyn = any("pkg.torch.onnx.name_scopes" in (op.extra.get("metadata") or {})
                  for op in model.graph.ops)
        return "pytorch_dynamo" if dyn else "pytorch"
    for name in ("tf2onnx", "paddle2onnx", "onnxruntime", "skl2onnx", "keras2onnx"):
        if name in producer:
            return name
    return producer


# ------------------------------------------------------------------- onnx.reference helpers
def _onnx() -> Any:
    try:
        import onnx
    except ImportError as e:  # pragma: no cover (load_onnx needs it too)
        raise ToolkitError("lowering an ONNX model needs the onnx package",
                           fix="pip install 'toolkit[onnx]'") from e
    return onnx


def node_proto(op: Op) -> Any:
    """The ``NodeProto`` of an ONNX-typed op of :func:`load_onnx` (attributes re-encoded)."""
    onnx = _onnx()
    from onnx import helper, numpy_helper

    attrs: dict[str, Any] = {}
    for k, v in (op.extra.get("attributes") or {}).items():
        if isinstance(v, np.ndarray):
            attrs[k] = numpy_helper.from_array(v)
        else:
            attrs[k] = v
    ins = [t.name if t is not None else "" for t in op.inputs]
    outs = [t.name for t in op.outputs]
    del onnx
    return helper.make_node(op.type, ins, outs, name=op.extra.get("node_name") or None,
                            domain=op.extra.get("domain") or None, **attrs)


def evaluate_node(op: Op, args: Sequence[np.ndarray | None], opsets: Mapping[str, int],
                  proto: Any = None, outer: Sequence[str] = ()) -> list[np.ndarray]:
    """Run one ONNX-typed op with ``onnx.reference`` on ``args``; return its outputs.

    ``proto``: the node's own NodeProto (for a node with subgraphs), whose bodies read the
    enclosing values ``outer`` (their arrays follow the node's inputs in ``args``)."""
    onnx = _onnx()
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    node = node_proto(op) if proto is None else proto
    feeds: dict[str, np.ndarray] = {}
    inputs = []
    names = [t.name if t is not None else "" for t in op.inputs] + list(outer)
    for name, a in zip(names, args, strict=False):
        if not name or a is None:
            continue
        if name not in feeds:
            feeds[name] = a
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), None))
    outputs = [helper.make_value_info(t.name, onnx.TypeProto()) for t in op.outputs]
    graph = helper.make_graph([node], "node", inputs, outputs)
    ops = [helper.make_opsetid(k, v) for k, v in opsets.items()]
    m = helper.make_model(graph, opset_imports=ops)
    m.ir_version = max(m.ir_version, 8)
    try:
        ev = ReferenceEvaluator(m)
        res = ev.run(None, feeds)
    except RuntimeError as e:
        # onnx.reference lacks some older versions of an op (DequantizeLinear before 19):
        # the newest version it has, when the op's schema did not change meaning for these
        # inputs, is what the node computes
        if "No implementation for operator" not in str(e):
            raise
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = max(o.version, 21)
        res = ReferenceEvaluator(m).run(None, feeds)
    return [np.asarray(r) for r in res]


# ------------------------------------------------------------------------------ the lowering
class _Lowerer:
    def __init__(self, src: Model, shapes: Mapping[str, Sequence[int]] | None) -> None:
        self.src = src
        self.shapes = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
        self.graph = Graph(src.graph.name or "main")
        self.model = Model([self.graph], format="circle",
                           description=f"lowered from ONNX ({src.description or 'model'})")
        self.model.path = src.path
        self.vals: dict[str, _V] = {}
        self.used: set[str] = set()
        self.op: Op | None = None
        self.origins: tuple[int, ...] = ()
        self.opsets: dict[str, int] = dict(src.extra.get("opsets") or {"": 17})
        self.opset = int(self.opsets.get("", self.opsets.get("ai.onnx", 17)))
        self.reference_only: list[dict[str, Any]] = []
        self.skip: dict[Op, None] = {}
        self.group: dict[Op, tuple[list[Op], Callable[[], None]]] = {}

    # ---------------------------------------------------------------- names and tensors
    def name(self, base: str) -> str:
        cand, i = base or "t", 0
        while cand in self.used:
            i += 1
            cand = f"{base}_{i}"
        self.used.add(cand)
        return cand

    @property
    def where(self) -> str:
        op = self.op
        if op is None:
            return "ONNX model"
        return f"node {op.extra.get('node_name') or op.name!r} ({op.type})"

    def attr(self, key: str, default: Any = None) -> Any:
        assert self.op is not None
        return (self.op.extra.get("attributes") or {}).get(key, default)

    def const(self, data: Any, dtype: Any = None, suffix: str = "const") -> Tensor:
        arr = np.array(data, dtype=dtype, order="C")  # keeps a 0-d array 0-d
        base = self.op.name if self.op is not None else "const"
        return self.graph.add_tensor(self.name(f"{base}/{suffix}"), arr.shape, arr.dtype,
                                     data=arr)

    def i32(self, values: Sequence[int] | np.ndarray, suffix: str = "param") -> Tensor:
        return self.const(np.asarray(values, dtype=np.int32), np.int32, suffix)

    def emit(self, type: str, inputs: Sequence[Tensor | None], shape: Sequence[int],
             dtype: Any = np.float32, *, name: str | None = None, custom_code: str | None = None,
             custom_options: bytes | None = None, quant: Quantization | None = None,
             **fields: Any) -> Tensor:
        """Add an op with the current node's origins; return its single output."""
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ToolkitError(f"output shape {list(shape)} of {type} is invalid",
                               where=self.where, fix="check the node's attributes and input "
                                                     "shapes")
        base = self.op.outputs[0].name if self.op is not None and self.op.outputs else type
        first = inputs[0] if inputs else None
        if (quant is None and type in _KEEPS_QUANT and first is not None and first.quant
                is not None and not first.quant.per_channel and np.dtype(dtype) == first.dtype):
            quant = first.quant  # data movement of a quantized tensor keeps its parameters
        out = self.graph.add_tensor(name or self.name(f"{base}/{type.lower()}"), shape, dtype,
                                    quant=quant)
        opts = None if custom_code else _options(type, **fields)
        kw: dict[str, Any] = {}
        if custom_code:
            kw = {"custom_code": custom_code, "custom_options": custom_options}
        self.graph.add_op(type, inputs, [out], opts, origins=self.origins, **kw)
        return out

    # ---------------------------------------------------------------------------- values
    def val(self, t: Tensor | None) -> _V | None:
        if t is None:
            return None
        v = self.vals.get(t.name)
        if v is None:
            raise ToolkitError(f"value {t.name!r} is read before it is written",
                               where=self.where, fix="the graph is not topologically sorted")
        return v

    def inp(self, i: int) -> _V | None:
        assert self.op is not None
        return self.val(self.op.inputs[i]) if i < len(self.op.inputs) else None

    def need(self, i: int) -> _V:
        v = self.inp(i)
        if v is None:
            raise ToolkitError(f"input {i} is missing", where=self.where,
                               fix="give the node its required inputs")
        return v

    def const_of(self, i: int, what: str) -> np.ndarray | None:
        v = self.inp(i)
        if v is None:
            return None
        if v.const is None:
            raise _NoLoweringError(f"its {what} (input {i}) is computed at run time")
        return v.const

    def tensor_of(self, v: _V) -> Tensor:
        """The value as a tensor in ONNX order (a constant is materialised)."""
        if v.const is not None and v.t is None:
            v.t = self.const(v.const, v.const.dtype, "value")
            v.nhwc = False
        assert v.t is not None
        if v.nhwc:
            key = ("nchw", id(v.t))
            cached = self._conv_cache.get(key)
            if cached is None:
                cached = self.emit("TRANSPOSE", [v.t, self.i32(_TO_NCHW, "perm")],
                                   [v.t.shape[i] for i in _TO_NCHW], v.t.dtype,
                                   name=self.name(v.t.name + "/nchw"))
                self._conv_cache[key] = cached
            return cached
        return v.t

    def nhwc_of(self, v: _V) -> Tensor:
        """The value (4-D) as an NHWC tensor."""
        if len(v.shape) != 4:
            raise _NoLoweringError(f"a {len(v.shape)}-D input where 4-D (N, C, H, W) is handled")
        if v.const is not None and v.t is None:
            return self.const(np.transpose(v.const, _TO_NHWC), v.const.dtype, "value")
        assert v.t is not None
        if v.nhwc:
            return v.t
        key = ("nhwc", id(v.t))
        cached = self._conv_cache.get(key)
        if cached is None:
            cached = self.emit("TRANSPOSE", [v.t, self.i32(_TO_NHWC, "perm")],
                               [v.t.shape[i] for i in _TO_NHWC], v.t.dtype,
                               name=self.name(v.t.name + "/nhwc"))
            self._conv_cache[key] = cached
        return cached

    def set(self, i: int, t: Tensor, nhwc: bool = False) -> None:
        assert self.op is not None
        out = self.op.outputs[i]
        shape = tuple(t.shape[j] for j in _TO_NCHW) if nhwc else tuple(t.shape)
        self.vals[out.name] = _V(t, nhwc, None, shape, t.dtype)

    def set_const(self, i: int, data: np.ndarray) -> None:
        assert self.op is not None
        arr = np.asarray(data)
        self.vals[self.op.outputs[i].name] = _V(None, False, arr, tuple(arr.shape), arr.dtype)

    # ------------------------------------------------------------------------------ run
    def run(self) -> Model:
        self._conv_cache: dict[tuple[str, int], Tensor] = {}
        src = self.src
        g0 = src.graph
        self.model.source_table = dict(src.source_table)
        self.model.origins = onnx_origin_records(src)
        for t in g0.tensors:
            if t.is_const:
                arr = np.asarray(t.data)
                self.vals[t.name] = _V(None, False, arr, tuple(arr.shape), arr.dtype)
        for t in g0.inputs:
            self._graph_input(t)
        _plan_fusions(self, g0)
        for op in g0.ops:
            self.op, self.origins = op, tuple(sorted(op.origins))
            if op in self.skip:
                continue
            if op in self.group:
                members, build = self.group[op]
                self.origins = tuple(sorted(set().union(*(m.origins for m in members))))
                build()
                continue
            self._lower_node(op)
        self.op = None
        for t in g0.outputs:
            self._graph_output(t)
        live = self.graph.live_origins()
        for op in g0.ops:
            for oid in op.origins:
                if oid not in live:
                    self.graph.removed_origins.setdefault(
                        oid, "evaluated at import (constant inputs or static shapes)"
                        if op.type not in ("Identity", "Dropout") else "identity")
        types = {oid: op.type for op in g0.ops for oid in op.origins}
        for op in self.graph.ops:
            op.extra["onnx_op_types"] = tuple(sorted({types[o] for o in op.origins
                                                      if o in types}))
        self.model.extra = {"lowered_from": "onnx", "onnx_opsets": dict(self.opsets),
                            "reference_only": list(self.reference_only),
                            "producer": src.extra.get("producer", "")}
        try:
            self.model.verify()
        except ToolkitError as e:  # pragma: no cover (a bug in a converter)
            raise ToolkitError(f"the lowered graph is invalid: {e.what}",
                               where=src.path or "ONNX model",
                               fix="run the model with runtime='onnxruntime' and report this "
                                   "model") from None
        return self.model

    def _graph_input(self, t: Tensor) -> None:
        sig = t.shape_signature
        given = self.shapes.get(t.name)
        if given is not None:
            if len(given) != len(t.shape) or any(
                    s >= 0 and s != d for s, d in zip(sig or t.shape, given, strict=False)):
                raise ToolkitError(f"input {t.name!r} of shape {list(sig or t.shape)} cannot "
                                   f"take shape {list(given)}", where="ONNX model inputs",
                                   fix="give the free dimensions only; keep the fixed ones")
            shape = given
        elif not t.has_rank:
            raise ToolkitError(f"the shape of input {t.name!r} is not in the file",
                               where="ONNX model inputs",
                               fix=f"give it: shapes={{{t.name!r}: (...)}} or run the model "
                                   "with inputs")
        elif sig is not None and any(d < 0 for d in sig):
            raise ToolkitError(f"input {t.name!r} has free dimensions {list(sig)}",
                               where="ONNX model inputs",
                               fix=f"give its shape: shapes={{{t.name!r}: (...)}} or run it "
                                   "with inputs of that shape")
        else:
            shape = t.shape
        x = self.graph.add_tensor(self.name(t.name), shape, type_code=t.type_code)
        self.graph.inputs.append(x)
        self.vals[t.name] = _V(x, False, None, tuple(shape), x.dtype)

    def _graph_output(self, t: Tensor) -> None:
        v = self.vals.get(t.name)
        if v is None:  # pragma: no cover (verify() of the ONNX model prevents it)
            raise ToolkitError(f"output {t.name!r} is never written", where="ONNX model",
                               fix="check the exported graph")
        producer = t.producer
        self.op = producer
        self.origins = tuple(sorted(producer.origins)) if producer is not None else ()
        if v.t is None or (v.const is not None and producer is None):
            if not self.origins:
                raise _unsupported_model(f"output {t.name!r} is a constant of the file")
            x = self.const(v.const, v.const.dtype if v.const is not None else None, "value")
        else:
            x = self.tensor_of(v)
        if x.name != t.name and t.name not in self.used and x.producer is not None and not (
                x in self.graph.inputs or x in self.graph.outputs):
            self.graph._names = None
            x.name = t.name
            self.used.add(t.name)
        elif x.name != t.name or x in self.graph.outputs:
            x = self.emit("RESHAPE", [x, self.i32(x.shape, "shape")], x.shape, x.dtype,
                          name=self.name(t.name), newShape=list(x.shape))
        self.graph.outputs.append(x)

    # ---------------------------------------------------------------------- one node
    def _lower_node(self, op: Op) -> None:
        domain = op.extra.get("domain") or ""
        ins = [self.val(t) for t in op.inputs]
        if op.type == "If" and domain in ("", "ai.onnx") and op.extra.get("subgraphs"):
            self._if(op, ins)
            return
        if domain in ("", "ai.onnx") and _foldable(op, ins):
            self._fold(op, ins)
            return
        reason = ""
        if domain in ("", "ai.onnx"):
            self._check_attributes(op)
        if domain not in ("", "ai.onnx"):
            reason = f"domain {domain!r} is not lowered"
        elif not OPSET_RANGE[0] <= self.opset <= OPSET_RANGE[1]:
            reason = (f"opset {self.opset} is outside the lowered opsets {OPSET_RANGE[0]}-"
                      f"{OPSET_RANGE[1]}")
        elif op.type not in LOWERERS:
            reason = f"op type {op.type} (opset {self.opset}) has no lowering"
        if not reason:
            mark, logged = len(self.graph._ops), len(self.graph.rewrites)
            try:
                LOWERERS[op.type](self)
                return
            except _NoLoweringError as e:
                reason = f"{op.type} (opset {self.opset}): {e}"
                self._undo(mark, logged)
        self._reference_op(op, ins, reason)

    def _node_with_subgraphs(self, op: Op, reason: str) -> Any:
        """The file's own NodeProto of a main-graph node with subgraphs (bodies included)."""
        onnx = _onnx()
        if not self.src.path or op.graph is not self.src.graph:
            raise _unsupported_node(self, op, reason + "; a node with subgraphs runs "
                                                       "reference-only only from a file")
        proto = onnx.load(self.src.path, load_external_data=False)
        return proto.graph.node[int(op.extra["node_index"])]

    def _check_attributes(self, op: Op) -> None:
        """Refuse an attribute the node's ONNX schema (at the model's opset) does not have."""
        from onnx import defs

        try:
            schema = defs.get_schema(op.type, self.opset, "")
        except Exception:  # no schema at this opset: the op type is not known there
            raise ToolkitError(
                f"node {op.extra.get('node_name') or op.name!r}: op {op.type} does not exist "
                f"at opset {self.opset}", where=self.src.path or "ONNX model",
                fix="export the model at an opset where the op exists, or run it with "
                    "tk.run(model, inputs, runtime='onnxruntime')") from None
        unknown = sorted(set(op.extra.get("attributes") or {}) - set(schema.attributes))
        if unknown:
            raise ToolkitError(
                f"node {op.extra.get('node_name') or op.name!r} ({op.type}, opset {self.opset}) "
                f"has attribute(s) {unknown} that {op.type} does not have at that opset",
                where=self.src.path or "ONNX model",
                fix="remove them or export the model again; ONNX Runtime may still run it: "
                    "tk.run(model, inputs, runtime='onnxruntime')")

    def _undo(self, mark: int, logged: int) -> None:
        """Remove the ops a converter made before it gave up (newest first)."""
        made = list(self.graph._ops)[mark:]
        for extra_op in reversed(made):
            self.graph.remove(extra_op, "lowering abandoned")
        gone = {t for o in made for t in o.outputs}
        self._conv_cache = {k: t for k, t in self._conv_cache.items() if t not in gone}
        for v in self.vals.values():
            if v.t in gone:  # pragma: no cover (converters set values last)
                v.t = None
        for oid in self.origins:
            self.graph.removed_origins.pop(oid, None)
        del self.graph.rewrites[logged:]

    def _fold(self, op: Op, ins: list[_V | None]) -> None:
        if op.type == "Shape":
            v = ins[0]
            assert v is not None
            shape = np.asarray(v.shape, dtype=np.int64)
            start = int(self.attr("start", 0))
            end = self.attr("end", None)
            self.set_const(0, shape[start:end if end is None else int(end)])
            return
        if op.type == "Size":
            v = ins[0]
            assert v is not None
            self.set_const(0, np.asarray(math.prod(v.shape), dtype=np.int64))
            return
        args = [v.const if v is not None else None for v in ins]
        if op.type == "DequantizeLinear" and args[0] is not None and args[1] is not None \
                and not int(self.attr("block_size", 0) or 0):
            self.set_const(0, _dequantize_array(args[0], args[1], args[2] if len(args) > 2
                                                else None, int(self.attr("axis", 1))))
            return
        try:
            outs = evaluate_node(op, args, self.opsets)
        except Exception as e:  # onnx.reference raises many types for a bad node
            raise ToolkitError(f"cannot evaluate the node at import ({type(e).__name__}: "
                               f"{str(e)[:200]})", where=self.where,
                               fix="check the node against the ONNX spec of opset "
                                   f"{self.opset}, or run the model with "
                                   "runtime='onnxruntime'") from None
        for i, o in enumerate(outs):
            if i < len(op.outputs):
                self.set_const(i, o)

    def _branch(self, key: str, op: Op) -> list[_V]:
        """Lower the ops of subgraph ``key`` of an If node inline; return its outputs."""
        sub = self.src.subgraphs[op.extra["subgraphs"][key]]
        for t in sub.tensors:
            if t.is_const and t.name not in self.vals:
                arr = np.asarray(t.data)
                self.vals[t.name] = _V(None, False, arr, tuple(arr.shape), arr.dtype)
        outer = self.op, self.origins
        try:
            for sop in sub.ops:
                self.op, self.origins = sop, tuple(sorted(sop.origins))
                self._lower_node(sop)
        finally:
            self.op, self.origins = outer
        return [self.vals[t.name] for t in sub.outputs]

    def _if(self, op: Op, ins: list[_V | None]) -> None:
        """If: a constant condition inlines the branch it takes; a computed one computes both
        branches and selects each output (SELECT_V2, with the If's origin)."""
        cond = ins[0]
        assert cond is not None
        if cond.const is not None:
            key = "then_branch" if bool(np.asarray(cond.const).reshape(-1)[0]) else \
                "else_branch"
            for i, v in enumerate(self._branch(key, op)):
                self.vals[op.outputs[i].name] = v
            self.graph.removed_origins.setdefault(
                next(iter(op.origins)), f"If with a constant condition: {key} inlined")
            return
        then = self._branch("then_branch", op)
        other = self._branch("else_branch", op)
        c = self.tensor_of(cond)
        if c.shape != ():
            c = self.emit("RESHAPE", [c, self.i32(np.zeros(0, np.int32), "shape")], (),
                          np.bool_, newShape=[])
        for i, (a, b) in enumerate(zip(then, other, strict=True)):
            if a.shape != b.shape:
                raise _unsupported_node(self, op, f"its branches give output {i} the shapes "
                                                  f"{list(a.shape)} and {list(b.shape)}")
            ta, tb = self.tensor_of(a), self.tensor_of(b)
            y = self.emit("SELECT_V2", [c, ta, tb], ta.shape, ta.dtype,
                          name=self.name(op.outputs[i].name))
            self.set(i, y)

    def _reference_op(self, op: Op, ins: list[_V | None], reason: str) -> None:
        """One CUSTOM ONNX_REFERENCE op running the node with onnx.reference (a node with
        subgraphs reads the enclosing values its bodies use as extra inputs)."""
        outer_names: list[str] = []
        proto = None
        if op.extra.get("subgraphs"):
            proto = self._node_with_subgraphs(op, reason)
            for idx in op.extra["subgraphs"].values():
                for name in self.src.subgraphs[idx].extra.get("outer_scope", []):
                    if name in self.vals and name not in outer_names:
                        outer_names.append(name)
            ins = [*ins, *(self.vals[n] for n in outer_names)]
        tensors = [self.tensor_of(v) if v is not None else None for v in ins]
        args: list[np.ndarray | None] = []
        for v, t in zip(ins, tensors, strict=False):
            if v is None or t is None:
                args.append(None)
            elif v.const is not None:
                args.append(v.const)
            else:
                dt = t.dtype if t.dtype is not None else np.dtype(np.float32)
                args.append(np.zeros(t.shape, dtype=dt))
        try:
            with np.errstate(all="ignore"):
                outs = evaluate_node(op, args, self.opsets, proto, outer_names)
        except Exception as e:
            raise _unsupported_node(self, op, f"{reason}; onnx.reference cannot run it either "
                                              f"({type(e).__name__}: {str(e)[:160]})") from None
        out_tensors = []
        for o, t in zip(outs, op.outputs, strict=False):
            out_tensors.append(self.graph.add_tensor(self.name(t.name), o.shape, o.dtype))
        self.graph.add_op("CUSTOM", tensors, out_tensors, None, origins=self.origins,
                          custom_code=REFERENCE_OP)
        new = out_tensors[0].producer
        assert new is not None
        new.extra.update({"onnx_node": (proto if proto is not None else node_proto(op))
                          .SerializeToString(), "onnx_outer_inputs": list(outer_names),
                          "onnx_opsets": dict(self.opsets), "reference_only": reason,
                          "onnx_op_type": op.type})
        self.reference_only.append({"node": op.extra.get("node_name") or op.name,
                                    "op_type": op.type, "reason": reason})
        for i, t in enumerate(out_tensors):
            self.set(i, t)


def _dequantize_array(x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int
                      ) -> np.ndarray:
    """ONNX DequantizeLinear of a constant: ``(x - zp) * scale`` in float32 (per axis when
    ``scale`` has several values)."""
    shape = [1] * x.ndim
    if scale.size > 1:
        shape[axis % x.ndim] = scale.size
    s = np.asarray(scale, np.float32).reshape(shape if scale.size > 1 else ())
    z = np.zeros((), np.int64) if zp is None else np.asarray(zp).astype(np.int64).reshape(
        shape if scale.size > 1 else ())
    return ((x.astype(np.int64) - z).astype(np.float32) * s).astype(np.float32)


def _unsupported_model(what: str) -> ToolkitError:
    return UnsupportedOpError(what, where="ONNX model",
                              fix="run the model with runtime='onnxruntime'")


def _unsupported_node(lw: _Lowerer, op: Op, reason: str) -> ToolkitError:
    return UnsupportedOpError(
        f"node {op.extra.get('node_name') or op.name!r} ({op.type}, opset {lw.opset}) cannot be "
        f"lowered: {reason}", where=lw.src.path or "ONNX model",
        fix="run the model with tk.run(model, inputs, runtime='onnxruntime')")


_NEVER_FOLD = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                         "RandomUniformLike", "Multinomial", "Bernoulli", "If", "Loop", "Scan",
                         "SequenceMap"})


def _foldable(op: Op, ins: list[_V | None]) -> bool:
    if op.type in _NEVER_FOLD:
        return False
    if op.type in ("Shape", "Size"):
        return ins[0] is not None
    if not all(v is None or v.const is not None for v in ins):
        return False
    return all(v is None or v.const is None or v.const.size <= _FOLD_MAX for v in ins)


def reference_only_ops(model: Model) -> list[Op]:
    """The ``ONNX_REFERENCE`` ops of a lowered model (every subgraph)."""
    return [op for g in model.subgraphs for op in g.ops
            if op.type == "CUSTOM" and op.custom_code == REFERENCE_OP]


def check_no_reference_ops(model: Model, verb: str) -> None:
    """Raise :class:`UnsupportedOpError` when ``model`` holds reference-only ONNX nodes
    (``verb`` names the refusing entry point)."""
    ops = reference_only_ops(model)
    if not ops:
        return
    first = ops[0]
    names = ", ".join(f"{model.source_table.get(min(o.origins), o.name)} "
                      f"({o.extra.get('onnx_op_type', '?')})" for o in ops[:5])
    raise UnsupportedOpError(
        f"{verb} cannot take {len(ops)} ONNX node(s) that run reference-only: {names}; "
        f"{first.extra.get('reference_only', '')}", where=verb,
        fix="run the model with tk.run (onnx.reference runs those nodes) or "
            "runtime='onnxruntime'")


def lower_onnx(model: Model, shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Return ``model`` (an ONNX model of :func:`load_onnx`, ``format == "onnx"``) lowered to
    the IR op set (``format == "circle"``, ``extra["lowered_from"] == "onnx"``).

    Args:
        model: the ONNX model; it is not modified.
        shapes: input name -> shape, for inputs with free dimensions (fixed dimensions must
            match).

    Returns a model whose ops carry the origin ids of the ONNX nodes they came from
    (``model.origins`` holds each node's record); ``extra["reference_only"]`` lists the nodes
    that run through ``onnx.reference`` (dicts ``node``, ``op_type``, ``reason``).

    Raises:
        ToolkitError: free dimensions without a shape, a node that cannot be evaluated;
            :class:`UnsupportedOpError` for a node that neither lowers nor runs in
            ``onnx.reference`` (names the node, op, opset and the way out).
    """
    if model.format != "onnx":
        raise ToolkitError(f"lower_onnx takes an ONNX model, got a {model.format} model",
                           fix="pass the model of tk.load('model.onnx')")
    return _Lowerer(model, shapes).run()


# ------------------------------------------------------------------------------ converters
LOWERERS: dict[str, Callable[[_Lowerer], None]] = {}


def _lowers(*types: str) -> Callable[[Callable[[_Lowerer], None]], Callable[[_Lowerer], None]]:
    def deco(fn: Callable[[_Lowerer], None]) -> Callable[[_Lowerer], None]:
        for t in types:
            LOWERERS[t] = fn
        return fn
    return deco


def _norm(axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise _NoLoweringError(f"axis {axis} is out of range for rank {rank}")
    return a


# activations and unary ops ------------------------------------------------------------
_UNARY = {"Relu": "RELU", "Sigmoid": "LOGISTIC", "Tanh": "TANH", "Exp": "EXP", "Log": "LOG",
          "Sqrt": "SQRT", "Neg": "NEG", "Abs": "ABS", "Floor": "FLOOR", "Ceil": "CEIL",
          "Sin": "SIN", "Cos": "COS", "HardSwish": "HARD_SWISH", "Not": "LOGICAL_NOT",
          "Round": "ROUND"}


def _same_layout(lw: _Lowerer, v: _V) -> tuple[Tensor, bool]:
    if v.t is None:
        return lw.tensor_of(v), False
    return v.t, v.nhwc


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


def _nhwc_const(c: np.ndarray) -> np.ndarray:
    """A constant broadcasting against an NCHW 4-D value, made to broadcast against its NHWC
    tensor (leading 1s dropped)."""
    full = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(_TO_NHWC)
    shape = list(full.shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return full.reshape(shape)


def _binary_operands(lw: _Lowerer, vals: list[_V]) -> tuple[list[Tensor], tuple[int, ...], bool]:
    """The operands as tensors of one layout: NHWC when every computed operand is NHWC (4-D)
    and the constants broadcast against it; else ONNX order."""
    computed = [v for v in vals if v.const is None]
    nhwc = bool(computed) and all(v.nhwc for v in computed) and all(
        v.const is None or v.const.ndim <= 4 for v in vals)
    onnx_shape = tuple(np.broadcast_shapes(*(v.shape for v in vals)))
    if nhwc and len(onnx_shape) != 4:
        nhwc = False
    out: list[Tensor] = []
    for v in vals:
        if nhwc:
            if v.const is not None:
                out.append(lw.const(_nhwc_const(v.const), v.const.dtype, "operand"))
            else:
                assert v.t is not None
                out.append(v.t)
        else:
            out.append(lw.tensor_of(v))
    shape = tuple(onnx_shape[i] for i in _TO_NHWC) if nhwc else onnx_shape
    return out, shape, nhwc


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
    if w.ndim != 4:
        raise _NoLoweringError(f"{w.ndim - 2}-D convolution (2-D only)")
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
    import struct

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
    """Lower a float ``op_type`` node on ``ins`` (the QLinear node's dequantized operands) with
    the converter of that op type; return its output value."""
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


# recurrent ---------------------------------------------------------------------------------
@_lowers("LSTM")
def _lstm(lw: _Lowerer) -> None:
    assert lw.op is not None
    if (lw.attr("direction", "forward") or "forward") not in ("forward", b"forward"):
        raise _NoLoweringError("direction other than forward")
    if int(lw.attr("layout", 0)):
        raise _NoLoweringError("layout=1")
    if lw.attr("clip") is not None or int(lw.attr("input_forget", 0)):
        raise _NoLoweringError("clip or input_forget")
    acts = lw.attr("activations")
    if acts is not None and [a.decode() if isinstance(a, bytes) else a for a in acts] != [
            "Sigmoid", "Tanh", "Tanh"]:
        raise _NoLoweringError(f"activations {acts}")
    outs = lw.op.outputs
    if len(outs) > 2 and (outs[2].consumers or outs[2] in lw.src.graph.outputs):
        raise _NoLoweringError("its Y_c output is read")
    xv = lw.need(0)
    w, r = lw.const_of(1, "W"), lw.const_of(2, "R")
    assert w is not None and r is not None
    b = lw.const_of(3, "B")
    if lw.inp(4) is not None:
        sl = lw.const_of(4, "sequence_lens")
        if sl is not None and int(np.min(sl)) != xv.shape[0]:
            raise _NoLoweringError("sequence_lens shorter than the sequence")
    h0, c0 = lw.const_of(5, "initial_h"), lw.const_of(6, "initial_c")
    if lw.inp(7) is not None:
        raise _NoLoweringError("peephole weights")
    hidden = int(r.shape[-1])
    seq, batch, _ = xv.shape
    wi, wo, wf, wc = np.split(w[0].astype(np.float32), 4)
    ri, ro, rf, rc = np.split(r[0].astype(np.float32), 4)
    if b is not None:
        bb = b[0].astype(np.float32)
        bsum = bb[:4 * hidden] + bb[4 * hidden:]
    else:
        bsum = np.zeros(4 * hidden, np.float32)
    bi, bo, bf, bc = np.split(bsum, 4)
    x = lw.tensor_of(xv)

    def c(a: np.ndarray, s: str) -> Tensor:
        return lw.const(np.ascontiguousarray(a, np.float32), np.float32, s)

    base = lw.op.name

    def state(v: np.ndarray | None, s: str) -> Tensor:
        if v is None:
            t = lw.graph.add_tensor(lw.name(f"{base}/{s}"), (batch, hidden), np.float32,
                                    is_variable=True)
            return t
        arr = np.broadcast_to(np.asarray(v, np.float32).reshape(-1, batch, hidden)[0],
                              (batch, hidden))
        t = lw.graph.add_tensor(lw.name(f"{base}/{s}"), (batch, hidden), np.float32,
                                data=np.ascontiguousarray(arr), is_variable=True)
        return t

    ins: list[Tensor | None] = [x, c(wi, "w_i"), c(wf, "w_f"), c(wc, "w_c"), c(wo, "w_o"),
                                c(ri, "r_i"), c(rf, "r_f"), c(rc, "r_c"), c(ro, "r_o"),
                                None, None, None, c(bi, "b_i"), c(bf, "b_f"), c(bc, "b_c"),
                                c(bo, "b_o"), None, None, state(h0, "h"), state(c0, "c"),
                                None, None, None, None]
    y = lw.emit("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, (seq, batch, hidden),
                fusedActivationFunction=4, cellClip=0.0, projClip=0.0, timeMajor=True,
                asymmetricQuantizeInputs=False, diagonalRecurrentTensors=False)
    if outs[0].consumers or outs[0] in lw.src.graph.outputs:
        lw.set(0, lw.emit("RESHAPE", [y, lw.i32([seq, 1, batch, hidden], "shape")],
                          (seq, 1, batch, hidden), newShape=[seq, 1, batch, hidden]))
    if len(outs) > 1 and outs[1].name:
        last = lw.emit("STRIDED_SLICE", [y, lw.i32([seq - 1, 0, 0], "begin"),
                                         lw.i32([seq, batch, hidden], "end"),
                                         lw.i32([1, 1, 1], "strides")], (1, batch, hidden),
                       beginMask=0, endMask=0, ellipsisMask=0, newAxisMask=0,
                       shrinkAxisMask=0, offset=False)
        lw.set(1, last)


# ------------------------------------------------------------------------- GELU from Erf
def _const_scalar(lw: _Lowerer, t: Tensor | None) -> float | None:
    if t is None:
        return None
    v = lw.vals.get(t.name)
    p = t.producer
    if v is None and t.is_const:
        arr = np.asarray(t.data)
    elif v is not None and v.const is not None:
        arr = v.const
    elif p is not None and p.type == "Constant":  # not evaluated yet when fusions are planned
        attrs = p.extra.get("attributes") or {}
        value = attrs.get("value", attrs.get("value_float"))
        if value is None:
            return None
        arr = np.asarray(value)
    else:
        return None
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None


def _only_reader(t: Tensor, outputs: list[Tensor]) -> Op | None:
    if t in outputs or len(t.consumers) != 1:
        return None
    return t.consumers[0]


def _other(op: Op, t: Tensor) -> Tensor | None:
    rest = [x for x in op.inputs if x is not t]
    return rest[0] if len(rest) == 1 else None


def _plan_fusions(lw: _Lowerer, g: Graph) -> None:
    """Find the erf form of GELU (``x * 0.5 * (1 + erf(x / sqrt 2))``, as PyTorch's
    TorchScript exporter writes it) and plan one GELU op for its five nodes."""
    outs = list(g.outputs)
    for erf in g.ops:
        if erf.type != "Erf" or erf.inputs[0] is None:
            continue
        div = erf.inputs[0].producer
        if div is None or div.type not in ("Div", "Mul") or _only_reader(div.outputs[0], outs) \
                is not erf:
            continue
        x = div.inputs[0]
        k = _const_scalar(lw, div.inputs[1])
        if x is None or k is None:
            continue
        if not math.isclose(k if div.type == "Div" else 1 / k, math.sqrt(2), rel_tol=1e-4):
            continue
        add = _only_reader(erf.outputs[0], outs)
        if add is None or add.type != "Add" or _const_scalar(
                lw, _other(add, erf.outputs[0])) != 1.0:
            continue
        m1 = _only_reader(add.outputs[0], outs)
        if m1 is None or m1.type != "Mul":
            continue
        other = _other(m1, add.outputs[0])
        members = [div, erf, add, m1]
        if other is x:  # (x * (1 + erf)) * 0.5
            m2 = _only_reader(m1.outputs[0], outs)
            if m2 is None or m2.type != "Mul" or _const_scalar(
                    lw, _other(m2, m1.outputs[0])) != 0.5:
                continue
            last = m2
        elif other is not None and other.producer is not None and other.producer.type == \
                "Mul" and x in other.producer.inputs and _const_scalar(
                lw, _other(other.producer, x)) == 0.5 and len(other.consumers) == 1:
            last = m1  # (x * 0.5) * (1 + erf)
            members.insert(0, other.producer)
        else:
            continue
        members.append(last) if last is not m1 else None
        first = min(members, key=lambda o: o._seq)

        def build(x: Tensor = x, last: Op = last) -> None:
            v = lw.vals[x.name]
            xt, nhwc = _same_layout(lw, v)
            y = lw.emit("GELU", [xt], xt.shape, name=lw.name(last.outputs[0].name),
                        approximate=False)
            lw.vals[last.outputs[0].name] = _V(y, nhwc, None, v.shape, np.float32)

        lw.group[first] = (members, build)
        for m in members:
            if m is not first:
                lw.skip[m] = None


LOWERED_OPS: frozenset[str] = frozenset(LOWERERS) | {"Shape", "Size", "Constant",
                                                   "ConstantOfShape", "Range", "Erf", "If"}
"""ONNX op types the lowering handles (some only in the cases their converter takes, e.g.
Conv in 2-D, Erf in the GELU pattern; a node with constant inputs of any type is evaluated at
import)."""


_LOWERED: weakref.WeakKeyDictionary[Model, dict[Any, Model]] = weakref.WeakKeyDictionary()


def input_shapes(model: Model, inputs: Any) -> dict[str, tuple[int, ...]]:
    """The shape of every input of ``model`` given in ``inputs`` (a dict name -> array, a
    list in input order, or one array; ``None`` gives none)."""
    if inputs is None:
        return {}
    names = [t.name for t in model.graph.inputs]
    if isinstance(inputs, Mapping):
        return {str(k): tuple(np.shape(v)) for k, v in inputs.items()}
    if isinstance(inputs, np.ndarray):
        return {names[0]: tuple(inputs.shape)} if names else {}
    if isinstance(inputs, (list, tuple)):
        return {n: tuple(np.shape(v)) for n, v in zip(names, inputs, strict=False)}
    return {}


def lowered_for(model: Model, purpose: str, inputs: Any = None, *,
                shapes: Mapping[str, Sequence[int]] | None = None,
                allow_reference: bool = False) -> Model:
    """The lowered form of an ONNX model for an entry point (kept on the model per input
    shapes, so running it again does not lower it again).

    ``inputs`` (what ``tk.run`` was given) or ``shapes`` fix the free dimensions. Unless
    ``allow_reference``, a model with reference-only nodes is refused
    (:func:`check_no_reference_ops`, naming ``purpose``).
    """
    given = dict(input_shapes(model, inputs))
    given.update({k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()})
    free = {t.name: given[t.name] for t in model.graph.inputs
            if t.name in given and t.shape_signature is not None
            and any(d < 0 for d in t.shape_signature)}
    key = tuple(sorted(free.items()))
    cache = _LOWERED.get(model)
    if cache is None:
        cache = _LOWERED[model] = {}
    low = cache.get(key)
    if low is None:
        low = cache[key] = lower_onnx(model, free)
    if not allow_reference:
        check_no_reference_ops(low, purpose)
    return low
