"""trace-join: follow each trace event's key back to the original layers and split its time.

    att = trace_join(trace, compiled, policy="macs")
    att.by_layer()          # one row per original layer
    att.unattributed()      # every event that could not be matched, with the reason

Steps, each vectorised over blocks of ~10^5 events (no per-event Python):

1. **Problems.** Events the reader flagged (unpaired ``B``/``E``, missing time, ...) and events
   with a negative duration are unattributed with that reason (and never part of a span tree).
   With ``skip_runs=N`` the events of the first N runs (warm-up) are dropped first.
2. **Keys.** Each event's key (command id, compiled op index, (part, op index), debug handle,
   part, op name; see :mod:`toolkit.trace.join.keys`) is looked up in the provenance
   (:mod:`toolkit.trace.join.catalog`, :mod:`toolkit.trace.join._resolve`) and names a *target*: a
   compiled op, a debug handle, a source op or a part, each with its (compiled op, source op,
   layer) members. Unknown or ambiguous keys are unattributed with the reason.
3. **Consistency** (:mod:`toolkit.trace.join._consistency`). What an event says about itself (op
   name, op type, compiled op, part, backend) is compared with the op its key names; an event
   that disagrees is unattributed with both sides in the reason. The *match score* is matched
   events / keyed events; below 0.5 the join raises (another model, another compile) unless
   ``strict=False``.
4. **Nesting** (``overlaps="self"``, the default; :mod:`toolkit.trace.join.nesting`). Spans nest per
   track; each event counts its *self* time (its duration minus its children's), so that the
   time of a tree is its root's duration, exactly. A span with children that matches no op
   (``Method::execute``, a profiler's wrapper) is *dispatch overhead*: its self time is a named
   bucket of :meth:`Attribution.overhead`, not unattributed. A span that overlaps an earlier
   one without nesting is unattributed ("overlaps an earlier event on its track").
   ``overlaps="leaves"`` instead unattributes enclosing events whole
   (:mod:`toolkit.trace.join.overlaps`); ``overlaps="keep"`` attributes every matched event whole.
5. **Split.** Each matched event's time is split over its target's members by the
   policy's integer weights (:mod:`toolkit.trace.join.policies`), exactly
   (:func:`toolkit.trace.join.split.split_targets`), and summed per (run, member).

**Every runtime.** ExecuTorch (:mod:`toolkit.trace.et_provenance`), ONNX Runtime
(:mod:`toolkit.trace.ort_provenance`) and Vela (:mod:`toolkit.vela.provenance`) are adapters:
their readers give a trace (with the runtime's own nesting as ``parent_id`` where it knows
it) and a provenance, and :func:`run_join` is the one engine for all of them, so ``policy``,
``key``, ``overlaps``, ``strict`` and ``skip_runs`` mean the same for every source.

**Remainders.** Member ``j`` of an event gets ``floor(dur * w_j / W)``; the ``r < k``
nanoseconds left over go one each to the ``r`` members with the largest remainders
``dur * w_j mod W``, ties to the member with the smaller ``source_id`` (then the layer listed
first). So attributed + overhead + unattributed time equals the total time (the sum of self times)
exactly.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.provenance import Provenance
from toolkit.trace.join._accumulate import CellSums
from toolkit.trace.join._consistency import describe, find_mismatches
from toolkit.trace.join._resolve import NO_KIND, reads_as_source_index, resolve_keys
from toolkit.trace.join.attribution import Attribution, JoinResult
from toolkit.trace.join.catalog import Catalog, catalog_of
from toolkit.trace.join.codes import TextCodes
from toolkit.trace.join.events import Trace
from toolkit.trace.join.keys import KEY_COLUMNS, KEY_KINDS, kind_values
from toolkit.trace.join.nesting import span_tree, structural_tree
from toolkit.trace.join.overlaps import find_overlaps, track_codes
from toolkit.trace.join.policies import POLICIES, member_weights
from toolkit.trace.join.split import TargetWeights, exact_int, split_targets

__all__ = ["trace_join", "run_join", "POLICIES", "as_provenance", "RunCodes", "OVERLAPS"]

#: ``overlaps`` modes of :func:`trace_join`.
OVERLAPS: tuple[str, ...] = ("self", "leaves", "keep")
_OVERLAPS = OVERLAPS
_BLOCK = 1 << 16


class RunCodes:
    """Run values -> dense codes ``0 .. runs-1`` (in increasing run order), block by block."""

    def __init__(self, run: np.ndarray) -> None:
        run = np.asarray(run, dtype=np.int64)
        self.low = int(run.min()) if len(run) else 0
        high = int(run.max()) if len(run) else -1
        self.table: np.ndarray | None = None
        if len(run) and high - self.low < 4 * len(run) + 4096:
            seen = np.bincount(run - self.low, minlength=high - self.low + 1) > 0
            self.values = np.flatnonzero(seen) + self.low
            self.table = np.cumsum(seen) - 1
        else:
            self.values = np.unique(run)

    def __len__(self) -> int:
        return len(self.values)

    def codes(self, run: np.ndarray) -> np.ndarray:
        """Codes of ``run`` values (all of which occur in the trace)."""
        if self.table is not None:
            return self.table[run - self.low]
        return np.searchsorted(self.values, run)


def as_provenance(obj: Any) -> Provenance:
    """Return a :class:`~toolkit.provenance.Provenance` for ``obj``.

    ``obj`` is a provenance (``CompiledModel``, ``PartitionResult``,
    :class:`~toolkit.trace.join.tables.ProvenanceTables` ...), a plain
    :class:`~toolkit.ir.Model` (joined as compiled without passes: op i is compiled op i), or a
    path: a compiled output folder, a ``.conn.json``/``.conn.ini`` of a partitioned model
    (:func:`toolkit.trace.join._partitioned.load_partitioned`: a chained run joins to the parts and
    back to the source model's layers), or a model file (one with ``<stem>_debug.xml`` beside
    it is that compiled output; any other is compiled now with the default passes and target,
    as ``toolkit compile`` would, so a trace of that compile joins to it). The rules for paths
    are those of :func:`toolkit.model_arg.resolve_model`.
    """
    if isinstance(obj, Provenance):
        return obj
    from toolkit.compiler import compile_model
    from toolkit.model_arg import resolve_model

    was_path = isinstance(obj, (str, os.PathLike))
    arg = resolve_model(obj, purpose="trace_join",
                        accept=("model", "compiled", "partition", "connection"))
    if arg.kind == "connection":
        from toolkit.trace.join._partitioned import load_partitioned

        return load_partitioned(arg.value)
    if arg.kind == "model":
        return compile_model(arg.value, passes=None if was_path else [])
    return arg.value


def _event_kinds(trace: Trace, key: str | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``(kind code per event (int8), key per event, int keys, int rows)`` from the trace or
    for ``key``: ``int keys`` (``int64``) and ``int rows`` (``bool``, the rows whose key is
    an integer) when the trace holds integer keys beside text keys, else None."""
    events = trace.events
    if key is None:
        cats = [str(c) for c in events["key_kind"].cat.categories]
        remap = np.array([NO_KIND if c == "" else 1 + KEY_KINDS.index(c) for c in cats]
                         + [NO_KIND], dtype=np.int8)
        kinds = remap[events["key_kind"].cat.codes.to_numpy()]
        if trace.int_keys is not None and len(trace.int_keys) == len(events):
            if trace.int_key_rows is None:
                return kinds, trace.int_keys, None, None  # integer keys, no objects read
            return kinds, events["key"].to_numpy(), trace.int_keys, trace.int_key_rows
        return kinds, events["key"].to_numpy(), None, None
    columns = KEY_COLUMNS[key]
    if trace.meta.get("key_column"):
        columns = (trace.meta["key_column"], *columns)
    values, present = kind_values(events, key, columns)
    kind = np.where(present, 1 + KEY_KINDS.index(key), NO_KIND).astype(np.int8)
    if values is None:
        return kind, np.full(len(events), None, dtype=object), None, None
    if key in ("name", "source_name") or not (isinstance(values.dtype, np.dtype)
                                              and values.dtype.kind in "iu"):
        return kind, values.astype(object).to_numpy(), None, None
    return kind, values.to_numpy(dtype=np.int64), None, None


