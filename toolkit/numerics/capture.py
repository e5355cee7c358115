"""Capture the intermediate tensors of one execution, each with its producing op and layers.

:func:`capture` runs a model once and keeps every tensor it can read back:

- ``"reference"``: the toolkit's NumPy runtime, every graph input and op output (a compiled
  model: every command's output, a striped one once whole; a partition chain: every part's
  tensors, see :func:`toolkit.runtime.chain`), through
  :meth:`~toolkit.runtime.interpreter.Interpreter.invoke_observed`;
- ``"litert"``: LiteRT's builtin kernels (no delegate) with
  ``experimental_preserve_all_tensors=True``, every tensor of the ``.tflite``;
- ``"onnxruntime"``: ONNX Runtime with every node output added as a graph output (graph
  optimisations off, so every node runs as written);
- ``"native"``: the generated C++ artifact (see :mod:`toolkit.generator`), generated again
  as a debug build (``codegen(..., debug=True)``) that copies every step's outputs into
  buffers given through its C ABI, built (the build cache makes a second capture cheap) and
  run once; a compiled model's every command output, a striped op's once whole.

Each tensor is a :class:`TensorRecord`: its producing op (kind, name, position), origin ids,
origin names and the original layers, read through ``model.origin(oid).layers``. Quantized
tensors are kept raw (their int8/int16 values) with their scales and zero points, and
dequantized on demand (:meth:`Capture.value`). Arrays live in a
:class:`~toolkit.numerics.store.TensorStore` that spills to disk past ``budget_bytes``.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.errors import NumericsError, RuntimeInputError
from toolkit.ir import Model, Op, Tensor
from toolkit.numerics.store import DEFAULT_BUDGET_BYTES, TensorStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Capture", "TensorRecord", "capture", "RUNTIMES", "TENSOR_COLUMNS"]

RUNTIMES = ("reference", "litert", "onnxruntime", "native")

TENSOR_COLUMNS = ["tensor", "order", "op_kind", "op_name", "part", "origins", "layers",
                  "shape", "dtype", "quantized", "is_input", "is_output", "spilled"]
"""Columns of :meth:`Capture.table`."""


@dataclass(frozen=True)
class TensorRecord:
    """One captured tensor.

    ``order`` is its position in execution order (graph inputs first); ``op`` the op that
    produced it (None for a graph input), ``op_inputs`` the names of that op's non-constant
    inputs; ``origins`` its origin ids, ``origin_names`` their :attr:`Origin.name`,
    ``layers`` the original layers of those origins (in origin order, without repeats);
    ``part`` the partition part (from 1) that ran it, None outside a chain; ``scale``,
    ``zero_point`` and ``axis`` its affine quantization (None when not quantized).
    """

    name: str
    order: int
    op: Op | None
    op_inputs: tuple[str, ...]
    origins: tuple[int, ...]
    origin_names: tuple[str, ...]
    layers: tuple[str, ...]
    part: int | None
    shape: tuple[int, ...]
    dtype: str
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    axis: int = 0
    is_input: bool = False
    is_output: bool = False

    @property
    def op_kind(self) -> str | None:
        """The producing op's kind (None for a graph input)."""
        return None if self.op is None else self.op.kind

    @property
    def quantized(self) -> bool:
        """True when the raw values are integers with an affine quantization."""
        return self.scale is not None


def _record(t: Tensor, model: Model, order: int, part: int | None, *, is_input: bool,
            is_output: bool) -> TensorRecord:
    op = None if is_input else t.producer
    oids = tuple(sorted(op.origins)) if op is not None else ()
    recs = [model.origin(o) for o in oids]
    layers = tuple(dict.fromkeys(layer for r in recs for layer in r.layers))
    q = t.quant
    quant = (q is not None and q.scale is not None and q.scale.size > 0
             and t.dtype is not None and np.issubdtype(t.dtype, np.integer))
    ins = () if op is None else tuple(x.name for x in op.inputs
                                      if x is not None and not x.is_const)
    return TensorRecord(
        t.name, order, op, ins, oids, tuple(r.name for r in recs), layers, part,
        tuple(t.shape), str(t.dtype) if t.dtype is not None else t.type_name,
        np.asarray(q.scale, np.float64) if quant and q is not None else None,
        np.asarray(q.zero_point, np.int64) if quant and q is not None else None,
        int(q.quantized_dimension) if quant and q is not None else 0,
        is_input, is_output)


