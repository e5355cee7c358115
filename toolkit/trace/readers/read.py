"""Read a runtime trace from any source into one :class:`Trace` event table.

Sources: a Chrome trace event JSON file (``.json``, ``.json.gz``; ``"X"`` events and ``B``/``E``
pairs; read streaming by :func:`toolkit.formats.chrome_trace.read_chrome_trace`), a CSV of timed
events, a JSON file or list of ExecuTorch-style debug-handle records
(``{"delegate_debug_identifier": 3, "start_time": ..., "end_time": ...}``), an ExecuTorch
ETDump (``.etdp``, told apart by content; see :func:`toolkit.trace.executorch.etdump_events`
for its columns), the toolkit's own
:class:`~toolkit.runtime.tracer.EventTracer`, or any DataFrame with a start and a duration (or
end) column.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError, TraceError
from toolkit.trace.join.codes import TextCodes
from toolkit.trace.join.events import EVENT_COLUMNS, TIME_UNITS, Trace
from toolkit.trace.join.keys import (
    AUTO_KINDS,
    KEY_KINDS,
    extract_keys_ints,
    extract_keys_mixed,
    integer_values,
    kind_of_column,
    present_mask,
)

__all__ = ["Trace", "read_trace", "EVENT_COLUMNS", "TIME_UNITS"]

_STR = pd.Series([""]).dtype  # pandas' default text dtype
_START_COLUMNS = ("start_ns", "start_us", "start_ms", "start_s", "start_time", "start", "ts_ns",
                  "ts_us", "ts")
_DURATION_COLUMNS = ("dur_ns", "duration_ns", "dur_us", "duration_us", "dur_ms", "duration_ms",
                     "duration", "dur")
_END_COLUMNS = ("end_ns", "end_us", "end_ms", "end_s", "end_time", "end")
_RUN_COLUMNS = ("run", "arg_run", "run_index", "iteration")
_NAME_COLUMNS = ("name", "op_name", "arg_op_name")
_RECORD_HINT = re.compile(r'"(delegate_debug_identifier|delegate_debug_id_(int|str)|'
                          r'start_time|debug_handle)"\s*:')
_PHASE_HINT = re.compile(r'"ph"\s*:')
_FORMATS = ("chrome", "csv", "records", "frame", "tracer", "ort", "parquet")
#: Columns in which a trace says what kind of key each event carries (the event tracer's
#: runtimes write ``key_kind``; a Chrome trace has it in ``args``).
_DECLARED_KIND = ("key_kind", "arg_key_kind")


# --------------------------------------------------------------------------------------------
# Public entry point


def read_trace(
    source: Any,
    *,
    format: str | None = None,
    key_column: str | None = None,
    key_kind: str | None = None,
    start_column: str | None = None,
    duration_column: str | None = None,
    end_column: str | None = None,
    run_column: str | None = None,
    unit: str | None = None,
    clock_hz: float | None = None,
) -> Trace:
    """Read a trace into a :class:`Trace` (one row per event, integer nanoseconds).

    Args:
        source: a path (``.json``, ``.json.gz``: Chrome trace or debug-handle records, told
            apart by content; ``.csv``, ``.csv.gz``; ``.parquet``, one row per event), an
            open binary/text file (Chrome JSON),
            an ``EventTracer`` (anything with ``to_frame()``), a DataFrame, a list of record
            dicts, or a :class:`Trace` (returned as is).
        format: force ``"chrome"``, ``"csv"``, ``"records"``, ``"frame"``, ``"tracer"`` or
            ``"ort"`` (an ONNX Runtime profile, also found by content: see
            :func:`toolkit.trace.ort.read_ort_profile`; the other arguments do not apply).
        key_column: the column naming each event; default: found by name (see
            :mod:`toolkit.trace.join.keys`).
        key_kind: what ``key_column`` holds (a kind of :data:`toolkit.trace.join.keys.KEY_KINDS`);
            default: from its name (``command_id``, ``op_index``, ``handle`` ...), else ``""``
            (choose it later with ``trace_join(..., key=...)``). Without ``key_column``, only
            this kind is looked for.
        start_column, duration_column, end_column: time columns; default: found by name
            (``start_ns``, ``start_time``, ``ts``...; ``dur_ns``, ``duration``...; ``end_ns``,
            ``end_time``...).
        run_column: column with the inference index (default ``run`` / ``arg_run`` when
            present).
        unit: unit of the time columns: ``"ns"``, ``"us"``, ``"ms"``, ``"s"`` or ``"cycles"``
            (with ``clock_hz``). Default: from each column's suffix (``_us`` ...; ``ts``/``dur``
            are microseconds as in Chrome traces), else ns. Chrome JSON is always microseconds.
        clock_hz: clock frequency for ``unit="cycles"``.

    Returns:
        A :class:`Trace`; its ``events`` columns are described there.

    Raises:
        TraceError: the file cannot be opened or parsed.
        ToolkitError: no start or duration column, an unknown unit or format.
    """
    if isinstance(source, Trace):
        return source
    if format is not None and format not in _FORMATS:
        raise ToolkitError(f"unknown trace format {format!r}", fix=f"use one of {_FORMATS}")
    if key_kind is not None and key_kind not in KEY_KINDS:
        raise ToolkitError(f"unknown key kind {key_kind!r}", fix=f"use one of {KEY_KINDS}")
    if unit is not None and unit not in (*TIME_UNITS, "cycles"):
        raise ToolkitError(f"unknown time unit {unit!r}",
                           fix="use 'ns', 'us', 'ms', 's' or 'cycles' (with clock_hz)")
    if unit == "cycles" and not (clock_hz and clock_hz > 0):
        raise ToolkitError("unit='cycles' needs a positive clock_hz",
                           fix="pass clock_hz=<cycles per second>")
    opts = _Options(key_column, key_kind, start_column, duration_column, end_column,
                    run_column, unit, clock_hz)
    if isinstance(source, pd.DataFrame):
        return _from_frame(source, opts, {"source": "DataFrame", "format": "frame"})
    if hasattr(source, "to_frame") and not isinstance(source, (str, os.PathLike)):
        frame = source.to_frame()
        return _from_frame(frame, opts, {"source": type(source).__name__, "format": "tracer"})
    if isinstance(source, (list, tuple)):
        return _from_frame(_records_frame(source, "<records>"), opts,
                           {"source": "records", "format": "records"})
    if hasattr(source, "read"):
        from toolkit.formats.chrome_trace import read_chrome_trace

        frame = read_chrome_trace(source)
        return _from_frame(frame, opts, {**_chrome_meta(frame), "format": "chrome"})
    if isinstance(source, (str, os.PathLike)):
        return _from_path(Path(source), format, opts)
    raise ToolkitError(f"cannot read a trace from a {type(source).__name__}",
                       fix="pass a path, a DataFrame, an EventTracer or a list of records")


@dataclass(frozen=True)
class _Options:
    key_column: str | None
    key_kind: str | None
    start_column: str | None
    duration_column: str | None
    end_column: str | None
    run_column: str | None
    unit: str | None
    clock_hz: float | None


# --------------------------------------------------------------------------------------------
# Files


def _not_a_trace(path: Path) -> TraceError | None:
    """The error for a path that names a model, a compiled folder or another non-trace the
    toolkit recognises (an argument given in the wrong place), or a missing file."""
    from toolkit.util.sniff import KIND_NAMES, path_kind
    from toolkit.util.suggest import path_suggestion

    kind = path_kind(path)
    if kind in ("model", "compiled", "connection", "part", "npz", "npy"):
        return TraceError(f"this is {KIND_NAMES[kind]}, not a trace (arguments swapped?)",
                          where=str(path),
                          fix="pass the trace file first (a Chrome .json, .csv, .parquet or "
                              ".etdp written by the runtime) and the model with --compiled "
                              "(CLI) or as the second argument")
    if kind == "folder":
        return TraceError("this is a folder, not a trace file", where=str(path),
                          fix="pass the trace file itself (e.g. toolkit run M --trace t.json)")
    if not path.is_file():
        near = path_suggestion(path)
        return TraceError("no such trace file", where=str(path),
                          fix=f"did you mean {near}?" if near else "check the path")
    return None


def _from_path(path: Path, format: str | None, opts: _Options) -> Trace:
    wrong = _not_a_trace(path)
    if wrong is not None:
        raise wrong
    name = path.name.lower()
    executorch = _executorch_kind(path) if format is None else None
    if executorch == "etdump":
        from toolkit.trace.readers.executorch.profile import read_executorch

        return read_executorch(path).trace()
    if executorch is not None:
        from toolkit.formats.etdump import _fix_for

        what = {"program": "an ExecuTorch program (.pte)", "etrecord": "an ETRecord",
                "inspector_csv": "the ExecuTorch Inspector's table (to_dataframe() as CSV), "
                                 "which keeps one event per signature and cannot be read "
                                 "losslessly"}[executorch]
        raise TraceError(f"this is {what}, not a trace", where=str(path),
                         fix=_fix_for(executorch, "etdump") + "; read the .etdp trace with "
                         "read_trace or read_executorch(etdump, etrecord, program)")
    if format is None:
        if name.endswith((".csv", ".csv.gz")):
            format = "csv"
        elif name.endswith(".parquet"):
            format = "parquet"
        else:
            format = _sniff_json(path)
    if format == "ort":
        from toolkit.trace.readers.ort.profile import read_ort_profile

        return read_ort_profile(path)
    if format == "csv":
        frame, used = _read_csv(path, opts)
        return _from_frame(frame, used, {"source": str(path), "format": "csv",
                                         **({"key_column": opts.key_column}
                                            if opts.key_column else {})})
    if format == "parquet":
        from toolkit.formats.trace_parquet import read_trace_parquet

        return _from_frame(read_trace_parquet(path), opts, {"source": str(path),
                                                            "format": "parquet"})
    if format == "records":
        return _from_frame(_records_frame(_load_json(path), str(path)), opts,
                           {"source": str(path), "format": "records"})
    if format in ("frame", "tracer"):
        raise ToolkitError(f"format {format!r} is for in-memory objects, not files",
                           where=str(path), fix="use 'chrome', 'csv' or 'records'")
    from toolkit.formats.chrome_trace import read_chrome_trace
    from toolkit.progress import ByteProgress, progress_enabled

    if progress_enabled() and path.stat().st_size >= _PROGRESS_BYTES:
        # a bar over the bytes read from disk; the reader sees the same stream
        with ByteProgress(open(path, "rb"), path.stat().st_size, f"reading {path.name}") as raw:
            head = raw.read(2)
            stream: Any = _Prefixed(head, raw)
            gz = head == b"\x1f\x8b"
            if gz:
                from toolkit.formats.compressed import open_decompressed

                stream = open_decompressed(stream, f"{path} (gzip)")
            frame = read_chrome_trace(stream)
        frame.attrs["source"] = f"{path} (gzip)" if gz else str(path)
    else:
        frame = read_chrome_trace(path)
    return _from_frame(frame, opts, {**_chrome_meta(frame), "format": "chrome"})


_PROGRESS_BYTES = 16 << 20
"""Trace files from this size on are read with a progress bar (when bars are on)."""


class _Prefixed:
    """A read-only stream: ``head`` (already read) then the rest of ``raw``."""

    def __init__(self, head: bytes, raw: Any) -> None:
        self._head, self._raw = head, raw
        self.name = getattr(raw, "name", "<file>")

    def read(self, n: int = -1) -> bytes:
        if not self._head:
            return bytes(self._raw.read(n))
        if n < 0:
            data, self._head = self._head + self._raw.read(), b""
            return data
        data, self._head = self._head[:n], self._head[n:]
        return data + (bytes(self._raw.read(n - len(data))) if n > len(data) else b"")


def _executorch_kind(path: Path) -> str | None:
    """``etdump``, ``program``, ``etrecord`` or ``inspector_csv`` from the file's first bytes."""
    from toolkit.formats.etdump import sniff_executorch_file

    try:
        with open(path, "rb") as f:
            return sniff_executorch_file(f.read(64))
    except OSError as exc:
        raise TraceError(
            f"cannot read the trace ({exc})", where=str(path),
            fix="check the path and the file's permissions",
        ) from None


