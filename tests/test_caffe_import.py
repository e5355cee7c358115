"""The Caffe importer against OpenCV's DNN Caffe reader, LiteRT and Caffe's own formulas.

Networks are written in code (tests/caffe_nets.py) with the toolkit's own writer, in the new
and the V1 format, as deploy prototxt + caffemodel and as a self-contained caffemodel.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import toolkit as tk
from toolkit.errors import ToolkitError
from toolkit.formats.caffe import (
    caffe_pb2,
    parse_binary,
    parse_text,
    write_binary,
    write_text,
)
from toolkit.formats.caffe.writer import NetBuilder
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import save
from toolkit.importers.caffe import SUPPORTED_LAYERS, import_net, load_caffe
from toolkit.ir import Model
from toolkit.runtime.interpreter import run_model

sys.path.insert(0, str(Path(__file__).parent))
from caffe_nets import NETS, V1_NETS
from support import litert_run

CASES = [(n, False) for n in NETS] + [(n, True) for n in V1_NETS]
OPENCV_OUTPUTS = Path(__file__).parent / "fixtures" / "caffe" / "opencv_outputs.npz"


def _close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5) -> None:
    """Equal shapes and values within ``rtol`` of the reference's largest magnitude."""
    assert got.shape == want.shape
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * max(scale, 1e-30))


def _inputs(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t.name: rng.uniform(-1, 1, t.shape).astype(np.float32) for t in model.graph.inputs}


def _outputs(model: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return run_model(model, inputs).outputs


def _layers(net: Any) -> list[Any]:
    return list(net.layer) + list(net.layers)


def _opencv(prototxt: Path, caffemodel: Path, net: Any, inputs: dict[str, np.ndarray],
            outputs: list[str]) -> dict[str, np.ndarray]:
    """OpenCV's outputs for the named blobs (OpenCV names outputs by their layer)."""
    cv2 = pytest.importorskip("cv2")
    writer = {t: lay.name for lay in _layers(net) for t in lay.top}
    cvnet = cv2.dnn.readNetFromCaffe(str(prototxt), str(caffemodel))
    for name, x in inputs.items():
        cvnet.setInput(x, name)
    res = cvnet.forward([writer[o] for o in outputs])
    return dict(zip(outputs, res))


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}{'_v1' if v else ''}" for n, v in CASES])
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, Any]:
    name, v1 = request.param
    nb = NETS[name](v1)
    d = tmp_path_factory.mktemp(f"caffe_{name}_{int(v1)}")
    pt, cm = d / f"{name}.prototxt", d / f"{name}.caffemodel"
    nb.save(pt, cm)
    model = tk.load(pt, weights=cm)  # the front door routes Caffe files to the importer
    inputs = _inputs(model)
    outs = _outputs(model, inputs)
    return dict(name=name, v1=v1, nb=nb, net=nb.net(), dir=d, prototxt=pt, caffemodel=cm,
                model=model, inputs=inputs, outputs=outs)


def test_matches_opencv(case: dict[str, Any]) -> None:
    """Live: OpenCV's DNN module reads the same files and computes the same outputs."""
    ref = _opencv(case["prototxt"], case["caffemodel"], case["net"], case["inputs"],
                  list(case["outputs"]))
    assert ref
    for name, want in ref.items():
        _close(case["outputs"][name], want)


def test_matches_committed_opencv_outputs(case: dict[str, Any]) -> None:
    """OpenCV's outputs, committed by tests/fixtures/caffe/make_opencv_outputs.py."""
    tag = f"{case['name']}{'_v1' if case['v1'] else ''}"
    with np.load(OPENCV_OUTPUTS) as z:
        ref = {k.split("/", 1)[1]: z[k] for k in z.files if k.split("/", 1)[0] == tag}
    assert ref.keys() == case["outputs"].keys()
    for name, want in ref.items():
        _close(case["outputs"][name], want)


