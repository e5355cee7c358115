"""Every model of the converter zoo (sample_models/zoo, written by TensorFlow's converter) runs
in the reference runtime as in LiteRT, before and after compiling.

LiteRT runs its builtin kernels without XNNPACK, one thread. Free batch dimensions get a batch
of 2 (both runtimes resize to it). float32 outputs agree within 1e-5 of the output's largest
magnitude, int8 ones within 1.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from support import expect_run_warnings

import toolkit as tk
from toolkit.compiler import compile_model
from toolkit.compiler.compiled import uses_circle_only
from toolkit.compiler.lite_safe import unfuse_ignored_activations
from toolkit.compiler.passes import DEFAULT_PASSES, FuseActivation
from toolkit.errors import ModelFormatError, RuntimeInputError, ToolkitError, UnsupportedOpError
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import ignored_activations, save, write_model
from toolkit.formats.part_file import PartSpec
from toolkit.ir import Model
from toolkit.layer_names import NO_LAYER, name_layers
from toolkit.partitioner import partition
from toolkit.runtime.chain import litert_runner, run_connection
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.static_shapes import fix_free_dims
from toolkit.runtime.threads import blas_threads

ZOO_DIR = Path(__file__).resolve().parent.parent / "sample_models" / "zoo"
INDEX = json.loads((ZOO_DIR / "zoo.json").read_text())
ZOO = sorted(ZOO_DIR.glob("*.tflite"))
SLOW = {"efficientnet_b0_int8", "mobilenet_v3_small_int8", "mobilenet_v3_large_int8"}
PARAMS = [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in SLOW else [])
          for p in ZOO]
BATCH = 2  # the batch given to free batch dimensions
# what LiteRT runs: no circle-only fusions and no fused TANH on ops that ignore it
TFLITE_PASSES = [p for p in DEFAULT_PASSES if p not in ("fuse_instance_norm", "fuse_layer_norm",
                                                          "fuse_activation")]
TFLITE_PASSES.append(FuseActivation(["RELU", "RELU6", "RELU_N1_TO_1"]))


def zoo_inputs(path: Path, model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs: floats in [-1, 1), int8 over its range, other integers in the model's
    index range (zoo.json), free dimensions of size ``BATCH``."""
    lo, hi = INDEX[path.stem]["int_range"]
    rng = np.random.default_rng(seed)
    out = {}
    for t in model.graph.inputs:
        shape = [BATCH if d < 0 else d for d in (t.shape_signature or t.shape)]
        if t.dtype == np.float32:
            out[t.name] = rng.uniform(-1, 1, shape).astype(np.float32)
        elif t.dtype == np.int8:
            out[t.name] = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            out[t.name] = rng.integers(lo, hi, shape).astype(t.dtype)
    return out


