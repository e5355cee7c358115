"""The native float kernels of the AVX2 library (tk_ops_f32_avx2.cpp) and their portable
twins, op by op: one-op .tflite models written with the TFLite schema, run by LiteRT's
builtin kernels, the reference runtime and the generated artifact built with the host's
instructions, with AVX2 alone and without vector instructions, on one and on two threads
(every op split into rows). Float32 within 1e-5 of each output's largest magnitude of the
reference runtime and of LiteRT; the same bits on one and two threads.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _single_op_tflite import SingleOp, Spec, options
from support import ISAS, build_for_isa

import toolkit as tk
import toolkit.generator.ops as ops_mod
from toolkit.generator import codegen
from toolkit.runtime.interpreter import run_model
from toolkit.runtime.native import NativeModel

F32 = np.float32


def _close(want: np.ndarray, got: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype == F32, what
    tol = 1e-5 * max(float(np.abs(want).max(initial=0.0)), 1e-30)
    assert float(np.abs(got - want).max(initial=0.0)) <= tol, what


def _native_outputs(art: Any, inputs: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The artifact's outputs for ``inputs`` on one thread and on two."""
    outs = []
    for threads in (1, 2):
        m = NativeModel(art, threads=threads)
        try:
            outs.append(m.invoke(inputs))
        finally:
            m.close()
    return outs


def _check(tmp_path: Path, case: SingleOp, feeds: list[np.ndarray], isa: str, fn: str,
           monkeypatch: pytest.MonkeyPatch) -> None:
    """``case`` generated (its op calling ``tk::<fn>``), built for ``isa`` and run on one
    and two threads: equal to LiteRT and the reference runtime, the same on both."""
    assert case.model is not None
    path = tmp_path / "case.tflite"
    path.write_bytes(case.model)
    model = tk.load(path)
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 0)  # every op through the pool
    art = codegen(model, tmp_path / "art", name="case")
    build_for_isa(art, isa, monkeypatch)
    assert f"tk::{fn}(" in art.source.read_text()
    want = case.run_litert(feeds)
    names = [s.name for s in case.feeds]
    inputs = dict(zip(names, feeds, strict=True))
    ref = run_model(model, inputs).outputs
    outs = _native_outputs(art, inputs)
    for k, (name, w) in enumerate(zip(ref, want, strict=True)):
        _close(w, ref[name], f"reference vs LiteRT {name}")
        _close(w, outs[0][name], f"native vs LiteRT {name}")
        _close(ref[name], outs[0][name], f"native vs reference {name}")
        np.testing.assert_array_equal(outs[0][name], outs[1][name], err_msg=f"threads {k}")


_PAD = {"SAME": 0, "VALID": 1}
_ACT = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}

