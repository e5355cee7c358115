"""Totals and per-run statistics of attributed time, grouped by any row (layer, op, ...).

The statistics are those of ExecuTorch's Inspector (``avg``, ``min``, ``p10``, ``p50``,
``p90``, ``max``) over the runs (inferences) of a trace, in milliseconds; percentiles
interpolate linearly between order statistics (``numpy.percentile``'s default). A run in which a
row got no time counts as 0 for that row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolkit.trace.join.split import group_sum

__all__ = ["STAT_COLUMNS", "RUN_STAT_COLUMNS", "stats_frame", "matrix_stats_frame",
           "matrix_per_run", "outlier_runs", "p50_share"]

#: Per-run statistics columns (``float64`` milliseconds).
RUN_STAT_COLUMNS: tuple[str, ...] = ("avg_ms", "min_ms", "p10_ms", "p50_ms", "p90_ms",
                                     "max_ms")
#: Columns every grouped table of an attribution ends with.
STAT_COLUMNS: tuple[str, ...] = ("total_ns", "share", "events", *RUN_STAT_COLUMNS)
_QUANTILES = {"p10_ms": 0.10, "p50_ms": 0.50, "p90_ms": 0.90}
_CELLS_PER_CHUNK = 1 << 22


def _row_stats(dense: np.ndarray, out: dict[str, np.ndarray], at: slice) -> None:
    """Write the statistics of each row of a (rows, runs) ``int64`` ns matrix into ``out``."""
    runs = dense.shape[1]
    ordered = np.sort(dense, axis=1)
    out["avg_ms"][at] = dense.sum(axis=1) / runs / 1e6
    out["min_ms"][at] = ordered[:, 0] / 1e6
    out["max_ms"][at] = ordered[:, -1] / 1e6
    for column, q in _QUANTILES.items():
        pos = q * (runs - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, runs - 1)
        low = ordered[:, lo].astype(np.float64)
        out[column][at] = (low + (ordered[:, hi] - ordered[:, lo]) * (pos - lo)) / 1e6


def _frame(totals: np.ndarray, events: np.ndarray, total_ns: int,
           stats: dict[str, np.ndarray]) -> pd.DataFrame:
    columns: dict[str, np.ndarray] = {
        "total_ns": np.asarray(totals, dtype=np.int64),
        "share": totals / total_ns if total_ns else np.zeros(len(totals)),
        "events": np.asarray(events, dtype=np.int64),
    }
    columns.update({c: stats[c] for c in RUN_STAT_COLUMNS})
    return pd.DataFrame(columns)


def _empty_stats(n_rows: int, runs: int) -> dict[str, np.ndarray]:
    fill = np.nan if runs == 0 else 0.0
    return {c: np.full(n_rows, fill) for c in RUN_STAT_COLUMNS}


def matrix_stats_frame(matrix: np.ndarray, events: np.ndarray, total_ns: int) -> pd.DataFrame:
    """Return the :data:`STAT_COLUMNS` of each row of a ``(rows, runs)`` ns matrix.

    Returns ``total_ns`` (``int64``, the row sum), ``share`` (``float64``, ``total_ns /
    total_ns argument``; 0 when that is 0), ``events`` (``int64``, as given) and ``avg_ms`` ..
    ``max_ms`` (``float64``; NaN when there are no runs).
    """
    n_rows, runs = matrix.shape
    stats = _empty_stats(n_rows, runs)
    if runs:
        step = max(1, _CELLS_PER_CHUNK // runs)
        for r0 in range(0, n_rows, step):
            at = slice(r0, min(n_rows, r0 + step))
            _row_stats(matrix[at], stats, at)
    return _frame(matrix.sum(axis=1), events, total_ns, stats)


def stats_frame(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int, n_runs: int,
                events: np.ndarray, total_ns: int) -> pd.DataFrame:
    """Return the :data:`STAT_COLUMNS` for ``n_rows`` rows from (row, run, ns) pieces.

    Args:
        row, run, ns: one element per piece of attributed time: its row (0 .. n_rows-1), its
            run code (0 .. n_runs-1) and its nanoseconds (``int64``).
        n_rows, n_runs: numbers of rows and runs.
        events: ``int64`` event count per row.
        total_ns: the denominator of ``share`` (all event time of the trace).

    Returns:
        As :func:`matrix_stats_frame`.
    """
    row = np.asarray(row, dtype=np.int64)
    run = np.asarray(run, dtype=np.int64)
    totals = group_sum(row, ns, n_rows)
    stats = _empty_stats(n_rows, n_runs)
    if n_rows and n_runs and len(ns):
        cells, inverse = np.unique(row * n_runs + run, return_inverse=True)
        sums = group_sum(inverse.reshape(-1), ns, len(cells))
        cell_row, cell_run = np.divmod(cells, n_runs)
        step = max(1, _CELLS_PER_CHUNK // n_runs)
        for r0 in range(0, n_rows, step):
            r1 = min(n_rows, r0 + step)
            a, b = np.searchsorted(cell_row, [r0, r1])
            dense = np.zeros((r1 - r0, n_runs), dtype=np.int64)
            dense[cell_row[a:b] - r0, cell_run[a:b]] = sums[a:b]
            _row_stats(dense, stats, slice(r0, r1))
    return _frame(totals, events, total_ns, stats)


def matrix_per_run(matrix: np.ndarray, ids: pd.Series, id_column: str,
                   run_values: np.ndarray) -> pd.DataFrame:
    """The per-run table of a ``(rows, runs)`` ns matrix, in the form of
    :meth:`~toolkit.trace.join.attribution.Attribution.per_run`: ``row`` (int64), ``id_column``
    (``ids`` of each row), ``run`` (int64: ``run_values`` of each column), ``ns`` (int64), one
    row per non-zero cell, sorted by ``row`` then ``run``."""
    row, code = np.nonzero(np.asarray(matrix))
    return pd.DataFrame({"row": row.astype(np.int64),
                         id_column: ids.iloc[row].to_numpy() if len(row) else ids.iloc[:0],
                         "run": np.asarray(run_values, dtype=np.int64)[code],
                         "ns": np.asarray(matrix)[row, code].astype(np.int64)})


def p50_share(median_ms: np.ndarray) -> np.ndarray:
    """``float64`` per row: its median run over the sum of every row's median run (0 when
    that sum is 0): a share a few slow runs do not move."""
    total = float(np.nansum(median_ms))
    if total <= 0:
        return np.zeros(len(median_ms), dtype=np.float64)
    return np.nan_to_num(np.asarray(median_ms, dtype=np.float64)) / total


def outlier_runs(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int, runs: int,
                 median_ms: np.ndarray) -> np.ndarray:
    """``int64`` per row: the runs whose time (the ``ns`` pieces of (row, run) summed) is above
    twice the row's median run; all 0 below 3 runs."""
    if runs < 3 or n_rows == 0 or len(ns) == 0:
        return np.zeros(n_rows, dtype=np.int64)
    row = np.asarray(row, dtype=np.int64)
    cell = row * runs + np.asarray(run, dtype=np.int64)
    used, inverse = np.unique(cell, return_inverse=True)
    per_cell = np.bincount(inverse, weights=np.asarray(ns, dtype=np.float64),
                           minlength=len(used))
    cell_row = used // runs
    limit = 2 * np.nan_to_num(np.asarray(median_ms, dtype=np.float64)) * 1e6
    slow = (per_cell > limit[cell_row]) & (per_cell > 0)
    return np.bincount(cell_row[slow], minlength=n_rows).astype(np.int64)
