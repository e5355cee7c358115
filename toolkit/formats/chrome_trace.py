"""Chrome trace event files: the JSON that Perfetto and ``chrome://tracing`` open.

Times inside the toolkit are integer nanoseconds (``int64``). Chrome traces carry microseconds;
:func:`write_chrome_trace` prints them as exact decimals (``12.345``) and
:func:`read_chrome_trace` parses those decimals exactly (no float on the way), so ``start_ns`` and
``dur_ns`` survive a round trip bit for bit for every ``int64`` value, including the large values
of a monotonic clock counted since boot.

:func:`read_chrome_trace` returns the reader frame of :mod:`toolkit.formats.event_columns`.

The reader streams: it decodes the file in blocks of a few MB and turns each block into columns
before reading the next, so a 500 MB trace never exists as one list of dicts. With ``msgspec``
installed, a block of plain ``"X"`` events (the common case) is decoded straight into typed
records, with ``ts``/``dur`` kept as their JSON text and parsed exactly in one numpy pass; any
other block (``B``/``E`` pairs, metadata, other args keys or types, broken JSON) is decoded into
dicts, with the same rows as a result.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import math
import os
import re
import warnings
import zlib
from collections.abc import Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, Literal, cast

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError, TraceError
from toolkit.formats.compressed import BoundedReader, is_gzip, open_input
from toolkit.formats.event_columns import (
    ARG_PREFIX,
    EVENT_FIELDS,
    Collector,
    atomic_text,
    integer_column,
    is_missing,
    json_default,
    start_and_duration,
)
from toolkit.formats.exact_time import number_texts_to_ns, us_texts
from toolkit.util.gc_pause import paused_gc

__all__ = ["read_chrome_trace", "write_chrome_trace"]


_ROWS_PER_WRITE = 100_000


_READ_CHARS = 1 << 23  # characters decoded per block by the reader


_READ_BYTES = 1 << 22


_WS = re.compile(r"[ \t\n\r]*")


# A place where one event ends and the next begins ("}, {" with any white space).
_EVENT_GAP = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")


_ARRAY_END = re.compile(r"\}[ \t\n\r]*\]")


def _dump(value: Any) -> str | None:
    """JSON text of one arg value; ``None`` for missing or non-finite values (key left out)."""
    if is_missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if math.isfinite(value) else None
    return json.dumps(value, default=json_default, allow_nan=False, separators=(",", ":"))


def _arg_texts(values: pd.Series) -> list[str | None]:
    """JSON texts of one column's values, ``None`` where the value is missing."""
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        table = np.array([_dump(c) for c in dtype.categories] + [None], dtype=object)
        return table[values.cat.codes.to_numpy()].tolist()
    if dtype.kind == "b" and not values.hasnans:
        return ["true" if v else "false" for v in values.to_numpy().tolist()]
    if dtype.kind in "iu" and isinstance(dtype, np.dtype):
        return list(map(str, values.to_numpy().tolist()))
    if dtype.kind == "f" and isinstance(dtype, np.dtype):
        array = values.to_numpy()
        texts: list[str | None] = list(map(repr, array.tolist()))
        for i in np.flatnonzero(~np.isfinite(array)).tolist():
            texts[i] = None
        return texts
    memo: dict[str, str] = {}
    out: list[str | None] = []
    for value in values.to_numpy(dtype=object).tolist():
        if type(value) is str:
            text = memo.get(value)
            if text is None:
                text = memo[value] = json.dumps(value)
            out.append(text)
        else:
            out.append(_dump(value))
    return out


def _arg_columns(events: pd.DataFrame) -> list[tuple[str, Any]]:
    """``(args key, column label)`` for every column that goes into ``args``."""
    out: list[tuple[str, Any]] = []
    seen: dict[str, Any] = {}
    for column in events.columns:
        label = str(column)
        if label in EVENT_FIELDS:
            continue
        key = label[len(ARG_PREFIX):] if label.startswith(ARG_PREFIX) else label
        if key in seen:
            raise ToolkitError(f"columns {seen[key]!r} and {column!r} both map to args key "
                               f"{key!r}", where="event frame", fix="drop or rename one of them")
        seen[key] = column
        out.append((key, column))
    return out


