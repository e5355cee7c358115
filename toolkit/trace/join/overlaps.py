"""Find events that would attribute the same nanoseconds twice: enclosing and overlapping ones.

On one track (``pid``/``tid``, or the tracer's ``track``), in order of start time (ties: the
longer event first):

* an event **encloses** others when the event right after it starts before it ends and ends
  no later: it is a parent (a wrapper, a delegate call around its ops) whose children carry
  the detail;
* an event **overlaps** when it starts before some earlier event ends and ends after all
  earlier events end: neither nests in the other.

Only the events given as candidates take part (matched events with a positive duration).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["find_overlaps", "track_codes"]

_MIN = np.iinfo(np.int64).min
_BLOCK = 1 << 17


def track_codes(events: pd.DataFrame) -> np.ndarray | None:
    """Track code of each event (``int64``), or None when all events share one track."""
    code: np.ndarray | None = None
    for column in ("pid", "tid", "track"):
        if column not in events.columns:
            continue
        values = events[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            c = values.cat.codes.to_numpy().astype(np.int64)
            size = len(values.cat.categories) + 1
        elif isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu":
            array = values.to_numpy()
            if len(array) == 0 or array.min() == array.max():
                continue
            c, u = pd.factorize(array)
            size = len(u) + 1
        else:
            c, u = pd.factorize(values.astype(object).to_numpy())
            size = len(u) + 1
        c = np.asarray(c, dtype=np.int64)
        if len(c) == 0 or c.min() == c.max():
            continue
        code = c if code is None else code * size + c
    return code


def _sorted_pass(start: np.ndarray, dur: np.ndarray, candidate: np.ndarray
                 ) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Block-by-block pass for one track whose candidate starts strictly increase.

    Returns ``(enclosing rows, overlapping rows)`` as lists of arrays, or None when the starts
    do not strictly increase (the caller then sorts).
    """
    n = len(start)
    enclosing: list[np.ndarray] = []
    overlapping: list[np.ndarray] = []
    last_s = last_e = before_last = _MIN  # the last candidate seen, max end before it
    last_row = -1
    last_overlaps = False
    for b0 in range(0, n, _BLOCK):
        b1 = min(n, b0 + _BLOCK)
        idx = np.flatnonzero(candidate[b0:b1])
        if len(idx) == 0:
            continue
        idx += b0
        s = start[idx]
        e = s + dur[idx]
        if s[0] <= last_s or (len(s) > 1 and bool((s[1:] <= s[:-1]).any())):
            return None
        reach = max(before_last, last_e)
        if s[0] >= reach and (len(s) == 1 or bool((s[1:] >= e[:-1]).all())):
            before_last = max(reach, int(e[:-1].max()) if len(e) > 1 else reach)
            last_s, last_e, last_row, last_overlaps = int(s[-1]), int(e[-1]), int(idx[-1]), False
            continue
        carried = last_row >= 0
        if carried:
            S = np.concatenate([[last_s], s])
            E = np.concatenate([[last_e], e])
            rows = np.concatenate([[last_row], idx])
        else:
            S, E, rows = s, e, idx
        m = len(S)
        enc = np.zeros(m, dtype=bool)
        enc[:-1] = (S[1:] < E[:-1]) & (E[1:] <= E[:-1])
        running = np.maximum(np.maximum.accumulate(E), before_last)
        prior = np.empty(m, dtype=np.int64)
        prior[0] = before_last
        prior[1:] = running[:-1]
        over = (prior > S) & (prior < E)
        if carried:
            over[0] = last_overlaps
        enc &= ~over
        first = 1 if carried else 0
        enclosing.append(rows[enc])
        overlapping.append(rows[first:][over[first:]])
        before_last = int(running[-2]) if m > 1 else before_last
        last_s, last_e, last_row = int(S[-1]), int(E[-1]), int(rows[-1])
        last_overlaps = bool(over[-1])
    return enclosing, overlapping


def _sorting_pass(start: np.ndarray, dur: np.ndarray, candidate: np.ndarray,
                  tracks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Any order, any number of tracks: sort by (track, start, longer first)."""
    rows = np.flatnonzero(candidate)
    m = len(rows)
    s = start[rows]
    e = s + dur[rows]
    track = tracks[rows] if tracks is not None else np.zeros(m, dtype=np.int64)
    order = np.lexsort((-e, s, track))
    s, e, track, rows = s[order], e[order], track[order], rows[order]
    enc = np.zeros(m, dtype=bool)
    over = np.zeros(m, dtype=bool)
    if m >= 2:
        same = track[1:] == track[:-1]
        enc[:-1] = same & (s[1:] < e[:-1]) & (e[1:] <= e[:-1])
        new_track = np.ones(m, dtype=bool)
        new_track[1:] = ~same
        starts = np.flatnonzero(new_track)
        lengths = np.diff(np.append(starts, m))
        # running max of ends within each track: shift each track above the previous ones
        low = int(s.min())
        span = int(e.max()) - low + 1
        if len(starts) * span < (1 << 62):
            base = np.repeat(np.arange(len(starts), dtype=np.int64) * span, lengths)
            running = np.maximum.accumulate(e - low + base) - base + low
        else:
            running = pd.Series(e).groupby(np.repeat(np.arange(len(starts)), lengths)
                                           ).cummax().to_numpy()
        prior = np.full(m, _MIN, dtype=np.int64)
        prior[1:] = np.where(same, running[:-1], _MIN)
        over = (s < prior) & (e > prior)
        enc &= ~over
    return rows[enc], rows[over]


def find_overlaps(start: np.ndarray, dur: np.ndarray, candidate: np.ndarray,
                  tracks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Return the rows (``int64``) of the candidate events that enclose others, and of those
    that overlap an earlier one (see the module docstring).

    Args:
        start, dur: ``int64`` per event.
        candidate: ``bool`` per event: takes part (``dur > 0`` is required too).
        tracks: ``int64`` track code per event, or None for one track.
    """
    candidate = candidate & (dur > 0)
    if tracks is None:
        found = _sorted_pass(start, dur, candidate)
        if found is not None:
            enc, over = found
            empty = np.zeros(0, dtype=np.int64)
            return (np.concatenate(enc) if enc else empty,
                    np.concatenate(over) if over else empty)
    return _sorting_pass(start, dur, candidate, tracks)
