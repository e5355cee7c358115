"""Native artifacts (toolkit.generator) against LiteRT, through the calls users make, on one
thread and on two.

Models: the CNN samples (float32, int8), the transformer-block sample, the zoo's Keras LSTM
(two WHILE loops: control flow and small tensors), a MobileNet-v1-sized model (224x224, float32
and int8), and every ``.tflite`` under ``sample_models/production/`` when that folder exists
(plus those of ``--models DIR``). A model the generator cannot take as it is, is compiled first
(``compile_model``: weight DEQUANTIZE ops folded into float32 constants); a model that cannot
be read or generated is listed as skipped with the reason. LiteRT runs the original file.

Runtimes, all in this process, taking turns within each round (``bench_runtime.interleaved``):

* ``session``: ``tk.session(artifact)`` called on the input array (preallocated outputs), one
  thread; ``session2``: the same on two threads (the rows of the large ops split);
* ``tk.run``: ``tk.run(artifact, inputs)`` (the opened model kept per artifact and thread,
  outputs copied out);
* ``traced``: the one-thread session's model with its tracer turned on for the call and off
  after it (the same instance, so arena and parameters sit where they sat untraced); the cost
  of tracing is its median time less that of turning the tracer on and off alone
  (``toggle``), over the untraced session's, from a loop of its own (four times the rounds);
* LiteRT ``builtin`` (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``: its optimized kernels) and
  ``xnnpack`` (``BUILTIN``: the XNNPACK delegate), ``num_threads`` 1 and 2, and ``ref``
  (``BUILTIN_REF``, its reference kernels, one thread).

The C entry point alone is timed as one bare ctypes call of the artifact's run function on
inputs set before (``NativeModel.run(1)``): the overheads of the session call and of
``tk.run`` are their times less it (10th percentiles, microseconds; samples of the same
length, since on a loaded machine long samples are preempted more often). Ratios are
medians of per-round ratios (other / native: above 1 means native is faster). Thread
scaling (one thread / two) is printed for the native session and for XNNPACK; it needs an
idle second core, so the load average is printed at the start and the end. Generation and
build times are wall-clock (the op library compiled once into a fresh cache first).

Run: python bench/bench_native.py [--quick] [--models DIR] [--only NAME ...] [--warm-cache]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sample_models"))

from bench_runtime import interleaved, mobilenet_v1
from timing import fmt_time, litert_runner

import toolkit as tk
from toolkit.errors import ToolkitError, UnsupportedOpError
from toolkit.formats.flatbuffer_write import write_model
from toolkit.generator import Artifact, codegen
from toolkit.runtime.native import NativeModel

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ROOT / "sample_models" / "production"
RESOLVERS = {"builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "BUILTIN",
             "ref": "BUILTIN_REF"}


@dataclass
class Result:
    """One model's figures: p10 times (seconds) and median ratios (other / native)."""

    name: str
    p10: dict[str, float] = field(default_factory=dict)
    ratio: dict[str, float] = field(default_factory=dict)
    overhead_us: dict[str, float] = field(default_factory=dict)
    generate_s: float = 0.0
    build_s: float = 0.0
    missing: list[str] = field(default_factory=list)  # LiteRT runners that cannot run it


def generate(name: str, model: Any, work: Path) -> tuple[Artifact, float, float]:
    """The built artifact of ``model`` (compiled first when the generator refuses it as it
    is), with the generation and build seconds."""
    from toolkit.compiler import compile_model

    t0 = time.perf_counter()
    try:
        art = codegen(model, work / name, name=name)
    except UnsupportedOpError:
        art = codegen(compile_model(model), work / name, name=name)
    t1 = time.perf_counter()
    art.build(opt="-O3", native=True)
    return art, t1 - t0, time.perf_counter() - t1


