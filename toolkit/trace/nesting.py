"""Span trees per track and each span's exclusive (self) time.

Real traces nest: a ``Method::execute`` span holds operator spans, a delegate call holds its
kernels, a profiler's Chrome trace has parents and children on one thread. On each track
(``pid``/``tid``, or the tracer's ``track``), spans are ordered by start (ties: the longer
first); a span's *parent* is the innermost earlier span that is still open when it starts and
ends no earlier than it does. A span's **self time** is its duration minus the durations of
its children, so the self times of a tree add up to the duration of its root, exactly.

A span that starts inside an earlier span and ends after it (two spans that overlap without
nesting, e.g. async work on one track) is *overlapping*: it is left out of the tree (its self
time is its whole duration) and reported, as are spans with a negative duration or a problem
flagged by the reader (never part of a tree). Spans of zero duration are leaves of no parent
(their time is 0 either way).

Vectorised: depths come from counting the spans still open at each start (one sort of the end
times), parents from the last span one level up (one search per level), so a trace of millions
of events with a few levels costs a few sorts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toolkit.trace.split import group_sum

__all__ = ["SpanTree", "span_tree"]

_MAX_ROUNDS = 256
_FEW_LEVELS = 8


@dataclass
class SpanTree:
    """Nesting of a trace's events.

    Attributes:
        self_ns: ``int64`` per event: duration minus the children's durations (the duration
            for events outside any tree).
        parent: ``int64`` per event: row of the parent span, -1 for roots and events outside
            the trees.
        children: ``int64`` per event: number of direct children.
        overlapping: ``int64`` rows of spans that overlap an earlier span without nesting.
        nested: True when some event has a parent.
    """

    self_ns: np.ndarray
    parent: np.ndarray
    children: np.ndarray
    overlapping: np.ndarray
    nested: bool


def _flat(n: int, dur: np.ndarray) -> SpanTree:
    return SpanTree(dur.copy(), np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64),
                    np.zeros(0, dtype=np.int64), False)


def _order(s: np.ndarray, e: np.ndarray, track: np.ndarray | None) -> np.ndarray:
    """Order by (track, start, longer first); identity when already so."""
    if track is None:
        if len(s) < 2 or bool((s[1:] > s[:-1]).all()):
            return np.arange(len(s), dtype=np.int64)
        order = np.argsort(s, kind="stable")  # starts rarely tie: then no second key needed
        ordered = s[order]
        if not bool((ordered[1:] == ordered[:-1]).any()):
            return order
        return np.lexsort((-e, s))
    return np.lexsort((-e, s, track))


def _shifted(s: np.ndarray, e: np.ndarray, track: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Times of each track moved above the previous tracks' (tracks never touch)."""
    if track is None or len(s) == 0:
        return s, e
    low = int(s.min())
    span = int(e.max()) - low + 1
    codes = np.unique(track, return_inverse=True)[1].reshape(-1).astype(np.int64)
    if (int(codes.max()) + 1) * span >= (1 << 62):
        raise OverflowError("time span too large to shift tracks")
    base = codes * span - low
    return s + base, e + base


