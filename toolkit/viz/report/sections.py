"""The tables of the profiling report, one function per section, from any attribution.

Every function takes what the report notebook holds (attributions read through the views all
of them share, a :class:`~toolkit.trace.views.diff.LayerDiff`, any object with ``by_layer()``) and
returns a DataFrame or a line of text, so that the notebook's cells stay one call each and a
reader of the executed notebook can call them again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError

__all__ = ["summary_table", "check_line", "top_layers", "per_backend", "unattributed_reasons",
           "provenance_of", "generic_by_layer", "layer_rows"]


def layer_rows(att: Any) -> pd.DataFrame:
    """``by_layer()`` without an ExecuTorch profile's bucket rows (runtime time)."""
    table = att.by_layer()
    if "kind" in table.columns:
        table = table[table["kind"].astype(str) == "layer"].reset_index(drop=True)
    return table


def summary_table(att: Any) -> pd.DataFrame:
    """The headline figures of an attribution as rows ``figure``, ``value`` (str): events,
    runs, total / attributed / overhead / unattributed time (ms, % of the total), policy, key,
    match score (when the attribution has one)."""
    s = att.summary()
    total = int(s["total_ns"])

    def ms(ns: Any) -> str:
        return f"{int(ns) / 1e6:,.3f} ms ({100 * int(ns) / (total or 1):.1f} %)"

    rows = [("source", type(att).__name__), ("events", f"{int(s['events']):,}"),
            ("events attributed", f"{int(s['attributed_events']):,}"),
            ("runs", f"{int(s['runs']):,}"), ("total time", f"{total / 1e6:,.3f} ms"),
            ("attributed to layers", ms(s["attributed_ns"])),
            ("overhead (runtime's own)", ms(s["overhead_ns"])),
            ("unattributed", ms(s["unattributed_ns"])),
            ("split policy", str(s["policy"]))]
    if "key_used" in s:
        rows.append(("key", str(s["key_used"]) or "-"))
    score = s.get("match_score")
    if score is not None and not (isinstance(score, float) and np.isnan(score)):
        rows.append(("match score", f"{100 * float(score):.1f} % of keyed events match "
                                    "the model"))
    if s.get("skipped_runs"):
        rows.append(("warm-up runs skipped", str(s["skipped_runs"])))
    return pd.DataFrame(rows, columns=["figure", "value"])


def check_line(att: Any) -> str:
    """``check()`` as one line: that the time adds up to the ns, or what does not."""
    try:
        att.check()
    except ToolkitError as exc:
        return f"check() FAILED: {exc}"
    return "check() passed: attributed + overhead + unattributed time = the trace's time, " \
           "to the ns"


def top_layers(att: Any, n: int = 15) -> pd.DataFrame:
    """The ``n`` layers with the most time: ``layer``, ``total_ns``, ``share``, ``events``,
    ``avg_ms``, ``p50_ms``, ``max_ms`` (those the attribution has)."""
    table = layer_rows(att).sort_values("total_ns", ascending=False, kind="stable").head(n)
    cols = [c for c in ("layer", "total_ns", "share", "events", "avg_ms", "p50_ms", "max_ms")
            if c in table.columns]
    return table[cols].reset_index(drop=True)


def per_backend(att: Any) -> pd.DataFrame | None:
    """``by_backend()`` (``backend``, ``total_ns``, ``share``, ``events``, ``avg_ms``,
    ``p50_ms``), or None when the attribution has no backends."""
    fb = getattr(att, "by_backend", None)
    if not callable(fb):
        return None
    table = fb()
    cols = [c for c in ("backend", "total_ns", "share", "events", "avg_ms", "p50_ms")
            if c in table.columns]
    return table[cols]


def unattributed_reasons(att: Any) -> pd.DataFrame:
    """Unattributed events by reason: ``reason`` (str), ``events`` (int64), ``dur_ns``
    (int64), largest first."""
    un = att.unattributed()
    if "events" in un.columns and "self_ns" in un.columns:  # a fleet keeps counts
        out = un.rename(columns={"self_ns": "dur_ns"})[["reason", "events", "dur_ns"]]
    else:
        dur = un["dur_ns"] if "dur_ns" in un.columns else pd.Series(np.zeros(len(un)))
        out = (pd.DataFrame({"reason": un["reason"].astype(str), "dur_ns": dur.clip(lower=0)})
               .groupby("reason", observed=True)["dur_ns"].agg(["count", "sum"])
               .rename(columns={"count": "events", "sum": "dur_ns"}).reset_index())
    return out.sort_values("dur_ns", ascending=False, kind="stable").reset_index(drop=True)


