"""ONNX models lowered into the IR op set: every verb on the exports of
``sample_models/onnx/make_fixtures.py`` (real PyTorch exports), checked against ONNX Runtime
(at ``ORT_DISABLE_ALL``, one thread) on the inputs recorded with the fixtures."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, shape_inference
from support import SAMPLES

import toolkit as tk
from toolkit.errors import PartitionError, ToolkitError, UnsupportedOpError
from toolkit.importers.onnx_lower import REFERENCE_OP, lower_onnx, reference_only_ops
from toolkit.ir import Model
from toolkit.layer_names import NO_LAYER

ort = pytest.importorskip("onnxruntime")

D = SAMPLES / "onnx"
CASES = [(m, e) for m in ("cnn", "transformer", "mlp", "lstm", "mnv2_like")
         for e in ("ts", "dynamo")]
INPUTS = dict(np.load(D / "inputs.npz"))


def _ort(path: Path | bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    src = str(path) if isinstance(path, Path) else path
    s = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    """float32 within 1e-5 relative (an absolute floor of 1e-6 of the output's range for
    values near zero, where a relative bound means nothing)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5,
                               atol=1e-6 * max(float(np.max(np.abs(want))), 1.0))


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_reference_runtime_matches_onnxruntime(name: str, exporter: str) -> None:
    path = D / f"{name}.{exporter}.onnx"
    m = tk.load(path)
    x = INPUTS[name]
    want = _ort(path, {"input": x})
    got = tk.run(m, {"input": x}).outputs
    proto = onnx.load(str(path), load_external_data=False)
    for out, w in zip(proto.graph.output, want, strict=True):
        _close(got[out.name], w)
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    assert all(op.type.isupper() for op in low.graph.ops)  # the IR's op set, no ONNX types


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_compiled_and_partitioned_runs_match_the_plain_run(name: str, exporter: str) -> None:
    m = tk.load(D / f"{name}.{exporter}.onnx")
    x = {"input": INPUTS[name]}
    plain = tk.run(m, x).outputs
    compiled = tk.run(tk.compile(m), x).outputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        part = tk.partition(m, {"partition": {"backends": "cpu,npu", "default": "cpu",
                                              "comply": "opcode"},
                                "OPCODE": {"MatMul": "npu", "Gemm": "npu", "Conv": "npu"}})
    assert len(part.parts) >= 2
    parted = tk.run(part, x).outputs
    for k, v in plain.items():
        np.testing.assert_allclose(compiled[k], v, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(parted[k], v, rtol=0, atol=0)


def _formula_macs(proto: onnx.ModelProto) -> dict[str, int]:
    inferred = shape_inference.infer_shapes(proto)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.graph.value_info, *inferred.graph.input,
                        *inferred.graph.output]}
    shapes.update({t.name: list(t.dims) for t in proto.graph.initializer})
    out = {}
    for n in proto.graph.node:
        if n.op_type == "Conv":
            o, cg, kh, kw = shapes[n.input[1]]
            y = shapes[n.output[0]]
            out[n.name] = y[0] * o * y[2] * y[3] * cg * kh * kw
        elif n.op_type == "Gemm":
            trans_b = next((a.i for a in n.attribute if a.name == "transB"), 0)
            b = shapes[n.input[1]]
            k, nn = (b[1], b[0]) if trans_b else (b[0], b[1])
            out[n.name] = shapes[n.input[0]][0] * k * nn
        elif n.op_type == "MatMul":
            a, b = shapes[n.input[0]], shapes[n.input[1]]
            batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
            out[n.name] = math.prod(batch) * a[-2] * a[-1] * b[-1]
    return out


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_macs_of_conv_gemm_matmul_follow_the_formula(name: str, exporter: str) -> None:
    path = D / f"{name}.{exporter}.onnx"
    want = _formula_macs(onnx.load(str(path), load_external_data=False))
    src = tk.compile(tk.load(path)).source_ops().set_index("name")
    for node, macs in want.items():
        assert int(src.loc[node, "macs"]) == macs, node
    assert want or name == "lstm"


