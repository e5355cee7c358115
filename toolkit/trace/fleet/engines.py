"""The engines that map the partition join over a fleet's sources: a process pool or Dask.

Both run the same task, :func:`toolkit.trace.fleet.join_many.join_source` (the toolkit's own join
kernel, one source at a time), and return the partials unmerged. The provenance tables are
shipped once per worker (the pool's initializer, Dask's ``scatter(broadcast=True)``), so each
worker builds the catalog once.

Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_=65536`` in its workers by default
(``distributed.nanny.pre-spawn-environ``); with it glibc returns freed memory to the system
after every large NumPy temporary, which halves the join kernel's speed. The ``LocalCluster``
started here leaves it unset (and checks it in a worker); a client given by the caller whose
workers have it set gets a warning.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.trace.fleet.partial import PartialJoin
from toolkit.trace.join.tables import ProvenanceTables

__all__ = ["run_local", "run_dask", "start_cluster", "worker_malloc_trim", "import_distributed",
           "MALLOC_TRIM"]

MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"
_WORKER_TABLES: list[ProvenanceTables] = []
Progress = Callable[[PartialJoin, int, int], None] | None


#: Set in each pool worker (when not set already), as Dask's nanny does: a worker is one
#: thread of NumPy, BLAS and Arrow (Parquet decoding), parallelism comes from the processes.
WORKER_ENVIRON = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


#: Set in the workers of the ``LocalCluster`` :func:`start_cluster` starts: one glibc malloc
#: arena. A Dask worker runs tasks on a thread of its own beside the event loop's; with an
#: arena per thread, the freed pages of one file's join sit in an arena the next file's
#: allocations may not reuse, and the worker's peak grows file after file (about 60 MB more
#: over 3 files of 2M events, where one arena adds 10 MB). Arrow decodes Parquet through the
#: system allocator rather than its jemalloc pool, which keeps freed pages for reuse: a
#: worker's peak on a 2M-event file drops by about 60 MB (584 -> 521 MB measured in one
#: process with the worker's imports) for about 4 % more CPU.
DASK_WORKER_ENVIRON = {"MALLOC_ARENA_MAX": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def _init_worker(tables: ProvenanceTables) -> None:
    for name, value in WORKER_ENVIRON.items():
        os.environ.setdefault(name, value)
    _WORKER_TABLES[:] = [tables]


def _pool_task(source: Any, order: int, options: dict[str, Any]) -> list[PartialJoin]:
    from toolkit.trace.fleet.join_many import join_source

    return join_source(source, order, _WORKER_TABLES[0], options)


def _workers(workers: int | None, n: int) -> int:
    if workers is None:
        workers = os.cpu_count() or 1
    return max(0, min(int(workers), n))


def _report(progress: Progress, partials: list[PartialJoin], done: int, total: int) -> None:
    if progress is not None:
        for p in partials:
            progress(p, done, total)


def run_local(sources: list[Any], tables: ProvenanceTables, options: dict[str, Any],
              workers: int | None, progress: Progress = None) -> list[PartialJoin]:
    """Join every source on a pool of ``workers`` spawned processes (``0``: in this
    process); return the partials in completion order."""
    from toolkit.trace.fleet.join_many import join_source

    n = len(sources)
    out: list[PartialJoin] = []
    count = _workers(workers, n)
    if count == 0:
        for i, source in enumerate(sources):
            got = join_source(source, i, tables, options)
            out.extend(got)
            _report(progress, got, i + 1, n)
        return out
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_init_worker,
                             initargs=(tables,)) as pool:
        pending: set[Future[list[PartialJoin]]] = {
            pool.submit(_pool_task, source, i, options) for i, source in enumerate(sources)}
        done_count = 0
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                error = future.exception()
                if error is not None:
                    for other in pending:
                        other.cancel()
                    raise error
                got = future.result()
                done_count += 1
                out.extend(got)
                _report(progress, got, done_count, n)
    return out


def worker_malloc_trim(client: Any) -> dict[str, str | None]:
    """Return ``{worker address: MALLOC_TRIM_THRESHOLD_ or None}`` of a Dask client's
    workers."""
    result: dict[str, str | None] = client.run(os.environ.get, MALLOC_TRIM)
    return result


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ToolkitError("engine='dask' needs dask.distributed",
                           fix="pip install 'toolkit[dask]'") from None
    return distributed


def start_cluster(workers: int, processes: bool = True) -> tuple[Any, Any]:
    """Start a ``LocalCluster`` of ``workers`` single-threaded workers whose nanny does not
    set ``MALLOC_TRIM_THRESHOLD_``; return ``(cluster, client)``.

    Raises:
        ToolkitError: a worker still has the variable set.
    """
    distributed = import_distributed()
    import dask

    saved = os.environ.pop(MALLOC_TRIM, None)  # a worker would inherit it from here
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{MALLOC_TRIM}": None,
                              **{f"distributed.nanny.pre-spawn-environ.{k}": v
                                 for k, v in DASK_WORKER_ENVIRON.items()}}):
            cluster = distributed.LocalCluster(n_workers=max(1, workers), threads_per_worker=1,
                                               processes=processes, dashboard_address=":0")
    finally:
        if saved is not None:
            os.environ[MALLOC_TRIM] = saved
    client = distributed.Client(cluster)
    if processes:
        bad = {w: v for w, v in worker_malloc_trim(client).items() if v is not None}
        if bad:
            client.close()
            cluster.close()
            raise ToolkitError(f"Dask workers have {MALLOC_TRIM} set ({bad}), which halves "
                               "the join's speed",
                               fix=f"unset {MALLOC_TRIM} in the environment that starts them")
    return cluster, client


def run_dask(sources: list[Any], tables: ProvenanceTables, options: dict[str, Any],
             workers: int | None, client: Any | None, progress: Progress = None
             ) -> list[PartialJoin]:
    """Join every source with ``client.map`` on ``client`` (or on a :func:`start_cluster`
    cluster of ``workers`` processes, closed afterwards); return the partials in completion
    order."""
    distributed = import_distributed()
    from toolkit.trace.fleet.join_many import join_source

    cluster = None
    if client is None:
        cluster, client = start_cluster(max(1, _workers(workers, len(sources))))
    else:
        try:
            bad = {w: v for w, v in worker_malloc_trim(client).items() if v is not None}
        except Exception:  # a client whose workers cannot run code: no check
            bad = {}
        if bad:
            warnings.warn(f"Dask workers have {MALLOC_TRIM} set ({bad}); the join runs about "
                          "half as fast. Start them with distributed.nanny.pre-spawn-environ."
                          f"{MALLOC_TRIM} set to None", stacklevel=3)
    try:
        shared = client.scatter(tables, broadcast=True)
        futures = client.map(join_source, sources, list(range(len(sources))), tables=shared,
                             options=options, pure=False)
        pending = set(futures)
        completed = distributed.as_completed(futures)
        del futures  # a worker keeps a result while some future refers to it
        out: list[PartialJoin] = []
        n = len(sources)
        try:
            for done, future in enumerate(completed, start=1):
                got = future.result()
                pending.discard(future)
                future.release()  # the worker frees the partial now, not at the end
                del future
                out.extend(got)
                _report(progress, got, done, n)
        except BaseException:
            client.cancel(list(pending))
            raise
        return out
    finally:
        if cluster is not None:
            client.close()
            cluster.close()
