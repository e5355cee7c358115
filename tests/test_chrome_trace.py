"""Chrome trace and trace CSV readers/writers: round trips, exact times, B/E pairing, errors."""

from __future__ import annotations

import decimal
import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.errors import ToolkitError, TraceError
from toolkit.formats import chrome_trace
from toolkit.formats.chrome_trace import read_chrome_trace, write_chrome_trace
from toolkit.formats.event_columns import TRACE_COLUMNS, arg_column
from toolkit.formats.trace_csv import read_trace_csv, write_trace_csv

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value))
    return path


def x_event(name: str, ts: object, dur: object, **extra: object) -> dict[str, object]:
    return {"ph": "X", "name": name, "cat": "op", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            **extra}


def raw_x_event(ts: str, dur: str = "1") -> str:
    """An X event whose ts/dur are the given JSON number texts, unchanged."""
    return '{"ph":"X","name":"a","pid":1,"tid":1,"ts":' + ts + ',"dur":' + dur + "}"


def sample_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "run": [0, 0, 1, 1],
        "key": [3, "conv", 3, "conv"],
        "name": pd.Categorical(["3", "conv", "3", "conv"]),
        "track": ["npu", "cpu", "npu", "cpu"],
        "start_ns": [5_184_000_000_000_123, 5_184_000_000_001_000, INT64_MAX - 10, -5],
        "dur_ns": [1001, 0, 10, 7],
        "op_index": pd.array([1, None, 2, 4], dtype="Int64"),
        "op_type": pd.Categorical(["CONV_2D", "ADD", "CONV_2D", None]),
        "layers": [["a", "b"], ["c"], [], ["d/é"]],
        "scale": [1.5, np.nan, 2.0, 1e-300],
    })


# --------------------------------------------------------------------------------------------
# Round trips


def test_round_trip_keeps_times_names_and_args_exactly(tmp_path: Path) -> None:
    events = sample_frame()
    path = write_chrome_trace(events, tmp_path / "t.json", metadata={"model": "cnn"})
    frame = read_chrome_trace(path)

    assert list(frame.columns[:6]) == list(TRACE_COLUMNS)
    assert frame["start_ns"].tolist() == events["start_ns"].tolist()
    assert frame["dur_ns"].tolist() == events["dur_ns"].tolist()
    assert frame["name"].astype(str).tolist() == ["3", "conv", "3", "conv"]
    assert frame["arg_run"].dtype == np.int64
    assert frame["arg_run"].tolist() == [0, 0, 1, 1]
    assert frame["arg_key"].tolist() == [3, "conv", 3, "conv"]  # ints stay ints
    assert frame["arg_op_index"].dtype == "Int64"
    assert frame["arg_op_index"].tolist() == [1, pd.NA, 2, 4]
    assert frame["arg_op_type"].tolist()[:3] == ["CONV_2D", "ADD", "CONV_2D"]
    assert frame["arg_op_type"].isna().tolist() == [False, False, False, True]
    assert frame["arg_layers"].tolist() == [["a", "b"], ["c"], [], ["d/é"]]
    assert frame["arg_scale"].tolist()[0] == 1.5
    assert math.isnan(frame["arg_scale"].tolist()[1])
    assert frame["arg_scale"].tolist()[3] == 1e-300
    assert (frame["problem"] == "").all()
    assert frame["pid"].tolist() == [1, 1, 1, 1]
    tids = frame["tid"].tolist()
    assert tids[0] == tids[2] != tids[1] == tids[3]
    names = frame.attrs["thread_names"]
    assert names[(1, tids[0])] == "npu" and names[(1, tids[1])] == "cpu"
    assert frame.attrs["process_names"] == {1: "toolkit"}
    assert frame.attrs["ignored_events"] == {"M": 3}
    assert frame.attrs["trace_metadata"]["otherData"] == {"model": "cnn"}


