"""SIGKILL at random points of the single-file writers (``tk.save``, the Chrome trace and
CSV writers): the final file is always one whole version, never missing, truncated or mixed.

Each try forks the test process (toolkit already imported, so a try costs milliseconds); the
child rewrites one file with two contents in turn, forever; the parent kills it after a
random delay and reads the file back. ``TOOLKIT_KILL_TRIES`` tries per writer (``make fuzz``:
100); each test prints its counts.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.formats.chrome_trace import write_chrome_trace
from toolkit.formats.trace_csv import write_trace_csv
from toolkit.runtime.tracer import EventTracer

TRIES = int(os.environ.get("TOOLKIT_KILL_TRIES", "6"))


def _frames() -> list[Any]:
    frames = []
    for n in (50, 3000):
        tr = EventTracer()
        for i in range(n):
            tr.log(i % 7, 10 * i, 10 * i + 5, op_index=i % 7)
        frames.append(tr.to_frame())
    return frames


def _kill_loop(name: str, path: Path, write: Callable[[int], Any],
               read: Callable[[Path], Any], wants: list[Any]) -> None:
    """Kill a child rewriting ``path`` (``write(0)``, ``write(1)``, ...) TRIES times; after
    each kill the file must read back as one of ``wants``."""
    write(0)
    rng = random.Random(20_251_125)
    counts = {"first": 0, "second": 0}
    for _ in range(TRIES):
        pid = os.fork()
        if pid == 0:  # the child: rewrite forever, never return into pytest
            try:
                k = 1
                while True:
                    write(k % 2)
                    k += 1
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        got = read(path)
        assert got in wants, (name, got)
        counts["first" if got == wants[0] else "second"] += 1
    killed_left = [p.name for p in path.parent.iterdir() if p != path]
    write(0)  # the next write removes what killed writers left
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    print(f"\nkill {name}: {TRIES} kills, {counts}; {len(killed_left)} temporary file(s) "
          "left by the last kill, removed by the next write")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_killed_model_saves_leave_a_whole_model(tmp_path: Path) -> None:
    models = [tk.load(SAMPLES / "cnn.tflite"), tk.load(SAMPLES / "two_branch.tflite")]
    path = tmp_path / "m.circle"
    _kill_loop("tk.save", path, lambda k: tk.save(models[k], path),
               lambda p: len(tk.load(p).graph.ops), [len(m.graph.ops) for m in models])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("suffix", [".json", ".csv.gz"])
def test_killed_trace_writes_leave_a_whole_trace(tmp_path: Path, suffix: str) -> None:
    frames = _frames()
    path = tmp_path / f"t{suffix}"
    if suffix == ".json":
        def write(k: int) -> Any:
            return write_chrome_trace(frames[k], path)
    else:
        events = [tk.read_trace(f).events for f in frames]

        def write(k: int) -> Any:
            return write_trace_csv(events[k], path)
    _kill_loop(f"trace {suffix}", path, write, lambda p: len(tk.read_trace(p).events),
               [len(f) for f in frames])