def _open_bytes(path: Path) -> Any:
    from toolkit.formats.compressed import open_input

    return open_input(path)[1]


def _unreadable(path: Path, exc: BaseException) -> TraceError:
    """The error for a trace file that cannot be read (missing, unreadable, cut gzip)."""
    return TraceError(f"cannot read the trace ({exc})", where=str(path),
                      fix="check the path and the file's permissions; a .gz trace must be a "
                          "complete gzip file")


def _sniff_json(path: Path) -> str:
    """``"ort"``, ``"chrome"`` or ``"records"`` from the first 64 kB of a JSON file."""
    try:
        with _open_bytes(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError) as exc:
        raise _unreadable(path, exc) from None
    from toolkit.formats.ort_profile import looks_like_ort_profile

    if looks_like_ort_profile(head):
        return "ort"
    text = head.decode("utf-8", "replace")
    phase, record = _PHASE_HINT.search(text), _RECORD_HINT.search(text)
    if record and (not phase or record.start() < phase.start()):
        return "records"
    return "chrome"


def _load_json(path: Path) -> Any:
    try:
        with _open_bytes(path) as f:
            return json.load(f)
    except (OSError, EOFError) as exc:
        raise _unreadable(path, exc) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"not valid JSON ({exc})", where=str(path),
                         fix="pass a JSON array of event records") from None
    except RecursionError:
        raise TraceError("the records nest arrays or objects deeper than the JSON reader can "
                         "follow", where=str(path),
                         fix="pass a flat JSON array of event records") from None


