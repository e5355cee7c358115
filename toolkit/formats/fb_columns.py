"""Column-wise FlatBuffer decoding with NumPy, for the large tables of a model.

A subgraph of 10,000 ops has tens of thousands of Tensor and Operator tables; reading them
one field at a time through the generated accessors costs ~1.5 µs per field in Python. This
module reads one *field of every table in a vector* at once: table positions, vtables, field
offsets and scalar values are gathered with NumPy fancy indexing, and variable-length vectors
(shapes, op inputs, names) are cut from one flat gather. Every position is bounds-checked, so
corrupt files raise instead of wrapping around.

Field slots follow the schema (slot *k* is vtable entry ``4 + 2*k``), the same numbers as the
generated bindings' ``Offset(4 + 2*k)`` calls; ``tests/test_fb_columns.py`` checks the decoded
columns against the bindings' object API on every sample model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolkit.errors import ModelFormatError

__all__ = ["FlatColumns"]

_K4 = np.arange(4, dtype=np.int64)
_K8 = np.arange(8, dtype=np.int64)
_K2 = np.arange(2, dtype=np.int64)


class FlatColumns:
    """Vectorised reads over one FlatBuffer (any buffer object)."""

    def __init__(self, data: Any, where: str) -> None:
        self.u8 = np.frombuffer(data, dtype=np.uint8)
        self.size = int(self.u8.size)
        self.where = where
        self._vt: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # ---------------------------------------------------------------- gather
    def _gather(self, pos: np.ndarray, k: np.ndarray, what: str) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.int64)
        if pos.size and (pos.min() < 0 or pos.max() + k.size > self.size):
            bad = int(pos[(pos < 0) | (pos + k.size > self.size)][0])
            raise ModelFormatError(f"{what} at byte {bad} lies outside the file "
                                   f"({self.size} bytes)", where=self.where,
                                   fix="the file is truncated or corrupt")
        return self.u8[pos[:, None] + k]

    def u32(self, pos: np.ndarray, what: str = "offset") -> np.ndarray:
        """uint32 values at ``pos`` (int64 array)."""
        return self._gather(pos, _K4, what).view("<u4").ravel().astype(np.int64)

    def i32(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        """int32 values at ``pos``."""
        return self._gather(pos, _K4, what).view("<i4").ravel().astype(np.int64)

    def u16(self, pos: np.ndarray, what: str = "vtable") -> np.ndarray:
        """uint16 values at ``pos``."""
        return self._gather(pos, _K2, what).view("<u2").ravel().astype(np.int64)

    def u64(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        """uint64 values at ``pos``."""
        return self._gather(pos, _K8, what).view("<u8").ravel().astype(np.int64)

    def i8(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        """int8 values at ``pos``."""
        return self._gather(pos, _K4[:1], what).view(np.int8).ravel().astype(np.int64)

    # ---------------------------------------------------------------- tables
    def table_vector(self, vec_pos: int, what: str) -> np.ndarray:
        """Positions of the tables in the vector of tables at ``vec_pos``."""
        n = int(self.u32(np.array([vec_pos]), what)[0])
        if n * 4 + vec_pos + 4 > self.size:
            raise ModelFormatError(f"{what} claims {n} entries, more than the file holds",
                                   where=self.where,
                                   fix=("the file is truncated or damaged: write the model again "
                                        "(its converter, or `toolkit compile`)"))
        elems = vec_pos + 4 + 4 * np.arange(n, dtype=np.int64)
        return elems + self.u32(elems, what)

    def fields(self, tables: np.ndarray, slot: int, what: str) -> np.ndarray:
        """Absolute positions of field ``slot`` in each table (0 where absent)."""
        if tables.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self._vt is not None and self._vt[0] is tables:
            _, vt, vt_len = self._vt
        else:
            vt = tables - self.i32(tables, f"{what} vtable offset")
            vt_len = self.u16(vt, f"{what} vtable")
            self._vt = (tables, vt, vt_len)
        entry = 4 + 2 * slot
        present = vt_len >= entry + 2
        off = np.zeros(tables.size, dtype=np.int64)
        if present.any():
            off[present] = self.u16(vt[present] + entry, f"{what} vtable")
        return np.where(off > 0, tables + off, 0)

    def scalar(self, fpos: np.ndarray, kind: str, default: int, what: str) -> np.ndarray:
        """Scalar field values (``kind`` in u8/i8/u32/i32/u64) where present, else default."""
        out = np.full(fpos.size, default, dtype=np.int64)
        m = fpos > 0
        if m.any():
            read = {"i8": self.i8, "u8": self.u8_at, "u32": self.u32, "i32": self.i32,
                    "u64": self.u64}[kind]
            out[m] = read(fpos[m], what)
        return out

    def u8_at(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        """uint8 values at ``pos``."""
        return self._gather(pos, _K4[:1], what).ravel().astype(np.int64)

    def tables_at(self, fpos: np.ndarray, what: str) -> np.ndarray:
        """Positions of sub-tables referenced by fields at ``fpos`` (0 where absent)."""
        out = np.zeros(fpos.size, dtype=np.int64)
        m = fpos > 0
        if m.any():
            out[m] = fpos[m] + self.u32(fpos[m], what)
        return out

    def vectors(self, fpos: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
        """(data start, length) of vector fields at ``fpos``; length -1 where absent."""
        start = np.zeros(fpos.size, dtype=np.int64)
        length = np.full(fpos.size, -1, dtype=np.int64)
        m = fpos > 0
        if m.any():
            vec = fpos[m] + self.u32(fpos[m], what)
            length[m] = self.u32(vec, what)
            start[m] = vec + 4
        return start, length

    def flat(self, start: np.ndarray, length: np.ndarray, itemsize: int, dtype: str,
             what: str) -> tuple[np.ndarray, np.ndarray]:
        """Concatenate the elements of many vectors: return (values, split points)."""
        n = np.maximum(length, 0)
        total = int(n.sum())
        ends = start + n * itemsize
        if n.size and (ends.max(initial=0) > self.size):
            raise ModelFormatError(f"a {what} vector runs past the end of the file",
                                   where=self.where, fix="the file is truncated or corrupt")
        if total == 0:
            return np.zeros(0, dtype=dtype), np.cumsum(n)[:-1]
        first = np.repeat(start, n)
        idx = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        pos = first + idx * itemsize
        k = np.arange(itemsize, dtype=np.int64)
        vals = self.u8[pos[:, None] + k].view(dtype).ravel()
        return vals, np.cumsum(n)[:-1]

    def strings(self, fpos: np.ndarray, what: str) -> list[str | None]:
        """Decode string fields (None where absent)."""
        start, length = self.vectors(fpos, what)
        if length.size and (start + np.maximum(length, 0)).max(initial=0) > self.size:
            raise ModelFormatError(f"a {what} string runs past the end of the file",
                                   where=self.where,
                                   fix=("the file is truncated or damaged: write the model again "
                                        "(its converter, or `toolkit compile`)"))
        raw = self.u8
        out: list[str | None] = []
        for s, n in zip(start.tolist(), length.tolist()):
            if n < 0:
                out.append(None)
            else:
                try:
                    out.append(raw[s:s + n].tobytes().decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise ModelFormatError(f"{what} at byte {s} is not UTF-8 ({e})",
                                           where=self.where,
                                           fix=("the file is damaged (names are UTF-8): write "
                                                "the model again (its converter, or `toolkit "
                                                "compile`)")) from None
        return out
