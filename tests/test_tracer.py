"""EventTracer: begin/end, context manager and log semantics, runs, frames, mistakes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import ToolkitError, TraceError
from toolkit.formats.chrome_trace import read_chrome_trace, write_chrome_trace
from toolkit.runtime.tracer import EVENT_COLUMNS, EventTracer


def fake_clock(step: int = 10, start: int = 1_000) -> Iterator[int]:
    now = start
    while True:
        yield now
        now += step


def tracer_with_fake_clock(**kwargs: object) -> EventTracer:
    ticks = fake_clock()
    return EventTracer(clock=ticks.__next__, **kwargs)  # type: ignore[arg-type]


def test_begin_end_records_times_from_the_clock() -> None:
    tracer = tracer_with_fake_clock()
    outer = tracer.begin("inference")
    inner = tracer.begin(7, op_index=0)
    tracer.end(inner)
    tracer.end(outer)
    frame = tracer.to_frame()
    assert frame["key"].tolist() == ["inference", 7]
    assert frame["name"].astype(str).tolist() == ["inference", "7"]
    assert frame["start_ns"].tolist() == [1000, 1010]
    assert frame["end_ns"].tolist() == [1030, 1020]
    assert frame["dur_ns"].tolist() == [30, 10]
    assert frame["op_index"].tolist() == [pd.NA, 0]
    assert (frame["problem"] == "").all()


def test_real_clock_times_are_monotonic_and_nested() -> None:
    tracer = EventTracer()
    before = time.perf_counter_ns()
    for i in range(200):
        with tracer.event("run"):
            entry = tracer.begin(i)
            tracer.end(entry)
    after = time.perf_counter_ns()
    frame = tracer.to_frame()
    starts = frame["start_ns"].to_numpy()
    assert starts.dtype == np.int64
    assert np.all(np.diff(starts) >= 0)
    assert np.all(frame["dur_ns"].to_numpy() >= 0)
    assert starts[0] >= before and frame["end_ns"].max() <= after
    outer, inner = frame.iloc[0::2], frame.iloc[1::2]
    assert np.all(outer["start_ns"].to_numpy() <= inner["start_ns"].to_numpy())
    assert np.all(outer["end_ns"].to_numpy() >= inner["end_ns"].to_numpy())


def test_context_manager_gives_entry_and_ends_on_error() -> None:
    tracer = tracer_with_fake_clock()
    with tracer.event("ok", command_id=4) as entry:
        assert entry == 0
    with pytest.raises(ZeroDivisionError), tracer.event("fails"):
        _ = 1 / 0
    frame = tracer.to_frame()
    assert frame["key"].tolist() == ["ok", "fails"]
    assert frame["dur_ns"].tolist() == [10, 10]
    assert frame["command_id"].tolist() == [4, pd.NA]


def test_log_keeps_given_times_and_flags_negative_durations() -> None:
    tracer = EventTracer()
    tracer.log(3, 100, 250, command_id=np.int64(2))
    tracer.log("npu_job", np.int64(300), 290)
    frame = tracer.to_frame()
    assert frame["start_ns"].tolist() == [100, 300]
    assert frame["dur_ns"].tolist() == [150, -10]
    assert frame["problem"].tolist() == ["", "negative duration"]
    with pytest.raises(TypeError):
        tracer.log(1, 1.5, 2)  # type: ignore[arg-type]


def test_ending_twice_or_ending_garbage_is_an_error() -> None:
    tracer = EventTracer()
    entry = tracer.begin(1)
    tracer.end(entry)
    with pytest.raises(TraceError, match="already ended"):
        tracer.end(entry)
    tracer.log(2, 0, 5)
    with pytest.raises(TraceError, match="already ended"):
        tracer.end(1)
    for bogus in (-1, 99, "1", None):
        with pytest.raises(TraceError, match="not an entry"):
            tracer.end(bogus)  # type: ignore[arg-type]
    assert len(tracer.to_frame()) == 2


def test_never_ended_entries_raise_or_are_kept_flagged() -> None:
    tracer = tracer_with_fake_clock()
    tracer.begin("left_open")
    done = tracer.begin("done")
    tracer.end(done)
    assert tracer.open_entries() == [0]
    with pytest.raises(TraceError, match=r"1 event.*never ended.*left_open"):
        tracer.to_frame()
    frame = tracer.to_frame(open_events="keep")
    assert frame["problem"].tolist() == ["never ended", ""]
    assert frame["dur_ns"].tolist() == [0, 10]
    assert frame["end_ns"].tolist()[0] == frame["start_ns"].tolist()[0]


def test_runs_number_inferences() -> None:
    tracer = tracer_with_fake_clock()
    assert tracer.run == 0
    for _ in range(3):
        tracer.new_run()  # at the start of each inference: runs 0, 1, 2
        for op in range(2):
            with tracer.event(op):
                pass
    assert tracer.new_run() == 3
    assert tracer.new_run() == 3  # no event in run 3 yet
    frame = tracer.to_frame()
    assert frame["run"].dtype == np.int64
    assert frame["run"].tolist() == [0, 0, 1, 1, 2, 2]


def test_tracks_args_and_dtypes() -> None:
    tracer = tracer_with_fake_clock(track="cpu")
    tracer.log(1, 0, 5, op_type="CONV_2D", op_index=0)
    tracer.log(2, 5, 9, track="npu", op_type="ADD", op_index=1, layers=["a", "b"])
    tracer.log("x", 9, 12, ratio=0.5)
    frame = tracer.to_frame()
    assert list(frame.columns) == [*EVENT_COLUMNS[:-1], "op_type", "op_index", "layers",
                                   "ratio", "problem"]
    assert frame["track"].astype(str).tolist() == ["cpu", "npu", "cpu"]
    assert isinstance(frame["track"].dtype, pd.CategoricalDtype)
    assert isinstance(frame["name"].dtype, pd.CategoricalDtype)
    assert isinstance(frame["op_type"].dtype, pd.CategoricalDtype)
    assert str(frame["op_index"].dtype) == "Int64"
    assert frame["layers"].tolist() == [None, ["a", "b"], None]
    assert frame["ratio"].dtype == np.float64
    assert frame["key"].dtype == object
    assert frame["key"].tolist() == [1, 2, "x"]
    for column in ("start_ns", "end_ns", "dur_ns", "run"):
        assert frame[column].dtype == np.int64


def test_empty_tracer_frame_keeps_columns_and_dtypes() -> None:
    frame = EventTracer().to_frame()
    assert list(frame.columns) == list(EVENT_COLUMNS)
    assert len(frame) == 0
    for column in ("run", "start_ns", "end_ns", "dur_ns"):
        assert frame[column].dtype == np.int64
    assert frame["key"].dtype == object
    assert isinstance(frame["name"].dtype, pd.CategoricalDtype)
    assert isinstance(frame["track"].dtype, pd.CategoricalDtype)


def test_bad_keys_and_clashing_arg_names_are_reported() -> None:
    tracer = EventTracer()
    tracer.log(np.int32(5), 0, 1)
    assert tracer.to_frame()["key"].tolist() == [5]
    tracer.log(1.5, 0, 1)  # type: ignore[arg-type]
    with pytest.raises(ToolkitError, match=r"event key 1\.5 is a float"):
        tracer.to_frame()
    clash = EventTracer()
    clash.log(1, 0, 1, start_ns=3, key=4)
    with pytest.raises(ToolkitError, match="'start_ns' has the name of a column"):
        clash.to_frame()


def test_int_and_str_keys_with_the_same_text_share_a_name() -> None:
    tracer = EventTracer()
    tracer.log(1, 0, 1)
    tracer.log("1", 1, 2)
    frame = tracer.to_frame()
    assert frame["key"].tolist() == [1, "1"]
    assert frame["name"].astype(str).tolist() == ["1", "1"]
    assert list(frame["name"].cat.categories) == ["1"]


def test_clear_forgets_everything() -> None:
    tracer = EventTracer()
    tracer.log(1, 0, 1)
    tracer.new_run()
    tracer.log(1, 0, 1)
    tracer.clear()
    assert len(tracer) == 0 and tracer.run == 0
    assert len(tracer.to_frame()) == 0


def test_tracer_frame_round_trips_through_a_chrome_trace(tmp_path: Path) -> None:
    tracer = EventTracer(track="cpu")
    for _ in range(2):
        tracer.new_run()
        for op in range(3):
            with tracer.event(op, op_index=op, op_type="CONV_2D"):
                pass
        tracer.log("npu_job", 1_000, 2_345, track="npu", command_id=9)
    events = tracer.to_frame()
    path = write_chrome_trace(events, tmp_path / "run.json.gz", process_name="reference")
    frame = read_chrome_trace(path)
    assert frame["start_ns"].tolist() == events["start_ns"].tolist()
    assert frame["dur_ns"].tolist() == events["dur_ns"].tolist()
    assert frame["name"].astype(str).tolist() == events["name"].astype(str).tolist()
    assert frame["arg_run"].tolist() == events["run"].tolist()
    assert frame["arg_key"].tolist() == events["key"].tolist()
    assert frame["arg_op_index"].tolist() == events["op_index"].tolist()
    assert frame["arg_command_id"].tolist() == events["command_id"].tolist()
    thread_names = frame.attrs["thread_names"]
    assert [thread_names[(1, t)] for t in frame["tid"]] == events["track"].astype(str).tolist()
    assert "arg_problem" not in frame.columns  # empty problems are not written


def test_record_steps_batches_keep_order_runs_and_args() -> None:
    tracer = tracer_with_fake_clock()
    keys, args = [0, 1, 2], [{"op_index": 0}, {"op_index": 1}, {"op_index": 2}]
    tracer.new_run()
    tracer.record_steps(keys, [100, 110, 130, 160], args)
    assert len(tracer) == 3
    assert tracer.new_run() == 1  # counts the batched events
    tracer.record_steps(keys, [200, 205, 205, 230], args)
    entry = tracer.begin("user")  # a user event after the batches keeps its place
    tracer.end(entry)
    tracer.new_run()
    tracer.record_steps(keys[:2], [300, 301, 302], args)  # fewer times: fewer events
    tracer.record(9, 400, 399)
    frame = tracer.to_frame()
    assert frame["key"].tolist() == [0, 1, 2, 0, 1, 2, "user", 0, 1, 9]
    assert frame["run"].tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]
    assert frame["start_ns"].tolist()[:7] == [100, 110, 130, 200, 205, 205, 1000]
    assert frame["dur_ns"].tolist()[:6] == [10, 20, 30, 5, 0, 25]
    assert frame["op_index"].tolist()[:6] == [0, 1, 2, 0, 1, 2]
    assert frame["problem"].tolist()[-1] == "negative duration"
    assert len(tracer) == 10
    tracer.record_steps(keys, [1, 2, 3, 4], args)
    tracer.clear()
    assert len(tracer) == 0 and tracer.to_frame().empty


def test_step_sinks_record_runs_tracks_and_args_in_order() -> None:
    tracer = tracer_with_fake_clock()
    keys, args = [0, 1], [{"op_index": 0}, {"op_index": 1}]
    sink = tracer.step_sink(keys, args, new_run=True)
    other = tracer.step_sink(["dma"], [None], track="npu")
    assert tracer.step_sink(keys, args, new_run=True) is sink  # asked again: the same
    assert sink.id != other.id and sink.size == 8 * 4
    sink.record(100, 110, 130)  # run 0 (no event before it)
    other.record(130, 150)  # same run
    entry = tracer.begin("user")  # recording anything else unpacks the batches first
    tracer.end(entry)
    sink.record(200, 200, 260)  # new run
    assert len(tracer) == 6
    sink.record(300, 305, 309)
    assert tracer.run == 2
    frame = tracer.to_frame()
    assert frame["key"].tolist() == [0, 1, "dma", "user", 0, 1, 0, 1]
    assert frame["run"].tolist() == [0, 0, 0, 0, 1, 1, 2, 2]
    assert frame["track"].astype(str).tolist() == ["main"] * 2 + ["npu"] + ["main"] * 5
    assert frame["start_ns"].tolist() == [100, 110, 130, 1000, 200, 200, 300, 305]
    assert frame["dur_ns"].tolist() == [10, 20, 20, 10, 0, 60, 5, 4]
    assert frame["op_index"].astype(object).fillna(-1).tolist() == [0, 1, -1, -1, 0, 1, 0, 1]
    tracer.clear()  # sinks stay valid
    sink.record(1, 2, 3)
    assert tracer.to_frame()["run"].tolist() == [0, 0]


def test_step_sinks_fill_chunk_after_chunk_in_order(monkeypatch) -> None:
    from toolkit.runtime import tracer as tracer_module

    monkeypatch.setattr(tracer_module, "_CHUNK_BYTES", 64)  # two small batches a chunk
    tracer = EventTracer()
    small = tracer.step_sink([0], [None])  # 24 bytes a batch
    large = tracer.step_sink(list(range(10)), [None] * 10)  # 96: more than a chunk
    for i in range(5):
        small.record(10 * i, 10 * i + 1)
        large.record(*range(1000 * i, 1000 * i + 11))
    frame = tracer.to_frame()
    assert frame["key"].tolist() == [0, *range(10)] * 5
    assert frame["start_ns"].tolist() == [
        t for i in range(5) for t in [10 * i, *range(1000 * i, 1000 * i + 10)]]
    assert (frame["dur_ns"] == 1).all()
    small.record(7, 9)  # the chunk in use is kept for what comes after a read
    assert tracer.to_frame()["start_ns"].tolist()[-1] == 7


def test_step_sink_readings_are_counted_and_checked() -> None:
    tracer = tracer_with_fake_clock()
    sink = tracer.step_sink([0, 1, 2], [None] * 3)
    sink.record(10, 20, 30, 40)
    with pytest.raises(TraceError, match=r"3 event.*got 2 clock reading.*not 4"):
        sink.record(50, 60)  # one reading per key plus one are needed
    with pytest.raises(TraceError, match="int64"):
        sink.record(1, 2, 3, 2**70)
    assert tracer.to_frame()["start_ns"].tolist() == [10, 20, 30]  # nothing half-recorded
    sink.record(50, 60, 70, 80)
    assert tracer.to_frame()["start_ns"].tolist() == [10, 20, 30, 50, 60, 70]