def test_written_file_is_plain_chrome_json_in_microseconds(tmp_path: Path) -> None:
    events = pd.DataFrame({"name": ["a", "b"], "start_ns": [12_345, 1_000_000],
                           "end_ns": [13_345, 1_000_500], "command_id": [np.int64(4), 5]})
    path = write_chrome_trace(events, tmp_path / "t.json", pid=7, process_name="npu")
    document = json.loads(path.read_text())
    assert document["displayTimeUnit"] == "ns"
    assert document["otherData"] == {}
    meta, *complete = document["traceEvents"]
    assert meta == {"ph": "M", "name": "process_name", "pid": 7, "tid": 0,
                    "args": {"name": "npu"}}
    assert complete[0] == {"ph": "X", "name": "a", "cat": "event", "pid": 7, "tid": 0,
                           "ts": 12.345, "dur": 1, "args": {"command_id": 4}}
    assert complete[1]["ts"] == 1000 and complete[1]["dur"] == 0.5
    assert '"ts":12.345' in path.read_text()


def test_gzip_round_trip_and_detection_by_content(tmp_path: Path) -> None:
    events = sample_frame()
    plain = read_chrome_trace(write_chrome_trace(events, tmp_path / "t.json"))
    packed = write_chrome_trace(events, tmp_path / "t.json.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    pd.testing.assert_frame_equal(read_chrome_trace(packed), plain)
    renamed = tmp_path / "no_suffix.json"
    renamed.write_bytes(packed.read_bytes())
    pd.testing.assert_frame_equal(read_chrome_trace(renamed), plain)
    with open(packed, "rb") as handle:
        pd.testing.assert_frame_equal(read_chrome_trace(handle), plain)


def test_empty_frame_round_trip_keeps_columns_and_dtypes(tmp_path: Path) -> None:
    events = pd.DataFrame({"name": pd.Series([], dtype=str),
                           "start_ns": pd.Series([], dtype=np.int64),
                           "dur_ns": pd.Series([], dtype=np.int64)})
    frame = read_chrome_trace(write_chrome_trace(events, tmp_path / "e.json"))
    assert list(frame.columns) == [*TRACE_COLUMNS, "problem"]
    assert len(frame) == 0
    assert frame["start_ns"].dtype == np.int64 and frame["dur_ns"].dtype == np.int64
    assert frame["pid"].dtype == np.int64 and frame["tid"].dtype == np.int64
    assert isinstance(frame["name"].dtype, pd.CategoricalDtype)
    assert isinstance(frame["cat"].dtype, pd.CategoricalDtype)


def test_read_frame_can_be_written_again(tmp_path: Path) -> None:
    first = read_chrome_trace(write_chrome_trace(sample_frame(), tmp_path / "a.json"))
    second = read_chrome_trace(write_chrome_trace(first, tmp_path / "b.json"))
    pd.testing.assert_frame_equal(first.drop(columns=["tid"]), second.drop(columns=["tid"]))


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@st.composite
def event_frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 25))
    column = st.lists
    frame = pd.DataFrame({
        "name": draw(column(_text, min_size=n, max_size=n)),
        "start_ns": draw(column(st.integers(INT64_MIN, INT64_MAX), min_size=n, max_size=n)),
        "dur_ns": draw(column(st.integers(INT64_MIN, INT64_MAX), min_size=n, max_size=n)),
        "command_id": draw(column(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)),
        "ratio": draw(column(st.floats(allow_nan=False, allow_infinity=False),
                             min_size=n, max_size=n)),
        "label": draw(column(_text, min_size=n, max_size=n)),
    })
    frame["start_ns"] = frame["start_ns"].astype(np.int64)
    frame["dur_ns"] = frame["dur_ns"].astype(np.int64)
    frame["command_id"] = frame["command_id"].astype(np.int64)
    frame["ratio"] = frame["ratio"].astype(np.float64)
    return frame


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=event_frames())
def test_random_frames_round_trip_exactly(tmp_path: Path, events: pd.DataFrame) -> None:
    frame = read_chrome_trace(write_chrome_trace(events, tmp_path / "h.json"))
    assert frame["start_ns"].tolist() == events["start_ns"].tolist()
    assert frame["dur_ns"].tolist() == events["dur_ns"].tolist()
    assert frame["name"].astype(str).tolist() == events["name"].tolist()
    if len(events):
        assert frame["arg_command_id"].tolist() == events["command_id"].tolist()
        assert frame["arg_ratio"].tolist() == events["ratio"].tolist()
        assert frame["arg_label"].astype(str).tolist() == events["label"].tolist()
        negative = (events["dur_ns"] < 0).tolist()
        assert (frame["problem"] == "negative duration").tolist() == negative


