"""Chrome trace event files (the JSON that Perfetto and ``chrome://tracing`` open) and trace CSVs.

Times inside the toolkit are integer nanoseconds (``int64``). Chrome traces carry microseconds;
:func:`write_chrome_trace` prints them as exact decimals (``12.345``) and
:func:`read_chrome_trace` parses those decimals exactly (no float on the way), so ``start_ns`` and
``dur_ns`` survive a round trip bit for bit for every ``int64`` value, including the large values
of a monotonic clock counted since boot.

Every reader returns the same columns (:data:`TRACE_COLUMNS`, then ``arg_<key>`` columns, then
``problem``):

======== ===================================================================================
name     event name (categorical of ``str``)
cat      event category (categorical of ``str``; ``""`` when absent)
pid      process id (``int64``; ``object`` when a file uses non-integer ids)
tid      thread id (``int64``; ``object`` when a file uses non-integer ids)
start_ns start time (``int64`` nanoseconds, ``ts`` x 1000 rounded half to even)
dur_ns   duration (``int64`` nanoseconds; ``0`` for rows that cannot have one, see ``problem``)
arg_<k>  one column per key of the events' ``args`` objects, holding the original values
         (see :func:`arg_column`): ``int64`` when every row has an int, nullable ``Int64``
         when some rows lack it, ``float64`` for floats (NaN when missing), ``bool``,
         categorical for texts, else ``object`` with ``None`` where missing (ints stay ints)
problem  ``""`` when the row is fine, else what is wrong with it (unpaired ``B``/``E``,
         negative duration, missing ``ts`` ...). Such rows are kept, never dropped.
======== ===================================================================================

The reader streams: it decodes the file in blocks of a few MB with the standard library's C JSON
scanner and turns each block into columns before reading the next, so a 500 MB trace never exists
as one list of dicts.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import decimal
import gc
import gzip
import io
import json
import math
import operator
import os
import re
import uuid
import warnings
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from itertools import chain, compress, repeat
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError, TraceError

__all__ = [
    "TRACE_COLUMNS",
    "arg_column",
    "read_chrome_trace",
    "read_trace_csv",
    "write_chrome_trace",
    "write_trace_csv",
]

#: Leading columns of every frame the readers return (``arg_<key>`` columns and ``problem``
#: follow).
TRACE_COLUMNS: tuple[str, ...] = ("name", "cat", "pid", "tid", "start_ns", "dur_ns")

#: Columns of an event frame that the writer maps to fields of the event itself; every other
#: column goes into the event's ``args``.
_EVENT_FIELDS = frozenset({"name", "cat", "pid", "tid", "track", "start_ns", "end_ns", "dur_ns"})

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min
_ARG_PREFIX = "arg_"
_ROWS_PER_WRITE = 100_000
_READ_CHARS = 1 << 23  # characters decoded per block by the reader
_READ_BYTES = 1 << 22
_WS = re.compile(r"[ \t\n\r]*")
# A place where one event ends and the next begins ("}, {" with any white space).
_EVENT_GAP = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
_ARRAY_END = re.compile(r"\}[ \t\n\r]*\]")
_PLAIN_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_STRIP_DOT = operator.methodcaller("replace", b".", b"")
_UNIT_DIGITS = {"ns": 0, "us": 3, "ms": 6, "s": 9}


# --------------------------------------------------------------------------------------------
# Exact decimal <-> integer nanoseconds


def _fraction_text(ns: int) -> str:
    """``".123"`` style text for ``ns % 1000`` with trailing zeros removed (``""`` for 0)."""
    return f".{ns:03d}".rstrip("0").rstrip(".")


_FRACTIONS = np.array([_fraction_text(i) for i in range(1000)], dtype=object)


def _us_texts(ns: np.ndarray) -> list[str]:
    """JSON number texts of ``ns / 1000`` printed exactly (``12345`` -> ``"12.345"``).

    Returns one ``str`` per element of the ``int64`` array ``ns``.
    """
    ns = np.asarray(ns, dtype=np.int64)
    neg = ns < 0
    mag = np.abs(ns).view(np.uint64)  # abs(INT64_MIN) wraps to itself; as uint64 it is 2**63
    whole = (mag // np.uint64(1000)).tolist()
    frac = _FRACTIONS[(mag % np.uint64(1000)).astype(np.intp)].tolist()
    texts = list(map(operator.add, map(str, whole), frac))
    for i in np.flatnonzero(neg).tolist():
        texts[i] = "-" + texts[i]
    return texts


def _scaled_decimal(text: str, digits: int) -> int | None:
    """``round_half_even(value(text) * 10**digits)`` for a decimal number text, else ``None``.

    Accepts exponents (``1.5e3``); returns ``None`` for text that is not a finite number.
    """
    try:
        value = decimal.Decimal(text.strip())
    except (decimal.InvalidOperation, ValueError):
        return None
    if not value.is_finite():
        return None
    if value.adjusted() > 40:  # far outside int64 either way; don't build a huge int
        return _INT64_MAX + 1
    return int(value.scaleb(digits).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def _bytes_to_scaled(texts: Sequence[bytes | int], digits: int) -> np.ndarray:
    """Plain decimal texts (``b"-12.5"``, no exponent) or ints -> ``int64`` ``value * 10**digits``,
    exactly.

    Works on the texts as one byte matrix. Raises ``ValueError`` when a text is not a plain
    decimal with at most ``digits`` fractional digits, or ``OverflowError`` when a value does not
    fit, so that the caller can take the exact one-by-one path (:func:`_scaled_decimal`).
    """
    n = len(texts)
    array = np.array(texts, dtype=bytes)
    width = array.dtype.itemsize
    if n == 0 or width == 0:
        raise ValueError("empty text")
    chars = array.view(np.uint8).reshape(n, width)
    if np.any((chars | 0x20) == ord("e")):
        raise ValueError("exponent")
    is_dot = chars == ord(".")
    dot = is_dot.argmax(axis=1)
    has_dot = is_dot[np.arange(n), dot]
    dot = np.where(has_dot, dot, width)
    length = np.count_nonzero(chars, axis=1)
    frac_digits = np.where(has_dot, length - dot - 1, 0)
    if frac_digits.max() > digits:
        raise ValueError("more fractional digits than kept")
    column = np.arange(width)
    whole_chars = np.where(column[None, :] >= dot[:, None], np.uint8(0), chars)
    whole = whole_chars.view(f"S{width}").ravel().astype(np.int64)  # ValueError if not digits
    scale = 10**digits
    limit = (_INT64_MAX - (scale - 1)) // scale
    if np.any((whole > limit) | (whole < -limit)):
        raise OverflowError("does not fit int64")
    magnitude = np.abs(whole) * scale
    for j in range(digits):  # fractional digits, missing ones count as 0
        position = np.minimum(dot + 1 + j, width - 1)
        digit = chars[np.arange(n), position].astype(np.int64) - ord("0")
        present = j < frac_digits
        if np.any(present & ((digit < 0) | (digit > 9))):
            raise ValueError("not a digit")
        magnitude += np.where(present, digit, 0) * 10 ** (digits - 1 - j)
    return np.where(chars[:, 0] == ord("-"), -magnitude, magnitude)


def _numbers_to_ns(values: Sequence[Any], digits: int) -> tuple[np.ndarray, dict[int, str]]:
    """JSON-decoded numbers in a unit of ``10**-digits`` s -> ``int64`` nanoseconds.

    ``values`` holds ``int`` (JSON integers), ``bytes`` (the text of JSON numbers with a fraction
    or an exponent), ``None`` (absent) or anything else (invalid). Returns the nanoseconds
    (``0`` where invalid) and ``{position: problem}`` for the invalid ones.
    """
    n = len(values)
    out = np.zeros(n, dtype=np.int64)
    problems: dict[int, str] = {}
    if n == 0:
        return out, problems
    kinds = set(map(type, values))
    if kinds <= {int, bytes}:
        try:
            if kinds == {int}:
                number = np.fromiter(values, np.int64, n)
                scale = 10**digits
                if number.max() > _INT64_MAX // scale or number.min() < -(_INT64_MAX // scale):
                    raise OverflowError("does not fit int64")
                return number * scale, problems
            return _bytes_to_scaled(values, digits), problems  # numpy prints the ints
        except (ValueError, OverflowError):
            pass  # exponents, rounding, overflow: exact path below, one value at a time
    for i, value in enumerate(values):
        kind = type(value)
        if kind is int:
            scaled: int | None = value * 10**digits
        elif kind is bytes:
            value = value.decode("utf-8", "replace")
            scaled = _scaled_decimal(value, digits)
        elif value is None:
            problems[i] = "missing"
            continue
        else:
            problems[i] = f"not a number ({value!r})"
            continue
        if scaled is None:
            problems[i] = f"not a number ({value!r})"
        elif not _INT64_MIN <= scaled <= _INT64_MAX:
            problems[i] = "outside the int64 nanosecond range"
        else:
            out[i] = scaled
    return out, problems


# --------------------------------------------------------------------------------------------
# Values -> JSON text (writer)


def _json_default(value: Any) -> Any:
    """``json.dumps`` hook for numpy scalars/arrays, sets, tuples and paths."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _dump(value: Any) -> str | None:
    """JSON text of one arg value; ``None`` for missing or non-finite values (key left out)."""
    if _is_missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if math.isfinite(value) else None
    return json.dumps(value, default=_json_default, allow_nan=False, separators=(",", ":"))


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


