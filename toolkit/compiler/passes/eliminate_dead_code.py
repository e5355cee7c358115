"""Dead-code elimination: remove ops whose outputs nothing reads.

Origins: **remove**. Each dead op disappears and its origin is recorded as removed (reason
``"dead code"``). Removing an op can make its producers dead: a worklist follows them, so one
run removes whole dead chains in time linear in their size.

Kept: graph outputs and their producers, ops with side effects or state (see
:func:`~toolkit.compiler.passes.eliminate_common_subexpressions.is_pure`).
"""

from __future__ import annotations

from toolkit.compiler.passes._match import is_graph_output
from toolkit.compiler.passes.base import GraphPass
from toolkit.compiler.passes.eliminate_common_subexpressions import is_pure
from toolkit.ir import Graph, Op

__all__ = ["EliminateDeadCode"]


def _dead(graph: Graph, op: Op) -> bool:
    return op.graph is graph and is_pure(op) and all(
        not t.consumers and not is_graph_output(graph, t) for t in op.outputs)


class EliminateDeadCode(GraphPass):
    """Remove every op whose outputs are unused."""

    name = "eliminate_dead_code"
    relation = "remove"

    def run(self, graph: Graph) -> bool:
        """Remove dead ops (and the producers they leave dead); return True on change."""
        changed = False
        work = [op for op in graph.ops if _dead(graph, op)]
        while work:
            op = work.pop()
            if not _dead(graph, op):
                continue
            producers = [t.producer for t in op.inputs if t is not None and t.producer]
            graph.remove(op, "dead code")
            changed = True
            work.extend(p for p in producers if _dead(graph, p))
        return changed