# --------------------------------------------------------------------------------------------
# Exact time conversion


@pytest.mark.parametrize(("ts", "ns"), [
    ("1.001", 1001),
    ("0.1", 100),
    ("12", 12000),
    ("-0.5", -500),
    ("0.0005", 0),  # half to even
    ("0.0015", 2),
    ("0.0025", 2),
    ("0.00251", 3),
    ("-0.0015", -2),
    ("1700000000123456.789", 1_700_000_000_123_456_789),  # epoch microseconds: no float drift
    ("9223372036854775.807", INT64_MAX),
    ("-9223372036854775.808", INT64_MIN),
    ("1.5e3", 1_500_000),
    ("1E-3", 1),
    ("2.5e-4", 0),
    ("0.0", 0),
])
def test_ts_decimal_text_becomes_exact_nanoseconds(tmp_path: Path, ts: str, ns: int) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents":[' + raw_x_event(ts) + "]}")
    frame = read_chrome_trace(path)
    assert frame["start_ns"].tolist() == [ns]
    assert frame["problem"].tolist() == [""]


def test_many_values_take_the_same_exact_path_as_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    texts = [f"{v / 1000:.3f}" for v in rng.integers(-10**15, 10**15, 500).tolist()]
    texts += ["7", "1.5", "2.25", "-0", "1.0005"]
    body = ",".join(raw_x_event(t, t) for t in texts)
    path = tmp_path / "t.json"
    path.write_text("[" + body + "]")
    frame = read_chrome_trace(path)
    expected = [int((decimal.Decimal(t) * 1000).to_integral_value(decimal.ROUND_HALF_EVEN))
                for t in texts]
    assert frame["start_ns"].tolist() == expected
    assert frame["dur_ns"].tolist() == expected


@pytest.mark.parametrize("ts", ["1e400", "99999999999999999999.5", "-1e17"])
def test_ts_outside_int64_is_a_problem_row(tmp_path: Path, ts: str) -> None:
    path = tmp_path / "t.json"
    path.write_text("[" + raw_x_event(ts) + "]")
    frame = read_chrome_trace(path)
    assert len(frame) == 1
    assert "outside the int64" in frame["problem"][0]


def test_huge_integer_ts_among_decimals_is_a_problem_row(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("[" + ",".join([raw_x_event("1.5"), raw_x_event(str(10**20)),
                                    raw_x_event("7")]) + "]")
    frame = read_chrome_trace(path)
    assert frame["start_ns"].tolist() == [1500, 0, 7000]
    assert frame["problem"].tolist() == ["", "ts outside the int64 nanosecond range", ""]


# --------------------------------------------------------------------------------------------
# B/E pairing and problem rows


def test_begin_end_pairs_nest_per_thread(tmp_path: Path) -> None:
    events = [
        {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "args": {"a": 1}},
        {"ph": "B", "name": "other", "pid": 1, "tid": 2, "ts": 1},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 3.5},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 4},
        {"ph": "X", "name": "x", "pid": 1, "tid": 3, "ts": 4.5, "dur": 1},
        {"ph": "E", "name": "outer", "pid": 1, "tid": 1, "ts": 10, "args": {"b": 2}},
    ]
    frame = read_chrome_trace(write_json(tmp_path / "be.json", events))
    assert frame["name"].astype(str).tolist() == ["outer", "other", "inner", "x"]
    assert frame["start_ns"].tolist() == [0, 1000, 2000, 4500]
    assert frame["dur_ns"].tolist() == [10000, 3000, 1500, 1000]
    assert frame["tid"].tolist() == [1, 2, 1, 3]
    assert frame["arg_a"].tolist()[0] == 1 and frame["arg_b"].tolist()[0] == 2
    assert (frame["problem"] == "").all()


