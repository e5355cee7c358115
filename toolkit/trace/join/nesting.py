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
times, merged with the starts), parents from the last span one level up (one merge per
level), so a trace of millions of events with a few levels costs a few linear passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toolkit.trace.join.split import group_sum

__all__ = ["SpanTree", "span_tree", "structural_tree"]

_MAX_ROUNDS = 256
_BLOCK = 1 << 16


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

    When no span holds another, the arrays are read-only views (``self_ns`` shares the
    durations' memory): copy before writing.
    """

    self_ns: np.ndarray
    parent: np.ndarray
    children: np.ndarray
    overlapping: np.ndarray
    nested: bool


def _flat(n: int, dur: np.ndarray) -> SpanTree:
    return SpanTree(dur.copy(), np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64),
                    np.zeros(0, dtype=np.int64), False)


def _no_trees(n: int, dur: np.ndarray) -> SpanTree:
    """The result when no span holds another: read-only views (``self_ns`` is ``dur``
    itself; ``parent`` -1 and ``children`` 0 without a row of memory each)."""
    self_ns = dur.view()
    self_ns.flags.writeable = False
    return SpanTree(self_ns, np.broadcast_to(np.int64(-1), (n,)),
                    np.broadcast_to(np.int64(0), (n,)), np.zeros(0, dtype=np.int64), False)


def _one_after_another(start: np.ndarray, dur: np.ndarray) -> bool:
    """True when each span starts at or after the end of the one before it, checked block by
    block (temporaries the size of a block)."""
    n = len(start)
    for b0 in range(0, n - 1, _BLOCK):
        b1 = min(n - 1, b0 + _BLOCK)
        if not bool((start[b0 + 1:b1 + 1] >= start[b0:b1] + dur[b0:b1]).all()):
            return False
    return True


def _in_order(s: np.ndarray, e: np.ndarray, track: np.ndarray | None) -> bool:
    """True when spans are already ordered by (track, start, longer first) (ties in all
    three keep their order, as a stable sort would)."""
    s0, s1 = s[:-1], s[1:]
    later = s1 > s0
    ok = later | ((s1 == s0) & (e[1:] <= e[:-1]))
    if track is not None:
        t0, t1 = track[:-1], track[1:]
        ok = (t1 > t0) | ((t1 == t0) & ok)
    return bool(ok.all())


def _order(s: np.ndarray, e: np.ndarray, track: np.ndarray | None) -> np.ndarray | None:
    """Order by (track, start, longer first); None when already so (a trace is most often
    written in start order)."""
    if len(s) < 2 or _in_order(s, e, track):
        return None
    if track is None:
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


def _before(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """For each of ``high`` (ascending), how many of ``low`` (ascending) sort before it
    (ties: ``low`` first), as ``searchsorted(low, high, side="right")``.

    Block by block of ``high``, one stable merge of two sorted runs (a linear pass, not a
    binary search per element), with temporaries the size of a block."""
    out = np.empty(len(high), dtype=np.int64)
    for b0 in range(0, len(high), _BLOCK):
        h = high[b0:b0 + _BLOCK]
        lo, hi = np.searchsorted(low, h[[0, -1]], side="right").tolist()
        order = np.argsort(np.concatenate([low[lo:hi], h]), kind="stable")
        out[b0:b0 + len(h)] = np.flatnonzero(order >= hi - lo)
        out[b0:b0 + len(h)] -= np.arange(len(h), dtype=np.int64) - lo
    return out


def _take_or_none(values: np.ndarray, at: np.ndarray, own: bool = False) -> np.ndarray:
    """``values[at]`` where ``at >= 0``, else -1 (``own``: ``at`` may be overwritten)."""
    none = at < 0
    out = values[np.maximum(at, 0, out=at if own else None)]
    out[none] = -1
    return out


def _last_before(up: np.ndarray, here: np.ndarray) -> np.ndarray:
    """For each of ``here`` (ascending), the last of ``up`` (ascending, disjoint) below it,
    -1 when none."""
    at = _before(up, here)
    at -= 1
    return _take_or_none(up, at, own=True)


def _parents(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(parent position or -1, depth)`` for spans sorted by (start, longer first), assuming
    they nest; positions index the sorted arrays.

    A span's depth is the number of earlier spans still open at its start; its parent is the
    last earlier span one level up."""
    m = len(s)
    if m == 0:
        return np.full(0, -1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ends = np.sort(e, kind="stable")  # nearly sorted in start order: a merge sort is quick
    depth = _before(ends, s)
    del ends
    np.subtract(np.arange(m, dtype=np.int64), depth, out=depth)
    parent = np.full(m, -1, dtype=np.int64)
    top = int(depth.max())
    if top == 0:
        return parent, depth
    narrow = np.int8 if top < 1 << 7 else np.int16 if top < 1 << 15 else np.int64
    by_depth = np.argsort(depth.astype(narrow), kind="stable")  # a radix sort when narrow
    bounds = np.r_[0, np.cumsum(np.bincount(depth, minlength=top + 1))]
    for d in range(1, top + 1):
        up = by_depth[bounds[d - 1]:bounds[d]]
        here = by_depth[bounds[d]:bounds[d + 1]]
        if len(here) == 0:
            continue
        parent[here] = _last_before(up, here)
    return parent, depth


def structural_tree(event_id: np.ndarray, parent_id: np.ndarray, dur: np.ndarray
                    ) -> SpanTree:
    """The span trees a reader recorded (``parent_id``: the ``event_id`` of each event's
    parent, -1 at the top), as :func:`span_tree` returns them for nesting by time.

    The reader vouches for its links (ExecuTorch: a kernel belongs to its instruction's span
    by instruction id, whatever the clock says), so no span is *overlapping*. An event with a
    negative duration takes no part (its time is 0, nothing is taken from its parent); a
    parent id that is not in the trace (its run was skipped) makes a root. A span whose
    children last longer than it (flagged by the reader) keeps its links:
    its self time is negative, so the self times still add up to the roots' durations.
    """
    n = len(dur)
    dur = np.asarray(dur, dtype=np.int64)
    event_id = np.asarray(event_id, dtype=np.int64)
    parent_id = np.asarray(parent_id, dtype=np.int64)
    order = None if n < 2 or bool((event_id[1:] > event_id[:-1]).all()) else \
        np.argsort(event_id, kind="stable")
    ids = event_id if order is None else event_id[order]
    at = np.searchsorted(ids, parent_id) if n else np.zeros(0, dtype=np.int64)
    at = np.minimum(at, max(n - 1, 0))
    found = (parent_id >= 0) & (ids[at] == parent_id) if n else np.zeros(0, dtype=bool)
    row = at if order is None else order[at]
    parent_row = np.where(found, row, -1).astype(np.int64)
    parent_row[dur < 0] = -1
    if n:
        parent_row[(parent_row >= 0) & (dur[np.maximum(parent_row, 0)] < 0)] = -1
    kids = np.flatnonzero(parent_row >= 0)
    nested = bool(len(kids))
    of = parent_row[kids]
    self_ns = dur - group_sum(of, dur[kids], n) if nested else dur.copy()
    children = np.bincount(of, minlength=n).astype(np.int64) if nested else \
        np.zeros(n, dtype=np.int64)
    return SpanTree(self_ns, parent_row, children, np.zeros(0, dtype=np.int64), nested)


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
    taking_part = valid & (dur > 0)
    if tracks is None and taking_part.all() and _one_after_another(start, dur):
        return _no_trees(n, dur)  # one track, one span after another: the common case
    rows = np.flatnonzero(taking_part)
    del taking_part
    if len(rows) < 2:
        return _no_trees(n, dur)
    s = start[rows]
    e = s + dur[rows]
    track = tracks[rows] if tracks is not None else None
    if track is None and bool((s[1:] >= e[:-1]).all()):
        return _no_trees(n, dur)  # one track, one span after another
    order = _order(s, e, track)
    if order is not None:
        rows, s, e = rows[order], s[order], e[order]
        if track is not None:
            track = track[order]
        del order
    if track is not None:
        same = track[1:] == track[:-1]
        if not bool(((s[1:] < e[:-1]) & same).any()):
            return _no_trees(n, dur)  # on every track, one span after another
    try:
        ss, ee = _shifted(s, e, track)
    except OverflowError:
        assert tracks is not None  # only tracks are shifted
        return _per_track(start, dur, valid, tracks)
    m = len(rows)
    keep = np.ones(m, dtype=bool)
    over: list[np.ndarray] = []
    # parent (a position, -1) of every position, recomputed each round only for the trees
    # that lost a span: a span at depth 0 closes every earlier one, so the spans between two
    # depth-0 spans form a segment whose depths and parents depend on that segment alone
    gparent = np.full(0, -1, dtype=np.int64)
    sub: np.ndarray | None = None  # the positions recomputed this round (None: all)
    segment: np.ndarray = np.zeros(0, dtype=np.int64)
    sure = np.zeros(0, dtype=np.int64)
    for _ in range(_MAX_ROUNDS):
        if sub is None:
            e_sub = ee
            local, depth = _parents(ss, ee)
            gparent = local
            segment = np.cumsum(depth == 0, dtype=np.int32 if m < 1 << 31 else np.int64) - 1
            del depth
        else:
            e_sub = ee[sub]
            local, _depth = _parents(ss[sub], e_sub)
            del _depth
            gparent[sub] = _take_or_none(sub, local)
        # a span ending after its parent does (no parent: -1 reads a harmless last element)
        bad = (local >= 0) & (e_sub > e_sub[local])
        if not bad.any():
            break
        # a violation is certain only when no earlier violator is still open at its start
        # (an open straddler miscounts the depths after it): those go now, the rest are
        # looked at again without them
        at = np.flatnonzero(bad) if sub is None else sub[bad]
        ends = ee[at]
        reach = np.maximum.accumulate(ends)
        prior = np.r_[np.iinfo(np.int64).min, reach[:-1]]
        sure = at[prior <= ss[at]]
        over.append(rows[sure])
        keep[sure] = False
        hit = np.zeros(int(segment[-1]) + 1, dtype=bool)
        hit[segment[sure]] = True
        del local, e_sub, bad, at
        sub = np.flatnonzero(keep & hit[segment])
    else:  # pathological input: whatever still straddles stays out of the trees
        was = keep.copy()
        was[sure] = True
        pos = np.flatnonzero(was)
        parent = gparent[pos]
        has = parent >= 0
        bad = np.zeros(len(pos), dtype=bool)
        bad[has] = ee[pos][has] > ee[parent[has]]
        over.append(rows[pos[bad]])
        keep[pos[bad]] = False
        gparent[:] = -1
    del ss, ee, s, e, segment, sub
    has = keep & (gparent >= 0)
    kids = rows[has]
    parent_row = np.full(n, -1, dtype=np.int64)
    parent_row[kids] = rows[gparent[has]]
    del gparent, keep, rows
    nested = bool(len(kids))
    if nested:
        of = parent_row[kids]
        self_ns = dur - group_sum(of, dur[kids], n)
        children = np.bincount(of, minlength=n).astype(np.int64, copy=False)
        del of
    else:
        self_ns, children = dur.copy(), np.zeros(n, dtype=np.int64)
    overlapping = np.sort(np.concatenate(over)) if over else np.zeros(0, dtype=np.int64)
    return SpanTree(self_ns, parent_row, children, overlapping, nested)


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
