"""Lowering: targets, stripes of output rows, the cost model and the command queue."""

from __future__ import annotations

import math

import numpy as np
import pytest

from toolkit import run
from toolkit.builder import ModelBuilder
from toolkit.compiler import Target, compile_model
from toolkit.compiler.lowering import Command, can_stripe, estimate_cycles, lower, stripe_rows
from toolkit.costs import op_const_bytes, op_input_bytes, op_macs, op_output_bytes
from toolkit.errors import ToolkitError
from toolkit.ir import Model
from toolkit.provenance import COMMAND_COLUMNS

RNG = np.random.default_rng(8)


@pytest.mark.parametrize("field,value", [
    ("buffer_bytes", 0), ("buffer_bytes", -5), ("buffer_bytes", 1.5), ("buffer_bytes", True),
    ("macs_per_cycle", 0), ("bytes_per_cycle", "16"), ("clock_hz", 0), ("clock_hz", float("inf")),
    ("command_bytes", 6), ("name", ""), ("name", None),
])
def test_invalid_target_is_a_toolkit_error(field: str, value: object) -> None:
    with pytest.raises(ToolkitError, match=field):
        Target(**{field: value})
    with pytest.raises(ToolkitError):
        compile_model(_conv_model(), target={field: value})


def test_target_from_dict() -> None:
    t = Target.from_dict({"name": "u55", "buffer_bytes": 1024})
    assert (t.name, t.buffer_bytes, t.macs_per_cycle) == ("u55", 1024, 256)
    with pytest.raises(ToolkitError, match="unknown target field"):
        Target.from_dict({"sram": 1})
    assert t.cycles_to_us(500) == pytest.approx(1.0)


def _conv_model(h: int = 16, padding: str = "SAME") -> Model:
    mb = ModelBuilder()
    x = mb.input("x", [1, h, 12, 4])
    y = mb.conv2d(x, mb.const("w", RNG.normal(size=(8, 3, 3, 4))), mb.const("b", np.ones(8)),
                  stride=1, padding=padding, activation="RELU", name="conv")
    y = mb.depthwise_conv2d(y, mb.const("dw", RNG.normal(size=(1, 3, 3, 8))), None, stride=2,
                            name="dw")
    y = mb.add(y, mb.const("bias_map", RNG.normal(size=(1, 1, 1, 8))), name="add")
    y = mb.pool("MAX_POOL_2D", y, 2, 1, padding="SAME", name="maxpool")
    y = mb.pool("AVERAGE_POOL_2D", y, 2, 2, padding="VALID", name="avgpool")
    y = mb.reshape(y, [1, -1], name="flat")
    y = mb.softmax(y, name="softmax")
    mb.output(y)
    return mb.build()


def test_single_commands_without_pressure() -> None:
    c = compile_model(_conv_model(), passes=[])
    cmds = c.commands()
    assert list(cmds.columns) == COMMAND_COLUMNS
    assert all(str(d) == "int64" for d in cmds.dtypes)
    assert (cmds["stripes"] == 1).all()
    assert cmds["command_id"].tolist() == list(range(len(c.model.graph)))
    assert cmds["queue_offset"].tolist() == [16 * i for i in range(len(cmds))]
    for cmd, op in zip(c.command_list, c.model.graph.ops):
        assert isinstance(cmd, Command) and cmd.op is op
        assert cmd.macs == op_macs(op)
        assert cmd.bytes == op_output_bytes(op) + op_input_bytes(op) + op_const_bytes(op)
        assert cmd.est_cycles == max(math.ceil(cmd.macs / 256), math.ceil(cmd.bytes / 16))


def test_stripes_cover_rows_and_sum_costs() -> None:
    model = _conv_model(h=16)
    target = Target(buffer_bytes=600, macs_per_cycle=64, bytes_per_cycle=8, command_bytes=8)
    c = compile_model(model, passes=[], target=target)
    cmds = c.commands()
    by_op = cmds.groupby("optimised_id")
    for oid, op in enumerate(c.model.graph.ops):
        g = by_op.get_group(oid)
        n = len(g)
        assert (g["stripes"] == n).all() and g["stripe"].tolist() == list(range(n))
        rows = op.outputs[0].shape[1] if len(op.outputs[0].shape) >= 2 else 1
        assert g["row_start"].iloc[0] == 0 and g["row_end"].iloc[-1] == rows
        assert (g["row_start"].iloc[1:].to_numpy() == g["row_end"].iloc[:-1].to_numpy()).all()
        assert g["macs"].sum() == op_macs(op)
        big = op_output_bytes(op) > 600
        stripable = op.type != "SOFTMAX" and op.type != "RESHAPE"
        assert (n > 1) == (big and stripable and rows > 1), op.name
        if n > 1:
            per = math.ceil(rows / n)
            assert (g["row_end"] - g["row_start"]).max() == per
            assert (g["row_end"] - g["row_start"]).max() * op_output_bytes(op) // rows <= 600 \
                or per == 1
    assert cmds["queue_offset"].tolist() == [8 * i for i in range(len(cmds))]
    for row in cmds.itertuples():
        assert row.est_cycles == estimate_cycles(row.macs, row.bytes, target)
    assert (cmds.groupby("optimised_id").size() > 1).sum() >= 3


def test_striped_execution_equals_whole() -> None:
    model = _conv_model(h=17)
    whole = compile_model(model, passes=[])
    striped = compile_model(model, passes=[], target=Target(buffer_bytes=256))
    assert len(striped.command_list) > len(whole.command_list)
    x = {"x": RNG.normal(size=(1, 17, 12, 4)).astype(np.float32)}
    ref = run(model, x).outputs["softmax"]
    # stripes sum in another order (smaller windows), so float32 results may differ in the
    # last bits
    np.testing.assert_allclose(run(whole, x).outputs["softmax"], ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run(striped, x).outputs["softmax"], ref, rtol=1e-5, atol=1e-7)


def test_which_ops_can_stripe() -> None:
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 4])
    a = mb.pool("AVERAGE_POOL_2D", x, 3, 1, padding="SAME", name="avg_same")
    b = mb.add(a, mb.const("full", RNG.normal(size=(1, 8, 8, 4))), name="const_rows")
    c = mb.add(b, mb.input("other", [1, 8, 8, 4]), name="sliced")
    d = mb.mul(c, mb.const("row", RNG.normal(size=(8, 1, 4))), name="const_rows2")
    e = mb.mean(d, [3], name="mean")
    f = mb.unary("RELU", e, name="relu")
    mb.output(f)
    ops = {o.name: o for o in mb.build().graph.ops}
    assert not can_stripe(ops["avg_same"])
    assert not can_stripe(ops["const_rows"])
    assert can_stripe(ops["sliced"])
    assert not can_stripe(ops["const_rows2"])
    assert not can_stripe(ops["mean"])
    assert can_stripe(ops["relu"])
    t = Target(buffer_bytes=64)
    assert stripe_rows(ops["mean"], t) == [(0, 8)]
    assert len(stripe_rows(ops["sliced"], t)) == 8


def test_lower_directly() -> None:
    model = _conv_model()
    cmds = lower(model.graph.ops, Target(buffer_bytes=10**9))
    assert [c.optimised_id for c in cmds] == list(range(len(model.graph)))
    assert all(c.axis == 1 and c.stripes == 1 for c in cmds)
