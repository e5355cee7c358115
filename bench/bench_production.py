"""The reference runtime and the native backend against LiteRT on the production models of
``sample_models/production`` (MediaPipe's files: sparse and float16 weights, custom ops), one
thread.

Runtimes, all in this process, taking turns within each round (``bench_runtime.interleaved``):

* ``native``: the C++ artifact of the model as loaded (``tk.codegen``: sparse and float16
  weights computed at generation time), built with -O3 -march=native, one C ABI call;
* ``numpy``: the reference runtime on the model as loaded;
* ``lite``: LiteRT on the original file, builtin kernels without delegates
  (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``); ``xnnpack``: LiteRT with its XNNPACK delegate
  (``BUILTIN``). A model LiteRT cannot run with a resolver (its custom ops are not there) is
  marked ``-``.

Printed per model: 10th-percentile times, and ratios ``runtime / LiteRT`` (and the reference
runtime's ``/ native``; medians of the per-round ratios; above 1 means slower). Run:
``python bench/bench_production.py [--quick] [--only NAME,NAME]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runtime import interleaved
from timing import fmt_time, litert_runner

import toolkit as tk
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.native import NativeModel

PROD = Path(__file__).resolve().parent.parent / "sample_models" / "production"
RESOLVERS = {"lite": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "BUILTIN"}


def bench(path: Path, rounds: int, batch: int, work: Path) -> None:
    name = path.stem
    model = tk.load(path)
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.uniform(-1, 1, t.shape).astype(np.float32)
              for t in model.graph.inputs}
    art = tk.codegen(model, work / name, name=name)
    art.build(opt="-O3", native=True)
    native = NativeModel(art)
    ours = Interpreter(model)
    fns: dict[str, Callable[[], object]] = {"native": lambda: native.invoke(inputs),
                                            "numpy": lambda: ours.invoke(inputs)}
    for key, resolver in RESOLVERS.items():
        try:
            fn: Callable[[], None] | None = litert_runner(path.read_bytes(), resolver, 1, inputs)
        except RuntimeError:  # an op LiteRT lacks (MediaPipe's custom ops)
            fn = None
        if fn is not None:
            fns[key] = fn
    t = interleaved(fns, rounds, batch)
    p10 = {k: float(np.percentile(v, 10)) for k, v in t.items()}
    print(f"{name} ({len(model.graph.ops)} ops)")
    for key in ("native", "numpy", "lite", "xnnpack"):
        if key not in t:
            print(f"  {key:8s}        -")
            continue
        ratios = []
        for base in ("native", "lite", "xnnpack") if key == "numpy" else ("lite", "xnnpack"):
            if base in t and base != key:
                ratios.append(f"/ {base} {float(np.median(t[key] / t[base])):7.2f}x")
        print(f"  {key:8s} {fmt_time(p10[key])}   {'   '.join(ratios)}")
    native.close()


def main() -> None:
    quick = "--quick" in sys.argv
    only = None
    if "--only" in sys.argv:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
    rounds, batch = (5, 2) if quick else (30, 3)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["TOOLKIT_CODEGEN_CACHE"] = str(work / "cache")
        for path in sorted(PROD.glob("*.tflite")):
            if only is None or path.stem in only:
                bench(path, rounds, batch, work)


if __name__ == "__main__":
    main()
