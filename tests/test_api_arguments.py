"""Every public function of toolkit.api checks the types and ranges of its arguments: a bad
one is a ToolkitError naming the argument, never a TypeError from deep inside.

Each call runs under an alarm (``signal.setitimer``): a call that waits on something (a
worker pool, a pipe, an inference count far too large) fails the test instead of hanging it.
No call here starts a worker pool: every bad argument is refused before any work starts.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import toolkit as tk
from toolkit.errors import ToolkitError

SAMPLES = Path(__file__).resolve().parents[1] / "sample_models"
CNN = SAMPLES / "cnn.tflite"
PART = {"partition": {"backends": "a,b", "default": "a"}}
SECONDS = 20.0

BAD = [123, 2.5, -1, True, [1], {"a": 1}, object(), float("nan"), 10**30, b"\0"]
"""Values tried for every argument below (those in VALID excepted)."""

VALID: dict[str, list[Any]] = {
    "save.unfuse_activations": [True], "compile.max_sweeps": [123, 10**30],
    "run.trace": [True], "run.repeat": [123], "run.warmup": [123], "run.threads": [123],
    "read_trace.clock_hz": [123, 2.5, 10**30], "trace_join.strict": [True],
    "trace_join_many.workers": [123], "trace_join_many.skip_runs": [123, 10**30],
    "trace_join_many.memory_budget": [123, 10**30],
    "explore.repeat": [123], "codegen.debug": [True],
}
"""Values of BAD that an argument does take (not tried)."""


def _valid(name: str, value: Any) -> bool:
    return any(type(value) is type(v) and value == v for v in VALID.get(name, []))


class _HangError(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _HangError(f"the call ran over {SECONDS} s")


def _within_time(call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` under an alarm; return what it raised (None when it returned)."""
    assert threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        call()
    except _HangError:
        raise
    except BaseException as exc:
        return exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return None


@pytest.fixture(scope="module")
def objs() -> Iterator[dict[str, Any]]:
    model = tk.load(CNN)
    yield {"model": model, "tracer": tk.run(model, trace=True).trace}


def _cases(o: dict[str, Any], tmp: Path) -> dict[str, Callable[[Any], Any]]:
    m, tr = o["model"], o["tracer"]
    return {
        "load": lambda v: tk.load(v),
        "save.path": lambda v: tk.save(m, v),
        "save.unfuse_activations": lambda v: tk.save(m, tmp / "x.circle", unfuse_activations=v),
        "compile.passes": lambda v: tk.compile(m, passes=v),
        "compile.max_sweeps": lambda v: tk.compile(m, max_sweeps=v),
        "partition.backends": lambda v: tk.partition(m, PART, backends=v),
        "partition.default": lambda v: tk.partition(m, PART, default=v),
        "partition.work_path": lambda v: tk.partition(m, PART, work_path=v),
        "partition.ext": lambda v: tk.partition(m, PART, ext=v),
        "run.model": lambda v: tk.run(v),
        "run.inputs": lambda v: tk.run(m, v),
        "run.trace": lambda v: tk.run(m, trace=v),
        "run.repeat": lambda v: tk.run(m, repeat=v),
        "run.warmup": lambda v: tk.run(m, warmup=v),
        "run.tracer": lambda v: tk.run(m, tracer=v),
        "run.threads": lambda v: tk.run(m, threads=v),
        "read_trace": lambda v: tk.read_trace(v),
        "read_trace.key_column": lambda v: tk.read_trace(tr, key_column=v),
        "read_trace.clock_hz": lambda v: tk.read_trace(tr, unit="cycles", clock_hz=v),
        "trace_join.skip_runs": lambda v: tk.trace_join(tr, m, skip_runs=v),
        "trace_join.strict": lambda v: tk.trace_join(tr, m, strict=v),
        "trace_join.optimized": lambda v: tk.trace_join(tr, m, optimized=v),
        "trace_join_many.workers": lambda v: tk.trace_join_many([tr], m, workers=v),
        "trace_join_many.skip_runs": lambda v: tk.trace_join_many([tr], m, skip_runs=v),
        "trace_join_many.memory_budget": lambda v: tk.trace_join_many([tr], m,
                                                                      memory_budget=v),
        "trace_join_many.partition_by": lambda v: tk.trace_join_many([tr], m,
                                                                     partition_by=v),
        "read_vela.outdir": lambda v: tk.read_vela(v),
        "read_vela.model": lambda v: tk.read_vela(tmp, v),
        "load_onnx": lambda v: tk.load_onnx(v),
        "join_ort.trace": lambda v: tk.join_ort(v, m),
        "run_onnxruntime.model": lambda v: tk.run_onnxruntime(v),
        "explore.backends": lambda v: tk.explore(m, backends=v),
        "explore.repeat": lambda v: tk.explore(m, repeat=v),
        "read_executorch.method": lambda v: tk.read_executorch(tmp / "none.etdp", method=v),
        "codegen.out_dir": lambda v: tk.codegen(m, v),
        "codegen.name": lambda v: tk.codegen(m, tmp / "cg", name=v),
        "codegen.debug": lambda v: tk.codegen(m, tmp / "cg", debug=v),
    }


def test_every_bad_argument_is_a_toolkit_error(objs: dict[str, Any], tmp_path: Path) -> None:
    escapes = []
    cases = _cases(objs, tmp_path)
    for name, call in cases.items():
        for value in BAD:
            if _valid(name, value):
                continue
            exc = _within_time(lambda c=call, v=value: c(v))
            if not isinstance(exc, ToolkitError):
                escapes.append(f"{name}={value!r:.30}: {type(exc).__name__}: {exc}"[:160])
    assert not escapes, "\n".join(escapes)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("bad", [{"repeat": 2.5}, {"repeat": -1}, {"repeat": 0},
                                 {"warmup": "x"}, {"warmup": -1}, {"repeat": 1 << 40},
                                 {"trace": "yes"}, {"inputs": 5}])
def test_run_refuses_before_running(bad: dict[str, Any]) -> None:
    """``tk.run`` refuses these before the first inference (a count of 2**40 inferences
    would otherwise run for days)."""
    exc = _within_time(lambda: tk.run(CNN, **bad))
    assert isinstance(exc, ToolkitError) and exc.fix, exc
    assert next(iter(bad)) in str(exc)


def test_good_arguments_still_work(objs: dict[str, Any], tmp_path: Path) -> None:
    m = objs["model"]
    assert _within_time(lambda: tk.compile(m, passes="fold_constants")) is None
    assert _within_time(lambda: tk.partition(m, PART, backends=["a", "b"],
                                             work_path=tmp_path)) is None
    assert _within_time(lambda: tk.run(m, repeat=2, warmup=0, threads=None)) is None
