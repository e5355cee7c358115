"""What real models bring to the verbs: free dimensions at generation time (the file's shape
as LiteRT takes it, or shapes= / --shape), empty constants (an INT32[0] shape operand) in every
verb, and weights passed into an IF's branches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import litert_run
from test_codegen_control import _options, _subgraph

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.errors import ToolkitError, UnsupportedOpError

ZOO = Path(__file__).resolve().parent.parent / "sample_models" / "zoo"


# ------------------------------------------------------------- free dimensions
def test_codegen_of_a_default_tf_conversion_takes_the_files_shape(tmp_path: Path) -> None:
    model = tk.load(ZOO / "ds_cnn.tflite")
    inp = model.graph.inputs[0]
    assert inp.shape_signature is not None and inp.shape_signature[0] == -1
    art = tk.codegen(model, tmp_path / "a")  # no extra argument
    assert art.manifest["inputs"][0]["shape"] == list(inp.shape)  # the file's: batch 1
    x = np.random.default_rng(0).uniform(-1, 1, inp.shape).astype(np.float32)
    want = litert_run(ZOO / "ds_cnn.tflite", [x])
    got = tk.run(art, {inp.name: x}).outputs
    for k, w in want.items():
        assert float(np.abs(got[k] - w).max()) <= 1e-5 * float(np.abs(w).max())
    # the same from the path
    assert tk.codegen(ZOO / "ds_cnn.tflite", tmp_path / "b").manifest["inputs"] == \
        art.manifest["inputs"]


def test_shapes_set_a_free_dimension(tmp_path: Path) -> None:
    model = tk.load(ZOO / "ds_cnn.tflite")
    inp = model.graph.inputs[0]
    shape = (3, *inp.shape[1:])
    art = tk.codegen(model, tmp_path, shapes={inp.name: shape})
    assert art.manifest["inputs"][0]["shape"] == list(shape)
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    fixed = tk.fix_free_dims(model, {inp.name: shape})
    assert fixed.graph.inputs[0].shape == shape and not fixed.graph.inputs[0].is_dynamic
    assert inp.shape_signature[0] == -1  # the model given is unchanged
    want = tk.run(fixed, {inp.name: x}).outputs
    for k, w in tk.run(art, {inp.name: x}).outputs.items():
        assert float(np.abs(want[k] - w).max()) <= 1e-5 * float(np.abs(w).max())


@pytest.mark.parametrize("shapes, match", [
    ({"nope": (1, 2)}, "not inputs of the model"),
    ({"serving_default_mfcc:0": (1, 49, 10)}, "does not fit its signature"),
    ({"serving_default_mfcc:0": (1, 50, 10, 1)}, "does not fit its signature"),
    ({"serving_default_mfcc:0": (0, 49, 10, 1)}, "does not fit its signature"),
    ({"serving_default_mfcc:0": "1x49"}, "is not a shape"),
])
def test_bad_shapes_are_refused(shapes: dict, match: str, tmp_path: Path) -> None:
    model = tk.load(ZOO / "ds_cnn.tflite")
    assert model.graph.inputs[0].name == "serving_default_mfcc:0"
    with pytest.raises(ToolkitError, match=match):
        tk.codegen(model, tmp_path, shapes=shapes)


def test_a_compiled_free_model_names_fix_free_dims(tmp_path: Path) -> None:
    compiled = tk.compile(tk.load(ZOO / "ds_cnn.tflite"))
    with pytest.raises(UnsupportedOpError, match=r"tk\.fix_free_dims\(model, shapes="):
        tk.codegen(compiled, tmp_path)
    with pytest.raises(ToolkitError, match="shapes= applies to a model"):
        tk.codegen(compiled, tmp_path, shapes={"serving_default_mfcc:0": (1, 49, 10, 1)})


def test_cli_shape_fixes_the_free_dimensions(tmp_path: Path, capsys) -> None:
    from toolkit.cli import main

    assert main(["compile", str(ZOO / "ds_cnn.tflite"), "-o", str(tmp_path), "--target",
                 "cpp", "--shape", "serving_default_mfcc:0=2x49x10x1"]) == 0
    manifest = json.loads((tmp_path / "ds_cnn.json").read_text())
    assert manifest["inputs"][0]["shape"] == [2, 49, 10, 1]
    assert main(["compile", str(ZOO / "ds_cnn.tflite"), "-o", str(tmp_path), "--target",
                 "cpp", "--shape", "2x49"]) != 0
    assert "NAME=DIMS" in capsys.readouterr().err


# ------------------------------------------------------------- empty constants
def _scalar_reshape(tmp_path: Path) -> Path:
    mb = ModelBuilder("empty")
    x = mb.input("x", [1, 1])
    h = mb.unary("TANH", x, name="h")
    s = mb.op("RESHAPE", [h, mb.const("scalar_shape", np.zeros(0, np.int32))], (), name="s",
              newShape=[])
    mb.output(mb.unary("LOGISTIC", s, name="y"))
    return tk.save(mb.build(), tmp_path / "empty.tflite")


def test_an_empty_shape_constant_is_a_constant_in_every_verb(tmp_path: Path) -> None:
    path = _scalar_reshape(tmp_path)
    model = tk.load(path)
    t = model.graph.tensor("scalar_shape")
    assert t.is_const and t.data.shape == (0,) and t.data.dtype == np.int32
    x = {"x": np.array([[0.5]], np.float32)}
    want = litert_run(path, x)["y"]
    np.testing.assert_array_equal(tk.run(model, x).outputs["y"], want)
    np.testing.assert_array_equal(tk.run(tk.compile(model), x).outputs["y"], want)
    att = tk.trace_join(tk.run(model, x, trace=True).trace, model)
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0
    spec = {"partition": {"backends": "a,b", "default": "a", "comply": "opcode"},
            "OPCODE": {"RESHAPE": "b"}}
    np.testing.assert_array_equal(tk.run(tk.partition(model, spec), x).outputs["y"], want)
    art = tk.codegen(model, tmp_path / "cpp")
    np.testing.assert_allclose(tk.run(art, x).outputs["y"], want, rtol=1e-6)


# ------------------------------------------------------- weights into a branch
def _if_fc_model() -> tk.Model:
    """``fc(x, w, b)`` if sum(x) > 0 else ``-fc(x, w, b)``, the weights passed to the branches
    as arguments of the IF (as converters write them)."""

    def branch(neg: bool):  # type: ignore[no-untyped-def]
        def body(mb: ModelBuilder) -> None:
            a, w, b = mb.input("a", [1, 4]), mb.input("w", [3, 4]), mb.input("b", [3])
            y = mb.op("FULLY_CONNECTED", [a, w, b], (1, 3), name="fc")
            mb.output(mb.unary("NEG", y, name="neg") if neg else y)
        return body

    mb = ModelBuilder("iffc")
    x = mb.input("x", [1, 4])
    s = mb.reduce("SUM", x, [0, 1], keep_dims=False, name="sum")
    flag = mb.op("GREATER", [s, mb.const("zero", np.asarray(0.0, np.float32))], [],
                 name="pos", dtype=np.bool_)
    w = mb.const("w", np.random.default_rng(0).uniform(-1, 1, (3, 4)).astype(np.float32))
    b = mb.const("b", np.asarray([0.1, 0.2, 0.3], np.float32))
    t, e = _subgraph(mb, "then", branch(False)), _subgraph(mb, "else", branch(True))
    mb.output(mb.op("IF", [flag, x, w, b], [1, 3], name="choose", dtype=np.float32,
                    options=_options("IfOptions", thenSubgraphIndex=t, elseSubgraphIndex=e)))
    return mb.build()


def test_codegen_takes_weights_passed_into_an_if_branch(tmp_path: Path) -> None:
    model = _if_fc_model()
    path = tk.save(model, tmp_path / "iffc.tflite")
    art = tk.codegen(model, tmp_path / "cpp")
    assert len(model.subgraphs[1].inputs) == 3  # the model given is unchanged
    for sign in (1, -1):
        x = {"x": sign * np.linspace(0.2, 1, 4, dtype=np.float32).reshape(1, 4)}
        want = litert_run(path, x)["choose"]
        np.testing.assert_allclose(tk.run(art, x).outputs["choose"], want, rtol=1e-6)