class Capture:
    """The intermediate tensors of one execution, keyed by tensor name.

    Attributes:
        model: the model whose origins name the layers (a chain: its source model, or its
            first part when the source is not at hand).
        runtime: ``"reference"``, ``"litert"``, ``"onnxruntime"`` or ``"native"``.
        inputs: the graph inputs it ran on, by name.
        records: :class:`TensorRecord` by tensor name, in execution order.
        store: the :class:`~toolkit.numerics.store.TensorStore` of the raw arrays.
        source: what was run (a path, ``"<Model>"``, ``"<CompiledModel>"`` ...).
    """

    def __init__(self, model: Model, runtime: str, store: TensorStore, source: str,
                 compiled: Any = None) -> None:
        self.model = model
        self.runtime = runtime
        self.store = store
        self.source = source
        self.compiled = compiled
        self.records: dict[str, TensorRecord] = {}
        self.inputs: dict[str, np.ndarray] = {}
        self.outputs: list[str] = []
        self.missing: dict[str, str] = {}

    # ---------------------------------------------------------------- building
    def add(self, rec: TensorRecord, value: np.ndarray) -> None:
        """Store ``value`` as tensor ``rec.name`` (a later value of the same name replaces
        the record, not the first array: names are unique within one execution)."""
        if rec.name in self.records:
            return
        a = np.asarray(value)
        if tuple(a.shape) != rec.shape or str(a.dtype) != rec.dtype:
            rec = _replace(rec, shape=tuple(a.shape), dtype=str(a.dtype))  # the value's
        self.records[rec.name] = rec
        self.store.put(rec.name, a)
        if rec.is_input:
            self.inputs[rec.name] = np.array(a)

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return len(self.records)

    def __contains__(self, name: object) -> bool:
        return name in self.records

    def __iter__(self) -> Any:
        return iter(self.records)

    def __getitem__(self, name: str) -> np.ndarray:
        """The raw array of tensor ``name`` (quantized values as stored)."""
        if name not in self.records:
            raise NumericsError(f"no tensor {name!r} in this capture", where=self.source,
                                fix="capture.table() lists the tensors captured")
        return self.store.get(name)

    def value(self, name: str, dequantize: bool = True) -> np.ndarray:
        """Tensor ``name`` as float64 (``scale * (q - zero_point)`` for a quantized one,
        per channel along its axis), or raw when ``dequantize=False``."""
        raw = self[name]
        if not dequantize:
            return raw
        rec = self.records[name]
        if rec.scale is None or rec.zero_point is None:
            return np.asarray(raw, dtype=np.float64)
        return dequantize_array(raw, rec.scale, rec.zero_point, rec.axis)

    def table(self) -> pd.DataFrame:
        """One row per tensor captured, in execution order: columns :data:`TENSOR_COLUMNS`
        (``origins`` and ``layers`` are tuples, ``part`` is ``<NA>`` outside a chain,
        ``spilled`` says whether its array lives on disk)."""
        import pandas as pd

        rows = [{"tensor": r.name, "order": r.order, "op_kind": r.op_kind,
                 "op_name": None if r.op is None else r.op.name, "part": r.part,
                 "origins": r.origins, "layers": r.layers, "shape": r.shape, "dtype": r.dtype,
                 "quantized": r.quantized, "is_input": r.is_input, "is_output": r.is_output,
                 "spilled": self.store.spilled(r.name)} for r in self.records.values()]
        df = pd.DataFrame(rows, columns=TENSOR_COLUMNS)
        return df.astype({"part": "Int64", "order": "int64"})

    def _repr_html_(self) -> str:
        """Rich view: summary line and the largest tensors captured."""
        from toolkit.reprs import html_table, html_view

        df = self.table()
        df["bytes"] = [self.store.get(n).nbytes for n in df["tensor"]]
        return html_view("Capture", repr(self)[1:-1], [
            ("largest tensors", html_table(
                df[["tensor", "op_kind", "layers", "shape", "dtype", "bytes", "spilled"]],
                "bytes", 8))])

    def close(self) -> None:
        """Drop the arrays (and the spill folder)."""
        self.store.close()

    def __repr__(self) -> str:
        disk = self.store.disk_bytes
        return (f"<Capture {self.runtime} {self.source}: {len(self.records)} tensors, "
                f"{self.store.ram_bytes / 1e6:.1f} MB in RAM"
                + (f", {disk / 1e6:.1f} MB spilled" if disk else "") + ">")


