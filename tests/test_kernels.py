"""The NumPy reference kernels against LiteRT on one-op models.

LiteRT runs with its builtin kernels (no default XNNPACK delegate; one test also checks the
delegate). Float kernels must match within rtol 1e-5 and atol 1e-6 (scaled by sqrt(terms) for
long float32 sums, whose rounding depends on the summation order); quantized kernels within
one unit, and the fixed-point ones are checked bit-exact. INSTANCE_NORM and LAYER_NORM, which
LiteRT lacks, are checked against a float64 NumPy reference.
"""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np
import pytest
from _single_op_tflite import SingleOp, Spec, options, quant
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toolkit.errors import UnsupportedOpError
from toolkit.ir import Op, Quantization, Tensor
from toolkit.runtime.kernels import KERNELS, get_kernel, infer_shapes
from toolkit.runtime.kernels.fixedpoint import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    split_rounding,
    srdhm,
)
from toolkit.schema import tensor_type_of

RTOL, ATOL = 1e-5, 1e-6
F32 = np.float32
I8 = np.int8
HYP = settings(max_examples=30, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ---------------------------------------------------------------------------- helpers
def seed_of(*parts: object) -> int:
    """A reproducible seed from test parameters (``hash`` of a str varies per process)."""
    return zlib.crc32(repr(parts).encode())


def acc_atol(terms: int) -> float:
    """Absolute tolerance for a float32 sum of ``terms`` unit-size products: LiteRT and
    NumPy accumulate in different orders, so rounding noise grows like sqrt(terms)."""
    return ATOL * max(1.0, math.sqrt(terms))


def check_float(case: SingleOp, feeds: list[np.ndarray], rtol: float = RTOL,
                atol: float = ATOL) -> list[np.ndarray]:
    want = case.run_litert(feeds)
    got = case.run_kernel(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def check_quant(case: SingleOp, feeds: list[np.ndarray], tol: int = 1) -> list[np.ndarray]:
    want = case.run_litert(feeds)
    got = case.run_kernel(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
        assert diff.max(initial=0) <= tol, (
            f"max diff {diff.max()} ({int((diff > 0).sum())} of {diff.size} differ)")
    return got


def normal(r: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (r.standard_normal(shape) * scale).astype(F32)


def q8(r: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return r.integers(-128, 128, size=shape).astype(I8)


def act_q(r: np.random.Generator) -> Quantization:
    return quant(float(r.uniform(0.01, 0.1)), int(r.integers(-30, 31)))


def out_q_for(real: np.ndarray, r: np.random.Generator) -> Quantization:
    """An int8 quantization that covers ``real`` (with some random slack)."""
    lo, hi = min(float(real.min()), 0.0), max(float(real.max()), 0.0)
    scale = max((hi - lo) / 255.0, 1e-4) * float(r.uniform(0.6, 1.2))
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return quant(scale, zp)


def deq(x: np.ndarray, q: Quantization) -> np.ndarray:
    scale = q.scale.astype(np.float64)
    zp = q.zero_point
    if q.per_channel:
        shape = [1] * x.ndim
        shape[q.quantized_dimension] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return (scale * (x.astype(np.int64) - zp)).astype(F32)


def float_kernel(op_type: str, opts: object, args: list[np.ndarray | None]) -> np.ndarray:
    """Run the float kernel of ``op_type`` (used to pick output quantization)."""
    ins = [None if a is None else Tensor(f"i{i}", a.shape, tensor_type_of(a.dtype), data=a)
           for i, a in enumerate(args)]
    op = Op(op_type, ins, [Tensor("o", (), tensor_type_of(F32))], opts)
    return get_kernel(op)(op, args)[0]


def weights_q(r: np.random.Generator, shape: tuple[int, ...], axis: int,
              per_channel: bool = True) -> tuple[np.ndarray, Quantization]:
    w = r.integers(-127, 128, size=shape).astype(I8)
    n = shape[axis] if per_channel else 1
    scales = r.uniform(0.002, 0.03, size=n)
    return w, quant(scales.tolist(), [0] * n, axis)


def bias_q(r: np.random.Generator, n: int, in_q: Quantization, w_q: Quantization
           ) -> tuple[np.ndarray, Quantization]:
    scales = (in_q.scale.astype(np.float64) * w_q.scale.astype(np.float64))
    scales = np.broadcast_to(scales, (n,)) if w_q.per_channel else scales
    b = r.integers(-3000, 3001, size=n).astype(np.int32)
    return b, quant(scales.tolist(), [0] * len(scales), 0)


# ---------------------------------------------------------------------------- fixed point
def test_quantize_multiplier_matches_tflite_examples() -> None:
    m, s = quantize_multiplier(np.array([0.5, 1.0, 0.75, 1e-12, 0.0, 3.0]))
    assert m.tolist() == [1 << 30, 1 << 30, 3 << 29, 0, 0, 3 << 29]
    assert s.tolist() == [0, 1, 0, 0, 0, 2]


def test_multiply_by_quantized_multiplier_rounding() -> None:
    m, s = quantize_multiplier(0.5)
    x = np.array([3, -3, 5, -5, 4, -4])
    # 0.5 is the mantissa 2**30 with no shift: the doubling high multiply alone rounds, and
    # it rounds halves upward (-1.5 -> -1, 2.5 -> 3)
    assert multiply_by_quantized_multiplier(x, m, s).tolist() == [2, -1, 3, -2, 2, -2]
    m, s = quantize_multiplier(2.0)
    assert multiply_by_quantized_multiplier(np.array([7, -7]), m, s).tolist() == [14, -14]


@settings(max_examples=200, deadline=None)
@given(a=st.integers(-(2**31), 2**31 - 1), b=st.integers(-(2**31), 2**31 - 1))
def test_srdhm_equals_gemmlowp(a: int, b: int) -> None:
    # literal gemmlowp: nudge by 2**30 (1 - 2**30 when negative), divide truncating to zero
    if a == b == -(2**31):
        want = 2**31 - 1
    else:
        ab = a * b
        nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
        q = abs(ab + nudge) // (1 << 31)
        want = q if ab + nudge >= 0 else -q
    assert int(srdhm(np.array([a]), b)[0]) == want


def test_split_rounding_body_and_tail() -> None:
    m, s = quantize_multiplier(0.25)
    x = np.array([-2, -6, 2, 6, -2, -6])
    # x / 4 has ties at -0.5, -1.5: whole blocks of 4 round them upward, the 2-value tail
    # away from zero
    assert split_rounding(x, m, s, 4).tolist() == [0, -1, 1, 2, -1, -2]


# ---------------------------------------------------------------------------- registry
def test_unknown_op_raises_naming_the_op() -> None:
    t = Tensor("my_out", (1,), tensor_type_of(F32))
    op = Op("BIDIRECTIONAL_SEQUENCE_RNN", [], [t])
    with pytest.raises(UnsupportedOpError) as ei:
        get_kernel(op)
    msg = str(ei.value)
    assert "BIDIRECTIONAL_SEQUENCE_RNN" in msg and "my_out" in msg and "Fix:" in msg
    custom = Op("CUSTOM", [], [Tensor("c_out", (1,), tensor_type_of(F32))],
                custom_code="MY_CUSTOM_OP")
    with pytest.raises(UnsupportedOpError, match="MY_CUSTOM_OP"):
        get_kernel(custom)


def test_registry_has_every_required_kernel() -> None:
    required = [
        "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "DIV",
        "SQUARED_DIFFERENCE", "POW", "RSQRT", "SQRT", "EXP", "TANH", "LOGISTIC", "RELU", "RELU6",
        "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "GELU", "MEAN", "SUM", "REDUCE_MAX",
        "MAX_POOL_2D", "AVERAGE_POOL_2D", "SOFTMAX", "RESHAPE", "TRANSPOSE", "SQUEEZE",
        "EXPAND_DIMS", "CONCATENATION", "SPLIT", "SPLIT_V", "UNPACK", "PACK", "PAD", "PADV2",
        "STRIDED_SLICE", "SLICE", "GATHER", "BATCH_MATMUL", "QUANTIZE", "DEQUANTIZE", "CAST",
        "MINIMUM", "MAXIMUM", "NEG", "ABS", "INSTANCE_NORM", "LAYER_NORM",
    ]
    assert not [k for k in required if k not in KERNELS]


def test_infer_shapes_uses_constant_inputs() -> None:
    shape = Tensor("shape", (2,), tensor_type_of(np.int32), data=np.array([3, -1], np.int32))
    x = Tensor("x", (2, 6), tensor_type_of(F32))
    op = Op("RESHAPE", [x, shape], [Tensor("y", (3, 4), tensor_type_of(F32))])
    assert infer_shapes(op, [(2, 6), (2,)]) == [(3, 4)]


# ---------------------------------------------------------------------------- conv float
conv_params = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 9), "w": st.integers(1, 9),
    "cin": st.integers(1, 5), "cout": st.integers(1, 6), "kh": st.integers(1, 4),
    "kw": st.integers(1, 4), "sh": st.integers(1, 3), "sw": st.integers(1, 3),
    "dh": st.integers(1, 2), "dw": st.integers(1, 2), "pad": st.sampled_from([0, 1]),
    "act": st.sampled_from([0, 1, 2, 3]), "bias": st.booleans(),
    "seed": st.integers(0, 2**16),
})


def _conv_valid(p: dict) -> bool:
    effh, effw = (p["kh"] - 1) * p["dh"] + 1, (p["kw"] - 1) * p["dw"] + 1
    return p["pad"] == 0 or (p["h"] >= effh and p["w"] >= effw)


def _conv_opts(p: dict) -> object:
    return options("Conv2DOptions", padding=p["pad"], strideH=p["sh"], strideW=p["sw"],
                   dilationHFactor=p["dh"], dilationWFactor=p["dw"],
                   fusedActivationFunction=p["act"])


@HYP
@given(p=conv_params)
def test_conv2d_float(p: dict) -> None:
    assume(_conv_valid(p))
    r = np.random.default_rng(p["seed"])
    x = normal(r, (p["n"], p["h"], p["w"], p["cin"]))
    w = normal(r, (p["cout"], p["kh"], p["kw"], p["cin"]))
    # LiteRT's CONV_2D requires a bias tensor; "no bias" is a zero bias
    b = normal(r, (p["cout"],)) if p["bias"] else np.zeros(p["cout"], F32)
    ins = [Spec("x", x.shape), Spec.const("w", w), Spec.const("b", b)]
    case = SingleOp("CONV_2D", ins, [Spec("y", None)], _conv_opts(p))
    check_float(case, [x], atol=acc_atol(p["kh"] * p["kw"] * p["cin"]))


@HYP
@given(p=conv_params, per_channel=st.booleans())
def test_conv2d_int8(p: dict, per_channel: bool) -> None:
    assume(_conv_valid(p))
    r = np.random.default_rng(p["seed"])
    xq = act_q(r)
    x = q8(r, (p["n"], p["h"], p["w"], p["cin"]))
    w, wq = weights_q(r, (p["cout"], p["kh"], p["kw"], p["cin"]), 0, per_channel)
    b, bq = bias_q(r, p["cout"], xq, wq)
    if not p["bias"]:
        b = np.zeros_like(b)
    ins = [Spec("x", x.shape, I8, quant=xq), Spec.const("w", w, wq), Spec.const("b", b, bq)]
    real_args: list[np.ndarray | None] = [deq(x, xq), deq(w, wq), deq(b, bq)]
    real = float_kernel("CONV_2D", _conv_opts({**p, "act": 0}), real_args)
    case = SingleOp("CONV_2D", ins, [Spec("y", None, I8, quant=out_q_for(real, r))],
                    _conv_opts(p))
    check_quant(case, [x], tol=0)


@pytest.mark.parametrize("pad", [0, 1])
@pytest.mark.parametrize("stride,dil", [(1, 1), (2, 1), (1, 2), (3, 1)])
@pytest.mark.parametrize("mult,c", [(1, 3), (2, 3), (1, 20), (2, 6)])
@pytest.mark.parametrize("quantized", [False, True])
def test_depthwise_conv2d(pad: int, stride: int, dil: int, mult: int, c: int,
                          quantized: bool) -> None:
    """Channel counts cover LiteRT's SIMD blocks of 8 output channels and the scalar tail."""
    r = np.random.default_rng(stride * 100 + dil * 10 + mult + pad + c)
    kh, kw = 3, 2
    act = int(r.integers(0, 4))
    opts = options("DepthwiseConv2DOptions", padding=pad, strideH=stride, strideW=stride,
                   dilationHFactor=dil, dilationWFactor=dil, depthMultiplier=mult,
                   fusedActivationFunction=act)
    shape = (2, 8, 7, c)
    if not quantized:
        x = normal(r, shape)
        ins = [Spec("x", shape), Spec.const("w", normal(r, (1, kh, kw, c * mult))),
               Spec.const("b", normal(r, (c * mult,)))]
        check_float(SingleOp("DEPTHWISE_CONV_2D", ins, [Spec("y", None)], opts), [x])
        return
    xq = act_q(r)
    x = q8(r, shape)
    w, wq = weights_q(r, (1, kh, kw, c * mult), 3)
    b, bq = bias_q(r, c * mult, xq, wq)
    real = float_kernel("DEPTHWISE_CONV_2D", opts, [deq(x, xq), deq(w, wq), deq(b, bq)])
    ins = [Spec("x", shape, I8, quant=xq), Spec.const("w", w, wq), Spec.const("b", b, bq)]
    case = SingleOp("DEPTHWISE_CONV_2D", ins, [Spec("y", None, I8, quant=out_q_for(real, r))],
                    opts)
    check_quant(case, [x], tol=0)


@pytest.mark.parametrize("cin,cout,k,stride", [(16, 24, 3, 1), (32, 8, 1, 1), (5, 17, 3, 2),
                                               (24, 16, 5, 2)])
@pytest.mark.parametrize("quantized", [False, True])
def test_conv2d_wide(cin: int, cout: int, k: int, stride: int, quantized: bool) -> None:
    """Wider convolutions: long float accumulations, many int8 requantization ties."""
    r = np.random.default_rng(cin * cout + k)
    shape = (1, 11, 10, cin)
    opts = options("Conv2DOptions", padding=int(r.integers(0, 2)), strideH=stride,
                   strideW=stride, dilationHFactor=1, dilationWFactor=1,
                   fusedActivationFunction=int(r.integers(0, 4)))
    if not quantized:
        x = normal(r, shape)
        ins = [Spec("x", shape), Spec.const("w", normal(r, (cout, k, k, cin))),
               Spec.const("b", normal(r, (cout,)))]
        case = SingleOp("CONV_2D", ins, [Spec("y", None)], opts)
        check_float(case, [x], atol=acc_atol(k * k * cin))
        return
    xq = act_q(r)
    x = q8(r, shape)
    w, wq = weights_q(r, (cout, k, k, cin), 0)
    b, bq = bias_q(r, cout, xq, wq)
    real = float_kernel("CONV_2D", options("Conv2DOptions", padding=opts.padding,
                                           strideH=stride, strideW=stride),
                        [deq(x, xq), deq(w, wq), deq(b, bq)])
    ins = [Spec("x", shape, I8, quant=xq), Spec.const("w", w, wq), Spec.const("b", b, bq)]
    case = SingleOp("CONV_2D", ins, [Spec("y", None, I8, quant=out_q_for(real, r))], opts)
    check_quant(case, [x], tol=0)


@pytest.mark.parametrize("quantized", [False, True])
def test_conv2d_grouped(quantized: bool) -> None:
    """A filter with fewer input channels than the input is a grouped convolution."""
    r = np.random.default_rng(16)
    shape, wshape = (1, 7, 6, 6), (9, 3, 3, 2)
    opts = options("Conv2DOptions", padding=1, strideH=1, strideW=1, dilationHFactor=1,
                   dilationWFactor=1)
    if not quantized:
        x = normal(r, shape)
        ins = [Spec("x", shape), Spec.const("w", normal(r, wshape)),
               Spec.const("b", normal(r, (9,)))]
        check_float(SingleOp("CONV_2D", ins, [Spec("y", None)], opts), [x],
                    atol=acc_atol(18))
        return
    xq = act_q(r)
    x = q8(r, shape)
    w, wq = weights_q(r, wshape, 0)
    b, bq = bias_q(r, 9, xq, wq)
    real = float_kernel("CONV_2D", opts, [deq(x, xq), deq(w, wq), deq(b, bq)])
    ins = [Spec("x", shape, I8, quant=xq), Spec.const("w", w, wq), Spec.const("b", b, bq)]
    check_quant(SingleOp("CONV_2D", ins, [Spec("y", None, I8, quant=out_q_for(real, r))],
                         opts), [x], tol=0)


# ---------------------------------------------------------------------------- FC / BMM
@pytest.mark.parametrize("in_shape,keep", [((2, 5), False), ((3, 4, 5), True),
                                           ((3, 4, 5), False), ((1, 5), False)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_fully_connected_float(in_shape: tuple[int, ...], keep: bool, bias: bool,
                               act: int) -> None:
    r = np.random.default_rng(len(in_shape) * 7 + act)
    x = normal(r, in_shape)
    ins = [Spec("x", in_shape), Spec.const("w", normal(r, (6, 5)))]
    if bias:
        ins.append(Spec.const("b", normal(r, (6,))))
    opts = options("FullyConnectedOptions", keepNumDims=keep, fusedActivationFunction=act)
    check_float(SingleOp("FULLY_CONNECTED", ins, [Spec("y", None)], opts), [x],
                atol=acc_atol(5))


@pytest.mark.parametrize("in_shape,keep", [((2, 17), False), ((3, 2, 17), True),
                                           ((4, 17), False)])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", [0, 1, 2])
def test_fully_connected_int8(in_shape: tuple[int, ...], keep: bool, per_channel: bool,
                              act: int) -> None:
    r = np.random.default_rng(len(in_shape) + 10 * act + per_channel)
    xq = act_q(r)
    x = q8(r, in_shape)
    w, wq = weights_q(r, (9, 17), 0, per_channel)
    b, bq = bias_q(r, 9, xq, wq)
    opts = options("FullyConnectedOptions", keepNumDims=keep, fusedActivationFunction=act)
    real = float_kernel("FULLY_CONNECTED", options("FullyConnectedOptions", keepNumDims=keep),
                        [deq(x, xq), deq(w, wq), deq(b, bq)])
    ins = [Spec("x", in_shape, I8, quant=xq), Spec.const("w", w, wq), Spec.const("b", b, bq)]
    case = SingleOp("FULLY_CONNECTED", ins, [Spec("y", None, I8, quant=out_q_for(real, r))],
                    opts)
    check_quant(case, [x], tol=0)


@pytest.mark.parametrize("a_shape,b_shape,adj_x,adj_y", [
    ((2, 3, 4), (2, 4, 5), False, False),
    ((2, 4, 3), (2, 4, 5), True, False),
    ((2, 3, 4), (2, 5, 4), False, True),
    ((3, 4), (4, 2), False, False),
    ((2, 1, 3, 4), (5, 4, 2), False, False),
])
def test_batch_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], adj_x: bool,
                      adj_y: bool) -> None:
    r = np.random.default_rng(len(a_shape) + adj_x * 2 + adj_y)
    a, b = normal(r, a_shape), normal(r, b_shape)
    opts = options("BatchMatMulOptions", adjointLhs=adj_x, adjointRhs=adj_y)
    case = SingleOp("BATCH_MATMUL", [Spec("a", a_shape), Spec("b", b_shape)],
                    [Spec("y", None)], opts)
    check_float(case, [a, b])
    aq, bq = act_q(r), act_q(r)
    ai, bi = q8(r, a_shape), q8(r, b_shape)
    real = float_kernel("BATCH_MATMUL", opts, [deq(ai, aq), deq(bi, bq)])
    case = SingleOp("BATCH_MATMUL", [Spec("a", a_shape, I8, quant=aq),
                                     Spec("b", b_shape, I8, quant=bq)],
                    [Spec("y", None, I8, quant=out_q_for(real, r))], opts)
    check_quant(case, [ai, bi], tol=0)


# ---------------------------------------------------------------------------- binary
BINARY_OPTS = {
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "POW": "PowOptions",
    "MINIMUM": "MaximumMinimumOptions", "MAXIMUM": "MaximumMinimumOptions",
}
SHAPE_PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 4)),
               ((5,), (1,)), ((2, 1, 3, 1), (1, 4, 1, 5))]


