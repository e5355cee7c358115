"""Fleets of traces: trace_join_many on a process pool and on Dask equals one trace_join over
the concatenated fleet, to the nanosecond and to the bit of every per-run statistic."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import SAMPLES

from toolkit.errors import ToolkitError, TraceError
from toolkit.formats.trace_parquet import read_trace_parquet, write_trace_parquet
from toolkit.trace import read_trace, trace_join
from toolkit.trace.fleet.join_many import FleetAttribution, trace_join_many
from toolkit.trace.fleet.merge import merge_partials
from toolkit.trace.fleet.partial import PER_RUN_VIEWS, join_partition, provenance_snapshot
from toolkit.trace.fleet.synthetic import synthetic_model, synthetic_session, write_synthetic_fleet
from toolkit.trace.join.catalog import catalog_of
from toolkit.trace.join.run_cells import view_cells

FILES = 8
RUNS = 12
VIEWS = ("by_layer", "by_source_op", "by_op", "by_command", "by_backend")
COUNTS = ("events", "attributed_events", "runs", "total_ns", "attributed_ns", "overhead_ns",
          "unattributed_ns", "keyed_events", "matched_events", "overlapping_events", "tracks",
          "skipped_runs", "skipped_events", "skipped_ns")


@pytest.fixture(scope="module")
def model():
    return synthetic_model(ops=12, seed=3)


@pytest.fixture(scope="module")
def fleet(model, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """8 sessions: 6 Parquet files and 2 CSV files, every anomaly kind in each."""
    folder = tmp_path_factory.mktemp("fleet")
    paths = write_synthetic_fleet(folder, model, FILES - 2, RUNS)
    for device in (FILES - 2, FILES - 1):
        path = folder / f"session_{device:04d}.csv"
        synthetic_session(model, device, RUNS).to_csv(path, index=False)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def frames(model) -> list[pd.DataFrame]:
    return [synthetic_session(model, device, RUNS) for device in range(FILES)]


@pytest.fixture(scope="module")
def reference(model, frames):
    """One trace_join over the whole fleet as one trace."""
    att = trace_join(read_trace(pd.concat(frames, ignore_index=True)), model)
    att.check()
    return att


def assert_same(fleet_att: FleetAttribution, att) -> None:
    """Every view, count and reason of the fleet equals the single join's, exactly."""
    fleet_att.check()
    for view in VIEWS:
        pd.testing.assert_frame_equal(getattr(fleet_att, view)(), getattr(att, view)(),
                                      check_exact=True, obj=view)
    summary, want = fleet_att.summary(), att.summary()
    assert {k: summary[k] for k in COUNTS} == {k: want[k] for k in COUNTS}
    assert (fleet_att.total_ns, fleet_att.attributed_ns, fleet_att.overhead_ns,
            fleet_att.unattributed_ns) == (att.total_ns, att.attributed_ns, att.overhead_ns,
                                           att.unattributed_ns)
    assert fleet_att.key_used == att.key_used and fleet_att.nested == att.nested
    assert fleet_att.match_score == att.match_score
    unatt = att.unattributed()
    reasons = (unatt.assign(reason=unatt["reason"].astype(str)).groupby("reason")["self_ns"]
               .agg(["size", "sum"]).sort_index())
    got = fleet_att.unattributed().set_index("reason")
    assert got["events"].tolist() == reasons["size"].tolist()
    assert got["self_ns"].tolist() == reasons["sum"].tolist()
    over = att.overhead().sort_values("name")
    got_over = fleet_att.overhead()
    for column in ("name", "total_ns", "events", "inclusive_ns"):
        assert got_over[column].tolist() == over[column].tolist()
    for by in ("layer", "op", "command"):
        pd.testing.assert_frame_equal(fleet_att.per_run(by), att.per_run(by), check_exact=True)
    assert fleet_att.run_values().tolist() == att.run_values().tolist()


def test_the_fleet_has_every_anomaly_kind(reference) -> None:
    reasons = set(reference.unattributed()["reason"].astype(str))
    assert {"unknown command_id", "negative duration",
            "overlaps an earlier event on its track"} <= reasons
    assert reference.nested and reference.overhead_ns > 0
    assert reference.by_layer()["first_run_outlier"].any()  # the warm-up run
    assert reference.runs == FILES * RUNS


