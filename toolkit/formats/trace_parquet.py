"""Trace Parquet files: one row per event, integer nanoseconds, the format engines read.

Written columns: every column of the event frame, with times (``start_ns``, ``dur_ns``,
``end_ns`` and any other ``*_ns``) and ``event_id``/``run`` as ``int64``, integer key columns
(``key``, ``command_id``, ``op_index``, ``debug_handle``, ``part``, ``part_op_index``,
``optimised_id`` and their ``arg_`` forms) as ``int32`` when every value fits (nullable:
a missing key is a null), text and categoricals as dictionaries (read back as
categoricals). Reading returns the frame with ``int64`` times and keys widened back to
``int64`` (nullable ``Int64`` where a key is missing). Needs ``pyarrow`` (optional extra
``toolkit[parquet]``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError, TraceError
from toolkit.util.atomic import atomic_open

__all__ = ["write_trace_parquet", "read_trace_parquet", "KEY_INT_COLUMNS"]

#: Integer key columns stored as ``int32`` when they fit.
KEY_INT_COLUMNS: tuple[str, ...] = tuple(
    p + c for c in ("key", "command_id", "op_index", "debug_handle", "part", "part_op_index",
                    "optimised_id", "source_op_index") for p in ("", "arg_"))
_INT32 = (np.iinfo(np.int32).min, np.iinfo(np.int32).max)


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ToolkitError("reading and writing Parquet traces needs pyarrow",
                           fix="pip install 'toolkit[parquet]'") from None
    return pa, pq


def _int_key(values: pd.Series) -> pd.Series | None:
    """``values`` as nullable ``Int32`` when they are all integers (or missing) in range."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        ints = values.to_numpy()
        if len(ints) == 0 or (ints.min() >= _INT32[0] and ints.max() <= _INT32[1]):
            return values.astype("Int32")
        return None
    if isinstance(dtype, pd.Int64Dtype | pd.Int32Dtype) or dtype == np.dtype(object):
        present = values.dropna()
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in present.tolist()):
            return None
        if len(present) and not (_INT32[0] <= int(present.min()) and
                                 int(present.max()) <= _INT32[1]):
            return None
        return values.astype("Int32")
    return None


def write_trace_parquet(events: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write an event frame (:attr:`Trace.events`, an event tracer's frame, any frame of the
    event table schema) as Parquet, atomically; return the path.

    Raises:
        ToolkitError: no ``start_ns``/``dur_ns`` columns, a time column that is not integer,
            or pyarrow is missing.
    """
    pa, pq = _pyarrow()
    missing = [c for c in ("start_ns", "dur_ns") if c not in events.columns]
    if missing:
        raise ToolkitError(f"the event frame has no column(s) {missing}", where=str(path),
                           fix="name times start_ns / dur_ns in integer nanoseconds")
    out: dict[str, Any] = {}
    for column in events.columns:
        values = events[column]
        name = str(column)
        if name.endswith("_ns") or name in ("event_id", "run"):
            if not (isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu"):
                raise ToolkitError(f"column {name!r} has dtype {values.dtype}, not integer",
                                   where=str(path), fix="times are int64 nanoseconds")
            out[name] = values.to_numpy(dtype=np.int64)
            continue
        if name in KEY_INT_COLUMNS:
            narrow = _int_key(values)
            if narrow is not None:
                out[name] = narrow
                continue
        if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
            present = values.dropna()
            if not all(isinstance(v, str) for v in present.tolist()):
                values = values.map(lambda v: None if v is None else str(v))
            values = values.astype("category")  # a dictionary: names repeat run after run
        out[name] = values
    table = pa.Table.from_pandas(pd.DataFrame(out), preserve_index=False)
    p = Path(path)
    with atomic_open(p) as f:
        pq.write_table(table, f)
    return p


def read_trace_parquet(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a trace Parquet file into an event frame (``int64`` times; integer keys widened
    to ``int64``, or nullable ``Int64`` when some are missing).

    Raises:
        TraceError: the file cannot be read as Parquet.
    """
    pa, pq = _pyarrow()
    try:
        table = pq.read_table(path, use_threads=False)
        # column by column, each Arrow column freed once converted: the peak is about one
        # copy of the events, not two
        frame: pd.DataFrame = table.to_pandas(split_blocks=True, self_destruct=True,
                                              use_threads=False)
        del table
        pa.default_memory_pool().release_unused()  # the decoded pages go back to the system
    except (OSError, ValueError, KeyError, TypeError, IndexError, NotImplementedError,
            pa.lib.ArrowException) as exc:  # e.g. a column type arrow cannot convert
        raise TraceError(f"cannot read the Parquet trace ({exc!r:.200})", where=str(path),
                         fix="pass a Parquet file written by write_trace_parquet or an "
                             "engine (one row per event)") from None
    for column in frame.columns:
        values = frame[column]
        if str(column) in KEY_INT_COLUMNS and (
                isinstance(values.dtype, pd.Int32Dtype | pd.Int16Dtype | pd.Int8Dtype) or
                (isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu")):
            frame[column] = (values.to_numpy(dtype=np.int64) if not values.isna().any()
                             else values.astype("Int64"))
    return frame
