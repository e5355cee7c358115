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
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError, UnsupportedOpError
from toolkit.importers import (
    onnx_lower_math,
    onnx_lower_nn,
    onnx_lower_rnn,
    onnx_lower_shape,
)
from toolkit.importers.onnx_lower_base import (
    _FOLD_MAX,
    _KEEPS_QUANT,
    _TO_NCHW,
    _TO_NHWC,
    _V,
    LOWERERS,
    OPSET_RANGE,
    REFERENCE_OP,
    _dequantize_array,
    _NoLoweringError,
    _options,
    _same_layout,
)
from toolkit.ir import Graph, Model, Op, Origin, Quantization, Tensor

# imported to register their converters
del onnx_lower_math, onnx_lower_nn, onnx_lower_rnn, onnx_lower_shape

__all__ = ["lower_onnx", "LOWERED_OPS", "REFERENCE_OP", "OPSET_RANGE", "onnx_origin_records",
           "reference_only_ops", "check_no_reference_ops"]

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
    def __init__(self, src: Model, shapes: Mapping[str, Sequence[int]] | None,
                 sample: Mapping[str, np.ndarray] | None = None) -> None:
        self.src = src
        self.sample = dict(sample or {})  # input values, for the shapes of reference-only ops
        self._sample_values: dict[str, np.ndarray] | None = None
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
                               fix=f"lower the model with tk.lower_onnx(model, shapes="
                                   f"{{{t.name!r}: (...)}}) and pass that, or run it with "
                                   "inputs")
        elif sig is not None and any(d < 0 for d in sig):
            raise ToolkitError(f"input {t.name!r} has free dimensions {list(sig)}",
                               where="ONNX model inputs",
                               fix=f"lower the model with tk.lower_onnx(model, shapes="
                                   f"{{{t.name!r}: (...)}}) and pass that (to tk.compile, "
                                   "tk.partition, tk.codegen), or tk.run it with inputs")
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
            except (ValueError, IndexError, KeyError, TypeError, AssertionError) as e:
                # inputs a converter does not expect (a rank, a missing attribute): the node
                # runs reference-only, the reason listed
                reason = (f"{op.type} (opset {self.opset}): the converter cannot take this "
                          f"node ({type(e).__name__}: {str(e)[:160]})")
                self._undo(mark, logged)
        self._reference_op(op, ins, reason)

    def _sampled(self, name: str, t: Tensor) -> np.ndarray | None:
        """The value ONNX value ``name`` takes on the sample inputs (``onnx.reference`` runs
        the model once, on the first call), or None (no sample, or another shape)."""
        if not self.sample or not name:
            return None
        if self._sample_values is None:
            self._sample_values = {}
            try:
                from onnx.reference import ReferenceEvaluator

                if self.src.path:
                    ev = ReferenceEvaluator(self.src.path)
                    with np.errstate(all="ignore"):
                        found: Any = ev.run(None, dict(self.sample), intermediate=True)
                    self._sample_values = {k: np.asarray(v) for k, v in dict(found).items()
                                           if isinstance(v, np.ndarray)}
            except Exception:  # a sample that does not run: shapes from zeros
                self._sample_values = {}
        v = self._sample_values.get(name)
        if v is None and name in self.sample:
            v = np.asarray(self.sample[name])
        if v is None or tuple(v.shape) != t.shape:
            return None
        return v.astype(t.dtype) if t.dtype is not None else v

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
        mark, logged = len(self.graph._ops), len(self.graph.rewrites)
        listed = len(self.reference_only)
        try:
            then = self._branch("then_branch", op)
            other = self._branch("else_branch", op)
            for i, (a, b) in enumerate(zip(then, other, strict=True)):
                if a.shape != b.shape:
                    raise _NoLoweringError(f"its branches give output {i} the shapes "
                                           f"{list(a.shape)} and {list(b.shape)}")
            if len(self.reference_only) > listed:
                raise _NoLoweringError("a branch holds reference-only nodes")
        except (_NoLoweringError, ToolkitError) as e:  # the whole If runs reference-only
            self.op, self.origins = op, tuple(sorted(op.origins))
            self._undo(mark, logged)
            del self.reference_only[listed:]
            reason = e.what if isinstance(e, ToolkitError) else str(e)
            self._reference_op(op, ins, f"If on a computed condition: {reason}")
            return
        c = self.tensor_of(cond)
        if c.shape != ():
            c = self.emit("RESHAPE", [c, self.i32(np.zeros(0, np.int32), "shape")], (),
                          np.bool_, newShape=[])
        for i, (a, b) in enumerate(zip(then, other, strict=True)):
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
        onnx_names = [t.name if t is not None else "" for t in op.inputs] + outer_names
        args: list[np.ndarray | None] = []
        for v, t in zip(ins, tensors, strict=False):
            if v is None or t is None:
                args.append(None)
            elif v.const is not None:
                args.append(v.const)
            elif (known := self._sampled(onnx_names[len(args)], t)) is not None:
                args.append(known)
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
            # a body's outputs may change shape with the data: their sizes are not fixed
            sig = (-1,) * o.ndim if proto is not None and o.ndim else None
            out_tensors.append(self.graph.add_tensor(self.name(t.name), o.shape, o.dtype,
                                                     shape_signature=sig))
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


def lower_onnx(model: Model, shapes: Mapping[str, Sequence[int]] | None = None, *,
               sample: Mapping[str, np.ndarray] | None = None) -> Model:
    """Return ``model`` (an ONNX model of :func:`load_onnx`, ``format == "onnx"``) lowered to
    the IR op set (``format == "circle"``, ``extra["lowered_from"] == "onnx"``).

    Args:
        model: the ONNX model; it is not modified.
        shapes: input name -> shape, for inputs with free dimensions (fixed dimensions must
            match).
        sample: input name -> value: a reference-only node reading graph inputs is evaluated
            on them (not on zeros) to find its output shapes (an If on an input's value).

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
    return _Lowerer(model, shapes, sample).run()


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
_LAST_RUN: weakref.WeakKeyDictionary[Model, Model] = weakref.WeakKeyDictionary()


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
                allow_reference: bool = False, latest_run: bool = False) -> Model:
    """The lowered form of an ONNX model for an entry point (kept on the model per input
    shapes, so running it again does not lower it again; with ``latest_run`` and neither
    inputs nor shapes, the lowering of the latest run, so that its trace joins to the model
    it ran).

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
    if low is None and not given and latest_run and model in _LAST_RUN:
        low = _LAST_RUN[model]  # the lowering of the latest run, e.g. to join its trace
    if low is None:
        sample = None
        if isinstance(inputs, Mapping):
            sample = {str(k): np.asarray(v) for k, v in inputs.items()}
        elif isinstance(inputs, (list, tuple)):
            sample = {t.name: np.asarray(v) for t, v in zip(model.graph.inputs, inputs,
                                                            strict=False)}
        elif isinstance(inputs, np.ndarray) and model.graph.inputs:
            sample = {model.graph.inputs[0].name: inputs}
        low = cache[key] = lower_onnx(model, free, sample=sample)
    if inputs is not None:
        _LAST_RUN[model] = low
    if not allow_reference:
        check_no_reference_ops(low, purpose)
    return low