def _thread_ids(events: pd.DataFrame) -> tuple[np.ndarray, dict[int, str]]:
    """``tid`` per row (int64) and ``{tid: thread name}`` for tracks that have names.

    Uses the ``tid`` column (integers kept, other values numbered from 1 and named), else the
    ``track`` column (numbered from 1 in order of appearance, named after the track), else 0.
    """
    for column in ("tid", "track"):
        if column not in events.columns:
            continue
        values = events[column]
        if column == "tid" and values.dtype.kind in "iu" and isinstance(values.dtype, np.dtype):
            return values.to_numpy(dtype=np.int64), {}
        objects = values.to_numpy(dtype=object)
        if column == "tid" and all(type(v) is int for v in objects):
            return objects.astype(np.int64), {}
        codes, uniques = pd.factorize(pd.Series(objects, dtype=object).map(str), sort=False)
        return codes.astype(np.int64) + 1, {i + 1: str(u) for i, u in enumerate(uniques)}
    return np.zeros(len(events), dtype=np.int64), {}


def _label_texts(values: pd.Series) -> list[str]:
    """JSON string literal of ``str(value)`` per row (``'""'`` for missing), built per category."""
    if not isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object).where(values.notna(), "").map(str).astype("category")
    table = np.array([json.dumps(str(c)) for c in values.cat.categories] + ['""'], dtype=object)
    return table[values.cat.codes.to_numpy()].tolist()