def _split_and_sum(target: np.ndarray, command: np.ndarray, reason: np.ndarray,
                   dur: np.ndarray, run: np.ndarray, runs: RunCodes, cat: Catalog,
                   weights: TargetWeights) -> tuple[np.ndarray, np.ndarray, CellSums]:
    """Split every matched event and sum the pieces per (run, member), block by block.

    Sets ``target`` and ``command`` to -1 where ``reason`` is not 0 (in place). Returns the
    matched events per target, the members of the targets hit (one column each, in member
    order, so a target's members are adjacent columns) and the sums.
    """
    n = len(dur)
    sizes = cat.target_sizes()
    target_events = np.zeros(cat.targets, dtype=np.int64)
    for b0 in range(0, n, _BLOCK):
        b1 = min(n, b0 + _BLOCK)
        failed = reason[b0:b1] != 0
        if failed.any():
            target[b0:b1][failed] = -1
            command[b0:b1][failed] = -1
        t = target[b0:b1]
        target_events += np.bincount(t[t >= 0], minlength=cat.targets)
    member_target = np.repeat(np.arange(cat.targets, dtype=np.int64), sizes)
    hit_members = np.flatnonzero(target_events[member_target] > 0)
    first_column = np.full(cat.targets, -1, dtype=np.int64)
    hit_targets = np.flatnonzero((target_events > 0) & (sizes > 0))
    first_column[hit_targets] = np.searchsorted(hit_members, cat.target_ptr[hit_targets])
    cols = len(hit_members)
    sums = CellSums(len(runs), cols)
    for b0 in range(0, n, _BLOCK):
        b1 = min(n, b0 + _BLOCK)
        t = target[b0:b1]
        ok = t >= 0
        if ok.all():
            t = t.astype(np.int64)
            d, r = dur[b0:b1], run[b0:b1]
        else:
            rows = np.flatnonzero(ok)
            if len(rows) == 0:
                continue
            t = t[rows].astype(np.int64)
            d, r = dur[b0:b1][rows], run[b0:b1][rows]
        code = runs.codes(r)
        base = code * cols + first_column[t]
        low = int(code.min()) * cols
        span = (int(code.max()) + 1) * cols - low
        cells: list[np.ndarray] = []
        shares: list[np.ndarray] = []
        for rows_k, share in split_targets(d, t, weights):
            k = share.shape[0]
            at = base if len(rows_k) == len(base) else base[rows_k]
            cells.append((at[None, :] + np.arange(k, dtype=np.int64)[:, None]).ravel()
                          if k > 1 else at)
            shares.append(share.ravel())
        cell = cells[0] if len(cells) == 1 else np.concatenate(cells)
        ns = shares[0] if len(shares) == 1 else np.concatenate(shares)
        if int(d.max()) * len(d) < (1 << 52) and sums.span_ok(low, span, len(ns)):
            sums.add_span(low, exact_int(np.bincount(cell - low, weights=ns, minlength=span)))
        else:
            sums.add_cells(cell, ns)
    return target_events, hit_members, sums