def test_names_and_shapes_are_caffe_blobs(case: dict[str, Any]) -> None:
    g = case["model"].graph
    net = case["net"]
    inputs = list(net.input) or [lay.top[0] for lay in net.layer if lay.type == "Input"]
    assert [t.name for t in g.inputs] == inputs
    for t in g.inputs:
        assert len(t.shape) != 4 or t.shape[1] < 32  # N, C, H, W: channels second
    tops = {t for lay in _layers(net) for t in lay.top}
    assert {t.name for t in g.outputs} <= tops
    if case["name"] == "squeezenet":
        assert case["outputs"]["prob"].shape == (1, 10, 1, 1)


def test_self_contained_caffemodel(case: dict[str, Any]) -> None:
    """The caffemodel alone (layers and blobs) gives the same model and outputs."""
    alone = tk.load(case["caffemodel"])
    outs = _outputs(alone, case["inputs"])
    assert outs.keys() == case["outputs"].keys()
    for k, v in outs.items():
        np.testing.assert_array_equal(v, case["outputs"][k])


def _layer_names(net: Any) -> list[str]:
    names = [lay.name for lay in _layers(net)]
    return (["input"] if len(net.input) else []) + names


def test_every_layer_is_an_origin(case: dict[str, Any], tmp_path: Path) -> None:
    model: Model = case["model"]
    g = model.graph
    layers = _layer_names(case["net"])
    assert sorted(model.source_table.values()) == sorted(layers)
    live = {oid for op in g.ops for oid in op.origins}
    removed = set(g.removed_origins)
    assert live | removed == set(model.source_table)
    assert not live & removed
    types = {lay.name: lay.type for lay in case["net"].layer}
    for oid in removed:  # only layers that compute nothing at inference
        assert types.get(model.source_table[oid], "V1") in ("Dropout", "Split", "V1")
        assert "Dropout" in g.removed_origins[oid] or "Split" in g.removed_origins[oid]
    # in-place layers own ops of their own
    for lay in case["net"].layer:
        if list(lay.bottom) == list(lay.top) and lay.type in ("ReLU", "BatchNorm", "Scale"):
            oid = layers.index(lay.name)
            assert oid in live, lay.name
    # the thread survives writing and reading a .circle file
    path = save(model, tmp_path / "m.circle")
    back = load(path)
    assert sorted(back.source_table.values()) == sorted(layers)
    back_live = {back.source_table[o] for op in back.graph.ops for o in op.origins}
    assert back_live == {model.source_table[o] for o in live}
    outs = _outputs(back, case["inputs"])
    for k, v in case["outputs"].items():
        np.testing.assert_array_equal(outs[k], v)


def test_litert_runs_the_saved_tflite(case: dict[str, Any], tmp_path: Path) -> None:
    path = save(case["model"], tmp_path / "m.tflite")
    got = litert_run(path, dict(case["inputs"]))
    assert got.keys() == case["outputs"].keys()
    for k, v in case["outputs"].items():
        _close(got[k], v)


# ----------------------------------------------------------- Caffe's own formulas
def _single(layer_type: str, shape: list[int], blobs: list[np.ndarray] = (),  # type: ignore[assignment]
            **params: Any) -> Model:
    nb = NetBuilder("one")
    nb.input("data", shape)
    nb.layer("the_layer", layer_type, ["data"], ["out"], blobs=list(blobs), **params)
    return import_net(nb.net())


def test_lrn_with_k_follows_caffe() -> None:
    """OpenCV ignores LRN's ``k``; check it against Caffe's formula."""
    x = np.random.default_rng(1).uniform(-2, 2, (1, 7, 3, 4)).astype(np.float32)
    m = _single("LRN", list(x.shape),
                lrn_param={"local_size": 3, "alpha": 0.3, "beta": 0.6, "k": 2.5})
    got = _outputs(m, {"data": x})["out"]
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    window = sum(sq[:, i:i + 7] for i in range(3))
    want = x / (2.5 + 0.3 / 3 * window) ** 0.6
    _close(got, want.astype(np.float32))


def test_lrn_within_channel_follows_caffe() -> None:
    x = np.random.default_rng(8).uniform(-2, 2, (1, 3, 7, 6)).astype(np.float32)
    m = _single("LRN", list(x.shape), lrn_param={"local_size": 3, "alpha": 0.7, "beta": 0.75,
                                                 "k": 3.0, "norm_region": "WITHIN_CHANNEL"})
    got = _outputs(m, {"data": x})["out"]
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (0, 0), (1, 1), (1, 1)))
    mean = sum(sq[:, :, i:i + 7, j:j + 6] for i in range(3) for j in range(3)) / 9
    _close(got, (x / (1 + 0.7 * mean) ** 0.75).astype(np.float32))  # Caffe ignores k here


