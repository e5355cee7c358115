"""Exact integer arithmetic for trace-join: splitting durations by weights, summing by group.

Every function is vectorised over the events it is given (callers pass blocks of ~10^5
events so that temporaries stay in cache); none loses a nanosecond.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["TargetWeights", "split_targets", "split_by_weights", "split_grouped", "group_sum",
           "exact_int", "MAX_TOTAL_WEIGHT"]

#: A target's weights are scaled down (ratios kept to 1 part in 2**31) when they sum above
#: this, so that ``remainder * weight`` stays inside ``int64``.
MAX_TOTAL_WEIGHT = 1 << 31
_EXACT_FLOAT = 1 << 52
_PAIRWISE_MAX = 6  # members up to which ranks come from pairwise comparisons, not argsort
_TWO52 = float(1 << 52)
_TWO52_BITS = np.array([_TWO52]).view(np.int64)[0]


def _bonus(rem: np.ndarray, left: np.ndarray) -> np.ndarray:
    """``(k, m)`` 0/1: 1 for the ``left[i]`` members of event ``i`` with the largest remainder
    ``rem[:, i]`` (ties: the member listed first)."""
    k, m = rem.shape
    if k == 2:  # left is 0 or 1
        first = (rem[0] >= rem[1]) & (left > 0)
        return np.stack([first, (left > 0) & ~first]).astype(np.int64)
    if k <= _PAIRWISE_MAX:
        bonus = np.empty((k, m), dtype=np.int64)
        for j in range(k):
            col = rem[j]
            rank = np.zeros(m, dtype=np.int64)
            for i in range(k):
                if i < j:
                    rank += rem[i] >= col
                elif i > j:
                    rank += rem[i] > col
            np.less(rank, left, out=bonus[j], casting="unsafe")
        return bonus
    order = np.argsort(-rem, axis=0, kind="stable")
    bonus = np.zeros((k, m), dtype=np.int64)
    np.put_along_axis(bonus, order,
                      (np.arange(k)[:, None] < left[None, :]).astype(np.int64), axis=0)
    return bonus


class TargetWeights:
    """Member weights of every target, laid out for splitting many events at once.

    Target ``t`` has members ``first[t] .. first[t] + count[t] - 1`` (indices into
    ``weight``) whose weights sum to ``total[t]`` (``1 .. MAX_TOTAL_WEIGHT`` for a target
    with members). Targets with ``k`` members share one ``(k, n_k)`` weight matrix.
    """

    def __init__(self, first: np.ndarray, count: np.ndarray, weight: np.ndarray,
                 total: np.ndarray) -> None:
        self.first = np.asarray(first, dtype=np.int64)
        self.count = np.asarray(count, dtype=np.int64)
        self.total = np.asarray(total, dtype=np.int64)
        self.position = np.zeros(len(count), dtype=np.int64)
        self.matrix: dict[int, np.ndarray] = {}
        for k in np.unique(self.count).tolist():
            if k <= 0:
                continue
            ts = np.flatnonzero(self.count == k)
            self.position[ts] = np.arange(len(ts))
            self.matrix[k] = weight[self.first[ts][None, :] + np.arange(k)[:, None]]


def split_targets(dur: np.ndarray, target: np.ndarray, weights: TargetWeights
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Split each duration over the members of its target in proportion to their weights.

    Member ``j`` gets ``floor(dur * w_j / W)``; the ``r`` nanoseconds left over (``r < k``)
    go one each to the ``r`` members with the largest remainders ``dur * w_j mod W``, ties to
    the member listed first (largest remainder, Hamilton's method). A member of weight 0
    never gets a share. Exact in ``int64`` for any ``dur >= 0``.

    Args:
        dur: ``int64`` durations (>= 0), one per event.
        target: ``int64`` target of each event (one with members).
        weights: the targets' member weights.

    Yields:
        ``(rows, shares)`` per member count ``k``: the events with ``k`` members (``int64``
        indices into the inputs, ascending) and their nanoseconds, ``(k, len(rows))``
        ``int64`` (row ``j``: member ``j``); each column sums to its event's ``dur``.
    """
    n = len(dur)
    if n == 0:
        return
    count = weights.count[target]
    kmax = int(count.max())
    if kmax == 1:
        yield np.arange(n, dtype=np.int64), dur[None, :]
        return
    sizes = np.flatnonzero(np.bincount(count, minlength=kmax + 1))
    for k in sizes.tolist():
        rows = np.flatnonzero(count == k) if len(sizes) > 1 else np.arange(n, dtype=np.int64)
        if k == 1:
            yield rows, dur[rows][None, :]
            continue
        t = target[rows]
        d = dur[rows]
        tot = weights.total[t]
        w = np.take(weights.matrix[k], weights.position[t], axis=1)  # faster than [:, idx]
        q = d // tot  # np.divmod is several times slower than // and a product
        r = d - q * tot
        prod = w * r  # < total * max weight <= 2**62
        base = prod // tot
        share = w * q
        share += base
        assigned = share[0].copy()
        for j in range(1, k):
            assigned += share[j]
        left = d - assigned
        if left.any():
            prod -= base * tot  # the remainders
            share += _bonus(prod, left)
        yield rows, share


