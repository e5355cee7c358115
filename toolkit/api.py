"""The face of toolkit: one plain, typed function per entry point.

Every function here is re-exported from :mod:`toolkit` (``tk.load``, ``tk.compile`` ...) with
``__module__ = "toolkit"``, so ``tk.compile?``, ``help(tk.compile)``, tab completion and type
checkers see the real signature and docstring. What a "model" argument may be is decided in one
place, :mod:`toolkit.model_arg`. Heavy modules (pandas, the compiler, the runtime) are imported
inside the functions, so ``import toolkit`` stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from toolkit.compiler import CompiledModel, GraphPass, Target
    from toolkit.formats.part_file import PartSpec
    from toolkit.generator import Artifact
    from toolkit.ir import Model
    from toolkit.partitioner import PartitionResult
    from toolkit.runtime.onnxruntime import OrtRun
    from toolkit.runtime.result import RunResult
    from toolkit.runtime.tracer import EventTracer
    from toolkit.trace.attribution import Attribution
    from toolkit.trace.et_attribution import ExecutorchAttribution
    from toolkit.trace.executorch import ExecutorchProfile
    from toolkit.trace.fleet import FleetAttribution
    from toolkit.trace.ort_join import OrtAttribution
    from toolkit.trace.read import Trace
    from toolkit.vela.run import VelaResult

__all__ = ["load", "save", "compile", "partition", "codegen", "run", "read_trace", "trace_join",
           "trace_join_many", "read_vela", "load_onnx", "join_ort", "run_onnxruntime", "explore",
           "read_executorch"]

PathLike = str | os.PathLike[str]

MAX_RUNS = (1 << 31) - 1
"""The most inferences ``repeat`` or ``warmup`` may ask for."""


def load(path: PathLike | bytes | bytearray | memoryview, *,
         weights: PathLike | None = None) -> Model:
    """Load a model: ``.tflite`` / ``.circle`` (memory-mapped), a model's bytes, or a Caffe
    network (``.prototxt`` with ``weights=`` a ``.caffemodel``, or a self-contained
    ``.caffemodel``).

    Args:
        path: a file path, or the bytes of a ``.tflite``/``.circle`` model.
        weights: for a Caffe ``.prototxt``, the ``.caffemodel`` holding its blobs (matched to
            the layers by name).

    Returns:
        A :class:`~toolkit.ir.Model` whose ops carry their origins: from ONE's origin tables
        when the file has them, else op *i* gets origin *i*, named after its first output; a
        Caffe model's origins are its layers.

    Raises:
        ModelFormatError: a missing, empty or undecodable file (the message names the file and
            what is wrong).
        ToolkitError: an argument that is neither a path nor bytes; ``weights`` for a file
            that takes none.
    """
    from toolkit.errors import ToolkitError

    if not isinstance(path, (str, os.PathLike, bytes, bytearray, memoryview)):
        raise ToolkitError(f"tk.load cannot take a {type(path).__name__}",
                           fix="pass the path of a .tflite/.circle file, or its bytes")
    if isinstance(path, (str, os.PathLike)):
        from toolkit.model_arg import load_model_file

        return load_model_file(path, weights=weights)
    if weights is not None:
        raise ToolkitError("weights= is for a Caffe .prototxt",
                           fix="pass the .prototxt path with weights=")
    from toolkit.formats.flatbuffer_read import load as _load

    return _load(path)


def save(model: Model, path: PathLike, *, origin_tables: bool | None = None,
         unfuse_activations: bool = False) -> os.PathLike[str]:
    """Write ``model`` to ``path`` atomically; the extension (``.tflite``/``.circle``) picks
    the format.

    Args:
        model: the :class:`~toolkit.ir.Model` to write.
        path: the file to write (written to a temporary file, then renamed into place).
        origin_tables: write ONE's ``ONE_source_table``/``ONE_op_table``; default: always for
            ``.circle``, for ``.tflite`` when the origins are not the identity.
        unfuse_activations: for ``.tflite``, write each fused activation LiteRT would
            ignore (a TANH fused into ADD, MUL, CONV_2D ...) as a separate op with the same
            origins (see :func:`toolkit.compiler.lite_safe.unfuse_ignored_activations`);
            without it such a model is refused.

    Returns:
        The path written (a :class:`pathlib.Path`).

    Raises:
        ToolkitError: an unknown extension, a model that cannot be serialised (a ``.tflite``
            with fused activations LiteRT ignores: the message names the ops), an OS error.
    """
    from toolkit.formats.flatbuffer_write import save as _save
    from toolkit.model_arg import as_model
    from toolkit.util.args import check_bool, check_path_arg

    check_path_arg(path, "path", "tk.save")
    check_bool(unfuse_activations, "unfuse_activations", "tk.save")
    m = as_model(model, purpose="tk.save")
    if unfuse_activations and str(path).lower().endswith(".tflite"):
        from toolkit.compiler.lite_safe import unfuse_ignored_activations

        m = unfuse_ignored_activations(m)
    return _save(m, path, origin_tables=origin_tables)


def compile(model: Model | PathLike, passes: Sequence[str | GraphPass] | None = None,
            target: Target | Mapping[str, Any] | None = None, *,
            debug_identifiers: str = "generated", max_sweeps: int = 8,
            check: bool = True) -> CompiledModel:
    """Optimise ``model`` with origin-preserving passes and lower it to a command queue.

    Args:
        model: a :class:`~toolkit.ir.Model` (never modified) or a ``.tflite``/``.circle`` path.
        passes: pass names or pass objects, in order; ``None`` runs the default passes, ``[]``
            none (``toolkit.compiler.PASSES`` lists them).
        target: a :class:`~toolkit.compiler.Target` or a dict of its fields
            (``buffer_bytes``, ``macs_per_cycle`` ...); ``None`` uses ``Target()``.
        debug_identifiers: ``"generated"`` (ints 1, 2, ...) or ``"names"`` (op names) as each
            compiled op's debug handle.
        max_sweeps: bound on the pass manager's sweeps over the passes.
        check: verify the graph and origin conservation after every pass.

    Returns:
        A :class:`~toolkit.compiler.CompiledModel`: ``.source_ops()``, ``.optimised_ops()``,
        ``.origins()``, ``.commands()``, ``.rewrites()`` and ``.save(folder)``.

    Raises:
        ToolkitError: an invalid target, an unknown pass, an unreadable model.
        PassError: a pass failed (it and the passes before it are named).
    """
    from toolkit.compiler import compile_model
    from toolkit.model_arg import as_model

    return compile_model(as_model(model, purpose="tk.compile"), passes,
                         dict(target) if isinstance(target, Mapping) else target,
                         debug_identifiers=debug_identifiers, max_sweeps=max_sweeps,
                         check=check)


def partition(model: Model | PathLike, part: PathLike | PartSpec | Mapping[str, Any] | str,
              backends: str | Sequence[str] | None = None, default: str | None = None, *,
              source_file: str | None = None, work_path: PathLike | None = None,
              ext: str = ".circle") -> PartitionResult:
    """Split ``model`` across backends by a ``.part`` request, as ONE's circle-partitioner.

    Args:
        model: a :class:`~toolkit.ir.Model` or a ``.circle``/``.tflite`` path.
        part: a ``.part`` file path, its text, a :class:`~toolkit.formats.part_file.PartSpec`,
            or a mapping of its sections (``{"partition": {...}, "OPCODE": {...}}``).
        backends: overrides ``[partition] backends`` (comma-separated or a list).
        default: overrides ``[partition] default``.
        source_file: the source's name in the connection files (default: the model's file
            name, else ``<graph name>.<format>``).
        work_path: also write the parts and ``.conn.json``/``.conn.ini`` into this folder.
        ext: ``.circle`` or ``.tflite``, the format of the part files.

    Returns:
        A :class:`~toolkit.partitioner.PartitionResult`: ``.parts_table()``, ``.ops_table()``,
        ``.warnings_table()``, the provenance tables and ``.write(folder)``.

    Raises:
        PartitionError: a bad request (``file:line``), a model with several subgraphs, names
            that would escape the work path.
    """
    from toolkit.model_arg import as_model
    from toolkit.partitioner import partition as _partition
    from toolkit.util.args import check_names, check_optional_str, check_path_arg

    check_names(backends, "backends", "tk.partition")
    check_optional_str(default, "default", "tk.partition")
    check_path_arg(work_path, "work_path", "tk.partition", optional=True)
    check_optional_str(ext, "ext", "tk.partition")

    return _partition(as_model(model, purpose="tk.partition"), part,
                      backends if backends is None or isinstance(backends, str)
                      else list(backends),
                      default, source_file=source_file, work_path=work_path, ext=ext)


def codegen(model: Model | CompiledModel | PathLike, out_dir: PathLike,
            name: str | None = None, *, threads: int = 1) -> Artifact:
    """Generate a C++ artifact of a model (nnc's soft backend) into ``out_dir``.

    Args:
        model: a :class:`~toolkit.ir.Model`, a ``CompiledModel`` (its command queue, stripes
            included) or a ``.tflite``/``.circle`` path.
        out_dir: the folder to write: ``<name>.h`` (the model class: constructor taking the
            parameters file, ``set_<input>``, ``get_<output>``, ``doInference``; and a C ABI),
            ``<name>.cpp``, ``<name>.params`` (header with magic, version, model hash and
            size; 16-byte aligned weights), ``<name>.json`` (manifest and debug-handle map),
            ``main.cpp``, ``CMakeLists.txt`` and the op library.
        name: the artifact's name (default: the model file's stem, else ``model``).
        threads: the threads a model of the artifact starts with: the rows of its large
            convolutions and pools are split across a pool of them (``tk.run(...,
            threads=)`` changes it; results do not depend on it).

    Returns:
        A :class:`~toolkit.generator.Artifact`: ``.build()`` compiles a shared library with the
        system C++ compiler; ``tk.run(artifact, inputs, trace=True)`` runs it natively;
        ``artifact.session()`` gives a callable with preallocated outputs for loops;
        ``.arena_bytes`` against ``.temporaries_bytes`` is what the arena saves.

    Raises:
        UnsupportedOpError: an op the generator has no kernel for (named).
        ToolkitError: an unreadable model or an unusable name.
    """
    from toolkit.generator import codegen as _codegen
    from toolkit.util.args import check_model_arg, check_optional_str, check_path_arg

    check_model_arg(model, "model", "tk.codegen")
    check_path_arg(out_dir, "out_dir", "tk.codegen")
    check_optional_str(name, "name", "tk.codegen")

    return _codegen(model, out_dir, name, threads=threads)


_run_native: Any = None


def _artifact_type() -> type:
    """:class:`toolkit.generator.Artifact` (imported at the first call)."""
    global _artifact_cls
    if _artifact_cls is None:
        from toolkit import generator

        _artifact_cls = generator.Artifact
    return _artifact_cls


_artifact_cls: Any = None


def run(model: Any, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray | None
        = None, *, trace: bool = False, repeat: int = 1, warmup: int = 0,
        tracer: EventTracer | None = None, threads: int | None = 1,
        runtime: str | None = None, optimization: str = "all") -> RunResult:
    """Run a model with the reference NumPy runtime (float32 and TFLite-exact int8), natively
    (a C++ artifact) or in ONNX Runtime (an ``.onnx`` model).

    Args:
        model: a :class:`~toolkit.ir.Model`, a ``CompiledModel`` (run command by command), a
            ``PartitionResult`` (its parts chained), or a path: a ``.tflite``/``.circle``, a
            compiled output folder, a ``.conn.json``/``.conn.ini`` (see
            :mod:`toolkit.model_arg`); or a C++ artifact of :func:`codegen` (or its folder),
            run natively (built first when needed) and traced by the artifact itself.
        inputs: a dict name -> array, a list in input order, or one array; ``None`` uses
            random inputs (seed 0).
        trace: record one event per op (per command for a compiled model) per inference.
        repeat: inferences to run and record (the outputs are those of the last).
        warmup: inferences to run first, untraced (the first inference is several times
            slower than the rest).
        tracer: record into this :class:`~toolkit.runtime.tracer.EventTracer` (implies
            ``trace``).
        threads: limit NumPy's BLAS libraries to this many threads (process-wide, with
            ``threadpoolctl``); default 1, so timings are reproducible on a busy machine;
            ``None`` leaves the limit as it is (the parts of a partition chain run with 1).
            For ONNX Runtime: its intra-op threads (``None`` means 1). For a C++ artifact:
            the threads splitting its large ops (``None``: the artifact's own, see
            :func:`codegen`); results do not depend on it. The artifact is opened once per
            thread and kept, so that a call costs little more than its inference.
        runtime: ``None`` picks by the model (native for an artifact, else the reference
            runtime); ``"reference"``, ``"native"`` (the model must be an artifact) or
            ``"onnxruntime"`` (an ``.onnx`` model; needs ``pip install
            'toolkit[onnxruntime]'``; see :func:`run_onnxruntime`).
        optimization: ONNX Runtime's graph optimization level, ``"disable"``, ``"basic"``,
            ``"extended"`` or ``"all"`` (only with ``runtime="onnxruntime"``).

    Returns:
        A :class:`~toolkit.runtime.result.RunResult` ``(outputs, trace)``, traced or not:
        ``outputs`` by name, ``trace`` the event tracer or ``None``. With
        ``runtime="onnxruntime"`` and ``trace``, ``trace`` is the
        :class:`~toolkit.runtime.onnxruntime.OrtRun` (profile, optimized graph, timings),
        which :func:`trace_join` takes as it is: ``tk.trace_join(trace, "m.onnx")``.

    Raises:
        ToolkitError: a model argument of another kind, bad ``repeat``/``warmup``, inputs of
            the wrong names or shapes, an op the runtime lacks.
    """
    global _run_native
    if (type(model) is _artifact_type() and inputs is not None and not trace and repeat == 1
            and not warmup and tracer is None and runtime in (None, "native")
            and optimization == "all" and (threads is None or type(threads) is int)):
        # the loop case: a loaded artifact, one untraced inference (inputs checked there)
        if _run_native is None:
            from toolkit.runtime.native import run_native as _run_native
        return _run_native(model, inputs, threads=threads)
    from toolkit.errors import ToolkitError
    from toolkit.model_arg import resolve_model
    from toolkit.util.args import check_bool, check_inputs, check_int

    check_int(repeat, "repeat", "tk.run", low=1, high=MAX_RUNS)
    check_int(warmup, "warmup", "tk.run", low=0, high=MAX_RUNS)
    check_bool(trace, "trace", "tk.run")
    check_inputs(inputs, "inputs", "tk.run")
    if threads is not None:
        check_int(threads, "threads", "tk.run", low=1, high=1 << 16)
    if tracer is not None and type(tracer).__name__ != "EventTracer":
        raise ToolkitError(f"tracer must be an EventTracer, got a {type(tracer).__name__}",
                           where="tk.run", fix="pass tracer=toolkit.runtime.tracer.EventTracer()")
    from toolkit.generator import Artifact, is_artifact_dir

    if runtime not in (None, "reference", "native", "onnxruntime"):
        raise ToolkitError(f"unknown runtime {runtime!r}", where="tk.run",
                           fix="pass runtime='reference', 'native' or 'onnxruntime' (or leave "
                               "it out to pick by the model)")
    if runtime != "onnxruntime" and optimization != "all":
        raise ToolkitError("optimization is ONNX Runtime's graph optimization level",
                           where="tk.run", fix="pass runtime='onnxruntime' with it, or leave "
                                               "optimization out")
    if runtime == "onnxruntime":
        if tracer is not None:
            raise ToolkitError("ONNX Runtime records its own profile, not into a tracer",
                               where="tk.run", fix="pass trace=True instead of tracer=")
        from toolkit.runtime.result import RunResult as _RunResult

        ort = run_onnxruntime(model, inputs, optimization=optimization, trace=trace,
                              repeat=repeat, warmup=warmup, threads=threads or 1)
        return _RunResult(ort.outputs, ort if trace else None)
    native = isinstance(model, Artifact) or (isinstance(model, (str, os.PathLike))
                                             and os.path.isdir(model) and is_artifact_dir(model))
    if runtime == "native" and not native:
        raise ToolkitError("runtime='native' runs a C++ artifact of tk.codegen", where="tk.run",
                           fix="generate one with tk.codegen(model, out_dir) and run it (or its "
                               "folder)")
    if runtime == "reference" and native:
        raise ToolkitError("a C++ artifact runs natively, not in the reference runtime",
                           where="tk.run", fix="run the model the artifact was generated "
                                               "from, or leave runtime out")
    if native:
        from toolkit.runtime.native import run_native

        return run_native(model, inputs, trace=trace, repeat=repeat, warmup=warmup,
                          tracer=tracer, threads=threads)
    arg = resolve_model(model, purpose="tk.run")
    if arg.kind in ("connection", "partition"):
        from toolkit.runtime.chain import run_connection

        return run_connection(arg.value, inputs, trace=trace, repeat=repeat, warmup=warmup,
                              tracer=tracer)
    from toolkit.runtime.interpreter import run_model

    return run_model(arg.value, inputs, trace=trace, repeat=repeat, warmup=warmup,
                     tracer=tracer, threads=threads)


def read_trace(source: Any, *, format: str | None = None, key_column: str | None = None,
               key_kind: str | None = None, start_column: str | None = None,
               duration_column: str | None = None, end_column: str | None = None,
               run_column: str | None = None, unit: str | None = None,
               clock_hz: float | None = None) -> Trace:
    """Read a runtime trace into one event table (integer nanoseconds).

    Args:
        source: a path (Chrome/Perfetto ``.json``/``.json.gz``, debug-handle records, CSV),
            an open file, an ``EventTracer``, a DataFrame, a list of record dicts, or a Trace.
        format: force ``"chrome"``, ``"csv"``, ``"records"``, ``"frame"``, ``"tracer"`` or
            ``"ort"`` (an ONNX Runtime profile, also recognised by its content).
        key_column, key_kind: the column naming each event and what it holds
            (``command_id``, ``op_index``, ``debug_handle``, ``name`` ...); default: found by
            name.
        start_column, duration_column, end_column, run_column: the time and run columns;
            default: found by name.
        unit: ``"ns"``, ``"us"``, ``"ms"``, ``"s"`` or ``"cycles"`` (with ``clock_hz``);
            default: from each column's suffix.
        clock_hz: clock frequency for ``unit="cycles"``.

    Returns:
        A :class:`~toolkit.trace.read.Trace`; ``.events`` has one row per event: ``start_ns``,
        ``dur_ns`` (int64), ``run``, ``track``, the key columns and ``problem``.

    Raises:
        TraceError: a file that cannot be opened or parsed.
        ToolkitError: no start or duration column, an unknown unit or format.
    """
    from toolkit.trace.read import read_trace as _read
    from toolkit.util.args import check_number, check_optional_str

    for arg, value in (("format", format), ("key_column", key_column), ("key_kind", key_kind),
                       ("start_column", start_column), ("duration_column", duration_column),
                       ("end_column", end_column), ("run_column", run_column), ("unit", unit)):
        check_optional_str(value, arg, "tk.read_trace")
    if clock_hz is not None:
        check_number(clock_hz, "clock_hz", "tk.read_trace")

    return _read(source, format=format, key_column=key_column, key_kind=key_kind,
                 start_column=start_column, duration_column=duration_column,
                 end_column=end_column, run_column=run_column, unit=unit, clock_hz=clock_hz)


def trace_join(trace: Any, model: Any, policy: str = "macs", key: str | None = None, *,
               overlaps: str = "self", strict: bool = True, skip_runs: int = 0,
               optimized: Model | PathLike | None = None
               ) -> Attribution | OrtAttribution | ExecutorchAttribution:
    """Join a trace with the model it measured and attribute its time to the original layers.

    Args:
        trace: a :class:`~toolkit.trace.read.Trace` or anything :func:`read_trace` reads.
        model: the model the trace measured: a ``CompiledModel``, a ``PartitionResult``, a
            C++ artifact of :func:`codegen` (joined against what it was generated from), a
            :class:`~toolkit.ir.Model` (joined as compiled with no passes), a compiled output
            folder, a partitioned model's ``.conn.json``/``.conn.ini`` or a model path (see
            :mod:`toolkit.model_arg`), or any provenance tables
            (:class:`~toolkit.provenance.Provenance`). For an ExecuTorch ETDump (``trace``),
            its ETRecord (see :func:`read_executorch`).
        policy: how an event of a fused op is split over its source ops: ``"equal"``,
            ``"macs"`` or ``"bytes"`` (ExecuTorch: ``"equal"`` or ``"nodes"``; ``"macs"`` is
            taken as ``"equal"``, an ETRecord has no MAC counts).
        key: ``None`` to use each event's own key kind, or one kind for every event
            (``command_id``, ``part_op``, ``op_index``, ``debug_handle``, ``part``, ``name``,
            ``source_op_index``, ``source_name``).
        overlaps: ``"self"`` (spans nest per track and each counts its exclusive time; a
            wrapper's own time is dispatch overhead, ``.overhead()``), ``"leaves"``
            (enclosing and partly overlapping events on one track are unattributed) or
            ``"keep"``.
        strict: raise when most keyed events do not match the model (unknown keys, or an op
            name / type / part that disagrees with the op the key names); ``False``
            unattributes them with the reason and goes on. ``.match_score`` says how many
            matched.
        skip_runs: drop the first N runs (warm-up inferences) of the trace.
        optimized: for an ONNX model (an ``.onnx`` path or a model of :func:`load_onnx`),
            the graph ONNX Runtime saved for the profiled session; the join is then
            :func:`join_ort`'s (``policy`` ``"macs"`` means its ``"compute"``).

    Returns:
        An :class:`~toolkit.trace.attribution.Attribution`: ``.by_layer()``, ``.by_op()``,
        ``.by_command()``, ``.unattributed()``, ``.overhead()``, ``.summary()``,
        ``.check()``, ``.match_score`` (for an ONNX model, :func:`join_ort`'s
        ``OrtAttribution`` with the same views; for an ExecuTorch ETDump and its ETRecord, an
        :class:`~toolkit.trace.et_attribution.ExecutorchAttribution` with ``by_layer()``,
        ``by_op()``, ``unattributed()``, ``summary()``, ``check()``).

    Raises:
        ToolkitError: an unknown policy, key kind or overlaps mode; a model argument of
            another kind; with ``strict``, a trace that mostly does not match the model.
    """
    from toolkit.util.args import check_bool, check_int, check_model_arg

    check_model_arg(optimized, "optimized", "tk.trace_join", optional=True)
    check_int(skip_runs, "skip_runs", "tk.trace_join")
    check_bool(strict, "strict", "tk.trace_join")
    is_onnx = (isinstance(model, (str, os.PathLike)) and str(model).lower().endswith(".onnx")
               ) or getattr(model, "format", None) == "onnx"
    if type(trace).__name__ == "OrtRun":  # tk.run(..., runtime="onnxruntime", trace=True)
        trace, optimized = _ort_profile(trace, optimized, "tk.trace_join")
        is_onnx = True
    if is_onnx or optimized is not None:
        return join_ort(trace, model, optimized,
                        policy="compute" if policy == "macs" else policy)
    from toolkit.generator import Artifact

    if isinstance(model, Artifact):  # a native run: join against what it was generated from
        if model.model is None:
            from toolkit.errors import ToolkitError

            raise ToolkitError("an artifact loaded from its folder does not know the model it "
                               "was generated from", where=str(model.out_dir),
                               fix="join against that model or compiled model "
                                   "(tk.trace_join(trace, compiled)), or its compiled output "
                                   "folder")
        model = model.model
    from toolkit.trace.executorch import executorch_join
    from toolkit.trace.join import trace_join as _join

    joined = executorch_join(trace, model, policy)
    if joined is not None:
        result: ExecutorchAttribution = joined
        return result
    return _join(trace, model, policy=policy, key=key, overlaps=overlaps, strict=strict,
                 skip_runs=skip_runs)


def trace_join_many(sources: Any, model: Any, *, engine: str = "local", client: Any = None,
                    workers: int | None = None, partition_by: str | None = None,
                    policy: str = "macs", key: str | None = None, overlaps: str = "self",
                    strict: bool = True, skip_runs: int = 0, runs: str = "distinct",
                    memory_budget: int = 1 << 30) -> FleetAttribution:
    """Join a fleet of traces (one device session per file) with one model, exactly.

    Args:
        sources: trace paths, a glob (``"nightly/*.parquet"``), a folder, or a list of traces
            (Chrome JSON/.gz, CSV, Parquet, :class:`~toolkit.trace.read.Trace`, DataFrame).
            A file holds whole tracks and whole runs.
        model: the model the traces measured, as for :func:`trace_join`.
        engine: ``"local"`` (a pool of ``workers`` spawned processes; ``workers=0`` joins in
            this process) or ``"dask"`` (``client.map`` on ``client``, or on a local cluster
            started without ``MALLOC_TRIM_THRESHOLD_``; ``pip install 'toolkit[dask]'``).
        client: a ``distributed.Client`` for ``engine="dask"``.
        workers: processes (default: one per core).
        partition_by: the column naming each event's device, for files that hold several.
        policy, key, overlaps, strict, skip_runs: as :func:`trace_join` (``skip_runs`` per
            partition).
        runs: ``"distinct"`` (run values are unique across the fleet) or
            ``"per-partition"`` (each session numbers its runs from 0).
        memory_budget: bytes of per-run matrix kept in memory; above, DuckDB ranks the cells.

    Returns:
        A :class:`~toolkit.trace.fleet.FleetAttribution`: the views of :func:`trace_join`'s
        result over every run of the fleet (``.by_layer()``, ``.by_op()``,
        ``.unattributed()``, ``.check()`` ...) plus ``.by_partition()`` and
        ``.layer_by_partition(layer)``; equal to one join over the concatenated fleet.

    Raises:
        ToolkitError: an unknown engine, no sources, a file that cannot be joined (named),
            partitions of different models or a run in two partitions.
    """
    from toolkit.trace.fleet import trace_join_many as _many
    from toolkit.util.args import check_bool, check_int, check_optional_str

    if workers is not None:
        check_int(workers, "workers", "tk.trace_join_many", low=0, high=1 << 16)
    check_int(skip_runs, "skip_runs", "tk.trace_join_many")
    check_int(memory_budget, "memory_budget", "tk.trace_join_many", low=1)
    check_optional_str(partition_by, "partition_by", "tk.trace_join_many")
    check_bool(strict, "strict", "tk.trace_join_many")

    return _many(sources, model, engine=engine, client=client, workers=workers,
                 partition_by=partition_by, policy=policy, key=key, overlaps=overlaps,
                 strict=strict, skip_runs=skip_runs, runs=runs, memory_budget=memory_budget)


def read_vela(outdir: PathLike, model: Model | PathLike | None = None, *,
              stem: str | None = None) -> VelaResult:
    """Read the output folder of Arm's Vela compiler for one model.

    Args:
        outdir: the folder given to ``vela --output-dir``.
        model: the model given to Vela (a path, or a loaded Model with ``stem``); ``None``
            takes the path the legacy core's debug database names.
        stem: the file stem of Vela's outputs (default: the model file's stem).

    Returns:
        A :class:`~toolkit.vela.run.VelaResult`: ``.attribution()`` (Vela's estimates per
        original layer), its provenance tables, and ``.npu_trace_join(trace)``.

    Raises:
        VelaError: no ``<stem>_debug.xml`` in ``outdir`` (the message lists what is there), a
            database that does not fit the model, unreadable files.
    """
    from toolkit.util.args import check_model_arg, check_optional_str, check_path_arg
    from toolkit.vela.run import read_vela as _read_vela

    check_path_arg(outdir, "outdir", "tk.read_vela")
    check_model_arg(model, "model", "tk.read_vela", optional=True)
    check_optional_str(stem, "stem", "tk.read_vela")

    return _read_vela(outdir, model, stem=stem)


def load_onnx(path: PathLike | bytes) -> Model:
    """Load an ONNX model (``.onnx``, or its bytes), each node with its PyTorch layer.

    Args:
        path: a file path (external data files are read from its folder), or the bytes.

    Returns:
        A :class:`~toolkit.ir.Model` (``format == "onnx"``): op kinds are ONNX op types; each
        op's ``extra`` holds ``layer`` (the module path, from TorchScript scope names or the
        dynamo exporter's ``name_scopes``), ``node_name``, ``domain``, ``exporter_fused``;
        ``model.extra`` lists ``external_data``, ``modules_without_nodes`` (with the reason)
        and ``nodes_without_layer``. Needs ``pip install 'toolkit[onnx]'``.

    Raises:
        ModelFormatError: a missing, empty or undecodable file, missing external data.
        GraphError: a cycle, a value written twice or read but never written.
    """
    from toolkit.importers.onnx import load_onnx as _load_onnx
    from toolkit.util.args import check_path_arg

    check_path_arg(path, "path", "tk.load_onnx", allow_bytes=True)

    return _load_onnx(path)


def join_ort(trace: Any, model: Model | PathLike, optimized: Model | PathLike | None = None,
             *, policy: str = "equal") -> OrtAttribution:
    """Attribute an ONNX Runtime profile's kernel time to the original nodes and layers.

    Args:
        trace: ORT's profile (a path, or the Trace :func:`read_trace` made of it).
        model: the exported ``.onnx`` model (path or :func:`load_onnx`).
        optimized: the graph ORT saved for the profiled session
            (``optimized_model_filepath``); None when the profile is of ``model`` itself at
            ``ORT_DISABLE_ALL``.
        policy: how an optimized node's time is split over the original nodes it owns:
            ``"equal"`` or ``"compute"``.

    Returns:
        An :class:`~toolkit.trace.ort_join.OrtAttribution`: ``.by_layer()``, ``.by_node()``,
        ``.by_op()``, ``.origins()`` (optimized node -> original nodes), ``.groups()``,
        ``.unmapped()``, ``.unattributed()``, ``.check()``.

    Raises:
        ToolkitError: an optimized graph that is not ORT's optimization of the model, a profile
            most of whose nodes are not in the graph, a trace that is not an ORT profile, an
            unknown policy.
    """
    from toolkit.trace.ort_join import join_ort as _join_ort
    from toolkit.util.args import check_model_arg, check_path_arg

    if type(trace).__name__ == "OrtRun":
        trace, optimized = _ort_profile(trace, optimized, "tk.join_ort")
    if type(trace).__name__ != "Trace":
        check_path_arg(trace, "trace", "tk.join_ort")
    check_model_arg(model, "model", "tk.join_ort")
    check_model_arg(optimized, "optimized", "tk.join_ort", optional=True)
    return _join_ort(trace, model, optimized, policy=policy)


def _ort_profile(run: OrtRun, optimized: Model | PathLike | None, where: str
                 ) -> tuple[Path, Model | PathLike]:
    """The profile of an ONNX Runtime run and the graph it profiled (``optimized`` when given,
    else the run's saved optimized graph)."""
    from toolkit.errors import ToolkitError

    if run.profile_path is None:
        raise ToolkitError("this ONNX Runtime run was not profiled", where=where,
                           fix="run it with trace=True")
    return run.profile_path, run.optimized_path if optimized is None else optimized


def run_onnxruntime(model: Model | PathLike,
                    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray | None
                    = None, *, optimization: str = "all", trace: bool = True,
                    repeat: int = 10, warmup: int = 2, threads: int = 1,
                    workdir: PathLike | None = None) -> OrtRun:
    """Run an ONNX model in ONNX Runtime (CPU) at an optimization level and profile it.

    Args:
        model: an ``.onnx`` path or a model from :func:`load_onnx`.
        inputs: dict name -> array, list in input order, one array, or None (random, seed 0).
        optimization: ``"disable"``, ``"basic"``, ``"extended"`` or ``"all"``.
        trace: profile the graph ORT saved at that level, run at ``ORT_DISABLE_ALL`` (every
            event then names its node exactly).
        repeat: measured runs; warmup: runs before them; threads: ORT's intra-op threads.
        workdir: where the optimized graph and the profile go (default: a new temporary
            folder).

    Returns:
        An :class:`~toolkit.runtime.onnxruntime.OrtRun`: ``outputs``, ``optimized_path``,
        ``profile_path``, ``timings`` (unprofiled vs profiled run time and kernel time per
        run); a warning when kernel time exceeds 1.5x the unprofiled run time. Join with
        ``join_ort(r.profile_path, model, r.optimized_path)``. Needs
        ``pip install 'toolkit[onnxruntime]'``.

    Raises:
        ToolkitError: onnxruntime missing, an unknown level, a model ORT refuses.
        RuntimeInputError: inputs that do not match the model.
    """
    from toolkit.runtime.onnxruntime import run_onnxruntime as _run
    from toolkit.util.args import check_inputs, check_model_arg, check_path_arg

    check_model_arg(model, "model", "tk.run_onnxruntime")
    check_inputs(inputs, "inputs", "tk.run_onnxruntime")
    check_path_arg(workdir, "workdir", "tk.run_onnxruntime", optional=True)

    return _run(model, inputs, optimization=optimization, trace=trace, repeat=repeat,
                warmup=warmup, threads=threads, workdir=workdir)


def explore(model: Model | PathLike, backends: Sequence[str] = ("cpu", "npu"),
            default: str | None = None, *, repeat: int = 3) -> Any:
    """Partition experiments behind notebook widgets: pick backends and rules, see the parts.

    Every change of a control partitions ``model`` again, checks the chained parts against
    the model, runs them traced ``repeat`` times and shows the parts, the bytes crossing each
    cut and the time per backend (one run per change; the backends field applies on Enter).

    Args:
        model: a :class:`~toolkit.ir.Model` or a ``.circle``/``.tflite`` path.
        backends: the backends to choose from (the first is the default unless ``default``).
        default: the backend of every op no rule names.
        repeat: traced inferences per experiment.

    Returns:
        An ipywidgets ``VBox`` to display; its ``.experiment`` is the latest
        :class:`~toolkit.viz.partition_explorer.PartitionExperiment`.

    Raises:
        ToolkitError: a model argument that is not a model.
    """
    from toolkit.model_arg import as_model
    from toolkit.util.args import check_int, check_names, check_optional_str
    from toolkit.viz.partition_explorer import explorer

    check_names(backends, "backends", "tk.explore", optional=False, allow_str=False)
    if not backends:
        from toolkit.errors import ToolkitError

        raise ToolkitError("backends is empty", where="tk.explore",
                           fix="pass backends=('cpu', 'npu')")
    check_optional_str(default, "default", "tk.explore")
    check_int(repeat, "repeat", "tk.explore", low=1, high=MAX_RUNS)

    return explorer(as_model(model, purpose="tk.explore"), backends=tuple(backends),
                    default=default, repeat=repeat)


def read_executorch(etdump: Any, etrecord: Any = None, program: Any = None, *,
                    method: str = "forward") -> ExecutorchProfile:
    """Read an ExecuTorch profile, with no torch or executorch installed.

    Args:
        etdump: the ETDump the runtime wrote (``.etdp`` path, bytes, or a decoded ``ETDump``).
        etrecord: the ETRecord (path, bytes or decoded); needed to name layers.
        program: the program (``.pte`` path, bytes or decoded); needed to map a delegate's
            per-op events (XNNPACK) and control-flow bodies to layers.
        method: the method profiled.

    Returns:
        An :class:`~toolkit.trace.executorch.ExecutorchProfile`: ``.events`` (every event,
        nested, integer ticks), ``.nodes()`` (the edge nodes: handle, op, module path and
        type, stack trace, torch.export node), ``.inspector_table()`` (the Inspector's own
        table) and ``.attribution(policy)`` (every tick of ``Method::execute`` to a layer or a
        named bucket: ``by_layer()``, ``by_op()``, ``rollup()``, ``unattributed()``,
        ``check()``).

    Raises:
        ToolkitError: a file that is not what its argument expects (the message says which
            file it is and where it goes), or a corrupt one.
    """
    from toolkit.errors import ToolkitError
    from toolkit.trace.executorch import read_executorch as _read
    from toolkit.util.args import check_optional_str

    if etdump is None:
        raise ToolkitError("etdump is None", where="tk.read_executorch",
                           fix="pass the path of an ETDump (.etdp), its bytes or a read ETDump")
    check_optional_str(method, "method", "tk.read_executorch")

    return _read(etdump, etrecord, program, method=method)


for _name in __all__:
    globals()[_name].__module__ = "toolkit"
del _name