def test_unpaired_and_mismatched_events_become_flagged_rows(tmp_path: Path) -> None:
    events = [
        {"ph": "E", "name": "lonely_end", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "E", "name": "b", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "B", "name": "never_ends", "pid": 1, "tid": 1, "ts": 6},
        {"ph": "B", "name": "backwards", "pid": 2, "tid": 1, "ts": 9},
        {"ph": "E", "pid": 2, "tid": 1, "ts": 8},
    ]
    frame = read_chrome_trace(write_json(tmp_path / "be.json", events))
    rows = list(zip(frame["name"].astype(str), frame["start_ns"], frame["dur_ns"],
                    frame["problem"]))
    assert rows == [
        ("lonely_end", 1000, 0, "E without matching B"),
        ("a", 2000, 3000, "E name 'b' does not match B name 'a'"),
        ("never_ends", 6000, 0, "B without matching E"),
        ("backwards", 9000, -1000, "negative duration"),
    ]


def test_problem_rows_are_kept_not_dropped(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": "no_ts", "pid": 1, "tid": 1, "dur": 1},
        {"ph": "X", "name": "no_dur", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "X", "name": "neg", "pid": 1, "tid": 1, "ts": 1, "dur": -0.25},
        {"ph": "X", "name": "text_ts", "pid": 1, "tid": 1, "ts": "12", "dur": 1},
        {"ph": "X", "name": "bad_args", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": [1]},
        {"name": "no_ph", "pid": 1, "tid": 1, "ts": 3},
        42,
    ]
    frame = read_chrome_trace(write_json(tmp_path / "p.json", {"traceEvents": events}))
    problems = dict(zip(frame["name"].astype(str), frame["problem"]))
    assert problems["no_ts"] == "ts missing"
    assert problems["no_dur"] == "X event without dur"
    assert problems["neg"] == "negative duration"
    assert problems["text_ts"] == "ts not a number ('12')"
    assert problems["bad_args"].startswith("args is not an object")
    assert problems["no_ph"] == "event without 'ph'"
    assert problems[""].startswith("event is not a JSON object")
    assert len(frame) == len(events)
    assert frame.loc[frame["name"] == "neg", "dur_ns"].tolist() == [-250]


def test_metadata_counters_and_instants_are_counted_not_rows(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "runtime"}},
        {"ph": "M", "name": "thread_name", "pid": 3, "tid": 9, "args": {"name": "npu"}},
        {"ph": "C", "name": "sram", "pid": 3, "ts": 1, "args": {"bytes": 10}},
        {"ph": "C", "name": "sram", "pid": 3, "ts": 2, "args": {"bytes": 12}},
        {"ph": "i", "name": "mark", "pid": 3, "tid": 9, "ts": 2},
        {"ph": "X", "name": "op", "pid": 3, "tid": 9, "ts": 2, "dur": 3},
    ]
    frame = read_chrome_trace(write_json(tmp_path / "m.json", events))
    assert frame["name"].astype(str).tolist() == ["op"]
    assert frame.attrs["ignored_events"] == {"M": 2, "C": 2, "i": 1}
    assert frame.attrs["process_names"] == {3: "runtime"}
    assert frame.attrs["thread_names"] == {(3, 9): "npu"}


def test_bare_array_and_missing_closing_bracket(tmp_path: Path) -> None:
    event = json.dumps(x_event("a", 1, 2))
    path = tmp_path / "bare.json"
    path.write_text(f"[{event},\n{event}]")
    assert len(read_chrome_trace(path)) == 2
    path.write_text(f"[{event},\n{event},\n")
    with pytest.warns(UserWarning, match="no closing"):
        assert len(read_chrome_trace(path)) == 2


def test_text_and_binary_file_objects(tmp_path: Path) -> None:
    document = json.dumps({"traceEvents": [x_event("é", 1.5, 2)]})
    from_text = read_chrome_trace(io.StringIO(document))
    from_bytes = read_chrome_trace(io.BytesIO(document.encode()))
    packed = io.BytesIO(gzip.compress(document.encode()))
    from_gzip = read_chrome_trace(packed)
    for frame in (from_text, from_bytes, from_gzip):
        assert frame["name"].astype(str).tolist() == ["é"]
        assert frame["start_ns"].tolist() == [1500]


