"""Fold a per-output-channel affine map ``y = x * scale + shift`` into the weights and bias of
the CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED op that produces ``x``.

Shared by :mod:`fold_batch_norm` and :mod:`fuse_bias_add`. The arithmetic is done in float64
and rounded once to float32. Only float32 weights and biases are folded (quantized weights are
left alone).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.compiler.passes._match import (
    const_array,
    const_name,
    is_float32,
    op_is_static,
    other_input,
    per_channel,
    sole_consumer,
    with_options,
)
from toolkit.ir import Graph, Op, Tensor

__all__ = ["WEIGHT_AXIS", "foldable_producer", "channel_const", "fold_affine"]

#: Output-channel axis of the weights of each foldable op type.
WEIGHT_AXIS = {"CONV_2D": 0, "FULLY_CONNECTED": 0, "DEPTHWISE_CONV_2D": 3}


def foldable_producer(graph: Graph, op: Op) -> Op | None:
    """Return the CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED producing one input of the binary
    ``op`` when its weights and bias can absorb a per-channel constant, else None.

    Requires: no fused activation, a single output read only by ``op``, float32 constant
    weights (and bias if any, of shape ``[C]``), static shapes.
    """
    if len(op.inputs) != 2 or not op.outputs:
        return None
    for x in op.inputs:
        if x is None or x.producer is None:
            continue
        prod = x.producer
        axis = WEIGHT_AXIS.get(prod.type)
        if axis is None or prod.activation != 0 or len(prod.outputs) != 1:
            continue
        if sole_consumer(graph, x) is not op or not op_is_static(prod) or not is_float32(x):
            continue
        w = prod.inputs[1] if len(prod.inputs) > 1 else None
        if w is None or not w.is_const or not is_float32(w):
            continue
        c = x.shape[-1] if x.shape else 0
        if len(w.shape) <= axis or w.shape[axis] != c:
            continue
        b = prod.inputs[2] if len(prod.inputs) > 2 else None
        if b is not None and (not b.is_const or not is_float32(b) or b.data is None
                              or b.data.size != c):
            continue
        return prod
    return None


def channel_const(op: Op, x: Tensor) -> np.ndarray | None:
    """Return the other input of the binary ``op`` as a float64 ``[C]`` vector when it is a
    float32 constant that broadcasts along the last axis of ``x`` only, else None."""
    k = other_input(op, x)
    arr = const_array(k)
    if arr is None or not is_float32(k) or not x.shape:
        return None
    out = op.outputs[0]
    if out.shape != x.shape:
        return None
    v = per_channel(arr, len(x.shape), x.shape[-1])
    if v is None or not np.isfinite(v).all():
        return None
    return v


def fold_affine(graph: Graph, prod: Op, scale: np.ndarray | None, shift: np.ndarray | None,
                absorbed: Sequence[Op], activation: int) -> None:
    """Fold ``y = prod(x) * scale + shift`` into ``prod`` and make it absorb ``absorbed`` (the
    chain of ops from ``prod``'s output to ``y``, in order); ``prod`` takes ``activation``."""
    out = prod.outputs[0]
    c = out.shape[-1]
    axis = WEIGHT_AXIS[prod.type]
    w_t = prod.inputs[1]
    assert w_t is not None
    b_t = prod.inputs[2] if len(prod.inputs) > 2 else None
    bias = np.zeros(c, np.float64) if b_t is None else np.asarray(
        b_t.data, dtype=np.float64).reshape(c)
    if scale is not None:
        w = np.asarray(w_t.data, dtype=np.float64)
        shape = [1] * w.ndim
        shape[axis] = c
        w = w * scale.reshape(shape)
        new_w = graph.add_const(const_name(graph, w_t.name), w.astype(np.float32))
        graph.set_input(prod, 1, new_w)
        bias = bias * scale
    if shift is not None:
        bias = bias + shift
    if scale is not None or shift is not None:
        new_b = graph.add_const(const_name(graph, b_t.name if b_t is not None
                                           else out.name + "/bias"), bias.astype(np.float32))
        if len(prod.inputs) > 2:
            graph.set_input(prod, 2, new_b)
        else:
            graph.set_inputs(prod, [*prod.inputs, new_b])
    final = absorbed[-1].outputs[0]
    graph.replace_all_uses_with(final, out)
    if activation:
        with_options(prod, fusedActivationFunction=activation)
    for op in reversed(absorbed):
        graph.absorb(prod, [op])
