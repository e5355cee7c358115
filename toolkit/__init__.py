"""toolkit: keep the thread from each original layer of a model to every runtime trace event.

    import toolkit as tk
    model = tk.load("sample_models/cnn.tflite")       # .tflite or .circle
    compiled = tk.compile(model)                        # origin-preserving passes + lowering
    outputs, trace = tk.run(compiled, trace=True, repeat=5, warmup=2)
    att = tk.trace_join(trace, compiled, policy="macs")
    att.by_layer()                                      # time per original layer

The entry points (``load``, ``save``, ``compile``, ``partition``, ``codegen``, ``run``,
``read_trace``, ``trace_join``, ``read_vela``, ``read_executorch``, ``explore``, ``capture``,
``compare``) are plain
functions defined in :mod:`toolkit.api`. The packages behind them are nouns: ``formats``,
``ir``, ``compiler``, ``partitioner``, ``generator``, ``runtime``, ``trace``, ``vela``, ``viz``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolkit.api import (
    capture,
    codegen,
    compare,
    compile,
    diff,
    explore,
    fix_free_dims,
    join_ort,
    load,
    load_onnx,
    lower_onnx,
    partition,
    read_executorch,
    read_trace,
    read_vela,
    register_custom_op,
    report,
    run,
    run_onnxruntime,
    save,
    session,
    trace_join,
    trace_join_many,
)
from toolkit.errors import ToolkitError
from toolkit.ir import Graph, Model, Op, Quantization, Tensor

if TYPE_CHECKING:
    from toolkit.builder import ModelBuilder
    from toolkit.compiler import CompiledModel, Target
    from toolkit.numerics.capture import Capture
    from toolkit.numerics.compare import NumericsComparison
    from toolkit.partitioner import PartitionResult
    from toolkit.runtime.result import RunResult
    from toolkit.runtime.tracer import EventTracer
    from toolkit.trace.join.attribution import Attribution
    from toolkit.trace.join.layer_views import LayerAttribution
    from toolkit.trace.readers.read import Trace

__all__ = [
    "load", "save", "compile", "partition", "codegen", "fix_free_dims", "register_custom_op",
    "run", "session", "read_trace", "trace_join",
    "trace_join_many",
    "read_vela", "load_onnx", "lower_onnx", "join_ort", "run_onnxruntime", "explore",
    "read_executorch", "capture", "compare", "Capture", "NumericsComparison",
    "diff", "report", "LayerDiff",
    "ToolkitError", "Graph", "Model", "Op", "Quantization", "Tensor",
    "CompiledModel", "Target", "PartitionResult", "RunResult", "EventTracer", "Trace",
    "Attribution", "LayerAttribution", "ModelBuilder",
]
__version__ = "0.1.0"

# Classes users name often, imported on first use so that `import toolkit` stays fast.
_LAZY = {
    "CompiledModel": "toolkit.compiler",
    "Target": "toolkit.compiler",
    "PartitionResult": "toolkit.partitioner",
    "RunResult": "toolkit.runtime.result",
    "EventTracer": "toolkit.runtime.tracer",
    "Trace": "toolkit.trace.readers.read",
    "Attribution": "toolkit.trace.join.attribution",
    "LayerAttribution": "toolkit.trace.join.layer_views",
    "LayerDiff": "toolkit.trace.views.diff",
    "ModelBuilder": "toolkit.builder",
    "Capture": "toolkit.numerics.capture",
    "NumericsComparison": "toolkit.numerics.compare",
}


def __getattr__(name: str) -> Any:
    """Import the classes of :data:`_LAZY` on first use (``tk.Target`` ...)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """What tab completion offers: the entry points and classes, not import helpers."""
    return sorted([*__all__, "__version__"])