# --------------------------------------------------------------------------------------------
# Writers


@contextlib.contextmanager
def _atomic_text(path: Path) -> Iterator[IO[str]]:
    """A text file that appears at ``path`` only when the block ends without error.

    Writes a temporary file beside ``path`` and renames it over ``path`` (``os.replace``); a path
    ending in ``.gz`` is gzip-compressed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temp, "xb") as raw:
            if path.name.endswith(".gz"):
                packed = gzip.GzipFile(filename=path.name[:-3], mode="wb", fileobj=raw,
                                       compresslevel=6, mtime=0)
                with packed, io.TextIOWrapper(packed, encoding="utf-8", newline="") as text:
                    yield text
            else:
                with io.TextIOWrapper(raw, encoding="utf-8", newline="",
                                      write_through=False) as text:
                    yield text
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def _integer_column(events: pd.DataFrame, column: str) -> np.ndarray:
    """Column ``column`` as ``int64``; ``ToolkitError`` if it is missing or not whole numbers."""
    values = events[column]
    if values.dtype.kind in "iu" and isinstance(values.dtype, np.dtype):
        return values.to_numpy(dtype=np.int64)
    try:
        as_float = values.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise ToolkitError(f"column {column!r} must hold integer nanoseconds",
                           where=f"{column} (dtype {values.dtype})",
                           fix="convert it with .astype('int64')") from exc
    bad = ~np.isfinite(as_float) | (as_float != np.round(as_float))
    if bad.any():
        row = events.index[int(np.flatnonzero(bad)[0])]
        raise ToolkitError(f"column {column!r} must hold integer nanoseconds, "
                           f"got {values.iloc[int(np.flatnonzero(bad)[0])]!r}",
                           where=f"row {row!r}", fix="fill or drop that row")
    return values.to_numpy(dtype=object).astype(np.int64)


def _start_and_duration(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if "start_ns" not in events.columns:
        raise ToolkitError("an event frame needs a 'start_ns' column",
                           where=f"columns {list(events.columns)}",
                           fix="name the start-time column 'start_ns' (int64 nanoseconds)")
    start = _integer_column(events, "start_ns")
    if "dur_ns" in events.columns:
        return start, _integer_column(events, "dur_ns")
    if "end_ns" in events.columns:
        return start, _integer_column(events, "end_ns") - start
    raise ToolkitError("an event frame needs a 'dur_ns' or an 'end_ns' column",
                       where=f"columns {list(events.columns)}",
                       fix="add dur_ns (int64 nanoseconds) or end_ns")


def _arg_columns(events: pd.DataFrame) -> list[tuple[str, Any]]:
    """``(args key, column label)`` for every column that goes into ``args``."""
    out: list[tuple[str, Any]] = []
    seen: dict[str, Any] = {}
    for column in events.columns:
        label = str(column)
        if label in _EVENT_FIELDS:
            continue
        key = label[len(_ARG_PREFIX):] if label.startswith(_ARG_PREFIX) else label
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
    start, duration = _start_and_duration(events)
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
    pids = (_integer_column(events, "pid") if "pid" in events.columns
            else np.full(n, pid, dtype=np.int64))
    tids, thread_names = _thread_ids(events)
    arg_columns = _arg_columns(events)
    try:
        other_data = json.dumps(dict(metadata or {}), default=_json_default, allow_nan=False)
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

    with _atomic_text(path) as out:
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
                    fragments.append([prefix + t for t in texts])
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
                    _us_texts(start[rows]), _us_texts(duration[rows]), args)
            ]
            out.write(separator)
            out.write(",\n".join(lines))
            separator = ",\n"
        out.write(f'\n],\n"displayTimeUnit":"ns",\n"otherData":{other_data}}}\n')
    return path


def write_trace_csv(events: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``events`` as CSV, atomically (``.gz`` names are gzip-compressed).

    Returns:
        The path written. Columns: ``name``, ``cat``, ``pid``, ``tid``, ``track`` (those the frame
        has), ``start_ns``, ``end_ns``, ``dur_ns`` (integer nanoseconds), then every other column
        in frame order; list/dict cells are written as JSON text. Read it back with
        ``read_trace_csv(path, key_column="name", start_column="start_ns",
        duration_column="dur_ns")``.
    """
    path = Path(path)
    start, duration = _start_and_duration(events)
    front = [c for c in ("name", "cat", "pid", "tid", "track") if c in events.columns]
    if "name" not in front and "key" in events.columns:
        front.insert(0, "key")
    rest = [c for c in events.columns if c not in _EVENT_FIELDS and c not in front]
    table = pd.DataFrame({c: events[c].to_numpy() for c in front}, index=range(len(events)))
    table["start_ns"] = start
    table["end_ns"] = start + duration
    table["dur_ns"] = duration
    for column in rest:
        values = events[column]
        if values.dtype == object:
            values = values.map(lambda v: json.dumps(v, default=_json_default)
                                if isinstance(v, (list, tuple, dict)) else v)
        table[column] = values.to_numpy()
    with _atomic_text(path) as out:
        table.to_csv(out, index=False, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    return path


# --------------------------------------------------------------------------------------------
# Reading: a refillable text buffer over the file


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

    def fill(self, want: int | None = None) -> bool:
        """Append at least ``want`` (default: a block) more characters unless the data ends.

        Returns False when no more characters came.
        """
        if self.eof:
            return False
        want = _READ_CHARS if want is None else want
        if self.pos:
            dropped = self.buf[: self.pos]
            self._dropped_bytes += (len(dropped) if dropped.isascii()
                                    else len(dropped.encode("utf-8", "surrogatepass")))
            newline = dropped.rfind("\n")
            if newline >= 0:
                self._dropped_lines += dropped.count("\n")
                self._dropped_column = len(dropped) - newline - 1
            else:
                self._dropped_column += len(dropped)
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

    def where(self, pos: int | None = None) -> str:
        """``"<file> line L, column C, byte offset B"`` of ``pos`` (default: the current)."""
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
            self.pos = _WS.match(self.buf, self.pos).end()
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


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector; restores its previous state on exit."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _last_match(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Position of the ``}`` of the last match of ``pattern`` in ``text[start:]``, or -1."""
    end = len(text)
    window = max(start, end - 65536)
    while True:
        found = -1
        for found_match in pattern.finditer(text, window, end):
            found = found_match.start()
        if found >= 0 or window == start:
            return found
        window = start


def _read_event_array(text: _Text, sink: _Collector, *, bare: bool) -> None:
    """Stream the events of a ``[...]`` (opening bracket consumed) into ``sink``."""
    decoder = json.JSONDecoder(parse_float=str.encode)
    text.skip_ws()
    if text.peek() == "]":
        text.pos += 1
        return
    while True:
        if len(text.buf) - text.pos < _READ_CHARS:
            text.fill()
        cut = _last_match(_EVENT_GAP, text.buf, text.pos)
        if text.eof:
            cut = max(cut, _last_match(_ARRAY_END, text.buf, text.pos))
        batch: list[Any] | None = None
        if cut > text.pos:
            try:
                batch = decoder.decode("[" + text.buf[text.pos:cut + 1] + "]")
            except json.JSONDecodeError:
                batch = None  # the cut fell inside an event, or the JSON is broken there
        if batch is not None:
            text.pos = cut + 1
            sink.add(batch)
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


def _parse_trace(text: _Text, sink: _Collector) -> dict[str, Any]:
    """Parse the whole file into ``sink``; returns the top-level keys other than traceEvents."""
    plain = json.JSONDecoder()
    text.skip_ws()
    char = text.peek()
    if char == "":
        raise TraceError("the file is empty", where=text.label,
                         fix="a Chrome trace is a JSON object with 'traceEvents' or a JSON array")
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


# --------------------------------------------------------------------------------------------
# Reading: events -> columns

_X_FIELD_NAMES = ("name", "cat", "pid", "tid", "ts", "dur", "args")
_X_FIELDS = operator.itemgetter(*_X_FIELD_NAMES)
_NO_END = object()  # marks a row without an end event (unpaired B or E, bad event)
_STR_DTYPE = pd.Series([""]).dtype  # pandas' default dtype for text columns


def _floats_back(value: Any) -> Any:
    """Turn the ``bytes`` number texts of the event decoder back into floats, recursively."""
    kind = type(value)
    if kind is bytes:
        return float(value)
    if kind is list:
        return [_floats_back(v) for v in value]
    if kind is dict:
        return {k: _floats_back(v) for k, v in value.items()}
    return value


def _fix_floats(column: Sequence[Any]) -> Sequence[Any]:
    if set(map(type, column)) & {bytes, list, dict}:
        return [_floats_back(v) for v in column]
    return column


def _add_problem(problems: dict[int, str], i: int, text: str) -> None:
    problems[i] = f"{problems[i]}; {text}" if i in problems else text


def _name_of(value: Any) -> str:
    """Text of a name-like JSON value (``""`` for missing)."""
    if value is None:
        return ""
    if type(value) is str:
        return value
    return json.dumps(_floats_back(value))


def _flatten_args(args: Sequence[Any], problems: dict[int, str]) -> dict[str, Sequence[Any]]:
    """``args`` objects -> ``{key: values}`` in order of first appearance (``None`` if absent)."""
    n = len(args)
    if n and type(args[0]) is dict:
        keys = tuple(args[0])
        try:  # fast path: every row is a dict with the same keys
            if sum(map(len, args)) == len(keys) * n:
                if len(keys) == 1:
                    return {keys[0]: _fix_floats(list(map(operator.itemgetter(keys[0]), args)))}
                if keys:
                    columns = zip(*map(operator.itemgetter(*keys), args))
                    return {k: _fix_floats(v) for k, v in zip(keys, columns)}
                return {}
        except (KeyError, TypeError):
            pass
    if set(map(type, args)) != {dict}:
        for i, value in enumerate(args):
            if value is not None and type(value) is not dict:
                _add_problem(problems, i, f"args is not an object ({value!r:.40})")
        args = [a if type(a) is dict else {} for a in args]
    keys_seen = dict.fromkeys(chain.from_iterable(args))
    return {key: _fix_floats([a.get(key) for a in args]) for key in keys_seen}


class _Interner:
    """int32 codes for the texts of one column, shared by all blocks; ``None`` has code -1."""

    __slots__ = ("codes", "texts")

    def __init__(self) -> None:
        self.codes: dict[Any, int] = {None: -1}
        self.texts: list[str] = []

    def encode(self, values: Sequence[Any], *, none_is_empty: bool) -> np.ndarray:
        """Codes of ``values`` (other JSON values become text; ``None`` becomes ``""`` when
        ``none_is_empty``, else code -1)."""
        try:
            fresh = dict.fromkeys(values)
        except TypeError:  # lists or dicts among the values
            values = [v if v is None else _name_of(v) for v in values]
            fresh = dict.fromkeys(values)
        if not set(map(type, fresh)) <= {str, type(None)}:
            values = [v if v is None else _name_of(v) for v in values]
            fresh = dict.fromkeys(values)
        if none_is_empty and None in fresh:
            values = ["" if v is None else v for v in values]
            fresh = dict.fromkeys(values)
        codes = self.codes
        for text in fresh:
            if text not in codes:
                codes[text] = len(self.texts)
                self.texts.append(text)
        return np.fromiter(map(codes.__getitem__, values), np.int32, len(values))

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=pd.Index(self.texts, dtype=_STR_DTYPE))


