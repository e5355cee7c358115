"""The event table: one schema for every table of timed events.

The event tracer (:meth:`toolkit.runtime.tracer.EventTracer.to_frame`), the Chrome trace and
CSV readers (:mod:`toolkit.formats.chrome_trace`, :mod:`toolkit.formats.trace_csv`), the
chained runtime's per-part table (:mod:`toolkit.runtime.chain`) and
:attr:`toolkit.trace.readers.read.Trace.events` all speak these columns; each table has the ones
that apply to it, with these dtypes, and may add its own (``arg_<key>`` arguments, ``part``,
``file`` ...). Times are integer nanoseconds everywhere.

=========== =========================== =====================================================
column      dtype                       meaning
=========== =========================== =====================================================
event_id    ``int64``                   row identity (position in the source)
run         ``int64``                   inference index
key         ``int64`` or ``object``     the event's key (int or str; ``None`` when none)
key_kind    categorical or ``str``      what the key is: a kind of
                                        :data:`toolkit.trace.join.keys.KEY_KINDS`, ``""`` if unsaid
name        categorical or ``str``      event name
cat         categorical or ``str``      event category (Chrome ``cat``)
pid, tid    ``int64`` (``object``)      process and thread ids (Chrome)
track       categorical or ``str``      track (thread) name of the event tracer
start_ns    ``int64``                   start time, nanoseconds
end_ns      ``int64``                   end time, nanoseconds
dur_ns      ``int64``                   duration, nanoseconds (negative: see ``problem``)
problem     categorical or ``str``      ``""`` when the row is fine, else what is wrong
=========== =========================== =====================================================
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError

__all__ = ["EVENT_SCHEMA", "TIME_COLUMNS", "INT_COLUMNS", "TEXT_COLUMNS", "check_events"]

#: Column -> kind of dtype: ``"int"`` (``int64``), ``"text"`` (categorical or str/object of
#: str), ``"key"`` (``int64`` or ``object``), ``"id"`` (``int64`` or ``object``).
EVENT_SCHEMA: dict[str, str] = {
    "event_id": "int", "run": "int", "key": "key", "key_kind": "text", "name": "text",
    "cat": "text", "pid": "id", "tid": "id", "track": "text", "start_ns": "int",
    "end_ns": "int", "dur_ns": "int", "problem": "text",
}
#: The time columns every event table has.
TIME_COLUMNS: tuple[str, ...] = ("start_ns", "dur_ns")
INT_COLUMNS: tuple[str, ...] = tuple(c for c, k in EVENT_SCHEMA.items() if k == "int")
TEXT_COLUMNS: tuple[str, ...] = tuple(c for c, k in EVENT_SCHEMA.items() if k == "text")


def _is_text(values: pd.Series) -> bool:
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        cats = dtype.categories
        return len(cats) == 0 or all(isinstance(c, str) for c in cats.tolist())
    if pd.api.types.is_string_dtype(dtype):
        present = values.dropna()
        return all(isinstance(v, str) for v in present.head(1000).tolist())
    return False


def check_events(frame: pd.DataFrame, where: str = "event table",
                 required: Iterable[str] = TIME_COLUMNS) -> None:
    """Raise :class:`ToolkitError` unless ``frame`` follows the event table schema.

    Every column of :data:`EVENT_SCHEMA` that ``frame`` has must have its dtype; the
    ``required`` columns (default: ``start_ns`` and ``dur_ns``) must be present.
    """
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ToolkitError(f"the event table has no column(s) {missing}", where=where,
                           fix="name times start_ns / dur_ns in integer nanoseconds")
    for column, kind in EVENT_SCHEMA.items():
        if column not in frame.columns:
            continue
        values = frame[column]
        dtype = values.dtype
        ok = {
            "int": isinstance(dtype, np.dtype) and dtype == np.int64,
            "text": _is_text(values),
            "key": (isinstance(dtype, np.dtype) and dtype == np.int64) or dtype == np.dtype(object),
            "id": (isinstance(dtype, np.dtype) and dtype == np.int64) or dtype == np.dtype(object),
        }[kind]
        if not ok:
            raise ToolkitError(f"column {column!r} has dtype {dtype}, the event table schema "
                               f"wants {kind}", where=where,
                               fix="see toolkit.formats.events for the columns and dtypes")
