"""Remove TRANSPOSE ops that cancel: a pair whose permutations compose to the identity, and a
single TRANSPOSE with the identity permutation.

Origins: **remove**. The second TRANSPOSE of a pair is bypassed (its readers read the first
one's input) and removed; the first is removed too once nothing reads it. Each removed op's
origin is recorded as removed (reason ``"transposes cancel"`` / ``"identity transpose"``).

Left alone: permutations that are not constant, dynamic shapes, type or quantization changes,
a pair from a graph input straight to a graph output.
"""

from __future__ import annotations

from toolkit.compiler.passes._match import (
    const_array,
    is_graph_output,
    op_is_static,
    same_type,
)
from toolkit.compiler.passes.base import GraphPass
from toolkit.compiler.passes.remove_noop_reshape import can_bypass
from toolkit.ir import Graph, Op

__all__ = ["CancelTransposes"]


def _perm(op: Op) -> list[int] | None:
    if op.type != "TRANSPOSE" or len(op.inputs) < 2 or len(op.outputs) != 1:
        return None
    p = const_array(op.inputs[1])
    x = op.inputs[0]
    if p is None or x is None or p.dtype.kind not in "iu" or not op_is_static(op):
        return None
    rank = len(x.shape)
    perm = [int(v) % rank if rank else int(v) for v in p.reshape(-1)]
    return perm if sorted(perm) == list(range(rank)) else None


class CancelTransposes(GraphPass):
    """Bypass and remove TRANSPOSE pairs that cancel and identity TRANSPOSEs."""

    name = "cancel_transposes"
    relation = "remove"

    def run(self, graph: Graph) -> bool:
        """Remove cancelling transposes; return True when any was removed."""
        changed = False
        for op in list(graph.ops):
            if op.graph is not graph:
                continue
            perm = _perm(op)
            if perm is None:
                continue
            x = op.inputs[0]
            assert x is not None
            out = op.outputs[0]
            if perm == list(range(len(perm))):
                if same_type(x, out) and can_bypass(graph, op, x):
                    graph.bypass(op, x, "identity transpose")
                    changed = True
                continue
            first = x.producer
            p1 = _perm(first) if first is not None else None
            if first is None or p1 is None or len(p1) != len(perm):
                continue
            src = first.inputs[0]
            assert src is not None
            if any(p1[perm[i]] != i for i in range(len(perm))) or not same_type(src, out):
                continue
            if not can_bypass(graph, op, src):
                continue
            graph.bypass(op, src, "transposes cancel")
            if not x.consumers and not is_graph_output(graph, x):
                graph.remove(first, "transposes cancel")
            changed = True
        return changed
