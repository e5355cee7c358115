"""Fix a model's free dimensions (a batch, a sample count), so its shapes fold at compile time.

A converter writes a free batch dimension as ``-1`` in ``shape_signature`` (and some size
in ``shape``); the model then computes its reshape targets at run time (SHAPE,
STRIDED_SLICE, PACK ...). :func:`fix_free_dims` runs the model's kernels once on inputs of
the chosen shapes (zeros; the shape arithmetic computes real values) and returns a copy in
which every tensor has the static shape it takes then: constant folding (``fold_constants``)
then removes the shape arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.compiler.copy_model import copy_model
from toolkit.errors import ToolkitError
from toolkit.ir import Model
from toolkit.runtime.control_flow import CONTROL_FLOW_OPS
from toolkit.runtime.kernels import get_kernel
from toolkit.runtime.kernels.common import quiet

__all__ = ["fix_free_dims", "static_for_generation"]


def _zeros(shape: tuple[int, ...], t: Any) -> np.ndarray:
    fill = 0
    if t.quant is not None and t.quant.zero_point.size:
        fill = int(t.quant.zero_point.reshape(-1)[0])
    return np.full(shape, fill, dtype=t.dtype)


def fix_free_dims(model: Model, batch: int | None = None,
                  shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """Return a copy of ``model`` whose main-graph tensors have the static shapes they take
    for the chosen input shapes; ``model`` is unchanged (``tk.fix_free_dims``).

    Args:
        model: the model (its free dimensions are ``-1`` in ``shape_signature``).
        batch: the size of every free dimension of the inputs not named in ``shapes``;
            ``None`` takes the file's own ``shape`` there, as LiteRT does when it allocates
            a model without a resize.
        shapes: input name -> full shape, for any input (a free non-batch dimension, such as
            an audio model's sample count, is set this way: ``{"input": (1, 16000)}``);
            the fixed dimensions must match the file's.

    Raises ToolkitError for a model with control flow (its loop bodies may change shapes
    from one iteration to the next), a batch below 1, or a shape that names an unknown
    input, has another rank, contradicts a fixed dimension or has a size below 1."""
    if batch is not None and batch < 1:
        raise ToolkitError(f"batch must be >= 1, got {batch}", fix="pass batch >= 1")
    shapes = dict(shapes or {})
    names = [t.name for t in model.graph.inputs]
    unknown = [k for k in shapes if k not in names]
    if unknown:
        raise ToolkitError(f"shapes names {unknown}, which are not inputs of the model",
                           where="shapes", fix=f"name inputs among {names}")
    chosen: dict[str, tuple[int, ...]] = {}
    for t in model.graph.inputs:
        sig = tuple(t.shape_signature or t.shape)
        if t.name in shapes:
            want = tuple(int(d) for d in shapes[t.name])
            bad = len(want) != len(sig) or any(
                w < 1 or (s >= 0 and w != s) for w, s in zip(want, sig, strict=False))
            if bad:
                raise ToolkitError(f"shape {list(want)} for input {t.name!r} does not fit its "
                                   f"signature {list(sig)}", where=f"input {t.name!r}",
                                   fix="keep the rank and the fixed dimensions; set only the "
                                       "free (-1) ones, each to 1 or more")
            chosen[t.name] = want
        else:
            dims = tuple((batch if batch is not None else int(f)) if d < 0 else d
                         for d, f in zip(sig, t.shape, strict=False))
            if any(d < 1 for d in dims):
                raise ToolkitError(f"input {t.name!r} has free dimensions {list(sig)} and the "
                                   f"file's shape {list(t.shape)} gives no size for them",
                                   where=f"input {t.name!r}",
                                   fix=f"set them: tk.fix_free_dims(model, shapes={{"
                                       f"{t.name!r}: (...)}})")
            chosen[t.name] = dims
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
        values[t] = _zeros(chosen[t.name], t)
    for i, op in enumerate(g.ops):
        args = [None if t is None else values.get(t) for t in op.inputs]
        try:
            outs = quiet(get_kernel(op), op, args)
        except Exception as e:  # a kernel that cannot take zeros: say which op
            raise ToolkitError(f"{op.kind} failed while fixing the free dimensions to "
                               f"{chosen}: {e}",
                               where=f"subgraph 0 op {i} ({op.kind} {op.name!r})",
                               fix=("the op cannot run on zero-filled inputs of these shapes: "
                                    "choose other sizes with tk.fix_free_dims(model, shapes="
                                    "{input: shape}) (a free sample count of 1 may be too "
                                    "short for the model's windows)")) from e
        for t, v in zip(op.outputs, outs):
            values[t] = v
    for t in g.tensors:
        found = values.get(t)
        if found is not None and t.data is None:  # every activation, signature or not
            t.shape = tuple(int(d) for d in found.shape)
            t.shape_signature = None
    return work


def has_free_dims(model: Model) -> bool:
    """True when a tensor of the main graph has a free (-1) dimension."""
    return any(t.shape_signature is not None and any(d < 0 for d in t.shape_signature)
               for t in model.graph.tensors)


def static_for_generation(obj: Any, shapes: Mapping[str, Sequence[int]] | None = None) -> Any:
    """What ``tk.codegen`` generates from ``obj``: a Model with free dimensions (or with
    ``shapes``) fixed by :func:`fix_free_dims` (free dimensions not named take the file's
    shape, as LiteRT does); any other object as it is.

    Raises ToolkitError for ``shapes`` with a compiled model (its shapes were fixed when it
    was compiled)."""
    if not isinstance(obj, Model):
        if shapes:
            raise ToolkitError("shapes= applies to a model, not to a compiled one",
                               where="tk.codegen", fix="fix the shapes before compiling: "
                               "tk.compile(tk.fix_free_dims(model, shapes={...}))")
        return obj
    if not shapes and not has_free_dims(obj):
        return obj
    if any(op.type in CONTROL_FLOW_OPS for op in obj.graph.ops) and not shapes:
        return obj  # the generator's control-flow plan takes what it can, and says why not
    return fix_free_dims(obj, shapes=shapes)
