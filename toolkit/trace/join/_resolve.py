"""Look event keys up in a :class:`~toolkit.trace.join.catalog.Catalog`: key -> target.

Integer keys are looked up block by block with array lookups; text and mixed keys are
factorized first and each distinct value is looked up once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from toolkit.trace.join.catalog import AMBIGUOUS, UNKNOWN, Catalog
from toolkit.trace.join.keys import INT_KINDS, KEY_KINDS, integer_values, part_values

__all__ = ["Resolved", "resolve_keys", "reads_as_source_index", "NO_KIND"]

NO_KIND = 0  # kind code of events without a key; kind k is code 1 + KEY_KINDS.index(k)
_BLOCK = 1 << 17
_TEXT_KINDS = ("name", "source_name")


@dataclass
class Resolved:
    """Per event: ``target`` (``int32``, -1 when not matched), ``command`` (``int32`` command
    row, -1), and the rows that failed with each reason text."""

    target: np.ndarray
    command: np.ndarray
    failures: list[tuple[str, np.ndarray]]


def _factorized_lookup(values: np.ndarray, resolve: Callable[[object], int]) -> np.ndarray:
    """Resolve object keys once per distinct value."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    table = np.array([resolve(u) for u in list(uniques)] + [UNKNOWN], dtype=np.int64)
    return table[np.asarray(codes)]


def _lookup(kind: str, values: np.ndarray, cat: Catalog, part: np.ndarray | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Targets of keys of one kind: ``(target, command row, is_int)`` per key."""
    n = len(values)
    command = np.full(n, -1, dtype=np.int64)
    if kind in ("name", "source_name"):
        table = cat.name_lookup if kind == "name" else cat.source_name_lookup
        target = _factorized_lookup(values, lambda v: table.get(str(v), UNKNOWN))
        return target, command, np.ones(n, dtype=bool)
    if values.dtype == np.int64:
        ints, ok = values, None
    else:
        ints, ok = integer_values(pd.Series(values, dtype=object))
        if ok.all():
            ok = None
    if kind == "debug_handle":
        target = cat.handle_int_lookup.get(ints)
        if ok is not None:
            target[~ok] = UNKNOWN
        retry = target == UNKNOWN
        if retry.any():
            texts = cat.handle_text_lookup
            raw = values[retry] if values.dtype == object else ints[retry].astype(object)
            target[retry] = _factorized_lookup(raw, lambda v: texts.get(str(v), UNKNOWN))
        return target, command, np.ones(n, dtype=bool)
    if kind == "command_id":
        target = cat.command_target_lookup.get(ints)
        command = cat.command_lookup.get(ints)
    elif kind == "op_index":
        target = cat.op_lookup.get(ints)
    elif kind == "part":
        target = cat.part_lookup.get(ints)
    elif kind == "part_op":
        assert part is not None
        target = np.where(part >= 0, cat.part_op_lookup.get(cat.part_op_key(part, ints)),
                          UNKNOWN)
    else:  # source_op_index
        target = cat.source_index_lookup.get(ints)
    if ok is None:
        return target, command, np.ones(n, dtype=bool)
    return np.where(ok, target, UNKNOWN), np.where(ok, command, -1), ok


def _lookup_blocks(kind: str, values: np.ndarray, cat: Catalog, part: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_lookup` of ``int64`` keys block by block (each key is looked up on its own:
    the same result, with temporaries the size of a block)."""
    if values.dtype != np.int64 or len(values) <= _BLOCK:
        return _lookup(kind, values, cat, part)
    out = [_lookup(kind, values[b0:b0 + _BLOCK], cat,
                   part[b0:b0 + _BLOCK] if part is not None else None)
           for b0 in range(0, len(values), _BLOCK)]
    return (np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out]),
            np.concatenate([o[2] for o in out]))


