"""The native int8 convolution kernels (CONV_2D, FULLY_CONNECTED, DEPTHWISE_CONV_2D) on shapes
that reach their edges: channel counts that are not multiples of 4, 8 or 16 (partial quads of
input channels, partial blocks of 8 and 16 output channels), strides 1 and 2, SAME and VALID
padding, dilation 2, 3x3 and 5x5 depthwise filters, per-channel and per-tensor filter scales,
multipliers around 1 (rounding shifts of 0 and left shifts), nonzero input zero points, fused
clamps, a batch of two. The artifact (every op's rows split across the threads) is built with
the host's vector instructions, with AVX2 alone and without vector instructions (the portable
kernels) and run on one and two threads; every output equals, bit for bit, the reference
runtime's and LiteRT's (its builtin kernels) on the .tflite written from the same model.
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
    rng = np.random.default_rng(11)
    i8 = np.int8

    def w8(shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(-127, 128, shape).astype(i8)

    def per_channel(n: int, axis: int) -> Q:
        return Q.make(rng.uniform(0.002, 0.012, n).tolist(), [0] * n, axis)

    def bias(name: str, n: int, wq: Q, s_in: float, span: int = 3000) -> object:
        return mb.const(name, rng.integers(-span, span, n).astype(np.int32),
                                quant=Q.make((s_in * np.asarray(wq.scale, np.float64)).tolist(), 0))

    def conv(x: object, s_in: float, o: int, k: int, c: int, name: str, per: bool = True,
             **kw: object) -> object:
        wq = per_channel(o, 0) if per else Q.make(0.006, 0)
        w = mb.const(f"{name}/w", w8((o, k, k, c)), quant=wq)
        return mb.conv2d(x, w, bias(f"{name}/b", o, wq, s_in), name=name, **kw)

    def dw(x: object, s_in: float, c: int, name: str, per: bool = True, k: int = 3,
           **kw: object) -> object:
        wq = per_channel(c, 3) if per else Q.make(0.007, 0)
        w = mb.const(f"{name}/w", w8((1, k, k, c)), quant=wq)
        return mb.depthwise_conv2d(x, w, bias(f"{name}/b", c, wq, s_in), name=name, **kw)

    mb = ModelBuilder("q8conv")
    x = mb.input("x", [1, 19, 17, 5], i8, quant=Q.make(0.05, -3))
    # 5 input channels (a partial quad), 21 outputs (a partial block of 8)
    c1 = conv(x, 0.05, 21, 3, 5, "c1", stride=2, activation="RELU",
              quant=Q.make(0.06, -128))  # [1, 10, 9, 21]
    c2 = conv(c1, 0.06, 19, 1, 21, "c2", padding="VALID", quant=Q.make(0.15, 7))
    c3 = conv(c1, 0.06, 10, 3, 21, "c3", per=False, padding="VALID", dilation=2,
              quant=Q.make(0.12, -5))  # [1, 6, 5, 10]
    c4 = conv(x, 0.05, 3, 3, 5, "c4", dilation=2, activation="RELU6",
              quant=Q.make(0.04, -100))  # 3 outputs of a block of 8
    # depthwise: 21 = 16 + 5, 19 = 16 + 3, 24 = 16 + 8 and 7 channels
    d1 = dw(c1, 0.06, 21, "d1", quant=Q.make(0.05, 3))
    d2 = dw(c2, 0.15, 19, "d2", stride=2, padding="VALID", quant=Q.make(0.2, -9))
    d3 = dw(c1, 0.06, 21, "d3", per=False, dilation=2, activation="RELU6",
            quant=Q.make(0.03, -128))
    xb = mb.input("xb", [2, 11, 13, 24], i8, quant=Q.make(0.04, 11))
    d4 = dw(xb, 0.04, 24, "d4", stride=2, quant=Q.make(0.05, -2))
    d8 = dw(xb, 0.04, 24, "d8", k=5, padding="VALID", quant=Q.make(0.1, 4))  # 13 tap pairs
    c5 = conv(d4, 0.05, 13, 1, 24, "c5", quant=Q.make(0.1, 1))
    d5 = dw(c5, 0.1, 13, "d5", padding="VALID", dilation=2, quant=Q.make(0.08, 0))
    xs = mb.input("xs", [1, 9, 8, 7], i8, quant=Q.make(0.03, 0))
    d6 = dw(xs, 0.03, 7, "d6", stride=2, activation="RELU", quant=Q.make(0.02, -128))
    # multipliers s_in s_w / s_out around 1 (no right shift, or a left one) on small filters
    w1 = (rng.integers(-1, 2, (9, 1, 1, 7)).astype(i8),
          rng.integers(-1, 2, (1, 3, 3, 7)).astype(i8))
    q6, q7 = per_channel(9, 0), per_channel(7, 3)
    c6 = mb.conv2d(xs, mb.const("c6/w", w1[0], quant=q6), bias("c6/b", 9, q6, 0.03, 30), name="c6",
                   quant=Q.make(0.03 * 0.007, -1))
    d7 = mb.depthwise_conv2d(xs, mb.const("d7/w", w1[1], quant=q7), bias("d7/b", 7, q7, 0.03, 30),
                             name="d7", quant=Q.make(0.03 * 0.007, 2))
    fq = Q.make(0.003, 0)
    f1 = mb.fully_connected(mb.reshape(c3, [6, 50], name="rows"),
                            mb.const("f1/w", w8((11, 50)), quant=fq), None, name="f1",
                            quant=Q.make(0.3, 2))
    mb.output(c2, c3, c4, d1, d2, d3, d5, d6, f1, c6, d7, d8)
    return mb.build()


@pytest.fixture(scope="module")
def model() -> Model:
    return _model()


@pytest.fixture(scope="module")
def expected(model: Model, tmp_path_factory: pytest.TempPathFactory
             ) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """(inputs, outputs) of three seeds, the reference runtime's outputs checked equal to
    LiteRT's first."""
    path = tmp_path_factory.mktemp("q8conv") / "q8conv.tflite"
    path.write_bytes(bytes(write_model(model, "tflite")))
    rng = np.random.default_rng(5)
    return reference_equals_litert(model, path, [
        {t.name: rng.integers(-128, 128, t.shape).astype(np.int8) for t in model.graph.inputs}
        for _ in range(3)])


@pytest.mark.parametrize("isa", ISAS)
def test_int8_conv_kernels_bit_exact(tmp_path: Path, model: Model, isa: str,
                                     expected: list[tuple[dict, dict]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 1)  # every op's rows split across threads
    art = codegen(model, tmp_path, name="q8conv")
    build_for_isa(art, isa, monkeypatch)
    code = art.source.read_text()
    assert code.count("tk::depthwise_q8_pre(") == 8 and code.count("tk::conv2d_q8x4(") == 7
    assert code.count("pool_.rows(") == 14
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
