"""The result of ``compile``: the compiled model, its command queue and provenance tables.

A :class:`CompiledModel` is a value: it owns the source model (untouched), the compiled model,
the target, the command queue and the debug handles, and builds each provenance table as a
DataFrame on request (columns as :mod:`toolkit.provenance` defines them). ``save`` writes the
three output files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.compiler.lowering import Command
from toolkit.compiler.pass_manager import PassRun
from toolkit.compiler.target import Target
from toolkit.errors import ToolkitError
from toolkit.formats.debug_handles import encode_debug_handles
from toolkit.formats.flatbuffer_write import ignores_activation, write_model
from toolkit.ir import Model, Op
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS
from toolkit.schema import BUILTIN_CODES
from toolkit.source_table import (
    SOURCE_DTYPES,
    layers_table,
    op_figures,
    source_ops_of,
    source_ops_table,
)
from toolkit.tables import exact_ints
from toolkit.util.atomic import atomic_write

__all__ = ["CompiledModel", "DEBUG_DB_TABLES", "uses_circle_only", "model_and_commands"]

#: Tables of the debug database written by :meth:`CompiledModel.save`, with their columns.
DEBUG_DB_TABLES: dict[str, list[str]] = {
    "source": ["id", "operator", "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d", "ext_key"],
    "optimised": ["id", "source_id", "operator", "kernel_w", "kernel_h", "ofm_w", "ofm_h",
                  "ofm_d"],
    "queue": ["offset", "cmdstream_id", "optimised_id"],
    "cmdstream": ["id", "file_offset"],
    "origins": ["optimised_id", "source_id"],
    "source_ops": SOURCE_COLUMNS,
    "removed": ["source_id", "reason"],
    "target": ["name", "buffer_bytes", "macs_per_cycle", "bytes_per_cycle", "clock_hz",
               "command_bytes"],
}
_I64 = "int64"


def model_and_commands(obj: Any, purpose: str) -> tuple[Model, list[Command] | None]:
    """Return the graph to execute and, for a compiled model, its command queue.

    ``obj`` is a :class:`Model` (commands ``None``) or a :class:`CompiledModel` (anything with
    ``model`` and ``command_list``). Raises ToolkitError naming ``purpose`` otherwise.
    """
    if isinstance(obj, Model):
        return obj, None
    commands = getattr(obj, "command_list", None)
    inner = getattr(obj, "model", None)
    if commands is not None and isinstance(inner, Model):
        return inner, list(commands)
    raise ToolkitError(f"{purpose} cannot take a {type(obj).__name__}",
                       fix="pass a Model or a CompiledModel")


def uses_circle_only(model: Model) -> list[str]:
    """Return why ``model`` cannot run in LiteRT as a .tflite: circle-only ops (negative
    builtin codes), custom ops, and fused TANH activations on ops whose LiteRT kernels ignore
    them (all but the recurrent ones, see
    :func:`~toolkit.formats.flatbuffer_write.ignores_activation`). Each reason names the
    subgraph and op index."""
    reasons = []
    for si, g in enumerate(model.subgraphs):
        for i, op in enumerate(g.ops):
            at = f"(subgraph {si} op {i})"
            if BUILTIN_CODES.get(op.type, 0) < 0:
                reasons.append(f"{op.type} {op.name!r} {at} is circle-only")
            elif op.type == "CUSTOM":
                reasons.append(f"custom op {op.custom_code} {op.name!r} {at}")
            elif ignores_activation(op):
                reasons.append(f"{op.type} {op.name!r} {at} has a fused TANH")
    return reasons


def _frame(rows: Sequence[Sequence[Any]] | Iterator[Sequence[Any]], columns: list[str],
           dtypes: dict[str, str]) -> pd.DataFrame:
    """Return a DataFrame of ``rows`` with ``columns`` and dtypes (kept when empty)."""
    df = pd.DataFrame(list(rows), columns=columns)
    return df.astype(dtypes) if dtypes else df


@dataclass
class CompiledModel:
    """A compiled model with its command queue and provenance.

    Attributes:
        source: the model as given (never modified); None for a compiled model read back
            from files by :func:`~toolkit.compiler.saved.load_compiled`.
        model: the compiled model.
        target: the :class:`Target` it was compiled for.
        command_list: the command queue (:class:`~toolkit.compiler.lowering.Command`), in order.
        handles: debug handle of each compiled op (index = ``optimised_id``).
        pass_runs: one :class:`~toolkit.compiler.pass_manager.PassRun` per pass run.
    """

    source: Model | None
    model: Model
    target: Target
    command_list: list[Command]
    handles: list[int | str]
    pass_runs: list[PassRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ops: list[Op] = [op for g in self.model.subgraphs for op in g.ops]
        self._index = {op: i for i, op in enumerate(self._ops)}
        self._source_frame: pd.DataFrame | None = None
        self._removed_frame: pd.DataFrame | None = None
        self._source_file: str | None = None

    @classmethod
    def restored(cls, model: Model, target: Target, command_list: list[Command],
                 handles: list[int | str], source_ops: pd.DataFrame, removed: pd.DataFrame,
                 source_file: str | None) -> CompiledModel:
        """Return a compiled model rebuilt from saved files: no source model, its source-op
        and removed tables given as read (see :func:`~toolkit.compiler.saved.load_compiled`)."""
        new = cls(None, model, target, command_list, handles)
        new._source_frame = source_ops[SOURCE_COLUMNS].astype(SOURCE_DTYPES)
        new._removed_frame = removed[["source_id", "reason"]].astype(
            {"source_id": _I64, "reason": "str"})
        new._source_file = source_file
        return new

    # ----------------------------------------------------------------- views
    @property
    def ops(self) -> list[Op]:
        """Compiled ops in ``optimised_id`` order (subgraph 0 in execution order first)."""
        return list(self._ops)

    def optimised_id(self, op: Op) -> int:
        """Return the ``optimised_id`` of a compiled op."""
        return self._index[op]

    # ------------------------------------------------------- provenance tables
    def source_ops(self) -> pd.DataFrame:
        """One row per source op (an origin of the input model).

        Columns: ``source_id`` (int64, origin id), ``op_index`` (int64, index of its op in
        subgraph 0 of the source, -1 elsewhere), ``operator`` (str), ``name`` (str, origin
        name), ``macs`` (int64, multiply-accumulates per inference), ``output_bytes`` (int64),
        ``kernel_w``, ``kernel_h``, ``ofm_w``, ``ofm_h``, ``ofm_d`` (int64, Vela's columns).
        An op carrying k origins splits its MACs and output bytes into k integer shares that
        sum to the op's figures.
        """
        if self._source_frame is None:
            assert self.source is not None
            self._source_frame = source_ops_table(source_ops_of(self.source))
        return self._source_frame.copy()

    def layers(self) -> pd.DataFrame:
        """One row per (source op, original layer): ``source_id`` (int64), ``layer`` (str),
        ``main`` (bool); see :func:`toolkit.source_table.layers_table`. The layers are the
        source model's ``model.origin(oid).layers`` (rules: ``docs/layers.md``).
        """
        model = self.source if self.source is not None else self.model
        return layers_table(model, self.source_ops()["source_id"].tolist())

    def optimised_ops(self) -> pd.DataFrame:
        """One row per compiled op: ``optimised_id``, ``operator``, ``name``, ``macs``,
        ``output_bytes``, ``kernel_w``, ``kernel_h``, ``ofm_w``, ``ofm_h``, ``ofm_d`` (int64
        but for the str ``operator``/``name``) and ``backend`` (str, the target name)."""
        rows = [(i, op.kind, op.name, *op_figures(op), self.target.name)
                for i, op in enumerate(self._ops)]
        return _frame(rows, OPTIMISED_COLUMNS, {c: _I64 for c in OPTIMISED_COLUMNS
                                                if c not in ("operator", "name", "backend")})

    def origins(self) -> pd.DataFrame:
        """One row per (compiled op, source op): ``optimised_id`` (int64), ``source_id``
        (int64), sorted by both."""
        rows = [(i, oid) for i, op in enumerate(self._ops) for oid in sorted(op.origins)]
        return _frame(rows, ["optimised_id", "source_id"],
                      {"optimised_id": _I64, "source_id": _I64})

    def commands(self) -> pd.DataFrame:
        """The ordered command queue, one row per command: ``command_id``, ``optimised_id``,
        ``stripe``, ``stripes``, ``row_start``, ``row_end`` (output rows along axis 1, end
        exclusive), ``macs``, ``bytes`` (bytes moved), ``est_cycles`` (cost model),
        ``queue_offset`` (bytes); all int64 (a column whose values do not fit int64, once
        the limits are raised, holds exact Python ints instead)."""
        rows = [(c.command_id, c.optimised_id, c.stripe, c.stripes, c.row_start, c.row_end,
                 c.macs, c.bytes, c.est_cycles, c.queue_offset) for c in self.command_list]
        return exact_ints(pd.DataFrame(rows, columns=COMMAND_COLUMNS), list(COMMAND_COLUMNS))

    def queue(self) -> pd.DataFrame:
        """Vela's ``queue`` table: ``offset`` (int64, byte offset of the command in the
        stream), ``cmdstream_id`` (int64, always 0), ``optimised_id`` (int64)."""
        rows = [(c.queue_offset, 0, c.optimised_id) for c in self.command_list]
        return _frame(rows, DEBUG_DB_TABLES["queue"], {c: _I64 for c in DEBUG_DB_TABLES["queue"]})

    def debug_handles(self) -> pd.DataFrame:
        """One row per (debug handle, source op): ``handle`` (object: int or str),
        ``optimised_id`` (int64), ``source_id`` (int64)."""
        rows = [(h, i, oid) for i, (h, op) in enumerate(zip(self.handles, self._ops))
                for oid in sorted(op.origins)]
        df = pd.DataFrame(rows, columns=["handle", "optimised_id", "source_id"])
        return df.astype({"handle": object, "optimised_id": _I64, "source_id": _I64})

    def removed(self) -> pd.DataFrame:
        """Source ops whose op a pass removed (their origin is carried by no compiled op):
        ``source_id`` (int64), ``reason`` (str)."""
        if self._removed_frame is not None:
            return self._removed_frame.copy()
        live: set[int] = set()
        for g in self.model.subgraphs:
            live |= g.live_origins()
        reasons: dict[int, str] = {}
        for g in self.model.subgraphs:
            for oid, why in g.removed_origins.items():
                if oid not in live:
                    reasons.setdefault(oid, why)
        rows = sorted(reasons.items())
        return _frame(rows, ["source_id", "reason"], {"source_id": _I64, "reason": "str"})

    def rewrites(self) -> pd.DataFrame:
        """The provenance log, one row per rewrite, in order.

        Columns: ``step`` (int64), ``subgraph`` (int64), ``relation`` (absorb, fuse, replace,
        remove), ``pass`` (str), ``sources`` (object: tuple of op names before), ``source_ids``
        (object: tuple of sorted origin-id tuples, one per source op), ``result`` (str or None:
        the op after), ``result_type`` (str or None), ``result_ids`` (object: sorted tuple).
        """
        rows: list[tuple[Any, ...]] = []
        for gi, g in enumerate(self.model.subgraphs):
            for r in g.rewrites:
                rows.append((len(rows), gi, r.relation, r.pass_name, tuple(r.sources),
                             tuple(tuple(sorted(s)) for s in r.source_origins), r.result,
                             r.result_type, tuple(sorted(r.result_origins))))
        cols = ["step", "subgraph", "relation", "pass", "sources", "source_ids", "result",
                "result_type", "result_ids"]
        df = pd.DataFrame(rows, columns=cols)
        return df.astype({"step": _I64, "subgraph": _I64, "sources": object,
                          "source_ids": object, "result_ids": object})

    def passes(self) -> pd.DataFrame:
        """One row per pass run: ``sweep`` (int64), ``pass`` (str), ``modified`` (bool),
        ``seconds`` (float64)."""
        rows = [(r.sweep, r.name, r.modified, r.seconds) for r in self.pass_runs]
        return _frame(rows, ["sweep", "pass", "modified", "seconds"],
                      {"sweep": _I64, "modified": "bool", "seconds": "float64"})

    # ------------------------------------------------------------ debug db
    def debug_db_tables(self) -> dict[str, pd.DataFrame]:
        """Return the debug-database tables by name.

        Vela's legacy tables ``source`` (``id`` = source_id, ``ext_key`` = op index in the
        source model), ``optimised`` (``source_id`` = the smallest origin id of the op),
        ``queue`` and ``cmdstream`` (``file_offset`` is -1: the command stream is not stored in
        the model file); then tables of the toolkit's own: ``origins`` (every
        ``optimised_id, source_id`` pair, since ``optimised.source_id`` holds only one),
        ``source_ops`` (:meth:`source_ops`), ``removed`` (:meth:`removed`) and ``target``
        (one row: the :class:`Target` fields), which let :func:`load_compiled` rebuild the
        compiled model from the files alone.
        """
        src = self.source_ops()
        source = pd.DataFrame({
            "id": src["source_id"], "operator": src["operator"], "kernel_w": src["kernel_w"],
            "kernel_h": src["kernel_h"], "ofm_w": src["ofm_w"], "ofm_h": src["ofm_h"],
            "ofm_d": src["ofm_d"], "ext_key": src["op_index"]})
        opt = self.optimised_ops()
        first = [min(op.origins) for op in self._ops]
        optimised = pd.DataFrame({
            "id": opt["optimised_id"], "source_id": np.asarray(first, dtype=np.int64),
            "operator": opt["operator"], "kernel_w": opt["kernel_w"],
            "kernel_h": opt["kernel_h"], "ofm_w": opt["ofm_w"], "ofm_h": opt["ofm_h"],
            "ofm_d": opt["ofm_d"]})
        cmdstream = pd.DataFrame({"id": np.zeros(1, np.int64),
                                  "file_offset": np.full(1, -1, np.int64)})
        t = self.target
        target = pd.DataFrame({c: [getattr(t, c)] for c in DEBUG_DB_TABLES["target"]})
        return {"source": source, "optimised": optimised, "queue": self.queue(),
                "cmdstream": cmdstream, "origins": self.origins(),
                "source_ops": self.source_ops(), "removed": self.removed(), "target": target}

    def debug_handle_map(self) -> dict[int | str, tuple[int, ...]]:
        """Return ``{handle: sorted origin ids}`` (ExecuTorch's ``debug_handle_map``)."""
        return {h: tuple(sorted(op.origins)) for h, op in zip(self.handles, self._ops)}

    # ---------------------------------------------------------------- saving
    @property
    def source_file(self) -> str | None:
        """File name of the source model, when known."""
        if self.source is not None:
            return Path(self.source.path).name if self.source.path else None
        return self._source_file

    def default_stem(self) -> str:
        """The file stem used by :meth:`save`: the source file's stem, else ``"model"``."""
        name = self.source_file
        return Path(name).stem if name else "model"

    def save(self, outdir: str | os.PathLike[str], stem: str | None = None) -> list[Path]:
        """Write into ``outdir`` and return the paths, in this order:

        * ``<stem>.circle``: the compiled model, with ``ONE_source_table`` / ``ONE_op_table``;
        * ``<stem>_debug.xml``: the debug database (:meth:`debug_db_tables`, Vela's legacy
          format);
        * ``<stem>.debug_handles.json``: the debug handle map
          (:mod:`toolkit.formats.debug_handles`, with ``optimised_ids``).

        Each file is written to a temporary file and renamed over the target. The model and
        handle bytes are produced before anything is written and the debug database (which
        checks its text) is written first, so a failure leaves no new model file behind.
        """
        from toolkit.formats.vela_db import write_debug_db

        stem = stem or self.default_stem()
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        model_path = out / f"{stem}.circle"
        db_path = out / f"{stem}_debug.xml"
        handles_path = out / f"{stem}.debug_handles.json"
        model_bytes = write_model(self.model, "circle", origin_tables=True,
                                  where=str(model_path))
        handles = encode_debug_handles(
            self.debug_handle_map(), {h: i for i, h in enumerate(self.handles)})
        tables = self.debug_db_tables()
        write_debug_db(db_path, tables, self.source_file or f"{stem}.tflite", model_path.name)
        atomic_write(model_path, model_bytes)
        atomic_write(handles_path, handles)
        return [model_path, db_path, handles_path]

    def __repr__(self) -> str:
        return (f"<CompiledModel {len(self.source_ops())} source ops -> {len(self._ops)} "
                f"compiled ops, {len(self.command_list)} commands for {self.target.name!r}>")

    def _repr_html_(self) -> str:
        """Rich view: summary line, compiled ops by estimated cycles (largest first) with
        their source ops, and a bar chart of the largest."""
        from toolkit.reprs import html_bars, html_table, html_view

        ops = self.optimised_ops()[["optimised_id", "operator", "name", "macs"]]
        cmds = self.commands()
        per_op = cmds.groupby("optimised_id").agg(commands=("command_id", "size"),
                                                  est_cycles=("est_cycles", "sum"))
        names = self.source_ops().set_index("source_id")["name"]
        sources = (self.origins().assign(source=lambda d: d["source_id"].map(names))
                   .groupby("optimised_id")["source"].agg(lambda s: ", ".join(map(str, s))))
        table = (ops.merge(per_op, left_on="optimised_id", right_index=True, how="left")
                 .merge(sources.rename("source ops"), left_on="optimised_id",
                        right_index=True, how="left")
                 .fillna({"commands": 0, "est_cycles": 0}))
        summary = (f"{len(self.source_ops())} source ops -> {len(self._ops)} compiled ops -> "
                   f"{len(self.command_list)} commands for target {self.target.name!r}, "
                   f"{len(self.removed())} source op(s) removed, {int(ops['macs'].sum()):,} MACs")
        top = table.sort_values("est_cycles", ascending=False, kind="stable").head(8)
        return html_view("CompiledModel", summary, [
            ("compiled ops", html_table(table, "est_cycles", 10)),
        ], figure=html_bars(top["name"].astype(str).tolist(), top["est_cycles"].tolist(),
                            unit=" cycles", title="estimated cycles per compiled op"))

