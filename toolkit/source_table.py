"""The source-op and original-layer tables of a model, computed one way for every stage.

A compiled model, a partition and a Vela output all describe the source ops of the model the
user gave, and the original layers those ops came from. They build those tables here, so the
same model gets the same answer everywhere:

* the work figures (MACs, bytes, kernel and OFM dims) come from :mod:`toolkit.costs` alone;
* an op carrying k origins (a source model that was itself compiled) splits its MACs and
  output bytes into k integer shares that sum to the op's figures;
* original layers are named by :func:`layer_names` alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit.costs import kernel_dims, ofm_dims, op_macs, op_output_bytes
from toolkit.ir import Model, Op

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SourceOp", "layer_names", "op_figures", "source_ops_of", "source_ops_table",
           "layers_table", "SOURCE_DTYPES"]

_I64 = "int64"


def layer_names(name: str) -> list[str]:
    """Return the original layers one origin name stands for.

    TensorFlow's converter joins the layers it fused with ``;``
    (``model/conv/Relu;model/conv/BiasAdd;model/conv/Conv2D``); ONE's origin names and Vela's
    operator names are single names. Parts are stripped, empty parts dropped, and a repeated
    part kept once, in first-seen order.
    """
    out: list[str] = []
    for part in name.split(";"):
        part = part.strip()
        if part and part not in out:
            out.append(part)
    return out


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


def layers_table(source_ops: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (source op, original layer) of a ``source_ops()`` table:
    ``source_id`` (int64), ``layer`` (str), the layers of each ``name`` by
    :func:`layer_names`."""
    import pandas as pd

    rows = [(sid, layer)
            for sid, name in zip(source_ops["source_id"].tolist(), source_ops["name"].tolist())
            for layer in layer_names(str(name))]
    return pd.DataFrame(rows, columns=["source_id", "layer"]).astype(
        {"source_id": _I64, "layer": "str"})


SOURCE_DTYPES = {c: _I64 for c in ("source_id", "op_index", "macs", "output_bytes",
                                   "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d")}
