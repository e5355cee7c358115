"""The native register-tiled kernels: float GEMM (packed CONV_2D and FULLY_CONNECTED,
BATCH_MATMUL), the vectorised float SOFTMAX, NaN through fused activations, and int8
convolution, FULLY_CONNECTED and depthwise tiles: generated, built with the host's vector
instructions, with AVX2 alone and without vector instructions (the portable kernels), and
run; equal to the reference runtime
(int8 bit-exact; float32 within 1e-5 of each output's largest magnitude, NaN where it has NaN).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import ISAS, build_for_isa

from toolkit.builder import ModelBuilder
from toolkit.generator import codegen
from toolkit.ir import Model
from toolkit.runtime.interpreter import run_model
from toolkit.runtime.native import NativeModel


def _model() -> Model:
    """Shapes that reach every tile of the GEMM kernels: 3x3 stride-2 and dilated
    convolutions through tap pointers, a 1x1 one read in place, 40 output channels (a full
    32-wide panel and a masked one), 8 and 20 channels (16-wide panels), pixel counts that
    leave partial tiles (6 and 7 rows), every fused activation (TANH on the portable tile), an FC
    over 30 rows and one over a single row, BATCH_MATMUL plain and with a transposed
    operand, SOFTMAX rows of 1 to 40 values (masked and full vectors), MAX_POOL_2D, and a
    batch of two images."""
    rng = np.random.default_rng(7)
    f32 = np.float32

    def const(name: str, shape: tuple[int, ...], scale: float = 0.3) -> object:
        return mb.const(name, (rng.standard_normal(shape) * scale).astype(f32))

    mb = ModelBuilder("gemm")
    x = mb.input("x", [1, 9, 11, 18])  # more channels than the direct kernel takes
    c1 = mb.conv2d(x, const("c1/w", (40, 3, 3, 18)), const("c1/b", (40,)), stride=2,
                   activation="RELU6", name="c1")  # [1, 5, 6, 40]
    c2 = mb.conv2d(c1, const("c2/w", (20, 1, 1, 40)), const("c2/b", (20,)),
                   activation="TANH", name="c2")
    c3 = mb.conv2d(x, const("c3/w", (8, 3, 3, 18)), None, padding="VALID", dilation=2,
                   activation="RELU_N1_TO_1", name="c3")  # [1, 5, 7, 8]
    c4 = mb.conv2d(c1, const("c4/w", (33, 1, 1, 40)), const("c4/b", (33,)), activation="RELU",
                   name="c4")
    d1 = mb.depthwise_conv2d(c1, const("d1/w", (1, 3, 3, 40)), const("d1/b", (40,)),
                             activation="RELU6", name="d1")
    f1 = mb.fully_connected(mb.reshape(d1, [30, 40], name="rows"),
                            const("f1/w", (33, 40)), const("f1/b", (33,)), activation="RELU",
                            name="f1")
    f2 = mb.fully_connected(mb.reshape(c3, [1, 280], name="flat"), const("f2/w", (10, 280)),
                            const("f2/b", (10,)), name="f2")
    s1 = mb.softmax(f2, beta=0.5, name="s1")
    s0 = mb.softmax(mb.reshape(f2, [10, 1], name="col"), name="s0")
    q = mb.reshape(c4, [1, 30, 33], name="q")
    kt = mb.reshape(f1, [1, 30, 33], name="k")
    scores = mb.batch_matmul(q, kt, adj_y=True, name="scores")  # [1, 30, 30]
    s2 = mb.softmax(scores, name="s2")
    ctx = mb.batch_matmul(s2, kt, name="ctx")  # [1, 30, 33]
    s3 = mb.softmax(mb.reshape(c2, [30, 20], name="r3"), name="s3")
    s4 = mb.softmax(mb.reshape(c2, [50, 12], name="r4"), name="s4")
    s5 = mb.softmax(mb.reshape(c1, [75, 16], name="r5"), name="s5")
    s6 = mb.softmax(mb.reshape(c4, [30, 33], name="r6"), name="s6")
    s7 = mb.softmax(mb.reshape(c2, [15, 40], name="r7"), name="s7")
    p1 = mb.pool("MAX_POOL_2D", c4, 3, 2, padding="SAME", activation="RELU6", name="p1")
    p2 = mb.pool("MAX_POOL_2D", x, 2, 1, name="p2")
    xb = mb.input("xb", [2, 6, 7, 18])  # a batch of two through the zero-padded copy
    c5 = mb.conv2d(xb, const("c5/w", (17, 3, 3, 18)), const("c5/b", (17,)), activation="RELU",
                   name="c5")
    d5 = mb.depthwise_conv2d(c5, const("d5/w", (1, 3, 3, 17)), None, name="d5")
    mb.output(c2, c3, c4, d1, f1, s1, s0, ctx, s3, s4, s5, s6, s7, p1, p2, d5)
    return mb.build()




def _close(ref: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    assert ref.keys() == out.keys()
    for k, r in ref.items():
        o = out[k]
        assert o.shape == r.shape and o.dtype == r.dtype == np.float32, k
        nan = np.isnan(r)
        np.testing.assert_array_equal(np.isnan(o), nan, err_msg=k)
        tol = 1e-5 * max(float(np.abs(r[~nan]).max(initial=0.0)), 1e-30)
        assert float(np.abs(o[~nan] - r[~nan]).max(initial=0.0)) <= tol, k


@pytest.fixture(scope="module")
def model() -> Model:
    return _model()


@pytest.mark.parametrize("isa", ISAS)
def test_gemm_kernels_equal_the_reference(tmp_path: Path, model: Model, isa: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    art = codegen(model, tmp_path, name="gemm")
    build_for_isa(art, isa, monkeypatch)
    code = art.source.read_text()
    for fn in ("conv2d_f32_packed", "fully_connected_f32_packed", "batch_matmul_f32",
               "softmax_f32"):
        assert f"tk::{fn}(" in code
    m = NativeModel(art)
    try:
        for seed in range(3):
            inputs = m.random_inputs(seed)
            inputs["x"] = inputs["x"] * np.float32(4)  # past RELU6's and RELU_N1_TO_1's bounds
            assert not np.array_equal(inputs["xb"][0], inputs["xb"][1])
            ref = run_model(model, inputs).outputs
            out = m.invoke(inputs)
            _close(ref, out)
            assert float(ref["c2"].min()) < -0.5 and float(ref["c3"].max()) == 1.0
        # NaN in the input: the fused clamps keep it (as the reference runtime's
        # minimum / maximum do) rather than returning their bounds
        inputs = m.random_inputs(9)
        inputs["x"][0, 4, 5, 2] = np.float32("nan")
        ref = run_model(model, inputs).outputs
        assert np.isnan(ref["c3"]).any() and not np.isnan(ref["c3"]).all()
        assert np.isnan(ref["d1"]).any() and np.isnan(ref["c4"]).any()
        _close(ref, m.invoke(inputs))
    finally:
        m.close()


def _int8_model() -> Model:
    """int8 convolutions on the VNNI tiles and depthwise convolutions on the 4-pixel tiles:
    32 and 48 channels (multiples of 16), strides 1 and 2, a dilated filter, SAME padding
    (border columns pixel by pixel), widths that leave tile tails, per-channel and
    per-tensor multipliers, 3 input channels (quads read past the last channel), an FC
    over 7 rows and one over a single row, MAX_POOL_2D (48 and 32 channels) and RELU6 as a
    table lookup over 107 blocks of 64 values and a tail."""
    from toolkit.ir import Quantization as Q

    rng = np.random.default_rng(3)
    i8 = np.int8

    def w8(shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(-127, 128, shape).astype(i8)

    def per_channel(n: int, zp: int = 0) -> Q:
        return Q.make(rng.uniform(0.002, 0.01, n).tolist(), [zp] * n, 0)

    def bias(name: str, n: int, wq: Q, s_in: float) -> object:
        return mb.const(name, rng.integers(-900, 900, n).astype(np.int32),
                        quant=Q.make((s_in * np.asarray(wq.scale)).tolist(), [0] * n, 0))

    mb = ModelBuilder("q8tiles")
    x = mb.input("x", [1, 13, 11, 3], i8, quant=Q.make(0.05, -3))
    q1 = per_channel(32)
    c1 = mb.conv2d(x, mb.const("c1/w", w8((32, 3, 3, 3)), quant=q1), bias("c1/b", 32, q1, 0.05),
                   activation="RELU", name="c1", quant=Q.make(0.04, -128))  # [1, 13, 11, 32]
    d1 = mb.depthwise_conv2d(c1, mb.const("d1/w", w8((1, 3, 3, 32)), quant=per_channel(32)),
                             None, name="d1", quant=Q.make(0.03, 5))
    d2 = mb.depthwise_conv2d(c1, mb.const("d2/w", w8((1, 3, 3, 32)), quant=Q.make(0.006, 0)),
                             None, stride=2, activation="RELU6", name="d2",
                             quant=Q.make(0.05, -20))
    d3 = mb.depthwise_conv2d(c1, mb.const("d3/w", w8((1, 3, 3, 32)), quant=per_channel(32)),
                             None, dilation=2, name="d3", quant=Q.make(0.03, 2))
    q2 = per_channel(48)
    c2 = mb.conv2d(d1, mb.const("c2/w", w8((48, 1, 1, 32)), quant=q2), bias("c2/b", 48, q2, 0.03),
                   name="c2", quant=Q.make(0.2, 4))
    d4 = mb.depthwise_conv2d(c2, mb.const("d4/w", w8((1, 3, 3, 48)), quant=per_channel(48)),
                             None, stride=2, padding="VALID", name="d4", quant=Q.make(0.3, -1))
    f1 = mb.fully_connected(mb.reshape(d2, [7, 6 * 32], name="rows"),
                            mb.const("f1/w", w8((20, 192)), quant=Q.make(0.004, 0)), None,
                            name="f1", quant=Q.make(0.3, 1))
    f2 = mb.fully_connected(mb.reshape(d4, [1, 6 * 5 * 48], name="flat"),
                            mb.const("f2/w", w8((10, 1440)), quant=Q.make(0.001, 0)), None,
                            name="f2", quant=Q.make(0.5, 0))
    p1 = mb.pool("MAX_POOL_2D", c2, 3, 2, padding="SAME", name="p1")  # 48 of 64 lanes
    p2 = mb.pool("MAX_POOL_2D", c1, 2, 1, activation="RELU6", name="p2")
    r1 = mb.unary("RELU6", c2, name="r1", quant=Q.make(0.03, -128))  # 6864 values
    mb.output(d3, c2, f1, f2, p1, p2, r1)
    return mb.build()


@pytest.mark.parametrize("isa", ISAS)
def test_int8_tiles_bit_exact(tmp_path: Path, isa: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _int8_model()
    art = codegen(model, tmp_path, name="q8tiles")
    build_for_isa(art, isa, monkeypatch)
    code = art.source.read_text()
    assert code.count("tk::depthwise_q8_pre(") == 4 and code.count("tk::conv2d_q8x4(") == 4
    m = NativeModel(art)
    try:
        for seed in range(3):
            inputs = m.random_inputs(seed)
            ref = run_model(model, inputs).outputs
            out = m.invoke(inputs)
            assert ref.keys() == out.keys()
            for k, r in ref.items():
                np.testing.assert_array_equal(out[k], r, err_msg=k)
                assert len(np.unique(r)) > 3, k  # not saturated
    finally:
        m.close()
