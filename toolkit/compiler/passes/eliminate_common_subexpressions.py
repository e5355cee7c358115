"""Common-subexpression elimination: of two ops computing the same thing, keep the first.

Origins: **absorb**. The first op swallows its duplicate: its origin set becomes the union
(both source ops are now computed by it), and every reader of the duplicate reads the first
op's outputs.

Two ops are the same when they have the same type, custom code, options, custom options, inputs
(the same tensors, or constants with equal type, shape, quantization and bytes) and output
types, shapes and quantization. Ops with side effects or state (variables, control flow,
random ops, custom ops other than ``LAYER_NORM``) are never merged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolkit.compiler.passes._match import is_graph_output, same_type
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op, Tensor

__all__ = ["EliminateCommonSubexpressions", "IMPURE_OPS", "PURE_CUSTOM_CODES", "is_pure"]

IMPURE_OPS = frozenset({
    "ASSIGN_VARIABLE", "READ_VARIABLE", "VAR_HANDLE", "CALL_ONCE", "WHILE", "IF", "CALL",
    "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "HASHTABLE",
    "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "RUN_MODEL",
})
PURE_CUSTOM_CODES = frozenset({"LAYER_NORM"})
_SMALL_CONST = 4096


def is_pure(op: Op) -> bool:
    """True when ``op`` has no side effect and no state (safe to merge or drop)."""
    if op.type in IMPURE_OPS:
        return False
    if op.type == "CUSTOM" and op.custom_code not in PURE_CUSTOM_CODES:
        return False
    return not any(t is not None and t.is_variable for t in (*op.inputs, *op.outputs))


def _freeze(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, (bytes, str, int, float, bool)) or v is None:
        return v
    if hasattr(v, "__dict__"):
        return (type(v).__name__, tuple(sorted((k, _freeze(x)) for k, x in vars(v).items())))
    return repr(v)


def _quant_key(t: Tensor) -> Any:
    q = t.quant
    if q is None or q.scale.size == 0:
        return None
    return (q.scale.tobytes(), np.asarray(q.zero_point, np.int64).tobytes(),
            q.quantized_dimension)


def _small_const(t: Tensor | None) -> bool:
    return t is not None and t.data is not None and not t.is_variable \
        and t.data.nbytes <= _SMALL_CONST


def _input_key(t: Tensor | None) -> Any:
    """Bucket key of an input: the tensor itself, or for a small constant its type and shape
    (contents are compared only between ops that share a bucket)."""
    if t is None:
        return None
    if _small_const(t):
        return ("const", t.type_code, t.shape)
    return id(t)


def _same_input(a: Tensor | None, b: Tensor | None) -> bool:
    if a is b:
        return True
    if not (_small_const(a) and _small_const(b)):
        return False
    assert a is not None and b is not None and a.data is not None and b.data is not None
    return _quant_key(a) == _quant_key(b) and bool(np.array_equal(a.data, b.data))


class EliminateCommonSubexpressions(GraphPass):
    """The first of two identical ops absorbs the second."""

    name = "eliminate_common_subexpressions"
    relation = "absorb"

    def run(self, graph: Graph) -> bool:
        """Merge every duplicate op into its first occurrence; return True on change."""
        changed = False
        seen: dict[Any, list[Op]] = {}
        for op in list(graph.ops):
            if op.graph is not graph or not op.outputs or not is_pure(op):
                continue
            key = (op.type, op.custom_code, tuple(_input_key(t) for t in op.inputs),
                   tuple((t.type_code, t.shape) for t in op.outputs))
            bucket = seen.setdefault(key, [])
            twin = next((o for o in bucket if self._same(o, op)), None)
            if twin is None or not self._can_merge(graph, twin, op):
                bucket.append(op)
                continue
            for keep, dup in zip(twin.outputs, op.outputs):
                graph.replace_all_uses_with(dup, keep)
            graph.absorb(twin, [op])
            changed = True
        return changed

    @staticmethod
    def _same(a: Op, b: Op) -> bool:
        if a.custom_options != b.custom_options or a.version != b.version:
            return False
        if not all(_same_input(x, y) for x, y in zip(a.inputs, b.inputs)):
            return False
        if any(not same_type(x, y) for x, y in zip(a.outputs, b.outputs)):
            return False
        if (a.options is None) != (b.options is None):
            return False
        return a.options is None or _freeze(a.options) == _freeze(b.options)

    @staticmethod
    def _can_merge(graph: Graph, keep: Op, dup: Op) -> bool:
        for k, d in zip(keep.outputs, dup.outputs):
            if is_graph_output(graph, d) and is_graph_output(graph, k):
                return False
        return True
