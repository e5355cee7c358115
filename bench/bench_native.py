"""Native artifacts (toolkit.generator) vs LiteRT and the NumPy reference runtime, one thread.

Models: the CNN sample, a MobileNet-v1-sized model (float32, and int8 quantized with the
sample models' calibration and quantizer), the transformer-block sample and the zoo's Keras
LSTM (two WHILE loops of 10 steps: control flow and small tensors). Runtimes, all in
this process and taking turns within each round (see ``bench_runtime.interleaved``):

* ``native``: the generated C++ artifact (built with -O3 -march=native), inputs in, outputs out
  in one call of its C ABI (``NativeModel.invoke``); ``traced``: the same with its tracer on;
* LiteRT with ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` (its optimized kernels, no XNNPACK),
  ``BUILTIN_REF`` (its reference kernels) and ``BUILTIN`` (with the XNNPACK delegate);
* the NumPy reference runtime.

Ratios are medians of the per-round ratios (other / native: above 1 means native is faster);
times are 10th percentiles. CPU-time ratios (process_time, best of a few rounds) are printed
beside them, for a loaded machine. Generation and build times are wall-clock, the op library
compiled once into a fresh cache first. Run: python bench/bench_native.py [--quick]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sample_models"))

from bench_runtime import interleaved, mobilenet_v1

import toolkit as tk
from toolkit.formats.flatbuffer_write import write_model
from toolkit.generator import codegen
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.native import NativeModel

ROOT = Path(__file__).resolve().parent.parent
RESOLVERS = {"lite": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "lite_ref": "BUILTIN_REF",
             "xnnpack": "BUILTIN"}


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:8.2f} ms"


def _litert(model: tk.Model, resolver: str, inputs: dict[str, np.ndarray]
            ) -> Callable[[], None]:
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lite = LiteRT(model_content=bytes(write_model(model, "tflite")), num_threads=1,
                      experimental_op_resolver_type=getattr(OpResolverType, resolver))
    lite.allocate_tensors()
    det = [(d["index"], inputs[d["name"]]) for d in lite.get_input_details()]
    outs = [d["index"] for d in lite.get_output_details()]

    def run() -> None:
        for index, value in det:
            lite.set_tensor(index, value)
        lite.invoke()
        for index in outs:
            lite.get_tensor(index)

    return run


def bench(name: str, model: tk.Model, rounds: int, batch: int, work: Path) -> None:
    t0 = time.perf_counter()
    art = codegen(model, work / name, name=name)
    t1 = time.perf_counter()
    art.build(opt="-O3", native=True)
    t2 = time.perf_counter()
    native = NativeModel(art)
    inputs = native.random_inputs(0)
    traced = NativeModel(art)
    traced.enable_trace(len(traced.keys) * (rounds * batch + 2))
    ours = Interpreter(model)

    def run_native() -> None:
        native.invoke(inputs)

    def run_traced() -> None:
        traced.invoke(inputs)

    fns: dict[str, Callable[[], object]] = {"native": run_native, "traced": run_traced}
    for key, resolver in RESOLVERS.items():
        fns[key] = _litert(model, resolver, inputs)
    fns["numpy"] = lambda: ours.invoke(inputs)
    t = interleaved(fns, rounds, batch)
    p10 = {k: float(np.percentile(v, 10)) for k, v in t.items()}
    ratio = {k: float(np.median(t[k] / t["native"])) for k in t}
    cpu = cpu_seconds(fns, max(3, rounds // 10), batch)
    cpu_ratio = {k: cpu[k] / cpu["native"] for k in cpu}
    overhead = ratio["traced"] - 1
    print(f"{name:16s} generate {t1 - t0:5.2f} s  build {t2 - t1:5.2f} s  "
          f"arena {art.arena_bytes / 1024:8.1f} KiB of {art.temporaries_bytes / 1024:8.1f} KiB")
    print(f"  native {_fmt(p10['native'])}   traced {_fmt(p10['traced'])} "
          f"(overhead {100 * overhead:+5.2f}%, target < 2%)")
    for key, label, target in (("lite", "LiteRT no-delegate", ">= 1x"),
                               ("lite_ref", "LiteRT BUILTIN_REF", ">= 5x"),
                               ("xnnpack", "LiteRT XNNPACK", "-"),
                               ("numpy", "NumPy runtime", ">= 5x")):
        print(f"  {label:20s} {_fmt(p10[key])}   / native {ratio[key]:7.2f}x  "
              f"(CPU time {cpu_ratio[key]:7.2f}x)  (target {target})")
    # tracing cost inside the native loop alone (no Python call per inference)
    loop = max(1, batch * 5)
    native.set_inputs(inputs)
    traced.set_inputs(inputs)
    traced.enable_trace(len(traced.keys) * loop)
    off, on = [], []
    for _ in range(rounds):
        a = time.perf_counter_ns()
        native.run(loop)
        b = time.perf_counter_ns()
        traced.enable_trace(len(traced.keys) * loop)  # keeps the buffer, count back to 0
        c = time.perf_counter_ns()
        traced.run(loop)
        d = time.perf_counter_ns()
        off.append(b - a)
        on.append(d - c)
    loop_overhead = float(np.median(np.array(on) / np.array(off))) - 1
    print(f"  tracing in the native loop: {100 * loop_overhead:+5.2f}% "
          f"({len(traced.keys)} events per inference)")
    traced.close()
    native.close()


def cpu_seconds(fns: dict[str, Callable[[], object]], rounds: int, batch: int
                ) -> dict[str, float]:
    """CPU seconds (``time.process_time``) per call of each function: the smallest mean of
    ``batch`` calls over ``rounds`` rounds, the functions taking turns. CPU time leaves out
    the time other processes of a loaded machine take from this one."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for key, fn in fns.items():
            t0 = time.process_time()
            for _ in range(batch):
                fn()
            best[key] = min(best[key], (time.process_time() - t0) / batch)
    return best


def mobilenet_int8() -> tk.Model:
    """The MobileNet-v1-sized model quantized to int8 (calibrated in LiteRT)."""
    from make_samples import calibrate, quantize_int8

    ranges = calibrate(mobilenet_v1(), n=4)
    return quantize_int8(mobilenet_v1(), ranges)


def main() -> None:
    quick = "--quick" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["TOOLKIT_CODEGEN_CACHE"] = str(work / "cache")
        samples = ROOT / "sample_models"
        bench("cnn", tk.load(samples / "cnn.tflite"), 50 if quick else 500, 20, work)
        bench("cnn_int8", tk.load(samples / "cnn_int8.tflite"), 50 if quick else 500, 20, work)
        bench("transformer", tk.load(samples / "transformer.tflite"), 50 if quick else 500, 20,
              work)
        bench("lstm_loops", tk.load(samples / "zoo" / "lstm.tflite"), 50 if quick else 500, 20,
              work)
        bench("mobilenet_v1", mobilenet_v1(), 3 if quick else 10, 1, work)
        bench("mobilenet_v1_int8", mobilenet_int8(), 3 if quick else 10, 1, work)


if __name__ == "__main__":
    main()
