"""Extract one part of a source model as a model of its own.

A part model holds copies of its ops (same type, options, version and **origins**), copies of
the tensors they use (constants copied into every part that uses them, data shared read-only),
graph inputs and outputs named as in the source, and the source model's names for the origin
ids it uses. Saving it therefore writes the *source* model's origin ids in ``ONE_source_table``
/ ``ONE_op_table``, so a trace of the part joins back to the source model's layers.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Sequence

from toolkit.formats.origin_tables import OP_TABLE, SOURCE_TABLE
from toolkit.ir import Graph, Model, Op, Tensor

__all__ = ["build_part", "SUBGRAPH_FIELDS"]

SUBGRAPH_FIELDS: dict[str, tuple[str, ...]] = {
    "WHILE": ("condSubgraphIndex", "bodySubgraphIndex"),
    "IF": ("thenSubgraphIndex", "elseSubgraphIndex"),
    "CALL_ONCE": ("initSubgraphIndex",),
    "CALL": ("subgraph",),
}
"""Option fields of the control-flow ops that name subgraphs."""


def _keep_intermediates(op: Op, new: Op, get: Callable[[Tensor], Tensor]) -> None:
    """Give ``new`` copies of the intermediate tensors of ``op`` (the quantized LSTM reads
    its gates' and hidden state's parameters there)."""
    inter = op.extra.get("intermediates")
    if inter:
        new.extra["intermediates"] = [None if t is None else get(t) for t in inter]


def _copy_graph(g: Graph) -> tuple[Graph, list[Op]]:
    """A copy of subgraph ``g`` (same names, origins, constants shared) and its ops."""
    new = Graph(g.name)
    copies: dict[Tensor, Tensor] = {}

    def get(t: Tensor) -> Tensor:
        c = copies.get(t)
        if c is None:
            c = copies[t] = t.clone()
            new.attach_tensor(c)
        return c

    for t in g.tensors:
        get(t)
    new.inputs = [get(t) for t in g.inputs]
    ops = []
    prev: Op | None = None
    for op in g.ops:
        c = op.clone([None if t is None else get(t) for t in op.inputs],
                     [get(t) for t in op.outputs])
        _keep_intermediates(op, c, get)
        new.attach_op(c, after=prev)
        prev = c
        ops.append(c)
    new.outputs = [get(t) for t in g.outputs]
    return new, ops


def _renumber(op: Op, mapping: dict[int, int]) -> None:
    """Point the subgraph indices of control-flow ``op`` at their new numbers (on a copy
    of its options)."""
    opts = _copy.copy(op.options)
    for name in SUBGRAPH_FIELDS[op.type]:
        setattr(opts, name, mapping[int(getattr(opts, name))])
    op.options = opts


def _attach_called(source: Model, model: Model, ops: list[Op], used: set[int]) -> None:
    """Copy into ``model`` every subgraph of ``source`` the control-flow ops among ``ops``
    call (transitively), renumbering the ops' subgraph indices."""
    mapping: dict[int, int] = {}
    pending = [op for op in ops if op.type in SUBGRAPH_FIELDS]
    while pending:
        op = pending.pop()
        for name in SUBGRAPH_FIELDS[op.type]:
            index = int(getattr(op.options, name))
            if index in mapping:
                continue
            mapping[index] = len(model.subgraphs)
            g, called = _copy_graph(source.subgraphs[index])
            model.subgraphs.append(g)
            for c in called:
                used |= c.origins
            pending.extend(c for c in called if c.type in SUBGRAPH_FIELDS)
        _renumber(op, mapping)


def build_part(source: Model, ops: Sequence[Op], inputs: Sequence[Tensor],
               outputs: Sequence[Tensor], name: str | None = None) -> Model:
    """Return a model of ``ops`` (in the given, topological order) with graph ``inputs``
    and ``outputs`` (tensors of the source graph; copies keep their names). The subgraphs
    its control-flow ops call (WHILE cond and body, IF branches...) are copied after it, so
    a control-flow op and its subgraphs stay in one part.

    The graph is named ``name`` (default: ``<source graph name>``); the model keeps the source
    model's version, description, format and metadata (except the origin tables, written anew
    on save from the ops' origins) and has ``source_table`` restricted to the ids used.
    """
    g = Graph(name if name is not None else source.graph.name)
    copy: dict[Tensor, Tensor] = {}

    def get(t: Tensor) -> Tensor:
        c = copy.get(t)
        if c is None:
            c = copy[t] = t.clone()
            g.attach_tensor(c)
        return c

    g.inputs = [get(t) for t in inputs]
    used: set[int] = set()
    prev: Op | None = None
    made = []
    for op in ops:
        ins = [None if t is None else get(t) for t in op.inputs]
        outs = [get(t) for t in op.outputs]
        new = op.clone(ins, outs)
        _keep_intermediates(op, new, get)
        g.attach_op(new, after=prev)
        prev = new
        made.append(new)
        used |= op.origins
    g.outputs = [get(t) for t in outputs]
    model = Model([g], version=source.version, description=source.description,
                  format=source.format)
    _attach_called(source, model, made, used)
    model.metadata = {k: v for k, v in source.metadata.items()
                      if k not in (SOURCE_TABLE, OP_TABLE)}
    table = source.source_table
    model.source_table = {oid: table[oid] for oid in sorted(used) if oid in table}
    model.origins = {oid: source.origins[oid] for oid in sorted(used) if oid in source.origins}
    model.had_origin_tables = True
    model.path = None
    return model