def _records_frame(records: Any, where: str) -> pd.DataFrame:
    """A DataFrame of debug-handle records (a list of dicts, or ``{"events": [...]}``)."""
    if isinstance(records, Mapping):
        for k in ("events", "records", "traceEvents"):
            if isinstance(records.get(k), list):
                records = records[k]
                break
    if not isinstance(records, (list, tuple)):
        raise TraceError("event records must be a list of objects", where=where,
                         fix='pass [{"delegate_debug_identifier": 1, "start_time": ..., '
                             '"end_time": ...}, ...]')
    bad = [i for i, r in enumerate(records) if not isinstance(r, Mapping)]
    if bad:
        raise TraceError(f"record {bad[0]} is a {type(records[bad[0]]).__name__}, not an object",
                         where=where,
                         fix='pass each record as an object, e.g. {"delegate_debug_identifier": 1, '
                             '"start_time": ..., "end_time": ...}')
    try:
        frame = pd.DataFrame.from_records(list(records)) if records else pd.DataFrame()
    except (UnicodeError, ValueError, TypeError) as exc:  # e.g. a lone surrogate in a key
        raise TraceError(f"the records do not form a table ({exc})", where=where,
                         fix="write each record as an object of plain keys and values"
                         ) from None
    for column in frame.columns:  # keep ints as ints where a column has gaps
        if frame[column].dtype == object:  # a list or object is no key or time: its text
            values = frame[column].tolist()
            if any(isinstance(v, (list, dict)) for v in values):
                frame[column] = pd.Series([repr(v) if isinstance(v, (list, dict)) else v
                                           for v in values], dtype=object)
        if frame[column].dtype == np.float64:
            raw = [r.get(column) for r in records]
            if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in raw):
                frame[column] = pd.Series(raw, dtype=object)
    return frame


