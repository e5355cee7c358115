"""The isolated error of a layer: the candidate's ops of that layer re-run on the reference's
values of their inputs, in the toolkit's runtime (bit-exact with LiteRT for int8).

The error a layer shows in a full candidate run is *inherited* (from the layers before it)
plus what it *adds*; feeding it the reference's inputs leaves only what it adds. A layer's
ops are the candidate ops that carry it (through ``model.origin(oid).layers``) up to its
boundary tensor, plus the op that produces the boundary; each input they read from outside
that set is taken from the reference (its matched tensor), quantized to the candidate
tensor's scale and zero point (rounding half away from zero, saturating) when that one is
quantized, else cast to its dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.ir import Op
from toolkit.numerics.capture import Capture, TensorRecord

__all__ = ["rerun_layer", "rerun_region", "layer_region", "to_candidate_dtype",
           "origin_keys_of"]


def origin_keys_of(rec: TensorRecord) -> frozenset[str]:
    """The origin names of ``rec``'s producer (``#id`` for an origin without a name)."""
    return frozenset(n if n else f"#{o}" for o, n in zip(rec.origins, rec.origin_names))


def to_candidate_dtype(value: np.ndarray, rec: TensorRecord) -> np.ndarray:
    """A float (dequantized) value as the candidate tensor ``rec`` holds it."""
    dtype = np.dtype(rec.dtype)
    if rec.scale is not None and rec.zero_point is not None:
        shape = [1] * value.ndim
        if rec.scale.size > 1:
            shape[rec.axis] = -1
        x = value / rec.scale.reshape(shape)
        q = np.sign(x) * np.floor(np.abs(x) + 0.5) + rec.zero_point.reshape(shape)
        info = np.iinfo(dtype)
        return np.clip(q, info.min, info.max).astype(dtype)
    return np.asarray(value).astype(dtype, copy=False).reshape(rec.shape)


def layer_region(cand: Capture, layer: str | None, boundary: TensorRecord,
                 origin_keys: frozenset[str] = frozenset()) -> list[Op]:
    """The candidate ops re-run for ``layer``, in execution order: those up to ``boundary``
    that carry ``layer``, produce ``boundary``, or carry one of ``origin_keys`` (the origin
    names of the reference op that made the reference's boundary: when the reference fused
    several source ops, the candidate's ops of those source ops are re-run together)."""
    ops: list[Op] = []
    seen: set[int] = set()
    for rec in cand.records.values():
        if rec.op is None or rec.order > boundary.order or id(rec.op) in seen:
            continue
        if rec.op is boundary.op or (layer is not None and layer in rec.layers) \
                or not origin_keys.isdisjoint(origin_keys_of(rec)):
            seen.add(id(rec.op))
            ops.append(rec.op)
    return ops


def rerun_layer(cand: Capture, layer: str | None, boundary: TensorRecord,
                ref_value_of: Callable[[str], np.ndarray | None],
                origin_keys: frozenset[str] = frozenset()
                ) -> tuple[np.ndarray | None, str]:
    """Re-run the candidate ops of ``layer`` ending at ``boundary`` (see
    :func:`layer_region`) on reference inputs.

    ``ref_value_of(cand_tensor)`` returns the reference's dequantized value matched to a
    candidate tensor (None when it has none). Returns ``(boundary value dequantized, "")``
    or ``(None, why it could not be re-run)``.
    """
    return rerun_region(cand, layer_region(cand, layer, boundary, origin_keys), boundary,
                        ref_value_of)


MAX_FEEDERS = 16
"""Most candidate-only ops (a converter's QUANTIZE/DEQUANTIZE ...) pulled into a re-run."""


def _with_feeders(cand: Capture, ops: list[Op],
                  ref_value_of: Callable[[str], np.ndarray | None]) -> list[Op]:
    """``ops`` plus the candidate ops that feed them a tensor with no reference counterpart
    and whose own outputs have none either (ops the converter added, such as QUANTIZE and
    DEQUANTIZE around a float op), back to tensors the reference has; in execution order."""
    order = {id(r.op): r.order for r in cand.records.values() if r.op is not None}
    have = {id(op) for op in ops}
    out = list(ops)
    todo = list(ops)
    while todo and len(out) - len(ops) < MAX_FEEDERS:
        op = todo.pop()
        for t in op.inputs:
            if t is None or t.is_const or t.is_variable or ref_value_of(t.name) is not None:
                continue
            rec = cand.records.get(t.name)
            prod = None if rec is None else rec.op
            if prod is None or id(prod) in have \
                    or any(ref_value_of(o.name) is not None for o in prod.outputs):
                continue
            have.add(id(prod))
            out.append(prod)
            todo.append(prod)
    return sorted(out, key=lambda op: order.get(id(op), -1))


def rerun_region(cand: Capture, ops: list[Op], boundary: TensorRecord,
                 ref_value_of: Callable[[str], np.ndarray | None]
                 ) -> tuple[np.ndarray | None, str]:
    """Run ``ops`` (execution order) on reference inputs; return ``boundary`` dequantized,
    or None and the reason."""
    from toolkit.runtime.kernels import get_kernel
    from toolkit.runtime.kernels.common import quiet

    if not ops:
        return None, "the candidate has no op of this layer"
    ops = _with_feeders(cand, ops, ref_value_of)
    made = {t.name for op in ops for t in op.outputs}
    values: dict[str, np.ndarray] = {}
    for op in ops:
        args: list[np.ndarray | None] = []
        for t in op.inputs:
            if t is None:
                args.append(None)
            elif t.is_const or (t.is_variable and t.producer is None):
                args.append(t.data)  # a state without data starts from zeros in its kernel
            elif t.name in values:
                args.append(values[t.name])
            elif t.name in made:
                return None, f"input {t.name!r} is made by a later op of the layer"
            else:
                ref = ref_value_of(t.name)
                held = cand.records.get(t.name)
                if ref is None or held is None:
                    return None, f"input {t.name!r} has no reference counterpart"
                args.append(to_candidate_dtype(ref.reshape(held.shape), held))
        try:
            res = quiet(get_kernel(op), op, args)
        except Exception as e:  # reported in the row, never raised
            return None, f"{op.kind} cannot be re-run alone: {type(e).__name__}: {e}"
        for t, r in zip(op.outputs, res):
            values[t.name] = np.asarray(r)
    out = values.get(boundary.name)
    if out is None:
        return None, "the boundary tensor was not re-made"
    if boundary.scale is not None and boundary.zero_point is not None:
        from toolkit.numerics.capture import dequantize_array

        return dequantize_array(out, boundary.scale, boundary.zero_point, boundary.axis), ""
    return np.asarray(out, dtype=np.float64), ""