def _parents(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(parent position or -1, depth)`` for spans sorted by (start, longer first), assuming
    they nest; positions index the sorted arrays."""
    m = len(s)
    ends = np.sort(e, kind="stable")  # nearly sorted in start order: a merge sort is quick
    depth = np.arange(m, dtype=np.int64) - np.searchsorted(ends, s, side="right")
    parent = np.full(m, -1, dtype=np.int64)
    if m == 0 or int(depth.max()) == 0:
        return parent, depth
    top = int(depth.max())
    if top <= _FEW_LEVELS:  # a few levels: one pass per level, no sort
        levels = [np.flatnonzero(depth == d) for d in range(top + 1)]
    else:
        by_depth = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[by_depth], np.arange(top + 2))
        levels = [by_depth[bounds[d]:bounds[d + 1]] for d in range(top + 1)]
    for d in range(1, top + 1):
        up = levels[d - 1]
        here = levels[d]
        if len(here) == 0:
            continue
        at = np.searchsorted(up, here) - 1
        parent[here] = np.where(at >= 0, up[np.maximum(at, 0)], -1)
    return parent, depth


def span_tree(start: np.ndarray, dur: np.ndarray, valid: np.ndarray,
              tracks: np.ndarray | None) -> SpanTree:
    """Build the span trees of a trace and return every event's self time.

    Args:
        start, dur: ``int64`` per event (nanoseconds).
        valid: ``bool`` per event: may take part (no reader problem); events with a negative
            duration never take part.
        tracks: ``int64`` track code per event, or None for one track.

    Returns:
        A :class:`SpanTree`. The self times of the events in trees sum to the durations of
        their roots; every other event keeps its duration.
    """
    n = len(dur)
    dur = np.asarray(dur, dtype=np.int64)
    rows = np.flatnonzero(valid & (dur > 0))
    if len(rows) < 2:
        return _flat(n, dur)
    s = start[rows]
    e = s + dur[rows]
    track = tracks[rows] if tracks is not None else None
    if track is None and bool((s[1:] >= e[:-1]).all()):
        return _flat(n, dur)  # one track, one span after another: the common case
    order = _order(s, e, track)
    rows, s, e = rows[order], s[order], e[order]
    if track is not None:
        track = track[order]
        same = track[1:] == track[:-1]
        if not bool(((s[1:] < e[:-1]) & same).any()):
            return _flat(n, dur)  # on every track, one span after another
    try:
        ss, ee = _shifted(s, e, track)
    except OverflowError:
        assert tracks is not None  # only tracks are shifted
        return _per_track(start, dur, valid, tracks)
    keep = np.ones(len(rows), dtype=bool)
    over: list[np.ndarray] = []
    parent = np.full(0, -1, dtype=np.int64)
    pos = np.arange(len(rows))
    for _ in range(_MAX_ROUNDS):
        pos = np.flatnonzero(keep)
        e_pos = ee[pos] if len(pos) < len(ee) else ee
        parent, _depth = _parents(ss[pos] if len(pos) < len(ss) else ss, e_pos)
        # a span ending after its parent does (no parent: -1 reads a harmless last element)
        bad = (parent >= 0) & (e_pos > e_pos[parent])
        if not bad.any():
            break
        # a violation is certain only when no earlier violator is still open at its start
        # (an open straddler miscounts the depths after it): those go now, the rest are
        # looked at again without them
        at = pos[bad]
        ends = ee[at]
        reach = np.maximum.accumulate(ends)
        prior = np.r_[np.iinfo(np.int64).min, reach[:-1]]
        sure = at[prior <= ss[at]]
        over.append(rows[sure])
        keep[sure] = False
    else:  # pathological input: whatever still straddles stays out of the trees
        has = parent >= 0
        bad = np.zeros(len(pos), dtype=bool)
        bad[has] = ee[pos][has] > ee[pos][parent[has]]
        over.append(rows[pos[bad]])
        keep[pos[bad]] = False
        pos = np.flatnonzero(keep)
        parent = np.full(len(pos), -1, dtype=np.int64)
    in_tree = rows[pos]
    parent_row = np.full(n, -1, dtype=np.int64)
    has = parent >= 0
    parent_row[in_tree[has]] = in_tree[parent[has]]
    child_ns = np.zeros(n, dtype=np.int64)
    children = np.zeros(n, dtype=np.int64)
    if has.any():
        kids = in_tree[has]
        child_ns = group_sum(parent_row[kids], dur[kids], n)
        children = np.bincount(parent_row[kids], minlength=n).astype(np.int64)
    overlapping = np.sort(np.concatenate(over)) if over else np.zeros(0, dtype=np.int64)
    return SpanTree(dur - child_ns, parent_row, children, overlapping, bool(has.any()))


def _per_track(start: np.ndarray, dur: np.ndarray, valid: np.ndarray, tracks: np.ndarray
               ) -> SpanTree:
    """:func:`span_tree` one track at a time (times too far apart to shift together)."""
    n = len(dur)
    out = _flat(n, dur)
    over: list[np.ndarray] = []
    for code in np.unique(tracks[valid]).tolist():
        mask = valid & (tracks == code)
        one = span_tree(start, dur, mask, None)
        rows = np.flatnonzero(mask)
        out.self_ns[rows] = one.self_ns[rows]
        out.parent[rows] = one.parent[rows]
        out.children[rows] = one.children[rows]
        over.append(one.overlapping)
        out.nested |= one.nested
    out.overlapping = np.sort(np.concatenate(over)) if over else out.overlapping
    return out
