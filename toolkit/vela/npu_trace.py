"""NPU traces: join events that carry the command queue read position with Vela's queue.

An Ethos-U NPU reads its command stream word by word; its ``QREAD`` register holds the read
position in 32-bit words, so ``4 * qread`` is a byte offset comparable with the ``offset`` column
of Vela's ``queue`` table (one row per block of commands of one scheduled op; offsets restart in
every command stream).

Event -> queue rows (:func:`join_npu_trace`). An event is a row of a trace frame
(:func:`toolkit.formats.chrome_trace.read_chrome_trace`: ``dur_ns`` and ``arg_<key>`` columns):

- its command stream is ``args.cmdstream_id``; without it, the only stream of the database
  (an event of a database with several streams and no id is unattributed);
- a *range* event (``args.qread`` and ``args.qread_end``) covers the queue rows of that stream
  whose offsets lie in ``[4 * qread, 4 * qread_end)``; when none does, it is treated as a point
  event at ``qread``;
- a *point* event (``args.qread`` only) maps to one queue row: with ``point="at"`` (default)
  the row with the greatest offset ``<= 4 * qread`` (the block holding the read position);
  with ``point="before"`` the greatest offset ``< 4 * qread`` (for samplers that record the
  position just after the block they time, so a boundary belongs to the block before it);
- an event without ``qread``, before the first row of its stream, with an unknown stream or
  with a ``problem`` is unattributed (a row of ``unattributed()``, never dropped).

An event covering several queue rows splits its ``dur_ns`` over them in proportion to Vela's
``op_cycles`` estimates of the rows (equal shares when all are 0). A queue row counts for the
primary optimised op of its group (sub-ops folded, as in :class:`VelaProvenance`), whose
origins share it by the policy; every split is in integer nanoseconds, exact.

:func:`make_npu_trace` synthesises such a trace from a real debug database (one event per queue
row, back to back, durations from Vela's estimates or given cycles). It is synthetic: for tests,
notebooks and demos, not a measurement.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from toolkit.errors import VelaError
from toolkit.formats.vela_db import VelaDebugDB
from toolkit.vela.estimates import (
    _int_column,
    join_units,
    ordered_queue,
    read_estimates,
    split_int,
)
from toolkit.vela.provenance import VelaProvenance

if TYPE_CHECKING:
    from toolkit.trace import Attribution

__all__ = ["join_npu_trace", "make_npu_trace", "npu_trace_frame", "POINT_RULES"]

#: How a point event (``qread`` only) picks its queue row.
POINT_RULES: tuple[str, ...] = ("at", "before")

_I64 = np.int64


def _arg(trace: pd.DataFrame, key: str) -> pd.Series | None:
    """Return the ``arg_<key>`` (or ``<key>``) column of ``trace``, None when absent."""
    for col in (f"arg_{key}", key):
        if col in trace.columns:
            return trace[col]
    return None


def _ints(values: pd.Series | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (int64 values, valid mask): valid where the cell is a non-negative integer."""
    if values is None:
        return np.zeros(n, _I64), np.zeros(n, bool)
    num = pd.to_numeric(values.astype(object).where(values.notna(), None), errors="coerce")
    arr = num.to_numpy(dtype=np.float64)
    ok = np.isfinite(arr) & (arr >= 0) & (arr == np.floor(arr)) & (arr < 2.0**62)
    return np.where(ok, arr, 0).astype(_I64), ok


def _read(trace: pd.DataFrame | str | os.PathLike[str]) -> pd.DataFrame:
    """Return ``trace`` as a frame (a path is read with :func:`read_chrome_trace`)."""
    if isinstance(trace, pd.DataFrame):
        return trace
    from toolkit.formats.chrome_trace import read_chrome_trace

    return read_chrome_trace(Path(trace))


