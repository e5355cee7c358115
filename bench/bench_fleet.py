"""Fleet joins: ``trace_join_many`` on a process pool and on Dask against one file at a time.

Generates a fleet of synthetic device sessions (:mod:`toolkit.trace.synthetic`: Parquet files,
one session per file, every anomaly kind) in a temporary folder (never committed), then times:

* the baseline: the toolkit's own join, one file at a time in this process (read, join,
  per-run table), CPU per event;
* ``engine="local"`` with ``--workers`` processes: wall time, CPU per event (this process and
  its workers), ratio to the baseline, and the peak memory (``VmHWM``) of a fresh process
  joining one file as a worker does;
* ``engine="dask"`` on a ``LocalCluster`` of as many worker processes, started without
  ``MALLOC_TRIM_THRESHOLD_`` (the bench fails when a worker has it set); with ``--dask-default``
  also on a cluster with Dask's default nanny setting, to show what it costs;
* linearity: the local engine on the first half of the files against all of them
  (``time(all) / (2 * time(half))``; 1.0 is linear).

Every engine's result is compared with the baseline's merge (integer ns, counts and per-run
statistics equal); the figures are ratios in one process, never assertions on time.

Run: python bench/bench_fleet.py [--files 16] [--events 500000] [--ops 400] [--workers 2]
``--files 64 --events 2000000`` is the 128M-event fleet (its per-run tables are rows x runs
cells of 24 bytes: mind the parent's memory with large models).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.trace.fleet import FleetAttribution, trace_join_many
from toolkit.trace.fleet_merge import merge_partials
from toolkit.trace.fleet_partial import join_partition, provenance_digest
from toolkit.trace.synthetic import synthetic_model, write_synthetic_fleet

VIEWS = ("by_layer", "by_op", "by_command")


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (seconds)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def vm_hwm_mb() -> float:
    """Peak resident memory of this process (MB), from ``/proc/self/status`` (``VmHWM``; unlike
    ``ru_maxrss`` it is not inherited from the parent across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one_file_peak_mb(path: Path, model_ops: int) -> float:
    """Peak memory of a fresh process that joins one file as a worker does (MB)."""
    code = (f"from toolkit.trace.synthetic import synthetic_model\n"
            f"from toolkit.trace.fleet_partial import join_partition\n"
            f"import bench_fleet\n"
            f"join_partition({str(path)!r}, synthetic_model({model_ops}, seed=1))\n"
            f"print(bench_fleet.vm_hwm_mb())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).parent, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def same(a: FleetAttribution, b: FleetAttribution) -> None:
    """Raise AssertionError unless two fleet results are equal (views, counts, bits)."""
    a.check()
    b.check()
    for view in VIEWS:
        pd.testing.assert_frame_equal(getattr(a, view)(), getattr(b, view)(), check_exact=True)
    assert a.summary() == b.summary()


def timed(label: str, fn: Any) -> tuple[Any, float, float]:
    """Run ``fn``; return its result, wall seconds and CPU seconds (this process and reaped
    children)."""
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    print(f"{label:<48} {wall:8.2f} s", flush=True)
    return out, wall, cpu


def worker_cpu(client: Any) -> float:
    """CPU seconds used so far by the Dask client's worker processes."""
    def used() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    return float(sum(client.run(used).values()))


def worker_peak_mb(client: Any) -> float:
    """Peak resident memory of the largest Dask worker (MB, ``VmHWM``)."""
    return float(max(client.run(vm_hwm_mb).values()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--events", type=int, default=500_000, help="events per file (about)")
    p.add_argument("--ops", type=int, default=400, help="compiled ops of the model")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dask-default", action="store_true",
                   help="also time Dask with its default MALLOC_TRIM_THRESHOLD_")
    p.add_argument("--no-dask", action="store_true")
    p.add_argument("--folder", type=Path, help="where to write the fleet (default: temp)")
    a = p.parse_args(argv)

    model = synthetic_model(a.ops, seed=1)
    commands = len(model.commands_df)
    runs = max(2, a.events // (commands + 1))
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        folder = a.folder or Path(tmp)
        t0 = time.perf_counter()
        paths = write_synthetic_fleet(folder, model, a.files, runs)
        print(f"generated {a.files} files x {runs} runs x {commands} commands (+ wrappers and "
              f"anomalies) in {time.perf_counter() - t0:.1f} s", flush=True)
        digest = provenance_digest(model)

        def baseline() -> FleetAttribution:
            parts = [join_partition(path, model, order=i, digest=digest)
                     for i, path in enumerate(paths)]
            return FleetAttribution(merge_partials(parts), model)

        rows: list[dict[str, Any]] = []
        base, base_wall, base_cpu = timed("baseline: one file at a time, this process",
                                          baseline)
        events = base.summary()["events"]
        print(f"  {events} events, {base.runs} runs", flush=True)

        def record(engine: str, wall: float, cpu: float, peak_mb: float) -> None:
            rows.append({"engine": engine, "files": len(paths), "events": events,
                         "wall_s": round(wall, 2), "x_baseline": round(base_wall / wall, 2),
                         "cpu_us_per_event": round(cpu / events * 1e6, 3),
                         "worker_peak_mb": round(peak_mb)})

        record("baseline (1 process)", base_wall, base_cpu, 0)
        got, wall, cpu = timed(f"local, {a.workers} workers", lambda: trace_join_many(
            paths, model, workers=a.workers))
        same(got, base)
        record(f"local x{a.workers}", wall, cpu, one_file_peak_mb(paths[0], a.ops))
        half = paths[: len(paths) // 2]
        if half:
            _, half_wall, _ = timed(f"local, {a.workers} workers, first {len(half)} files",
                                    lambda: trace_join_many(half, model, workers=a.workers))
            print(f"  linearity {len(half)} -> {len(paths)} files: "
                  f"{2 * half_wall / wall:.2f}x of linear (1.0 = linear)")
        if not a.no_dask:
            from toolkit.trace.fleet_engines import start_cluster, worker_malloc_trim

            cluster, client = start_cluster(a.workers)
            try:
                trim = worker_malloc_trim(client)
                if any(v is not None for v in trim.values()):
                    print(f"FAIL: Dask workers have MALLOC_TRIM_THRESHOLD_ set: {trim}")
                    return 1
                before = worker_cpu(client)
                got, wall, cpu = timed(f"dask, {a.workers} workers (no malloc trim)",
                                       lambda: trace_join_many(paths, model, engine="dask",
                                                               client=client))
                same(got, base)
                record(f"dask x{a.workers}", wall, cpu + worker_cpu(client) - before,
                       worker_peak_mb(client))
            finally:
                client.close()
                cluster.close()
            if a.dask_default:
                import distributed

                cluster = distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1,
                                                   dashboard_address=":0")
                client = distributed.Client(cluster)
                try:
                    print(f"  default workers: {worker_malloc_trim(client)}")
                    before = worker_cpu(client)
                    got, wall, cpu = timed(f"dask, {a.workers} workers, Dask's default",
                                           lambda: trace_join_many(paths, model,
                                                                   engine="dask",
                                                                   client=client))
                    same(got, base)
                    record(f"dask x{a.workers} default trim", wall,
                           cpu + worker_cpu(client) - before, worker_peak_mb(client))
                finally:
                    client.close()
                    cluster.close()
        print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