@pytest.mark.parametrize("exporter", ["ts", "dynamo"])
@pytest.mark.parametrize(("name", "convs"), [("cnn", 5), ("mnv2_like", 19)])
def test_compiled_nchw_cnn_has_no_transpose_pair(name: str, convs: int, exporter: str) -> None:
    c = tk.compile(tk.load(D / f"{name}.{exporter}.onnx"))
    ops = c.model.graph.ops
    for op in ops:
        if op.type == "TRANSPOSE":
            src = op.inputs[0].producer
            assert src is None or src.type != "TRANSPOSE", op
    # the input's one conversion to NHWC, and the pooled [1,1,1,C] back before Flatten
    assert sum(op.type == "TRANSPOSE" for op in ops) <= 2
    assert sum(op.type in ("CONV_2D", "DEPTHWISE_CONV_2D") for op in ops) == convs
    assert not any(op.type == "TRANSPOSE" and op.inputs[0].producer is not None
                   and op.inputs[0].producer.type in ("CONV_2D", "DEPTHWISE_CONV_2D")
                   for op in ops)


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_origins_lead_back_to_onnx_nodes_and_layers(name: str, exporter: str) -> None:
    m = tk.load(D / f"{name}.{exporter}.onnx")
    low = lower_onnx(m)
    nodes = {oid: op for op in m.graph.ops for oid in op.origins}
    for op in low.graph.ops:
        assert op.origins and op.origins <= set(nodes)
        assert set(op.extra["onnx_op_types"]) == {nodes[o].type for o in op.origins}
    live = low.graph.live_origins()
    for oid, node in nodes.items():
        assert oid in live or oid in low.graph.removed_origins, node
        rec = low.origin(oid)
        assert rec.format == "onnx" and rec.name == (node.extra["node_name"] or rec.name)
        assert rec.layers == m.origin(oid).layers  # the importer's record, as named
        assert rec.exporter in ("pytorch", "pytorch_dynamo")
    convs = [nodes[o] for o in live if nodes[o].type in ("Conv", "Gemm", "MatMul")]
    assert all(o in live for o in nodes if nodes[o].type in ("Conv", "Gemm", "MatMul"))
    assert len(convs) == sum(n.type in ("Conv", "Gemm", "MatMul") for n in nodes.values())


@pytest.mark.parametrize("exporter", ["dynamo", "ts"])
def test_layers_of_nested_sequentials_are_pytorch_modules(exporter: str) -> None:
    import json

    modules = set(json.loads((D / "mnv2_like.modules.json").read_text()))
    m = tk.load(D / f"mnv2_like.{exporter}.onnx")
    low = lower_onnx(m)
    layers = {layer for oid in low.graph.live_origins() for layer in low.origin(oid).layers}
    assert layers and layers <= modules
    assert {"features.2.conv.1.2", "classifier.1"} <= layers  # a ReLU6 deep inside, the head


def _origin_layers(m: Model) -> set[str]:
    """Every layer the Origin records of the model's ONNX nodes name."""
    return {x for op in m.graph.ops for o in op.origins for x in m.origin(o).layers}


@pytest.mark.parametrize(("name", "exporter"), [("cnn", "ts"), ("transformer", "dynamo")])
def test_reference_trace_joins_every_nanosecond_to_onnx_nodes(name: str,
                                                              exporter: str) -> None:
    m = tk.load(D / f"{name}.{exporter}.onnx")
    x = {"input": INPUTS[name]}
    for model in (m, tk.compile(m)):
        run = tk.run(model, x, trace=True, repeat=2)
        att = tk.trace_join(run.trace, model)
        s = att.summary()
        assert s["unattributed_ns"] == 0 and s["attributed_ns"] == s["total_ns"] > 0
        # each layer is one of the ONNX nodes' layers (their Origin records), or none
        known = _origin_layers(m) | {NO_LAYER}
        layers = set(att.by_layer()["layer"])
        assert layers and layers <= known