@pytest.mark.parametrize("op_type", list(BINARY_OPTS))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS)
def test_binary_float(op_type: str, shapes: tuple) -> None:
    r = np.random.default_rng(seed_of(op_type, *shapes))
    a, b = normal(r, shapes[0]), normal(r, shapes[1])
    if op_type == "DIV":
        b = np.where(np.abs(b) < 0.3, F32(0.5), b).astype(F32)
    if op_type == "POW":
        a = (np.abs(a) + F32(0.1)).astype(F32)
    fields = {}
    if op_type in ("ADD", "SUB", "MUL", "DIV"):
        fields["fusedActivationFunction"] = int(r.integers(0, 4))
    opts = options(BINARY_OPTS[op_type], **fields)
    case = SingleOp(op_type, [Spec("a", shapes[0]), Spec("b", shapes[1])], [Spec("y", None)],
                    opts)
    check_float(case, [a, b])


@pytest.mark.parametrize("op_type", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("shapes", SHAPE_PAIRS)
@pytest.mark.parametrize("act", [0, 1, 3])
def test_binary_int8(op_type: str, shapes: tuple, act: int) -> None:
    r = np.random.default_rng(seed_of(op_type, act, *shapes))
    aq, bq = act_q(r), act_q(r)
    a, b = q8(r, shapes[0]), q8(r, shapes[1])
    real = float_kernel(op_type, options(BINARY_OPTS[op_type]), [deq(a, aq), deq(b, bq)])
    opts = options(BINARY_OPTS[op_type], fusedActivationFunction=act)
    case = SingleOp(op_type, [Spec("a", shapes[0], I8, quant=aq),
                              Spec("b", shapes[1], I8, quant=bq)],
                    [Spec("y", None, I8, quant=out_q_for(real, r))], opts)
    check_quant(case, [a, b], tol=0)


@pytest.mark.parametrize("op_type", ["MINIMUM", "MAXIMUM"])
@pytest.mark.parametrize("same_params", [True, False])
def test_min_max_int8(op_type: str, same_params: bool) -> None:
    """LiteRT compares raw values (even when the quantization differs)."""
    r = np.random.default_rng(3)
    qs = [act_q(r)] * 3 if same_params else [act_q(r) for _ in range(3)]
    a, b = q8(r, (2, 3, 4)), q8(r, (3, 1))
    case = SingleOp(op_type, [Spec("a", a.shape, I8, quant=qs[0]),
                              Spec("b", b.shape, I8, quant=qs[1])],
                    [Spec("y", None, I8, quant=qs[2])], options("MaximumMinimumOptions"))
    check_quant(case, [a, b], tol=0)


@pytest.mark.parametrize("shapes", [((4, 64), (64,)), *SHAPE_PAIRS])
def test_squared_difference_int8(shapes: tuple) -> None:
    """LiteRT's fixed-point kernel, bit for bit (same shapes and broadcast)."""
    r = np.random.default_rng(seed_of("SQUARED_DIFFERENCE", *shapes))
    aq, bq = act_q(r), act_q(r)
    a, b = q8(r, shapes[0]), q8(r, shapes[1])
    opts = options("SquaredDifferenceOptions")
    real = float_kernel("SQUARED_DIFFERENCE", opts, [deq(a, aq), deq(b, bq)])
    case = SingleOp("SQUARED_DIFFERENCE", [Spec("a", a.shape, I8, quant=aq),
                                           Spec("b", b.shape, I8, quant=bq)],
                    [Spec("y", None, I8, quant=out_q_for(real, r))], opts)
    check_quant(case, [a, b], tol=0)


# ---------------------------------------------------------------------------- unary float
def _positive(x: np.ndarray) -> np.ndarray:
    return (np.abs(x) + F32(0.05)).astype(F32)


UNARY = {
    "RSQRT": (None, _positive), "SQRT": (None, _positive), "EXP": (None, None),
    "TANH": (None, None), "LOGISTIC": (None, None), "RELU": (None, None),
    "RELU6": (None, None), "RELU_N1_TO_1": (None, None), "NEG": (None, None),
    "ABS": (None, None), "HARD_SWISH": (None, None),
    "LEAKY_RELU": (("LeakyReluOptions", {"alpha": 0.15}), None),
    "GELU": (("GeluOptions", {"approximate": False}), None),
}


@pytest.mark.parametrize("op_type", list(UNARY))
@pytest.mark.parametrize("shape", [(2, 3, 5), (64,)])
def test_unary_float(op_type: str, shape: tuple[int, ...]) -> None:
    r = np.random.default_rng(len(op_type) + len(shape))
    opt_spec, prep = UNARY[op_type]
    x = normal(r, shape, 3.0)
    x = prep(x) if prep else x
    opts = options(opt_spec[0], **opt_spec[1]) if opt_spec else None
    case = SingleOp(op_type, [Spec("x", shape)], [Spec("y", None)], opts)
    check_float(case, [x])


def test_gelu_approximate_float() -> None:
    r = np.random.default_rng(5)
    x = normal(r, (3, 40), 3.0)
    case = SingleOp("GELU", [Spec("x", x.shape)], [Spec("y", None)],
                    options("GeluOptions", approximate=True))
    check_float(case, [x])


# ---------------------------------------------------------------------------- unary int8
UNARY_INT8 = {
    "LOGISTIC": (None, quant(1 / 256, -128), 0),
    "TANH": (None, quant(1 / 128, 0), 0),
    "RELU": (None, "rand", 0),
    "RELU6": (None, "rand", 0),
    "RELU_N1_TO_1": (None, "rand", 0),
    "LEAKY_RELU": (("LeakyReluOptions", {"alpha": 0.2}), "rand", 0),
    "HARD_SWISH": (None, "rand", 0),
    "GELU": (("GeluOptions", {"approximate": False}), "rand", 0),
    "ABS": (None, "rand", 0),
    "EXP": (None, "rand", 0),
    "NEG": (None, "rand", 0),
    "RSQRT": (None, "rand", 0),
    "SQRT": (None, "rand", 1),
}


@pytest.mark.parametrize("op_type", list(UNARY_INT8))
def test_unary_int8(op_type: str) -> None:
    r = np.random.default_rng(len(op_type))
    opt_spec, oq, tol = UNARY_INT8[op_type]
    opts = options(opt_spec[0], **opt_spec[1]) if opt_spec else None
    xq = quant(0.03, -128 if op_type in ("RSQRT", "SQRT") else 10)
    x = np.arange(-128, 128, dtype=np.int16).astype(I8).reshape(4, 64)
    if op_type == "RSQRT":  # keep away from 1 / sqrt(0)
        x = np.maximum(x, I8(-120))
    if oq == "rand":
        real = float_kernel(op_type, opts, [deq(x, xq)])
        oq = out_q_for(real, r)
    case = SingleOp(op_type, [Spec("x", x.shape, I8, quant=xq)],
                    [Spec("y", None, I8, quant=oq)], opts)
    check_quant(case, [x], tol=tol)


# ---------------------------------------------------------------------------- reductions
AXES = [([1, 2], True), ([1, 2], False), ([-1], False), ([0, 2], True), ([0, 1, 2, 3], False),
        ([3, 1], True), ([2], True)]


@pytest.mark.parametrize("op_type", ["MEAN", "SUM", "REDUCE_MAX"])
@pytest.mark.parametrize("axes,keep", AXES)
def test_reduce_float(op_type: str, axes: list[int], keep: bool) -> None:
    r = np.random.default_rng(len(axes) + keep)
    x = normal(r, (2, 5, 6, 7))
    ins = [Spec("x", x.shape), Spec.const("axes", np.array(axes, np.int32))]
    case = SingleOp(op_type, ins, [Spec("y", None)], options("ReducerOptions", keepDims=keep))
    check_float(case, [x], atol=acc_atol(x.size))


@pytest.mark.parametrize("op_type", ["MEAN", "SUM", "REDUCE_MAX"])
@pytest.mark.parametrize("axes,keep", AXES)
@pytest.mark.parametrize("shape", [(2, 5, 6, 7), (1, 4, 3, 21)])
def test_reduce_int8(op_type: str, axes: list[int], keep: bool, shape: tuple[int, ...]) -> None:
    """The second shape has more than 16 channels: LiteRT's SIMD MEAN body and tail."""
    r = np.random.default_rng(3 * len(axes) + keep + shape[-1])
    xq = act_q(r)
    x = q8(r, shape)
    opts = options("ReducerOptions", keepDims=keep)
    if op_type == "REDUCE_MAX":
        oq = xq
    else:
        real = float_kernel(op_type, opts, [deq(x, xq), np.array(axes, np.int32)])
        oq = out_q_for(real, r)
    ins = [Spec("x", x.shape, I8, quant=xq), Spec.const("axes", np.array(axes, np.int32))]
    case = SingleOp(op_type, ins, [Spec("y", None, I8, quant=oq)], opts)
    check_quant(case, [x], tol=0)


# ---------------------------------------------------------------------------- pooling
@pytest.mark.parametrize("op_type", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("pad", [0, 1])
@pytest.mark.parametrize("f,s", [(2, 2), (3, 1), (3, 2), (1, 1), (4, 3)])
@pytest.mark.parametrize("quantized", [False, True])
def test_pool(op_type: str, pad: int, f: int, s: int, quantized: bool) -> None:
    r = np.random.default_rng(f * 10 + s + pad)
    act = int(r.integers(0, 4))
    opts = options("Pool2DOptions", padding=pad, strideH=s, strideW=s, filterHeight=f,
                   filterWidth=f + (pad == 1), fusedActivationFunction=act)
    shape = (2, 7, 9, 3)
    if not quantized:
        x = normal(r, shape)
        check_float(SingleOp(op_type, [Spec("x", shape)], [Spec("y", None)], opts), [x])
        return
    q = act_q(r)
    x = q8(r, shape)
    case = SingleOp(op_type, [Spec("x", shape, I8, quant=q)], [Spec("y", None, I8, quant=q)],
                    opts)
    check_quant(case, [x], tol=0)


# ---------------------------------------------------------------------------- softmax
@pytest.mark.parametrize("shape", [(2, 7), (1, 3, 4, 10), (5, 1)])
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_softmax(shape: tuple[int, ...], beta: float) -> None:
    r = np.random.default_rng(len(shape))
    x = normal(r, shape, 2.0)
    opts = options("SoftmaxOptions", beta=beta)
    check_float(SingleOp("SOFTMAX", [Spec("x", shape)], [Spec("y", None)], opts), [x])
    xq = act_q(r)
    xi = q8(r, shape)
    case = SingleOp("SOFTMAX", [Spec("x", shape, I8, quant=xq)],
                    [Spec("y", None, I8, quant=quant(1 / 256, -128))], opts)
    check_quant(case, [xi], tol=1)


# ---------------------------------------------------------------------------- quantization
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (7,), (4, 16)])
@pytest.mark.parametrize("dtype,zp", [(I8, 3), (np.uint8, 128), (np.int16, 0)])
def test_quantize_dequantize(shape: tuple[int, ...], dtype: type, zp: int) -> None:
    """Sizes cover LiteRT's SIMD blocks and scalar tails; half the values sit on or next to
    rounding ties of x / scale."""
    r = np.random.default_rng(seed_of(shape, zp))
    q = quant(float(r.uniform(0.01, 0.1)) / (100 if dtype == np.int16 else 1), zp)
    s = float(q.scale[0])
    x = normal(r, shape, 2.0)
    flat = x.reshape(-1)
    half = flat.size // 2
    flat[:half] = ((np.round(flat[:half] / s) + 0.5) * s).astype(F32)
    flat[:2] = (np.array([0.5, -2.5]) * s).astype(F32)
    case = SingleOp("QUANTIZE", [Spec("x", shape)], [Spec("y", shape, dtype, quant=q)])
    check_quant(case, [x], tol=0)
    if dtype != I8:
        return
    q2 = act_q(r)
    xi = q8(r, shape)
    case = SingleOp("QUANTIZE", [Spec("x", shape, I8, quant=q)],
                    [Spec("y", shape, I8, quant=q2)])
    check_quant(case, [xi], tol=0)
    case = SingleOp("DEQUANTIZE", [Spec("x", shape, I8, quant=q)], [Spec("y", shape)])
    check_float(case, [xi], rtol=0, atol=0)


