"""Pointwise (1x1, stride 1) float convolutions of the native artifacts: the register tiles of
``tk::conv2d_f32_pointwise`` (panels of 8 or 16 output channels sized to the layer) against
the packed GEMM of ``tk::conv2d_f32_packed`` (panels of 16 or 32) that ran them before, on
the production models' layer shapes and MobileNet-v1's, one thread.

Each shape is a one-op model (input, a random filter and bias, RELU or with
``--no-activation`` none) generated twice: as the
generator writes it, and with the pointwise call replaced by the packed GEMM's. Both run in
this process, taking turns; times are process CPU seconds (a loaded machine preempts the
wall clock), the minimum over the rounds. Prints GFLOP/s of both (2 per multiply-add) and
the ratio packed / pointwise (above 1: the new tiles are faster); the outputs must be equal.

Run: python bench/bench_pointwise.py [--no-activation] [HxWxCxO ...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import toolkit as tk
import toolkit.generator.ops as ops
from toolkit.builder import ModelBuilder
from toolkit.generator import codegen
from toolkit.runtime.native import NativeModel

#: (h, w, c, o): face_detection_full_range_sparse, face_detection_short_range, hand_recrop,
#: then MobileNet-v1's pointwise layers
SHAPES = [(96, 96, 32, 8), (96, 96, 8, 32), (48, 48, 24, 48), (48, 48, 48, 24),
          (48, 48, 16, 64), (48, 48, 64, 16), (48, 48, 64, 48),
          (64, 64, 24, 28), (64, 64, 24, 24), (32, 32, 36, 42), (32, 32, 32, 36),
          (16, 16, 42, 48), (64, 64, 8, 16), (32, 32, 16, 32),
          (112, 112, 32, 64), (56, 56, 128, 128), (28, 28, 256, 256), (14, 14, 512, 512)]


def _packed(e: ops.Emitter, geom: str, x: tk.Tensor, w: np.ndarray, b: str, op: tk.Op,
            out: tk.Tensor, r0: int, r1: int, work: int) -> str:
    """The packed GEMM's call for a pointwise convolution (the generator's former choice)."""
    nr, panels = ops.gemm_panels(w)
    return ops._row_call(f"tk::conv2d_f32_packed({geom}, {e.ptr(x)}, "
                         f"{e.param(panels, 'float')}, {nr}, {b}, {ops._act(op)}, "
                         f"{e.ptr(out)}", r0, r1, work)


def bench(h: int, w: int, c: int, o: int, tmp: Path, activation: str | None = "RELU",
          rounds: int = 9) -> tuple[float, float]:
    """GFLOP/s of the pointwise tiles and of the packed GEMM on one shape."""
    rng = np.random.default_rng(0)
    mb = ModelBuilder("pw")
    x = mb.input("x", [1, h, w, c])
    wt = mb.const("w", rng.standard_normal((o, 1, 1, c)).astype(np.float32))
    bt = mb.const("b", rng.standard_normal(o).astype(np.float32))
    mb.output(mb.conv2d(x, wt, bt, activation=activation, name="pw"))
    model = mb.build()
    new_emit = ops._pointwise
    arts = {}
    try:
        for name, emit in (("pointwise", new_emit), ("packed", _packed)):
            ops._pointwise = emit
            arts[name] = codegen(model, tmp / f"{h}x{w}x{c}x{o}_{name}", name="pw")
            arts[name].build()
    finally:
        ops._pointwise = new_emit
    feed = {"x": rng.standard_normal((1, h, w, c)).astype(np.float32)}
    flops = 2.0 * h * w * c * o
    reps = max(3, int(4e8 / flops))
    models = {k: NativeModel(a, threads=1) for k, a in arts.items()}
    try:
        outs = {k: m.invoke(feed)["pw"] for k, m in models.items()}
        assert np.array_equal(outs["pointwise"], outs["packed"]), (h, w, c, o)
        best = dict.fromkeys(models, float("inf"))
        for _ in range(rounds):
            for k, m in models.items():
                t0 = time.process_time()
                m.run(reps)
                best[k] = min(best[k], (time.process_time() - t0) / reps)
    finally:
        for m in models.values():
            m.close()
    return flops / best["pointwise"] / 1e9, flops / best["packed"] / 1e9


def main(argv: list[str]) -> None:
    activation = None if "--no-activation" in argv else "RELU"
    shapes = [tuple(int(v) for v in a.split("x")) for a in argv if a[0].isdigit()] or SHAPES
    print(f"{'shape':>22}  pointwise GFLOP/s  packed GFLOP/s  packed/pointwise")
    with tempfile.TemporaryDirectory() as d:
        for h, w, c, o in shapes:
            new, old = bench(h, w, c, o, Path(d), activation)
            print(f"{f'[{h},{w},{c}]->{o}':>22}  {new:17.1f}  {old:14.1f}  {new / old:16.2f}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