def _map_events(trace: pd.DataFrame, queue: pd.DataFrame, point: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map events to queue rows (vectorised over events).

    Returns:
        (event row, queue row position) pairs as two int arrays, and per event the reason it
        maps to nothing (object array of str, ``""`` when it maps).
    """
    n = len(trace)
    qs, qs_ok = _ints(_arg(trace, "qread"), n)
    qe, qe_ok = _ints(_arg(trace, "qread_end"), n)
    cs_col = _arg(trace, "cmdstream_id")
    cs, cs_ok = _ints(cs_col, n)
    streams = np.array(sorted(set(queue["cmdstream_id"].tolist())), dtype=_I64)
    if len(streams) == 1:  # an event without a stream id is in the only stream
        cs = np.where(cs_ok, cs, streams[0]).astype(_I64)
        cs_ok = np.ones(n, bool)
    reason = np.full(n, "", dtype=object)
    if "problem" in trace.columns:
        problem = trace["problem"].astype(object).where(trace["problem"].notna(), "")
        problem = problem.astype(str).to_numpy(dtype=object)
        bad = ~np.isin(problem, ["", "nan", "None"])
        reason[bad] = ["trace problem: " + p for p in problem[bad].tolist()]

    def give(mask: np.ndarray, text: str | np.ndarray) -> None:
        free = mask & (reason == "")
        reason[free] = text if isinstance(text, str) else text[free]

    give(~qs_ok, "event has no args.qread")
    no_id = (np.ones(n, bool) if cs_col is None
             else cs_col.isna().to_numpy(dtype=bool) & ~cs_ok)
    give(~cs_ok & no_id, "several command streams: the event needs args.cmdstream_id")
    give(~cs_ok, "bad args.cmdstream_id")
    give(~np.isin(cs, streams), np.array([f"unknown command stream {c}" for c in cs.tolist()],
                                         dtype=object))
    ev_out: list[np.ndarray] = []
    row_out: list[np.ndarray] = []
    side: Literal["left", "right"] = "right" if point == "at" else "left"
    offsets = queue["offset"].to_numpy(dtype=_I64)
    stream_of = queue["cmdstream_id"].to_numpy(dtype=_I64)
    for s in streams.tolist():
        rows = np.flatnonzero(stream_of == s)  # queue is sorted by offset within a stream
        offs = offsets[rows]
        ev = np.flatnonzero((reason == "") & (cs == s))
        if not len(ev):
            continue
        lo = np.searchsorted(offs, 4 * qs[ev], side="left")
        hi = np.searchsorted(offs, 4 * qe[ev], side="left")
        ranged = qe_ok[ev] & (qe[ev] > qs[ev]) & (hi > lo)
        pt = np.searchsorted(offs, 4 * qs[ev], side=side) - 1
        count = (hi - lo)[ranged]
        start = np.repeat(lo[ranged], count)
        within = np.arange(len(start)) - np.repeat(np.cumsum(count) - count, count)
        ev_out.append(np.repeat(ev[ranged], count))
        row_out.append(rows[start + within])
        single = ~ranged & (pt >= 0)
        ev_out.append(ev[single])
        row_out.append(rows[pt[single]])
        reason[ev[~ranged & (pt < 0)]] = "qread lies before the first command of its stream"
    if ev_out:
        return (np.concatenate(ev_out).astype(np.intp),
                np.concatenate(row_out).astype(np.intp), reason)
    return np.zeros(0, np.intp), np.zeros(0, np.intp), reason


def npu_trace_frame(trace: pd.DataFrame | str | os.PathLike[str], provenance: VelaProvenance,
                    *, point: str = "at") -> pd.DataFrame:
    """Return ``trace`` with each event keyed by the Vela command it covers.

    Every column of ``trace`` is kept, plus ``arg_command_id`` (int64; None for an event that
    maps to no queue row, whose ``problem`` then says why), ``arg_op_index`` (the operator
    index of the command's own scheduled op's source op, -1 unknown) and ``arg_event`` (int64,
    the event's row in ``trace``). An event covering k > 1 queue rows becomes k consecutive
    pieces (its ``dur_ns`` split by Vela's ``op_cycles`` of the rows, exactly; ``start_ns``
    advanced piece by piece). See the module docstring for the mapping.
    """
    if point not in POINT_RULES:
        raise VelaError(f"unknown point rule {point!r}", fix=f"use one of {POINT_RULES}")
    trace = _read(trace).reset_index(drop=True)
    for col in ("start_ns", "dur_ns"):
        if col not in trace.columns:
            raise VelaError(f"the trace has no {col} column",
                            fix="read Chrome traces with toolkit.formats.chrome_trace")
    queue = provenance.queue()
    ev, row, reason = _map_events(trace, queue, point)
    order = np.lexsort((row, ev))  # pieces of one event together, in queue order
    ev, row = ev[order], row[order]
    dur = pd.to_numeric(trace["dur_ns"], errors="coerce").fillna(0).to_numpy(dtype=_I64)
    uniq_ev, local = np.unique(ev, return_inverse=True)
    scale = provenance.estimates.scale
    weights = (np.round(queue["op_cycles"].to_numpy(dtype=np.float64)[row] * scale).astype(_I64)
               if "op_cycles" in queue.columns else np.zeros(len(row), _I64))
    share = split_int(dur[uniq_ev], local, weights)
    # start of each piece: the event's start plus the shares of the pieces before it
    before = np.zeros(len(share), dtype=_I64)
    if len(share):
        csum = np.cumsum(share)
        first = np.searchsorted(local, np.arange(len(uniq_ev)))
        before = csum - share - (csum - share)[first][local]
    start = pd.to_numeric(trace["start_ns"], errors="coerce").fillna(0).to_numpy(dtype=_I64)
    own = provenance.scheduled_sources().drop_duplicates("scheduled_id")
    sid = queue["scheduled_id"].to_numpy(dtype=_I64)[row]
    at = pd.Index(own["scheduled_id"]).get_indexer(sid)
    own_src = np.where(at >= 0, own["source_id"].to_numpy(dtype=_I64)[np.maximum(at, 0)]
                       if len(own) else -1, -1).astype(_I64)

    lost = np.flatnonzero(reason != "")
    pieces = trace.iloc[ev].copy()
    pieces["start_ns"] = start[ev] + before
    pieces["dur_ns"] = share
    pieces["arg_command_id"] = pd.array(queue["command_id"].to_numpy(dtype=_I64)[row],
                                        dtype="Int64")
    pieces["arg_op_index"] = own_src
    pieces["arg_event"] = ev.astype(_I64)
    rest = trace.iloc[lost].copy()
    rest["arg_command_id"] = pd.array([None] * len(lost), dtype="Int64")
    rest["arg_op_index"] = np.full(len(lost), -1, dtype=_I64)
    rest["arg_event"] = lost.astype(_I64)
    old = (rest["problem"].astype(str).to_numpy() if "problem" in rest.columns
           else np.full(len(lost), "", dtype=object))
    rest["problem"] = [p if p not in ("", "nan", "None") else reason[i]
                       for p, i in zip(old.tolist(), lost.tolist())]
    if "problem" in pieces.columns:
        pieces["problem"] = pieces["problem"].astype(str).replace({"nan": "", "None": ""})
    out = pd.concat([pieces, rest], ignore_index=True)
    out = out.sort_values("arg_event", kind="stable").reset_index(drop=True)
    if "problem" in out.columns:
        out["problem"] = out["problem"].fillna("").astype(str)
    return out


def join_npu_trace(trace: pd.DataFrame | str | os.PathLike[str], provenance: VelaProvenance,
                   *, policy: str = "macs", point: str = "at", overlaps: str = "leaves"
                   ) -> Attribution:
    """Attribute the durations of NPU trace events to source ops through Vela's queue.

    Args:
        trace: a trace frame (``start_ns``, ``dur_ns``, ``arg_qread``, optional
            ``arg_qread_end``, ``arg_cmdstream_id``, ``name``, ``problem``) or a Chrome trace
            file path.
        provenance: the Vela output's provenance (``VelaResult.provenance``).
        policy: split over a compiled op's source ops: trace-join's ``macs``, ``bytes``,
            ``equal``, or ``vela`` (the command's own scheduled op's source op only; the join is
            then keyed by source op index, so ``by_command()`` and ``by_op()`` stay empty).
        point: how a point event picks its row (:data:`POINT_RULES`, module docstring).
        overlaps: trace-join's overlap mode: ``leaves`` (default: an event enclosing or
            partly overlapping others on its track is unattributed) or ``keep``.

    Returns:
        trace-join's :class:`~toolkit.trace.Attribution` of :func:`npu_trace_frame` keyed by
        ``command_id`` (its ``event_id`` is the piece's row there; ``arg_event`` the event's
        row in ``trace``); events that map to no command are in ``unattributed()`` with the
        reason.
    """
    return join_units(npu_trace_frame(trace, provenance, point=point), provenance, policy,
                      "command_id", overlaps=overlaps)


def _cycles_per_row(db: VelaDebugDB, queue: pd.DataFrame,
                    cycles_per_command: int | float | Sequence[float] | Mapping[int, float]
                    | pd.Series | None) -> list[Fraction]:
    """Return the cycles of each queue row (in ``queue`` order) as exact fractions."""
    n = len(queue)
    if cycles_per_command is None:
        if db.core != "default":
            raise VelaError("the legacy core's database holds no estimates",
                            where=db.path,
                            fix="pass cycles_per_command (e.g. dict(zip(res.provenance.queue()"
                            "['command_id'], res.provenance.queue()['op_cycles'])))")
        est = read_estimates(db)
        per = est.per_command(queue)
        return [Fraction(int(v), est.scale) for v in per["op_cycles"].tolist()]
    if isinstance(cycles_per_command, int | float):
        return [Fraction(cycles_per_command)] * n
    if isinstance(cycles_per_command, Mapping | pd.Series):
        get = cycles_per_command.get
        out = []
        for c in queue["command_id"].tolist():
            v = get(c)
            if v is None:
                raise VelaError(f"cycles_per_command has no entry for command {c}",
                                fix="give one value per command_id of the queue")
            out.append(Fraction(float(v)) if isinstance(v, float) else Fraction(v))
        return out
    values = list(cycles_per_command)
    if len(values) != n:
        raise VelaError(f"cycles_per_command has {len(values)} values for {n} queue rows",
                        fix="give one value per queue row, in command_id order")
    return [Fraction(float(v)) if isinstance(v, float) else Fraction(v) for v in values]


def make_npu_trace(db: VelaDebugDB,
                   cycles_per_command: int | float | Sequence[float] | Mapping[int, float]
                   | pd.Series | None = None, *, clock_hz: int = 1_000_000_000,
                   start_ns: int = 0, gap_ns: int = 0, commands_per_event: int = 1,
                   ranges: bool = False, pid: int = 1, tid: int = 1) -> pd.DataFrame:
    """Synthesise an NPU trace from a real debug database (synthetic: not a measurement).

    One event per queue row (``commands_per_event`` consecutive rows of one stream per event),
    in execution order, back to back (``gap_ns`` apart), named after Vela's scheduled op.

    Args:
        db: the debug database.
        cycles_per_command: cycles of each queue row: one number for all; a sequence (queue
            rows in ``command_id`` order) or a mapping/Series keyed by ``command_id``; None
            for Vela's ``op_cycles`` of the row's scheduled op (default core only).
        clock_hz: NPU clock; ``dur_ns = cycles * 1e9 / clock_hz`` rounded half to even.
        start_ns: start of the first event.
        gap_ns: idle time between events.
        commands_per_event: queue rows per event (> 1 gives range events).
        ranges: give ``arg_qread_end`` even with one row per event.
        pid, tid: process and thread ids of the events.

    Returns:
        a trace frame like :func:`read_chrome_trace`'s: ``name`` (str), ``cat`` (``"npu"``),
        ``pid``, ``tid``, ``start_ns``, ``dur_ns`` (int64), ``arg_qread`` (int64, word
        position of the event's first row: ``offset // 4``), ``arg_qread_end`` (int64, word
        position of the next row of the stream, or one past the last row's offset; only
        with ranges), ``arg_cmdstream_id`` (int64) and ``problem`` (``""``). Write it with
        :func:`toolkit.formats.chrome_trace.write_chrome_trace`.
    """
    if commands_per_event < 1:
        raise VelaError("commands_per_event must be at least 1", fix="pass commands_per_event >= 1")
    if clock_hz <= 0:
        raise VelaError(
            "clock_hz must be positive",
            fix="pass clock_hz in hertz, a positive number (e.g. the target's clock_hz)",
        )
    queue = ordered_queue(db)
    cycles = _cycles_per_row(db, queue, cycles_per_command)
    names = {}
    if "perf" in db.tables and len(db.tables["perf"]):
        perf = db.tables["perf"]
        names = dict(zip(_int_column(perf, "id").tolist(), perf["name"].astype(str)))
    ranges = ranges or commands_per_event > 1
    rows = []
    t = int(start_ns)
    for s, grp in queue.groupby("cmdstream_id", sort=True):
        pos = grp.index.to_numpy()
        offs = grp["offset"].to_numpy(dtype=_I64)
        for k in range(0, len(pos), commands_per_event):
            chunk = pos[k:k + commands_per_event]
            end = k + len(chunk)
            qread_end = int(offs[end]) // 4 if end < len(offs) else int(offs[-1]) // 4 + 1
            first = queue.loc[chunk[0]]
            ns = sum(cycles[i] for i in chunk.tolist()) * 10**9 / Fraction(clock_hz)
            dur = round(ns)  # Fraction rounds half to even
            sid = int(first["scheduled_id"])
            name = names.get(sid) or f"optimised {int(first['optimised_id'])}"
            rows.append((name, "npu", pid, tid, t, dur, int(offs[k]) // 4, qread_end, int(s),
                         ""))
            t += dur + int(gap_ns)
    df = pd.DataFrame(rows, columns=["name", "cat", "pid", "tid", "start_ns", "dur_ns",
                                     "arg_qread", "arg_qread_end", "arg_cmdstream_id",
                                     "problem"])
    df = df.astype({"name": "str", "cat": "str", "pid": _I64, "tid": _I64, "start_ns": _I64,
                    "dur_ns": _I64, "arg_qread": _I64, "arg_qread_end": _I64,
                    "arg_cmdstream_id": _I64, "problem": "str"})
    if not ranges:
        df = df.drop(columns=["arg_qread_end"])
    return df
