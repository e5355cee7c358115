"""Time ``toolkit.partitioner`` on synthetic chains of 5,000, 10,000 and 20,000 ops.

    .venv/bin/python bench/bench_partition.py [--sizes 5000 10000 20000] [--repeat 3]
                                              [--write]

Each model is a chain ``ADD -> MUL -> ADD -> MUL ...`` on a [1, 8] tensor, with ``[OPCODE]
ADD=cpu, MUL=npu``: backends alternate op by op, so every op becomes a part of its own (the
most parts, the most cuts). Prints, per size, the best time of ``--repeat`` rounds (seconds) of
the whole ``partition()`` call (placing, grouping, building part models) and of the grouping
alone, the part count, and the ratios time(n) / time(n / 2) (linear growth gives about 2).
Times are process CPU times (the machine may be shared with other work); the wall time of the
whole call is printed beside them.
With ``--write`` it also times writing every part file and both connection files.
Targets: partition() of 10,000 ops under 1 s, ratios under 2.5 (timings on a shared
machine vary by a few tens of percent).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from toolkit.builder import ModelBuilder
from toolkit.formats.part_file import PartSpec
from toolkit.ir import Model
from toolkit.partitioner import partition
from toolkit.partitioner.grouping import group_ops, place_ops

SPEC = PartSpec(["cpu", "npu"], "cpu", "opcode", opcode={"ADD": "cpu", "MUL": "npu"})


def synthetic_chain(n_ops: int) -> Model:
    """Return a chain of ``n_ops`` ADD/MUL ops, alternating, each with a constant operand."""
    mb = ModelBuilder("chain")
    x = mb.input("input", [1, 8])
    c = mb.const("c", np.full((1, 8), 0.5, np.float32))
    for i in range(n_ops):
        x = mb.binary("ADD" if i % 2 == 0 else "MUL", x, c, name=f"op{i}")
    mb.output(x)
    return mb.build()


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Return the CPU time and wall time (s) of one call of ``fn`` and its result."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 when the targets are met, else 1."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="also time writing the files")
    args = ap.parse_args(argv)
    models = {n: synthetic_chain(n) for n in args.sizes}
    best: dict[int, list[float]] = {n: [float("inf")] * 3 for n in args.sizes}
    parts: dict[int, int] = {}
    # rounds over all sizes, so that a burst of load elsewhere hits every size alike
    for _ in range(args.repeat):
        for n, model in models.items():
            cpu, wall, result = timed(lambda m=model: partition(m, SPEC))
            parts[n] = len(result.parts)
            del result

            def grouping(m: Model = model) -> object:
                placements, _ = place_ops(m.graph.ops, SPEC)
                return group_ops(m.graph, [p.backend for p in placements])

            g_cpu, _, _ = timed(grouping)
            b = best[n]
            best[n] = [min(b[0], cpu), min(b[1], wall), min(b[2], g_cpu)]
    print(f"{'ops':>7} {'parts':>7} {'partition_s':>12} {'wall_s':>7} {'grouping_s':>11} "
          f"{'ratio':>6}" + (f" {'write_s':>8}" if args.write else ""))
    ok = True
    for n in args.sizes:
        t_all, wall, t_group = best[n]
        half = best.get(n // 2, [None])[0]
        ratio = f"{t_all / half:6.2f}" if half else f"{'-':>6}"
        line = (f"{n:>7} {parts[n]:>7} {t_all:>12.3f} {wall:>7.3f} {t_group:>11.3f} "
                f"{ratio}")
        if args.write:
            result = partition(models[n], SPEC)
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                result.write(tmp)
                line += f" {time.perf_counter() - t0:>8.2f}"
        print(line)
        if n == 10000 and t_all >= 1.0:
            ok = False
        if half and t_all / half > 2.5:
            ok = False
    print("target (10,000 ops under 1 s, ratios under 2.5):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