@pytest.mark.parametrize(("chars", "raw_bytes"), [(97, 31), (2000, 1000), (30_000, 7_000)])
def test_streaming_in_small_blocks_matches_one_block(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     chars: int, raw_bytes: int) -> None:
    rng = np.random.default_rng(0)
    events: list[object] = []
    for i in range(400):
        kind = i % 5
        args: dict[str, object] = {"i": i, "nested": [{"a": 1}, {"b": [1.5, "x},{y"]}]}
        if kind == 0:
            events.append({"ph": "B", "name": f"b{i}", "pid": 1, "tid": 1,
                           "ts": float(rng.integers(0, 10**6)) / 8, "args": args})
        elif kind == 1:
            events.append({"ph": "E", "pid": 1, "tid": 1, "ts": 10**6})
        else:
            events.append(x_event(f"x{i}é", round(float(rng.random()) * 1e6, 3),
                                  round(float(rng.random()), 3), args=args))
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"otherData": {"k": [{"v": 1}]}, "traceEvents": events,
                                "metadata": {"x": 1}}, indent=1, ensure_ascii=False))
    whole = read_chrome_trace(path)
    monkeypatch.setattr(chrome_trace, "_READ_CHARS", chars)
    monkeypatch.setattr(chrome_trace, "_READ_BYTES", raw_bytes)
    pieces = read_chrome_trace(path)
    pd.testing.assert_frame_equal(whole, pieces)
    assert len(whole) == 400 - 80
    assert whole["arg_nested"].tolist()[0] == [{"a": 1}, {"b": [1.5, "x},{y"]}]
    assert whole.attrs["trace_metadata"] == {"otherData": {"k": [{"v": 1}]},
                                             "metadata": {"x": 1}}


def test_number_texts_parse_as_the_decoded_numbers() -> None:
    """The joined-text parser of typed blocks gives what the decoded values give, near and
    beyond the int64 range too (where numpy's parser clamps and its product wraps)."""
    from toolkit.formats.exact_time import number_texts_to_ns, numbers_to_ns

    rng = np.random.default_rng(5)
    edge = [b"9223372036854775.807", b"-9223372036854775.808", b"9223372036854775.808",
            b"9999999999999999", b"1700000000000000.123", b"-0", b"0.5", b"12.3456", b"1e3"]
    for _ in range(3000):
        texts = []
        for _ in range(int(rng.integers(1, 8))):
            text = str(int(rng.integers(0, 10)) * 10 ** int(rng.integers(0, 19))
                       + int(rng.integers(0, 10**6)))
            if rng.random() < 0.3:
                text = "-" + text
            if rng.random() < 0.6:
                text += "." + str(int(rng.integers(0, 10**5))).zfill(int(rng.integers(1, 6)))
            texts.append(text.encode())
        texts.append(edge[int(rng.integers(0, len(edge)))])
        decoded = [int(t) if b"." not in t and b"e" not in t else t for t in texts]
        for digits in (0, 3, 6):
            got = number_texts_to_ns(texts, digits)
            want = numbers_to_ns(decoded, digits)
            assert got is not None
            assert got[0].tolist() == want[0].tolist() and got[1] == want[1], texts
    assert number_texts_to_ns([b"1", b'"2"'], 3) is None  # a text: the caller's problem


