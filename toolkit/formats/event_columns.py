"""Event frame columns: the reader frame that trace readers build, and the columns writers take.

Every trace reader (:func:`toolkit.formats.chrome_trace.read_chrome_trace`,
:func:`toolkit.formats.trace_csv.read_trace_csv`) returns the same columns
(:data:`TRACE_COLUMNS`, then ``arg_<key>`` columns, then ``problem``):

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

:class:`Collector` builds that frame block by block from decoded events (Chrome ``X`` events,
``B``/``E`` pairs, CSV rows); :func:`arg_column` turns one argument's values into a column;
:func:`start_and_duration` and :func:`integer_column` check the integer time columns a writer
is given; :func:`atomic_text` is the text file writers write through (all or nothing).
The event table schema these columns follow is :mod:`toolkit.formats.events`.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import operator
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import chain, compress, repeat
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.formats.exact_time import numbers_to_ns
from toolkit.limits import check, current
from toolkit.util.atomic import atomic_open

__all__ = ["TRACE_COLUMNS", "EVENT_FIELDS", "ARG_PREFIX", "json_default", "is_missing",
           "atomic_text", "integer_column", "start_and_duration", "add_problem", "name_of",
           "Collector", "arg_column"]


#: Leading columns of every frame the readers return (``arg_<key>`` columns and ``problem``
#: follow).
TRACE_COLUMNS: tuple[str, ...] = ("name", "cat", "pid", "tid", "start_ns", "dur_ns")


#: Columns of an event frame that the writer maps to fields of the event itself; every other
#: column goes into the event's ``args``.
EVENT_FIELDS = frozenset({"name", "cat", "pid", "tid", "track", "start_ns", "end_ns", "dur_ns"})


ARG_PREFIX = "arg_"


def json_default(value: Any) -> Any:
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


def is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


@contextlib.contextmanager
def atomic_text(path: Path) -> Iterator[IO[str]]:
    """A text file that appears at ``path`` only when the block ends without error.

    Written through :func:`toolkit.util.atomic.atomic_open` (a temporary file beside ``path``,
    fsync, ``os.replace``); a path ending in ``.gz`` is gzip-compressed.
    """
    with atomic_open(path) as raw:  # temporary file, fsync, rename (toolkit.util.atomic)
        if path.name.endswith(".gz"):
            with gzip.GzipFile(filename=path.name[:-3], mode="wb", fileobj=raw,
                               compresslevel=6, mtime=0) as packed:
                text = io.TextIOWrapper(packed, encoding="utf-8", newline="")
                yield text
                text.flush()
                text.detach()  # the gzip stream is closed by its block
        else:
            plain = io.TextIOWrapper(cast(Any, raw), encoding="utf-8", newline="",
                                     write_through=False)
            yield plain
            plain.flush()
            plain.detach()  # the file is synced and renamed by atomic_open


def integer_column(events: pd.DataFrame, column: str) -> np.ndarray:
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


def start_and_duration(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if "start_ns" not in events.columns:
        raise ToolkitError("an event frame needs a 'start_ns' column",
                           where=f"columns {list(events.columns)}",
                           fix="name the start-time column 'start_ns' (int64 nanoseconds)")
    start = integer_column(events, "start_ns")
    if "dur_ns" in events.columns:
        return start, integer_column(events, "dur_ns")
    if "end_ns" in events.columns:
        return start, integer_column(events, "end_ns") - start
    raise ToolkitError("an event frame needs a 'dur_ns' or an 'end_ns' column",
                       where=f"columns {list(events.columns)}",
                       fix="add dur_ns (int64 nanoseconds) or end_ns")


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


def _time_problems(start: tuple[np.ndarray, dict[int, str]],
                   duration: tuple[np.ndarray, dict[int, str]]) -> dict[int, str]:
    """``{row: problem}`` of ``X`` events from :func:`numbers_to_ns` of their ``ts`` and
    ``dur``: invalid times, then negative durations."""
    problems: dict[int, str] = {}
    for i, text in start[1].items():
        add_problem(problems, i, f"ts {text}")
    for i, text in duration[1].items():
        add_problem(problems, i, "X event without dur" if text == "missing" else f"dur {text}")
    for i in np.flatnonzero(duration[0] < 0).tolist():
        add_problem(problems, i, "negative duration")
    return problems


def add_problem(problems: dict[int, str], i: int, text: str) -> None:
    problems[i] = f"{problems[i]}; {text}" if i in problems else text


def name_of(value: Any) -> str:
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
                add_problem(problems, i, f"args is not an object ({value!r:.40})")
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
            values = [v if v is None else name_of(v) for v in values]
            fresh = dict.fromkeys(values)
        if not set(map(type, fresh)) <= {str, type(None)}:
            values = [v if v is None else name_of(v) for v in values]
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
    :meth:`Collector.pack`)."""

    __slots__ = ("args", "cat", "dur", "name", "ordinal", "pid", "problems", "size", "start",
                 "tid")

    def __init__(self, ordinal: np.ndarray, name: np.ndarray, cat: np.ndarray, pid: np.ndarray,
                 tid: np.ndarray, start: np.ndarray, dur: np.ndarray,
                 args: dict[str, tuple[str, Any]], problems: dict[int, str]) -> None:
        self.size = len(ordinal)
        self.ordinal = ordinal
        self.name, self.cat, self.pid, self.tid = name, cat, pid, tid
        self.start, self.dur, self.args, self.problems = start, dur, args, problems