class _Segment:
    """Compact columns of a run of output rows; ``ordinal`` is each row's position among the
    events. Texts are codes of the collector's interners; args are packed per key (see
    :meth:`_Collector.pack`)."""

    __slots__ = ("args", "cat", "dur", "name", "ordinal", "pid", "problems", "size", "start",
                 "tid")

    def __init__(self, ordinal: np.ndarray, name: np.ndarray, cat: np.ndarray, pid: np.ndarray,
                 tid: np.ndarray, start: np.ndarray, dur: np.ndarray,
                 args: dict[str, tuple[str, Any]], problems: dict[int, str]) -> None:
        self.size = len(ordinal)
        self.ordinal = ordinal
        self.name, self.cat, self.pid, self.tid = name, cat, pid, tid
        self.start, self.dur, self.args, self.problems = start, dur, args, problems


class _Collector:
    """Turns batches of decoded events into compact :class:`_Segment` columns."""

    def __init__(self) -> None:
        self.segments: list[_Segment] = []
        self.count = 0
        self.ignored: Counter[str] = Counter()
        self.process_names: dict[Any, str] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.stacks: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = {}
        # (ordinal, begin event, end ts or _NO_END, problem) of rows not from "X" events
        self.loose: list[tuple[int, dict[str, Any], Any, str]] = []
        self.names = _Interner()
        self.cats = _Interner()
        self.arg_texts: dict[str, _Interner] = {}

    # -- events -> segments -----------------------------------------------------------------

    def add(self, events: list[Any]) -> None:
        base = self.count
        self.count += len(events)
        try:
            phases = [e.get("ph") for e in events]
        except AttributeError:
            phases = [e.get("ph") if type(e) is dict else None for e in events]
        if phases.count("X") == len(events):
            self._complete(events, np.arange(base, base + len(events), dtype=np.int64))
            return
        complete = [p == "X" for p in phases]
        if any(complete):
            chosen = np.flatnonzero(np.fromiter(complete, bool, len(events)))
            self._complete(list(compress(events, complete)), chosen.astype(np.int64) + base)
        for i, (phase, event) in enumerate(zip(phases, events)):
            if phase != "X":
                self._other(base + i, phase, event)

    def _complete(self, events: Sequence[dict[str, Any]], ordinal: np.ndarray) -> None:
        """Append the rows of ``X`` events (``start``/``dur`` from ``ts``/``dur``)."""
        try:  # fast path: every event has every field
            name, cat, pid, tid, ts, dur, args = zip(*map(_X_FIELDS, events))
        except (KeyError, ValueError):
            name, cat, pid, tid, ts, dur, args = (
                [e.get(field) for e in events] for field in _X_FIELD_NAMES)
        problems: dict[int, str] = {}
        start, bad = _numbers_to_ns(ts, 3)
        for i, text in bad.items():
            _add_problem(problems, i, f"ts {text}")
        duration, bad = _numbers_to_ns(dur, 3)
        for i, text in bad.items():
            _add_problem(problems, i, "X event without dur" if text == "missing" else f"dur {text}")
        for i in np.flatnonzero(duration < 0).tolist():
            _add_problem(problems, i, "negative duration")
        self.append(ordinal, name, cat, pid, tid, start, duration,
                    _flatten_args(args, problems), problems)

    def _other(self, ordinal: int, phase: Any, event: Any) -> None:
        if type(event) is not dict:
            self.loose.append((ordinal, {}, _NO_END, f"event is not a JSON object ({event!r:.40})"))
            return
        if phase == "B":
            self.stacks.setdefault((event.get("pid"), event.get("tid")), []).append(
                (ordinal, event))
        elif phase == "E":
            stack = self.stacks.get((event.get("pid"), event.get("tid")))
            if not stack:
                self.loose.append((ordinal, event, _NO_END, "E without matching B"))
                return
            begin_ordinal, begin = stack.pop()
            problem = ""
            end_name = event.get("name")
            if end_name not in (None, "") and end_name != begin.get("name"):
                problem = (f"E name {_name_of(end_name)!r} does not match "
                           f"B name {_name_of(begin.get('name'))!r}")
            end_args = event.get("args")
            if type(end_args) is dict and end_args:
                begin_args = begin.get("args")
                merged = dict(begin_args) if type(begin_args) is dict else {}
                merged.update(end_args)
                begin = {**begin, "args": merged}
            self.loose.append((begin_ordinal, begin, event.get("ts"), problem))
        elif phase == "M":
            self.ignored["M"] += 1
            name, args = event.get("name"), event.get("args")
            if type(args) is dict and type(args.get("name")) is str:
                if name == "process_name":
                    self.process_names[event.get("pid")] = args["name"]
                elif name == "thread_name":
                    self.thread_names[(event.get("pid"), event.get("tid"))] = args["name"]
        elif phase is None:
            self.loose.append((ordinal, event, _NO_END, "event without 'ph'"))
        else:
            self.ignored[_name_of(phase)] += 1

    def finish(self) -> None:
        """Unmatched ``B`` events and the rows of ``B``/``E`` pairs become one last segment."""
        for stack in self.stacks.values():
            for ordinal, begin in stack:
                self.loose.append((ordinal, begin, _NO_END, "B without matching E"))
        self.stacks.clear()
        if not self.loose:
            return
        self.loose.sort(key=operator.itemgetter(0))
        events = [row[1] for row in self.loose]
        problems = {i: row[3] for i, row in enumerate(self.loose) if row[3]}
        start, bad = _numbers_to_ns([e.get("ts") for e in events], 3)
        for i, text in bad.items():
            if events[i]:  # a non-object event already says what is wrong
                _add_problem(problems, i, f"ts {text}")
        paired = [i for i, row in enumerate(self.loose) if row[2] is not _NO_END]
        dur = np.zeros(len(events), dtype=np.int64)
        if paired:
            end, bad_end = _numbers_to_ns([self.loose[i][2] for i in paired], 3)
            dur[paired] = end - start[paired]
            for j, text in bad_end.items():
                _add_problem(problems, paired[j], f"E ts {text}")
                dur[paired[j]] = 0
            for i in bad:
                dur[i] = 0
        for i in np.flatnonzero(dur < 0).tolist():
            _add_problem(problems, i, "negative duration")
        ordinal = np.array([row[0] for row in self.loose], dtype=np.int64)
        self.append(ordinal, [e.get("name") for e in events], [e.get("cat") for e in events],
                    [e.get("pid") for e in events], [e.get("tid") for e in events], start, dur,
                    _flatten_args([e.get("args") for e in events], problems), problems)
        self.loose.clear()

    # -- compact columns --------------------------------------------------------------------

    def append(self, ordinal: np.ndarray, name: Sequence[Any], cat: Sequence[Any],
               pid: Sequence[Any], tid: Sequence[Any], start: np.ndarray, dur: np.ndarray,
               args: dict[str, Sequence[Any]], problems: dict[int, str]) -> None:
        """Append rows given as Python values; they are packed into compact columns."""
        self.segments.append(_Segment(
            ordinal, self.names.encode(name, none_is_empty=True),
            self.cats.encode(cat, none_is_empty=True), _id_column(pid), _id_column(tid),
            start, dur, {key: self.pack(key, values) for key, values in args.items()},
            problems))

    def pack(self, key: str, values: Sequence[Any]) -> tuple[str, Any]:
        """One block of an args column as ``(kind, data)``: ``"i"`` int64 array, ``"I"`` (int64
        array, missing mask), ``"f"`` float64 array (NaN missing), ``"s"`` text codes (-1
        missing), ``"n"`` row count (all missing) or ``"o"`` the Python values."""
        kinds = set(map(type, values))
        none = type(None)
        with contextlib.suppress(OverflowError):
            if kinds == {int}:
                return "i", np.fromiter(values, np.int64, len(values))
            if kinds == {int, none}:
                missing = np.fromiter(map(operator.is_, values, repeat(None)), bool, len(values))
                return "I", (np.fromiter((0 if v is None else v for v in values), np.int64,
                                         len(values)), missing)
        if float in kinds and kinds <= {float, none}:
            return "f", np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        if str in kinds and kinds <= {str, none}:
            texts = self.arg_texts.setdefault(key, _Interner())
            return "s", texts.encode(values, none_is_empty=False)
        if kinds == {none}:
            return "n", len(values)
        return "o", list(values)

    def unpack(self, key: str, block: tuple[str, Any]) -> list[Any]:
        """The Python values of a packed block (``None`` where missing)."""
        kind, data = block
        if kind == "i":
            return data.tolist()
        if kind == "I":
            return [None if gap else v for v, gap in zip(data[0].tolist(), data[1].tolist())]
        if kind == "f":
            return [None if v != v else v for v in data.tolist()]
        if kind == "s":
            texts = self.arg_texts[key].texts
            return [texts[c] if c >= 0 else None for c in data.tolist()]
        if kind == "n":
            return [None] * data
        return list(data)

    def arg_series(self, key: str) -> Any:
        """All blocks of args column ``key`` as one column (dtypes as :func:`arg_column`)."""
        blocks = [s.args.get(key, ("n", s.size)) for s in self.segments]
        kinds = {kind for kind, _ in blocks}
        present = kinds - {"n"}
        if present == {"i"} and kinds == present:
            return np.concatenate([data for _, data in blocks])
        if present and present <= {"i", "I"}:
            values = np.concatenate([data if kind == "i" else data[0] if kind == "I"
                                     else np.zeros(data, np.int64) for kind, data in blocks])
            missing = np.concatenate([np.zeros(len(data), bool) if kind == "i" else data[1]
                                      if kind == "I" else np.ones(data, bool)
                                      for kind, data in blocks])
            return pd.arrays.IntegerArray(values, missing)
        if present == {"f"}:
            return np.concatenate([data if kind == "f" else np.full(data, np.nan)
                                   for kind, data in blocks])
        if present == {"s"}:
            codes = np.concatenate([data if kind == "s" else np.full(data, -1, np.int32)
                                    for kind, data in blocks])
            return self.arg_texts[key].categorical(codes)
        values = list(chain.from_iterable(self.unpack(key, block) for block in blocks))
        return arg_column(values)

    def frame(self) -> pd.DataFrame:
        """All segments as the reader frame, rows in order of ``ordinal``."""
        segments = self.segments
        total = sum(s.size for s in segments)

        def joined(attribute: str, dtype: Any) -> np.ndarray:
            parts = [getattr(s, attribute) for s in segments]
            return np.concatenate(parts) if parts else np.zeros(0, dtype)

        ids: dict[str, np.ndarray] = {}
        for column in ("pid", "tid"):
            parts = [getattr(s, column) for s in segments]
            if any(p.dtype == object for p in parts):
                parts = [p.astype(object) for p in parts]
            ids[column] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        columns: dict[str, Any] = {
            "name": self.names.categorical(joined("name", np.int32)),
            "cat": self.cats.categorical(joined("cat", np.int32)),
            "pid": ids["pid"],
            "tid": ids["tid"],
            "start_ns": joined("start", np.int64),
            "dur_ns": joined("dur", np.int64),
        }
        keys: dict[str, None] = {}
        for segment in segments:
            keys.update(dict.fromkeys(segment.args))
        for key in keys:
            columns[_ARG_PREFIX + str(key)] = self.arg_series(key)
        problem = np.full(total, "", dtype=object)
        offset = 0
        for segment in segments:
            for i, text in segment.problems.items():
                problem[offset + i] = text
            offset += segment.size
        columns["problem"] = pd.Series(problem, dtype=_STR_DTYPE)
        frame = pd.DataFrame(columns)
        ordinal = joined("ordinal", np.int64)
        if total > 1 and np.any(ordinal[1:] < ordinal[:-1]):
            frame = frame.take(np.argsort(ordinal, kind="stable")).reset_index(drop=True)
        return frame


