"""The provenance tables (``toolkit.provenance``) of a Vela compilation.

:class:`VelaProvenance` joins Vela's debug database with the input model it was run on:

- source ops: the ops of subgraph 0 of the input model; ``source_id`` is the operator index,
  which is Vela's ``source.ext_key``;
- compiled ops: the rows of Vela's ``optimised`` table, ``optimised_id`` being Vela's id;
- commands: the rows of Vela's ``queue`` table in execution order.

How Vela's tables map to origins:

- every ``optimised`` row names one Vela source op, hence one source op;
- default core: a scheduled op folded into another one (table ``group``: ``id`` is folded into
  ``group_id``, e.g. a fused activation, or an op chained on Ethos-U85) adds its source op to the
  origins of its group's primary optimised op, so the group's cost is shared by all its members;
- an optimised op with source id -1 (the legacy core's AvgPool standing in for a Relu, for
  example) gets the source op whose name Vela's name of it starts with (``cnn/relu/Relu_avgpool``
  -> ``cnn/relu/Relu``): the longest model op name that equals it or is followed by ``_``.
  :meth:`VelaProvenance.recovered` lists these.

Backends: an op Vela leaves on the CPU is ``"cpu"`` (default core: operator ``Passthrough``;
legacy core: an optimised op that issues no command), every other op ``"npu"``.
"""

from __future__ import annotations

import warnings
from functools import cached_property

import numpy as np
import pandas as pd

from toolkit.costs import ofm_dims
from toolkit.errors import VelaError
from toolkit.formats.vela_db import VelaDebugDB
from toolkit.ir import Model
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS
from toolkit.source_table import layers_table, op_figures
from toolkit.vela.estimates import ScheduledEstimates, _int_column, ordered_queue, read_estimates

__all__ = ["VelaProvenance"]

_I64 = np.int64


def _frame(rows: list[tuple], columns: list[str], text: tuple[str, ...] = ()) -> pd.DataFrame:
    """Return a DataFrame of ``rows``: ``text`` columns str, the others int64."""
    df = pd.DataFrame(rows, columns=columns)
    return df.astype({c: ("str" if c in text else _I64) for c in columns})


