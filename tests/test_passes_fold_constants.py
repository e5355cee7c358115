"""fold_constants: ops on constants become constants; their origins are recorded removed."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import FoldConstants
from toolkit.ir import Model, Quantization

RNG = np.random.default_rng(4)


def _apply(model: Model, **kw: int) -> Model:
    work = copy_model(model)
    PassManager([FoldConstants(**kw)])(work)
    return work


def _same(a: Model, b: Model) -> None:
    ins = {t.name: RNG.normal(size=t.shape).astype(np.float32) for t in a.graph.inputs}
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    for k in ra:
        np.testing.assert_array_equal(rb[k], ra[k])


def test_chain_of_constant_ops_folds() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 3, 4])
    c = mb.const("c", RNG.normal(size=(4, 3)))
    c = mb.transpose(c, [1, 0], name="ct")
    c = mb.reshape(c, [1, 3, 4], name="cr")
    c = mb.mul(c, mb.const("two", np.float32(2.0)), activation="RELU", name="cm")
    c = mb.unary("RSQRT", mb.add(c, mb.const("one", np.float32(1.0)), name="ca"), name="rs")
    y = mb.add(x, c, name="y")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    (op,) = out.graph.ops
    assert op.name == "y" and op.origins == {5}
    assert out.graph.removed_origins == {i: "constant folded" for i in range(5)}
    assert op.inputs[1].is_const
    _same(model, out)


def test_int_shape_arithmetic_folds() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [2, 6])
    s = mb.mul(mb.const("a", np.array([1, 3], np.int32)), mb.const("b", np.array([3, 4],
                                                                             np.int32)), name="s")
    y = mb.op("RESHAPE", [x, s], [3, 4], name="y")
    mb.output(y)
    out = _apply(mb.build())
    (op,) = out.graph.ops
    np.testing.assert_array_equal(op.inputs[1].data, [3, 12])


def test_pow_and_quantized_are_left_alone() -> None:
    q = Quantization.make(0.1, 0)
    mb = ModelBuilder()
    x = mb.input("x", [2])
    p = mb.binary("POW", mb.const("a", np.float32([2, 3])), mb.const("b", np.float32([2, 2])),
                  name="pow")
    qa = mb.add(mb.const("qa", np.int8([1, 2]), quant=q), mb.const("qb", np.int8([1, 2]),
                                                                     quant=q), name="qadd")
    deq = mb.op("DEQUANTIZE", [qa], [2], name="deq", dtype=np.float32)
    y = mb.add(mb.add(x, p, name="y1"), deq, name="y")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert len(out.graph) == len(model.graph)


def test_fp16_weights_dequantize_folds() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    w16 = mb.const("w16", RNG.normal(size=(3, 4)).astype(np.float16))
    w = mb.op("DEQUANTIZE", [w16], [3, 4], name="w", dtype=np.float32)
    y = mb.fully_connected(x, w, None, name="fc")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    (fc,) = out.graph.ops
    assert fc.inputs[1].is_const and fc.inputs[1].dtype == np.float32
    _same(model, out)


def test_graph_output_not_folded() -> None:
    mb = ModelBuilder()
    mb.input("x", [1])
    c = mb.add(mb.const("a", np.float32([1])), mb.const("b", np.float32([2])), name="c")
    mb.output(c)
    out = _apply(mb.build())
    assert len(out.graph) == 1


@pytest.mark.parametrize("limit,folded", [(0, False), (1 << 20, True)])
def test_size_limit(limit: int, folded: bool) -> None:
    """A broadcast that grows 512 bytes of constants into 16 KiB folds only under the limit."""
    mb = ModelBuilder()
    x = mb.input("x", [64, 64])
    big = mb.add(mb.const("a", np.ones((64, 1))), mb.const("b", np.ones((1, 64))), name="big")
    mb.output(mb.add(x, big, name="y"))
    out = _apply(mb.build(), max_bytes=limit)
    assert (len(out.graph) == 1) is folded
