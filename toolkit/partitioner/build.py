"""Extract one part of a source model as a model of its own.

A part model holds copies of its ops (same type, options, version and **origins**), copies of
the tensors they use (constants copied into every part that uses them, data shared read-only),
graph inputs and outputs named as in the source, and the source model's names for the origin
ids it uses. Saving it therefore writes the *source* model's origin ids in ``ONE_source_table``
/ ``ONE_op_table``, so a trace of the part joins back to the source model's layers.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.formats.origin_tables import OP_TABLE, SOURCE_TABLE
from toolkit.ir import Graph, Model, Op, Tensor

__all__ = ["build_part"]


def build_part(source: Model, ops: Sequence[Op], inputs: Sequence[Tensor],
               outputs: Sequence[Tensor], name: str | None = None) -> Model:
    """Return a one-subgraph model of ``ops`` (in the given, topological order) with graph
    ``inputs`` and ``outputs`` (tensors of the source graph; copies keep their names).

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
    for op in ops:
        ins = [None if t is None else get(t) for t in op.inputs]
        outs = [get(t) for t in op.outputs]
        new = op.clone(ins, outs)
        g.attach_op(new, after=prev)
        prev = new
        used |= op.origins
    g.outputs = [get(t) for t in outputs]
    model = Model([g], version=source.version, description=source.description,
                  format=source.format)
    model.metadata = {k: v for k, v in source.metadata.items()
                      if k not in (SOURCE_TABLE, OP_TABLE)}
    table = source.source_table
    model.source_table = {oid: table[oid] for oid in sorted(used) if oid in table}
    model.had_origin_tables = True
    model.path = None
    return model