class VelaProvenance:
    """Provenance tables of a Vela output (implements :class:`toolkit.provenance.Provenance`).

    Args:
        db: the debug database (:func:`toolkit.formats.vela_db.read_debug_db`).
        model: the model given to Vela (:func:`toolkit.load`).
        estimates: Vela's estimates (:func:`toolkit.vela.estimates.read_estimates`); read from
            ``db`` (and ``per_layer``) when None.
        per_layer: the per-layer CSV (legacy core only), used when ``estimates`` is None.

    Raises:
        VelaError: the database names an operator index the model does not have (it was
            written for another model).
    """

    def __init__(self, db: VelaDebugDB, model: Model, estimates: ScheduledEstimates | None = None,
                 per_layer: pd.DataFrame | None = None) -> None:
        self.db = db
        self.model = model
        self.estimates = estimates if estimates is not None else read_estimates(db, per_layer)
        self._ops = list(model.graph.ops)
        self._vela_source = self._map_vela_sources()

    # ------------------------------------------------------------------ internals
    def _map_vela_sources(self) -> dict[int, int]:
        """Return Vela source id -> operator index; check the ids fit the model."""
        src = self.db.table("source")
        if not len(src):
            return {}
        if "ext_key" not in src.columns:
            raise VelaError("the source table has no 'ext_key' column", where=self.db.path,
                            fix="re-run vela --enable-debug-db on a .tflite model")
        ids = _int_column(src, "id").tolist()
        keys = _int_column(src, "ext_key").tolist()
        n = len(self._ops)
        bad = [(i, k) for i, k in zip(ids, keys) if not 0 <= k < n]
        if bad:
            raise VelaError(
                f"Vela's source op {bad[0][0]} is operator {bad[0][1]} of the input model, "
                f"which has {n} operators",
                where=self.db.path,
                fix="pass the model that vela compiled into this output folder")
        if "ofm_d" in src.columns:
            depth = _int_column(src, "ofm_d").tolist()
            wrong = [k for k, d in zip(keys, depth) if ofm_dims(self._ops[k])[2] != d]
            if wrong:
                warnings.warn(
                    f"{self.db.path or 'debug database'}: output depth of operator(s) "
                    f"{wrong[:5]} differs from Vela's source table; is this the model vela "
                    "compiled?", stacklevel=3)
        return dict(zip(ids, keys))

    @cached_property
    def _names(self) -> dict[str, int]:
        """Model op name -> first operator index with that name."""
        out: dict[str, int] = {}
        for i, op in enumerate(self._ops):
            out.setdefault(op.name, i)
        return out

    def _by_name(self, name: str) -> int:
        """Return the operator index whose name ``name`` is or extends with ``_...``; -1."""
        if not name:
            return -1
        if name in self._names:
            return self._names[name]
        pos = len(name)
        while True:
            pos = name.rfind("_", 0, pos)
            if pos <= 0:
                return -1
            if name[:pos] in self._names:
                return self._names[name[:pos]]

    @cached_property
    def _optimised(self) -> pd.DataFrame:
        """Vela's optimised table: ``optimised_id``, ``vela_source_id``, ``source_id``,
        ``operator`` and the dims (int64)."""
        t = self.db.table("optimised")
        n = len(t)
        out = pd.DataFrame({
            "optimised_id": _int_column(t, "id") if n else np.zeros(0, _I64),
            "vela_source_id": _int_column(t, "source_id") if n else np.zeros(0, _I64),
            "operator": pd.Series(t["operator"].astype(str).to_numpy() if n else [],
                                  dtype="str"),
        })
        for c in ("kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d"):
            out[c] = _int_column(t, c) if n and c in t.columns else np.zeros(n, _I64)
        out["source_id"] = np.array([self._vela_source.get(v, -1)
                                     for v in out["vela_source_id"].tolist()], dtype=_I64)
        return out

    @cached_property
    def _scheduled(self) -> pd.DataFrame:
        """Estimates' id columns plus ``source_id``, ``recovered`` and ``primary_optimised_id``."""
        ops = self.estimates.ops
        df = ops[["scheduled_id", "optimised_id", "group_id", "vela_source_id", "operator",
                  "name", "backend"]].copy()
        opt_src = dict(zip(self._optimised["optimised_id"].tolist(),
                           self._optimised["source_id"].tolist()))
        src, recovered = [], []
        for vs, oid, name in zip(df["vela_source_id"].tolist(), df["optimised_id"].tolist(),
                                 df["name"].tolist()):
            s = self._vela_source.get(vs, -1)
            if s < 0 and oid >= 0:
                s = opt_src.get(oid, -1)
            rec = False
            if s < 0 and oid >= 0:
                s = self._by_name(name)
                rec = s >= 0
            src.append(s)
            recovered.append(rec)
        df["source_id"] = np.array(src, dtype=_I64)
        df["recovered"] = np.array(recovered, dtype=bool)
        opt_of = dict(zip(df["scheduled_id"].tolist(), df["optimised_id"].tolist()))
        df["primary_optimised_id"] = np.array(
            [opt_of.get(g, o) for g, o in zip(df["group_id"].tolist(),
                                               df["optimised_id"].tolist())], dtype=_I64)
        names = [n if n else (self._ops[s].name if s >= 0 else "")
                 for n, s in zip(df["name"].tolist(), df["source_id"].tolist())]
        df["name"] = pd.Series(names, dtype="str", index=df.index)
        return df

    @cached_property
    def _queue(self) -> pd.DataFrame:
        """The ordered queue joined with the scheduled ops and per-command estimates."""
        q = ordered_queue(self.db)
        sched = self._scheduled
        key_col = "scheduled_id" if self.db.core == "default" else "optimised_id"
        group: dict[int, int] = {}
        primary: dict[int, int] = {}
        for k, g, p in zip(sched[key_col].tolist(), sched["group_id"].tolist(),
                           sched["primary_optimised_id"].tolist()):
            if k >= 0:
                group.setdefault(k, g)
                primary.setdefault(k, p)
        keys = q[key_col].tolist()
        q["group_id"] = np.array([group.get(k, s) for k, s in zip(keys, q["scheduled_id"])],
                                 dtype=_I64)
        q["primary_optimised_id"] = np.array(
            [primary.get(k, o) for k, o in zip(keys, q["optimised_id"])], dtype=_I64)
        if self.db.core == "legacy":  # no scheduled ids: use the estimates row of the op
            sid = dict(zip(sched["optimised_id"].tolist(), sched["scheduled_id"].tolist()))
            q["scheduled_id"] = np.array([sid.get(k, -1) for k in keys], dtype=_I64)
        per = self.estimates.per_command(q)
        for m in self.estimates.metrics:
            q[m] = per[m].to_numpy(dtype=_I64)
        return q

    # ------------------------------------------------------------------ Provenance protocol
    def source_ops(self) -> pd.DataFrame:
        """Return one row per operator of the input model (subgraph 0), in model order.

        Columns (:data:`toolkit.provenance.SOURCE_COLUMNS`): ``source_id`` and ``op_index``
        (int64, the operator index, = Vela's ``ext_key``), ``operator`` (str, e.g.
        ``CONV_2D``), ``name`` (str, first output tensor name), ``macs`` (int64,
        :func:`toolkit.costs.op_macs`), ``output_bytes`` (int64), ``kernel_w``, ``kernel_h``,
        ``ofm_w``, ``ofm_h``, ``ofm_d`` (int64, from the model's shapes).
        """
        rows = [(i, i, op.kind, op.name, *op_figures(op)) for i, op in enumerate(self._ops)]
        return _frame(rows, SOURCE_COLUMNS, ("operator", "name"))

    def layers(self) -> pd.DataFrame:
        """Return one row per (source op, original layer): ``source_id`` (int64), ``layer``
        (str), ``main`` (bool): the layers of the operator's origins
        (:func:`toolkit.source_table.layers_table`)."""
        return layers_table(self.model, range(len(self._ops)),
                            {i: op.origins for i, op in enumerate(self._ops)})

    def optimised_ops(self) -> pd.DataFrame:
        """Return one row per row of Vela's ``optimised`` table (the default core repeats an op
        under several ids; only the ids that the ``perf`` table names are scheduled).

        Columns (:data:`toolkit.provenance.OPTIMISED_COLUMNS`): ``optimised_id`` (int64,
        Vela's id), ``operator`` (str, Vela's op type), ``name`` (str: Vela's name of the
        scheduled op, else the name of its source op, else ``""``), ``macs`` (int64, Vela's
        ``mac_count`` of its scheduled ops, 0 when not scheduled), ``output_bytes`` (int64,
        ofm elements times the element size of its source op's output, 1 byte when unknown),
        ``kernel_w``, ``kernel_h``, ``ofm_w``, ``ofm_h``, ``ofm_d`` (int64, Vela's) and
        ``backend`` (``"npu"`` or ``"cpu"``).
        """
        opt = self._optimised
        sched = self._scheduled
        ops = self.estimates.ops
        name_of: dict[int, str] = {}
        for oid, name in zip(sched["optimised_id"].tolist(), sched["name"].tolist()):
            if oid >= 0 and name:
                name_of.setdefault(oid, name)
        macs: dict[int, int] = {}
        if "mac_count" in ops.columns:
            for oid, m in zip(ops["optimised_id"].tolist(), ops["mac_count"].tolist()):
                macs[oid] = macs.get(oid, 0) + int(m)
        queued = set(self._queue["optimised_id"].tolist())
        rows = []
        for r in opt.itertuples(index=False):
            s = int(r.source_id)
            src_op = self._ops[s] if s >= 0 else None
            name = name_of.get(r.optimised_id) or (src_op.name if src_op is not None else "")
            item = 1
            if src_op is not None and src_op.outputs and src_op.outputs[0].dtype is not None:
                item = src_op.outputs[0].dtype.itemsize
            if self.db.core == "default":
                backend = "cpu" if r.operator == "Passthrough" else "npu"
            else:
                backend = "npu" if r.optimised_id in queued else "cpu"
            rows.append((r.optimised_id, r.operator, name, macs.get(r.optimised_id, 0),
                         r.ofm_w * r.ofm_h * r.ofm_d * item, r.kernel_w, r.kernel_h,
                         r.ofm_w, r.ofm_h, r.ofm_d, backend))
        return _frame(rows, OPTIMISED_COLUMNS, ("operator", "name", "backend"))

    def origins(self) -> pd.DataFrame:
        """Return one row per (optimised op, source op) pair, sorted: ``optimised_id``,
        ``source_id`` (int64).

        Pairs come from each optimised row's source op, from ops whose source is recovered by
        name, and from group folding: a scheduled op folded into a group adds its source op to
        the group's primary optimised op (see the module docstring).
        """
        pairs: set[tuple[int, int]] = set()
        opt = self._optimised
        for oid, s in zip(opt["optimised_id"].tolist(), opt["source_id"].tolist()):
            if s >= 0:
                pairs.add((oid, s))
        sched = self._scheduled
        for oid, poid, s in zip(sched["optimised_id"].tolist(),
                                sched["primary_optimised_id"].tolist(),
                                sched["source_id"].tolist()):
            if s >= 0:
                if oid >= 0:
                    pairs.add((oid, s))
                if poid >= 0:
                    pairs.add((poid, s))
        return _frame(sorted(pairs), ["optimised_id", "source_id"])

    def commands(self) -> pd.DataFrame:
        """Return Vela's command queue in execution order, one row per queue row.

        Columns (:data:`toolkit.provenance.COMMAND_COLUMNS`, all int64): ``command_id``
        (position: command streams by id, then offset), ``optimised_id`` (the primary optimised
        op of the row's group, so a folded sub-op's commands count for its group), ``stripe``
        and ``stripes`` (position and count of the queue rows of the same scheduled op; the
        legacy core: optimised op), ``row_start``/``row_end`` (-1: not known), ``macs`` (Vela's
        ``mac_count`` of the op split evenly over its rows), ``bytes`` (-1: not known),
        ``est_cycles`` (Vela's ``op_cycles`` of the op split over its rows, rounded to whole
        cycles), ``queue_offset`` (byte offset in its command stream; offsets restart in
        every stream: see :meth:`queue` for ``cmdstream_id``).
        """
        q = self._queue
        key = q["scheduled_id"] if self.db.core == "default" else q["optimised_id"]
        g = q.groupby(key.to_numpy(), sort=False)
        n = len(q)
        scale = self.estimates.scale
        cycles = (q["op_cycles"].to_numpy(dtype=np.float64) / scale if "op_cycles" in q.columns
                  else np.zeros(n))
        df = pd.DataFrame({
            "command_id": q["command_id"].to_numpy(dtype=_I64),
            "optimised_id": q["primary_optimised_id"].to_numpy(dtype=_I64),
            "stripe": g.cumcount().to_numpy(dtype=_I64) if n else np.zeros(0, _I64),
            "stripes": g["command_id"].transform("size").to_numpy(dtype=_I64)
            if n else np.zeros(0, _I64),
            "row_start": np.full(n, -1, _I64),
            "row_end": np.full(n, -1, _I64),
            "macs": q["mac_count"].to_numpy(dtype=_I64) if "mac_count" in q.columns
            else np.zeros(n, _I64),
            "bytes": np.full(n, -1, _I64),
            "est_cycles": np.round(cycles).astype(_I64),
            "queue_offset": q["offset"].to_numpy(dtype=_I64),
        })
        return df[COMMAND_COLUMNS]

    def debug_handles(self) -> pd.DataFrame:
        """Return no rows (Vela has no debug handles), with the columns ``handle`` (object),
        ``optimised_id``, ``source_id`` (int64)."""
        return pd.DataFrame({"handle": pd.Series([], dtype=object),
                             "optimised_id": pd.Series([], dtype=_I64),
                             "source_id": pd.Series([], dtype=_I64)})

    def removed(self) -> pd.DataFrame:
        """Return the source ops that no scheduled op carries: ``source_id`` (int64),
        ``reason`` (str). Such an op keeps zero figures in every attribution."""
        status = self.source_status()
        rows = [(s, r) for s, r, rm in zip(status["source_id"].tolist(),
                                          status["removed_reason"].tolist(),
                                          status["removed"].tolist()) if rm]
        return _frame(rows, ["source_id", "reason"], ("reason",))

    # ------------------------------------------------------------------ Vela-specific views
    def source_status(self) -> pd.DataFrame:
        """Return one row per source op: where Vela put it (a copy; see :meth:`_status`).

        Columns: ``source_id``, ``op_index`` (int64), ``operator``, ``name`` (str, from the
        model), ``vela_source_id`` (int64, -1 when Vela does not list the op),
        ``vela_operator`` (str, Vela's name of the op type, ``""`` when not listed),
        ``backend`` (``"npu"``, ``"cpu"``, or ``"unknown"`` when Vela does not list the op;
        a removed op counts as ``"npu"``: Vela removes ops only from NPU graphs),
        ``scheduled_ops`` (int64, scheduled ops carrying it, group members included),
        ``removed`` (bool) and ``removed_reason`` (str, ``""`` when not removed).
        """
        return self._status.copy()

    @cached_property
    def _status(self) -> pd.DataFrame:
        """The frame :meth:`source_status` returns."""
        src = self.db.table("source")
        vela_of = {k: v for v, k in self._vela_source.items()}
        vela_op = (dict(zip(_int_column(src, "id").tolist(), src["operator"].astype(str)))
                   if len(src) else {})
        sched = self._scheduled
        count: dict[int, int] = {}
        npu: set[int] = set()
        for s, b in zip(sched["source_id"].tolist(), sched["backend"].tolist()):
            if s >= 0:
                count[s] = count.get(s, 0) + 1
                if b == "npu":
                    npu.add(s)
        optimised = set(self._optimised["source_id"].tolist())
        rows = []
        for i, op in enumerate(self._ops):
            v = vela_of.get(i, -1)
            if v < 0:
                backend, reason = "unknown", "not listed in Vela's source table"
            elif i in count:
                backend, reason = ("npu" if i in npu else "cpu"), ""
            elif i in optimised:
                backend, reason = "npu", "optimised by Vela but never scheduled"
            else:
                backend, reason = "npu", "removed or fused by Vela: no optimised op carries it"
            rows.append((i, i, op.kind, op.name, v, vela_op.get(v, ""), backend,
                         count.get(i, 0), bool(reason), reason))
        df = pd.DataFrame(rows, columns=["source_id", "op_index", "operator", "name",
                                         "vela_source_id", "vela_operator", "backend",
                                         "scheduled_ops", "removed", "removed_reason"])
        return df.astype({"source_id": _I64, "op_index": _I64, "operator": "str",
                          "name": "str", "vela_source_id": _I64, "vela_operator": "str",
                          "backend": "str", "scheduled_ops": _I64, "removed": bool,
                          "removed_reason": "str"})

    def scheduled(self) -> pd.DataFrame:
        """Return one row per scheduled op (see :class:`ScheduledEstimates`) with its links.

        Columns: ``scheduled_id``, ``optimised_id``, ``group_id``, ``vela_source_id`` (int64),
        ``operator``, ``name`` (str; Vela's name, else its source op's), ``backend`` (str),
        ``source_id`` (int64, operator index of its own source op, -1 unknown), ``recovered``
        (bool, source found by name), ``primary_optimised_id`` (int64, optimised op of its
        group's primary op).
        """
        return self._scheduled.copy()

    def scheduled_sources(self) -> pd.DataFrame:
        """Return ``scheduled_id``, ``source_id`` (int64): each scheduled op's own source op
        as Vela names it (-1 unknown)."""
        return self._scheduled[["scheduled_id", "source_id"]].copy()

    def recovered(self) -> pd.DataFrame:
        """Return the scheduled ops whose source op was found by name: ``scheduled_id``,
        ``optimised_id``, ``source_id`` (int64), ``name`` (str, Vela's name)."""
        s = self._scheduled
        return s.loc[s["recovered"], ["scheduled_id", "optimised_id", "source_id", "name"]
                     ].reset_index(drop=True)

    def queue(self) -> pd.DataFrame:
        """Return Vela's queue in execution order with its links and per-command estimates.

        Columns: ``command_id``, ``cmdstream_id``, ``offset`` (bytes), ``optimised_id``,
        ``scheduled_id`` (legacy core: the estimates row of its optimised op), ``group_id``
        (scheduled id of the group's primary op), ``primary_optimised_id`` (all int64), then
        Vela's figures of the row's scheduled op split evenly over its rows (cycles float64,
        ``mac_count`` int64).
        """
        est = self.estimates
        out = self._queue.copy()
        for m in est.cycle_metrics:
            out[m] = out[m].to_numpy(dtype=_I64) / float(est.scale)
        return out

    def __repr__(self) -> str:
        return (f"<VelaProvenance {self.db.core} core: {len(self._ops)} source ops, "
                f"{len(self._optimised)} optimised ops, {len(self._queue)} queue rows>")
