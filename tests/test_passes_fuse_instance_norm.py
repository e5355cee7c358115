"""fuse_instance_norm: an instance-norm subgraph becomes one circle INSTANCE_NORM op."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import FuseInstanceNorm, FuseLayerNorm
from toolkit.ir import Model, Tensor
from toolkit.runtime.interpreter import Interpreter
from toolkit.schema import ACTIVATION_CODES

C = 6
RNG = np.random.default_rng(5)
GAMMA = RNG.uniform(0.5, 1.5, C).astype(np.float32)
BETA = RNG.normal(0, 0.3, C).astype(np.float32)


def _apply(model: Model) -> Model:
    work = copy_model(model)
    PassManager([FuseInstanceNorm(), FuseLayerNorm()])(work)
    return work


def _check_numerics(a: Model, b: Model) -> None:
    ins = {t.name: RNG.normal(0, 2, t.shape).astype(np.float32) for t in a.graph.inputs}
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    for k in ra:
        np.testing.assert_allclose(rb[k], ra[k], rtol=1e-5, atol=1e-5 * np.abs(ra[k]).max())


def net_003(mb: ModelBuilder, x: Tensor, act: str | None = "RELU") -> Tensor:
    """ONE's Net_InstanceNorm_003: Div(Sub(x, mean), Pow(var + eps, 0.5)) * gamma + beta."""
    mean = mb.mean(x, [1, 2], name="Mean_of_ifm")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="SquaredDifference")
    var = mb.mean(sqd, [1, 2], name="Mean_as_variance")
    add = mb.add(var, mb.const("eps", np.float32(1e-3)), name="Add_as_variance")
    pw = mb.binary("POW", add, mb.const("half", np.float32(0.5)), name="Pow")
    sub = mb.sub(x, mean, name="Sub")
    div = mb.div(sub, pw, name="Div")
    mul = mb.mul(div, mb.const("gamma", GAMMA), name="Mul_gamma")
    return mb.add(mul, mb.const("beta", BETA), activation=act, name="Add_as_terminal")


def tf_centred(mb: ModelBuilder, x: Tensor, axes: list[int] = [1, 2]) -> Tensor:  # noqa: B006
    """TensorFlow, centred: (x - mean) * rsqrt(var + eps) * gamma + beta."""
    mean = mb.mean(x, axes, name="mean")
    sub = mb.sub(x, mean, name="centred")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="sqd")
    var = mb.mean(sqd, axes, name="variance")
    add = mb.add(var, mb.const("eps", np.float32(1e-5)), name="add_eps")
    rs = mb.unary("RSQRT", add, name="rsqrt")
    n = mb.mul(sub, rs, name="normalised")
    s = mb.mul(n, mb.const("gamma", GAMMA), name="scale")
    return mb.add(s, mb.const("beta", BETA), name="shift")


def tf_folded(mb: ModelBuilder, x: Tensor, axes: list[int] = [1, 2]) -> Tensor:  # noqa: B006
    """TensorFlow, folded: x * m + (beta - mean * m) with m = rsqrt(var + eps) * gamma."""
    mean = mb.mean(x, axes, name="mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", mean, x, name="sqd")
    var = mb.mean(sqd, axes, name="variance")
    add = mb.add(mb.const("eps", np.float32(1e-5)), var, name="add_eps")
    rs = mb.unary("RSQRT", add, name="rsqrt")
    m = mb.mul(mb.const("gamma", GAMMA.reshape(1, 1, 1, C)), rs, name="m")
    xm = mb.mul(x, m, name="xm")
    mm = mb.mul(m, mean, name="mm")
    b = mb.sub(mb.const("beta", BETA), mm, name="b")
    return mb.add(xm, b, name="y")


