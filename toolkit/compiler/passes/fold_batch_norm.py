"""Fold batch-norm style constant MUL (and the ADD/SUB after it) into the weights and bias of
the preceding CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED.

Origins: **absorb**. The convolution swallows the MUL (and the ADD): its origin set becomes the
union. ``y = (conv(x, W) + b) * s + t`` becomes ``conv(x, W * s) + (b * s + t)``, computed in
float64 and rounded once to float32.

Left alone: constants that are not per output channel along the last axis (a scalar counts),
quantized or non-float32 weights, a convolution with a fused activation or whose output is
read elsewhere, dynamic shapes.
"""

from __future__ import annotations

from toolkit.compiler.passes._affine import channel_const, fold_affine, foldable_producer
from toolkit.compiler.passes._match import is_float32, sole_consumer
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op

__all__ = ["FoldBatchNorm"]


class FoldBatchNorm(GraphPass):
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED absorbs a following constant MUL
    (and ADD/SUB)."""

    name = "fold_batch_norm"
    relation = "absorb"

    def run(self, graph: Graph) -> bool:
        """Fold every eligible MUL (+ ADD/SUB); return True when any was folded."""
        changed = False
        for op in list(graph.ops):
            if op.graph is graph and op.type == "MUL" and self._fold(graph, op):
                changed = True
        return changed

    def _fold(self, graph: Graph, mul: Op) -> bool:
        prod = foldable_producer(graph, mul)
        if prod is None or not is_float32(mul.outputs[0]):
            return False
        scale = channel_const(mul, prod.outputs[0])
        if scale is None:
            return False
        chain = [mul]
        shift = None
        act = mul.activation
        nxt = sole_consumer(graph, mul.outputs[0]) if act == 0 else None
        if nxt is not None and nxt.type in ("ADD", "SUB") and is_float32(nxt.outputs[0]):
            m_out = mul.outputs[0]
            v = channel_const(nxt, m_out)
            if v is not None and (nxt.type == "ADD" or nxt.inputs[0] is m_out):
                shift = v if nxt.type == "ADD" else -v
                chain.append(nxt)
                act = nxt.activation
        fold_affine(graph, prod, scale, shift, chain, act)
        return True
