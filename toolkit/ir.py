"""The in-memory graph: the only place where graphs change.

A :class:`Model` holds :class:`Graph` s (subgraphs); a graph holds :class:`Tensor` s and
:class:`Op` s. Every op carries a non-empty frozenset of **origin ids**: the source ops it came
from (ONE's ``CircleNodeOrigin``). Rewrites go through the graph, which keeps provenance:

* ``graph.absorb(into, ops)``: an existing op swallows others; its origins become the union.
* ``graph.fuse(ops, ...)``: a new op replaces several; it inherits the union of their origins.
* ``graph.replace(op, ...)``: a new op replaces one; it copies its origins.
* ``graph.remove(op, reason)``: an op disappears; its origins are recorded as removed.

Ops created inside ``with graph.origin_from(op_a, op_b):`` inherit the union of the origins of
``op_a`` and ``op_b`` automatically, so a pass author cannot forget them (the torch.fx idea).
Every rewrite is logged in ``graph.rewrites`` with the pass that made it.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit.errors import GraphError
from toolkit.schema import TENSOR_TYPE_NAMES, numpy_dtype, tensor_type_of

__all__ = ["Quantization", "Tensor", "Op", "Graph", "Model", "Origin", "Rewrite", "SignatureDef"]

# The fix for a producer/consumer link that disagrees with an op's inputs or outputs: the
# graph methods keep the links in step, so only a hand edit or a faulty pass breaks them.
_LINK_FIX = ("the links were edited by hand, or this is a bug in a pass: change ops only through "
             "Graph.add_op / set_input / replace_all_uses_with / remove; if a toolkit pass did "
             "this, report it with the model")

_NO_ORIGINS: frozenset[int] = frozenset()


@dataclass(eq=False)
class Quantization:
    """Affine quantization of a tensor: ``real = scale * (q - zero_point)``.

    ``scale`` and ``zero_point`` have one entry (per-tensor) or one per channel along
    ``quantized_dimension`` (per-channel). ``min``/``max`` and ``details`` are kept as read.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    quantized_dimension: int = 0
    min: np.ndarray | None = None
    max: np.ndarray | None = None
    details_type: int = 0
    details: Any = None

    @property
    def per_channel(self) -> bool:
        """True when there is more than one scale."""
        return self.scale.size > 1

    @classmethod
    def make(cls, scale: float | Sequence[float], zero_point: int | Sequence[int] = 0,
             quantized_dimension: int = 0) -> Quantization:
        """Return a quantization from Python numbers (per-tensor or per-channel)."""
        s = np.atleast_1d(np.asarray(scale, dtype=np.float32))
        z = np.atleast_1d(np.asarray(zero_point, dtype=np.int64))
        if z.size == 1 and s.size > 1:
            z = np.repeat(z, s.size)
        return cls(s, z, quantized_dimension)


@dataclass(frozen=True)
class Origin:
    """Where one source op came from: the record every layer name is read from.

    ``id`` is the origin id that compiled ops carry (ONE's ``CircleNodeOrigin`` id); ``name``
    the source op's own name (TFLite op name, ONNX node name, Caffe layer name, ONE origin
    name); ``layers`` the original layers the user wrote that it belongs to (a Keras layer, a
    PyTorch module path, a Caffe layer), in order, possibly empty (an op no layer owns, e.g. a
    converter-made cast, with ``why`` saying so); ``format`` the file format it was read from
    (``"tflite"``, ``"circle"``, ``"onnx"``, ``"caffe"``, ``"executorch"``); ``exporter`` the
    tool that wrote that file, when known (``"tflite_converter"``, ``"pytorch"``,
    ``"pytorch_dynamo"``, ``"tf2onnx"``, ``"paddle2onnx"``, ``"one"``, ``"caffe"`` ...);
    ``why`` the naming rule that produced ``layers`` (or why there is none); ``main`` the
    layer among ``layers`` whose work the op's multiply-accumulates are (a convolution fused
    with its batch norm and activation: the convolution's layer), ``""`` when none is known.

    Importers fill one per source op, once; passes never change them (compiled ops carry origin
    ids, and the ids lead here).
    """

    id: int
    name: str
    layers: tuple[str, ...] = ()
    format: str = ""
    exporter: str = ""
    why: str = ""
    main: str = ""


