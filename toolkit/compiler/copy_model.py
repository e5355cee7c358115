"""Copy a model so that compiling it never touches the user's model.

The copy has new :class:`~toolkit.ir.Graph`, :class:`~toolkit.ir.Tensor` and
:class:`~toolkit.ir.Op` objects with the same names, shapes, origins, order and provenance log.
Constant arrays are shared (they are read-only); quantization parameters are shared too, since
the IR replaces rather than edits them. Options objects are copied (shallowly: passes set
fields, they never edit a list inside an options object in place).
"""

from __future__ import annotations

import copy
from typing import Any

from toolkit.ir import Graph, Model, Op, SignatureDef, Tensor

__all__ = ["copy_model"]


def _copy_options(opts: Any) -> Any:
    """Return a shallow copy of an options object (``copy.copy``, minus its overhead)."""
    if opts is None:
        return None
    d = getattr(opts, "__dict__", None)
    if d is None:
        return copy.copy(opts)
    new = object.__new__(type(opts))
    new.__dict__.update(d)
    return new


def _copy_tensor(t: Tensor) -> Tensor:
    return Tensor(t.name, t.shape, t.type_code, data=t.data, quant=t.quant,
                  shape_signature=t.shape_signature, is_variable=t.is_variable,
                  has_rank=t.has_rank, extra=dict(t.extra))


def _copy_graph(g: Graph) -> tuple[Graph, dict[Tensor, Tensor]]:
    new = Graph(g.name)
    tmap: dict[Tensor, Tensor] = {}
    for t in g.tensors:
        tmap[t] = new.attach_tensor(_copy_tensor(t))
    prev: Op | None = None
    for op in g.ops:
        extra: dict[str, Any] = dict(op.extra)
        extra.pop("_created", None)
        if "intermediates" in extra:
            extra["intermediates"] = [None if t is None else tmap[t]
                                      for t in extra["intermediates"]]
        c = Op(op.type, [None if t is None else tmap[t] for t in op.inputs],
               [tmap[t] for t in op.outputs], _copy_options(op.options),
               origins=op.origins, custom_code=op.custom_code, version=op.version,
               options_type=op.options_type, custom_options=op.custom_options, extra=extra)
        new.attach_op(c, after=prev)
        prev = c
    new.inputs = [tmap[t] for t in g.inputs]
    new.outputs = [tmap[t] for t in g.outputs]
    new.removed_origins = dict(g.removed_origins)
    new.rewrites = list(g.rewrites)
    new.current_pass = g.current_pass
    new.extra = dict(g.extra)
    new.ops  # noqa: B018  (orders the copy as the original)
    return new, tmap


def copy_model(model: Model) -> Model:
    """Return a copy of ``model`` that shares no mutable graph object with it."""
    graphs: list[Graph] = []
    maps: list[dict[Tensor, Tensor]] = []
    for g in model.subgraphs:
        ng, tmap = _copy_graph(g)
        graphs.append(ng)
        maps.append(tmap)
    new = Model(graphs, version=model.version, description=model.description,
                format=model.format)
    new.metadata = dict(model.metadata)
    new.metadata_buffer = None if model.metadata_buffer is None else list(model.metadata_buffer)
    new.source_table = dict(model.source_table)
    new.origins = dict(model.origins)
    new.had_origin_tables = model.had_origin_tables
    new.path = model.path
    for sd in model.signature_defs:
        tmap = maps[sd.subgraph_index]
        new.signature_defs.append(SignatureDef(
            sd.key, sd.subgraph_index, [(n, tmap[t]) for n, t in sd.inputs],
            [(n, tmap[t]) for n, t in sd.outputs]))
    return new