def test_local_pool_equals_one_join_and_one_worker_shuffled(model, fleet, reference) -> None:
    two = trace_join_many(fleet, model, engine="local", workers=2)
    assert two.partitions == FILES
    assert_same(two, reference)
    parts = two.by_partition()
    assert parts["total_ns"].sum() == reference.total_ns
    # each partition names the worker process that joined it and that process's peak memory
    assert not (parts["worker_pid"] == os.getpid()).any()
    assert parts["worker_pid"].nunique() <= 2
    assert (parts["worker_peak_rss_bytes"] > 10 * 2**20).all()
    assert parts["runs"].tolist() == [RUNS] * FILES
    shuffled = list(fleet)
    random.Random(7).shuffle(shuffled)
    one = trace_join_many(shuffled, model, engine="local", workers=1)
    for view in VIEWS:
        pd.testing.assert_frame_equal(getattr(one, view)(), getattr(two, view)(),
                                      check_exact=True)
    assert one.summary() == two.summary()
    # the per-file slices follow the sources' order
    assert one.by_partition()["source"].tolist() == [str(p) for p in shuffled]


def test_in_process_and_in_memory_sources(model, frames, reference) -> None:
    fleet_att = trace_join_many(frames[::-1], model, workers=0)
    assert_same(fleet_att, reference)


def test_dask_local_cluster_processes(model, fleet, reference) -> None:
    pytest.importorskip("distributed")
    from toolkit.trace.fleet.engines import start_cluster, worker_malloc_trim

    cluster, client = start_cluster(2)
    try:
        trim = worker_malloc_trim(client)
        assert len(trim) == 2 and set(trim.values()) == {None}
        arenas = client.run(os.environ.get, "MALLOC_ARENA_MAX")
        assert set(arenas.values()) == {"1"}  # one malloc arena: no growth file after file
        pools = client.run(lambda: __import__("pyarrow").default_memory_pool().backend_name)
        assert set(pools.values()) == {"system"}  # Arrow's freed pages go back at once
        assert_same(trace_join_many(fleet, model, engine="dask", client=client), reference)
    finally:
        client.close()
        cluster.close()


def test_dask_threads_one_and_two_workers_shuffled(model, fleet, reference) -> None:
    pytest.importorskip("distributed")
    from toolkit.trace.fleet.engines import start_cluster

    shuffled = list(fleet)
    random.Random(3).shuffle(shuffled)
    for workers in (1, 2):
        cluster, client = start_cluster(workers, processes=False)
        try:
            got = trace_join_many(shuffled, model, engine="dask", client=client)
        finally:
            client.close()
            cluster.close()
        for view in VIEWS:
            pd.testing.assert_frame_equal(getattr(got, view)(), getattr(reference, view)(),
                                          check_exact=True)


def test_percentiles_spilled_to_duckdb_are_bit_identical(model, frames, reference) -> None:
    pytest.importorskip("duckdb")
    spilled = trace_join_many(frames, model, workers=0, memory_budget=0)
    assert_same(spilled, reference)


def test_warmup_runs_skipped_per_partition(model, frames) -> None:
    fleet_att = trace_join_many(frames, model, workers=0, skip_runs=1)
    warm = [f[f["run"] != f["run"].min()] for f in frames]
    att = trace_join(read_trace(pd.concat(warm, ignore_index=True)), model)
    for view in VIEWS:
        pd.testing.assert_frame_equal(getattr(fleet_att, view)(), getattr(att, view)(),
                                      check_exact=True)
    assert fleet_att.skipped_runs == FILES
    dropped = sum(int((f["run"] == f["run"].min()).sum()) for f in frames)
    assert fleet_att.summary()["skipped_events"] == dropped
    assert not fleet_att.by_layer()["first_run_outlier"].any()