class Tensor:
    """A tensor of a graph: name, static shape, schema type, optional constant data.

    ``shape`` is a tuple of ints (``-1`` never appears here; dynamic dims live in
    ``shape_signature``). ``type_code`` is the schema ``TensorType``; ``dtype`` its NumPy dtype.
    ``data`` is a read-only NumPy array for constants (a view of the file bytes after ``load``).
    ``producer`` and ``consumers`` are kept up to date by the graph.
    """

    __slots__ = (
        "consumers",
        "data",
        "extra",
        "graph",
        "has_rank",
        "is_variable",
        "name",
        "producer",
        "quant",
        "shape",
        "shape_signature",
        "type_code",
    )

    def __init__(self, name: str, shape: Sequence[int], type_code: int, *,
                 data: np.ndarray | None = None, quant: Quantization | None = None,
                 shape_signature: Sequence[int] | None = None, is_variable: bool = False,
                 has_rank: bool = False, extra: dict[str, Any] | None = None) -> None:
        self.name = name
        self.shape: tuple[int, ...] = tuple(map(int, shape))
        self.type_code = int(type_code)
        self.shape_signature = None if shape_signature is None else tuple(
            map(int, shape_signature))
        self.quant = quant
        self.data = data
        self.is_variable = is_variable
        self.has_rank = has_rank
        self.extra = extra or {}
        self.producer: Op | None = None
        self.consumers: list[Op] = []
        self.graph: Graph | None = None

    @property
    def dtype(self) -> np.dtype | None:
        """NumPy dtype of the tensor (None for types NumPy lacks, e.g. STRING, INT4)."""
        return numpy_dtype(self.type_code)

    @property
    def type_name(self) -> str:
        """Schema type name, e.g. ``FLOAT32`` or ``INT8``."""
        return TENSOR_TYPE_NAMES.get(self.type_code, str(self.type_code))

    @property
    def is_const(self) -> bool:
        """True when the tensor holds constant data (and is not a variable)."""
        return self.data is not None and not self.is_variable

    @property
    def nbytes(self) -> int:
        """Size of the tensor in bytes (0 for types of unknown size)."""
        dt = self.dtype
        return math.prod(map(int, self.shape)) * dt.itemsize if dt is not None else 0  # exact

    @property
    def size(self) -> int:
        """Number of elements (a Python int: exact past int64)."""
        return math.prod(map(int, self.shape))

    @property
    def is_dynamic(self) -> bool:
        """True when the shape signature has unknown (-1) dimensions."""
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)

    def clone(self) -> Tensor:
        """Return a detached copy (no graph, producer or consumers) with the same name, shape,
        type, quantization and data; constant data is shared (it is read-only)."""
        return Tensor(self.name, self.shape, self.type_code, data=self.data, quant=self.quant,
                      shape_signature=self.shape_signature, is_variable=self.is_variable,
                      has_rank=self.has_rank, extra=dict(self.extra))

    def __repr__(self) -> str:
        kind = "const " if self.is_const else ""
        return f"<Tensor {kind}{self.name!r} {self.type_name}{list(self.shape)}>"


    @classmethod
    def trusted(cls, name: str, shape: tuple[int, ...], type_code: int, quant: Quantization | None,
                data: np.ndarray | None, shape_signature: tuple[int, ...] | None,
                is_variable: bool, has_rank: bool, extra: dict[str, Any]) -> Tensor:
        """Return a detached tensor built from already-checked fields (a model reader's hot
        loop: the constructor's work without its argument checks and conversions)."""
        t = object.__new__(cls)
        t.name, t.shape, t.type_code, t.quant, t.data = name, shape, type_code, quant, data
        t.shape_signature, t.is_variable, t.has_rank, t.extra = (shape_signature, is_variable,
                                                                 has_rank, extra)
        t.producer, t.consumers, t.graph = None, [], None
        return t


