"""The partition report as DataFrames, and the provenance tables of a partitioned model.

``parts_table``: one row per part, in run order
    ``part`` (int64, from 1), ``file`` (str), ``backend`` (str), ``op_count`` (int64),
    ``op_types`` (str, distinct op types in op order, comma-separated), ``inputs`` and
    ``outputs`` (list of tensor names, in the part model's order), ``input_bytes`` and
    ``output_bytes`` (int64, bytes of all part inputs / outputs), ``cut_in_bytes`` (int64,
    bytes of inputs made by other parts) and ``cut_out_bytes`` (int64, bytes of outputs read
    by other parts): the bytes crossing the cut.

``ops_table``: one row per op of the source model, in model order
    ``op_index`` (int64, position in the source graph), ``name`` (str), ``operator`` (str),
    ``part`` (int64), ``file`` (str), ``backend`` (str), ``part_op_index`` (int64, the op's
    index in the part model, the key of the part's ``ONE_op_table``), ``rule`` (str, what
    placed it: ``OPCODE DIV=acl_cl``, ``OPNAME Sub=npu``, ``OPCODE _=cpu`` or ``default``),
    ``rule_where`` (str, ``file:line`` of that rule), ``grouping`` (str, why the op starts or
    joins its part), ``source_ids`` (list of int, its origin ids).

``warnings_table``: ``where`` (str, ``file:line``), ``message`` (str).

The provenance tables follow :mod:`toolkit.provenance`; a part op's ``optimised_id`` is its
position over all parts in run order, and ``optimised_ops`` adds ``part`` and
``part_op_index`` so a trace of a part joins back to the source model's layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from toolkit.ir import Op
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS
from toolkit.source_table import layers_table, op_figures, source_ops_of, source_ops_table

if TYPE_CHECKING:
    from toolkit.partitioner import PartitionResult

__all__ = ["parts_table", "ops_table", "warnings_table", "source_ops", "layers",
           "optimised_ops", "origins", "commands", "debug_handles", "removed"]

_I64 = "int64"
_FIGURES = ("macs", "output_bytes", "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d")


def _frame(rows: list[dict[str, Any]], columns: list[str], ints: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for c in ints:
        df[c] = df[c].astype(_I64)
    return df


def parts_table(result: PartitionResult) -> pd.DataFrame:
    """Return one row per part (columns in the module docstring)."""
    g = result.source.graph
    ops = g.ops
    part_of: dict[str, int] = {}
    for p in result.parts:
        for name in p.outputs:
            part_of[name] = p.index
    readers: dict[str, set[int]] = {}
    for p in result.parts:
        for name in p.inputs:
            readers.setdefault(name, set()).add(p.index)
    rows = []
    for p in result.parts:
        pg = p.model.graph
        types = list(dict.fromkeys(ops[i].kind for i in p.op_indices))
        ins = {t.name: t.nbytes for t in pg.inputs}
        outs = {t.name: t.nbytes for t in pg.outputs}
        rows.append({
            "part": p.index, "file": result.file_of(p), "backend": p.backend,
            "op_count": len(p.op_indices), "op_types": ", ".join(types),
            "inputs": list(p.inputs), "outputs": list(p.outputs),
            "input_bytes": sum(ins.values()), "output_bytes": sum(outs.values()),
            "cut_in_bytes": sum(b for n, b in ins.items() if n in part_of),
            "cut_out_bytes": sum(b for n, b in outs.items()
                                 if readers.get(n, set()) - {p.index}),
        })
    cols = ["part", "file", "backend", "op_count", "op_types", "inputs", "outputs",
            "input_bytes", "output_bytes", "cut_in_bytes", "cut_out_bytes"]
    return _frame(rows, cols, ["part", "op_count", "input_bytes", "output_bytes",
                               "cut_in_bytes", "cut_out_bytes"])


def ops_table(result: PartitionResult) -> pd.DataFrame:
    """Return one row per source op (columns in the module docstring)."""
    ops = result.source.graph.ops
    cols = ["op_index", "name", "operator", "part", "file", "backend", "part_op_index",
            "rule", "rule_where", "grouping", "source_ids"]
    data: dict[str, list[Any]] = {c: [None] * len(ops) for c in cols}
    for p in result.parts:
        file = result.file_of(p)
        for k, (i, why) in enumerate(zip(p.op_indices, p.reasons)):
            op, pl = ops[i], result.placements[i]
            for c, v in (("op_index", i), ("name", op.name), ("operator", op.kind),
                         ("part", p.index), ("file", file), ("backend", p.backend),
                         ("part_op_index", k), ("rule", pl.rule), ("rule_where", pl.where),
                         ("grouping", why), ("source_ids", sorted(op.origins))):
                data[c][i] = v
    df = pd.DataFrame(data, columns=cols)
    for c in ("op_index", "part", "part_op_index"):
        df[c] = df[c].astype(_I64)
    return df


def warnings_table(result: PartitionResult) -> pd.DataFrame:
    """Return one row per warning: ``where`` (``file:line``) and ``message``."""
    rows = []
    for w in result.warnings:
        where, _, msg = w.partition(": ")
        rows.append({"where": where, "message": msg})
    return pd.DataFrame(rows, columns=["where", "message"])


# ------------------------------------------------------------- provenance
def source_ops(result: PartitionResult) -> pd.DataFrame:
    """Return one row per source op (origin id) of the source model
    (:data:`toolkit.provenance.SOURCE_COLUMNS`; :func:`toolkit.source_table.source_ops_table`)."""
    return source_ops_table(source_ops_of(result.source))


def layers(result: PartitionResult) -> pd.DataFrame:
    """Return one row per (source op, original layer): ``source_id`` (int64), ``layer`` (str),
    ``main`` (bool), from the source model's ``origin(oid).layers``
    (:func:`toolkit.source_table.layers_table`)."""
    return layers_table(result.source, source_ops(result)["source_id"].tolist())


def _part_ops(result: PartitionResult) -> list[tuple[int, Any, int, Op]]:
    out = []
    n = 0
    for p in result.parts:
        for k, op in enumerate(p.model.graph.ops):
            out.append((n, p, k, op))
            n += 1
    return out


def optimised_ops(result: PartitionResult) -> pd.DataFrame:
    """Return one row per part op (:data:`toolkit.provenance.OPTIMISED_COLUMNS` plus ``part``
    (int64) and ``part_op_index`` (int64, index in the part model))."""
    rows = []
    for n, p, k, op in _part_ops(result):
        rows.append({"optimised_id": n, "operator": op.kind, "name": op.name,
                     **dict(zip(_FIGURES, op_figures(op))),
                     "backend": p.backend, "part": p.index, "part_op_index": k})
    cols = [*OPTIMISED_COLUMNS, "part", "part_op_index"]
    ints = [c for c in cols if c not in ("operator", "name", "backend")]
    return _frame(rows, cols, ints)


def origins(result: PartitionResult) -> pd.DataFrame:
    """Return one row per (part op, source op): ``optimised_id``, ``source_id`` (int64)."""
    rows = [{"optimised_id": n, "source_id": oid}
            for n, _p, _k, op in _part_ops(result) for oid in sorted(op.origins)]
    return _frame(rows, ["optimised_id", "source_id"], ["optimised_id", "source_id"])


def commands(result: PartitionResult) -> pd.DataFrame:
    """Return the (empty) command table: a partition has no command queue."""
    return _frame([], COMMAND_COLUMNS, COMMAND_COLUMNS)


def debug_handles(result: PartitionResult) -> pd.DataFrame:
    """Return the (empty) debug-handle table: ``handle``, ``optimised_id``, ``source_id``."""
    df = _frame([], ["handle", "optimised_id", "source_id"], ["optimised_id", "source_id"])
    df["handle"] = df["handle"].astype(object)
    return df


def removed(result: PartitionResult) -> pd.DataFrame:
    """Return the source ops the source model records as removed: ``source_id``, ``reason``."""
    rows = [{"source_id": oid, "reason": why}
            for oid, why in sorted(result.source.graph.removed_origins.items())]
    return _frame(rows, ["source_id", "reason"], ["source_id"])
