"""Accounting: an event of negative duration, or one whose duration overflows int64, is a
problem row of its own (listed by ``unattributed()`` with the reason), kept out of every
total; the totals still add up and ``check()`` passes; a total that does not add up makes
``check()`` fail. For each attribution class: compiled models, ONNX Runtime, fleets."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.errors import ToolkitError
from toolkit.runtime.tracer import EventTracer

ONNX = SAMPLES / "onnx"


def _with_bad_events(compiled: tk.CompiledModel) -> tuple[EventTracer, int]:
    """A tracer of one real run plus a negative and an overflowing event of a real key;
    returns it and the time of the real events."""
    frame = tk.run(compiled, trace=True).trace.runtime.to_frame()
    tr = EventTracer()
    for row in frame.itertuples():
        tr.log(row.key, row.start_ns, row.end_ns, command_id=row.command_id)
    key = frame["key"].iloc[0]
    tr.log(key, 1_000, 500, command_id=int(frame["command_id"].iloc[0]))
    tr.log(key, -(1 << 62), (1 << 62) + 5, command_id=int(frame["command_id"].iloc[0]))
    return tr, int(frame["dur_ns"].sum())


def _assert_tamper_fails(att: object, name: str = "total_ns") -> None:
    setattr(att, name, getattr(att, name) + 1)
    with pytest.raises(ToolkitError):
        att.check()  # type: ignore[attr-defined]
    setattr(att, name, getattr(att, name) - 1)


@pytest.fixture(scope="module")
def compiled() -> tk.CompiledModel:
    return tk.compile(SAMPLES / "cnn.tflite")


def test_tracer_flags_negative_and_overflowing_durations() -> None:
    tr = EventTracer()
    tr.log("neg", 10, 4)
    tr.log("wide", -(1 << 62), (1 << 62) + 5)
    tr.log("ok", 1, 3)
    frame = tr.to_frame().set_index("key")
    assert frame.loc["neg", "problem"] == "negative duration"
    assert frame.loc["wide", "problem"] == "duration overflows int64"
    assert frame.loc["wide", "dur_ns"] == 0  # never a wrapped-around value
    assert frame.loc["ok", "problem"] == "" and frame.loc["ok", "dur_ns"] == 2


def test_compiled_attribution(compiled: tk.CompiledModel) -> None:
    tr, real_ns = _with_bad_events(compiled)
    att = tk.trace_join(tr, compiled, strict=False)
    assert att.total_ns == real_ns and att.unattributed_ns == 0
    assert att.attributed_ns + att.overhead_ns + att.unattributed_ns == att.total_ns
    reasons = att.unattributed()["reason"].astype(str).tolist()
    assert sorted(reasons) == ["duration overflows int64", "negative duration"]
    att.check()
    _assert_tamper_fails(att)
    _assert_tamper_fails(att, "unattributed_ns")


def test_fleet_attribution(compiled: tk.CompiledModel) -> None:
    tr, real_ns = _with_bad_events(compiled)
    good = tk.run(compiled, trace=True).trace
    fleet = tk.trace_join_many([tr, good], compiled, workers=0, strict=False,
                               runs="per-partition")
    single = tk.trace_join(good, compiled)
    assert fleet.total_ns == real_ns + single.total_ns
    assert fleet.attributed_ns + fleet.overhead_ns + fleet.unattributed_ns == fleet.total_ns
    fleet.check()
    _assert_tamper_fails(fleet)


def test_ort_attribution(tmp_path: Path) -> None:
    from toolkit.importers.onnx import load_onnx

    events = json.loads(gzip.decompress((ONNX / "cnn.ts.all.opt.prof.json.gz").read_bytes()))
    kernels = [i for i, e in enumerate(events) if str(e.get("name", "")).endswith(
        "_kernel_time")]
    before = tk.join_ort(ONNX / "cnn.ts.all.opt.prof.json.gz",
                         load_onnx(ONNX / "cnn.ts.onnx"), load_onnx(ONNX / "cnn.ts.all.opt.onnx"))
    lost = int(events[kernels[0]]["dur"]) * 1000
    events[kernels[0]]["dur"] = -5
    path = tmp_path / "p.json"
    path.write_text(json.dumps(events))
    att = tk.join_ort(path, load_onnx(ONNX / "cnn.ts.onnx"),
                      load_onnx(ONNX / "cnn.ts.all.opt.onnx"))
    assert att.total_ns == before.total_ns - lost  # the event's -5 us is not subtracted
    assert att.attributed_ns + att.unattributed_ns == att.total_ns
    un = att.unattributed()
    assert "negative duration" in set(un["reason"].astype(str))
    att.check()
    _assert_tamper_fails(att)
    assert isinstance(un, pd.DataFrame)
