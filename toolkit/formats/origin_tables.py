"""ONE's origin metadata: ``ONE_source_table`` and ``ONE_op_table`` (luci-profile layout).

Both are little-endian uint32 streams::

    source table: [n] ([id][length][name bytes incl. NUL]) * n
    op table:     [n] ([op id][k][origin id] * k) * n

A name's ``length`` counts its terminating NUL. The decoder rejects duplicate ids, sizes that
do not add up and names without their NUL.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import numpy as np

from toolkit.errors import ModelFormatError

SOURCE_TABLE = "ONE_source_table"
OP_TABLE = "ONE_op_table"

__all__ = ["SOURCE_TABLE", "OP_TABLE", "encode_source_table", "decode_source_table",
           "encode_op_table", "decode_op_table"]


# The fix for origin metadata that does not decode: its writers (`toolkit compile`, ONE's
# one-import/one-optimize) write consistent tables, so such a table was damaged afterwards
_REWRITE = ("the model's origin metadata is damaged: compile the source model again "
            "(`toolkit compile`, or ONE's one-optimize) to rewrite ONE_source_table / "
            "ONE_op_table")


def encode_source_table(table: Mapping[int, str]) -> bytes:
    """Return the bytes of a source table for ``{origin id: name}``, ids in ascending order."""
    parts = [struct.pack("<I", len(table))]
    for oid in sorted(table):
        name = table[oid].encode("utf-8") + b"\0"
        parts.append(struct.pack("<II", oid, len(name)))
        parts.append(name)
    return b"".join(parts)


def _u32(data: bytes, pos: int, what: str, where: str) -> int:
    if pos + 4 > len(data):
        raise ModelFormatError(f"{what} is truncated at byte {pos} (size {len(data)})",
                               where=where, fix="the metadata entry is corrupt; drop it")
    return struct.unpack_from("<I", data, pos)[0]


def decode_source_table(data: bytes, where: str = SOURCE_TABLE) -> dict[int, str]:
    """Return ``{origin id: name}`` decoded from source-table bytes (ModelFormatError if bad)."""
    data = bytes(data)
    n = _u32(data, 0, "entry count", where)
    pos = 4
    out: dict[int, str] = {}
    for i in range(n):
        oid = _u32(data, pos, f"entry {i} id", where)
        length = _u32(data, pos + 4, f"entry {i} length", where)
        pos += 8
        if length == 0 or pos + length > len(data):
            raise ModelFormatError(f"entry {i} (id {oid}) claims {length} name bytes but "
                                   f"{len(data) - pos} remain", where=where,
                                   fix=_REWRITE)
        raw = data[pos:pos + length]
        if raw[-1:] != b"\0":
            raise ModelFormatError(f"entry {i} (id {oid}) name is not NUL-terminated",
                                   where=where,
                                   fix=_REWRITE)
        if oid in out:
            raise ModelFormatError(f"duplicate origin id {oid}", where=where, fix=_REWRITE)
        try:
            out[oid] = raw[:-1].decode("utf-8")
        except UnicodeDecodeError as e:
            raise ModelFormatError(f"entry {i} (id {oid}) name is not UTF-8: {e}",
                                   where=where,
                                   fix=_REWRITE) from None
        pos += length
    if pos != len(data):
        raise ModelFormatError(
            f"{len(data) - pos} trailing bytes after {n} entries", where=where,
            fix=_REWRITE,
        )
    return out


def encode_op_table(table: Mapping[int, Iterable[int]]) -> bytes:
    """Return the bytes of an op table for ``{op index: origin ids}`` (sorted ids)."""
    words: list[int] = [len(table)]
    for op_id in sorted(table):
        ids = sorted(set(table[op_id]))
        words.append(op_id)
        words.append(len(ids))
        words.extend(ids)
    return np.asarray(words, dtype="<u4").tobytes()


def decode_op_table(data: bytes, where: str = OP_TABLE) -> dict[int, frozenset[int]]:
    """Return ``{op index: frozenset(origin ids)}`` decoded from op-table bytes."""
    data = bytes(data)
    if len(data) % 4:
        raise ModelFormatError(
            f"size {len(data)} is not a multiple of 4", where=where,
            fix=_REWRITE,
        )
    words = np.frombuffer(data, dtype="<u4")
    if words.size == 0:
        raise ModelFormatError("empty op table", where=where, fix=_REWRITE)
    n = int(words[0])
    pos = 1
    out: dict[int, frozenset[int]] = {}
    for i in range(n):
        if pos + 2 > words.size:
            raise ModelFormatError(f"entry {i} is truncated", where=where, fix=_REWRITE)
        op_id, k = int(words[pos]), int(words[pos + 1])
        pos += 2
        if pos + k > words.size:
            raise ModelFormatError(f"entry {i} (op {op_id}) claims {k} origins but "
                                   f"{words.size - pos} words remain", where=where,
                                   fix=_REWRITE)
        if op_id in out:
            raise ModelFormatError(f"duplicate op id {op_id}", where=where, fix=_REWRITE)
        out[op_id] = frozenset(int(x) for x in words[pos:pos + k])
        pos += k
    if pos != words.size:
        raise ModelFormatError(f"{(words.size - pos) * 4} trailing bytes after {n} entries",
                               where=where,
                               fix=_REWRITE)
    return out
