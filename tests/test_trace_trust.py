"""A wrong join cannot look right: wrong model, other compile, warm-up, partitioned runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit import run
from toolkit.cli import main
from toolkit.compiler import compile_model
from toolkit.trace import read_trace, trace_join
from toolkit.trace.join._partitioned import load_partitioned


@pytest.fixture(scope="module")
def cnn() -> tuple:
    model = tk.load(SAMPLES / "cnn.tflite")
    compiled = compile_model(model)
    return model, compiled, run(compiled, None, trace=True, repeat=2).trace.runtime.to_frame()


def test_cnn_trace_joined_to_the_transformer_raises(cnn: tuple) -> None:
    _model, _compiled, frame = cnn
    transformer = compile_model(tk.load(SAMPLES / "transformer.tflite"))
    with pytest.raises(tk.ToolkitError, match="another model") as err:
        trace_join(frame, transformer)
    assert "strict=False" in str(err.value) and "CONV_2D" in str(err.value)
    # strict=False: nothing attributed, every event unattributed with its own reason
    att = trace_join(frame, transformer, strict=False)
    att.check()
    assert att.attributed_ns == 0 and att.match_score == 0.0
    un = att.unattributed()
    assert un["event_id"].tolist() == list(range(len(frame)))
    reasons = un["reason"].astype(str)
    named = reasons.str.startswith("trace event names ")
    assert (named | (reasons == "unknown command_id")).all()
    # each reason names the event's own op and the model's op its key points at
    ops = transformer.optimised_ops().set_index("optimised_id")
    commands = transformer.commands().set_index("command_id")["optimised_id"]
    for row in un[named.to_numpy()].itertuples():
        event = frame.iloc[row.event_id]
        op = int(commands[event["command_id"]])
        assert f"{event['op_type']} '{event['op_name']}'" in row.reason
        assert f"model op {op} is {ops.loc[op, 'operator']} '{ops.loc[op, 'name']}'" in \
            row.reason


def test_differently_compiled_cnn_flags_every_moved_event(cnn: tuple) -> None:
    model, compiled, frame = cnn
    other = compile_model(model, target=tk.Target(buffer_bytes=4096))
    assert len(other.commands()) != len(compiled.commands())
    with pytest.raises(tk.ToolkitError, match="compiled differently"):
        trace_join(frame, other)
    att = trace_join(frame, other, strict=False)
    att.check()
    # an event moved when the op that command id runs in `other` is not the event's op
    cmd = other.commands().set_index("command_id")["optimised_id"]
    names = other.optimised_ops().set_index("optimised_id")["name"]
    now = frame["command_id"].map(cmd)
    moved = now.isna() | (now.map(names) != frame["op_name"])
    assert moved.any() and not moved.all()
    un = att.unattributed()
    assert set(un["event_id"]) == set(np.flatnonzero(moved.to_numpy()).tolist())
    assert att.match_score == pytest.approx(1 - moved.mean())
    # what stays attributed is on the layers of the ops the events name
    kept = frame.loc[~moved.to_numpy()]
    assert att.attributed_ns == int(kept["dur_ns"].sum())


def test_cli_refuses_the_wrong_model_and_no_strict_goes_on(cnn: tuple, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture
                                                          ) -> None:
    from toolkit.formats.chrome_trace import write_chrome_trace

    _model, _compiled, frame = cnn
    path = write_chrome_trace(frame, tmp_path / "t.json")
    other = str(SAMPLES / "transformer.tflite")
    assert main(["trace-join", str(path), "--compiled", other]) == 2
    assert "another model" in capsys.readouterr().err
    assert main(["trace-join", str(path), "--compiled", other, "--no-strict"]) == 0
    assert "match score 0.0%" in capsys.readouterr().out


def test_warmup_and_skip_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    compiled = compile_model(model)
    compiled.save(tmp_path / "out", stem="cnn")
    cold = run(compiled, None, trace=True, repeat=6).trace
    att = trace_join(cold, compiled)
    per_run = read_trace(cold).events.groupby("run")["dur_ns"].sum()
    # the first inference binds kernels: several times the median run, flagged per layer
    assert per_run.iloc[0] > 2 * per_run.median()
    assert att.by_layer()["first_run_outlier"].any()
    skipped = trace_join(cold, compiled, skip_runs=1)
    skipped.check()
    assert skipped.runs == 5 and skipped.skipped_runs == 1
    s = skipped.summary()
    assert s["skipped_events"] == int((read_trace(cold).events["run"] == 0).sum())
    assert s["total_ns"] == int(per_run.iloc[1:].sum())
    with pytest.raises(tk.ToolkitError, match="skip_runs"):
        trace_join(cold, compiled, skip_runs=6)
    # the command line: warm up, record, join
    trace = tmp_path / "t.json"
    assert main(["run", str(tmp_path / "out"), "--warmup", "5", "--repeat", "20",
                 "--trace", str(trace)]) == 0
    warm = read_trace(trace)
    assert warm.runs == 20
    runs = warm.events.groupby("run")["dur_ns"].sum()
    assert runs.iloc[0] < 4 * runs.median()
    capsys.readouterr()
    assert main(["trace-join", str(trace), "--compiled", str(tmp_path / "out"),
                 "--skip-runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "20 run" not in out and "18 run(s)" in out and "match score 100.0%" in out
    assert "skipped the first 2 run(s) as warm-up" in out


def test_partitioned_trace_joins_from_the_cli(tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SAMPLES / "Net_InstanceNorm_003.circle", work)
    (work / "Net.part").write_text("[partition]\nbackends=cpu,npu\ndefault=cpu\n"
                                   "comply=opcode\n\n[OPCODE]\nDIV=npu\nPOW=npu\n")
    assert main(["partition", "--part_file", "Net.part", "--input_file",
                 "Net_InstanceNorm_003.circle", "--work_path", str(work)]) == 0
    conn = work / "Net_InstanceNorm_003.conn.json"
    trace = tmp_path / "chain.json"
    assert main(["run", str(conn), "--warmup", "2", "--repeat", "5", "--trace",
                 str(trace)]) == 0
    capsys.readouterr()
    assert main(["trace-join", str(trace), "--compiled", str(conn), "--by", "backend"]) == 0
    out = capsys.readouterr().out
    share = float(re.search(r"attributed \S+ \S+ of \S+ \S+ \(([\d.]+)%\)", out).group(1))
    assert share >= 99.0
    att = trace_join(trace, load_partitioned(conn))
    att.check()
    source = tk.load(work / "Net_InstanceNorm_003.circle")
    layers = att.by_layer()
    assert set(layers["layer"]) <= {n for op in source.graph.ops for n in op.name.split(";")} \
        | set(source.source_table.values())
    assert int(layers["total_ns"].sum()) >= 0.99 * att.total_ns
    assert set(att.by_backend()["backend"]) == {"cpu", "npu"}
    # without its source model beside the parts, the parts' origin tables name the layers
    (work / "Net_InstanceNorm_003.circle").unlink()
    bare = trace_join(trace, conn)
    bare.check()
    assert bare.attributed_ns == att.attributed_ns
    assert pd.Series(bare.by_layer()["layer"]).isin(layers["layer"]).all()
    # the source model instead of the connection: refused, naming the cause
    with pytest.raises(tk.ToolkitError, match="partitioned"):
        trace_join(trace, SAMPLES / "Net_InstanceNorm_003.circle")


def test_the_runtime_says_what_its_keys_are(cnn: tuple, tmp_path: Path) -> None:
    from toolkit.formats.chrome_trace import write_chrome_trace

    _model, compiled, frame = cnn
    assert set(frame["key_kind"]) == {"command_id"}
    for source in (frame, write_chrome_trace(frame, tmp_path / "t.json")):
        trace = read_trace(source)
        assert "key_kind_from" in trace.meta
        assert set(trace.events["key_kind"].astype(str)) == {"command_id"}
        assert trace.events["key"].tolist() == frame["command_id"].tolist()
    # the same events declaring op_index are keyed by their compiled op, not guessed
    ev = read_trace(frame.assign(key_kind="op_index")).events
    assert ev["key_kind"].astype(str).unique().tolist() == ["op_index"]
    assert ev["key"].tolist() == frame["optimised_id"].tolist()
    att = trace_join(frame.assign(key_kind="op_index"), compiled)
    assert att.key_used == "op_index" and att.unattributed_ns == 0
    # mixed declarations, and rows that declare nothing are read by their column names
    mixed = frame.assign(key_kind=["op_index", ""] * (len(frame) // 2))
    ev = read_trace(mixed).events
    assert ev["key_kind"].astype(str).tolist() == ["op_index", "command_id"] * (len(frame) // 2)
    # a foreign trace that says nothing is read by column names
    foreign = read_trace(frame.drop(columns="key_kind"))
    assert "key_kind_from" not in foreign.meta
    assert set(foreign.events["key_kind"].astype(str)) == {"command_id"}


def test_command_ids_and_debug_handles_carried_beside_the_key_are_checked() -> None:
    from test_trace_join import fused_provenance

    prov = fused_provenance()  # commands 0, 1 run op 0; command 2 op 1; handle 10 op 0
    frame = pd.DataFrame({"delegate_debug_identifier": [10, 10, "pool", 10],
                          "command_id": [0, 2, 2, 99],
                          "start_ns": [0, 100, 200, 300], "dur_ns": [10, 10, 10, 10],
                          "key_kind": "debug_handle"})
    att = trace_join(frame, prov, strict=False)
    att.check()
    un = att.unattributed().set_index("event_id")["reason"].astype(str)
    # event 1: handle 10 is op 0, its command 2 runs op 1; event 3: no command 99
    assert sorted(un.index) == [1, 3]
    assert un.loc[1] == ("trace event names command_id 2, debug_handle 10, model op 0 is "
                         "CONV_2D 'fused'")
    assert att.match_score == 0.5
    assert att.attributed_ns == 20
