"""Time ``toolkit.compile`` on synthetic models of 1,000, 10,000 and 20,000 ops.

    .venv/bin/python bench/bench_compile.py [--sizes 1000 10000 20000] [--repeat 3]

Each model is a chain of blocks that give every default pass work::

    CONV_2D -> MUL (per-channel) -> ADD (per-channel) -> RELU -> RESHAPE (same shape)

(batch norm folding, activation fusion and no-op removal take 5 ops down to 1). Tensors are
small ([1, 8, 8, 8]) so the figures measure the compiler, not NumPy. Prints the best time of
``--repeat`` runs per size (seconds), the compiled op count, and the ratio
time(20,000) / time(10,000); targets: under 2 s for 10,000 ops, ratio under 2.2.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import toolkit.compile
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


def time_compile(model: Model, repeat: int) -> tuple[float, int]:
    """Return the best wall time (s) of ``repeat`` compiles and the compiled op count."""
    best = float("inf")
    n = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        compiled = toolkit.compile.compile_model(model)
        best = min(best, time.perf_counter() - t0)
        n = len(compiled.ops)
    return best, n


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 when both targets are met, 1 otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 20000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    times: dict[int, float] = {}
    for n in args.sizes:
        model = synthetic_model(n)
        t, n_out = time_compile(model, args.repeat)
        times[n] = t
        sys.stdout.write(f"{len(model.graph):>6} ops -> {n_out:>5} compiled ops: {t:7.3f} s\n")
    ok = True
    if 10000 in times:
        ok &= times[10000] < 2.0
        sys.stdout.write(f"10,000 ops under 2 s: {'yes' if times[10000] < 2.0 else 'NO'}\n")
    if 10000 in times and 20000 in times:
        ratio = times[20000] / times[10000]
        ok &= ratio < 2.2
        sys.stdout.write(f"time(20,000) / time(10,000) = {ratio:.2f} "
                         f"({'under' if ratio < 2.2 else 'NOT under'} 2.2)\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