def bench(name: str, model: Any, content: bytes, rounds: int, batch: int, work: Path
          ) -> Result:
    """Time ``model``'s artifact against LiteRT on ``content`` (the .tflite bytes)."""
    art, gen_s, build_s = generate(name, model, work)
    res = Result(name, generate_s=gen_s, build_s=build_s)
    one = NativeModel(art, threads=1)
    inputs = one.random_inputs(0)
    arrays = list(inputs.values())
    session = one.session()
    two = NativeModel(art, threads=2)
    session2 = two.session()
    steps = len(one.keys)
    tk.run(art, inputs, threads=1)  # opened and kept

    def traced() -> None:  # the same instance as "session", its tracer on for the call
        one.enable_trace(steps)
        session(*arrays)
        one.enable_trace(0)

    def toggle() -> None:  # what "traced" adds to a call besides the tracing itself
        one.enable_trace(steps)
        one.enable_trace(0)

    fns: dict[str, Callable[[], object]] = {
        "session": lambda: session(*arrays),
        "session2": lambda: session2(*arrays),
        "tk.run": lambda: tk.run(art, inputs, threads=1),
    }
    for key, resolver in RESOLVERS.items():
        for threads in ((1,) if key == "ref" else (1, 2)):
            try:
                fns[f"{key}{threads if threads > 1 else ''}"] = litert_runner(
                    content, resolver, threads, inputs)
            except RuntimeError as e:  # e.g. a custom op only the XNNPACK delegate runs
                if key == "xnnpack":
                    raise
                res.missing.append(f"{key}: {str(e).splitlines()[0][:80]}")
                break
    one.set_inputs(inputs)
    fns["c_entry"] = lambda: one.run(1)
    t = interleaved(fns, rounds, batch)
    nan = np.full(rounds, np.nan)
    res.p10 = {k: float(np.percentile(v, 10)) for k, v in t.items()}
    res.ratio = {k: float(np.median(t[k] / t["session"])) for k in t}
    res.ratio.update({k: float("nan") for k in ("builtin", "builtin2", "ref") if k not in t})
    # tracing costs a clock reading per step: a small difference, measured on its own (four
    # times the rounds, the three calls taking turns) against the median untraced call
    tt = interleaved({"session": fns["session"], "traced": traced, "toggle": toggle},
                     4 * rounds, batch)
    res.ratio["traced"] = float((np.median(tt["traced"]) - np.median(tt["toggle"]))
                                / np.median(tt["session"]))
    res.ratio["scaling_native"] = float(np.median(t["session"] / t["session2"]))
    res.ratio["scaling_xnnpack"] = float(np.median(t["xnnpack"] / t["xnnpack2"]))
    res.ratio["builtin_vs_tk.run"] = float(np.median(t.get("builtin", nan) / t["tk.run"]))
    res.ratio["xnnpack2_vs_native2"] = float(np.median(t["xnnpack2"] / t["session2"]))
    res.ratio["builtin2_vs_native2"] = float(np.median(t.get("builtin2", nan) / t["session2"]))
    res.overhead_us = {k: 1e6 * (res.p10[k] - res.p10["c_entry"]) for k in ("session", "tk.run")}
    _print(res, art)
    for m in (one, two):
        m.close()
    return res


def _print(r: Result, art: Artifact) -> None:
    p, q = r.p10, r.ratio
    print(f"{r.name:34s} generate {r.generate_s:5.2f} s  build {r.build_s:5.2f} s  "
          f"{len(art.manifest['steps'])} steps", flush=True)
    print(f"  session {fmt_time(p['session'])}  "
          f"(over the C entry {r.overhead_us['session']:+6.1f} us)"
          f"  tk.run {fmt_time(p['tk.run'])}  "
          f"(over the C entry {r.overhead_us['tk.run']:+6.1f} us)"
          f"  tracing on {100 * (q['traced'] - 1):+5.2f}%")
    print(f"  one thread:  xnnpack/native {q['xnnpack']:5.2f}x  builtin/native {q['builtin']:5.2f}x"
          f"  ref/native {q['ref']:6.2f}x  builtin/tk.run {q['builtin_vs_tk.run']:5.2f}x")
    print(f"  two threads: xnnpack/native {q['xnnpack2_vs_native2']:5.2f}x  builtin/native "
          f"{q['builtin2_vs_native2']:5.2f}x  scaling native {q['scaling_native']:4.2f}x  "
          f"xnnpack {q['scaling_xnnpack']:4.2f}x", flush=True)
    for why in r.missing:
        print(f"  not compared with LiteRT {why}", flush=True)