def reads_as_source_index(events: pd.DataFrame, rows: np.ndarray, keys: np.ndarray,
                          cat: Catalog) -> bool:
    """True when ``op_index`` keys match the events' op names better as op indices of the
    *source* model than as compiled op indices (a trace of the uncompiled model).

    Looks at up to 100,000 of ``rows``; needs an ``op_name`` column and no ``optimised_id``.
    """
    if "optimised_id" in events.columns or "arg_optimised_id" in events.columns:
        return False
    column = next((c for c in ("op_name", "arg_op_name") if c in events.columns), None)
    if column is None or "name" not in cat.ops.columns or len(rows) == 0:
        return False
    rows = rows[:100_000]
    names = events[column].astype(object).to_numpy()[rows]
    pairs = pd.DataFrame({"k": pd.Series(keys[rows], dtype=keys.dtype), "n": names})
    pairs = pairs.drop_duplicates()
    ints, ok = integer_values(pairs["k"])
    given = pairs["n"].astype(str).to_numpy(dtype=object)[ok]
    ints = ints[ok]
    if len(ints) == 0:
        return False
    op = cat.op_lookup.get(ints)
    op_names = cat.ops["name"].astype(object).to_numpy()
    compiled = np.where(op >= 0, op_names[np.maximum(op, 0)] if len(op_names) else None, None)
    by_index = pd.Series(cat.source_name, index=cat.source_op_index)
    by_index = by_index[~by_index.index.duplicated()]
    source = by_index.reindex(ints).to_numpy(dtype=object)
    return int((source == given).sum()) > int((compiled == given).sum())


def resolve_keys(events: pd.DataFrame, kind: np.ndarray, keys: np.ndarray, open_rows: np.ndarray,
                 cat: Catalog, int_keys: np.ndarray | None = None,
                 int_rows: np.ndarray | None = None) -> Resolved:
    """Find the target of every open event from its key kind and key.

    Args:
        events: the trace's events (for ``part`` values of ``part_op`` keys).
        kind: ``int8`` kind code per event (:data:`NO_KIND` or ``1 + KEY_KINDS.index``).
        keys: key per event (``int64``, or ``object`` of int/str).
        open_rows: ``bool`` per event: still to be matched.
        cat: the catalog.
        int_keys, int_rows: with ``object`` keys, the keys as ``int64`` and the ``bool``
            mask of the events whose key is an integer (:attr:`Trace.int_key_rows`): a kind
            whose keys are all integers is looked up from ``int_keys``, never object by
            object (the same targets).

    Returns:
        A :class:`Resolved`; failures: ``unknown <kind>``, ``ambiguous <kind>``, ``<kind> key
        is not an integer``.
    """
    n = len(kind)
    target = np.full(n, UNKNOWN, dtype=np.int32)
    command = np.full(n, -1, dtype=np.int32)
    failures: dict[str, list[np.ndarray]] = {}
    needs_part = bool(np.any(kind == 1 + KEY_KINDS.index("part_op")))
    part = part_values(events)[0] if needs_part else None
    step = _BLOCK if keys.dtype == np.int64 else max(n, 1)
    for b0 in range(0, n, step):
        b1 = min(n, b0 + step)
        k_block = np.where(open_rows[b0:b1], kind[b0:b1], NO_KIND)
        present = np.flatnonzero(np.bincount(k_block, minlength=len(KEY_KINDS) + 1))
        for code in present.tolist():
            if code == NO_KIND:
                continue
            name = KEY_KINDS[code - 1]
            mask = k_block == code
            whole = bool(mask.all())
            rows = np.arange(b0, b1) if whole else np.flatnonzero(mask) + b0
            if int_keys is not None and int_rows is not None and name not in _TEXT_KINDS \
                    and bool((int_rows[b0:b1] if whole else int_rows[rows]).all()):
                values = int_keys[b0:b1] if whole else int_keys[rows]  # all integers
            else:
                values = keys[b0:b1] if whole else keys[rows]
            t, c, ok = _lookup_blocks(name, values, cat,
                                      part[rows] if part is not None else None)
            if whole:
                target[b0:b1] = np.maximum(t, UNKNOWN)
                command[b0:b1] = c
            else:
                target[rows] = np.maximum(t, UNKNOWN)
                command[rows] = c
            bad_int = ~ok
            if name in INT_KINDS and bad_int.any():
                failures.setdefault(f"{name} key is not an integer", []).append(rows[bad_int])
            amb = t == AMBIGUOUS
            if amb.any():
                failures.setdefault(f"ambiguous {name}", []).append(rows[amb])
            unknown = (t == UNKNOWN) & ok
            if unknown.any():
                failures.setdefault(f"unknown {name}", []).append(rows[unknown])
    return Resolved(target, command,
                    [(text, np.concatenate(parts)) for text, parts in failures.items()])
