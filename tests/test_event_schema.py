"""Every event table (tracer, readers, chained runtime, Trace.events) follows one schema."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.compiler import compile_model
from toolkit.errors import ToolkitError
from toolkit.formats.chrome_trace import read_chrome_trace, write_chrome_trace
from toolkit.formats.events import EVENT_SCHEMA, check_events
from toolkit.formats.trace_csv import read_trace_csv, write_trace_csv
from toolkit.runtime.chain import run_connection
from toolkit.trace import read_trace


def test_every_event_table_follows_the_schema(tmp_path: Path) -> None:
    compiled = compile_model(tk.load(SAMPLES / "cnn.tflite"))
    frame = tk.run(compiled, trace=True, repeat=2).trace.runtime.to_frame()
    check_events(frame, "EventTracer.to_frame")
    assert {"run", "key", "key_kind", "name", "track", "end_ns", "problem"} <= set(frame.columns)
    chrome = read_chrome_trace(write_chrome_trace(frame, tmp_path / "t.json"))
    check_events(chrome, "read_chrome_trace")
    csv = read_trace_csv(write_trace_csv(frame, tmp_path / "t.csv"), key_column="name",
                         start_column="start_ns", duration_column="dur_ns")
    check_events(csv, "read_trace_csv")
    for source in (frame, tmp_path / "t.json", tmp_path / "t.csv"):
        events = read_trace(source).events
        check_events(events, "Trace.events")
        assert set(EVENT_SCHEMA) & set(events.columns) >= {"event_id", "run", "key",
                                                            "key_kind", "name", "problem"}
    model = tk.load(SAMPLES / "Net_InstanceNorm_003.circle")
    parts = tk.partition(model, {"partition": {"backends": "cpu,npu", "default": "cpu",
                                               "comply": "opcode"},
                                 "OPCODE": {"DIV": "npu"}})
    calls = run_connection(parts, trace=True, repeat=2, run=lambda m, x: tk.run(m, x).outputs)
    check_events(calls.trace, "run_connection with a runner")
    chained = run_connection(parts, trace=True, repeat=2).trace.to_frame()
    check_events(chained, "run_connection")
    assert set(chained["key_kind"]) == {"part_op"}


def test_the_schema_refuses_float_times() -> None:
    frame = pd.DataFrame({"start_ns": [0.5], "dur_ns": [1]})
    with pytest.raises(ToolkitError, match="start_ns"):
        check_events(frame)
    with pytest.raises(ToolkitError, match="dur_ns"):
        check_events(pd.DataFrame({"start_ns": [0]}))
