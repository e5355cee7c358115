"""The ExecuTorch Inspector's table (``Inspector.to_dataframe()``), built from our readers.

For users who want the familiar view, and to show what it loses: the Inspector groups a run
block's events by signature and keeps only the *last* event of a signature repeated within a
block (a loop body's instructions are counted once), merges blocks with equal signatures into
one row with one sample per block, lists enclosing spans beside their children, and names a
delegated event by its delegate id. This module reproduces that table value for value
(ExecuTorch 1.5), with no torch and no executorch.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import pandas as pd

from toolkit.formats.etdump import ETDump
from toolkit.formats.etrecord import EdgeNode, ETRecord

__all__ = ["inspector_table", "inspector_total_for_module", "INSPECTOR_COLUMNS"]

#: Columns of ``Inspector.to_dataframe()`` (``include_units=True``).
INSPECTOR_COLUMNS: tuple[str, ...] = (
    "event_block_name", "event_name", "raw", "p10 (ms)", "p50 (ms)", "p90 (ms)", "avg (ms)",
    "min (ms)", "max (ms)", "op_types", "delegate_debug_identifier", "stack_traces",
    "module_hierarchy", "is_delegated_op", "delegate_backend_name", "debug_data", "start_time")
_FRAMEWORK = ("Method::init", "Program::load_method", "Method::execute")
_MAX_U32 = 2**32 - 1
_SCALE = 1_000_000.0  # ns -> ms


def _elapsed(start: Any, end: Any) -> Any:
    if start > end:
        if start > _MAX_U32 or end > _MAX_U32:
            from toolkit.errors import TraceError

            raise TraceError(f"an event ends ({end}) before it starts ({start}) and the times "
                             "are not 32-bit", fix="the ETDump is corrupt")
        return (_MAX_U32 - start) + end
    return end - start


def _node_map(record: ETRecord | None, method: str) -> dict[int, list[EdgeNode]]:
    out: dict[int, list[EdgeNode]] = {}
    if record is None:
        return out
    for node in record.nodes.get(method, []):
        if node.graph == "" and node.handle is not None and node.target != "_operator.getitem":
            out.setdefault(node.handle, []).append(node)
    return out


def _objects(values: pd.Series) -> np.ndarray:
    """Values as objects, None where missing."""
    out = values.astype(object).to_numpy().copy()
    out[values.isna().to_numpy()] = None
    return out


def _module_dict(node: EdgeNode) -> dict[str, tuple[str, str]] | None:
    return {k: (p, t) for k, p, t in node.module_stack} if node.module_stack else None


def inspector_table(dump: ETDump, record: ETRecord | None = None,
                    method: str = "forward") -> pd.DataFrame:
    """Return ``Inspector(etdump, etrecord).to_dataframe()`` for this ETDump (and ETRecord).

    Columns: :data:`INSPECTOR_COLUMNS` (times in ms as the Inspector computes them; ``raw``
    and ``start_time`` hold lists, ``stack_traces`` and ``module_hierarchy`` dicts).
    Only profile events are tabled (allocation and debug events have no timing).
    """
    ev = dump.events
    kinds = ev["kind"].astype(object).to_numpy()
    names = _objects(ev["name"])
    blocks = ev["block"].to_numpy()
    instr = ev["instruction_id"].fillna(-1).to_numpy(dtype=np.int64)
    chain = ev["chain_index"].fillna(0).to_numpy(dtype=np.int64)
    did = ev["delegate_debug_id_int"].fillna(-1).to_numpy(dtype=np.int64)
    dstr = _objects(ev["delegate_debug_id_str"])
    start = ev["start_time"].to_numpy()
    end = ev["end_time"].to_numpy()
    by_block: list[list[int]] = [[] for _ in dump.blocks]
    for i in np.flatnonzero(kinds == "profile").tolist():
        by_block[int(blocks[i])].append(i)

    # run signature -> (event signature -> [event index per block])
    groups: OrderedDict[tuple[Any, ...], OrderedDict[tuple[Any, ...], list[int]]] = OrderedDict()
    for b, rows in enumerate(by_block):
        if not rows:
            continue
        instruction_events: OrderedDict[tuple[Any, ...], list[int]] = OrderedDict()
        for i in rows:
            key = (int(instr[i]), int(chain[i]), int(did[i]), dstr[i])
            instruction_events.setdefault(key, []).append(i)
        signatures: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        for key, members in instruction_events.items():
            for i in members:
                sig = (key[0], names[i] or "", key[0] if key[0] != -1 else None,
                       key[2] if key[2] != -1 else None,
                       dstr[i] if dstr[i] != "" else None)
                signatures[sig] = i  # a repeated signature keeps the last event
        blk = dump.blocks[b]
        run_sig = (blk.name, tuple(signatures),
                   blk.bundled_input_index if blk.bundled_input_index is not None else -1)
        group = groups.setdefault(run_sig, OrderedDict())
        for sig, i in signatures.items():
            group.setdefault(sig, []).append(i)

    handle_map = record.debug_handle_map_raw.get(method, {}) if record else {}
    delegate_map_raw = {str(k): v for k, v in record.delegate_map.get(method, {}).items()} \
        if record else None
    node_map = _node_map(record, method)
    rows_out: list[dict[str, Any]] = []
    for run_sig, group in groups.items():
        for sig, members in group.items():
            instruction_id, name, _, d_int, d_str = sig
            identifier: Any = d_int if d_int is not None else (d_str or None)
            delegated = identifier is not None
            event_name = str(identifier) if delegated else name
            raw: list[float] = []
            starts: list[int] = []
            for i in members:
                s, e = int(start[i]), int(end[i])
                if delegated:
                    raw.append(float(_elapsed(s / _SCALE, e / _SCALE)))
                else:
                    raw.append(float(_elapsed(s, e)) / _SCALE)
                starts.append(s)
            row: dict[str, Any] = {
                "event_block_name": run_sig[0], "event_name": event_name, "raw": raw,
                "p10 (ms)": np.percentile(raw, 10), "p50 (ms)": np.percentile(raw, 50),
                "p90 (ms)": np.percentile(raw, 90), "avg (ms)": np.mean(raw),
                "min (ms)": min(raw), "max (ms)": max(raw), "op_types": [],
                "delegate_debug_identifier": identifier, "stack_traces": {},
                "module_hierarchy": {}, "is_delegated_op": delegated,
                "delegate_backend_name": None, "debug_data": [], "start_time": starts}
            handles = _resolve_handles(row, str(instruction_id), handle_map,
                                       delegate_map_raw, identifier)
            if handles is not None and event_name not in _FRAMEWORK:
                for h in handles if isinstance(handles, list) else [handles]:
                    for node in node_map.get(h, []):
                        label = node.name + "_"
                        if label not in row["stack_traces"]:
                            row["stack_traces"][label] = node.stack_trace
                            row["module_hierarchy"][label] = _module_dict(node)
                        if node.op:
                            row["op_types"].append(node.op)
            ops = row["op_types"]
            if len(ops) >= 5:
                row["op_types"] = (f"['{ops[0]}', '{ops[1]}' ... '{ops[-1]}'] "
                                   f"({len(ops)} total)")
            rows_out.append(row)
    frame = pd.DataFrame(rows_out, columns=list(INSPECTOR_COLUMNS))
    return frame


def _resolve_handles(row: dict[str, Any], instruction_id: str, handle_map: dict[str, Any],
                     delegate_map: dict[str, Any] | None, identifier: Any) -> Any:
    """The Inspector's debug-handle lookup for one row (sets ``delegate_backend_name``)."""
    if instruction_id not in handle_map:
        return None
    if identifier is None:
        if row["event_name"] == "DELEGATE_CALL" and delegate_map is not None and (
                meta := delegate_map.get(instruction_id)) is not None:
            row["delegate_backend_name"] = meta.get("name", "")
        return handle_map[instruction_id]
    if delegate_map is None or (meta := delegate_map.get(instruction_id)) is None:
        return handle_map[instruction_id]
    row["delegate_backend_name"] = meta.get("name", "")
    inner = meta.get("delegate_map") or {}
    handles = inner.get(identifier)
    if handles is None:
        handles = inner.get(str(identifier))
        for key, value in inner.items():
            if key in str(identifier):
                handles = value
    return handles


def inspector_total_for_module(table: pd.DataFrame, module_name: str) -> float:
    """``Inspector.find_total_for_module(module_name)`` on an :func:`inspector_table`: the sum
    of ``avg (ms)`` of every row (``OPERATOR_CALL`` rows left out) whose module hierarchy has
    a key *containing* ``module_name`` (a substring match, as the Inspector does)."""
    total = 0.0
    for name, hierarchy, avg in zip(table["event_name"], table["module_hierarchy"],
                                    table["avg (ms)"]):
        if name == "OPERATOR_CALL":
            continue
        for stack in hierarchy.values():
            if not stack:
                continue
            if any(module_name in key for key in stack):
                if avg is not None and avg == avg:
                    total += float(avg)
                break
    return total
