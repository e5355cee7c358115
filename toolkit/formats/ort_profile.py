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

import gc
import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from toolkit.errors import TraceError

__all__ = ["read_ort_profile_events", "looks_like_ort_profile", "ORT_EVENT_CAP",
           "ORT_COLUMNS"]

#: ORT stops recording after this many events (and logs one error line).
ORT_EVENT_CAP = 1_000_000
#: Columns of :func:`read_ort_profile_events`.
ORT_COLUMNS = ("cat", "name", "pid", "tid", "ts_ns", "dur_ns", "op_name", "provider",
               "node_index", "input_type_shape", "output_type_shape", "problem")

_BLOCK = 8 << 20
_HINT = re.compile(rb'\[\s*\{"cat" : "(Session|Node)","pid" :')


def looks_like_ort_profile(head: bytes) -> bool:
    """True when the first bytes of a file look like an ORT profile: a bare JSON array whose
    first event starts as ORT writes it (``{"cat" : "Session","pid" :``)."""
    return _HINT.match(head.lstrip()[:4096]) is not None


def _open(path: Path) -> IO[bytes]:
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    magic = raw.read(2)
    raw.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _blocks(f: IO[bytes], where: str) -> Iterator[bytes]:
    """Blocks of whole lines (each ends with a newline)."""
    rest = b""
    while True:
        try:
            chunk = f.read(_BLOCK)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(f"cannot read the profile ({exc})", where=where) from None
        if not chunk:
            break
        chunk = rest + chunk
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            rest = chunk
            continue
        yield chunk[:cut]
        rest = chunk[cut:]
    if rest:
        yield rest + b"\n"


class _Columns:
    def __init__(self) -> None:
        self.parts: dict[str, list[Any]] = {k: [] for k in ORT_COLUMNS}
        self.fast_blocks = 0
        self.json_blocks = 0

    def add_fast(self, records: list[Any]) -> None:
        p = self.parts
        n = len(records)
        p["cat"].extend([r.cat for r in records])
        p["pid"].append(np.fromiter([r.pid for r in records], np.int64, n))
        p["tid"].append(np.fromiter([r.tid for r in records], np.int64, n))
        p["dur_ns"].append(np.fromiter([r.dur for r in records], np.int64, n) * 1000)
        p["ts_ns"].append(np.fromiter([r.ts for r in records], np.int64, n) * 1000)
        p["name"].extend([r.name for r in records])
        args = [r.args for r in records]
        p["op_name"].extend([a.op_name for a in args])
        p["provider"].extend([a.provider for a in args])
        p["node_index"].extend([a.node_index for a in args])
        # valid JSON text never holds a NUL byte: one join and one split instead of n copies;
        # shapes hold no text with spaces, so dropping whitespace gives the compact form
        for key in ("input_type_shape", "output_type_shape"):
            raws = [getattr(a, key) for a in args]
            p[key].extend(b"\0".join(raws).translate(None, b" \t\r\n").split(b"\0")
                          if n else [])
        p["problem"].extend([""] * n)
        self.fast_blocks += 1

    def add_json(self, events: list[Any], where: str) -> None:
        p = self.parts
        pid: list[int | None] = []
        tid: list[int | None] = []
        durs: list[int] = []
        tss: list[int] = []
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                raise TraceError(f"event {i} of a block is a {type(e).__name__}, not an object",
                                 where=where, fix="pass the JSON file ORT wrote")
            args = e.get("args")
            args = args if isinstance(args, dict) else {}
            problem = ""
            if e.get("ph", "X") != "X":
                problem = f"phase {e.get('ph')!r} is not a complete event"
            p["cat"].append(_text(e.get("cat")))
            pid.append(_int(e.get("pid")))
            tid.append(_int(e.get("tid")))
            dur, ts = _us_to_ns(e.get("dur")), _us_to_ns(e.get("ts"))
            if dur is None or ts is None:
                problem = problem or "missing or invalid ts/dur"
            durs.append(-1 if dur is None else dur)
            tss.append(-1 if ts is None else ts)
            p["name"].append(_text(e.get("name")))
            p["op_name"].append(_text(args.get("op_name")))
            p["provider"].append(_text(args.get("provider")))
            idx = _int(args.get("node_index"))
            p["node_index"].append("" if idx is None else str(idx))
            for key in ("input_type_shape", "output_type_shape"):
                value = args.get(key)
                p[key].append("" if value is None else
                              json.dumps(value, separators=(",", ":")))
            p["problem"].append(problem)
        p["pid"].append(np.array([-1 if v is None else v for v in pid], dtype=np.int64))
        p["tid"].append(np.array([-1 if v is None else v for v in tid], dtype=np.int64))
        p["dur_ns"].append(np.array(durs, dtype=np.int64))
        p["ts_ns"].append(np.array(tss, dtype=np.int64))
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
        return value * 1000 if abs(value) < (1 << 52) else None
    if isinstance(value, float) and np.isfinite(value) and abs(value) < 2.0**52:
        return round(value * 1000)
    return None


