"""eliminate_common_subexpressions (absorb) and eliminate_dead_code (remove)."""

from __future__ import annotations

import numpy as np

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import EliminateCommonSubexpressions, EliminateDeadCode
from toolkit.ir import Model

RNG = np.random.default_rng(6)


def _apply(model: Model) -> Model:
    work = copy_model(model)
    PassManager([EliminateCommonSubexpressions(), EliminateDeadCode()])(work)
    return work


def _same(a: Model, b: Model) -> None:
    ins = {t.name: RNG.normal(size=t.shape).astype(np.float32) for t in a.graph.inputs}
    ra, rb = run(a, ins).outputs, run(b, ins).outputs
    assert list(ra) == list(rb)
    for k in ra:
        np.testing.assert_array_equal(rb[k], ra[k])


def test_duplicates_merge_into_first() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    a = mb.mean(x, [1, 2], name="m1")
    b = mb.mean(x, [1, 2], name="m2")  # same op, its axes an equal constant
    ra = mb.unary("RELU", a, name="r1")
    rb = mb.unary("RELU", b, name="r2")  # becomes a duplicate once m2 is merged
    y = mb.add(ra, rb, name="y")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert [o.name for o in out.graph.ops] == ["m1", "r1", "y"]
    m1, r1, add = out.graph.ops
    assert m1.origins == {0, 1} and r1.origins == {2, 3}
    assert add.inputs[0] is add.inputs[1]
    assert {r.relation for r in out.graph.rewrites} == {"absorb"}
    assert not out.graph.removed_origins
    _same(model, out)


def test_different_options_or_constants_not_merged() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    a = mb.mean(x, [1, 2], name="m1")
    b = mb.mean(x, [1, 2], keep_dims=False, name="m2")
    c = mb.mean(x, [1], name="m3")
    d = mb.mul(x, mb.const("k1", np.float32([1, 2])), name="d1")
    e = mb.mul(x, mb.const("k2", np.float32([1, 3])), name="d2")
    mb.output(a, b, c, d, e)
    out = _apply(mb.build())
    assert len(out.graph) == 5


def test_duplicate_graph_outputs_kept() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [2])
    mb.output(mb.unary("RELU", x, name="a"), mb.unary("RELU", x, name="b"))
    model = mb.build()
    out = _apply(model)
    assert len(out.graph) == 2


def test_duplicate_feeding_output_is_renamed() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [2])
    a = mb.unary("RELU", x, name="a")
    b = mb.unary("RELU", x, name="b")
    mb.output(mb.add(a, a, name="s"), b)
    model = mb.build()
    out = _apply(model)
    assert [o.name for o in out.graph.ops] == ["b", "s"]
    assert [t.name for t in out.graph.outputs] == ["s", "b"]
    _same(model, out)


def test_dead_chain_removed() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.unary("RELU", x, name="live")
    d = mb.unary("TANH", x, name="dead1")
    d = mb.mul(d, d, name="dead2")
    mb.unary("EXP", d, name="dead3")
    mb.output(y)
    model = mb.build()
    out = _apply(model)
    assert [o.name for o in out.graph.ops] == ["live"]
    assert out.graph.removed_origins == {1: "dead code", 2: "dead code", 3: "dead code"}
    assert "dead2" not in {t.name for t in out.graph.tensors}
    _same(model, out)


def test_stateful_and_custom_ops_kept() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    mb.op("CUSTOM", [x], [1, 4], name="side_effect", custom_code="MyLogger")
    mb.op("CUSTOM", [x], [1, 4], name="same", custom_code="MyLogger")
    mb.output(mb.unary("RELU", x, name="y"))
    out = _apply(mb.build())
    assert len(out.graph) == 3
