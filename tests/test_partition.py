"""Partitioning: the circle-partitioner reference example, every sample model under several
.part files (each partition verified by chaining its parts against the source model), the
grouping against a literal port of circle-partitioner's merge loop, atomic writing, reports,
and bad input."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import SAMPLES
from test_part_file import REFERENCE_INI, REFERENCE_JSON, REFERENCE_PART

import toolkit as tk
from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.errors import PartitionError, ToolkitError
from toolkit.formats.conn_file import read_connection
from toolkit.formats.part_file import PartSpec, format_part
from toolkit.ir import Graph, Model
from toolkit.partitioner import PartitionResult, partition
from toolkit.partitioner.cli import main_partition
from toolkit.partitioner.grouping import group_ops
from toolkit.runtime.chain import litert_runner, run_connection

STEM = "Net_InstanceNorm_003"
SAMPLE_MODELS = sorted(p for p in [*SAMPLES.glob("*.tflite"), *SAMPLES.glob("*.circle"),
                                   *(SAMPLES / "tf").glob("*.tflite")])


def instance_norm_003() -> Model:
    """Net_InstanceNorm_003 of the circle-partitioner documentation (the committed sample,
    made by sample_models/make_samples.py), in primitive ops."""
    return tk.load(SAMPLES / f"{STEM}.circle")


def _inputs(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in model.graph.inputs:
        if np.issubdtype(t.dtype, np.floating):
            out[t.name] = rng.uniform(-1, 1, t.shape).astype(t.dtype)
        else:
            out[t.name] = rng.integers(-128, 128, t.shape).astype(t.dtype)
    return out


def check_invariants(model: Model, result: PartitionResult) -> None:
    """Every op in exactly one part, parts in a valid order, names and origins kept."""
    ops = model.graph.ops
    seen = sorted(i for p in result.parts for i in p.op_indices)
    assert seen == list(range(len(ops)))
    available = {t.name for t in model.graph.inputs}
    for p in result.parts:
        g = p.model.graph
        assert [t.name for t in g.inputs] == p.inputs
        assert [t.name for t in g.outputs] == p.outputs
        assert set(p.inputs) <= available, f"part {p.index} reads a later part"
        available |= set(p.outputs)
        assert len({result.placements[i].backend for i in p.op_indices}) == 1
        assert [o.origins for o in g.ops] == [ops[i].origins for i in p.op_indices]
        assert [o.kind for o in g.ops] == [ops[i].kind for i in p.op_indices]
        g.verify()
    assert {t.name for t in model.graph.outputs} <= available


def _without_manifest(text: str) -> str:
    """The connection text with the manifest lines (size, sha256) taken out."""
    text = re.sub(r',\n\s*"size" : \d+,\n\s*"sha256" : "[0-9a-f]{64}"', "", text)
    return re.sub(r"\nsize=\d+\nsha256=[0-9a-f]{64}", "", text)


# ----------------------------------------------------------------- reference example
def test_reference_example_exactly(tmp_path: Path) -> None:
    model = instance_norm_003()
    result = partition(model, REFERENCE_PART)
    check_invariants(model, result)
    paths = result.write(tmp_path)
    names = [p.name for p in paths]
    assert names == [f"{STEM}.00001_cpu.circle", f"{STEM}.00002_acl_cl.circle",
                     f"{STEM}.00003_cpu.circle", f"{STEM}.conn.json", f"{STEM}.conn.ini"]
    assert sorted(os.listdir(tmp_path)) == sorted(names)  # no temporary files left
    # ONE's text layout, plus each part's size and sha256 (the set's manifest, which ONE's
    # readers ignore): without those lines the files are the reference's, byte for byte
    assert result.conn_json() == REFERENCE_JSON and result.conn_ini() == REFERENCE_INI
    assert _without_manifest((tmp_path / f"{STEM}.conn.json").read_text()) == REFERENCE_JSON
    assert _without_manifest((tmp_path / f"{STEM}.conn.ini").read_text()) == REFERENCE_INI
    written = read_connection(tmp_path / f"{STEM}.conn.json")
    for path, part in zip(paths, written.parts):
        data = path.read_bytes()
        assert part.size == len(data) and part.sha256 == hashlib.sha256(data).hexdigest()
    expected = [(["Input"], ["Pow", "Sub"], ["MEAN", "SQUARED_DIFFERENCE", "MEAN", "ADD", "POW",
                                              "SUB"]),
                (["Sub", "Pow"], ["Div"], ["DIV"]),
                (["Div"], ["Add_as_terminal"], ["MUL", "ADD"])]
    for path, (ins, outs, kinds) in zip(paths, expected):
        part = tk.load(path)
        assert part.format == "circle" and part.had_origin_tables
        g = part.graph
        assert [t.name for t in g.inputs] == ins and [t.name for t in g.outputs] == outs
        assert [o.kind for o in g.ops] == kinds
        src = {o.name: o for o in model.graph.ops}
        for o in g.ops:  # source origin ids, not re-numbered per part
            assert o.origins == src[o.name].origins
            assert part.source_table[next(iter(o.origins))] == o.name


def test_reference_example_from_the_sample_file_and_cli(tmp_path: Path) -> None:
    (tmp_path / f"{STEM}.circle").write_bytes((SAMPLES / f"{STEM}.circle").read_bytes())
    (tmp_path / f"{STEM}.part").write_text(REFERENCE_PART)
    rc = main_partition(["--part_file", f"{STEM}.part", "--input_file", f"{STEM}.circle",
                         "--work_path", str(tmp_path)])
    assert rc == 0
    assert sorted(os.listdir(tmp_path)) == sorted([
        f"{STEM}.00001_cpu.circle", f"{STEM}.00002_acl_cl.circle", f"{STEM}.00003_cpu.circle",
        f"{STEM}.circle", f"{STEM}.conn.ini", f"{STEM}.conn.json", f"{STEM}.part"])
    assert _without_manifest((tmp_path / f"{STEM}.conn.json").read_text()) == REFERENCE_JSON
    assert _without_manifest((tmp_path / f"{STEM}.conn.ini").read_text()) == REFERENCE_INI
    model = tk.load(tmp_path / f"{STEM}.circle")
    x = _inputs(model)
    got = run_connection(tmp_path / f"{STEM}.conn.ini", x, run=litert_runner()).outputs
    want = litert_runner()(model, x)
    np.testing.assert_array_equal(got["Add_as_terminal"], want["Add_as_terminal"])


def test_cli_overrides_and_tflite_input(tmp_path: Path, capsys) -> None:
    tk.save(instance_norm_003(), tmp_path / "m.tflite")
    (tmp_path / "m.part").write_text(REFERENCE_PART)
    rc = main_partition(["--part_file", "m.part", "--input_file", "m.tflite",
                         "--work_path", str(tmp_path), "--backends", "cpu,acl_cl,npu",
                         "--default", "npu"])
    assert rc == 0
    conn = read_connection(tmp_path / "m.conn.json")
    assert conn.source.file == "m.tflite"
    assert [p.file for p in conn.parts] == ["m.00001_npu.circle", "m.00002_acl_cl.circle",
                                            "m.00003_npu.circle"]
    assert "m.00001_npu.circle" in capsys.readouterr().out
    from toolkit.cli import main  # the console script dispatches to the same command

    assert main(["partition", "--part_file", "m.part", "--input_file", "m.tflite",
                 "--work_path", str(tmp_path)]) == 0
    assert read_connection(tmp_path / "m.conn.ini").parts[1].file == "m.00002_acl_cl.circle"


def test_tk_partition_is_callable_whatever_was_imported_first() -> None:
    import toolkit.runtime.chain  # noqa: F401  (binds toolkit.partitioner to the package)

    result = tk.partition(instance_norm_003(), REFERENCE_PART)
    assert isinstance(result, PartitionResult) and result.conn_json() == REFERENCE_JSON


def test_opname_gives_the_same_reference_partition() -> None:
    spec = PartSpec(["cpu", "acl_cl"], "cpu", "opname", opname={"Div": "acl_cl"})
    a = partition(instance_norm_003(), spec)
    b = partition(instance_norm_003(), REFERENCE_PART)
    assert a.conn_json() == b.conn_json() == REFERENCE_JSON
    assert a.ops_table()["rule"].tolist()[6] == "OPNAME Div=acl_cl"


# ------------------------------------------------------- chaining = running the source
def test_chain_is_bit_exact_with_the_reference_runtime(tmp_path: Path) -> None:
    from toolkit import run

    model = instance_norm_003()
    result = partition(model, REFERENCE_PART, work_path=tmp_path)
    x = _inputs(model)
    want = run(model, x).outputs
    for conn in (result, tmp_path / f"{STEM}.conn.json", tmp_path / f"{STEM}.conn.ini"):
        for got in (run_connection(conn, x).outputs, run(conn, x).outputs):
            for k in want:
                np.testing.assert_array_equal(got[k], want[k])
    traced = run_connection(result, x, trace=True, repeat=2)
    for k in want:
        np.testing.assert_array_equal(traced.outputs[k], want[k])
    events = traced.trace.to_frame()
    assert events["key"].tolist() == list(range(9)) * 2  # optimised_id over all parts
    assert events["track"].tolist() == (["cpu"] * 6 + ["acl_cl"] + ["cpu"] * 2) * 2
    joined = events[events["run"] == 1].merge(result.origins(), left_on="key",
                                              right_on="optimised_id").merge(
        result.layers(), on="source_id")
    assert joined["layer"].tolist() == [o.name for o in model.graph.ops]
    assert (joined["part_file"] == joined["part"].map(
        {p.index: result.file_of(p) for p in result.parts})).all()


def test_chain_of_tflite_parts_in_litert(tmp_path: Path) -> None:
    model = instance_norm_003()
    result = partition(model, REFERENCE_PART)
    paths = result.write(tmp_path, ext=".tflite")
    assert paths[0].name == f"{STEM}.00001_cpu.tflite"
    x = _inputs(model)
    lr = litert_runner()
    want = lr(model, x)
    got = run_connection(tmp_path / f"{STEM}.conn.json", x, run=lr).outputs
    np.testing.assert_allclose(got["Add_as_terminal"], want["Add_as_terminal"], rtol=1e-6,
                               atol=1e-6)
    traced = run_connection(result, x, run=lr, trace=True, repeat=2)
    assert traced.trace["part"].tolist() == [1, 2, 3, 1, 2, 3]
    assert list(traced.trace.columns) == ["run", "part", "file", "backend", "start_ns", "dur_ns"]


def _part_files(model: Model) -> dict[str, PartSpec]:
    """Several .part requests for a model: by opcode and by op name."""
    ops = model.graph.ops
    kinds = sorted({o.type for o in ops})
    names = [o.name for o in ops]
    b = ["cpu", "npu"]
    return {
        "opcode_every_other_type": PartSpec(b, "cpu", "opcode",
                                            opcode={k: "npu" for k in kinds[::2]}),
        "opcode_default_underscore": PartSpec(b, "cpu", "opcode", opcode={kinds[0]: "cpu"},
                                              opcode_default="npu"),
        "opname_every_third": PartSpec(b, "cpu", "opname",
                                       opname={n: "npu" for n in names[1::3]}),
        "opname_alternating": PartSpec(["cpu", "npu", "gpu"], "cpu", "opname",
                                       opname={n: ("npu", "gpu")[i % 2]
                                               for i, n in enumerate(names[::2])}),
        "one_backend": PartSpec(["cpu"], "cpu", "opcode"),
    }


def _runnable_in_litert(model: Model) -> bool:
    from toolkit.schema import BUILTIN_CODES

    return all(BUILTIN_CODES.get(o.type, 0) >= 0 for o in model.graph.ops)


@pytest.mark.parametrize("path", SAMPLE_MODELS, ids=lambda p: p.name)
def test_every_sample_model_under_several_part_files(path: Path, tmp_path: Path) -> None:
    model = tk.load(path)
    x = _inputs(model)
    lr = litert_runner()
    want = lr(model, x) if _runnable_in_litert(model) else None
    ref = run(model, x).outputs
    for case, spec in _part_files(model).items():
        work = tmp_path / case
        (work).mkdir()
        (work / f"{case}.part").write_text(format_part(spec))
        result = partition(model, work / f"{case}.part")
        check_invariants(model, result)
        # as circle-partitioner: groups meeting at a join stay apart, even on one backend
        assert [(p.backend, p.op_indices, p.inputs, p.outputs) for p in result.parts] == \
            [tuple(g) for g in merge_loop(model.graph, [pl.backend for pl in result.placements])]
        result.write(work)
        reloaded = [tk.load(p) for p in result.paths[:-2]]
        assert [[o.origins for o in m.graph.ops] for m in reloaded] == \
            [[o.origins for o in p.model.graph.ops] for p in result.parts]
        if ref is not None:
            got = run_connection(work / f"{path.stem}.conn.json", x).outputs
            for k in ref:
                np.testing.assert_array_equal(got[k], ref[k], err_msg=f"{case} {k}")
        if want is not None:
            result.write(work, ext=".tflite")
            got = run_connection(work / f"{path.stem}.conn.json", x, run=lr).outputs
            for k in want:
                if np.issubdtype(want[k].dtype, np.floating):
                    np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5,
                                               err_msg=f"{case} {k}")
                else:
                    np.testing.assert_array_equal(got[k], want[k], err_msg=f"{case} {k}")


# -------------------------------------------------------------- built models
def cnn_like() -> Model:
    rng = np.random.default_rng(1)
    mb = ModelBuilder("cnn")
    x = mb.input("image", [1, 8, 8, 3])
    c1 = mb.conv2d(x, mb.const("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3),
                   mb.const("b1", rng.standard_normal(8) * 0.1), activation="RELU", name="conv1")
    dw = mb.depthwise_conv2d(c1, mb.const("wd", rng.standard_normal((1, 3, 3, 8)) * 0.3),
                             mb.const("bd", np.zeros(8)), activation="RELU6", name="dw")
    res = mb.add(dw, c1, name="residual")
    pool = mb.pool("MAX_POOL_2D", res, 2, name="pool")
    flat = mb.reshape(pool, [1, -1], name="flatten")
    fc = mb.fully_connected(flat, mb.const("wf", rng.standard_normal((10, 128)) * 0.1),
                            mb.const("bf", np.zeros(10)), name="fc")
    mb.output(mb.softmax(fc, name="probs"))
    return mb.build()


def transformer_like() -> Model:
    rng = np.random.default_rng(2)
    mb = ModelBuilder("attn")
    x = mb.input("tokens", [1, 6, 8])
    q = mb.fully_connected(x, mb.const("wq", rng.standard_normal((8, 8)) * 0.3), None,
                           keep_num_dims=True, name="q")
    k = mb.fully_connected(x, mb.const("wk", rng.standard_normal((8, 8)) * 0.3), None,
                           keep_num_dims=True, name="k")
    v = mb.fully_connected(x, mb.const("wv", rng.standard_normal((8, 8)) * 0.3), None,
                           keep_num_dims=True, name="v")
    s = mb.batch_matmul(q, k, adj_y=True, name="scores")
    p = mb.softmax(mb.mul(s, mb.const("scale", np.float32(0.35)), name="scaled"), name="attn")
    ctx = mb.batch_matmul(p, v, name="context")
    out = mb.add(ctx, x, name="residual")
    mb.output(out)
    return mb.build()


def two_in_two_out() -> Model:
    mb = ModelBuilder("branches")
    a = mb.input("a", [1, 4, 4, 2])
    b = mb.input("b", [1, 4, 4, 2])
    left = mb.unary("TANH", a, name="left")
    right = mb.unary("LOGISTIC", b, name="right")
    cat = mb.concat([left, right], axis=3, name="cat")
    s0, s1 = mb.split(cat, 2, axis=3, name="split")
    o1 = mb.add(s0, b, name="out_sum")
    o2 = mb.mul(s1, a, name="out_prod")
    mb.output(o1, o2)
    return mb.build()


BUILT = {"cnn": cnn_like, "transformer": transformer_like, "two_in_two_out": two_in_two_out}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_built_models_under_several_part_files(name: str, tmp_path: Path) -> None:
    model = BUILT[name]()
    x = _inputs(model)
    lr = litert_runner()
    want = lr(model, x)
    for case, spec in _part_files(model).items():
        result = partition(model, spec)
        check_invariants(model, result)
        got = run_connection(result, x, run=lr).outputs
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{case} {k}")
        ref = run(model, x).outputs
        got = run_connection(result, x).outputs
        for k in ref:
            np.testing.assert_array_equal(got[k], ref[k])


def test_split_stays_whole_and_secondary_output_name_warns() -> None:
    model = two_in_two_out()
    spec = PartSpec(["cpu", "npu"], "cpu", "opname", opname={"split": "npu", "split:1": "npu"})
    with pytest.warns(UserWarning, match="split:1"):
        result = partition(model, spec)
    split_part = next(p for p in result.parts if p.backend == "npu")
    assert [model.graph.ops[i].kind for i in split_part.op_indices] == ["SPLIT"]
    assert split_part.outputs == ["split", "split:1"]
    assert split_part.inputs == ["cat"]
    w = result.warnings_table()
    assert list(w.columns) == ["where", "message"] and len(w) == 1
    assert "<part>" in w["where"][0] or ":" in w["where"][0]


def test_two_inputs_two_outputs_connection() -> None:
    model = two_in_two_out()
    result = partition(model, PartSpec(["cpu", "npu"], "cpu", "opcode",
                                       opcode={"CONCATENATION": "npu", "SPLIT": "npu"}))
    conn = result.connection()
    assert conn.source.inputs == ["a", "b"] and conn.source.outputs == ["out_sum", "out_prod"]
    assert [(p.inputs, p.outputs) for p in conn.parts] == [
        (["a"], ["left"]),
        (["b"], ["right"]),
        (["left", "right"], ["split", "split:1"]),
        (["split", "b"], ["out_sum"]),
        (["split:1", "a"], ["out_prod"]),
    ]


# ----------------------------------------- grouping = circle-partitioner's merge loop
def merge_loop(graph: Graph, backends: list[str]) -> list[tuple[str, list[int], list[str],
                                                                 list[str]]]:
    """circle-partitioner's algorithm as written: one group per op, then repeat "scan groups in
    order; absorb the first same-backend consumer group whose op-made inputs all come from the
    absorbing group" until nothing changes; then drop internal inputs and unused outputs."""
    ops = graph.ops
    producer = {t: i for i, o in enumerate(ops) for t in o.outputs}
    groups = [{"backend": backends[i], "ops": [i],
               "inputs": list(dict.fromkeys(t for t in o.inputs if t is not None)),
               "outputs": list(o.outputs)} for i, o in enumerate(ops)]
    owner = {i: g for i, g in enumerate(groups)}
    changed = True
    while changed:
        changed = False
        for gi in groups:
            for g in groups:
                if g is gi or g["backend"] != gi["backend"]:
                    continue
                if not any(t in gi["outputs"] for t in g["inputs"]):
                    continue
                if not all(owner[producer[t]] is gi for t in g["inputs"] if t in producer):
                    continue
                for i in g["ops"]:
                    gi["ops"].append(i)
                    owner[i] = gi
                for t in g["inputs"]:
                    inside = t in producer and owner[producer[t]] is gi
                    if not inside and t not in gi["inputs"]:
                        gi["inputs"].append(t)
                for t in g["outputs"]:
                    if t not in gi["outputs"]:
                        gi["outputs"].append(t)
                groups.remove(g)
                changed = True
                break
            if changed:
                break
    used = set(graph.outputs)
    for g in groups:
        g["inputs"] = [t for t in g["inputs"] if not t.is_const
                       and not (t in producer and owner[producer[t]] is g)]
        used |= set(g["inputs"])
    return [(g["backend"], g["ops"], [t.name for t in g["inputs"]],
             [t.name for t in g["outputs"] if t in used]) for g in groups]