def _array_text(block: bytes) -> bytes:
    """A block of lines of the array as a JSON array of its own (``[]`` when it has no
    object)."""
    start = block.find(b"{")
    end = block.rfind(b"}") + 1
    if start < 0 or end <= start:
        return b"[]"
    return b"".join((b"[", memoryview(block)[start:end], b"]"))


def _decode_block(body: bytes, where: str) -> list[Any]:
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
            ("cat", str), ("name", str), ("ph", str), ("pid", int), ("tid", int),
            ("dur", int), ("ts", int), ("args", args, args()),
        ], gc=False)
        _DECODER = (msgspec.json.Decoder(list[event]),  # type: ignore[valid-type]
                    msgspec.DecodeError)
    return _DECODER


def _fast_decode(body: bytes) -> list[Any] | None:
    """Typed records of a block, or None when the block does not fit the types."""
    decoder, error = _decoder()
    try:
        records = decoder.decode(body)
    except (error, RecursionError, UnicodeDecodeError, ValueError):
        return None
    if any(r.ph != "X" for r in records):
        return None
    return records


def read_ort_profile_events(source: str | os.PathLike[str] | IO[bytes]
                            ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read every event of an ORT profile (``.json`` or ``.json.gz``, or an open binary file).

    Returns ``(events, info)``. ``events`` has one row per event in file order: ``cat``,
    ``name``, ``op_name``, ``provider`` (categorical of ``str``, ``""`` when absent), ``pid``,
    ``tid`` (``int64``), ``ts_ns``, ``dur_ns`` (``int64`` nanoseconds: ORT's microseconds x
    1000, a fractional value rounded half to even at 1 ns; ``-1`` where missing or invalid),
    ``node_index`` (``int64``, ``-1`` when absent),
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
            raise TraceError(f"cannot open the profile ({exc})", where=where) from None
        close = True
    cols = _Columns()
    decoder = _decoder()
    enabled = gc.isenabled()
    gc.disable()  # millions of small objects: the collector would dominate
    try:
        first = True
        saw_open = False
        for block in _blocks(f, where):
            if first:
                stripped = block.lstrip()
                if not stripped.startswith(b"["):
                    raise TraceError("not an ORT profile: the file does not start with a JSON "
                                     "array", where=where,
                                     fix="pass the .json file ORT's profiler wrote")
                saw_open = True
                first = False
            body = _array_text(block)
            records = _fast_decode(body) if decoder is not None else None
            if records is not None:
                cols.add_fast(records)
            else:
                cols.add_json(_decode_block(body, where), where)
        if not saw_open:
            raise TraceError("the profile is empty", where=where,
                             fix="pass the .json file ORT's profiler wrote")
    finally:
        if close:
            f.close()
        if enabled:
            gc.enable()
    frame = _frame(cols)
    info = {"source": where, "events": len(frame), "fast_blocks": cols.fast_blocks,
            "json_blocks": cols.json_blocks}
    return frame, info


def _index_values(values: list[str]) -> np.ndarray:
    """``int64`` of decimal texts, -1 where a text is empty or not an integer."""
    if not values:
        return np.zeros(0, np.int64)
    codes, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=False)
    table = np.array([-1 if (v := _int(u)) is None else v for u in uniques.tolist()],
                     dtype=np.int64)
    return table[codes]


def _categorical(values: list[Any]) -> pd.Categorical:
    if not values:
        return pd.Categorical.from_codes(np.zeros(0, np.int64),
                                         categories=pd.Index([], dtype=object))
    codes, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=False)
    texts = [u.decode("utf-8", "replace") if isinstance(u, bytes) else str(u)
             for u in uniques.tolist()]
    if len(set(texts)) != len(texts):  # b"x" and "x" from different blocks
        fixed = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        table = np.array([fixed[t] for t in texts], dtype=np.int64)
        return pd.Categorical.from_codes(table[codes], categories=pd.Index(list(fixed),
                                                                           dtype=object))
    return pd.Categorical.from_codes(np.asarray(codes), categories=pd.Index(texts, dtype=object))


def _frame(cols: _Columns) -> pd.DataFrame:
    p = cols.parts

    def ints(key: str) -> np.ndarray:
        return np.concatenate(p[key]) if p[key] else np.zeros(0, np.int64)

    return pd.DataFrame({
        "cat": _categorical(p["cat"]),
        "name": _categorical(p["name"]),
        "pid": ints("pid"), "tid": ints("tid"), "ts_ns": ints("ts_ns"),
        "dur_ns": ints("dur_ns"),
        "op_name": _categorical(p["op_name"]),
        "provider": _categorical(p["provider"]),
        "node_index": _index_values(p["node_index"]),
        "input_type_shape": _categorical(p["input_type_shape"]),
        "output_type_shape": _categorical(p["output_type_shape"]),
        "problem": _categorical(p["problem"]),
    })


def read_ort_profile_bytes(data: bytes) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`read_ort_profile_events` of bytes held in memory."""
    return read_ort_profile_events(io.BytesIO(data))
