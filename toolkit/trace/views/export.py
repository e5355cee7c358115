"""Write an attribution for viewers: a Chrome trace for Perfetto, node data for Model Explorer.

**Chrome trace** (:func:`to_chrome_trace`): the trace's events again, as ``"X"`` events with
exact times, each *named by its original layer(s)* (``" + "``-joined when an op fuses
several; unattributed events keep their own name), so that the timeline reads as the layers
the user wrote. Each carries in ``args`` what it was joined to: ``event`` (the event's own
name), ``layers`` (list of original layer names), ``source_ops`` (list of origin ids),
``optimised_id`` (the compiled op, when the event names one), ``command_id`` (when the
trace has it), ``run``, ``key``, ``key_kind``, ``unattributed`` (the reason, only on events
that were not attributed) and the source trace's own args.

**Model Explorer node data** (:func:`to_model_explorer`), the JSON that Model Explorer's
``node_data_builder.ModelNodeData`` writes and its "load node data" accepts::

    {
      "<graph id>": {
        "results": {"<node id or output tensor name>": {"value": 1.25}, ...},
        "gradient": [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#d32f2f"}]
      }
    }

``results`` is keyed by the output tensor name of each op (Model Explorer matches it against the
``tensor_name`` of a node's outputs): source op names (``level="source_op"``, to paint the model
as given) or compiled op names (``level="op"``, to paint the compiled ``.circle``). For a
TFLite/circle model the graph id is the subgraph's name (Model Explorer looks graphs up by
it): taken from the model joined (the source model for ``level="source_op"``, the compiled
one for ``level="op"``), ``"main"`` when the subgraph has no name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.join.attribution import Attribution
from toolkit.trace.join.stats import STAT_COLUMNS

__all__ = ["to_chrome_trace", "to_model_explorer", "model_explorer_data", "graph_id_of"]

_OURS = ("event", "run", "key", "key_kind", "optimised_id", "layers", "source_ops",
         "unattributed")
_SKIP = frozenset({"event_id", "end_ns", "problem", "start_ns", "dur_ns", "name", "cat", "pid",
                   "tid", "track"})
_LEVELS = ("source_op", "op")
_GRADIENT = [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#d32f2f"}]


def _chrome_frame(att: Attribution) -> pd.DataFrame:
    """The event frame written by :func:`to_chrome_trace` (one row per trace event)."""
    ev = att.trace.events
    joined = att.event_layers()
    dur = ev["dur_ns"].to_numpy(dtype=np.int64)
    layers = joined["layers"]
    titles = pd.Index([" + ".join(t) for t in layers.cat.categories], dtype=object)
    own = ev["name"].astype(object).to_numpy()
    codes = layers.cat.codes.to_numpy()
    names = np.where(titles.to_numpy()[codes] != "", titles.to_numpy()[codes], own)
    frame = pd.DataFrame({"name": pd.Categorical(names),
                          "start_ns": ev["start_ns"].to_numpy(dtype=np.int64),
                          "dur_ns": np.maximum(dur, 0)})
    for column in ("cat", "pid", "tid", "track"):
        if column in ev.columns:
            frame[column] = ev[column].reset_index(drop=True)
    frame["event"] = ev["name"].reset_index(drop=True)
    frame["run"] = ev["run"].to_numpy(dtype=np.int64)
    frame["key"] = ev["key"].reset_index(drop=True)
    frame["key_kind"] = joined["key_kind"]
    op = joined["optimised_id"].to_numpy(dtype=np.int64)
    used = np.unique(op[op >= 0])
    frame["optimised_id"] = pd.Categorical.from_codes(
        np.where(op >= 0, np.searchsorted(used, op), -1), categories=pd.Index(used))
    frame["layers"] = joined["layers"]
    frame["source_ops"] = joined["source_ids"]
    reason = joined["reason"]
    codes = reason.cat.codes.to_numpy().astype(np.int64)
    frame["unattributed"] = pd.Categorical.from_codes(
        np.where(codes == 0, -1, codes), categories=reason.cat.categories)
    for column in ev.columns:
        if column in _SKIP or column in _OURS or str(column).startswith("key"):
            continue
        bare = column[4:] if str(column).startswith("arg_") else column
        if bare in _OURS or bare in frame.columns:
            continue
        frame[column] = ev[column].reset_index(drop=True)
    return frame


def to_chrome_trace(att: Attribution, path: str | os.PathLike[str], *,
                    process_name: str = "toolkit trace-join") -> Path:
    """Write the attributed trace as a Chrome trace event JSON file (Perfetto opens it).

    Args:
        att: the attribution to write.
        path: output file (``.gz`` compresses); written atomically.
        process_name: the process label shown by the viewer.

    Returns:
        The path written. One ``"X"`` event per trace event (negative durations written as 0;
        their ``unattributed`` arg says so), args as in the module docstring; ``otherData``
        holds the policy, the key used and the totals in nanoseconds.
    """
    from toolkit.formats.chrome_trace import write_chrome_trace

    meta = {**att.summary(), "source": str(att.trace.meta.get("source", ""))}
    return write_chrome_trace(_chrome_frame(att), path, process_name=process_name,
                              metadata=meta)


def graph_id_of(provenance: Any, level: str = "source_op") -> str:
    """Return the Model Explorer graph id of the model joined: the name of its first subgraph
    (the source model's for ``level="source_op"``, the compiled model's for ``"op"``), or
    ``"main"`` when it has none or the provenance holds no model."""
    models = [getattr(provenance, "source", None), getattr(provenance, "model", None)]
    if level == "op":
        models.reverse()
    for model in models:
        graph = getattr(model, "graph", None)
        name = getattr(graph, "name", None)
        if isinstance(name, str) and name:
            return name
    return "main"


def model_explorer_data(att: Attribution, *, graph_id: str | None = None,
                        level: str = "source_op", value: str = "total_ms") -> dict[str, Any]:
    """Return Model Explorer node data (see the module docstring) as a dict.

    Args:
        att: the attribution.
        graph_id: the graph (subgraph) the values belong to; default: the subgraph's name
            (:func:`graph_id_of`).
        level: ``"source_op"`` (keys: source op names, for the model as given) or ``"op"``
            (keys: compiled op names, for the compiled model).
        value: ``"total_ms"`` (milliseconds over the whole trace) or any statistics column of
            :data:`~toolkit.trace.join.stats.STAT_COLUMNS` (``avg_ms``, ``p50_ms``, ``share`` ...).

    Returns:
        ``{graph_id: {"results": {name: {"value": number}}, "gradient": [...]}}``; rows that
        share a name (an op with several origins) are summed; rows without a name are left
        out.
    """
    if level not in _LEVELS:
        raise ToolkitError(f"unknown level {level!r}", fix=f"use one of {_LEVELS}")
    if value != "total_ms" and value not in STAT_COLUMNS:
        raise ToolkitError(f"unknown value {value!r}",
                           fix=f"use 'total_ms' or one of {STAT_COLUMNS}")
    table = att.by_source_op() if level == "source_op" else att.by_op()
    values = (table["total_ns"] / 1e6 if value == "total_ms" else table[value]).fillna(0)
    names = table["name"].astype(object).fillna("").to_numpy(dtype=object)
    keep = names != ""
    summed = pd.Series(values.to_numpy()[keep]).groupby(names[keep], sort=False).sum()
    results = {str(k): {"value": (int(v) if value in ("total_ns", "events") else float(v))}
               for k, v in summed.items()}
    if graph_id is None:
        graph_id = graph_id_of(att.provenance, level)
    return {graph_id: {"results": results, "gradient": _GRADIENT}}


def to_model_explorer(att: Attribution, path: str | os.PathLike[str], *,
                      graph_id: str | None = None, level: str = "source_op",
                      value: str = "total_ms") -> Path:
    """Write Model Explorer node data JSON (see :func:`model_explorer_data`); return the path.

    Written atomically. Load it in Model Explorer with "Add per-node data" or
    ``model_explorer.visualize(..., node_data_paths=[path])``.
    """
    from toolkit.util.atomic import atomic_write

    data = model_explorer_data(att, graph_id=graph_id, level=level, value=value)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, (json.dumps(data, indent=1) + "\n").encode("utf-8"))
    return out