def test_partition_takes_onnx_op_types_and_reports_unmatched_rules() -> None:
    m = tk.load(D / "cnn.ts.onnx")
    with pytest.warns(UserWarning, match=r"\[OPCODE\] LSTM matches no op"):
        part = tk.partition(m, {"partition": {"backends": "cpu,npu", "default": "cpu",
                                              "comply": "opcode"},
                                "OPCODE": {"Conv": "npu", "LSTM": "npu"}})
    placed = part.ops_table()
    conv = placed[placed["operator"] == "CONV_2D"]
    assert len(conv) == 5 and set(conv["backend"]) == {"npu"}
    assert set(placed[placed["operator"] == "FULLY_CONNECTED"]["backend"]) == {"cpu"}
    with pytest.raises(PartitionError, match="not an op type"):
        tk.partition(m, {"partition": {"backends": "cpu", "default": "cpu"},
                         "OPCODE": {"Konv": "cpu"}})


# ----------------------------------------------------------------- reference-only and errors
def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _f(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def test_unlowered_op_runs_reference_only_and_other_verbs_refuse(tmp_path: Path) -> None:
    proto = _model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                    helper.make_node("Softplus", ["r"], ["s"], name="softplus"),
                    helper.make_node("Mul", ["s", "k"], ["y"], name="scale")],
                   [_f("x", [2, 5])], [_f("y", [2, 5])],
                   [numpy_helper.from_array(np.float32([2.0]), "k")])
    path = tmp_path / "softplus.onnx"
    onnx.save(proto, str(path))
    m = tk.load(path)
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    run = tk.run(m, {"x": x}, trace=True)
    _close(run.outputs["y"], _ort(path, {"x": x})[0])
    low = tk.lower_onnx(m)
    (ref,) = reference_only_ops(low)
    assert ref.custom_code == REFERENCE_OP and "Softplus" in ref.extra["reference_only"]
    assert low.extra["reference_only"][0]["node"] == "softplus"
    att = tk.trace_join(run.trace, m)
    assert att.summary()["unattributed_ns"] == 0
    for verb in (lambda: tk.compile(m), lambda: tk.codegen(m, tmp_path / "gen"),
                 lambda: tk.partition(m, {"partition": {"backends": "cpu",
                                                         "default": "cpu"}})):
        with pytest.raises(UnsupportedOpError, match=r"softplus.*Softplus") as e:
            verb()
        assert "runtime='onnxruntime'" in e.value.fix
    assert not (tmp_path / "gen").exists()


def test_unknown_attribute_names_node_op_opset_and_the_way_out(tmp_path: Path) -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name="odd")
    node.attribute.append(helper.make_attribute("gain", 2.0))
    path = tmp_path / "odd.onnx"
    onnx.save(_model([node], [_f("x", [3])], [_f("y", [3])]), str(path))
    with pytest.raises(ToolkitError, match=r"'odd' \(Relu, opset 17\).*\['gain'\]") as e:
        tk.run(tk.load(path), {"x": np.zeros(3, np.float32)})
    assert "runtime='onnxruntime'" in e.value.fix


def test_free_dimensions_come_from_the_inputs(tmp_path: Path) -> None:
    proto = _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                    helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
                    helper.make_node("Relu", ["r"], ["y"], name="relu")],
                   [_f("x", ["batch", 4])], [_f("y", ["batch", 4])])
    path = tmp_path / "free.onnx"
    onnx.save(proto, str(path))
    m = tk.load(path)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        _close(tk.run(m, {"x": x}).outputs["y"], _ort(path, {"x": x})[0])
    with pytest.raises(ToolkitError, match="'x' has free dimensions") as e:
        tk.compile(m)
    assert "shapes=" in e.value.fix
    low = tk.lower_onnx(m, shapes={"x": (5, 4)})
    assert low.graph.inputs[0].shape == (5, 4)
    assert [op.type for op in low.graph.ops] == ["RESHAPE", "RELU"]  # Shape folded away


def test_no_kernel_fix_points_to_onnxruntime() -> None:
    from toolkit.runtime.kernels import get_kernel

    m = tk.load(D / "cnn.ts.onnx")
    with pytest.raises(UnsupportedOpError) as e:
        get_kernel(m.graph.ops[0])
    assert "runtime='onnxruntime'" in e.value.fix


def test_onnx_ops_doc_is_up_to_date() -> None:
    from toolkit.op_support import onnx_op_support, onnx_op_support_markdown

    doc = Path(__file__).resolve().parent.parent / "docs" / "onnx_ops.md"
    assert doc.read_text() == onnx_op_support_markdown(), \
        "regenerate with: python -m toolkit.op_support --onnx docs/onnx_ops.md"
    df = onnx_op_support().set_index("op")
    assert df.loc["Conv", "lowered"] == "yes" and df.loc["Shape", "lowered"] == "evaluated"
    assert df.loc["GRU", "lowered"] == "yes" and df.loc["Softplus", "lowered"] == "no"


