"""Benchmark of the progress bar's cost on the loop a user makes longest: repeat runs.

Run: ``python bench/bench_progress.py [--runs 3000] [--repeat 7]``. Times ``run_model(model,
repeat=RUNS)`` on the CNN sample with bars off (the baseline) and on (drawn into a discarded
stream, shown from the first iteration), best of ``--repeat``, and prints the ratio. Target:
at most 1.05 (a bar costs under 5 % of the loop it reports on).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import best

from toolkit import progress as progress_mod
from toolkit.formats.flatbuffer_read import load
from toolkit.runtime.interpreter import run_model as run

TARGET = 1.05




def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args()
    model = load(Path(__file__).resolve().parents[1] / "sample_models" / "cnn.tflite")
    run(model, repeat=50)  # warm-up

    progress_mod.DELAY_S = 0.0
    saved = sys.stderr
    offs, ons = [], []
    try:
        for _ in range(a.repeat):   # alternate, so load from elsewhere hits both alike
            os.environ["TOOLKIT_PROGRESS"] = "0"
            offs.append(best(lambda: run(model, repeat=a.runs), 1))
            os.environ["TOOLKIT_PROGRESS"] = "1"
            sys.stderr = io.StringIO()
            ons.append(best(lambda: run(model, repeat=a.runs), 1))
            sys.stderr = saved
    finally:
        sys.stderr = saved
    off, on = min(offs), min(ons)
    ratio = on / off
    print(f"run(repeat={a.runs}) bars off: {off:.3f} s, bars on: {on:.3f} s, "
          f"ratio {ratio:.3f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
