"""Provenance of a partitioned model from its connection file, for joining a chained run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.provenance import Provenance

__all__ = ["load_partitioned"]


def load_partitioned(path: str | os.PathLike[str]) -> Provenance:
    """Return the provenance of a partitioned model from its connection file.

    The part files and the source model named by the ``.conn.json``/``.conn.ini`` are read
    from its folder; part op ``optimised_id`` counts over all parts in order, as a chained
    run's trace keys them (see :class:`toolkit.partitioner.PartitionResult`).

    Raises:
        ToolkitError: the connection file, a part file or the source model is missing or
            cannot be read.
    """
    from toolkit.formats.conn_file import read_connection
    from toolkit.formats.flatbuffer_read import load
    from toolkit.formats.part_file import PartSpec
    from toolkit.partitioner import Part, PartitionResult

    p = Path(path)
    if not p.is_file():
        raise ToolkitError("no such connection file", where=str(p),
                           fix="pass the .conn.json written by `toolkit partition`")
    conn = read_connection(p)
    folder = conn.folder
    source_path = folder / conn.source.file
    parts = []
    for i, part in enumerate(conn.parts, start=1):
        file = folder / part.file
        if not file.is_file():
            raise ToolkitError(f"part file {part.file!r} not found", where=str(p),
                               fix="pass the folder `toolkit partition` wrote")
        tail = part.file.rsplit(".", 1)[0].rsplit(".", 1)[-1]  # <stem>.00001_<backend>
        backend = tail.split("_", 1)[1] if "_" in tail and tail[:5].isdigit() else ""
        parts.append(Part(i, backend, load(file), [], list(part.inputs), list(part.outputs)))
    if not source_path.is_file():
        return _tables_of_parts(parts)
    return PartitionResult(load(source_path), PartSpec([], "", "opcode"), conn.source.file,
                           parts, [], ext=Path(conn.parts[0].file).suffix if conn.parts
                           else ".circle")


def _tables_of_parts(parts: list[Any]) -> Provenance:
    """Provenance from the part models alone (the source model is not at hand): source ops
    and their layers from the parts' origin tables (no MACs: the ``macs`` policy then splits
    equally)."""
    import pandas as pd

    from toolkit.source_table import layers_table
    from toolkit.trace.join.tables import ProvenanceTables

    ops: list[dict[str, Any]] = []
    origins: list[tuple[int, int]] = []
    names: dict[int, str] = {}
    n = 0
    for part in parts:
        names.update(part.model.source_table)
        for k, op in enumerate(part.model.graph.ops):
            ops.append({"optimised_id": n, "operator": op.kind, "name": op.name,
                        "backend": part.backend, "part": part.index, "part_op_index": k})
            origins.extend((n, o) for o in sorted(op.origins))
            n += 1
    ids = sorted({o for _, o in origins} | set(names))
    owner: dict[int, Any] = {}
    for part in parts:
        for oid in sorted(set(part.model.source_table) | {
                o for op in part.model.graph.ops for o in op.origins}):
            owner.setdefault(oid, part.model)
    tables = [layers_table(owner[i], [i]) for i in ids if i in owner]
    layer_rows = (pd.concat(tables, ignore_index=True) if tables else
                  pd.DataFrame({"source_id": pd.Series([], dtype="int64"),
                                "layer": pd.Series([], dtype=str),
                                "main": pd.Series([], dtype=bool)}))
    return ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": pd.Series(ids, dtype="int64"),
                                 "name": pd.Series([names.get(i, "") for i in ids],
                                                   dtype=object)}),
        layers=layer_rows,
        optimised_ops=pd.DataFrame(ops, columns=["optimised_id", "operator", "name", "backend",
                                                 "part", "part_op_index"]),
        origins=pd.DataFrame(origins, columns=["optimised_id", "source_id"]).astype("int64"))