def test_dequantize_per_channel_constant() -> None:
    r = np.random.default_rng(9)
    w, wq = weights_q(r, (4, 3), 0)
    x = normal(r, (4, 3))
    # DEQUANTIZE of a per-channel constant feeding an ADD (the usual weight pattern)
    op = Op("DEQUANTIZE", [Tensor("w", w.shape, tensor_type_of(I8), data=w, quant=wq)],
            [Tensor("wf", w.shape, tensor_type_of(F32))])
    got = get_kernel(op)(op, [w])[0]
    np.testing.assert_array_equal(got, deq(w, wq))
    assert got.dtype == F32 and x.shape == got.shape


# ---------------------------------------------------------------------------- shape ops
def _run_both(case: SingleOp, feeds: list[np.ndarray], quantized: bool) -> None:
    if quantized:
        check_quant(case, feeds, tol=0)
    else:
        check_float(case, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("quantized", [False, True])
def test_reshape(quantized: bool) -> None:
    r = np.random.default_rng(1)
    dt, q = (I8, act_q(r)) if quantized else (F32, None)
    x = q8(r, (2, 3, 4)) if quantized else normal(r, (2, 3, 4))
    case = SingleOp("RESHAPE", [Spec("x", x.shape, dt, quant=q),
                                Spec.const("s", np.array([4, -1], np.int32))],
                    [Spec("y", None, dt, quant=q)])
    _run_both(case, [x], quantized)
    case = SingleOp("RESHAPE", [Spec("x", x.shape, dt, quant=q)],
                    [Spec("y", None, dt, quant=q)],
                    options("ReshapeOptions", newShape=[6, 4]))
    _run_both(case, [x], quantized)


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(quantized: bool, axis: int) -> None:
    r = np.random.default_rng(axis + 5)
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    if not quantized:
        xs = [normal(r, s) for s in shapes]
        case = SingleOp("CONCATENATION", [Spec(f"x{i}", s) for i, s in enumerate(shapes)],
                        [Spec("y", None)], options("ConcatenationOptions", axis=axis))
        check_float(case, xs, rtol=0, atol=0)
        return
    q = act_q(r)
    xs = [q8(r, s) for s in shapes]
    case = SingleOp("CONCATENATION", [Spec(f"x{i}", s, I8, quant=q)
                                      for i, s in enumerate(shapes)],
                    [Spec("y", None, I8, quant=q)], options("ConcatenationOptions", axis=axis))
    check_quant(case, xs, tol=0)


def test_concatenation_int8_rescales_inputs() -> None:
    r = np.random.default_rng(11)
    qs = [quant(0.02, 3), quant(0.05, -7)]
    xs = [q8(r, (2, 3)), q8(r, (2, 4))]
    oq = quant(0.04, 1)
    op = Op("CONCATENATION", [Tensor(f"x{i}", x.shape, tensor_type_of(I8), quant=q)
                              for i, (x, q) in enumerate(zip(xs, qs, strict=True))],
            [Tensor("y", (2, 7), tensor_type_of(I8), quant=oq)],
            options("ConcatenationOptions", axis=1))
    got = get_kernel(op)(op, xs)[0]
    want = np.concatenate([np.clip(np.round(deq(x, q) / 0.04) + 1, -128, 127)
                           for x, q in zip(xs, qs, strict=True)], axis=1)
    assert np.abs(got.astype(int) - want).max() <= 1


def test_transpose_squeeze_expand_dims() -> None:
    r = np.random.default_rng(2)
    x = normal(r, (2, 1, 3, 4))
    case = SingleOp("TRANSPOSE", [Spec("x", x.shape), Spec.const("p", np.array([3, 0, 2, 1],
                                                                                np.int32))],
                    [Spec("y", None)])
    check_float(case, [x], rtol=0, atol=0)
    for dims in ([1], [], [-3]):
        case = SingleOp("SQUEEZE", [Spec("x", x.shape)], [Spec("y", None)],
                        options("SqueezeOptions", squeezeDims=dims))
        check_float(case, [x], rtol=0, atol=0)
    for axis in (0, 2, -1, 4):
        case = SingleOp("EXPAND_DIMS", [Spec("x", x.shape),
                                        Spec.const("a", np.array([axis], np.int32))],
                        [Spec("y", None)])
        check_float(case, [x], rtol=0, atol=0)


def test_split_split_v_unpack_pack() -> None:
    r = np.random.default_rng(4)
    x = normal(r, (4, 6, 3))
    case = SingleOp("SPLIT", [Spec.const("axis", np.array(1, np.int32)), Spec("x", x.shape)],
                    [Spec(f"y{i}", None) for i in range(3)], options("SplitOptions", numSplits=3))
    check_float(case, [x], rtol=0, atol=0)
    case = SingleOp("SPLIT_V", [Spec("x", x.shape), Spec.const("s", np.array([2, -1, 1],
                                                                               np.int32)),
                                Spec.const("axis", np.array(1, np.int32))],
                    [Spec(f"y{i}", None) for i in range(3)],
                    options("SplitVOptions", numSplits=3))
    check_float(case, [x], rtol=0, atol=0)
    case = SingleOp("UNPACK", [Spec("x", x.shape)], [Spec(f"y{i}", None) for i in range(3)],
                    options("UnpackOptions", num=3, axis=-1))
    check_float(case, [x], rtol=0, atol=0)
    parts = [normal(r, (2, 5)) for _ in range(3)]
    case = SingleOp("PACK", [Spec(f"x{i}", (2, 5)) for i in range(3)], [Spec("y", None)],
                    options("PackOptions", valuesCount=3, axis=1))
    check_float(case, parts, rtol=0, atol=0)


@pytest.mark.parametrize("quantized", [False, True])
def test_pad_padv2(quantized: bool) -> None:
    r = np.random.default_rng(6)
    dt, q = (I8, act_q(r)) if quantized else (F32, None)
    x = q8(r, (1, 3, 4, 2)) if quantized else normal(r, (1, 3, 4, 2))
    pads = np.array([[0, 0], [1, 2], [2, 0], [0, 1]], np.int32)
    case = SingleOp("PAD", [Spec("x", x.shape, dt, quant=q), Spec.const("p", pads)],
                    [Spec("y", None, dt, quant=q)])
    _run_both(case, [x], quantized)
    value = np.array([5], dt) if quantized else np.array([1.5], F32)
    case = SingleOp("PADV2", [Spec("x", x.shape, dt, quant=q), Spec.const("p", pads),
                              Spec.const("c", value.reshape(()), q)],
                    [Spec("y", None, dt, quant=q)])
    _run_both(case, [x], quantized)


STRIDED = [
    # begin, end, strides, begin_mask, end_mask, shrink, ellipsis, new_axis
    ([0, 1, 0], [2, 3, 5], [1, 1, 1], 0, 0, 0, 0, 0),
    ([1, 0, 4], [2, 3, 0], [1, 2, -1], 0, 0, 0, 0, 0),
    ([0, 0, 0], [0, 0, 0], [1, 1, 2], 7, 7, 0, 0, 0),
    ([1, 0, 0], [2, 3, 5], [1, 1, 1], 0, 6, 1, 0, 0),
    ([-1, -2, -5], [0, 0, 0], [1, 1, 1], 0, 7, 0, 0, 0),
    ([0, 1], [0, 2], [1, 1], 1, 1, 2, 0, 0),
    ([0, 2], [2, 5], [1, 1], 0, 0, 0, 1, 0),
    ([0, 0, 1], [2, 0, 3], [1, 1, 1], 0, 0, 0, 0, 2),
]


@pytest.mark.parametrize("spec", STRIDED)
def test_strided_slice(spec: tuple) -> None:
    begin, end, strides, bm, em, sm, elm, nam = spec
    r = np.random.default_rng(8)
    x = normal(r, (3, 4, 6))
    ins = [Spec("x", x.shape), Spec.const("b", np.array(begin, np.int32)),
           Spec.const("e", np.array(end, np.int32)),
           Spec.const("s", np.array(strides, np.int32))]
    opts = options("StridedSliceOptions", beginMask=bm, endMask=em, shrinkAxisMask=sm,
                   ellipsisMask=elm, newAxisMask=nam)
    check_float(SingleOp("STRIDED_SLICE", ins, [Spec("y", None)], opts), [x], rtol=0, atol=0)


def test_strided_slice_offset() -> None:
    r = np.random.default_rng(8)
    x = normal(r, (5, 6))
    ins = [Spec("x", x.shape), Spec.const("b", np.array([1, 2], np.int32)),
           Spec.const("e", np.array([3, 2], np.int32)),
           Spec.const("s", np.array([1, 1], np.int32))]
    opts = options("StridedSliceOptions", offset=True)
    check_float(SingleOp("STRIDED_SLICE", ins, [Spec("y", None)], opts), [x], rtol=0, atol=0)


def test_slice_and_gather() -> None:
    r = np.random.default_rng(10)
    x = normal(r, (3, 5, 4))
    case = SingleOp("SLICE", [Spec("x", x.shape), Spec.const("b", np.array([1, 0, 2], np.int32)),
                              Spec.const("s", np.array([2, -1, 2], np.int32))],
                    [Spec("y", None)])
    check_float(case, [x], rtol=0, atol=0)
    idx = np.array([[0, 4], [2, 2], [3, 1]], np.int32)
    for axis in (1, -1, 0):
        ind = idx % x.shape[axis]
        case = SingleOp("GATHER", [Spec("x", x.shape), Spec.const("i", ind)], [Spec("y", None)],
                        options("GatherOptions", axis=axis))
        check_float(case, [x], rtol=0, atol=0)
    case = SingleOp("GATHER", [Spec("x", x.shape), Spec.const("i", idx)], [Spec("y", None)],
                    options("GatherOptions", axis=1, batchDims=1))
    check_float(case, [x], rtol=0, atol=0)


def test_cast() -> None:
    r = np.random.default_rng(12)
    x = normal(r, (3, 4), 5.0)
    check_float(SingleOp("CAST", [Spec("x", x.shape)], [Spec("y", x.shape, np.int32)]), [x],
                rtol=0, atol=0)
    xi = r.integers(-100, 100, size=(3, 4)).astype(np.int32)
    check_float(SingleOp("CAST", [Spec("x", xi.shape, np.int32)], [Spec("y", xi.shape)]),
                [xi], rtol=0, atol=0)


@pytest.mark.parametrize("op_type", ["TRANSPOSE", "GATHER", "STRIDED_SLICE", "SPLIT", "PACK",
                                     "MAX_POOL_2D"])
def test_shape_ops_int8_move_values(op_type: str) -> None:
    r = np.random.default_rng(13)
    q = act_q(r)
    x = q8(r, (2, 4, 6, 3))
    extra: list[Spec] = []
    opts = None
    outs = [Spec("y", None, I8, quant=q)]
    inputs = [Spec("x", x.shape, I8, quant=q)]
    feeds = [x]
    if op_type == "TRANSPOSE":
        extra = [Spec.const("p", np.array([0, 3, 1, 2], np.int32))]
    elif op_type == "GATHER":
        extra = [Spec.const("i", np.array([3, 0, 0], np.int32))]
        opts = options("GatherOptions", axis=1)
    elif op_type == "STRIDED_SLICE":
        extra = [Spec.const(n, np.array(v, np.int32)) for n, v in
                 (("b", [0, 1, 0, 1]), ("e", [2, 4, 6, 3]), ("s", [1, 2, 3, 1]))]
        opts = options("StridedSliceOptions")
    elif op_type == "SPLIT":
        inputs = [Spec.const("a", np.array(2, np.int32)), inputs[0]]
        outs = [Spec(f"y{i}", None, I8, quant=q) for i in range(2)]
        opts = options("SplitOptions", numSplits=2)
    elif op_type == "PACK":
        inputs.append(Spec("x2", x.shape, I8, quant=q))
        feeds.append(q8(r, x.shape))
        opts = options("PackOptions", valuesCount=2, axis=0)
    else:
        opts = options("Pool2DOptions", padding=0, strideH=2, strideW=2, filterHeight=2,
                       filterWidth=2)
    check_quant(SingleOp(op_type, inputs + extra, outs, opts), feeds, tol=0)


# ---------------------------------------------------------------------------- fused TANH
def test_fused_tanh_is_applied() -> None:
    """The schema's fused TANH is applied; LiteRT ignores it on CONV_2D / ADD (a LiteRT
    quirk), so this checks against NumPy."""
    r = np.random.default_rng(14)
    x, w, b = normal(r, (1, 5, 5, 3)), normal(r, (4, 3, 3, 3)), normal(r, (4,))
    plain = float_kernel("CONV_2D", options("Conv2DOptions", padding=1, strideH=1, strideW=1),
                         [x, w, b])
    fused = float_kernel("CONV_2D", options("Conv2DOptions", padding=1, strideH=1, strideW=1,
                                            fusedActivationFunction=4), [x, w, b])
    np.testing.assert_allclose(fused, np.tanh(plain), rtol=1e-6, atol=1e-7)
    a, c = normal(r, (3, 4)), normal(r, (4,))
    y = float_kernel("ADD", options("AddOptions", fusedActivationFunction=4), [a, c])
    np.testing.assert_allclose(y, np.tanh(a + c), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------- XNNPACK
def test_against_litert_default_delegate() -> None:
    """LiteRT's default interpreter (XNNPACK delegate) rounds differently from its builtin
    kernels; the kernels stay within tolerance / one unit of it too."""
    r = np.random.default_rng(15)
    x, w, b = normal(r, (1, 9, 9, 8)), normal(r, (16, 3, 3, 8)), normal(r, (16,))
    opts = options("Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=1)
    case = SingleOp("CONV_2D", [Spec("x", x.shape), Spec.const("w", w), Spec.const("b", b)],
                    [Spec("y", None)], opts)
    want = case.run_litert([x], delegates=True)[0]
    np.testing.assert_allclose(case.run_kernel([x])[0], want, rtol=RTOL, atol=acc_atol(72))
    xq = act_q(r)
    xi = q8(r, x.shape)
    wi, wq = weights_q(r, w.shape, 0)
    bi, bq = bias_q(r, 16, xq, wq)
    real = float_kernel("CONV_2D", opts, [deq(xi, xq), deq(wi, wq), deq(bi, bq)])
    case = SingleOp("CONV_2D", [Spec("x", x.shape, I8, quant=xq), Spec.const("w", wi, wq),
                                Spec.const("b", bi, bq)],
                    [Spec("y", None, I8, quant=out_q_for(real, r))], opts)
    want = case.run_litert([xi], delegates=True)[0]
    assert np.abs(case.run_kernel([xi])[0].astype(int) - want).max() <= 1


# ---------------------------------------------------------------------------- norms
def _norm_ref(x: np.ndarray, axes: tuple[int, ...], eps: float, g: np.ndarray,
              b: np.ndarray) -> np.ndarray:
    xd = x.astype(np.float64)
    m = xd.mean(axis=axes, keepdims=True)
    v = ((xd - m) ** 2).mean(axis=axes, keepdims=True)
    return (xd - m) / np.sqrt(v + eps) * g.astype(np.float64) + b.astype(np.float64)


@pytest.mark.parametrize("shape", [(1, 5, 6, 3), (2, 4, 4, 8), (2, 7, 5)])
@pytest.mark.parametrize("act", [0, 1])
def test_instance_norm(shape: tuple[int, ...], act: int) -> None:
    r = np.random.default_rng(len(shape) + act)
    x = normal(r, shape, 2.0) + F32(1.5)
    c = shape[-1]
    g, b = normal(r, (c,)), normal(r, (c,))
    eps = 1e-3
    opts = options("InstanceNormOptions", epsilon=eps, fusedActivationFunction=act)
    op = Op("INSTANCE_NORM", [Tensor("x", shape, tensor_type_of(F32)),
                              Tensor("g", (c,), tensor_type_of(F32), data=g),
                              Tensor("b", (c,), tensor_type_of(F32), data=b)],
            [Tensor("y", shape, tensor_type_of(F32))], opts)
    got = get_kernel(op)(op, [x, g, b])[0]
    want = _norm_ref(x, tuple(range(1, len(shape) - 1)), eps, g, b)
    if act == 1:
        want = np.maximum(want, 0)
    assert got.dtype == F32 and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 16), (2, 3, 10)])
