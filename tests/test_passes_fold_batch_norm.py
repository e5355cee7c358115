"""fold_batch_norm and fuse_bias_add: a convolution absorbs constant MUL/ADD/SUB after it."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import FoldBatchNorm, FuseBiasAdd, GraphPass
from toolkit.ir import Model, Quantization, Tensor
from toolkit.schema import ACTIVATION_CODES

RNG = np.random.default_rng(3)


def _apply(model: Model, *passes: GraphPass) -> Model:
    work = copy_model(model)
    PassManager(list(passes) or [FoldBatchNorm(), FuseBiasAdd()])(work)
    return work


def _check_numerics(a: Model, b: Model) -> None:
    ins = {t.name: RNG.uniform(-2, 2, t.shape).astype(np.float32) for t in a.graph.inputs}
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    for k in ra:
        np.testing.assert_allclose(rb[k], ra[k], rtol=1e-5, atol=1e-5 * np.abs(ra[k]).max())


def _producer(mb: ModelBuilder, x: Tensor, kind: str, bias: bool = True) -> Tensor:
    c = x.shape[-1]
    b = mb.const("b", RNG.normal(size=8)) if bias else None
    if kind == "CONV_2D":
        return mb.conv2d(x, mb.const("w", RNG.normal(size=(8, 3, 3, c))), b, name="conv")
    if kind == "DEPTHWISE_CONV_2D":
        return mb.depthwise_conv2d(x, mb.const("w", RNG.normal(size=(1, 3, 3, 8))), b,
                                   depth_multiplier=8 // c, name="conv")
    return mb.fully_connected(x, mb.const("w", RNG.normal(size=(8, c))), b, keep_num_dims=True,
                              name="conv")


@pytest.mark.parametrize("kind", ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"])
@pytest.mark.parametrize("bias", [True, False])
def test_fold_mul_add(kind: str, bias: bool) -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 4 if kind != "DEPTHWISE_CONV_2D" else 8])
    y = _producer(mb, x, kind, bias)
    y = mb.mul(y, mb.const("scale", RNG.uniform(0.5, 1.5, 8)), name="bn/mul")
    y = mb.add(y, mb.const("shift", RNG.normal(size=(1, 1, 1, 8))), activation="RELU",
               name="bn/add")
    mb.output(y)
    model = mb.build()
    out = _apply(model, FoldBatchNorm())
    (op,) = out.graph.ops
    assert op.type == kind and op.origins == {0, 1, 2}
    assert op.activation == ACTIVATION_CODES["RELU"] and op.name == "bn/add"
    assert all(r.relation == "absorb" and r.pass_name == "fold_batch_norm"
               for r in out.graph.rewrites)
    assert op.inputs[1].dtype == np.float32 and op.inputs[2].dtype == np.float32
    assert len(model.graph) == 3  # source untouched
    _check_numerics(model, out)


def test_fold_is_done_in_float64() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    w = np.array([[1e-3, 3.0, -7.0, 0.1]], np.float32)
    y = mb.fully_connected(x, mb.const("w", w), mb.const("b", np.float32([0.7])), name="fc")
    s = np.float32(1.1)
    y = mb.mul(y, mb.const("s", s), name="mul")
    mb.output(y)
    out = _apply(mb.build(), FoldBatchNorm())
    (op,) = out.graph.ops
    np.testing.assert_array_equal(op.inputs[1].data,
                                  (w.astype(np.float64) * np.float64(s)).astype(np.float32))
    np.testing.assert_array_equal(op.inputs[2].data, np.float32([np.float64(np.float32(0.7))
                                                                 * np.float64(s)]))


@pytest.mark.parametrize("form", ["x-t", "t+x", "t-x"])
def test_bias_add_and_sub(form: str) -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 4])
    y = _producer(mb, x, "CONV_2D", bias=False)
    t = mb.const("t", RNG.normal(size=8))
    if form == "x-t":
        y = mb.sub(y, t, activation="RELU6", name="bias")
    elif form == "t+x":
        y = mb.add(t, y, activation="RELU6", name="bias")
    else:
        y = mb.sub(t, y, activation="RELU6", name="bias")
    mb.output(y)
    model = mb.build()
    out = _apply(model, FuseBiasAdd())
    if form == "t-x":
        assert [o.type for o in out.graph.ops] == ["CONV_2D", "SUB"]
    else:
        (op,) = out.graph.ops
        assert op.type == "CONV_2D" and op.origins == {0, 1} and len(op.inputs) == 3
        assert op.activation == ACTIVATION_CODES["RELU6"]
        assert out.graph.rewrites[-1].pass_name == "fuse_bias_add"
    _check_numerics(model, out)


def test_bias_add_after_activation_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 4])
    y = mb.conv2d(x, mb.const("w", RNG.normal(size=(8, 3, 3, 4))), None, activation="RELU",
                  name="conv")
    y = mb.add(y, mb.const("t", RNG.normal(size=8)), name="add")
    mb.output(y)
    out = _apply(mb.build())
    assert [o.type for o in out.graph.ops] == ["CONV_2D", "ADD"]


@pytest.mark.parametrize("shape", [(5, 1), (1, 5, 1, 8), (5, 5, 8), None])
def test_non_per_channel_factors_left_alone(shape: tuple[int, ...] | None) -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 4])
    y = _producer(mb, x, "CONV_2D")
    if shape is None:
        c = mb.input("c", [1, 5, 5, 8])  # not a constant at all
    else:
        c = mb.const("c", RNG.uniform(0.5, 1.5, shape))
    y = mb.mul(y, c, name="mul")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert [o.type for o in out.graph.ops] == ["CONV_2D", "MUL"]
    assert not out.graph.rewrites
    _check_numerics(model, out)


def test_shared_conv_output_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 4])
    y = _producer(mb, x, "CONV_2D")
    z = mb.mul(y, mb.const("s", RNG.uniform(size=8)), name="mul")
    mb.output(z, y)
    out = _apply(mb.build())
    assert len(out.graph) == 2


def test_int8_weights_left_alone() -> None:
    q = Quantization.make(0.1, 0)
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2], np.int8, quant=q)
    w = mb.const("w", np.ones((2, 1, 1, 2), np.int8), quant=Quantization.make([0.1, 0.1], 0))
    b = mb.const("b", np.zeros(2, np.int32), quant=Quantization.make([0.01, 0.01], 0))
    y = mb.conv2d(x, w, b, name="conv", quant=q)
    y = mb.mul(y, mb.const("s", np.ones(2, np.int8), quant=q), name="mul", quant=q)
    y = mb.add(y, mb.const("t", np.ones(2, np.int8), quant=q), name="add", quant=q)
    mb.output(y)
    out = _apply(mb.build())
    assert [o.type for o in out.graph.ops] == ["CONV_2D", "MUL", "ADD"]
    assert not out.graph.rewrites


def test_dynamic_shape_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 4])
    x.shape_signature = (-1, 5, 5, 4)
    y = _producer(mb, x, "CONV_2D")
    y.shape_signature = (-1, 5, 5, 8)
    y = mb.mul(y, mb.const("s", RNG.uniform(size=8)), name="mul")
    mb.output(y)
    out = _apply(mb.build())
    assert len(out.graph) == 2