@pytest.mark.parametrize(("name", "exporter"), [("cnn", "ts"), ("mlp", "dynamo"),
                                               ("mnv2_like", "dynamo")])
@pytest.mark.parametrize("kind", ["plain", "compiled"])
def test_native_artifact_matches_and_its_trace_joins_to_onnx_nodes(
        name: str, exporter: str, kind: str, tmp_path: Path) -> None:
    m = tk.load(D / f"{name}.{exporter}.onnx")
    x = {"input": INPUTS[name]}
    plain = tk.run(m, x).outputs
    art = tk.codegen(m if kind == "plain" else tk.compile(m), tmp_path / "gen")
    if kind == "plain":
        assert art.name == f"{name}_{exporter}"
    run = tk.run(art, x, trace=True, repeat=2)
    for k, v in plain.items():
        np.testing.assert_allclose(run.outputs[k], v, rtol=1e-5, atol=1e-6)
    att = tk.trace_join(run.trace, art)
    s = att.summary()
    assert s["unattributed_ns"] == 0 and s["attributed_ns"] == s["total_ns"] > 0
    known = _origin_layers(m) | {NO_LAYER}
    layers = set(att.by_layer()["layer"])
    weighted = {m.origin(o).layers[0] for op in m.graph.ops if op.type in ("Conv", "Gemm")
                for o in op.origins}
    assert layers <= known and weighted <= layers  # every Conv and Gemm's module ran


# ---------------------------------------------------------------------------- quantized models
def _last_dq_scale(proto: onnx.ModelProto) -> float:
    last = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"][-1]
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    return float(inits[last.input[1]])


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_qdq_model_of_ort_quantizer_is_within_one_step_of_ort(name: str) -> None:
    path = D / f"{name}.qdq.onnx"  # made by make_qdq.py with onnxruntime.quantization
    proto = onnx.load(str(path))
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in proto.graph.node}
    x = {"input": INPUTS[name]}
    (want,) = _ort(path, x)
    step = _last_dq_scale(proto)
    m = tk.load(path)
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    kinds = [op.type for op in low.graph.ops]
    assert "QUANTIZE" in kinds and "DEQUANTIZE" in kinds
    assert all(op.inputs[1].dtype == np.float32 for op in low.graph.ops  # weights dequantized
               if op.type in ("CONV_2D", "FULLY_CONNECTED"))
    for model in (m, tk.compile(m)):
        got = tk.run(model, x).outputs[proto.graph.output[0].name]
        assert np.max(np.abs(got - want)) <= step * 1.0001


def _qlinear_model() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    arr = numpy_helper.from_array
    inits = [arr(np.float32(0.02), "xs"), arr(np.int8(3), "xz"),
             arr(rng.integers(-100, 100, (8, 3, 3, 3)).astype(np.int8), "w"),
             arr(np.float32(0.01), "ws"), arr(np.int8(0), "wz"), arr(np.float32(0.05), "ys"),
             arr(np.int8(-2), "yz"), arr(rng.integers(-500, 500, 8).astype(np.int32), "b"),
             arr(np.int64([1, -1]), "shape"),
             arr(rng.integers(-100, 100, (8 * 5 * 7, 10)).astype(np.int8), "wm"),
             arr(np.float32(0.003), "wms"), arr(np.int8(1), "wmz"), arr(np.float32(0.2), "zs"),
             arr(np.int8(0), "zz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quant"),
             helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz",
                                              "b"], ["yq"], name="qconv", pads=[1, 1, 0, 0]),
             helper.make_node("Reshape", ["yq", "shape"], ["flat"], name="flatten"),
             helper.make_node("QLinearMatMul", ["flat", "ys", "yz", "wm", "wms", "wmz", "zs",
                                                "zz"], ["zq"], name="qmatmul"),
             helper.make_node("DequantizeLinear", ["zq", "zs", "zz"], ["out"], name="dequant")]
    return _model(nodes, [_f("x", [1, 3, 6, 8])], [_f("out", [1, 10])], inits, opset=13)


