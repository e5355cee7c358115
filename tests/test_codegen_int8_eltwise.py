"""The native int8 element-wise kernels: ADD, SUB and MUL computed 16 values at a time (AVX2)
on equal shapes, a squeeze-and-excite broadcast ([1, H, W, C] x [1, 1, 1, C]), a row
broadcast, a scalar on either side, odd channel counts (runs that end in a partial block),
fused clamps, nonzero zero points, a MUL whose multiplier is above 1 (a left shift); MEAN
over kept innermost axes (rows of sums) and others; swish
(x * LOGISTIC(x), either way round) as one table of x, a LOGISTIC read by nothing else not
computed; LOGISTIC, HARD_SWISH and TANH through the 256-value table lookup (32 values a time
with AVX2) on every int8 value. The artifact (every op's rows split across the threads) is
built with the host's vector instructions, with AVX2 alone and without vector instructions
(the tables of every pair of values) and run on one and two threads; every output equals,
bit for bit, the reference runtime's and LiteRT's on the .tflite written from the same model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import ISAS, build_for_isa, reference_equals_litert

import toolkit.generator.ops as ops_mod
from toolkit.builder import ModelBuilder
from toolkit.formats.flatbuffer_write import write_model
from toolkit.generator import codegen
from toolkit.ir import Model
from toolkit.ir import Quantization as Q
from toolkit.runtime.native import NativeModel


def _model() -> Model:
    i8 = np.int8
    mb = ModelBuilder("q8elt")
    a = mb.input("a", [1, 7, 9, 37], i8, quant=Q.make(0.05, -3))
    b = mb.input("b", [1, 7, 9, 37], i8, quant=Q.make(0.03, 10))
    s = mb.input("s", [1, 1, 1, 37], i8, quant=Q.make(1 / 256, -128))  # a LOGISTIC's output
    r = mb.input("r", [1, 7, 1, 37], i8, quant=Q.make(0.02, 5))
    c = mb.input("c", [1, 1, 1, 1], i8, quant=Q.make(0.04, -7))
    w = mb.input("w", [2, 5, 3, 19], i8, quant=Q.make(0.07, 1))  # runs of 19 (16 + 3)
    outs = [
        mb.add(a, b, name="add", quant=Q.make(0.07, 2)),
        mb.add(a, b, name="add_relu", activation="RELU", quant=Q.make(0.07, -128)),
        mb.sub(a, b, name="sub", quant=Q.make(0.08, -1)),
        mb.add(a, s, name="add_se", quant=Q.make(0.05, 0)),
        mb.add(c, a, name="add_scalar", activation="RELU6", quant=Q.make(0.03, -128)),
        mb.mul(a, b, name="mul", quant=Q.make(0.06, 4)),
        mb.mul(a, s, name="mul_se", quant=Q.make(0.05, -2)),  # squeeze-and-excite
        mb.mul(a, r, name="mul_row", quant=Q.make(0.01, 0)),
        mb.mul(c, a, name="mul_scalar", quant=Q.make(0.01, 3)),
        mb.mul(a, b, name="mul_left", quant=Q.make(0.0011, -6)),  # multiplier 1.36
        mb.mul(a, b, name="mul_relu", activation="RELU", quant=Q.make(0.02, -128)),
        mb.mul(w, w, name="mul_sq", quant=Q.make(0.2, -100)),
        (sig_a := mb.unary("LOGISTIC", a, name="logistic", quant=Q.make(1 / 256, -128))),
        # swish, x * LOGISTIC(x), either way round: a table of x
        mb.mul(a, sig_a, name="swish", quant=Q.make(0.03, -110)),
        mb.mul(mb.unary("LOGISTIC", b, name="logistic_b", quant=Q.make(1 / 256, -128)), b,
               name="swish_b", activation="RELU6", quant=Q.make(0.025, -128)),
        mb.unary("HARD_SWISH", w, name="hard_swish", quant=Q.make(0.03, -20)),
        mb.unary("TANH", b, name="tanh", quant=Q.make(1 / 128, 0)),
        # MEAN: a squeeze ([1, 1, 1, 37], input rows added 16 sums at a time), the middle
        # axis of [2, 5, 3, 19], a flattening one (as the scalar loop), other scales
        mb.mean(a, [1, 2], name="squeeze", quant=Q.make(0.01, 3)),
        mb.mean(w, [1], name="mean_mid", quant=Q.make(0.02, -4)),
        mb.mean(a, [1, 2], keep_dims=False, name="squeeze_flat", quant=Q.make(0.05, -3)),
        mb.mean(b, [3], name="mean_last", quant=Q.make(0.004, 10)),
    ]
    mb.output(*outs)
    return mb.build()


@pytest.fixture(scope="module")
def model() -> Model:
    return _model()


@pytest.fixture(scope="module")
def expected(model: Model, tmp_path_factory: pytest.TempPathFactory
             ) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """(inputs, outputs) of three seeds (the first holds every int8 value in each input),
    the reference runtime's outputs checked equal to LiteRT's first."""
    path = tmp_path_factory.mktemp("q8elt") / "q8elt.tflite"
    path.write_bytes(bytes(write_model(model, "tflite")))
    rng = np.random.default_rng(7)
    input_sets = []
    for seed in range(3):
        inputs = {}
        for t in model.graph.inputs:
            v = rng.integers(-128, 128, t.shape).astype(np.int8)
            if seed == 0 and v.size >= 256:
                v.reshape(-1)[:256] = np.arange(-128, 128)
            inputs[t.name] = v
        input_sets.append(inputs)
    return reference_equals_litert(model, path, input_sets)


@pytest.mark.parametrize("isa", ISAS)
def test_int8_eltwise_kernels_bit_exact(tmp_path: Path, model: Model, isa: str,
                                        expected: list[tuple[dict, dict]],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 1)  # every op's rows split across threads
    art = codegen(model, tmp_path, name="q8elt")
    build_for_isa(art, isa, monkeypatch)
    code = art.source.read_text()
    assert code.count("tk::mul_q8(") == 7 and code.count("tk::add_q8(") == 5
    assert code.count("tk::mul_gate_table_q8(") == 2
    # the pair tables are filled only by the builds that read them (no AVX2)
    assert code.count("#if !(defined(__AVX2__))") == 12
    assert code.count("tk::lut_q8(") == 5  # logistic_b is computed in swish_b's table alone
    assert code.count("// LOGISTIC: read only by the swish") == 1
    for threads in (1, 2):
        m = NativeModel(art, threads=threads)
        try:
            for inputs, ref in expected:
                out = m.invoke(inputs)
                assert out.keys() == ref.keys()
                for k, r in ref.items():
                    np.testing.assert_array_equal(out[k], r, err_msg=f"{k}, {threads} threads")
        finally:
            m.close()