@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_layer_norm(shape: tuple[int, ...], eps: float) -> None:
    r = np.random.default_rng(len(shape))
    x = normal(r, shape, 3.0) - F32(2.0)
    d = shape[-1]
    g, b = normal(r, (d,)), normal(r, (d,))
    op = Op("CUSTOM", [Tensor("x", shape, tensor_type_of(F32)),
                       Tensor("g", (d,), tensor_type_of(F32), data=g),
                       Tensor("b", (d,), tensor_type_of(F32), data=b)],
            [Tensor("y", shape, tensor_type_of(F32))], custom_code="LAYER_NORM",
            custom_options=struct.pack("<f", eps))
    got = get_kernel(op)(op, [x, g, b])[0]
    want = _norm_ref(x, (len(shape) - 1,), float(np.float32(eps)), g, b)
    assert got.dtype == F32 and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_layer_norm_options_encoding() -> None:
    from flatbuffers import flexbuffers

    from toolkit.runtime.kernels.norm import encode_layer_norm_options, layer_norm_epsilon

    def op_with(raw: bytes | None) -> Op:
        return Op("CUSTOM", [], [Tensor("y", (1,), tensor_type_of(F32))],
                  custom_code="LAYER_NORM", custom_options=raw)

    assert encode_layer_norm_options(1e-6) == struct.pack("<f", 1e-6)
    assert layer_norm_epsilon(op_with(struct.pack("<f", 0.25))) == 0.25
    assert layer_norm_epsilon(op_with(None)) == 1e-5
    assert layer_norm_epsilon(op_with(flexbuffers.Dumps({"epsilon": 0.125}))) == 0.125
    with pytest.raises(UnsupportedOpError, match="LAYER_NORM"):
        layer_norm_epsilon(op_with(b"\x01\x02\x03"))


