"""EventTracer recorded into from several threads at once: per-thread buffers merged when
read, checked against ground truth (what each thread did, and sleeps of known length)."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pandas as pd

from toolkit.runtime.tracer import EventTracer

THREADS = 3
PAIRS = 20_000  # begin/end pairs per thread
SLEEPS = 4  # events per thread around a known sleep
SLEEP_NS = 3_000_000


def _contend(tr: EventTracer) -> dict[str, tuple[int, int]]:
    """Each thread records PAIRS ``end(begin(k))`` events (key ``k`` = its number), then
    SLEEPS events around a sleep of SLEEP_NS; returns thread name -> (ident, number)."""
    start = threading.Barrier(THREADS)
    names: dict[str, tuple[int, int]] = {}

    def worker(k: int) -> None:
        names[threading.current_thread().name] = (threading.get_ident(), k)
        start.wait()
        begin, end = tr.begin, tr.end
        for _ in range(PAIRS):
            end(begin(k))
        for _ in range(SLEEPS):
            with tr.event(f"sleep{k}", thread=k):
                time.sleep(SLEEP_NS / 1e9)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=worker, args=(k,), name=f"worker-{k}")
                   for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return names


def test_threads_keep_their_own_starts() -> None:
    tr = EventTracer()
    names = _contend(tr)
    frame = tr.to_frame()
    assert len(frame) == THREADS * (PAIRS + SLEEPS)
    assert (frame["problem"] == "").all()
    assert (frame["dur_ns"] >= 0).all()  # no event got another event's start
    # every thread's events sit on its own track, exactly as many as it recorded
    pairs = frame[frame["key"].map(lambda k: isinstance(k, int))]
    counts = pairs.groupby(pairs["key"].astype(int))["track"].agg(["size", "nunique", "first"])
    assert counts["size"].tolist() == [PAIRS] * THREADS
    assert counts["nunique"].tolist() == [1] * THREADS
    assert {str(counts.loc[k, "first"]) for _, k in names.values()} == set(names)
    for name, (_, k) in names.items():
        mine = frame[frame["track"] == name]
        assert len(mine) == PAIRS + SLEEPS
        # each thread's events are in its recording order: pairs, then its sleeps
        assert mine["key"].tolist() == [k] * PAIRS + [f"sleep{k}"] * SLEEPS
        assert (np.diff(mine["start_ns"].to_numpy()) >= 0).all()
        # a pair's event starts after the previous one of its thread ended
        assert (mine["start_ns"].to_numpy()[1:] >= mine["end_ns"].to_numpy()[:-1]).all()
    sleeps = frame[frame["name"].astype(str).str.startswith("sleep")]
    assert len(sleeps) == THREADS * SLEEPS
    assert (sleeps["dur_ns"] >= SLEEP_NS).all()  # each slept at least that long
    assert (sleeps["dur_ns"] < 50 * SLEEP_NS).all()  # and was not given another's start
    assert (sleeps["thread"].astype(int) == sleeps["name"].astype(str).str[5:].astype(int)
            ).all()
    # the merge puts events of all threads in the order they began
    assert frame["start_ns"].is_monotonic_increasing


def test_the_creating_thread_keeps_the_default_track_and_runs_stay_numbered() -> None:
    tr = EventTracer(track="main")
    tr.end(tr.begin("before"))
    done = threading.Event()

    def other() -> None:
        tr.log("other", 10, 20, op_index=1)
        done.set()

    t = threading.Thread(target=other, name="helper")
    t.start()
    t.join()
    assert done.is_set()
    tr.new_run()
    tr.end(tr.begin("after"))
    frame = tr.to_frame()
    by_name = frame.set_index(frame["name"].astype(str))
    assert by_name.loc["before", "track"] == "main"
    assert by_name.loc["after", "track"] == "main"
    assert by_name.loc["other", "track"] == "helper"
    assert by_name.loc["before", "run"] == 0 and by_name.loc["after", "run"] == 1
    assert by_name.loc["other", "run"] == 0
    assert pd.isna(by_name.loc["before", "op_index"]) and by_name.loc["other", "op_index"] == 1


def test_an_entry_ended_in_another_thread_ends_its_own_event() -> None:
    tr = EventTracer()
    entries: list[int] = []
    t = threading.Thread(target=lambda: entries.append(tr.begin("x")))
    t.start()
    t.join()
    tr.end(entries[0])
    mine = tr.begin("y")
    tr.end(mine)
    frame = tr.to_frame()
    assert sorted(frame["name"].astype(str)) == ["x", "y"]
    assert (frame["problem"] == "").all() and (frame["dur_ns"] >= 0).all()
    assert tr.open_entries() == []


def test_a_pickled_tracer_keeps_every_thread_s_events() -> None:
    import pickle

    tr = EventTracer()
    tr.end(tr.begin("a"))
    t = threading.Thread(target=lambda: tr.log("b", 5, 9), name="other")
    t.start()
    t.join()
    tr.new_run()
    sink = tr.step_sink(["c", "d"], [None, None])
    sink.record(10, 11, 13)
    copy = pickle.loads(pickle.dumps(tr))
    pd.testing.assert_frame_equal(copy.to_frame(), tr.to_frame())
    copy.end(copy.begin("e"))  # and records on
    assert copy.to_frame()["name"].astype(str).tolist()[-1] == "e"
