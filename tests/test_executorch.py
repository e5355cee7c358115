"""ExecuTorch ETDump / ETRecord / .pte readers and layer attribution, on files written by
ExecuTorch 1.5.1 (``sample_models/executorch/make_fixtures.py``); no torch needed."""

from __future__ import annotations

import base64
import io
import json
import pickle
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import ToolkitError
from toolkit.formats.etdump import read_etdump
from toolkit.formats.etrecord import parse_module_stack, read_etrecord
from toolkit.formats.executorch_program import read_program, read_xnnpack_blob
from toolkit.layer_names import NO_LAYER
from toolkit.trace.readers.executorch._xnnpack import FAMILIES, family
from toolkit.trace.readers.executorch.profile import read_executorch
from toolkit.trace.readers.read import read_trace

DIR = Path(__file__).resolve().parent.parent / "sample_models" / "executorch"
STEMS = sorted(p.name[:-5] for p in DIR.glob("*.etdp"))
XNNPACK = [s for s in STEMS if s.endswith("_xnnpack")]


def files(stem: str) -> tuple[Path, Path, Path]:
    return DIR / f"{stem}.etdp", DIR / f"{stem}.etrecord.bin", DIR / f"{stem}.pte"


def reference(stem: str) -> dict:
    return json.loads((DIR / f"{stem}.etdump.json").read_text())


def test_fixtures_present() -> None:
    assert len(STEMS) == 8 and len(XNNPACK) == 4


# ------------------------------------------------------------------------------- ETDump
@pytest.mark.parametrize("stem", STEMS)
def test_etdump_fields_equal_the_inspectors_decoding(stem: str) -> None:
    dump = read_etdump(files(stem)[0])
    ref = reference(stem)
    assert dump.prefixed
    assert (dump.version or 0) == ref["version"]
    ev = dump.events
    assert [b.name for b in dump.blocks] == [r["name"] for r in ref["run_data"]]
    assert [b.bundled_input_index if b.bundled_input_index is not None else -1
            for b in dump.blocks] == [r["bundled_input_index"] for r in ref["run_data"]]
    assert [b.allocators for b in dump.blocks] == [r["allocators"] or [] for r in ref["run_data"]]
    expected = [e["profile_event"] for r in ref["run_data"] for e in r["events"]]
    assert len(ev) == len(expected) and (ev["kind"] == "profile").all()
    names = ev["name"].astype(object).where(ev["name"].notna(), None).tolist()
    dstr = ev["delegate_debug_id_str"].astype(object)
    dstr = dstr.where(dstr.notna(), None).tolist()
    for i, p in enumerate(expected):
        assert names[i] == p["name"]
        assert int(ev["chain_index"].fillna(0).iloc[i]) == p["chain_index"]
        assert int(ev["instruction_id"].fillna(-1).iloc[i]) == p["instruction_id"]
        assert int(ev["delegate_debug_id_int"].fillna(-1).iloc[i]) == p["delegate_debug_id_int"]
        assert dstr[i] == p["delegate_debug_id_str"]
        meta = ev["delegate_debug_metadata"].iloc[i]
        want = p["delegate_debug_metadata"]
        assert (meta is None and want is None) or meta == base64.b64decode(want["base64"])
        assert int(ev["start_time"].iloc[i]) == p["start_time"]
        assert int(ev["end_time"].iloc[i]) == p["end_time"]
    assert ev["block"].tolist() == [b for b, r in enumerate(ref["run_data"])
                                    for _ in r["events"]]


@pytest.mark.parametrize("stem", STEMS[:2])
def test_unprefixed_framing_reads_the_same(stem: str) -> None:
    data = files(stem)[0].read_bytes()
    prefixed = read_etdump(data)
    plain = read_etdump(data[4:])
    assert not plain.prefixed
    pd.testing.assert_frame_equal(prefixed.events, plain.events)


def test_missing_fields_are_missing_not_defaults() -> None:
    ev = read_etdump(files("cnn_xnnpack")[0]).events
    ops = ev[ev["delegate_debug_id_str"].notna()]
    assert ops["name"].isna().all() and ops["delegate_debug_id_int"].isna().all()
    assert ev["name"].dtype == "category"  # interned


