"""The Mann–Whitney U rank test, row by row, in NumPy, with Benjamini–Hochberg's correction.

Used by :mod:`toolkit.trace.views.diff` to tell whether a layer's per-run times in two profiles
differ by more than run-to-run noise. Each row of two ``(rows, runs)`` matrices is one test:
the two-sided p-value that the runs of ``a`` and of ``b`` come from one distribution.

* Exact p-values (the null distribution of U counted as the coefficients of the Gaussian
  binomial) when a row has no ties and ``na + nb <= 60``; else the normal approximation with
  the tie correction and a continuity correction of 0.5 (as SciPy's ``mannwhitneyu``,
  ``method="auto"`` does above 8 runs a side).
* :func:`bh_reject`: which of several p-values stay significant when the false discovery rate
  is held at ``alpha`` (Benjamini–Hochberg step-up).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["mann_whitney_p", "min_p_value", "bh_reject", "EXACT_MAX_RUNS"]

EXACT_MAX_RUNS = 60
"""Largest ``na + nb`` for which exact p-values are counted (the counts fit in int64)."""


@lru_cache(maxsize=64)
def _u_cdf(na: int, nb: int) -> np.ndarray:
    """``P(U <= u)`` for ``u = 0 .. na*nb`` under the null (no ties), as float64."""
    m, n = min(na, nb), max(na, nb)
    poly = np.zeros(m * n + 1, dtype=np.int64)
    poly[0] = 1
    # prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i): the Gaussian binomial [m+n choose m]_q
    for i in range(1, m + 1):
        shift = n + i
        if shift <= m * n:
            poly[shift:] -= poly[:-shift].copy()
        for k in range(i, m * n + 1):  # divide by (1 - q^i): running sum with stride i
            poly[k] += poly[k - i]
    counts = poly.astype(np.float64)
    return np.cumsum(counts) / math.comb(m + n, m)


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks (1-based, ties averaged) of each row of ``values``, and per row the sum of
    ``t^3 - t`` over its tie groups (0 when the row has no ties)."""
    rows, cols = values.shape
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    new_group = np.ones((rows, cols), dtype=bool)
    new_group[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    group = np.cumsum(new_group, axis=1) - 1  # group index per sorted position
    flat_group = (group + np.arange(rows)[:, None] * cols).ravel()
    size = np.bincount(flat_group, minlength=rows * cols)
    first = np.zeros(rows * cols, dtype=np.int64)
    pos = np.tile(np.arange(cols), rows)
    starts = new_group.ravel()
    first[flat_group[starts]] = pos[starts]
    avg = first[flat_group] + (size[flat_group] + 1) / 2.0  # 1-based average rank
    ranks = np.empty((rows, cols), dtype=np.float64)
    np.put_along_axis(ranks, order, avg.reshape(rows, cols), axis=1)
    t = size.reshape(rows, cols).astype(np.float64)
    return ranks, (t ** 3 - t).sum(axis=1)


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two-sided Mann–Whitney U p-value of each row: ``a`` is ``(rows, na)``, ``b`` is
    ``(rows, nb)`` (per-run times). Returns float64 p-values in ``[0, 1]`` (1.0 for a row whose
    values are all equal)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    rows, na = a.shape
    nb = b.shape[1]
    if rows == 0:
        return np.zeros(0, dtype=np.float64)
    ranks, ties = _average_ranks(np.concatenate([a, b], axis=1))
    u = ranks[:, :na].sum(axis=1) - na * (na + 1) / 2.0  # U of a
    n = na + nb
    mean = na * nb / 2.0
    var = na * nb / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    p = np.ones(rows, dtype=np.float64)
    spread = var > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.abs(u - mean) - 0.5) / np.sqrt(np.where(spread, var, 1.0))
    normal = np.array([math.erfc(max(float(v), 0.0) / math.sqrt(2.0)) for v in z])
    p = np.where(spread, np.minimum(normal, 1.0), 1.0)
    exact = (ties == 0) & (n <= EXACT_MAX_RUNS)
    if exact.any():
        cdf = _u_cdf(na, nb)
        uu = np.rint(u[exact]).astype(np.int64)
        low = cdf[uu]
        high = 1.0 - np.where(uu > 0, cdf[np.maximum(uu - 1, 0)], 0.0)
        p[exact] = np.minimum(1.0, 2.0 * np.minimum(low, high))
    return p


def min_p_value(na: int, nb: int) -> float:
    """The smallest two-sided p-value the test can give with ``na`` and ``nb`` runs (every run
    of one side below every run of the other): ``2 / C(na + nb, na)``, at most 1."""
    if na < 1 or nb < 1:
        return 1.0
    ways = math.comb(na + nb, na)
    return min(1.0, 2.0 / ways) if ways < 1 << 1000 else 0.0


def bh_reject(p: np.ndarray, alpha: float) -> np.ndarray:
    """Benjamini–Hochberg step-up: True for the p-values (NaN ignored) that stay significant
    with the false discovery rate held at ``alpha``."""
    p = np.asarray(p, dtype=np.float64)
    out = np.zeros(len(p), dtype=bool)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    if m == 0:
        return out
    order = valid[np.argsort(p[valid], kind="stable")]
    passed = p[order] <= alpha * np.arange(1, m + 1) / m
    if passed.any():
        k = int(np.flatnonzero(passed).max())
        out[order[: k + 1]] = True
    return out
