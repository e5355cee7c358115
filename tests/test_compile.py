"""The whole pipeline on every sample model: numerics, provenance invariants, tables, files."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolkit as tk
from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler import CompiledModel, Target, compile_model, load_compiled
from toolkit.compiler.compiled import uses_circle_only
from toolkit.compiler.pass_manager import model_origins
from toolkit.compiler.passes import DEFAULT_PASSES, FuseActivation
from toolkit.costs import op_macs
from toolkit.errors import PassError, ToolkitError
from toolkit.formats.debug_handles import (
    DelegateMappingBuilder,
    decode_debug_handles,
    encode_debug_handles,
    read_debug_handles,
)
from toolkit.formats.flatbuffer_write import write_model
from toolkit.formats.origin_tables import encode_op_table, encode_source_table
from toolkit.ir import Model
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS, Provenance
from toolkit.schema import fb

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted([*ROOT.glob("sample_models/*.tflite"), *ROOT.glob("sample_models/*.circle"),
                  *ROOT.glob("sample_models/tf/*.tflite")])
IDS = [p.relative_to(ROOT / "sample_models").as_posix() for p in SAMPLES]
# what LiteRT runs: no circle-only fusions and no fused TANH (LiteRT ignores it)
TFLITE_PASSES = [p for p in DEFAULT_PASSES if p not in ("fuse_instance_norm", "fuse_layer_norm",
                                                          "fuse_activation")]
TFLITE_PASSES.append(FuseActivation(["RELU", "RELU6", "RELU_N1_TO_1"]))


def test_sample_models_exist() -> None:
    names = {p.name for p in SAMPLES}
    assert {"Net_InstanceNorm_003.circle", "cnn.tflite", "cnn_int8.tflite", "transformer.tflite",
            "two_branch.tflite", "tf_cnn.tflite", "tf_layer_norm.tflite"} <= names


def _inputs(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in model.graph.inputs:
        if t.dtype == np.float32:
            out[t.name] = rng.uniform(-1, 1, t.shape).astype(np.float32)
        else:
            out[t.name] = rng.integers(-128, 128, t.shape).astype(t.dtype)
    return out


def assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """float32: |got - want| <= 1e-5 * (|want| + max|want|) (rtol 1e-5, relative to the
    tensor's scale near zero); int8: within 1."""
    assert list(got) == list(want)
    for k, w in want.items():
        g = got[k]
        assert g.shape == w.shape and g.dtype == w.dtype, k
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()),
                                       err_msg=k)
        else:
            assert np.abs(g.astype(np.int64) - w.astype(np.int64)).max() <= 1, k


