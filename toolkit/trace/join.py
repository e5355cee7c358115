"""trace-join: follow each trace event's key back to the original layers and split its time.

    att = trace_join(trace, compiled, policy="macs")
    att.by_layer()          # one row per original layer
    att.unattributed()      # every event that could not be matched, with the reason

Steps, each vectorised over all events (no per-event Python):

1. **Problems.** Events the reader flagged (unpaired ``B``/``E``, missing time, ...) and events
   with a negative duration are unattributed with that reason.
2. **Keys.** Each event's key (command id, compiled op index, (part, op index), debug handle,
   part, op name; see :mod:`toolkit.trace.keys`) is looked up in the provenance
   (:mod:`toolkit.trace.catalog`) and names a *target*: a compiled op, a debug handle, a source
   op or a part, each with a set of (compiled op, source op, layer) members. Unknown or
   ambiguous keys are unattributed with the reason.
3. **Overlaps** (``overlaps="leaves"``, the default). On one track (``pid``, ``tid``), an
   event that encloses later matched events is unattributed ("encloses other events on its
   track": its children carry the detail), and an event that starts inside an earlier one but
   ends after it is unattributed ("overlaps an earlier event on its track"), so that no
   nanosecond is attributed twice. ``overlaps="keep"`` attributes every matched event.
4. **Split.** Each matched event's duration is split over its target's members by integer
   weights (the policy), exactly: see :func:`toolkit.trace.split.split_by_weights`.

Policies (the weight of each source op of an event's target):

``equal``  every source op the same share.
``macs``   the source op's multiply-accumulates (``source_ops().macs``): a fused conv + bias
           + activation op gives nearly all of its time to the convolution.
``bytes``  the source op's output bytes (``source_ops().output_bytes``): for memory-bound ops.

When every source op of a target has weight 0 (a fused reshape + transpose under ``macs``), the
target splits equally. A source op with several original layers (``"a;b"`` names written by
TensorFlow's converter) splits its share equally between them. Weights are scaled down when a
target's weights sum above 2**31 (ratios kept to 1 part in 2**31).

**Remainders.** Member ``j`` of an event gets ``floor(dur * w_j / W)``; the ``r < k``
nanoseconds left over go one each to the ``r`` members with the largest remainders
``dur * w_j mod W``, ties to the member with the smaller ``source_id`` (then the layer listed
first). So attributed time plus unattributed time equals total event time exactly.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.provenance import Provenance
from toolkit.trace.attribution import Attribution, JoinResult
from toolkit.trace.catalog import AMBIGUOUS, UNKNOWN, Catalog, catalog_of
from toolkit.trace.keys import INT_KINDS, KEY_COLUMNS, KEY_KINDS, integer_values, kind_values
from toolkit.trace.keys import part_values as _part_values
from toolkit.trace.read import Trace, read_trace
from toolkit.trace.split import MAX_TOTAL_WEIGHT, split_by_weights

__all__ = ["trace_join", "POLICIES", "member_weights", "as_provenance"]

#: Policies for splitting an event over the source ops of its op (see the module docstring).
POLICIES: tuple[str, ...] = ("equal", "macs", "bytes")
_OVERLAPS = ("leaves", "keep")


class _Reasons:
    """Per-event reason codes (0 = attributed) and their texts."""

    def __init__(self, n: int) -> None:
        self.texts: list[str] = [""]
        self.codes = np.zeros(n, dtype=np.int32)

    def code(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text)

    def set(self, rows: np.ndarray | slice, mask: np.ndarray, text: str) -> None:
        """Give ``text`` to the rows ``rows[mask]`` (rows still without a reason only)."""
        if not mask.any():
            return
        idx = np.arange(len(self.codes))[rows][mask] if isinstance(rows, slice) else rows[mask]
        free = self.codes[idx] == 0
        self.codes[idx[free]] = self.code(text)


def as_provenance(obj: Any) -> Provenance:
    """Return a :class:`~toolkit.provenance.Provenance` for ``obj``.

    ``obj`` is a provenance (``CompiledModel``, ``PartitionResult``, ...), a plain
    :class:`~toolkit.ir.Model` (joined as compiled without passes: op i is compiled op i), or a
    path: a folder written by ``CompiledModel.save`` or a model file (see
    :func:`toolkit.trace.outdir.load_provenance`).
    """
    from toolkit.ir import Model

    if isinstance(obj, Model):
        from toolkit.compile import compile_model

        return compile_model(obj, passes=[])
    if isinstance(obj, (str, os.PathLike)):
        from toolkit.trace.outdir import load_provenance

        return load_provenance(obj)
    if isinstance(obj, Provenance):
        return obj
    raise ToolkitError(f"cannot join a trace with a {type(obj).__name__}",
                       fix="pass a CompiledModel, a PartitionResult, a Model or an output folder")


def member_weights(cat: Catalog, policy: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(weight per member, total weight per target)`` (``int64``) for ``policy``.

    Each member's weight is its source op's policy weight times the member's layer factor; a
    target whose source ops all weigh 0 uses weight 1 for each; totals above
    :data:`~toolkit.trace.split.MAX_TOTAL_WEIGHT` are scaled down.
    """
    if policy not in POLICIES:
        raise ToolkitError(f"unknown policy {policy!r}", fix=f"use one of {POLICIES}")
    s = len(cat.source_id)
    per_source = {"equal": np.ones(s, dtype=np.int64), "macs": cat.source_macs,
                  "bytes": cat.source_bytes}[policy]
    sizes = cat.target_sizes()
    t = len(sizes)
    member_target = np.repeat(np.arange(t, dtype=np.int64), sizes)
    raw = per_source[cat.member_source].astype(np.int64)
    nonempty = sizes > 0
    starts = cat.target_ptr[:-1][nonempty]
    raw_total = np.zeros(t, dtype=np.int64)
    if len(raw):
        raw_total[nonempty] = np.add.reduceat(raw, starts)
    raw = np.where(raw_total[member_target] > 0, raw, 1)
    weight = raw * cat.member_factor
    total = np.zeros(t, dtype=np.int64)
    if len(weight):
        total[nonempty] = np.add.reduceat(weight, starts)
    big = total > MAX_TOTAL_WEIGHT
    if big.any():
        rows = big[member_target]
        scale = MAX_TOTAL_WEIGHT / total[member_target[rows]].astype(np.float64)
        weight[rows] = np.floor(weight[rows] * scale).astype(np.int64)
        total = np.zeros(t, dtype=np.int64)
        total[nonempty] = np.add.reduceat(weight, starts)
    return weight, total


