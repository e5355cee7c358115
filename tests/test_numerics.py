"""Numerics attributed to layers: captures of every runtime, comparisons through provenance.

Models are the committed samples (TensorFlow's converter wrote the float/int8 pairs of
``sample_models/zoo`` and ``sample_models/tf``); LiteRT runs its builtin kernels, ONNX Runtime
the committed ``.onnx`` files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import SAMPLES, expect_run_warnings

import toolkit as tk
from toolkit.errors import NumericsError, RuntimeInputError, ToolkitError
from toolkit.layer_names import NO_LAYER
from toolkit.numerics.capture import dequantize_array
from toolkit.numerics.compare import LAYER_COLUMNS
from toolkit.numerics.metrics import metrics

ZOO = SAMPLES / "zoo"
INT8 = [*sorted(ZOO.glob("*_int8.tflite")), SAMPLES / "cnn_int8.tflite",
        SAMPLES / "tf" / "tf_cnn_int8.tflite"]
SLOW = {"efficientnet_b0_int8.tflite", "mobilenet_v3_large_int8.tflite"}


def _param(p: Path) -> Any:
    return pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in SLOW else [])


@pytest.mark.parametrize("path", [SAMPLES / "cnn.tflite", SAMPLES / "two_branch.tflite",
                                  SAMPLES / "transformer.tflite",
                                  SAMPLES / "tf" / "tf_cnn_int8.tflite",
                                  ZOO / "mobilenet_v1_int8.tflite"], ids=lambda p: p.name)
def test_a_model_compared_with_itself_has_no_error(path: Path) -> None:
    comp = tk.compare(path, path)
    df = comp.by_layer()
    assert list(df.columns) == LAYER_COLUMNS
    assert df["cand_tensor"].notna().all()
    assert (df["max_abs_error"] == 0).all() and (df["mse"] == 0).all()
    assert np.isinf(df["sqnr_db"]).all() and (df["sqnr_db"] > 0).all()
    assert (df["isolated_max_abs_error"] == 0).all()
    assert (df["mpeir"] == 0).all() and (df["cosine"] > 1 - 1e-12).all()
    assert comp.unmatched().empty
    assert comp.first_divergence(sqnr_db=1000) is None
    # every layer of the model is a row, named through model.origin(oid).layers; the ops of
    # no layer (the converter's output op named after its tensor) one row "(no layer)"
    model = tk.load(path)
    layers = {layer for op in model.graph.ops
              for layer in [x for o in op.origins for x in model.origin(o).layers]
              or [NO_LAYER]}
    assert set(df["layer"]) == layers


@pytest.mark.parametrize("path", [_param(p) for p in INT8])
def test_reference_runtime_vs_litert_on_the_int8_samples(path: Path) -> None:
    with expect_run_warnings(path):
        comp = tk.compare(path, path, candidate_runtime="litert", isolated=False)
    assert comp.candidate.runtime == "litert" and comp.reference.runtime == "reference"
    bt = comp.by_tensor()
    assert comp.unmatched().empty and len(bt) == len(comp.reference.records)
    # every tensor bit-exact, the float ones too (CONV_3D left in float by the converter in
    # conv1d_3d sums in LiteRT's order)
    assert (bt["max_abs_error"] == 0).all(), bt[bt["max_abs_error"] > 0]
    layers = comp.by_layer()
    assert (layers["max_abs_error"] == 0).all() and (layers["mse"] == 0).all()
    assert layers["cand_tensor"].notna().all()


def test_litert_as_the_reference_re_runs_every_layer_exactly() -> None:
    """LiteRT as the reference, the toolkit's runtime as the candidate: every layer's isolated
    error (the toolkit's kernels on LiteRT's own inputs) is zero, int8 SQUARED_DIFFERENCE of
    the layer norms included."""
    path = ZOO / "norms_int8.tflite"
    comp = tk.compare(path, path, reference_runtime="litert")
    df = comp.by_layer()
    kinds = {r.op_kind for r in comp.candidate.records.values()}
    assert "SQUARED_DIFFERENCE" in kinds
    assert df["isolated_max_abs_error"].notna().all()
    assert (df["isolated_max_abs_error"] == 0).all() and (df["max_abs_error"] == 0).all()


def test_float_vs_int8_of_the_same_tf_model() -> None:
    ref, cand = SAMPLES / "tf" / "tf_cnn.tflite", SAMPLES / "tf" / "tf_cnn_int8.tflite"
    x = np.random.default_rng(3).uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)
    comp = tk.compare(ref, cand, [x])
    s = comp.summary()
    assert s["layers_matched_share"] >= 0.9
    df = comp.by_layer()
    # the output row is the direct comparison of the final outputs
    qm = tk.load(cand)
    tin, tout = qm.graph.inputs[0], qm.graph.outputs[0]
    xq = np.clip(np.round(x / tin.quant.scale[0]) + tin.quant.zero_point[0], -128, 127)
    out_f = tk.run(ref, [x]).outputs
    out_q = tk.run(cand, [xq.astype(np.int8)]).outputs
    (name_f, yf), = out_f.items()
    yq = dequantize_array(out_q[tout.name], tout.quant.scale, tout.quant.zero_point, 0)
    direct = metrics(yf, yq)
    row = df[df["ref_tensor"] == name_f].iloc[-1]
    for k in ("sqnr_db", "mse", "cosine", "max_abs_error", "mpeir"):
        assert row[k] == pytest.approx(direct[k], rel=1e-12, abs=0), k
    # real quantization error, finite, larger than float rounding
    assert 10 < row["sqnr_db"] < 80
    assert (df["isolated_sqnr_db"].notna()).all()


@pytest.mark.parametrize("name", ["mobilenet_v1", "ds_cnn", "convs", "norms", "activations",
                                  "fused_bilstm"])
def test_float_vs_int8_pairs_of_the_zoo_match_most_layers(name: str) -> None:
    comp = tk.compare(ZOO / f"{name}.tflite", ZOO / f"{name}_int8.tflite")
    s = comp.summary()
    assert s["layers_matched_share"] >= 0.9, comp.unmatched()
    out = comp.reference.outputs[0]
    assert np.isfinite(s["output_sqnr_db"][out])
    # every layer re-runs in isolation: the converter's QUANTIZE/DEQUANTIZE around a float op
    # (norms, activations) and an LSTM's zero state (fused_bilstm) are pulled in
    df = comp.by_layer()
    assert df["isolated_sqnr_db"].notna().all(), df[df["isolated_sqnr_db"].isna()]["note"]
    # the candidate ops the reference lacks are listed with the reason
    for reason in comp.unmatched()["reason"]:
        assert "converter" in reason or "counterpart" in reason or "compared" in reason


def test_compiled_vs_source() -> None:
    # no float rounding changed (activation fused into the convolution): zero error
    path = SAMPLES / "two_branch.tflite"
    model = tk.load(path)
    compiled = tk.compile(model)
    comp = tk.compare(model, compiled)
    df = comp.by_layer()
    matched = df[df["cand_tensor"].notna()]
    assert (matched["max_abs_error"] == 0).all() and (matched["isolated_max_abs_error"] == 0).all()
    assert "origin" in set(matched["match"])  # the fused op against its last source op
    # every unmatched layer is inside a fused group, and says where it is compared
    for note in df[df["cand_tensor"].isna()]["note"]:
        assert "compared" in note or "counterpart" in note
    # batch norm folded into the convolution: float rounding changed, within tolerance
    model = tk.load(SAMPLES / "cnn.tflite")
    compiled = tk.compile(model)
    assert any("batch" in str(r).lower() or "bn" in str(r).lower()
               for r in compiled.rewrites().itertuples())
    comp = tk.compare(model, compiled)
    df = comp.by_layer()
    matched = df[df["cand_tensor"].notna()]
    assert len(matched) >= 0.5 * len(df)
    for note in df[df["cand_tensor"].isna()]["note"]:
        assert "compared at" in note
    tolerance = 1e-6  # relative to the largest magnitude of the tensor (float32 rounding)
    for r in matched.itertuples():
        scale = float(np.abs(comp.reference.value(r.ref_tensor)).max())
        assert r.max_abs_error <= tolerance * scale + 1e-12, r.layer
    # ops the compile did not change re-run exactly on the reference's inputs
    same = matched[matched["match"] == "tensor name"]
    assert not same.empty and (same["isolated_max_abs_error"] == 0).all()


@pytest.mark.parametrize("path", [ZOO / "mobilenet_v1.tflite", ZOO / "mobilenet_v1_int8.tflite"],
                         ids=lambda p: p.name)
def test_a_perturbed_convolution_is_named_and_isolated(path: Path) -> None:
    model = tk.load(path)
    convs = [op for op in model.graph.ops if op.kind == "CONV_2D"]
    op = convs[len(convs) // 2]
    w = op.inputs[1]
    data = np.array(w.data)
    flat = data.reshape(-1)
    if np.issubdtype(data.dtype, np.integer):
        flat[: flat.size // 2] = np.clip(flat[: flat.size // 2].astype(np.int32) * -1, -127, 127)
    else:
        flat[: flat.size // 2] *= -1.5
    w.data = data
    comp = tk.compare(path, model)
    first = comp.first_divergence(sqnr_db=60)
    assert first is not None
    layers = {layer for o in op.origins for layer in model.origin(o).layers}
    assert first["layer"] in layers
    assert first["ref_tensor"] == op.outputs[0].name
    df = comp.by_layer()
    own = df[df["isolated_max_abs_error"] > 0]
    assert set(own["cand_tensor"]) == {op.outputs[0].name}
    assert set(own["layer"]) == layers
    before = df[df["position"] < first["position"]]
    assert (before["max_abs_error"] == 0).all()
    assert comp.worst(1).iloc[0]["cand_tensor"] == op.outputs[0].name


def test_nan_is_reported_per_layer() -> None:
    path = SAMPLES / "cnn.tflite"
    model = tk.load(path)
    op = next(o for o in model.graph.ops if o.kind == "DEPTHWISE_CONV_2D")
    w = op.inputs[1]
    data = np.array(w.data)
    data.reshape(-1)[0] = np.nan
    w.data = data
    comp = tk.compare(path, model)
    df = comp.by_layer()
    row = df[df["ref_tensor"] == op.outputs[0].name].iloc[0]
    assert row["nonfinite_cand"] > 0 and row["nonfinite_ref"] == 0
    assert not np.isnan(row["sqnr_db"])  # over the elements finite on both sides
    s = comp.summary()
    assert row["layer"] in s["layers_with_nonfinite"]
    assert comp.first_divergence(sqnr_db=-1000)["layer"] == row["layer"]


def test_partition_chain_capture_and_compare() -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    ops = model.graph.ops
    part = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
            "OPCODE": {"CONV_2D": "npu"}}
    result = tk.partition(model, part)
    assert len(result.parts) > 1
    cap = tk.capture(result)
    assert {r.part for r in cap.records.values() if not r.is_input} == set(
        range(1, len(result.parts) + 1))
    assert {t.name for op in ops for t in op.outputs} <= set(cap.records)
    comp = tk.compare(model, result)
    assert (comp.by_layer()["max_abs_error"] == 0).all()
    assert comp.unmatched().empty


def test_onnx_runtime_capture_across_its_own_optimisation() -> None:
    ref = SAMPLES / "onnx" / "cnn.ts.onnx"
    cand = SAMPLES / "onnx" / "cnn.ts.extended.opt.onnx"
    x = np.load(SAMPLES / "onnx" / "inputs.npz")["cnn"]
    cap = tk.capture(ref, [x])
    assert cap.runtime == "onnxruntime"
    assert len(cap) == 1 + len(cap.model.graph.ops)  # the input and every node output
    comp = tk.compare(cap, cand)
    df = comp.by_layer()
    matched = df[df["cand_tensor"].notna()]
    assert len(matched) >= 0.7 * len(df)
    assert (matched["max_abs_error"] <= 1e-4).all()
    # the conv layers fused with their ReLU are compared at the ReLU and say so
    for note in df[df["cand_tensor"].isna()]["note"]:
        assert "fused" in note


def test_spill_to_disk_keeps_the_values() -> None:
    path = ZOO / "mobilenet_v1_int8.tflite"
    ram = tk.capture(path)
    disk = tk.capture(path, ram.inputs, budget_bytes=0)
    assert disk.store.disk_bytes > 0 and disk.store.ram_bytes == 0
    assert disk.table()["spilled"].all()
    folder = disk.store.folder
    assert folder is not None and any(folder.iterdir())
    for name in ram:
        assert np.array_equal(ram[name], disk[name])
        if ram.records[name].quantized:
            assert ram[name].dtype == np.int8  # kept raw
        assert disk.value(name).dtype == np.float64
    disk.close()
    assert not folder.exists()


def test_model_explorer_export_attaches_to_every_node(tmp_path: Path) -> None:
    node_data_builder = pytest.importorskip("model_explorer.node_data_builder")
    adapter = pytest.importorskip("model_explorer.builtin_tflite_flatbuffer_adapter")
    path = SAMPLES / "tf" / "tf_cnn.tflite"
    comp = tk.compare(path, SAMPLES / "tf" / "tf_cnn_int8.tflite")
    out = comp.to_model_explorer(tmp_path / "sqnr.json", metric="sqnr_db")
    data = json.loads(Path(out).read_text())
    graphs = adapter.BuiltinTfliteFlatbufferAdapter().convert(str(path), {})
    keys: dict[str, set[str]] = {}
    for collection in graphs["graphCollections"]:
        for graph in collection.graphs:
            ids = keys.setdefault(graph["id"], set())
            for node in graph["nodes"]:
                ids.add(str(node["id"]))
                for meta in node.get("outputsMetadata", []):
                    ids.update(a["value"] for a in meta["attrs"] if a["key"] == "tensor_name")
    (gid, node_data), = data.items()
    assert gid in keys
    assert node_data["results"] and set(node_data["results"]) <= keys[gid]
    model = node_data_builder.ModelNodeData(graphsData={
        g: node_data_builder.GraphNodeData(
            results={k: node_data_builder.NodeDataResult(**v) for k, v in d["results"].items()},
            gradient=[node_data_builder.GradientItem(**x) for x in d["gradient"]])
        for g, d in data.items()})
    again = json.loads(model.to_json_string())
    assert again[gid]["results"] == node_data["results"]
    bt = comp.by_tensor().set_index("ref_tensor")
    for k, v in node_data["results"].items():
        assert v["value"] == pytest.approx(min(200.0, bt.loc[k, "sqnr_db"]))


def test_visq_json(tmp_path: Path) -> None:
    comp = tk.compare(SAMPLES / "tf" / "tf_cnn.tflite", SAMPLES / "tf" / "tf_cnn_int8.tflite")
    data = json.loads(Path(comp.to_visq(tmp_path / "mpeir.json")).read_text())
    assert data["meta"]["metric"] == "MPEIR" and len(data["meta"]["colorscheme"]) == 9
    assert {"b", "e", "c"} == set(data["meta"]["colorscheme"][0])
    (errors,) = data["error"]
    bt = comp.by_tensor()
    ops = bt[bt["ref_op"].notna()]
    assert errors == pytest.approx(dict(zip(ops["ref_tensor"], ops["mpeir"])))


def test_views() -> None:
    comp = tk.compare(SAMPLES / "tf" / "tf_cnn.tflite", SAMPLES / "tf" / "tf_cnn_int8.tflite")
    html = comp._repr_html_()
    assert "NumericsComparison" in html and "isolated" in html
    fig = comp.plot()
    assert len(fig.axes[0].lines) == 2
    assert len(comp.worst(3)) == 3
    assert not comp.by_op().empty
    assert "tf_cnn_int8.tflite" in repr(comp)
    assert "largest tensors" in comp.reference._repr_html_()


def test_bad_input() -> None:
    # two models with nothing in common
    with pytest.raises(NumericsError, match="nothing can be matched"):
        tk.compare(SAMPLES / "cnn.tflite", SAMPLES / "transformer.tflite")
    # wrong input shape or dtype
    with pytest.raises(RuntimeInputError, match="shape"):
        tk.compare(SAMPLES / "cnn.tflite", SAMPLES / "cnn.tflite",
                   [np.zeros((1, 3, 3, 1), np.float32)])
    with pytest.raises(ToolkitError, match="dtype"):
        tk.capture(SAMPLES / "cnn.tflite", [np.zeros((1, 16, 16, 3), np.int32)])
    # a capture that ran on other inputs
    cap = tk.capture(SAMPLES / "cnn.tflite")
    other = {k: v + 1 for k, v in cap.inputs.items()}
    with pytest.raises(NumericsError, match="other inputs"):
        tk.compare(cap, SAMPLES / "cnn.tflite", other)
    with pytest.raises(NumericsError, match="different inputs"):
        tk.compare(cap, tk.capture(SAMPLES / "cnn.tflite", other))
    # a capture of another model
    with pytest.raises(NumericsError, match="nothing can be matched"):
        tk.compare(tk.capture(SAMPLES / "transformer.tflite"), SAMPLES / "cnn.tflite")
    with pytest.raises(NumericsError, match="runtime"):
        tk.capture(SAMPLES / "cnn.tflite", runtime="gpu")
    with pytest.raises(NumericsError, match="already run"):
        tk.compare(cap, SAMPLES / "cnn.tflite", reference_runtime="litert")
    with pytest.raises(NumericsError, match="budget_bytes"):
        tk.capture(SAMPLES / "cnn.tflite", budget_bytes=-1)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    x = np.random.default_rng(0).uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)
    np.savez(tmp_path / "x.npz", image=x)
    ref, cand = SAMPLES / "tf" / "tf_cnn.tflite", SAMPLES / "tf" / "tf_cnn_int8.tflite"
    argv = ["compare", str(ref), str(cand), "--inputs", str(tmp_path / "x.npz"), "--by",
            "layer", "--model-explorer", str(tmp_path / "me.json"), "--csv",
            str(tmp_path / "layers.csv"), "--visq", str(tmp_path / "visq.json")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "layers" in out and "model_1/fc_1/MatMul" in out
    import pandas as pd

    table = pd.read_csv(tmp_path / "layers.csv")
    assert list(table.columns) == LAYER_COLUMNS
    direct = tk.compare(ref, cand, [x]).by_layer()
    assert np.allclose(table["sqnr_db"], direct["sqnr_db"])
    assert json.loads((tmp_path / "me.json").read_text())
    assert json.loads((tmp_path / "visq.json").read_text())["meta"]["metric"] == "MPEIR"
    # the same file in two runtimes
    assert main(["compare", str(cand), str(cand), "--runtime-b", "litert", "--by",
                 "tensor"]) == 0
    assert "litert" in capsys.readouterr().out


def test_striped_compiled_model_capture() -> None:
    """Every command of a compiled model whose ops run in stripes: each output is captured
    once, whole (after its last stripe), and the outputs are those of tk.run."""
    model = tk.load(SAMPLES / "two_branch.tflite")
    compiled = tk.compile(model, target={"buffer_bytes": 2048})
    assert (compiled.commands()["stripes"] > 1).any()
    rng = np.random.default_rng(1)
    inputs = {x.name: rng.uniform(-1, 1, x.shape).astype(np.float32)
              for x in model.graph.inputs}
    cap = tk.capture(compiled, inputs)
    outs = tk.run(compiled, inputs).outputs
    for name, value in outs.items():
        assert np.array_equal(cap[name], value)
    assert {t.name for op in compiled.model.graph.ops for t in op.outputs} == {
        r.name for r in cap.records.values() if not r.is_input}
    comp = tk.compare(model, cap)
    for r in comp.by_layer().dropna(subset=["cand_tensor"]).itertuples():
        scale = float(np.abs(comp.reference.value(r.ref_tensor)).max())
        assert r.max_abs_error <= 1e-5 * scale, r.layer


def test_invoke_observed_reports_each_tensor_once() -> None:
    from toolkit.runtime.interpreter import Interpreter

    model = tk.load(SAMPLES / "transformer.tflite")
    it = Interpreter(model)
    inputs = it.random_inputs(3)
    seen: list[str] = []
    out = it.invoke_observed(inputs, lambda t, v: seen.append(t.name))
    g = model.graph
    assert seen == [t.name for t in g.inputs] + [t.name for op in g.ops for t in op.outputs]
    want = Interpreter(model).invoke(inputs)
    assert all(np.array_equal(out[k], want[k]) for k in want)


# ------------------------------------------------------------------ native artifact
def test_native_capture_of_the_int8_cnn_is_exact_on_every_layer() -> None:
    """The debug build of the generated C++ copies every op's output out; the int8 sample's
    every tensor equals the reference runtime's, layer by layer."""
    path = SAMPLES / "cnn_int8.tflite"
    inputs = tk.load(path).graph.inputs
    rng = np.random.default_rng(5)
    x = {t.name: rng.integers(-128, 128, t.shape).astype(np.int8) for t in inputs}
    nat = tk.capture(path, x, runtime="native")
    ref = tk.capture(path, x)
    assert nat.runtime == "native" and set(nat.records) == set(ref.records)
    assert all(nat[n].dtype == np.int8 for n in nat.records)  # kept raw
    comp = tk.compare(ref, nat, isolated=False)
    assert comp.unmatched().empty
    bt = comp.by_tensor()
    assert len(bt) == len(ref.records) and (bt["max_abs_error"] == 0).all()
    layers = comp.by_layer()
    assert layers["cand_tensor"].notna().all() and (layers["max_abs_error"] == 0).all()


