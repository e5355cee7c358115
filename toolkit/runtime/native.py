"""Run a generated C++ artifact (see :mod:`toolkit.generator`) through its C ABI with ctypes.

:class:`NativeModel` loads the artifact's shared library (building it first when it is not
built), creates the model from its parameters file and runs inferences;
:func:`run_native` is the one-call form. A traced run returns the artifact's own events (its
tracer: steady-clock nanoseconds, the same clock as :func:`time.perf_counter_ns` on Linux) in
an :class:`~toolkit.runtime.tracer.EventTracer`, with the keys and arguments of the reference
runtime's events (``op_index``, ``op_type``, ``op_name`` for a plain model; ``command_id``,
``optimised_id``, ``stripe``, ``op_type``, ``op_name`` for a compiled one), so
:func:`toolkit.trace.join.join.trace_join` attributes native time to the original layers.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import RuntimeInputError, ToolkitError
from toolkit.generator import Artifact, load_artifact
from toolkit.runtime.result import RunResult
from toolkit.runtime.tracer import EventTracer

__all__ = ["NativeModel", "Session", "native_runner", "open_native", "run_native", "session"]

_ERR = 2048
_I64P = ctypes.POINTER(ctypes.c_int64)
_I32P = ctypes.POINTER(ctypes.c_int32)


def _as_artifact(obj: Artifact | str | os.PathLike[str]) -> Artifact:
    if isinstance(obj, Artifact):
        return obj
    return load_artifact(obj)


def _loadable(a: Artifact) -> Path:
    """A path of the artifact's library unique to this build: the dynamic loader keeps a
    library loaded by its path, so a rebuilt artifact loaded again in the same process must
    come from a new path (a hard link, else a copy, in ``out_dir/.loaded/``)."""
    lib = a.library.resolve()
    stamp = f"{a.manifest['model_hash']}.{lib.stat().st_mtime_ns}"
    unique = lib.parent / ".loaded" / f"{lib.stem}.{stamp}{lib.suffix}"
    if not unique.exists():
        unique.parent.mkdir(exist_ok=True)
        tmp = unique.with_name(f".{unique.name}.{os.getpid()}.tmp")
        try:
            os.link(lib, tmp)
        except OSError:
            shutil.copyfile(lib, tmp)
        os.replace(tmp, unique)
    return unique


def _check_input(name: str, dt: np.dtype, shape: tuple[int, ...], a: np.ndarray) -> None:
    """RuntimeInputError when ``a`` has another dtype or shape than input ``name``."""
    if a.dtype != dt:
        raise RuntimeInputError(f"input {name!r} has dtype {a.dtype}, the model expects "
                                f"{dt}", where=f"input {name!r}",
                                fix=f"cast with .astype(np.{dt})")
    if a.shape != shape:
        raise RuntimeInputError(f"input {name!r} has shape {list(a.shape)}, the model "
                                f"expects {list(shape)}", where=f"input {name!r}",
                                fix="shapes are fixed when the artifact is generated: "
                                    "pass that shape, or generate it again for this one")


#: what to do when the artifact's inference reports an error (its message says which step)
_FAILED_FIX = ("the message names the step that failed; check the inputs, generate and build "
               "the artifact again from the model (tk.codegen, artifact.build()), and run the "
               "model in the reference runtime (tk.run) to compare")

class NativeModel:
    """A loaded artifact: ``invoke(inputs)`` runs inferences and returns outputs by name.

    Args:
        artifact: an :class:`~toolkit.generator.Artifact` or its directory.
        params: another parameters file to load (default: the artifact's).
        threads: threads splitting the rows of the large windowed ops (default: the
            artifact's, ``codegen(..., threads=)``); results do not depend on it.

    A NativeModel must not run in two threads at once (its buffers and tracer are its own;
    two NativeModels of one artifact may).
    """

    def __init__(self, artifact: Artifact | str | os.PathLike[str],
                 params: str | os.PathLike[str] | None = None, threads: int | None = None
                 ) -> None:
        self._handle: int | None = None
        self._session: Session | None = None
        self.artifact = a = _as_artifact(artifact)
        if not a.built:
            a.build()
        self._lib = lib = ctypes.CDLL(str(_loadable(a)))
        p = a.cname
        self._create = getattr(lib, f"{p}_create")
        self._create.restype = ctypes.c_void_p
        self._create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
        self._destroy = getattr(lib, f"{p}_destroy")
        self._destroy.argtypes = [ctypes.c_void_p]
        self._set = getattr(lib, f"{p}_set_input")
        self._set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.c_char_p, ctypes.c_int]
        self._get = getattr(lib, f"{p}_get_output")
        self._get.argtypes = self._set.argtypes
        self._invoke = getattr(lib, f"{p}_invoke")
        self._invoke.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_char_p, ctypes.c_int]
        # the borrowed inference: arguments passed as ready ctypes objects (no conversion)
        self._borrowed = getattr(lib, f"{p}_invoke_borrowed")
        self._set_threads = getattr(lib, f"{p}_set_threads")
        self._set_threads.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self._run = getattr(lib, f"{p}_run")
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self._trace_enable = getattr(lib, f"{p}_trace_enable")
        self._trace_enable.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        self._trace_count = getattr(lib, f"{p}_trace_count")
        self._trace_count.argtypes = [ctypes.c_void_p]
        self._trace_count.restype = ctypes.c_int64
        self._trace_dropped = getattr(lib, f"{p}_trace_dropped")
        self._trace_dropped.argtypes = [ctypes.c_void_p]
        self._trace_dropped.restype = ctypes.c_int64
        self._trace_read = getattr(lib, f"{p}_trace_read")
        self._trace_read.argtypes = [ctypes.c_void_p, _I32P, _I64P, _I64P, ctypes.c_int64]
        self._trace_read.restype = ctypes.c_int64
        self._err = ctypes.create_string_buffer(_ERR)
        path = Path(params) if params is not None else a.params
        handle = self._create(str(path).encode(), self._err, _ERR)
        if not handle:
            raise ToolkitError(f"cannot load the parameters: {self._message()}",
                               where=str(path),
                               fix="use the .params file generated with this code")
        self._handle = handle
        self._handle_arg = ctypes.c_void_p(handle)
        self.threads = int(a.manifest.get("threads", 1))
        if threads is not None:
            self.set_threads(threads)
        m = a.manifest
        self._inputs = [(i["name"], np.dtype(i["dtype"]), tuple(i["shape"]))
                        for i in m["inputs"]]
        self._outputs = [(o["name"], np.dtype(o["dtype"]), tuple(o["shape"]))
                         for o in m["outputs"]]
        # staging arrays of invoke(), their addresses in the pointer arrays given to the C ABI
        self._in_stage = [np.empty(shape, dt) for _, dt, shape in self._inputs]
        self._out_stage = [np.empty(shape, dt) for _, dt, shape in self._outputs]
        self._in_ptrs = (ctypes.c_void_p * max(len(self._inputs), 1))(
            *[a.ctypes.data for a in self._in_stage])
        self._out_ptrs = (ctypes.c_void_p * max(len(self._outputs), 1))(
            *[a.ctypes.data for a in self._out_stage])
        self.keys = [int(s["key"]) for s in m["steps"]]
        self.args = [dict(s["args"]) for s in m["steps"]]

    def _message(self) -> str:
        return self._err.value.decode(errors="replace")

    def set_threads(self, threads: int) -> None:
        """Split the rows of the large windowed ops across ``threads`` threads (a pool kept
        until the next change; 1: the calling thread alone). Results do not change."""
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256:
            raise ToolkitError(f"threads must be an int from 1 to 256, got {threads!r}",
                               where="NativeModel.set_threads",
                               fix="pass 1 (one core) or the number of cores to use")
        if threads != self.threads:
            self._set_threads(self._alive(), threads)
            self.threads = threads

    def session(self) -> Session:
        """The :class:`Session` of this model (preallocated outputs, for loops), made at the
        first call and kept."""
        if self._session is None:
            self._session = Session(self)
        return self._session

    def close(self) -> None:
        """Free the native model (also done when the object is collected)."""
        if self._handle is not None:
            self._destroy(self._handle)
            self._handle = None

    def __del__(self) -> None:
        self.close()

    def _alive(self) -> int:
        if self._handle is None:
            raise ToolkitError("the native model was closed", fix="create a new NativeModel")
        return self._handle

    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Random inputs as the reference runtime makes them (float in [-1, 1), integers in
        the int8 range)."""
        rng = np.random.default_rng(seed)
        out = {}
        for name, dt, shape in self._inputs:
            if np.issubdtype(dt, np.floating):
                out[name] = rng.uniform(-1, 1, shape).astype(dt)
            else:
                info = np.iinfo(dt)
                out[name] = rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape,
                                         endpoint=False).astype(dt)
        return out

    def _ordered(self, inputs: Any) -> list[Any]:
        """The inputs (dict by name, list in order, or one array) as a list in input order;
        RuntimeInputError for unknown, missing or extra inputs."""
        specs = self._inputs
        if type(inputs) is dict and len(inputs) == len(specs):
            try:
                return [inputs[n] for n, _, _ in specs]
            except KeyError:
                pass  # named below
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - {n for n, _, _ in specs})
            if unknown:
                raise RuntimeInputError(f"unknown input name(s) {unknown}", where="inputs",
                                        fix=f"the model's inputs are {[n for n, _, _ in specs]}")
            missing = [n for n, _, _ in specs if n not in inputs]
            if missing:
                raise RuntimeInputError(f"missing input(s) {missing}", where="inputs",
                                        fix="pass one array per input of the artifact, by name "
                                            "(its manifest lists them)")
            return [inputs[n] for n, _, _ in specs]
        arrays = list(inputs)
        if len(arrays) != len(specs):
            raise RuntimeInputError(f"got {len(arrays)} input(s), the model has "
                                    f"{len(specs)}",
                                    fix=f"inputs are {[n for n, _, _ in specs]}")
        return arrays

    def set_inputs(self, inputs: Any) -> None:
        """Check and copy the inputs (dict by name, list in order, or one array) in."""
        h = self._alive()
        for k, ((name, dt, shape), a) in enumerate(zip(self._inputs, self._ordered(inputs))):
            a = np.asarray(a)
            _check_input(name, dt, shape, a)
            a = np.ascontiguousarray(a)
            self.set_raw(k, a.ctypes.data, a.nbytes, h)

    def set_raw(self, index: int, address: int, nbytes: int, handle: int | None = None) -> None:
        """Copy ``nbytes`` at ``address`` into input ``index`` through the C ABI, which
        checks the size (RuntimeInputError with the artifact's message when it differs)."""
        h = handle if handle is not None else self._alive()
        rc = self._set(h, index, address, nbytes, self._err, _ERR)
        if rc != 0:
            raise RuntimeInputError(self._message(), where=f"input {index} (C ABI)",
                                    fix="pass an array of the input's shape and dtype")

    def outputs(self) -> dict[str, np.ndarray]:
        """The outputs of the last inference, by name (copies)."""
        h = self._alive()
        out = {}
        for k, (name, dt, shape) in enumerate(self._outputs):
            a = np.empty(shape, dtype=dt)
            rc = self._get(h, k, a.ctypes.data, a.nbytes, self._err, _ERR)
            if rc != 0:
                raise ToolkitError(self._message(), where=f"output {name!r}",
                                   fix="read the outputs after an inference, by the names "
                                       "of the artifact's manifest")
            out[name] = a
        return out

    def invoke(self, inputs: Any) -> dict[str, np.ndarray]:
        """One inference: the inputs (as for :meth:`set_inputs`) in, new output arrays by
        name out. A dict of arrays of the inputs' dtypes and shapes is copied into staging
        arrays whose addresses the C ABI already holds, and goes through one call of it;
        wrong inputs raise as in :meth:`set_inputs`."""
        h = self._alive()
        if not isinstance(inputs, Mapping) or len(inputs) != len(self._inputs):
            self.set_inputs(inputs)  # checks (raises for a wrong input)
            self.run(1)
            return self.outputs()
        for (name, dt, shape), staging in zip(self._inputs, self._in_stage):
            a = inputs.get(name)
            if not (isinstance(a, np.ndarray) and a.dtype == dt and a.shape == shape):
                self.set_inputs(inputs)  # raises for a wrong input
                a = np.asarray(inputs[name])
            np.copyto(staging, a)
        if self._invoke(h, self._in_ptrs, self._out_ptrs, self._err, _ERR) != 0:
            raise ToolkitError(f"the native inference failed: {self._message()}",
                               where=str(self.artifact.library), fix=_FAILED_FIX)
        return {name: o.copy() for (name, _, _), o in zip(self._outputs, self._out_stage)}

    def run(self, repeat: int = 1) -> None:
        """Run ``repeat`` inferences on the inputs set (one native loop)."""
        rc = self._run(self._alive(), repeat, self._err, _ERR)
        if rc != 0:
            raise ToolkitError(f"the native inference failed: {self._message()}",
                               where=str(self.artifact.library), fix=_FAILED_FIX)

    def enable_trace(self, capacity: int) -> None:
        """Record up to ``capacity`` events from now on (0 turns tracing off)."""
        self._trace_enable(self._alive(), capacity)

    def events(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The recorded events: ``(keys int32, begin_ns int64, end_ns int64)``."""
        h = self._alive()
        n = int(self._trace_count(h))
        ids = np.empty(n, np.int32)
        begins = np.empty(n, np.int64)
        ends = np.empty(n, np.int64)
        self._trace_read(h, ids.ctypes.data_as(_I32P), begins.ctypes.data_as(_I64P),
                         ends.ctypes.data_as(_I64P), n)
        dropped = int(self._trace_dropped(h))
        if dropped:
            raise ToolkitError(f"the trace buffer dropped {dropped} event(s)",
                               where="native tracer", fix="enable a larger capacity")
        return ids, begins, ends

    def to_tracer(self, tracer: EventTracer | None = None) -> EventTracer:
        """The recorded events in an EventTracer, one run per inference, with the reference
        runtime's event arguments."""
        ids, begins, ends = self.events()
        tracer = tracer if tracer is not None else EventTracer()
        steps = len(self.keys)
        if steps == 0:
            return tracer
        if len(ids) % steps or (ids.reshape(-1, steps) != np.asarray(self.keys)).any():
            raise ToolkitError("native events do not follow the artifact's steps",
                               where="native tracer", fix="regenerate and rebuild the artifact")
        keys, args = self.keys, self.args
        b, e = begins.tolist(), ends.tolist()
        for r in range(len(ids) // steps):
            tracer.new_run()
            base = r * steps
            for i in range(steps):
                tracer.record(keys[i], b[base + i], e[base + i], args[i])
        return tracer


def run_native(artifact: Artifact | str | os.PathLike[str], inputs: Any = None, *,
               trace: bool = False, repeat: int = 1, warmup: int = 0,
               tracer: EventTracer | None = None, threads: int | None = None) -> RunResult:
    """Run a generated artifact natively.

    ``artifact`` is an :class:`~toolkit.generator.Artifact` or its directory (built first when
    needed), opened once per thread and kept (see :func:`open_native`). ``inputs`` as for
    ``tk.run`` (None: the same random inputs, seed 0). ``warmup`` inferences run untraced
    first; then ``repeat`` inferences run in one native loop. A ``tracer`` (implies
    ``trace``) receives the events, one run per inference. ``threads``: threads splitting the
    large windowed ops (None: the artifact's own, set by ``codegen(..., threads=)``).

    Returns:
        A :class:`~toolkit.runtime.result.RunResult` ``(outputs, trace)``: outputs by name
        (of the last inference; arrays of their own); with ``trace=True`` an EventTracer
        holding one event per step per inference (key: op index, or command id of a compiled
        model, with the reference runtime's event arguments), timed by the artifact itself;
        else None."""
    if repeat < 1 or warmup < 0:
        raise ToolkitError(f"repeat must be >= 1 and warmup >= 0, got {repeat} and {warmup}",
                           where="run_native", fix="pass repeat >= 1 and warmup >= 0")
    model = open_native(artifact, threads)
    trace = trace or tracer is not None
    if not trace and repeat == 1 and warmup == 0 and inputs is not None:
        outs = model.session()(inputs)
        return RunResult({k: v.copy() for k, v in outs.items()}, None)
    model.set_inputs(model.random_inputs() if inputs is None else inputs)
    if warmup:
        model.run(warmup)
    if not trace:
        model.run(repeat)
        return RunResult(model.outputs(), None)
    model.enable_trace(len(model.keys) * repeat)
    try:
        model.run(repeat)
        out = model.outputs()
        return RunResult(out, model.to_tracer(tracer))
    finally:
        model.enable_trace(0)


#: models opened by open_native for a directory: (path, thread) -> (model, library stamp)
_BY_PATH: dict[tuple[str, int], tuple[NativeModel, tuple[int, int]]] = {}


def _stamp(a: Artifact) -> tuple[int, int]:
    """The library's and the code's modification times (which change when either is
    written again)."""
    try:
        return a.library.stat().st_mtime_ns, a.source.stat().st_mtime_ns
    except OSError:
        return 0, 0


def open_native(artifact: Artifact | str | os.PathLike[str],
                threads: int | None = None) -> NativeModel:
    """The :class:`NativeModel` of ``artifact`` for the calling thread, opened (library
    loaded, parameters mapped, arena allocated) at its first use in the thread and kept:
    on the Artifact object until it is built again, or, for a directory, until its library
    or code changes. ``threads`` as for :func:`run_native` (the kept model is set to it)."""
    ident = threading.get_ident()
    if isinstance(artifact, Artifact):
        kept = artifact.opened
        model = kept.get(ident)
        if model is None:
            model = kept[ident] = NativeModel(artifact)
    else:
        key = (os.fspath(artifact), ident)
        hit = _BY_PATH.get(key)
        a = hit[0].artifact if hit is not None else load_artifact(artifact)
        stamp = _stamp(a)
        if hit is not None and hit[1] == stamp and a.built:
            model = hit[0]
        else:
            if hit is not None:
                a = load_artifact(artifact)
            model = NativeModel(a)
            _BY_PATH[key] = (model, _stamp(a))
    if threads is not None and threads != model.threads:
        model.set_threads(threads)
    return model


def session(artifact: Artifact | str | os.PathLike[str], threads: int | None = None
            ) -> Session:
    """A :class:`Session` of ``artifact`` on a model of its own (not shared with
    ``tk.run``), with ``threads`` threads (None: the artifact's own)."""
    return Session(NativeModel(artifact, threads=threads))


class Session:
    """A loaded model called in a loop: ``outputs = s(x)``, or ``s(x1, x2)`` (arrays in input
    order), or ``s({"name": x})``.

    Inputs are checked (dtype and shape; RuntimeInputError as
    :meth:`NativeModel.set_inputs`) and read in place when they are C-contiguous arrays of
    the input's dtype (others are copied first). The outputs are arrays allocated once:
    every call returns the same dict :attr:`outputs` of the same arrays, overwritten by the
    next call (copy what must outlive it). Like its model, a session must not run in two
    threads at once.
    """

    def __init__(self, model: NativeModel) -> None:
        self.model = model
        self._names = [n for n, _, _ in model._inputs]
        self._specs = [(dt, shape, np.empty(shape, dt).strides) for _, dt, shape in model._inputs]
        self.outputs: dict[str, np.ndarray] = {n: np.empty(shape, dt)
                                               for n, dt, shape in model._outputs}
        arrays = list(self.outputs.values())
        self._out_addrs = frozenset(a.ctypes.data for a in arrays)
        self._in = (ctypes.c_void_p * max(len(self._specs), 1))()
        self._out = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        self._last: list[Any] = [None] * len(self._specs)  # the arrays _in points to
        self._count = len(self._specs)
        self._call = model._borrowed
        self._errlen = ctypes.c_int(_ERR)

    def __call__(self, *inputs: Any) -> dict[str, np.ndarray]:
        """One inference; returns :attr:`outputs`."""
        if len(inputs) != self._count or (inputs and type(inputs[0]) is not np.ndarray):
            inputs = tuple(self._ordered(inputs))
        last = self._last
        for k, (a, (dt, shape, strides)) in enumerate(zip(inputs, self._specs)):
            if a is not last[k] or a.shape != shape:  # a new array, or reshaped in place
                self._point(k, a, dt, shape, strides)
        m = self.model
        if self._call(m._handle_arg, self._in, self._out, m._err, self._errlen):
            raise ToolkitError(f"the native inference failed: {m._message()}",
                               where=str(m.artifact.library), fix=_FAILED_FIX)
        return self.outputs

    def _ordered(self, inputs: tuple[Any, ...]) -> list[Any]:
        """The inputs in order from one dict by name (or one list), checked by name and
        count."""
        if len(inputs) == 1 and not isinstance(inputs[0], np.ndarray):
            inputs = inputs[0]
        return self.model._ordered(inputs)

    def _point(self, k: int, a: Any, dt: np.dtype, shape: tuple[int, ...],
               strides: tuple[int, ...]) -> None:
        """Check input ``k`` and point the C ABI's input ``k`` at it (at a C-contiguous copy
        when its layout differs or it is one of the outputs)."""
        name = self._names[k]
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.shape != shape:
            a = np.asarray(a)
            _check_input(name, dt, shape, a)
        if a.strides != strides and not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        try:
            address = ctypes.addressof(ctypes.c_char.from_buffer(a)) if a.nbytes else 0
        except (TypeError, ValueError):  # read-only
            address = a.ctypes.data
        if address in self._out_addrs:  # read while the outputs are written: copy it
            a = a.copy()
            address = a.ctypes.data
        self._in[k] = address
        self._last[k] = a if a.strides == strides or a.flags.c_contiguous else None


def _on_backend(model: Any, backends: tuple[str, ...] | list[str]) -> bool:
    """Whether a part model is on one of ``backends``: by its file name
    (``<stem>.00001_<backend>.circle``) when it has one, else by its subgraph name, which the
    partitioner makes ``<graph>_<backend>``."""
    path = getattr(model, "path", None)
    if path:
        tail = Path(str(path)).name.rsplit(".", 1)[0].rsplit(".", 1)[-1]
        if "_" in tail and tail[:5].isdigit():
            return tail.split("_", 1)[1] in backends
    name = str(getattr(model.graph, "name", "") or "")
    return any(name.endswith("_" + b) for b in backends)


def native_runner(work_dir: str | Path, *, backends: tuple[str, ...] | list[str] | None = None,
                  opt: str = "-O3") -> Callable[[Any, dict[str, np.ndarray]],
                                                dict[str, np.ndarray]]:
    """A runner for :func:`toolkit.runtime.chain.run_connection` that runs parts natively.

    Each part model is generated and built once into a folder of ``work_dir`` (artifacts
    cached per model). With ``backends`` (e.g. ``["cpp"]``), only parts whose file names give
    one of them (``<stem>.00001_cpp.circle``) run natively, the others on the reference
    runtime. Returns outputs by tensor name."""
    from toolkit.generator import codegen
    from toolkit.runtime.interpreter import Interpreter

    root = Path(work_dir)
    cache: dict[int, tuple[Any, Any]] = {}

    def run(model: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        hit = cache.get(id(model))
        if hit is None or hit[0] is not model:
            if backends is not None and not _on_backend(model, backends):
                engine: Any = Interpreter(model)
            else:
                art = codegen(model, root / f"part{len(cache):03d}", name=f"part{len(cache):03d}")
                art.build(opt=opt)
                engine = NativeModel(art)
            hit = cache[id(model)] = (model, engine)
        engine = hit[1]
        if isinstance(engine, NativeModel):
            engine.set_inputs({k: inputs[k] for k in engine.artifact.input_names})
            engine.run(1)
            return engine.outputs()
        return dict(engine.invoke(inputs))

    return run
