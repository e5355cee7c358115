"""What a user passed as a trace, and which reader and provenance a join of it takes: one set of
rules for :func:`toolkit.trace_join`, :func:`toolkit.run`'s result and the command line.

    route = resolve_join(trace, model, optimized)   # JoinRoute("onnxruntime", ...)

Every decision is made on the object's type (``isinstance``) or, for a file, on its content
(ExecuTorch's magic bytes) or its suffix (``.onnx``): never on a type's name.

=============== ===================================================================================
route           when
=============== ===================================================================================
``executorch``  the trace is an ETDump (a ``.etdp`` file, a decoded ``ETDump``, the
                :class:`~toolkit.trace.readers.read.Trace` ``read_trace`` made of one) or the model
                an ETRecord
``onnxruntime`` the trace is an ORT profile (``Trace.meta["format"] == "ort"``, or a
                :class:`~toolkit.runtime.onnxruntime.OrtRun`), the model an ONNX model (a
                ``.onnx`` path or a Model whose format is ``onnx``), or ``optimized`` is given
``toolkit``     anything else: the toolkit's own join against a compiled model, a partition, a
                provenance
=============== ===================================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.formats.etdump import ETDump, sniff_executorch_file
from toolkit.formats.etrecord import ETRecord
from toolkit.ir import Model
from toolkit.runtime.onnxruntime import OrtRun
from toolkit.runtime.tracer import EventTracer
from toolkit.trace.readers.read import Trace, read_trace

__all__ = ["JoinRoute", "Route", "resolve_join", "run_trace", "executorch_kind"]

Route = Literal["executorch", "onnxruntime", "toolkit"]


@dataclass(frozen=True)
class JoinRoute:
    """Where a join goes: ``route`` and the arguments for it (``trace``, ``model``,
    ``optimized``: an ORT run's profile and saved graph are taken out of it)."""

    route: Route
    trace: Any
    model: Any
    optimized: Any = None


def executorch_kind(value: Any) -> str | None:
    """``etdump``, ``etrecord``, ``program`` or ``inspector_csv`` for an ExecuTorch object or
    file (by its first bytes), else None."""
    if isinstance(value, ETDump):
        return "etdump"
    if isinstance(value, ETRecord):
        return "etrecord"
    if isinstance(value, Trace):
        return "etdump" if value.meta.get("format") == "etdump" else None
    if isinstance(value, (str, os.PathLike)) and Path(value).is_file():
        with open(value, "rb") as f:
            return sniff_executorch_file(f.read(64))
    return None


def _is_onnx(model: Any) -> bool:
    if isinstance(model, Model):
        return model.format == "onnx"
    return isinstance(model, (str, os.PathLike)) and str(model).lower().endswith(".onnx")


def resolve_join(trace: Any, model: Any, optimized: Any = None, *,
                 where: str = "tk.trace_join") -> JoinRoute:
    """Decide the route of a join (see the module docstring).

    Raises:
        ToolkitError: an ORT run that was not profiled.
    """
    if isinstance(trace, OrtRun):  # tk.run_onnxruntime(..., trace=True)
        if trace.profile_path is None:
            raise ToolkitError("this ONNX Runtime run was not profiled", where=where,
                               fix="run it with trace=True")
        return JoinRoute("onnxruntime", trace.profile_path, model,
                         trace.optimized_path if optimized is None else optimized)
    if isinstance(trace, Trace) and trace.meta.get("format") == "ort":
        if optimized is None:
            optimized = trace.meta.get("optimized_path")  # a trace of tk.run
        return JoinRoute("onnxruntime", trace, model, optimized)
    if "etdump" in (executorch_kind(trace), executorch_kind(model)) or \
            executorch_kind(model) == "etrecord":
        return JoinRoute("executorch", trace, model)
    if optimized is not None or _is_onnx(model):
        return JoinRoute("onnxruntime", trace, model, optimized)
    return JoinRoute("toolkit", trace, model)


def run_trace(recorded: Any) -> Trace | None:
    """The :class:`Trace` of what a runtime recorded (``RunResult.trace`` of every runtime):
    an :class:`~toolkit.runtime.tracer.EventTracer` (the reference and native runtimes), a
    DataFrame of part calls (a partition chain), an :class:`OrtRun` (its profile, with
    ``meta["optimized_path"]`` and ``meta["timings"]``: profiled vs unprofiled time per run),
    or None. The recorder itself is :attr:`Trace.runtime`.

    Raises:
        ToolkitError: a recorder of another kind.
    """
    if recorded is None or isinstance(recorded, Trace):
        return recorded
    if isinstance(recorded, OrtRun):
        if recorded.profile_path is None:
            return None
        from toolkit.trace.readers.ort.profile import read_ort_profile

        trace = read_ort_profile(recorded.profile_path)
        meta = {**trace.meta, "optimized_path": recorded.optimized_path,
                "timings": recorded.timings, "warmup": recorded.warmup}
        return Trace(trace.events, meta, trace.int_keys, trace.int_key_rows, runtime=recorded)
    if isinstance(recorded, (EventTracer, pd.DataFrame)):
        trace = read_trace(recorded)
        return Trace(trace.events, trace.meta, trace.int_keys, trace.int_key_rows,
                     runtime=recorded)
    raise ToolkitError(f"a runtime recorded a {type(recorded).__name__}, not a trace",
                       fix="report it: every runtime records an EventTracer, a DataFrame of "
                           "part calls or an ONNX Runtime profile")