def summary(results: list[Result], title: str) -> None:
    """Per-model ratios of ``results`` and their medians."""
    if not results:
        return
    cols = [("xnnpack", "XNN/nat"), ("builtin", "blt/nat"), ("ref", "REF/nat"),
            ("builtin_vs_tk.run", "blt/tk.run"), ("xnnpack2_vs_native2", "XNN2/nat2"),
            ("builtin2_vs_native2", "blt2/nat2"), ("scaling_native", "nat 1/2"),
            ("scaling_xnnpack", "XNN 1/2"), ("traced", "traced")]
    print(f"\n{title}")
    print(f"  {'model':34s}" + "".join(f"{label:>11s}" for _, label in cols))
    for r in results:
        print(f"  {r.name:34s}" + "".join(f"{r.ratio[k]:11.2f}" for k, _ in cols))
    def over(fn: Callable[[np.ndarray], Any], k: str) -> float:
        v = np.array([r.ratio[k] for r in results])
        v = v[~np.isnan(v)]
        return float(fn(v)) if v.size else float("nan")

    print(f"  {'median':34s}" + "".join(f"{over(np.median, k):11.2f}" for k, _ in cols))
    print(f"  {'lowest':34s}" + "".join(f"{over(np.min, k):11.2f}" for k, _ in cols))
    print("  (nan: LiteRT's runner cannot run the model; medians and lowest leave it out)")


def mobilenet_int8() -> tk.Model:
    """The MobileNet-v1-sized model quantized to int8 (calibrated in LiteRT)."""
    from make_samples import calibrate, quantize_int8

    ranges = calibrate(mobilenet_v1(), n=4)
    return quantize_int8(mobilenet_v1(), ranges)


def _models(extra: list[Path]) -> list[tuple[str, Callable[[], Any], Callable[[Any], bytes],
                                             str]]:
    """(name, load, .tflite bytes of the loaded model, group) of every bench model."""
    samples = ROOT / "sample_models"

    def from_file(path: Path) -> tuple[Callable[[], Any], Callable[[Any], bytes]]:
        return (lambda: tk.load(path)), (lambda _m: path.read_bytes())

    def written(m: Any) -> bytes:
        return bytes(write_model(m, "tflite"))

    out: list[tuple[str, Callable[[], Any], Callable[[Any], bytes], str]] = []
    for name, path in (("cnn", samples / "cnn.tflite"), ("cnn_int8", samples / "cnn_int8.tflite"),
                       ("transformer", samples / "transformer.tflite"),
                       ("lstm_loops", samples / "zoo" / "lstm.tflite")):
        out.append((name, *from_file(path), "small"))
    out.append(("mobilenet_v1", mobilenet_v1, written, "large"))
    out.append(("mobilenet_v1_int8", mobilenet_int8, written, "large"))
    folders = ([PRODUCTION] if PRODUCTION.is_dir() else []) + extra
    for folder in folders:
        for path in sorted(folder.glob("*.tflite")):
            out.append((path.stem, *from_file(path), "production"))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--models", type=Path, action="append", default=[],
                   help="another folder of .tflite files to bench as production models")
    p.add_argument("--only", nargs="*", help="bench only these model names")
    p.add_argument("--warm-cache", action="store_true",
                   help="build with the usual object cache (build times then leave out the "
                        "op library's compilation)")
    ns = p.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    results: dict[str, list[Result]] = {"small": [], "large": [], "production": []}
    skipped = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not ns.warm_cache:
            os.environ["TOOLKIT_CODEGEN_CACHE"] = str(work / "cache")
        for name, load, content, group in _models(ns.models):
            if ns.only and name not in ns.only:
                continue
            rounds, batch = {"small": (100, 20), "large": (15, 1), "production": (20, 2)}[group]
            if ns.quick:
                rounds = max(3, rounds // 10)
            try:  # a model this branch cannot read or generate, or LiteRT cannot run (a
                # custom op it lacks), is listed, not fatal
                model = load()
                results[group].append(bench(name, model, content(model), rounds, batch, work))
            except (ToolkitError, RuntimeError) as e:
                skipped.append((name, str(e).split(". Fix:")[0][:120]))
                print(f"{name}: skipped ({skipped[-1][1]})", flush=True)
    summary(results["small"], "Small models (ratios other / native session, one thread unless "
                              "said)")
    summary(results["large"] + results["production"],
            "MobileNet-sized and production models (the issue's set)")
    for name, why in skipped:
        print(f"  skipped {name}: {why}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