def _varied_x_events(n: int) -> list[str]:
    """``n`` event texts, mostly plain ``X`` events, with every kind of deviation the typed
    block decoder must hand back to the dict decoder: other phases, new names, other args
    keys and types, missing fields, number texts that are not plain decimals."""
    rng = np.random.default_rng(3)
    out: list[str] = []
    for i in range(n):
        args: dict[str, object] = {"run": i // 50, "op": f"op{i % 7}", "w": 0.5 * (i % 3)}
        event: dict[str, object] = {"ph": "X", "name": f"layer{i % 40}", "cat": "c",
                                    "pid": 1, "tid": 1 + i % 2, "args": args}
        ts, dur = f"{10**15 + 997 * i}.{i % 1000:03d}", f"{int(rng.integers(0, 900))}.5"
        kind = i % 97
        if kind == 1:
            event["name"] = f"fresh{i}"  # a name not seen before
        elif kind == 2:
            del event["cat"]
        elif kind == 3:
            args["extra"] = [1.25, {"a": None}]  # another args key
        elif kind == 4:
            args["run"] = "late"  # another type
        elif kind == 5:
            ts = f"{10**6 + i}e-2"  # an exponent
        elif kind == 6:
            ts = f"{i}.12345"  # more fractional digits than kept
        elif kind == 7:
            dur = "-3"
        elif kind == 8:
            ts = '"12"'  # a text, not a number
        elif kind == 9:
            event["pid"] = "p1"
        elif kind == 10:
            event["args"] = 5
        elif kind == 11:
            event = {"ph": "B", "name": "b", "pid": 1, "tid": 9}
            ts = str(i)
        elif kind == 12:
            event = {"ph": "E", "pid": 1, "tid": 9}
            ts = str(i + 1)
        elif kind == 13:
            args["run"] = 2**70
        elif kind == 14:
            del event["args"]
        text = json.dumps(event)[:-1] + f', "ts": {ts}'
        out.append(text + ("}" if event["ph"] != "X" else f', "dur": {dur}}}'))
    return out


@pytest.mark.parametrize(("chars", "raw_bytes"), [(600, 200), (5000, 1000), (1 << 23, 1 << 22)])
def test_typed_block_decoding_gives_the_rows_of_the_dict_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chars: int, raw_bytes: int) -> None:
    pytest.importorskip("msgspec")
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(_varied_x_events(3000)) + "\n]}")
    monkeypatch.setattr(chrome_trace, "_READ_CHARS", chars)
    monkeypatch.setattr(chrome_trace, "_READ_BYTES", raw_bytes)
    monkeypatch.setattr(chrome_trace, "_FIRST_BLOCK", min(chars, 1 << 16))
    typed_blocks: list[bool] = []
    add = chrome_trace._TypedBlocks.add

    def counted(self: object, block: str, sink: object) -> bool:
        typed_blocks.append(add(self, block, sink))  # type: ignore[arg-type]
        return typed_blocks[-1]

    monkeypatch.setattr(chrome_trace._TypedBlocks, "add", counted)
    typed = read_chrome_trace(path)
    monkeypatch.setattr(chrome_trace._TypedBlocks, "create", classmethod(lambda cls: None))
    plain = read_chrome_trace(path)
    pd.testing.assert_frame_equal(typed, plain)
    assert typed.attrs == plain.attrs
    if chars < 1 << 16:  # small blocks: some hold only plain X events
        assert typed_blocks.count(True) > 0 and typed_blocks.count(False) > 0
    assert (typed["problem"] != "").sum() > 80


# --------------------------------------------------------------------------------------------
# Broken files


def test_truncated_json_names_file_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    text = json.dumps({"traceEvents": [x_event("a", 1, 2), x_event("b", 3, 4)]}, indent=1)
    path.write_text(text[:-40])
    with pytest.raises(TraceError) as info:
        read_chrome_trace(path)
    message = str(info.value)
    assert str(path) in message
    assert "ends early" in message
    assert "line" in message and "byte offset" in message


def test_error_byte_offset_counts_utf8_bytes(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_trace, "_READ_CHARS", 16)
    monkeypatch.setattr(chrome_trace, "_READ_BYTES", 8)
    path = tmp_path / "u.json"
    path.write_text('[{"name": "ééééééééééé"},\n{"name": x}]', encoding="utf-8")
    # 'x' is character 35 of the file and byte 46 (each of the 11 é is two bytes)
    with pytest.raises(TraceError, match=r"line 2, column 10, byte offset 46"):
        read_chrome_trace(path)