def test_qlinear_conv_and_matmul_are_within_one_step_of_ort(tmp_path: Path) -> None:
    path = tmp_path / "qlinear.onnx"
    onnx.save(_qlinear_model(), str(path))
    x = np.random.default_rng(2).standard_normal((1, 3, 6, 8)).astype(np.float32)
    (want,) = _ort(path, {"x": x})
    m = tk.load(path)
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    assert {"CONV_2D", "FULLY_CONNECTED", "QUANTIZE"} <= {op.type for op in low.graph.ops}
    got = tk.run(m, {"x": x}).outputs["out"]
    assert np.max(np.abs(got - want)) <= 0.2 * 1.0001
    macs = tk.compile(m).source_ops().set_index("name")["macs"]
    assert macs["qconv"] == 8 * 5 * 7 * 3 * 3 * 3 and macs["qmatmul"] == 280 * 10


# ---------------------------------------------------------------------------------- If / Loop
def _control_model(cond_from_input: bool) -> onnx.ModelProto:
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="then_relu"),
                              helper.make_node("Mul", ["r", "two"], ["t_out"], name="then_mul")],
                             "then", [], [_f("t_out", [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")],
                              "else", [], [_f("e_out", [2, 3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body_add")], "body",
        [helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
         _f("acc_in", [2, 3])],
        [helper.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
         _f("acc_out", [2, 3])])
    cond = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="positive")] \
        if cond_from_input else \
        [helper.make_node("Shape", ["x"], ["shp"], name="shape"),
         helper.make_node("ReduceProd", ["shp"], ["n"], name="count", keepdims=0),
         helper.make_node("Greater", ["n", "five"], ["c"], name="big")]
    nodes = [*cond,
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then,
                              else_branch=other),
             helper.make_node("Loop", ["trip", "true", "y"], ["z"], name="repeat", body=body)]
    inits = [numpy_helper.from_array(np.float32(2), "two"),
             numpy_helper.from_array(np.float32(0), "zero"),
             numpy_helper.from_array(np.int64(5), "five"),
             numpy_helper.from_array(np.int64(3), "trip"),
             numpy_helper.from_array(np.bool_(True), "true")]
    return _model(nodes, [_f("x", [2, 3])], [_f("z", [2, 3])], inits)


@pytest.mark.parametrize("cond_from_input", [True, False], ids=["computed", "constant"])
def test_if_lowers_and_loop_runs_reference_only(cond_from_input: bool, tmp_path: Path) -> None:
    path = tmp_path / "control.onnx"
    onnx.save(_control_model(cond_from_input), str(path))
    m = tk.load(path)
    low = tk.lower_onnx(m)
    kinds = [op.kind for op in low.graph.ops]
    assert [r["op_type"] for r in low.extra["reference_only"]] == ["Loop"]
    branch = next(iter(next(o for o in m.graph.ops if o.type == "If").origins))
    if cond_from_input:  # both branches, then one SELECT_V2 per output with the If's origin
        assert {"RELU", "NEG", "SELECT_V2"} <= set(kinds)
        assert next(op for op in low.graph.ops if op.type == "SELECT_V2").origins == {branch}
    else:  # 6 elements > 5: the then branch, inlined
        assert "NEG" not in kinds and "SELECT_V2" not in kinds and "RELU" in kinds
        assert "then_branch inlined" in low.graph.removed_origins[branch]
    for sign in (1.0, -1.0):
        x = sign * np.abs(np.random.default_rng(0).standard_normal((2, 3))).astype(np.float32)
        run = tk.run(m, {"x": x}, trace=True)
        _close(run.outputs["z"], _ort(path, {"x": x})[0])
        assert tk.trace_join(run.trace, m).summary()["unattributed_ns"] == 0
    with pytest.raises(UnsupportedOpError, match=r"repeat \(Loop\)"):
        tk.compile(m)


# ------------------------------------------------------------------------------- recurrent ops
@pytest.mark.parametrize(("op", "direction", "lbr"), [
    ("LSTM", "forward", None), ("LSTM", "reverse", None), ("LSTM", "bidirectional", None),
    ("LSTM+", "forward", None), ("LSTM+", "bidirectional", None),
    ("GRU", "forward", 0), ("GRU", "forward", 1), ("GRU", "reverse", 1),
    ("GRU", "bidirectional", 0)])
def test_recurrent_ops_lower_in_every_direction(op: str, direction: str, lbr: int | None,
                                                tmp_path: Path) -> None:
    """``LSTM+``: an LSTM with peepholes, initial cell state and its Y_c read."""
    full = op == "LSTM+"
    op = "LSTM" if full else op
    rng = np.random.default_rng(3)
    steps, batch, width, hidden = 5, 2, 4, 3
    gates = 4 if op == "LSTM" else 3
    dirs = 2 if direction == "bidirectional" else 1
    arr = numpy_helper.from_array
    inits = [arr(rng.standard_normal((dirs, gates * hidden, width)).astype(np.float32), "W"),
             arr(rng.standard_normal((dirs, gates * hidden, hidden)).astype(np.float32), "R"),
             arr(rng.standard_normal((dirs, 2 * gates * hidden)).astype(np.float32), "B"),
             arr(rng.standard_normal((dirs, batch, hidden)).astype(np.float32), "h0")]
    kw: dict[str, object] = {"hidden_size": hidden, "direction": direction}
    if lbr is not None:
        kw["linear_before_reset"] = lbr
    ins, outs = ["x", "W", "R", "B", "", "h0"], ["Y", "Y_h"]
    if full:
        inits += [arr(rng.standard_normal((dirs, batch, hidden)).astype(np.float32), "c0"),
                  arr(rng.standard_normal((dirs, 3 * hidden)).astype(np.float32), "P")]
        ins, outs = [*ins, "c0", "P"], [*outs, "Y_c"]
    node = helper.make_node(op, ins, outs, name="rnn", **kw)
    path = tmp_path / "rnn.onnx"
    onnx.save(_model([node], [_f("x", [steps, batch, width])], [_f(o, None) for o in outs],
                     inits), str(path))
    x = rng.standard_normal((steps, batch, width)).astype(np.float32)
    want = _ort(path, {"x": x})
    m = tk.load(path)
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    kinds = {o.type for o in low.graph.ops}
    assert ("UNIDIRECTIONAL_SEQUENCE_LSTM" in kinds) == (op == "LSTM" and not full)
    got = tk.run(m, {"x": x}).outputs
    for name, w in zip(outs, want, strict=True):
        _close(got[name], w)


def test_one_dimensional_convolution_and_pooling(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    arr = numpy_helper.from_array
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[2, 1],
                              strides=[2], kernel_shape=[4]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2],
                              strides=[2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], name="dw", group=6,
                              kernel_shape=[3], pads=[1, 1]),
             helper.make_node("AveragePool", ["c2"], ["y"], name="pool2", kernel_shape=[3])]
    inits = [arr(rng.standard_normal((6, 5, 4)).astype(np.float32), "w1"),
             arr(rng.standard_normal(6).astype(np.float32), "b1"),
             arr(rng.standard_normal((6, 1, 3)).astype(np.float32), "w2")]
    path = tmp_path / "conv1d.onnx"
    onnx.save(_model(nodes, [_f("x", [2, 5, 20])], [_f("y", [2, 6, 3])], inits), str(path))
    x = rng.standard_normal((2, 5, 20)).astype(np.float32)
    m = tk.load(path)
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"} <= {
        op.type for op in low.graph.ops}
    _close(tk.run(m, {"x": x}).outputs["y"], _ort(path, {"x": x})[0])
    macs = tk.compile(m).source_ops().set_index("name")["macs"]
    assert macs["conv1"] == 2 * 6 * 10 * 5 * 4 and macs["dw"] == 2 * 6 * 5 * 3


