"""read_trace: every source format into one event table (integer ns, interned names, runs)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import ToolkitError, TraceError
from toolkit.runtime.tracer import EventTracer
from toolkit.trace import Trace, read_trace
from toolkit.trace.readers.read import EVENT_COLUMNS


def _dtypes_ok(t: Trace) -> None:
    ev = t.events
    assert list(ev.columns[:len(EVENT_COLUMNS)]) == list(EVENT_COLUMNS)
    for c in ("event_id", "run", "start_ns", "dur_ns"):
        assert ev[c].dtype == np.int64, c
    for c in ("key_kind", "name", "problem"):
        assert isinstance(ev[c].dtype, pd.CategoricalDtype), c
    assert (ev["event_id"].to_numpy() == np.arange(len(ev))).all()


def _chrome(tmp_path: Path, events: list[dict], name: str = "t.json", bare: bool = False) -> Path:
    path = tmp_path / name
    body = json.dumps(events if bare else {"traceEvents": events})
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return path


X_EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rt"}},
    {"ph": "X", "name": "conv", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2.25,
     "args": {"command_id": 0}},
    {"ph": "X", "name": "relu", "pid": 1, "tid": 1, "ts": 4, "dur": 1,
     "args": {"command_id": 1}},
]


@pytest.mark.parametrize("name,bare", [("t.json", False), ("t.json.gz", False),
                                       ("t.json", True)])
def test_chrome_x_events(tmp_path: Path, name: str, bare: bool) -> None:
    t = read_trace(_chrome(tmp_path, X_EVENTS, name, bare))
    _dtypes_ok(t)
    ev = t.events
    assert ev["start_ns"].tolist() == [1500, 4000]
    assert ev["dur_ns"].tolist() == [2250, 1000]
    assert ev["key"].tolist() == [0, 1]
    assert ev["key_kind"].astype(str).tolist() == ["command_id"] * 2
    assert ev["name"].astype(str).tolist() == ["conv", "relu"]
    assert t.meta["format"] == "chrome"


def test_chrome_begin_end_pairs_and_bad_events(tmp_path: Path) -> None:
    events = [
        {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 0, "args": {"op_name": "a"}},
        {"ph": "E", "name": "a", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 6},  # never ended
        {"ph": "E", "name": "c", "pid": 1, "tid": 2, "ts": 9},  # never begun
        {"ph": "X", "name": "d", "pid": 1, "tid": 1, "ts": 10, "dur": -2},
        {"ph": "X", "name": "e", "pid": 1, "tid": 1, "dur": 3},  # no ts
    ]
    t = read_trace(_chrome(tmp_path, events))
    _dtypes_ok(t)
    ev = t.events
    assert len(ev) == 5  # every event kept, bad ones flagged
    by_name = dict(zip(ev["name"].astype(str), ev["problem"].astype(str)))
    assert by_name["a"] == ""
    assert ev.loc[ev["name"] == "a", "dur_ns"].item() == 5000
    assert "E" in by_name["b"]
    assert "negative" in by_name["d"]
    assert by_name["e"] != ""
    assert ev.loc[ev["name"] == "a", "key_kind"].astype(str).item() == "name"


def test_unreadable_files_raise(tmp_path: Path) -> None:
    with pytest.raises(TraceError):
        read_trace(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": ')
    with pytest.raises(ToolkitError):
        read_trace(bad)
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(ToolkitError, match="start"):
        read_trace(csv)


def test_event_tracer_runs_and_keys() -> None:
    tr = EventTracer()
    for _ in range(3):
        tr.new_run()
        for i in range(4):
            tr.log(i, 100 * i, 100 * i + 50, command_id=i, op_name=f"op{i}")
    tr.new_run()
    tr.log(7, 1000, 1010)  # a debug handle only
    t = read_trace(tr)
    _dtypes_ok(t)
    ev = t.events
    assert ev["run"].tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3]
    assert ev["key_kind"].astype(str).tolist()[:12] == ["command_id"] * 12
    assert ev["key_kind"].astype(str).iloc[-1] == "debug_handle"
    assert ev["key"].iloc[-1] == 7
    assert "column" in t.meta["run_from"]


def test_runs_from_key_occurrence() -> None:
    df = pd.DataFrame({"command_id": [0, 1, 0, 1, 0], "start_ns": [0, 10, 20, 30, 40],
                       "dur_ns": [5] * 5})
    t = read_trace(df)
    assert t.events["run"].tolist() == [0, 0, 1, 1, 2]
    assert t.runs == 3
    assert "occurrence" in t.meta["run_from"]


def test_csv_with_units_and_key_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("handle,begin_us,length_us,run\n3,1.5,2.25,0\nconv,4,1,0\n9,x,1,1\n")
    t = read_trace(path, key_column="handle", start_column="begin_us",
                   duration_column="length_us")
    _dtypes_ok(t)
    ev = t.events
    assert ev["start_ns"].tolist()[:2] == [1500, 4000]
    assert ev["dur_ns"].tolist()[:2] == [2250, 1000]
    assert ev["key_kind"].astype(str).tolist() == ["debug_handle"] * 3
    assert ev["key"].tolist()[:2] == [3, "conv"]
    assert ev["problem"].astype(str).iloc[2] != ""
    assert ev["run"].tolist() == [0, 0, 1]


def test_csv_guessed_columns_and_cycles(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("name,command_id,start_ns,dur_ns\nconv,0,10,20\nrelu,1,30,40\n")
    t = read_trace(path)
    assert t.events["key"].tolist() == [0, 1]
    assert t.events["key_kind"].astype(str).tolist() == ["command_id"] * 2
    assert t.events["name"].astype(str).tolist() == ["conv", "relu"]
    cyc = tmp_path / "c.csv"
    cyc.write_text("op_index,start,duration\n0,0,1000\n1,1000,3\n")
    t = read_trace(cyc, unit="cycles", clock_hz=1e9 / 2)  # 2 ns per cycle
    assert t.events["dur_ns"].tolist() == [2000, 6]
    assert t.events["key_kind"].astype(str).tolist() == ["op_index"] * 2


def test_debug_handle_records_list_and_file(tmp_path: Path) -> None:
    records = [{"delegate_debug_identifier": 1, "start_time": 0, "end_time": 10},
               {"delegate_debug_identifier": "conv", "start_time": 10, "end_time": 15},
               {"delegate_debug_identifier": 1, "start_time": 20, "end_time": 18}]
    t = read_trace(records)
    _dtypes_ok(t)
    ev = t.events
    assert ev["key"].tolist() == [1, "conv", 1]
    assert ev["key_kind"].astype(str).tolist() == ["debug_handle"] * 3
    assert ev["dur_ns"].tolist() == [10, 5, -2]
    assert ev["problem"].astype(str).tolist()[2] == "negative duration"
    assert ev["run"].tolist() == [0, 0, 1]
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    back = read_trace(path)
    assert back.meta["format"] == "records"
    assert back.events["key"].tolist() == [1, "conv", 1]


def test_frame_with_float_microseconds_and_part_keys() -> None:
    df = pd.DataFrame({"run": [0, 0, 1], "part": [1, 2, 1], "file": ["a", "b", "a"],
                       "ts_us": [0.0, 1.5, 3.0], "dur_us": [1.5, 1.25, np.nan]})
    t = read_trace(df)
    ev = t.events
    assert ev["start_ns"].tolist() == [0, 1500, 3000]
    assert ev["dur_ns"].tolist()[:2] == [1500, 1250]
    assert ev["problem"].astype(str).iloc[2] != ""
    assert ev["key_kind"].astype(str).tolist() == ["part"] * 3
    assert ev["key"].tolist() == [1, 2, 1]


def test_key_kind_option_and_errors() -> None:
    df = pd.DataFrame({"id": [5, 6], "start_ns": [0, 1], "dur_ns": [1, 1]})
    t = read_trace(df, key_column="id")
    assert t.events["key_kind"].astype(str).tolist() == ["", ""]
    assert t.events["key"].tolist() == [5, 6]
    t = read_trace(df, key_column="id", key_kind="op_index")
    assert t.events["key_kind"].astype(str).tolist() == ["op_index"] * 2
    with pytest.raises(ToolkitError, match="key kind"):
        read_trace(df, key_kind="nope")
    with pytest.raises(ToolkitError, match="unit"):
        read_trace(df, unit="fortnights")
    with pytest.raises(ToolkitError):
        read_trace(df, key_column="missing")
    with pytest.raises(ToolkitError):
        read_trace(12)


def test_empty_trace_keeps_columns_and_dtypes() -> None:
    t = read_trace(pd.DataFrame({"command_id": pd.Series([], dtype="int64"),
                                 "start_ns": pd.Series([], dtype="int64"),
                                 "dur_ns": pd.Series([], dtype="int64")}))
    _dtypes_ok(t)
    assert len(t) == 0 and t.runs == 0


def test_large_chrome_trace_round_trip(tmp_path: Path) -> None:
    from toolkit.formats.chrome_trace import write_chrome_trace

    n = 20_000
    frame = pd.DataFrame({"name": "op", "start_ns": np.arange(n) * 10 + 10**15,
                          "dur_ns": np.full(n, 7), "command_id": np.arange(n) % 50})
    path = write_chrome_trace(frame, tmp_path / "big.json.gz")
    t = read_trace(path)
    assert (t.events["start_ns"].to_numpy() == frame["start_ns"].to_numpy()).all()
    assert t.runs == n // 50
    assert t.events["name"].cat.categories.tolist() == ["op"]
