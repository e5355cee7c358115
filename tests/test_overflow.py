"""Element counts and byte sizes past int64 (possible once limits are raised for trusted
files) are computed exactly with Python ints, never wrapped around."""

from __future__ import annotations

import numpy as np

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.limits import limits


def _model(shape: tuple[int, ...]) -> tk.Model:
    mb = ModelBuilder()
    y = mb.input("x", (1, 8, 1, 1))
    y = mb.op("RELU", [y], (1, 8, 1, 1), name="y")
    mb.output(y)
    model = mb.build()
    for t in model.graph.tensors:
        t.shape = shape
    return model


def test_tensor_sizes_past_int64_are_exact() -> None:
    shape = (1 << 31, 1 << 31, 4)  # 2**64 elements: wraps to 0 in int64
    model = _model(shape)
    t = model.graph.tensors[0]
    assert t.size == 1 << 64
    assert t.nbytes == 4 << 64
    table = model.tensors_table()
    assert table["bytes"].tolist() == [4 << 64] * len(table)
    small = _model((1, 8, 1, 1)).tensors_table()
    assert small["bytes"].dtype == np.int64  # int64 whenever the values fit


def test_commands_past_int64_are_exact() -> None:
    rows = 1 << 20
    model = _model((1, rows, 1 << 22, 1 << 22))  # 2**64 elements per tensor
    with limits(max_tensor_elements=1 << 70, max_stripes_per_op=1 << 21):
        compiled = tk.compile(model, passes=[], target={"buffer_bytes": 1 << 62})
    commands = compiled.commands()
    assert len(commands) >= 1
    assert int(commands["bytes"].sum()) == 2 * 4 * (1 << 64)  # read and written, exactly
    assert all(int(b) > 0 for b in commands["bytes"])
