"""Loading a large model: toolkit.load vs unpacking with the bindings' object API.

A synthetic model of 10,000 ops and ~100 MB of weights (FULLY_CONNECTED layers with
constant weights) is written once; both readers then load the same file in the same process.
The figure is the ratio baseline / toolkit (target: >= 10x). Run: python bench/bench_load.py
"""

from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path

import numpy as np
from circle_schema.v0_10 import circle as fb

import toolkit as tk
from toolkit.builder import ModelBuilder


def synthetic(n_ops: int = 10_000, weight_bytes: int = 100 * 2**20) -> tk.Model:
    """Return a chain of ``n_ops`` ops; every 4th is a FULLY_CONNECTED with its own weights,
    the others ADD/RELU/MUL, for about ``weight_bytes`` bytes of float32 weights in total."""
    n_fc = n_ops // 4
    d = int(np.sqrt(weight_bytes / 4 / n_fc))
    rng = np.random.default_rng(0)
    mb = ModelBuilder("big")
    x = mb.input("x", [1, d])
    block = rng.standard_normal((d, d)).astype(np.float32)
    for i in range(n_fc):
        w = mb.const(f"fc{i}/w", block + np.float32(i))  # distinct buffers
        x = mb.fully_connected(x, w, None, name=f"fc{i}")
        x = mb.add(x, mb.const(f"b{i}", np.float32(0.1)), name=f"add{i}")
        x = mb.unary("RELU", x, name=f"relu{i}")
        x = mb.mul(x, mb.const(f"s{i}", np.float32(0.5)), name=f"mul{i}")
    mb.output(x)
    return mb.build()


def best_of(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.tflite"
        model = synthetic()
        tk.save(model, path)
        size = path.stat().st_size
        nops = len(model.graph)
        del model

        def toolkit_load() -> None:
            m = tk.load(path)
            assert len(m.graph.ops) == nops

        def object_api() -> None:
            raw = path.read_bytes()
            m = fb.Model.ModelT.InitFromPackedBuf(raw, 0)
            assert len(m.subgraphs[0].operators) == nops

        def object_api_no_gc() -> None:
            gc.disable()
            try:
                object_api()
            finally:
                gc.enable()

        t_tk = best_of(toolkit_load)
        t_obj = best_of(object_api, 2)
        t_obj_nogc = best_of(object_api_no_gc, 2)
    print(f"model: {nops} ops, {size / 2**20:.1f} MiB")
    print(f"toolkit.load            {t_tk * 1e3:9.1f} ms")
    print(f"object API (baseline)   {t_obj * 1e3:9.1f} ms")
    print(f"object API, GC paused   {t_obj_nogc * 1e3:9.1f} ms   (toolkit.load pauses the "
          "cyclic GC while it reads; this is the baseline given the same advantage)")
    print(f"speed-up                {t_obj / t_tk:9.1f}x   (target >= 10x)")
    print(f"speed-up, GC paused     {t_obj_nogc / t_tk:9.1f}x")


if __name__ == "__main__":
    main()