def _chrome_meta(frame: pd.DataFrame) -> dict[str, Any]:
    attrs = dict(frame.attrs)
    meta = {"source": attrs.pop("source", "<file>")}
    meta.update(attrs)
    return meta


def _read_csv(path: Path, opts: _Options) -> tuple[pd.DataFrame, _Options]:
    """Read a CSV with the exact decimal reader; returns the frame and the options to apply."""
    from toolkit.formats.compressed import open_input
    from toolkit.formats.trace_csv import read_trace_csv

    label, stream = open_input(path, what="trace CSV")
    try:
        with stream:
            header = list(pd.read_csv(stream, nrows=0, compression=None).columns)
    except (OSError, ValueError, UnicodeDecodeError, EOFError) as exc:
        raise TraceError(
            f"cannot read the CSV header ({exc})", where=label,
            fix="pass a CSV trace with a header row (a UTF-8 text file, .csv or .csv.gz)",
        ) from None
    start = opts.start_column or _first(header, _START_COLUMNS)
    duration = opts.duration_column
    end = opts.end_column
    if duration is None and end is None:
        duration = _first(header, _DURATION_COLUMNS)
        if duration is None:
            end = _first(header, _END_COLUMNS)
    if start is None or (duration is None and end is None):
        raise ToolkitError("the CSV has no start and duration (or end) columns",
                           where=f"{path} (columns: {header})",
                           fix="pass start_column= and duration_column= (or end_column=)")
    time_columns = [c for c in (start, duration, end) if c]
    units = {_unit_of(c, opts.unit) for c in time_columns}
    if len(units) > 1:
        raise ToolkitError(f"the time columns {time_columns} have different units {units}",
                           where=str(path), fix="pass unit= explicitly")
    unit = units.pop()
    others = [c for c in header if c not in time_columns]
    if opts.key_column is None and "name" not in header and not others:
        raise TraceError(f"the CSV has only time columns {time_columns}: no column names the "
                         "op each event ran", where=f"{path} (columns: {header})",
                         fix="add a name column (the op or debug handle of each event), or "
                             "pass key_column= (--key-column) naming the column that holds it")
    key = opts.key_column or ("name" if "name" in header else others[0])
    frame = read_trace_csv(path, key_column=key, start_column=start,
                           duration_column=duration, end_column=end, unit=unit,
                           clock_hz=opts.clock_hz)
    # The reader puts the key column's text in ``name``; keep it under its own name too.
    if key != "name":
        frame[f"arg_{key}"] = frame["name"].astype(object)
        if "arg_name" in frame.columns:
            frame["name"] = frame.pop("arg_name").astype(object)
    used = _Options(f"arg_{key}" if opts.key_column and key != "name" else opts.key_column,
                    opts.key_kind or (kind_of_column(key) if opts.key_column else None),
                    "start_ns", "dur_ns", None, opts.run_column, "ns", None)
    return frame, used


