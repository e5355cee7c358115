"""The shared loop of the normalisation fusions: find, accept, fuse.

:class:`NormFusion` runs :func:`~toolkit.compiler.passes._norm_pattern.match_norm` from every
MEAN op, keeps the matches its subclass accepts, adds their gamma and beta as float32
constants (rounded once from float64) and lets the subclass write the fused op.
"""

from __future__ import annotations

import numpy as np

from toolkit.compiler.passes._norm_pattern import NormMatch, match_norm
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Tensor

__all__ = ["NormFusion"]


class NormFusion(GraphPass):
    """A pass that fuses every normalisation subgraph it accepts into one new op."""

    relation = "fuse"

    def accepts(self, found: NormMatch) -> bool:
        """True when this pass fuses the subgraph ``found``."""
        raise NotImplementedError

    def fuse(self, graph: Graph, found: NormMatch, gamma: Tensor, beta: Tensor) -> None:
        """Replace the ops of ``found`` with the fused op reading ``gamma`` and ``beta``."""
        raise NotImplementedError

    def run(self, graph: Graph) -> bool:
        """Fuse every accepted normalisation subgraph; return True when any was fused."""
        changed = False
        for op in list(graph.ops):
            if op.graph is not graph or op.type != "MEAN":
                continue
            found = match_norm(graph, op)
            if found is None or not self.accepts(found):
                continue
            name = found.y.name
            gamma = graph.add_const(graph.unique_name(name + "/gamma"),
                                    found.gamma.astype(np.float32))
            beta = graph.add_const(graph.unique_name(name + "/beta"),
                                   found.beta.astype(np.float32))
            self.fuse(graph, found, gamma, beta)
            changed = True
        return changed
