"""End to end on every sample model: compile -> run with trace -> join -> conservation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import ALL_TFLITE, SAMPLES

import toolkit as tk
from toolkit import run
from toolkit.cli._trace_join import main_trace_join
from toolkit.compiler import compile_model
from toolkit.formats.chrome_trace import write_chrome_trace
from toolkit.formats.trace_csv import write_trace_csv
from toolkit.runtime.chain import run_connection
from toolkit.trace import POLICIES, read_trace, trace_join

REPEAT = 3


@pytest.fixture(scope="module", params=ALL_TFLITE, ids=lambda p: p.name)
def traced(request: pytest.FixtureRequest) -> tuple:
    model = tk.load(request.param)
    compiled = compile_model(model)
    result = run(compiled, None, trace=True, repeat=REPEAT)
    return model, compiled, result.trace


def test_sample_models_exist() -> None:
    assert len(ALL_TFLITE) >= 5


@pytest.mark.parametrize("policy", POLICIES)
def test_compiled_run_joins_exactly(traced: tuple, policy: str) -> None:
    _model, compiled, tracer = traced
    frame = tracer.to_frame()
    att = tk.trace_join(tracer, compiled, policy=policy)
    att.check()
    assert att.key_used == "command_id"
    assert att.runs == REPEAT
    assert att.unattributed_ns == 0 and len(att.unattributed()) == 0
    assert att.total_ns == att.attributed_ns == int(frame["dur_ns"].sum())
    layers = att.by_layer()
    assert set(layers["layer"]) == set(compiled.layers()["layer"])
    assert int(layers["total_ns"].sum()) == att.total_ns
    assert (layers["events"] >= REPEAT).all()
    commands = att.by_command()
    assert (commands["events"] == REPEAT).all()
    per_command = frame.groupby("command_id")["dur_ns"].sum()
    assert commands.set_index("command_id")["total_ns"].to_dict() == per_command.to_dict()
    ops = att.by_op()
    per_op = frame.groupby("optimised_id")["dur_ns"].sum()
    assert ops.set_index("optimised_id")["total_ns"].to_dict() == per_op.to_dict()
    assert att.by_backend()["total_ns"].tolist() == [att.total_ns]
    removed = att.by_source_op()
    assert (removed.loc[removed["removed"] != "", "total_ns"] == 0).all()


def test_through_chrome_json_and_csv_files(traced: tuple, tmp_path: Path) -> None:
    _model, compiled, tracer = traced
    frame = tracer.to_frame()
    direct = trace_join(tracer, compiled).by_layer()
    for path in (write_chrome_trace(frame, tmp_path / "t.json.gz"),
                 write_trace_csv(frame, tmp_path / "t.csv")):
        att = trace_join(read_trace(path), compiled)
        att.check()
        assert att.runs == REPEAT and att.unattributed_ns == 0
        assert att.by_layer()["total_ns"].tolist() == direct["total_ns"].tolist()


def test_saved_output_folder_joins_like_the_compiled_model(traced: tuple, tmp_path: Path
                                                            ) -> None:
    _model, compiled, tracer = traced
    compiled.save(tmp_path / "out")
    att = trace_join(tracer, tmp_path / "out")
    att.check()
    want = trace_join(tracer, compiled).by_layer()
    got = att.by_layer().set_index("layer")["total_ns"]
    assert got.to_dict() == want.set_index("layer")["total_ns"].to_dict()


def test_uncompiled_run_is_read_as_source_op_indices(traced: tuple) -> None:
    model, compiled, _ = traced
    tracer = run(model, None, trace=True, repeat=2).trace
    att = trace_join(tracer, compiled)
    att.check()
    # when no pass changed the ops, both readings name the same ops
    same = len(compiled.ops) == len(model.graph.ops) and all(
        a.name == b.name for a, b in zip(compiled.ops, model.graph.ops))
    assert att.key_used == ("op_index" if same else "source_op_index")
    assert att.unattributed_ns == 0
    # each source op's time lands on its own layers: compare with the plain model itself
    plain = trace_join(tracer, model)
    plain.check()
    a = att.by_source_op().set_index("source_id")["total_ns"]
    b = plain.by_source_op().set_index("source_id")["total_ns"]
    assert a.sum() == b.sum() == att.total_ns


def test_partitioned_run_joins_back_to_source_layers() -> None:
    model = tk.load(SAMPLES / "Net_InstanceNorm_003.circle")
    spec = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
            "OPCODE": {"DIV": "npu", "POW": "npu"}}
    result = tk.partition(model, spec)
    chained = run_connection(result, None, trace=True, repeat=REPEAT)
    att = trace_join(chained.trace, result, policy="equal")
    att.check()
    assert att.key_used == "part_op"
    assert att.unattributed_ns == 0 and att.runs == REPEAT
    layers = att.by_layer()
    assert set(layers["layer"]) == set(result.layers()["layer"])
    assert (layers["events"] == REPEAT).all()
    backends = att.by_backend().set_index("backend")["total_ns"]
    frame = chained.trace.to_frame()
    assert backends.to_dict() == frame.groupby("backend")["dur_ns"].sum().to_dict()
    # another runner records one event per part call: joined by part, split over its ops
    calls = run_connection(result, None, trace=True, repeat=2,
                           run=lambda m, x: run(m, x).outputs)
    att = trace_join(calls.trace, result)
    att.check()
    assert att.key_used == "part"
    assert att.unattributed_ns == 0
    assert set(att.by_backend()["backend"]) == {"cpu", "npu"}


def test_cli_trace_join(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    compiled = compile_model(model)
    compiled.save(tmp_path / "out", stem="cnn")
    frame = run(compiled, None, trace=True, repeat=2).trace.runtime.to_frame()
    trace_path = write_chrome_trace(frame, tmp_path / "t.json")
    rc = main_trace_join([str(trace_path), "--compiled", str(tmp_path / "out"), "--by", "op",
                          "--policy", "bytes", "--csv", str(tmp_path / "ops.csv"),
                          "--chrome", str(tmp_path / "joined.json"),
                          "--model-explorer", str(tmp_path / "me.json")])
    assert rc == 0
    out = " ".join(capsys.readouterr().out.split())  # the headline wraps at 100 columns
    assert "key command_id" in out and "policy bytes" in out
    assert (tmp_path / "ops.csv").read_text().startswith("optimised_id,")
    joined = json.loads((tmp_path / "joined.json").read_text())
    assert all("layers" in e["args"] for e in joined["traceEvents"] if e["ph"] == "X")
    me = json.loads((tmp_path / "me.json").read_text())
    assert set(me["cnn"]["results"]) == set(compiled.source_ops()["name"])
    from toolkit.cli import main

    assert main(["trace-join", str(trace_path), "--compiled", str(tmp_path / "nope")]) == 2
    values = np.array([v["value"] for v in me["cnn"]["results"].values()])
    assert (values >= 0).all()


@pytest.mark.parametrize("identifiers", ["generated", "names"])
def test_debug_handle_records_join_like_command_ids(identifiers: str) -> None:
    model = tk.load(SAMPLES / "transformer.tflite")
    compiled = compile_model(model, debug_identifiers=identifiers)
    frame = run(compiled, None, trace=True, repeat=2).trace.runtime.to_frame()
    handles = compiled.handles
    assert {type(h) for h in handles} == ({int} if identifiers == "generated" else {str})
    records = [{"delegate_debug_identifier": handles[op], "start_time": s, "end_time": s + d}
               for op, s, d in zip(frame["optimised_id"], frame["start_ns"], frame["dur_ns"])]
    att = trace_join(read_trace(records), compiled)
    att.check()
    assert att.key_used == "debug_handle" and att.unattributed_ns == 0
    by_commands = trace_join(frame, compiled).by_layer()
    assert att.by_layer()["total_ns"].tolist() == by_commands["total_ns"].tolist()
