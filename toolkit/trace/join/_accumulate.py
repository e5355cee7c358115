"""Exact running sums of nanoseconds per (run, column), fed block by block.

trace-join adds each block of split event time into one :class:`CellSums` (columns are the
members of the targets the trace hits) and never keeps the (event, member) pieces. Dense when
``runs * columns`` is moderate, else sparse (per-block partial sums merged at the end).
"""

from __future__ import annotations

import numpy as np

from toolkit.trace.join.split import group_sum

__all__ = ["CellSums", "DENSE_CELLS"]

#: Largest ``runs * columns`` kept as one dense ``int64`` matrix (512 MB).
DENSE_CELLS = 1 << 26


class CellSums:
    """Sums of ``int64`` nanoseconds per (run code, column); exact.

    Args:
        runs: number of run codes (rows of the matrix).
        columns: number of columns.
    """

    def __init__(self, runs: int, columns: int) -> None:
        self.runs = runs
        self.columns = columns
        self.dense: np.ndarray | None = None
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        if runs * columns <= DENSE_CELLS:
            self.dense = np.zeros(runs * columns, dtype=np.int64)

    def add(self, run: np.ndarray, column: np.ndarray, ns: np.ndarray) -> None:
        """Add ``ns[i]`` to cell ``(run[i], column[i])`` for every ``i``."""
        if len(ns):
            self.add_cells(run.astype(np.int64) * self.columns + column, ns)

    def add_cells(self, cells: np.ndarray, ns: np.ndarray) -> None:
        """Add ``ns[i]`` to flat cell ``cells[i]`` (``run * columns + column``)."""
        if len(ns) == 0:
            return
        low, high = int(cells.min()), int(cells.max())
        span = high - low + 1
        if self.dense is not None and span <= 4 * len(cells) + 4096:
            self.dense[low:high + 1] += group_sum(cells - low, ns, span)
            return
        uniq, inverse = np.unique(cells, return_inverse=True)
        sums = group_sum(inverse.reshape(-1), ns, len(uniq))
        if self.dense is not None:
            self.dense[uniq] += sums
        else:
            self._parts.append((uniq, sums))

    def span_ok(self, low: int, span: int, pieces: int) -> bool:
        """True when a block whose cells lie in ``[low, low + span)`` is best added with
        :meth:`add_span` (dense mode and a span not much larger than its pieces)."""
        return self.dense is not None and span <= 4 * pieces + (1 << 18)

    def add_span(self, low: int, values: np.ndarray) -> None:
        """Add the ``int64`` ``values`` to cells ``low .. low + len(values) - 1``."""
        assert self.dense is not None
        self.dense[low:low + len(values)] += values

    def matrix(self) -> np.ndarray:
        """The sums as a dense ``(runs, columns)`` ``int64`` matrix (dense mode only)."""
        assert self.dense is not None
        return self.dense.reshape(self.runs, self.columns)

    def triplets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The non-zero cells as ``(run, column, ns)`` arrays (``int64``)."""
        if self.dense is not None:
            cells = np.flatnonzero(self.dense)
            sums = self.dense[cells]
        elif self._parts:
            keys = np.concatenate([p[0] for p in self._parts])
            values = np.concatenate([p[1] for p in self._parts])
            cells, inverse = np.unique(keys, return_inverse=True)
            sums = group_sum(inverse.reshape(-1), values, len(cells))
            self._parts = [(cells, sums)]
        else:
            cells = sums = np.zeros(0, dtype=np.int64)
        run, column = np.divmod(cells, self.columns) if self.columns else (cells, cells)
        return run, column, sums

    def column_totals(self) -> np.ndarray:
        """``int64`` sum of every column over the runs."""
        if self.dense is not None:
            return self.matrix().sum(axis=0, dtype=np.int64)
        _run, column, ns = self.triplets()
        return group_sum(column, ns, self.columns)

    def total(self) -> int:
        """Sum over every cell."""
        if self.dense is not None:
            return int(self.dense.sum())
        return int(sum(int(p[1].sum()) for p in self._parts))