@pytest.mark.parametrize(("k", "stride", "pads", "out_pad"), [
    (4, 2, [1, 1, 1, 1], [0, 0]), (3, 2, [1, 1, 1, 1], [1, 1]), (2, 2, [0, 0, 0, 0], [0, 0]),
    (3, 1, [0, 1, 2, 1], [0, 0])])
def test_conv_transpose_crops_its_pads(k: int, stride: int, pads: list[int],
                                       out_pad: list[int], tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    arr = numpy_helper.from_array
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up",
                            kernel_shape=[k, k], strides=[stride, stride], pads=pads,
                            output_padding=out_pad)
    inits = [arr(rng.standard_normal((4, 6, k, k)).astype(np.float32), "w"),
             arr(rng.standard_normal(6).astype(np.float32), "b")]
    path = tmp_path / "up.onnx"
    onnx.save(_model([node], [_f("x", [1, 4, 5, 7])], [_f("y", None)], inits), str(path))
    x = rng.standard_normal((1, 4, 5, 7)).astype(np.float32)
    m = tk.load(path)
    assert reference_only_ops(lower_onnx(m)) == []
    _close(tk.run(m, {"x": x}).outputs["y"], _ort(path, {"x": x})[0])


def test_saved_lowering_keeps_the_onnx_nodes_as_origins(tmp_path: Path) -> None:
    m = tk.load(D / "cnn.ts.onnx")
    saved = tk.load(tk.save(m, tmp_path / "cnn.circle"))
    x = {"input": INPUTS["cnn"]}
    np.testing.assert_array_equal(tk.run(saved, x).outputs["output"],
                                  tk.run(m, x).outputs["output"])
    nodes = {oid: op.extra["node_name"] for op in m.graph.ops for oid in op.origins}
    assert {saved.source_table[o] for op in saved.graph.ops for o in op.origins} <= set(
        nodes.values())


