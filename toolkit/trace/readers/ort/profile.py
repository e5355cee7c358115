"""ONNX Runtime profiles read into a :class:`~toolkit.trace.readers.read.Trace`.

    trace = read_ort_profile("onnxruntime_profile.json")
    trace.events[["run", "name", "op", "dur_ns"]]      # one row per kernel event
    trace.meta["runs"]                                   # one row per model_run span

ORT's profile is a bare JSON array (see :mod:`toolkit.formats.ort_profile`). Its ``Node``
events named ``<node>_kernel_time`` become the events, keyed by node name (``key_kind``
``name``); ``model_run`` spans are the runs (``run`` of a kernel event is the ordinal, in time
order, of the ``model_run`` span that holds it); the other ``Session`` spans and the
``_fence_before`` / ``_fence_after`` events are kept apart in ``meta``.
"""

from __future__ import annotations

import os
from typing import IO, Any

import numpy as np
import pandas as pd

from toolkit.errors import TraceError
from toolkit.formats.ort_profile import ORT_EVENT_CAP, read_ort_profile_events
from toolkit.trace.join.nesting import span_tree
from toolkit.trace.join.overlaps import track_codes
from toolkit.trace.readers.read import Trace

__all__ = ["read_ort_profile", "KERNEL_SUFFIX", "FENCE_SUFFIXES"]

KERNEL_SUFFIX = "_kernel_time"
FENCE_SUFFIXES = ("_fence_before", "_fence_after")
_STR = pd.Series([""]).dtype
OUTSIDE_RUN = "outside every model_run span"
OUTSIDE_RUN_TRUNCATED = ("after the last model_run span: the profile hit ORT's cap of "
                         f"{ORT_EVENT_CAP:,} events")


def _strip(names: pd.Categorical, suffix: str) -> pd.Categorical:
    cats = [c[: -len(suffix)] if c.endswith(suffix) else c for c in names.categories]
    unique = list(dict.fromkeys(cats))
    where = {c: i for i, c in enumerate(unique)}
    table = np.array([where[c] for c in cats], dtype=np.int64)
    codes = np.asarray(names.codes, dtype=np.int64)
    return pd.Categorical.from_codes(table[codes] if len(table) else codes,
                                     categories=pd.Index(unique, dtype=_STR))


def _str_categorical(values: pd.Categorical) -> pd.Categorical:
    return pd.Categorical.from_codes(np.asarray(values.codes),
                                     categories=pd.Index([str(c) for c in values.categories],
                                                         dtype=_STR))


