"""Vela's performance estimates per scheduled op, and their exact attribution to source ops.

Where the numbers come from
---------------------------
- Default core (Vela 5.x): the debug database's ``perf`` table, one row per scheduled op:
  ``op_cycles``, ``npu_cycles``, ``mac_count`` and one ``<memory>_ac`` column per memory
  (access cycles; renamed to snake_case: ``Sram_ac`` -> ``sram_ac``, ``OffChipFlash_ac`` ->
  ``off_chip_flash_ac``). Ops left on the CPU are rows with operator ``Passthrough``.
- Legacy core (``--debug-force-legacy-core``): the database has no estimates; they come from
  ``<stem>_per-layer.csv``, whose rows carry no id. They are matched to optimised ops as follows
  (:func:`match_per_layer_rows`): the optimised ops that issue commands, in execution order
  (queue rows sorted by command stream, then offset; each op at its first command), are aligned
  with the CSV rows in file order on the operator type (CSV ``nng_operator`` against the
  ``optimised`` table's ``operator``), using the longest common subsequence
  (:class:`difflib.SequenceMatcher`). When both lists have the same length and the same types,
  as Vela writes them, this is row *i* to op *i*. A CSV row left unmatched keeps
  ``optimised_id`` -1 and its figures are reported as unattributed; an op left unmatched gets
  zero figures. Optimised ops that issue no command are the ops Vela left on the CPU.

Units and fixed point
---------------------
Cycle figures (``op_cycles``, ``npu_cycles``, ``*_ac``) are held as int64 counts of
``1/scale`` cycle, ``scale`` the smallest power of two (at most 2**16) that represents every
value Vela wrote exactly: 1 for the default core, 2 for the legacy core's half cycles
(``16.5``). Every split is done on these integers (largest remainder), so attributed figures add
up to Vela's totals exactly. Public DataFrames show cycles as float64 ``value / scale``: multiples
of ``1/scale``, exact in binary floating point, so their sums equal Vela's totals with ``==``
(as long as totals stay below 2**52 / scale). ``mac_count`` is an int64 count.

Attribution
-----------
:class:`VelaAttribution` runs trace-join (:func:`toolkit.trace.trace_join`) once per metric on
a frame of cost units (scheduled ops, or groups of them) whose "duration" is the unit's figure in
fixed point, and shows the results with Vela's column names. Policies: trace-join's ``"macs"``
(default; a unit's figures are split over the source ops of its compiled op in proportion to
their MACs, equal shares when all are 0), ``"bytes"`` (output bytes) and ``"equal"``, and
``"vela"`` (no split: each scheduled op goes to the one source op Vela names for it, so grouped
sub-ops keep Vela's zero figures).
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.errors import VelaError
from toolkit.formats.vela_db import VelaDebugDB
from toolkit.trace.join.split import split_grouped

if TYPE_CHECKING:
    from toolkit.trace import Attribution

__all__ = [
    "POLICIES",
    "ScheduledEstimates",
    "VelaAttribution",
    "estimate_attribution",
    "join_units",
    "match_per_layer_rows",
    "ordered_queue",
    "read_estimates",
    "split_int",
]

#: Split policies: trace-join's (``macs``, ``bytes``, ``equal``) and ``vela``.
POLICIES: tuple[str, ...] = ("macs", "bytes", "equal", "vela")

_I64 = np.int64
_MAX_SCALE_BITS = 16
_LEGACY_METRICS = ("op_cycles", "npu_cycles", "mac_count", "sram_ac", "dram_ac",
                   "on_chip_flash_ac", "off_chip_flash_ac")
_INT_METRICS = frozenset({"mac_count"})
_SCHEDULE_ID_COLUMNS = ["scheduled_id", "optimised_id", "group_id", "vela_source_id",
                        "operator", "name", "backend"]


def _snake(name: str) -> str:
    """Return a perf column name in snake_case (``OffChipFlash_ac`` -> ``off_chip_flash_ac``)."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").lower()