def test_reference_and_ort_joins_name_the_same_layers() -> None:
    m = tk.load(D / "mnv2_like.dynamo.onnx")
    x = {"input": INPUTS["mnv2_like"]}
    ours = tk.run(m, x, trace=True, repeat=2)
    att = tk.trace_join(ours.trace, m)
    low = lower_onnx(m)
    mine = {layer for sid in att.by_source_op()["source_id"]
            for layer in low.origin(int(sid)).layers or (NO_LAYER,)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ORT's profiler overhead note
        ort_run = tk.run(m, x, runtime="onnxruntime", trace=True, repeat=2)
    theirs = set(tk.trace_join(ort_run.trace, m).by_layer()["layer"])
    assert mine and mine == theirs


def test_if_with_a_branch_that_does_not_lower_runs_whole_in_onnx_reference(
        tmp_path: Path) -> None:
    then = helper.make_graph([helper.make_node("Softplus", ["x"], ["t_out"], name="soft")],
                             "then", [], [_f("t_out", None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="neg")],
                              "else", [], [_f("e_out", None)])
    nodes = [helper.make_node("Equal", ["mode", "one"], ["c"], name="is_one"),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then,
                              else_branch=other)]
    proto = _model(nodes, [_f("x", ["n"]),
                           helper.make_tensor_value_info("mode", onnx.TensorProto.INT64, [])],
                   [_f("y", None)], [numpy_helper.from_array(np.int64(1), "one")])
    path = tmp_path / "if_ref.onnx"
    onnx.save(proto, str(path))
    m = tk.load(path)
    for mode, n in ((1, 4), (0, 6)):
        feeds = {"x": np.linspace(-2, 2, n, dtype=np.float32), "mode": np.array(mode)}
        run = tk.run(m, feeds, trace=True)
        _close(run.outputs["y"], _ort(path, feeds)[0])
        assert tk.trace_join(run.trace, m).summary()["unattributed_ns"] == 0
        low = tk.lower_onnx(m, shapes={"x": (n,)})
        assert [r["node"] for r in low.extra["reference_only"]] == ["branch"]


