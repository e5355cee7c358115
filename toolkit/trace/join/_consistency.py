"""Compare what each trace event says about itself with the model op its key names.

An event keyed by command 12 that also says ``op_type=CONV_2D, op_name='stem_conv'`` is
consistent with the model only if command 12 runs that op. Compared, wherever the event carries
the field (with or without the Chrome readers' ``arg_`` prefix) and the key's target names one
op (or one source op):

============== ======================================================== ======================
field          event columns                                            model side
============== ======================================================== ======================
op name        ``op_name``                                              the op's ``name``
op type        ``op_type``, ``operator``                                its ``operator``
compiled op    ``optimised_id`` (unless it is the key)                  its ``optimised_id``
part           ``part`` (unless it is the key)                          its ``part``
backend        ``backend``                                              its ``backend``
command        ``command_id`` (unless it is the key)                    the op it runs
debug handle   ``debug_handle``, ... (unless it is the key)             the op it names
============== ======================================================== ======================

A key that reads as a *source* op (``source_op_index``, ``source_name``) is compared with the
source op's name and operator. Events whose target spans several ops (a whole part, a debug
handle over several ops) are compared on the fields all those ops share (none, today).

Every comparison is vectorised: event values become codes once, the model's value per target
is looked up in those codes, and one array comparison per field finds the mismatches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.trace.join.catalog import TARGET_KINDS, Catalog
from toolkit.trace.join.keys import KEY_KINDS, integer_values, present_mask

__all__ = ["Mismatches", "find_mismatches", "FIELDS"]

#: Fields compared: (field, event columns).
FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("name", ("op_name", "arg_op_name")),
    ("type", ("op_type", "arg_op_type", "operator", "arg_operator")),
    ("optimised_id", ("optimised_id", "arg_optimised_id")),
    ("part", ("part", "arg_part")),
    ("backend", ("backend", "arg_backend")),
    ("command_id", ("command_id", "arg_command_id")),
    ("debug_handle", ("delegate_debug_identifier", "arg_delegate_debug_identifier",
                      "debug_handle", "arg_debug_handle")),
)
_OP_FIELDS = ("command_id", "debug_handle")  # compared through the op they name
_SKIP = -3  # model value code: not compared for this target
_ABSENT = -2  # model value code: a value no event carries (never equal)


@dataclass
class Mismatches:
    """Per-event outcome of the comparison.

    ``rows``: ``int64`` rows of the events that disagree with their target; ``first``: per
    such row, the index into :data:`FIELDS` of the first field that disagrees; ``compared``:
    number of events for which at least one field was compared.
    """

    rows: np.ndarray
    first: np.ndarray
    compared: int


def _target_values(cat: Catalog) -> dict[str, np.ndarray]:
    """Model value of each field per target (``object``; ``None`` where not compared)."""
    t = cat.targets
    kind = cat.target_kind
    ptr = cat.target_ptr
    op = cat.target_op
    ops = cat.ops
    n_ops = len(cat.op_ids)
    out = {f: np.full(t, None, dtype=object) for f, _ in FIELDS}
    is_source = np.isin(kind, [TARGET_KINDS.index("source_idx"), TARGET_KINDS.index("source")])
    has_op = (op >= 0) & ~is_source
    rows = op[has_op]

    def op_column(name: str) -> np.ndarray:
        if name not in ops.columns or n_ops == 0:
            return np.full(n_ops, None, dtype=object)
        col = ops[name]
        return col.astype(object).where(col.notna(), None).to_numpy(dtype=object)

    out["name"][has_op] = op_column("name")[rows]
    out["type"][has_op] = op_column("operator")[rows]
    out["optimised_id"][has_op] = cat.op_ids[rows].astype(object)
    for field in _OP_FIELDS:  # op positions
        out[field][has_op] = rows.astype(object)
    if "part" in ops.columns:
        out["part"][has_op] = op_column("part")[rows]
    if "backend" in ops.columns:
        out["backend"][has_op] = op_column("backend")[rows]
    # a source target with one source op: its name and operator
    sizes = np.diff(ptr)
    src = np.flatnonzero(is_source & (sizes > 0))
    if len(src):
        first = cat.member_source[ptr[src]]
        last = cat.member_source[ptr[src + 1] - 1]
        one = first == last
        out["name"][src[one]] = cat.source_name[first[one]]
        out["type"][src[one]] = cat.source_operator[first[one]]
    for f in out:
        if f in _OP_FIELDS:
            continue
        values = out[f]
        empty = np.array([v is None or v == "" or (isinstance(v, float) and np.isnan(v))
                          for v in values.tolist()], dtype=bool) if t else np.zeros(0, bool)
        values[empty] = None
    return out


def _event_codes(values: pd.Series, model: np.ndarray, numeric: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(event code per row (-1: no value), model value code per target)`` in one code space."""
    targets = len(model)
    wanted = np.array([v is not None for v in model.tolist()], dtype=bool) if targets else \
        np.zeros(0, bool)
    model_code = np.full(targets, _SKIP, dtype=np.int64)
    if numeric:
        ints, ok = integer_values(values)
        ok = ok & present_mask(values)
        code = np.where(ok, ints, -1)
        code = np.where(code < 0, -1, code)
        idx = np.flatnonzero(wanted)
        model_code[idx] = np.array([int(v) for v in model[idx].tolist()], dtype=np.int64)
        return code, model_code
    if isinstance(values.dtype, pd.CategoricalDtype):
        code = values.cat.codes.to_numpy().astype(np.int64)
        cats = pd.Index([str(c) for c in values.cat.categories], dtype=object)
    else:
        c, uniques = pd.factorize(values.astype(object).to_numpy(), use_na_sentinel=True)
        code = np.asarray(c, dtype=np.int64)
        cats = pd.Index([str(u) for u in uniques.tolist()], dtype=object)
    empty = np.flatnonzero(cats == "")
    if len(empty):
        code = np.where(np.isin(code, empty), -1, code)
    idx = np.flatnonzero(wanted)
    if len(idx):
        found = cats.get_indexer(pd.Index([str(v) for v in model[idx].tolist()], dtype=object))
        model_code[idx] = np.where(found >= 0, found, _ABSENT)
    return code, model_code


