"""One Interpreter shared by two threads: every call returns the right outputs or raises a
ToolkitError saying the interpreter is busy; none returns another call's outputs."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.errors import ToolkitError
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.tracer import EventTracer


@pytest.mark.parametrize("traced", [False, True])
def test_a_shared_interpreter_never_returns_wrong_outputs(traced: bool) -> None:
    model = tk.load(SAMPLES / "two_branch.tflite")
    truth_interp = Interpreter(model)
    inputs = [truth_interp.random_inputs(seed) for seed in range(16)]
    truth = [truth_interp.invoke(x) for x in inputs]
    assert not all(np.array_equal(truth[0][k], truth[1][k]) for k in truth[0])

    shared = Interpreter(model)
    shared.invoke(inputs[0])  # past the first (checking) and second (codegen) calls
    shared.invoke(inputs[1])
    calls = 300
    results = {"right": 0, "busy": 0, "wrong": 0}
    lock = threading.Lock()
    start = threading.Barrier(2)

    def worker(seed: int) -> None:
        order = np.random.default_rng(seed).integers(0, len(inputs), calls)
        tracer = EventTracer() if traced else None
        start.wait()
        for i in order:
            try:
                got = shared.invoke(inputs[i], tracer)
            except ToolkitError as e:
                assert "another thread" in str(e)
                kind = "busy"
            else:
                ok = all(np.array_equal(got[k], truth[i][k]) for k in truth[i])
                kind = "right" if ok else "wrong"
            with lock:
                results[kind] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    print(f"shared interpreter, 2 threads x {calls} calls: {results}")
    assert results["wrong"] == 0, results
    assert results["right"] + results["busy"] == 2 * calls
    assert results["right"] > 0
    # the interpreter still works after contention
    got = shared.invoke(inputs[3])
    assert all(np.array_equal(got[k], truth[3][k]) for k in truth[3])
