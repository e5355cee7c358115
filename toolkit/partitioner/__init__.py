"""Partition a model across backends, as ONE's circle-partitioner does.

    import toolkit as tk
    result = tk.partition("Net_InstanceNorm_003.circle", "Net_InstanceNorm_003.part")
    result.parts_table()                 # one row per part
    result.write("work/")                # part models + .conn.json + .conn.ini
    tk.run("work/Net_InstanceNorm_003.conn.json", inputs)   # parts chained in order

Each op is placed on a backend by the ``.part`` rules (:mod:`toolkit.formats.part_file`),
ops are grouped into parts (:mod:`toolkit.partitioner.grouping`), and each part becomes a model
of its own that keeps the source model's origin ids (:mod:`toolkit.partitioner.build`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import PartitionError
from toolkit.formats.conn_file import (
    Connection,
    ConnPart,
    file_digest,
    format_conn_ini,
    format_conn_json,
)
from toolkit.formats.part_file import PartSpec, as_part_spec
from toolkit.ir import Model
from toolkit.partitioner import report
from toolkit.partitioner.build import build_part
from toolkit.partitioner.grouping import Placement, group_ops, place_ops
from toolkit.util.args import check_optional_str
from toolkit.util.atomic import (
    JOURNAL_NAME,
    finish_interrupted_set,
    folder_lock,
    remove_stale_temps,
    write_file_set,
)
from toolkit.util.gc_pause import paused_gc

__all__ = ["partition", "PartitionResult", "Part", "part_file_name"]

_FORMATS = {".circle": "circle", ".tflite": "tflite"}


def part_file_name(stem: str, index: int, backend: str, ext: str = ".circle") -> str:
    """Return the file name of part ``index`` (from 1): ``<stem>.<NNNNN>_<backend><ext>``."""
    return f"{stem}.{index:05d}_{backend}{ext}"


@dataclass
class Part:
    """One part: its position (from 1), backend, model, the positions of its ops in the
    source graph (model order), its input/output tensor names and, per op, why it starts or
    joins the part."""

    index: int
    backend: str
    model: Model
    op_indices: list[int]
    inputs: list[str]
    outputs: list[str]
    reasons: list[str] = field(default_factory=list)


@dataclass
class PartitionResult:
    """The parts of a partitioned model, the request that made them, and their report.

    ``source_file`` is the source model's file name as the connection files name it; part
    files are named from its stem. DataFrames: :meth:`parts_table`, :meth:`ops_table`,
    :meth:`warnings_table`, and the provenance tables of :mod:`toolkit.provenance`
    (:meth:`source_ops`, :meth:`optimised_ops`, :meth:`origins`, ...), where a part op's
    ``optimised_id`` is its position over all parts in order.
    """

    source: Model
    spec: PartSpec
    source_file: str
    parts: list[Part]
    placements: list[Placement]
    warnings: list[str] = field(default_factory=list)
    ext: str = ".circle"
    paths: list[Path] = field(default_factory=list)

    @property
    def stem(self) -> str:
        """The source file name without its last extension."""
        name = Path(self.source_file).name
        return name.rsplit(".", 1)[0] if "." in name[1:] else name

    def file_of(self, part: Part, ext: str | None = None) -> str:
        """Return the file name of ``part`` (extension ``ext``, default :attr:`ext`)."""
        return part_file_name(self.stem, part.index, part.backend, ext or self.ext)

    # ------------------------------------------------------ connection
    def connection(self, ext: str | None = None) -> Connection:
        """Return the :class:`Connection` of the parts (part files with extension ``ext``)."""
        g = self.source.graph
        src = ConnPart(self.source_file, [t.name for t in g.inputs], [t.name for t in g.outputs])
        parts = [ConnPart(self.file_of(p, ext), list(p.inputs), list(p.outputs))
                 for p in self.parts]
        return Connection(src, parts)

    def conn_json(self, ext: str | None = None) -> str:
        """Return the ``.conn.json`` text."""
        return format_conn_json(self.connection(ext))

    def conn_ini(self, ext: str | None = None) -> str:
        """Return the ``.conn.ini`` text."""
        return format_conn_ini(self.connection(ext))

    # ------------------------------------------------------------ files
    def files(self, ext: str | None = None) -> dict[str, Any]:
        """Return ``{file name: content}`` of everything :meth:`write` writes: each part model
        (a :class:`Model`), ``<stem>.conn.json`` and ``<stem>.conn.ini`` (text)."""
        out: dict[str, Any] = {self.file_of(p, ext): p.model for p in self.parts}
        out[f"{self.stem}.conn.json"] = self.conn_json(ext)
        out[f"{self.stem}.conn.ini"] = self.conn_ini(ext)
        return out

    def write(self, work_path: str | os.PathLike[str] = ".", *, ext: str | None = None
              ) -> list[Path]:
        """Write the part models and both connection files into ``work_path``; return the
        paths (parts in order, then .conn.json, .conn.ini).

        ``ext`` (``.circle`` or ``.tflite``) picks the part format. Writing is atomic as a
        set: every file is serialized and written to a temporary file first, then all are
        renamed into place; on any error no new file is left and files that were replaced are
        restored. Raises :class:`PartitionError` for a file name that would escape
        ``work_path``.
        """
        from toolkit.formats.flatbuffer_write import write_model

        ext = ext or self.ext
        if ext not in _FORMATS:
            raise PartitionError(f"unknown part extension {ext!r}", fix="use .circle or .tflite")
        work = Path(work_path)
        if work.exists() and not work.is_dir():
            raise PartitionError("the work path is a file, not a folder", where=str(work),
                                 fix="pass a folder (it is created when missing)")
        payload: dict[Path, bytes] = {}
        conn = self.connection(ext)
        from toolkit.progress import progress

        for p, cp in progress(list(zip(self.parts, conn.parts)), desc="writing parts",
                              unit="part"):
            target = _inside(work, cp.file)
            data = bytes(write_model(p.model, _FORMATS[ext], origin_tables=True,
                                     where=str(target)))
            cp.size, cp.sha256 = len(data), file_digest(data)
            payload[target] = data
        # the connection files are the set's manifest: written last, naming each part's
        # size and digest, so a reader can tell a complete set from a mixed one
        payload[_inside(work, f"{self.stem}.conn.json")] = format_conn_json(conn).encode()
        payload[_inside(work, f"{self.stem}.conn.ini")] = format_conn_ini(conn).encode()
        with folder_lock(work):
            finish_interrupted_set(work)  # a killed write's temporary files are its new set
            remove_stale_temps(work, [*(p.name for p in payload), JOURNAL_NAME])
            write_file_set(payload, journal=True)
        self.ext = ext
        self.paths = list(payload)
        for p, path in zip(self.parts, self.paths):
            p.model.path = str(path)
        return self.paths

    # ------------------------------------------------------------ report
    def parts_table(self) -> pd.DataFrame:
        """One row per part; see :func:`toolkit.partitioner.report.parts_table`."""
        return report.parts_table(self)

    def ops_table(self) -> pd.DataFrame:
        """One row per source op; see :func:`toolkit.partitioner.report.ops_table`."""
        return report.ops_table(self)

    def warnings_table(self) -> pd.DataFrame:
        """One row per warning; see :func:`toolkit.partitioner.report.warnings_table`."""
        return report.warnings_table(self)

    def source_ops(self) -> pd.DataFrame:
        """Provenance: source ops (see :mod:`toolkit.provenance`)."""
        return report.source_ops(self)

    def layers(self) -> pd.DataFrame:
        """Provenance: (source op, original layer) pairs."""
        return report.layers(self)

    def optimised_ops(self) -> pd.DataFrame:
        """Provenance: one row per part op, ``optimised_id`` counted over all parts."""
        return report.optimised_ops(self)

    def origins(self) -> pd.DataFrame:
        """Provenance: (part op, source op) pairs."""
        return report.origins(self)

    def commands(self) -> pd.DataFrame:
        """Provenance: no command queue for a partition (empty, with the columns)."""
        return report.commands(self)

    def debug_handles(self) -> pd.DataFrame:
        """Provenance: no debug handles for a partition (empty, with the columns)."""
        return report.debug_handles(self)

    def removed(self) -> pd.DataFrame:
        """Provenance: source ops the source model records as removed."""
        return report.removed(self)

    def __repr__(self) -> str:
        backends = ", ".join(dict.fromkeys(p.backend for p in self.parts))
        ops = sum(len(p.op_indices) for p in self.parts)
        return (f"<PartitionResult {self.source_file}: {len(self.parts)} part(s) over "
                f"{backends or '-'}, {ops} ops, {len(self.warnings)} warning(s)>")

    def _repr_html_(self) -> str:
        """Rich view: summary line, parts by op count (largest first) with their cut bytes,
        and a bar chart of ops per part."""
        from toolkit.reprs import html_bars, html_table, html_view

        parts = self.parts_table()
        cut = int(parts["cut_in_bytes"].sum()) if len(parts) else 0
        summary = (f"{self.source_file}: {len(self.parts)} part(s) over "
                   f"{', '.join(dict.fromkeys(p.backend for p in self.parts)) or '-'}, "
                   f"comply={self.spec.comply}, {cut:,} bytes cross a cut per inference, "
                   f"{len(self.warnings)} warning(s)")
        cols = ["part", "backend", "op_count", "op_types", "cut_in_bytes", "cut_out_bytes"]
        sections = [("parts", html_table(parts, "op_count", 10, columns=cols))]
        if self.warnings:
            sections.append(("warnings", html_table(self.warnings_table(), None, 10)))
        top = parts.sort_values("op_count", ascending=False, kind="stable").head(8)
        labels = [f"part {r.part} ({r.backend})" for r in top.itertuples()]
        return html_view("PartitionResult", summary, sections,
                         figure=html_bars(labels, top["op_count"].tolist(), unit=" ops",
                                          title="ops per part"))


def _inside(work: Path, name: str) -> Path:
    """Return ``work / name`` when ``name`` is a plain file name; else PartitionError."""
    if (not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name
            or Path(name).name != name):
        raise PartitionError(f"file name {name!r} would escape the work path", where=str(work),
                             fix="use plain file names (no folders) for models and backends")
    target = work / name
    if target.resolve().parent != work.resolve():
        raise PartitionError(
            f"file name {name!r} would escape the work path", where=str(work),
            fix=(
                "use plain file names (no folders or links out of the work path) for models and "
                "backends"
            ),
        )
    return target


def _check_unique_names(model: Model, groups: list[Any]) -> None:
    """Raise PartitionError when two tensors that connect parts share a name (parts are
    connected by tensor name, as circle-partitioner requires unique names)."""
    seen: dict[str, Any] = {}
    g = model.graph
    for ts in (g.inputs, g.outputs, *(x for grp in groups for x in (grp.inputs, grp.outputs))):
        for t in ts:
            other = seen.setdefault(t.name, t)
            if other is not t:
                raise PartitionError(
                    f"two tensors are named {t.name!r}; parts are connected by tensor name",
                    where=model.path or "<model>", fix="give the model's tensors unique names")


def _source_name(model: Model) -> str:
    if model.path:
        return Path(model.path).name
    name = model.graph.name or "model"
    if not name or any(c in name for c in "/\\\0") or name in (".", ".."):
        name = "model"
    return f"{name}.{model.format}"


def partition(model: Model | str | os.PathLike[str], part: Any,
              backends: str | list[str] | None = None, default: str | None = None, *,
              source_file: str | None = None, work_path: str | os.PathLike[str] | None = None,
              ext: str = ".circle") -> PartitionResult:
    """Partition ``model`` (a :class:`Model` or a .circle/.tflite path) by ``part`` (a
    ``.part`` path, a :class:`PartSpec` or a mapping; see
    :func:`toolkit.formats.part_file.as_part_spec`) and return a :class:`PartitionResult`.

    ``backends`` (CSV or list) and ``default`` override the ``[partition]`` section.
    ``source_file`` names the source in the connection files (default: the model's file name,
    or ``<graph name>.<format>``). With ``work_path`` the parts and connection files are also
    written there (see :meth:`PartitionResult.write`).

    The ops of the main subgraph are placed; a control-flow op takes the subgraphs it calls
    into its part. Raises :class:`PartitionError` (with ``file:line``) for a bad request.
    ``[OPNAME]`` names the model lacks are warnings, listed in
    :meth:`PartitionResult.warnings_table`.
    """
    check_optional_str(source_file, "source_file", "partition")
    if not isinstance(model, Model):
        from toolkit.formats.flatbuffer_read import load

        model = load(model)
    spec = as_part_spec(part).with_overrides(backends, default).validate()
    if ext not in _FORMATS:
        raise PartitionError(f"unknown part extension {ext!r}", fix="use .circle or .tflite")
    graph = model.graph
    ops = graph.ops
    placements, notes = place_ops(ops, spec)
    parts: list[Part] = []
    with paused_gc():  # thousands of part objects, all kept: no collection would free any
        groups = group_ops(graph, [p.backend for p in placements])
        for grp in groups:  # weight ops follow their readers' backend (grouping docs)
            for i in grp.ops:
                if placements[i].backend != grp.backend:
                    placements[i] = Placement(grp.backend, f"reader's part ({grp.backend}): "
                                              "reads only constants", placements[i].where)
        _check_unique_names(model, groups)
        base = graph.name or "main"
        for grp in groups:
            pm = build_part(model, [ops[i] for i in grp.ops], grp.inputs, grp.outputs,
                            name=f"{base}_{grp.backend}")
            parts.append(Part(grp.index + 1, grp.backend, pm, list(grp.ops),
                              [t.name for t in grp.inputs], [t.name for t in grp.outputs],
                              list(grp.reasons)))
    result = PartitionResult(model, spec, source_file or _source_name(model), parts,
                             placements, notes, ext)
    if work_path is not None:
        result.write(work_path)
    return result