# ------------------------------------------------------------------------------- Inspector
@pytest.mark.parametrize("stem", STEMS)
def test_inspector_table_equals_the_inspectors_csv(stem: str) -> None:
    etdp, etrecord, _ = files(stem)
    ours = read_executorch(etdp, etrecord).inspector_table()
    csv_path = DIR / f"{stem}.inspector.csv"
    buf = io.StringIO()
    ours.to_csv(buf, index=False)
    assert buf.getvalue() == csv_path.read_text()
    theirs = pd.read_csv(csv_path)
    back = pd.read_csv(io.StringIO(buf.getvalue()))
    assert list(ours.columns) == list(theirs.columns)
    for column in theirs.columns:
        a, b = back[column], theirs[column]
        if b.dtype.kind == "f":
            assert ((a == b) | (a.isna() & b.isna())).all(), column
            if column.endswith("(ms)"):
                assert (ours[column].to_numpy(dtype=float) == b.to_numpy()).all(), column
        else:
            assert a.astype(str).tolist() == b.astype(str).tolist(), column


@pytest.mark.parametrize("stem", STEMS)
def test_inspector_module_totals_match_find_total_for_module(stem: str) -> None:
    from toolkit.trace.readers.executorch.inspector import inspector_total_for_module

    etdp, etrecord, _ = files(stem)
    table = read_executorch(etdp, etrecord).inspector_table()
    expected = json.loads((DIR / f"{stem}.inspector_totals.json").read_text())
    for module, total in expected.items():
        assert inspector_total_for_module(table, module) == total, module