_NO_VALUE = -4  # event side: the event carries no such value


def _op_of(values: pd.Series, field: str, cat: Catalog) -> np.ndarray:
    """Op position named by each event's command id or debug handle (``-2`` when the model
    has no such command or handle, ``-1`` when the handle spans several ops, :data:`_NO_VALUE`
    when the event has none)."""
    from toolkit.trace.join.catalog import UNKNOWN

    present = present_mask(values)
    ints, ok = integer_values(values)
    out = np.full(len(values), _NO_VALUE, dtype=np.int64)
    if field == "command_id":
        row = cat.command_lookup.get(np.where(ok, ints, -1))
        op = np.where(row >= 0, cat.command_op[np.maximum(row, 0)] if len(cat.command_op)
                      else -2, -2)
        out = np.where(present & ok, op, np.where(present, -2, _NO_VALUE))
        return out.astype(np.int64)
    target = cat.handle_int_lookup.get(np.where(ok, ints, 0))
    target = np.where(ok, target, UNKNOWN)
    retry = present & (target < 0)
    if retry.any():
        texts = values.astype(object).to_numpy()[retry]
        target[retry] = [cat.handle_text_lookup.get(str(v), UNKNOWN) for v in texts.tolist()]
    op = np.where(target >= 0, cat.target_op[np.maximum(target, 0)], -2)
    op = np.where(op == -1, _NO_VALUE, op)  # a handle over several ops: not compared
    return np.where(present, op, _NO_VALUE).astype(np.int64)


def find_mismatches(events: pd.DataFrame, target: np.ndarray, kind: np.ndarray,
                    rows: np.ndarray, cat: Catalog) -> Mismatches:
    """Compare the events ``rows`` (matched to ``target``) with their targets (see the module
    docstring).

    Args:
        events: the trace's events.
        target: ``int32`` target per event.
        kind: ``int8`` key kind code per event (``1 + KEY_KINDS.index``).
        rows: ``int64`` rows to compare (events matched to a target), or a ``bool`` mask of
            them (made into rows only when there is something to compare).
        cat: the catalog.
    """
    present = [(i, f, next((c for c in cols if c in events.columns), None))
               for i, (f, cols) in enumerate(FIELDS)]
    # a command id or debug handle that keys every event names its own op: nothing to compare
    # (checked on all events first, cheaply, before any per-row array is made)
    present = [(i, f, c) for i, f, c in present if c is not None
               and not (f in _OP_FIELDS and not np.any(kind != 1 + KEY_KINDS.index(f)))]
    empty = np.zeros(0, dtype=np.int64)
    if not present:
        return Mismatches(empty, empty, 0)
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)
    if len(rows) == 0:
        return Mismatches(empty, empty, 0)
    model = _target_values(cat)
    t = target[rows].astype(np.int64)
    k = kind[rows]
    first = np.full(len(rows), -1, dtype=np.int64)
    compared = np.zeros(len(rows), dtype=bool)
    for i, field, column in present:
        if not any(v is not None for v in model[field].tolist()):
            continue
        if field in _OP_FIELDS:
            if not bool((k != 1 + KEY_KINDS.index(field)).any()):
                continue  # every event is keyed by this field: nothing to compare
            ev = _op_of(events[column].iloc[rows], field, cat)
            model_code = np.array([_SKIP if v is None else int(v)
                                   for v in model[field].tolist()], dtype=np.int64)
        else:
            code, model_code = _event_codes(events[column], model[field],
                                            field in ("optimised_id", "part"))
            ev = code[rows]
        want = model_code[t]
        check = (ev >= 0) & (want != _SKIP)
        if field == "optimised_id":
            check &= k != 1 + KEY_KINDS.index("op_index")
        if field == "part":
            check &= ~np.isin(k, [1 + KEY_KINDS.index("part"), 1 + KEY_KINDS.index("part_op")])
        if field in _OP_FIELDS:
            check = (ev != _NO_VALUE) & (want != _SKIP) & (k != 1 + KEY_KINDS.index(field))
        compared |= check
        bad = check & (ev != want) & (first < 0)
        first[bad] = i
    hit = first >= 0
    return Mismatches(rows[hit], first[hit], int(compared.sum()))