def dequantize_array(raw: np.ndarray, scale: np.ndarray, zero_point: np.ndarray,
                     axis: int) -> np.ndarray:
    """``scale * (raw - zero_point)`` as float64; per channel along ``axis`` when there is
    more than one scale."""
    q = np.asarray(raw, dtype=np.float64)
    if scale.size == 1:
        return (q - float(zero_point.reshape(-1)[0])) * float(scale.reshape(-1)[0])
    shape = [1] * q.ndim
    shape[axis] = -1
    return (q - zero_point.reshape(shape)) * scale.reshape(shape)


# ------------------------------------------------------------------------ inputs
def ordered_inputs(graph_inputs: list[Tensor], inputs: Any, where: str) -> list[np.ndarray]:
    """``inputs`` (dict by name, list in order, one array) as arrays in graph-input order,
    checked against each input's dtype and static shape (RuntimeInputError otherwise)."""
    names = [t.name for t in graph_inputs]
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise RuntimeInputError(f"inputs do not match the model: unknown {unknown}, "
                                    f"missing {missing}", where=where,
                                    fix=f"pass one array per model input: {names}")
        arrays = [inputs[n] for n in names]
    elif isinstance(inputs, (list, tuple)):
        if len(inputs) != len(names):
            raise RuntimeInputError(f"got {len(inputs)} input(s), the model has {len(names)}",
                                    where=where, fix=f"inputs are {names}")
        arrays = list(inputs)
    else:
        raise RuntimeInputError(f"inputs must be a dict, a list or an array, not "
                                f"{type(inputs).__name__}", where=where,
                                fix="pass a dict {input name: array}")
    out = []
    for t, a in zip(graph_inputs, arrays):
        a = np.asarray(a)
        if t.dtype is not None and a.dtype != t.dtype:
            raise RuntimeInputError(f"input {t.name!r} has dtype {a.dtype}, the model expects "
                                    f"{t.dtype}", where=where,
                                    fix=f"cast with .astype(np.{t.dtype})")
        sig = t.shape_signature or t.shape
        if a.ndim != len(t.shape) or any(d != e and s >= 0
                                         for d, e, s in zip(a.shape, t.shape, sig)):
            raise RuntimeInputError(f"input {t.name!r} has shape {list(a.shape)}, the model "
                                    f"expects {list(sig)}", where=where,
                                    fix="give the input the model's shape")
        out.append(np.ascontiguousarray(a))
    return out


