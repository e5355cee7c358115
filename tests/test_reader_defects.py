"""Reader defects found by fuzzing, each reproduced on a minimal input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import toolkit as tk
from toolkit.errors import TraceError, VelaError
from toolkit.formats.vela_db import read_debug_db


@pytest.mark.parametrize("blank", ["\u00a0", "\u00a0\n\u2003", " \u3000 \n\u00a0,"[:-1]])
def test_vela_table_of_blank_looking_rows_is_a_vela_error(blank: str) -> None:
    """Rows of Unicode spaces look non-empty to the first strip and blank to the row check:
    the table has no header, which is a VelaError naming the table, not an assertion."""
    xml = ('<?xml version="1.0"?><debug source="a"><table name="queue"><![CDATA['
           f"{blank}]]></table></debug>").encode()
    with pytest.raises(VelaError, match=r"table 'queue'.*header") as info:
        read_debug_db(xml)
    assert info.value.fix


# ------------------------------------------------------------- trace readers (from the fuzz)

_X = '{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1'


@pytest.mark.parametrize("text", [
    '{"traceEvents": [' + _X + ', "args": {"n": ' + "9" * 5000 + "}}]}",
    '{"traceEvents": [' + _X + ', "args": {"n": ' + "[" * 100_000 + "]" * 100_000 + "}}]}",
])
def test_chrome_values_json_cannot_convert_are_trace_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(TraceError, match=r"cannot convert|deeper"):
        tk.read_trace(path)


def test_chrome_list_pid_in_begin_end_pairs_is_a_problem_row(tmp_path: Path) -> None:
    events = [{"ph": "B", "name": "a", "ts": 1, "pid": [1], "tid": 1},
              {"ph": "E", "name": "a", "ts": 3, "pid": [1], "tid": 1},
              {"ph": "M", "name": "thread_name", "pid": [1], "tid": 1, "args": {"name": "t"}},
              {"ph": "X", "name": "b", "ts": 4, "dur": 1, "pid": 1, "tid": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    try:
        trace = tk.read_trace(path)
    except TraceError:
        return  # refusing the file is as good
    assert len(trace.events) == 2
    assert (trace.events["dur_ns"] >= 0).all()


def test_records_with_list_keys_and_deep_nesting(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"events": [{"debug_handle": [True], "start_ns": 1,
                                            "dur_ns": 2}]}))
    try:
        events = tk.read_trace(path, format="records").events
    except TraceError:
        pass
    else:
        assert len(events) == 1
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TraceError, match="deeper"):
        tk.read_trace(path, format="records")


def test_a_damaged_gzip_csv_is_a_trace_error(tmp_path: Path) -> None:
    good = gzip.compress(b"command_id,start_ns,dur_ns\n" + b"1,2,3\n" * 1000, mtime=0)
    path = tmp_path / "t.csv.gz"
    path.write_bytes(good[:12] + bytes(b ^ 0x55 for b in good[12:40]) + good[40:])
    with pytest.raises(TraceError, match="damaged or cut short"):
        tk.read_trace(path)
