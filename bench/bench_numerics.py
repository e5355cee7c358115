"""Benchmark of tk.compare on a MobileNet-sized float vs int8 pair, against running the two
models once each.

Run: ``python bench/bench_numerics.py [--pair mobilenet_v1] [--repeat 3]``. The pair is
``sample_models/zoo/<pair>.tflite`` and ``<pair>_int8.tflite`` (the converter's float model
and its int8 conversion). Prints, best of ``--repeat`` (wall time) and the peak of traced
allocations (``tracemalloc``, which sees NumPy's buffers), for:

* the baseline: ``tk.run`` of the float model and of the int8 model, once each;
* ``tk.compare`` without the isolated error (two captures of every tensor, matching,
  per-tensor and per-layer metrics);
* ``tk.compare`` with the isolated error (each candidate layer re-run on the reference's
  inputs);
* the same with ``budget_bytes=0`` (every captured tensor spilled to ``.npy`` files);

each as a ratio to the baseline.
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import best

import toolkit as tk

ZOO = Path(__file__).resolve().parents[1] / "sample_models" / "zoo"


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak traced allocation (bytes) during one call of ``fn``."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="mobilenet_v1", help="zoo model name (default "
                                                          "mobilenet_v1)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats (default 3)")
    a = ap.parse_args()
    f32, i8 = ZOO / f"{a.pair}.tflite", ZOO / f"{a.pair}_int8.tflite"
    fm, qm = tk.load(f32), tk.load(i8)
    x = np.random.default_rng(0).uniform(-1, 1, fm.graph.inputs[0].shape).astype(np.float32)
    tin = qm.graph.inputs[0]
    if tin.quant is not None and tin.dtype != np.float32:
        xq = np.clip(np.round(x / tin.quant.scale[0]) + tin.quant.zero_point[0], -128, 127)
        xq = xq.astype(tin.dtype)
    else:
        xq = x

    def baseline() -> None:
        tk.run(fm, [x])
        tk.run(qm, [xq])

    cases: dict[str, Callable[[], Any]] = {
        "run both once (baseline)": baseline,
        "compare, inherited only": lambda: tk.compare(fm, qm, [x], isolated=False).by_layer(),
        "compare, with isolated": lambda: tk.compare(fm, qm, [x]).by_layer(),
        "compare, isolated, spilled": lambda: tk.compare(fm, qm, [x],
                                                         budget_bytes=0).by_layer(),
    }
    baseline()  # first-call imports out of the timings
    tk.compare(fm, qm, [x]).by_layer()
    layers = len(tk.compare(fm, qm, [x], isolated=False).by_layer())
    print(f"{a.pair}: {len(fm.graph.ops)} ops, {layers} layer rows, input {list(x.shape)}")
    base_t = base_m = 0.0
    for name, fn in cases.items():
        t = best(fn, a.repeat)
        m = peak_bytes(fn)
        if not base_t:
            base_t, base_m = t, float(m)
        print(f"{name:30s} {t * 1e3:9.1f} ms  x{t / base_t:6.2f}   peak {m / 1e6:8.2f} MB  "
              f"x{m / base_m:6.2f}")


if __name__ == "__main__":
    main()