def _id_column(values: Sequence[Any]) -> np.ndarray:
    """pid/tid values -> ``int64`` when all are integers, else ``object``."""
    if set(map(type, values)) <= {int}:
        with contextlib.suppress(OverflowError):
            return np.fromiter(values, np.int64, len(values))
    return np.fromiter(_fix_floats(values), object, len(values))


def arg_column(values: Sequence[Any]) -> np.ndarray | pd.api.extensions.ExtensionArray | pd.Series:
    """One column of argument values, ``None`` meaning "this row has no such argument".

    Returns, by the kinds of values present: only ints -> ``int64``; ints and missing ->
    nullable ``Int64``; only bools -> ``bool`` (with missing: ``boolean``); floats (and missing)
    -> ``float64`` with NaN; texts (and missing) -> categorical (NaN where missing); anything
    else (mixed int/str keys, lists, dicts) -> ``object`` Series holding the Python values with
    ``None`` where missing. Ints never turn into floats.
    """
    kinds = set(map(type, values))
    n = len(values)
    none = type(None)
    with contextlib.suppress(OverflowError, TypeError):
        if kinds == {int}:
            return np.fromiter(values, np.int64, n)
        if kinds == {int, none}:
            return pd.array(values, dtype="Int64")
    if kinds == {bool}:
        return np.fromiter(values, bool, n)
    if kinds == {bool, none}:
        return pd.array(values, dtype="boolean")
    if float in kinds and kinds <= {float, none}:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if str in kinds and kinds <= {str, none}:
        texts = _Interner()
        return texts.categorical(texts.encode(values, none_is_empty=False))
    return pd.Series(np.fromiter(values, object, n), dtype=object)


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
    sink = _Collector()
    try:
        with _gc_paused():  # millions of short-lived dicts, no cycles: don't scan them
            top = _parse_trace(_Text(opened, label), sink)
            sink.finish()
            frame = sink.frame()
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
            if isinstance(magic, bytes) and magic == b"\x1f\x8b":
                return label, gzip.GzipFile(fileobj=stream, mode="rb")
        return label, stream
    path = Path(path_or_file)
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise TraceError(f"cannot open the trace: {exc.strerror}", where=str(path),
                         fix="check the path") from exc
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        return f"{path} (gzip)", gzip.GzipFile(fileobj=raw, mode="rb")
    return str(path), raw


