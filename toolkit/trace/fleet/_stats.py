"""Per-run statistics over a fleet's merged per-run table, in memory or spilled to DuckDB.

The statistics are those of :mod:`toolkit.trace.join.stats` (``avg_ms`` ... ``max_ms`` over every
run of the fleet, a run without time for a row counting 0), computed over the merged
(row, run, ns) cells:

* in memory (the reference): the cells laid out as a dense ``(rows, runs)`` matrix and given to
  :func:`toolkit.trace.join.stats.matrix_stats_frame`, the function a single join uses, so a fleet's
  figures are bit-identical to one join over the concatenated fleet;
* above ``memory_budget`` bytes of dense matrix: the cells go to DuckDB (optional extra
  ``toolkit[duckdb]``), which ranks each row's cells out of core and returns only the order
  statistics the figures need (min, max and the two neighbours of each percentile); the
  interpolation is then the in-memory expression, so the figures are the same bits (the tests
  compare both paths). DuckDB's own ``quantile_cont`` is not used: it interpolates in another
  order of operations and differs from NumPy's linear method by one ulp in about 5% of cases
  (DuckDB 2.0).
"""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.join.stats import RUN_STAT_COLUMNS, matrix_stats_frame

__all__ = ["fleet_stats_frame", "DEFAULT_MEMORY_BUDGET"]

#: Bytes of dense ``(rows, runs)`` int64 matrix computed in memory (1 GiB).
DEFAULT_MEMORY_BUDGET = 1 << 30


def fleet_stats_frame(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int,
                      n_runs: int, events: np.ndarray, total_ns: int,
                      memory_budget: int = DEFAULT_MEMORY_BUDGET) -> pd.DataFrame:
    """Return :data:`~toolkit.trace.join.stats.STAT_COLUMNS` per row from merged per-run cells.

    Args:
        row, run, ns: one element per (row, run) cell (``int64``; ``run`` is the run code
            0 .. n_runs-1; each cell at most once).
        n_rows, n_runs: numbers of rows and runs.
        events: ``int64`` matched events per row.
        total_ns: the denominator of ``share``.
        memory_budget: bytes of dense matrix above which DuckDB computes the statistics.

    Returns:
        ``total_ns``, ``share``, ``events``, ``avg_ms`` ... ``max_ms`` as
        :func:`~toolkit.trace.join.stats.matrix_stats_frame`.
    """
    if n_rows * n_runs * 8 <= memory_budget:
        matrix = np.zeros((n_rows, n_runs), dtype=np.int64)
        matrix[row, run] = ns
        return matrix_stats_frame(matrix, events, total_ns)
    return _duckdb_stats(row, run, ns, n_rows, n_runs, events, total_ns, memory_budget)


def _ranks(n_runs: int) -> dict[str, tuple[int, int, float]]:
    """Per statistic, the two order-statistic ranks and the interpolation position, as
    :func:`toolkit.trace.join.stats._row_stats` uses them."""
    out: dict[str, tuple[int, int, float]] = {}
    for column, q in (("p10_ms", 0.10), ("p50_ms", 0.50), ("p90_ms", 0.90)):
        pos = q * (n_runs - 1)
        lo = int(np.floor(pos))
        out[column] = (lo, min(lo + 1, n_runs - 1), pos)
    return out


def _duckdb_stats(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int, n_runs: int,
                  events: np.ndarray, total_ns: int, memory_budget: int) -> pd.DataFrame:
    """The statistics with DuckDB ranking the stored cells of each row (out of core).

    A row's runs without a cell are 0 ns and every cell is >= 0, so the row's k-th order
    statistic is 0 when ``k < zeros`` and its ``(k - zeros)``-th stored cell otherwise;
    DuckDB picks only the ranks needed and the interpolation is the in-memory expression.
    """
    try:
        import duckdb
    except ImportError:
        raise ToolkitError(
            f"the per-run table ({n_rows} rows x {n_runs} runs) is above the memory budget "
            f"({memory_budget} bytes) and DuckDB is not installed",
            fix="pip install 'toolkit[duckdb]', or pass a larger memory_budget") from None
    ns = np.asarray(ns, np.int64)
    row = np.asarray(row, np.int64)
    if len(ns) and int(ns.min()) < 0:
        raise ToolkitError("a per-run cell is negative", where="the merged per-run table",
                           fix="merge the partials again as join_partition made them; if it "
                               "persists, this is a bug: report it with the partials")
    totals = np.zeros(n_rows, dtype=np.int64)
    np.add.at(totals, row, ns)
    stats = {c: np.full(n_rows, np.nan if n_runs == 0 else 0.0) for c in RUN_STAT_COLUMNS}
    if n_runs and n_rows:
        ranks = _ranks(n_runs)
        wanted = sorted({0, n_runs - 1, *(r for lo, hi, _ in ranks.values() for r in (lo, hi))})
        cells = pd.DataFrame({"row": row, "ns": ns})
        with tempfile.TemporaryDirectory(prefix="toolkit-fleet-") as spill:
            con: Any = duckdb.connect(config={
                "temp_directory": spill, "threads": 1,
                "memory_limit": f"{max(memory_budget, 1 << 26)}B"})
            try:
                con.register("cells", cells)
                picked = con.execute(f"""
                    SELECT row, rank, ns FROM (
                        SELECT row, ns,
                               row_number() OVER (PARTITION BY row ORDER BY ns) - 1
                               + ({n_runs} - count(*) OVER (PARTITION BY row)) AS rank
                        FROM cells)
                    WHERE rank IN ({", ".join(str(r) for r in wanted)})""").fetchdf()
            finally:
                con.close()
        order = np.zeros((n_rows, len(wanted)), dtype=np.int64)  # rank not stored: 0 ns
        where = {r: i for i, r in enumerate(wanted)}
        at = np.searchsorted(np.asarray(wanted), picked["rank"].to_numpy(dtype=np.int64))
        order[picked["row"].to_numpy(dtype=np.int64), at] = picked["ns"].to_numpy(np.int64)
        stats["avg_ms"][:] = totals / n_runs / 1e6
        stats["min_ms"][:] = order[:, where[0]] / 1e6
        stats["max_ms"][:] = order[:, where[n_runs - 1]] / 1e6
        for column, (lo, hi, pos) in ranks.items():
            low = order[:, where[lo]].astype(np.float64)
            stats[column][:] = (low + (order[:, where[hi]] - order[:, where[lo]])
                                * (pos - lo)) / 1e6
    columns: dict[str, Any] = {
        "total_ns": totals,
        "share": totals / total_ns if total_ns else np.zeros(n_rows),
        "events": np.asarray(events, dtype=np.int64),
    }
    columns.update(stats)
    return pd.DataFrame(columns)