class Op:
    """An operator: a type name (``CONV_2D``, ``INSTANCE_NORM``, ``CUSTOM``), options and
    input/output tensors, plus the set of origin ids of the source ops it came from.

    ``options`` is the circle-schema object-API options object (e.g. ``Conv2DOptionsT``) or
    None; it is decoded from the file on first access. ``inputs`` may hold None for an
    optional input that is absent (index -1 in the file).
    """

    __slots__ = (
        "__weakref__",
        "_options",
        "_options_src",
        "_seq",
        "custom_code",
        "custom_options",
        "extra",
        "graph",
        "inputs",
        "options_type",
        "origins",
        "outputs",
        "type",
        "version",
    )

    def __init__(self, type: str, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor],
                 options: Any = None, *, origins: Iterable[int] = (),
                 custom_code: str | None = None,
                 version: int = 1, options_type: str | None = None,
                 custom_options: bytes | None = None, extra: dict[str, Any] | None = None) -> None:
        self.type = type
        self.custom_code = custom_code
        self.version = version
        self._options = options
        self._options_src: Any = None
        self.options_type = options_type
        self.inputs: tuple[Tensor | None, ...] = tuple(inputs)
        self.outputs: tuple[Tensor, ...] = tuple(outputs)
        self.origins: frozenset[int] = frozenset(origins)
        self.custom_options = custom_options
        self.extra = extra or {}
        self.graph: Graph | None = None
        self._seq: float = 0.0

    @classmethod
    def trusted(cls, type: str, inputs: tuple[Tensor | None, ...], outputs: tuple[Tensor, ...],
                *, options_src: Any, options_type: str | None, custom_code: str | None,
                version: int, index: int) -> Op:
        """Return a detached op built from already-checked fields, for a model reader: the
        options are decoded from ``options_src()`` on first access, ``index`` is the op's
        position in the file (its creation order), and its origins are empty until the reader
        sets them."""
        op = object.__new__(cls)
        op.type, op.custom_code, op.version = type, custom_code, version
        op._options = op.custom_options = op.graph = None
        op._options_src = options_src
        op.options_type = options_type
        op.inputs, op.outputs = inputs, outputs
        op.origins, op.extra, op._seq = _NO_ORIGINS, {"_created": index}, float(index)
        return op

    @property
    def options(self) -> Any:
        """The builtin options object (circle-schema object API), decoded on first access."""
        if self._options_src is not None:
            decode, self._options_src = self._options_src, None
            self._options = decode()
        return self._options

    @options.setter
    def options(self, value: Any) -> None:
        self._options_src = None
        self._options = value

    @property
    def name(self) -> str:
        """The op's name: the name of its first output tensor (as ONE and TFLite name nodes)."""
        return self.outputs[0].name if self.outputs else f"<{self.type}>"

    @property
    def kind(self) -> str:
        """The op type, or the custom code for a CUSTOM op."""
        return self.custom_code if self.type == "CUSTOM" and self.custom_code else self.type

    @property
    def activation(self) -> int:
        """The fused activation code of the options (0 = NONE when there is none)."""
        opts = self.options
        return int(getattr(opts, "fusedActivationFunction", 0) or 0) if opts is not None else 0

    def const_inputs(self) -> list[Tensor | None]:
        """Return the inputs that are constants, None elsewhere."""
        return [t if t is not None and t.is_const else None for t in self.inputs]

    def clone(self, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor]) -> Op:
        """Return a detached copy of this op that reads ``inputs`` and writes ``outputs``.

        The copy keeps the type, version, origins, custom code and options (still undecoded
        options are decoded separately for the copy; decoded ones are shared, so treat them as
        read-only or replace them). ``extra`` entries that name tensors are not copied.
        """
        extra = {k: v for k, v in self.extra.items() if k not in ("_created", "intermediates")}
        new = Op(self.type, inputs, outputs, None, origins=self.origins,
                 custom_code=self.custom_code, version=self.version,
                 options_type=self.options_type, custom_options=self.custom_options,
                 extra=extra)
        new._options = self._options
        new._options_src = self._options_src
        return new

    def __repr__(self) -> str:
        return f"<Op {self.kind} {self.name!r} origins={sorted(self.origins)}>"


@dataclass
class Rewrite:
    """One provenance event: ``relation`` is absorb, fuse, replace or remove."""

    relation: str
    pass_name: str
    sources: tuple[str, ...]
    source_origins: tuple[frozenset[int], ...]
    result: str | None
    result_origins: frozenset[int]
    result_type: str | None = None


@dataclass
class SignatureDef:
    """A signature: key, subgraph index and named input/output tensors."""

    key: str | None
    subgraph_index: int
    inputs: list[tuple[str, Tensor]] = field(default_factory=list)
    outputs: list[tuple[str, Tensor]] = field(default_factory=list)