def describe(events: pd.DataFrame, rows: np.ndarray, target: np.ndarray, cat: Catalog
             ) -> list[tuple[str, np.ndarray]]:
    """Group the mismatching ``rows`` by (target, what the event says) and give each group
    its reason text: ``trace event names CONV_2D 'stem_conv', model op 3 is MAX_POOL_2D
    'pool'``. Returns ``[(text, rows), ...]``; grouped on integer codes, one text per group."""
    if len(rows) == 0:
        return []
    model = _target_values(cat)
    group = target[rows].astype(np.int64)
    said: dict[str, np.ndarray] = {}
    for field, cols in FIELDS:
        column = next((c for c in cols if c in events.columns), None)
        if column is None:
            said[field] = np.full(len(rows), None, dtype=object)
            continue
        values = events[column].iloc[rows]
        codes, uniques = pd.factorize(values.astype(object).where(values.notna(), None),
                                      use_na_sentinel=True)
        codes = np.asarray(codes, dtype=np.int64)
        said[field] = np.asarray(uniques, dtype=object)[np.maximum(codes, 0)]
        said[field][codes < 0] = None
        joined, _ = pd.factorize(group * (len(uniques) + 1) + codes + 1)
        group = np.asarray(joined, dtype=np.int64)
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1]])
    out: list[tuple[str, np.ndarray]] = []
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(order)]):
        idx = order[a:b]
        r0 = int(idx[0])
        out.append((_text(said, r0, model, int(target[rows[r0]]), cat), rows[idx]))
    return out


def _fmt(type_: object, name: object) -> str:
    parts = []
    if type_ is not None and str(type_) not in ("", "None", "nan"):
        parts.append(str(type_))
    if name is not None and str(name) not in ("", "None", "nan"):
        parts.append(repr(str(name)))
    return " ".join(parts)


def _text(said: dict[str, np.ndarray], r: int, model: dict[str, np.ndarray], t: int,
          cat: Catalog) -> str:
    event = _fmt(said["type"][r], said["name"][r])
    extra = [f"{f} {said[f][r]}" for f in ("optimised_id", "part", "backend")
             if said[f][r] is not None and model[f][t] is not None
             and str(said[f][r]) != str(model[f][t])]
    if not event:  # nothing named: say which command or handle
        extra += [f"{f} {said[f][r]}" for f in _OP_FIELDS if said[f][r] is not None]
    if extra:
        event = ", ".join([e for e in (event, *extra) if e])
    kind = TARGET_KINDS[int(cat.target_kind[t])]
    if kind in ("source_idx", "source"):
        src = cat.member_source[cat.target_ptr[t]]
        where = f"source op {int(cat.source_op_index[src])}"
    else:
        op = int(cat.target_op[t])
        where = f"model op {int(cat.op_ids[op])}" if op >= 0 else "the model"
    mine = _fmt(model["type"][t], model["name"][t])
    mine_extra = [f"{f} {model[f][t]}" for f in ("optimised_id", "part", "backend")
                  if said[f][r] is not None and model[f][t] is not None
                  and str(said[f][r]) != str(model[f][t])]
    mine = ", ".join([m for m in (mine, *mine_extra) if m])
    return f"trace event names {event or '?'}, {where} is {mine or '?'}"