def _int_column(df: pd.DataFrame, col: str) -> np.ndarray:
    """Return column ``col`` as int64 (empty or missing cells count 0)."""
    s = df[col]
    if s.dtype.kind in "iu":
        return s.to_numpy(dtype=_I64)
    return pd.to_numeric(s.replace("", "0"), errors="coerce").fillna(0).to_numpy(dtype=_I64)


# ---------------------------------------------------------------------------------------------
# The queue in execution order


def ordered_queue(db: VelaDebugDB) -> pd.DataFrame:
    """Return Vela's ``queue`` table in execution order, one row per queue row.

    Returns:
        columns ``command_id`` (int64, position in execution order: command streams by id, then
        byte offset), ``cmdstream_id`` (int64), ``offset`` (int64, byte offset of the command
        in its stream), ``optimised_id`` (int64) and ``scheduled_id`` (int64; -1 for the
        legacy core, which has no scheduled ids).
    """
    q = db.table("queue")
    missing = {"offset", "cmdstream_id", "optimised_id"} - set(q.columns)
    if missing:
        raise VelaError(f"the queue table lacks column(s) {sorted(missing)}", where=db.path,
                        fix="re-run vela --enable-debug-db")
    n = len(q)
    df = pd.DataFrame({
        "cmdstream_id": _int_column(q, "cmdstream_id") if n else np.zeros(0, _I64),
        "offset": _int_column(q, "offset") if n else np.zeros(0, _I64),
        "optimised_id": _int_column(q, "optimised_id") if n else np.zeros(0, _I64),
        "scheduled_id": (_int_column(q, "scheduled_id") if n and "scheduled_id" in q.columns
                         else np.full(n, -1, _I64)),
    })
    df = df.sort_values(["cmdstream_id", "offset"], kind="stable").reset_index(drop=True)
    df.insert(0, "command_id", np.arange(len(df), dtype=_I64))
    return df


# ---------------------------------------------------------------------------------------------
# Per scheduled op estimates


@dataclass(frozen=True)
class ScheduledEstimates:
    """Vela's estimates, one row per scheduled op, figures in integer fixed point.

    Attributes:
        ops: columns ``scheduled_id`` (int64; default core: the ``perf`` id; legacy core: the
            row of the per-layer CSV, then ops without a CSV row numbered on), ``optimised_id``
            (int64, -1 when unmatched), ``group_id`` (int64, scheduled id of the primary op of
            its group; its own id when not grouped), ``vela_source_id`` (int64, Vela's source
            id, -1 unknown), ``operator`` (str, Vela's op type), ``name`` (str, Vela's name of
            the op; ``""`` when Vela gives none), ``backend`` (``"npu"`` or ``"cpu"``), then
            one int64 column per metric (cycle metrics in units of ``1/scale`` cycle).
        metrics: the metric columns, in order.
        scale: fixed-point scale of the cycle metrics (see the module docstring).
        core: ``"default"`` or ``"legacy"``.
    """

    ops: pd.DataFrame
    metrics: tuple[str, ...]
    scale: int
    core: str

    @property
    def cycle_metrics(self) -> frozenset[str]:
        """The metrics counted in cycles (every metric but ``mac_count``)."""
        return frozenset(m for m in self.metrics if m not in _INT_METRICS)

    def frame(self) -> pd.DataFrame:
        """Return :attr:`ops` with cycle metrics as float64 cycles (``value / scale``)."""
        return _public(self.ops, self.metrics, self.cycle_metrics, self.scale)

    def totals(self) -> pd.Series:
        """Return the total of each metric over every scheduled op (cycles as float64)."""
        return _public_totals(self.ops, self.metrics, self.cycle_metrics, self.scale)

    def per_command(self, queue: pd.DataFrame) -> pd.DataFrame:
        """Split each scheduled op's figures over its queue rows (see :func:`ordered_queue`).

        The key of a queue row is its ``scheduled_id`` (default core) or ``optimised_id``
        (legacy core). Returns one row per queue row: ``command_id``, ``key`` (int64), then
        the metric columns in fixed point (int64; equal integer shares, largest remainder,
        earlier rows first). Rows whose key has no estimate get 0.
        """
        key_col = "scheduled_id" if self.core == "default" else "optimised_id"
        keys = queue[key_col].to_numpy(dtype=_I64)
        out = pd.DataFrame({"command_id": queue["command_id"].to_numpy(dtype=_I64),
                            "key": keys})
        uniq, unit = np.unique(keys, return_inverse=True)
        ops = self.ops[self.ops[key_col] >= 0].drop_duplicates(key_col)
        pos = pd.Index(ops[key_col]).get_indexer(uniq)
        ones = np.ones(len(keys), dtype=_I64)
        for m in self.metrics:
            vals = ops[m].to_numpy(dtype=_I64)
            tot = (np.where(pos >= 0, vals[np.maximum(pos, 0)], 0) if len(vals)
                   else np.zeros(len(uniq), _I64))
            out[m] = split_int(tot, unit, ones)
        return out


