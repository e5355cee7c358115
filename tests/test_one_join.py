"""One join for every runtime: the toolkit's own traces, ExecuTorch files, ONNX Runtime
profiles and fleets go through the same engine (toolkit.trace.join.join), with the same options and
the same leading columns; ORT's If runs its branch inside its own kernel span, counted once.

Fixtures: ``sample_models/onnx/gate.*`` (an ONNX model with an ``If``, profiled by ONNX
Runtime 1.32 with both branches taken: ``sample_models/onnx/make_control_flow.py``), the
ExecuTorch 1.5.1 files of ``sample_models/executorch`` and the toolkit's own runs."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.errors import ToolkitError
from toolkit.trace.fleet.join_many import FleetAttribution
from toolkit.trace.join.layer_views import (
    LAYER_COLUMNS,
    OP_COLUMNS,
    OVERHEAD_COLUMNS,
    SUMMARY_KEYS,
    UNATTRIBUTED_EVENT_COLUMNS,
)

D = SAMPLES / "onnx"
EX = SAMPLES / "executorch"
GATE = D / "gate.onnx"
PROFILE = D / "gate.disable.prof.json.gz"
MANIFEST = json.loads((D / "gate.MANIFEST.json").read_text())


def _plain(path: Path) -> list[dict]:
    with gzip.open(path, "rb") as f:
        return json.load(f)


def _kernel_exclusive_per_run(plain: list[dict]) -> list[int]:
    """Per model_run span (in start order), the kernel events inside it, each counted as its
    duration minus the durations of the kernel events directly inside it (µs -> ns): written
    out on the raw JSON, one pair of events at a time."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in plain
                   if e["cat"] == "Session" and e["name"] == "model_run")
    kernels = [e for e in plain if e["cat"] == "Node" and e["name"].endswith("_kernel_time")]
    out = []
    for a, b in spans:
        inside = [k for k in kernels if a <= k["ts"] and k["ts"] + k["dur"] <= b]

        def holds(p: dict, c: dict) -> bool:
            return p is not c and p["tid"] == c["tid"] and p["ts"] <= c["ts"] and \
                c["ts"] + c["dur"] <= p["ts"] + p["dur"] and p["dur"] > c["dur"]

        total = 0
        for k in inside:
            children = [c for c in inside if holds(k, c)
                        and not any(holds(m, c) and holds(k, m) for m in inside)]
            total += k["dur"] - sum(c["dur"] for c in children)
        out.append(1000 * total)
    return out


# ------------------------------------------------------------------------------ ORT's If
def test_if_branch_nodes_are_counted_once() -> None:
    plain = _plain(PROFILE)
    att = tk.trace_join(PROFILE, GATE)
    att.check()
    per_run = _kernel_exclusive_per_run(plain)
    summary = att.summary()
    # the totals are the model_run spans' kernel exclusive time, to the ns
    assert summary["total_ns"] == sum(per_run) == att.attributed_ns
    assert att.trace.meta["runs"]["kernel_ns"].tolist() == per_run
    assert summary["nested"] and summary["overlapping_events"] == 0
    # before, the branch nodes' time was counted inside the If and again on their own
    every_kernel = 1000 * sum(e["dur"] for e in plain if e["name"].endswith("_kernel_time"))
    branch = 1000 * sum(e["dur"] for e in plain if e["name"].startswith(("/gate/then/",
                                                                         "/gate/else/")))
    assert branch > 0 and summary["total_ns"] == every_kernel - branch
    # both branches ran (as recorded when the fixture was made), each node once per run
    ops = att.by_op().set_index("name")
    taken = MANIFEST["branches"]["gate.disable.prof.json.gz"]
    for tag, node in (("then", "/gate/then/MatMul"), ("else", "/gate/else/MatMul")):
        assert ops.loc[node, "events"] == taken.count(tag) > 0
    assert ops.loc["/gate/If", "events"] == len(taken)
    # the If keeps its own time only: its spans minus its branches'
    if_dur = 1000 * sum(e["dur"] for e in plain if e["name"] == "/gate/If_kernel_time")
    assert int(ops.loc["/gate/If", "total_ns"]) == if_dur - branch
    # the branch nodes have the layers of their own scopes (the importer's Origin records:
    # /gate/then/ reads gate.then.weight), the If its own
    model = tk.load(GATE)
    recorded = {x for g in model.subgraphs for op in g.ops for oid in op.origins
                for x in model.origin(oid).layers}
    layers = att.by_layer().set_index("layer")
    assert set(layers.index) == recorded == {"pre.fc", "pre.act", "gate", "gate.then",
                                             "gate.else", "post.fc"}
    body = att.by_source_op().set_index("name")
    assert body.loc["/gate/then/Relu", "layers"] == "gate.then"
    assert body.loc["/gate/If", "layers"] == "gate"
    assert layers.loc["gate.then", "total_ns"] > 0 and layers.loc["gate.else", "total_ns"] > 0