# --------------------------------------------------------------------------------------------
# CSV reading


def _texts_to_ns(values: np.ndarray, unit: str, clock_hz: Fraction | None
                 ) -> tuple[np.ndarray, dict[int, str]]:
    """CSV cells (str, numbers or missing) in ``unit`` -> exact ``int64`` nanoseconds + problems."""
    texts: list[Any] = []
    problems: dict[int, str] = {}
    for value in values.tolist():
        if _is_missing(value) or (type(value) is str and not value.strip()):
            texts.append(None)
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            texts.append(int(value))
        else:
            texts.append(str(value).strip().encode("utf-8", "replace"))
    if unit != "cycles":
        if all(type(t) is not bytes or _PLAIN_DECIMAL.fullmatch(t.decode()) for t in texts):
            return _numbers_to_ns(texts, _UNIT_DIGITS[unit])
        out = np.zeros(len(texts), np.int64)
        for i, t in enumerate(texts):
            one, bad = _numbers_to_ns([t], _UNIT_DIGITS[unit])
            out[i] = one[0]
            if bad:
                problems[i] = bad[0]
        return out, problems
    assert clock_hz is not None
    out = np.zeros(len(texts), np.int64)
    for i, t in enumerate(texts):
        if t is None:
            problems[i] = "missing"
            continue
        cycles = Fraction(t) if type(t) is int else None
        if cycles is None:
            try:
                cycles = Fraction(decimal.Decimal(t.decode()))
            except (decimal.InvalidOperation, ValueError):
                problems[i] = f"not a number ({t.decode()!r})"
                continue
        ns = round(cycles * 1_000_000_000 / clock_hz)  # Fraction rounds half to even
        if not _INT64_MIN <= ns <= _INT64_MAX:
            problems[i] = "outside the int64 nanosecond range"
        else:
            out[i] = ns
    return out, problems


