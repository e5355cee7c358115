"""strength_reduce: POW/DIV replaced by cheaper ops; origins copied (relation: replace)."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.compiler.passes import StrengthReduce


def _model(op: str, c: float, dtype=np.float32) -> tk.Model:
    mb = ModelBuilder()
    x = mb.input("x", [1, 3, 5])
    y = mb.binary(op, x, mb.const("c", np.asarray(c, dtype=dtype)), name="y")
    mb.output(mb.unary("RELU", y, name="out"))
    return mb.build()


@pytest.mark.parametrize("op, c, new", [("POW", 0.5, "SQRT"), ("POW", -0.5, "RSQRT"),
                                         ("POW", 2.0, "MUL"), ("DIV", 8.0, "MUL"),
                                         ("DIV", 0.25, "MUL")])
def test_replaces_and_copies_origins(op, c, new) -> None:
    m = _model(op, c)
    x = {"x": np.random.default_rng(0).uniform(0.1, 2, (1, 3, 5)).astype(np.float32)}
    before = tk.run(m, x).outputs["out"]
    old = m.graph.op("y")
    res = StrengthReduce()(m)
    assert res.modified
    g = m.graph
    y = g.op("y")
    assert y.kind == new and y is not old
    assert y.origins == old.origins == {0}
    assert [r.relation for r in g.rewrites] == ["replace"]
    m.verify()
    after = tk.run(m, x).outputs["out"]
    np.testing.assert_allclose(after, before, rtol=1e-6)
    if op == "DIV":
        np.testing.assert_array_equal(after, before)  # exact for powers of two


@pytest.mark.parametrize("op, c", [("POW", 3.0), ("DIV", 3.0), ("DIV", 0.0)])
def test_leaves_other_constants_alone(op, c) -> None:
    m = _model(op, c)
    assert not StrengthReduce()(m).modified
    assert m.graph.op("y").kind == op


def test_instance_norm_pattern_is_fused_first(samples_dir) -> None:
    c = tk.compile(tk.load(samples_dir / "Net_InstanceNorm_003.circle"))
    assert [o.kind for o in c.model.graph.ops] == ["INSTANCE_NORM"]
