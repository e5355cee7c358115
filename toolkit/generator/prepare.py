"""Weights computed at generation time: constant DENSIFY and float16 DEQUANTIZE.

Converters store weights sparse (``DENSIFY``) or in float16 (``DEQUANTIZE`` to float32), and
LiteRT turns them into dense float32 constants once, when it prepares the model. The
generator does the same: :func:`prepare_weights` returns a copy of a model in which every such
op whose inputs are constants is computed (by ``fold_constants``' own folders: the values are
the reference runtime's) and its output is a float32 constant in the parameters file. The
ops' origins are recorded as removed ("constant folded"), as compiling records them.
"""

from __future__ import annotations

from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.passes.fold_constants import FoldConstants
from toolkit.ir import Graph, Model, Op

__all__ = ["WEIGHT_OPS", "prepare_weights"]

#: the op kinds computed at generation time when their inputs are constants
WEIGHT_OPS = frozenset({"DENSIFY", "DEQUANTIZE"})


def _weight_op(op: Op) -> bool:
    return op.type in WEIGHT_OPS and bool(op.inputs) and all(
        t is not None and t.data is not None for t in op.inputs)


class _FoldWeights(FoldConstants):
    """``fold_constants`` restricted to :data:`WEIGHT_OPS` (a DENSIFY then DEQUANTIZE chain
    folds in one run)."""

    def __init__(self) -> None:
        super().__init__(max_bytes=1 << 62)

    def run(self, graph: Graph) -> bool:
        changed = False
        work = [op for op in graph.ops if _weight_op(op)]
        while work:
            nxt: list[Op] = []
            for op in work:
                if op.graph is not graph:
                    continue
                readers = self._fold(graph, op)
                if readers is not None:
                    changed = True
                    nxt.extend(r for r in readers if _weight_op(r))
            work = nxt
        return changed


def prepare_weights(model: Model) -> Model:
    """``model`` itself when no DENSIFY or DEQUANTIZE reads only constants, else a copy in
    which they are computed (see the module docs); ``model`` is never changed."""
    if not any(_weight_op(op) for g in model.subgraphs for op in g.ops):
        return model
    work = copy_model(model)
    _FoldWeights()(work)
    return work