def _mask(flags: Any) -> np.ndarray:
    return np.fromiter(flags, dtype=bool)


def _fmt_ids(values: Any) -> str:
    return ", ".join(str(v) for v in values)


def provenance_of(att: Any, layers: list[str]) -> pd.DataFrame:
    """The thread from each of ``layers`` down to what ran: ``layer``, ``source_ops`` (the
    source ops carrying it), ``compiled_ops`` (the ops that hold them, with their backend),
    ``commands`` (the commands of those ops, or for runtimes without a queue what ran),
    ``total_ns`` of the layer. Empty when the attribution keeps no provenance tables."""
    cols = ["layer", "source_ops", "compiled_ops", "commands", "total_ns"]
    own = layer_rows(att).set_index("layer")["total_ns"]
    rows = []
    if callable(getattr(att, "by_source_op", None)) and callable(getattr(att, "by_op", None)):
        src = att.by_source_op()
        ops = att.by_op()
        cmds = att.by_command() if callable(getattr(att, "by_command", None)) else None
        for layer in layers:
            hit = src.loc[_mask(layer in t.split(";") for t in src["layers"].astype(str))]
            ids = set(hit["source_id"].tolist())
            held = ops.loc[_mask(bool(ids & set(s)) for s in ops["source_ids"])]
            op_ids = held["optimised_id"].tolist()
            commands = ""
            if cmds is not None and len(cmds):
                mine = cmds[cmds["optimised_id"].isin(op_ids)]
                commands = f"{len(mine)}: " + _fmt_ids(mine["command_id"].tolist()[:12]) + (
                    " …" if len(mine) > 12 else "")
            rows.append({
                "layer": layer,
                "source_ops": _fmt_ids(f"{o} {n}" for o, n in
                                       zip(hit["operator"].tolist(), hit["name"].tolist())),
                "compiled_ops": _fmt_ids(f"{o} {n} [{b}]" for o, n, b in
                                         zip(held["operator"].tolist(), held["name"].tolist(),
                                             held["backend"].tolist())),
                "commands": commands, "total_ns": own.get(layer, 0)})
    elif callable(getattr(att, "origins", None)) and callable(getattr(att, "by_node", None)):
        nodes, origins = att.by_node(), att.origins()  # ONNX Runtime
        for layer in layers:
            mine = nodes[nodes["layer"] == layer]
            names = set(mine["name"].tolist())
            ran = origins.loc[_mask(bool(names & set(o)) for o in origins["original"])]
            rows.append({"layer": layer,
                         "source_ops": _fmt_ids(f"{o} {n}" for o, n in
                                                zip(mine["op"].tolist(), mine["name"].tolist())),
                         "compiled_ops": _fmt_ids(f"{o} {n}" for o, n in
                                                  zip(ran["op"].tolist(), ran["name"].tolist())),
                         "commands": "", "total_ns": own.get(layer, 0)})
    elif "layer" in att.by_op().columns:  # ExecuTorch: the edge nodes of each layer
        ops = att.by_op()
        for layer in layers:
            mine = ops[ops["layer"] == layer]
            rows.append({"layer": layer, "source_ops": "",
                         "compiled_ops": _fmt_ids(f"{o} {n}" for o, n in
                                                  zip(mine["op"].tolist(),
                                                      mine["name"].tolist())),
                         "commands": "", "total_ns": own.get(layer, 0)})
    return pd.DataFrame(rows, columns=cols)


def generic_by_layer(obj: Any, n: int | None = 30) -> pd.DataFrame:
    """The first ``n`` rows (all with None) of any object's ``by_layer()`` (a numerics
    comparison, ...), or of a DataFrame given as it is.

    Raises:
        ToolkitError: the object has no ``by_layer()`` returning a DataFrame.
    """
    table = obj if isinstance(obj, pd.DataFrame) else None
    if table is None and callable(getattr(obj, "by_layer", None)):
        table = obj.by_layer()
    if not isinstance(table, pd.DataFrame):
        raise ToolkitError(f"the report's numerics is a {type(obj).__name__} without a "
                           "by_layer() table", fix="pass what tk.compare returned, a "
                                                   "DataFrame, or a CSV of one")
    return table if n is None else table.head(n)
