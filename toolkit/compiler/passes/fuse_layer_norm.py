"""Fuse a layer normalisation over the last axis, written in primitive ops, into one op.

Origins: **fuse**. One new op replaces the whole subgraph (as converters write it: MEAN,
SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, MUL, MUL, SUB, ADD, or with NEG, or without gamma; see
:mod:`toolkit.compiler.passes._norm_pattern`) and inherits the union of their origins.

circle has no layer-norm builtin, so the op is a custom op:

* ``type = "CUSTOM"``, ``custom_code = "LAYER_NORM"``;
* inputs ``x`` (..., D), ``gamma`` [D], ``beta`` [D] (float32 constants, rounded once from
  float64; gamma is all ones when the subgraph has none);
* ``custom_options`` = epsilon as 4 bytes, little-endian IEEE-754 float32
  (``struct.pack("<f", eps)``);
* ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis, var biased.

Left alone: other axes, a fused activation on the last op (the custom op has none),
non-float32 or dynamic tensors, subgraphs with other ops or intermediate values used elsewhere.
The custom op runs on the reference runtime; LiteRT does not know it.
"""

from __future__ import annotations

import struct

from toolkit.compiler.passes._norm_fusion import NormFusion
from toolkit.compiler.passes._norm_pattern import NormMatch
from toolkit.ir import Graph, Tensor

__all__ = ["FuseLayerNorm", "LAYER_NORM_CODE", "layer_norm_options"]

LAYER_NORM_CODE = "LAYER_NORM"


def layer_norm_options(eps: float) -> bytes:
    """Return the ``custom_options`` of a LAYER_NORM op: epsilon as little-endian float32."""
    return struct.pack("<f", float(eps))


class FuseLayerNorm(NormFusion):
    """A new CUSTOM ``LAYER_NORM`` op replaces (fuses) a layer-norm subgraph."""

    name = "fuse_layer_norm"

    def accepts(self, found: NormMatch) -> bool:
        """Reduced over the last axis, with no fused activation (the custom op has none)."""
        return found.axes == (len(found.x.shape) - 1,) and not found.activation

    def fuse(self, graph: Graph, found: NormMatch, gamma: Tensor, beta: Tensor) -> None:
        """One CUSTOM LAYER_NORM op with epsilon in its custom options."""
        graph.fuse(found.ops, "CUSTOM", [found.x, gamma, beta], [found.y], None,
                   custom_code=LAYER_NORM_CODE, custom_options=layer_norm_options(found.eps))
