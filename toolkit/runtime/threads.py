"""The number of threads of the BLAS libraries NumPy calls (matrix products).

NumPy's BLAS (OpenBLAS, MKL) starts one thread per core by default; on a small machine
shared with other work its threads wait on each other and one inference can take many times
longer than with one thread. The reference runtime therefore limits them, with
``threadpoolctl``, when an interpreter is made.
"""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

from toolkit.errors import ToolkitError

__all__ = ["limit_blas_threads", "blas_threads"]

_applied: list[int] = []  # the limit last applied by this module (one entry at most)


def limit_blas_threads(threads: int | None) -> None:
    """Limit every BLAS thread pool of the process to ``threads`` threads (None: leave them
    as they are). The limit is process-wide and stays until changed; applying the limit
    already in force costs nothing."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ToolkitError(f"threads must be a positive int or None, got {threads!r}",
                           fix="pass threads=1 (the default) or another count")
    if _applied and _applied[0] == threads:
        return
    threadpool_limits(limits=threads, user_api="blas")
    _applied[:] = [threads]


def blas_threads() -> list[int]:
    """Return the thread count of every BLAS pool loaded in the process."""
    return [int(p["num_threads"]) for p in threadpool_info() if p.get("user_api") == "blas"]