def test_argmax_follows_caffe(tmp_path: Path) -> None:
    """ArgMax (OpenCV's Caffe reader has none): indices as floats, in the runtime and LiteRT."""
    x = np.random.default_rng(2).standard_normal((2, 5, 3, 4)).astype(np.float32)
    m = _single("ArgMax", list(x.shape), argmax_param={"axis": 1})
    got = _outputs(m, {"data": x})["out"]
    np.testing.assert_array_equal(got, np.argmax(x, axis=1)[:, None].astype(np.float32))
    lite = litert_run(save(m, tmp_path / "argmax.tflite"), {"data": x})
    np.testing.assert_array_equal(lite["out"], got)
    m = _single("ArgMax", list(x.shape))  # no axis: over C*H*W, output [N, 1, 1, 1]
    got = _outputs(m, {"data": x})["out"]
    np.testing.assert_array_equal(got, np.argmax(x.reshape(2, -1), 1).reshape(2, 1, 1, 1)
                                  .astype(np.float32))


def test_pooling_ceil_rounding_and_divisor() -> None:
    """AVE pooling with pad: Caffe divides by the window clipped to the padded input."""
    x = np.random.default_rng(3).standard_normal((1, 2, 6, 6)).astype(np.float32)
    m = _single("Pooling", list(x.shape),
                pooling_param={"pool": "AVE", "kernel_size": 3, "stride": 2, "pad": 1})
    got = _outputs(m, {"data": x})["out"]
    assert got.shape == (1, 2, 4, 4)  # ceil((6 + 2 - 3) / 2) + 1 = 4
    want = np.zeros_like(got)
    for i in range(4):
        for j in range(4):
            h0, w0 = i * 2 - 1, j * 2 - 1
            h1, w1 = min(h0 + 3, 6 + 1), min(w0 + 3, 6 + 1)
            size = (h1 - h0) * (w1 - w0)
            win = x[:, :, max(h0, 0):min(h1, 6), max(w0, 0):min(w1, 6)]
            want[:, :, i, j] = win.sum(axis=(2, 3)) / size
    _close(got, want)


def test_training_snapshot_weights_matched_by_name(tmp_path: Path) -> None:
    """A caffemodel with extra (Data, loss) layers and another layer order still fits."""
    nb = NETS["lenet"](False)
    deploy = nb.deploy()
    snap = caffe_pb2.NetParameter()
    data = snap.layer.add()
    data.name, data.type = "mnist", "Data"
    data.top.extend(["data", "label"])
    for lay in reversed(list(nb.net().layer)[1:]):
        snap.layer.add().CopyFrom(lay)
    loss = snap.layer.add()
    loss.name, loss.type = "loss", "SoftmaxWithLoss"
    loss.bottom.extend(["ip2", "label"])
    (tmp_path / "deploy.prototxt").write_text(write_text(deploy))
    (tmp_path / "snap.caffemodel").write_bytes(write_binary(snap))
    nb.save(tmp_path / "a.prototxt", tmp_path / "a.caffemodel")
    a = load_caffe(tmp_path / "a.prototxt", weights=tmp_path / "a.caffemodel")
    b = load_caffe(tmp_path / "deploy.prototxt", weights=tmp_path / "snap.caffemodel")
    x = _inputs(a)
    np.testing.assert_array_equal(_outputs(a, x)["prob"], _outputs(b, x)["prob"])
    with pytest.raises(ToolkitError, match=r"'mnist' \(Data\).*deploy prototxt"):
        load_caffe(tmp_path / "snap.caffemodel")


def test_train_phase_layers_are_skipped() -> None:
    nb = NetBuilder("phases")
    nb.input("data", [1, 2, 3, 3])
    nb.layer("train_only", "Dropout", ["data"], ["data"], include=[{"phase": "TRAIN"}])
    nb.layer("relu", "ReLU", ["data"], ["out"], include=[{"phase": "TEST"}])
    m = import_net(nb.net())
    assert sorted(m.source_table.values()) == ["data", "relu"]


