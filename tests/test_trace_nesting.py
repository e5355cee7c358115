"""Nested spans: exclusive (self) time, dispatch overhead, conservation to the nanosecond."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_trace_join import fused_provenance

from toolkit.trace import read_trace, trace_join
from toolkit.trace.join.nesting import span_tree

US = 1000


def nested_chrome(tmp_path: Path) -> Path:
    """Three levels on thread 1 (B/E and X mixed), two levels on thread 2."""
    ev = [
        {"ph": "B", "name": "Method::execute", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "X", "name": "delegate", "pid": 1, "tid": 1, "ts": 10, "dur": 60,
         "args": {"debug_handle": 10}},
        {"ph": "X", "name": "k0", "pid": 1, "tid": 1, "ts": 15, "dur": 20,
         "args": {"command_id": 0}},
        {"ph": "B", "name": "k1", "pid": 1, "tid": 1, "ts": 40, "args": {"command_id": 1}},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 60},
        {"ph": "X", "name": "pool", "pid": 1, "tid": 1, "ts": 75, "dur": 20,
         "args": {"command_id": 2}},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 100},
        {"ph": "X", "name": "Method::execute", "pid": 1, "tid": 2, "ts": 5, "dur": 50},
        {"ph": "X", "name": "pool", "pid": 1, "tid": 2, "ts": 10, "dur": 30,
         "args": {"command_id": 2}},
    ]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_three_levels_two_threads_exclusive_times(tmp_path: Path) -> None:
    att = trace_join(nested_chrome(tmp_path), fused_provenance(), policy="macs")
    att.check()
    assert att.nested
    # wall time of the top-level spans: 100 us on thread 1, 50 us on thread 2
    assert att.total_ns == 150 * US
    # op 0: delegate self 60 - 20 - 20, k0 20, k1 20; op 1: 20 on thread 1, 30 on thread 2
    layers = att.by_layer().set_index("layer")
    assert layers.loc["model/conv", "total_ns"] == 36 * US  # 60 us x 6/10
    assert layers.loc["model/bias", "total_ns"] == 18 * US
    assert layers.loc["model/relu", "total_ns"] == 6 * US
    assert layers.loc["model/pool", "total_ns"] == 50 * US
    # inclusive: the delegate counted whole (its kernels twice): 100 us for op 0
    assert layers.loc["model/conv", "inclusive_ns"] == 60 * US
    assert layers.loc["model/pool", "inclusive_ns"] == 50 * US
    # the wrappers' own time is a named bucket, not unattributed
    over = att.overhead()
    assert over["bucket"].tolist() == ["dispatch overhead of Method::execute"]
    assert over["total_ns"].tolist() == [40 * US] and over["events"].tolist() == [2]
    assert over["inclusive_ns"].tolist() == [150 * US]
    assert att.unattributed_ns == 0 and len(att.unattributed()) == 0
    assert att.attributed_ns + att.overhead_ns == att.total_ns == 150 * US
    assert att.summary()["tracks"] == 2


def test_bad_rows_are_kept_with_a_problem(tmp_path: Path) -> None:
    ev = [
        {"ph": "X", "name": "w", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 10, "dur": 10,
         "args": {"command_id": 2}},
        {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 20, "args": {"command_id": 0}},
        {"ph": "X", "name": "neg", "pid": 1, "tid": 1, "ts": 30, "dur": -5,
         "args": {"command_id": 0}},
        {"ph": "B", "name": "back", "pid": 1, "tid": 2, "ts": 40, "args": {"command_id": 1}},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 35},
    ]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    trace = read_trace(path)
    att = trace_join(trace, fused_provenance())
    att.check()
    un = att.unattributed().set_index("name")
    assert len(att.trace.events) == len(trace.events)  # nothing dropped
    assert "E" in un.loc["open", "reason"]  # B without E
    assert un.loc["neg", "reason"] == "negative duration"
    assert un.loc["back", "reason"] == "negative duration"  # time went backwards
    # the bad rows are in no tree: w holds only k
    assert att.overhead()["total_ns"].tolist() == [40 * US]
    assert att.attributed_ns == 10 * US
    assert att.attributed_ns + att.overhead_ns + att.unattributed_ns == att.total_ns


def test_partial_overlaps_keep_todays_rule_and_are_reported() -> None:
    frame = pd.DataFrame({"command_id": [2, 0, 1, 2], "tid": [1, 1, 1, 1],
                          "start_ns": [0, 10, 30, 200], "dur_ns": [100, 30, 20, 10]})
    # 0 holds 1; 2 starts inside 1 and ends after it: overlapping
    att = trace_join(frame, fused_provenance())
    att.check()
    assert att.unattributed()["event_id"].tolist() == [2]
    assert att.unattributed()["reason"].tolist() == ["overlaps an earlier event on its track"]
    assert att.summary()["overlapping_events"] == 1
    assert att.attributed_ns == (100 - 30) + 30 + 10


# --------------------------------------------------------------------------------------------
# Against a per-event reference


def reference_self(start: list[int], dur: list[int], track: list[int]) -> list[int]:
    """Self time of every span by brute force: its duration minus that of every span whose
    innermost enclosing span it is (spans ordered by start, longer first, then row)."""
    n = len(start)
    order = sorted(range(n), key=lambda i: (track[i], start[i], -(start[i] + dur[i]), i))
    rank = {i: r for r, i in enumerate(order)}
    out = list(dur)
    for i in range(n):
        if dur[i] <= 0:
            continue
        parents = [j for j in range(n) if j != i and dur[j] > 0 and track[j] == track[i]
                   and rank[j] < rank[i] and start[j] <= start[i]
                   and start[j] + dur[j] >= start[i] + dur[i]]
        if parents:
            p = max(parents, key=lambda j: rank[j])
            out[p] -= dur[i]
    return out


@st.composite
def laminar(draw: Any) -> tuple[list[int], list[int], list[int]]:
    """Properly nested spans on up to three tracks, in random row order."""
    spans: list[tuple[int, int, int]] = []

    def fill(lo: int, hi: int, depth: int, track: int) -> None:
        t = lo
        while t < hi and len(spans) < 40:
            if draw(st.booleans()):
                t += draw(st.integers(0, 5))
            length = draw(st.integers(0, max(0, hi - t)))
            if length == 0 and draw(st.booleans()):
                break
            spans.append((t, length, track))
            if depth < 3 and length > 2:
                fill(t, t + length, depth + 1, track)
            t += length
            if draw(st.booleans()):
                break

    for track in range(draw(st.integers(1, 3))):
        fill(0, draw(st.integers(1, 400)), 0, track)
    perm = draw(st.permutations(range(len(spans))))
    spans = [spans[i] for i in perm]
    return [s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(laminar())
def test_self_times_match_the_reference(spans: tuple[list[int], list[int], list[int]]) -> None:
    start, dur, track = spans
    n = len(start)
    tree = span_tree(np.array(start, np.int64), np.array(dur, np.int64), np.ones(n, bool),
                     np.array(track, np.int64) if len(set(track)) > 1 else None)
    assert tree.self_ns.tolist() == reference_self(start, dur, track)
    assert len(tree.overlapping) == 0
    assert (tree.self_ns >= 0).all()
    # conservation: self times sum to the durations of the top-level spans
    top = sum(d for d, p in zip(dur, tree.parent.tolist()) if p < 0)
    assert int(tree.self_ns.sum()) == top


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(laminar(), st.data())
def test_join_of_nested_commands_conserves_wall_time(spans: tuple[list[int], list[int],
                                                                  list[int]],
                                                     data: Any) -> None:
    start, dur, track = spans
    n = len(start)
    keyed = data.draw(st.lists(st.sampled_from([0, 1, 2, None]), min_size=n, max_size=n))
    frame = pd.DataFrame({"command_id": pd.array(keyed, dtype="Int64"), "tid": track,
                          "start_ns": start, "dur_ns": dur})
    att = trace_join(frame, fused_provenance(), strict=False)
    att.check()
    self_ns = reference_self(start, dur, track)
    assert att.total_ns == sum(self_ns)
    assert att.attributed_ns + att.overhead_ns + att.unattributed_ns == att.total_ns
    want_attributed = sum(s for s, k in zip(self_ns, keyed) if k is not None)
    assert att.attributed_ns == want_attributed


@st.composite
def any_spans(draw: Any) -> pd.DataFrame:
    """Spans in any arrangement: nested, overlapping, negative, zero, on two tracks."""
    n = draw(st.integers(0, 30))
    start = draw(st.lists(st.integers(0, 200), min_size=n, max_size=n))
    dur = draw(st.lists(st.integers(-5, 120), min_size=n, max_size=n))
    tid = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    key = draw(st.lists(st.sampled_from([0, 1, 2, None]), min_size=n, max_size=n))
    return pd.DataFrame({"command_id": pd.array(key, dtype="Int64"), "tid": tid,
                         "start_ns": pd.array(start, dtype="int64"),
                         "dur_ns": pd.array(dur, dtype="int64")})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_spans())
def test_any_arrangement_conserves_time(frame: pd.DataFrame) -> None:
    att = trace_join(frame, fused_provenance(), strict=False)
    att.check()
    dur = frame["dur_ns"].to_numpy()
    un = att.unattributed()
    # every bad row is kept and unattributed with its problem
    negative = set(np.flatnonzero(dur < 0).tolist())
    assert negative <= set(un["event_id"].tolist())
    assert (un.set_index("event_id").loc[sorted(negative), "reason"].astype(str)
            == "negative duration").all()
    # exclusive times are never negative for spans in a tree; buckets add up
    tree = span_tree(frame["start_ns"].to_numpy(), dur, np.ones(len(dur), bool),
                     frame["tid"].to_numpy() if len(frame) else None)
    in_tree = (dur > 0) & ~np.isin(np.arange(len(dur)), tree.overlapping)
    assert (tree.self_ns[in_tree] >= 0).all()
    assert att.total_ns == int(np.where(dur < 0, 0, tree.self_ns).sum())  # negative: 0 ns
    assert att.attributed_ns + att.overhead_ns + att.unattributed_ns == att.total_ns
    overlapping = set(tree.overlapping.tolist())
    reasons = dict(zip(un["event_id"], un["reason"].astype(str)))
    assert all(reasons[i] in ("overlaps an earlier event on its track", "no key")
               for i in overlapping)  # a row keeps its first reason
    # an overlapping span starts inside an earlier span of its track and ends after it
    s, e, t = frame["start_ns"].to_numpy(), frame["start_ns"].to_numpy() + dur, frame["tid"]
    for i in overlapping:
        assert any(t[j] == t[i] and dur[j] > 0 and s[j] <= s[i] < e[j] < e[i]
                   for j in range(len(dur)) if j != i)


def test_flat_traces_have_no_overhead_and_keep_dtypes() -> None:
    frame = pd.DataFrame({"command_id": [0, 2], "start_ns": [0, 100], "dur_ns": [50, 50]})
    att = trace_join(frame, fused_provenance())
    assert not att.nested and att.overhead_ns == 0
    over = att.overhead()
    assert len(over) == 0
    assert list(over.columns) == ["bucket", "name", "total_ns", "share", "events",
                                  "inclusive_ns", "avg_ms", "min_ms", "p10_ms", "p50_ms",
                                  "p90_ms", "max_ms"]
    assert over["total_ns"].dtype == np.int64
    layers = att.by_layer()
    assert (layers["inclusive_ns"] == layers["total_ns"]).all()


def test_deep_nesting_matches_the_reference() -> None:
    """Twelve levels (more than the per-level pass takes: the depth-sorted path) with
    siblings at every level, in shuffled rows."""
    start: list[int] = []
    dur: list[int] = []
    for level in range(12):
        lo, length = 10 * level, 1000 - 20 * level
        start += [lo, 5000 + 100 * level]  # the chain's span and a lone span far after
        dur += [length, 3 + level]
        start.append(lo + 1)  # a leaf inside this level's span, before the next level
        dur.append(2)
    order = np.random.default_rng(4).permutation(len(start))
    start = [start[i] for i in order]
    dur = [dur[i] for i in order]
    tree = span_tree(np.array(start, np.int64), np.array(dur, np.int64),
                     np.ones(len(start), bool), None)
    assert tree.self_ns.tolist() == reference_self(start, dur, [0] * len(start))
    assert len(tree.overlapping) == 0 and tree.nested