def random_inputs(graph_inputs: list[Tensor], seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs (floats in [-1, 1), integers over int8's range), seed ``seed``."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for t in graph_inputs:
        dt = t.dtype
        if dt is None:
            raise RuntimeInputError(f"input {t.name!r} has type {t.type_name}",
                                    fix="pass the inputs yourself")
        if np.issubdtype(dt, np.floating):
            out[t.name] = rng.uniform(-1, 1, t.shape).astype(dt)
        else:
            info = np.iinfo(dt)
            out[t.name] = rng.integers(max(info.min, -128), min(info.max, 127) + 1,
                                       t.shape).astype(dt)
    return out


# ------------------------------------------------------------------------ runtimes
def _capture_reference(model: Any, inputs: Any, cap: Capture, part: int | None = None,
                       first_order: int = 0) -> dict[str, np.ndarray]:
    from toolkit.runtime.interpreter import Interpreter

    it = Interpreter(model, threads=None)
    m = it.model
    g = m.graph
    outs = {t.name for t in g.outputs}
    ins = {t.name for t in g.inputs}
    order = [first_order]

    def observe(t: Tensor, value: np.ndarray) -> None:
        if t.name in cap.records:  # a chain part's input, captured where it was made
            return
        cap.add(_record(t, m, order[0], part, is_input=part is None and t.name in ins,
                        is_output=t.name in outs), value)
        order[0] += 1

    if inputs is None:
        inputs = it.random_inputs()
    return it.invoke_observed(inputs, observe)


def _capture_chain(conn: Any, inputs: Any, store: TensorStore, source_name: str) -> Capture:
    from toolkit.runtime.chain import _bind, _feed, _stages, _take

    stages, c, source = _stages(conn)
    cap = Capture(source if source is not None else stages[0].model, "reference", store,
                  source_name)
    env = _bind(inputs, list(c.source.inputs), source)
    where = c.path or "<connection>"
    for s in stages:
        feed = _feed(s, env, where)
        for name, a in feed.items():
            if name not in cap.records:  # a source input
                cap.add(_record(s.model.graph.tensor(name), s.model, len(cap.records), None,
                                is_input=True, is_output=False), a)
        out = _capture_reference(s.model, feed, cap, part=s.index,
                                 first_order=len(cap.records))
        _take(s, out, env, where)
    cap.outputs = list(c.source.outputs)
    for n in cap.outputs:
        if n in cap.records:
            cap.records[n] = _replace(cap.records[n], is_output=True)
    return cap


def _replace(rec: TensorRecord, **kw: Any) -> TensorRecord:
    from dataclasses import replace

    return replace(rec, **kw)


def _capture_litert(model: Model, path: str | None, inputs: Any, cap: Capture) -> None:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    g = model.graph
    arrays = ordered_inputs(list(g.inputs), random_inputs(list(g.inputs))
                            if inputs is None else inputs, "tk.capture(runtime='litert')")
    kind = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path is not None and path.lower().endswith(".tflite"):
            it = Interpreter(model_path=path, num_threads=1,
                             experimental_preserve_all_tensors=True,
                             experimental_op_resolver_type=kind)
        else:
            from toolkit.formats.flatbuffer_write import write_model

            it = Interpreter(model_content=bytes(write_model(model, "tflite")), num_threads=1,
                             experimental_preserve_all_tensors=True,
                             experimental_op_resolver_type=kind)
    it.allocate_tensors()
    by_name: dict[str, int] = {}
    for d in it.get_tensor_details():
        by_name.setdefault(d["name"], d["index"])
    for d, a in zip(it.get_input_details(), arrays):
        it.set_tensor(d["index"], a)
    it.invoke()
    _collect(model, cap, lambda name: it.get_tensor(by_name[name]) if name in by_name
             else None, "LiteRT has no tensor of that name")


def _collect(model: Model, cap: Capture, read: Any, reason: str) -> None:
    """Add the graph inputs and every op output of ``model`` that ``read(name)`` returns."""
    g = model.graph
    outs = {t.name for t in g.outputs}
    for t in g.inputs:
        cap.add(_record(t, model, len(cap.records), None, is_input=True,
                        is_output=t.name in outs), read(t.name))
    for op in g.ops:
        for t in op.outputs:
            value = read(t.name)
            if value is None:
                cap.missing[t.name] = reason
                continue
            cap.add(_record(t, model, len(cap.records), None, is_input=False,
                            is_output=t.name in outs), value)
    cap.outputs = [t.name for t in g.outputs]


def _capture_ort(path: str, model: Model, inputs: Any, cap: Capture) -> None:
    import onnx

    from toolkit.runtime.onnxruntime import _ort

    ort = _ort()
    proto = onnx.load(path)
    have = {o.name for o in proto.graph.output}
    for node in proto.graph.node:
        for name in node.output:
            if name and name not in have:
                proto.graph.output.append(onnx.ValueInfoProto(name=name))
                have.add(name)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    g = model.graph
    arrays = ordered_inputs(list(g.inputs), random_inputs(list(g.inputs))
                            if inputs is None else inputs, "tk.capture(runtime='onnxruntime')")
    names = [o.name for o in sess.get_outputs()]
    try:
        got = sess.run(names, {t.name: a for t, a in zip(g.inputs, arrays)})
    except Exception as e:  # ORT's own error type; its message says what failed
        raise NumericsError(f"ONNX Runtime failed with every node output made a graph output: "
                            f"{e}", where=Path(path).name,
                            fix="capture the model before ONNX Runtime's layout optimisations "
                                "(an .onnx saved with optimization 'extended' or lower)"
                            ) from None
    values = dict(zip(names, got))
    feeds = {t.name: a for t, a in zip(g.inputs, arrays)}
    _collect(model, cap, lambda name: feeds.get(name, values.get(name)),
             "ONNX Runtime returned no value of that name")


def _native_target(model: Any) -> tuple[Any, Any]:
    """What a native capture generates from: ``(Model or CompiledModel, debug Artifact or
    None)``; an artifact gives the model it was generated from (a debug artifact is run as
    it is)."""
    from toolkit.generator import Artifact, is_artifact_dir, load_artifact
    from toolkit.model_arg import resolve_model

    art = model if isinstance(model, Artifact) else None
    if art is None and isinstance(model, (str, os.PathLike)) and Path(model).is_dir() \
            and is_artifact_dir(model):
        art = load_artifact(model)
    if art is not None:
        if art.model is None:
            raise NumericsError("a native capture needs the model the artifact was generated "
                                "from (its tensors' ops and layers); an artifact loaded from "
                                "its folder does not hold it", where=str(art.out_dir),
                                fix="pass the model (or the Artifact tk.codegen returned); the "
                                    "capture generates its own debug build")
        return art.model, art if art.debug else None
    arg = resolve_model(model, purpose="tk.capture(runtime='native')",
                        accept=("model", "compiled"))
    return arg.value, None


def _native_fn(lib: Any, name: str, args: list[Any], res: Any = ctypes.c_int) -> Any:
    fn = getattr(lib, name)
    fn.argtypes = args
    fn.restype = res
    return fn


def _capture_native(obj: Any, art: Any, inputs: Any, cap: Capture) -> None:
    """Run a debug build of ``obj`` (``art``, or one generated and built in a temporary
    folder) once through its C ABI and add every tensor it copied out."""
    import shutil
    import tempfile

    from toolkit.generator import codegen

    m = cap.model
    g = m.graph
    arrays = ordered_inputs(list(g.inputs), random_inputs(list(g.inputs))
                            if inputs is None else inputs, "tk.capture(runtime='native')")
    tmp = None
    try:
        if art is None:
            tmp = tempfile.mkdtemp(prefix="tk-native-capture-")
            art = codegen(obj, tmp, name="capture", debug=True)
        art.build()
        lib = ctypes.CDLL(str(art.library))
        p, vp, err = art.cname, ctypes.c_void_p, ctypes.create_string_buffer(2048)
        create = _native_fn(lib, f"{p}_create", [ctypes.c_char_p, ctypes.c_char_p,
                                                 ctypes.c_int], vp)
        destroy = _native_fn(lib, f"{p}_destroy", [vp], None)
        set_input = _native_fn(lib, f"{p}_set_input", [vp, ctypes.c_int, vp, ctypes.c_int64,
                                                       ctypes.c_char_p, ctypes.c_int])
        run = _native_fn(lib, f"{p}_run", [vp, ctypes.c_int, ctypes.c_char_p, ctypes.c_int])
        buffers = _native_fn(lib, f"{p}_debug_buffers", [vp, vp])
        specs = art.manifest["debug_tensors"]
        outs = [np.empty(d["shape"], np.dtype(d["dtype"])) for d in specs]
        table = (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs])
        handle = create(str(art.params).encode(), err, len(err))
        if not handle:
            raise NumericsError(f"the debug build cannot start: {err.value.decode()}",
                                where=str(art.out_dir), fix="generate it again")
        try:
            for k, a in enumerate(arrays):
                if set_input(handle, k, a.ctypes.data, a.nbytes, err, len(err)):
                    raise RuntimeInputError(err.value.decode(), where=f"input {k}",
                                            fix="pass arrays of the model's input shapes")
            buffers(handle, ctypes.cast(table, vp))
            if run(handle, 1, err, len(err)):
                raise NumericsError(f"the native inference failed: {err.value.decode()}",
                                    where=str(art.library),
                                    fix="run the model in the reference runtime to compare")
        finally:
            destroy(handle)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    values = {t.name: a for t, a in zip(g.inputs, arrays)}
    values.update({d["name"]: a for d, a in zip(specs, outs)})
    _collect(m, cap, values.get, "the native artifact writes no tensor of that name")


def capture(model: Any, inputs: Any = None, *, runtime: str | None = None,
            budget_bytes: int | None = DEFAULT_BUDGET_BYTES) -> Capture:
    """Run ``model`` once on ``inputs`` and keep every intermediate tensor it can read back.

    Args:
        model: a Model, a CompiledModel, a PartitionResult or connection file (its parts
            chained, every part's tensors), or a path (``.tflite``/``.circle``, ``.onnx``).
        inputs: a dict name -> array, a list in input order, one array; None: random inputs
            (seed 0).
        runtime: ``"reference"`` (default, every tensor), ``"litert"`` (a ``.tflite``/
            ``.circle`` or Model), ``"onnxruntime"`` (an ``.onnx`` path; the default for one),
            ``"native"`` (a debug build of the generated C++: a Model, CompiledModel, path,
            or an :class:`~toolkit.generator.Artifact` generated from one).
        budget_bytes: tensor bytes kept in RAM; past it, arrays spill to ``.npy`` files read
            memory-mapped (None: never spill).

    Returns:
        A :class:`Capture`.

    Raises:
        NumericsError: an unknown runtime, or a model the runtime cannot run.
        RuntimeInputError: inputs of the wrong names, shapes or dtypes.
    """
    from toolkit.model_arg import resolve_model

    if runtime not in (None, *RUNTIMES):
        raise NumericsError(f"unknown runtime {runtime!r}", where="tk.capture",
                            fix=f"pass one of {RUNTIMES}")
    store = TensorStore(budget_bytes)
    path = str(model) if isinstance(model, (str, os.PathLike)) else None
    if path is not None and path.lower().endswith(".onnx"):
        if runtime not in (None, "onnxruntime"):
            raise NumericsError(f"an .onnx model runs in ONNX Runtime, not {runtime!r}",
                                where="tk.capture", fix="pass runtime='onnxruntime'")
        from toolkit.importers.onnx import load_onnx

        m = load_onnx(path)
        cap = Capture(m, "onnxruntime", store, Path(path).name)
        _capture_ort(path, m, inputs, cap)
        return cap
    if runtime == "onnxruntime":
        raise NumericsError("runtime='onnxruntime' captures an .onnx file",
                            where="tk.capture", fix="pass the path of the .onnx model")
    if runtime == "native":
        from toolkit.compiler.compiled import model_and_commands

        obj, art = _native_target(model)
        m, _ = model_and_commands(obj, "tk.capture")
        named = path or getattr(m, "path", None)
        cap = Capture(m, "native", store, Path(named).name if named else
                      f"<{type(model).__name__}>", compiled=obj if obj is not m else None)
        _capture_native(obj, art, inputs, cap)
        return cap
    arg = resolve_model(model, purpose="tk.capture")
    named = path or getattr(arg.value, "path", None)
    source = Path(named).name if named else f"<{type(arg.value).__name__}>"
    if runtime == "litert":
        if arg.kind not in ("model",):
            raise NumericsError(f"LiteRT runs a .tflite model, not a {arg.kind}",
                                where="tk.capture",
                                fix="pass the .tflite path or a Model, or runtime='reference'")
        m = arg.value
        cap = Capture(m, "litert", store, source)
        _capture_litert(m, path or m.path, inputs, cap)
        return cap
    if arg.kind in ("connection", "partition"):
        return _capture_chain(arg.value, inputs, store, source)
    from toolkit.compiler.compiled import model_and_commands

    m, _ = model_and_commands(arg.value, "tk.capture")
    cap = Capture(m, "reference", store, source,
                  compiled=arg.value if arg.value is not m else None)
    _capture_reference(arg.value, inputs, cap)
    cap.outputs = [t.name for t in m.graph.outputs]
    return cap
