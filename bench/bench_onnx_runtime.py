"""An exported PyTorch model run three ways, one thread each: ONNX Runtime, the toolkit's
reference runtime (NumPy) on the lowered model, and the native C++ artifact generated from it.

Model: ``sample_models/onnx/mnv2_like.ts.onnx`` (a MobileNetV2-like CNN exported by PyTorch's
TorchScript exporter; ``--model`` takes another). ONNX Runtime runs at ``ORT_ENABLE_ALL``
(its default) with one intra-op thread; the reference runtime is the lowered model of
``tk.load`` + ``tk.lower_onnx``; the artifact is ``tk.codegen`` of the compiled model, built
with -O3 -march=native. The three take turns within each round
(``bench_runtime.interleaved``); ratios are medians of the per-round ratios, printed as
``reference / ORT`` and ``native / ORT`` (above 1: slower than ONNX Runtime). The outputs of
the three are checked to agree first.

Run: python bench/bench_onnx_runtime.py [--model PATH] [--rounds N] [--batch N]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_runtime import interleaved

import toolkit as tk
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.native import NativeModel

D = Path(__file__).resolve().parents[1] / "sample_models" / "onnx"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:8.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(D / "mnv2_like.ts.onnx"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch", type=int, default=20)
    args = ap.parse_args()
    import onnxruntime as ort

    path = Path(args.model)
    m = tk.load(path)
    name = m.graph.inputs[0].name
    x = np.random.default_rng(0).standard_normal(m.graph.inputs[0].shape).astype(np.float32)
    feeds = {name: x}

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    lowered = tk.lower_onnx(m)
    ref = Interpreter(lowered)
    with tempfile.TemporaryDirectory() as tmp:
        art = tk.codegen(tk.compile(m), Path(tmp) / "gen", name="bench_onnx")
        art.build(opt="-O3", native=True)
        native = NativeModel(art)
        want = sess.run(None, feeds)[0]
        got_ref = next(iter(ref.invoke(feeds).values()))
        got_nat = next(iter(native.invoke(feeds).values()))
        for label, got in (("reference", got_ref), ("native", got_nat)):
            err = float(np.max(np.abs(got - want)))
            assert err <= 1e-4 * max(float(np.max(np.abs(want))), 1.0), (label, err)
        t = interleaved({"ort": lambda: sess.run(None, feeds),
                         "reference": lambda: ref.invoke(feeds),
                         "native": lambda: native.invoke(feeds)}, args.rounds, args.batch)
    print(f"{path.name}: {len(lowered.graph.ops)} lowered ops, {args.rounds} rounds of "
          f"{args.batch} inferences, one thread")
    for k, v in t.items():
        print(f"  {k:10s} p10 {_fmt(float(np.percentile(v, 10)))}")
    ref_ratio = float(np.median(t["reference"] / t["ort"]))
    nat_ratio = float(np.median(t["native"] / t["ort"]))
    print(f"  reference / ORT: {ref_ratio:6.2f}x   native / ORT: {nat_ratio:6.2f}x "
          "(median of per-round ratios; above 1: slower than ONNX Runtime)")


if __name__ == "__main__":
    main()