def _public(df: pd.DataFrame, metrics: Iterable[str], float_metrics: Iterable[str],
            scale: int) -> pd.DataFrame:
    """Return a copy of ``df`` with ``float_metrics`` divided by ``scale`` as float64."""
    out = df.copy()
    fm = set(float_metrics)
    for m in metrics:
        if m in fm:
            out[m] = out[m].to_numpy(dtype=_I64) / float(scale)
    return out


def _public_totals(df: pd.DataFrame, metrics: Sequence[str], float_metrics: Iterable[str],
                   scale: int) -> pd.Series:
    """Return the exact column sums of ``metrics`` (float metrics divided by ``scale``)."""
    fm = set(float_metrics)
    vals: dict[str, Any] = {}
    for m in metrics:
        t = sum(int(v) for v in df[m].tolist())
        vals[m] = t / scale if m in fm else t
    return pd.Series(vals, dtype=object)


def _scale_of(values: Iterable[np.ndarray], where: str | None) -> int:
    """Return the smallest ``2**k`` (k <= 16) for which every value times it is an integer."""
    arrays = [np.asarray(v, dtype=np.float64) for v in values]
    for k in range(_MAX_SCALE_BITS + 1):
        s = float(2**k)
        if all(np.array_equal(a * s, np.round(a * s)) for a in arrays):
            return 2**k
    warnings.warn(f"{where or 'Vela estimates'}: cycle figures finer than 1/65536 cycle are "
                  "rounded to that resolution", stacklevel=3)
    return 2**_MAX_SCALE_BITS


def _to_fixed(values: np.ndarray, scale: int) -> np.ndarray:
    """Return float ``values`` times ``scale``, rounded half to even, as int64."""
    return np.round(np.asarray(values, dtype=np.float64) * scale).astype(_I64)


def _group_roots(ids: np.ndarray, group: pd.DataFrame | None) -> np.ndarray:
    """Return the primary scheduled id of each id in ``ids`` (following the ``group`` table)."""
    if group is None or not len(group) or not {"id", "group_id"} <= set(group.columns):
        return ids.copy()
    parent = dict(zip(_int_column(group, "id").tolist(), _int_column(group, "group_id").tolist()))
    out = []
    for i in ids.tolist():
        seen = {i}
        while i in parent and parent[i] not in seen:
            i = parent[i]
            seen.add(i)
        out.append(i)
    return np.array(out, dtype=_I64)


