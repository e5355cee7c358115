"""Exact integer arithmetic for trace-join: splitting durations by weights, summing by group.

Every function is vectorised over the events it is given (callers pass blocks of ~10^5
events so that temporaries stay in cache); none loses a nanosecond.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["split_groups", "split_by_weights", "group_sum", "MAX_TOTAL_WEIGHT"]

#: A target's weights are scaled down (ratios kept to 1 part in 2**31) when they sum above
#: this, so that ``remainder * weight`` stays inside ``int64``.
MAX_TOTAL_WEIGHT = 1 << 31
_EXACT_FLOAT = 1 << 53
_PAIRWISE_MAX = 6  # members up to which ranks come from pairwise comparisons, not argsort


def _bonus(rem: np.ndarray, left: np.ndarray) -> np.ndarray:
    """1 for the ``left[i]`` members of row ``i`` with the largest ``rem`` (ties: lower
    column first), else 0; ``rem`` is ``(m, k)``, ``left`` ``(m,)``."""
    m, k = rem.shape
    if k <= _PAIRWISE_MAX:
        rank = np.zeros((m, k), dtype=np.int64)
        for j in range(k):
            col = rem[:, j]
            r = rank[:, j]
            for i in range(k):
                if i < j:
                    r += rem[:, i] >= col
                elif i > j:
                    r += rem[:, i] > col
        return (rank < left[:, None]).astype(np.int64)
    order = np.argsort(-rem, axis=1, kind="stable")
    bonus = np.zeros((m, k), dtype=np.int64)
    np.put_along_axis(bonus, order,
                      (np.arange(k)[None, :] < left[:, None]).astype(np.int64), axis=1)
    return bonus


def split_groups(dur: np.ndarray, first: np.ndarray, count: np.ndarray, total: np.ndarray,
                 weight: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
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

    Yields:
        ``(rows, members, shares)`` per member count ``k``: the events with ``k`` members
        (``int64`` indices into the inputs, ascending), their member indices and their
        nanoseconds, both ``(len(rows), k)`` ``int64``; each row of ``shares`` sums to its
        event's ``dur``.
    """
    n = len(dur)
    if n == 0:
        return
    kmax = int(count.max())
    if kmax == 1:
        yield np.arange(n, dtype=np.int64), first[:, None], dur[:, None]
        return
    sizes = np.flatnonzero(np.bincount(count, minlength=kmax + 1))
    for k in sizes.tolist():
        rows = np.flatnonzero(count == k) if len(sizes) > 1 else np.arange(n, dtype=np.int64)
        if k == 1:
            yield rows, first[rows][:, None], dur[rows][:, None]
            continue
        idx = first[rows][:, None] + np.arange(k, dtype=np.int64)[None, :]
        w = weight[idx]
        d = dur[rows]
        tot = total[rows]
        q, r = np.divmod(d, tot)
        prod = r[:, None] * w  # < total * max weight <= 2**62
        tot2 = tot[:, None]
        base = prod // tot2
        share = q[:, None] * w
        share += base
        left = d - share.sum(axis=1)
        if left.any():
            prod -= base * tot2  # the remainders
            share += _bonus(prod, left)
        yield rows, idx, share


def split_by_weights(dur: np.ndarray, first: np.ndarray, count: np.ndarray, total: np.ndarray,
                     weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`split_groups` flattened: ``(event, member, ns)`` ``int64`` arrays, one element
    per (event, member) pair, grouped by member count, members of one event in listed order;
    the ``ns`` of one event sum to its ``dur``."""
    events: list[np.ndarray] = []
    members: list[np.ndarray] = []
    shares: list[np.ndarray] = []
    for rows, idx, share in split_groups(dur, first, count, total, weight):
        events.append(np.repeat(rows, idx.shape[1]))
        members.append(idx.ravel())
        shares.append(share.ravel())
    if not events:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    if len(events) == 1:
        return events[0], members[0], shares[0]
    return np.concatenate(events), np.concatenate(members), np.concatenate(shares)


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
        return np.bincount(groups, weights=values, minlength=size).astype(np.int64)
    if low >= 0 and len(values) < (1 << 31):
        out = np.zeros(size, dtype=np.int64)
        mask = (1 << 21) - 1
        for shift in (0, 21, 42):
            part = np.bincount(groups, weights=(values >> shift) & mask, minlength=size)
            out += part.astype(np.int64) << shift
        return out
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, groups, values)
    return out