def test_native_capture_of_a_debug_artifact(tmp_path: Path) -> None:
    """tk.codegen(debug=True) makes the debug build; its capture is the model's."""
    path = SAMPLES / "cnn_int8.tflite"
    art = tk.codegen(path, tmp_path / "dbg", name="capture", debug=True)
    assert art.debug and len(art.manifest["debug_tensors"]) == len(tk.load(path).graph.ops)
    nat = tk.capture(art, runtime="native")
    ref = tk.capture(path)
    assert list(nat.records) == list(ref.records)
    assert all(np.array_equal(nat[n], ref[n]) for n in ref.records)
    assert not tk.codegen(path, tmp_path / "plain").debug


def test_native_capture_of_the_float_cnn_within_float_rounding() -> None:
    path = SAMPLES / "cnn.tflite"
    comp = tk.compare(path, path, candidate_runtime="native", isolated=False)
    assert comp.candidate.runtime == "native" and comp.unmatched().empty
    bt = comp.by_tensor()
    assert len(bt) == len(comp.reference.records)
    for r in bt.itertuples():
        scale = float(np.abs(comp.reference.value(r.ref_tensor)).max())
        assert r.max_abs_error <= 1e-5 * max(scale, 1.0), r.ref_tensor
    assert comp.by_layer()["cand_tensor"].notna().all()