def test_partition_by_device_column(model, frames, tmp_path: Path, reference) -> None:
    both = tmp_path / "two_devices.parquet"
    write_trace_parquet(pd.concat(frames[:4], ignore_index=True), both)
    rest = tmp_path / "rest.parquet"
    write_trace_parquet(pd.concat(frames[4:], ignore_index=True), rest)
    fleet_att = trace_join_many([both, rest], model, workers=0, partition_by="device")
    assert fleet_att.partitions == FILES
    assert fleet_att.by_partition()["device"].tolist() == [f"dev{i:04d}" for i in range(FILES)]
    assert_same(fleet_att, reference)
    spread = fleet_att.layer_by_partition("model/layer0")
    assert len(spread) == FILES and spread["total_ns"].sum() == \
        fleet_att.by_layer().set_index("layer").loc["model/layer0", "total_ns"]
    with pytest.raises(ToolkitError, match="no column 'rack'"):
        trace_join_many([both], model, workers=0, partition_by="rack")


# -------------------------------------------------------------------------------- guards
def test_merge_refuses_another_compiled_model(model, frames) -> None:
    other = synthetic_model(ops=12, seed=4)
    a = join_partition(frames[0], model, label="a")
    b = join_partition(frames[1], other, label="b", strict=False)
    with pytest.raises(ToolkitError, match="another compiled model"):
        merge_partials([a, b])
    with pytest.raises(ToolkitError, match="another compiled model"):
        merge_partials([a], compiled=other)
    merge_partials([a], compiled=provenance_snapshot(model))  # the same model passes


def test_merge_refuses_a_run_in_two_partitions(model, frames, fleet) -> None:
    a = join_partition(frames[0], model, label="a")
    b = join_partition(frames[0], model, label="b")
    with pytest.raises(ToolkitError, match=r"run 0 appears in two partitions: 'a' and 'b'"):
        merge_partials([a, b])
    with pytest.raises(ToolkitError, match="appears in two partitions"):
        trace_join_many([fleet[0], fleet[0]], model, workers=0)


def test_merge_refuses_other_join_options(model, frames) -> None:
    a = join_partition(frames[0], model, label="a")
    b = join_partition(frames[1], model, label="b", policy="equal")
    with pytest.raises(ToolkitError, match="options"):
        merge_partials([a, b])
    with pytest.raises(ToolkitError, match="no partial"):
        merge_partials([])


def test_partials_merge_in_any_order_and_pickle(model, frames) -> None:
    import pickle

    parts = [join_partition(f, model, label=f"s{i}", order=i) for i, f in enumerate(frames)]
    back = [pickle.loads(pickle.dumps(p)) for p in parts]
    a = merge_partials(parts)
    b = merge_partials(back[::-1])
    assert a.counts == b.counts and a.runs.tolist() == b.runs.tolist()
    cat = catalog_of(provenance_snapshot(model))
    for view in PER_RUN_VIEWS:
        cells, bounds = a.view(view, cat)
        other, other_bounds = b.view(view, cat)
        assert bounds.tolist() == other_bounds.tolist()
        for field in dataclasses.fields(cells):
            assert getattr(cells, field.name).tolist() == getattr(other, field.name).tolist()


def test_partial_cells_derive_every_per_run_view(model, frames) -> None:
    """The compact per-run bases of a partial give each view's per-run table exactly."""
    snapshot = provenance_snapshot(model)
    att = trace_join(frames[2], snapshot)
    part = join_partition(frames[2], snapshot)
    assert part.cells.member_ns.dtype.itemsize <= 4  # narrowed
    cat = catalog_of(snapshot)
    for view in PER_RUN_VIEWS:
        want = att.per_run(view, ids=False)
        row, run, ns, events = view_cells(part.cells, cat, view)
        assert row.tolist() == want["row"].tolist(), view
        assert part.runs[run].tolist() == want["run"].tolist(), view
        assert ns.tolist() == want["ns"].tolist(), view
        assert events.tolist() == want["events"].tolist(), view
    assert part.layer_inclusive_ns.tolist() == att.by_layer()["inclusive_ns"].tolist()


