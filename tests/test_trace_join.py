"""trace_join on small hand-made provenance: exact splits, keys, reasons, views, exports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import ToolkitError
from toolkit.trace import STAT_COLUMNS, read_trace, to_chrome_trace, to_model_explorer, trace_join
from toolkit.trace.join.split import split_by_weights
from toolkit.trace.join.tables import ProvenanceTables


def fused_provenance() -> ProvenanceTables:
    """Compiled op 0 fuses A (conv), B (bias add), C (relu); op 1 is D (pool); E was removed.

    MACs A 6, B 3, C 1, D 5; output bytes A 100, B 100, C 200, D 50. Op 0 has two stripes
    (commands 0 and 1), op 1 one (command 2). Debug handle 10 is op 0, "pool" op 1.
    """
    return ProvenanceTables.build(
        source_ops=pd.DataFrame({
            "source_id": [0, 1, 2, 3, 4], "op_index": [0, 1, 2, 3, 4],
            "operator": ["CONV_2D", "ADD", "RELU", "MAX_POOL_2D", "RESHAPE"],
            "name": ["A", "B", "C", "D", "E"], "macs": [6, 3, 1, 5, 0],
            "output_bytes": [100, 100, 200, 50, 10]}),
        layers=pd.DataFrame({"source_id": [0, 1, 2, 3, 4],
                             "layer": ["model/conv", "model/bias", "model/relu", "model/pool",
                                       "model/flatten"]}),
        optimised_ops=pd.DataFrame({"optimised_id": [0, 1], "operator": ["CONV_2D", "MAX_POOL"],
                                    "name": ["fused", "pool_out"], "backend": ["npu", "npu"]}),
        origins=pd.DataFrame({"optimised_id": [0, 0, 0, 1], "source_id": [0, 1, 2, 3]}),
        commands=pd.DataFrame({"command_id": [0, 1, 2], "optimised_id": [0, 0, 1],
                               "stripe": [0, 1, 0], "stripes": [2, 2, 1]}),
        debug_handles=pd.DataFrame({"handle": [10, 10, 10, "pool"],
                                    "optimised_id": [0, 0, 0, 1], "source_id": [0, 1, 2, 3]}),
        removed=pd.DataFrame({"source_id": [4], "reason": ["no-op reshape"]}))


def events(**columns: list) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    columns.setdefault("start_ns", list(range(0, 10_000 * n, 10_000)))
    return pd.DataFrame(columns)


def layer_ns(att) -> dict[str, int]:
    t = att.by_layer()
    return dict(zip(t["layer"], t["total_ns"].tolist()))


# --------------------------------------------------------------------------------------------
# The hand-worked example: one 1001 ns event of the fused op, split by each policy.
#
# equal: 1001 / 3 = 333 r 2 each; 999 given, 2 left; remainders tie -> A, B get one more.
# macs (6, 3, 1; W = 10): 600.6, 300.3, 100.1 -> 600, 300, 100; 1 left -> largest remainder A.
# bytes (100, 100, 200; W = 400): 250.25, 250.25, 500.5 -> 250, 250, 500; 1 left -> C.

@pytest.mark.parametrize("policy,expected", [
    ("equal", {"model/conv": 334, "model/bias": 334, "model/relu": 333}),
    ("macs", {"model/conv": 601, "model/bias": 300, "model/relu": 100}),
    ("bytes", {"model/conv": 250, "model/bias": 250, "model/relu": 501}),
])
def test_hand_worked_split(policy: str, expected: dict[str, int]) -> None:
    att = trace_join(events(command_id=[0], dur_ns=[1001]), fused_provenance(), policy=policy)
    att.check()
    assert att.policy == policy and att.key_used == "command_id"
    got = layer_ns(att)
    assert {k: got[k] for k in expected} == expected
    assert got["model/pool"] == 0 and got["model/flatten"] == 0
    long = att.events()
    assert long["attributed_ns"].sum() == 1001
    assert long["source_id"].tolist() == [0, 1, 2]
    assert long["optimised_id"].tolist() == [0, 0, 0]
    src = att.by_source_op().set_index("source_id")
    assert src.loc[4, "removed"] == "no-op reshape" and src.loc[4, "total_ns"] == 0
    assert att.total_ns == att.attributed_ns == 1001 and att.unattributed_ns == 0


def test_split_by_weights_directly() -> None:
    weight = np.array([6, 3, 1, 100, 100, 200, 0, 5], dtype=np.int64)
    dur = np.array([1001, 1001, 7, 0], dtype=np.int64)
    first = np.array([0, 3, 6, 0], dtype=np.int64)
    count = np.array([3, 3, 2, 3], dtype=np.int64)
    total = np.array([10, 400, 5, 10], dtype=np.int64)
    event, member, ns = split_by_weights(dur, first, count, total, weight)
    assert event.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    assert member.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2]
    assert ns.tolist() == [601, 300, 100, 250, 250, 501, 0, 7, 0, 0, 0]


def test_source_op_with_two_layers_splits_its_share_equally() -> None:
    prov = ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": [0, 1], "name": ["conv", "relu"],
                                 "macs": [3, 1]}),
        layers=pd.DataFrame({"source_id": [0, 0, 1], "layer": ["L/conv", "L/bn", "L/relu"]}),
        origins=pd.DataFrame({"optimised_id": [0, 0], "source_id": [0, 1]}),
        commands=pd.DataFrame({"command_id": [0], "optimised_id": [0]}))
    # members (conv, L/conv) w 3*1, (conv, L/bn) w 3*1, (relu, L/relu) w 1*2; W = 8
    att = trace_join(events(command_id=[0], dur_ns=[803]), prov, policy="macs")
    att.check()
    # 803*3/8 = 301.125 twice, 803*2/8 = 200.75 -> 301, 301, 200; 1 left -> relu (rem 6)
    assert layer_ns(att) == {"L/conv": 301, "L/bn": 301, "L/relu": 201}
    src = att.by_source_op()
    assert src["total_ns"].tolist() == [602, 201]
    assert src["layers"].tolist() == ["L/conv;L/bn", "L/relu"]


def test_zero_macs_target_splits_equally() -> None:
    prov = ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": [0, 1], "macs": [0, 0]}),
        origins=pd.DataFrame({"optimised_id": [0, 0], "source_id": [0, 1]}))
    att = trace_join(events(op_index=[0], dur_ns=[11]), prov, policy="macs")
    assert att.by_source_op()["total_ns"].tolist() == [6, 5]


def test_per_run_statistics_match_numpy() -> None:
    prov = fused_provenance()
    df = events(command_id=[2, 0, 2, 2], dur_ns=[100, 50, 200, 600], run=[0, 0, 1, 2])
    att = trace_join(df, prov, policy="macs")
    att.check()
    cmd = att.by_command().set_index("command_id")
    assert list(att.by_command().columns[-len(STAT_COLUMNS):]) == list(STAT_COLUMNS)
    row = cmd.loc[2]
    values = np.array([100, 200, 600]) / 1e6
    assert row["total_ns"] == 900 and row["events"] == 3
    assert row["share"] == pytest.approx(900 / 950)
    assert row["avg_ms"] == pytest.approx(values.mean())
    assert row["min_ms"] == pytest.approx(values.min())
    assert row["max_ms"] == pytest.approx(values.max())
    for q in (10, 50, 90):
        assert row[f"p{q}_ms"] == pytest.approx(np.percentile(values, q))
    conv = att.by_layer().set_index("layer").loc["model/conv"]
    per_run = np.array([30, 0, 0]) / 1e6  # 50 ns * 6/10 in run 0 only
    assert conv["total_ns"] == 30 and conv["min_ms"] == 0
    assert conv["avg_ms"] == pytest.approx(per_run.mean())
    assert conv["p90_ms"] == pytest.approx(np.percentile(per_run, 90))
    assert att.by_command().set_index("command_id").loc[1, "total_ns"] == 0
    assert att.runs == 3


def test_key_kinds() -> None:
    prov = fused_provenance()
    cases = [
        (events(op_index=[0], dur_ns=[10]), None, "op_index", {"model/conv": 6}),
        (events(delegate_debug_identifier=[10], dur_ns=[10]), None, "debug_handle",
         {"model/conv": 6}),
        (events(delegate_debug_identifier=["10"], dur_ns=[10]), None, "debug_handle",
         {"model/conv": 6}),
        (events(delegate_debug_identifier=["pool"], dur_ns=[10]), None, "debug_handle",
         {"model/pool": 10}),
        (events(name=["fused"], dur_ns=[10]), None, "name", {"model/conv": 6}),
        (events(name=["C"], dur_ns=[10]), None, "name", {"model/relu": 10, "model/conv": 0}),
        (events(op_index=[3], dur_ns=[10]), "source_op_index", "source_op_index",
         {"model/pool": 10}),
        (events(name=["fused"], op_index=[3], dur_ns=[10]), "name", "name", {"model/conv": 6}),
    ]
    for frame, key, used, expected in cases:
        att = trace_join(frame, prov, key=key)
        att.check()
        assert att.key_used == used
        got = layer_ns(att)
        assert {k: got[k] for k in expected} == expected, (used, got)
        assert att.unattributed_ns == 0


def test_mixed_keys_say_which_were_used() -> None:
    frame = pd.DataFrame({"command_id": [0, None], "name": ["x", "pool_out"],
                          "start_ns": [0, 100], "dur_ns": [10, 20]})
    att = trace_join(frame, fused_provenance())
    assert att.key_used == "command_id+name"
    keys = att.keys().set_index("key_kind")
    assert keys.loc["command_id", "attributed_ns"] == 10
    assert keys.loc["name", "attributed_ns"] == 20


def test_unattributed_reasons_and_conservation() -> None:
    prov = ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": [0, 1, 2], "name": ["a", "b", "c"]}),
        optimised_ops=pd.DataFrame({"optimised_id": [0, 1, 2], "name": ["a", "same", "same"]}),
        origins=pd.DataFrame({"optimised_id": [0, 1, 2], "source_id": [0, 1, 2]}),
        commands=pd.DataFrame({"command_id": [0, 1, 2], "optimised_id": [0, 1, 2]}))
    frame = pd.DataFrame({
        "command_id": [0, 99, 1, None, None, "abc", 0, 1, 2, 0],
        "name": ["a", "x", "b", "same", "", "y", "w", "p", "c", "q"],
        "start_ns": [0, 100, 200, 300, 400, 500, 1000, 1010, 1100, 1150],
        "dur_ns": [10, 10, -5, 10, 10, 10, 80, 20, 100, 10],
    }).astype({"command_id": object})
    att = trace_join(frame, prov, overlaps="leaves")
    att.check()
    un = att.unattributed().set_index("event_id")
    assert un.loc[1, "reason"] == "unknown command_id"
    assert un.loc[2, "reason"] == "negative duration"
    assert un.loc[3, "reason"] == "ambiguous name"
    assert un.loc[4, "reason"] == "no key"
    assert un.loc[5, "reason"] == "command_id key is not an integer"
    # event 6 [1000, 1080) encloses event 7 [1010, 1030): the wrapper goes, the child stays;
    # event 8 [1100, 1200) is fine, event 9 [1150, 1160) nests in it -> 8 encloses.
    assert un.loc[6, "reason"] == "encloses other events on its track"
    assert un.loc[8, "reason"] == "encloses other events on its track"
    assert 7 not in un.index and 9 not in un.index and 0 not in un.index
    assert list(att.unattributed().columns) == ["event_id", "run", "key", "key_kind", "name",
                                                "start_ns", "dur_ns", "reason", "self_ns"]
    assert att.total_ns == int(frame["dur_ns"].clip(lower=0).sum())  # -5 ns: not counted
    assert att.attributed_ns + att.unattributed_ns == att.total_ns
    assert att.unattributed()["dur_ns"].clip(lower=0).sum() == att.unattributed_ns
    assert att.attributed_ns == 10 + 20 + 10
    keep = trace_join(frame, prov, overlaps="keep")
    assert keep.attributed_ns == 10 + 80 + 20 + 100 + 10
    # by default, nested spans count their self time: 6 keeps 80 - 20, 8 keeps 100 - 10
    nested = trace_join(frame, prov)
    nested.check()
    assert nested.attributed_ns == 10 + 60 + 20 + 90 + 10
    assert nested.total_ns == int(frame["dur_ns"].clip(lower=0).sum()) - 20 - 10


def test_partial_overlap_on_one_track_and_other_tracks_are_independent() -> None:
    prov = fused_provenance()
    frame = pd.DataFrame({"command_id": [0, 2, 2], "tid": [1, 1, 2],
                          "start_ns": [0, 50, 60], "dur_ns": [100, 100, 100]})
    att = trace_join(frame, prov)
    att.check()
    un = att.unattributed()
    assert un["event_id"].tolist() == [1]
    assert un["reason"].tolist() == ["overlaps an earlier event on its track"]


def test_reader_problems_become_reasons(tmp_path: Path) -> None:
    trace = {"traceEvents": [
        {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 0, "args": {"command_id": 0}},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
         "args": {"command_id": 2}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    att = trace_join(path, fused_provenance())
    un = att.unattributed()
    assert len(un) == 1 and "E" in un["reason"].iloc[0]
    assert att.attributed_ns == 1000


def test_partitioned_provenance_part_op_and_part_keys() -> None:
    prov = ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": [0, 1, 2, 3], "macs": [1, 1, 1, 1]}),
        layers=pd.DataFrame({"source_id": [0, 1, 2, 3], "layer": ["l0", "l1", "l2", "l3"]}),
        optimised_ops=pd.DataFrame({"optimised_id": [0, 1, 2], "backend": ["cpu", "npu", "npu"],
                                    "part": [1, 2, 2], "part_op_index": [0, 0, 1]}),
        origins=pd.DataFrame({"optimised_id": [0, 0, 1, 2], "source_id": [0, 1, 2, 3]}))
    frame = pd.DataFrame({"arg_part": [1, 2, 2, 2, 3], "arg_op_index": [0, 0, 1, 5, 0],
                          "start_ns": [0, 10, 20, 30, 40], "dur_ns": [4, 3, 5, 1, 1]})
    att = trace_join(frame, prov)
    att.check()
    assert att.key_used == "part_op"
    assert layer_ns(att) == {"l0": 2, "l1": 2, "l2": 3, "l3": 5}
    assert att.unattributed()["reason"].tolist() == ["unknown part_op", "unknown part_op"]
    backend = att.by_backend().set_index("backend")["total_ns"].to_dict()
    assert backend == {"cpu": 4, "npu": 8}
    op = att.by_op()
    assert op["part"].tolist() == [1, 2, 2] and op["part_op_index"].tolist() == [0, 0, 1]
    # a trace with one event per part call (another runner): split over the part's ops
    calls = pd.DataFrame({"run": [0, 0], "part": [1, 2], "ts_us": [0.0, 1.0],
                          "dur_us": [0.004, 0.009]})
    att = trace_join(calls, prov)
    att.check()
    assert att.key_used == "part"
    assert layer_ns(att) == {"l0": 2, "l1": 2, "l2": 5, "l3": 4}
    assert att.by_backend().set_index("backend")["total_ns"].to_dict() == {"cpu": 4, "npu": 9}


@dataclass
class _Bare:
    """The smallest provenance: a dataclass of DataFrames with the protocol's methods."""

    tables: dict[str, pd.DataFrame]

    def source_ops(self) -> pd.DataFrame:
        return self.tables["source_ops"]

    def layers(self) -> pd.DataFrame:
        return self.tables["layers"]

    def optimised_ops(self) -> pd.DataFrame:
        return self.tables["optimised_ops"]

    def origins(self) -> pd.DataFrame:
        return self.tables["origins"]

    def commands(self) -> pd.DataFrame:
        return self.tables["commands"]

    def debug_handles(self) -> pd.DataFrame:
        return self.tables["debug_handles"]

    def removed(self) -> pd.DataFrame:
        return self.tables["removed"]


