"""The reference runtime against LiteRT on every sample model, its traces, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from support import ALL_TFLITE, SAMPLES, litert_run

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.errors import RuntimeInputError, UnsupportedOpError
from toolkit.runtime.interpreter import Interpreter, run


def _compare(model_path, seed: int) -> None:
    m = tk.load(model_path)
    it = Interpreter(m)
    inputs = it.random_inputs(seed)
    ours = it.invoke(inputs)
    ref = litert_run(model_path, inputs)
    assert ours.keys() == ref.keys()
    for k in ref:
        a, b = ours[k], ref[k]
        assert a.dtype == b.dtype and a.shape == b.shape, k
        if np.issubdtype(b.dtype, np.floating):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=k)
        else:
            diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
            assert diff.max() <= 1, f"{k}: int8 differs by {diff.max()}"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("path", ALL_TFLITE, ids=lambda p: p.name)
def test_matches_litert(path, seed) -> None:
    _compare(path, seed)


@pytest.mark.parametrize("path", ALL_TFLITE, ids=lambda p: p.name)
def test_trace_one_event_per_op_per_repeat(path, tmp_path) -> None:
    m = tk.load(path)
    res = run(m, None, trace=True, repeat=4)
    ev = res.trace.to_frame()
    n = len(m.graph)
    assert len(ev) == 4 * n
    assert sorted(ev["run"].unique().tolist()) == [0, 1, 2, 3]
    for _, g in ev.groupby("run"):
        assert sorted(g["op_index"].tolist()) == list(range(n))
    assert (ev["dur_ns"] > 0).all()
    assert (np.diff(ev["start_ns"].to_numpy()) >= 0).all()
    # written as a Chrome trace, read back: the same events
    from toolkit.formats.chrome_trace import read_chrome_trace, write_chrome_trace

    write_chrome_trace(ev, tmp_path / "t.json")
    back = read_chrome_trace(tmp_path / "t.json")
    assert len(back) == len(ev)
    assert (back["dur_ns"].to_numpy() == ev["dur_ns"].to_numpy()).all()


def test_outputs_by_name_and_input_forms() -> None:
    m = tk.load(SAMPLES / "two_branch.tflite")
    it = Interpreter(m)
    x = it.random_inputs(3)
    by_dict = run(m, x)
    by_list = run(m, [x["left"], x["right"]])
    assert set(by_dict) == {"features", "scores"}
    for k in by_dict:
        np.testing.assert_array_equal(by_dict[k], by_list[k])


def test_bad_input_name_shape_dtype() -> None:
    m = tk.load(SAMPLES / "cnn.tflite")
    x = np.zeros((1, 32, 32, 3), np.float32)
    with pytest.raises(RuntimeInputError, match=r"unknown input name.*'img'.*image"):
        run(m, {"img": x})
    with pytest.raises(RuntimeInputError, match=r"'image'.*shape \[1, 32, 32, 4\]"):
        run(m, {"image": np.zeros((1, 32, 32, 4), np.float32)})
    with pytest.raises(RuntimeInputError, match=r"'image'.*dtype float64"):
        run(m, {"image": x.astype(np.float64)})
    with pytest.raises(RuntimeInputError, match="missing"):
        run(tk.load(SAMPLES / "two_branch.tflite"), {"left": np.zeros((1, 16, 16, 4),
                                                                      np.float32)})


def test_unsupported_op_names_op_and_tensor() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.op("CUSTOM", [x], [1, 4], name="my/secret_op", custom_code="SecretOp")
    mb.output(y)
    with pytest.raises(UnsupportedOpError, match=r"SecretOp.*my/secret_op"):
        run(mb.build(), {"x": np.zeros((1, 4), np.float32)})


def test_dynamic_batch_via_shape_signature() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    x.shape_signature = (-1, 4)
    y = mb.unary("RELU", x, name="y")
    y.shape_signature = (-1, 4)
    mb.output(y)
    out = run(mb.build(), {"x": -np.ones((3, 4), np.float32)})
    assert out["y"].shape == (3, 4) and (out["y"] == 0).all()


def test_repeat_must_be_positive() -> None:
    with pytest.raises(tk.ToolkitError, match="repeat"):
        run(tk.load(SAMPLES / "cnn.tflite"), None, repeat=0)