def test_if_options_mean_what_they_mean_for_every_trace() -> None:
    att = tk.trace_join(PROFILE, GATE)
    warm = tk.trace_join(PROFILE, GATE, skip_runs=1)
    warm.check()
    assert warm.runs == att.runs - 1 == len(MANIFEST["branches"]["gate.disable.prof.json.gz"]) - 1
    assert warm.total_ns == att.total_ns - _kernel_exclusive_per_run(_plain(PROFILE))[0]
    # overlaps="keep" counts every span whole: the branch time twice, as ORT reports it
    keep = tk.trace_join(PROFILE, GATE, overlaps="keep")
    keep.check()
    assert keep.total_ns > att.total_ns
    # the optimized graph ORT saved at ORT_ENABLE_ALL, and its profile
    opt = tk.trace_join(D / "gate.all.prof.json.gz", GATE, optimized=D / "gate.all.opt.onnx")
    opt.check()
    assert opt.attributed_ns == opt.total_ns == sum(
        _kernel_exclusive_per_run(_plain(D / "gate.all.prof.json.gz")))


def test_if_strict_false_gives_a_partial_answer_with_reasons(tmp_path: Path) -> None:
    """Nodes the model does not have: refused with strict, attributed in part without."""
    plain = _plain(PROFILE)
    renamed = 0
    for e in plain:
        if e["cat"] == "Node" and e["name"].startswith(("/pre/", "/post/", "/gate/Reduce",
                                                        "/gate/Greater")):
            e["name"] = "/other" + e["name"]
            renamed += e["name"].endswith("_kernel_time")
    path = tmp_path / "prof.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in plain) + "\n]\n")
    with pytest.raises(ToolkitError, match="strict=False"):
        tk.trace_join(path, GATE)
    att = tk.trace_join(path, GATE, strict=False)
    att.check()
    un = att.unattributed()
    assert len(un) == renamed > 0
    assert set(un["reason"].astype(str)) == {"unknown name"}
    assert un["name"].astype(str).str.startswith("/other/").all()
    # what matches is attributed: the If and its branches, to the If's and the branches'
    layers = att.by_layer().set_index("layer")
    gate = layers.loc[["gate", "gate.then", "gate.else"], "total_ns"]
    assert int(gate.sum()) == att.attributed_ns > 0 and (gate > 0).all()
    assert att.attributed_ns + att.unattributed_ns == att.total_ns
    assert 0 < att.match_score < 0.5


def test_command_line_joins_an_if_with_no_strict(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    csv = tmp_path / "layers.csv"
    assert main(["trace-join", str(PROFILE), "--model", str(GATE), "--skip-runs", "1",
                 "--no-strict", "--csv", str(csv)]) == 0
    table = pd.read_csv(csv, keep_default_na=False)
    want = tk.trace_join(PROFILE, GATE, policy="equal", skip_runs=1).by_layer()
    assert table["total_ns"].tolist() == want["total_ns"].tolist()
    assert "3 run(s)" in capsys.readouterr().out


# ------------------------------------------------------------------------ every source
@functools.cache
def _compiled_and_runs() -> tuple[object, object, list[object]]:
    """One compiled model, one traced run of it and a fleet of two, recorded once: both
    joins of a test (with and without skip_runs) see the same events."""
    compiled = tk.compile(tk.load(SAMPLES / "cnn.tflite"))
    trace = tk.run(compiled, trace=True, repeat=3).trace
    fleet = [tk.run(compiled, trace=True, repeat=3).trace for _ in range(2)]
    return compiled, trace, fleet


def _own(skip: int) -> tk.LayerAttribution:
    compiled, trace, _ = _compiled_and_runs()
    return tk.trace_join(trace, compiled, skip_runs=skip)


def _executorch(skip: int) -> tk.LayerAttribution:
    return tk.trace_join(tk.read_trace(EX / "cnn_xnnpack.etdp"), EX / "cnn_xnnpack.etrecord.bin",
                         skip_runs=skip)


def _ort(skip: int) -> tk.LayerAttribution:
    return tk.trace_join(D / "cnn.ts.all.opt.prof.json.gz", D / "cnn.ts.onnx",
                         optimized=D / "cnn.ts.all.opt.onnx", skip_runs=skip)


def _fleet(skip: int) -> tk.LayerAttribution:
    compiled, _, traces = _compiled_and_runs()
    return tk.trace_join_many(traces, compiled, workers=0, runs="per-partition",
                              skip_runs=skip)


@pytest.mark.parametrize("make", [_own, _executorch, _ort, _fleet],
                         ids=["toolkit", "executorch", "onnxruntime", "fleet"])
def test_every_source_has_the_same_leading_columns_and_options(make) -> None:
    att = make(0)
    att.check()
    n = len(LAYER_COLUMNS)
    assert tuple(att.by_layer().columns[:n]) == LAYER_COLUMNS
    assert tuple(att.by_op().columns[:len(OP_COLUMNS)]) == OP_COLUMNS
    assert tuple(att.overhead().columns[:len(OVERHEAD_COLUMNS)]) == OVERHEAD_COLUMNS
    assert set(SUMMARY_KEYS) <= set(att.summary())
    if not isinstance(att, FleetAttribution):  # a fleet keeps one row per reason
        assert tuple(att.unattributed().columns) == UNATTRIBUTED_EVENT_COLUMNS
    # skip_runs=1 drops one run per session (a fleet: per partition)
    warm = make(1)
    warm.check()
    sessions = int(att.summary().get("partitions", 1))
    assert warm.runs == att.runs - sessions
    assert warm.summary()["skipped_runs"] == sessions
    assert warm.total_ns < att.total_ns
    assert np.isfinite(warm.match_score)