def _spans(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    sub = frame.iloc[rows]
    return pd.DataFrame({
        "event_id": rows.astype(np.int64),
        "name": pd.Series([str(x) for x in sub["name"].tolist()], dtype=_STR),
        "start_ns": sub["ts_ns"].to_numpy(dtype=np.int64),
        "dur_ns": sub["dur_ns"].to_numpy(dtype=np.int64),
        "tid": sub["tid"].to_numpy(dtype=np.int64),
    })


def read_ort_profile(source: str | os.PathLike[str] | IO[bytes]) -> Trace:
    """Read an ORT profile (``.json`` / ``.json.gz``) into a :class:`Trace`.

    ``events``: one row per kernel event (``cat`` ``Node``, name ending ``_kernel_time``), in
    file order. Columns: ``event_id`` (``int64``, the event's position in the file), ``run``
    (``int64``: the ordinal, in start order, of the ``model_run`` span that holds the event;
    -1 when none does), ``key`` (the node name) with ``key_kind`` ``name``, ``name``
    (categorical: the node name, ``_kernel_time`` stripped), ``start_ns``, ``dur_ns``
    (``int64`` nanoseconds; ORT writes integer microseconds), ``problem`` (categorical:
    ``""`` or what is wrong: ``outside every model_run span``, after the last span of a
    truncated profile, missing time), ``op`` (categorical: ORT's ``op_name``, no domain),
    ``provider`` (categorical), ``node_index`` (``int64``, -1 when absent), ``pid``, ``tid``
    (``int64``), ``input_shapes`` / ``output_shapes`` (categorical: the JSON text of ORT's
    ``input_type_shape`` / ``output_type_shape``).

    ``meta``: ``source``, ``format`` (``"ort"``), ``run_from``, ``runs`` (DataFrame, one row
    per ``model_run`` span in start order: ``run``, ``event_id``, ``start_ns``, ``dur_ns``,
    ``kernel_ns`` (the kernel time inside it: each kernel span's exclusive time, so that a
    control-flow node's body, which ORT times inside the node's own span, counts once),
    ``kernel_events``), ``session`` (the other
    ``Session`` spans: ``event_id``, ``name``, ``start_ns``, ``dur_ns``, ``tid``), ``fences``
    (the fence events, same columns), ``other_events`` (count of events of any other kind),
    ``file_events`` (events in the file), ``truncated`` (True when the file holds ORT's cap
    of 1,000,000 events: ORT dropped the rest).

    Raises :class:`~toolkit.errors.TraceError` when the file cannot be read.
    """
    try:
        return _read_ort_profile(source)
    except UnicodeError as exc:  # a lone surrogate (a "\\ud800" escape) in a name
        raise TraceError(f"the profile holds text that is not valid Unicode ({exc})",
                         where=str(getattr(source, "name", source)),
                         fix="write names as valid UTF-8") from None


def _read_ort_profile(source: str | os.PathLike[str] | IO[bytes]) -> Trace:
    frame, info = read_ort_profile_events(source)
    n = len(frame)
    cat_values = frame["cat"].array
    cat_codes = np.asarray(cat_values.codes, dtype=np.int64)
    cat_names = [str(c) for c in cat_values.categories]
    names = frame["name"].array
    name_text = np.asarray(names.categories.astype(str), dtype=object)
    codes = np.asarray(names.codes, dtype=np.int64)
    is_kernel_name = np.array([c.endswith(KERNEL_SUFFIX) for c in name_text], dtype=bool)
    is_fence_name = np.array([c.endswith(FENCE_SUFFIXES) for c in name_text], dtype=bool)
    is_run_name = name_text == "model_run"
    node = cat_codes == (cat_names.index("Node") if "Node" in cat_names else -2)
    session = cat_codes == (cat_names.index("Session") if "Session" in cat_names else -2)
    kernel = node & is_kernel_name[codes] if len(name_text) else np.zeros(n, bool)
    fence = node & is_fence_name[codes] if len(name_text) else np.zeros(n, bool)
    run_span = session & is_run_name[codes] if len(name_text) else np.zeros(n, bool)
    other_session = session & ~run_span
    other = ~(kernel | fence | session)

    ts = frame["ts_ns"].to_numpy(dtype=np.int64)
    dur = frame["dur_ns"].to_numpy(dtype=np.int64)
    truncated = n >= ORT_EVENT_CAP

    # runs: model_run spans in start order
    span_rows = np.flatnonzero(run_span)
    span_rows = span_rows[np.argsort(ts[span_rows], kind="stable")]
    span_start = ts[span_rows]
    span_end = span_start + dur[span_rows]

    rows = np.flatnonzero(kernel)
    k_start = ts[rows]
    k_end = k_start + dur[rows]
    slot = np.searchsorted(span_start, k_start, side="right") - 1
    inside = (slot >= 0) & (k_end <= span_end[np.maximum(slot, 0)]) if len(span_start) else \
        np.zeros(len(rows), bool)
    run = np.where(inside, slot, -1).astype(np.int64)

    problem_src = frame["problem"].array
    problems = [str(c) for c in problem_src.categories]
    pcodes = np.asarray(problem_src.codes, dtype=np.int64)[rows].copy()

    def code_of(text: str) -> int:
        if text not in problems:
            problems.append(text)
        return problems.index(text)

    if "" not in problems:
        code_of("")
    empty = problems.index("")
    outside = ~inside & (pcodes == empty)
    if outside.any():
        if truncated:
            last_end = int(span_end.max()) if len(span_end) else -1
            late = outside & (k_start >= last_end)
            pcodes[late] = code_of(OUTSIDE_RUN_TRUNCATED)
            outside &= ~late
        pcodes[outside] = code_of(OUTSIDE_RUN)

    name = _strip(names, KERNEL_SUFFIX)
    name_codes = np.asarray(name.codes, dtype=np.int64)[rows]
    name_cat = pd.Categorical.from_codes(name_codes, categories=name.categories)
    key = pd.Series(np.asarray(name.categories, dtype=object)[name_codes]
                    if len(name.categories) else np.zeros(0, object), dtype=object)
    from toolkit.trace.join.keys import KEY_KINDS

    kind_categories = pd.Index(["", *KEY_KINDS], dtype=_STR)
    key_kind = pd.Categorical.from_codes(
        np.full(len(rows), kind_categories.get_loc("name"), dtype=np.int64),
        categories=kind_categories)

    def sub_cat(column: str) -> pd.Categorical:
        values = frame[column].array
        return pd.Categorical.from_codes(np.asarray(values.codes)[rows],
                                         categories=pd.Index([str(c) for c in
                                                              values.categories], dtype=_STR))

    events = pd.DataFrame({
        "event_id": rows.astype(np.int64),
        "run": run,
        "key": key,
        "key_kind": key_kind,
        "name": name_cat,
        "start_ns": k_start,
        "dur_ns": dur[rows],
        "problem": pd.Categorical.from_codes(pcodes, categories=pd.Index(problems, dtype=_STR)),
        "op": sub_cat("op_name"),
        "provider": sub_cat("provider"),
        "node_index": frame["node_index"].to_numpy(dtype=np.int64)[rows],
        "pid": frame["pid"].to_numpy(dtype=np.int64)[rows],
        "tid": frame["tid"].to_numpy(dtype=np.int64)[rows],
        "input_shapes": sub_cat("input_type_shape"),
        "output_shapes": sub_cat("output_type_shape"),
    }, copy=False)  # fresh arrays: no consolidating copy
    n_runs = len(span_rows)
    good = run >= 0
    # a control-flow node (If, Loop, Scan) times its body's nodes inside its own kernel
    # span: each span counts its exclusive time once
    tree = span_tree(k_start, dur[rows], (pcodes == empty) & (dur[rows] >= 0),
                     track_codes(events))
    exclusive = np.where(dur[rows] < 0, 0, tree.self_ns)
    kernel_ns = np.bincount(run[good], weights=exclusive[good].astype(np.float64),
                            minlength=n_runs).astype(np.int64) if n_runs else \
        np.zeros(0, np.int64)
    runs = pd.DataFrame({
        "run": np.arange(n_runs, dtype=np.int64),
        "event_id": span_rows.astype(np.int64),
        "start_ns": span_start,
        "dur_ns": dur[span_rows],
        "kernel_ns": kernel_ns,
        "kernel_events": np.bincount(run[good], minlength=n_runs).astype(np.int64),
    })
    if n and not kernel.any() and not run_span.any():
        raise TraceError("the profile has no kernel events and no model_run span",
                         where=info["source"],
                         fix="pass a profile of a session that ran the model "
                             "(SessionOptions.enable_profiling, then end_profiling())")
    meta: dict[str, Any] = {
        "source": info["source"], "format": "ort",
        "run_from": "model_run spans (the k-th span in start order is run k)",
        "runs": runs,
        "session": _spans(frame, np.flatnonzero(other_session)),
        "fences": _spans(frame, np.flatnonzero(fence)),
        "other_events": int(other.sum()),
        "file_events": n,
        "truncated": truncated,
        "fast_blocks": info["fast_blocks"], "json_blocks": info["json_blocks"],
    }
    return Trace(events, meta)