def _dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` with ``uniques`` sorted; O(n) for small non-negative ints."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    low, high = int(values.min()), int(values.max())
    if low >= 0 and high < 4 * len(values) + 4096:
        seen = np.bincount(values, minlength=high + 1) > 0
        uniques = np.flatnonzero(seen)
        table = np.cumsum(seen) - 1
        return table[values], uniques
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64), uniques


def _factorized_lookup(values: np.ndarray, resolve: Any) -> np.ndarray:
    """Resolve object keys once per distinct value: ``resolve(value) -> target``."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    table = np.array([resolve(u) for u in list(uniques)] + [UNKNOWN], dtype=np.int64)
    return table[np.asarray(codes)]


def _resolve(kind: str, values: np.ndarray, cat: Catalog, events: pd.DataFrame,
             rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Look up keys of one kind; return ``(target, command row, is_int)`` per row."""
    n = len(values)
    command = np.full(n, -1, dtype=np.int64)
    if kind in INT_KINDS or kind == "debug_handle":
        if values.dtype == np.int64:
            ints, ok = values, np.ones(n, dtype=bool)
        else:
            ints, ok = integer_values(pd.Series(values, dtype=object))
    if kind == "command_id":
        command = cat.command_lookup.get(ints)
        target = np.where(command >= 0, cat.command_op[np.maximum(command, 0)]
                          if len(cat.command_op) else UNKNOWN, UNKNOWN)
        command = np.where(target >= 0, command, -1)
    elif kind == "op_index":
        target = cat.op_lookup.get(ints)
    elif kind == "part":
        target = cat.part_lookup.get(ints)
    elif kind == "part_op":
        part, has_part = _part_values(events)
        part = part[rows]
        target = np.where(has_part[rows], cat.part_op_lookup.get(cat.part_op_key(part, ints)),
                          UNKNOWN)
    elif kind == "source_op_index":
        target = cat.source_index_lookup.get(ints)
    elif kind == "debug_handle":
        target = np.full(n, UNKNOWN, dtype=np.int64)
        target[ok] = cat.handle_int_lookup.get(ints[ok])
        retry = target == UNKNOWN
        if retry.any():
            texts = cat.handle_text_lookup
            target[retry] = _factorized_lookup(
                values[retry] if values.dtype == object else ints[retry].astype(object),
                lambda v: texts.get(str(v), UNKNOWN))
        return target, command, np.ones(n, dtype=bool)
    else:
        lookup = cat.name_lookup if kind == "name" else cat.source_name_lookup
        target = _factorized_lookup(values, lambda v: lookup.get(str(v), UNKNOWN))
        return target, command, np.ones(n, dtype=bool)
    return np.where(ok, target, UNKNOWN), np.where(ok, command, -1), ok


def _tracks(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Track code (``pid``, ``tid``) of each of ``rows`` (0 when the trace has none)."""
    code = np.zeros(len(rows), dtype=np.int64)
    for column in ("pid", "tid"):
        if column in events.columns:
            c, u = pd.factorize(events[column].to_numpy()[rows])
            code = code * (len(u) + 1) + np.asarray(c, dtype=np.int64) + 1
    return code


def _overlaps(events: pd.DataFrame, rows: np.ndarray, start: np.ndarray, dur: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(encloses, overlaps)`` masks over ``rows`` (events with ``dur > 0``)."""
    m = len(rows)
    s, d = start[rows], dur[rows]
    e = s + d
    track = _tracks(events, rows)
    single = m == 0 or bool((track == track[0]).all())
    if single and (m < 2 or bool((s[1:] > s[:-1]).all())):
        order = None
    else:
        order = np.lexsort((-e, s, track))
        s, e, track = s[order], e[order], track[order]
    encloses = np.zeros(m, dtype=bool)
    overlaps = np.zeros(m, dtype=bool)
    if m >= 2:
        same = track[1:] == track[:-1]
        encloses[:-1] = same & (s[1:] < e[:-1]) & (e[1:] <= e[:-1])
        # running max of earlier ends within the track
        if single:
            prev = np.maximum.accumulate(e)
        else:
            t_codes, _ = _dense_codes(track)
            low = int(s.min())
            span = int(e.max()) - low + 1
            if (int(t_codes.max()) + 1) * span < (1 << 62):
                shifted = (e - low) + t_codes * span
                prev = np.maximum.accumulate(shifted) - t_codes * span + low
            else:
                prev = pd.Series(e).groupby(track).cummax().to_numpy()
        prior = np.empty(m, dtype=np.int64)
        prior[0] = np.iinfo(np.int64).min
        prior[1:] = np.where(same, prev[:-1], np.iinfo(np.int64).min)
        overlaps = (s < prior) & (e > prior)
        encloses &= ~overlaps
    if order is not None:
        back_e = np.empty(m, dtype=bool)
        back_o = np.empty(m, dtype=bool)
        back_e[order] = encloses
        back_o[order] = overlaps
        return back_e, back_o
    return encloses, overlaps


def _reads_as_source_index(events: pd.DataFrame, rows: np.ndarray | slice, keys: np.ndarray,
                           cat: Catalog) -> bool:
    """True when ``op_index`` keys match the events' op names better as op indices of the
    *source* model than as compiled op indices (a trace of the uncompiled model)."""
    if "optimised_id" in events.columns or "arg_optimised_id" in events.columns:
        return False
    column = next((c for c in ("op_name", "arg_op_name") if c in events.columns), None)
    if column is None or "name" not in cat.ops.columns:
        return False
    names = events[column].astype(object).to_numpy()[rows]
    sample = slice(0, 100_000)
    pairs = pd.DataFrame({"k": np.asarray(keys)[sample], "n": names[sample]}).drop_duplicates()
    ints, ok = integer_values(pairs["k"])
    pairs, ints = pairs[ok], ints[ok]
    if len(pairs) == 0:
        return False
    given = pairs["n"].astype(str).to_numpy(dtype=object)
    op = cat.op_lookup.get(ints)
    op_names = cat.ops["name"].astype(object).to_numpy()
    compiled = np.where(op >= 0, op_names[np.maximum(op, 0)] if len(op_names) else None, None)
    by_index = pd.Series(cat.source_name, index=cat.source_op_index)
    by_index = by_index[~by_index.index.duplicated()]
    source = by_index.reindex(ints).to_numpy(dtype=object)
    return int((source == given).sum()) > int((compiled == given).sum())


def trace_join(trace: Any, provenance: Any, policy: str = "macs", key: str | None = None, *,
               overlaps: str = "leaves") -> Attribution:
    """Join a trace with a compiled (or partitioned) model and attribute time to its layers.

    Args:
        trace: a :class:`~toolkit.trace.read.Trace` or anything :func:`read_trace` reads
            (path, EventTracer, DataFrame, list of records).
        provenance: a ``CompiledModel``, ``PartitionResult`` or any
            :class:`~toolkit.provenance.Provenance`; a ``Model``; or a path (see
            :func:`as_provenance`).
        policy: ``"equal"``, ``"macs"`` or ``"bytes"``: how an event is split over the source
            ops of its op (module docstring).
        key: ``None`` to use each event's own key kind (``Trace.events.key_kind``; events
            keyed by ``op_index`` whose ``op_name`` matches the source model's op at that index
            better than the compiled model's, as in a trace of the uncompiled model, are read
            as ``source_op_index``, and :attr:`Attribution.key_used` says so), or one
            kind for every event: ``command_id``, ``part_op``, ``op_index``, ``debug_handle``,
            ``part``, ``name``, ``source_op_index`` (op index in the source model, as in a
            trace of the uncompiled model), ``source_name``.
        overlaps: ``"leaves"`` (default: enclosing and partially overlapping events on one
            track are unattributed) or ``"keep"``.

    Returns:
        An :class:`~toolkit.trace.attribution.Attribution`.

    Raises:
        ToolkitError: unknown policy, key kind or overlaps mode; provenance tables without the
            columns of :mod:`toolkit.provenance`.
    """
    if policy not in POLICIES:
        raise ToolkitError(f"unknown policy {policy!r}", fix=f"use one of {POLICIES}")
    if key is not None and key not in KEY_KINDS:
        raise ToolkitError(f"unknown key kind {key!r}", fix=f"use one of {KEY_KINDS}")
    if overlaps not in _OVERLAPS:
        raise ToolkitError(f"unknown overlaps mode {overlaps!r}", fix=f"use one of {_OVERLAPS}")
    if not isinstance(trace, Trace):
        trace = read_trace(trace)
    prov = as_provenance(provenance)
    cat = catalog_of(prov)
    events = trace.events
    n = len(events)
    start = events["start_ns"].to_numpy(dtype=np.int64)
    dur = events["dur_ns"].to_numpy(dtype=np.int64)
    reasons = _Reasons(n)

    # 1. problems flagged by the reader, negative durations
    problem = events["problem"]
    if isinstance(problem.dtype, pd.CategoricalDtype):
        texts = [str(c) for c in problem.cat.categories]
        codes = problem.cat.codes.to_numpy()
        table = np.array([reasons.code(t) if t else 0 for t in texts] + [0], dtype=np.int32)
        reasons.codes = table[codes]
    else:
        for text in pd.unique(problem.astype(object).dropna()).tolist():
            if text:
                reasons.set(slice(None), (problem == text).to_numpy(dtype=bool), str(text))
    reasons.set(slice(None), dur < 0, "negative duration")

    # 2. keys -> targets
    target = np.full(n, UNKNOWN, dtype=np.int64)
    command = np.full(n, -1, dtype=np.int64)
    kind_code = np.zeros(n, dtype=np.int16)  # 0: none, else 1 + KEY_KINDS index
    if key is None:
        kind_code = np.asarray(events["key_kind"].cat.codes.to_numpy(), dtype=np.int16)
        cats = [str(c) for c in events["key_kind"].cat.categories]
        remap = np.array([0 if c == "" else 1 + KEY_KINDS.index(c) for c in cats] + [0],
                         dtype=np.int16)
        kind_code = remap[kind_code]
        all_keys = events["key"].to_numpy()
    else:
        columns = KEY_COLUMNS[key]
        if trace.meta.get("key_column"):
            columns = (trace.meta["key_column"], *columns)
        values, present = kind_values(events, key, columns)
        if key in ("name", "source_name") and values is not None:
            values = pd.Series(values.astype(object).to_numpy(), dtype=object)
        kind_code[present] = 1 + KEY_KINDS.index(key)
        all_keys = values.to_numpy() if values is not None else np.full(n, None, dtype=object)
    open_rows = reasons.codes == 0
    reasons.set(slice(None), kind_code == 0, "no key" if key is None else f"no {key} key")
    for k in np.unique(kind_code[open_rows]).tolist():
        if k == 0:
            continue
        kind = KEY_KINDS[k - 1]
        mask = open_rows & (kind_code == k)
        rows: np.ndarray | slice = slice(None) if mask.all() else np.flatnonzero(mask)
        vals = all_keys[rows]
        if vals.dtype == object and kind in INT_KINDS | {"debug_handle"}:
            ints, ok = integer_values(pd.Series(vals, dtype=object))
            if ok.all():
                vals = ints
        if key is None and kind == "op_index" and _reads_as_source_index(events, rows, vals,
                                                                         cat):
            kind = "source_op_index"
            kind_code[rows] = 1 + KEY_KINDS.index(kind)
        t, c, ok = _resolve(kind, vals, cat, events, rows)
        reasons.set(rows, ~ok, f"{kind} key is not an integer")
        reasons.set(rows, t == AMBIGUOUS, f"ambiguous {kind}")
        reasons.set(rows, t == UNKNOWN, f"unknown {kind}")
        target[rows] = t
        command[rows] = c
    sizes = cat.target_sizes()
    matched = (reasons.codes == 0) & (target >= 0)
    empty = np.zeros(n, dtype=bool)
    empty[matched] = sizes[target[matched]] == 0
    reasons.set(slice(None), empty, "its op has no origins")

    # 3. overlaps on one track
    if overlaps == "leaves":
        rows = np.flatnonzero((reasons.codes == 0) & (dur > 0))
        enc, over = _overlaps(events, rows, start, dur)
        reasons.set(rows, over, "overlaps an earlier event on its track")
        reasons.set(rows, enc, "encloses other events on its track")

    # 4. split
    attributed = np.flatnonzero(reasons.codes == 0)
    target = np.where(reasons.codes == 0, target, UNKNOWN)
    command = np.where(reasons.codes == 0, command, -1)
    weight, total = member_weights(cat, policy)
    t_att = target[attributed]
    p_local, p_member, p_ns = split_by_weights(
        dur[attributed], cat.target_ptr[t_att], sizes[t_att], total[t_att], weight)
    p_event = attributed[p_local]

    run_code, run_values = _dense_codes(events["run"].to_numpy(dtype=np.int64))
    result = JoinResult(
        trace=trace, catalog=cat, provenance=prov, policy=policy, key=key, overlaps=overlaps,
        target=target, command=command, kind_code=kind_code, reason_code=reasons.codes,
        reason_texts=reasons.texts, run_code=run_code, run_values=run_values,
        pair_event=p_event, pair_member=p_member, pair_ns=p_ns, weight=weight)
    return Attribution(result)

