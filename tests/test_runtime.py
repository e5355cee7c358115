"""The reference runtime against LiteRT on every sample model, its traces, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_TFLITE, SAMPLES, litert_run
from test_partition import random_models

import toolkit as tk
from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.errors import RuntimeInputError, UnsupportedOpError
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.tracer import EventTracer


def _compare(model_path, seed: int) -> None:
    m = tk.load(model_path)
    it = Interpreter(m)
    inputs = it.random_inputs(seed)
    first = it.invoke(inputs)  # step by step, binding the kernels
    ours = it.invoke(inputs)  # the generated straight-line code
    unbound = Interpreter(m, bind=False).invoke(inputs)
    assert it.bound is not None and any(it.bound)
    for k in ours:
        np.testing.assert_array_equal(first[k], ours[k], strict=True)
        np.testing.assert_array_equal(unbound[k], ours[k], strict=True)
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
    ev = res.trace.runtime.to_frame()
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


def test_invoke_records_into_several_tracers_and_starts_runs_on_request() -> None:
    m = tk.load(SAMPLES / "cnn.tflite")
    n = len(m.graph)
    it = Interpreter(m)
    x = it.random_inputs(0)
    first, second = EventTracer(), EventTracer()
    it.invoke(x, first)  # binds kernels
    it.invoke(x, first)  # generated code, no new run asked: same run
    it.invoke(x, second, new_run=True)
    it.invoke(x, first, new_run=True)
    it.invoke(x, first, new_run=True)
    it.invoke(x)  # untraced: records nothing
    ev = first.to_frame()
    assert ev["run"].tolist() == [0] * 2 * n + [1] * n + [2] * n
    assert ev["op_index"].tolist() == list(range(n)) * 4
    assert (np.diff(ev["start_ns"].to_numpy()) >= 0).all() and (ev["dur_ns"] > 0).all()
    assert second.to_frame()["run"].tolist() == [0] * n


@pytest.mark.parametrize("limit", [512, 0], ids=["generated", "loop"])
def test_events_are_timed_by_the_tracers_clock(monkeypatch, limit: int) -> None:
    from toolkit.runtime import codegen

    monkeypatch.setattr(codegen, "LOCALS_LIMIT", limit)
    m = tk.load(SAMPLES / "cnn.tflite")
    n = len(m.graph)
    ticks = iter(range(0, 10**6, 7))
    tracer = EventTracer(clock=lambda: next(ticks))
    res = run(m, None, tracer=tracer, repeat=3)  # step by step, then generated code
    ev = res.trace.runtime.to_frame()
    assert ev["start_ns"].tolist() == [7 * (k + k // n) for k in range(3 * n)]
    assert (ev["dur_ns"] == 7).all()


def test_outputs_by_name_and_input_forms() -> None:
    m = tk.load(SAMPLES / "two_branch.tflite")
    it = Interpreter(m)
    x = it.random_inputs(3)
    by_dict = run(m, x).outputs
    by_list = run(m, [x["left"], x["right"]]).outputs
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
    out = run(mb.build(), {"x": -np.ones((3, 4), np.float32)}).outputs
    assert out["y"].shape == (3, 4) and (out["y"] == 0).all()


def test_repeat_must_be_positive() -> None:
    with pytest.raises(tk.ToolkitError, match="repeat"):
        run(tk.load(SAMPLES / "cnn.tflite"), None, repeat=0)


def test_cnn_binds_every_op_and_repeats_bit_for_bit() -> None:
    m = tk.load(SAMPLES / "cnn.tflite")
    it = Interpreter(m)
    assert it.bound is None
    outs = [it.invoke(it.random_inputs(seed)) for seed in (0, 1, 0)]
    assert it.bound == [True] * len(m.graph)
    np.testing.assert_array_equal(outs[0]["cnn/softmax/Softmax"],
                                  outs[2]["cnn/softmax/Softmax"])
    assert not np.array_equal(outs[0]["cnn/softmax/Softmax"], outs[1]["cnn/softmax/Softmax"])
    # outputs are fresh arrays: a later inference does not change them
    assert outs[0]["cnn/softmax/Softmax"] is not outs[2]["cnn/softmax/Softmax"]
    assert Interpreter(m, bind=False).invoke(it.random_inputs(0)).keys() == outs[0].keys()
    unbound = Interpreter(m, bind=False)
    unbound.invoke(it.random_inputs(0))
    assert unbound.bound == [False] * len(m.graph)


@pytest.mark.parametrize("limit", [512, 0], ids=["generated", "loop"])
def test_a_step_failing_in_generated_code_names_the_op(monkeypatch, limit: int) -> None:
    from toolkit.runtime import codegen
    from toolkit.runtime.kernels import KERNELS

    monkeypatch.setattr(codegen, "LOCALS_LIMIT", limit)

    def picky(op, args):
        if np.isnan(args[0]).any():
            raise FloatingPointError("NaN input")
        return [args[0] * 2]

    KERNELS["PickyOp"] = picky
    try:
        mb = ModelBuilder()
        x = mb.input("x", [1, 4])
        y = mb.op("CUSTOM", [mb.unary("RELU", x, name="r")], [1, 4], name="my/picky",
                  custom_code="PickyOp")
        mb.output(y)
        it = Interpreter(mb.build())
        ok = it.invoke({"x": np.ones((1, 4), np.float32)})
        np.testing.assert_array_equal(ok["my/picky"], np.full((1, 4), 2, np.float32))
        assert it.bound == [True, False]
        with pytest.raises(RuntimeInputError, match=r"PickyOp.*FloatingPointError.*NaN") as e:
            it.invoke({"x": np.full((1, 4), np.nan, np.float32)})
        assert "op 1" in str(e.value) and "my/picky" in str(e.value)
        # and the same when traced
        tr = EventTracer()
        with pytest.raises(RuntimeInputError, match="my/picky"):
            it.invoke({"x": np.full((1, 4), np.nan, np.float32)}, tr)
    finally:
        del KERNELS["PickyOp"]


def test_non_contiguous_and_list_inputs_take_the_checked_path() -> None:
    m = tk.load(SAMPLES / "cnn.tflite")
    it = Interpreter(m)
    x = it.random_inputs(0)["image"]
    want = it.invoke({"image": x})
    wide = np.zeros((1, 32, 64, 3), np.float32)
    wide[:, :, ::2] = x
    strided = wide[:, :, ::2]
    assert not strided.flags.c_contiguous
    for form in ({"image": strided}, [x], x):
        got = it.invoke(form)
        np.testing.assert_array_equal(got["cnn/softmax/Softmax"], want["cnn/softmax/Softmax"])


def _three_ways(it: Interpreter, x: dict) -> list[dict]:
    """The step-by-step first inference, the generated (or looping) second one, and a
    traced third one with one event per step."""
    outs = [it.invoke(x), it.invoke(x)]
    tracer = EventTracer()
    outs.append(it.invoke(x, tracer))
    frame = tracer.to_frame()
    assert len(frame) == len(it.plan.steps) and (frame["dur_ns"] >= 0).all()
    assert frame["key"].tolist() == [s.key for s in it.plan.steps]
    return outs


@pytest.mark.parametrize("limit", [512, 0], ids=["generated", "loop"])
def test_generated_code_and_the_large_model_loop_agree(monkeypatch, limit: int) -> None:
    from toolkit.compiler import Target, compile_model
    from toolkit.runtime import codegen

    monkeypatch.setattr(codegen, "LOCALS_LIMIT", limit)
    models = [tk.load(p) for p in ALL_TFLITE]
    cnn = tk.load(SAMPLES / "cnn.tflite")
    striped = compile_model(cnn, target=Target(buffer_bytes=2048))
    assert any(int(c.stripes) > 1 for c in striped.command_list)
    # odd wiring: a multi-output op, an input used twice and also an output
    mb = ModelBuilder("odd")
    x = mb.input("x", [1, 4])
    halves = mb.split(mb.concat([x, x], axis=1, name="cat"), 2, axis=1, name="halves")
    mb.output(mb.binary("SUB", halves[0], halves[1], name="zero"), x, halves[1])
    odd = mb.build()
    for model in [*models, striped, odd]:
        it = Interpreter(model)
        outs = _three_ways(it, it.random_inputs(1))
        for k in outs[0]:
            for other in outs[1:]:
                np.testing.assert_array_equal(other[k], outs[0][k], strict=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=random_models(), limit=st.sampled_from([512, 0]))
def test_random_graphs_bound_and_generated_equal_the_kernels(case, limit: int) -> None:
    from toolkit.runtime import codegen

    model, _ = case
    saved = codegen.LOCALS_LIMIT
    codegen.LOCALS_LIMIT = limit
    try:
        it = Interpreter(model)
        x = it.random_inputs(2)
        outs = _three_ways(it, x)
        want = Interpreter(model, bind=False).invoke(x)
    finally:
        codegen.LOCALS_LIMIT = saved
    for k in want:
        for got in outs:
            np.testing.assert_array_equal(got[k], want[k], strict=True)