def test_check_catches_a_tampered_partial(model, frames) -> None:
    parts = [join_partition(f, model, label=f"s{i}", order=i) for i, f in enumerate(frames[:2])]
    cells = parts[1].cells
    col = int(np.flatnonzero(cells.member_ns[0] < cells.member_ns.max())[0])
    cells.member_ns[0, col] += 1
    fleet_att = FleetAttribution(merge_partials(parts), provenance_snapshot(model))
    with pytest.raises(ToolkitError, match="layer per-run table sums to"):
        fleet_att.check()


def test_a_bad_file_is_named(model, fleet, tmp_path: Path) -> None:
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(TraceError, match=r"broken\.parquet"):
        trace_join_many([fleet[0], bad], model, workers=0)
    with pytest.raises(ToolkitError, match="no trace files match"):
        trace_join_many(str(tmp_path / "*.nothing"), model)
    with pytest.raises(ToolkitError, match="unknown engine"):
        trace_join_many(fleet, model, engine="spark")


# -------------------------------------------------------------------------------- tables
def test_per_run_table_adds_up_to_the_views(reference) -> None:
    for by, view in (("layer", "by_layer"), ("source_op", "by_source_op"), ("op", "by_op"),
                     ("command", "by_command"), ("backend", "by_backend")):
        table = getattr(reference, view)()
        cells = reference.per_run(by)
        ns = cells.groupby("row")["ns"].sum().reindex(range(len(table)), fill_value=0)
        ev = cells.groupby("row")["events"].sum().reindex(range(len(table)), fill_value=0)
        assert ns.tolist() == table["total_ns"].tolist(), by
        assert ev.tolist() == table["events"].tolist(), by
        assert set(cells["run"]) <= set(reference.run_values().tolist())
        id_column = cells.columns[1]
        assert (cells[id_column].to_numpy() == table[id_column].to_numpy()[cells["row"]]).all()