@st.composite
def random_models(draw) -> tuple[Model, list[str]]:
    """A random DAG of runnable [1, 4] float ops, some SPLITs, several outputs, and a backend
    per op."""
    mb = ModelBuilder("random")
    pool = [mb.input("x0", [1, 4]), mb.input("x1", [1, 4])]
    const = mb.const("c", np.linspace(-1, 1, 4).reshape(1, 4))
    n = draw(st.integers(1, 14))
    backends: list[str] = []
    made = []
    for i in range(n):
        kind = draw(st.sampled_from(["ADD", "MUL", "SUB", "MAXIMUM", "TANH", "LOGISTIC",
                                     "SPLIT"]))
        pick = st.sampled_from([*pool, const])
        if kind in ("TANH", "LOGISTIC"):
            outs = [mb.unary(kind, draw(st.sampled_from(pool)), name=f"t{i}")]
        elif kind == "SPLIT":
            a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
            cat = mb.concat([a, b], axis=1, name=f"cat{i}")
            backends.append(draw(st.sampled_from("abc")))
            made.append(cat)
            outs = mb.split(cat, 2, axis=1, name=f"s{i}")
        else:
            # one operand at least is not a constant: an op reading only constants joins its
            # reader's part (toolkit.partitioner.grouping), which circle-partitioner does not
            outs = [mb.binary(kind, draw(st.sampled_from(pool)), draw(pick), name=f"t{i}")]
        backends.append(draw(st.sampled_from("abc")))
        made += outs
        pool += outs
    extra = draw(st.lists(st.sampled_from(made), max_size=3, unique_by=id))
    mb.output(*dict.fromkeys([made[-1], *extra]))
    return mb.build(), backends


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_models())
def test_grouping_matches_the_merge_loop_and_chains(case: tuple[Model, list[str]]) -> None:
    model, backends = case
    graph = model.graph
    fast = [(g.backend, g.ops, [t.name for t in g.inputs], [t.name for t in g.outputs])
            for g in group_ops(graph, backends)]
    assert fast == merge_loop(graph, backends)
    spec = PartSpec(["a", "b", "c"], "a", "opname",
                    opname={o.name: b for o, b in zip(graph.ops, backends)})
    result = partition(model, spec)
    check_invariants(model, result)
    x = _inputs(model)
    lr = litert_runner()
    want = lr(model, x)
    got = run_connection(result, x, run=lr).outputs
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------- atomic writing
# renames: 3 parts and the 2 connection files (the old .conn.json is copied aside, never moved)
@pytest.mark.parametrize("fail_at", range(1, 6))
def test_failure_while_renaming_leaves_nothing_and_restores(tmp_path: Path, monkeypatch,
                                                            fail_at: int) -> None:
    (tmp_path / f"{STEM}.conn.json").write_text("old")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = partition(instance_norm_003(), REFERENCE_PART)
    real = os.replace
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(ToolkitError, match=r"cannot write the file \(disk full\)"):
        result.write(tmp_path)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_failure_while_serializing_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    import toolkit.formats.flatbuffer_write as fw

    result = partition(instance_norm_003(), REFERENCE_PART)
    real = fw.write_model
    calls = {"n": 0}

    def flaky(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ToolkitError("cannot serialize")
        return real(*a, **kw)

    monkeypatch.setattr(fw, "write_model", flaky)
    with pytest.raises(ToolkitError, match="cannot serialize"):
        result.write(tmp_path)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------- report
def test_report_tables() -> None:
    result = partition(instance_norm_003(), REFERENCE_PART)
    parts = result.parts_table()
    assert list(parts.columns) == ["part", "file", "backend", "op_count", "op_types", "inputs",
                                   "outputs", "input_bytes", "output_bytes", "cut_in_bytes",
                                   "cut_out_bytes"]
    assert parts["op_count"].tolist() == [6, 1, 2]
    assert parts["backend"].tolist() == ["cpu", "acl_cl", "cpu"]
    assert parts["inputs"].tolist() == [["Input"], ["Sub", "Pow"], ["Div"]]
    tensor = 1 * 8 * 6 * 12 * 4
    assert parts["cut_in_bytes"].tolist() == [0, tensor + 12 * 4, tensor]
    assert parts["cut_out_bytes"].tolist() == [tensor + 12 * 4, tensor, 0]
    assert str(parts["cut_in_bytes"].dtype) == "int64"
    ops = result.ops_table()
    assert ops["part"].tolist() == [1, 1, 1, 1, 1, 1, 2, 3, 3]
    assert ops.loc[6, "rule"] == "OPCODE DIV=acl_cl"
    assert ops.loc[6, "rule_where"] == "<part>:7"
    assert ops.loc[0, "rule"] == "default"
    assert ops.loc[7, "grouping"].startswith("starts: producer part 2")
    assert ops["part_op_index"].tolist() == [0, 1, 2, 3, 4, 5, 0, 0, 1]
    assert result.warnings_table().empty


def test_provenance_tables_join_back_to_source_layers() -> None:
    from toolkit.provenance import OPTIMISED_COLUMNS, SOURCE_COLUMNS, Provenance

    result = partition(instance_norm_003(), REFERENCE_PART)
    assert isinstance(result, Provenance)
    opt = result.optimised_ops()
    assert list(opt.columns)[:len(OPTIMISED_COLUMNS)] == OPTIMISED_COLUMNS
    assert list(result.source_ops().columns) == SOURCE_COLUMNS
    joined = opt.merge(result.origins(), on="optimised_id").merge(
        result.layers(), on="source_id")
    assert joined.groupby("part")["layer"].apply(list).to_dict() == {
        1: ["Mean_of_ifm", "SquaredDifference", "Mean_as_variance", "Add_as_variance", "Pow",
            "Sub"], 2: ["Div"], 3: ["Mul_gamma", "Add_as_terminal"]}
    assert result.commands().empty and result.debug_handles().empty
    assert result.removed().empty


def test_compiled_origins_survive_partitioning(tmp_path: Path) -> None:
    model = instance_norm_003()
    ops = model.graph.ops
    for i, op in enumerate(ops):  # as after a compiler that fused/renumbered
        op.origins = frozenset({100 + i, 200 + i})
    model.source_table = {k: f"layer_{k}" for i in range(len(ops)) for k in (100 + i, 200 + i)}
    result = partition(model, REFERENCE_PART, work_path=tmp_path)
    for path, p in zip(result.paths, result.parts):
        back = tk.load(path)
        assert [o.origins for o in back.graph.ops] == [ops[i].origins for i in p.op_indices]
        assert all(back.source_table[k] == f"layer_{k}" for o in back.graph.ops
                   for k in o.origins)


# ----------------------------------------------------------------- bad input
def test_uncalled_subgraphs_stay_out_of_the_parts() -> None:
    model = instance_norm_003()
    model.subgraphs.append(Graph("body"))  # no control-flow op calls it
    result = partition(model, REFERENCE_PART)
    assert result.conn_json() == REFERENCE_JSON
    assert all(len(p.model.subgraphs) == 1 for p in result.parts)


def test_duplicate_tensor_names_at_a_cut_are_an_error() -> None:
    model = instance_norm_003()
    model.graph.tensor("Sub").name = "Pow"
    model.graph._names = None
    with pytest.raises(PartitionError, match="two tensors are named 'Pow'"):
        partition(model, REFERENCE_PART)


def test_rules_of_the_other_section_are_reported_unused() -> None:
    spec = PartSpec(["cpu", "npu"], "cpu", "opcode", opcode={"DIV": "npu"},
                    opname={"Sub": "npu"})
    with pytest.warns(UserWarning, match=r"\[OPNAME\] has 1 rule\(s\) but comply=opcode"):
        result = partition(instance_norm_003(), spec)
    assert len(result.warnings) == 1


def test_missing_opname_is_a_warning_listed_in_the_report(tmp_path: Path) -> None:
    p = tmp_path / "n.part"
    p.write_text("[partition]\nbackends=cpu,npu\ndefault=cpu\ncomply=opname\n\n[OPNAME]\n"
                 "Div=npu\nNoSuchOp=npu\n")
    with pytest.warns(UserWarning, match="NoSuchOp"):
        result = partition(instance_norm_003(), p)
    w = result.warnings_table()
    assert w["where"].tolist() == [f"{p}:8"]
    assert "names no op" in w["message"][0]
    assert len(result.parts) == 3


@pytest.mark.parametrize("flag,value", [("--input_file", "../m.circle"),
                                        ("--part_file", "../m.part"),
                                        ("--input_file", "/etc/passwd")])
def test_cli_rejects_files_outside_the_work_path(tmp_path: Path, capsys, flag: str,
                                                 value: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tk.save(instance_norm_003(), tmp_path / "m.circle")
    (tmp_path / "m.part").write_text(REFERENCE_PART)
    tk.save(instance_norm_003(), work / "m.circle")
    (work / "m.part").write_text(REFERENCE_PART)
    args = {"--part_file": "m.part", "--input_file": "m.circle", flag: value}
    argv = [x for kv in args.items() for x in kv] + ["--work_path", str(work)]
    assert main_partition(argv) == 2  # a bad request exits 2, as every verb does
    err = capsys.readouterr().err
    assert "outside the work path" in err
    assert sorted(os.listdir(work)) == ["m.circle", "m.part"]


def test_cli_reports_part_file_errors_with_line(tmp_path: Path, capsys) -> None:
    tk.save(instance_norm_003(), tmp_path / "m.circle")
    (tmp_path / "m.part").write_text(REFERENCE_PART.replace("DIV=acl_cl", "DIV=gpu"))
    assert main_partition(["--part_file", "m.part", "--input_file", "m.circle",
                           "--work_path", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "m.part:7" in err and "'gpu'" in err
    assert sorted(os.listdir(tmp_path)) == ["m.circle", "m.part"]
    assert main_partition(["--part_file", "m.part"]) == 2


def test_library_rejects_unknown_extension_and_unsafe_names(tmp_path: Path) -> None:
    result = partition(instance_norm_003(), REFERENCE_PART, source_file="../evil/M.circle")
    assert result.stem == "M"
    with pytest.raises(PartitionError, match="extension"):
        result.write(tmp_path, ext=".onnx")
    spec = PartSpec(["cpu", "a/b"], "cpu")
    with pytest.raises(PartitionError, match="file name"):
        partition(instance_norm_003(), spec)


def test_a_part_with_no_outputs_runs_in_litert_and_the_reference_runtime() -> None:
    # dead ops on their own backend make a part that produces nothing anyone reads; LiteRT's
    # XNNPACK delegate fails to invoke this one, so the LiteRT runner leaves such parts out
    mb = ModelBuilder("dead_branch")
    x = mb.input("x", [1, 4])
    c = mb.const("c", np.linspace(-1, 1, 4).reshape(1, 4))
    t = mb.binary("ADD", c, c, name="dead")
    mb.split(mb.concat([t, t], axis=1, name="dead_cat"), 2, axis=1, name="dead_split")
    mb.output(mb.unary("TANH", x, name="y"))
    model = mb.build()
    dead = {"dead": "b", "dead_cat": "b", "dead_split": "b"}
    result = partition(model, PartSpec(["a", "b"], "a", "opname", opname=dead))
    assert sorted(len(p.model.graph.outputs) for p in result.parts) == [0, 1]
    feed = {"x": np.linspace(-2, 2, 4, dtype=np.float32).reshape(1, 4)}
    want = np.tanh(feed["x"])
    np.testing.assert_allclose(run_connection(result, feed, run=litert_runner()).outputs["y"], want,
                               rtol=1e-6)
    np.testing.assert_allclose(run_connection(result, feed).outputs["y"], want, rtol=1e-6)


def test_weight_ops_join_the_part_of_their_first_reader() -> None:
    """float16 weights: each DEQUANTIZE joins the part of the first op reading it (not a part
    of its own); a reader in another part takes the float32 weight as a part input; LiteRT
    (builtin kernels) and the reference runtime run the chain as the model. (LiteRT's
    default XNNPACK delegate does not: it folds a float16 weight's DEQUANTIZE into its
    readers and leaves the part output holding the weight unwritten.)"""
    mb = ModelBuilder("f16")
    x = mb.input("x", [2, 8])
    rng = np.random.default_rng(3)
    w16 = mb.const("w16", rng.uniform(-1, 1, (8, 8)).astype(np.float16))
    w = mb.op("DEQUANTIZE", [w16], (8, 8), name="w", dtype=np.float32)
    h = mb.fully_connected(x, w, name="fc1")
    h = mb.unary("TANH", h, name="act")
    mb.output(mb.fully_connected(h, w, name="fc2"))
    model = mb.build()
    backends = {"w": "b", "fc1": "a", "act": "b", "fc2": "a"}
    ops = model.graph.ops
    groups = group_ops(model.graph, [backends[op.name] for op in ops])
    names = [[ops[i].name for i in g.ops] for g in groups]
    assert names == [["w", "fc1"], ["act"], ["fc2"]]
    assert [g.backend for g in groups] == ["a", "b", "a"]
    assert [t.name for t in groups[2].inputs] == ["act", "w"]
    assert "joins: reads only constants" in groups[0].reasons[0]
    result = partition(model, PartSpec(["a", "b"], "a", "opname", opname=backends))
    feed = {"x": rng.uniform(-1, 1, (2, 8)).astype(np.float32)}
    want = run(model, feed).outputs
    from support import litert_run

    from toolkit.formats.flatbuffer_write import write_model

    def builtin(m: Model, x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return litert_run(bytes(write_model(m, "tflite")), x)

    for runner in (None, builtin):
        got = (run_connection(result, feed) if runner is None
               else run_connection(result, feed, run=runner)).outputs
        for k in want:  # (LiteRT's sums run in another order: within 1e-5 of the largest)
            np.testing.assert_allclose(got[k], want[k], rtol=0,
                                       atol=1e-5 * float(np.abs(want[k]).max()))