def _default_core_estimates(db: VelaDebugDB) -> ScheduledEstimates:
    """Return the estimates of a default-core database (its ``perf`` table)."""
    if "perf" not in db.tables:
        raise VelaError("the default core's debug database has no 'perf' table", where=db.path,
                        fix="re-run vela 5.x with --enable-debug-db")
    perf = db.tables["perf"]
    need = {"id", "source_id", "optimised_id", "operator", "name", "op_cycles", "npu_cycles",
            "mac_count"}
    missing = need - set(perf.columns)
    if missing:
        raise VelaError(f"the perf table lacks column(s) {sorted(missing)}", where=db.path,
                        fix="re-run vela 5.x with --enable-debug-db")
    ac_cols = [c for c in perf.columns if c.endswith("_ac")]
    metric_src = ["op_cycles", "npu_cycles", "mac_count", *ac_cols]
    metrics = tuple(dict.fromkeys(_snake(c) for c in metric_src))
    ids = _int_column(perf, "id") if len(perf) else np.zeros(0, _I64)
    operator = perf["operator"].astype(str).to_numpy()
    ops = pd.DataFrame({
        "scheduled_id": ids,
        "optimised_id": _int_column(perf, "optimised_id") if len(perf) else ids,
        "group_id": _group_roots(ids, db.tables.get("group")),
        "vela_source_id": _int_column(perf, "source_id") if len(perf) else ids,
        "operator": pd.Series(operator, dtype="str"),
        "name": pd.Series(perf["name"].astype(str).to_numpy(), dtype="str"),
        "backend": pd.Series(np.where(operator == "Passthrough", "cpu", "npu"), dtype="str"),
    })
    raw = {m: (_int_column(perf, c) if len(perf) else np.zeros(0, _I64))
           for m, c in zip(metrics, metric_src)}
    for m in metrics:
        ops[m] = raw[m]
    return ScheduledEstimates(ops, metrics, 1, "default")


def match_per_layer_rows(csv_operators: Sequence[str], op_operators: Sequence[str]
                         ) -> np.ndarray:
    """Match per-layer CSV rows to optimised ops in execution order, on their operator types.

    Args:
        csv_operators: ``nng_operator`` of each CSV row, in file order.
        op_operators: ``operator`` of each optimised op issuing commands, in execution order.

    Returns:
        int64 array, one entry per CSV row: the index into ``op_operators`` of its op, or -1.
        The pairs are those of the longest common subsequence of the two type sequences
        (order kept on both sides), so equal sequences match row *i* to op *i*.
    """
    out = np.full(len(csv_operators), -1, dtype=_I64)
    sm = difflib.SequenceMatcher(None, list(csv_operators), list(op_operators),
                                 autojunk=False)
    for a, b, size in sm.get_matching_blocks():
        out[a:a + size] = np.arange(b, b + size, dtype=_I64)
    return out


def _legacy_estimates(db: VelaDebugDB, per_layer: pd.DataFrame | None) -> ScheduledEstimates:
    """Return the estimates of a legacy-core database, from its per-layer CSV."""
    optimised = db.table("optimised")
    queue = ordered_queue(db)
    opt_ids = _int_column(optimised, "id") if len(optimised) else np.zeros(0, _I64)
    opt_src = _int_column(optimised, "source_id") if len(optimised) else np.zeros(0, _I64)
    opt_op = optimised["operator"].astype(str).to_numpy() if len(optimised) else np.array([])
    by_id = {int(i): k for k, i in enumerate(opt_ids.tolist())}
    npu_ids = list(dict.fromkeys(queue["optimised_id"].tolist()))  # first command order
    npu_ops = [str(opt_op[by_id[i]]) if i in by_id else "" for i in npu_ids]

    csv = per_layer if per_layer is not None else pd.DataFrame()
    if len(csv):
        for col in ("nng_operator", "name", "op_cycles"):
            if col not in csv.columns:
                raise VelaError(f"the per-layer CSV has no '{col}' column",
                                fix="pass the <stem>_per-layer.csv written by vela "
                                "--verbose-performance")
        metrics = tuple(m for m in ("op_cycles", "npu_cycles", "mac_count")
                        if m in csv.columns) + tuple(c for c in csv.columns if c.endswith("_ac"))
        match = match_per_layer_rows(csv["nng_operator"].astype(str).tolist(), npu_ops)
    else:
        metrics = _LEGACY_METRICS
        match = np.zeros(0, _I64)
    cycle_cols = [m for m in metrics if m not in _INT_METRICS]
    scale = _scale_of([csv[m].to_numpy() for m in cycle_cols] if len(csv) else [],
                      db.path) if len(csv) else 1

    rows: list[dict[str, Any]] = []
    for r, k in enumerate(match.tolist()):
        oid = npu_ids[k] if k >= 0 else -1
        row = {"scheduled_id": r, "optimised_id": oid,
               "vela_source_id": int(opt_src[by_id[oid]]) if oid in by_id else -1,
               "operator": str(csv["nng_operator"].iloc[r]), "name": str(csv["name"].iloc[r]),
               "backend": "npu"}
        for m in metrics:
            v = csv[m].iloc[r]
            row[m] = int(v) if m in _INT_METRICS else int(_to_fixed(np.array([v]), scale)[0])
        rows.append(row)
    matched = {npu_ids[k] for k in match.tolist() if k >= 0}
    extra = [(i, "npu") for i in npu_ids if i not in matched]
    queued = set(npu_ids)
    extra += [(int(i), "cpu") for i in opt_ids.tolist() if i not in queued]
    for oid, backend in extra:
        row = {"scheduled_id": len(rows), "optimised_id": oid,
               "vela_source_id": int(opt_src[by_id[oid]]) if oid in by_id else -1,
               "operator": str(opt_op[by_id[oid]]) if oid in by_id else "", "name": "",
               "backend": backend}
        row.update({m: 0 for m in metrics})
        rows.append(row)
    ops = pd.DataFrame(rows, columns=[c for c in _SCHEDULE_ID_COLUMNS if c != "group_id"]
                       + list(metrics))
    ops.insert(2, "group_id", ops["scheduled_id"])
    ops = ops.astype({c: _I64 for c in ("scheduled_id", "optimised_id", "group_id",
                                        "vela_source_id", *metrics)})
    ops = ops.astype({c: "str" for c in ("operator", "name", "backend")})
    return ScheduledEstimates(ops, metrics, scale, "legacy")