def litert(data: bytes, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a .tflite in LiteRT (builtin kernels, no XNNPACK, 1 thread), inputs resized."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = LiteRT(model_content=data, num_threads=1,
                    experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    details = it.get_input_details()
    for d in details:
        it.resize_tensor_input(d["index"], inputs[d["name"]].shape)
    it.allocate_tensors()
    for d in details:
        it.set_tensor(d["index"], inputs[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


def assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """float32 within 1e-5 of each output's largest magnitude; integers within 1."""
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        g = got[k]
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape)
        if np.issubdtype(w.dtype, np.floating):
            scale = float(np.abs(w).max()) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * scale, err_msg=k)
        else:
            assert int(np.abs(g.astype(np.int64) - w.astype(np.int64)).max(initial=0)) <= 1, k


@pytest.fixture(scope="module", params=PARAMS)
def zoo_case(request: pytest.FixtureRequest) -> tuple[Path, Model, dict, dict]:
    path = request.param
    model = load(path)
    inputs = zoo_inputs(path, model)
    return path, model, inputs, litert(path.read_bytes(), inputs)


def test_zoo_is_complete() -> None:
    assert len(ZOO) >= 20
    assert {p.name for p in ZOO} == {e["file"] for e in INDEX.values()}
    assert sum(p.stat().st_size for p in ZOO) < 40 * 2**20
    ops = {op.type for p in ZOO for g in load(p).subgraphs for op in g.ops}
    assert {"SHAPE", "WHILE", "IF", "UNIDIRECTIONAL_SEQUENCE_LSTM", "TRANSPOSE_CONV",
            "RESIZE_BILINEAR", "TILE", "PRELU", "ELU", "MIRROR_PAD", "BROADCAST_TO",
            "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "REVERSE_V2", "CONV_3D"} <= ops
    assert any(t.is_dynamic for p in ZOO for t in load(p).graph.inputs)  # free batch
    assert any(t.dtype == np.int8 for p in ZOO for t in load(p).graph.inputs)  # full int8


def test_reference_matches_litert(zoo_case: tuple[Path, Model, dict, dict]) -> None:
    path, model, inputs, want = zoo_case
    it = Interpreter(model)
    with expect_run_warnings(path):
        assert_close(it.invoke(inputs), want)
    with expect_run_warnings(path):
        assert_close(it.invoke(inputs), want)  # the generated code of the second inference


def test_compiled_matches_litert(zoo_case: tuple[Path, Model, dict, dict],
                                 record_property: pytest.RecordProperty) -> None:
    path, model, inputs, want = zoo_case
    compiled = compile_model(model)
    with expect_run_warnings(path):
        assert_close(Interpreter(compiled).invoke(inputs), want)  # command by command
    lite = compile_model(model, passes=TFLITE_PASSES)
    assert not uses_circle_only(lite.model)
    assert_close(litert(bytes(write_model(lite.model, "tflite")), inputs), want)
    counts = (sum(len(g.ops) for g in model.subgraphs),
              sum(len(g.ops) for g in compiled.model.subgraphs))
    record_property("ops_source_compiled", counts)
    print(f"{path.stem}: {counts[0]} ops -> {counts[1]} compiled")


def test_free_batch_follows_the_inputs() -> None:
    path = ZOO_DIR / "vit_block.tflite"
    model = load(path)
    it = Interpreter(model)
    (key,) = it.input_names
    x = zoo_inputs(path, model)[key]
    (name,) = it.output_names
    full = it.invoke({key: np.concatenate([x, x[:1]])})[name]
    assert full.shape[0] == BATCH + 1
    for b in range(BATCH):
        np.testing.assert_allclose(it.invoke({key: x[b:b + 1]})[name][0], full[b],
                                   rtol=0, atol=1e-5 * float(np.abs(full).max()))


@pytest.mark.parametrize("name", ["vit_block", "vit_block_b1", "norms"])
def test_layer_norm_fusion_removes_the_converter_ops(name: str) -> None:
    model = load(ZOO_DIR / f"{name}.tflite")
    n_ln = {"vit_block": 2, "vit_block_b1": 2, "norms": 1}[name]  # Keras LayerNormalization
    compiled = compile_model(model)
    lost = len(model.graph.ops) - len(compiled.model.graph.ops)
    print(f"{name}: {len(model.graph.ops)} ops -> {len(compiled.model.graph.ops)} compiled "
          f"({n_ln} LayerNormalization)")
    assert lost >= 8 * n_ln
    fused = [op for op in compiled.model.graph.ops if op.kind == "LAYER_NORM"]
    assert len(fused) == n_ln
    for op in fused:  # every absorbed converter op keeps its origin
        names = {model.source_table.get(o, "") for o in op.origins}
        assert len(op.origins) >= 9 and all("ln" in n for n in names), names


def test_while_loop_bound_raises() -> None:
    path = ZOO_DIR / "control_flow.tflite"
    model = load(path)
    x, n = (t.name for t in model.graph.inputs)
    ones = np.ones((2, 5), np.float32)
    it = Interpreter(model, max_iterations=50)
    it.invoke({x: ones, n: np.array([50], np.int32)})  # 50 iterations: fine
    with pytest.raises(RuntimeInputError, match="did not terminate within 50") as e:
        Interpreter(model, max_iterations=50).invoke({x: ones, n: np.array([51], np.int32)})
    assert "WHILE" in str(e.value) and "subgraph 0 op" in str(e.value)


def test_missing_kernel_names_subgraph_and_op_index() -> None:
    model = load(ZOO_DIR / "gru.tflite")
    body = model.subgraphs[2] if len(model.subgraphs) > 2 else model.subgraphs[1]
    index = next(i for i, op in enumerate(body.ops) if op.type == "FULLY_CONNECTED")
    body.ops[index].type = "NO_SUCH_OP"
    sub = model.subgraphs.index(body)
    with pytest.raises(UnsupportedOpError, match=f"subgraph {sub} op {index} "):
        Interpreter(model).invoke(zoo_inputs(ZOO_DIR / "gru.tflite", model))


def test_threads_limit_blas() -> None:
    Interpreter(load(ZOO_DIR / "ds_cnn.tflite"), threads=2)
    assert blas_threads() and set(blas_threads()) == {2}
    tk.run(ZOO_DIR / "ds_cnn.tflite")  # default: one thread
    assert set(blas_threads()) == {1}
    with pytest.raises(ToolkitError, match="threads must be a positive int"):
        Interpreter(load(ZOO_DIR / "ds_cnn.tflite"), threads=0)


def test_tflite_refuses_activations_litert_ignores(tmp_path: Path) -> None:
    path = ZOO_DIR / "gru.tflite"
    model = load(path)
    compiled = compile_model(model)  # fuses a TANH into an ADD of the loop body
    ignored = ignored_activations(compiled.model)
    assert ignored and all("has a fused TANH" in r and "subgraph " in r for r in ignored)
    out = tmp_path / "gru.tflite"
    with pytest.raises(ModelFormatError, match="LiteRT ignores fused activations"):
        save(compiled.model, out)
    assert not out.exists()
    save(compiled.model, tmp_path / "gru.circle")  # circle keeps the fusion
    safe = unfuse_ignored_activations(compiled.model)
    assert ignored_activations(compiled.model) == ignored  # the compiled model is unchanged
    assert not ignored_activations(safe)
    fused_origins = {op.origins for g in compiled.model.subgraphs for op in g.ops
                     if op.activation == 4 and op.type == "ADD"}
    assert fused_origins <= {op.origins for g in safe.subgraphs for op in g.ops
                             if op.type == "TANH"}
    inputs = zoo_inputs(path, model)
    save(safe, out)
    want = litert(path.read_bytes(), inputs)
    assert_close(litert(out.read_bytes(), inputs), want)
    assert_close(Interpreter(safe).invoke(inputs), want)
    flagged = tmp_path / "flagged.tflite"
    tk.save(compiled.model, flagged, unfuse_activations=True)  # the explicit flag
    assert_close(litert(flagged.read_bytes(), inputs), want)
    with pytest.raises(ModelFormatError, match="subgraph"):
        tk.save(compiled.model, tmp_path / "refused.tflite")


def test_partition_chain_matches_litert(zoo_case: tuple[Path, Model, dict, dict]) -> None:
    path, model, inputs, want = zoo_case
    kinds = sorted({op.type for op in model.graph.ops})
    spec = PartSpec(["cpu", "npu"], "cpu", "opcode", opcode={k: "npu" for k in kinds[::2]})
    result = partition(model, spec)
    assert len(result.parts) >= min(2, len(kinds))
    placed = sorted(i for p in result.parts for i in p.op_indices)
    assert placed == list(range(len(model.graph.ops)))
    for p in result.parts:  # a control-flow op takes the subgraphs it calls along
        calls = [op for op in p.model.graph.ops if op.type in ("WHILE", "IF", "CALL")]
        assert len(p.model.subgraphs) >= 1 + len(calls)
    with expect_run_warnings(path):
        traced = run_connection(result, inputs, trace=True)
    assert_close(traced.outputs, want)
    events = traced.trace.to_frame()
    joined = events.merge(result.origins(), left_on="key", right_on="optimised_id").merge(
        result.layers(), on="source_id")
    assert set(events["key"]) == set(joined["key"])  # every event reaches source ops
    name_layers(model)
    names = {layer for op in model.graph.ops for o in op.origins
             for layer in model.origin(o).layers or (NO_LAYER,)}
    assert set(joined["layer"]) == names  # the Keras layers of the converter's names


@pytest.mark.parametrize("asymmetric", [True, False])
def test_hybrid_fully_connected_is_litert_s(asymmetric: bool) -> None:
    path = ZOO_DIR / "vit_block_b1_dynamic.tflite"
    model = load(path)
    hybrid = [op for op in model.graph.ops if op.type == "FULLY_CONNECTED"
              and op.inputs[1].dtype == np.int8 and op.inputs[0].dtype == np.float32]
    assert len(hybrid) >= 4
    for op in hybrid:  # the converter asks for asymmetric inputs; LiteRT does both
        op.options.asymmetricQuantizeInputs = asymmetric
    inputs = zoo_inputs(path, model)
    want = litert(bytes(write_model(model, "tflite")), inputs)
    assert_close(Interpreter(model).invoke(inputs), want)


@pytest.mark.parametrize("name", ["mobilenet_v1", "unet", "vit_block", "convs_int8"])
def test_fixed_batch_folds_the_shape_arithmetic(name: str) -> None:
    path = ZOO_DIR / f"{name}.tflite"
    model = load(path)
    assert model.graph.inputs[0].is_dynamic
    batch = 2 if name == "vit_block" else 1
    static = fix_free_dims(model, batch)
    assert not any(t.is_dynamic for g in static.subgraphs for t in g.tensors)
    assert model.graph.inputs[0].is_dynamic  # the source is unchanged
    compiled = compile_model(static)
    kinds = [op.type for op in compiled.model.graph.ops]
    assert "SHAPE" not in kinds and "PACK" not in kinds
    folded = {r.source_id for r in compiled.removed().itertuples() if r.reason ==
              "constant folded"}
    shape_ops = {i for i, op in enumerate(model.graph.ops) if op.type == "SHAPE"}
    assert shape_ops and shape_ops <= folded
    print(f"{name}: {len(model.graph.ops)} ops, batch fixed -> {len(kinds)} compiled")
    inputs = {k: v[:batch] for k, v in zoo_inputs(path, model).items()}
    want = litert(path.read_bytes(), inputs)
    assert_close(Interpreter(compiled).invoke(inputs), want)


@pytest.mark.parametrize("name", ["lstm", "bi_gru_b1", "control_flow", "fused_bilstm_int8"])
def test_parts_with_subgraphs_run_in_litert(name: str, tmp_path: Path) -> None:
    path = ZOO_DIR / f"{name}.tflite"
    model = load(path)
    kinds = sorted({op.type for op in model.graph.ops})
    spec = PartSpec(["cpu", "npu"], "cpu", "opcode", opcode={k: "npu" for k in kinds[::2]})
    result = partition(model, spec)
    assert len(result.parts) >= 2
    assert any(len(p.model.subgraphs) > 1 for p in result.parts) == (name != "fused_bilstm_int8")
    result.write(tmp_path, ext=".tflite")  # each part a .tflite LiteRT runs, loops included
    (conn,) = tmp_path.glob("*.conn.json")
    inputs = zoo_inputs(path, model)
    got = run_connection(conn, inputs, run=litert_runner())
    assert_close(got.outputs, litert(path.read_bytes(), inputs))


def test_kernel_errors_name_subgraph_and_op_index() -> None:
    path = ZOO_DIR / "gather_ops.tflite"
    model = load(path)
    it = Interpreter(model)
    (key,) = it.input_names
    ids = np.full((2, 4), 99, np.int32)  # the table has 16 rows
    with pytest.raises(RuntimeInputError, match=r"subgraph 0 op \d+ \(GATHER"):
        it.invoke({key: ids})