def test_native_capture_of_a_striped_compiled_model() -> None:
    """A compiled model's debug build: every command output once, whole after its last
    stripe, as the reference runtime's capture of the same compiled model."""
    model = tk.load(SAMPLES / "two_branch.tflite")
    compiled = tk.compile(model, target={"buffer_bytes": 2048})
    assert (compiled.commands()["stripes"] > 1).any()
    rng = np.random.default_rng(2)
    inputs = {x.name: rng.uniform(-1, 1, x.shape).astype(np.float32)
              for x in model.graph.inputs}
    nat = tk.capture(compiled, inputs, runtime="native")
    ref = tk.capture(compiled, inputs)
    assert nat.compiled is compiled and list(nat.records) == list(ref.records)
    for name in ref.records:
        scale = float(np.abs(ref[name]).max())
        assert float(np.abs(nat[name] - ref[name]).max()) <= 1e-5 * max(scale, 1.0), name


def test_native_capture_refusals(tmp_path: Path) -> None:
    from toolkit.errors import UnsupportedOpError

    tk.codegen(SAMPLES / "cnn_int8.tflite", tmp_path / "art")
    with pytest.raises(NumericsError, match="generated from") as e:
        tk.capture(tmp_path / "art", runtime="native")
    assert e.value.fix
    with pytest.raises(UnsupportedOpError, match="control flow") as u:
        tk.capture(ZOO / "control_flow.tflite", runtime="native")
    assert u.value.fix
