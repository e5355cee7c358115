"""The one value every runtime returns: outputs by name, and the trace when one was recorded."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["RunResult"]


class RunResult(NamedTuple):
    """What ``tk.run`` returns, traced or not: ``outputs, trace = tk.run(...)`` always works.

    Attributes:
        outputs: the model's outputs by name (those of the last inference).
        trace: ``None`` when the run was not traced. ``tk.run`` gives a
            :class:`~toolkit.trace.readers.read.Trace` for every runtime (with the runtime's own
            record as ``trace.runtime``); the runtimes themselves record the reference
            runtime's :class:`~toolkit.runtime.tracer.EventTracer` (one event per op, or per
            command of a compiled model, per inference), a partition chain's DataFrame of
            part calls (:func:`toolkit.runtime.chain.run_connection`) or ONNX Runtime's
            :class:`~toolkit.runtime.onnxruntime.OrtRun`.
    """

    outputs: dict[str, np.ndarray]
    trace: Any = None

    def __repr__(self) -> str:
        outs = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self.outputs.items())
        if self.trace is None:
            tr = "not traced"
        elif getattr(self.trace, "meta", {}).get("format") == "ort":
            tr = f"ONNX Runtime profile {self.trace.meta.get('source', '')}"
        elif getattr(self.trace, "profile_path", None) is not None:
            tr = f"ONNX Runtime profile {self.trace.profile_path.name}"
        else:
            tr = f"{len(self.trace)} trace events"
        return f"RunResult({outs}; {tr})"