def _first(columns: Sequence[str], candidates: Sequence[str]) -> str | None:
    present = set(columns)
    return next((c for c in candidates if c in present), None)


def _unit_of(column: str, unit: str | None) -> str:
    if unit is not None:
        return unit
    bare = column[4:] if column.startswith("arg_") else column
    for suffix in ("_ns", "_us", "_ms", "_s"):
        if bare.endswith(suffix):
            return suffix[1:]
    return "us" if bare in ("ts", "dur") else "ns"


# --------------------------------------------------------------------------------------------
# Frames


def _to_ns(values: pd.Series, unit: str, clock_hz: float | None
           ) -> tuple[np.ndarray, np.ndarray]:
    """A time column in ``unit`` -> ``(int64 nanoseconds, bad mask)``.

    Integers are scaled exactly; floats and cycles are rounded half to even at 1 ns.
    ``timedelta64``/``datetime64`` columns are taken as nanoseconds whatever ``unit`` says.
    """
    dtype = values.dtype
    n = len(values)
    if isinstance(dtype, np.dtype) and dtype.kind in "mM":
        array = values.to_numpy()
        bad = np.isnat(array)
        return np.where(bad, 0, array.astype(f"{dtype.kind}8[ns]").view(np.int64)), bad
    if not (isinstance(dtype, np.dtype) and dtype.kind in "iuf"):
        converted = pd.to_numeric(values.astype(object), errors="coerce")
        if converted.dtype == object:  # ints too large for int64: keep as float
            converted = converted.astype(np.float64)
        values = converted
        dtype = values.dtype
    if unit == "cycles":
        f = values.to_numpy(dtype=np.float64, na_value=np.nan) * (1e9 / float(clock_hz or 1))
    elif dtype.kind in "iu":
        scale = TIME_UNITS[unit]
        array = values.to_numpy(dtype=np.int64)
        limit = np.iinfo(np.int64).max // scale
        bad = (array > limit) | (array < -limit)
        fresh = np.where(bad, 0, array)
        return (fresh * scale if scale != 1 else fresh), bad
    else:
        f = values.to_numpy(dtype=np.float64, na_value=np.nan) * TIME_UNITS[unit]
    bad = ~np.isfinite(f) | (np.abs(f) >= 2.0**63)
    out = np.zeros(n, dtype=np.int64)
    out[~bad] = np.rint(f[~bad]).astype(np.int64)
    return out, bad


