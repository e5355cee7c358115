"""Per-run statistics over a fleet's merged per-run table, in memory or spilled to DuckDB.

The statistics are those of :mod:`toolkit.trace.stats` (``avg_ms`` ... ``max_ms`` over every
run of the fleet, a run without time for a row counting 0), computed over the merged
(row, run, ns) cells:

* in memory (the reference): the cells laid out as a dense ``(rows, runs)`` matrix and given to
  :func:`toolkit.trace.stats.matrix_stats_frame`, the function a single join uses, so a fleet's
  figures are bit-identical to one join over the concatenated fleet;
* above ``memory_budget`` bytes of dense matrix: the cells go to DuckDB (optional extra
  ``toolkit[duckdb]``), which spills to disk; ``quantile_cont`` interpolates
  ``lo + (hi - lo) * (pos - floor(pos))`` in double precision with ``pos = (runs - 1) * q``,
  as NumPy's linear method does, and integer nanoseconds below 2^53 convert exactly, so the
  figures are the same bits (the tests compare both paths).
"""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.stats import RUN_STAT_COLUMNS, matrix_stats_frame

__all__ = ["fleet_stats_frame", "DEFAULT_MEMORY_BUDGET"]

#: Bytes of dense ``(rows, runs)`` int64 matrix computed in memory (1 GiB).
DEFAULT_MEMORY_BUDGET = 1 << 30
_EXACT = 1 << 53


def fleet_stats_frame(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int,
                      n_runs: int, events: np.ndarray, total_ns: int,
                      memory_budget: int = DEFAULT_MEMORY_BUDGET) -> pd.DataFrame:
    """Return :data:`~toolkit.trace.stats.STAT_COLUMNS` per row from merged per-run cells.

    Args:
        row, run, ns: one element per (row, run) cell (``int64``; ``run`` is the run code
            0 .. n_runs-1; each cell at most once).
        n_rows, n_runs: numbers of rows and runs.
        events: ``int64`` matched events per row.
        total_ns: the denominator of ``share``.
        memory_budget: bytes of dense matrix above which DuckDB computes the statistics.

    Returns:
        ``total_ns``, ``share``, ``events``, ``avg_ms`` ... ``max_ms`` as
        :func:`~toolkit.trace.stats.matrix_stats_frame`.
    """
    if n_rows * n_runs * 8 <= memory_budget:
        matrix = np.zeros((n_rows, n_runs), dtype=np.int64)
        matrix[row, run] = ns
        return matrix_stats_frame(matrix, events, total_ns)
    return _duckdb_stats(row, run, ns, n_rows, n_runs, events, total_ns, memory_budget)


def _duckdb_stats(row: np.ndarray, run: np.ndarray, ns: np.ndarray, n_rows: int, n_runs: int,
                  events: np.ndarray, total_ns: int, memory_budget: int) -> pd.DataFrame:
    try:
        import duckdb
    except ImportError:
        raise ToolkitError(
            f"the per-run table ({n_rows} rows x {n_runs} runs) is above the memory budget "
            f"({memory_budget} bytes) and DuckDB is not installed",
            fix="pip install 'toolkit[duckdb]', or pass a larger memory_budget") from None
    if len(ns) and (int(np.abs(ns).max()) >= _EXACT):
        raise ToolkitError("a per-run cell is beyond 2^53 ns; its statistics would not be "
                           "exact in DuckDB", fix="pass a larger memory_budget")
    cells = pd.DataFrame({"row": np.asarray(row, np.int64), "run": np.asarray(run, np.int64),
                          "ns": np.asarray(ns, np.int64)})
    with tempfile.TemporaryDirectory(prefix="toolkit-fleet-") as spill:
        con: Any = duckdb.connect(config={"temp_directory": spill,
                                          "memory_limit": f"{max(memory_budget, 1 << 26)}B",
                                          "threads": 1})
        try:
            con.register("cells", cells)
            table = con.execute(f"""
                WITH grid AS (
                    SELECT r.range AS row, u.range AS run
                    FROM range({n_rows}) r, range({n_runs}) u),
                dense AS (
                    SELECT g.row, coalesce(c.ns, 0)::BIGINT AS ns
                    FROM grid g LEFT JOIN cells c ON c.row = g.row AND c.run = g.run)
                SELECT row, sum(ns)::HUGEINT AS total, min(ns) AS lo, max(ns) AS hi,
                       quantile_cont(ns, 0.1) AS p10, quantile_cont(ns, 0.5) AS p50,
                       quantile_cont(ns, 0.9) AS p90
                FROM dense GROUP BY row ORDER BY row""").fetchdf()
        finally:
            con.close()
    totals = np.zeros(n_rows, dtype=np.int64)
    stats = {c: np.full(n_rows, np.nan if n_runs == 0 else 0.0) for c in RUN_STAT_COLUMNS}
    if len(table):
        at = table["row"].to_numpy(dtype=np.int64)
        totals[at] = np.array([int(v) for v in table["total"].tolist()], dtype=np.int64)
        stats["avg_ms"][at] = totals[at] / n_runs / 1e6
        stats["min_ms"][at] = table["lo"].to_numpy(dtype=np.int64) / 1e6
        stats["max_ms"][at] = table["hi"].to_numpy(dtype=np.int64) / 1e6
        for column in ("p10", "p50", "p90"):
            stats[f"{column}_ms"][at] = table[column].to_numpy(dtype=np.float64) / 1e6
    columns: dict[str, Any] = {
        "total_ns": totals,
        "share": totals / total_ns if total_ns else np.zeros(n_rows),
        "events": np.asarray(events, dtype=np.int64),
    }
    columns.update(stats)
    return pd.DataFrame(columns)
