"""Layers as the user wrote them: the per-layer answer on converter models reads like the
model's own layer list (``docs/layers.md``).

The converter zoo's ``zoo.json`` records each Keras model's layers (``keras_layers``,
``model.layers`` with nested models flattened) when the fixtures are made. A recorded layer
owns an op of the file when its name is a scope of the file's op names (``/name/``, or
``/name_1/`` with Keras 3's tracing suffix), or of the weights of an op the converter named
after a tensor; the others own none there (a Dropout, a Flatten the
converter folded away, the output layer whose op the converter named after the output tensor).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from test_zoo import BATCH, zoo_inputs

import toolkit as tk
from toolkit.compiler import compile_model
from toolkit.errors import UnsupportedOpError
from toolkit.layer_names import NO_LAYER, scope_layers, tf_layers, tf_scope
from toolkit.runtime.static_shapes import fix_free_dims

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = ROOT / "sample_models" / "zoo"
INDEX = json.loads((ZOO_DIR / "zoo.json").read_text())
KERAS = sorted(n for n, e in INDEX.items() if e.get("keras_layers"))
SLOW = {"efficientnet_b0_int8", "mobilenet_v3_small_int8", "mobilenet_v3_large_int8"}


def owning_layers(name: str, model: tk.Model) -> set[str]:
    """Recorded Keras layers that are a scope of the file's op names (or of the weights of an
    op the converter named after a tensor)."""
    names = ";".join(model.source_table.values())
    # an op the converter named after a tensor: its weights keep their layer's scope
    names += ";".join(t.name for g in model.subgraphs for op in g.ops for t in op.inputs
                      if t is not None and t.is_const and (":" in op.name or
                                                           op.name.startswith("tfl.")))
    return {n for n, cls in INDEX[name]["keras_layers"] if cls != "InputLayer"
            and (f"/{n}/" in names or f"/{n}_1/" in names)}


def joined_layers(model: tk.Model, name: str) -> tuple[set[str], object, object]:
    """Compile, run 3 times with a trace, join: the layer names ``by_layer()`` reports."""
    fixed = fix_free_dims(model, BATCH) if any(
        -1 in (t.shape_signature or ()) for t in model.graph.inputs) else model
    compiled = compile_model(fixed)
    inputs = zoo_inputs(ZOO_DIR / INDEX[name]["file"], fixed)
    result = tk.run(compiled, inputs, trace=True, repeat=3)
    att = tk.trace_join(result.trace, compiled)
    return set(att.by_layer()["layer"]), att, compiled


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in KERAS])
def test_zoo_layers_are_the_keras_layers(name: str) -> None:
    model = tk.load(ZOO_DIR / INDEX[name]["file"])
    want = owning_layers(name, model)
    recorded = {n for n, _ in INDEX[name]["keras_layers"]}
    got, att, _ = joined_layers(model, name)
    layers = got - {NO_LAYER}
    assert layers == want, (sorted(layers - want), sorted(want - layers))
    assert layers <= recorded
    assert all(x and ":" not in x and "/" not in x and ";" not in x for x in got)
    tensors = {t.name for g in model.subgraphs for t in g.tensors}
    assert not layers & tensors - recorded
    if NO_LAYER in got:  # ops the file places in no layer say why
        loose = [model.origin(o) for o in model.source_table if not model.origin(o).layers]
        assert loose and all("does not say" in o.why for o in loose)
    assert int(att.by_layer()["total_ns"].sum()) == att.attributed_ns


def test_mobilenet_v2_conv_layers_get_their_fused_ops_time() -> None:
    model = tk.load(ZOO_DIR / "mobilenet_v2.tflite")
    _, att, _ = joined_layers(model, "mobilenet_v2")
    by = att.by_layer().set_index("layer")["share"]
    pairs = {"Conv1": "bn_Conv1", "Conv_1": "Conv_1_bn"}
    for layer in by.index:
        m = re.fullmatch(r"(block_\d+|expanded_conv)_(expand|depthwise|project)", layer)
        if m:
            pairs[layer] = f"{layer}_BN"
    assert len(pairs) == 2 + 16 * 3 + 2
    for conv, bn in pairs.items():
        assert by[conv] > 0
        assert by[conv] >= 10 * by[bn], (conv, by[conv], by[bn])
    groups = att.by_group()
    assert int(groups["total_ns"].sum()) == att.attributed_ns == att.total_ns
    assert "Conv1 + bn_Conv1 + Conv1_relu" in set(groups["group"])
    equal = tk.trace_join(att.trace, att.provenance, policy="equal").by_layer()
    equal = equal.set_index("layer")["total_ns"]
    assert equal["bn_Conv1"] > 0  # the equal policy still splits a fused op's time evenly


def test_by_layer_reports_median_share_and_outliers() -> None:
    model = tk.load(ZOO_DIR / "ds_cnn.tflite")
    _, att, _ = joined_layers(model, "ds_cnn")
    layers = att.by_layer()
    assert {"p50_ms", "p50_share", "outlier_runs"} <= set(layers.columns)
    assert abs(float(layers["p50_share"].sum()) - 1.0) < 1e-9
    assert (layers["outlier_runs"] <= att.runs).all()


def test_tf_rule_on_real_names() -> None:
    names = [
        "mobilenetv2_0.35_64_1/Conv1_relu_1/Relu6;mobilenetv2_0.35_64_1/bn_Conv1_1/batchnorm/"
        "add_1;mobilenetv2_0.35_64_1/Conv1_1/convolution;mobilenetv2_0.35_64_1/bn_Conv1_1/"
        "batchnorm/sub1",
        "mobilenetv2_0.35_64_1/block_1_expand_relu_1/Relu6;mobilenetv2_0.35_64_1/block_1_"
        "expand_BN_1/batchnorm/add_1;mobilenetv2_0.35_64_1/block_1_expand_1/convolution",
        "StatefulPartitionedCall_1:0",
    ]
    scope, strip = tf_scope(names)
    assert (scope, strip) == ("mobilenetv2_0.35_64_1", True)
    assert tf_layers(names[0], scope, strip) == (("Conv1", "bn_Conv1", "Conv1_relu"), "Conv1")
    assert tf_layers(names[1], scope, strip)[0] == (
        "block_1_expand", "block_1_expand_BN", "block_1_expand_relu")
    assert tf_layers(names[2], scope, strip) == ((), "")
    # Keras 2: no tracing suffix, a layer named like one keeps it
    k2 = ["model/conv2d_1/Relu;model/conv2d_1/BiasAdd;model/conv2d_1/Conv2D",
          "model/conv2d/Conv2D", "model/tf.math.add/Add"]
    scope, strip = tf_scope(k2)
    assert (scope, strip) == ("model", False)
    assert [tf_layers(n, scope, strip)[0] for n in k2] == [
        ("conv2d_1",), ("conv2d",), ("tf.math.add",)]
    # a tf.function: no model scope; the TF op the user called
    raw = ["Abs", "clip_by_value/Minimum", "Log;add_31", "Identity:0"]
    assert tf_scope(raw) == (None, False)
    assert [tf_layers(n, None, False)[0] for n in raw] == [
        ("Abs",), ("clip_by_value",), ("add_31", "Log"), ()]


def test_torchscript_scopes_with_nested_sequentials() -> None:
    assert scope_layers([
        "/features/features.1/conv/conv.0/conv.0.0/Conv",
        "/layer1/layer1.0/downsample/downsample.0/Conv",
        "/layer1/layer1.0/relu/Relu", "/layer1/layer1.0/relu_1/Relu", "/Flatten", "Add_3",
    ]) == ["features.1.conv.0.0", "layer1.0.downsample.0", "layer1.0.relu", "layer1.0.relu",
           "", None]


def test_onnx_optimizer_nodes_take_the_layers_their_tensors_name() -> None:
    model = tk.load(ROOT / "sample_models" / "onnx" / "mlp.ts.all.opt.onnx")
    layers = [model.origin(next(iter(op.origins))).layers for op in model.graph.ops]
    # ORT fused fc1's Gemm with act1's Relu ("fused /fc1/Gemm"): both, fc1 first
    assert layers[0] == ("fc1", "act1") and layers[1] == ("fc2", "act2")
    assert layers[2] == ("out",)
    table = model.ops_table()
    assert table["layer"].tolist() == ["fc1", "fc2", "out"]
    # ORT's FusedGemm (domain com.microsoft) is not lowered: compile refuses it by name, the
    # way out given; ops_table() and compile(...).layers() read the same records of the
    # export before ORT's fusions
    with pytest.raises(UnsupportedOpError, match="fused /fc1/Gemm") as e:
        tk.compile(model)
    assert "runtime='onnxruntime'" in e.value.fix
    plain = tk.load(ROOT / "sample_models" / "onnx" / "mlp.ts.onnx")
    assert set(plain.ops_table()["layer"]) == {"fc1", "act1", "fc2", "act2", "out"}
    assert set(tk.compile(plain).layers()["layer"]) == {"fc1", "act1", "fc2", "act2", "out"}


def test_onnx_unscoped_nodes_are_their_own_layer() -> None:
    from toolkit.formats.onnx_model import read_onnx
    from toolkit.importers.onnx import model_from_onnx

    om = read_onnx(ROOT / "sample_models" / "onnx" / "mlp.dynamo.all.opt.onnx")
    for node in om.graph.nodes:  # a file without scopes or metadata, as paddle2onnx writes
        node.metadata.clear()
    rename = {k: k.replace(".", "_") for k in om.graph.initializers}
    for init in om.graph.initializers.values():
        init.name = rename[init.name]
    om.graph.initializers = {rename[k]: v for k, v in om.graph.initializers.items()}
    for node in om.graph.nodes:
        node.inputs = [rename.get(x, x) for x in node.inputs]
    model = model_from_onnx(om)
    names = [op.extra["node_name"] for op in model.graph.ops]
    got = [model.origin(next(iter(op.origins))).layers for op in model.graph.ops]
    assert all(layers for layers in got)
    assert all(len(x) == 1 and x[0] for x in got)
    assert [x[0] for x in got] == names


ONNX_DIR = ROOT / "sample_models" / "onnx"
MODULES = json.loads((ONNX_DIR / "MANIFEST.json").read_text())["named_modules"]
#: ``gated`` (a scripted ``if``) is exported by TorchScript only
EXPORTS = [(m, e) for m in sorted(MODULES) for e in ("ts", "dynamo")
           if (m, e) != ("gated", "dynamo")]


@pytest.mark.parametrize(("name", "exporter"), EXPORTS, ids=[f"{m}.{e}" for m, e in EXPORTS])
def test_pytorch_layers_are_the_named_modules(name: str, exporter: str) -> None:
    """Run the PyTorch export in ONNX Runtime, join its profile: every layer ``by_layer()``
    reports is a module of ``named_modules()`` recorded at export time; the modules that own no
    node are containers of reported ones, Dropouts, or modules the exporter folded (listed in
    ``modules_without_nodes``)."""
    from toolkit import join_ort, run_onnxruntime

    path = ONNX_DIR / f"{name}.{exporter}.onnx"
    model = tk.load(path)
    modules = dict(map(tuple, MODULES[name]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = run_onnxruntime(model, None, optimization="all", repeat=2, warmup=1)
    # the one warning a run may give: these modules' kernels are a few us, ORT's profiler
    # costs about as much per kernel (it depends on timing: allowed, not required)
    assert [str(w.message) for w in caught] == run.warnings
    assert all("ORT's profiler costs" in text for text in run.warnings), run.warnings
    att = join_ort(run.profile_path, model, run.optimized_path)
    # a node of the top module's own forward (``/Flatten``, ``node_view``) belongs to no
    # module: the join lists it under ``(no layer)``
    got = set(att.by_layer()["layer"]) - {"(no layer)"}
    assert got <= set(modules), sorted(got - set(modules))
    node_layers = {x for g in model.subgraphs for op in g.ops for o in op.origins
                   for x in model.origin(o).layers}  # an If's branches included
    assert got <= node_layers
    explained = {m["module"] for m in model.extra["modules_without_nodes"]}
    # the TorchScript exporter folds a norm into its Conv's weights (renamed onnx::Conv_N)
    folded_into = {x.rsplit(".", 1)[0] for op in model.graph.ops if op.extra["exporter_fused"]
                   for o in op.origins for x in model.origin(o).layers}
    explained |= {m for m, c in modules.items()
                  if c.startswith("BatchNorm") and m.rsplit(".", 1)[0] in folded_into}
    for module, cls in modules.items():
        if module in node_layers:
            continue
        container = any(x.startswith(module + ".") for x in node_layers)
        assert container or cls == "Dropout" or module in explained, (module, cls)
    top = [op for op in model.graph.ops if not any(model.origin(o).layers for o in op.origins)]
    assert all("top module" in model.origin(min(op.origins)).why or op.type == "Constant"
               for op in top), [model.origin(min(op.origins)) for op in top]
    if name == "nested":  # torchvision's nesting: Sequentials in Sequentials, downsample
        want = ({"features.1.conv.0.2", "features.2.conv.1.2", "layer1.0.downsample.1"}
                if exporter == "dynamo" else
                {"features.1.conv.0.0", "features.2.conv.1.0", "layer1.0.downsample.0"})
        assert want <= node_layers
        assert not any(".conv.conv" in x or "features.features" in x for x in node_layers)


def test_tf2onnx_nodes_are_their_keras_layers() -> None:
    """tf2onnx's export of the zoo's DS-CNN (``make_tf2onnx.py``): every node's layer is a
    Keras layer of the recorded list; a node tf2onnx made anew (``Conv__43``, no scope in
    its name, its kernel const-folded) takes the layer of the bias it reads, not that of the
    norm reading its output."""
    rec = json.loads((ONNX_DIR / "tf2onnx.json").read_text())
    keras = {name for name, _cls in rec["keras_layers"]}
    model = tk.load(ONNX_DIR / rec["file"])
    got = {op.extra["node_name"]: model.origin(min(op.origins)) for op in model.graph.ops}
    assert all(len(o.layers) == 1 and o.layers[0] in keras for o in got.values()), got
    assert got["ds_cnn_1/block_0_pw_1/BiasAdd"].layers == ("block_0_pw",)
    assert got["ds_cnn_1/block_0_dw_bn_1/batchnorm/mul_1"].layers == ("block_0_dw_bn",)
    made = {n: o for n, o in got.items() if n.startswith("Conv__")}
    assert sorted(o.layers[0] for o in made.values()) == [f"block_{i}_dw" for i in range(4)]
    assert all(o.main == o.layers[0] and "parameters" in o.why for o in made.values())