def _skip_runs(trace: Trace, skip_runs: int) -> tuple[Trace, dict[str, int]]:
    """Drop the events of the first ``skip_runs`` runs (smallest run values) of ``trace``."""
    if skip_runs <= 0 or len(trace.events) == 0:
        return trace, {"skipped_runs": 0, "skipped_events": 0, "skipped_ns": 0}
    events = trace.events
    run = events["run"].to_numpy(dtype=np.int64)
    values = np.unique(run)
    if skip_runs >= len(values):
        raise ToolkitError(f"skip_runs={skip_runs} would drop every run of the trace "
                           f"({len(values)} run(s))",
                           fix=f"pass skip_runs below {len(values)}, or trace more runs")
    dropped = run < values[skip_runs]
    dur = events["dur_ns"].to_numpy(dtype=np.int64)
    info = {"skipped_runs": int(skip_runs), "skipped_events": int(dropped.sum()),
            "skipped_ns": int(dur[dropped].sum())}
    kept = events.loc[~dropped].reset_index(drop=True)
    ints = trace.int_keys[~dropped] if trace.int_keys is not None else None
    int_rows = trace.int_key_rows[~dropped] if trace.int_key_rows is not None else None
    return Trace(kept, {**trace.meta, **info}, ints, int_rows), info


