"""Run an ONNX model in ONNX Runtime at an optimization level, with an exact profile.

    r = run_onnxruntime("m.onnx", optimization="all", trace=True, repeat=20, warmup=3)
    r.optimized_path, r.profile_path      # join with toolkit.trace.readers.ort.attribution.join_ort
    r.timings                             # unprofiled vs profiled run time, kernel time

Steps: a session at the level saves ORT's optimized graph (``optimized_model_filepath``) and
runs ``warmup + repeat`` unprofiled inferences, each timed; with ``trace=True`` a second
session loads the saved graph at ``ORT_DISABLE_ALL`` with profiling and runs the same count, so
every kernel event's ``node_index`` is its node's position in the saved file (exact event ->
node). The profiler costs several microseconds per kernel; when a profiled run's kernel time
exceeds 1.5x the median unprofiled run time, a warning says so.

``onnxruntime`` is optional (``pip install toolkit[onnxruntime]``).
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import RuntimeInputError, ToolkitError

__all__ = ["run_onnxruntime", "OrtRun", "OPTIMIZATION_LEVELS", "PROFILER_OVERHEAD_LIMIT"]

#: Names accepted for ``optimization`` -> ``GraphOptimizationLevel`` attribute names.
OPTIMIZATION_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                       "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
#: Kernel time per profiled run above this multiple of the unprofiled run time warns.
PROFILER_OVERHEAD_LIMIT = 1.5


@dataclass
class OrtRun:
    """What :func:`run_onnxruntime` did.

    ``outputs``: the last unprofiled run's outputs by name. ``optimized_path``: ORT's saved
    optimized graph. ``profile_path``: the profile of that graph at ``ORT_DISABLE_ALL``
    (None without ``trace``). ``timings``: one row per measured run (warm-up runs left out):
    ``run`` (int64), ``unprofiled_ns`` (wall time of the unprofiled run), ``profiled_ns``
    (wall time of the profiled run, -1 without ``trace``), ``kernel_ns`` (sum of the profiled
    run's kernel events, -1 without ``trace``). ``warmup``: warm-up runs, which the profile
    holds first (runs ``0 .. warmup-1``). ``warnings``: texts of the warnings raised.
    """

    outputs: dict[str, np.ndarray]
    optimized_path: Path
    profile_path: Path | None
    timings: pd.DataFrame
    optimization: str
    warmup: int
    warnings: list[str] = field(default_factory=list)


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ToolkitError("running ONNX models needs onnxruntime",
                           fix="pip install 'toolkit[onnxruntime]'") from None
    return onnxruntime


_NUMPY_OF = {"tensor(float)": np.float32, "tensor(double)": np.float64,
             "tensor(float16)": np.float16, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
             "tensor(bool)": np.bool_}


def _feeds(session: Any, inputs: Any) -> dict[str, np.ndarray]:
    specs = session.get_inputs()
    if inputs is None:
        rng = np.random.default_rng(0)
        feeds: dict[str, np.ndarray] = {}
        for s in specs:
            dtype = _NUMPY_OF.get(s.type)
            if dtype is None:
                raise RuntimeInputError(f"cannot make a random input of type {s.type}",
                                        where=f"input {s.name!r}", fix="pass inputs=")
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in s.shape]
            value = rng.standard_normal(shape) if np.issubdtype(dtype, np.floating) else \
                rng.integers(0, 2, shape)
            feeds[s.name] = np.asarray(value).astype(dtype)
        return feeds
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    if isinstance(inputs, (list, tuple)):
        if len(inputs) != len(specs):
            raise RuntimeInputError(f"{len(inputs)} input(s) given, the model takes "
                                    f"{len(specs)}: {[s.name for s in specs]}",
                                    where="inputs",
                                    fix=(f"pass {len(specs)} arrays in the model's input order, "
                                         f"or a dict keyed by {[s.name for s in specs]}"))
        return {s.name: np.asarray(v) for s, v in zip(specs, inputs)}
    if isinstance(inputs, dict):
        names = {s.name for s in specs}
        unknown = sorted(set(inputs) - names)
        missing = sorted(names - set(inputs))
        if unknown or missing:
            raise RuntimeInputError(f"inputs do not match the model: unknown {unknown}, "
                                    f"missing {missing}", fix=f"pass {sorted(names)}")
        return {k: np.asarray(v) for k, v in inputs.items()}
    raise RuntimeInputError(f"inputs must be a dict, a list or an array, not "
                            f"{type(inputs).__name__}",
                            where="inputs",
                            fix=("pass a dict {input name: array}, a list of arrays in input "
                                 "order, or one array for a one-input model"))


def _options(ort: Any, level: str, threads: int) -> Any:
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[level])
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return so


def _run_kernel_ns(profile: Path) -> np.ndarray:
    """Kernel nanoseconds per ``model_run`` span of a profile, in start order."""
    from toolkit.formats.ort_profile import read_ort_profile_events

    frame, _ = read_ort_profile_events(profile)
    name = frame["name"].astype(str).to_numpy()
    cat = frame["cat"].astype(str).to_numpy()
    ts = frame["ts_ns"].to_numpy(dtype=np.int64)
    dur = frame["dur_ns"].to_numpy(dtype=np.int64)
    span = (cat == "Session") & (name == "model_run")
    starts = np.sort(ts[span])
    order = np.argsort(ts[span], kind="stable")
    ends = (ts[span] + dur[span])[order]
    kernel = (cat == "Node") & np.char.endswith(name.astype(str), "_kernel_time")
    slot = np.searchsorted(starts, ts[kernel], side="right") - 1
    ok = (slot >= 0) & (ts[kernel] + dur[kernel] <= ends[np.maximum(slot, 0)]) if len(starts) \
        else np.zeros(int(kernel.sum()), bool)
    return np.bincount(slot[ok], weights=dur[kernel][ok].astype(np.float64),
                       minlength=len(starts)).astype(np.int64)


def run_onnxruntime(model: str | os.PathLike[str] | Any, inputs: Any = None, *,
                    optimization: str = "all", trace: bool = True, repeat: int = 10,
                    warmup: int = 2, threads: int = 1,
                    workdir: str | os.PathLike[str] | None = None) -> OrtRun:
    """Run an ONNX model in ONNX Runtime (CPU) and profile it exactly.

    Args:
        model: an ``.onnx`` path, or a model loaded by
            :func:`~toolkit.importers.onnx.load_onnx` (its ``path`` is used).
        inputs: dict name -> array, list in input order, one array, or None (random, seed 0).
        optimization: ``"disable"``, ``"basic"``, ``"extended"`` or ``"all"``.
        trace: also profile the saved optimized graph at ``ORT_DISABLE_ALL``.
        repeat: measured runs (>= 1); warmup: runs before them (>= 0).
        threads: ORT's intra-op threads.
        workdir: where the optimized graph and the profile go (default: a new temporary
            folder, kept).

    Returns:
        An :class:`OrtRun`; join its profile with
        ``join_ort(r.profile_path, model, r.optimized_path)``.

    Raises:
        ToolkitError: onnxruntime missing, a bad level or count, a model ORT refuses.
        RuntimeInputError: inputs that do not match the model.
    """
    if optimization not in OPTIMIZATION_LEVELS:
        raise ToolkitError(f"unknown optimization level {optimization!r}",
                           fix=f"use one of {list(OPTIMIZATION_LEVELS)}")
    if repeat < 1 or warmup < 0:
        raise ToolkitError(
            f"repeat must be >= 1 and warmup >= 0, got {repeat} and {warmup}",
            fix="pass repeat >= 1 and warmup >= 0",
        )
    path = Path(getattr(model, "path", None) or model) if not isinstance(
        model, (str, os.PathLike)) else Path(model)
    if not path.is_file():
        raise ToolkitError("no such model file", where=str(path),
                           fix="pass the .onnx path (a model from load_onnx keeps its path)")
    ort = _ort()
    out_dir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="ort_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = path.name[:-5] if path.name.endswith(".onnx") else path.name
    optimized = out_dir / f"{stem}.{optimization}.opt.onnx"
    so = _options(ort, optimization, threads)
    so.optimized_model_filepath = str(optimized)
    providers = ["CPUExecutionProvider"]
    try:
        session = ort.InferenceSession(str(path), so, providers=providers)
    except Exception as exc:  # ORT raises its own exception types
        raise ToolkitError(f"ONNX Runtime refused the model ({exc})", where=str(path),
                           fix="pass an .onnx model file (torch.onnx.export writes one)"
                           ) from None
    from toolkit.progress import progress

    feeds = _feeds(session, inputs)
    unprofiled: list[int] = []
    result: list[Any] = []
    try:
        for k in progress(range(warmup + repeat), desc="ONNX Runtime inferences", unit="run"):
            t = time.perf_counter_ns()  # after the bar's step: its time is not measured
            result = session.run(None, feeds)
            if k >= warmup:
                unprofiled.append(time.perf_counter_ns() - t)
    except Exception as exc:
        raise RuntimeInputError(f"ONNX Runtime failed to run the model ({exc})",
                                where=str(path),
                                fix=("check the inputs' shapes and dtypes against the model's "
                                     "inputs, and that the model loads in ONNX Runtime "
                                     "(onnxruntime.InferenceSession)")) from None
    outputs = {o.name: np.asarray(v) for o, v in zip(session.get_outputs(), result)}
    profiled = [-1] * repeat
    kernel = [-1] * repeat
    profile_path: Path | None = None
    notes: list[str] = []
    if trace:
        po = _options(ort, "disable", threads)
        po.enable_profiling = True
        po.profile_file_prefix = str(out_dir / f"{stem}.{optimization}.opt.prof")
        psession = ort.InferenceSession(str(optimized), po, providers=providers)
        for k in progress(range(warmup + repeat), desc="profiled inferences", unit="run"):
            t = time.perf_counter_ns()
            psession.run(None, feeds)
            if k >= warmup:
                profiled[k - warmup] = time.perf_counter_ns() - t
        profile_path = Path(psession.end_profiling())
        per_run = _run_kernel_ns(profile_path)
        if len(per_run) == warmup + repeat:
            kernel = per_run[warmup:].tolist()
        median = float(np.median(unprofiled))
        worst = max(kernel)
        if median > 0 and worst > PROFILER_OVERHEAD_LIMIT * median:
            text = (f"profiled kernel time ({worst / 1e3:.0f} us in a run) exceeds "
                    f"{PROFILER_OVERHEAD_LIMIT}x the unprofiled run time "
                    f"({median / 1e3:.0f} us): ORT's profiler costs several us per kernel, so "
                    "small kernels look slower than they are")
            warnings.warn(text, stacklevel=2)
            notes.append(text)
    timings = pd.DataFrame({
        "run": np.arange(repeat, dtype=np.int64),
        "unprofiled_ns": np.asarray(unprofiled, dtype=np.int64),
        "profiled_ns": np.asarray(profiled, dtype=np.int64),
        "kernel_ns": np.asarray(kernel, dtype=np.int64),
    })
    return OrtRun(outputs, optimized, profile_path, timings, optimization, warmup, notes)
