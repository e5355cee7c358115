"""Exact integer arithmetic for trace-join: splitting durations by weights, summing by group.

Both functions are vectorised over all events; neither loses a nanosecond.
"""

from __future__ import annotations

import numpy as np

__all__ = ["split_by_weights", "group_sum", "MAX_TOTAL_WEIGHT"]

#: A target's weights are scaled down (ratios kept to 1 part in 2**31) when they sum above
#: this, so that ``remainder * weight`` stays inside ``int64``.
MAX_TOTAL_WEIGHT = 1 << 31
_EXACT_FLOAT = 1 << 53


def split_by_weights(dur: np.ndarray, first: np.ndarray, count: np.ndarray, total: np.ndarray,
                     weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each duration over its members in proportion to integer weights, exactly.

    Event ``i`` has members ``first[i] .. first[i] + count[i] - 1`` (indices into ``weight``)
    whose weights sum to ``total[i]`` (``1 <= total[i] <= MAX_TOTAL_WEIGHT``). Member ``j``
    gets ``floor(dur[i] * weight[j] / total[i])``; the ``r`` nanoseconds left over (``r <
    count[i]``) go one each to the ``r`` members with the largest remainders
    ``dur[i] * weight[j] mod total[i]``, ties to the member listed first (largest remainder,
    Hamilton's method). A member of weight 0 never gets a share.

    Args:
        dur: ``int64`` durations (>= 0), one per event.
        first, count, total: ``int64`` per event, as above (``count >= 1``).
        weight: ``int64`` member weights (>= 0).

    Returns:
        ``(event, member, ns)``: ``int64`` arrays, one element per (event, member) pair, events
        in input order and members in listed order; ``ns`` of one event sums to its ``dur``.
    """
    n = len(dur)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    sizes = np.unique(count)
    if len(sizes) == 1 and sizes[0] == 1:  # no op splits: one pair per event
        return np.arange(n, dtype=np.int64), first.astype(np.int64), dur.astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    pairs = int(offsets[-1])
    event = np.repeat(np.arange(n, dtype=np.int64), count)
    member = np.empty(pairs, dtype=np.int64)
    ns = np.empty(pairs, dtype=np.int64)
    if len(sizes) <= 16:
        groups = [(int(k), np.flatnonzero(count == k)) for k in sizes]
    else:
        order = np.argsort(count, kind="stable")
        bounds = np.searchsorted(count[order], sizes, side="left")
        ends = np.append(bounds[1:], n)
        groups = [(int(k), order[b:e]) for k, b, e in zip(sizes, bounds, ends)]
    for k, rows in groups:
        out_pos = offsets[rows]
        if k == 1:
            member[out_pos] = first[rows]
            ns[out_pos] = dur[rows]
            continue
        cols = np.arange(k, dtype=np.int64)
        idx = first[rows][:, None] + cols[None, :]
        w = weight[idx]
        d = dur[rows]
        tot = total[rows]
        q, r = np.divmod(d, tot)
        prod = r[:, None] * w  # < total * max weight <= 2**62
        tot2 = tot[:, None]
        base = prod // tot2
        share = q[:, None] * w + base
        left = d - share.sum(axis=1)
        if left.any():
            rem = prod - base * tot2
            order = np.argsort(-rem, axis=1, kind="stable")
            bonus = (cols[None, :] < left[:, None]).astype(np.int64)
            np.put_along_axis(share, order, np.take_along_axis(share, order, axis=1) + bonus,
                              axis=1)
        place = out_pos[:, None] + cols[None, :]
        member[place] = idx
        ns[place] = share
    return event, member, ns


def group_sum(groups: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Return the exact ``int64`` sum of ``values`` per group ``0 .. size-1``.

    ``np.bincount`` with float weights is exact while every partial sum stays below 2**53;
    larger totals are summed in three 21-bit slices (``values`` >= 0) or with ``np.add.at``.
    """
    values = np.asarray(values, dtype=np.int64)
    if len(values) == 0:
        return np.zeros(size, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if low >= 0 and high * len(values) < _EXACT_FLOAT:
        return np.rint(np.bincount(groups, weights=values, minlength=size)).astype(np.int64)
    if low >= 0 and len(values) < (1 << 31):
        out = np.zeros(size, dtype=np.int64)
        mask = (1 << 21) - 1
        for shift in (0, 21, 42):
            part = np.bincount(groups, weights=(values >> shift) & mask, minlength=size)
            out += np.rint(part).astype(np.int64) << shift
        return out
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, groups, values)
    return out
