"""ONNX Runtime profiles (``SessionOptions.enable_profiling``): the JSON file decoded into columns.

ORT writes a bare JSON array of Chrome-style ``"X"`` events, one per line, in end-time order
(a run's ``model_run`` span comes after its kernels)::

    {"cat" : "Node","pid" :1,"tid" :1,"dur" :75,"ts" :10669,"ph" : "X",
     "name" :"/stem/conv/Conv_kernel_time","args" : {"op_name" : "Conv", "node_index" : "0",
     "provider" : "CPUExecutionProvider", "input_type_shape" : [{"float":[1,3,16,16]}], ...}}

``cat`` is ``Session`` (``model_loading_uri``, ``session_initialization``, ``model_run``,
``SequentialExecutor::Execute``) or ``Node`` (``<node>_kernel_time``; older releases also
``<node>_fence_before`` / ``_fence_after``). Numbers in ``args`` are strings; times are integer
microseconds.

:func:`read_ort_profile_events` reads every event into one DataFrame, a block of a few MB of
whole lines at a time (so a 600 MB profile never exists as one list of dicts). With
``msgspec`` installed (the ``onnx`` extra) each block is decoded into typed records that keep
only the fields used (the shapes as their raw JSON text); a block that does not fit those types
(numbers written as floats, another layout) and every block without ``msgspec`` is decoded with
:mod:`json` instead, with the same result.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pandas as pd

from toolkit.errors import TraceError
from toolkit.formats.compressed import open_input
from toolkit.util.gc_pause import paused_gc

__all__ = ["read_ort_profile_events", "looks_like_ort_profile", "ORT_EVENT_CAP",
           "ORT_COLUMNS"]

#: ORT stops recording after this many events (and logs one error line).
ORT_EVENT_CAP = 1_000_000
#: Columns of :func:`read_ort_profile_events`.
ORT_COLUMNS = ("cat", "name", "pid", "tid", "ts_ns", "dur_ns", "op_name", "provider",
               "node_index", "input_type_shape", "output_type_shape", "problem")

_BLOCK = 8 << 20
_ARRAY = re.compile(rb'\[\s*\{')
_CAT = re.compile(rb'"cat"\s*:\s*"(Session|Node)"')
_ORT_NAME = re.compile(rb'"(model_loading_uri|session_initialization|model_run|'
                       rb'SequentialExecutor::Execute|[^"\n]*_kernel_time)"')


def looks_like_ort_profile(head: bytes) -> bool:
    """True when the first bytes of a file look like an ORT profile: a bare JSON array whose
    events have ``cat`` ``Session`` or ``Node`` and one of ORT's event names
    (``model_loading_uri``, ``model_run``, ``<node>_kernel_time`` ...), however spaced."""
    text = head.lstrip()[:1 << 16]
    return (_ARRAY.match(text) is not None and _CAT.search(text) is not None
            and _ORT_NAME.search(text) is not None)


def _open(path: Path) -> IO[bytes]:
    return open_input(path, what="profile")[1]


def _one_event_per_line(text: bytes) -> bool:
    """True when every line of ``text`` is ``[``, ``]``, blank or one whole event
    (``{...}`` with an optional comma), as ORT writes its profile."""
    for line in text.split(b"\n"):
        s = line.strip()
        if s and s not in (b"[", b"]") and not (s.startswith(b"{") and
                                                s.endswith((b"}", b"},", b"}]"))):
            return False
    return True


def _array(rest: bytes, lines: Any) -> bytearray:
    """The events in ``rest + lines`` (whole lines of the file's array) as a JSON array of
    their own, built with one copy: ``[`` + first ``{`` .. last ``}`` + ``]``."""
    buf = bytearray(b"[")
    buf += rest
    buf += lines
    start = buf.find(b"{")
    if start < 0:
        return bytearray(b"[]")
    if start > 1:
        del buf[1:start]
    end = buf.rfind(b"}") + 1
    del buf[end:]
    buf += b"]"
    return buf


def _blocks(f: IO[bytes], where: str) -> Iterator[tuple[bytes, Any]]:
    """The file a block of whole lines at a time: ``(rest, lines)``, the text carried over
    from the last block and this block's complete lines (a memoryview); see :func:`_array`."""
    rest = b""
    first = True
    while True:
        try:
            chunk = f.read(_BLOCK)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(
                f"cannot read the profile ({exc})", where=where,
                fix=(
                    "the profile is truncated or damaged: run ONNX Runtime again with "
                    "enable_profiling and let end_profiling() finish writing it"
                ),
            ) from None
        if not chunk:
            break
        if first:
            head = (rest + chunk).lstrip()
            if not head:
                rest += chunk
                continue
            if not head.startswith(b"["):
                raise TraceError("not an ORT profile: the file does not start with a JSON "
                                 "array", where=where,
                                 fix="pass the .json file ORT's profiler wrote")
            first = False
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            rest += chunk
            continue
        yield rest, memoryview(chunk)[:cut]
        rest = chunk[cut:]
    if first:
        raise TraceError("the profile is empty", where=where,
                         fix="pass the .json file ORT's profiler wrote")
    if rest.strip():
        yield rest, b""


_MAX_US = 1 << 52  # times beyond this (143 years in us) are refused as invalid
_TEXT_FIELDS = ("cat", "name", "op_name", "provider", "node_index", "input_type_shape",
                "output_type_shape", "problem")


class _Columns:
    """Events gathered block by block: numbers as ``int64`` arrays; the text fields of each
    event as one code into a table of distinct field tuples (a profile repeats the same
    node's fields run after run, so the table stays small)."""

    def __init__(self) -> None:
        self.numbers: dict[str, list[np.ndarray]] = {k: [] for k in ("pid", "tid", "ts_ns",
                                                                     "dur_ns")}
        self.codes: list[np.ndarray] = []
        self.table: dict[tuple[Any, ...], int] = {}
        self.counter = itertools.count()
        self.fast_blocks = 0
        self.json_blocks = 0

    def _add_keys(self, keys: Iterable[tuple[Any, ...]], n: int) -> None:
        # setdefault with a running counter: one C call per event; codes are the counter value
        # at the first occurrence of each key (made dense in frame())
        codes = list(map(self.table.setdefault, keys, self.counter))
        self.codes.append(np.fromiter(codes, np.int64, n))

    def add_fast(self, records: list[Any]) -> bool:
        """Add typed records; False (nothing added) when a number is out of range, for the
        json reader to flag."""
        n = len(records)
        try:
            pid = np.fromiter([r.pid for r in records], np.int64, n)
            tid = np.fromiter([r.tid for r in records], np.int64, n)
            dur = np.fromiter([r.dur for r in records], np.int64, n)
            ts = np.fromiter([r.ts for r in records], np.int64, n)
        except OverflowError:
            return False
        if n and max(int(np.abs(dur).max()), int(np.abs(ts).max())) >= _MAX_US:
            return False
        num = self.numbers
        num["pid"].append(pid)
        num["tid"].append(tid)
        num["dur_ns"].append(dur * 1000)
        num["ts_ns"].append(ts * 1000)
        args = [r.args for r in records]
        # valid JSON text never holds a NUL byte: one join and one split instead of n copies;
        # shapes hold no text with spaces, so dropping whitespace gives the compact form
        shapes = []
        for raws in ([a.input_type_shape for a in args], [a.output_type_shape for a in args]):
            shapes.append(b"\0".join(raws).translate(None, b" \t\r\n").split(b"\0")
                          if n else [])
        # the keys built in one comprehension (not a list per field zipped together)
        keys = [(r.cat, r.name, a.op_name, a.provider, a.node_index, i, o, "")
                for r, a, i, o in zip(records, args, shapes[0], shapes[1])]
        self._add_keys(keys, n)
        self.fast_blocks += 1
        return True

    def add_json(self, events: list[Any], where: str) -> None:
        pid: list[int] = []
        tid: list[int] = []
        durs: list[int] = []
        tss: list[int] = []
        keys: list[tuple[Any, ...]] = []
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                raise TraceError(f"event {i} of a block is a {type(e).__name__}, not an object",
                                 where=where, fix="pass the JSON file ORT wrote")
            args = e.get("args")
            args = args if isinstance(args, dict) else {}
            problem = ""
            if e.get("ph", "X") != "X":
                problem = f"phase {e.get('ph')!r} is not a complete event"
            p_, t_ = _int(e.get("pid")), _int(e.get("tid"))
            pid.append(-1 if p_ is None else p_)
            tid.append(-1 if t_ is None else t_)
            dur, ts = _us_to_ns(e.get("dur")), _us_to_ns(e.get("ts"))
            if dur is None or ts is None:
                problem = problem or "missing or invalid ts/dur"
            durs.append(0 if dur is None else dur)
            tss.append(0 if ts is None else ts)
            idx = _int(args.get("node_index"))
            shapes = ["" if args.get(k) is None else
                      json.dumps(args.get(k), separators=(",", ":"))
                      for k in ("input_type_shape", "output_type_shape")]
            keys.append((_text(e.get("cat")), _text(e.get("name")),
                         _text(args.get("op_name")), _text(args.get("provider")),
                         "" if idx is None else str(idx), shapes[0], shapes[1], problem))
        num = self.numbers
        num["pid"].append(np.array(pid, dtype=np.int64))
        num["tid"].append(np.array(tid, dtype=np.int64))
        num["dur_ns"].append(np.array(durs, dtype=np.int64))
        num["ts_ns"].append(np.array(tss, dtype=np.int64))
        self._add_keys(keys, len(keys))
        self.json_blocks += 1


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _int(value: Any) -> int | None:
    """An integer from an int or a decimal text (ORT writes numbers in ``args`` as texts);
    None for anything else or outside ``int64`` / 1000."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, int) and -(1 << 52) < value < (1 << 52):
        return value
    return None


def _us_to_ns(value: Any) -> int | None:
    """Nanoseconds of a time in microseconds (int, float or decimal text), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                return None
    if isinstance(value, int):
        return value * 1000 if abs(value) < _MAX_US else None
    if isinstance(value, float) and np.isfinite(value) and abs(value) < _MAX_US:
        return round(value * 1000)
    return None


def _decode_block(body: bytearray, where: str) -> list[Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise TraceError(f"not valid JSON ({exc})", where=where,
                         fix="pass the JSON file ORT wrote (one event per line)") from None
    return value if isinstance(value, list) else [value]


_DECODER: Any = None


def _decoder() -> Any:
    """The typed ``msgspec`` decoder of a block, or None without ``msgspec``."""
    global _DECODER
    if _DECODER is None:
        try:
            import msgspec
        except ImportError:
            return None

        raw = msgspec.Raw(b"")
        args = msgspec.defstruct("Args", [
            ("op_name", str, ""), ("provider", str, ""), ("node_index", str, ""),
            ("input_type_shape", msgspec.Raw, raw), ("output_type_shape", msgspec.Raw, raw),
        ], gc=False, frozen=True)
        event = msgspec.defstruct("Event", [
            ("cat", str), ("name", str), ("ph", Literal["X"]), ("pid", int), ("tid", int),
            ("dur", int), ("ts", int), ("args", args, args()),
        ], gc=False)
        _DECODER = (msgspec.json.Decoder(list[event]),  # type: ignore[valid-type]
                    msgspec.DecodeError)
    return _DECODER


def _fast_decode(body: bytearray) -> list[Any] | None:
    """Typed records of a block, or None when the block does not fit the types (or holds an
    event whose ``ph`` is not ``"X"``)."""
    decoder, error = _decoder()
    try:
        records = decoder.decode(body)
    except (error, RecursionError, UnicodeDecodeError, ValueError):
        return None
    return records


def read_ort_profile_events(source: str | os.PathLike[str] | IO[bytes]
                            ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read every event of an ORT profile (``.json`` or ``.json.gz``, or an open binary file).

    Returns ``(events, info)``. ``events`` has one row per event in file order: ``cat``,
    ``name``, ``op_name``, ``provider`` (categorical of ``str``, ``""`` when absent), ``pid``,
    ``tid`` (``int64``), ``ts_ns``, ``dur_ns`` (``int64`` nanoseconds: ORT's microseconds x
    1000, a fractional value rounded half to even at 1 ns; ``0`` where missing or invalid,
    with ``problem`` set), ``node_index`` (``int64``, ``-1`` when absent),
    ``input_type_shape`` / ``output_type_shape`` (categorical of ``str``: the JSON text of the
    shapes, ``""`` when absent), ``problem`` (categorical ``str``: ``""`` or what is wrong).
    ``info``: ``source``, ``events``, ``fast_blocks`` / ``json_blocks`` (how blocks were read).

    Raises :class:`~toolkit.errors.TraceError` when the file cannot be read or is not a JSON
    array of objects.
    """
    if hasattr(source, "read"):
        where = str(getattr(source, "name", "<file>"))
        f: IO[bytes] = source  # type: ignore[assignment]
        close = False
    else:
        path = Path(source)
        where = str(path)
        if not path.is_file():
            raise TraceError("no such profile file", where=where, fix="check the path")
        try:
            f = _open(path)
        except OSError as exc:
            raise TraceError(
                f"cannot open the profile ({exc})", where=where,
                fix="check the path and the file's permissions",
            ) from None
        close = True
    cols = _Columns()
    decoder = _decoder()
    try:
        with paused_gc():  # millions of small objects: the collector would dominate
            blocks = _blocks(f, where)
            for k, (rest, lines) in enumerate(blocks):
                if k == 0 and not _one_event_per_line(bytes(rest) + bytes(lines)):
                    # events that span lines (a pretty-printed file): one array of it all
                    whole = b"".join([rest, bytes(lines), *(r + bytes(v) for r, v in blocks)])
                    rest, lines = b"", whole
                body = _array(rest, lines)
                records = _fast_decode(body) if decoder is not None else None
                if records is None or not cols.add_fast(records):
                    cols.add_json(_decode_block(body, where), where)
    finally:
        if close:
            f.close()
    frame = _frame(cols)
    info = {"source": where, "events": len(frame), "fast_blocks": cols.fast_blocks,
            "json_blocks": cols.json_blocks}
    return frame, info


def _column(texts: list[str], codes: np.ndarray) -> pd.Categorical:
    """A categorical of ``texts[codes]`` whose categories are the distinct texts."""
    uniq = list(dict.fromkeys(texts))
    where = {t: k for k, t in enumerate(uniq)}
    table = np.array([where[t] for t in texts], dtype=np.int64)
    return pd.Categorical.from_codes(table[codes] if len(table) else codes,
                                     categories=pd.Index(uniq, dtype=object))


def _frame(cols: _Columns) -> pd.DataFrame:
    def ints(key: str) -> np.ndarray:
        parts = cols.numbers[key]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    first = np.concatenate(cols.codes) if cols.codes else np.zeros(0, np.int64)
    keys = list(cols.table)  # in order of first occurrence, i.e. of increasing code
    starts = np.fromiter(cols.table.values(), np.int64, len(keys))
    codes = np.searchsorted(starts, first)  # dense: index of the key in ``keys``
    fields = list(zip(*keys)) if keys else [()] * len(_TEXT_FIELDS)
    texts = {name: [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                    for v in values] for name, values in zip(_TEXT_FIELDS, fields)}
    index_table = np.array([-1 if (v := _int(t)) is None else v
                            for t in texts["node_index"]], dtype=np.int64)
    out: dict[str, Any] = {
        "cat": _column(texts["cat"], codes),
        "name": _column(texts["name"], codes),
        "pid": ints("pid"), "tid": ints("tid"), "ts_ns": ints("ts_ns"),
        "dur_ns": ints("dur_ns"),
        "op_name": _column(texts["op_name"], codes),
        "provider": _column(texts["provider"], codes),
        "node_index": index_table[codes] if len(index_table) else codes,
        "input_type_shape": _column(texts["input_type_shape"], codes),
        "output_type_shape": _column(texts["output_type_shape"], codes),
        "problem": _column(texts["problem"], codes),
    }
    return pd.DataFrame(out, copy=False)  # fresh arrays: no consolidating copy