def _time_columns(frame: pd.DataFrame, opts: _Options) -> tuple[str, str | None, str | None]:
    columns = list(frame.columns)
    start = opts.start_column or _first(columns, _START_COLUMNS)
    duration, end = opts.duration_column, opts.end_column
    if duration is None and end is None:
        duration = _first(columns, _DURATION_COLUMNS)
        if duration is None:
            end = _first(columns, _END_COLUMNS)
    for c in (start, duration, end):
        if c is not None and c not in frame.columns:
            raise ToolkitError(f"the trace has no column {c!r}", where=f"columns {columns}",
                               fix="pass the name of an existing column")
    if start is None or (duration is None and end is None):
        raise ToolkitError("the trace has no start and duration (or end) columns",
                           where=f"columns {columns}",
                           fix="pass start_column= and duration_column= (or end_column=)")
    return start, duration, end


def _categorical_names(values: pd.Series) -> pd.Categorical:
    if isinstance(values.dtype, pd.CategoricalDtype):
        cats = values.cat.categories
        if cats.dtype == _STR:
            return values.array
        codes = values.cat.codes.to_numpy()
        texts = pd.Index([str(c) for c in cats], dtype=_STR)
        uniq, inverse = np.unique(texts.to_numpy(dtype=object).astype(str), return_inverse=True)
        return pd.Categorical.from_codes(np.where(codes >= 0, inverse[codes], -1),
                                         categories=pd.Index(uniq.tolist(), dtype=_STR))
    objects = values.astype(object).to_numpy()
    codes, uniques = pd.factorize(objects, use_na_sentinel=True)
    texts = [u if isinstance(u, str) else str(u) for u in uniques.tolist()]
    if len(set(texts)) != len(texts):  # 1 and "1" both present
        return pd.Categorical([None if v is None else str(v) for v in objects.tolist()])
    return pd.Categorical.from_codes(codes, categories=pd.Index(texts, dtype=_STR))


def _names_from_keys(key: np.ndarray) -> pd.Categorical:
    if key.dtype == np.int64 and len(key):
        low, high = int(key.min()), int(key.max())
        if high - low < 4 * len(key) + 4096:  # small range: codes without hashing
            seen = np.bincount(key - low, minlength=high - low + 1) > 0
            table = np.cumsum(seen) - 1
            texts = pd.Index([str(v) for v in (np.flatnonzero(seen) + low).tolist()],
                             dtype=_STR)
            return pd.Categorical.from_codes(table[key - low], categories=texts)
    try:
        codes, uniques = pd.factorize(pd.Series(key, dtype=key.dtype), use_na_sentinel=True)
    except TypeError:  # a list or object among the keys: named by its text
        return pd.Categorical([None if v is None else str(v) for v in key.tolist()])
    texts = pd.Index([str(u) for u in uniques.tolist()], dtype=_STR)
    if texts.has_duplicates:
        return pd.Categorical([None if v is None else str(v) for v in key.tolist()])
    return pd.Categorical.from_codes(np.asarray(codes), categories=texts)


