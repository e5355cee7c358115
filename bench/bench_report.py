"""The profiling report of a 1M-event trace: ``tk.report`` from the trace file to the HTML file.

Writes a synthetic device session (:mod:`toolkit.trace.fleet.synthetic`: a 60-op model's command
queue run after run, every anomaly kind) of about ``--events`` events to Parquet in a
temporary folder (deleted afterwards), and a second one that differs by noise and by one
layer made 2x slower, then times in this process:

* the baseline: reading the trace and joining it (``tk.trace_join``) and ``by_layer()``: what a
  user does before any report;
* ``tk.report`` of the trace alone (first, as from the command line: papermill and nbconvert
  not yet imported), and with the second trace diffed against it: wall time (target <= 30 s
  for the first), CPU of this process and of the notebook's kernel (reaped children), and the
  ratio to the baseline;
* ``tk.report`` of a trace of 4 runs (about 300 events): the fixed cost of a report (a
  Jupyter kernel started, the toolkit, pandas and matplotlib imported in it, the notebook
  exported), and the CPU of each report above as a multiple of it.

Run: ``python bench/bench_report.py [--events 1000000]``. Timings on a shared machine are
noisy: read them with the load average printed at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import toolkit as tk
from toolkit.formats.trace_parquet import write_trace_parquet
from toolkit.trace.fleet.synthetic import synthetic_model, synthetic_session


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _timed(fn):  # type: ignore[no-untyped-def]
    c0 = _cpu()
    t = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t
    c1 = _cpu()
    return out, wall, c1[0] - c0[0], c1[1] - c0[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--target-s", type=float, default=30.0)
    a = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}")
    model = synthetic_model(ops=60)
    per_run = len(model.commands_df) + 1
    runs = max(4, a.events // per_run)
    cmd = model.commands_df
    slow_op = int(model.origins_df.groupby("optimised_id")["source_id"].count().idxmin())
    slow = {int(c): 2.0 for c in cmd.loc[cmd["optimised_id"] == slow_op, "command_id"]}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        root = Path(tmp)
        first = synthetic_session(model, 0, runs)
        second = synthetic_session(model, 0, runs, noise_seed=1, slow=slow)
        ta = write_trace_parquet(first, root / "a.parquet")
        tb = write_trace_parquet(second, root / "b.parquet")
        print(f"traces: {len(first):,} and {len(second):,} events, {runs:,} runs each, "
              f"{len(model.commands_df)} commands per run")
        del first, second

        def baseline() -> object:
            att = tk.trace_join(tk.read_trace(ta), model)
            att.by_layer()
            return att

        _, base_wall, base_cpu, _ = _timed(baseline)
        print(f"baseline (read + join + by_layer): {base_wall:6.1f} s wall, {base_cpu:6.1f} s "
              "CPU")
        rows = []
        for name, kwargs in (("report", {}), ("report + diff", {"trace_b": tb})):
            out = root / f"{name.replace(' + ', '_')}.html"
            path, wall, cpu, kernel = _timed(
                lambda out=out, kwargs=kwargs: tk.report(out, ta, model, **kwargs))
            size = Path(path).stat().st_size
            rows.append((name, wall, cpu, kernel, size))
            print(f"{name:14s}: {wall:6.1f} s wall ({wall / base_wall:4.1f}x the baseline), "
                  f"{cpu:6.1f} s CPU here + {kernel:5.1f} s in the kernel, "
                  f"{size:,} bytes")
        tiny = write_trace_parquet(synthetic_session(model, 0, 4), root / "tiny.parquet")
        _, fixed_wall, fixed_cpu, fixed_kernel = _timed(
            lambda: tk.report(root / "tiny.html", tiny, model))
        fixed = fixed_cpu + fixed_kernel
        print(f"fixed cost (a {4 * per_run}-event report): {fixed_wall:6.1f} s wall, "
              f"{fixed_cpu:5.1f} s CPU here + {fixed_kernel:5.1f} s in the kernel")
        for name, _wall, cpu, kernel, _size in rows:
            print(f"{name:14s}: {(cpu + kernel) / fixed:4.2f}x the fixed cost's CPU")
    print(f"load average at end: {os.getloadavg()}")
    wall = rows[0][1]
    ok = wall <= a.target_s
    print(f"target: the report of {a.events:,} events in <= {a.target_s:.0f} s: "
          f"{'met' if ok else 'MISSED'} ({wall:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