# ---------------------------------------------------------------------------- conv 3d
@pytest.mark.parametrize("cfg", [
    # (input, filter, strides, dilations, padding, bias, activation)
    ((2, 4, 7, 6, 3), (2, 3, 3, 3, 5), (1, 2, 2), (1, 1, 1), "SAME", True, "RELU6"),
    ((1, 6, 8, 8, 2), (3, 3, 3, 2, 4), (1, 1, 1), (2, 2, 2), "VALID", False, "NONE"),
    ((1, 3, 5, 5, 9), (1, 3, 3, 9, 6), (1, 1, 1), (1, 1, 1), "SAME", True, "RELU"),
    ((1, 4, 6, 6, 16), (3, 3, 3, 16, 8), (1, 1, 1), (1, 1, 1), "SAME", True, "NONE"),
], ids=["same_bias_relu6", "valid_dilated", "81_taps", "432_taps"])
def test_conv3d_float_sums_in_litert_order(cfg: tuple) -> None:
    """Bit-exact with LiteRT: the bias, then one fused multiply-add per tap in im2col order."""
    xs, ws, st_, dl, pad, has_bias, act = cfg
    r = np.random.default_rng(seed_of("CONV_3D", *cfg))
    x, w = normal(r, xs), normal(r, ws)
    inputs = [Spec("x", xs), Spec.const("w", w)]
    if has_bias:
        inputs.append(Spec.const("b", normal(r, (ws[4],))))
    opts = options("Conv3DOptions", padding=0 if pad == "SAME" else 1, strideD=st_[0],
                   strideH=st_[1], strideW=st_[2], dilationDFactor=dl[0],
                   dilationHFactor=dl[1], dilationWFactor=dl[2],
                   fusedActivationFunction={"NONE": 0, "RELU": 1, "RELU6": 3}[act])
    case = SingleOp("CONV_3D", inputs, [Spec("y", None)], opts)
    check_float(case, [x], rtol=0, atol=0)