def test_errors_name_the_layer(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match=r"'the_layer' \(Threshold\).*not supported"):
        _single("Threshold", [1, 2, 3, 3])
    with pytest.raises(ToolkitError, match=r"'the_layer' \(Convolution\).*no weights blob"):
        _single("Convolution", [1, 2, 5, 5],
                convolution_param={"num_output": 2, "kernel_size": [3]})
    with pytest.raises(ToolkitError, match=r"bottom blob 'nope'"):
        nb = NetBuilder()
        nb.input("data", [1, 2])
        nb.layer("r", "ReLU", ["nope"], ["r"])
        import_net(nb.net())
    with pytest.raises(ToolkitError, match="syntax error"):
        p = tmp_path / "bad.prototxt"
        p.write_text("layer { name: 'x' type: ")
        load_caffe(p)
    assert "Convolution" in SUPPORTED_LAYERS and "Permute" in SUPPORTED_LAYERS


# ------------------------------------------------------------------------ fuzzing
def _fuzz_one(data: bytes) -> None:
    try:
        m = import_net(parse_binary(data))
    except ToolkitError:
        return
    m.verify()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fuzz_caffemodel_bytes() -> None:
    """Truncated and mutated caffemodels raise ToolkitError or give a valid model."""
    rng = np.random.default_rng(20)
    sources = [write_binary(NETS[n](v1).net()) for n, v1 in
               (("lenet", False), ("cifar_quick", True), ("modern_layers", False),
                ("activations", False))]
    for i in range(240):
        src = bytearray(sources[i % len(sources)])
        kind = i % 3
        if kind == 0:
            cut = int(rng.integers(0, len(src)))
            data = bytes(src[:cut])
        elif kind == 1:
            for _ in range(int(rng.integers(1, 6))):
                src[int(rng.integers(0, len(src)))] = int(rng.integers(0, 256))
            data = bytes(src)
        else:  # mutate the network structure (not the float payload): first 2 kB
            for _ in range(int(rng.integers(1, 4))):
                pos = int(rng.integers(0, min(len(src), 2048)))
                src[pos] = int(rng.integers(0, 256))
            data = bytes(src)
        _fuzz_one(data)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fuzz_prototxt_text() -> None:
    rng = np.random.default_rng(21)
    text = write_text(NETS["alexnet"](False).deploy())
    tokens = ["{", "}", ":", '"', "layer", "-1", "0", "99999999999", "kernel_size: 0",
              "pool: AVE", "top: \"data\"", "bottom: \"nowhere\"", "group: 3", "\n", "#"]
    for i in range(120):
        t = list(text)
        if i % 2:
            t = t[:int(rng.integers(0, len(t)))]
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, len(t) + 1))
            t.insert(pos, tokens[int(rng.integers(0, len(tokens)))])
        try:
            m = import_net(parse_text("".join(t)))
        except ToolkitError:
            continue
        m.verify()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fuzz_structure_bytes() -> None:
    """Mutated bytes of the network structure (deploy net, weights from the intact file)."""
    rng = np.random.default_rng(22)
    nets = [NETS[n](False) for n in ("alexnet", "modern_layers", "activations", "inception")]
    for i in range(160):
        nb = nets[i % len(nets)]
        src = bytearray(write_binary(nb.deploy()))
        for _ in range(int(rng.integers(1, 4))):
            src[int(rng.integers(0, len(src)))] = int(rng.integers(0, 256))
        try:
            m = import_net(parse_binary(bytes(src)), nb.net())
        except ToolkitError:
            continue
        m.verify()


