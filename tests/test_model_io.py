"""Model I/O: load -> save keeps everything; LiteRT gives bit-identical outputs."""

from __future__ import annotations

import numpy as np
import pytest
from circle_schema.v0_10 import circle as fb
from support import ALL_TFLITE, SAMPLES, TF_TFLITE, litert_run

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.formats.flatbuffer_write import write_model
from toolkit.ir import SignatureDef


def test_tf_converter_models_are_present() -> None:
    # the round-trip requirement is about files written by TensorFlow's converter
    assert len(TF_TFLITE) >= 2, "sample_models/tf/ must hold converter-written models"


@pytest.mark.parametrize("path", ALL_TFLITE, ids=lambda p: p.name)
def test_roundtrip_litert_bit_identical(path, tmp_path) -> None:
    model = tk.load(path)
    out = tk.save(model, tmp_path / path.name)
    for seed in range(3):
        a = litert_run(path, seed=seed)
        b = litert_run(out, seed=seed)
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].dtype == b[k].dtype
            np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("path", ALL_TFLITE, ids=lambda p: p.name)
def test_roundtrip_keeps_everything(path, tmp_path) -> None:
    m1 = tk.load(path)
    m2 = tk.load(tk.save(m1, tmp_path / path.name))
    assert m1.version == m2.version and m1.description == m2.description
    assert m1.metadata == m2.metadata
    assert len(m1.subgraphs) == len(m2.subgraphs)
    assert [(s.key, s.subgraph_index, [(n, t.name) for n, t in s.inputs],
             [(n, t.name) for n, t in s.outputs]) for s in m1.signature_defs] == \
           [(s.key, s.subgraph_index, [(n, t.name) for n, t in s.inputs],
             [(n, t.name) for n, t in s.outputs]) for s in m2.signature_defs]
    for g1, g2 in zip(m1.subgraphs, m2.subgraphs):
        assert g1.name == g2.name
        assert [t.name for t in g1.inputs] == [t.name for t in g2.inputs]
        assert [t.name for t in g1.outputs] == [t.name for t in g2.outputs]
        assert len(g1.tensors) == len(g2.tensors)
        for t1, t2 in zip(g1.tensors, g2.tensors):
            assert (t1.name, t1.shape, t1.type_code, t1.shape_signature, t1.is_variable) == \
                   (t2.name, t2.shape, t2.type_code, t2.shape_signature, t2.is_variable)
            assert (t1.data is None) == (t2.data is None)
            if t1.data is not None:
                assert t1.data.tobytes() == t2.data.tobytes()
            assert (t1.quant is None) == (t2.quant is None)
            if t1.quant is not None:
                np.testing.assert_array_equal(t1.quant.scale, t2.quant.scale)
                np.testing.assert_array_equal(t1.quant.zero_point, t2.quant.zero_point)
                assert t1.quant.quantized_dimension == t2.quant.quantized_dimension
        for o1, o2 in zip(g1.ops, g2.ops):
            assert (o1.type, o1.custom_code, o1.version, o1.origins) == \
                   (o2.type, o2.custom_code, o2.version, o2.origins)
            assert [t and t.name for t in o1.inputs] == [t and t.name for t in o2.inputs]
            assert _opts(o1.options) == _opts(o2.options)


def _opts(o: object) -> dict | None:
    if o is None:
        return None
    return {k: (list(v) if isinstance(v, (np.ndarray, list)) else v) for k, v in vars(o).items()}


def test_constant_data_is_zero_copy(samples_dir) -> None:
    m = tk.load(samples_dir / "cnn.tflite")
    consts = [t for t in m.graph.tensors if t.is_const]
    assert consts
    for t in consts:
        assert not t.data.flags.owndata
        assert not t.data.flags.writeable
    # views of the memory-mapped file, not copies
    base = consts[0].data
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    assert not isinstance(base, np.ndarray)


def test_circle_only_op_and_extended_codes_roundtrip(tmp_path) -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 3])
    y = mb.instance_norm(x, mb.const("g", np.ones(3)), mb.const("b", np.zeros(3)), 1e-3,
                         name="inorm")
    z = mb.op("GELU", [y], y.shape, name="gelu")  # builtin code 150: the extended rule
    mb.output(z)
    m = mb.build()
    with pytest.raises(tk.ToolkitError, match="circle-only"):
        tk.save(m, tmp_path / "m.tflite")
    back = tk.load(tk.save(m, tmp_path / "m.circle"))
    assert [o.type for o in back.graph.ops] == ["INSTANCE_NORM", "GELU"]
    assert back.graph.ops[0].options.epsilon == pytest.approx(1e-3)
    raw = fb.Model.Model.GetRootAs((tmp_path / "m.circle").read_bytes(), 0)
    codes = {(raw.OperatorCodes(i).DeprecatedBuiltinCode(), raw.OperatorCodes(i).BuiltinCode())
             for i in range(raw.OperatorCodesLength())}
    assert codes == {(-2, -2), (127, 150)}


def test_metadata_signatures_and_shape_signature_kept(tmp_path) -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    x.shape_signature = (-1, 4)
    y = mb.unary("RELU", x, name="y")
    mb.output(y)
    m = mb.build()
    m.metadata["min_runtime_version"] = b"1.5.0\0"
    m.signature_defs.append(SignatureDef("serving_default", 0, [("in", x)], [("out", y)]))
    for ext in ("tflite", "circle"):
        back = tk.load(tk.save(m, tmp_path / f"m.{ext}"))
        assert back.metadata["min_runtime_version"] == b"1.5.0\0"
        sd = back.signature_defs[0]
        assert (sd.key, sd.inputs[0][0], sd.inputs[0][1].name, sd.outputs[0][1].name) == \
               ("serving_default", "in", "x", "y")
        assert back.graph.inputs[0].shape_signature == (-1, 4)


def test_tflite_debug_metadata_index_slot(tmp_path) -> None:
    # circle's SubGraph keeps a deprecated data_format where TFLite has debug_metadata_index
    m = tk.load(SAMPLES / "Net_InstanceNorm_003.tflite")
    m.graph.extra["debug_metadata_index"] = 3
    data = bytes(write_model(m, "tflite"))
    sg = fb.SubGraph.SubGraph()
    root = fb.Model.Model.GetRootAs(data, 0)
    sg = root.Subgraphs(0)
    o = sg._tab.Offset(14)  # TFLite's field 5
    assert o and sg._tab.Get(__import__("flatbuffers").number_types.Int32Flags,
                             o + sg._tab.Pos) == 3
    assert tk.load(data).graph.extra["debug_metadata_index"] == 3
    litert_run(data)  # LiteRT accepts it


def test_ops_and_tensors_tables(samples_dir) -> None:
    m = tk.load(samples_dir / "Net_InstanceNorm_003.circle")
    ops = m.ops_table()
    assert list(ops["name"]) == ["Mean_of_ifm", "SquaredDifference", "Mean_as_variance",
                                 "Add_as_variance", "Pow", "Sub", "Div", "Mul_gamma",
                                 "Add_as_terminal"]
    assert list(ops["op_type"])[:2] == ["MEAN", "SQUARED_DIFFERENCE"]
    assert ops.loc[8, "activation"] == "RELU"
    assert ops.loc[6, "inputs"] == ["Sub", "Pow"]
    t = m.tensors_table()
    assert t.set_index("name").loc["Input", "kind"] == "input"
    assert t.set_index("name").loc["Gamma", "kind"] == "constant"
    assert t.set_index("name").loc["Add_as_terminal", "shape"] == (1, 8, 6, 12)
