"""The native backend's folds (toolkit.generator.fusion) against the same artifact without
them, in one process: for each model, two artifacts (folded, and ``analyse(fuse=False)``:
every PAD, activation and residual ADD its own step) built alike and timed in alternation
(rounds of ``--runs`` inferences each, one thread, then two); the ratio is the median over
rounds of unfolded time / folded time (above 1: the folds are faster). Also prints the folded
ops by type.

Run: python bench/bench_fusion.py [MODEL ...] [--rounds N] [--runs N]
MODEL among the stems of ``sample_models/production/*.tflite`` (default: the three of the
folds: face_detection_full_range_sparse, face_detection_short_range, hand_recrop).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

import toolkit as tk
import toolkit.generator as gen
from toolkit.generator.analysis import analyse
from toolkit.runtime.native import NativeModel

PRODUCTION = Path(__file__).resolve().parent.parent / "sample_models" / "production"
DEFAULT = ["face_detection_full_range_sparse", "face_detection_short_range", "hand_recrop"]


def _artifacts(stem: str, work: Path) -> tuple[gen.Artifact, gen.Artifact]:
    model = tk.load(PRODUCTION / f"{stem}.tflite")
    folded = gen.codegen(model, work / f"{stem}_folded", name=f"{stem}_folded")
    plain = gen.analyse
    gen.analyse = lambda obj, fuse=True: analyse(obj, fuse=False)  # type: ignore[assignment]
    try:
        unfolded = gen.codegen(model, work / f"{stem}_plain", name=f"{stem}_plain")
    finally:
        gen.analyse = plain
    folded.build()
    unfolded.build()
    return folded, unfolded


def _ratio(a: NativeModel, b: NativeModel, rounds: int, runs: int) -> tuple[float, float, float]:
    """(median unfolded/folded ratio, median folded ms, median unfolded ms)."""
    ratios, ta, tb = [], [], []
    for m in (a, b):
        m.set_inputs(m.random_inputs(0))
        m.run(runs)  # warm
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        a.run(runs)
        t1 = time.perf_counter_ns()
        b.run(runs)
        t2 = time.perf_counter_ns()
        ta.append((t1 - t0) / runs / 1e6)
        tb.append((t2 - t1) / runs / 1e6)
        ratios.append((t2 - t1) / (t1 - t0))
    return float(np.median(ratios)), float(np.median(ta)), float(np.median(tb))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*", default=DEFAULT)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--runs", type=int, default=5)
    ns = p.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for stem in ns.models:
            folded, unfolded = _artifacts(stem, Path(tmp))
            kinds = Counter(s["args"]["op_type"] for s in folded.manifest["steps"]
                            if "fused_into" in s["args"])
            print(f"{stem}: folded {dict(kinds)}")
            for threads in (1, 2):
                a = NativeModel(folded, threads=threads)
                b = NativeModel(unfolded, threads=threads)
                r, ta, tb = _ratio(a, b, ns.rounds, ns.runs)
                a.close()
                b.close()
                print(f"  {threads} thread{'s' if threads > 1 else ' '}: unfolded/folded "
                      f"{r:5.3f}x  (folded {ta:7.3f} ms, unfolded {tb:7.3f} ms, medians)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
