"""Totals and per-run statistics of attributed time, grouped by any row (layer, op, ...).

The statistics are those of ExecuTorch's Inspector (``avg``, ``min``, ``p10``, ``p50``,
``p90``, ``max``) over the runs (inferences) of a trace, in milliseconds; percentiles
interpolate linearly between order statistics (``numpy.percentile``'s default). A run in which a
row got no time counts as 0 for that row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from toolkit.trace.split import group_sum

__all__ = ["STAT_COLUMNS", "RUN_STAT_COLUMNS", "stats_frame", "empty_stats"]

#: Per-run statistics columns (``float64`` milliseconds).
RUN_STAT_COLUMNS: tuple[str, ...] = ("avg_ms", "min_ms", "p10_ms", "p50_ms", "p90_ms",
                                     "max_ms")
#: Columns every grouped table of an attribution ends with.
STAT_COLUMNS: tuple[str, ...] = ("total_ns", "share", "events", *RUN_STAT_COLUMNS)
_QUANTILES = {"p10_ms": 0.10, "p50_ms": 0.50, "p90_ms": 0.90}
_CELLS_PER_CHUNK = 1 << 24


def _dense_stats(dense: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of each row of a (rows, runs) ``int64`` nanosecond matrix."""
    rows, runs = dense.shape
    out: dict[str, np.ndarray] = {}
    if runs == 0:
        for c in RUN_STAT_COLUMNS:
            out[c] = np.full(rows, np.nan)
        return out
    ordered = np.sort(dense, axis=1)
    out["avg_ms"] = dense.sum(axis=1) / runs / 1e6
    out["min_ms"] = ordered[:, 0] / 1e6
    out["max_ms"] = ordered[:, -1] / 1e6
    for column, q in _QUANTILES.items():
        pos = q * (runs - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, runs - 1)
        frac = pos - lo
        low = ordered[:, lo].astype(np.float64)
        out[column] = (low + (ordered[:, hi] - ordered[:, lo]) * frac) / 1e6
    return out


def stats_frame(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int, n_runs: int,
                events: np.ndarray, total_ns: int) -> pd.DataFrame:
    """Return the :data:`STAT_COLUMNS` for ``n_rows`` rows.

    Args:
        row, run, ns: one element per attributed piece of time: its row (0 .. n_rows-1), its
            run code (0 .. n_runs-1) and its nanoseconds (``int64``).
        events: ``int64`` event count per row.
        total_ns: the denominator of ``share`` (all event time of the trace).

    Returns:
        ``total_ns`` (``int64``), ``share`` (``float64``, ``total_ns / total``; 0 when the trace
        has no time), ``events`` (``int64``) and ``avg_ms`` .. ``max_ms`` (``float64``).
    """
    row = np.asarray(row, dtype=np.int64)
    run = np.asarray(run, dtype=np.int64)
    totals = group_sum(row, ns, n_rows)
    columns: dict[str, np.ndarray] = {
        "total_ns": totals,
        "share": totals / total_ns if total_ns else np.zeros(n_rows),
        "events": np.asarray(events, dtype=np.int64),
    }
    stats = {c: np.full(n_rows, np.nan) for c in RUN_STAT_COLUMNS}
    if n_rows and n_runs:
        if n_rows * n_runs <= _CELLS_PER_CHUNK:
            dense = group_sum(row * n_runs + run, ns, n_rows * n_runs).reshape(n_rows, n_runs)
            stats = _dense_stats(dense)
        else:
            cells, inverse = np.unique(row * n_runs + run, return_inverse=True)
            sums = group_sum(inverse.astype(np.int64), ns, len(cells))
            cell_row, cell_run = np.divmod(cells, n_runs)
            step = max(1, _CELLS_PER_CHUNK // n_runs)
            for r0 in range(0, n_rows, step):
                r1 = min(n_rows, r0 + step)
                a, b = np.searchsorted(cell_row, [r0, r1])
                dense = np.zeros((r1 - r0, n_runs), dtype=np.int64)
                dense[cell_row[a:b] - r0, cell_run[a:b]] = sums[a:b]
                for column, values in _dense_stats(dense).items():
                    stats[column][r0:r1] = values
    columns.update({c: stats[c] for c in RUN_STAT_COLUMNS})
    return pd.DataFrame(columns)


def empty_stats(n_rows: int) -> pd.DataFrame:
    """The :data:`STAT_COLUMNS` with zero totals and NaN statistics for ``n_rows`` rows."""
    return stats_frame(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       n_rows, 0, np.zeros(n_rows, np.int64), 0)