class Collector:
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
        self._max_events = current().max_events_per_file

    # -- events -> segments -----------------------------------------------------------------

    def add(self, events: list[Any]) -> None:
        base = self.count
        self.count += len(events)
        if self.count > self._max_events:
            check("max_events_per_file", self.count, what="events of the trace (at least)")
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
        fields: list[Sequence[Any]]
        try:  # fast path: every event has every field
            fields = list(zip(*map(_X_FIELDS, events)))
            name, cat, pid, tid, ts, dur, args = fields
        except (KeyError, ValueError):
            fields = [[e.get(field) for e in events] for field in _X_FIELD_NAMES]
            name, cat, pid, tid, ts, dur, args = fields
        start = numbers_to_ns(ts, 3)
        duration = numbers_to_ns(dur, 3)
        problems = _time_problems(start, duration)
        self.append(ordinal, name, cat, pid, tid, start[0], duration[0],
                    _flatten_args(args, problems), problems)

    def add_complete(self, name: Sequence[Any], cat: Sequence[Any],
                     pid: Sequence[Any] | np.ndarray, tid: Sequence[Any] | np.ndarray,
                     start: tuple[np.ndarray, dict[int, str]],
                     duration: tuple[np.ndarray, dict[int, str]],
                     args: dict[str, Sequence[Any]]) -> None:
        """Append the rows of a batch of ``X`` events given as columns: what :meth:`add` does
        with the same events as dicts. ``start``/``duration`` are :func:`numbers_to_ns` of their
        ``ts``/``dur``; ``args`` holds one column per key, every event having every key."""
        base = self.count
        self.count += len(name)
        if self.count > self._max_events:
            check("max_events_per_file", self.count, what="events of the trace (at least)")
        self.append(np.arange(base, self.count, dtype=np.int64), name, cat, pid, tid,
                    start[0], duration[0], args, _time_problems(start, duration))

    def _other(self, ordinal: int, phase: Any, event: Any) -> None:
        if type(event) is not dict:
            self.loose.append((ordinal, {}, _NO_END, f"event is not a JSON object ({event!r:.40})"))
            return
        if phase == "B":
            self.stacks.setdefault(_track_of(event), []).append((ordinal, event))
        elif phase == "E":
            stack = self.stacks.get(_track_of(event))
            if not stack:
                self.loose.append((ordinal, event, _NO_END, "E without matching B"))
                return
            begin_ordinal, begin = stack.pop()
            problem = ""
            end_name = event.get("name")
            if end_name not in (None, "") and end_name != begin.get("name"):
                problem = (f"E name {name_of(end_name)!r} does not match "
                           f"B name {name_of(begin.get('name'))!r}")
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
            if (type(args) is dict and type(args.get("name")) is str
                    and _scalar(event.get("pid")) and _scalar(event.get("tid"))):
                if name == "process_name":
                    self.process_names[event.get("pid")] = args["name"]
                elif name == "thread_name":
                    self.thread_names[(event.get("pid"), event.get("tid"))] = args["name"]
        elif phase is None:
            self.loose.append((ordinal, event, _NO_END, "event without 'ph'"))
        else:
            self.ignored[name_of(phase)] += 1

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
        start, bad = numbers_to_ns([e.get("ts") for e in events], 3)
        for i, text in bad.items():
            if events[i]:  # a non-object event already says what is wrong
                add_problem(problems, i, f"ts {text}")
        paired = [i for i, row in enumerate(self.loose) if row[2] is not _NO_END]
        dur = np.zeros(len(events), dtype=np.int64)
        if paired:
            end, bad_end = numbers_to_ns([self.loose[i][2] for i in paired], 3)
            dur[paired] = end - start[paired]
            for j, text in bad_end.items():
                add_problem(problems, paired[j], f"E ts {text}")
                dur[paired[j]] = 0
            for i in bad:
                dur[i] = 0
        for i in np.flatnonzero(dur < 0).tolist():
            add_problem(problems, i, "negative duration")
        ordinals = np.array([row[0] for row in self.loose], dtype=np.int64)
        self.append(ordinals, [e.get("name") for e in events], [e.get("cat") for e in events],
                    [e.get("pid") for e in events], [e.get("tid") for e in events], start, dur,
                    _flatten_args([e.get("args") for e in events], problems), problems)
        self.loose.clear()

    # -- compact columns --------------------------------------------------------------------

    def append(self, ordinal: np.ndarray, name: Sequence[Any], cat: Sequence[Any],
               pid: Sequence[Any] | np.ndarray, tid: Sequence[Any] | np.ndarray,
               start: np.ndarray, dur: np.ndarray,
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
        items = list(chain.from_iterable(self.unpack(key, block) for block in blocks))
        return arg_column(items)

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
            columns[ARG_PREFIX + str(key)] = self.arg_series(key)
        texts: dict[str, int] = {"": 0}
        problem = np.zeros(total, dtype=np.intp)
        offset = 0
        for segment in segments:
            for i, text in segment.problems.items():
                problem[offset + i] = texts.setdefault(text, len(texts))
            offset += segment.size
        columns["problem"] = pd.Series(pd.array(list(texts), dtype=_STR_DTYPE).take(problem))
        frame = pd.DataFrame(columns, copy=False)  # fresh arrays: no consolidating copy
        ordinal = joined("ordinal", np.int64)
        if total > 1 and np.any(ordinal[1:] < ordinal[:-1]):
            frame = frame.take(np.argsort(ordinal, kind="stable")).reset_index(drop=True)
        return frame


def _id_column(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """pid/tid values -> ``int64`` when all are integers, else ``object`` (an ``int64`` array
    is taken as it is)."""
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        return values
    items: Sequence[Any] = values.tolist() if isinstance(values, np.ndarray) else values
    if set(map(type, items)) <= {int}:
        with contextlib.suppress(OverflowError):
            return np.fromiter(items, np.int64, len(items))
    return np.fromiter(_fix_floats(items), object, len(items))


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


def _scalar(value: Any) -> bool:
    """True for a value that can be a pid or tid (no list or object)."""
    return not isinstance(value, (list, dict))


def _track_of(event: dict[str, Any]) -> tuple[Any, Any]:
    """``(pid, tid)`` of an event as a dictionary key (a list or object id as its text: the
    row it becomes is flagged where pid and tid are read)."""
    pid, tid = event.get("pid"), event.get("tid")
    return (pid if _scalar(pid) else repr(pid), tid if _scalar(tid) else repr(tid))