def test_conv3d_past_the_multiply_add_budget_is_within_rounding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkit.runtime.kernels import resample

    monkeypatch.setattr(resample, "FMA_BUDGET", 1000)
    r = np.random.default_rng(8)
    x, w, b = normal(r, (1, 4, 6, 6, 16)), normal(r, (3, 3, 3, 16, 8)), normal(r, (8,))
    opts = options("Conv3DOptions", padding=0, strideD=1, strideH=1, strideW=1,
                   dilationDFactor=1, dilationHFactor=1, dilationWFactor=1)
    case = SingleOp("CONV_3D", [Spec("x", x.shape), Spec.const("w", w), Spec.const("b", b)],
                    [Spec("y", None)], opts)
    check_float(case, [x], atol=acc_atol(432))


def test_fma_rounds_once() -> None:
    """A float64 sum that lands on a float32 tie while the exact sum is below it: a second
    rounding would go up to the even neighbour, one rounding stays."""
    from toolkit.runtime.kernels.resample import fma_f32

    acc = np.array([2.0**30 + 2.0**7, -(2.0**30 + 2.0**7), 1.5], np.float32)
    a = np.float64(np.float32(8 * (1 + 2.0**-23)))
    b = np.array([8 * (1 - 2.0**-23), -8 * (1 - 2.0**-23), 0.25], np.float32).astype(np.float64)
    twice = (acc.astype(np.float64) + a * b).astype(np.float32)
    assert twice[0] == np.float32(2.0**30 + 2.0**8)  # double rounding
    got = fma_f32(acc, a, b)
    assert got.dtype == np.float32
    assert got.tolist() == [2.0**30 + 2.0**7, -(2.0**30 + 2.0**7), 3.5 + 2.0**-22]
