"""Fuse a standalone activation (RELU, RELU6, RELU_N1_TO_1, TANH) into its producer.

Origins: **absorb**. The producer (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, SUB, MUL,
DIV, the pools, INSTANCE_NORM) swallows the activation op: its origin set becomes the union, and
it takes the activation as its ``fusedActivationFunction``.

Left alone: a producer that already has an activation, whose output is read by anything else
or is a graph output; quantized tensors whose producer output and activation output have
different quantization (fusing would change the rounding); TANH on quantized tensors.

Note: LiteRT's kernels implement only the RELU-type fused activations; a fused TANH is run by
circle runtimes (and the reference runtime).
"""

from __future__ import annotations

from collections.abc import Iterable

from toolkit.compiler.passes._match import (
    ACT,
    is_float32,
    op_is_static,
    same_type,
    sole_consumer,
    with_options,
)
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op

__all__ = ["FuseActivation"]

ACTIVATION_OPS: dict[str, str] = {"RELU": "RELU", "RELU6": "RELU6",
                                  "RELU_N1_TO_1": "RELU_N1_TO_1", "TANH": "TANH"}
PRODUCERS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL",
                       "DIV", "MAX_POOL_2D", "AVERAGE_POOL_2D", "INSTANCE_NORM"})


class FuseActivation(GraphPass):
    """Producer absorbs the activation that follows it.

    Args:
        activations: activation op types to fuse (default: RELU, RELU6, RELU_N1_TO_1, TANH).
    """

    name = "fuse_activation"
    relation = "absorb"

    def __init__(self, activations: Iterable[str] = tuple(ACTIVATION_OPS)) -> None:
        self.activations = frozenset(activations)
        unknown = self.activations - set(ACTIVATION_OPS)
        if unknown:
            raise ValueError(f"cannot fuse activations {sorted(unknown)}")

    def run(self, graph: Graph) -> bool:
        """Fuse every eligible activation; return True when any was fused."""
        changed = False
        for act in list(graph.ops):
            if act.graph is not graph or act.type not in self.activations:
                continue
            if self._fuse(graph, act):
                changed = True
        return changed

    def _fuse(self, graph: Graph, act: Op) -> bool:
        x = act.inputs[0] if act.inputs else None
        if x is None or x.producer is None or len(act.outputs) != 1:
            return False
        prod = x.producer
        if prod.type not in PRODUCERS or prod.activation != 0 or len(prod.outputs) != 1:
            return False
        if prod.options is None or not hasattr(prod.options, "fusedActivationFunction"):
            return False
        if sole_consumer(graph, x) is not act or not op_is_static(act):
            return False
        y = act.outputs[0]
        if y.shape != x.shape:
            return False
        if is_float32(x) and is_float32(y):
            pass
        elif act.type == "TANH" or not same_type(x, y):
            return False
        if prod.type == "INSTANCE_NORM" and not is_float32(x):
            return False
        graph.replace_all_uses_with(y, x)
        with_options(prod, fusedActivationFunction=ACT[ACTIVATION_OPS[act.type]])
        graph.absorb(prod, [act])
        return True
