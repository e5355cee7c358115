"""Weights computed at generation time: constant DENSIFY and float16 DEQUANTIZE, and constants
passed into an IF's branches.

Converters store weights sparse (``DENSIFY``) or in float16 (``DEQUANTIZE`` to float32), and
LiteRT turns them into dense float32 constants once, when it prepares the model. The
generator does the same: :func:`prepare_weights` returns a copy of a model in which every such
op whose inputs are constants is computed (by ``fold_constants``' own folders: the values are
the reference runtime's) and its output is a float32 constant in the parameters file. The
ops' origins are recorded as removed ("constant folded"), as compiling records them.

A converter passes the weights of ops inside an ``IF`` branch as branch inputs (the IF's
arguments are the main graph's constants). Each branch input fed by a constant becomes that
constant inside the branch (when the IF is the branch's only caller), so the branch's
FULLY_CONNECTED or CONV_2D sees constant weights as it does outside control flow.
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


def _branches(op: Op) -> list[int]:
    opts = op.options
    return [int(getattr(opts, f, -1)) for f in ("thenSubgraphIndex", "elseSubgraphIndex")]


def _constant_arguments(model: Model) -> list[tuple[Graph, Op, list[int]]]:
    """Per IF (one caller per branch): the positions of its arguments that are constants."""
    callers: dict[int, int] = {}
    for g in model.subgraphs:
        for op in g.ops:
            if op.type in ("IF", "WHILE", "CALL", "CALL_ONCE"):
                opts = op.options
                for f in ("thenSubgraphIndex", "elseSubgraphIndex", "condSubgraphIndex",
                          "bodySubgraphIndex", "subgraph", "initSubgraphIndex"):
                    i = getattr(opts, f, None)
                    if i is not None:
                        callers[int(i)] = callers.get(int(i), 0) + 1
    found = []
    n = len(model.subgraphs)
    for g in model.subgraphs:
        for op in g.ops:
            if op.type != "IF" or len(op.inputs) < 2:
                continue
            subs = _branches(op)
            if not all(0 <= b < n and callers.get(b) == 1 for b in subs):
                continue
            args = op.inputs[1:]
            ks = [k for k, a in enumerate(args) if a is not None and a.data is not None
                  and all(k < len(model.subgraphs[b].inputs)
                          and model.subgraphs[b].inputs[k].shape == a.shape
                          and model.subgraphs[b].inputs[k].dtype == a.dtype for b in subs)]
            if ks:
                found.append((g, op, ks))
    return found


def _inline_constant_arguments(model: Model) -> None:
    """Make the constant arguments of every IF constants of its branches (module docs)."""
    for g, op, ks in _constant_arguments(model):
        args = list(op.inputs[1:])
        for b in _branches(op):
            sub = model.subgraphs[b]
            for k in ks:
                sub.inputs[k].data = args[k].data  # type: ignore[union-attr]
            sub.inputs[:] = [t for k, t in enumerate(sub.inputs) if k not in ks]
        g.set_inputs(op, [op.inputs[0], *(a for k, a in enumerate(args) if k not in ks)])


def prepare_weights(model: Model) -> Model:
    """``model`` itself when no DENSIFY or DEQUANTIZE reads only constants and no IF passes
    constants to its branches, else a copy in which they are computed or inlined (see the
    module docs); ``model`` is never changed."""
    fold = any(_weight_op(op) for g in model.subgraphs for op in g.ops)
    inline = bool(_constant_arguments(model))
    if not fold and not inline:
        return model
    work = copy_model(model)
    if inline:
        _inline_constant_arguments(work)
    if fold:
        _FoldWeights()(work)
    return work
