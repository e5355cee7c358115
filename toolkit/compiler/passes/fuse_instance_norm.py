"""Fuse an instance normalisation written in primitive ops into circle's INSTANCE_NORM.

Origins: **fuse**. One new INSTANCE_NORM op replaces the whole subgraph (MEAN,
SQUARED_DIFFERENCE, MEAN, ADD, RSQRT / POW / SQRT, SUB, MUL / DIV, MUL, ADD, NEG ...) and
inherits the union of their origins.

Matches both ONE's Net_InstanceNorm_003 arrangement
(``Div(Sub(x, mean), Pow(var + eps, 0.5)) * gamma + beta``, fused activation on the last ADD)
and TensorFlow's (``Mean, SquaredDifference, Mean, Add, Rsqrt, Mul, ...``): see
:mod:`toolkit.compiler.passes._norm_pattern`. The input must be rank 4 (NHWC) reduced over
axes 1 and 2; gamma and beta become ``[C]`` float32 constants (rounded once from float64).

Left alone: other reduction axes (see :mod:`fuse_layer_norm` for the last axis), non-float32
or dynamic tensors, subgraphs with other ops or intermediate values used elsewhere.
INSTANCE_NORM is a circle-only op: save the result as ``.circle``.
"""

from __future__ import annotations

import numpy as np

from toolkit.compiler.passes._match import ACT
from toolkit.compiler.passes._norm_fusion import NormFusion
from toolkit.compiler.passes._norm_pattern import NormMatch
from toolkit.ir import Graph, Tensor
from toolkit.schema import OPTIONS_CLASS

__all__ = ["FuseInstanceNorm"]

_FUSABLE_ACT = frozenset({ACT["NONE"], ACT["RELU"], ACT["RELU6"], ACT["RELU_N1_TO_1"],
                          ACT["TANH"]})


class FuseInstanceNorm(NormFusion):
    """A new INSTANCE_NORM op replaces (fuses) an instance-norm subgraph."""

    name = "fuse_instance_norm"

    def accepts(self, found: NormMatch) -> bool:
        """NHWC input reduced over axes 1 and 2, with an activation INSTANCE_NORM has."""
        return len(found.x.shape) == 4 and found.axes == (1, 2) \
            and found.activation in _FUSABLE_ACT

    def fuse(self, graph: Graph, found: NormMatch, gamma: Tensor, beta: Tensor) -> None:
        """One INSTANCE_NORM op with epsilon and the fused activation."""
        opts = OPTIONS_CLASS["InstanceNormOptions"]()
        opts.epsilon = float(np.float32(found.eps))
        opts.fusedActivationFunction = found.activation
        graph.fuse(found.ops, "INSTANCE_NORM", [found.x, gamma, beta], [found.y], opts,
                   options_type="InstanceNormOptions")