class OneWayReader(io.RawIOBase):
    """A binary stream that cannot seek (a pipe)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = self._data.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)


def test_error_position_same_from_a_seekable_and_a_one_way_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a seekable stream counts the text before the error only when reporting it (reading
    # it again); a one-way stream counts it as it goes: the same line, column and byte
    monkeypatch.setattr(chrome_trace, "_READ_CHARS", 64)
    monkeypatch.setattr(chrome_trace, "_READ_BYTES", 32)
    good = json.dumps(x_event("é", 1, 2))
    data = ("\ufeff[" + ",\n".join([good] * 30 + ['{"ph": "X", oops}'] + [good] * 5)
            + "]").encode("utf-8")
    messages = []
    for stream in (io.BytesIO(data), io.BufferedReader(OneWayReader(data))):
        with pytest.raises(TraceError) as info:
            read_chrome_trace(stream)
        messages.append(str(info.value))
    assert "line 31, column 13" in messages[0]
    assert messages[0] == messages[1]


class CountingReader(io.BytesIO):
    """A binary stream that counts the bytes handed out."""

    given = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.given += len(data)
        return data


def test_reader_streams_and_stops_at_an_early_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_trace, "_READ_CHARS", 4096)
    monkeypatch.setattr(chrome_trace, "_READ_BYTES", 1024)
    good = json.dumps(x_event("a", 1, 2))
    body = [good] * 10 + ['{"ph": "X", "ts": 1, oops}'] + [good] * 20_000
    stream = CountingReader(("[" + ",\n".join(body) + "]").encode())
    with pytest.raises(TraceError, match="line 11, column 22"):
        read_chrome_trace(stream)
    assert stream.given < 20_000  # of about 1.6 MB


def test_syntax_error_position_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"traceEvents": [\n{"ph": "X", "ts": 1, "dur": 2},\n{"ph": "X" "ts": 3}]}')
    # the same place json.loads names: line 3 column 12 (char 61)
    with pytest.raises(TraceError, match=r"line 3, column 12, byte offset 61"):
        read_chrome_trace(path)


@pytest.mark.parametrize(("content", "match"), [
    (b"", "empty"),
    (b"   \n", "empty"),
    (b"hello", "not a Chrome trace"),
    (b'{"foo": 1}', "no 'traceEvents'"),
    (b'{"traceEvents": 3}', "not an array"),
    (b"42", "not a Chrome trace"),
    (b'[{"ph":"X","ts":1,"dur":1}] tail', "unexpected data"),
    (b'[{"ph":"X","ts":1,"dur":1},]', None),
    (b'{"traceEvents": [{"ph":"X"}, ]}', "trailing comma"),
    (b'{"traceEvents": [{"ph":"X"}', "ends early"),
    (b'{"traceEvents": [{"ph":"X", "name": "\xff"}]}', "not UTF-8"),
])
def test_broken_files_raise_trace_error(tmp_path: Path, content: bytes, match: str | None
                                        ) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    if match is None:  # a bare array may end with a trailing comma before ']'
        assert len(read_chrome_trace(path)) == 1
        return
    with pytest.raises(TraceError, match=match) as info:
        read_chrome_trace(path)
    assert str(path) in str(info.value)


def test_corrupt_gzip_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps([x_event("a", 1, 2)] * 50).encode())[:-30])
    with pytest.raises(TraceError, match="damaged or cut short"):
        read_chrome_trace(path)
    with pytest.raises(TraceError, match=r"cannot (open|read)"):
        read_chrome_trace(tmp_path / "absent.json")


# --------------------------------------------------------------------------------------------
# Writer checks and atomicity


def test_writer_rejects_frames_without_times(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="start_ns"):
        write_chrome_trace(pd.DataFrame({"name": ["a"]}), tmp_path / "t.json")
    with pytest.raises(ToolkitError, match="dur_ns"):
        write_chrome_trace(pd.DataFrame({"name": ["a"], "start_ns": [1]}), tmp_path / "t.json")
    with pytest.raises(ToolkitError, match="integer nanoseconds"):
        write_chrome_trace(pd.DataFrame({"name": ["a"], "start_ns": [1.5], "dur_ns": [1]}),
                           tmp_path / "t.json")


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = write_chrome_trace(sample_frame(), tmp_path / "t.json")
    before = path.read_bytes()
    bad = sample_frame().assign(thing=[object()] * 4)
    with pytest.raises(ToolkitError, match="thing"):
        write_chrome_trace(bad, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_arg_column_dtypes() -> None:
    assert arg_column([1, 2]).dtype == np.int64
    assert str(arg_column([1, None]).dtype) == "Int64"
    assert arg_column([1.5, None]).dtype == np.float64
    assert arg_column([True, False]).dtype == bool
    assert isinstance(arg_column(["a", None]).dtype, pd.CategoricalDtype)
    mixed = arg_column([1, "a", None])
    assert mixed.dtype == object and mixed.tolist() == [1, "a", None]
    assert arg_column([2**70]).tolist() == [2**70]


# --------------------------------------------------------------------------------------------
# CSV


def test_csv_round_trip(tmp_path: Path) -> None:
    events = sample_frame()
    path = write_trace_csv(events, tmp_path / "t.csv")
    header = path.read_text().splitlines()[0].split(",")
    assert header[:7] == ["name", "track", "start_ns", "end_ns", "dur_ns", "run", "key"]
    frame = read_trace_csv(path, key_column="name", start_column="start_ns",
                           duration_column="dur_ns")
    assert frame["start_ns"].tolist() == events["start_ns"].tolist()
    assert frame["dur_ns"].tolist() == events["dur_ns"].tolist()
    assert frame["name"].astype(str).tolist() == ["3", "conv", "3", "conv"]
    assert frame["arg_run"].tolist() == [0, 0, 1, 1]
    assert json.loads(frame["arg_layers"][0]) == ["a", "b"]
    via_end = read_trace_csv(path, key_column="name", start_column="start_ns",
                             end_column="end_ns")
    assert via_end["dur_ns"].tolist() == events["dur_ns"].tolist()
    gz = write_trace_csv(events, tmp_path / "t.csv.gz")
    assert read_trace_csv(gz, key_column="name", start_column="start_ns",
                          duration_column="dur_ns")["start_ns"].tolist() == (
        events["start_ns"].tolist())


@pytest.mark.parametrize(("unit", "clock_hz", "start", "ns"), [
    ("ns", None, "17", 17),
    ("us", None, "1.001", 1001),
    ("us", None, "0.0005", 0),
    ("ms", None, "1.5", 1_500_000),
    ("s", None, "1700000000.123456789", 1_700_000_000_123_456_789),
    ("s", None, "2e-9", 2),
    ("cycles", 500_000_000, "3", 6),
    ("cycles", 3_000_000_000, "1", 0),  # 0.333 ns
    ("cycles", 400_000_000, "1", 2),  # 2.5 ns, half to even
])
def test_csv_units_are_exact(tmp_path: Path, unit: str, clock_hz: float | None, start: str,
                             ns: int) -> None:
    path = tmp_path / "u.csv"
    path.write_text(f"op,begin,length,extra\nconv,{start},{start},x\n")
    frame = read_trace_csv(path, key_column="op", start_column="begin",
                           duration_column="length", unit=unit, clock_hz=clock_hz)
    assert frame["start_ns"].tolist() == [ns]
    assert frame["dur_ns"].tolist() == [ns]
    assert list(frame.columns) == [*TRACE_COLUMNS, "arg_extra", "problem"]


def test_csv_bad_cells_are_problem_rows_and_bad_calls_raise(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("op,start,end\na,1,5\nb,,3\nc,x,4\nd,10,4\n")
    frame = read_trace_csv(path, key_column="op", start_column="start", end_column="end")
    assert frame["problem"].tolist() == ["", "start missing", "start not a number ('x')",
                                         "negative duration"]
    assert frame["dur_ns"].tolist()[0] == 4
    with pytest.raises(TraceError, match="no column 'nope'"):
        read_trace_csv(path, key_column="nope", start_column="start", end_column="end")
    with pytest.raises(ToolkitError, match="clock_hz"):
        read_trace_csv(path, key_column="op", start_column="start", end_column="end",
                       unit="cycles")
    with pytest.raises(ToolkitError, match="exactly one"):
        read_trace_csv(path, key_column="op", start_column="start")
    with pytest.raises(ToolkitError, match="unknown time unit"):
        read_trace_csv(path, key_column="op", start_column="start", end_column="end",
                       unit="fortnights")
