"""Benchmark of the event tracer's hot path, single-threaded: ``tr.end(tr.begin(k))``.

Run: ``python bench/bench_tracer.py [--pairs 200000] [--repeat 7]``. Times PAIRS begin/end
pairs into a fresh tracer, and as the baseline (run in the same process) the least any
tracer must do per pair: two clock readings appended to two lists, a key to a third. Best of
``--repeat``; prints both in ns per pair and the ratio tracer / baseline, and the
``uptime`` load average. Run on two versions of the tracer, the ratios compare them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import best

from toolkit.runtime.tracer import EventTracer


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args()
    n = a.pairs

    def baseline() -> None:
        clock = time.perf_counter_ns
        keys: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        for _ in range(n):
            keys.append(7)
            starts.append(clock())
            ends.append(clock())

    def tracer() -> None:
        tr = EventTracer()
        begin, end = tr.begin, tr.end
        for _ in range(n):
            end(begin(7))

    base = best(baseline, a.repeat)
    traced = best(tracer, a.repeat)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print(f"baseline {base / n * 1e9:.0f} ns/pair, tracer {traced / n * 1e9:.0f} ns/pair, "
          f"ratio {traced / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
