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
    from toolkit.numerics.capture import Capture
    from toolkit.numerics.compare import NumericsComparison
    from toolkit.partitioner import PartitionResult
    from toolkit.runtime.onnxruntime import OrtRun
    from toolkit.runtime.result import RunResult
    from toolkit.runtime.tracer import EventTracer
    from toolkit.trace.fleet.join_many import FleetAttribution
    from toolkit.trace.join.attribution import Attribution
    from toolkit.trace.readers.executorch.attribution import ExecutorchAttribution
    from toolkit.trace.readers.executorch.profile import ExecutorchProfile
    from toolkit.trace.readers.ort.attribution import OrtAttribution
    from toolkit.trace.readers.read import Trace
    from toolkit.trace.views.diff import LayerDiff
    from toolkit.vela.run import VelaResult

__all__ = ["load", "save", "compile", "partition", "codegen", "fix_free_dims",
           "register_custom_op", "run", "session", "read_trace", "trace_join",
           "trace_join_many", "read_vela", "load_onnx", "lower_onnx", "join_ort", "run_onnxruntime",
           "explore", "read_executorch", "capture", "compare", "diff", "report"]

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
        Caffe model's origins are its layers. A compiled output folder (``toolkit compile
        -o``) gives its compiled model (the ``.model`` of the folder's CompiledModel).

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
        from toolkit.model_arg import load_model_file, resolve_model

        if weights is None and os.path.isdir(path):  # a compiled output folder
            return resolve_model(path, purpose="tk.load", accept=("compiled",)).model
        return load_model_file(path, weights=weights)
    if weights is not None:
        raise ToolkitError("weights= is for a Caffe .prototxt",
                           fix="pass the .prototxt path with weights=")
    from toolkit.custom_ops import check_custom_options
    from toolkit.formats.flatbuffer_read import load as _load
    from toolkit.layer_names import name_layers

    model = name_layers(_load(path))
    check_custom_options(model, "<bytes>")
    return model


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
    m = _ir_model(as_model(model, purpose="tk.save"), "tk.save")  # an ONNX model: lowered
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

    return compile_model(_ir_model(as_model(model, purpose="tk.compile"), "tk.compile"), passes,
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

    return _partition(_ir_model(as_model(model, purpose="tk.partition"), "tk.partition"), part,
                      backends if backends is None or isinstance(backends, str)
                      else list(backends),
                      default, source_file=source_file, work_path=work_path, ext=ext)


def codegen(model: Model | CompiledModel | PathLike, out_dir: PathLike,
            name: str | None = None, *, debug: bool = False,
            shapes: Mapping[str, Sequence[int]] | None = None, threads: int = 1) -> Artifact:
    """Generate a C++ artifact of a model (nnc's soft backend) into ``out_dir``.

    Args:
        model: a :class:`~toolkit.ir.Model`, a ``CompiledModel`` (its command queue, stripes
            included) or a ``.tflite``/``.circle`` path.
        out_dir: the folder to write: ``<name>.h`` (the model class: constructor taking the
            parameters file, ``set_<input>``, ``get_<output>``, ``doInference``; and a C ABI),
            ``<name>.cpp``, ``<name>.params`` (header with magic, version, model hash and
            size; 64-byte aligned weights), ``<name>.json`` (manifest and debug-handle map),
            ``main.cpp``, ``CMakeLists.txt`` and the op library.
        name: the artifact's name (default: the model file's stem, else ``model``).
        debug: a debug build, which also copies every op's output tensors into buffers set
            through its C ABI (``<cname>_debug_buffers``; the manifest's ``debug_tensors``
            lists them): what ``tk.capture(artifact, inputs, runtime="native")`` reads.
        shapes: input name -> shape, setting free (-1) dimensions (``{"input": (1, 16000)}``);
            free dimensions not named take the file's ``shape`` (batch 1 for a default
            TensorFlow conversion), as LiteRT does (see :func:`fix_free_dims`). Shapes are
            fixed at generation time; a compiled model keeps the shapes it was compiled with.
        threads: the threads a model of the artifact starts with: the rows of its large
            convolutions and pools are split across a pool of them (``tk.run(...,
            threads=)`` changes it; results do not depend on it).

    Returns:
        A :class:`~toolkit.generator.Artifact`: ``.build()`` compiles a shared library with the
        system C++ compiler; ``tk.run(artifact, inputs, trace=True)`` runs it natively;
        ``tk.session(artifact)`` gives a callable with preallocated outputs for loops;
        ``.arena_bytes`` against ``.temporaries_bytes`` is what the arena saves.

    Raises:
        UnsupportedOpError: an op the generator has no kernel for (named).
        ToolkitError: an unreadable model or an unusable name.
    """
    from toolkit.generator import codegen as _codegen
    from toolkit.util.args import (
        check_bool,
        check_model_arg,
        check_optional_str,
        check_path_arg,
    )

    check_model_arg(model, "model", "tk.codegen")
    check_path_arg(out_dir, "out_dir", "tk.codegen")
    check_optional_str(name, "name", "tk.codegen")
    check_bool(debug, "debug", "tk.codegen")
    shapes = _check_shapes(shapes, "tk.codegen")
    obj: Any = model
    if isinstance(obj, (str, os.PathLike)):
        from pathlib import Path

        from toolkit.model_arg import as_model, load_model_file

        if str(obj).lower().endswith(".onnx"):
            obj = as_model(obj, purpose="tk.codegen")
        else:
            name = name or Path(obj).stem
            obj = load_model_file(obj)
    if getattr(obj, "format", None) == "onnx":
        from toolkit.importers.onnx_lower import lowered_for

        onnx_path = getattr(obj, "path", None)
        obj = lowered_for(obj, "tk.codegen", shapes=shapes)
        shapes = None  # the lowering fixed them
        if name is None and onnx_path:
            name = os.path.splitext(os.path.basename(onnx_path))[0].replace(".", "_")
    from toolkit.runtime.static_shapes import static_for_generation

    return _codegen(static_for_generation(obj, shapes), out_dir, name, debug=debug,
                    threads=threads)



_run_native: Any = None


def _artifact_type() -> type:
    """:class:`toolkit.generator.Artifact` (imported at the first call)."""
    global _artifact_cls
    if _artifact_cls is None:
        from toolkit import generator

        _artifact_cls = generator.Artifact
    return _artifact_cls


_artifact_cls: Any = None


def _ir_model(model: Model, purpose: str) -> Model:
    """``model``, or its lowering to the IR op set when it is an ONNX model of
    :func:`load_onnx` (static shapes; a model with reference-only nodes is refused)."""
    if model.format != "onnx":
        return model
    from toolkit.importers.onnx_lower import lowered_for

    return lowered_for(model, purpose)


def lower_onnx(model: Model | PathLike, shapes: Mapping[str, Sequence[int]] | None = None
               ) -> Model:
    """Lower an ONNX model into the toolkit's IR op set (what ``tk.run``, ``tk.compile``,
    ``tk.partition`` and ``tk.codegen`` do with an ``.onnx`` model before they start).

    Args:
        model: an ``.onnx`` path or a model of :func:`load_onnx`.
        shapes: input name -> shape, for inputs with free dimensions.

    Returns:
        A :class:`~toolkit.ir.Model` of IR ops (NHWC inside, ONNX's order at the graph's
        inputs and outputs) whose ops carry the origin ids of their ONNX nodes;
        ``model.origins`` holds each node's record (name, layers); ``extra["reference_only"]``
        lists nodes that run through ``onnx.reference`` (compile, partition and codegen
        refuse those). See ``docs/onnx.md``.

    Raises:
        ToolkitError: not an ONNX model, free dimensions without a shape, a node neither
            lowered nor run by ``onnx.reference`` (named, with ``runtime="onnxruntime"``).
    """
    from toolkit.importers.onnx_lower import lowered_for
    from toolkit.model_arg import as_model

    m = as_model(model, purpose="tk.lower_onnx")
    if m.format != "onnx":
        from toolkit.errors import ToolkitError

        raise ToolkitError(f"tk.lower_onnx takes an ONNX model, got a {m.format} model",
                           where="tk.lower_onnx", fix="pass an .onnx path or tk.load('m.onnx')")
    return lowered_for(m, "tk.lower_onnx", shapes=shapes, allow_reference=True)


def _check_shapes(shapes: Any, where: str) -> dict[str, tuple[int, ...]] | None:
    """``shapes`` as a dict name -> tuple of ints (ToolkitError naming what is wrong)."""
    from toolkit.errors import ToolkitError

    if shapes is None:
        return None
    if not isinstance(shapes, Mapping):
        raise ToolkitError(f"{where}: shapes must be a mapping input name -> shape, got "
                           f"{type(shapes).__name__}", fix='pass shapes={"input": (1, 16000)}')
    out = {}
    for k, v in shapes.items():
        if not isinstance(k, str) or isinstance(v, (str, bytes)) or not isinstance(v, Sequence) \
                or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
            raise ToolkitError(f"{where}: shapes[{k!r}] = {v!r} is not a shape",
                               fix='pass shapes={"input": (1, 16000)}: a tuple of ints per '
                                   'input name')
        out[k] = tuple(v)
    return out


def fix_free_dims(model: Model | PathLike, shapes: Mapping[str, Sequence[int]] | None = None,
                  *, batch: int | None = None) -> Model:
    """A copy of ``model`` whose free (-1) dimensions are fixed, so every shape is static.

    Args:
        model: a :class:`~toolkit.ir.Model` or a model path.
        shapes: input name -> full shape, for inputs whose free dimensions get a chosen size
            (``{"input": (1, 16000)}`` for an audio model's sample count).
        batch: the size of the free dimensions of the other inputs; default: the file's own
            ``shape`` (what LiteRT allocates without a resize).

    Returns:
        A new :class:`~toolkit.ir.Model` (``model`` is unchanged) in which every main-graph
        tensor has the static shape it takes for those inputs; ``tk.compile`` then folds the
        shape arithmetic away and ``tk.codegen`` takes it.

    Raises:
        ToolkitError: a shape that names no input, changes a fixed dimension or the rank; a
            model with control flow; an op that cannot run on such inputs (named).
    """
    from toolkit.model_arg import as_model
    from toolkit.runtime.static_shapes import fix_free_dims as _fix

    m = as_model(model, purpose="tk.fix_free_dims")
    return _fix(m, batch=batch, shapes=_check_shapes(shapes, "tk.fix_free_dims"))


def register_custom_op(code: str, kernel: Any, *, shapes: Any = None, macs: Any = None,
                       options: Any = None, emit: Any = None, doc: str = "") -> Any:
    """Register a custom op (TFLite ``CUSTOM`` with this custom code) for every verb.

    Args:
        code: the op's custom code, as the model file names it.
        kernel: ``kernel(op, args) -> list of arrays``, the reference runtime's kernel
            (``args``: one array per input, None for an absent one); run by ``tk.run``,
            compiled models and partition chains.
        shapes: ``shapes(op, input_shapes) -> list of output shapes`` (default: the kernel is
            run on zeros).
        macs: ``macs(op) -> int`` for the cost model and the MACs split of trace-join
            (default: one per output element).
        options: ``options(op) -> value`` decoding ``op.custom_options``; raise ValueError for
            a malformed blob (``tk.load`` then refuses the model, naming the op).
        emit: ``emit(emitter, step) -> str``, C++ statements for ``tk.codegen`` (see
            :mod:`toolkit.custom_ops`); without it codegen refuses the op.
        doc: a line describing the op.

    Returns:
        The registry record (:class:`toolkit.custom_ops.CustomOp`); a later registration of
        the same code replaces it. MediaPipe's custom ops are registered already.
    """
    from toolkit.custom_ops import register_custom_op as _register

    return _register(code, kernel, shapes=shapes, macs=macs, options=options, emit=emit,
                     doc=doc)


def session(artifact: Any, threads: int | None = None) -> Any:
    """A loop form of a C++ artifact's inference: ``s = tk.session(artifact)``, then
    ``outputs = s(x)`` (or ``s(x1, x2)``, ``s({"name": x})``).

    Args:
        artifact: a C++ artifact of :func:`codegen` or its folder (built first when needed).
        threads: the threads splitting its large ops (``None``: the artifact's own);
            results do not depend on it.

    Returns:
        A :class:`toolkit.runtime.native.Session` on a model of its own (not shared with
        :func:`run`): inputs checked (dtype, shape) and read in place when C-contiguous,
        outputs written into arrays allocated once (the same dict of arrays every call).

    Raises:
        ToolkitError: not an artifact, a build that fails, or a bad ``threads``.
    """
    from toolkit.runtime.native import session as _session

    return _session(artifact, threads=threads)


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
        ``outputs`` by name, ``trace`` a :class:`~toolkit.trace.readers.read.Trace` (every runtime;
        ``None`` when not traced), which :func:`trace_join` takes as it is. The runtime's own
        record is ``trace.runtime`` (the ``EventTracer``, or ONNX Runtime's
        :class:`~toolkit.runtime.onnxruntime.OrtRun`); an ONNX Runtime trace also has
        ``trace.optimized_path`` (the graph it ran, which the join uses) and
        ``trace.timings`` (profiled vs unprofiled time per run).

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
    from toolkit.runtime.tracer import EventTracer

    if tracer is not None and not isinstance(tracer, EventTracer):
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
        return _as_traced(_RunResult(ort.outputs, ort if trace else None))
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

        return _as_traced(run_native(model, inputs, trace=trace, repeat=repeat,
                                     warmup=warmup, tracer=tracer, threads=threads))
    arg = resolve_model(model, purpose="tk.run")
    if arg.kind in ("connection", "partition"):
        from toolkit.runtime.chain import run_connection

        return _as_traced(run_connection(arg.value, inputs, trace=trace, repeat=repeat,
                                         warmup=warmup, tracer=tracer))
    from toolkit.runtime.interpreter import run_model

    return _as_traced(run_model(arg.value, inputs, trace=trace, repeat=repeat, warmup=warmup,
                                tracer=tracer, threads=threads))


def _as_traced(result: RunResult) -> RunResult:
    """``result`` with its trace as a :class:`~toolkit.trace.readers.read.Trace` (the runtime's own
    record is ``trace.runtime``)."""
    from toolkit.trace.readers.inputs import run_trace

    return result._replace(trace=run_trace(result.trace))


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
        A :class:`~toolkit.trace.readers.read.Trace`; ``.events`` has one row per event:
        ``start_ns``, ``dur_ns`` (int64), ``run``, ``track``, the key columns and ``problem``.

    Raises:
        TraceError: a file that cannot be opened or parsed.
        ToolkitError: no start or duration column, an unknown unit or format.
    """
    from toolkit.trace.readers.read import read_trace as _read
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
        trace: a :class:`~toolkit.trace.readers.read.Trace` or anything :func:`read_trace` reads.
        model: the model the trace measured: a ``CompiledModel``, a ``PartitionResult``, a
            C++ artifact of :func:`codegen` (joined against what it was generated from), a
            :class:`~toolkit.ir.Model` (joined as compiled with no passes), a compiled output
            folder, a partitioned model's ``.conn.json``/``.conn.ini`` or a model path (see
            :mod:`toolkit.model_arg`), or any provenance tables
            (:class:`~toolkit.provenance.Provenance`). For an ExecuTorch ETDump (``trace``),
            its ETRecord (see :func:`read_executorch`).
        policy: how an event of a fused op is split over its source ops: ``"equal"``,
            ``"macs"`` or ``"bytes"`` (the same for every runtime; where the provenance has no
            costs, an ExecuTorch ETRecord, the split is equal).
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
            :func:`join_ort`'s adapter of the same join.

    Returns:
        An :class:`~toolkit.trace.join.attribution.Attribution`: ``.by_layer()``, ``.by_op()``,
        ``.by_command()``, ``.unattributed()``, ``.overhead()``, ``.summary()``,
        ``.check()``, ``.match_score`` (for an ONNX model, :func:`join_ort`'s
        ``OrtAttribution`` with the same views; for an ExecuTorch ETDump and its ETRecord, an
        :class:`~toolkit.trace.readers.executorch.attribution.ExecutorchAttribution` with
        ``by_layer()``, ``by_op()``, ``unattributed()``, ``summary()``, ``check()``).

    Raises:
        ToolkitError: an unknown policy, key kind or overlaps mode; a model argument of
            another kind; with ``strict``, a trace that mostly does not match the model.
    """
    from toolkit.util.args import check_bool, check_int, check_model_arg

    check_model_arg(optimized, "optimized", "tk.trace_join", optional=True)
    check_int(skip_runs, "skip_runs", "tk.trace_join")
    check_bool(strict, "strict", "tk.trace_join")
    from toolkit.trace.readers.inputs import resolve_join

    route = resolve_join(trace, model, optimized)
    if route.route == "onnxruntime" and route.optimized is None:
        read, is_ort = _ort_or_not(route.trace)
        if not is_ort:  # the reference or native runtime's trace of the lowered model
            from toolkit.importers.onnx_lower import lowered_for
            from toolkit.model_arg import as_model
            from toolkit.trace.readers.inputs import JoinRoute

            model = lowered_for(as_model(model, purpose="tk.trace_join"), "tk.trace_join",
                                allow_reference=True, latest_run=True)
            trace = read
            route = JoinRoute("toolkit", read, model)
    if route.route == "onnxruntime":
        return join_ort(route.trace, route.model, route.optimized, policy=policy, key=key,
                        overlaps=overlaps, strict=strict, skip_runs=skip_runs)
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
    if route.route == "executorch":
        from toolkit.trace.readers.executorch.profile import executorch_join

        result: ExecutorchAttribution = executorch_join(
            trace, model, policy, key, overlaps=overlaps, strict=strict, skip_runs=skip_runs)
        return result
    from toolkit.trace import trace_join as _join

    return _join(trace, model, policy=policy, key=key, overlaps=overlaps, strict=strict,
                 skip_runs=skip_runs)


def _ort_or_not(trace: Any) -> tuple[Any, bool]:
    """``(trace, is_ort)``: whether ``trace`` is an ONNX Runtime profile (a path is read)."""
    from toolkit.runtime.tracer import EventTracer

    if isinstance(trace, EventTracer):
        return trace, False
    if isinstance(trace, (str, os.PathLike)):
        trace = read_trace(trace)
    meta = getattr(trace, "meta", None)
    return trace, not isinstance(meta, dict) or meta.get("format") == "ort"


def trace_join_many(sources: Any, model: Any, *, engine: str = "local", client: Any = None,
                    workers: int | None = None, partition_by: str | None = None,
                    policy: str = "macs", key: str | None = None, overlaps: str = "self",
                    strict: bool = True, skip_runs: int = 0, runs: str = "distinct",
                    memory_budget: int = 1 << 30) -> FleetAttribution:
    """Join a fleet of traces (one device session per file) with one model, exactly.

    Args:
        sources: trace paths, a glob (``"nightly/*.parquet"``), a folder, or a list of traces
            (Chrome JSON/.gz, CSV, Parquet, :class:`~toolkit.trace.readers.read.Trace`, DataFrame).
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
        A :class:`~toolkit.trace.fleet.join_many.FleetAttribution`: the views of
        :func:`trace_join`'s result over every run of the fleet (``.by_layer()``, ``.by_op()``,
        ``.unattributed()``, ``.check()`` ...) plus ``.by_partition()`` and
        ``.layer_by_partition(layer)``; equal to one join over the concatenated fleet.

    Raises:
        ToolkitError: an unknown engine, no sources, a file that cannot be joined (named),
            partitions of different models or a run in two partitions.
    """
    from toolkit.trace.fleet.join_many import trace_join_many as _many
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
             *, policy: str = "equal", key: str | None = None, overlaps: str = "self",
             strict: bool = True, skip_runs: int = 0) -> OrtAttribution:
    """Attribute an ONNX Runtime profile's kernel time to the original nodes and layers.

    Args:
        trace: ORT's profile (a path, or the Trace :func:`read_trace` made of it).
        model: the exported ``.onnx`` model (path or :func:`load_onnx`).
        optimized: the graph ORT saved for the profiled session
            (``optimized_model_filepath``); None when the profile is of ``model`` itself at
            ``ORT_DISABLE_ALL``.
        policy: how an optimized node's time is split over the original nodes it owns:
            ``"equal"``, ``"macs"`` (by compute weight: see
            :func:`~toolkit.trace.readers.ort._provenance.compute_weight`) or ``"bytes"``.
        key, overlaps, strict, skip_runs: as :func:`trace_join` (it is the same join).

    Returns:
        An :class:`~toolkit.trace.readers.ort.attribution.OrtAttribution`: every view of
        :func:`trace_join`'s result (``.by_layer()``, ``.by_op()``, ``.unattributed()``,
        ``.overhead()``, ``.summary()``, ``.check()``) plus ``.by_node()``, ``.origins()``
        (optimized node -> original nodes), ``.groups()``, ``.unmapped()``.

    Raises:
        ToolkitError: an optimized graph that is not ORT's optimization of the model, a profile
            most of whose nodes are not in the graph, a trace that is not an ORT profile, an
            unknown policy.
    """
    from toolkit.trace.readers.inputs import resolve_join
    from toolkit.trace.readers.ort.attribution import join_ort as _join_ort
    from toolkit.trace.readers.read import Trace as _Trace
    from toolkit.util.args import check_bool, check_int, check_model_arg, check_path_arg

    route = resolve_join(trace, model, optimized, where="tk.join_ort")
    trace, optimized = route.trace, route.optimized
    if not isinstance(trace, _Trace):
        check_path_arg(trace, "trace", "tk.join_ort")
    check_model_arg(model, "model", "tk.join_ort")
    check_model_arg(optimized, "optimized", "tk.join_ort", optional=True)
    check_int(skip_runs, "skip_runs", "tk.join_ort")
    check_bool(strict, "strict", "tk.join_ort")
    return _join_ort(trace, model, optimized, policy=policy, key=key, overlaps=overlaps,
                     strict=strict, skip_runs=skip_runs)


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
        An :class:`~toolkit.trace.readers.executorch.profile.ExecutorchProfile`: ``.events`` (every
        event, nested, integer ticks), ``.nodes()`` (the edge nodes: handle, op, module path and
        type, stack trace, torch.export node), ``.inspector_table()`` (the Inspector's own
        table) and ``.attribution(policy)`` (every tick of ``Method::execute`` to a layer or a
        named bucket: ``by_layer()``, ``by_op()``, ``rollup()``, ``unattributed()``,
        ``check()``).

    Raises:
        ToolkitError: a file that is not what its argument expects (the message says which
            file it is and where it goes), or a corrupt one.
    """
    from toolkit.errors import ToolkitError
    from toolkit.trace.readers.executorch.profile import read_executorch as _read
    from toolkit.util.args import check_optional_str

    if etdump is None:
        raise ToolkitError("etdump is None", where="tk.read_executorch",
                           fix="pass the path of an ETDump (.etdp), its bytes or a read ETDump")
    check_optional_str(method, "method", "tk.read_executorch")

    return _read(etdump, etrecord, program, method=method)


def capture(model: Any, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray
            | None = None, *, runtime: str | None = None,
            budget_bytes: int | None = 256 << 20) -> Capture:
    """Run ``model`` once and keep its intermediate tensors, each with its producing op, origin
    ids and original layers (read through ``model.origin(oid).layers``).

    Args:
        model: a :class:`~toolkit.ir.Model`, a ``CompiledModel`` (every command's output), a
            ``PartitionResult`` or ``.conn.json`` (its parts chained: every part's tensors), a
            path (``.tflite``/``.circle``, a compiled folder, ``.onnx``), or (native) an
            ``Artifact``.
        inputs: a dict name -> array, a list in input order, or one array; ``None`` uses
            random inputs (seed 0).
        runtime: ``"reference"`` (the NumPy runtime, every tensor; the default),
            ``"litert"`` (LiteRT's builtin kernels with ``experimental_preserve_all_tensors``),
            ``"onnxruntime"`` (every node output added as a graph output; the default for
            an ``.onnx`` path) or ``"native"`` (a debug build of the generated C++ that
            copies every op's output out, see ``tk.codegen(debug=True)``; ``model`` may be
            an Artifact that ``tk.codegen`` returned).
        budget_bytes: tensor bytes kept in RAM; past it each array is written to a ``.npy``
            file in a temporary folder and read back memory-mapped (``None``: never spill).

    Returns:
        A :class:`~toolkit.numerics.capture.Capture`: ``capture[name]`` (raw, quantized
        values as stored), ``.value(name)`` (dequantized float64), ``.records`` (producing op,
        origins, layers per tensor), ``.table()``.

    Raises:
        ToolkitError: an unknown runtime, a model the runtime cannot run, inputs of the wrong
            names, shapes or dtypes.
    """
    from toolkit.numerics.capture import capture as _capture

    return _capture(model, inputs, runtime=runtime, budget_bytes=budget_bytes)


def compare(reference: Any, candidate: Any, inputs: Mapping[str, np.ndarray]
            | Sequence[np.ndarray] | np.ndarray | None = None, *,
            reference_runtime: str | None = None, candidate_runtime: str | None = None,
            isolated: bool = True, budget_bytes: int | None = 256 << 20
            ) -> NumericsComparison:
    """Compare two executions tensor by tensor and layer by layer, through provenance.

    Args:
        reference: a :class:`~toolkit.numerics.capture.Capture`, or anything
            :func:`capture` takes (then run on ``inputs``).
        candidate: the same, compared against ``reference`` (a quantized conversion of it,
            a compiled or partitioned version, another runtime's run).
        inputs: the inputs both run on (a dict, a list in input order, one array); a float
            input given to a quantized model is quantized with its input's scale and zero
            point, an integer one given to a float model dequantized with the other's.
            ``None``: a capture's own inputs, else random inputs (seed 0).
        reference_runtime, candidate_runtime: the runtime of each side (see
            :func:`capture`).
        isolated: also re-run each candidate layer on the reference's inputs (the isolated
            error).
        budget_bytes: RAM budget of each capture (see :func:`capture`).

    Returns:
        A :class:`~toolkit.numerics.compare.NumericsComparison`: ``by_layer()`` (columns
        :data:`~toolkit.numerics.compare.LAYER_COLUMNS`), ``by_tensor()``, ``by_op()``,
        ``unmatched()``, ``first_divergence(sqnr_db=)``, ``worst(n)``, ``summary()``,
        ``plot()``, ``to_model_explorer(path)``, ``to_visq(path)``.

    Raises:
        ToolkitError: models whose tensors cannot be matched at all, inputs of the wrong
            shape or dtype, a capture that ran on other inputs.
    """
    from toolkit.numerics.compare import compare as _compare
    from toolkit.util.args import check_bool

    check_bool(isolated, "isolated", "tk.compare")
    return _compare(reference, candidate, inputs, reference_runtime=reference_runtime,
                    candidate_runtime=candidate_runtime, isolated=isolated,
                    budget_bytes=budget_bytes)


def diff(a: Any, b: Any, *, match: str = "model", alpha: float = 0.05,
         labels: tuple[str, str] = ("a", "b")) -> LayerDiff:
    """Compare two attributions per original layer, per op and per backend, with the run-to-run
    noise taken into account.

    Args:
        a, b: two attributions of any source the join reads (``tk.trace_join``,
            ``tk.join_ort``, ``tk.trace_join_many``, ``tk.read_executorch(...).attribution()``,
            ``tk.read_vela(...).attribution()``); ``a`` is the baseline, deltas are b - a.
        match: ``"model"`` (default): a and b must be profiles of one source model (two
            compiles, runtimes or devices); ``"name"``: pair the layers of the same name of
            two different models, ``unmatched()`` listing the others.
        alpha: false discovery rate of the noise test (Mann–Whitney U per layer on the
            per-run times, Benjamini–Hochberg across layers).
        labels: names of a and b in views and figures.

    Returns:
        A :class:`~toolkit.trace.views.diff.LayerDiff`: ``by_layer()``, ``by_op()``,
        ``by_backend()`` (per row: mean and p50 ms per run on each side, ``delta_ns``,
        ``delta_pct``, ``delta_share``, ``p_value``, ``beyond_noise``, ``verdict``,
        ``reason``), ``moved_ops()`` (ops fused in one compile and not the other, with their
        layers), ``unmatched()``, ``summary()``; ``toolkit.viz.diff_plots.plot_diff(d)``
        draws the waterfall.

    Raises:
        ToolkitError: a or b is not an attribution; two different source models without
            ``match="name"``; an unknown ``match`` or an ``alpha`` outside (0, 1).
    """
    from toolkit.trace.views.diff import diff as _diff

    return _diff(a, b, match=match, alpha=alpha, labels=labels)


def report(out: PathLike, trace: Any = None, model: Any = None, *, trace_b: Any = None,
           model_b: Any = None, attribution: Any = None, attribution_b: Any = None,
           numerics: Any = None, policy: str = "macs", skip_runs: int = 0,
           match: str = "model", labels: Sequence[str] = ("a", "b"),
           title: str = "Profiling report", top: int = 15, format: str | None = None) -> Path:
    """Write the profiling report people share: one self-contained HTML file (figures
    embedded, no server, opens offline), or the executed report notebook.

    The report is the notebook ``toolkit/viz/report/template.ipynb`` run with these
    parameters by papermill and exported without its code cells by nbconvert. Sections:
    summary (totals, match score, ``check()``), top layers, time per backend, the diff against
    a second trace (:func:`diff`: waterfall, verdicts, moved ops), unattributed events by
    reason, the provenance of the top layers (source ops → compiled ops → commands), and a
    numerics comparison.

    Args:
        out: the file to write (atomically).
        trace, model: a trace (path or :class:`~toolkit.trace.readers.read.Trace`) and the model it
            measured (compiled folder, model file, ``.conn.json`` of a partition, or a
            ``CompiledModel``/``PartitionResult``), joined with ``policy`` and
            ``skip_runs``; or give ``attribution`` (any attribution) instead.
        trace_b, model_b: a second trace to diff against (``model_b`` defaults to ``model``),
            or ``attribution_b``.
        numerics: a numerics comparison: any object with ``by_layer()`` returning a
            DataFrame (``tk.compare``'s), a DataFrame, or the path of a CSV of one.
        match: ``"model"`` or ``"name"`` (see :func:`diff`).
        labels: names of the two sides of the diff.
        title: the report's title; ``top``: layers in tables and figures.
        format: ``"html"`` or ``"notebook"`` (default: from ``out``'s suffix, ``.ipynb`` →
            notebook, else html).

    Returns:
        The path written.

    Raises:
        ToolkitError: the join's own error when a trace does not join its model (nothing is
            written); the diff's when the two sides measured different models; an unknown
            format; a numerics object without ``by_layer()``.
    """
    from toolkit.viz.report import write_report

    return write_report(out, trace=trace, model=model, trace_b=trace_b, model_b=model_b,
                        attribution=attribution, attribution_b=attribution_b,
                        numerics=numerics, policy=policy, skip_runs=skip_runs, match=match,
                        labels=labels, title=title, top=top, format=format)


for _name in __all__:
    globals()[_name].__module__ = "toolkit"
del _name