# ------------------------------------------------------------- If from a real exporter
def test_scripted_branch_exported_as_if_runs_both_ways_and_names_its_modules() -> None:
    """``gated.ts.onnx``: a scripted module branching on its data (``pos`` or ``neg`` after
    ``stem``), the TorchScript exporter's ``If`` with the branches as subgraphs."""
    import json

    path = D / "gated.ts.onnx"
    proto = onnx.load(str(path))
    assert [n.op_type for n in proto.graph.node].count("If") == 1
    modules = dict(json.loads((D / "MANIFEST.json").read_text())["named_modules"]["gated"])
    leaves = {p for p in modules if not any(q.startswith(p + ".") for q in modules)}
    m = tk.load(path)
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    feeds = dict(np.load(D / "inputs_gated.npz"))
    outs = {}
    for branch in ("pos", "neg"):
        x = {"input": feeds[f"gated_{branch}"]}
        (want,) = _ort(path, x)
        outs[branch] = tk.run(m, x).outputs["output"]
        _close(outs[branch], want)
        for model in (m, tk.compile(m)):
            run = tk.run(model, x, trace=True, repeat=2)
            att = tk.trace_join(run.trace, model)
            s = att.summary()
            assert s["unattributed_ns"] == 0 and s["attributed_ns"] == s["total_ns"] > 0
            by_layer = att.by_layer()
            timed = set(by_layer[by_layer["total_ns"] > 0]["layer"])
            # every module that runs an op, the branches' included; the rest is the top
            # module's own code (the sum, the comparison, the If's select)
            assert timed - {NO_LAYER} == leaves
            src = att.by_source_op()
            top = set(src[(src["layers"] == NO_LAYER) & (src["total_ns"] > 0)]["name"])
            assert top and all(n.count("/") == 1 for n in top)
    # each input takes its branch: the stem's output sums above zero for ``pos`` only
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    for branch, sign in (("pos", 1), ("neg", -1)):
        y = feeds[f"gated_{branch}"] @ inits["stem.weight"].T + inits["stem.bias"]
        assert np.sign(y.sum()) == sign
    assert not np.allclose(outs["pos"], outs["neg"])


# ------------------------------------------------------------------- a tf2onnx export
def test_tf2onnx_export_of_a_zoo_model_runs_and_names_its_keras_layers() -> None:
    """``ds_cnn_b1.tf2onnx.onnx``: the zoo's DS-CNN (``make_zoo.py``'s build, its weights)
    exported by tf2onnx (``make_tf2onnx.py``), against ONNX Runtime, Keras's own output and the
    zoo's ``.tflite`` of the same model; each layer the join reports is a Keras layer."""
    import json

    path = D / "ds_cnn_b1.tf2onnx.onnx"
    rec = json.loads((D / "tf2onnx.json").read_text())
    x = {"mfcc": np.load(D / "inputs_tf2onnx.npz")["mfcc"]}
    m = tk.load(path)
    assert {m.origin(o).exporter for op in m.graph.ops for o in op.origins} == {"tf2onnx"}
    low = lower_onnx(m)
    assert reference_only_ops(low) == []
    (want,) = _ort(path, x)
    got = tk.run(m, x).outputs
    (out,) = got.values()
    _close(out, want)
    np.testing.assert_allclose(out, np.float32(rec["keras_output"]), rtol=1e-5, atol=1e-6)
    tfl = tk.run(tk.load(SAMPLES / "zoo" / "ds_cnn_b1.tflite"), [x["mfcc"]]).outputs
    np.testing.assert_allclose(next(iter(tfl.values())), out, rtol=1e-5, atol=1e-6)
    # the Keras layers that own an op: all but the input and the Flatten of a [1, 16] (an
    # identity tf2onnx writes no node for)
    keras = dict(map(tuple, rec["keras_layers"]))
    owning = {name for name, cls in keras.items() if cls not in ("InputLayer", "Flatten")}
    for model in (m, tk.compile(m)):
        run = tk.run(model, x, trace=True, repeat=2)
        att = tk.trace_join(run.trace, model)
        s = att.summary()
        assert s["unattributed_ns"] == 0 and s["attributed_ns"] == s["total_ns"] > 0
        by_layer = att.by_layer()
        assert set(by_layer[by_layer["total_ns"] > 0]["layer"]) == owning
        assert NO_LAYER not in set(by_layer["layer"])
    # tf2onnx rebuilds the depthwise convolutions NCHW under new names (Conv__N): the layer
    # of the bias they read (``ds_cnn_1/block_0_dw_1/Squeeze:0``)
    dw = [op for op in m.graph.ops if op.type == "Conv" and op.extra["node_name"].startswith(
        "Conv__")]
    assert len(dw) == 4
    assert sorted(m.origin(min(op.origins)).layers for op in dw) == [
        (f"block_{i}_dw",) for i in range(4)]