def sqrt_variant(mb: ModelBuilder, x: Tensor) -> Tensor:
    mean = mb.mean(x, [1, 2], name="mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="sqd")
    var = mb.mean(sqd, [1, 2], name="variance")
    add = mb.add(var, mb.const("eps", np.float32(1e-5)), name="add_eps")
    sd = mb.unary("SQRT", add, name="std")
    sub = mb.sub(x, mean, name="centred")
    return mb.div(sub, sd, name="y")  # no gamma, no beta


def _model(build: Callable[[ModelBuilder, Tensor], Tensor], shape: tuple[int, ...] = (1, 5, 4, C)
           ) -> Model:
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    y = build(mb, x)
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("build", [net_003, tf_centred, tf_folded, sqrt_variant],
                         ids=["Net_InstanceNorm_003", "tf_centred", "tf_folded", "sqrt"])
def test_fused(build: Callable[[ModelBuilder, Tensor], Tensor]) -> None:
    model = _model(build)
    out = _apply(model)
    (op,) = out.graph.ops
    assert op.type == "INSTANCE_NORM"
    assert op.origins == set(range(len(model.graph)))
    assert op.name == model.graph.outputs[0].name
    assert op.inputs[0].name == "x"
    assert op.inputs[1].shape == (C,) and op.inputs[2].shape == (C,)
    log = out.graph.rewrites[-1]
    assert (log.relation, log.pass_name) == ("fuse", "fuse_instance_norm")
    assert set(log.sources) == {o.name for o in model.graph.ops}
    assert not out.graph.removed_origins
    _check_numerics(model, out)


def test_net_003_keeps_activation_and_epsilon() -> None:
    out = _apply(_model(net_003))
    (op,) = out.graph.ops
    assert op.activation == ACTIVATION_CODES["RELU"]
    assert op.options.epsilon == pytest.approx(1e-3)
    np.testing.assert_array_equal(op.inputs[1].data, GAMMA)
    np.testing.assert_array_equal(op.inputs[2].data, BETA)


def test_other_axes_left_alone() -> None:
    model = _model(lambda mb, x: tf_centred(mb, x, [1]))
    out = _apply(model)
    assert len(out.graph) == len(model.graph)


def test_intermediate_used_elsewhere_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 4, C])
    y = tf_centred(mb, x)
    var = mb.model.graph.tensor("variance")
    mb.output(y, var)
    model = mb.build()
    out = _apply(model)
    assert len(out.graph) == len(model.graph)
    _check_numerics(model, out)


def test_unsupported_op_in_pattern_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 4, C])
    mean = mb.mean(x, [1, 2], name="mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="sqd")
    var = mb.mean(sqd, [1, 2], name="variance")
    rs = mb.unary("EXP", var, name="not_rsqrt")
    y = mb.mul(mb.sub(x, mean, name="c"), rs, name="y")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert len(out.graph) == len(model.graph)
    _check_numerics(model, out)


def test_non_affine_region_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 4, C])
    mean = mb.mean(x, [1, 2], name="mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="sqd")
    var = mb.mean(sqd, [1, 2], name="variance")
    rs = mb.unary("RSQRT", var, name="rsqrt")
    c = mb.sub(x, mean, name="c")
    y = mb.mul(mb.mul(c, rs, name="n"), c, name="y")  # (x - m)^2 * inv: not a norm
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert len(out.graph) == len(model.graph)


def _dynamic(axis: int) -> Model:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 4, C])
    y = tf_centred(mb, x)
    mb.output(y)
    model = mb.build()
    for t in model.graph.tensors:
        if not t.is_const and len(t.shape) == 4:
            sig = list(t.shape)
            sig[axis] = -1
            t.shape_signature = tuple(sig)
    return model


def test_dynamic_reduced_axis_left_alone() -> None:
    model = _dynamic(1)  # H is reduced: its size may change the statistics' shapes
    out = _apply(model)
    assert len(out.graph) == len(model.graph)


def test_free_batch_fuses() -> None:
    model = _dynamic(0)  # instance norm is the same for any batch
    out = _apply(model)
    assert [op.type for op in out.graph.ops] == ["INSTANCE_NORM"]
    x = np.random.default_rng(0).standard_normal((3, 5, 4, C)).astype(np.float32)
    (want,) = Interpreter(model).invoke({"x": x}).values()
    (got,) = Interpreter(out).invoke({"x": x}).values()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def test_factor_not_per_channel_stays_outside() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 4, C])
    mean = mb.mean(x, [1, 2], name="mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="sqd")
    var = mb.mean(sqd, [1, 2], name="variance")
    rs = mb.unary("RSQRT", var, name="rsqrt")
    n = mb.mul(mb.sub(x, mean, name="c"), rs, name="n")
    y = mb.mul(n, mb.const("g", RNG.normal(size=(1, 5, 1, 1))), name="y")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    norm, mul = out.graph.ops
    assert (norm.type, mul.type) == ("INSTANCE_NORM", "MUL")
    assert mul.origins == {len(model.graph) - 1}
    np.testing.assert_array_equal(norm.inputs[1].data, np.ones(C, np.float32))
    _check_numerics(model, out)