def _mutate_field(msg: Any, rng: np.random.Generator) -> None:
    """Set one scalar field of ``msg`` or of one of its set sub-messages to an odd value."""
    from google.protobuf.descriptor import FieldDescriptor as F

    subs = [f for f, _ in msg.ListFields() if f.type == F.TYPE_MESSAGE
            and not f.is_repeated]
    if subs and rng.random() < 0.8:
        msg = getattr(msg, subs[int(rng.integers(0, len(subs)))].name)
    scalars = [f for f in msg.DESCRIPTOR.fields if f.type != F.TYPE_MESSAGE]
    if not scalars:
        return
    f = scalars[int(rng.integers(0, len(scalars)))]
    odd: dict[int, list[Any]] = {
        F.TYPE_UINT32: [0, 1, 2, 3, 7, 1000, 2**31],
        F.TYPE_INT32: [-5, -1, 0, 1, 2, 4, 9, 2**30],
        F.TYPE_INT64: [-1, 0, 1, 3, 2**40],
        F.TYPE_FLOAT: [0.0, -1.0, 1e30, float("nan"), 0.5],
        F.TYPE_BOOL: [True, False],
        F.TYPE_STRING: ["", "data", "Convolution", "nowhere", "Pooling"],
    }
    if f.type == F.TYPE_ENUM:
        values = [v.number for v in f.enum_type.values] + [99]
    else:
        values = odd.get(f.type, [])
    if not values:
        return
    v = values[int(rng.integers(0, len(values)))]
    try:
        if f.is_repeated:
            getattr(msg, f.name).append(v)
        else:
            setattr(msg, f.name, v)
    except (ValueError, TypeError):  # a value the field cannot hold
        return


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fuzz_layer_parameters() -> None:
    """Odd parameter values (kernel 0, pad 2**31, unknown enums, ...) raise ToolkitError."""
    rng = np.random.default_rng(23)
    names = list(NETS)
    for i in range(240):
        net = NETS[names[i % len(names)]](False).net()
        for _ in range(int(rng.integers(1, 3))):
            lay = net.layer[int(rng.integers(0, len(net.layer)))]
            _mutate_field(lay, rng)
        try:
            m = import_net(parse_binary(write_binary(net)))
        except ToolkitError:
            continue
        m.verify()


@pytest.mark.parametrize("name", ["alexnet", "resnet_bottleneck", "activations"])
def test_compile_run_and_trace_join_speak_caffe_layers(name: str) -> None:
    """Compiled Caffe models compute the same outputs and attribute time to Caffe layers."""
    import toolkit as tk

    net = NETS[name](False).net()
    model = import_net(net)
    x = _inputs(model)
    ref = _outputs(model, x)
    compiled = tk.compile(model, target=tk.Target(buffer_bytes=4096))
    out = _outputs(compiled, x)
    for k, v in ref.items():
        _close(out[k], v)
    live = set(compiled.origins()["source_id"])
    removed = set(compiled.removed()["source_id"]) | set(model.graph.removed_origins)
    assert live | removed == set(model.source_table)
    res = tk.run(compiled, x, trace=True)
    att = tk.trace_join(res.trace, compiled, policy="macs")
    att.check()
    by_layer = att.by_layer()
    timed = set(by_layer.loc[by_layer["total_ns"] > 0, "layer"])
    computing = {lay.name for lay in net.layer if lay.type not in ("Dropout", "Split")}
    assert timed == computing
    assert len(by_layer) - len(timed) == len(model.graph.removed_origins)


def test_net_level_input_shape_and_aliased_outputs() -> None:
    """``input`` + ``input_shape`` fields; a Split top and Slice tops as net outputs."""
    net = caffe_pb2.NetParameter()
    net.input.append("data")
    net.input_shape.add().dim.extend([1, 6, 2, 3])
    nb = NetBuilder()
    nb.layer("split", "Split", ["data"], ["a", "b"])
    nb.layer("slice", "Slice", ["a"], ["s1", "s2"], slice_param={"slice_point": [2]})
    nb.layer("relu", "ReLU", ["s2"], ["s2"])
    net.layer.extend(nb.net().layer)
    m = import_net(net)
    assert [t.name for t in m.graph.outputs] == ["b", "s1", "s2"]
    x = np.random.default_rng(4).standard_normal((1, 6, 2, 3)).astype(np.float32)
    out = _outputs(m, {"data": x})
    np.testing.assert_array_equal(out["b"], x)
    np.testing.assert_array_equal(out["s1"], x[:, :2])
    np.testing.assert_array_equal(out["s2"], np.maximum(x[:, 2:], 0))
    assert m.source_table[0] == "input"  # net-level inputs: an Input layer named "input"
    split_id = next(k for k, v in m.source_table.items() if v == "split")
    # the Split top that is a net output needs a copy, made by the Split layer
    assert any(split_id in op.origins for op in m.graph.ops)


