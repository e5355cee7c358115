"""remove_noop_reshape, cancel_transposes, cancel_quantize_pairs: no-ops disappear, their
origins are recorded as removed."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import CancelQuantizePairs, CancelTransposes, RemoveNoopReshape
from toolkit.ir import Model, Quantization

RNG = np.random.default_rng(2)
PASSES = [RemoveNoopReshape(), CancelTransposes(), CancelQuantizePairs()]


def _apply(model: Model) -> Model:
    work = copy_model(model)
    PassManager(PASSES)(work)
    return work


def _same(a: Model, b: Model) -> None:
    ins = {}
    for t in a.graph.inputs:
        if t.dtype == np.float32:
            ins[t.name] = RNG.normal(size=t.shape).astype(np.float32)
        else:
            ins[t.name] = RNG.integers(-128, 128, t.shape).astype(t.dtype)
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    assert list(ra) == list(rb)
    for k in ra:
        np.testing.assert_array_equal(rb[k], ra[k])


def test_noop_reshape_removed() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    y = mb.unary("RELU", x, name="relu")
    y = mb.reshape(y, [1, 4, 4, 2], name="same")
    y = mb.reshape(y, [1, 32], name="flatten")
    y = mb.unary("TANH", y, name="tanh")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert [o.name for o in out.graph.ops] == ["relu", "flatten", "tanh"]
    assert out.graph.removed_origins == {1: "no-op reshape"}
    assert {r.relation for r in out.graph.rewrites} == {"remove"}
    _same(model, out)


def test_noop_reshape_to_graph_output_keeps_name() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.unary("RELU", x, name="relu")
    y = mb.reshape(y, [1, 4], name="out")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    (op,) = out.graph.ops
    assert op.type == "RELU" and op.name == "out" and out.graph.outputs[0].name == "out"
    _same(model, out)


def test_reshape_from_input_to_output_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    mb.output(mb.reshape(x, [1, 4], name="out"))
    out = _apply(mb.build())
    assert len(out.graph) == 1 and not out.graph.removed_origins


def test_dynamic_reshape_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.unary("RELU", x, name="relu")
    y.shape_signature = (-1, 4)
    z = mb.reshape(y, [1, 4], name="r")
    z.shape_signature = (-1, 4)
    mb.output(mb.unary("TANH", z, name="t"))
    out = _apply(mb.build())
    assert len(out.graph) == 3


@pytest.mark.parametrize("perms,cancel", [
    (([0, 2, 1, 3], [0, 2, 1, 3]), True),
    (([0, 3, 1, 2], [0, 2, 3, 1]), True),
    (([0, 3, 1, 2], [0, 3, 1, 2]), False),
])
def test_transpose_pairs(perms: tuple[list[int], list[int]], cancel: bool) -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 2, 3, 4])
    y = mb.unary("RELU", x, name="relu")
    y = mb.transpose(y, perms[0], name="t1")
    y = mb.transpose(y, perms[1], name="t2")
    mb.output(mb.unary("TANH", y, name="tanh"))
    model = mb.build()
    out = _apply(model)
    if cancel:
        assert [o.name for o in out.graph.ops] == ["relu", "tanh"]
        assert out.graph.removed_origins == {1: "transposes cancel", 2: "transposes cancel"}
    else:
        assert len(out.graph) == 4
    _same(model, out)


def test_transpose_pair_with_shared_first() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 2, 3, 4])
    t1 = mb.transpose(x, [0, 2, 1, 3], name="t1")
    t2 = mb.transpose(t1, [0, 2, 1, 3], name="t2")
    a = mb.unary("RELU", t2, name="relu")
    b = mb.unary("TANH", t1, name="tanh")
    mb.output(a, b)
    model = mb.build()
    out = _apply(model)
    assert [o.name for o in out.graph.ops] == ["t1", "relu", "tanh"]
    assert out.graph.ops[1].inputs[0].name == "x"
    assert out.graph.removed_origins == {1: "transposes cancel"}
    _same(model, out)


def test_identity_transpose() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 2, 3])
    y = mb.unary("RELU", x, name="relu")
    y = mb.transpose(y, [0, 1, 2], name="id")
    mb.output(mb.unary("TANH", y, name="tanh"))
    model = mb.build()
    out = _apply(model)
    assert out.graph.removed_origins == {1: "identity transpose"}
    _same(model, out)


Q = Quantization.make(0.02, 3)


def _dq_q(q_after: Quantization) -> Model:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4], np.int8, quant=Q)
    y = mb.op("RELU", [x], x.shape, name="relu", quant=Q)
    f = mb.op("DEQUANTIZE", [y], y.shape, name="dq", dtype=np.float32)
    z = mb.op("QUANTIZE", [f], y.shape, name="q", dtype=np.int8, quant=q_after)
    mb.output(mb.op("RELU", [z], z.shape, name="relu2", quant=q_after))
    return mb.build()


def test_dequantize_quantize_pair_removed() -> None:
    model = _dq_q(Q)
    out = _apply(model)
    assert [o.name for o in out.graph.ops] == ["relu", "relu2"]
    assert out.graph.removed_origins == {1: "quantize pair cancels", 2: "quantize pair cancels"}
    _same(model, out)


def test_requantize_to_other_scale_left_alone() -> None:
    out = _apply(_dq_q(Quantization.make(0.04, 3)))
    assert len(out.graph) == 4


def test_identity_requantize_removed() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4], np.int8, quant=Q)
    y = mb.op("RELU", [x], x.shape, name="relu", quant=Q)
    z = mb.op("QUANTIZE", [y], y.shape, name="q", dtype=np.int8, quant=Quantization.make(0.02, 3))
    mb.output(mb.op("RELU", [z], z.shape, name="relu2", quant=Q))
    model = mb.build()
    out = _apply(model)
    assert out.graph.removed_origins == {1: "identity requantize"}
    _same(model, out)


def test_quantize_dequantize_left_alone() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    q = mb.op("QUANTIZE", [x], x.shape, name="q", dtype=np.int8, quant=Q)
    mb.output(mb.op("DEQUANTIZE", [q], x.shape, name="dq", dtype=np.float32))
    out = _apply(mb.build())
    assert len(out.graph) == 2
