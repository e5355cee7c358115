"""Time ``toolkit.compiler`` on synthetic models of 1,000, 10,000 and 20,000 ops.

    .venv/bin/python bench/bench_compile.py [--sizes 1000 10000 20000] [--repeat 3]

Each model is a chain of blocks that give every default pass work::

    CONV_2D -> MUL (per-channel) -> ADD (per-channel) -> RELU -> RESHAPE (same shape)

(batch norm folding, activation fusion and no-op removal take 5 ops down to 1). Tensors are
small ([1, 8, 8, 8]) so the figures measure the compiler, not NumPy. Prints the best wall and
CPU time of ``--repeat`` runs per size (sizes interleaved, so that load from other processes
affects every size alike), the compiled op count, and the ratio time(20,000) / time(10,000);
targets: under 2 s for 10,000 ops, ratio under 2.2.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

import numpy as np

import toolkit.compiler
from toolkit.builder import ModelBuilder
from toolkit.ir import Model

BLOCK_OPS = 5


def synthetic_model(n_ops: int, channels: int = 8, size: int = 8, seed: int = 0) -> Model:
    """Return a model of about ``n_ops`` ops (a whole number of 5-op blocks)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder("bench")
    x = mb.input("input", [1, size, size, channels])
    w = (rng.standard_normal((channels, 3, 3, channels)) * 0.1).astype(np.float32)
    for b in range(max(1, n_ops // BLOCK_OPS)):
        p = f"block{b}"
        y = mb.conv2d(x, mb.const(f"{p}/w", w), mb.const(f"{p}/b", np.zeros(channels)),
                      name=f"{p}/conv")
        y = mb.mul(y, mb.const(f"{p}/scale", rng.uniform(0.5, 1.5, channels)), name=f"{p}/mul")
        y = mb.add(y, mb.const(f"{p}/shift", rng.normal(0, 0.1, channels)), name=f"{p}/add")
        y = mb.unary("RELU", y, name=f"{p}/relu")
        x = mb.reshape(y, list(y.shape), name=f"{p}/reshape")
    mb.output(x)
    return mb.build()


def time_compile(model: Model) -> tuple[float, float, int]:
    """Return the wall and CPU time (s) of one compile and the compiled op count."""
    gc.collect()  # start from a clean heap: a compiled model is cyclic garbage once dropped
    keep = []  # the result is freed after timing, not inside the next run
    w0, c0 = time.perf_counter(), time.process_time()
    keep.append(toolkit.compiler.compile_model(model))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return wall, cpu, len(keep[0].ops)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 when both targets are met (wall time), 1 otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 20000])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    models = {n: synthetic_model(n) for n in args.sizes}
    wall: dict[int, float] = {}
    cpu: dict[int, float] = {}
    n_out: dict[int, int] = {}
    for _ in range(args.repeat):  # sizes interleaved, so that machine load hits all alike
        for n, model in models.items():
            w, c, k = time_compile(model)
            wall[n], cpu[n], n_out[n] = min(wall.get(n, w), w), min(cpu.get(n, c), c), k
    for n, model in models.items():
        sys.stdout.write(f"{len(model.graph):>6} ops -> {n_out[n]:>5} compiled ops: "
                         f"{wall[n]:7.3f} s wall, {cpu[n]:7.3f} s CPU\n")
    ok = True
    if 10000 in wall:
        ok &= wall[10000] < 2.0
        sys.stdout.write(f"10,000 ops under 2 s: {'yes' if wall[10000] < 2.0 else 'NO'}\n")
    if 10000 in wall and 20000 in wall:
        ratio, ratio_cpu = wall[20000] / wall[10000], cpu[20000] / cpu[10000]
        ok &= ratio < 2.2
        sys.stdout.write(f"time(20,000) / time(10,000) = {ratio:.2f} wall, {ratio_cpu:.2f} CPU "
                         f"({'under' if ratio < 2.2 else 'NOT under'} 2.2)\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
