"""Read ExecuTorch ETDump files (``.etdp``, a flatcc FlatBuffer with identifier ``ED00``).

Both framings are accepted: the runtime's size-prefixed buffer (u32 size at byte 0, ``ED00``
at byte 8) and the un-prefixed buffer of ExecuTorch's Python serializer (``ED00`` at 4).
Events are decoded column-wise with :class:`~toolkit.formats.fb_columns.FlatColumns`: one NumPy
gather per field over every event of the file; strings are interned (each distinct name is
decoded once), so a million events cost a few hundred milliseconds.

Fields follow ``devtools/etdump/etdump_schema_flatcc.fbs`` (slot = field order). A field left
at its schema default is absent from a flatcc buffer; this reader reports it as missing (NA),
never as the default used as a key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import LimitError, ToolkitError, TraceError
from toolkit.formats.fb_columns import FlatColumns
from toolkit.limits import check

__all__ = ["ETDump", "RunBlock", "read_etdump", "etdump_offset", "EVENT_KINDS",
           "sniff_executorch_file"]

#: ``kind`` categories of :attr:`ETDump.events`.
EVENT_KINDS: tuple[str, ...] = ("profile", "allocation", "debug", "empty")
_STR = pd.Series([""]).dtype
_MAX_INTERN_WIDTH = 512
_CHUNK = 1 << 16


@dataclass
class RunBlock:
    """One ``RunData`` table: ``name`` (``Default`` for load time, ``Execute`` per execution),
    ``bundled_input_index`` (None when absent), ``allocators`` (names), ``events`` (count)."""

    name: str | None
    bundled_input_index: int | None
    allocators: list[str | None]
    events: int


@dataclass
class ETDump:
    """A decoded ETDump.

    ``events`` columns, one row per ``Event`` table in file order (end order within a block):

    ======================== =====================================================================
    block                    ``int64`` index of the run-data block (0, 1, ...)
    kind                     categorical: ``profile``, ``allocation``, ``debug`` or ``empty``
    name                     categorical of ``str`` (NA when absent)
    chain_index              ``Int64`` (NA when absent: the schema default 0)
    instruction_id           ``Int64`` (NA when absent: the schema default -1)
    delegate_debug_id_int    ``Int64`` (NA when absent: the schema default -1)
    delegate_debug_id_str    categorical of ``str`` (NA when absent)
    delegate_debug_metadata  ``object``: ``bytes`` or None
    start_time, end_time     ``uint64`` ticks (0 when absent or not a profile event)
    allocator_id             ``Int64`` (allocation events)
    allocation_size          ``Int64`` (allocation events)
    ======================== =====================================================================

    ``blocks`` describes the run-data blocks; ``version`` is the ETDump version (None if absent);
    ``prefixed`` tells the framing; ``source`` the file.
    """

    version: int | None
    blocks: list[RunBlock]
    events: pd.DataFrame
    prefixed: bool
    source: str = "<bytes>"
    meta: dict[str, Any] = field(default_factory=dict)


def sniff_executorch_file(data: bytes | bytearray | memoryview) -> str | None:
    """``"etdump"``, ``"program"``, ``"etrecord"``, ``"inspector_csv"`` or None for other bytes."""
    head = bytes(data[:64])
    if (len(head) >= 12 and head[8:12] == b"ED00") or head[4:8] == b"ED00":
        return "etdump"
    if head[4:8] == b"ET12" or (head[4:6] == b"ET" and head[6:8].isdigit()):
        return "program"
    if head[:4] == b"PK\x03\x04" and b"ETRECORD" in head:
        return "etrecord"
    if head.startswith(b"event_block_name,event_name,"):
        return "inspector_csv"
    return None


def etdump_offset(data: bytes | bytearray | memoryview, where: str = "<bytes>") -> tuple[int, bool]:
    """Where the FlatBuffer starts in ``data`` and whether the buffer is size-prefixed.

    Raises:
        TraceError: the bytes are not an ETDump (the message names the file kind when it is a
            program, an ETRecord or an Inspector CSV).
    """
    n = len(data)
    head = bytes(data[:12])
    if n >= 12 and head[8:12] == b"ED00" and int.from_bytes(head[:4], "little") == n - 4:
        return 4, True
    if n >= 8 and head[4:8] == b"ED00":
        return 0, False
    if n >= 12 and head[8:12] == b"ED00":
        raise TraceError(f"the ETDump's size prefix says {int.from_bytes(head[:4], 'little')} "
                         f"bytes but the file holds {n - 4} after it", where=where,
                         fix="the file is truncated or was written while the run was going")
    kind = sniff_executorch_file(data)
    raise TraceError(_not_etdump(kind), where=where, fix=_fix_for(kind, "etdump"))


def _not_etdump(kind: str | None) -> str:
    names = {"program": "an ExecuTorch program (.pte), not an ETDump",
             "etrecord": "an ETRecord, not an ETDump",
             "inspector_csv": "an Inspector CSV table, not an ETDump"}
    return names.get(kind or "", "not an ETDump (no ED00 identifier at byte 4 or 8)")


def _fix_for(kind: str | None, wanted: str) -> str:
    where_it_goes = {
        "program": "pass it as program= (CLI: --program)",
        "etrecord": "pass it as etrecord= (CLI: --etrecord)",
        "etdump": "pass it as the trace (the first argument)",
        "inspector_csv": "read it with pandas; toolkit reads the ETDump the table came from",
    }
    if kind in where_it_goes:
        return where_it_goes[kind]
    return {"etdump": "pass the .etdp file the runtime wrote",
            "program": "pass the .pte file the program was run from",
            "etrecord": "pass the ETRecord zip written by generate_etrecord"}[wanted]


def read_etdump(source: str | os.PathLike[str] | bytes | bytearray | memoryview) -> ETDump:
    """Decode an ETDump file or buffer.

    Returns:
        An :class:`ETDump` whose ``events`` table is described there.

    Raises:
        TraceError: not an ETDump, or a corrupt one (an offset outside the file, a bad string).
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            data: bytes | bytearray | memoryview = path.read_bytes()
        except OSError as exc:
            raise TraceError(f"cannot read the ETDump ({exc.strerror or exc})",
                             where=str(path), fix="check the path") from None
        where = str(path)
    else:
        data, where = source, "<bytes>"
    start, prefixed = etdump_offset(data, where)
    view = memoryview(data)[start:]
    try:
        return _decode(view, where, prefixed)
    except ToolkitError as exc:
        if isinstance(exc, (TraceError, LimitError)):
            raise
        raise TraceError(exc.what, where=exc.where or where,
                         fix=exc.fix or "the ETDump is truncated or corrupt") from None
    except (ValueError, IndexError, OverflowError, MemoryError) as exc:
        raise TraceError(f"corrupt ETDump ({exc})", where=where,
                         fix="the file is truncated or corrupt") from None


