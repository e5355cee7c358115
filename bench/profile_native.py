"""Per-op time of the generated C++ artifacts of bench_native's models, from the artifacts'
own tracers (one thread): for each model, the ops' median native time over the runs, largest
first, with each op's share of the inference and its GFLOP/s where the op is a convolution
or a matrix product (2 multiply-adds counted per MAC).

Run: python bench/profile_native.py [MODEL ...] [--runs N] [--top K] [--threads N]
MODEL among cnn, cnn_int8, transformer, mobilenet_v1, mobilenet_v1_int8, the stems of
``sample_models/production/*.tflite``, or a path to a .tflite file (default: the named ones).
A model the generator refuses as it is, is compiled first (as in bench_native).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sample_models"))

from bench_native import PRODUCTION, generate, mobilenet_int8
from bench_runtime import mobilenet_v1

import toolkit as tk
from toolkit.ir import Op
from toolkit.runtime.native import NativeModel

ROOT = Path(__file__).resolve().parent.parent
MODELS: dict[str, Callable[[], tk.Model]] = {
    "cnn": lambda: tk.load(ROOT / "sample_models" / "cnn.tflite"),
    "cnn_int8": lambda: tk.load(ROOT / "sample_models" / "cnn_int8.tflite"),
    "transformer": lambda: tk.load(ROOT / "sample_models" / "transformer.tflite"),
    "mobilenet_v1": mobilenet_v1,
    "mobilenet_v1_int8": mobilenet_int8,
}


def op_macs(op: Op) -> int:
    """Multiply-accumulates of a convolution, FULLY_CONNECTED or BATCH_MATMUL (0 else)."""
    out = op.outputs[0]
    size = int(np.prod(out.shape)) if out.shape else 1
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = op.inputs[1]
        assert w is not None
        if op.type == "CONV_2D":
            return size * int(np.prod(w.shape[1:]))
        return size * int(w.shape[1] * w.shape[2])
    if op.type == "FULLY_CONNECTED":
        w = op.inputs[1]
        assert w is not None
        return size * int(w.shape[1])
    if op.type == "BATCH_MATMUL":
        a = op.inputs[0]
        assert a is not None
        adj = bool(getattr(op.options, "adjointLhs", False) or getattr(op.options, "adjX", False))
        return size * int(a.shape[-2] if adj else a.shape[-1])
    return 0


def profile(name: str, model: tk.Model, runs: int, top: int, work: Path, threads: int = 1
            ) -> None:
    """Print the per-op profile of ``model``'s artifact (``runs`` traced inferences)."""
    art, _, _ = generate(name, model, work)
    nm = NativeModel(art, threads=threads)
    inputs = nm.random_inputs(0)
    nm.invoke(inputs)
    nm.enable_trace(len(nm.keys) * runs)
    nm.set_inputs(inputs)
    nm.run(runs)
    _, begins, ends = nm.events()
    nm.close()
    steps = len(nm.keys)
    dur = (ends - begins).reshape(runs, -1)
    med = np.median(dur, axis=0)
    total = float(np.median(dur.sum(axis=1)))
    graph = getattr(art.model, "model", art.model).graph  # the compiled model's own graph
    ops = list(graph.ops)
    print(f"{name}: {total / 1e6:.3f} ms per inference ({steps} steps, median of {runs})")
    for i in np.argsort(-med)[:top]:
        a = nm.args[i]
        idx = a.get("op_index", a.get("optimised_id"))
        op = ops[idx] if isinstance(idx, int) and idx < len(ops) else None
        macs = op_macs(op) if op is not None else 0
        gf = f"{2 * macs / med[i]:6.1f} GFLOP/s" if macs else ""
        print(f"  {med[i] / 1e3:9.1f} us {100 * med[i] / total:5.1f}%  {a.get('op_type', '?'):18s}"
              f" {shapes(op):34s} {gf}")
    by_type: dict[str, list[float]] = {}
    for i, a in enumerate(nm.args):
        row = by_type.setdefault(str(a.get("op_type", "?")), [0.0, 0.0])
        row[0] += float(med[i])
        row[1] += 1
    print("  by op type:")
    for kind, (t, n) in sorted(by_type.items(), key=lambda kv: -kv[1][0]):
        print(f"  {t / 1e3:9.1f} us {100 * t / total:5.1f}%  {kind:18s} x{int(n)}")


def shapes(op: Op | None) -> str:
    """``input shape -> output shape`` of ``op`` (with the filter's shape for convolutions)."""
    if op is None or not op.outputs:
        return ""
    x = op.inputs[0] if op.inputs else None
    w = op.inputs[1] if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(op.inputs) > 1 else None
    text = f"{list(x.shape) if x is not None else '?'}->{list(op.outputs[0].shape)}"
    if w is not None:
        text += f" k{list(w.shape[1:3])}"
        stride = getattr(op.options, "strideH", None)
        if stride and stride != 1:
            text += f"/{stride}"
    return text.replace(" ", "")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*", default=list(MODELS))
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--threads", type=int, default=1)
    ns = p.parse_args()
    if PRODUCTION.is_dir():
        for path in sorted(PRODUCTION.glob("*.tflite")):
            MODELS.setdefault(path.stem, lambda path=path: tk.load(path))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["TOOLKIT_CODEGEN_CACHE"] = str(work / "cache")
        for name in ns.models:
            if name in MODELS:
                model = MODELS[name]()
            else:
                model, name = tk.load(Path(name)), Path(name).stem
            profile(name, model, ns.runs, ns.top, work, ns.threads)


if __name__ == "__main__":
    main()
