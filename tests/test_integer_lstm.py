"""TFLite's integer LSTM (toolkit.integer_lstm) in the reference runtime: bit-exact with
LiteRT on models built here (CIFG, peephole, projection, layer norm, cell scales) and on the
converter zoo's int8 LSTM; gemmlowp's int16 logistic and tanh, and TFLite's inverse square
root, close to the real functions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support import SAMPLES, int8_lstm_model, litert_run

from toolkit.errors import UnsupportedOpError
from toolkit.fixed_point import int16_logistic, int16_tanh
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import write_model
from toolkit.integer_lstm import prepare_integer_lstm
from toolkit.runtime.interpreter import run_model
from toolkit.runtime.kernels import sequence

CONFIGS = {"batch_major": {}, "time_major_cifg": {"time_major": True, "cifg": True},
           "cell_2e-15_clipped": {"cell_log2": -15, "clip": 3.0},
           "cell_2e-9_one_row": {"cell_log2": -9, "batch": 1, "steps": 12},
           "peephole": {"peephole": True}, "peephole_cifg": {"peephole": True, "cifg": True},
           "projection": {"projection": 4},
           "projection_clipped": {"projection": 9, "proj_clip": 0.3},
           "projection_peephole": {"projection": 6, "peephole": True},
           "layer_norm": {"layer_norm": True},
           "layer_norm_cifg_peephole": {"layer_norm": True, "cifg": True, "peephole": True},
           "layer_norm_projection": {"layer_norm": True, "projection": 5, "time_major": True}}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_integer_lstm_is_litert_s(config: str) -> None:
    model = int8_lstm_model(1, **CONFIGS[config])  # type: ignore[arg-type]
    data = bytes(write_model(model, "tflite"))
    (t,) = model.graph.inputs
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, t.shape).astype(np.int8)
        (got,) = run_model(model, {"x": x}).outputs.values()
        (want,) = litert_run(data, [x]).values()
        np.testing.assert_array_equal(got, want)
        assert np.unique(got).size > 20


def test_gates_in_float32_were_not_litert_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float32 path (kept for LSTMs the integer kernel does not take) is within 1 of
    LiteRT but not equal: the integer kernel is what makes the difference."""
    model = int8_lstm_model(1)
    data = bytes(write_model(model, "tflite"))
    x = np.random.default_rng(0).integers(-128, 128, (2, 5, 7)).astype(np.int8)
    (want,) = litert_run(data, [x]).values()

    def refuse(op: object) -> None:
        raise UnsupportedOpError("float32 gates")

    monkeypatch.setattr(sequence, "prepare_integer_lstm", refuse)
    (approx,) = run_model(model, {"x": x}).outputs.values()
    diff = np.abs(approx.astype(np.int64) - want.astype(np.int64))
    assert diff.max() == 1


def test_zoo_int8_bilstm_layers_are_litert_s() -> None:
    """Each LSTM of the converter's fused Bidirectional int8 model, on LiteRT's own inputs,
    gives LiteRT's outputs (all tensors kept by LiteRT)."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    path = SAMPLES / "zoo" / "fused_bilstm_int8.tflite"
    model = load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = LiteRT(model_path=str(path), num_threads=1, experimental_preserve_all_tensors=True,
                    experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    index = {d["name"]: d["index"] for d in it.get_tensor_details()}
    lstms = [op for op in model.graph.ops if op.type == "UNIDIRECTIONAL_SEQUENCE_LSTM"]
    assert len(lstms) == 2
    (d,) = it.get_input_details()
    for seed in range(3):
        it.set_tensor(d["index"], np.random.default_rng(seed).integers(-128, 128, d["shape"])
                      .astype(np.int8))
        it.reset_all_variables()
        it.invoke()
        for op in lstms:
            args: list[np.ndarray | None] = [None] * len(op.inputs)
            for i, t in enumerate(op.inputs):
                if t is not None and t.data is not None and not t.is_variable:
                    args[i] = np.asarray(t.data)
            args[0] = it.get_tensor(index[op.inputs[0].name])
            (got,) = sequence.unidirectional_sequence_lstm(op, args)
            np.testing.assert_array_equal(got, it.get_tensor(index[op.outputs[0].name]))


def test_zoo_stacked_int8_bilstm_is_litert_s() -> None:
    """The converter's stacked Bidirectional LSTM then LSTM in int8, whole model: bit-exact
    with LiteRT. Its third LSTM has a cell state of scale 2**-16, for which LiteRT skips the
    tanh of the cell (reproduced, with a warning naming the op and the fix)."""
    path = SAMPLES / "zoo" / "stacked_bilstm_int8.tflite"
    model = load(path)
    assert [op.type for op in model.graph.ops].count("UNIDIRECTIONAL_SEQUENCE_LSTM") == 3
    (t,) = model.graph.inputs
    for seed in range(4):
        x = np.random.default_rng(seed).integers(-128, 128, t.shape).astype(np.int8)
        with pytest.warns(UserWarning, match=r"2\*\*-16 is finer than 2\*\*-15"):
            (got,) = run_model(model, {t.name: x}).outputs.values()
        (want,) = litert_run(path, [x]).values()
        np.testing.assert_array_equal(got, want)
        assert np.unique(want).size > 6


def test_int16_logistic_and_tanh_approximate_the_functions() -> None:
    """Every int16 value: logistic of Q3.12, tanh of Q0.15 .. Q6.9, within 5e-4 of the real
    functions (gemmlowp's int16 precision), exact at 0 and odd / complementary."""
    a = np.arange(-32768, 32768, dtype=np.int64)
    sig = int16_logistic(a)
    assert np.abs(sig / 32768 - 1 / (1 + np.exp(-a / 4096))).max() < 5e-4
    assert sig[32768] == 16384
    assert sig.min() >= 0 and sig.max() <= 32767
    np.testing.assert_array_equal(sig[32769:], 32767 - sig[1:32768][::-1])
    for bits in range(7):
        th = int16_tanh(a, bits)
        assert np.abs(th / 32768 - np.tanh(a / 2.0 ** (15 - bits))).max() < 5e-4, bits
        assert th[32768] == 0
        np.testing.assert_array_equal(th[1:], -th[1:][::-1])  # odd, but at -32768


def test_what_the_integer_kernel_does_not_take_is_named() -> None:
    model = int8_lstm_model(0)
    op = model.graph.ops[0]
    op.extra["intermediates"] = op.extra["intermediates"][:4]
    with pytest.raises(UnsupportedOpError, match="hidden-state intermediate"):
        prepare_integer_lstm(op)
    model = int8_lstm_model(0)
    op = model.graph.ops[0]
    c = op.inputs[19]
    assert c is not None and c.quant is not None
    c.quant.scale = np.asarray([3e-4], dtype=np.float32)
    with pytest.raises(UnsupportedOpError, match="not a power of two"):
        prepare_integer_lstm(op)



def test_inverse_square_root_multiplier_approximates_the_function() -> None:
    from toolkit.fixed_point import inv_sqrt_multiplier

    for v in (2, 3, 10, 1000, 123456, 2**28 + 3, 2**30 + 5, 2**31 - 1):
        m, s = inv_sqrt_multiplier(v)
        assert abs(m * 2.0 ** (s - 31) * v**0.5 - 1) < 2e-6, v
    assert inv_sqrt_multiplier(1) == (2**31 - 1, 0)