class _Columns(FlatColumns):
    """:class:`FlatColumns` reading scalars by one gather per byte (no per-element index
    matrix: a million-event file needs a fraction of the memory and time)."""

    _vtables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def _bytes(self, pos: np.ndarray, size: int, what: str) -> list[np.ndarray]:
        pos = np.asarray(pos, dtype=np.int64)
        if pos.size and (pos.min() < 0 or pos.max() + size > self.size):
            bad = int(pos[(pos < 0) | (pos + size > self.size)][0])
            raise TraceError(f"{what} at byte {bad} lies outside the file ({self.size} bytes)",
                             where=self.where, fix="the file is truncated or corrupt")
        return [self.u8[pos + i] for i in range(size)]

    def _unsigned(self, pos: np.ndarray, size: int, what: str) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.int64)
        if pos.size > 64:  # FlatBuffers align scalars: then one gather through a typed view
            r = int(pos[0]) % size
            if not ((pos - r) % size).any():
                if pos.min() < 0 or pos.max() + size > self.size:
                    self._bytes(pos, size, what)  # raises, naming the first bad offset
                words = self.u8[r:r + (self.size - r) // size * size].view(f"<u{size}")
                return words[(pos - r) // size].astype(np.uint64)
        out = np.zeros(np.shape(pos), dtype=np.uint64)
        for i, b in enumerate(self._bytes(pos, size, what)):
            out |= b.astype(np.uint64) << np.uint64(8 * i)
        return out

    def fields(self, tables: np.ndarray, slot: int, what: str) -> np.ndarray:
        """Absolute positions of field ``slot`` in each table (0 where absent); the tables'
        few distinct vtables are read once each."""
        if tables.size == 0:
            return np.zeros(0, dtype=np.int64)
        cached = self._vtables
        if cached is None or cached[0] is not tables:
            vt = tables - self.i32(tables, f"{what} vtable offset")
            codes, found = pd.factorize(vt)  # hashing: a few distinct vtables, no sort
            uniq = np.asarray(found, dtype=np.int64)
            cached = (tables, uniq, np.asarray(codes, dtype=np.int64),
                      self.u16(uniq, f"{what} vtable"))
            self._vtables = cached
        _, uniq, inverse, vt_len = cached
        entry = 4 + 2 * slot
        present = vt_len >= entry + 2
        off = np.zeros(uniq.size, dtype=np.int64)
        if present.any():
            off[present] = self.u16(uniq[present] + entry, f"{what} vtable")
        per_table = off[inverse]
        return np.where(per_table > 0, tables + per_table, 0)

    def u32(self, pos: np.ndarray, what: str = "offset") -> np.ndarray:
        return self._unsigned(pos, 4, what).astype(np.int64)

    def i32(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        return self._unsigned(pos, 4, what).astype(np.uint32).view(np.int32).astype(np.int64)

    def u16(self, pos: np.ndarray, what: str = "vtable") -> np.ndarray:
        return self._unsigned(pos, 2, what).astype(np.int64)

    def u64(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        return self._unsigned(pos, 8, what).view(np.int64)

    def u8_at(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        return self._bytes(pos, 1, what)[0].astype(np.int64)

    def i8(self, pos: np.ndarray, what: str = "value") -> np.ndarray:
        return self._bytes(pos, 1, what)[0].view(np.int8).astype(np.int64)


def _decode(buf: memoryview, where: str, prefixed: bool) -> ETDump:
    fc = _Columns(buf, where)
    if fc.size < 8:
        raise TraceError(
            "the ETDump is shorter than a FlatBuffer header", where=where,
            fix=(
                "the ETDump is empty or truncated: run the program again with ETDump enabled and "
                "write the whole buffer (ETDumpGen.get_etdump_data)"
            ),
        )
    root = fc.u32(np.array([0]), "root offset")
    fc._vt = None
    version_pos = fc.fields(root, 0, "ETDump")
    version = int(fc.scalar(version_pos, "u32", 0, "version")[0]) if version_pos[0] else None
    runs_pos = fc.fields(root, 1, "ETDump")
    if runs_pos[0] == 0:
        return ETDump(version, [], _empty_events(), prefixed, where)
    runs = fc.table_vector(int(runs_pos[0] + fc.u32(runs_pos, "run_data")[0]), "run_data")
    fc._vt = None
    name_pos = fc.fields(runs, 0, "RunData")
    bundled_pos = fc.fields(runs, 1, "RunData")
    alloc_pos = fc.fields(runs, 2, "RunData")
    events_pos = fc.fields(runs, 3, "RunData")
    run_names = _interned(fc, name_pos, "RunData.name")
    texts = list(run_names.categories)
    names = [texts[c] if c >= 0 else None for c in run_names.codes.tolist()]
    bundled = fc.scalar(bundled_pos, "i32", -1, "bundled_input_index")
    alloc_tables, alloc_counts = _tables_of_vectors(fc, alloc_pos, "allocators")
    fc._vt = None
    alloc_names = fc.strings(fc.fields(alloc_tables, 0, "Allocator"), "Allocator.name")
    if alloc_counts.any():
        alloc_split = np.cumsum(alloc_counts)[:-1].tolist()
        allocators = [list(x) for x in np.split(np.array(alloc_names, dtype=object),
                                                 alloc_split)]
    else:
        allocators = [[] for _ in range(len(runs))]
    check("max_events_per_file", int(np.maximum(fc.vectors(events_pos, "events")[1], 0).sum()),
          what="events the ETDump claims", where=where)
    events, counts = _tables_of_vectors(fc, events_pos, "events")
    blocks = [RunBlock(names[i], int(bundled[i]) if bundled_pos[i] else None,
                       allocators[i], int(counts[i])) for i in range(len(names))]
    frame = _events(fc, events, np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    return ETDump(version, blocks, frame, prefixed, where)


def _tables_of_vectors(fc: FlatColumns, fpos: np.ndarray, what: str
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Table positions of the vector-of-tables fields at ``fpos`` (0: absent), all vectors
    concatenated, and each vector's length."""
    start, length = fc.vectors(fpos, what)
    counts = np.maximum(length, 0)
    total = int(counts.sum())
    if total and (start + 4 * counts).max() > fc.size:
        raise TraceError(f"a {what} vector runs past the end of the file", where=fc.where,
                         fix="the file is truncated or corrupt")
    if total == 0:
        return np.zeros(0, dtype=np.int64), counts
    first = np.repeat(start, counts)
    index = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    elems = first + 4 * index
    return elems + _u32(fc, elems, what), counts


def _u32(fc: FlatColumns, pos: np.ndarray, what: str) -> np.ndarray:
    """uint32 values at ``pos`` (four byte gathers; no per-element index matrix)."""
    if pos.size and (pos.min() < 0 or pos.max() + 4 > fc.size):
        raise TraceError(f"{what} lies outside the file ({fc.size} bytes)", where=fc.where,
                         fix="the file is truncated or corrupt")
    u8 = fc.u8
    out = u8[pos].astype(np.int64)
    out |= u8[pos + 1].astype(np.int64) << 8
    out |= u8[pos + 2].astype(np.int64) << 16
    out |= u8[pos + 3].astype(np.int64) << 24
    return out


def _empty_events() -> pd.DataFrame:
    fc_empty = np.zeros(0, dtype=np.int64)
    return _frame(fc_empty, np.zeros(0, np.int8), _cat([], np.zeros(0, np.int64)),
                  {}, _cat([], fc_empty), [], np.zeros(0, np.uint64), np.zeros(0, np.uint64),
                  {})


def _cat(texts: list[str], codes: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(texts, dtype=_STR))


def _nullable(values: np.ndarray, present: np.ndarray) -> pd.arrays.IntegerArray:
    return pd.arrays.IntegerArray(values.astype(np.int64), ~present)


def _interned(fc: FlatColumns, fpos: np.ndarray, what: str) -> pd.Categorical:
    """String fields at ``fpos`` as a categorical (NA where absent), each text decoded once."""
    n = fpos.size
    if n == 0:
        return _cat([], np.zeros(0, np.int64))
    start, length = fc.vectors(fpos, what)
    present = length >= 0
    codes = np.full(n, -1, dtype=np.int64)
    if not present.any():
        return _cat([], codes)
    st, ln = start[present], length[present]
    if (st + ln).max() > fc.size:
        raise TraceError(f"a {what} string runs past the end of the file", where=fc.where,
                         fix="the file is truncated or corrupt")
    width = int(ln.max())
    if width > _MAX_INTERN_WIDTH:  # rare long strings: decode one by one
        cat = pd.Categorical(fc.strings(fpos[present], what))
        codes[present] = cat.codes
        return _cat([str(c) for c in cat.categories], codes)
    width = max(8, (width + 7) // 8 * 8)
    k = np.arange(width, dtype=np.int64)
    table: dict[bytes, int] = {}
    texts: list[str] = []
    local = np.empty(st.size, dtype=np.int64)
    consts = (np.arange(width // 8, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C16)
              + np.uint64(0x100000001B3))
    # FlatBuffers strings start 4-aligned: then read 4-byte words through a typed view
    n32 = fc.size // 4
    aligned = not (st % 4).any() and int((st + ln).max()) <= 4 * n32
    if aligned:
        u32 = fc.u8[:4 * n32].view("<u4")
        k4 = np.arange(width // 4, dtype=np.int64)
        masks = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)
    for c0 in range(0, st.size, _CHUNK):
        c1 = min(st.size, c0 + _CHUNK)
        s_c, l_c = st[c0:c1], ln[c0:c1]
        if aligned:
            w32 = u32[np.minimum((s_c // 4)[:, None] + k4[None, :], n32 - 1)]
            w32 &= masks[np.clip(l_c[:, None] - 4 * k4[None, :], 0, 4)]
            words = w32.view("<u8")
            mat = w32.view(np.uint8)
        else:
            idx = np.minimum(s_c[:, None] + k[None, :], fc.size - 1)
            mat = fc.u8[idx]
            mat[k[None, :] >= l_c[:, None]] = 0
            words = mat.view("<u8")
        h = (words * consts[None, :]).sum(axis=1, dtype=np.uint64)
        h ^= l_c.astype(np.uint64)
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        rep = first[inv]
        if not ((words == words[rep]).all(axis=1) & (l_c == l_c[rep])).all():  # a collision
            key = np.concatenate([l_c.astype("<u4").view(np.uint8).reshape(-1, 4), mat], axis=1)
            keyv = np.ascontiguousarray(key).view(np.dtype((np.void, key.shape[1]))).ravel()
            _, first, inv = np.unique(keyv, return_index=True, return_inverse=True)
            inv = inv.reshape(-1)
        ids = np.empty(first.size, dtype=np.int64)
        for j, r in enumerate(first.tolist()):
            raw = mat[r, :int(l_c[r])].tobytes()
            if raw not in table:
                try:
                    texts.append(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise TraceError(f"a {what} string is not UTF-8 ({exc})", where=fc.where,
                                     fix="the file is truncated or corrupt") from None
                table[raw] = len(texts) - 1
            ids[j] = table[raw]
        local[c0:c1] = ids[inv]
    order = np.argsort(np.array(texts, dtype=object), kind="stable")
    rank = np.empty(len(texts), dtype=np.int64)
    rank[order] = np.arange(len(texts))
    codes[present] = rank[local]
    return _cat([texts[i] for i in order.tolist()], codes)


def _events(fc: FlatColumns, events: np.ndarray, block: np.ndarray) -> pd.DataFrame:
    n = events.size
    fc._vt = None
    prof_f = fc.fields(events, 0, "Event")
    alloc_f = fc.fields(events, 1, "Event")
    debug_f = fc.fields(events, 2, "Event")
    kind = np.full(n, 3, dtype=np.int8)
    kind[debug_f > 0] = 2
    kind[alloc_f > 0] = 1
    kind[prof_f > 0] = 0
    if ((prof_f > 0).astype(int) + (alloc_f > 0) + (debug_f > 0) > 1).any():
        bad = int(np.flatnonzero((prof_f > 0).astype(int) + (alloc_f > 0) + (debug_f > 0) > 1)[0])
        raise TraceError(f"event {bad} sets more than one of profile, allocation and debug "
                         "event", where=fc.where, fix="the file is corrupt")

    prof = fc.tables_at(prof_f, "ProfileEvent")
    p_rows = np.flatnonzero(prof > 0)
    pt = prof[p_rows]
    fc._vt = None
    pf = [fc.fields(pt, s, "ProfileEvent") for s in range(8)]

    dbg = fc.tables_at(debug_f, "DebugEvent")
    d_rows = np.flatnonzero(dbg > 0)
    dt = dbg[d_rows]
    fc._vt = None
    # DebugEvent: chain_index ulong, instruction_id, debug_entry, delegate ids, name
    df = [fc.fields(dt, s, "DebugEvent") for s in range(6)]

    al = fc.tables_at(alloc_f, "AllocationEvent")
    a_rows = np.flatnonzero(al > 0)
    at = al[a_rows]
    fc._vt = None
    af = [fc.fields(at, s, "AllocationEvent") for s in range(2)]

    def merged_int(p_slot: int | None, d_slot: int | None, kind_p: str, kind_d: str,
                   what: str) -> tuple[np.ndarray, np.ndarray]:
        vals = np.zeros(n, dtype=np.int64)
        present = np.zeros(n, dtype=bool)
        if p_slot is not None:
            pos = pf[p_slot]
            vals[p_rows] = fc.scalar(pos, kind_p, 0, what)
            present[p_rows] = pos > 0
        if d_slot is not None:
            pos = df[d_slot]
            vals[d_rows] = fc.scalar(pos, kind_d, 0, what)
            present[d_rows] = pos > 0
        return vals, present

    chain, chain_p = merged_int(1, 0, "i32", "u64", "chain_index")
    instr, instr_p = merged_int(2, 1, "i32", "i32", "instruction_id")
    did, did_p = merged_int(3, 3, "i32", "i32", "delegate_debug_id_int")

    name_pos = np.zeros(n, dtype=np.int64)
    name_pos[p_rows] = pf[0]
    name_pos[d_rows] = df[5]
    dstr_pos = np.zeros(n, dtype=np.int64)
    dstr_pos[p_rows] = pf[4]
    dstr_pos[d_rows] = df[4]
    names = _interned(fc, name_pos, "event name")
    dstr = _interned(fc, dstr_pos, "delegate_debug_id_str")

    metadata: Any = [None] * n
    m_start, m_len = fc.vectors(pf[5], "delegate_debug_metadata")
    if (m_len >= 0).any():
        if (m_start + np.maximum(m_len, 0)).max() > fc.size:
            raise TraceError("a delegate_debug_metadata vector runs past the end of the file",
                             where=fc.where, fix="the file is truncated or corrupt")
        raw = fc.u8
        meta_arr = np.full(n, None, dtype=object)
        meta_arr[p_rows[m_len == 0]] = b""
        for i in np.flatnonzero(m_len > 0).tolist():
            s, k = int(m_start[i]), int(m_len[i])
            meta_arr[int(p_rows[i])] = raw[s:s + k].tobytes()
        metadata = meta_arr

    start = np.zeros(n, dtype=np.uint64)
    end = np.zeros(n, dtype=np.uint64)
    if p_rows.size:
        start[p_rows] = _u64(fc, pf[6], "start_time")
        end[p_rows] = _u64(fc, pf[7], "end_time")
    alloc_vals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for slot, col, kind_s in ((0, "allocator_id", "i32"), (1, "allocation_size", "u64")):
        v = np.zeros(n, dtype=np.int64)
        p = np.zeros(n, dtype=bool)
        if a_rows.size:
            v[a_rows] = fc.scalar(af[slot], kind_s, 0, col)
            p[a_rows] = af[slot] > 0
        alloc_vals[col] = (v, p)
    ints = {"chain_index": (chain, chain_p), "instruction_id": (instr, instr_p),
            "delegate_debug_id_int": (did, did_p), **alloc_vals}
    return _frame(block, kind, names, ints, dstr, metadata, start, end, {})


def _u64(fc: FlatColumns, fpos: np.ndarray, what: str) -> np.ndarray:
    out = np.zeros(fpos.size, dtype=np.uint64)
    m = fpos > 0
    if m.any():
        out[m] = fc._unsigned(fpos[m], 8, what) if isinstance(fc, _Columns) else \
            fc._gather(fpos[m], np.arange(8, dtype=np.int64), what).view("<u8").ravel()
    return out


def _frame(block: np.ndarray, kind: np.ndarray, names: pd.Categorical,
           ints: dict[str, tuple[np.ndarray, np.ndarray]], dstr: pd.Categorical,
           metadata: list[bytes | None], start: np.ndarray, end: np.ndarray,
           extra: dict[str, Any]) -> pd.DataFrame:
    n = len(block)
    cols: dict[str, Any] = {
        "block": block.astype(np.int64),
        "kind": pd.Categorical.from_codes(kind.astype(np.int64),
                                          categories=pd.Index(EVENT_KINDS, dtype=_STR)),
        "name": names,
    }
    for col in ("chain_index", "instruction_id", "delegate_debug_id_int"):
        v, p = ints.get(col, (np.zeros(n, np.int64), np.zeros(n, bool)))
        cols[col] = _nullable(v, p)
    cols["delegate_debug_id_str"] = dstr
    cols["delegate_debug_metadata"] = pd.Series(metadata, dtype=object)
    cols["start_time"] = start.astype(np.uint64)
    cols["end_time"] = end.astype(np.uint64)
    for col in ("allocator_id", "allocation_size"):
        v, p = ints.get(col, (np.zeros(n, np.int64), np.zeros(n, bool)))
        cols[col] = _nullable(v, p)
    cols.update(extra)
    return pd.DataFrame(cols)
