"""Small predicates and helpers shared by the pattern-matching passes."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from toolkit.ir import Graph, Op, Quantization, Tensor
from toolkit.schema import ACTIVATION_CODES

__all__ = [
    "ACT", "is_float32", "is_plain_int", "is_static", "op_is_static", "sole_consumer",
    "is_graph_output", "const_array", "per_channel", "with_options", "same_quant",
    "same_type", "other_input", "const_name",
]

#: Fused activation codes by name (NONE, RELU, RELU_N1_TO_1, RELU6, TANH, ...).
ACT: dict[str, int] = ACTIVATION_CODES


def _quantized(t: Tensor) -> bool:
    q = t.quant
    return q is not None and q.scale.size > 0


def is_float32(t: Tensor | None) -> bool:
    """True for a float32 tensor without quantization parameters."""
    return t is not None and t.dtype == np.float32 and not _quantized(t)


def is_plain_int(t: Tensor | None) -> bool:
    """True for an int32/int64 tensor without quantization parameters."""
    return t is not None and t.dtype in (np.int32, np.int64) and not _quantized(t)


def is_static(t: Tensor | None) -> bool:
    """True when the tensor (if any) has a fully known shape."""
    return t is None or not t.is_dynamic


def op_is_static(op: Op) -> bool:
    """True when every input and output of ``op`` has a fully known shape."""
    return all(is_static(t) for t in op.inputs) and all(is_static(t) for t in op.outputs)


def is_graph_output(graph: Graph, t: Tensor) -> bool:
    """True when ``t`` is an output of ``graph``."""
    return any(o is t for o in graph.outputs)


def sole_consumer(graph: Graph, t: Tensor) -> Op | None:
    """Return the only op reading ``t``, or None when there are several, none, or ``t`` is a
    graph output (its value must then survive)."""
    if len(t.consumers) != 1 or is_graph_output(graph, t):
        return None
    c = t.consumers[0]
    if sum(1 for x in c.inputs if x is t) != 1:
        return None
    return c


def const_array(t: Tensor | None) -> np.ndarray | None:
    """Return the data of a constant tensor, None for anything else."""
    if t is None or not t.is_const:
        return None
    return np.asarray(t.data)


def per_channel(arr: np.ndarray, out_rank: int, channels: int) -> np.ndarray | None:
    """Return ``arr`` as a float64 vector of ``channels`` values when it broadcasts only along
    the last axis of a rank-``out_rank`` tensor (a scalar, ``[C]``, ``[1, .., 1, C]``), else
    None."""
    if arr.ndim > out_rank:
        return None
    if arr.ndim and (any(d != 1 for d in arr.shape[:-1]) or arr.shape[-1] not in (1, channels)):
        return None
    flat = arr.reshape(-1)
    if flat.size == channels:
        return flat.astype(np.float64)
    return np.full(channels, float(flat[0])) if flat.size == 1 else None


def with_options(op: Op, **fields: Any) -> None:
    """Give ``op`` a copy of its options object with ``fields`` set (never edits in place)."""
    opts = copy.copy(op.options)
    for k, v in fields.items():
        setattr(opts, k, v)
    op.options = opts


def same_quant(a: Quantization | None, b: Quantization | None) -> bool:
    """True when two quantizations (or their absence) are the same."""
    if a is None or a.scale.size == 0:
        return b is None or b.scale.size == 0
    if b is None or b.scale.size == 0:
        return False
    return (a.scale.shape == b.scale.shape and bool(np.array_equal(a.scale, b.scale))
            and bool(np.array_equal(np.broadcast_to(a.zero_point, a.scale.shape),
                                    np.broadcast_to(b.zero_point, b.scale.shape)))
            and (a.scale.size == 1 or a.quantized_dimension == b.quantized_dimension))


def same_type(a: Tensor, b: Tensor) -> bool:
    """True when two tensors have the same element type and quantization."""
    return a.type_code == b.type_code and same_quant(a.quant, b.quant)


def other_input(op: Op, t: Tensor) -> Tensor | None:
    """For a two-input op reading ``t`` once, return its other input."""
    a, b = op.inputs[0], op.inputs[1]
    if a is t and b is not t:
        return b
    if b is t and a is not t:
        return a
    return None


def const_name(graph: Graph, base: str) -> str:
    """Return a fresh tensor name derived from ``base``."""
    return graph.unique_name(base)
