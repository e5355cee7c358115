"""Read back what :meth:`CompiledModel.save` wrote: ``load_compiled(outdir)``.

The compiled model comes from ``<stem>.circle`` (its ONE tables give every op its origins),
the target, source-op and removed tables from ``<stem>_debug.xml``, and the debug handles from
``<stem>.debug_handles.json``. The command queue is lowered again for the stored target and
checked against the database's ``queue`` table, so files that do not belong together are an
error. The source model itself is not stored: ``source`` is None and ``rewrites()`` is empty.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from toolkit.compiler.compiled import CompiledModel
from toolkit.compiler.lowering import lower
from toolkit.compiler.target import Target
from toolkit.errors import ToolkitError
from toolkit.formats.debug_handles import read_debug_handles
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.vela_db import read_debug_db
from toolkit.util.files import check_folder

__all__ = ["load_compiled"]

_TARGET_COLUMNS = ("name", "buffer_bytes", "macs_per_cycle", "bytes_per_cycle", "clock_hz",
                   "command_bytes")


def _stem(outdir: Path) -> str:
    dbs = sorted(outdir.glob("*_debug.xml"))
    if len(dbs) != 1:
        fix = ("pass stem= to choose the compiled model" if dbs else
               "pass a folder written by toolkit compile -o (it holds <stem>_debug.xml)")
        raise ToolkitError(f"expected one *_debug.xml in the folder, found {len(dbs)}",
                           where=str(outdir), fix=fix)
    return dbs[0].name[: -len("_debug.xml")]


def _need(tables: dict[str, pd.DataFrame], name: str, where: str,
          columns: tuple[str, ...] = ()) -> pd.DataFrame:
    if name not in tables:
        raise ToolkitError(f"the debug database has no '{name}' table", where=where,
                           fix="it was not written by toolkit compile; compile again")
    missing = [c for c in columns if c not in tables[name].columns]
    if missing:
        raise ToolkitError(f"the debug database's '{name}' table lacks the columns {missing}",
                           where=where, fix="it was not written by toolkit compile; compile again")
    return tables[name]


def _int_column(table: pd.DataFrame, name: str, column: str, where: str) -> list[int]:
    if table[column].dtype.kind != "i":
        raise ToolkitError(f"the '{name}' table's column '{column}' is not integers",
                           where=where, fix="the file is damaged; compile again")
    return [int(v) for v in table[column].tolist()]


def _target(t: pd.DataFrame, where: str) -> Target:
    if len(t) != 1:
        raise ToolkitError(
            "the 'target' table must have one row", where=where,
            fix="the file is damaged; compile again",
        )
    row = t.iloc[0]
    try:
        return Target(name=str(row["name"]), buffer_bytes=int(row["buffer_bytes"]),
                      macs_per_cycle=int(row["macs_per_cycle"]),
                      bytes_per_cycle=int(row["bytes_per_cycle"]),
                      clock_hz=float(row["clock_hz"]), command_bytes=int(row["command_bytes"]))
    except (ValueError, TypeError, OverflowError) as e:
        raise ToolkitError(f"the 'target' table holds a value of the wrong kind ({e})",
                           where=where, fix="the file is damaged; compile again") from None


def load_compiled(outdir: str | os.PathLike[str], stem: str | None = None) -> CompiledModel:
    """Return the :class:`CompiledModel` saved in ``outdir`` (``stem``: which one, when the
    folder holds several). Raises ToolkitError for missing or inconsistent files."""
    out = Path(check_folder(outdir, what="folder of compiled output",
                            fix="pass the -o folder of `toolkit compile`"))
    stem = stem or _stem(out)
    db_path = out / f"{stem}_debug.xml"
    where = str(db_path)
    model = load(out / f"{stem}.circle")
    db = read_debug_db(db_path)
    target = _target(_need(db.tables, "target", where, _TARGET_COLUMNS), where)
    commands = lower(model.graph.ops, target)
    queue = _need(db.tables, "queue", where, ("offset", "optimised_id"))
    got = [(c.queue_offset, c.optimised_id) for c in commands]
    want = list(zip(_int_column(queue, "queue", "offset", where),
                    _int_column(queue, "queue", "optimised_id", where)))
    if got != want:
        raise ToolkitError("the command queue of the model does not match the debug "
                           "database's queue table", where=where,
                           fix="the .circle and _debug.xml come from different compiles")
    hmap = read_debug_handles(out / f"{stem}.debug_handles.json")
    n_ops = sum(len(g) for g in model.subgraphs)
    if hmap.optimised_ids is None:
        raise ToolkitError("the debug handle map has no optimised_ids",
                           where=str(out / f"{stem}.debug_handles.json"),
                           fix=("it was not written by toolkit compile (or is damaged); compile "
                                "again"))
    by_op = {i: h for h, i in hmap.optimised_ids.items()}
    if sorted(by_op) != list(range(n_ops)):
        raise ToolkitError(f"the debug handle map covers ops {sorted(by_op)[:5]}..., the model "
                           f"has {n_ops}", where=str(out / f"{stem}.debug_handles.json"),
                           fix=("the files come from different compiles or were edited; compile "
                                "again"))
    src = _need(db.tables, "source_ops", where, ("operator", "name")).copy()
    for col in ("operator", "name"):  # all-digit names would have been read as numbers
        src[col] = src[col].astype(str)
    removed = _need(db.tables, "removed", where).copy()
    if "reason" in removed:
        removed["reason"] = removed["reason"].astype(str)
    try:
        return CompiledModel.restored(model, target, commands,
                                      [by_op[i] for i in range(n_ops)], src, removed,
                                      db.source_file)
    except (KeyError, ValueError, TypeError, OverflowError) as e:
        raise ToolkitError(f"the source_ops or removed table is malformed ({e})",
                           where=where,
                           fix="the file is damaged; compile again") from None
