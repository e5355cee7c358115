"""ONE origin tables: the byte examples of luci-profile are the tests."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.errors import ModelFormatError
from toolkit.formats.origin_tables import (
    decode_op_table,
    decode_source_table,
    encode_op_table,
    encode_source_table,
)

SOURCE_EXAMPLE = bytes([0x01, 0, 0, 0, 0x01, 0, 0, 0, 0x06, 0, 0, 0,
                        0x6E, 0x6F, 0x64, 0x65, 0x31, 0])
OP_EXAMPLE = bytes([0x01, 0, 0, 0, 0x05, 0, 0, 0, 0x02, 0, 0, 0, 0x01, 0, 0, 0, 0x02, 0, 0, 0])


def test_source_table_golden_bytes() -> None:
    assert encode_source_table({1: "node1"}) == SOURCE_EXAMPLE
    assert decode_source_table(SOURCE_EXAMPLE) == {1: "node1"}


def test_op_table_golden_bytes() -> None:
    assert encode_op_table({5: {1, 2}}) == OP_EXAMPLE
    assert decode_op_table(OP_EXAMPLE) == {5: frozenset({1, 2})}


@pytest.mark.parametrize("bad, msg", [
    (SOURCE_EXAMPLE[:-1] + b"x", "NUL"),
    (SOURCE_EXAMPLE + b"x", "trailing"),
    (SOURCE_EXAMPLE[:6], "truncated"),
    (bytes([2, 0, 0, 0]) + SOURCE_EXAMPLE[4:] + SOURCE_EXAMPLE[4:], "duplicate"),
])
def test_source_table_rejects(bad: bytes, msg: str) -> None:
    with pytest.raises(ModelFormatError, match=msg):
        decode_source_table(bad)


@pytest.mark.parametrize("bad, msg", [
    (OP_EXAMPLE[:-4], "claims 2 origins"),
    (OP_EXAMPLE + b"\0\0\0\0", "trailing"),
    (OP_EXAMPLE[:-1], "multiple of 4"),
    (bytes([2, 0, 0, 0]) + OP_EXAMPLE[4:] + OP_EXAMPLE[4:], "duplicate"),
])
def test_op_table_rejects(bad: bytes, msg: str) -> None:
    with pytest.raises(ModelFormatError, match=msg):
        decode_op_table(bad)


def _tiny() -> tk.Model:
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    a = mb.unary("RELU", x, name="a")
    b = mb.unary("TANH", a, name="b")
    mb.output(b)
    return mb.build()


def test_tables_written_and_origins_restored(tmp_path) -> None:
    m = _tiny()
    g = m.graph
    a, b = g.ops
    # fuse the two ops into one with origins {0, 1}
    g.fuse([a, b], "TANH", [g.inputs[0]], [b.outputs[0]])
    m.source_table[7] = "removed_thing"
    g.removed_origins[7] = "dead"
    tk.save(m, tmp_path / "m.circle")
    back = tk.load(tmp_path / "m.circle")
    assert back.had_origin_tables
    assert [op.origins for op in back.graph.ops] == [frozenset({0, 1})]
    assert back.source_table == {0: "a", 1: "b", 7: "removed_thing"}
    assert set(back.graph.removed_origins) == {7}
    # the bytes in the file are exactly what the encoder writes
    src = encode_source_table({0: "a", 1: "b", 7: "removed_thing"})
    opt = encode_op_table({0: {0, 1}})
    raw = (tmp_path / "m.circle").read_bytes()
    assert src in raw and opt in raw
    # and they read back byte-exact through a second save
    tk.save(back, tmp_path / "m2.circle")
    raw2 = (tmp_path / "m2.circle").read_bytes()
    assert src in raw2 and opt in raw2


def test_no_tables_gives_identity_origins(tmp_path) -> None:
    tk.save(_tiny(), tmp_path / "m.tflite")
    raw = (tmp_path / "m.tflite").read_bytes()
    assert b"ONE_op_table" not in raw
    back = tk.load(tmp_path / "m.tflite")
    assert not back.had_origin_tables
    assert [sorted(op.origins) for op in back.graph.ops] == [[0], [1]]
    assert back.source_table == {0: "a", 1: "b"}
    assert np.array_equal(back.origins_table()["origin_id"], [0, 1])
