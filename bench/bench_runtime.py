"""Reference runtime vs LiteRT (single-threaded), and the cost of tracing.

Models: the CNN sample, a MobileNet-v1-sized model (224x224x3, 13 depthwise-separable
blocks, ~570 M MACs) built with the model builder, and from the converter zoo a transformer
block (``vit_block_b1``: layer norms, 4-head attention, GELU MLP on 16 tokens of width 32)
and a Keras LSTM (``lstm``: two stacked LSTMs over 10 steps as WHILE loops, whose cond and
body subgraphs the reference runtime runs once per step). All three (LiteRT, the reference runtime,
the reference runtime traced) run in one process, taking turns (see ``interleaved``); the
ratios reference / LiteRT (target <= 5x) and traced / untraced (target < 5% overhead) are
the medians of the ratios within each round; times shown are 10th percentiles. Both
runtimes are timed inputs in, outputs out. BLAS is limited to one thread for a like-for-like
comparison with LiteRT's single thread. Run: python bench/bench_runtime.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.formats.flatbuffer_write import write_model
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.tracer import EventTracer

ROOT = Path(__file__).resolve().parent.parent


def mobilenet_v1(alpha: float = 1.0) -> tk.Model:
    """MobileNet v1 (224x224x3 -> 1000 classes) with random weights."""
    rng = np.random.default_rng(0)
    mb = ModelBuilder("mobilenet_v1")
    x = mb.input("input", [1, 224, 224, 3])

    def conv(t, c_out, k, stride, name):
        c_in = t.shape[3]
        w = mb.const(f"{name}/kernel", rng.standard_normal((c_out, k, k, c_in)).astype(
            np.float32) * np.float32(np.sqrt(2 / (k * k * c_in))))
        b = mb.const(f"{name}/bias", np.zeros(c_out, np.float32))
        return mb.conv2d(t, w, b, stride=stride, activation="RELU6", name=name)

    def dw(t, stride, name):
        c = t.shape[3]
        w = mb.const(f"{name}/kernel", rng.standard_normal((1, 3, 3, c)).astype(np.float32)
                     * np.float32(np.sqrt(2 / 9)))
        b = mb.const(f"{name}/bias", np.zeros(c, np.float32))
        return mb.depthwise_conv2d(t, w, b, stride=stride, activation="RELU6", name=name)

    c = int(32 * alpha)
    x = conv(x, c, 3, 2, "conv0")
    spec = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + \
        [(1024, 2), (1024, 1)]
    for i, (ch, s) in enumerate(spec):
        x = dw(x, s, f"block{i}/dw")
        x = conv(x, int(ch * alpha), 1, 1, f"block{i}/pw")
    x = mb.mean(x, [1, 2], keep_dims=False, name="gap")
    w = mb.const("fc/kernel", rng.standard_normal((1000, x.shape[1])).astype(np.float32) * .03)
    x = mb.fully_connected(x, w, mb.const("fc/bias", np.zeros(1000, np.float32)), name="fc")
    mb.output(mb.softmax(x, name="softmax"))
    return mb.build()


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, batch: int
                ) -> dict[str, np.ndarray]:
    """Seconds per call of each function, one sample per round: the mean time of ``batch``
    calls. The functions take turns within each round (in a rotating order), so that the
    slow drifts of a shared machine hit the samples of one round alike."""
    for fn in fns.values():
        fn()  # warm up (the reference runtime binds its kernels on its first inference)
    names = list(fns)
    samples: dict[str, list[float]] = {k: [] for k in names}
    clock = time.perf_counter
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[k]
            t0 = clock()
            for _ in range(batch):
                fn()
            samples[k].append((clock() - t0) / batch)
    return {k: np.array(v) for k, v in samples.items()}


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:7.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:7.2f} ms"


def bench(name: str, model: tk.Model, rounds: int, batch: int) -> None:
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lite = LiteRT(model_content=bytes(write_model(model, "tflite")), num_threads=1)
    lite.allocate_tensors()
    ours = Interpreter(model)
    inputs = ours.random_inputs(0)
    det = [(d["index"], inputs[d["name"]]) for d in lite.get_input_details()]
    outs = [d["index"] for d in lite.get_output_details()]

    def run_lite() -> None:  # inputs in, outputs out, as the reference runtime's invoke
        for index, value in det:
            lite.set_tensor(index, value)
        lite.invoke()
        for index in outs:
            lite.get_tensor(index)

    def run_ours() -> None:
        ours.invoke(inputs)

    tracer = EventTracer()  # one tracer, a new run per inference, as run(repeat=N) does

    def run_traced() -> None:
        ours.invoke(inputs, tracer, new_run=True)

    t = interleaved({"lite": run_lite, "ours": run_ours, "traced": run_traced}, rounds, batch)
    # ratios within each round, then their median: robust to the machine's drifts
    ratio = float(np.median(t["ours"] / t["lite"]))
    overhead = float(np.median(t["traced"] / t["ours"])) - 1
    tl, to, tt = (float(np.percentile(t[k], 10)) for k in ("lite", "ours", "traced"))
    print(f"{name:14s} ops={len(model.graph):3d}  LiteRT {_fmt(tl)}   reference {_fmt(to)}   "
          f"ratio {ratio:5.2f}x (target <= 5x)   traced {_fmt(tt)}   "
          f"overhead {100 * overhead:+5.1f}% (target < 5%)")


def main() -> None:
    quick = "--quick" in sys.argv
    bench("cnn", tk.load(ROOT / "sample_models" / "cnn.tflite"), 100 if quick else 1500, 20)
    bench("mobilenet_v1", mobilenet_v1(), 3 if quick else 10, 1)
    zoo = ROOT / "sample_models" / "zoo"
    bench("vit_block", tk.load(zoo / "vit_block_b1.tflite"), 50 if quick else 500, 10)
    bench("lstm (WHILE)", tk.load(zoo / "lstm.tflite"), 20 if quick else 200, 5)
    bench("fused_lstm", tk.load(zoo / "fused_lstm.tflite"), 50 if quick else 500, 10)


if __name__ == "__main__":
    main()
