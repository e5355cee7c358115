"""Remove a RESHAPE whose output shape equals its input shape.

Origins: **remove**. The RESHAPE disappears; its readers read its input instead, and its origin
is recorded as removed (reason ``"no-op reshape"``).

Left alone: dynamic shapes (the shapes may differ at run time), a type or quantization change,
a reshape from a graph input or constant straight to a graph output (the output must stay a
distinct tensor).
"""

from __future__ import annotations

from toolkit.compiler.passes._match import is_graph_output, op_is_static, same_type
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op, Tensor

__all__ = ["RemoveNoopReshape", "can_bypass"]


def can_bypass(graph: Graph, op: Op, keep: Tensor) -> bool:
    """True when ``op``'s single output can be replaced by ``keep`` everywhere."""
    out = op.outputs[0]
    if not is_graph_output(graph, out):
        return True
    return (getattr(keep, "producer", None) is not None and not is_graph_output(graph, keep)
            and keep not in graph.inputs)


class RemoveNoopReshape(GraphPass):
    """Bypass and remove RESHAPE ops that do not change the shape."""

    name = "remove_noop_reshape"
    relation = "remove"

    def run(self, graph: Graph) -> bool:
        """Remove every no-op RESHAPE; return True when any was removed."""
        changed = False
        for op in list(graph.ops):
            if op.graph is not graph or op.type != "RESHAPE" or len(op.outputs) != 1:
                continue
            x = op.inputs[0] if op.inputs else None
            out = op.outputs[0]
            if x is None or x.shape != out.shape or not op_is_static(op):
                continue
            if not same_type(x, out) or not can_bypass(graph, op, x):
                continue
            graph.bypass(op, x, "no-op reshape")
            changed = True
        return changed