def _runs_by_occurrence(key: np.ndarray, kind_codes: np.ndarray, names: pd.Categorical,
                        start: np.ndarray) -> np.ndarray:
    """Run index when no column gives it: the k-th occurrence (in start order) of an event's
    key is run k; events without a key count occurrences of their name."""
    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    key_codes, _ = pd.factorize(pd.Series(key, dtype=key.dtype), use_na_sentinel=True)
    key_codes = np.asarray(key_codes, dtype=np.int64)
    name_codes = np.asarray(names.codes, dtype=np.int64)
    group = np.where(key_codes >= 0, key_codes * 64 + kind_codes,
                     -(name_codes + 2))  # names below every key code
    order = np.argsort(start, kind="stable")
    ordered = pd.Series(group[order])
    occurrence = ordered.groupby(ordered, sort=False).cumcount().to_numpy(dtype=np.int64)
    run = np.empty(n, dtype=np.int64)
    run[order] = occurrence
    return run


def _from_frame(frame: pd.DataFrame, opts: _Options, meta: dict[str, Any]) -> Trace:
    n = len(frame)
    start_col, dur_col, end_col = _time_columns(frame, opts) if n or len(frame.columns) else (
        None, None, None)
    problems = TextCodes(n)
    if "problem" in frame.columns:
        problems.set_column(frame["problem"])
    if start_col is None:
        start = dur = np.zeros(0, np.int64)
    else:
        start, bad_start = _to_ns(frame[start_col], _unit_of(start_col, opts.unit), opts.clock_hz)
        problems.set_mask(bad_start, f"missing or invalid {start_col}")
        other = dur_col if dur_col is not None else end_col
        assert other is not None
        value, bad_other = _to_ns(frame[other], _unit_of(other, opts.unit), opts.clock_hz)
        problems.set_mask(bad_other, f"missing or invalid {other}")
        dur = value if dur_col is not None else value - start
        dur = np.where(bad_start | bad_other, 0, dur)
        problems.set_mask(dur < 0, "negative duration")

    # keys
    if opts.key_column is not None:
        if opts.key_column not in frame.columns:
            raise ToolkitError(f"the trace has no column {opts.key_column!r}",
                               where=f"columns {list(frame.columns)}",
                               fix="pass the name of an existing column as key_column")
        kind = opts.key_kind or kind_of_column(opts.key_column)
        meta["key_column"] = opts.key_column
        if kind:
            key, key_kind, int_keys, int_rows = extract_keys_mixed(
                frame, (kind,), {kind: (opts.key_column,)})
        else:
            key, key_kind = _raw_keys(frame[opts.key_column])
            int_keys = int_rows = None
    elif opts.key_kind is None and _first(list(frame.columns), _DECLARED_KIND) is not None:
        key, key_kind, int_keys = _declared_keys(frame)
        int_rows = None
        meta["key_kind_from"] = "the trace (each event says what its key is)"
    else:
        key, key_kind, int_keys, int_rows = extract_keys_mixed(
            frame, (opts.key_kind,) if opts.key_kind else AUTO_KINDS,
            generic=opts.key_kind is None)
    kind_codes = np.asarray(key_kind.codes, dtype=np.int64)

    # names
    name_col = _first(list(frame.columns), _NAME_COLUMNS)
    names = _categorical_names(frame[name_col]) if name_col else _names_from_keys(key)

    # runs
    run_col = opts.run_column or _first(list(frame.columns), _RUN_COLUMNS)
    if run_col is not None:
        if run_col not in frame.columns:
            raise ToolkitError(f"the trace has no column {run_col!r}",
                               where=f"columns {list(frame.columns)}",
                               fix=("pass run_column= naming one of the trace's columns, or "
                                    "leave it out to detect the run column"))
        run, ok = integer_values(frame[run_col])
        problems.set_mask(~ok, f"missing or invalid {run_col}")
        run = np.where(ok, run, 0)
        meta["run_from"] = f"column {run_col!r}"
    else:
        run = _runs_by_occurrence(key, kind_codes, names, start)
        meta["run_from"] = "key occurrence (the k-th event of a key is run k)"

    consumed = {start_col, dur_col, end_col, run_col, "problem", *EVENT_COLUMNS,
                *_DECLARED_KIND} - {"key"}
    if name_col == "name":
        consumed.add("name")
    events = pd.DataFrame({
        "event_id": np.arange(n, dtype=np.int64),
        "run": run.astype(np.int64),
        "key": np.array(key) if key.dtype != object else pd.Series(key, dtype=object),
        "key_kind": key_kind,
        "name": names.copy(),
        "start_ns": start.astype(np.int64, copy=False),
        "dur_ns": dur.astype(np.int64, copy=False),
        "problem": problems.categorical(),
    }, copy=False)  # every array is fresh (copied above where it may be the source's)
    rest = [c for c in frame.columns if c not in consumed]
    if rest:
        extra = frame[rest].reset_index(drop=True)
        if "key" in extra.columns:  # the source's own key column, kept beside ours
            extra = extra.rename(columns={"key": "arg_key" if "arg_key" not in extra.columns
                                          else "source_key"})
        events = pd.concat([events, extra], axis=1)
    meta.setdefault("source", "DataFrame")
    return Trace(events, meta, int_keys, int_rows)


