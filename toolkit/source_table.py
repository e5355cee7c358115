"""The source-op and original-layer tables of a model, computed one way for every stage.

A compiled model, a partition and a Vela output all describe the source ops of the model the
user gave, and the original layers those ops came from. They build those tables here, so the
same model gets the same answer everywhere:

* the work figures (MACs, bytes, kernel and OFM dims) come from :mod:`toolkit.costs` alone;
* an op carrying k origins (a source model that was itself compiled) splits its MACs and
  output bytes into k integer shares that sum to the op's figures;
* original layers are read from the model's :class:`~toolkit.ir.Origin` records alone
  (``model.origin(oid).layers``, filled by :func:`toolkit.layer_names.name_layers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.costs import kernel_dims, ofm_dims, op_macs, op_output_bytes
from toolkit.ir import Model, Op
from toolkit.layer_names import NO_LAYER, name_layers

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SourceOp", "op_figures", "source_ops_of", "source_ops_table",
           "layers_table", "SOURCE_DTYPES"]

_I64 = "int64"


def op_figures(op: Op) -> tuple[int, int, int, int, int, int, int]:
    """Return ``(macs, output_bytes, kernel_w, kernel_h, ofm_w, ofm_h, ofm_d)`` of one op,
    all from :mod:`toolkit.costs`."""
    kw, kh = kernel_dims(op)
    w, h, d = ofm_dims(op)
    return op_macs(op), op_output_bytes(op), kw, kh, w, h, d


def share(total: int, parts: int, index: int) -> int:
    """Integer share ``index`` of ``total`` cut into ``parts`` (the shares sum to ``total``)."""
    return total * (index + 1) // parts - total * index // parts


@dataclass(frozen=True)
class SourceOp:
    """One source op: an origin id with the op of the source model that carries it.

    ``share`` is how many origins that op carries (its figures are split between them) and
    ``rank`` this origin's position among the op's sorted origins.
    """

    source_id: int
    op_index: int
    op: Op
    name: str
    share: int
    rank: int


def source_ops_of(model: Model) -> list[SourceOp]:
    """Return the source ops of ``model`` by ``source_id``: each origin id once, with the op
    that does its work: of the ops carrying it, the one with the most MACs, the first one
    (subgraph 0 first, in order) on a tie (an importer that writes one source op as a PAD or
    TRANSPOSE and a CONV_2D gives the CONV_2D); ``op_index`` is that op's index in subgraph 0,
    -1 in other subgraphs; the name is the origin's (ONE source table), else the op's name."""
    out: dict[int, SourceOp] = {}
    macs: dict[int, int] = {}
    names = model.source_table
    for gi, g in enumerate(model.subgraphs):
        for i, op in enumerate(g.ops):
            org = sorted(op.origins)
            m = op_macs(op) if org else 0
            for r, oid in enumerate(org):
                if oid not in out or m > macs[oid]:
                    out[oid] = SourceOp(oid, i if gi == 0 else -1, op,
                                        names.get(oid) or op.name, len(org), r)
                    macs[oid] = m
    return [out[k] for k in sorted(out)]


def source_ops_table(sources: Iterable[SourceOp]) -> pd.DataFrame:
    """Return the ``source_ops()`` table of :mod:`toolkit.provenance` for ``sources``.

    Columns: ``source_id`` (int64, origin id), ``op_index`` (int64), ``operator`` (str),
    ``name`` (str, origin name), ``macs`` (int64, multiply-accumulates per inference; an op's
    share), ``output_bytes`` (int64, its share), ``kernel_w``, ``kernel_h``, ``ofm_w``,
    ``ofm_h``, ``ofm_d`` (int64, Vela's columns).
    """
    import pandas as pd

    from toolkit.provenance import SOURCE_COLUMNS

    rows = []
    for s in sources:
        macs, nbytes, kw, kh, w, h, d = op_figures(s.op)
        rows.append((s.source_id, s.op_index, s.op.kind, s.name, share(macs, s.share, s.rank),
                     share(nbytes, s.share, s.rank), kw, kh, w, h, d))
    return pd.DataFrame(rows, columns=SOURCE_COLUMNS).astype(SOURCE_DTYPES)


def layers_table(model: Model, source_ids: Iterable[int],
                 origins_of: Mapping[int, Iterable[int]] | None = None) -> pd.DataFrame:
    """Return one row per (source op, original layer) of ``model``'s source ops ``source_ids``,
    read from ``model.origin(oid).layers`` (the origins are named first when the importer did
    not: :func:`toolkit.layer_names.name_layers`). A source id is an origin id, unless
    ``origins_of`` maps it to the origin ids it stands for (Vela's source ids are operator
    indices: the origins of that operator).

    Columns: ``source_id`` (int64), ``layer`` (str; :data:`~toolkit.layer_names.NO_LAYER`
    for a source op that belongs to no layer, ``Origin.why`` says why), ``main`` (bool: the
    layer whose work the op's multiply-accumulates are, e.g. the convolution of a conv fused
    with its batch norm and activation; the ``macs`` policy gives it the op's MACs and the
    op's other layers none).
    """
    import pandas as pd

    name_layers(model)
    rows: list[tuple[int, str, bool]] = []
    for sid in source_ids:
        oids = sorted(origins_of.get(int(sid), ())) if origins_of is not None else [int(sid)]
        seen: set[str] = set()
        for oid in oids:
            rec = model.origin(int(oid))
            for layer in rec.layers or (NO_LAYER,):
                if layer not in seen:
                    seen.add(layer)
                    rows.append((int(sid), layer, bool(rec.main) and layer == rec.main))
        if not oids:
            rows.append((int(sid), NO_LAYER, False))
    return pd.DataFrame(rows, columns=["source_id", "layer", "main"]).astype(
        {"source_id": _I64, "layer": "str", "main": "bool"})


SOURCE_DTYPES = {c: _I64 for c in ("source_id", "op_index", "macs", "output_bytes",
                                   "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d")}
