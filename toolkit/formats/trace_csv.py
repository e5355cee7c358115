"""Trace CSVs: write an event frame as CSV, read a CSV of timed events into the reader frame.

Times in the CSV are decimals in ns, us, ms or s (parsed exactly by
:mod:`toolkit.formats.exact_time`) or clock cycles; the frame read back has the columns of
:mod:`toolkit.formats.event_columns`.
"""

from __future__ import annotations

import csv
import decimal
import json
import os
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError, TraceError
from toolkit.formats.compressed import count_lines, open_input
from toolkit.formats.event_columns import (
    EVENT_FIELDS,
    Collector,
    add_problem,
    atomic_text,
    is_missing,
    json_default,
    name_of,
    start_and_duration,
)
from toolkit.formats.exact_time import (
    INT64_MAX,
    INT64_MIN,
    PLAIN_DECIMAL,
    UNIT_DIGITS,
    numbers_to_ns,
)
from toolkit.limits import current

__all__ = ["read_trace_csv", "write_trace_csv", "check_csv_rows"]


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
    start, duration = start_and_duration(events)
    front = [c for c in ("name", "cat", "pid", "tid", "track") if c in events.columns]
    if "name" not in front and "key" in events.columns:
        front.insert(0, "key")
    rest = [c for c in events.columns if c not in EVENT_FIELDS and c not in front]
    table = pd.DataFrame({c: events[c].to_numpy() for c in front}, index=range(len(events)))
    table["start_ns"] = start
    table["end_ns"] = start + duration
    table["dur_ns"] = duration
    for column in rest:
        values = events[column]
        if values.dtype == object:
            values = values.map(lambda v: json.dumps(v, default=json_default)
                                if isinstance(v, (list, tuple, dict)) else v)
        table[column] = values.to_numpy()
    with atomic_text(path) as out:
        table.to_csv(out, index=False, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    return path


def _texts_to_ns(values: np.ndarray, unit: str, clock_hz: Fraction | None
                 ) -> tuple[np.ndarray, dict[int, str]]:
    """CSV cells (str, numbers or missing) in ``unit`` -> exact ``int64`` nanoseconds + problems."""
    texts: list[Any] = []
    problems: dict[int, str] = {}
    for value in values.tolist():
        if is_missing(value) or (type(value) is str and not value.strip()):
            texts.append(None)
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            texts.append(int(value))
        else:
            texts.append(str(value).strip().encode("utf-8", "replace"))
    if unit != "cycles":
        if all(type(t) is not bytes or PLAIN_DECIMAL.fullmatch(t.decode()) for t in texts):
            return numbers_to_ns(texts, UNIT_DIGITS[unit])
        out = np.zeros(len(texts), np.int64)
        for i, t in enumerate(texts):
            one, bad = numbers_to_ns([t], UNIT_DIGITS[unit])
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
        if not INT64_MIN <= ns <= INT64_MAX:
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
    if unit not in (*UNIT_DIGITS, "cycles"):
        raise ToolkitError(f"unknown time unit {unit!r}", where=str(path),
                           fix="use 'ns', 'us', 'ms', 's' or 'cycles' (with clock_hz)")
    hz: Fraction | None = None
    if unit == "cycles":
        if clock_hz is None or not clock_hz > 0:
            raise ToolkitError("unit='cycles' needs a positive clock_hz", where=str(path),
                               fix="pass clock_hz=<cycles per second>")
        hz = Fraction(clock_hz)
    if (duration_column is None) == (end_column is None):
        raise ToolkitError(
            "give exactly one of duration_column and end_column", where=str(path),
            fix=(
                "pass duration_column= (a duration per event) or end_column= (an end time per "
                "event), not both"
            ),
        )
    time_columns = [c for c in (start_column, duration_column, end_column) if c is not None]
    check_csv_rows(path)
    label, stream = open_input(path, what="trace CSV")
    try:
        with stream:
            table = pd.read_csv(stream, dtype={c: object for c in time_columns},
                                keep_default_na=False, na_values=[""], compression=None)
    except (pd.errors.ParserError, UnicodeDecodeError, EOFError, OSError, ValueError) as exc:
        raise TraceError(
            f"cannot parse the CSV: {exc}", where=label,
            fix=(
                "pass a CSV file with one header row and one event per row (UTF-8, .csv or .csv.gz)"
            ),
        ) from None
    for column in (key_column, *time_columns):
        if column not in table.columns:
            raise TraceError(f"the CSV has no column {column!r}",
                             where=f"{path} (columns: {list(table.columns)})",
                             fix="pass the name of an existing column")
    n = len(table)
    problems: dict[int, str] = {}
    start, bad = _texts_to_ns(table[start_column].to_numpy(dtype=object), unit, hz)
    for i, text in bad.items():
        add_problem(problems, i, f"{start_column} {text}")
    other_column = duration_column if duration_column is not None else end_column
    assert other_column is not None
    other, bad = _texts_to_ns(table[other_column].to_numpy(dtype=object), unit, hz)
    for i, text in bad.items():
        add_problem(problems, i, f"{other_column} {text}")
    dur = other if duration_column is not None else other - start
    for i in bad:
        dur[i] = 0
    for i in np.flatnonzero(dur < 0).tolist():
        add_problem(problems, i, "negative duration")

    def python_values(column: str) -> list[Any]:
        values = table[column].to_numpy(dtype=object).tolist()
        return [None if is_missing(v) else v for v in values]

    used = {key_column, *time_columns}
    names = [name_of(v) for v in python_values(key_column)]
    extras = {c: python_values(c) for c in table.columns if c not in used}
    sink = Collector()
    sink.append(np.arange(n, dtype=np.int64), names, extras.pop("cat", [""] * n),
                extras.pop("pid", [0] * n), extras.pop("tid", [0] * n), start, dur,
                {str(c): v for c, v in extras.items()}, problems)
    frame = sink.frame()
    frame.attrs["source"] = str(path)
    return frame


def check_csv_rows(path: str | os.PathLike[str]) -> None:
    """Refuse a CSV of more rows than ``max_events_per_file`` before it is parsed: a gzip
    file's lines are counted as it unpacks (within ``max_decompressed_bytes``), a plain
    file's only when it has more bytes than the bound (a row takes at least one).

    Raises:
        LimitError: too many rows or too many decompressed bytes.
        TraceError: the file cannot be opened or unpacked.
    """
    label, stream = open_input(path, what="trace CSV")
    with stream:
        if not label.endswith(" (gzip)"):
            size = os.fstat(stream.fileno()).st_size
            if size <= current().max_events_per_file:
                return
        try:
            count_lines(stream, label=label)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(
                f"cannot unpack the CSV ({exc})", where=label,
                fix="the .gz file is truncated or damaged: compress the CSV again (gzip)",
            ) from None