def read_estimates(db: VelaDebugDB, per_layer: pd.DataFrame | None = None
                   ) -> ScheduledEstimates:
    """Return Vela's estimates per scheduled op (see :class:`ScheduledEstimates`).

    Default core: from the ``perf`` table (``per_layer`` is not needed). Legacy core: from
    ``per_layer`` (:func:`toolkit.formats.vela_csv.read_per_layer_csv`), matched to optimised
    ops as the module docstring says; without it every op gets zero figures.

    Raises:
        VelaError: a table or column the estimates need is missing.
    """
    if db.core == "default":
        return _default_core_estimates(db)
    return _legacy_estimates(db, per_layer)


# ---------------------------------------------------------------------------------------------
# Exact integer splitting


def split_int(totals: np.ndarray, unit: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Split integer ``totals[u]`` over the rows of each unit ``u`` in proportion to weights:
    :func:`toolkit.trace.join.split.split_grouped`, the one exact largest-remainder splitter."""
    return split_grouped(totals, unit, weights)


# ---------------------------------------------------------------------------------------------
# Attribution (through trace-join)


def join_units(frame: pd.DataFrame, provenance: Any, policy: str, key: str, *,
               overlaps: str = "keep") -> Attribution:
    """Run trace-join on an event frame whose events are cost units.

    Args:
        frame: events (``name``, ``start_ns``, ``dur_ns``, ``problem``, optional ``run``) with
            the key column of ``key``: ``arg_command_id`` (``command_id``),
            ``arg_optimised_id`` (``op_index``) or ``arg_op_index`` (``source_op_index``).
        provenance: the :class:`~toolkit.vela.provenance.VelaProvenance`.
        policy: :data:`POLICIES`; ``vela`` joins on ``source_op_index`` whatever ``key``.
        key: the trace-join key kind.
        overlaps: trace-join's overlap mode (``keep``: every event counts; ``leaves``).

    Returns:
        trace-join's :class:`~toolkit.trace.Attribution`.
    """
    from toolkit.trace import read_trace, trace_join

    if policy not in POLICIES:
        raise VelaError(f"unknown split policy {policy!r}", fix=f"use one of {POLICIES}")
    if policy == "vela":
        key, policy = "source_op_index", "equal"
    return trace_join(read_trace(frame), provenance, policy=policy, key=key, overlaps=overlaps)


def _convert(values: np.ndarray, metric: str, float_metrics: frozenset[str], scale: int
             ) -> np.ndarray:
    """Return fixed-point ``values`` of ``metric`` as shown: float64 cycles or int64."""
    v = np.asarray(values, dtype=_I64)
    return v / float(scale) if metric in float_metrics else v


class VelaAttribution:
    """Vela's estimates attributed to source ops and layers, one trace-join per metric.

    Each cost unit (a scheduled op, or a group of them) is an event whose duration is the
    unit's figure in fixed point; :func:`toolkit.trace.trace_join` splits it over the source ops
    of its compiled op (policy ``macs``, ``bytes``, ``equal``) or gives it to its own source op
    (``vela``), exactly. This class shows those joins with Vela's column names: trace-join's
    ``total_ns`` becomes one column per metric, cycles as float64 cycles (multiples of
    ``1/scale``), ``mac_count`` int64. ``share`` is the share of :attr:`metric` (of all units,
    attributed or not).

    Attributes:
        metrics: the figures (``op_cycles``, ``npu_cycles``, ``mac_count``, ``<memory>_ac``).
        metric: the figure ``share`` refers to.
        policy: the split policy.
        scale: fixed-point scale of the cycle figures.
        float_metrics: the figures shown as float64 cycles.
        units: the cost units joined: ``unit`` (row = trace-join ``event_id``),
            ``scheduled_id``, ``optimised_id``, ``source_id`` (own source op, -1 unknown),
            ``operator``, ``name``, ``reason`` and the metrics (int64 fixed point).
    """

    def __init__(self, units: pd.DataFrame, provenance: Any, metrics: Sequence[str], *,
                 metric: str = "op_cycles", policy: str = "macs", scale: int = 1,
                 float_metrics: Iterable[str] = ()) -> None:
        if metric not in metrics:
            raise VelaError(f"unknown metric {metric!r}", fix=f"use one of {', '.join(metrics)}")
        self.metrics = tuple(metrics)
        self.metric = metric
        self.policy = policy
        self.scale = int(scale)
        self.float_metrics = frozenset(float_metrics)
        self.units = units.reset_index(drop=True)
        self.provenance = provenance
        key = "op_index"
        start = np.zeros(len(self.units), dtype=_I64)
        self._joins: dict[str, Attribution] = {}
        for m in self.metrics:
            dur = self.units[m].to_numpy(dtype=_I64)
            if len(dur):
                start[1:] = np.cumsum(dur)[:-1]
            frame = pd.DataFrame({
                "name": self.units["name"].astype(str).to_numpy(),
                "start_ns": start.copy(), "dur_ns": dur,
                "arg_optimised_id": self.units["optimised_id"].to_numpy(dtype=_I64),
                "arg_op_index": self.units["source_id"].to_numpy(dtype=_I64),
                "run": np.zeros(len(dur), dtype=_I64),
                "problem": self.units["reason"].astype(str).to_numpy(),
            })
            self._joins[m] = join_units(frame, provenance, policy, key)

    def join(self, metric: str | None = None) -> Attribution:
        """Return trace-join's :class:`~toolkit.trace.Attribution` of one metric (its
        ``*_ns`` columns hold the metric in fixed point: 1/scale cycle per "ns")."""
        return self._joins[metric or self.metric]

    def _metric_columns(self, view: str, out: pd.DataFrame, value: str = "total_ns"
                        ) -> pd.DataFrame:
        for m in self.metrics:
            out[m] = _convert(getattr(self._joins[m], view)()[value].to_numpy(), m,
                              self.float_metrics, self.scale)
        return out

    def _backends(self) -> dict[int, str]:
        status = self.provenance.source_status()
        return dict(zip(status["source_id"].tolist(), status["backend"].tolist()))

    def by_source_op(self) -> pd.DataFrame:
        """Return one row per source op of the input model (every op, NPU or CPU), by
        ``source_id`` (= operator index).

        Columns: ``source_id``, ``op_index`` (int64), ``operator``, ``name``, ``layers``
        (str, ``;``-joined), ``backend`` (``"npu"``, ``"cpu"``, ``"unknown"`` when Vela does not
        list the op), ``removed`` (str: why Vela removed the op, else ``""``), ``units``
        (int64, cost units sharing into it), the metrics and ``share`` (float64).
        """
        base = self._joins[self.metric].by_source_op()
        out = base[["source_id", "op_index", "operator", "name", "layers", "removed"]].copy()
        backend = self._backends()
        out.insert(5, "backend", pd.Series([backend.get(s, "unknown")
                                            for s in out["source_id"].tolist()], dtype="str"))
        out["units"] = base["events"].to_numpy(dtype=_I64)
        out = self._metric_columns("by_source_op", out)
        out["share"] = base["share"].to_numpy(dtype=np.float64)
        return out

    def by_layer(self) -> pd.DataFrame:
        """Return one row per original layer, in the order of the provenance's ``layers()``.

        A source op with several layers (``a;b`` names) splits its figures equally between
        them, so each metric sums to the same total as in :meth:`by_source_op`. Columns:
        ``layer`` (str), ``backend`` (``"npu"``, ``"cpu"`` or ``"npu+cpu"``), ``units``
        (int64), the metrics and ``share``.
        """
        base = self._joins[self.metric].by_layer()
        seen: dict[str, set[str]] = {}
        backend = self._backends()
        src = self._joins[self.metric].by_source_op()
        for s, layers in zip(src["source_id"].tolist(), src["layers"].tolist()):
            for layer in (x for x in str(layers).split(";") if x):
                seen.setdefault(layer, set()).add(backend.get(s, "unknown"))
        order = {"npu": 0, "cpu": 1}
        out = base[["layer"]].copy()
        out["backend"] = pd.Series(
            ["+".join(sorted(seen.get(x, {"unknown"}), key=lambda b: order.get(b, 2)))
             for x in out["layer"].tolist()], dtype="str")
        out["units"] = base["events"].to_numpy(dtype=_I64)
        out = self._metric_columns("by_layer", out)
        out["share"] = base["share"].to_numpy(dtype=np.float64)
        return out

    def by_op(self) -> pd.DataFrame:
        """Return one row per optimised op of Vela's ``optimised`` table.

        Columns: ``optimised_id`` (int64), ``operator``, ``name``, ``backend`` (str),
        ``source_ids`` (object: tuple of operator indices), ``units``, the metrics and
        ``share``.
        """
        base = self._joins[self.metric].by_op()
        out = base[["optimised_id", "operator", "name", "backend", "source_ids"]].copy()
        out["units"] = base["events"].to_numpy(dtype=_I64)
        out = self._metric_columns("by_op", out)
        out["share"] = base["share"].to_numpy(dtype=np.float64)
        return out

    def unattributed(self) -> pd.DataFrame:
        """Return the cost units whose figures reach no source op (empty when all do).

        Columns: ``unit``, ``scheduled_id``, ``optimised_id`` (int64), ``operator``,
        ``name``, ``reason`` (str), then the metrics.
        """
        un = self._joins[self.metric].unattributed()
        rows = un["event_id"].to_numpy(dtype=np.intp)
        u = self.units.iloc[rows]
        out = pd.DataFrame({
            "unit": u["unit"].to_numpy(dtype=_I64),
            "scheduled_id": u["scheduled_id"].to_numpy(dtype=_I64),
            "optimised_id": u["optimised_id"].to_numpy(dtype=_I64),
            "operator": pd.Series(u["operator"].astype(str).to_numpy(), dtype="str"),
            "name": pd.Series(u["name"].astype(str).to_numpy(), dtype="str"),
            "reason": pd.Series(un["reason"].astype(str).to_numpy(), dtype="str"),
        })
        for m in self.metrics:
            out[m] = _convert(u[m].to_numpy(dtype=_I64), m, self.float_metrics, self.scale)
        return out

    def events(self) -> pd.DataFrame:
        """Return the split in long form: one row per (unit, compiled op, source op, layer).

        Columns: ``unit``, ``scheduled_id``, ``optimised_id``, ``source_id`` (int64),
        ``layer`` (categorical str), then the metrics (the pieces of one unit sum to its
        figures).
        """
        base = self._joins[self.metric].events()
        rows = base["event_id"].to_numpy(dtype=np.intp)
        out = pd.DataFrame({
            "unit": self.units["unit"].to_numpy(dtype=_I64)[rows],
            "scheduled_id": self.units["scheduled_id"].to_numpy(dtype=_I64)[rows],
            "optimised_id": base["optimised_id"].to_numpy(dtype=_I64),
            "source_id": base["source_id"].to_numpy(dtype=_I64),
            "layer": base["layer"],
        })
        for m in self.metrics:
            ev = self._joins[m].events()
            if not np.array_equal(ev["event_id"].to_numpy(), base["event_id"].to_numpy()):
                raise VelaError(
                    f"the joins of {m} and {self.metric} split different units",
                    fix=(
                        "this is a bug in the estimate joins: report it with the model and the "
                        "Vela output"
                    ),
                )
            out[m] = _convert(ev["attributed_ns"].to_numpy(), m, self.float_metrics, self.scale)
        return out

    def totals(self) -> pd.Series:
        """Return the total of each metric over all units, attributed or not (cycles as
        float64, counts as int)."""
        return pd.Series({m: (j.total_ns / self.scale if m in self.float_metrics else
                              j.total_ns) for m, j in self._joins.items()}, dtype=object)

    def check(self) -> None:
        """Verify exact conservation of every metric (trace-join's ``Attribution.check``)."""
        for j in self._joins.values():
            j.check()

    def __repr__(self) -> str:
        j = self._joins[self.metric]
        return (f"<VelaAttribution {self.metric} policy={self.policy}: {len(self.units)} units, "
                f"{len(j.unattributed())} unattributed>")


def estimate_attribution(estimates: ScheduledEstimates, provenance: Any, *,
                         metric: str = "op_cycles", policy: str = "macs") -> VelaAttribution:
    """Attribute Vela's estimates to the source ops of the input model.

    Cost units are groups of scheduled ops (a sub-op folded into its group's primary op, its
    figures added to the primary's) for every policy but ``vela``, where each scheduled op is
    its own unit and goes to its own source op. A unit reaches no source op when the
    per-layer CSV row was not matched to an optimised op, or its op has no origin; such units
    are listed by ``unattributed()``.

    Returns:
        a :class:`VelaAttribution` over ``estimates.metrics``.
    """
    if policy not in POLICIES:
        raise VelaError(f"unknown split policy {policy!r}", fix=f"use one of {POLICIES}")
    sched = provenance.scheduled()
    ops = estimates.ops.assign(source_id=sched["source_id"].to_numpy(dtype=_I64))
    metrics = list(estimates.metrics)
    if policy == "vela":
        units = ops.copy()
        units["reason"] = np.where(units["source_id"] < 0,
                                   "no source op for this scheduled op", "")
    else:
        primary = ops.drop_duplicates("scheduled_id").set_index("scheduled_id")
        root = ops["group_id"].to_numpy(dtype=_I64)
        root = np.where(np.isin(root, primary.index.to_numpy()), root,
                        ops["scheduled_id"].to_numpy(dtype=_I64))
        agg = ops.assign(_root=root).groupby("_root", sort=False)[metrics].sum()
        head = primary.loc[agg.index, ["optimised_id", "source_id", "operator", "name"]]
        units = pd.concat([head, agg], axis=1).reset_index(names="scheduled_id")
        units["reason"] = np.where(units["optimised_id"] < 0,
                                   "per-layer row not matched to an optimised op", "")
    units["unit"] = np.arange(len(units), dtype=_I64)
    units = units[["unit", "scheduled_id", "optimised_id", "source_id", "operator", "name",
                   "reason", *metrics]].reset_index(drop=True)
    return VelaAttribution(units, provenance, metrics, metric=metric, policy=policy,
                           scale=estimates.scale, float_metrics=estimates.cycle_metrics)
