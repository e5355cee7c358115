"""fuse_activation: a producer absorbs the RELU/RELU6/RELU_N1_TO_1/TANH after it."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import FuseActivation
from toolkit.ir import Model, Quantization
from toolkit.schema import ACTIVATION_CODES


def _apply(model: Model) -> Model:
    work = copy_model(model)
    PassManager([FuseActivation()])(work)
    return work


def _same_outputs(a: Model, b: Model, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    ins = {t.name: rng.uniform(-3, 3, t.shape).astype(np.float32) for t in a.graph.inputs}
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    for (ka, va), (kb, vb) in zip(ra.items(), rb.items()):
        assert ka == kb
        np.testing.assert_allclose(vb, va, rtol=1e-6, atol=1e-6)


def _conv_act(act: str) -> Model:
    rng = np.random.default_rng(1)
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 3])
    y = mb.conv2d(x, mb.const("w", rng.normal(size=(4, 3, 3, 3))), mb.const("b", np.ones(4)),
                  name="conv")
    y = mb.unary(act, y, name="act")
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1", "TANH"])
def test_conv_absorbs_activation(act: str) -> None:
    model = _conv_act(act)
    out = _apply(model)
    ops = out.graph.ops
    assert [o.type for o in ops] == ["CONV_2D"]
    assert ops[0].activation == ACTIVATION_CODES[act]
    assert ops[0].origins == {0, 1}
    assert ops[0].name == "act"  # the graph output keeps its name
    assert not out.graph.removed_origins
    log = out.graph.rewrites[-1]
    assert (log.relation, log.pass_name, log.result_origins) == ("absorb", "fuse_activation",
                                                                 frozenset({0, 1}))
    assert [o.type for o in model.graph.ops] == ["CONV_2D", act]  # source untouched
    _same_outputs(model, out)


@pytest.mark.parametrize("producer", ["ADD", "SUB", "MUL", "DIV"])
def test_elementwise_producers(producer: str) -> None:
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 2])
    b = mb.input("b", [1, 4, 4, 2])
    y = mb.binary(producer, a, b, name="bin")
    y = mb.unary("RELU6", y, name="relu6")
    z = mb.add(y, a, name="after")
    mb.output(z)
    model = mb.build()
    out = _apply(model)
    types = [o.type for o in out.graph.ops]
    assert types == [producer, "ADD"]
    first = out.graph.ops[0]
    assert first.origins == {0, 1} and first.activation == ACTIVATION_CODES["RELU6"]
    assert out.graph.ops[1].origins == {2}
    _same_outputs(model, out)


def test_left_alone_when_output_is_shared() -> None:
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 2])
    y = mb.add(a, a, name="add")
    r = mb.unary("RELU", y, name="relu")
    mb.output(r, y)
    model = mb.build()
    out = _apply(model)
    assert [o.type for o in out.graph.ops] == ["ADD", "RELU"]
    assert not out.graph.rewrites


def test_left_alone_when_producer_has_activation_or_no_options() -> None:
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 2])
    y = mb.add(a, a, activation="RELU", name="add")
    y = mb.unary("RELU6", y, name="relu6")
    y = mb.op("TRANSPOSE", [y, mb.const("p", np.array([0, 2, 1, 3], np.int32))],
              [1, 4, 4, 2], name="t")
    y = mb.unary("RELU", y, name="relu")
    mb.output(y)
    out = _apply(mb.build())
    assert [o.type for o in out.graph.ops] == ["ADD", "RELU6", "TRANSPOSE", "RELU"]


def _int8(scale_out: float, act: str = "RELU") -> Model:
    q_in = Quantization.make(0.05, 0)
    q_out = Quantization.make(scale_out, -128)
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 2], np.int8, quant=q_in)
    y = mb.add(a, a, name="add", quant=q_out)
    r = mb.op(act, [y], y.shape, name="act", quant=Quantization.make(0.05, -128))
    mb.output(r)
    return mb.build()


def test_int8_fused_only_with_equal_quantization() -> None:
    same = _apply(_int8(0.05))
    assert [o.type for o in same.graph.ops] == ["ADD"]
    diff = _apply(_int8(0.1))
    assert [o.type for o in diff.graph.ops] == ["ADD", "RELU"]
    tanh = _apply(_int8(0.05, "TANH"))
    assert [o.type for o in tanh.graph.ops] == ["ADD", "TANH"]


def test_int8_fusion_keeps_outputs() -> None:
    model = _int8(0.05)
    out = _apply(model)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 4, 4, 2)).astype(np.int8)
    np.testing.assert_array_equal(run(out, {"a": x}).outputs["act"],
                                  run(model, {"a": x}).outputs["act"])


def test_unknown_activation_rejected() -> None:
    with pytest.raises(ValueError):
        FuseActivation(["GELU"])
