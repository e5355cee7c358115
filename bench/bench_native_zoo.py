"""Native artifacts of the converter-zoo models with the int8 sequence LSTM and the hybrid
(dynamic-range) FULLY_CONNECTED, against LiteRT and the NumPy reference runtime, one thread.

The measurement is :func:`bench_native.bench` (runtimes taking turns in one process; ratios
are other / native, medians of per-round ratios; times are 10th percentiles). Models:
``fused_bilstm_int8`` (two integer UNIDIRECTIONAL_SEQUENCE_LSTM, 10 steps of 8 cells) and
``vit_block_b1_dynamic`` (a transformer block whose FULLY_CONNECTED weights are int8 and
inputs float32). Run: python bench/bench_native_zoo.py [--quick]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_native import bench

import toolkit as tk

ZOO = Path(__file__).resolve().parent.parent / "sample_models" / "zoo"


def main() -> None:
    rounds = 50 if "--quick" in sys.argv else 300
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["TOOLKIT_CODEGEN_CACHE"] = str(work / "cache")
        for name in ("fused_bilstm_int8", "vit_block_b1_dynamic"):
            bench(name, tk.load(ZOO / f"{name}.tflite"), rounds, 20, work)


if __name__ == "__main__":
    main()