def test_parquet_round_trip(model, frames, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow.parquet")
    trace = read_trace(frames[0])
    path = write_trace_parquet(trace.events, tmp_path / "t.parquet")
    schema = pa.read_schema(path)
    assert str(schema.field("start_ns").type) == "int64"
    assert str(schema.field("dur_ns").type) == "int64"
    assert str(schema.field("run").type) == "int64"
    raw_path = write_trace_parquet(frames[0], tmp_path / "raw.parquet")
    assert str(pa.read_schema(raw_path).field("command_id").type) == "int32"
    assert read_trace_parquet(raw_path)["command_id"].dtype == "Int64"  # wrappers: no key
    again = read_trace(path)
    assert again.meta["format"] == "parquet"
    pd.testing.assert_frame_equal(trace_join(again, model).by_layer(),
                                  trace_join(trace, model).by_layer(), check_exact=True)
    raw = read_trace_parquet(path)
    assert raw["start_ns"].dtype == np.int64 and raw["event_id"].dtype == np.int64
    with pytest.raises(ToolkitError, match="no column"):
        write_trace_parquet(pd.DataFrame({"x": [1]}), tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()


# -------------------------------------------------------------------------------- a real model
def test_cli_joins_runtime_traces_of_a_compiled_model(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    import toolkit as tk
    from toolkit.cli import main
    from toolkit.compiler import compile_model

    compiled = compile_model(tk.load(SAMPLES / "cnn.tflite"))
    compiled.save(tmp_path / "out", stem="cnn")
    frames = []
    for device in range(3):  # three devices, each numbering its runs from 0
        frame = tk.run(compiled, None, trace=True, repeat=2).trace.runtime.to_frame()
        write_trace_parquet(frame, tmp_path / "fleet" / f"dev{device}.parquet")
        frames.append(frame.assign(run=frame["run"] + 2 * device))
    pattern = str(tmp_path / "fleet" / "*.parquet")
    assert main(["trace-join-many", pattern, "--compiled", str(tmp_path / "out"),
                 "--workers", "0"]) == 2
    assert "appears in two partitions" in capsys.readouterr().err
    assert main(["trace-join-many", pattern, "--compiled", str(tmp_path / "out"),
                 "--workers", "0", "--runs", "per-partition",
                 "--csv", str(tmp_path / "layers.csv")]) == 0
    captured = capsys.readouterr()
    assert "3 partition(s)" in captured.out and "6 run(s)" in captured.out
    assert "3/3 files" in captured.err  # the progress bar
    att = trace_join(read_trace(pd.concat(frames, ignore_index=True)), compiled)
    written = pd.read_csv(tmp_path / "layers.csv")
    want = att.by_layer()
    assert dict(zip(written["layer"], written["total_ns"])) == \
        dict(zip(want["layer"], want["total_ns"]))


def test_per_device_spread_is_each_session_joined_alone(model, frames) -> None:
    fleet_att = trace_join_many(frames[:3], model, workers=0)
    spread = fleet_att.layer_by_partition()
    for i, frame in enumerate(frames[:3]):
        alone = trace_join(read_trace(frame), model).by_layer()
        alone = alone[alone["total_ns"] > 0].reset_index(drop=True)
        mine = spread[spread["source"] == f"trace {i}"].reset_index(drop=True)
        assert mine["layer"].tolist() == alone["layer"].tolist()
        for column in ("total_ns", "avg_ms", "min_ms", "p10_ms", "p50_ms", "p90_ms", "max_ms"):
            assert mine[column].tolist() == alone[column].tolist(), column


def test_sessions_numbering_runs_from_zero_merge_per_partition(model, frames) -> None:
    from_zero = [f.assign(run=f["run"] - f["run"].min()) for f in frames[:3]]
    with pytest.raises(ToolkitError, match="appears in two partitions"):
        trace_join_many(from_zero, model, workers=0)
    fleet_att = trace_join_many(from_zero, model, workers=0, runs="per-partition")
    att = trace_join(read_trace(pd.concat(frames[:3], ignore_index=True)), model)
    for view in VIEWS:
        pd.testing.assert_frame_equal(getattr(fleet_att, view)(), getattr(att, view)(),
                                      check_exact=True)
    assert fleet_att.run_values().tolist() == list(range(3 * RUNS))


@pytest.mark.parametrize("n_runs", [1, 40])
def test_duckdb_order_statistics_equal_the_in_memory_figures(n_runs: int) -> None:
    pytest.importorskip("duckdb")
    from toolkit.trace.fleet._stats import fleet_stats_frame

    rng = np.random.default_rng(n_runs)
    n_rows = 30
    dense = rng.integers(0, 10**9, size=(n_rows, n_runs))
    dense[rng.random((n_rows, n_runs)) < 0.3] = 0  # runs without time for the row
    dense[5] = 0  # a row never run
    dense[6] = 123  # ties
    row, run = np.nonzero(dense)
    events = rng.integers(0, 50, size=n_rows)
    args = (row, run, dense[row, run], n_rows, n_runs, events, int(dense.sum()) + 1)
    memory = fleet_stats_frame(*args)
    spilled = fleet_stats_frame(*args, memory_budget=0)
    pd.testing.assert_frame_equal(spilled, memory, check_exact=True)
    for column, q in (("p10_ms", 10), ("p50_ms", 50), ("p90_ms", 90)):  # numpy's linear
        np.testing.assert_allclose(memory[column], np.percentile(dense, q, axis=1) / 1e6,
                                   rtol=1e-15, atol=0)


def test_per_run_table_sparse_equals_dense(model, frames, reference,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.trace.join.attribution as attribution

    monkeypatch.setattr(attribution, "_DENSE_CELLS", 0)  # every table built sparse
    sparse = trace_join(read_trace(pd.concat(frames, ignore_index=True)), model)
    for by in ("layer", "op", "command", "backend"):
        pd.testing.assert_frame_equal(sparse.per_run(by), reference.per_run(by),
                                      check_exact=True)


def test_front_door(model, frames, reference) -> None:
    import inspect

    import toolkit as tk

    assert tk.trace_join_many.__module__ == "toolkit" and "trace_join_many" in dir(tk)
    assert "Returns:" in (inspect.getdoc(tk.trace_join_many) or "")
    fleet_att = tk.trace_join_many(frames, model, workers=0)
    assert_same(fleet_att, reference)