def read_trace_csv(
    path: str | os.PathLike[str],
    *,
    key_column: str,
    start_column: str,
    duration_column: str | None = None,
    end_column: str | None = None,
    unit: str = "ns",
    clock_hz: float | None = None,
) -> pd.DataFrame:
    """Read a CSV of timed events (one row each) into the reader frame.

    Args:
        path: CSV file (``.gz`` allowed).
        key_column: column naming each event (debug handle, command id or op name); its values,
            as text, become ``name``.
        start_column: start time column.
        duration_column: duration column; give this or ``end_column``.
        end_column: end time column (``dur = end - start``).
        unit: unit of the time columns: ``"ns"``, ``"us"``, ``"ms"``, ``"s"`` (decimals parsed
            exactly, rounded half to even at 1 ns) or ``"cycles"`` (needs ``clock_hz``).
        clock_hz: clock frequency for ``unit="cycles"``.

    Returns:
        The columns of :func:`read_chrome_trace`: ``name``, ``cat`` (from a ``cat`` column, else
        ``""``), ``pid``/``tid`` (from such columns, else 0), ``start_ns``, ``dur_ns`` (int64
        nanoseconds), ``arg_<column>`` for every other column, and ``problem`` (missing or
        unreadable times, negative durations).
    """
    if unit not in (*_UNIT_DIGITS, "cycles"):
        raise ToolkitError(f"unknown time unit {unit!r}", where=str(path),
                           fix="use 'ns', 'us', 'ms', 's' or 'cycles' (with clock_hz)")
    hz: Fraction | None = None
    if unit == "cycles":
        if clock_hz is None or not clock_hz > 0:
            raise ToolkitError("unit='cycles' needs a positive clock_hz", where=str(path),
                               fix="pass clock_hz=<cycles per second>")
        hz = Fraction(clock_hz)
    if (duration_column is None) == (end_column is None):
        raise ToolkitError("give exactly one of duration_column and end_column", where=str(path))
    time_columns = [c for c in (start_column, duration_column, end_column) if c is not None]
    try:
        table = pd.read_csv(path, dtype={c: object for c in time_columns}, keep_default_na=False,
                            na_values=[""])
    except FileNotFoundError as exc:
        raise TraceError("cannot open the trace CSV", where=str(path), fix="check the path"
                         ) from exc
    except (pd.errors.ParserError, UnicodeDecodeError, EOFError, OSError) as exc:
        raise TraceError(f"cannot parse the CSV: {exc}", where=str(path)) from exc
    for column in (key_column, *time_columns):
        if column not in table.columns:
            raise TraceError(f"the CSV has no column {column!r}",
                             where=f"{path} (columns: {list(table.columns)})",
                             fix="pass the name of an existing column")
    n = len(table)
    problems: dict[int, str] = {}
    start, bad = _texts_to_ns(table[start_column].to_numpy(dtype=object), unit, hz)
    for i, text in bad.items():
        _add_problem(problems, i, f"{start_column} {text}")
    other_column = duration_column if duration_column is not None else end_column
    assert other_column is not None
    other, bad = _texts_to_ns(table[other_column].to_numpy(dtype=object), unit, hz)
    for i, text in bad.items():
        _add_problem(problems, i, f"{other_column} {text}")
    dur = other if duration_column is not None else other - start
    for i in bad:
        dur[i] = 0
    for i in np.flatnonzero(dur < 0).tolist():
        _add_problem(problems, i, "negative duration")

    def python_values(column: str) -> list[Any]:
        values = table[column].to_numpy(dtype=object).tolist()
        return [None if _is_missing(v) else v for v in values]

    used = {key_column, *time_columns}
    names = [_name_of(v) for v in python_values(key_column)]
    extras = {c: python_values(c) for c in table.columns if c not in used}
    sink = _Collector()
    sink.append(np.arange(n, dtype=np.int64), names, extras.pop("cat", [""] * n),
                extras.pop("pid", [0] * n), extras.pop("tid", [0] * n), start, dur,
                {str(c): v for c, v in extras.items()}, problems)
    frame = sink.frame()
    frame.attrs["source"] = str(path)
    return frame