# (batch, input h, w, c, filter, stride, dilation, padding, activation, bias (False: zeros;
# LiteRT wants the float bias input))
DW = [
    (1, 13, 17, 19, 3, 1, 1, "SAME", "RELU6", True),    # odd channels (16 + a masked tail)
    (1, 14, 15, 32, 3, 2, 1, "SAME", "NONE", True),     # stride 2
    (1, 12, 11, 5, 3, 2, 1, "VALID", "RELU", False),    # fewer channels than a vector
    (1, 16, 16, 24, 3, 1, 2, "SAME", "RELU_N1_TO_1", True),  # dilation
    (1, 11, 13, 40, 5, 1, 1, "SAME", "NONE", True),     # 5x5
    (1, 9, 10, 12, 5, 2, 1, "VALID", "RELU6", True),    # 5x5 stride 2
    (1, 8, 9, 7, 4, 1, 1, "SAME", "NONE", True),        # 4x4: generic size, uneven pads
    (1, 3, 4, 16, 3, 1, 1, "SAME", "RELU", True),       # every column on the border
    (1, 9, 11, 1, 3, 1, 1, "SAME", "NONE", True),       # one channel
    (1, 10, 9, 2, 3, 2, 1, "SAME", "RELU", True),
    (1, 7, 12, 3, 5, 1, 1, "SAME", "RELU6", True),
    (1, 12, 13, 4, 3, 1, 2, "VALID", "NONE", False),    # dilation, zero bias
    (1, 11, 10, 6, 1, 1, 1, "VALID", "RELU", True),     # 1x1: a per-channel affine
    (1, 17, 19, 8, 3, 1, 1, "SAME", "NONE", True),      # one full vector: 8-pixel tiles
    (1, 9, 21, 9, 3, 2, 1, "SAME", "RELU6", True),      # 8 + 1
    (2, 13, 11, 16, 3, 1, 1, "SAME", "RELU", True),     # batch 2
    (1, 15, 14, 28, 3, 2, 1, "SAME", "NONE", True),     # 16 + 12 (last vector masked)
    (1, 12, 19, 36, 3, 1, 1, "VALID", "RELU6", False),  # 32 + 4, zero bias
    (1, 10, 13, 64, 5, 1, 1, "SAME", "NONE", True),
    (1, 9, 9, 24, 1, 1, 1, "SAME", "NONE", True),       # 1x1, 16 + 8
    (1, 8, 8, 64, 1, 2, 1, "VALID", "RELU", True),      # 1x1 stride 2
    (1, 12, 14, 20, 5, 2, 1, "SAME", "NONE", True),     # 5x5 stride 2, 16 + 4
    (2, 11, 9, 12, 3, 1, 2, "SAME", "RELU", False),     # dilation 2, batch 2, zero bias
    (1, 5, 23, 24, 7, 1, 1, "SAME", "NONE", True),      # 7x7: taller than the input
    (1, 4, 13, 264, 3, 1, 1, "SAME", "RELU6", True),   # wide pixels: 16 x 4 tiles, + 8
    (1, 9, 8, 260, 3, 2, 1, "VALID", "NONE", True),     # wide, stride 2, + 4 masked
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", DW, ids=lambda c: "x".join(map(str, c)))
def test_depthwise(tmp_path: Path, isa: str, cfg: tuple, monkeypatch: pytest.MonkeyPatch
                   ) -> None:
    n, h, w, c, k, s, d, pad, act, has_bias = cfg
    rng = np.random.default_rng(hash(cfg) & 0xFFFF)
    filt = (rng.standard_normal((1, k, k, c)) * 0.5).astype(F32)
    bias = (rng.standard_normal(c) * 0.5).astype(F32) * F32(has_bias)
    span = (k - 1) * d + 1
    oh, ow = (math.ceil(h / s), math.ceil(w / s)) if pad == "SAME" else (
        (h - span) // s + 1, (w - span) // s + 1)
    case = SingleOp(
        "DEPTHWISE_CONV_2D",
        [Spec("x", (n, h, w, c)), Spec.const("w", filt), Spec.const("b", bias)],
        [Spec("y", (n, oh, ow, c))],
        options=options("DepthwiseConv2DOptions", padding=_PAD[pad], strideW=s, strideH=s,
                        depthMultiplier=1, fusedActivationFunction=_ACT[act],
                        dilationWFactor=d, dilationHFactor=d))
    x = (rng.standard_normal((n, h, w, c)) * 2).astype(F32)
    _check(tmp_path, case, [x], isa, "depthwise_f32_pre", monkeypatch)


# (op, x shape, second operand shape, fused activation, options table)
BIN = [
    ("PRELU", (1, 9, 10, 16), (1, 1, 16), None, None),     # per-channel alpha in registers
    ("PRELU", (1, 7, 6, 19), (1, 1, 19), None, None),      # per-channel, a masked tail
    ("PRELU", (1, 5, 6, 8), (1, 5, 6, 8), None, None),     # alpha of the input's shape
    ("ADD", (1, 11, 13, 32), (1, 11, 13, 32), "RELU", "AddOptions"),
    ("ADD", (1, 6, 7, 12), (1, 1, 1, 12), "RELU6", "AddOptions"),
    ("MUL", (1, 5, 9, 13), (1,), "RELU_N1_TO_1", "MulOptions"),
    ("SUB", (1, 4, 5, 3), (1, 4, 1, 3), "NONE", "SubOptions"),
    ("MAXIMUM", (1, 6, 7, 10), (1, 6, 7, 10), None, None),
    ("MINIMUM", (2, 3, 21), (21,), None, None),
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", BIN, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}")
def test_binary(tmp_path: Path, isa: str, cfg: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    op, shape_a, shape_b, act, table = cfg
    rng = np.random.default_rng(sum(shape_a) + len(op))
    opts = None if table is None else options(table, fusedActivationFunction=_ACT[act])
    case = SingleOp(op, [Spec("a", shape_a), Spec("b", shape_b)], [Spec("y", None)],
                    options=opts)
    a = (rng.standard_normal(shape_a) * 3).astype(F32)
    b = (rng.standard_normal(shape_b) * 2).astype(F32)
    _check(tmp_path, case, [a, b], isa, "binary_f32", monkeypatch)


@pytest.mark.parametrize("isa", ISAS)
def test_logistic(tmp_path: Path, isa: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shape = (1, 9, 13, 11)  # 1287 values: full vectors and a masked tail
    case = SingleOp("LOGISTIC", [Spec("x", shape)], [Spec("y", shape)])
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 30).astype(F32)  # past e**x's range both ways
    x.flat[:4] = [0.0, -100.0, 100.0, 1e-3]
    _check(tmp_path, case, [x], isa, "unary_f32", monkeypatch)


# convolutions, few input channels: (h, w, c, o, filter, stride, dilation, padding, act,
# the kernel the generator calls)
FEW_IN = [
    (19, 23, 3, 16, "3", 2, 1, "SAME", "RELU6", "conv2d_f32_direct"),   # first layer
    (17, 15, 3, 24, "3", 1, 2, "VALID", "NONE", "conv2d_f32_direct"),   # dilated, 3 vectors
    (12, 13, 1, 5, "5", 1, 1, "SAME", "RELU", "conv2d_f32_direct"),     # one channel, 5x5
    (21, 20, 3, 8, "3", 2, 1, "SAME", "NONE", "conv2d_f32_direct"),     # 8 outputs
    (11, 10, 2, 5, "3", 1, 1, "VALID", "RELU_N1_TO_1", "conv2d_f32_direct"),  # 5 outputs
    (11, 10, 20, 5, "3", 1, 1, "SAME", "RELU", "conv2d_f32_few"),       # 20 inputs, 5 outputs
    (13, 9, 24, 16, "3", 2, 1, "SAME", "NONE", "conv2d_f32_packed"),    # 24 inputs: the GEMM
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", FEW_IN, ids=lambda c: "x".join(map(str, c[:-1])))
def test_conv_few_input_channels(tmp_path: Path, isa: str, cfg: tuple,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    h, w, c, o, k, s, d, pad, act, fn = cfg
    k = int(k)
    rng = np.random.default_rng(h * w + c * o)
    filt = (rng.standard_normal((o, k, k, c)) * 0.4).astype(F32)
    bias = (rng.standard_normal(o) * 0.5).astype(F32)
    case = SingleOp(
        "CONV_2D", [Spec("x", (1, h, w, c)), Spec.const("w", filt), Spec.const("b", bias)],
        [Spec("y", None)],
        options=options("Conv2DOptions", padding=_PAD[pad], strideW=s, strideH=s,
                        fusedActivationFunction=_ACT[act], dilationWFactor=d,
                        dilationHFactor=d))
    x = (rng.standard_normal((1, h, w, c)) * 2).astype(F32)
    _check(tmp_path, case, [x], isa, fn, monkeypatch)


# pointwise (1x1, stride 1) convolutions, tk::conv2d_f32_pointwise's register tiles: panels
# of 8 channels up to 8 outputs, else 16 (a last panel of at most 8 in the 12x8 tile),
# masked stores past the last channel, tails of 12- and 7-pixel tiles; few and odd input
# channels, a zero bias, a batch of two: (batch, h, w, c, o, activation, bias)
POINTWISE = [
    (1, 5, 7, 3, 1, "NONE", True),            # one output, 35 pixels: a tail of 11 rows
    (2, 6, 5, 5, 2, "RELU", False),            # batch of two, zero bias
    (1, 4, 9, 7, 3, "RELU6", True),
    (1, 7, 3, 1, 4, "NONE", True),             # one input channel
    (1, 3, 11, 9, 5, "RELU_N1_TO_1", True),
    (2, 8, 8, 13, 6, "RELU", True),
    (1, 5, 5, 17, 7, "NONE", False),
    (1, 9, 10, 32, 8, "RELU", True),           # the full 12x8 tile
    (2, 6, 7, 11, 9, "RELU6", True),           # 16 lanes, 9 stored
    (1, 7, 9, 24, 16, "NONE", True),           # the full 7x16 tile
    (1, 8, 8, 23, 24, "RELU", False),          # a 16 panel, then 8 in the 12x8 tile
    (1, 10, 7, 24, 28, "RELU6", True),         # 16, then 12 of 16 lanes
    (2, 9, 9, 37, 36, "NONE", True),           # 16, 16, then 4 of 8 lanes
    (1, 8, 9, 36, 42, "RELU", True),
    (1, 8, 8, 42, 48, "RELU6", True),
    (1, 10, 10, 16, 64, "NONE", True),
    (1, 25, 30, 40, 16, "RELU", True),         # 750 pixels: blocks of 84 and a tail
    (1, 13, 13, 40, 144, "RELU", True),        # 9 panels (45 KiB): each over every pixel
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", POINTWISE, ids=lambda c: "x".join(map(str, c)))
def test_pointwise_conv(tmp_path: Path, isa: str, cfg: tuple,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    n, h, w, c, o, act, has_bias = cfg
    rng = np.random.default_rng(h * w * c + o)
    filt = (rng.standard_normal((o, 1, 1, c)) * 0.4).astype(F32)
    bias = (rng.standard_normal(o) * 0.5).astype(F32) * F32(has_bias)
    inputs = [Spec("x", (n, h, w, c)), Spec.const("w", filt), Spec.const("b", bias)]
    case = SingleOp(
        "CONV_2D", inputs, [Spec("y", (n, h, w, o))],
        options=options("Conv2DOptions", padding=_PAD["SAME"], strideW=1, strideH=1,
                        fusedActivationFunction=_ACT[act], dilationWFactor=1,
                        dilationHFactor=1))
    x = (rng.standard_normal((n, h, w, c)) * 2).astype(F32)
    _check(tmp_path, case, [x], isa, "conv2d_f32_pointwise", monkeypatch)


@pytest.mark.parametrize("isa", ISAS)
def test_pointwise_conv_without_bias(tmp_path: Path, isa: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Pointwise convolutions without a bias tensor (as ONNX writes them; LiteRT's CONV_2D
    needs one): 2, 9, 24 and 36 outputs of a batch of two, against the reference runtime,
    on one and two threads (the same bits)."""
    from toolkit.builder import ModelBuilder

    rng = np.random.default_rng(11)
    mb = ModelBuilder("pw")
    x = mb.input("x", [2, 7, 9, 13])
    for o, act in ((2, "RELU"), (9, "NONE"), (24, "RELU6"), (36, "NONE")):
        wt = mb.const(f"w{o}", (rng.standard_normal((o, 1, 1, 13)) * 0.4).astype(F32))
        mb.output(mb.conv2d(x, wt, None, activation=act, name=f"pw{o}"))
    model = mb.build()
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 0)
    art = codegen(model, tmp_path / "art", name="pw")
    build_for_isa(art, isa, monkeypatch)
    code = art.source.read_text()
    assert code.count("tk::conv2d_f32_pointwise(") == 4 and "nullptr" in code
    inputs = {"x": (rng.standard_normal((2, 7, 9, 13)) * 2).astype(F32)}
    ref = run_model(model, inputs).outputs
    outs = _native_outputs(art, inputs)
    assert ref.keys() == outs[0].keys()
    for name, want in ref.items():
        _close(want, outs[0][name], f"native vs reference {name}")
        np.testing.assert_array_equal(outs[0][name], outs[1][name], err_msg=name)


# direct convolutions (tk::conv2d_f32_direct, taps read in place): (batch, h, w, c, o,
# filter, stride, padding, activation, bias)
DIRECT = [
    (1, 9, 11, 1, 1, 3, 1, "SAME", "NONE", True),        # one input, one output channel
    (1, 16, 15, 2, 2, 2, 2, "VALID", "RELU", True),      # 2x2 stride 2
    (2, 13, 17, 3, 3, 3, 2, "SAME", "RELU6", True),      # batch 2, odd sizes
    (1, 20, 31, 4, 4, 5, 2, "SAME", "NONE", False),      # 5x5 stride 2, zero bias
    (1, 12, 29, 3, 6, 7, 1, "SAME", "RELU_N1_TO_1", True),  # 7x7: wide borders
    (1, 14, 27, 4, 7, 7, 2, "VALID", "NONE", True),      # 7x7 stride 2
    (1, 8, 9, 8, 8, 2, 2, "VALID", "RELU", True),        # 8 -> 8, 2x2 stride 2
    (1, 11, 12, 8, 9, 2, 1, "SAME", "NONE", True),       # 2x2 SAME: padding after only
    (1, 10, 13, 16, 16, 2, 2, "SAME", "RELU6", True),    # 16 -> 16, odd width
    (2, 7, 10, 16, 32, 3, 1, "SAME", "NONE", False),     # 4 vectors (2 + 2)
    (1, 17, 18, 3, 24, 5, 2, "SAME", "RELU", True),      # face detector's first layer
    (1, 15, 16, 3, 32, 3, 2, "VALID", "RELU", True),     # 4 vectors, VALID
    (1, 19, 21, 1, 40, 3, 2, "SAME", "NONE", True),      # 5 vectors (3 + 2)
    (1, 6, 5, 2, 3, 5, 1, "SAME", "RELU", True),         # no column without padding
    (1, 3, 4, 3, 8, 7, 2, "SAME", "NONE", True),         # filter larger than the image
]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", DIRECT, ids=lambda c: "x".join(map(str, c)))
def test_conv_direct(tmp_path: Path, isa: str, cfg: tuple,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    n, h, w, c, o, k, s, pad, act, has_bias = cfg
    rng = np.random.default_rng(hash(cfg) & 0xFFFF)
    filt = (rng.standard_normal((o, k, k, c)) * 0.4).astype(F32)
    bias = (rng.standard_normal(o) * 0.5).astype(F32) * F32(has_bias)  # LiteRT needs one
    case = SingleOp(
        "CONV_2D", [Spec("x", (n, h, w, c)), Spec.const("w", filt), Spec.const("b", bias)],
        [Spec("y", None)],
        options=options("Conv2DOptions", padding=_PAD[pad], strideW=s, strideH=s,
                        fusedActivationFunction=_ACT[act], dilationWFactor=1,
                        dilationHFactor=1))
    x = (rng.standard_normal((n, h, w, c)) * 2).astype(F32)
    _check(tmp_path, case, [x], isa, "conv2d_f32_direct", monkeypatch)


@pytest.mark.parametrize("isa", ISAS)
def test_conv_direct_tanh(tmp_path: Path, isa: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fused TANH (applied to each row after its sums): LiteRT's convolution leaves the
    activation out, so the expected values are tanh of LiteRT's output without it."""
    n, h, w, c, o = 1, 13, 14, 3, 11
    rng = np.random.default_rng(7)
    filt = (rng.standard_normal((o, 3, 3, c)) * 0.3).astype(F32)
    bias = (rng.standard_normal(o) * 0.5).astype(F32)
    x = (rng.standard_normal((n, h, w, c)) * 2).astype(F32)

    def conv(act: int) -> SingleOp:
        return SingleOp(
            "CONV_2D", [Spec("x", (n, h, w, c)), Spec.const("w", filt), Spec.const("b", bias)],
            [Spec("y", None)],
            options=options("Conv2DOptions", padding=_PAD["SAME"], strideW=2, strideH=2,
                            fusedActivationFunction=act, dilationWFactor=1,
                            dilationHFactor=1))

    want = np.tanh(conv(0).run_litert([x])[0])
    case = conv(4)
    assert case.model is not None
    path = tmp_path / "case.tflite"
    path.write_bytes(case.model)
    model = tk.load(path)
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 0)
    art = codegen(model, tmp_path / "art", name="case")
    build_for_isa(art, isa, monkeypatch)
    assert "tk::conv2d_f32_direct(" in art.source.read_text()
    ref = next(iter(run_model(model, {"x": x}).outputs.values()))
    _close(want, ref, "reference vs tanh(LiteRT)")
    outs = []
    for threads in (1, 2):
        m = NativeModel(art, threads=threads)
        try:
            outs.append(next(iter(m.invoke({"x": x}).values())))
        finally:
            m.close()
    _close(want, outs[0], "native vs tanh(LiteRT)")
    assert float(np.abs(outs[0]).max()) <= 1.0
    np.testing.assert_array_equal(outs[0], outs[1])


# convolutions with more filter than input, split across threads by output channels
SPLIT = [(4, 5, 64, 80, 1, "SAME", "RELU6"), (5, 3, 40, 72, 3, "SAME", "NONE"),
         (7, 7, 48, 33, 3, "VALID", "RELU")]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", SPLIT, ids=lambda c: "x".join(map(str, c)))
def test_conv_split_by_channels(tmp_path: Path, isa: str, cfg: tuple,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    h, w, c, o, k, pad, act = cfg
    rng = np.random.default_rng(h * w * c + o)
    filt = (rng.standard_normal((o, k, k, c)) * 0.2).astype(F32)
    bias = (rng.standard_normal(o) * 0.5).astype(F32)
    case = SingleOp(
        "CONV_2D", [Spec("x", (1, h, w, c)), Spec.const("w", filt), Spec.const("b", bias)],
        [Spec("y", None)],
        options=options("Conv2DOptions", padding=_PAD[pad], strideW=1, strideH=1,
                        fusedActivationFunction=_ACT[act], dilationWFactor=1,
                        dilationHFactor=1))
    x = (rng.standard_normal((1, h, w, c)) * 2).astype(F32)
    _check(tmp_path, case, [x], isa, "conv2d_f32_panels", monkeypatch)


# transposed convolutions: (h, w, c, o, filter, stride, padding, activation)
TCONV = [(6, 7, 16, 1, 2, 2, "VALID", "NONE"),   # mediapipe's upsampling head
         (5, 4, 13, 6, 3, 2, "SAME", "RELU"),     # masked channels, overlapping taps
         (4, 5, 24, 3, 3, 1, "SAME", "RELU6"),
         (9, 8, 3, 20, 4, 2, "SAME", "NONE"),     # few input channels, two panels
         (3, 7, 40, 2, 5, 3, "VALID", "RELU_N1_TO_1"),  # taps past the stride
         (5, 6, 8, 3, 2, 2, "SAME", "RELU6"),      # taps tiling the output, written in place
         (4, 3, 17, 21, 3, 3, "VALID", "NONE")]    # the same, two panels a row


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", TCONV, ids=lambda c: "x".join(map(str, c)))
def test_transpose_conv(tmp_path: Path, isa: str, cfg: tuple,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    h, w, c, o, k, s, pad, act = cfg
    rng = np.random.default_rng(h * w * c + o * k)
    oh, ow = (h * s, w * s) if pad == "SAME" else ((h - 1) * s + k, (w - 1) * s + k)
    filt = (rng.standard_normal((o, k, k, c)) * 0.3).astype(F32)
    bias = (rng.standard_normal(o) * 0.5).astype(F32)
    case = SingleOp(
        "TRANSPOSE_CONV",
        [Spec.const("shape", np.array([1, oh, ow, o], np.int32)), Spec.const("w", filt),
         Spec("x", (1, h, w, c)), Spec.const("b", bias)],
        [Spec("y", (1, oh, ow, o))],
        options=options("TransposeConvOptions", padding=_PAD[pad], strideW=s, strideH=s,
                        fusedActivationFunction=_ACT[act]))
    x = (rng.standard_normal((1, h, w, c)) * 2).astype(F32)
    _check(tmp_path, case, [x], isa, "transpose_conv_f32_gemm", monkeypatch)


# max pools: (h, w, c, filter, stride, padding, activation)
POOL = [(13, 12, 19, 3, 2, "SAME", "RELU6"), (8, 10, 8, 2, 2, "VALID", "NONE"),
        (7, 9, 5, 3, 1, "SAME", "RELU_N1_TO_1")]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", POOL, ids=lambda c: "x".join(map(str, c)))
def test_max_pool(tmp_path: Path, isa: str, cfg: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    h, w, c, k, s, pad, act = cfg
    case = SingleOp("MAX_POOL_2D", [Spec("x", (1, h, w, c))], [Spec("y", None)],
                    options=options("Pool2DOptions", padding=_PAD[pad], strideW=s, strideH=s,
                                    filterWidth=k, filterHeight=k,
                                    fusedActivationFunction=_ACT[act]))
    x = (np.random.default_rng(h * w * c).standard_normal((1, h, w, c)) * 3).astype(F32)
    _check(tmp_path, case, [x], isa, "max_pool_f32", monkeypatch)


# bilinear resizes (8 channels at a time, then the rest): (h, w, c, out h, out w, options)
RESIZE = [(5, 7, 19, 11, 9, {"halfPixelCenters": True}),
          (4, 6, 16, 8, 12, {"alignCorners": True}),
          (6, 5, 8, 3, 7, {})]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("cfg", RESIZE, ids=lambda c: "x".join(map(str, c[:5])))
def test_resize_bilinear(tmp_path: Path, isa: str, cfg: tuple,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    h, w, c, oh, ow, opts = cfg
    case = SingleOp("RESIZE_BILINEAR",
                    [Spec("x", (1, h, w, c)), Spec.const("size", np.array([oh, ow], np.int32))],
                    [Spec("y", (1, oh, ow, c))],
                    options=options("ResizeBilinearOptions", **opts))
    x = (np.random.default_rng(h * w * c).standard_normal((1, h, w, c)) * 3).astype(F32)
    _check(tmp_path, case, [x], isa, "resize_bilinear_f32", monkeypatch)