def test_any_protocol_object_and_empty_views_keep_dtypes() -> None:
    full = fused_provenance()
    bare = _Bare({name: getattr(full, name)() for name in (
        "source_ops", "layers", "optimised_ops", "origins", "commands", "debug_handles",
        "removed")})
    empty = pd.DataFrame({"command_id": pd.Series([], dtype="int64"),
                          "start_ns": pd.Series([], dtype="int64"),
                          "dur_ns": pd.Series([], dtype="int64")})
    att = trace_join(empty, bare)
    att.check()
    assert att.total_ns == 0 and att.runs == 0
    for view in ("by_layer", "by_source_op", "by_op", "by_command", "by_backend"):
        table = getattr(att, view)()
        assert list(table.columns[-len(STAT_COLUMNS):]) == list(STAT_COLUMNS)
        assert table["total_ns"].dtype == np.int64 and table["events"].dtype == np.int64
        assert table["avg_ms"].dtype == np.float64
    for view in ("unattributed", "events"):
        table = getattr(att, view)()
        assert len(table) == 0
        assert table["event_id"].dtype == np.int64
    assert att.events()["attributed_ns"].dtype == np.int64


def test_bad_arguments() -> None:
    frame = events(command_id=[0], dur_ns=[1])
    with pytest.raises(ToolkitError, match="policy"):
        trace_join(frame, fused_provenance(), policy="flops")
    with pytest.raises(ToolkitError, match="key"):
        trace_join(frame, fused_provenance(), key="opcode")
    with pytest.raises(ToolkitError):
        trace_join(frame, object())


