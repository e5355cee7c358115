"""Timing helpers shared by the benchmarks (run as ``python bench/bench_x.py``, so this
folder is on ``sys.path``)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of ``repeat`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def fmt_time(seconds: float) -> str:
    """``seconds`` as a fixed-width µs or ms figure."""
    return f"{seconds * 1e6:8.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:8.2f} ms"


def litert_runner(content: bytes, resolver: str, threads: int,
                  inputs: Mapping[str, np.ndarray]) -> Callable[[], None]:
    """One LiteRT inference of a model file's bytes as a call: inputs set (by name, else in
    order), ``invoke``, outputs read. ``resolver`` is an ``OpResolverType`` name (``BUILTIN``
    runs XNNPACK, ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` the builtin kernels, ``BUILTIN_REF``
    the reference kernels).

    Raises:
        RuntimeError: LiteRT cannot prepare the model (an op it lacks).
    """
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lite = LiteRT(model_content=content, num_threads=threads,
                      experimental_op_resolver_type=getattr(OpResolverType, resolver))
    lite.allocate_tensors()
    values = list(inputs.values())
    det = [(d["index"], inputs.get(d["name"], values[k]))
           for k, d in enumerate(lite.get_input_details())]
    outs = [d["index"] for d in lite.get_output_details()]

    def run() -> None:
        for index, value in det:
            lite.set_tensor(index, value)
        lite.invoke()
        for index in outs:
            lite.get_tensor(index)

    return run
