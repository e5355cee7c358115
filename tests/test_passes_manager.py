"""The pass manager: fixed point, checks after every pass, PassError naming the pass."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from toolkit.builder import ModelBuilder
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.pass_manager import PassManager, model_origins
from toolkit.compiler.passes import (
    DEFAULT_PASSES,
    PASSES,
    FuseActivation,
    GraphPass,
    PassResult,
    RemoveNoopReshape,
)
from toolkit.errors import PassError
from toolkit.ir import Graph, Model


def _model() -> Model:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    y = mb.add(x, x, name="add")
    y = mb.reshape(y, [1, 4, 4, 2], name="r")
    y = mb.unary("RELU", y, name="relu")
    mb.output(y)
    return mb.build()


class _Counting(GraphPass):
    name = "counting"
    relation = "none"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, graph: Graph) -> bool:
        self.calls += 1
        return False


class _Raises(GraphPass):
    name = "raises"
    relation = "none"

    def run(self, graph: Graph) -> bool:
        raise ValueError("boom")


class _LosesOrigin(GraphPass):
    name = "loses_origin"
    relation = "remove"

    def run(self, graph: Graph) -> bool:
        op = graph.ops[-1]
        if len(op.origins) < 2:
            return False
        op.origins = frozenset({min(op.origins)})  # drops the others: a provenance bug
        return True


class _Dangles(GraphPass):
    name = "dangles"
    relation = "replace"

    def run(self, graph: Graph) -> bool:
        op = graph.ops[0]
        t = graph.add_tensor("nowhere", op.inputs[0].shape)
        graph.set_input(op, 0, t)
        return True


def test_registry_and_defaults() -> None:
    assert set(DEFAULT_PASSES) == set(PASSES)
    for name, cls in PASSES.items():
        assert cls.name == name
        assert cls.relation in {"absorb", "fuse", "replace", "remove"}
        module = sys.modules[cls.__module__]
        assert cls.__module__.rsplit(".", 1)[-1] == name  # one module per pass
        assert f"Origins: **{cls.relation}**" in (module.__doc__ or "")


def test_fixed_point_and_passes_before() -> None:
    model = copy_model(_model())
    counter = _Counting()
    pm = PassManager([RemoveNoopReshape(), FuseActivation(), counter])
    res = pm(model)
    assert isinstance(res, PassResult) and res.modified and res.model is model
    assert [o.type for o in model.graph.ops] == ["ADD"]
    # sweep 1: each modifying pass runs until it reports no change; sweep 2 changes nothing
    assert [(r.sweep, r.name, r.modified) for r in pm.runs] == [
        (0, "remove_noop_reshape", True), (0, "remove_noop_reshape", False),
        (0, "fuse_activation", True), (0, "fuse_activation", False), (0, "counting", False),
        (1, "remove_noop_reshape", False), (1, "fuse_activation", False),
        (1, "counting", False)]
    assert counter.calls == 2
    assert model.graph.current_pass == "user"


def test_error_names_failing_pass_and_those_before() -> None:
    model = copy_model(_model())
    with pytest.raises(PassError) as ei:
        PassManager([RemoveNoopReshape(), FuseActivation(), _Raises()])(model)
    e = ei.value
    assert e.pass_name == "raises"
    assert e.previous_passes == ["remove_noop_reshape", "remove_noop_reshape",
                                 "fuse_activation", "fuse_activation"]
    assert "'raises'" in str(e) and "ValueError: boom" in str(e)
    assert "remove_noop_reshape (x2), fuse_activation (x2)" in str(e)
    assert isinstance(e.__cause__, ValueError)


def test_origin_loss_is_a_pass_error() -> None:
    model = copy_model(_model())
    with pytest.raises(PassError, match=r"loses_origin.*origins lost"):
        PassManager([RemoveNoopReshape(), FuseActivation(), _LosesOrigin()])(model)


def test_broken_graph_is_a_pass_error() -> None:
    with pytest.raises(PassError, match=r"dangles.*no producer"):
        PassManager([_Dangles()])(copy_model(_model()))


def test_origins_conserved_by_default_passes() -> None:
    from toolkit.compiler.pipeline import resolve_passes

    model = _model()
    work = copy_model(model)
    PassManager(resolve_passes(None))(work)
    assert model_origins(work) == model_origins(model) == frozenset(range(3))
    assert work.graph.live_origins() == {0, 2}
    assert set(work.graph.removed_origins) == {1}


def test_copy_model_is_independent() -> None:
    model = _model()
    work = copy_model(model)
    assert [o.name for o in work.graph.ops] == [o.name for o in model.graph.ops]
    assert all(a is not b for a, b in zip(work.graph.ops, model.graph.ops))
    assert all(a.options is not b.options for a, b in zip(work.graph.ops, model.graph.ops)
               if a.options is not None)
    PassManager([RemoveNoopReshape(), FuseActivation()])(work)
    assert len(model.graph) == 3 and model.graph.ops[0].activation == 0
    assert not model.graph.rewrites
    np.testing.assert_array_equal(work.graph.ops[0].inputs[0].shape, (1, 4, 4, 2))
