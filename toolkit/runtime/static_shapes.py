"""Fix a model's free dimensions for one batch size, so its shapes fold at compile time.

A converter writes a free batch dimension as ``-1`` in ``shape_signature`` (and some size
in ``shape``); the model then computes its reshape targets at run time (SHAPE,
STRIDED_SLICE, PACK ...). :func:`fix_free_dims` runs the model's kernels once on inputs of
the chosen batch (zeros; the shape arithmetic computes real values) and returns a copy in
which every tensor has the static shape it takes then: constant folding (``fold_constants``)
then removes the shape arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolkit.compiler.copy_model import copy_model
from toolkit.errors import ToolkitError
from toolkit.ir import Model
from toolkit.runtime.control_flow import CONTROL_FLOW_OPS
from toolkit.runtime.kernels import get_kernel
from toolkit.runtime.kernels.common import quiet

__all__ = ["fix_free_dims"]


def _zeros(shape: tuple[int, ...], t: Any) -> np.ndarray:
    fill = 0
    if t.quant is not None and t.quant.zero_point.size:
        fill = int(t.quant.zero_point.reshape(-1)[0])
    return np.full(shape, fill, dtype=t.dtype)


def fix_free_dims(model: Model, batch: int = 1) -> Model:
    """Return a copy of ``model`` whose main-graph tensors have the static shapes they take
    for inputs whose free dimensions are ``batch``; ``model`` is unchanged.

    Raises ToolkitError for a model with control flow (its loop bodies may change shapes
    from one iteration to the next) or a batch below 1."""
    if batch < 1:
        raise ToolkitError(f"batch must be >= 1, got {batch}", fix="pass batch >= 1")
    work = copy_model(model)
    g = work.graph
    if any(op.type in CONTROL_FLOW_OPS for op in g.ops):
        raise ToolkitError("cannot fix the free dimensions of a model with control flow",
                           where="subgraph 0", fix="compile it with its free dimensions")
    values: dict[Any, np.ndarray] = {}
    for t in g.tensors:
        if t.data is not None:
            values[t] = np.asarray(t.data)
    for t in g.inputs:
        sig = t.shape_signature or t.shape
        values[t] = _zeros(tuple(batch if d < 0 else d for d in sig), t)
    for i, op in enumerate(g.ops):
        args = [None if t is None else values.get(t) for t in op.inputs]
        try:
            outs = quiet(get_kernel(op), op, args)
        except Exception as e:  # a kernel that cannot take zeros: say which op
            raise ToolkitError(f"{op.kind} failed while fixing the free dimensions: {e}",
                               where=f"subgraph 0 op {i} ({op.kind} {op.name!r})",
                               fix=("the op cannot run on zero-filled inputs of this batch: "
                                    "compile the model with its free dimensions, or give the "
                                    "model fixed input shapes")) from e
        for t, v in zip(op.outputs, outs):
            values[t] = v
    for t in g.tensors:
        found = values.get(t)
        if found is not None and t.shape_signature is not None:
            t.shape = tuple(int(d) for d in found.shape)
            t.shape_signature = None
    return work
