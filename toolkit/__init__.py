"""toolkit: keep the thread from each original layer of a model to every runtime trace event.

    import toolkit as tk
    model = tk.load("sample_models/cnn.tflite")       # .tflite or .circle
    compiled = tk.compile(model)                        # origin-preserving passes + lowering
    outputs, trace = tk.run(compiled, trace=True, repeat=5)
    att = tk.trace_join(trace, compiled, policy="macs")
    att.by_layer()                                      # time per original layer

The face of the package is this module; everything else lives in sub-packages the user need
not know (formats, ir, compile, partition, runtime, trace, vela, viz).
"""

from __future__ import annotations

from typing import Any

from toolkit import formats, schema
from toolkit.errors import ToolkitError
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import save
from toolkit.ir import Graph, Model, Op, Quantization, Tensor

__all__ = [
    "ToolkitError", "load", "save", "compile", "partition", "run", "read_trace",
    "trace_join", "read_vela", "Graph", "Model", "Op", "Quantization", "Tensor",
    "formats", "schema",
]
__version__ = "0.1.0"

_LAZY = {
    "compile": ("toolkit.compiler", "compile_model"),
    "partition": ("toolkit.partitioner", "partition"),
    "CompiledModel": ("toolkit.compiler", "CompiledModel"),
    "Target": ("toolkit.compiler", "Target"),
    "run": ("toolkit.runtime.interpreter", "run"),
    "read_trace": ("toolkit.trace", "read_trace"),
    "trace_join": ("toolkit.trace", "trace_join"),
    "read_vela": ("toolkit.vela", "read_vela"),
    "ModelBuilder": ("toolkit.builder", "ModelBuilder"),
    "EventTracer": ("toolkit.runtime.tracer", "EventTracer"),
}


def __getattr__(name: str) -> Any:
    """Import the heavier entry points on first use (``tk.compile``, ``tk.run``, ...)."""
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(spec[0]), spec[1])
    globals()[name] = value
    return value