def test_chrome_export_carries_layers(tmp_path: Path) -> None:
    frame = events(command_id=[0, 2, 7], dur_ns=[1001, 50, 5])
    att = trace_join(frame, fused_provenance())
    path = to_chrome_trace(att, tmp_path / "joined.json")
    body = json.loads(path.read_text())
    x = [e for e in body["traceEvents"] if e["ph"] == "X"]
    assert len(x) == 3
    assert x[0]["args"]["layers"] == ["model/conv", "model/bias", "model/relu"]
    assert x[0]["args"]["source_ops"] == [0, 1, 2]
    assert x[0]["args"]["optimised_id"] == 0
    assert x[1]["args"]["layers"] == ["model/pool"]
    assert x[2]["args"]["unattributed"] == "unknown command_id"
    assert "unattributed" not in x[0]["args"]
    assert body["otherData"]["attributed_ns"] == 1051
    back = trace_join(read_trace(path), fused_provenance())
    assert layer_ns(back) == layer_ns(att)


def test_model_explorer_node_data(tmp_path: Path) -> None:
    att = trace_join(events(command_id=[0, 2], dur_ns=[1001, 2_000_000]), fused_provenance())
    path = to_model_explorer(att, tmp_path / "me.json", graph_id="main")
    data = json.loads(path.read_text())
    results = data["main"]["results"]
    assert results["A"]["value"] == pytest.approx(601 / 1e6)
    assert results["D"]["value"] == pytest.approx(2.0)
    assert results["E"]["value"] == 0
    assert [g["stop"] for g in data["main"]["gradient"]] == [0, 1]
    ops = json.loads(to_model_explorer(att, tmp_path / "ops.json", level="op",
                                       value="events").read_text())
    assert ops["main"]["results"] == {"fused": {"value": 1}, "pool_out": {"value": 1}}
    with pytest.raises(ToolkitError):
        to_model_explorer(att, tmp_path / "x.json", level="tensor")


def test_sparse_sums_give_the_same_views(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.trace.join._accumulate as accumulate
    import toolkit.trace.join.attribution as attribution

    rng = np.random.default_rng(0)
    n = 3000
    frame = pd.DataFrame({"command_id": rng.integers(0, 4, n), "run": rng.integers(0, 500, n),
                          "start_ns": np.arange(n) * 100, "dur_ns": rng.integers(0, 90, n)})
    frame.loc[frame["command_id"] == 3, "command_id"] = 2
    dense = trace_join(frame, fused_provenance())
    views = ("by_layer", "by_source_op", "by_op", "by_command", "by_backend")
    want = {v: getattr(dense, v)() for v in views}
    monkeypatch.setattr(accumulate, "DENSE_CELLS", 1)
    monkeypatch.setattr(attribution, "_DENSE_ROWS_RUNS", 1)
    sparse = trace_join(frame, fused_provenance())
    sparse.check()
    assert sparse._r.sums.dense is None
    for v in views:
        pd.testing.assert_frame_equal(getattr(sparse, v)(), want[v])