class Graph:
    """A subgraph: tensors, ops in topological order, graph inputs and outputs.

    All mutation goes through methods of this class, which keep ``producer``/``consumers``
    links, the op order and the provenance log (``rewrites``, ``removed_origins``).
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._tensors: dict[Tensor, None] = {}
        self._ops: dict[Op, None] = {}
        self.inputs: list[Tensor] = []
        self.outputs: list[Tensor] = []
        self.removed_origins: dict[int, str] = {}
        self.rewrites: list[Rewrite] = []
        self.current_pass: str = "user"
        self.extra: dict[str, Any] = {}
        self._order: list[Op] | None = []
        self._seq = itertools.count()
        self._origin_stack: list[frozenset[int]] = []
        self._names: dict[str, Tensor] | None = None

    @classmethod
    def adopt(cls, name: str | None, tensors: list[Tensor], ops: list[Op], inputs: list[Tensor],
              outputs: list[Tensor]) -> Graph:
        """Return a graph made of detached ``tensors`` and ``ops`` (as a model reader builds
        them), linking producers and consumers as :meth:`attach_op` does, in one pass.

        The ops' list order is their creation order; it is the execution order when every op
        reads only earlier ops' outputs (else the graph orders them on first use of
        :attr:`ops`).

        Raises:
            GraphError: a tensor written by two ops, or ops that form a cycle.
        """
        g = cls(name)
        for t in tensors:
            t.graph = g
        g._tensors = dict.fromkeys(tensors)
        g.inputs, g.outputs = list(inputs), list(outputs)
        for op in ops:
            for used in op.inputs:
                if used is not None:
                    used.consumers.append(op)
            for t in op.outputs:
                if t.producer is not None:
                    raise GraphError(f"tensor {t.name!r} already has a producer "
                                     f"({t.producer.kind} {t.producer.name!r}), and {op.kind} "
                                     "writes it too",
                                     where=f"graph {g.name!r}",
                                     fix=("each tensor has one producer: give the second op a "
                                          "new output tensor (Graph.add_tensor) and rewire its "
                                          "consumers with Graph.replace_all_uses_with"))
                t.producer = op
            op.graph = g
        g._ops = dict.fromkeys(ops)
        g._seq = itertools.count(len(ops))
        pos = {op: i for i, op in enumerate(ops)}
        in_order = all(t is None or t.producer is None or pos[t.producer] < i
                       for i, op in enumerate(ops) for t in op.inputs)
        g._order = list(ops) if in_order else None
        g.ops  # noqa: B018  (orders the ops now; raises GraphError on a cycle)
        return g

    # ---------------------------------------------------------------- views
    @property
    def ops(self) -> list[Op]:
        """Ops in a topological order that keeps the original order where it can."""
        if self._order is None:
            self._order = self._toposort()
        return self._order

    @property
    def tensors(self) -> list[Tensor]:
        """All tensors of the graph, in insertion order."""
        return list(self._tensors)

    def tensor(self, name: str) -> Tensor:
        """Return the tensor called ``name`` (GraphError when there is none)."""
        if self._names is None:
            names: dict[str, Tensor] = {}
            for t in self._tensors:
                names.setdefault(t.name, t)
            self._names = names
        try:
            return self._names[name]
        except KeyError:
            raise GraphError(f"no tensor named {name!r}", where=f"graph {self.name!r}",
                             fix="check the name with model.tensors_table()") from None

    def op(self, name: str) -> Op:
        """Return the op whose first output is the tensor called ``name``."""
        t = self.tensor(name)
        if t.producer is None:
            raise GraphError(f"tensor {name!r} is not produced by an op",
                             where=f"graph {self.name!r}",
                             fix=("pass the name of an op's output (Graph.op looks ops up by "
                                  "output name), or use Graph.tensor for inputs and constants"))
        return t.producer

    def __len__(self) -> int:
        return len(self._ops)

    def __contains__(self, item: object) -> bool:
        return item in self._ops or item in self._tensors

    # -------------------------------------------------------------- tensors
    def add_tensor(self, name: str, shape: Sequence[int], dtype: Any = np.float32, *,
                   data: np.ndarray | None = None, quant: Quantization | None = None,
                   type_code: int | None = None, **kw: Any) -> Tensor:
        """Create a tensor in this graph and return it. ``data`` makes it a constant."""
        if type_code is None:
            type_code = tensor_type_of(dtype if data is None else data.dtype)
        if data is not None:
            data = np.asarray(data)
            dt = numpy_dtype(type_code)
            if dt is not None and data.dtype != dt:
                data = data.astype(dt)
            data.flags.writeable = False
        t = Tensor(name, shape, type_code, data=data, quant=quant, **kw)
        return self.attach_tensor(t)

    def add_const(self, name: str, data: np.ndarray | Sequence[Any], *,
                  quant: Quantization | None = None, dtype: Any = None) -> Tensor:
        """Create a constant tensor from an array and return it."""
        arr = np.asarray(data, dtype=dtype) if dtype is not None else np.asarray(data)
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(np.float32)
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a scalar 1-d)
            arr = arr.copy()
        return self.add_tensor(name, arr.shape, arr.dtype, data=arr, quant=quant)

    def attach_tensor(self, t: Tensor) -> Tensor:
        """Add an existing (detached) Tensor object to the graph and return it."""
        if t.graph is not None and t.graph is not self:
            raise GraphError(
                f"tensor {t.name!r} belongs to another graph",
                where=f"graph {self.name!r}",
                fix=(
                    "give this graph its own tensor with Graph.add_tensor, or Tensor.clone() the "
                    "tensor first"
                ),
            )
        t.graph = self
        self._tensors[t] = None
        if self._names is not None:
            self._names.setdefault(t.name, t)
        return t

    def unique_name(self, base: str) -> str:
        """Return ``base`` or ``base_N``, a tensor name not yet used in this graph."""
        if self._names is None:
            self._names = {}
            for t in self._tensors:
                self._names.setdefault(t.name, t)
        if base not in self._names:
            return base
        for i in itertools.count(1):
            cand = f"{base}_{i}"
            if cand not in self._names:
                return cand
        raise AssertionError  # pragma: no cover

    def remove_tensor(self, t: Tensor) -> None:
        """Remove a tensor that no op uses and that is not a graph input or output."""
        if t.producer is not None or t.consumers or t in self.inputs or t in self.outputs:
            raise GraphError(
                f"tensor {t.name!r} is still in use", where=f"graph {self.name!r}",
                fix=(
                    "rewire its consumers first (Graph.replace_all_uses_with or Graph.set_input), "
                    "remove it from Graph.inputs / Graph.outputs, or call "
                    "Graph.remove_unused_tensors()"
                ),
            )
        self._tensors.pop(t, None)
        t.graph = None
        self._names = None

    def remove_unused_tensors(self) -> int:
        """Remove tensors that nothing produces, consumes or exposes (an op's
        ``extra["intermediates"]``, the scales an int8 LSTM reads, count as used); return how
        many."""
        io = set(self.inputs) | set(self.outputs)
        held = {id(t) for op in self.ops for t in op.extra.get("intermediates") or ()
                if t is not None}
        dead = [t for t in self._tensors if t.producer is None and not t.consumers
                and t not in io and id(t) not in held]
        for t in dead:
            self._tensors.pop(t, None)
            t.graph = None
        if dead:
            self._names = None
        return len(dead)

    # ------------------------------------------------------------------ ops
    def _current_origins(self) -> frozenset[int]:
        return self._origin_stack[-1] if self._origin_stack else frozenset()

    def add_op(self, type: str, inputs: Sequence[Tensor | None], outputs: Sequence[Tensor],
               options: Any = None, *, origins: Iterable[int] | None = None,
               after: Op | None = None, **kw: Any) -> Op:
        """Create an op, link its tensors and return it.

        Its origins are ``origins`` if given, else those of the enclosing
        ``origin_from(...)`` context; an op with neither is a GraphError. ``after`` places it
        right after that op in the order (else it goes at the end of its dependencies).
        """
        org = frozenset(origins) if origins is not None else self._current_origins()
        if not org:
            raise GraphError(
                f"new {type} op has no origin",
                where=f"graph {self.name!r}",
                fix="create it inside `with graph.origin_from(...)` or pass origins=",
            )
        op = Op(type, inputs, outputs, options, origins=org, **kw)
        return self.attach_op(op, after=after)

    def attach_op(self, op: Op, *, after: Op | None = None) -> Op:
        """Link an Op object into the graph (its tensors are attached if needed)."""
        if not op.origins:
            raise GraphError(f"op {op.kind} {op.name!r} has no origin",
                             where=f"graph {self.name!r}",
                             fix=("create the op inside `with graph.origin_from(...)`, or give "
                                  "it origins= when adding it"))
        for t in op.inputs:
            if t is not None:
                if t.graph is not self:
                    self.attach_tensor(t)
                t.consumers.append(op)
        for t in op.outputs:
            if t.graph is not self:
                self.attach_tensor(t)
            if t.producer is not None and t.producer is not op:
                raise GraphError(f"tensor {t.name!r} already has a producer "
                                 f"({t.producer.kind} {t.producer.name!r})",
                                 where=f"graph {self.name!r}",
                                 fix=("give this op a new output tensor (Graph.add_tensor), or "
                                      "remove the old producer first (Graph.remove / "
                                      "Graph.bypass)"))
            t.producer = op
        op.graph = self
        if after is not None:
            op._seq = after._seq
        else:
            dep = [t.producer._seq for t in op.inputs if t is not None and t.producer is not None]
            op._seq = max(dep) if dep else (self._max_seq() if self._ops else 0.0)
        op.extra.setdefault("_created", next(self._seq))
        self._ops[op] = None
        self._order = None
        return op

    def _max_seq(self) -> float:
        return max(o._seq for o in self._ops)

    def _detach_op(self, op: Op) -> None:
        if op not in self._ops:
            raise GraphError(
                f"op {op.kind} {op.name!r} is not in graph {self.name!r}",
                fix=(
                    "pass an op of this graph (look it up with Graph.op(name)); it may have been "
                    "removed already"
                ),
            )
        for t in op.inputs:
            if t is not None:
                t.consumers.remove(op)
        for t in op.outputs:
            if t.producer is op:
                t.producer = None
        del self._ops[op]
        op.graph = None
        self._order = None

    def set_input(self, op: Op, index: int, tensor: Tensor | None) -> None:
        """Make ``tensor`` the ``index``-th input of ``op``."""
        old = op.inputs[index]
        if old is not None:
            old.consumers.remove(op)
        if tensor is not None:
            if tensor.graph is not self:
                self.attach_tensor(tensor)
            tensor.consumers.append(op)
        ins = list(op.inputs)
        ins[index] = tensor
        op.inputs = tuple(ins)
        self._order = None

    def set_inputs(self, op: Op, tensors: Sequence[Tensor | None]) -> None:
        """Replace all inputs of ``op``."""
        for t in op.inputs:
            if t is not None:
                t.consumers.remove(op)
        for t in tensors:
            if t is not None:
                if t.graph is not self:
                    self.attach_tensor(t)
                t.consumers.append(op)
        op.inputs = tuple(tensors)
        self._order = None

    def replace_all_uses_with(self, old: Tensor, new: Tensor) -> None:
        """Rewire every consumer of ``old`` (and the graph outputs) to read ``new``."""
        if old is new:
            return
        for op in list(old.consumers):
            ins = list(op.inputs)
            for i, t in enumerate(ins):
                if t is old:
                    ins[i] = new
                    old.consumers.remove(op)
                    new.consumers.append(op)
            op.inputs = tuple(ins)
        if old in self.outputs:
            if new in self.inputs or new.is_const:
                raise GraphError(
                    f"cannot make graph output {old.name!r} an alias of input/constant "
                    f"{new.name!r}",
                    where=f"graph {self.name!r}",
                    fix=("insert an op (e.g. a copy/RESHAPE) that produces the output from the "
                         "input or constant, instead of aliasing it"))
            self.outputs = [new if t is old else t for t in self.outputs]
            # keep the public name of a graph output
            if new.producer is not None:
                self._rename_output(new, old)
        self._order = None

    def _rename_output(self, new: Tensor, old: Tensor) -> None:
        old_name = old.name
        old.name = self.unique_name(old_name + "_removed")
        new.name = old_name
        self._names = None

    # ----------------------------------------------------------- provenance
    @contextlib.contextmanager
    def origin_from(self, *ops: Op | Iterable[int]) -> Iterator[frozenset[int]]:
        """Context in which every op created inherits the union of the given ops' origins."""
        org: set[int] = set()
        for o in ops:
            org |= o.origins if isinstance(o, Op) else set(o)
        if not org:
            raise GraphError(
                "origin_from() needs at least one op with origins",
                fix=(
                    "pass at least one op that has origins (or a non-empty set of origin ids) to "
                    "origin_from()"
                ),
            )
        fs = frozenset(org)
        self._origin_stack.append(fs)
        try:
            yield fs
        finally:
            self._origin_stack.pop()

    def _log(self, relation: str, sources: Sequence[Op], result: Op | None) -> None:
        self.rewrites.append(Rewrite(
            relation=relation,
            pass_name=self.current_pass,
            sources=tuple(o.name for o in sources),
            source_origins=tuple(o.origins for o in sources),
            result=result.name if result is not None else None,
            result_origins=result.origins if result is not None else frozenset(),
            result_type=result.kind if result is not None else None,
        ))

    def absorb(self, into: Op, ops: Sequence[Op]) -> Op:
        """``into`` swallows ``ops``: its origins become the union, and ``ops`` leave the graph.

        The caller must already have rewired every use of the absorbed ops' outputs.
        """
        for o in ops:
            for t in o.outputs:
                if t.consumers or t in self.outputs:
                    raise GraphError(f"absorbed op {o.kind} {o.name!r} still has users of "
                                     f"{t.name!r}", where=f"graph {self.name!r}",
                                     fix="rewire its outputs first")
        before = (into, *ops)
        log = Rewrite("absorb", self.current_pass, tuple(o.name for o in before),
                      tuple(o.origins for o in before), None, frozenset())
        for o in ops:
            into.origins = into.origins | o.origins
            self._detach_op(o)
        log.result, log.result_origins, log.result_type = into.name, into.origins, into.kind
        self.rewrites.append(log)
        return into

    def fuse(self, ops: Sequence[Op], type: str, inputs: Sequence[Tensor | None],
             outputs: Sequence[Tensor], options: Any = None, **kw: Any) -> Op:
        """Replace ``ops`` by one new op that inherits the union of their origins.

        ``outputs`` are usually the fused ops' final output tensors (which keeps every
        consumer); any other output of the fused ops must be unused.
        """
        return self._substitute("fuse", ops, type, inputs, outputs, options, **kw)

    def replace(self, op: Op, type: str, inputs: Sequence[Tensor | None],
                outputs: Sequence[Tensor], options: Any = None, **kw: Any) -> Op:
        """Replace one op by a new op that copies its origins."""
        return self._substitute("replace", [op], type, inputs, outputs, options, **kw)

    def _substitute(self, relation: str, ops: Sequence[Op], type: str,
                    inputs: Sequence[Tensor | None], outputs: Sequence[Tensor], options: Any,
                    **kw: Any) -> Op:
        keep = set(outputs)
        seq = max(o._seq for o in ops)
        for o in ops:
            for t in o.outputs:
                if t not in keep and ((t.consumers and any(c not in ops for c in t.consumers))
                                      or t in self.outputs):
                    raise GraphError(f"{relation}: output {t.name!r} of {o.kind} {o.name!r} "
                                     "is still used outside the rewritten ops",
                                     where=f"graph {self.name!r}",
                                     fix=(f"include the consumers of {t.name!r} in the ops to "
                                          f"{relation}, or list {t.name!r} among the outputs "
                                          "that are kept"))
        sources = list(ops)
        log_src = (tuple(o.name for o in sources), tuple(o.origins for o in sources))
        org = frozenset().union(*(o.origins for o in ops))
        for o in ops:
            self._detach_op(o)
        new = Op(type, inputs, outputs, options, origins=org, **kw)
        self.attach_op(new)
        new._seq = max(new._seq, seq)
        self.rewrites.append(Rewrite(relation, self.current_pass, log_src[0], log_src[1],
                                     new.name, new.origins, new.kind))
        return new

    def remove(self, op: Op, reason: str = "removed") -> None:
        """Remove an op whose outputs are unused; its origins are recorded as removed
        unless another op still carries them."""
        for t in op.outputs:
            if t.consumers or t in self.outputs:
                raise GraphError(f"cannot remove {op.kind} {op.name!r}: {t.name!r} is still used",
                                 where=f"graph {self.name!r}",
                                 fix="rewire with replace_all_uses_with() first")
        self._log("remove", [op], None)
        self._detach_op(op)
        for oid in op.origins:
            self.removed_origins.setdefault(oid, reason)

    def bypass(self, op: Op, keep: Tensor, reason: str) -> None:
        """Remove a no-op: route users of its single output to ``keep``, then remove it."""
        out = op.outputs[0]
        self.replace_all_uses_with(out, keep)
        self.remove(op, reason)

    def live_origins(self) -> frozenset[int]:
        """Union of the origin sets of all ops now in the graph."""
        return frozenset().union(*(o.origins for o in self._ops)) if self._ops else frozenset()

    # ------------------------------------------------------------- ordering
    def _toposort(self) -> list[Op]:
        # Fast path: when the ops sorted by the heap's key already form a topological order,
        # that order is exactly what the heap would produce (at each step the smallest
        # remaining key is ready), so it is returned without running the heap.
        ordered = sorted(self._ops, key=lambda o: (o._seq, o.extra["_created"], id(o)))
        pos = {o: i for i, o in enumerate(ordered)}
        if all(t.producer is None or pos.get(t.producer, -1) < i
               for i, o in enumerate(ordered) for t in o.inputs if t is not None):
            for i, o in enumerate(ordered):
                o._seq = float(i)
            return ordered
        ops = list(self._ops)
        indeg: dict[Op, int] = {}
        for o in ops:
            n = 0
            for t in o.inputs:
                if t is not None and t.producer is not None and t.producer in self._ops:
                    n += 1
            indeg[o] = n
        heap = [(o._seq, o.extra["_created"], id(o), o) for o in ops if indeg[o] == 0]
        heapq.heapify(heap)
        out: list[Op] = []
        while heap:
            *_, o = heapq.heappop(heap)
            out.append(o)
            for t in o.outputs:
                for c in t.consumers:
                    # an op may read the same tensor several times
                    k = sum(1 for x in c.inputs if x is t)
                    indeg[c] -= k
                    if indeg[c] == 0:
                        heapq.heappush(heap, (c._seq, c.extra["_created"], id(c), c))
        if len(out) != len(ops):
            stuck = [o for o in ops if indeg[o] > 0]
            raise GraphError(
                f"graph has a cycle through {len(stuck)} op(s), e.g. "
                + ", ".join(f"{o.kind} {o.name!r}" for o in stuck[:3]),
                where=f"graph {self.name!r}",
                fix="an op may not (indirectly) consume its own output",
            )
        for i, o in enumerate(out):
            o._seq = float(i)
        return out

    def verify(self) -> None:
        """Check the invariants; raise GraphError naming the op/tensor that breaks one.

        Every op has a non-empty origin set; every op input is a graph input, a constant, a
        variable or produced by an op of this graph; graph outputs are produced or inputs; the
        graph is acyclic; producer/consumer links agree with op inputs and outputs.
        """
        where = f"graph {self.name!r}"
        inputs = set(self.inputs)
        for op in self._ops:
            if not op.origins:
                raise GraphError(f"op {op.kind} {op.name!r} has no origin", where=where,
                                 fix="create ops inside graph.origin_from(...)")
            for t in op.inputs:
                if t is None:
                    continue
                if t.graph is not self:
                    raise GraphError(f"input {t.name!r} of {op.kind} {op.name!r} is not in the "
                                     "graph", where=where,
                                     fix=("attach the tensor with Graph.attach_tensor, or build "
                                          "the op with tensors of this graph"))
                if op not in t.consumers:
                    raise GraphError(f"consumer link of {t.name!r} to {op.name!r} missing",
                                     where=where,
                                     fix=_LINK_FIX)
                if (t.producer is None and t not in inputs and t.data is None
                        and not t.is_variable):
                    raise GraphError(f"tensor {t.name!r} (input of {op.kind} {op.name!r}) has no "
                                     "producer", where=where,
                                     fix="make it a graph input or a constant, or add its op")
                if t.producer is not None and t.producer not in self._ops:
                    raise GraphError(f"tensor {t.name!r} is produced by an op not in the graph",
                                     where=where,
                                     fix=_LINK_FIX)
            for t in op.outputs:
                if t.producer is not op:
                    raise GraphError(
                        f"producer link of {t.name!r} is wrong", where=where,
                        fix=_LINK_FIX,
                    )
        for t in self.outputs:
            if t.producer is None and t not in inputs and t.data is None:
                raise GraphError(
                    f"graph output {t.name!r} has no producer", where=where,
                    fix=(
                        "make it a graph input or a constant, add the op that produces it, or drop "
                        "it from Graph.outputs"
                    ),
                )
        self._order = None
        self.ops  # noqa: B018  (raises on a cycle)


