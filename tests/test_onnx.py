"""ONNX models and ONNX Runtime profiles: layers, profile reading, the exact group mapping and
the attribution of kernel time, on fixtures made by ``sample_models/onnx/make_fixtures.py``
(real exports by torch 2.13 and real ORT 1.32 profiles; these tests need neither torch nor
ORT, except the last one, which runs ORT when it is installed)."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from support import SAMPLES

from toolkit.errors import ModelFormatError, ToolkitError
from toolkit.importers.onnx import load_onnx, scope_layers
from toolkit.layer_names import NO_LAYER
from toolkit.trace.readers.ort.attribution import group_mapping, join_ort
from toolkit.trace.readers.ort.profile import OUTSIDE_RUN_TRUNCATED, read_ort_profile
from toolkit.trace.readers.read import read_trace

D = SAMPLES / "onnx"
MODELS = ("cnn", "transformer", "mlp", "lstm")
EXPORTERS = ("ts", "dynamo")
LEVELS = ("disable", "basic", "extended", "all")
CASES = [(m, e) for m in MODELS for e in EXPORTERS]
PROFILES = sorted(D.glob("*.prof.json.gz"))
_MODEL_CACHE: dict[Path, object] = {}


def _load(path: Path):
    if path not in _MODEL_CACHE:
        _MODEL_CACHE[path] = load_onnx(path)
    return _MODEL_CACHE[path]


def _plain(path: Path) -> list[dict]:
    with gzip.open(path, "rb") as f:
        return json.load(f)


# ------------------------------------------------------------------------------------ models


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_every_node_has_a_layer(name: str, exporter: str) -> None:
    model = _load(D / f"{name}.{exporter}.onnx")
    proto = onnx.load(str(D / f"{name}.{exporter}.onnx"))
    ops = sorted(model.graph.ops, key=lambda o: o.extra["node_index"])
    assert [o.type for o in ops] == [n.op_type for n in proto.graph.node]
    assert [o.extra["node_name"] for o in ops] == [n.name for n in proto.graph.node]
    assert model.extra["nodes_without_layer"] == []
    for op in ops:
        assert op.extra["layer_from"] in ("scope", "name_scopes", "consumers", "producers",
                                          "tensors")
        layer = op.extra["layer"]
        if op.extra["layer_from"] == "scope":  # the module path is in the node name
            assert op.extra["node_name"].startswith("/" + layer.split(".")[0]) or layer == ""
    layers = {o.extra["layer"] for o in ops if o.type != "Constant"}
    expected = {
        "mlp": {"fc1", "act1", "fc2", "act2", "out"},
        "lstm": {"lstm", "head", ""},
    }
    if name in expected:
        assert layers == expected[name]
    assert model.format == "onnx"
    assert "layer" in model.ops_table().columns


def test_torchscript_layers_fold_repeated_calls() -> None:
    model = _load(D / "cnn.ts.onnx")
    layer = {o.extra["node_name"]: o.extra["layer"] for o in model.graph.ops}
    assert layer["/layer1/layer1.0/conv1/Conv"] == "layer1.0.conv1"
    assert layer["/layer1/layer1.0/relu/Relu"] == "layer1.0.relu"
    assert layer["/layer1/layer1.0/relu_1/Relu"] == "layer1.0.relu"  # second call of relu
    assert layer["/layer1/layer1.0/Add"] == "layer1.0"
    assert layer["/Flatten"] == ""
    # the exporter folded each BatchNorm into its Conv's weights
    conv = next(o for o in model.graph.ops if o.extra["node_name"] == "/stem/conv/Conv")
    assert "computed by the exporter" in conv.extra["exporter_fused"]
    relu = next(o for o in model.graph.ops if o.extra["node_name"] == "/stem/relu/Relu")
    assert relu.extra["exporter_fused"] == ""
    modules = {m["module"]: m["reason"] for m in model.extra["modules_without_nodes"]}
    assert modules["layer1"].startswith("container")


def test_scope_layers_rules() -> None:
    names = ["/a/relu/Relu", "/a/relu_1/Relu", "/block_1/Conv", "/b/b.0/c/Conv", "Identity_3",
             "/Add"]
    assert scope_layers(names) == ["a.relu", "a.relu", "block_1", "b.0.c", None, ""]


def test_dynamo_layers_and_exporter_fusion() -> None:
    model = _load(D / "cnn.dynamo.onnx")
    by_name = {o.extra["node_name"]: o for o in model.graph.ops}
    conv = by_name["node_Conv_50"]
    # the dynamo optimizer folded bn1 into conv1's node and gave it bn1's metadata: the node
    # is conv1's (its parameters) then bn1's
    assert model.origin(next(iter(conv.origins))).layers == ("layer1.0.conv1", "layer1.0.bn1")
    assert conv.extra["layer"] == "layer1.0.conv1"
    assert "BatchNorm2d" in conv.extra["exporter_fused"]
    assert by_name["node_relu_2"].extra["layer"] == "layer1.0.relu"
    assert by_name["node_view"].extra["layer"] == ""
    modules = {m["module"]: m["reason"] for m in model.extra["modules_without_nodes"]}
    assert "layer1.0.conv1" not in modules and "layer1.0.bn1" not in modules
    # nodes without metadata take their readers' layer
    t = _load(D / "transformer.dynamo.onnx")
    split = next(o for o in t.graph.ops if o.extra["node_name"] == "node_Split_69")
    assert split.extra["layer_from"] == "consumers"
    assert split.extra["layer"] == "blocks.0"


def test_external_data_and_initializers() -> None:
    inline = _load(D / "mlp.ts.onnx")
    ext = load_onnx(D / "mlp.ts.ext.onnx")
    rows = ext.extra["external_data"]
    assert len(rows) == len([t for t in inline.graph.tensors if t.is_const])
    assert {r["location"] for r in rows} == {"mlp.ts.ext.onnx.data"}
    for t in inline.graph.tensors:
        if t.is_const:
            other = ext.graph.tensor(t.name)
            assert np.array_equal(other.data, t.data)
            assert other.extra["external_data"]["length"] == t.data.nbytes


def test_missing_or_escaping_external_data_is_refused(tmp_path: Path) -> None:
    shutil.copy(D / "mlp.ts.ext.onnx", tmp_path / "m.onnx")
    with pytest.raises(ModelFormatError, match="not found"):
        load_onnx(tmp_path / "m.onnx")
    proto = onnx.load(str(D / "mlp.ts.ext.onnx"), load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../outside.data"
    (tmp_path / "e.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(ModelFormatError, match="leaves the model's folder"):
        load_onnx(tmp_path / "e.onnx")


def test_subgraphs_are_listed() -> None:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="/then/Relu")],
                             "then", [], [helper.make_tensor_value_info(
                                 "t", onnx.TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="/else/Neg")],
                              "else", [], [helper.make_tensor_value_info(
                                  "e", onnx.TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], name="/if/If", then_branch=then,
                            else_branch=other)
    graph = helper.make_graph([node], "g", [x, c], [y])
    model = load_onnx(helper.make_model(graph).SerializeToString())
    assert len(model.subgraphs) == 3
    op = model.graph.ops[0]
    subs = op.extra["subgraphs"]
    assert sorted(subs) == ["else_branch", "then_branch"]
    assert sorted(subs.values()) == [1, 2]
    then_graph = model.subgraphs[subs["then_branch"]]
    assert [o.type for o in then_graph.ops] == ["Relu"]
    assert then_graph.extra["outer_scope"] == ["x"]
    assert [o.type for o in model.subgraphs[subs["else_branch"]].ops] == ["Neg"]


# ---------------------------------------------------------------------------------- profiles


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name.split(".prof")[0])
def test_profile_matches_a_plain_json_reading(path: Path) -> None:
    plain = _plain(path)
    trace = read_ort_profile(path)
    kernels = [(i, e) for i, e in enumerate(plain)
               if e["cat"] == "Node" and e["name"].endswith("_kernel_time")]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in plain
                   if e["cat"] == "Session" and e["name"] == "model_run")
    ev = trace.events
    assert len(ev) == len(kernels)
    assert ev["event_id"].tolist() == [i for i, _ in kernels]
    assert ev["name"].astype(str).tolist() == [e["name"][: -len("_kernel_time")]
                                               for _, e in kernels]
    assert ev["op"].astype(str).tolist() == [e["args"]["op_name"] for _, e in kernels]
    assert ev["node_index"].tolist() == [int(e["args"]["node_index"]) for _, e in kernels]
    assert ev["dur_ns"].tolist() == [e["dur"] * 1000 for _, e in kernels]
    assert ev["start_ns"].tolist() == [e["ts"] * 1000 for _, e in kernels]
    assert int(ev["dur_ns"].sum()) == 1000 * sum(e["dur"] for _, e in kernels)
    runs = [next(k for k, (a, b) in enumerate(spans) if a <= e["ts"] and e["ts"] + e["dur"] <= b)
            for _, e in kernels]
    assert ev["run"].tolist() == runs
    assert trace.runs == len(spans) == 4
    assert trace.meta["runs"]["kernel_events"].tolist() == [runs.count(k) for k in range(4)]
    assert len(trace.meta["session"]) == sum(1 for e in plain if e["cat"] == "Session") - 4
    assert not trace.meta["truncated"]
    assert set(ev["problem"].astype(str)) == {""}
    assert trace.meta["json_blocks"] == 0  # ORT's own layout is read by the typed decoder


def test_read_trace_detects_ort_layout() -> None:
    path = D / "cnn.ts.all.prof.json.gz"
    trace = read_trace(path)
    assert trace.meta["format"] == "ort"
    assert trace.runs == 4
    assert len(trace) == 52
    assert "_kernel_time" not in "".join(trace.events["name"].astype(str))


def test_other_layouts_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.formats.ort_profile as fmt

    monkeypatch.setattr(fmt, "_BLOCK", 4096)  # many blocks, cut anywhere
    path = D / "transformer.dynamo.all.prof.json.gz"
    plain = _plain(path)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(plain, indent=2))
    floats = tmp_path / "floats.json"  # numbers as floats / ints: not the typed layout
    for e in plain:
        e["dur"] = float(e["dur"])
        if "node_index" in e["args"]:
            e["args"]["node_index"] = int(e["args"]["node_index"])
    floats.write_text("[\n" + ",\n".join(json.dumps(e) for e in plain) + "\n]\n")
    base = read_ort_profile(path).events
    for other in (pretty, floats):
        trace = read_trace(other)  # found by content, however the JSON is spaced
        assert trace.meta["format"] == "ort"
        if other is floats:  # floats do not fit the types: every block read by json
            assert trace.meta["json_blocks"] > 1 and trace.meta["fast_blocks"] == 0
        else:  # events spanning lines: the whole file decoded at once
            assert trace.meta["json_blocks"] + trace.meta["fast_blocks"] == 1
        for column in ("event_id", "run", "start_ns", "dur_ns", "node_index", "tid"):
            assert trace.events[column].tolist() == base[column].tolist(), column
        for column in ("name", "op", "provider", "input_shapes", "output_shapes"):
            assert trace.events[column].astype(str).tolist() == \
                base[column].astype(str).tolist()


def test_truncated_profile_is_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _plain(D / "mlp.ts.disable.prof.json.gz")
    cut = plain[:-1]  # the last model_run span is lost, as when ORT hits its cap
    path = tmp_path / "cut.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in cut) + "\n]\n")
    import toolkit.trace.readers.ort.profile as ort_module

    monkeypatch.setattr(ort_module, "ORT_EVENT_CAP", len(cut))
    trace = read_ort_profile(path)
    assert trace.meta["truncated"]
    late = trace.events[trace.events["run"] < 0]
    assert len(late) == 5
    assert trace.runs == 3  # the fourth run's span was cut
    assert set(late["problem"].astype(str)) == {OUTSIDE_RUN_TRUNCATED}
    att = join_ort(trace, _load(D / "mlp.ts.onnx"))
    att.check()
    assert int(att.unattributed()["dur_ns"].sum()) == int(late["dur_ns"].sum())


# ------------------------------------------------------------------------------------ groups


def _reference_groups(original: Path, optimized: Path) -> tuple[dict[int, set[int]], int]:
    """The method written out on the raw protos: optimized node -> original node positions
    of its group (Constant nodes not walked), and the number of groups."""
    g0, g1 = onnx.load(str(original)).graph, onnx.load(str(optimized)).graph

    def names(g: onnx.GraphProto) -> set[str]:
        out = {v.name for v in g.input} | {v.name for v in g.output}
        out |= {t.name for t in g.initializer}
        for n in g.node:
            out |= {x for x in n.input if x} | {x for x in n.output if x}
        return out

    shared = names(g0) & names(g1)
    inits1 = {t.name for t in g1.initializer}
    prod0 = {o: j for j, n in enumerate(g0.node) for o in n.output if o}
    stop = shared - (inits1 & set(prod0))
    prod1 = {o: i for i, n in enumerate(g1.node) for o in n.output if o}
    parent = list(range(len(g1.node)))

    def find(a: int) -> int:
        while parent[a] != a:
            a = parent[a]
        return a

    for i, n in enumerate(g1.node):
        for x in n.input:
            if x and x not in shared and x in prod1:
                parent[find(i)] = find(prod1[x])
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(g1.node)):
        groups[find(i)].append(i)
    out: dict[int, set[int]] = {}
    for nodes in groups.values():
        seen: set[int] = set()
        stack = [prod0[o] for i in nodes for o in g1.node[i].output if o in shared and o in prod0]
        while stack:
            j = stack.pop()
            if j in seen or g0.node[j].op_type == "Constant":
                continue
            seen.add(j)
            stack += [prod0[x] for x in g0.node[j].input if x and x not in stop and x in prod0]
        for i in nodes:
            out[i] = seen
    return out, len(groups)


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_groups_at_every_level(name: str, exporter: str) -> None:
    original = D / f"{name}.{exporter}.onnx"
    model = _load(original)
    for level in LEVELS:
        optimized = D / f"{name}.{exporter}.{level}.opt.onnx"
        mapping = group_mapping(model, _load(optimized))
        reference, count = _reference_groups(original, optimized)
        assert len(mapping.groups) == count
        for i in range(len(mapping.optimized)):
            assert set(mapping.members[int(mapping.group_of[i])]) == reference[i]
        # every original node exactly once, but Constant nodes (ORT never runs them)
        for j, op in enumerate(mapping.original):
            if op.type == "Constant":
                assert mapping.owners[j] == []
                assert mapping.unmapped[j].startswith("Constant")
            else:
                assert len(mapping.owners[j]) == 1, (level, op)
        # the second tier gives every original node of a group to one of its nodes' owners
        for g, nodes in enumerate(mapping.groups):
            owned = set().union(*(mapping.owned[i] for i in nodes))
            assert owned == set(mapping.members[g])
        if level == "disable":
            assert all(len(m) == 1 for m in mapping.members if m)


def test_fused_conv_owns_its_conv_add_and_activation() -> None:
    att = join_ort(D / "cnn.ts.all.opt.prof.json.gz", _load(D / "cnn.ts.onnx"),
                   _load(D / "cnn.ts.all.opt.onnx"))
    origins = att.origins().set_index("name")
    fused = origins.loc["/layer1/layer1.0/conv2/Conv_output_0_nchwc"]
    assert fused["op"] == "Conv"
    assert fused["owned"] == ("/layer1/layer1.0/conv2/Conv", "/layer1/layer1.0/Add",
                              "/layer1/layer1.0/relu_1/Relu")
    assert origins.loc["ReorderOutput_token_15", "owned"] == fused["owned"]
    assert origins.loc["/stem/relu/Relu_output_0_nchwc", "owned"] == (
        "/stem/conv/Conv", "/stem/relu/Relu")
    assert origins.loc["/fc/Gemm", "fused"] == np.False_
    t = join_ort(D / "transformer.ts.all.opt.prof.json.gz", _load(D / "transformer.ts.onnx"),
                 _load(D / "transformer.ts.all.opt.onnx"))
    gelu = t.origins().set_index("name").loc["Gelu"]
    assert gelu["original_ops"] == ("Div", "Erf", "Add", "Mul", "Mul")
    assert gelu["layers"] == ("blocks.0.act",)


# ------------------------------------------------------------------------------- attribution


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_attribution_at_every_level(name: str, exporter: str) -> None:
    model = _load(D / f"{name}.{exporter}.onnx")
    # the rows are the importer's Origin records' layers (a Conv with its folded norm has
    # both); the nodes of the top module share the one "(no layer)" row
    def rows(o: object) -> set[str]:
        return {x for oid in o.origins for x in model.origin(oid).layers} or {NO_LAYER}

    compute_layers = set().union(*(rows(o) for o in model.graph.ops if o.type != "Constant"))
    all_layers = set().union(*(rows(o) for o in model.graph.ops))
    for level in LEVELS:
        optimized = _load(D / f"{name}.{exporter}.{level}.opt.onnx")
        for suffix in ("prof", "opt.prof"):
            path = D / f"{name}.{exporter}.{level}.{suffix}.json.gz"
            plain = _plain(path)
            kernel_us = sum(e["dur"] for e in plain if e["name"].endswith("_kernel_time"))
            for policy in ("equal", "macs"):
                att = join_ort(path, model, optimized, policy=policy)
                att.check()
                assert att.total_ns == att.attributed_ns == 1000 * kernel_us
                assert len(att.unattributed()) == 0
                if suffix == "opt.prof" or level == "disable":
                    assert att.index_exact  # node_index is the position in the saved file
                layers = att.by_layer()
                assert set(layers["layer"]) == all_layers  # every layer has a row
                assert set(layers.loc[layers["events"] > 0, "layer"]) == compute_layers
                by_op = att.by_op()
                assert int(by_op["total_ns"].sum()) == att.attributed_ns
            if level in ("disable", "all"):
                # every layer that owns a compute node (all but Constant) gets time
                eq = join_ort(path, model, optimized).by_layer()
                eq = eq[eq["layer"].isin(compute_layers)]
                assert len(eq) == len(compute_layers)
                assert (eq["total_ns"] > 0).all(), eq[eq["total_ns"] == 0]


def test_profile_of_the_model_itself_at_disable() -> None:
    model = _load(D / "cnn.dynamo.onnx")
    att = join_ort(D / "cnn.dynamo.disable.prof.json.gz", model)
    att.check()
    assert att.index_exact
    assert att.attributed_ns == att.total_ns
    by_node = att.by_node()
    assert (by_node["total_ns"] > 0).sum() >= 12


def test_unnamed_nodes_placed_by_index_only_in_the_optimized_profile(tmp_path: Path) -> None:
    opt = onnx.load(str(D / "mlp.ts.all.opt.onnx"))
    opt.graph.node[1].name = ""  # a node saved without a name
    (tmp_path / "opt.onnx").write_bytes(opt.SerializeToString())
    plain = _plain(D / "mlp.ts.all.opt.prof.json.gz")
    target = opt.graph.node[1].op_type
    for e in plain:
        if e["cat"] == "Node" and e["args"].get("node_index") == "1":
            e["name"] = f"{target}_1_kernel_time"
    path = tmp_path / "prof.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in plain) + "\n]\n")
    model = _load(D / "mlp.ts.onnx")
    att = join_ort(path, model, tmp_path / "opt.onnx")
    att.check()
    assert att.index_exact and att.attributed_ns == att.total_ns
    # the same events in a profile whose indices are not positions in the file
    for e in plain:
        if e["cat"] == "Node":
            e["args"]["node_index"] = str(int(e["args"]["node_index"]) + 7)
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in plain) + "\n]\n")
    att = join_ort(path, model, tmp_path / "opt.onnx")
    att.check()
    assert not att.index_exact
    reasons = set(att.unattributed()["reason"].astype(str))
    assert reasons == {"a node ORT created without a name cannot be placed by index here: "
                       "profile the saved optimized model at ORT_DISABLE_ALL"}
    assert len(att.unattributed()) == 4


@pytest.mark.parametrize(("model", "optimized"), [
    ("cnn.ts.onnx", "transformer.ts.all.opt.onnx"),
    ("mlp.ts.onnx", "mlp.dynamo.all.opt.onnx"),
    ("cnn.ts.onnx", "cnn.dynamo.extended.opt.onnx"),
])
def test_mismatched_pair_is_refused(model: str, optimized: str) -> None:
    with pytest.raises(ToolkitError, match="optimized_model_filepath"):
        group_mapping(_load(D / model), _load(D / optimized))


def test_tampered_optimized_graph_is_refused(tmp_path: Path) -> None:
    opt = onnx.load(str(D / "mlp.ts.basic.opt.onnx"))
    init = opt.graph.initializer[0]
    arr = onnx.numpy_helper.to_array(init).copy()
    arr.flat[0] += 1
    init.CopyFrom(onnx.numpy_helper.from_array(arr, init.name))
    (tmp_path / "t.onnx").write_bytes(opt.SerializeToString())
    with pytest.raises(ToolkitError, match="holds other values"):
        join_ort(D / "mlp.ts.basic.prof.json.gz", _load(D / "mlp.ts.onnx"), tmp_path / "t.onnx")


def test_foreign_profile_is_refused() -> None:
    with pytest.raises(ToolkitError, match="not in the graph"):
        join_ort(D / "transformer.ts.disable.prof.json.gz", _load(D / "cnn.ts.onnx"))
    with pytest.raises(ToolkitError, match="optimized="):
        join_ort(D / "cnn.ts.all.prof.json.gz", _load(D / "cnn.ts.onnx"))
    with pytest.raises(ToolkitError, match="not an ORT profile"):
        join_ort(_chrome_trace(), _load(D / "mlp.ts.onnx"))


def _chrome_trace():
    import pandas as pd

    return read_trace(pd.DataFrame({"name": ["a"], "start_ns": [0], "dur_ns": [5]}))


# ------------------------------------------------------------------------------------- fuzz


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        kind = rng.random()
        i = rng.randrange(len(b)) if b else 0
        if kind < 0.5 and b:
            b[i] = rng.randrange(256)
        elif kind < 0.7:
            del b[i: i + rng.randint(1, 64)]
        elif kind < 0.85:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def test_fuzzed_profiles_raise_only_toolkit_errors(tmp_path: Path) -> None:
    with gzip.open(D / "mlp.ts.all.opt.prof.json.gz", "rb") as f:
        data = f.read()
    model, opt = _load(D / "mlp.ts.onnx"), _load(D / "mlp.ts.all.opt.onnx")
    rng = random.Random(21)
    ok = 0
    for k in range(150):
        path = tmp_path / f"p{k % 3}.json"
        path.write_bytes(_mutate(data, rng))
        try:
            att = join_ort(path, model, opt)
            att.check()
            ok += 1
        except ToolkitError:
            pass
    assert ok > 0  # some mutations keep a readable profile


def test_fuzzed_onnx_files_raise_only_toolkit_errors(tmp_path: Path) -> None:
    rng = random.Random(7)
    loaded = 0
    for name in ("mlp.ts.onnx", "cnn.dynamo.all.opt.onnx", "lstm.ts.onnx"):
        data = (D / name).read_bytes()
        for k in range(60):
            path = tmp_path / f"m{k % 2}.onnx"
            path.write_bytes(_mutate(data, rng))
            try:
                load_onnx(path)
                loaded += 1
            except ToolkitError:
                pass
    assert loaded > 0


# --------------------------------------------------------------------------- onnxruntime


def test_onnxruntime_profile_end_to_end(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    import warnings

    from toolkit.runtime.onnxruntime import run_onnxruntime

    inputs = np.load(D / "inputs.npz")
    model = _load(D / "cnn.ts.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's overhead on a tiny model
        r = run_onnxruntime(model, {"input": inputs["cnn"]}, optimization="all", repeat=3,
                            warmup=1, workdir=tmp_path)
    assert r.optimized_path.is_file() and r.profile_path is not None
    assert list(r.timings.columns) == ["run", "unprofiled_ns", "profiled_ns", "kernel_ns"]
    assert len(r.timings) == 3 and (r.timings[["unprofiled_ns", "profiled_ns",
                                                "kernel_ns"]] > 0).all().all()
    plain = ort.InferenceSession(str(D / "cnn.ts.onnx"), providers=["CPUExecutionProvider"])
    want = plain.run(None, {"input": inputs["cnn"]})[0]
    assert np.allclose(r.outputs["output"], want, atol=1e-5)
    att = join_ort(r.profile_path, model, r.optimized_path)
    att.check()
    assert att.index_exact
    assert att.runs == 4
    assert att.attributed_ns == att.total_ns > 0
    per_run = att.trace.meta["runs"]["kernel_ns"].tolist()
    assert per_run[1:] == r.timings["kernel_ns"].tolist()
    assert set(att.by_layer()["layer"]) >= {"stem.conv", "layer1.0.conv2", "fc"}
    with pytest.raises(ToolkitError, match="unknown optimization"):
        run_onnxruntime(model, optimization="max")


def test_command_line_trace_join(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from toolkit.cli import main

    csv = tmp_path / "layers.csv"
    code = main(["trace-join", str(D / "cnn.ts.all.opt.prof.json.gz"), "--model",
                 str(D / "cnn.ts.onnx"), "--optimized", str(D / "cnn.ts.all.opt.onnx"),
                 "--by", "layer", "--csv", str(csv)])
    out = capsys.readouterr().out
    assert code == 0
    assert "attributed 429000 of 429000 ns (100.0%)" in out
    import pandas as pd

    table = pd.read_csv(csv, keep_default_na=False)
    assert int(table["total_ns"].sum()) == 429000
    assert "layer1.0.conv2" in set(table["layer"])
    code = main(["trace-join", str(D / "cnn.ts.all.prof.json.gz"), "--model",
                 str(D / "cnn.ts.onnx")])
    assert code == 2
    assert "optimized=" in capsys.readouterr().err


def test_threaded_profile_stays_on_the_typed_reader(tmp_path: Path) -> None:
    # with several intra-op threads ORT writes thread_scheduling_stats as an object
    with gzip.open(D / "cnn.ts.all.prof.json.gz") as f:
        raw = f.read().decode()
    stats = '{"main_thread": {"thread_pool_name": "session-1-intra-op", "thread_id": "7", ' \
            '"block_size": 1, "dispatch": 3, "sub_threads": {"8": {"core": -1, "num_run": 1}}}}'
    threaded = raw.replace('"thread_scheduling_stats" : ""', f'"thread_scheduling_stats" : {stats}')
    assert threaded != raw
    path = tmp_path / "threads.json"
    path.write_text(threaded)
    trace = read_trace(path)
    assert trace.meta["json_blocks"] == 0
    base = read_ort_profile(D / "cnn.ts.all.prof.json.gz")
    assert trace.events["dur_ns"].tolist() == base.events["dur_ns"].tolist()
    assert trace.events["name"].astype(str).tolist() == base.events["name"].astype(str).tolist()


def test_fences_and_other_events_are_kept_apart(tmp_path: Path) -> None:
    plain = _plain(D / "mlp.ts.disable.prof.json.gz")
    kernel = next(e for e in plain if e["name"].endswith("_kernel_time"))
    node = kernel["name"][: -len("_kernel_time")]
    fences = [dict(kernel, name=f"{node}_fence_before", dur=1, args={}),
              dict(kernel, name=f"{node}_fence_after", dur=2, args={})]
    other = dict(kernel, cat="Api", name="something", args={})
    events = [*fences, other, *plain]
    path = tmp_path / "fenced.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
    trace = read_ort_profile(path)
    base = read_ort_profile(D / "mlp.ts.disable.prof.json.gz")
    assert len(trace.events) == len(base.events)
    assert trace.meta["fences"]["name"].tolist() == [f"{node}_fence_before",
                                                     f"{node}_fence_after"]
    assert trace.meta["fences"]["dur_ns"].tolist() == [1000, 2000]
    assert trace.meta["other_events"] == 1
    assert trace.events["dur_ns"].tolist() == base.events["dur_ns"].tolist()


def test_event_whose_op_differs_from_its_node_is_unattributed(tmp_path: Path) -> None:
    plain = _plain(D / "mlp.ts.all.opt.prof.json.gz")
    changed = 0
    for e in plain:
        if e["cat"] == "Node" and e["args"].get("node_index") == "1":
            e["args"]["op_name"] = "Conv"
            changed += e["dur"] * 1000
    path = tmp_path / "p.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in plain) + "\n]\n")
    att = join_ort(path, _load(D / "mlp.ts.onnx"), _load(D / "mlp.ts.all.opt.onnx"))
    att.check()
    un = att.unattributed()
    assert len(un) == 4
    # the one join's reason names both sides (before: "its op differs from its node's op")
    assert set(un["reason"].astype(str)) == {
        "trace event names Conv, model op 1 is FusedGemm 'fused /fc2/Gemm'"}
    assert att.unattributed_ns == changed


def test_reader_without_msgspec_gives_the_same_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.formats.ort_profile as fmt

    path = D / "transformer.dynamo.extended.prof.json.gz"
    fast = read_ort_profile(path)
    monkeypatch.setattr(fmt, "_decoder", lambda: None)
    slow = read_ort_profile(path)
    assert fast.meta["json_blocks"] == 0 and slow.meta["json_blocks"] == 1
    for column in fast.events.columns:
        a, b = fast.events[column], slow.events[column]
        if a.dtype == object or str(a.dtype) == "category":
            assert a.astype(str).tolist() == b.astype(str).tolist(), column
        else:
            assert a.tolist() == b.tolist(), column
    assert fast.meta["runs"].equals(slow.meta["runs"])


def test_compute_policy_weighs_the_conv_of_a_fused_group() -> None:
    args = (D / "cnn.ts.all.opt.prof.json.gz", _load(D / "cnn.ts.onnx"),
            _load(D / "cnn.ts.all.opt.onnx"))
    equal = join_ort(*args).by_node().set_index("name")["total_ns"]
    compute = join_ort(*args, policy="macs").by_node().set_index("name")["total_ns"]
    owned = ["/layer1/layer1.0/conv2/Conv", "/layer1/layer1.0/Add",
             "/layer1/layer1.0/relu_1/Relu"]
    # the same 8 events (a Conv and its ReorderOutput, 4 runs), split 1:1:1 or 8:1:1; the
    # largest-remainder rule moves less than 1 ns per event from the exact proportion
    assert int(equal[owned].sum()) == int(compute[owned].sum())
    assert abs(int(equal[owned[0]]) - int(equal[owned[1]])) <= 8
    total = int(compute[owned].sum())
    assert abs(int(compute[owned[0]]) - total * 8 // 10) <= 8
    assert abs(int(compute[owned[1]]) - total // 10) <= 8


def test_out_of_range_times_are_flagged_not_wrapped(tmp_path: Path) -> None:
    plain = _plain(D / "mlp.ts.disable.prof.json.gz")
    k = next(i for i, e in enumerate(plain) if e["name"].endswith("_kernel_time"))
    plain[k]["dur"] = 2**63 + 5
    path = tmp_path / "big.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in plain) + "\n]\n")
    trace = read_ort_profile(path)
    bad = trace.events[trace.events["problem"].astype(str) != ""]
    assert bad["event_id"].tolist() == [k]
    assert bad["dur_ns"].tolist() == [0]
    att = join_ort(trace, _load(D / "mlp.ts.onnx"))
    att.check()
    assert att.unattributed()["event_id"].tolist() == [k]


def test_external_data_from_bytes_needs_a_folder() -> None:
    from toolkit.formats.onnx_model import read_onnx

    data = (D / "mlp.ts.ext.onnx").read_bytes()
    with pytest.raises(ModelFormatError, match="external file"):
        load_onnx(data)
    model = read_onnx(data, base_dir=D)
    assert len(model.external_data()) == 6


def test_run_with_onnxruntime_through_the_front_door(tmp_path: Path) -> None:
    """tk.run(..., runtime="onnxruntime") returns the one RunResult; its trace is a Trace, as
    for every runtime (before: the OrtRun), with ORT's extras as attributes, and joins as it
    is, through the saved optimized graph, with all kernel time attributed."""
    pytest.importorskip("onnxruntime")
    import warnings

    import toolkit as tk

    inputs = np.load(D / "inputs.npz")
    path = D / "cnn.ts.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's overhead on a tiny model
        outputs, trace = tk.run(path, {"input": inputs["cnn"]}, runtime="onnxruntime",
                                optimization="extended", trace=True, repeat=2, warmup=1)
        plain = tk.run(path, {"input": inputs["cnn"]}, runtime="onnxruntime", repeat=1)
    assert plain.trace is None and "not traced" in repr(plain)
    assert "ONNX Runtime profile" in repr(tk.RunResult(outputs, trace))
    np.testing.assert_allclose(outputs["output"], plain.outputs["output"], atol=1e-5)
    assert isinstance(trace, tk.Trace) and trace.meta["format"] == "ort"
    assert trace.runtime.optimization == "extended" and trace.runtime.profile_path is not None
    assert trace.optimized_path == trace.runtime.optimized_path
    assert (trace.timings["profiled_ns"] > 0).all() and (trace.timings["unprofiled_ns"] > 0).all()
    att = tk.trace_join(trace, path)
    att.check()
    assert att.attributed_ns == att.total_ns > 0
    assert att.runs == 3
    assert {"stem.conv", "fc"} <= set(att.by_layer()["layer"])
    same = tk.join_ort(trace, path)
    assert same.attributed_ns == att.attributed_ns
    with pytest.raises(ToolkitError, match="unknown runtime"):
        tk.run(path, runtime="ort")
    with pytest.raises(ToolkitError, match="optimization level"):
        tk.run(SAMPLES / "cnn.tflite", optimization="basic")
    with pytest.raises(ToolkitError, match="C\\+\\+ artifact"):
        tk.run(SAMPLES / "cnn.tflite", runtime="native")