def _likely_cause(events: pd.DataFrame, bad: np.ndarray, cat: Catalog) -> str:
    """A sentence naming the likely cause of mostly mismatching events."""
    column = next((c for c in ("op_name", "arg_op_name") if c in events.columns), None)
    has_part = any(c in events.columns for c in ("part", "arg_part", "backend", "arg_backend"))
    if has_part and "part" not in cat.ops.columns:
        return ("the trace comes from a partitioned (chained) run and the model is not "
                "partitioned; pass its .conn.json or PartitionResult")
    if column is not None and len(bad):
        names = pd.unique(events[column].astype(object).to_numpy()[bad[:100_000]])
        names = [str(x) for x in names.tolist() if x is not None and str(x) != ""]
        if names:
            known = sum(1 for x in names if x in cat.name_lookup)
            if known >= 0.8 * len(names):
                return ("the trace's ops are in this model at other positions: it was "
                        "compiled differently (another target, buffer size or passes)")
            return "the trace comes from another model"
    return "the trace comes from another model or another compile of it"


def trace_join(trace: Any, provenance: Any, policy: str = "macs", key: str | None = None, *,
               overlaps: str = "self", strict: bool = True, skip_runs: int = 0
               ) -> Attribution:
    """Join a trace with a compiled (or partitioned) model and attribute time to its layers.

    Args:
        trace: a :class:`~toolkit.trace.join.events.Trace` (:func:`toolkit.trace.trace_join`
            also takes anything :func:`~toolkit.trace.readers.read.read_trace` reads: a path,
            an EventTracer, a DataFrame, a list of records).
        provenance: a ``CompiledModel``, ``PartitionResult`` or any
            :class:`~toolkit.provenance.Provenance`; a ``Model``; or a path (see
            :func:`as_provenance`).
        policy: ``"equal"``, ``"macs"`` or ``"bytes"``: how an event is split over the source
            ops of its op (:mod:`toolkit.trace.join.policies`).
        key: ``None`` to use each event's own key kind (``Trace.events.key_kind``; events
            keyed by ``op_index`` whose ``op_name`` matches the source model's op at that index
            better than the compiled model's, as in a trace of the uncompiled model, are read
            as ``source_op_index``, and :attr:`Attribution.key_used` says so), or one kind for
            every event: ``command_id``, ``part_op``, ``op_index``, ``debug_handle``,
            ``part``, ``name``, ``source_op_index`` (op index in the source model),
            ``source_name``.
        overlaps: ``"self"`` (default: spans nest per track and each event gets its exclusive
            time, see :mod:`toolkit.trace.join.nesting`; an unmatched span with children is
            dispatch overhead, :meth:`Attribution.overhead`), ``"leaves"`` (enclosing and
            partially overlapping events on one track are unattributed) or ``"keep"`` (every
            matched event gets its whole duration).
        strict: raise when most keyed events do not match the model (their key is unknown,
            or what they say about themselves disagrees with the op the key names); with
            ``strict=False`` they are unattributed with the reason and the join goes on.
        skip_runs: drop the events of the first ``skip_runs`` runs (warm-up inferences)
            before joining; :attr:`Attribution.skipped_runs` and ``summary()`` say so.

    Returns:
        An :class:`~toolkit.trace.join.attribution.Attribution`.

    Raises:
        ToolkitError: unknown policy, key kind or overlaps mode; provenance tables without the
            columns of :mod:`toolkit.provenance`; with ``strict``, a match score below 0.5
            (the message names the likely cause: another model, another compile target).
    """
    return Attribution(run_join(trace, provenance, policy, key, overlaps=overlaps,
                                strict=strict, skip_runs=skip_runs))