class Model:
    """A model file's content: subgraphs plus model-level data.

    ``source_table`` maps origin ids to origin names (ONE's source table); ``origins`` maps
    origin ids to their :class:`Origin` records (see :meth:`origin`). ``metadata`` keeps
    every metadata entry by name except the ONE origin tables, which are decoded into op
    origins on load and encoded again on save. ``format`` is ``"tflite"`` or ``"circle"``.
    """

    def __init__(self, subgraphs: list[Graph] | None = None, *, version: int = 3,
                 description: str | None = None, format: str = "circle") -> None:
        self.subgraphs: list[Graph] = subgraphs if subgraphs is not None else [Graph("main")]
        self.version = version
        self.description = description
        self.metadata: dict[str, bytes] = {}
        self.metadata_buffer: list[int] | None = None
        self.signature_defs: list[SignatureDef] = []
        self.source_table: dict[int, str] = {}
        self.origins: dict[int, Origin] = {}
        self.had_origin_tables = False
        self.format = format
        self.path: str | None = None
        self.extra: dict[str, Any] = {}

    @property
    def graph(self) -> Graph:
        """The main graph (subgraph 0)."""
        return self.subgraphs[0]

    def origin_names(self) -> dict[int, str]:
        """Map of origin id to name (ONE source table)."""
        return dict(self.source_table)

    def origin(self, oid: int) -> Origin:
        """Return the :class:`Origin` record of origin id ``oid``.

        The importer's record when there is one; else one made from the source table's name
        (layers: the name's ``;``-separated parts, as TensorFlow's converter joins them).
        """
        rec = self.origins.get(oid)
        if rec is not None:
            return rec
        name = self.source_table.get(oid, "")
        layers = tuple(dict.fromkeys(p.strip() for p in name.split(";") if p.strip()))
        return Origin(oid, name, layers, self.format, "", "source table name")

    def verify(self) -> None:
        """Verify every subgraph (see :meth:`Graph.verify`)."""
        for g in self.subgraphs:
            g.verify()

    # the DataFrame views live in toolkit.tables to keep this module free of pandas
    def ops_table(self, subgraph: int = 0):
        """DataFrame of ops; see :func:`toolkit.tables.ops_table`."""
        from toolkit.tables import ops_table

        return ops_table(self, subgraph)

    def tensors_table(self, subgraph: int = 0):
        """DataFrame of tensors; see :func:`toolkit.tables.tensors_table`."""
        from toolkit.tables import tensors_table

        return tensors_table(self, subgraph)

    def origins_table(self, subgraph: int = 0):
        """DataFrame of (op, origin) pairs; see :func:`toolkit.tables.origins_table`."""
        from toolkit.tables import origins_table

        return origins_table(self, subgraph)

    def __repr__(self) -> str:
        g = self.graph
        return (f"<Model {self.format} {len(self.subgraphs)} subgraph(s), "
                f"{len(g)} ops, {len(g._tensors)} tensors>")

    def _repr_html_(self) -> str:
        """Rich view: summary line, ops per type (most first), the largest tensors."""
        from toolkit.reprs import html_bars, html_table, html_view

        ops = self.ops_table()
        kinds = (ops.groupby("op_type").size().rename("ops").reset_index()
                 .sort_values("ops", ascending=False, kind="stable"))
        tensors = self.tensors_table()[["name", "kind", "dtype", "shape", "bytes"]]
        g = self.graph
        summary = (f"{self.format}, {len(self.subgraphs)} subgraph(s), {len(g)} ops of "
                   f"{len(kinds)} types, {len(g._tensors)} tensors, origin tables: "
                   f"{'yes' if self.had_origin_tables else 'no'}"
                   + (f", from {self.path}" if self.path else ""))
        top = kinds.head(8)
        return html_view("Model", summary, [
            ("ops per type", html_table(kinds, "ops", 8)),
            ("largest tensors", html_table(tensors, "bytes", 5)),
        ], figure=html_bars(top["op_type"].tolist(), top["ops"].tolist(), unit=" ops",
                            title="ops per type"))