def write_chrome_trace(
    events: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    pid: int = 1,
    process_name: str | None = "toolkit",
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``events`` as a Chrome trace event JSON file (Perfetto, ``chrome://tracing``).

    Args:
        events: one row per event: ``start_ns`` (int nanoseconds) and ``dur_ns`` or ``end_ns``;
            ``name`` (else ``key`` is used); optional ``cat``, ``pid``, ``tid`` or ``track``
            (thread names). Every other column (``run``, ``key``, op index, command id, original
            layers, ...) goes into each event's ``args`` under its own name, an ``arg_`` prefix
            removed; missing values (None/NaN) are left out of that event's ``args``.
        path: output file; a name ending in ``.gz`` is gzip-compressed. Written atomically
            (temporary file beside it, then ``os.replace``).
        pid: process id of rows without a ``pid`` column.
        process_name: name shown for each process (a ``"M"`` metadata event); None for none.
        metadata: JSON-able mapping written as the file's ``otherData``.

    Returns:
        The path written. The file holds ``{"traceEvents": [...], "displayTimeUnit": "ns",
        "otherData": {...}}``: ``"M"`` events naming processes and threads, then one ``"X"``
        event per row with ``ts``/``dur`` in microseconds printed exactly (``12.345``).
    """
    path = Path(path)
    start, duration = start_and_duration(events)
    n = len(events)
    if "name" in events.columns:
        names = _label_texts(events["name"])
    elif "key" in events.columns:
        names = _label_texts(events["key"])
    else:
        raise ToolkitError("an event frame needs a 'name' (or 'key') column",
                           where=f"columns {list(events.columns)}",
                           fix="add a 'name' column of str")
    cats = _label_texts(events["cat"]) if "cat" in events.columns else ['"event"'] * n
    pids = (integer_column(events, "pid") if "pid" in events.columns
            else np.full(n, pid, dtype=np.int64))
    tids, thread_names = _thread_ids(events)
    arg_columns = _arg_columns(events)
    try:
        other_data = json.dumps(dict(metadata or {}), default=json_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ToolkitError(f"metadata is not JSON serialisable: {exc}", where=str(path),
                           fix="pass plain str/int/float/list/dict values") from exc

    meta_events: list[str] = []
    if process_name is not None:
        for p in dict.fromkeys(pids.tolist()):
            meta_events.append(f'{{"ph":"M","name":"process_name","pid":{p},"tid":0,'
                               f'"args":{{"name":{json.dumps(process_name)}}}}}')
    if thread_names:
        for p, t in dict.fromkeys(zip(pids.tolist(), tids.tolist())):
            if t in thread_names:
                meta_events.append(f'{{"ph":"M","name":"thread_name","pid":{p},"tid":{t},'
                                   f'"args":{{"name":{json.dumps(thread_names[t])}}}}}')

    with atomic_text(path) as out:
        out.write('{"traceEvents":[\n')
        out.write(",\n".join(meta_events))
        separator = ",\n" if meta_events else ""
        for begin in range(0, n, _ROWS_PER_WRITE):
            rows = slice(begin, min(begin + _ROWS_PER_WRITE, n))
            chunk = events.iloc[rows]
            fragments: list[list[str]] = []
            sparse = False
            for key, column in arg_columns:
                prefix = json.dumps(key) + ":"
                try:
                    texts = _arg_texts(chunk[column])
                except (TypeError, ValueError) as exc:
                    raise ToolkitError(f"column {column!r} holds a value that JSON cannot hold: "
                                       f"{exc}", where=str(path),
                                       fix="convert it to str, numbers, lists or dicts") from exc
                if column == "problem":
                    texts = [None if t == '""' else t for t in texts]
                if None in texts:
                    sparse = True
                    fragments.append([prefix + t if t is not None else "" for t in texts])
                else:
                    fragments.append([prefix + t for t in texts if t is not None])
            if not fragments:
                args = [""] * (rows.stop - rows.start)
            elif sparse:
                args = [",".join(filter(None, parts)) for parts in zip(*fragments)]
            else:
                args = list(map(",".join, zip(*fragments)))
            lines = [
                f'{{"ph":"X","name":{a},"cat":{b},"pid":{c},"tid":{d},"ts":{e},"dur":{f},'
                f'"args":{{{g}}}}}'
                for a, b, c, d, e, f, g in zip(
                    names[rows], cats[rows], pids[rows].tolist(), tids[rows].tolist(),
                    us_texts(start[rows]), us_texts(duration[rows]), args)
            ]
            out.write(separator)
            out.write(",\n".join(lines))
            separator = ",\n"
        out.write(f'\n],\n"displayTimeUnit":"ns",\n"otherData":{other_data}}}\n')
    return path


class _Text:
    """The file's text, decoded block by block; knows line/column/byte of a position."""

    def __init__(self, stream: IO[Any], label: str) -> None:
        self.stream = stream
        self.label = label
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._decoder: codecs.IncrementalDecoder | None = None
        self._binary: bool | None = None
        self._bytes_read = 0
        self._dropped_bytes = 0
        self._dropped_lines = 0
        self._dropped_column = 0  # characters since the last newline in dropped text
        self._bom = 0
        self.dropped = 0  # characters before ``buf`` (``dropped + pos`` is the file position)
        # where the data starts in a seekable stream: the lines, columns and bytes of dropped
        # text are then counted only when a position is reported, by reading it again
        self._rewind: Any = None
        self._lost = False  # the dropped text could not be counted again
        try:
            if stream.seekable():
                self._rewind = stream.tell()
        except (AttributeError, OSError, ValueError):
            self._rewind = None

    def fill(self, want: int | None = None) -> bool:
        """Append at least ``want`` (default: a block) more characters unless the data ends.

        Returns False when no more characters came.
        """
        if self.eof:
            return False
        want = _READ_CHARS if want is None else want
        if self.pos:
            if self._rewind is None:
                self._count(self.buf[: self.pos])
            self.buf = self.buf[self.pos:]
            self.dropped += self.pos
            self.pos = 0
        pieces: list[str] = []
        got = 0
        while got < want:
            try:
                data = self.stream.read(_READ_BYTES if self._binary is not False else want)
            except (OSError, EOFError, zlib.error) as exc:
                raise TraceError(f"cannot read the file: {exc}", where=self.label,
                                 fix="the compressed data is damaged or cut short; "
                                     "write the trace again") from exc
            if self._binary is None:
                self._binary = isinstance(data, (bytes, bytearray, memoryview))
                if self._binary:
                    self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
                    if bytes(data[:3]) == codecs.BOM_UTF8:
                        data, self._bom = data[3:], 3
            final = not data
            if self._decoder is not None:
                try:
                    text = self._decoder.decode(data, final=final)
                except UnicodeDecodeError as exc:
                    raise TraceError("the file is not UTF-8 text",
                                     where=f"{self.label} byte offset "
                                           f"{self._bom + self._bytes_read + exc.start}",
                                     fix="a Chrome trace is UTF-8 JSON") from exc
                self._bytes_read += len(data)
            else:
                text = data
            if text:
                pieces.append(text)
                got += len(text)
            if final:
                self.eof = True
                break
        if pieces:
            self.buf += "".join(pieces)
        return got > 0

    def _count(self, dropped: str) -> None:
        """Add the bytes, lines and last column of ``dropped`` (text before ``buf``)."""
        self._dropped_bytes += (len(dropped) if dropped.isascii()
                                else len(dropped.encode("utf-8", "surrogatepass")))
        newline = dropped.rfind("\n")
        if newline >= 0:
            self._dropped_lines += dropped.count("\n")
            self._dropped_column = len(dropped) - newline - 1
        else:
            self._dropped_column += len(dropped)

    def _count_dropped(self) -> bool:
        """Count the text before ``buf`` by reading it again from the start of the data;
        False when the stream cannot be read again."""
        rewind, self._rewind = self._rewind, None  # from now on, counted as it is dropped
        if self._lost:
            return False
        if rewind is None or not self.dropped:
            return True
        self._lost = True  # until counted in full
        try:
            here = self.stream.tell()
            self.stream.seek(rewind)
            try:
                decoder = (codecs.getincrementaldecoder("utf-8")("strict") if self._binary
                           else None)
                left, first = self.dropped, True
                while left > 0:
                    data = self.stream.read(_READ_BYTES)
                    if not data:
                        return False
                    if decoder is not None:
                        if first and self._bom:
                            data = data[3:]
                        data = decoder.decode(data)
                    first = False
                    piece = data[:left]
                    self._count(piece)
                    left -= len(piece)
            finally:
                self.stream.seek(here)
        except (OSError, ValueError, EOFError, zlib.error):
            return False
        self._lost = False
        return True

    def where(self, pos: int | None = None) -> str:
        """``"<file> line L, column C, byte offset B"`` of ``pos`` (default: the current)."""
        if not self._count_dropped():
            return f"{self.label} character {self.dropped + (self.pos if pos is None else pos)}"
        pos = self.pos if pos is None else min(pos, len(self.buf))
        line = self._dropped_lines + self.buf.count("\n", 0, pos) + 1
        newline = self.buf.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self._dropped_column + pos + 1
        text = f"{self.label} line {line}, column {column}"
        if self._binary:
            head = self.buf[:pos]
            size = len(head) if head.isascii() else len(head.encode("utf-8", "surrogatepass"))
            text += f", byte offset {self._bom + self._dropped_bytes + size}"
        return text

    def skip_ws(self) -> None:
        while True:
            match = _WS.match(self.buf, self.pos)
            assert match is not None  # the pattern matches the empty string
            self.pos = match.end()
            if self.pos < len(self.buf) or not self.fill():
                return

    def peek(self) -> str:
        """The next character, ``""`` at the end of the data."""
        if self.pos >= len(self.buf) and not self.fill():
            return ""
        return self.buf[self.pos]

    def syntax_error(self, what: str, pos: int | None = None) -> TraceError:
        at_end = (pos if pos is not None else self.pos) >= len(self.buf)
        if self.eof and (at_end or what.startswith("Unterminated string")):
            return TraceError(f"the JSON ends early ({what})", where=self.where(pos),
                              fix="the file is truncated; write or copy it again")
        return TraceError(f"invalid JSON: {what}", where=self.where(pos),
                          fix="check that the file is a Chrome trace (JSON)")

    def decode_value(self, decoder: json.JSONDecoder) -> Any:
        """Decode the JSON value at the current position (reading more text as needed)."""
        while True:
            try:
                value, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut_short = (exc.pos >= len(self.buf) - 8  # the value may go on in the next block
                             or exc.msg.startswith("Unterminated string"))
                if cut_short and self.fill(max(_READ_CHARS, len(self.buf) - self.pos)):
                    continue
                raise self.syntax_error(exc.msg, exc.pos) from None
            if end >= len(self.buf) and self.fill():  # a number might go on in the next block
                continue
            self.pos = end
            return value


def _last_match(pattern: re.Pattern[str], text: str, start: int, end: int | None = None) -> int:
    """Position of the ``}`` of the last match of ``pattern`` in ``text[start:end]``, or -1."""
    end = len(text) if end is None else min(end, len(text))
    window = max(start, end - 65536)
    while True:
        found = -1
        for found_match in pattern.finditer(text, window, end):
            found = found_match.start()
        if found >= 0 or window == start:
            return found
        window = start


def _block_decoder() -> tuple[Any, tuple[type[Exception], ...]]:
    """``(decode, errors)``: a decoder of one block of events (a JSON array text) that keeps
    every decimal as its bytes (exact times), and the errors it raises on text it cannot
    read. ``msgspec``'s, about twice as fast, when it is installed; else the standard
    library's. Both give the same values; text either refuses (``NaN``, a lone surrogate, a
    cut inside an event) goes to the event-by-event path, which reports it precisely."""
    try:
        import msgspec
    except ImportError:
        return json.JSONDecoder(parse_float=str.encode).decode, (json.JSONDecodeError,)
    fast = msgspec.json.Decoder(float_hook=str.encode)
    return fast.decode, (msgspec.DecodeError,)


_FIRST_BLOCK = 1 << 16  # characters of the first block (metadata events lead many traces)


_MAX_SKIP = 32  # after k typed blocks failed in a row, the next min(2**k - 1, this) are not tried


_MAX_LITERALS = 2048  # distinct texts of a field up to which they are decoded as shared texts


class _Texts:
    """The distinct texts seen in one field of ``X`` events (None once it held another type
    or too many), for decoding them as ``Literal`` values: shared ``str`` objects, so that
    decoding allocates no text and interning compares them by identity."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: set[str] | None = set()

    def update(self, values: Any) -> None:
        if self.seen is None:
            return
        values = list(values)
        if not all(type(v) is str for v in values):
            self.seen = None
            return
        self.seen.update(values)
        if len(self.seen) > _MAX_LITERALS:
            self.seen = None

    def type(self, default: Any) -> Any:
        return Literal[tuple(sorted(self.seen))] if self.seen else default


class _TypedBlocks:
    """Decodes a block of plain ``X`` events straight into columns, without a dict per event.

    ``msgspec`` decodes the block into typed records: ``ph`` ``"X"``; ``name``/``cat`` texts
    (``""`` when absent); ``pid``/``tid`` integers; ``ts``/``dur`` kept as their JSON text,
    parsed exactly by :func:`number_texts_to_ns`; ``args`` an object with exactly the keys of
    the last ``X`` event seen. Texts already seen in a field (up to a few thousand) are
    decoded as ``Literal`` values. A block that does not fit (another phase, other args keys,
    a missing field, a value of another type, a new name) is decoded into dicts as before
    (the same rows either way) and the types are learnt again from it (:meth:`learn`).
    """

    def __init__(self, msgspec: Any) -> None:
        self._msgspec = msgspec
        self._errors = (msgspec.DecodeError, RecursionError, ValueError)
        self.decoder: Any = None
        self.keys: tuple[str, ...] = ()
        self.failures = 0  # blocks in a row that did not fit
        self.skip = 0  # blocks still to read as dicts before the next try
        self.names, self.cats = _Texts(), _Texts()
        self.arg_texts: dict[str, _Texts] = {}

    @classmethod
    def create(cls) -> _TypedBlocks | None:
        """The typed decoder, or None without ``msgspec``."""
        try:
            import msgspec
        except ImportError:
            return None
        return cls(msgspec)

    def learn(self, events: list[Any]) -> None:
        """Learn the types from ``events`` (decoded as dicts): the args keys of the last ``X``
        event, the texts of names, categories and args."""
        complete = [e for e in events if type(e) is dict and e.get("ph") == "X"]
        if not complete:
            return
        args = complete[-1].get("args")
        keys = tuple(args) if type(args) is dict else ()
        self.names.update(e.get("name", "") for e in complete)
        self.cats.update(e.get("cat", "") for e in complete)
        for key in keys:
            self.arg_texts.setdefault(key, _Texts()).update(
                e["args"][key] for e in complete
                if type(e.get("args")) is dict and key in e["args"])
        self._build(keys)

    def _build(self, keys: tuple[str, ...]) -> None:
        msgspec = self._msgspec
        fields = [(f"a{i}", self.arg_texts[key].type(Any)) for i, key in enumerate(keys)]
        args_type = msgspec.defstruct("Args", fields, rename=dict(zip(
            (name for name, _ in fields), keys)), forbid_unknown_fields=True, gc=False)
        args_field: tuple[Any, ...] = (("args", args_type) if keys
                                       else ("args", args_type | None, None))
        event_type = msgspec.defstruct("Event", [
            ("ph", Literal["X"]), ("pid", int), ("tid", int), ("ts", msgspec.Raw),
            ("dur", msgspec.Raw), args_field, ("name", self.names.type(str), ""),
            ("cat", self.cats.type(str), ""),
        ], gc=False)
        self.decoder = msgspec.json.Decoder(list[event_type])  # type: ignore[valid-type]
        self.keys = keys

    def ready(self) -> bool:
        """True when the next block is to be tried (a decoder was learnt; the blocks that
        did not fit lately are not too many)."""
        if self.skip:
            self.skip -= 1
            return False
        return self.decoder is not None

    def _failed(self) -> bool:
        self.failures += 1
        self.skip = min(2 ** self.failures - 1, _MAX_SKIP)
        return False

    def add(self, block: str, sink: Collector) -> bool:
        """Decode ``block`` (a JSON array text) into ``sink``; False when it does not fit."""
        try:
            records = self.decoder.decode(block)
        except self._errors:
            records = None
        if not records:
            return self._failed()
        # one list per field (comprehensions: no tuple per record, unlike ``astuple`` + ``zip``)
        ts = [r.ts for r in records]
        dur = [r.dur for r in records]
        start = number_texts_to_ns(ts, 3)
        duration = number_texts_to_ns(dur, 3) if start is not None else None
        if start is None or duration is None:
            return self._failed()
        self.failures = 0
        ids: list[Any] = []
        for values in ([r.pid for r in records], [r.tid for r in records]):
            try:  # typed as integers: int64 unless one is outside it
                ids.append(np.fromiter(values, np.int64, len(values)))
            except OverflowError:
                ids.append(values)
        columns: dict[str, Sequence[Any]] = {}
        if self.keys:
            args = [r.args for r in records]
            columns = {key: list(map(attrgetter(f"a{i}"), args))
                       for i, key in enumerate(self.keys)}
        sink.add_complete([r.name for r in records], [r.cat for r in records], ids[0], ids[1],
                          start, duration, columns)
        return True


def _read_event_array(text: _Text, sink: Collector, *, bare: bool) -> None:
    """Stream the events of a ``[...]`` (opening bracket consumed) into ``sink``."""
    decoder = json.JSONDecoder(parse_float=str.encode)
    decode_block, block_errors = _block_decoder()
    typed = _TypedBlocks.create()
    text.skip_ws()
    if text.peek() == "]":
        text.pos += 1
        return
    first = True
    while True:
        if len(text.buf) - text.pos < _READ_CHARS:
            text.fill()
        cut = -1
        if first:  # a small first block: the typed decoder learns from it
            cut = _last_match(_EVENT_GAP, text.buf, text.pos, text.pos + _FIRST_BLOCK)
            first = False
        if cut < 0:
            cut = _last_match(_EVENT_GAP, text.buf, text.pos)
            if text.eof:
                cut = max(cut, _last_match(_ARRAY_END, text.buf, text.pos))
        batch: list[Any] | None = None
        if cut > text.pos:
            block = "".join(("[", text.buf[text.pos:cut + 1], "]"))  # one copy fewer than +
            if typed is not None and typed.ready() and typed.add(block, sink):
                text.pos = cut + 1
                if _after_event(text, bare):
                    return
                continue
            try:
                batch = decode_block(block)
            except block_errors:
                batch = None  # the cut fell inside an event, or the JSON is broken there
        if batch is not None:
            text.pos = cut + 1
            sink.add(batch)
            if typed is not None:
                typed.learn(batch)
            if _after_event(text, bare):
                return
            continue
        batch = []
        cut += text.dropped  # as a file position: reading on may drop text before it
        while True:  # one event at a time up to the cut (precise errors, any layout)
            batch.append(text.decode_value(decoder))
            ended = _after_event(text, bare)
            if ended or text.dropped + text.pos > cut:
                break
        sink.add(batch)
        if ended:
            return


def _after_event(text: _Text, bare: bool) -> bool:
    """Consume what follows an event: ``,`` (returns False) or the closing ``]`` (True).

    A bare array may end without ``]`` (optionally after a trailing comma), as the Chrome trace
    format allows for traces cut short: that warns and returns True.
    """
    text.skip_ws()
    char = text.peek()
    if char == "]":
        text.pos += 1
        return True
    if char == ",":
        text.pos += 1
        text.skip_ws()
        char = text.peek()
        if char == "]" and bare:
            text.pos += 1
            return True
        if char not in ("", "]"):
            return False
        if char == "]":
            raise text.syntax_error("a ',' before ']' (trailing comma)")
    if char == "" and bare:
        warnings.warn(f"{text.label}: the trace array has no closing ']' (allowed by the Chrome "
                      "trace format for traces cut short); all complete events were read",
                      stacklevel=5)
        return True
    if char == "":
        raise text.syntax_error("expected an event or ']'")
    raise text.syntax_error(f"expected ',' or ']' after an event, found {char!r}")


def _parse_trace(text: _Text, sink: Collector) -> dict[str, Any]:
    """Parse the whole file into ``sink``; returns the top-level keys other than traceEvents."""
    plain = json.JSONDecoder()
    text.skip_ws()
    char = text.peek()
    if char == "":
        raise TraceError("the file is empty", where=text.label,
                         fix="a Chrome trace is a JSON object with 'traceEvents' or a JSON array")
    top: dict[str, Any]
    if char == "[":
        text.pos += 1
        _read_event_array(text, sink, bare=True)
        found, top = True, {}
    elif char == "{":
        text.pos += 1
        found, top = False, {}
        first = True
        while True:
            text.skip_ws()
            char = text.peek()
            if char == "}":
                text.pos += 1
                break
            if not first:
                if char != ",":
                    raise text.syntax_error("expected ',' or '}' in the top-level object")
                text.pos += 1
                text.skip_ws()
            first = False
            if text.peek() != '"':
                raise text.syntax_error("expected a key string in the top-level object")
            key = text.decode_value(plain)
            text.skip_ws()
            if text.peek() != ":":
                raise text.syntax_error("expected ':' after a key")
            text.pos += 1
            text.skip_ws()
            if key == "traceEvents" and text.peek() == "[":
                text.pos += 1
                _read_event_array(text, sink, bare=False)
                found = True
            else:
                top[key] = text.decode_value(plain)
    else:
        raise TraceError(f"not a Chrome trace: the file starts with {text.buf[:20]!r}",
                         where=text.where(),
                         fix="a Chrome trace is a JSON object with 'traceEvents' or a JSON array")
    text.skip_ws()
    if text.peek() != "":
        raise text.syntax_error("unexpected data after the end of the trace")
    if not found:
        if "traceEvents" in top:
            raise TraceError(f"'traceEvents' is a {type(top['traceEvents']).__name__}, "
                             "not an array", where=text.label, fix="it must be a list of events")
        raise TraceError("not a Chrome trace: the JSON object has no 'traceEvents'",
                         where=f"{text.label} (keys: {sorted(top)[:8]})",
                         fix="pass a Chrome trace event file")
    return top


def read_chrome_trace(path_or_file: str | os.PathLike[str] | IO[Any]) -> pd.DataFrame:
    """Read a Chrome trace event file into one row per duration event.

    Args:
        path_or_file: a path (plain or gzip-compressed, recognised by content) or an open file
            (text or binary). The JSON is an object with ``traceEvents`` or a bare array (whose
            closing ``]`` may be missing, as the Chrome format allows; a warning says so).

    Returns:
        One row per ``"X"`` event and per ``"B"``/``"E"`` pair (matched per ``(pid, tid)`` as a
        stack, the ``E``'s args merged into the ``B``'s), in file order of the (begin) event.
        Columns: :data:`TRACE_COLUMNS` (``name``/``cat`` categorical, ``pid``/``tid`` int64,
        ``start_ns``/``dur_ns`` int64 nanoseconds from exact decimal ``ts``/``dur`` in
        microseconds), ``arg_<key>`` per args key, and ``problem`` (``""`` when fine). Unpaired
        ``B`` or ``E``, an ``E`` whose name differs from its ``B``, a missing ``ts`` or ``dur``
        and a negative duration give rows with ``problem`` set (``dur_ns`` 0 when unknown).
        ``df.attrs`` holds ``ignored_events`` (count per ``ph`` of events that are not rows:
        ``M`` metadata, ``C`` counters, instants ...), ``process_names`` ``{pid: name}``,
        ``thread_names`` ``{(pid, tid): name}``, ``trace_metadata`` (other top-level keys) and
        ``source``.

    Raises:
        TraceError: the file is not JSON, not a trace, or cut short; the message names the file,
            line, column and byte offset.
    """
    label, opened = _open_trace(path_or_file)
    sink = Collector()
    try:
        with paused_gc():  # millions of short-lived dicts, no cycles: don't scan them
            top = _parse_trace(_Text(opened, label), sink)
            sink.finish()
            frame = sink.frame()
    except RecursionError:
        raise TraceError("the trace nests arrays or objects deeper than the JSON reader "
                         "can follow", where=label,
                         fix="flatten the event args; nesting is not part of a trace") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise TraceError(f"the trace holds a value JSON readers cannot convert ({exc})",
                         where=label, fix="write numbers of at most 19 digits") from None
    finally:
        if opened is not path_or_file:
            opened.close()
    frame.attrs.update({
        "source": label,
        "ignored_events": dict(sink.ignored),
        "process_names": sink.process_names,
        "thread_names": sink.thread_names,
        "trace_metadata": {k: v for k, v in top.items()
                           if k in ("displayTimeUnit", "otherData", "metadata")},
    })
    return frame


def _open_trace(path_or_file: Any) -> tuple[str, IO[Any]]:
    if hasattr(path_or_file, "read"):
        label = str(getattr(path_or_file, "name", "<file>"))
        stream = path_or_file
        if hasattr(stream, "seekable") and stream.seekable() and "b" in getattr(
                stream, "mode", "b"):
            here = stream.tell()
            magic = stream.read(2)
            stream.seek(here)
            if isinstance(magic, bytes) and is_gzip(magic):
                return label, cast(IO[Any], io.BufferedReader(BoundedReader(
                    gzip.GzipFile(fileobj=stream, mode="rb"), f"{label} (gzip)")))
        return label, stream
    return open_input(path_or_file)
