"""The front door: typed entry points, one model-argument rule, one run result, one vocabulary."""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolkit as tk
from toolkit.model_arg import resolve_model
from toolkit.runtime.result import RunResult

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_models"
ENTRY_POINTS = ["load", "save", "compile", "partition", "codegen", "run", "read_trace",
                "trace_join", "read_vela", "explore", "read_executorch"]


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_entry_points_are_documented_functions(name: str) -> None:
    fn = getattr(tk, name)
    assert inspect.isfunction(fn), f"tk.{name} is a {type(fn).__name__}"
    assert fn.__module__ == "toolkit"
    params = inspect.signature(fn).parameters
    assert params and not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                              for p in params.values())
    doc = inspect.getdoc(fn) or ""
    assert "Returns:" in doc or "Return" in doc
    assert fn.__annotations__.get("return"), f"tk.{name} has no return annotation"


def test_signatures_name_the_real_parameters() -> None:
    assert list(inspect.signature(tk.compile).parameters)[:3] == ["model", "passes", "target"]
    assert list(inspect.signature(tk.partition).parameters)[:4] == [
        "model", "part", "backends", "default"]
    assert {"trace", "repeat", "warmup"} <= set(inspect.signature(tk.run).parameters)
    assert {"policy", "key", "overlaps"} <= set(inspect.signature(tk.trace_join).parameters)


def test_help_is_about_the_function() -> None:
    text = pydoc.render_doc(tk.compile, renderer=pydoc.plaintext)
    assert "compile(model" in text and "origin-preserving passes" in text
    assert len(text.splitlines()) < 60


