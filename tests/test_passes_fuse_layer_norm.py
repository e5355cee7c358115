"""fuse_layer_norm: a layer norm over the last axis becomes one CUSTOM LAYER_NORM op."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import FuseInstanceNorm, FuseLayerNorm
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import write_model
from toolkit.ir import Model, Tensor

D = 16
RNG = np.random.default_rng(9)
GAMMA = RNG.uniform(0.5, 1.5, D).astype(np.float32)
BETA = RNG.normal(0, 0.3, D).astype(np.float32)


def _apply(model: Model) -> Model:
    work = copy_model(model)
    PassManager([FuseInstanceNorm(), FuseLayerNorm()])(work)
    return work


def _check_numerics(a: Model, b: Model) -> None:
    ins = {t.name: RNG.normal(0, 2, t.shape).astype(np.float32) for t in a.graph.inputs}
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    for k in ra:
        np.testing.assert_allclose(rb[k], ra[k], rtol=1e-5, atol=1e-5 * np.abs(ra[k]).max())


def _stats(mb: ModelBuilder, x: Tensor, eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    mean = mb.mean(x, [-1], name="ln/moments/mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="ln/moments/SquaredDifference")
    var = mb.mean(sqd, [-1], name="ln/moments/variance")
    ve = mb.add(var, mb.const("ln/eps", np.float32(eps)), name="ln/add")
    return mean, mb.unary("RSQRT", ve, name="ln/Rsqrt")


def converter_form(mb: ModelBuilder, x: Tensor) -> Tensor:
    """Mean, SquaredDifference, Mean, Add, Rsqrt, Mul, Mul, Mul, Sub, Add."""
    mean, rs = _stats(mb, x)
    m = mb.mul(rs, mb.const("ln/gamma", GAMMA), name="ln/mul")
    xm = mb.mul(x, m, name="ln/mul_1")
    mm = mb.mul(mean, m, name="ln/mul_2")
    b = mb.sub(mb.const("ln/beta", BETA), mm, name="ln/sub")
    return mb.add(xm, b, name="ln/add_1")


def no_gamma_form(mb: ModelBuilder, x: Tensor) -> Tensor:
    """Mean, SquaredDifference, Mean, Add, Rsqrt, Mul, Mul, Sub, Add."""
    mean, rs = _stats(mb, x)
    xr = mb.mul(x, rs, name="ln/mul")
    mr = mb.mul(mean, rs, name="ln/mul_1")
    d = mb.sub(xr, mr, name="ln/sub")
    return mb.add(d, mb.const("ln/beta", BETA), name="ln/add_1")


def keras_neg_form(mb: ModelBuilder, x: Tensor) -> Tensor:
    """As LiteRT's converter writes Keras LayerNormalization (with NEG)."""
    mean, rs = _stats(mb, x)
    neg = mb.unary("NEG", mean, name="ln/Neg")
    m = mb.mul(rs, mb.const("ln/gamma", GAMMA.reshape(1, D)), name="ln/mul")
    nm = mb.mul(neg, m, name="ln/mul_1")
    b = mb.add(nm, mb.const("ln/beta", BETA.reshape(1, D)), name="ln/add_1")
    xm = mb.mul(x, m, name="ln/mul_2")
    return mb.add(xm, b, name="ln/add_2")


def _model(build: Callable[[ModelBuilder, Tensor], Tensor], shape: tuple[int, ...] = (1, 7, D),
           residual: bool = True) -> Model:
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    y = build(mb, x)
    if residual:
        y = mb.add(x, y, name="residual")
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("build", [converter_form, no_gamma_form, keras_neg_form],
                         ids=["converter", "no_gamma", "keras_neg"])
@pytest.mark.parametrize("shape", [(1, 7, D), (2, D), (1, 3, 2, D)])
def test_fused(build: Callable[[ModelBuilder, Tensor], Tensor], shape: tuple[int, ...]) -> None:
    model = _model(build, shape)
    out = _apply(model)
    ln, res = out.graph.ops
    assert (ln.type, ln.custom_code, res.type) == ("CUSTOM", "LAYER_NORM", "ADD")
    assert ln.origins == set(range(len(model.graph) - 1))
    assert res.origins == {len(model.graph) - 1}
    assert [t.shape for t in ln.inputs] == [shape, (D,), (D,)]
    assert struct.unpack("<f", ln.custom_options) == (np.float32(1e-5),)
    assert len(ln.custom_options) == 4
    log = out.graph.rewrites[-1]
    assert (log.relation, log.pass_name, log.result_type) == ("fuse", "fuse_layer_norm",
                                                              "LAYER_NORM")
    _check_numerics(model, out)


def test_gamma_and_beta_values() -> None:
    out = _apply(_model(converter_form))
    ln = out.graph.ops[0]
    np.testing.assert_array_equal(ln.inputs[1].data, GAMMA)
    np.testing.assert_array_equal(ln.inputs[2].data, BETA)
    out = _apply(_model(no_gamma_form))
    np.testing.assert_array_equal(out.graph.ops[0].inputs[1].data, np.ones(D, np.float32))


def test_round_trips_through_circle() -> None:
    out = _apply(_model(converter_form))
    back = load(bytes(write_model(out, "circle")))
    ln = back.graph.ops[0]
    assert (ln.type, ln.custom_code, len(ln.custom_options)) == ("CUSTOM", "LAYER_NORM", 4)
    assert ln.origins == out.graph.ops[0].origins
    _check_numerics(out, back)


def test_fused_activation_on_last_add_left_alone() -> None:
    def act_form(mb: ModelBuilder, x: Tensor) -> Tensor:
        mean, rs = _stats(mb, x)
        d = mb.sub(mb.mul(x, rs, name="a"), mb.mul(mean, rs, name="b"), name="c")
        return mb.add(d, mb.const("beta", BETA), activation="RELU", name="y")

    model = _model(act_form, residual=False)
    out = _apply(model)
    assert len(out.graph) == len(model.graph)


def test_overshoot_region_is_trimmed() -> None:
    """A scale after the norm whose input is also read elsewhere: the norm stops before it."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, D])
    y = converter_form(mb, x)
    z = mb.mul(y, mb.const("s", np.float32(2.0)), name="scaled")
    mb.output(z, y)
    model = mb.build()
    out = _apply(model)
    assert [o.kind for o in out.graph.ops] == ["LAYER_NORM", "MUL"]
    _check_numerics(model, out)


def test_scale_after_norm_is_absorbed_when_private() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, D])
    y = no_gamma_form(mb, x)
    z = mb.mul(y, mb.const("s", np.float32(2.0)), name="scaled")
    mb.output(z)
    model = mb.build()
    out = _apply(model)
    (ln,) = out.graph.ops
    np.testing.assert_allclose(ln.inputs[1].data, np.full(D, 2.0))
    np.testing.assert_allclose(ln.inputs[2].data, 2.0 * BETA, rtol=1e-6)
    _check_numerics(model, out)