def _litert(model: Model | Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    data = model.read_bytes() if isinstance(model, Path) else bytes(write_model(model, "tflite"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = Interpreter(model_content=data, num_threads=1)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], inputs[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


@pytest.fixture(scope="module", params=SAMPLES, ids=IDS)
def sample(request: pytest.FixtureRequest) -> tuple[Path, Model, CompiledModel]:
    path = request.param
    model = tk.load(path)
    return path, model, compile_model(model)


def test_numerics_reference_runtime(sample: tuple[Path, Model, CompiledModel]) -> None:
    _, model, compiled = sample
    ins = _inputs(model)
    want = run(model, ins).outputs
    assert_close(run(compiled, ins).outputs, want)  # command by command
    assert_close(run(compiled.model, ins).outputs, want)  # op by op
    striped = compile_model(model, target=Target(buffer_bytes=512))
    assert len(striped.command_list) >= len(compiled.command_list)
    assert_close(run(striped, ins).outputs, want)


def test_numerics_litert(sample: tuple[Path, Model, CompiledModel]) -> None:
    path, model, compiled = sample
    reasons = uses_circle_only(compiled.model)
    if path.suffix == ".circle":
        assert reasons  # the circle sample compiles to INSTANCE_NORM
        return
    ins = _inputs(model)
    want = _litert(path, ins)
    if not reasons:
        assert_close(_litert(compiled.model, ins), want)
    lite = compile_model(model, passes=TFLITE_PASSES)
    assert not uses_circle_only(lite.model)
    assert_close(_litert(lite.model, ins), want)


def test_provenance_invariants(sample: tuple[Path, Model, CompiledModel]) -> None:
    _, model, compiled = sample
    source_ids = model_origins(model)
    live = set()
    for op in compiled.ops:
        assert op.origins
        live |= op.origins
    removed = set(compiled.removed()["source_id"])
    assert live | removed == source_ids
    assert not live & removed
    assert set(compiled.source_ops()["source_id"]) == source_ids
    assert set(compiled.rewrites()["relation"]) <= {"absorb", "fuse", "replace", "remove"}
    assert isinstance(compiled, Provenance)


def test_tables(sample: tuple[Path, Model, CompiledModel]) -> None:
    _, model, c = sample
    src, opt, org, cmd = c.source_ops(), c.optimised_ops(), c.origins(), c.commands()
    assert list(src.columns) == SOURCE_COLUMNS
    assert list(opt.columns) == OPTIMISED_COLUMNS
    assert list(cmd.columns) == COMMAND_COLUMNS
    assert list(org.columns) == ["optimised_id", "source_id"]
    assert list(c.layers().columns) == ["source_id", "layer", "main"]
    assert list(c.debug_handles().columns) == ["handle", "optimised_id", "source_id"]
    assert list(c.removed().columns) == ["source_id", "reason"]
    assert list(c.queue().columns) == ["offset", "cmdstream_id", "optimised_id"]
    for df in (src, opt, org, cmd):
        for col in df.columns:
            if col not in ("operator", "name", "backend"):
                assert str(df[col].dtype) == "int64", col
    assert src["op_index"].tolist() == list(range(len(model.graph)))
    assert src["macs"].sum() == sum(op_macs(o) for o in model.graph.ops)
    assert opt["optimised_id"].tolist() == list(range(len(c.ops)))
    assert (opt["backend"] == c.target.name).all()
    assert len(org) == sum(len(o.origins) for o in c.ops)
    merged = c.debug_handles().merge(org, on=["optimised_id", "source_id"], how="outer",
                                     indicator=True)
    assert (merged["_merge"] == "both").all()
    assert cmd["command_id"].tolist() == list(range(len(cmd)))
    assert cmd["optimised_id"].is_monotonic_increasing
    assert set(cmd["optimised_id"]) == set(range(len(c.model.graph)))


def test_source_is_untouched() -> None:
    model = tk.load(ROOT / "sample_models" / "cnn.tflite")
    before = bytes(write_model(model, "circle"))
    compiled = compile_model(model)
    assert compiled.source is model
    assert len(compiled.model.graph) < len(model.graph)
    assert bytes(write_model(model, "circle")) == before


def test_layers_are_the_keras_layers_of_converter_names() -> None:
    c = compile_model(ROOT / "sample_models" / "tf" / "tf_cnn.tflite")
    layers = c.layers()
    first = layers[layers["source_id"] == 0]
    # model_1/stem_relu_1/Relu;model_1/stem_bn_1/batchnorm/add_1;model_1/stem_conv_1/...
    assert first["layer"].tolist() == ["stem_conv", "stem_bn", "stem_relu"]
    assert first["main"].tolist() == [True, False, False]
    assert layers["source_id"].nunique() == len(c.source.graph)


def test_layers_come_from_the_one_source_table() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.unary("RELU", mb.add(x, x, name="add"), name="relu")
    mb.output(y)
    model = mb.build()
    model.source_table = {0: "net/block/add;net/extra", 1: "net/block/relu"}
    back = tk.load(bytes(write_model(model, "circle")))
    assert back.had_origin_tables
    c = compile_model(back)
    # TensorFlow's rule on the origin names: model scope "net", layer "block"; "net/extra" is
    # an op of the model outside any layer
    assert c.layers().values.tolist() == [[0, "block", False], [1, "block", False]]
    assert c.source_ops()["name"].tolist() == ["net/block/add;net/extra", "net/block/relu"]


def _one_tables(path: Path) -> dict[str, bytes]:
    data = path.read_bytes()
    m = fb.Model.Model.GetRootAs(data, 0)
    out = {}
    for i in range(m.MetadataLength()):
        md = m.Metadata(i)
        buf = m.Buffers(md.Buffer())
        out[md.Name().decode()] = buf.DataAsNumpy().tobytes()
    return out


def test_save_writes_three_files_with_exact_one_tables(
        sample: tuple[Path, Model, CompiledModel], tmp_path: Path) -> None:
    path, _, c = sample
    files = c.save(tmp_path)
    stem = path.stem
    assert [f.name for f in files] == [f"{stem}.circle", f"{stem}_debug.xml",
                                       f"{stem}.debug_handles.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files)
    tables = _one_tables(files[0])
    org = c.origins()
    op_table = {int(i): g["source_id"].tolist() for i, g in org.groupby("optimised_id")
                if i < len(c.model.graph)}
    assert tables["ONE_op_table"] == encode_op_table(op_table)
    names = dict(zip(c.source_ops()["source_id"], c.source_ops()["name"]))
    assert tables["ONE_source_table"] == encode_source_table(names)
    back = tk.load(files[0])
    assert [o.origins for o in back.graph.ops] == [o.origins for o in c.model.graph.ops]
    assert back.source_table == names


def test_load_compiled_round_trip(sample: tuple[Path, Model, CompiledModel],
                                  tmp_path: Path) -> None:
    _, model, c = sample
    c.save(tmp_path, stem="m")
    back = load_compiled(tmp_path)
    for name in ("source_ops", "layers", "optimised_ops", "origins", "commands",
                 "debug_handles", "removed", "queue"):
        pd.testing.assert_frame_equal(getattr(back, name)(), getattr(c, name)(), obj=name)
    assert back.target == c.target
    ins = _inputs(model)
    assert_close(run(back, ins).outputs, run(c, ins).outputs)


def test_debug_handles_file(sample: tuple[Path, Model, CompiledModel], tmp_path: Path) -> None:
    _, _, c = sample
    files = c.save(tmp_path)
    hmap = read_debug_handles(files[2])
    assert hmap.handles == c.debug_handle_map()
    assert hmap.identifier_type == "int"
    assert list(hmap.handles) == list(range(1, len(c.ops) + 1))
    assert hmap.optimised_ids == {h: i for i, h in enumerate(c.handles)}


def test_named_debug_identifiers(tmp_path: Path) -> None:
    c = compile_model(ROOT / "sample_models" / "cnn.tflite", debug_identifiers="names")
    assert c.handles == [o.name for o in c.ops]
    hmap = read_debug_handles(c.save(tmp_path)[2])
    assert hmap.identifier_type == "str" and list(hmap.handles) == c.handles
    assert c.debug_handles()["handle"].tolist()[0] == c.ops[0].name


def test_toolkit_compile_is_a_function() -> None:
    model = tk.load(ROOT / "sample_models" / "cnn.tflite")
    assert isinstance(tk.compile(model), CompiledModel)
    assert isinstance(tk.compile(model, None, Target(buffer_bytes=1024)), CompiledModel)


def test_cli_compile(tmp_path: Path) -> None:
    from toolkit.cli import main

    src = ROOT / "sample_models" / "cnn.tflite"
    assert main(["compile", str(src), "-o", str(tmp_path), "--buffer-bytes", "4096"]) == 0
    assert (tmp_path / "cnn.circle").exists() and (tmp_path / "cnn_debug.xml").exists()
    assert load_compiled(tmp_path).target.buffer_bytes == 4096


# ------------------------------------------------------------------ bad input
def test_unknown_ops_and_dynamic_shapes_compile() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    x.shape_signature = (-1, 4, 4, 2)
    y = mb.add(x, x, name="add")
    y.shape_signature = (-1, 4, 4, 2)
    y = mb.unary("RELU", y, name="relu")
    y.shape_signature = (-1, 4, 4, 2)
    z = mb.op("CUSTOM", [y], [1, 4, 4, 2], name="mystery", custom_code="Mystery")
    w = mb.unary("RELU6", mb.mul(z, z, name="mul"), name="relu6")
    mb.output(w)
    model = mb.build()
    c = compile_model(model)
    assert [o.kind for o in c.ops] == ["ADD", "RELU", "Mystery", "MUL"]
    assert c.ops[-1].origins == {3, 4}


def test_bad_arguments() -> None:
    model = tk.load(ROOT / "sample_models" / "cnn.tflite")
    with pytest.raises(ToolkitError, match="unknown pass"):
        compile_model(model, passes=["no_such_pass"])
    with pytest.raises(ToolkitError, match="buffer_bytes"):
        compile_model(model, target={"buffer_bytes": -1})
    with pytest.raises(ToolkitError, match="debug_identifiers"):
        compile_model(model, debug_identifiers="uuid")
    with pytest.raises(ToolkitError):
        compile_model(ROOT / "sample_models" / "no_such.tflite")


def test_pass_error_from_pipeline() -> None:
    from toolkit.compiler.passes import GraphPass

    class Broken(GraphPass):
        name = "broken"
        relation = "remove"

        def run(self, graph: object) -> bool:
            raise RuntimeError("bug")

    with pytest.raises(PassError, match=r"pass 'broken': RuntimeError: bug.*: fold_constants"):
        compile_model(tk.load(ROOT / "sample_models" / "cnn.tflite"),
                      passes=["fold_constants", Broken()])


# -------------------------------------------------------------- debug handles
def test_mapping_builder_generated() -> None:
    b = DelegateMappingBuilder(generated_identifiers=True)
    assert b.insert_delegate_mapping_entry([3, 1]) == 1
    assert b.insert_delegate_mapping_entry(2) == 2
    assert b.get_delegate_mapping() == {1: (1, 3), 2: (2,)}
    with pytest.raises(ToolkitError, match="generates identifiers"):
        b.insert_delegate_mapping_entry(4, identifier=9)


def test_mapping_builder_manual() -> None:
    b = DelegateMappingBuilder()
    with pytest.raises(ToolkitError, match="manual identifiers"):
        b.insert_delegate_mapping_entry([1])
    assert b.insert_delegate_mapping_entry([5, 4], identifier="conv") == "conv"
    with pytest.raises(ToolkitError, match="already inserted"):
        b.insert_delegate_mapping_entry([1], identifier="conv")
    with pytest.raises(ToolkitError, match="one identifier type"):
        b.insert_delegate_mapping_entry([1], identifier=7)
    with pytest.raises(ToolkitError, match="at least one origin"):
        b.insert_delegate_mapping_entry([], identifier="x")
    assert b.get_delegate_mapping() == {"conv": (4, 5)}


@pytest.mark.parametrize("handles", [{1: (0, 2), 10: (3,)}, {"1": (0,), "a;b": (1, 2)}, {}])
def test_debug_handle_json_round_trip(handles: dict) -> None:
    data = encode_debug_handles(handles)
    back = decode_debug_handles(data)
    assert back.handles == handles
    assert [type(k) for k in back.handles] == [type(k) for k in handles]


@pytest.mark.parametrize("text,match", [
    (b"[]", "version"), (b'{"version": 2}', "version"),
    (b'{"version": 1, "identifier_type": "int", "handles": {"01": [1]}}', "canonical"),
    (b'{"version": 1, "identifier_type": "int", "handles": {"1": []}}', "non-empty"),
    (b'{"version": 1, "identifier_type": "float", "handles": {}}', "identifier_type"),
    (b"{", "JSON"),
])
def test_debug_handle_json_errors(text: bytes, match: str) -> None:
    with pytest.raises(ToolkitError, match=match):
        decode_debug_handles(text)


def test_mixed_identifier_types_rejected() -> None:
    with pytest.raises(ToolkitError, match="mixes"):
        encode_debug_handles({1: (0,), "a": (1,)})


def test_layer_norm_options_are_four_bytes() -> None:
    c = compile_model(ROOT / "sample_models" / "transformer.tflite")
    lns = [o for o in c.ops if o.kind == "LAYER_NORM"]
    assert len(lns) == 2
    assert all(len(o.custom_options) == 4 and struct.unpack("<f", o.custom_options)[0]
               == np.float32(1e-5) for o in lns)


def test_signature_follows_moved_outputs(tmp_path: Path) -> None:
    from toolkit.ir import SignatureDef

    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    y = mb.conv2d(x, mb.const("w", np.ones((2, 1, 1, 2))), None, name="conv")
    y = mb.unary("RELU", y, name="out")
    mb.output(y)
    model = mb.build()
    model.signature_defs.append(SignatureDef("serving_default", 0, [("x", x)], [("y", y)]))
    c = compile_model(model)
    assert len(c.model.graph) == 1
    (name, t), = c.model.signature_defs[0].outputs
    assert name == "y" and t is c.model.graph.outputs[0] and t.name == "out"
    back = load_compiled(tmp_path) if c.save(tmp_path) else None
    assert back is not None and back.model.signature_defs[0].outputs[0][1].name == "out"


def test_load_compiled_rejects_mismatched_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    compile_model(ROOT / "sample_models" / "cnn.tflite").save(a, stem="m")
    compile_model(ROOT / "sample_models" / "cnn.tflite", passes=[]).save(b, stem="m")
    (b / "m.circle").replace(a / "m.circle")
    with pytest.raises(ToolkitError, match="queue"):
        load_compiled(a)
    with pytest.raises(ToolkitError, match="folder of compiled output: not found"):
        load_compiled(tmp_path / "nowhere")
    with pytest.raises(ToolkitError, match="version"):
        decode_debug_handles(b'{"version": true, "identifier_type": "int", "handles": {}}')