def run_join(trace: Any, provenance: Any, policy: str = "macs", key: str | None = None, *,
             overlaps: str = "self", strict: bool = True, skip_runs: int = 0) -> JoinResult:
    """The one join behind :func:`trace_join` and every runtime's adapter: the same arguments,
    the :class:`~toolkit.trace.join.attribution.JoinResult` (which an
    :class:`~toolkit.trace.join.attribution.Attribution`, or a runtime's subclass of it, wraps).

    A trace whose reader knows how its spans nest (ExecuTorch: a kernel belongs to its
    instruction's span by instruction id) has a ``parent_id`` column (``int64``: the
    ``event_id`` of the event's parent span, -1 at the top); with ``overlaps="self"`` that
    nesting is used instead of nesting by time.
    """
    if policy not in POLICIES:
        raise ToolkitError(f"unknown policy {policy!r}", fix=f"use one of {POLICIES}")
    if key is not None and key not in KEY_KINDS:
        raise ToolkitError(f"unknown key kind {key!r}", fix=f"use one of {KEY_KINDS}")
    if overlaps not in _OVERLAPS:
        raise ToolkitError(f"unknown overlaps mode {overlaps!r}", fix=f"use one of {_OVERLAPS}")
    if isinstance(skip_runs, bool) or not isinstance(skip_runs, (int, np.integer)) \
            or skip_runs < 0:
        raise ToolkitError(
            f"skip_runs must be an integer >= 0, got {skip_runs!r}",
            fix="pass skip_runs as an integer >= 0 (the number of warm-up runs to leave out)",
        )
    if not isinstance(trace, Trace):
        raise ToolkitError(f"the join takes a Trace, got {type(trace).__name__}",
                           fix="read it first with tk.read_trace(...), or call "
                               "tk.trace_join, which reads what it is given")
    trace, skipped = _skip_runs(trace, int(skip_runs))
    prov = as_provenance(provenance)
    cat = catalog_of(prov)
    events = trace.events
    n = len(events)
    start = events["start_ns"].to_numpy(dtype=np.int64)
    dur = events["dur_ns"].to_numpy(dtype=np.int64)
    runs = RunCodes(events["run"].to_numpy(dtype=np.int64))

    # 1. problems from the reader, negative durations, no key
    reasons = TextCodes(n)
    reasons.set_column(events["problem"])
    reasons.set_mask(dur < 0, "negative duration")
    sound = reasons.codes == 0
    kind, keys, int_keys, int_rows = _event_kinds(trace, key)
    reasons.set_mask(kind == NO_KIND, "no key" if key is None else f"no {key} key")
    tracks = track_codes(events)
    time_ns = dur
    overlapping = np.zeros(0, dtype=np.int64)
    nested = False
    tree_parent: np.ndarray | None = None
    if overlaps != "self":
        tree = None
    elif "parent_id" in events.columns:
        tree = structural_tree(events["event_id"].to_numpy(dtype=np.int64),
                               events["parent_id"].to_numpy(dtype=np.int64), dur)
    else:
        tree = span_tree(start, dur, sound, tracks)
    if tree is not None:
        time_ns, nested = tree.self_ns, tree.nested
        tree_parent = tree.parent if nested else None
    # a negative duration is a problem row of its own, kept out of every total
    negative = dur < 0
    if negative.any():
        time_ns = np.where(negative, 0, time_ns)
    del negative

    # 2. keys -> targets
    op_index = 1 + KEY_KINDS.index("op_index")
    if key is None and np.any(kind == op_index):
        rows = np.flatnonzero(kind == op_index)
        if reads_as_source_index(events, rows, keys, cat):
            kind = kind.copy()
            kind[rows] = 1 + KEY_KINDS.index("source_op_index")
    resolved = resolve_keys(events, kind, keys, reasons.codes == 0, cat, int_keys, int_rows)
    for text, rows in resolved.failures:
        reasons.set_rows(rows, text)
    target, command = resolved.target, resolved.command
    sizes = cat.target_sizes()
    ok = (reasons.codes == 0) & (target >= 0)  # a bool mask: no 10M-row index array

    # 3. what each event says about itself against the op its key names
    mism = find_mismatches(events, target, kind, ok, cat)
    for text, rows in describe(events, mism.rows, target, cat):
        reasons.set_rows(rows, text)
    if len(mism.rows):
        ok &= reasons.codes == 0
    # spans holding others that name no op are wrappers (overhead), not mismatches
    wrapper = (tree.children > 0) & (target < 0) if tree is not None else np.zeros(n, bool)
    keyed = int(np.count_nonzero(sound & (kind != NO_KIND) & ~wrapper))
    good = int(np.count_nonzero(ok))
    score = good / keyed if keyed else float("nan")
    if strict and keyed and good * 2 < keyed:
        bad = np.flatnonzero(sound & (kind != NO_KIND) & ~wrapper
                             & ((reasons.codes != 0) | (target < 0)))
        example = reasons.texts[int(reasons.codes[bad[0]])] if len(bad) else ""
        raise ToolkitError(
            f"only {good} of {keyed} keyed trace events ({score:.0%}) match the model: "
            f"{_likely_cause(events, bad, cat)} (e.g. {example})",
            where=str(trace.meta.get("source", "trace")),
            fix="join the trace with the model it was recorded from, or pass strict=False "
                "(--no-strict) to attribute what matches")
    no_origins = sizes == 0
    if no_origins.any():
        reasons.set_mask(ok & no_origins[np.maximum(target, 0)], "its op has no origins")

    # 4. nesting and overlaps on one track
    overhead = np.zeros(n, dtype=bool)
    if tree is not None:
        overlapping = tree.overlapping
        reasons.set_rows(overlapping, "overlaps an earlier event on its track")
        overhead = (tree.children > 0) & (reasons.codes != 0) & sound
        overhead[overlapping] = False
    elif overlaps == "leaves":
        enclosing, overlapping = find_overlaps(start, dur, (reasons.codes == 0) & (target >= 0),
                                               tracks)
        reasons.set_rows(overlapping, "overlaps an earlier event on its track")
        reasons.set_rows(enclosing, "encloses other events on its track")
    weight, total = member_weights(cat, policy)
    weights = TargetWeights(cat.target_ptr[:-1], sizes, weight, total)
    target_events, hit_members, sums = _split_and_sum(
        target, command, reasons.codes, time_ns, events["run"].to_numpy(dtype=np.int64), runs,
        cat, weights)

    result = JoinResult(
        trace=trace, catalog=cat, provenance=prov, policy=policy, key=key, overlaps=overlaps,
        target=target, command=command, kind_code=kind, reason_code=reasons.codes,
        reason_texts=reasons.texts, runs=runs, weight=weight, weights=weights,
        target_events=target_events, hit_members=hit_members, sums=sums, time_ns=time_ns,
        overhead=overhead, nested=nested, overlapping=overlapping, keyed_events=keyed,
        matched_events=good, skipped=skipped, parent=tree_parent)
    return result
