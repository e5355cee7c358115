"""The per-file join kernel's fast paths give the same answer as the general ones: integer
keys beside text keys, spans already in start order, merges in blocks, per-run counts in
blocks over a trace larger than one block."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from toolkit.trace import read_trace, trace_join
from toolkit.trace.fleet.synthetic import synthetic_model, synthetic_session
from toolkit.trace.join.catalog import catalog_of
from toolkit.trace.join.nesting import _before, span_tree
from toolkit.trace.join.run_cells import view_cells
from toolkit.trace.readers.read import Trace

VIEWS = ("by_layer", "by_source_op", "by_op", "by_command", "by_backend")


@pytest.fixture(scope="module")
def model():
    return synthetic_model(ops=30, seed=5)


@pytest.fixture(scope="module")
def session(model) -> pd.DataFrame:
    """About 90,000 events (more than one block of 65,536): commands keyed by integer
    ``command_id``, ``Method::execute`` wrappers keyed by their name, every anomaly."""
    return synthetic_session(model, 3, 2000)


def _same_attribution(a, b) -> None:
    a.check()
    b.check()
    assert a.summary() == b.summary()
    for view in VIEWS:
        pd.testing.assert_frame_equal(getattr(a, view)(), getattr(b, view)(), check_exact=True)
    pd.testing.assert_frame_equal(a.unattributed(), b.unattributed(), check_exact=True)
    pd.testing.assert_frame_equal(a.overhead(), b.overhead(), check_exact=True)


def test_integer_keys_beside_text_keys_join_as_the_objects_do(model, session) -> None:
    trace = read_trace(session)
    kinds = set(trace.events["key_kind"].astype(str))
    assert {"command_id", "name"} <= kinds  # both kinds of key in one trace
    assert trace.int_keys is not None and trace.int_key_rows is not None
    named = trace.events["key_kind"].astype(str).to_numpy() == "name"
    assert not trace.int_key_rows[named].any() and trace.int_key_rows[~named].all()
    # the key column still holds Python ints and the wrappers' names
    keys = trace.events["key"].to_numpy()
    assert all(type(k) is int for k in keys[~named][:1000].tolist())
    assert set(keys[named].tolist()) == {"Method::execute"}
    plain = Trace(trace.events, dict(trace.meta))  # no integer keys: every key an object
    _same_attribution(trace_join(trace, model), trace_join(plain, model))
    _same_attribution(trace_join(trace, model, skip_runs=2), trace_join(plain, model, skip_runs=2))


def test_before_counts_as_searchsorted_over_blocks() -> None:
    rng = np.random.default_rng(7)
    for size in (1, 5, 70_000, 200_000):
        low = np.sort(rng.integers(0, 1000, size))  # many ties
        high = np.sort(rng.integers(-5, 1005, size // 2 + 1))
        np.testing.assert_array_equal(_before(low, high),
                                      np.searchsorted(low, high, side="right"))
    np.testing.assert_array_equal(_before(np.zeros(0, np.int64), np.arange(3)),
                                  np.zeros(3, np.int64))


def test_span_trees_do_not_depend_on_the_order_events_come_in(session) -> None:
    rng = np.random.default_rng(11)
    start = session["start_ns"].to_numpy(np.int64)
    dur = session["dur_ns"].to_numpy(np.int64)
    valid = np.ones(len(start), bool)
    tracks = np.where(np.arange(len(start)) % 7 == 0, 1, 0).astype(np.int64)
    for track in (None, tracks):
        in_order = span_tree(start, dur, valid, track)
        assert in_order.nested and len(in_order.overlapping)
        shuffle = rng.permutation(len(start))
        back = np.argsort(shuffle)
        shuffled = span_tree(start[shuffle], dur[shuffle], valid[shuffle],
                             None if track is None else track[shuffle])
        np.testing.assert_array_equal(shuffled.self_ns[back], in_order.self_ns)
        np.testing.assert_array_equal(shuffled.children[back], in_order.children)
        parent = shuffled.parent[back]
        np.testing.assert_array_equal(np.where(parent >= 0, shuffle[np.maximum(parent, 0)], -1),
                                      in_order.parent)
        np.testing.assert_array_equal(np.sort(shuffle[shuffled.overlapping]),
                                      in_order.overlapping)
        # the self times of each tree add up to its root's duration
        assert int(in_order.self_ns[dur >= 0].sum()) == int(
            dur[(in_order.parent < 0) & (dur >= 0)].sum())


def test_per_run_counts_in_blocks_equal_the_per_run_table(model, session) -> None:
    rng = np.random.default_rng(13)
    shuffled = session.iloc[rng.permutation(len(session))].reset_index(drop=True)
    cat = catalog_of(model)
    cells = {}
    for name, frame in (("sorted", session), ("shuffled", shuffled)):
        att = trace_join(read_trace(frame), model)
        got = att.run_cells()
        cells[name] = got
        runs = att.run_values()
        for by in ("layer", "source_op", "op", "command", "backend"):
            row, run, ns, events = view_cells(got, cat, by)
            want = att.per_run(by, ids=False)
            np.testing.assert_array_equal(row, want["row"].to_numpy())
            np.testing.assert_array_equal(runs[run], want["run"].to_numpy())
            np.testing.assert_array_equal(ns, want["ns"].to_numpy())
            np.testing.assert_array_equal(events, want["events"].to_numpy())
    for field in dataclasses.fields(cells["sorted"]):
        a, b = getattr(cells["sorted"], field.name), getattr(cells["shuffled"], field.name)
        assert a.dtype == b.dtype and a.flags.c_contiguous and b.flags.c_contiguous
        np.testing.assert_array_equal(a, b)