def _declared_keys(frame: pd.DataFrame
                   ) -> tuple[np.ndarray, pd.Categorical, np.ndarray | None]:
    """Keys of a trace that says what kind of key each event carries (a ``key_kind``
    column): each event's key is read as its declared kind, from that kind's columns (see
    :mod:`toolkit.trace.join.keys`); events that declare nothing (or an unknown kind) are read as
    a foreign trace's are, by column names."""
    column = _first(list(frame.columns), _DECLARED_KIND)
    assert column is not None
    declared = frame[column].astype(object).where(frame[column].notna(), "")
    declared = declared.astype(str).to_numpy(dtype=object)
    kinds = [k for k in pd.unique(declared).tolist() if k in KEY_KINDS]
    guessed = ~np.isin(declared, kinds)
    n = len(frame)
    parts: list[tuple[np.ndarray, np.ndarray, pd.Categorical, np.ndarray | None]] = []
    for kind in kinds:
        rows = np.flatnonzero(declared == kind)
        sub = frame if len(rows) == n else frame.iloc[rows]
        parts.append((rows, *extract_keys_ints(sub, (kind,))))
    if guessed.any():
        rows = np.flatnonzero(guessed)
        parts.append((rows, *extract_keys_ints(frame.iloc[rows], AUTO_KINDS, generic=True)))
    if len(parts) == 1 and len(parts[0][0]) == n:
        return parts[0][1], parts[0][2], parts[0][3]
    int_keys: np.ndarray | None = None
    if all(p[3] is not None for p in parts):
        int_keys = np.zeros(n, dtype=np.int64)
        for rows, _key, _cat, part_ints in parts:
            int_keys[rows] = part_ints
    codes = np.zeros(n, dtype=np.int64)
    ints = all(p[1].dtype == np.int64 for p in parts)
    keys = np.zeros(n, dtype=np.int64) if ints else np.full(n, None, dtype=object)
    for rows, key, cat, _ints in parts:
        codes[rows] = cat.codes
        keys[rows] = key if ints else key.astype(object)
    categories = pd.Index(["", *KEY_KINDS], dtype=_STR)
    return keys, pd.Categorical.from_codes(codes, categories=categories), int_keys


def _raw_keys(values: pd.Series) -> tuple[np.ndarray, pd.Categorical]:
    """Keys of a column whose kind is unknown: ints where they are ints, else the values
    (``None`` where missing); every row gets key kind ``""``."""
    ints, ok = integer_values(values)
    present = present_mask(values)
    kind = pd.Categorical.from_codes(np.zeros(len(values), np.int64),
                                     categories=pd.Index(["", *KEY_KINDS], dtype=_STR))
    if ok.all():
        return ints, kind
    key = values.astype(object).to_numpy().copy()
    if ok.any():
        idx = np.flatnonzero(ok)
        key[idx] = ints[idx].tolist()
    key[~present] = None
    return key, kind