def split_by_weights(dur: np.ndarray, first: np.ndarray, count: np.ndarray, total: np.ndarray,
                     weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each duration over its own members, exactly (as :func:`split_targets`).

    Event ``i`` has members ``first[i] .. first[i] + count[i] - 1`` (indices into ``weight``)
    whose weights sum to ``total[i]``.

    Returns:
        ``(event, member, ns)``: ``int64`` arrays with one element per (event, member) pair,
        in event order and members in listed order; the ``ns`` of one event sum to its
        ``dur``.
    """
    if len(dur) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    keys = np.stack([np.asarray(first, np.int64), np.asarray(count, np.int64)])
    uniq, target = np.unique(keys, axis=1, return_inverse=True)
    target = target.reshape(-1)
    totals = np.zeros(uniq.shape[1], dtype=np.int64)
    totals[target] = total
    weights = TargetWeights(uniq[0], uniq[1], np.asarray(weight, np.int64), totals)
    events, members, shares = [], [], []
    for rows, share in split_targets(np.asarray(dur, np.int64), target, weights):
        k = share.shape[0]
        events.append(np.tile(rows, k))
        members.append((weights.first[target[rows]][None, :]
                        + np.arange(k)[:, None]).ravel())
        shares.append(share.ravel())
    event, member, ns = (np.concatenate(x) for x in (events, members, shares))
    order = np.argsort(event, kind="stable")
    return event[order], member[order], ns[order]


def split_grouped(totals: np.ndarray, unit: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Split integer ``totals[u]`` over the rows of each unit ``u`` in proportion to weights.

    The same largest-remainder split as :func:`split_targets` (ties to the earlier row), for
    rows grouped by a unit column rather than laid out per target.

    Args:
        totals: ``int64``, one total per unit.
        unit: int, the unit index of each row (rows of one unit need not be adjacent).
        weights: non-negative integers (``int64``, or Python ints in an object array), one
            per row. A unit whose weights sum to 0 is split in equal shares.

    Returns:
        ``int64`` array, one share per row: the shares of a unit sum to its total exactly. A
        negative total is split as its magnitude and the shares negated. Units whose weights
        sum to ``MAX_TOTAL_WEIGHT`` or more are split with Python integers (same rule).

    Raises:
        ValueError: a negative weight.
    """
    unit = np.asarray(unit, dtype=np.int64)
    n = len(unit)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    totals = np.asarray(totals, dtype=np.int64)
    u_count = len(totals)
    raw = np.asarray(weights)
    mag = np.abs(totals)
    count = np.bincount(unit, minlength=u_count)
    if raw.dtype.kind in "iu" and (len(raw) == 0 or int(raw.max()) < MAX_TOTAL_WEIGHT):
        w = raw.astype(np.int64)
        if (w < 0).any():
            raise ValueError("split weights must be non-negative")
        wsum = np.bincount(unit, weights=w.astype(np.float64), minlength=u_count)
        small = bool(wsum.max() < MAX_TOTAL_WEIGHT) if u_count else True
    else:
        small = False
    if small:
        wsum_i = exact_int(wsum)
        equal = wsum_i == 0
        w = np.where(equal[unit], 1, w)
        wsum_i = np.where(equal, count, wsum_i)
        order = np.argsort(unit, kind="stable")
        u_sorted = unit[order]
        present = np.flatnonzero(count)
        first = np.searchsorted(u_sorted, present)
        _event, member, ns = split_by_weights(mag[present], first, count[present],
                                              wsum_i[present], w[order])
        share = np.zeros(n, dtype=np.int64)
        share[order[member]] = ns
    else:  # weights beyond int64 products: the same rule with Python integers
        w_obj = [int(x) for x in np.asarray(weights, dtype=object).tolist()]
        if any(x < 0 for x in w_obj):
            raise ValueError("split weights must be non-negative")
        sums = [0] * u_count
        for u, x in zip(unit.tolist(), w_obj):
            sums[u] += x
        w_obj = [x if sums[u] else 1 for u, x in zip(unit.tolist(), w_obj)]
        totals_w = [ws if ws else int(c) for ws, c in zip(sums, count.tolist())]
        share_l: list[int] = []
        rem_l: list[int] = []
        for u, x in zip(unit.tolist(), w_obj):
            q, r = divmod(int(mag[u]) * x, totals_w[u])
            share_l.append(q)
            rem_l.append(r)
        left = [int(m) for m in mag.tolist()]
        for u, q in zip(unit.tolist(), share_l):
            left[u] -= q
        units = unit.tolist()
        for i in sorted(range(n), key=lambda i: (units[i], -rem_l[i], i)):
            if left[units[i]] > 0:
                share_l[i] += 1
                left[units[i]] -= 1
        share = np.array(share_l, dtype=np.int64)
    return np.where(totals[unit] < 0, -share, share)


def exact_int(values: np.ndarray) -> np.ndarray:
    """``int64`` of float64 ``values`` that hold integers in ``[0, 2**52)``, without the slow
    generic cast (adds 2**52 and reads the bits)."""
    shifted = values + _TWO52
    return shifted.view(np.int64) - _TWO52_BITS


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
        return exact_int(np.bincount(groups, weights=values, minlength=size))
    if low >= 0 and len(values) < (1 << 31):
        out = np.zeros(size, dtype=np.int64)
        mask = (1 << 21) - 1
        for shift in (0, 21, 42):
            part = np.bincount(groups, weights=(values >> shift) & mask, minlength=size)
            out += exact_int(part) << shift
        return out
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, groups, values)
    return out
