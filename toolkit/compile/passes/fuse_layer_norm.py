"""Fuse a layer normalisation over the last axis, written in primitive ops, into one op.

Origins: **fuse**. One new op replaces the whole subgraph (as converters write it: MEAN,
SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, MUL, MUL, SUB, ADD, or with NEG, or without gamma; see
:mod:`toolkit.compile.passes._norm_pattern`) and inherits the union of their origins.

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

import numpy as np

from toolkit.compile.passes._norm_pattern import NormMatch, match_norm
from toolkit.compile.passes.base import GraphPass
from toolkit.ir import Graph

__all__ = ["FuseLayerNorm", "LAYER_NORM_CODE", "layer_norm_options"]

LAYER_NORM_CODE = "LAYER_NORM"


def layer_norm_options(eps: float) -> bytes:
    """Return the ``custom_options`` of a LAYER_NORM op: epsilon as little-endian float32."""
    return struct.pack("<f", float(eps))


class FuseLayerNorm(GraphPass):
    """A new CUSTOM ``LAYER_NORM`` op replaces (fuses) a layer-norm subgraph."""

    name = "fuse_layer_norm"
    relation = "fuse"

    def run(self, graph: Graph) -> bool:
        """Fuse every layer-norm subgraph; return True when any was fused."""
        changed = False
        for op in list(graph.ops):
            if op.graph is not graph or op.type != "MEAN":
                continue
            found = match_norm(graph, op)
            if found is None or found.axes != (len(found.x.shape) - 1,) or found.activation:
                continue
            self._fuse(graph, found)
            changed = True
        return changed

    @staticmethod
    def _fuse(graph: Graph, found: NormMatch) -> None:
        y = found.y
        gamma = graph.add_const(graph.unique_name(y.name + "/gamma"),
                                found.gamma.astype(np.float32))
        beta = graph.add_const(graph.unique_name(y.name + "/beta"),
                               found.beta.astype(np.float32))
        graph.fuse(found.ops, "CUSTOM", [found.x, gamma, beta], [y], None,
                   custom_code=LAYER_NORM_CODE, custom_options=layer_norm_options(found.eps))