def test_fresh_interpreter_offers_every_entry_point_and_stays_light() -> None:
    code = ("import sys, toolkit as tk; names = dir(tk); "
            "print(','.join(names)); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.splitlines()
    names = set(out[0].split(","))
    assert set(ENTRY_POINTS) | {"Target", "CompiledModel", "RunResult"} <= names
    assert not names & {"Any", "annotations", "TYPE_CHECKING", "importlib"}
    assert out[1] == "False", "import toolkit must not import pandas"


def test_lazy_classes_resolve() -> None:
    from toolkit.compiler import Target

    assert tk.Target is Target
    with pytest.raises(AttributeError):
        tk.no_such_thing  # noqa: B018


# -------------------------------------------------------------------- run returns one type
def test_run_returns_one_type_traced_or_not() -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    plain = tk.run(model)
    traced = tk.run(model, trace=True, repeat=2)
    assert type(plain) is type(traced) is RunResult
    outputs, trace = plain
    assert trace is None and set(outputs) == {t.name for t in model.graph.outputs}
    outputs2, trace2 = traced
    assert trace2 is not None and len(trace2) == 2 * len(model.graph)
    for k in outputs:
        np.testing.assert_array_equal(outputs[k], outputs2[k])
    assert "not traced" in repr(plain)


def test_warmup_runs_untraced_inferences_first() -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    res = tk.run(model, trace=True, repeat=3, warmup=4)
    frame = res.trace.runtime.to_frame()
    assert frame["run"].nunique() == 3 and len(frame) == 3 * len(model.graph)


@pytest.mark.parametrize("bad", [{"repeat": 2.5}, {"repeat": 0}, {"warmup": -1},
                                 {"repeat": True}])
def test_run_validates_its_arguments(bad: dict[str, object]) -> None:
    with pytest.raises(tk.ToolkitError):
        tk.run(SAMPLES / "cnn.tflite", **bad)  # type: ignore[arg-type]


# -------------------------------------------------------------------- one model argument
def test_every_spelling_of_a_compiled_model_runs_and_joins(tmp_path: Path) -> None:
    compiled = tk.compile(SAMPLES / "cnn.tflite", target=tk.Target(buffer_bytes=4096))
    compiled.save(tmp_path, stem="cnn")
    x = tk.run(compiled).outputs
    for spelling in (compiled, tmp_path, tmp_path / "cnn.circle", str(tmp_path)):
        arg = resolve_model(spelling, purpose="test")
        assert arg.kind == "compiled"
        res = tk.run(spelling, trace=True)
        for k in x:
            np.testing.assert_array_equal(res.outputs[k], x[k])
        att = tk.trace_join(res.trace, spelling)
        att.check()
        assert att.unattributed_ns == 0


def test_model_spellings() -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    assert resolve_model(model).kind == "model"
    assert resolve_model(SAMPLES / "cnn.tflite").kind == "model"
    part = tk.partition(model, {"partition": {"backends": "a,b", "default": "a"},
                                "OPCODE": {"CONV_2D": "b"}})
    assert resolve_model(part).kind == "partition"


def test_one_message_for_what_an_entry_point_cannot_take(tmp_path: Path) -> None:
    compiled = tk.compile(SAMPLES / "cnn.tflite")
    compiled.save(tmp_path, stem="cnn")
    cases = [
        (lambda: tk.compile(compiled), "tk.compile cannot take a CompiledModel"),
        (lambda: tk.compile(tmp_path), "tk.compile cannot take a folder"),
        (lambda: tk.partition(tmp_path / "x.conn.json", "a.part"),
         "tk.partition cannot take a connection file"),
        (lambda: tk.run(123), "tk.run cannot take a int"),
        (lambda: tk.run(tmp_path / "cnn_debug.xml"), "tk.run cannot take a .xml file"),
        (lambda: tk.run(tmp_path / "missing.tflite"), "no such file or folder"),
        (lambda: tk.load(123), "tk.load cannot take a int"),  # type: ignore[arg-type]
        (lambda: tk.trace_join(pd.DataFrame(), 1.5), "trace_join cannot take a float"),
    ]
    for call, text in cases:
        with pytest.raises(tk.ToolkitError) as info:
            call()
        msg = str(info.value)
        assert text in msg, msg
    # the fix lists what the entry point takes
    with pytest.raises(tk.ToolkitError,
                       match=r"Fix: pass a Model or a model file \(\.tflite, \.circle"):
        tk.compile(compiled)


def test_cli_run_and_inspect_take_the_same_spellings(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    from toolkit.cli import main

    compiled = tk.compile(SAMPLES / "cnn.tflite")
    compiled.save(tmp_path, stem="cnn")
    for spelling in (tmp_path, tmp_path / "cnn.circle"):
        assert main(["run", str(spelling), "--warmup", "2", "--repeat", "2"]) == 0
        assert main(["inspect", str(spelling)]) == 0
    assert main(["run", str(tmp_path / "cnn_debug.xml")]) == 2
    err = capsys.readouterr().err
    assert "toolkit run" not in err or "cannot take" in err
    assert "cannot take a .xml file" in err


# -------------------------------------------------------------------- one vocabulary
_FIGURES = ["macs", "output_bytes", "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d"]
_SAMPLES = ["cnn.tflite", "cnn_int8.tflite", "transformer.tflite", "two_branch.tflite",
            "Net_InstanceNorm_003.circle", "tf/tf_cnn.tflite", "tf/tf_layer_norm.tflite"]


@pytest.mark.parametrize("name", _SAMPLES)
def test_compiled_and_partition_agree_on_every_source_op(name: str) -> None:
    model = tk.load(SAMPLES / name)
    compiled = tk.compile(model)
    kinds = sorted({op.kind for op in model.graph.ops})
    part = tk.partition(model, {"partition": {"backends": "a,b", "default": "a"},
                                "OPCODE": {kinds[0]: "b"}})
    a = compiled.source_ops().set_index("source_id")
    b = part.source_ops().set_index("source_id")
    pd.testing.assert_frame_equal(a, b)
    assert a["macs"].sum() > 0 or name.startswith("Net_")
    pd.testing.assert_frame_equal(compiled.layers(), part.layers())


def test_converter_names_give_their_keras_layers() -> None:
    from toolkit.layer_names import tf_layers

    assert tf_layers("model/conv/Relu;model/conv/BiasAdd;model/conv/Conv2D; ;", "model",
                     False) == (("conv",), "conv")
    assert tf_layers("", "model", False) == ((), "")


def test_running_a_model_leaves_its_ops_untouched() -> None:
    """Per-run caches live in the runtime, not in the IR: running a model and compiling it
    afterwards sees the ops exactly as loaded."""
    model = tk.load(SAMPLES / "cnn.tflite")
    before = [dict(op.extra) for op in model.graph.ops]
    tk.run(model, repeat=3)
    assert [dict(op.extra) for op in model.graph.ops] == before
    compiled = tk.compile(model)
    assert all("plan" not in str(k) and "cache" not in str(k)
               for op in compiled.model.graph.ops for k in op.extra)


def test_loader_builds_graphs_through_the_ir() -> None:
    """Graph.adopt links what the reader builds; the result is a normal, verifiable graph."""
    model = tk.load(SAMPLES / "transformer.tflite")
    g = model.graph
    g.verify() if hasattr(g, "verify") else model.verify()
    for op in g.ops:
        assert op.graph is g
        for t in op.outputs:
            assert t.producer is op and t.graph is g
        for t in op.inputs:
            assert t is None or op in t.consumers


def test_onnx_models_come_through_the_front_door() -> None:
    """tk.load and tk.trace_join take .onnx files and route them to the ONNX importer and
    ORT's join (the `optimized=` graph ORT saved)."""
    onnx = SAMPLES / "onnx"
    model = tk.load(onnx / "cnn.ts.onnx")
    assert model.format == "onnx" and len(model.graph.ops) > 0
    att = tk.trace_join(onnx / "cnn.ts.all.opt.prof.json.gz", onnx / "cnn.ts.onnx",
                        optimized=onnx / "cnn.ts.all.opt.onnx")
    direct = tk.join_ort(onnx / "cnn.ts.all.opt.prof.json.gz", model,
                         onnx / "cnn.ts.all.opt.onnx", policy="macs")
    att.check()
    pd.testing.assert_frame_equal(att.by_layer(), direct.by_layer())
    with pytest.raises(tk.ToolkitError, match="weights= is for a Caffe"):
        tk.load(onnx / "cnn.ts.onnx", weights=onnx / "cnn.ts.onnx")