# ------------------------------------------------------------------------------- ETRecord
def test_etrecord_never_unpickles(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    etdp, etrecord, pte = files("cnn_xnnpack")
    record = read_etrecord(etrecord)
    assert record.debug_handle_map["forward"][0][:3] == [1, 2, 2]
    read_executorch(etdp, etrecord, pte).attribution().check()


def test_module_stack_splits_outside_parentheses() -> None:
    text = ("L__self__,,m.Net;L__self__layers_slice(1, None, None),layers.slice(1, None, None),"
            "torch.nn.modules.container.Sequential;L__self__layers_1,layers.1,torch.nn.ReLU")
    stack = parse_module_stack(text)
    assert stack[1] == ("L__self__layers_slice(1, None, None)", "layers.slice(1, None, None)",
                        "torch.nn.modules.container.Sequential")
    assert stack[-1][1] == "layers.1"
    with pytest.raises(ToolkitError):
        parse_module_stack("a,b")


def test_nodes_table() -> None:
    etdp, etrecord, _ = files("cnn_xnnpack")
    nodes = read_executorch(etdp, etrecord).nodes()
    row = nodes[nodes["handle"] == 13].iloc[0]
    assert row["op"] == "aten.linear.default" and row["module_path"] == "fc"
    assert row["module_type"] == "torch.nn.modules.linear.Linear" and row["torch_node"] == "linear"
    assert "make_fixtures.py" in row["stack_trace"]


# ------------------------------------------------------------------------------- program
def test_program_instructions_and_xnnpack_nodes() -> None:
    plan = read_program(files("loop_xnnpack")[2]).plans["forward"]
    kinds = [i.kind for i in plan.chains[0]]
    assert kinds == ["KernelCall"] * 4 + ["DelegateCall"]
    assert plan.kernel_name(1) == "native_call_select_copy.int_out"
    nodes = read_xnnpack_blob(plan.delegates[0].data)
    assert nodes[0].kind == "XNNFullyConnected" and nodes[0].min_max
    cnn = read_program(files("cnn_xnnpack")[2]).plans["forward"]
    xn = read_xnnpack_blob(cnn.delegates[0].data)
    assert [x.debug_handle for x in xn if x.kind == "XNNStaticTranspose"] == [65535, 65535]


# ------------------------------------------------------------------------------- attribution
def execute_total(stem: str) -> int:
    ref = reference(stem)
    return sum(e["profile_event"]["end_time"] - e["profile_event"]["start_time"]
               for r in ref["run_data"] if r["name"] == "Execute" for e in r["events"]
               if e["profile_event"]["name"] == "Method::execute")


@pytest.mark.parametrize("with_program", [True, False])
@pytest.mark.parametrize("stem", STEMS)
def test_conservation_to_the_tick(stem: str, with_program: bool) -> None:
    """The one join: layers + dispatch overhead (Method::execute's and a delegate call's own
    time, before rows of by_layer()) + unattributed = every Method::execute, to the tick."""
    etdp, etrecord, pte = files(stem)
    att = read_executorch(etdp, etrecord, pte if with_program else None).attribution()
    att.check()
    layers = att.by_layer()
    assert int(layers["total_ns"].sum()) == att.attributed_ns
    assert att.total_ns == execute_total(stem) == (att.attributed_ns + att.overhead_ns
                                                  + att.unattributed_ns)
    assert int(att.overhead()["total_ns"].sum()) == att.overhead_ns
    assert int(att.unattributed()["self_ns"].sum()) == att.unattributed_ns
    assert att.runs == 4
    assert (layers[["kernel_ns", "dispatch_ns", "delegate_ns"]].sum(axis=1)
            == layers["total_ns"]).all()
    assert int(att.by_op()["total_ns"].sum()) == att.attributed_ns
    assert int(att.by_node()["total_ns"].sum()) == att.attributed_ns
    assert int(att.load_time()["dur_ns"].sum()) > 0  # reported apart
    summary = att.summary()
    assert summary["total_ns"] == att.total_ns and summary["runs"] == 4
    assert 0 < summary["attributed_events"] <= summary["events"]


@pytest.mark.parametrize("stem", XNNPACK)
def test_every_xnnpack_op_event_is_mapped(stem: str) -> None:
    etdp, etrecord, pte = files(stem)
    profile = read_executorch(etdp, etrecord, pte)
    att = profile.attribution()
    ops = att.delegate_ops()
    assert len(ops) > 0 and (ops["xnode"] >= 0).all()
    xnodes = read_xnnpack_blob(profile.program.plans["forward"].delegates[0].data)
    for name, k in zip(ops["name"], ops["xnode"]):
        fam = family(name)
        assert fam in FAMILIES[xnodes[k].kind] or (fam == "Clamp" and xnodes[k].min_max)
    # only the nodes XNNPACK made at runtime (layout transposes, handle 65535) are left
    un = att.unattributed()
    assert un["reason"].astype(str).str.startswith("made by the delegate at runtime").all()
    inserted = [k for k, x in enumerate(xnodes) if x.debug_handle == 65535]
    assert set(ops.loc[ops["event_id"].isin(un["event_id"]), "xnode"]) <= set(inserted)
    # without the program the per-op events cannot be placed on their nodes: they go to
    # the delegate's nodes through their delegate call (before, they were listed as
    # unmapped and the call's whole time was split: the same time, now every event counted)
    bare = read_executorch(etdp, etrecord).attribution()
    bare.check()
    assert bare.unattributed().empty
    assert (bare.delegate_ops()["xnode"] == -1).all()
    assert bare.attributed_ns + bare.overhead_ns == bare.total_ns


def test_fused_batch_norm_and_relu_get_time_through_their_producers() -> None:
    etdp, etrecord, pte = files("cnn_xnnpack")
    att = read_executorch(etdp, etrecord, pte).attribution()
    layers = att.by_layer().set_index("layer")
    for name in ("stem.1", "stem.2", "bn1", "bn2", "relu"):
        assert layers.loc[name, "delegate_ns"] > 0, name
    # the runtime-made transposes: unattributed, each with its reason (before: a
    # <delegate-inserted> row of by_layer)
    un = att.unattributed()
    assert int(un["self_ns"].sum()) > 0
    assert un["reason"].astype(str).str.contains("handle 65535").all()


def test_mobile_block_maps_every_xnnpack_operator_to_its_nodes() -> None:
    """A MobileNet-like block delegated to XNNPACK (residual add, ReLU6 clamps, global mean
    pool, reshape, two linears): every operator event of a serialized XNNPACK node reaches its
    node and, through the debug handles, its edge nodes and nn.Modules; a convolution XNNPACK
    fused with its BatchNorm and ReLU6 (an output clamp) is one group sharing its events;
    only the layout transposes XNNPACK made at runtime are left, each with its reason."""
    etdp, etrecord, pte = files("mobile_xnnpack")
    profile = read_executorch(etdp, etrecord, pte)
    att = profile.attribution()
    att.check()
    xnodes = read_xnnpack_blob(profile.program.plans["forward"].delegates[0].data)
    ops = att.delegate_ops()
    runs = att.runs
    assert len(ops) == 12 * runs and (ops["xnode"] >= 0).all()
    for name, k in zip(ops["name"], ops["xnode"]):
        fam = family(name)
        assert fam in FAMILIES[xnodes[k].kind] or (fam == "Clamp" and xnodes[k].min_max)
    # the 1x1 convolutions run as GEMMs: the first of them is the expand conv's, not fc1's
    first = ops[ops["run"] == 0].set_index("name")["xnode"]
    assert xnodes[first["Fully Connected (NC, F32) GEMM #1"]].kind == "XNNConv2d"
    assert xnodes[first["Fully Connected (NC, F32) GEMM #4"]].kind == "XNNFullyConnected"
    inserted = {k for k, x in enumerate(xnodes) if x.debug_handle == 65535}
    un = att.unattributed()
    assert set(ops.loc[ops["event_id"].isin(un["event_id"]), "xnode"]) == inserted
    assert un["reason"].astype(str).str.startswith("made by the delegate at runtime").all()
    assert len(un) == len(inserted) * runs and att.skipped_nodes().empty
    # layers: the framework's own module list, recorded when the fixture was made
    modules = json.loads((DIR / "mobile_xnnpack.modules.json").read_text())
    leaves = {m["path"] for m in modules if m["path"] and m["type"] not in ("Sequential",
                                                                             "MobileBlock")}
    layers = att.by_layer().set_index("layer")
    assert leaves <= set(layers.index)
    assert (layers.loc[sorted(leaves), "events"] > 0).all()
    # fused groups share their events equally (policy "equal"): conv + BatchNorm (+ ReLU6)
    for group in (("stem.0", "stem.1", "stem.2"), ("expand.0", "expand.1", "expand.2"),
                  ("depthwise.0", "depthwise.1", "depthwise.2"), ("project.0", "project.1")):
        rows = layers.loc[list(group)]
        assert (rows["events"] == runs).all(), group
        assert int(rows["total_ns"].max() - rows["total_ns"].min()) <= runs, group
    # the residual add (a node of the root module) and the final ReLU6 share the Add and
    # its Clamp; the mean, the reshape and both linears have their own events
    nodes = att.by_node().set_index("name")
    assert nodes.loc["aten_add_tensor", "events"] == 2 * runs
    # the nodes of the root module (the residual add among them) share the one (no layer)
    # row, as in the reference and ONNX Runtime joins: no row is named after a node
    root = nodes[nodes["layer"] == NO_LAYER]
    assert "aten_add_tensor" in root.index
    assert layers.loc[NO_LAYER, "nodes"] == len(root)
    assert not set(layers.index) & set(nodes.index)
    assert layers.loc["act", "events"] == 2 * runs
    for name in ("aten_mean_dim", "aten_view_copy_default"):
        assert nodes.loc[name, "events"] == runs, name
    assert layers.loc["fc1", "events"] == layers.loc["fc2", "events"] == runs
    assert att.attributed_ns + att.overhead_ns + att.unattributed_ns == execute_total(
        "mobile_xnnpack")


def test_loop_counts_the_events_the_inspector_drops() -> None:
    etdp, etrecord, pte = files("loop_portable")
    profile = read_executorch(etdp, etrecord, pte)
    ev = profile.events
    addmm = ev[(ev["name"] == "native_call_addmm.out") & (ev["instruction_id"] == 3)]
    assert addmm.groupby("run").size().tolist() == [3, 3, 3, 3]
    table = profile.inspector_table()
    row = table[(table["event_name"] == "native_call_addmm.out")].iloc[0]
    assert len(row["raw"]) == 4  # one sample per run: two of three loop iterations lost
    kept = sum(row["raw"])
    ours = addmm["dur_ns"].sum() / 1e6
    assert ours > kept
    # without the program the body's kernels have no debug handle: listed, every one counted
    bare = read_executorch(etdp, etrecord).attribution()
    un = bare.unattributed()
    body = un[un["event_id"].isin(addmm["event_id"])]
    assert len(body) == 12 and int(body["self_ns"].sum()) == int(addmm["dur_ns"].sum())
    bare.check()
    # with it, they are matched in order to the loop body's nodes (layer: the enclosing node's)
    att = profile.attribution()
    att.check()
    ops = att.by_node()
    node = ops[(ops["graph"] == "map_impl/submodule_0") & (ops["name"] == "aten_addmm_default")]
    assert int(node["kernel_ns"].iloc[0]) == int(addmm["dur_ns"].sum())
    assert not att.unattributed()["event_id"].isin(addmm["event_id"]).any()
    nodes = profile.nodes().set_index(["graph", "name"])
    assert nodes.loc[("map_impl/submodule_0", "aten_addmm_default"), "layer_source"] == \
        "enclosing node map_impl"


def test_rollup_and_exact_module_names() -> None:
    etdp, etrecord, pte = files("cnn_portable")
    att = read_executorch(etdp, etrecord, pte).attribution()
    layers = att.by_layer().set_index("layer")
    stem = sum(int(layers.loc[f"stem.{i}", "total_ns"]) for i in range(3))
    assert att.module_total("stem") == stem
    assert att.module_total("") == att.attributed_ns
    with pytest.raises(ToolkitError):
        att.module_total("stem.")
    with pytest.raises(ToolkitError):
        att.module_total("conv")  # a substring of conv1, conv2: not a module


def test_layers_without_instructions_have_a_row_and_a_reason() -> None:
    etdp, etrecord, pte = files("slices_portable")
    layers = read_executorch(etdp, etrecord, pte).attribution().by_layer()
    paths = set(layers["layer"])
    assert {"layers.0", "layers.1", "layers.2", "layers.3", "layers.4"} <= paths
    nodes = read_executorch(etdp, etrecord).nodes()
    view = nodes[nodes["op"] == "aten.view_copy.default"]
    assert len(view) == 1  # a view: no instruction, its layer is the root and still listed


def test_a_module_that_ran_no_instruction_has_a_zero_row_with_a_reason() -> None:
    etdp, etrecord, pte = files("cnn_portable")
    record = read_etrecord(etrecord)
    fc_handles = {n.handle for n in record.nodes["forward"] if n.module_path == "fc"}
    kept = {i: h for i, h in record.debug_handle_map["forward"].items()
            if not set(h) & fc_handles}
    dropped = set(record.debug_handle_map["forward"]) - set(kept)
    assert dropped
    record.debug_handle_map["forward"] = kept
    att = read_executorch(etdp, record, pte).attribution()
    att.check()
    row = att.by_layer().set_index("layer").loc["fc"]
    assert row["total_ns"] == 0 and row["events"] == 0
    assert row["reason"] == "its nodes ran no instruction (aten.addmm.default, " \
        "aten.permute_copy.default)"
    un = att.unattributed()
    reasons = un["reason"].astype(str)
    assert set(reasons.str.extract(r"instruction (\d+)")[0].astype(int)) == dropped


def test_without_etrecord_everything_is_unattributed_with_a_reason() -> None:
    att = read_executorch(files("cnn_portable")[0]).attribution()
    att.check()
    assert att.attributed_ns == 0
    assert att.unattributed()["reason"].astype(str).str.contains("no ETRecord").all()


def test_policies() -> None:
    """The join's policies mean the same for every runtime; an ETRecord has no costs, so
    ``macs`` and ``bytes`` split equally (before: ``equal`` per handle, ``nodes`` per node,
    and ``macs`` refused)."""
    etdp, etrecord, pte = files("cnn_xnnpack")
    profile = read_executorch(etdp, etrecord, pte)
    equal = profile.attribution("equal")
    for policy in ("equal", "macs", "bytes"):
        att = profile.attribution(policy)
        att.check()
        assert att.by_layer()["total_ns"].tolist() == equal.by_layer()["total_ns"].tolist()
    with pytest.raises(ToolkitError):
        profile.attribution("nodes")


# ------------------------------------------------------------------------------- read_trace
def test_read_trace_reads_an_etdump() -> None:
    """read_trace gives the Execute events, nested (parent_id), and the load-time events
    apart (before, as a run -1 that a join could not tell from an inference)."""
    trace = read_trace(files("cnn_portable")[0])
    ev = trace.events
    assert trace.meta["format"] == "etdump"
    assert sorted(set(ev["run"])) == [0, 1, 2, 3]
    assert set(ev["phase"]) == {"execute"}
    assert set(trace.meta["load_events"]["name"]) == {"Method::init", "Program::load_method"}
    roots = ev[ev["parent_id"] < 0]
    assert set(roots["name"].astype(str)) == {"Method::execute"}
    ops = read_trace(files("cnn_xnnpack")[0]).events
    assert "Convolution (NHWC, F32) IGEMM #1" in set(ops["name"])


@pytest.mark.parametrize("suffix,kind", [(".pte", "program"), (".etrecord.bin", "ETRecord"),
                                         (".inspector.csv", "Inspector")])
def test_wrong_file_says_what_it_is(suffix: str, kind: str) -> None:
    with pytest.raises(ToolkitError, match=kind):
        read_trace(DIR / f"cnn_xnnpack{suffix}")


def test_arguments_swapped_say_which_file_is_which() -> None:
    etdp, etrecord, pte = files("cnn_xnnpack")
    with pytest.raises(ToolkitError, match=r"ETRecord, not an ETDump.*etrecord="):
        read_executorch(etrecord)
    with pytest.raises(ToolkitError, match=r"ETDump .*not an ETRecord.*trace"):
        read_executorch(etdp, etdp)
    with pytest.raises(ToolkitError, match=r"program .*not an ETRecord.*program="):
        read_executorch(etdp, pte)
    with pytest.raises(ToolkitError, match="ETRecord, not an ExecuTorch program"):
        read_executorch(etdp, etrecord, etrecord)


# ------------------------------------------------------------------------------- fuzz
def _mutations(data: bytes, rng: random.Random, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        b = bytearray(data)
        if rng.random() < 0.2:
            b = b[:rng.randrange(len(b))]
        else:
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(b))
                b[i] = rng.randrange(256)
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("stem", STEMS)
def test_byte_mutation_raises_only_toolkit_errors(stem: str) -> None:
    rng = random.Random(stem)
    etdp, etrecord, pte = files(stem)
    good_record = read_etrecord(etrecord)
    good_program = read_program(pte)
    cases = ([(m, "etdump") for m in _mutations(etdp.read_bytes(), rng, 40)]
             + [(m, "program") for m in _mutations(pte.read_bytes(), rng, 40)]
             + [(m, "etrecord") for m in _mutations(etrecord.read_bytes(), rng, 15)])
    for data, kind in cases:
        try:
            if kind == "etdump":
                read_executorch(data, good_record, good_program).attribution().check()
            elif kind == "program":
                program = read_program(data)
                for plan in program.plans.values():
                    for d in plan.delegates:
                        if d.id == "XnnpackBackend":
                            read_xnnpack_blob(d.data)
                read_executorch(etdp, good_record, program).attribution()
            else:
                read_executorch(etdp, read_etrecord(data), good_program).attribution()
        except ToolkitError:
            pass


def test_negative_duration_counts_zero_and_takes_nothing_from_its_parent() -> None:
    """A kernel whose end precedes its start (times past 2**32, so no 32-bit wrap is undone):
    flagged, 0 ns in every total, its parent keeps its whole exclusive time, and every run
    still sums to its Method::execute time."""
    import dataclasses

    from toolkit.trace.readers.executorch.profile import ExecutorchProfile, etdump_events

    good = read_executorch(*files("cnn_portable"))
    ev = good.dump.events.copy()
    start = ev["start_time"].to_numpy().astype(np.int64) + (1 << 33)
    end = ev["end_time"].to_numpy().astype(np.int64) + (1 << 33)
    kernels = np.flatnonzero((good.events["name"].astype(str).str.startswith("native_call_")
                              & (good.events["phase"] == "execute")).to_numpy())
    i = int(kernels[len(kernels) // 2])
    end[i] = start[i] - 1000
    ev["start_time"], ev["end_time"] = start.astype(np.uint64), end.astype(np.uint64)
    dump = dataclasses.replace(good.dump, events=ev)
    bad = ExecutorchProfile(dump, good.record, good.program, good.method, etdump_events(dump))
    row, ok = bad.events.iloc[i], good.events.iloc[i]
    assert row["problem"] == "negative duration" and row["exclusive_ns"] == 0
    parent = int(row["parent"])
    assert bad.events["exclusive_ns"].iloc[parent] == good.events["dur_ns"].iloc[parent]
    assert ok["dur_ns"] > 0
    att = bad.attribution()
    att.check()
    assert att.total_ns == good.attribution().total_ns  # the roots are what they were
    assert (bad.events["exclusive_ns"] >= 0).all()


def test_negative_duration_is_flagged_not_hidden() -> None:
    data = bytearray(files("slices_portable")[0].read_bytes())
    dump = read_etdump(bytes(data))
    assert (dump.events["end_time"].to_numpy() >= dump.events["start_time"].to_numpy()).all()
    ev = read_executorch(bytes(data)).events
    assert (ev["problem"] == "").all() and np.all(ev["dur_ns"] >= 0)


# ------------------------------------------------------------------------------- CLI
def test_cli_trace_join_with_etrecord(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    etdp, etrecord, pte = files("cnn_xnnpack")
    out = tmp_path / "layers.csv"
    status = main(["trace-join", str(etdp), "--etrecord", str(etrecord), "--program", str(pte),
                   "--by", "layer", "--csv", str(out)])
    assert status == 0
    table = pd.read_csv(out, keep_default_na=False)
    expected = read_executorch(etdp, etrecord, pte).attribution().by_layer()
    assert table["total_ns"].tolist() == expected["total_ns"].tolist()
    assert "to layers" in capsys.readouterr().out
    assert main(["trace-join", str(etdp), "--etrecord", str(pte)]) == 2
    assert "not an ETRecord" in capsys.readouterr().err


def _synthetic_etdump() -> bytes:
    """An un-prefixed ETDump (as ExecuTorch's Python serializer writes) with a profile event
    whose 32-bit clock wrapped, an allocation event and a debug event."""
    import flatbuffers

    b = flatbuffers.Builder(256)
    name = b.CreateString("native_call_add.out")
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependInt32Slot(2, 7, -1)
    b.PrependUint64Slot(6, 2**32 - 100, 0)
    b.PrependUint64Slot(7, 50, 0)
    profile = b.EndObject()
    b.StartObject(2)
    b.PrependInt32Slot(0, 1, 0)
    b.PrependUint64Slot(1, 4096, 0)
    alloc = b.EndObject()
    dname = b.CreateString("dbg")
    b.StartObject(6)
    b.PrependInt32Slot(1, 2, -1)
    b.PrependUOffsetTRelativeSlot(5, dname, 0)
    debug = b.EndObject()
    events = []
    for slot, table in ((0, profile), (1, alloc), (2, debug)):
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(slot, table, 0)
        events.append(b.EndObject())
    b.StartVector(4, len(events), 4)
    for e in reversed(events):
        b.PrependUOffsetTRelative(e)
    vec = b.EndVector()
    run_name = b.CreateString("Execute")
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(0, run_name, 0)
    b.PrependUOffsetTRelativeSlot(3, vec, 0)
    run = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(run)
    runs = b.EndVector()
    b.StartObject(2)
    b.PrependUint32Slot(0, 3, 0)
    b.PrependUOffsetTRelativeSlot(1, runs, 0)
    root = b.EndObject()
    b.Finish(root, file_identifier=b"ED00")
    return bytes(b.Output())


def test_allocation_and_debug_events_and_a_32_bit_wrap() -> None:
    data = _synthetic_etdump()
    dump = read_etdump(data)
    assert not dump.prefixed and dump.version == 3
    ev = dump.events
    assert ev["kind"].tolist() == ["profile", "allocation", "debug"]
    assert ev["allocator_id"].iloc[1] == 1 and ev["allocation_size"].iloc[1] == 4096
    assert ev["name"].iloc[2] == "dbg" and ev["instruction_id"].iloc[2] == 2
    assert ev["instruction_id"].iloc[0] == 7 and pd.isna(ev["chain_index"].iloc[0])
    events = read_executorch(data).events
    assert events["dur_ns"].tolist() == [150, 0, 0]  # 2**32 - start + end
    assert events["problem"].tolist() == ["", "not a profile event (no time)",
                                          "not a profile event (no time)"]
    sized = len(data).to_bytes(4, "little") + data  # the runtime's framing reads the same
    pd.testing.assert_frame_equal(read_etdump(sized).events, ev)


def test_align_skips_silent_nodes_and_lists_unmatched_events() -> None:
    from toolkit.formats.executorch_program import XnnNode
    from toolkit.trace.readers.executorch._xnnpack import align

    nodes = [XnnNode("XNNConv2d", 1, True), XnnNode("XNNStaticReshape", 2, False),
             XnnNode("XNNAdd", 3, True), XnnNode("XNNConcatenate2", 4, False),
             XnnNode("XNNFullyConnected", 5, False)]
    names = ["Convolution (NHWC, F32) IGEMM #1", "Add (ND) #1", "Clamp (NC) #1",
             "Copy (NC, X32) #1", "Copy (NC, X32) #2", "Fully Connected (NC, F32) GEMM #1",
             "Sigmoid (NC) #1"]
    al = align(names, nodes)
    assert al.node_of == [0, 2, 2, 3, 3, 4, -1]
    assert al.reason_of[-1].startswith("no remaining XNNPACK node makes a 'Sigmoid'")
    assert [s for s, _ in al.skipped] == [1]
    assert "XNNStaticReshape made no operator event" in al.skipped[0][1]
    # a Clamp after a binary node without a fused min/max is not that node's
    plain = align(["Add (ND) #1", "Clamp (NC) #1"], [XnnNode("XNNAdd", 1, False)])
    assert plain.node_of == [0, -1]


def test_limits_bound_what_a_file_claims() -> None:
    from toolkit.errors import LimitError
    from toolkit.limits import limits

    etdp, etrecord, _ = files("cnn_xnnpack")
    with limits(max_events_per_file=10), pytest.raises(LimitError, match="max_events"):
        read_etdump(etdp)
    with limits(max_decompressed_bytes=1000), pytest.raises(LimitError, match="member"):
        read_etrecord(etrecord)


def test_executorch_join_pairs_the_files() -> None:
    from toolkit.trace.readers.executorch.profile import executorch_join

    etdp, etrecord, pte = files("cnn_portable")
    att = executorch_join(str(etdp), str(etrecord))
    assert att is not None and att.policy == "equal"
    att.check()
    assert executorch_join(DIR / "make_fixtures.py", DIR / "make_fixtures.py") is None
    with pytest.raises(ToolkitError, match="ETDump and then the ETRecord"):
        executorch_join(etrecord, etdp)
    with pytest.raises(ToolkitError, match="program"):
        executorch_join(etdp, pte)


def test_front_door() -> None:
    import toolkit as tk

    etdp, etrecord, pte = files("cnn_xnnpack")
    profile = tk.read_executorch(etdp, etrecord, pte)
    att0 = profile.attribution()
    assert att0.by_layer()["total_ns"].sum() + att0.overhead_ns + att0.unattributed_ns == \
        execute_total("cnn_xnnpack")
    att = tk.trace_join(str(etdp), str(etrecord))
    att.check()
    assert att.total_ns == execute_total("cnn_xnnpack")
    trace = tk.read_trace(etdp)
    assert trace.meta["format"] == "etdump"
    # the trace read_trace gives is one trace_join takes, with every option
    again = tk.trace_join(trace, str(etrecord))
    assert again.by_layer()["total_ns"].tolist() == att.by_layer()["total_ns"].tolist()
    skipped = tk.trace_join(trace, str(etrecord), skip_runs=1)
    assert skipped.runs == 3 and skipped.total_ns < att.total_ns