def test_fields_the_toolkit_does_not_read_warn() -> None:
    """A fork's pooling field (OpenCV's ceil_mode) is skipped with a warning, never silently."""
    text = ('input: "data" input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }\n'
            'layer { name: "p" type: "Pooling" bottom: "data" top: "p"\n'
            '  pooling_param { pool: MAX kernel_size: 3 stride: 2 ceil_mode: false } }')
    with pytest.warns(UserWarning, match="ceil_mode"):
        net = parse_text(text)
    assert import_net(net).graph.outputs[0].shape == (1, 1, 2, 2)  # Caffe's ceil rounding
    net.layer[0].pooling_param.MergeFromString(b"\xa0\x01\x05")  # field 20, unknown
    with pytest.warns(UserWarning, match=r"'p' \(Pooling\): fields \[20\]"):
        import_net(parse_binary(write_binary(net)))


def test_inner_product_transpose_and_concat_axis() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((60, 7)).astype(np.float32)  # transpose: [K, num_output]
    nb = NetBuilder()
    nb.input("data", list(x.shape))
    nb.layer("ip", "InnerProduct", ["data"], ["ip"], blobs=[w, np.zeros(7, np.float32)],
             inner_product_param={"num_output": 7, "transpose": True})
    nb.layer("cat", "Concat", ["data", "data"], ["cat"], concat_param={"axis": 2})
    nb.layer("cat3", "Concat", ["data", "data"], ["cat3"], concat_param={"axis": -1})
    out = _outputs(import_net(nb.net()), {"data": x})
    _close(out["ip"], x.reshape(2, 60) @ w)
    np.testing.assert_array_equal(out["cat"], np.concatenate([x, x], axis=2))
    np.testing.assert_array_equal(out["cat3"], np.concatenate([x, x], axis=3))


def test_v1_flatten_and_pooling_with_one_padded_axis() -> None:
    """V1 Flatten (no flatten_param in V1); Caffe's pooled-size check applies to both axes
    when either is padded (here a stride above the kernel on the unpadded W)."""
    x = np.random.default_rng(7).standard_normal((1, 2, 5, 6)).astype(np.float32)
    nb = NetBuilder(v1=True)
    nb.input("data", list(x.shape))
    nb.layer("pool", "Pooling", ["data"], ["pool"],
             pooling_param={"pool": "MAX", "kernel_h": 2, "kernel_w": 1, "stride_h": 3,
                            "stride_w": 3, "pad_h": 1, "pad_w": 0})
    nb.layer("flat", "Flatten", ["pool"], ["flat"])
    out = _outputs(import_net(nb.net()), {"data": x})["flat"]
    # H: ceil((5 + 2 - 2) / 3) + 1 = 3, the last window starts at 6 >= 5 + 1: 2 rows;
    # W: ceil((6 - 1) / 3) + 1 = 3, the last window starts at 6 >= 6 + 0: 2 columns
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)), constant_values=-np.inf)
    want = np.stack([np.stack([xp[:, :, 3 * i:3 * i + 2, 3 * j].max(axis=2)
                               for j in range(2)], axis=-1) for i in range(2)], axis=2)
    assert out.shape == (1, 2 * 2 * 2)
    np.testing.assert_array_equal(out, want.reshape(1, -1))


def test_partition_keeps_caffe_layers() -> None:
    """Partitioned Caffe models chain to the same outputs; every part op names its layer."""
    import toolkit as tk

    model = import_net(NETS["inception"](False).net())
    x = _inputs(model)
    ref = _outputs(model, x)
    parts = tk.partition(model, {"partition": {"backends": "cpu,npu", "default": "cpu",
                                               "comply": "opcode"},
                                 "OPCODE": {"CONV_2D": "npu"}})
    assert len(parts.parts_table()) > 2
    out = tk.run(parts, x).outputs
    for k, v in ref.items():
        np.testing.assert_array_equal(out[k], v)
    ids = {i for ids in parts.ops_table()["source_ids"] for i in ids}
    assert ids == {o for op in model.graph.ops for o in op.origins}
