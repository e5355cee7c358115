"""Fuse a constant bias ADD (or SUB of a constant) into the bias of the preceding CONV_2D,
DEPTHWISE_CONV_2D or FULLY_CONNECTED.

Origins: **absorb**. The convolution swallows the ADD: its origin set becomes the union, and
it takes the ADD's fused activation. The new bias is ``b + t`` (``b - t`` for SUB), computed in
float64 and rounded once to float32; a convolution without bias gets one.

Left alone: constants that are not per output channel along the last axis, ``t - conv(x)``,
quantized or non-float32 tensors, a convolution with a fused activation or whose output is read
elsewhere, dynamic shapes.
"""

from __future__ import annotations

from toolkit.compiler.passes._affine import channel_const, fold_affine, foldable_producer
from toolkit.compiler.passes._match import is_float32
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op

__all__ = ["FuseBiasAdd"]


class FuseBiasAdd(GraphPass):
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED absorbs a following constant ADD/SUB."""

    name = "fuse_bias_add"
    relation = "absorb"

    def run(self, graph: Graph) -> bool:
        """Fuse every eligible bias ADD/SUB; return True when any was fused."""
        changed = False
        for op in list(graph.ops):
            if op.graph is graph and op.type in ("ADD", "SUB") and self._fuse(graph, op):
                changed = True
        return changed

    def _fuse(self, graph: Graph, add: Op) -> bool:
        prod = foldable_producer(graph, add)
        if prod is None or not is_float32(add.outputs[0]):
            return False
        x = prod.outputs[0]
        if add.type == "SUB" and add.inputs[0] is not x:
            return False
        v = channel_const(add, x)
        if v is None:
            return False
        fold_affine(graph, prod, None, v if add.type == "ADD" else -v, [add], add.activation)
        return True
