"""Which column of an event frame names what: command ids, op indices, debug handles, names.

A trace event is *keyed* by one of these kinds (in the order tried when the caller does not
choose one):

=================== ===========================================================================
``command_id``      position in the compiled model's command queue (``arg_command_id``)
``part_op``         op ``op_index`` of part ``part`` of a partitioned run (``arg_part`` and
                    ``arg_op_index`` together; ``part_op_index`` too)
``op_index``        compiled op index, i.e. ``optimised_id`` (``arg_optimised_id``, else
                    ``arg_op_index``)
``debug_handle``    ExecuTorch delegate debug identifier, int or str
                    (``delegate_debug_identifier``, ``debug_handle``, ``handle``, ...)
``part``            a whole part of a partitioned run (``part`` without an op index)
``name``            op name: a compiled op's output tensor name, else a source op's name
                    (``arg_op_name``, ``op_name``, else the event ``name``)
=================== ===========================================================================

then, for rows with none of these, a generic ``key`` column (the event tracer's): an integer
is a ``debug_handle``, text a ``name``. Two kinds are used only when asked for
(``trace_join(..., key=...)``): ``source_op_index`` (op index in the *source* model, as the
reference runtime logs for an uncompiled model) and ``source_name`` (source op names only).
Every kind is looked up with and without the ``arg_`` prefix of the Chrome trace readers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "KEY_KINDS", "AUTO_KINDS", "INT_KINDS", "KEY_COLUMNS", "PART_COLUMNS", "GENERIC_COLUMNS",
    "kind_of_column",
    "present_mask", "integer_values", "extract_keys", "extract_keys_ints",
    "extract_keys_mixed", "part_values",
]

KEY_KINDS: tuple[str, ...] = ("command_id", "part_op", "op_index", "debug_handle", "part",
                              "name", "source_op_index", "source_name")
#: Kinds tried, in order, when the caller does not name one.
AUTO_KINDS: tuple[str, ...] = ("command_id", "part_op", "op_index", "debug_handle", "part",
                               "name")
#: Kinds whose key is an integer.
INT_KINDS = frozenset({"command_id", "part_op", "op_index", "part", "source_op_index"})


def _both(*names: str) -> tuple[str, ...]:
    return tuple(c for n in names for c in (n, f"arg_{n}"))


KEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "command_id": _both("command_id"),
    "part_op": _both("part_op_index", "op_index"),
    "op_index": _both("optimised_id", "op_index"),
    "debug_handle": _both("delegate_debug_identifier", "debug_handle", "delegate_debug_id_int",
                          "delegate_debug_id_str", "handle"),
    "part": _both("part"),
    "name": _both("op_name", "name"),
    "source_op_index": _both("op_index"),
    "source_name": _both("op_name", "name"),
}
PART_COLUMNS: tuple[str, ...] = _both("part")
#: Generic key columns (the event tracer's ``key``): ints are debug handles, text is a name.
GENERIC_COLUMNS: tuple[str, ...] = _both("key")


def kind_of_column(column: str) -> str:
    """Return the key kind a column name stands for (``""`` when it names none).

    ``arg_`` prefixes are ignored: ``arg_command_id`` -> ``command_id``, ``handle`` ->
    ``debug_handle``, ``op_name`` -> ``name``.
    """
    bare = column[4:] if column.startswith("arg_") else column
    for kind in ("command_id", "op_index", "debug_handle", "part", "name"):
        if bare in {c for c in KEY_COLUMNS[kind] if not c.startswith("arg_")}:
            return kind
    return ""


def present_mask(values: pd.Series) -> np.ndarray:
    """Return a bool array: True where ``values`` holds a value (not None/NaN/NA/``""``)."""
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
        cats = values.cat.categories
        empty = np.flatnonzero(np.asarray(cats.astype(str) == "", dtype=bool))
        ok = codes >= 0
        if len(empty):
            ok = ok & ~np.isin(codes, empty)
        return ok
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return np.ones(len(values), dtype=bool)
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        return ~np.isnan(values.to_numpy())
    ok = values.notna().to_numpy(dtype=bool)
    if dtype is np.dtype(object) or pd.api.types.is_string_dtype(dtype):
        ok = ok & (values.astype(object) != "").to_numpy(dtype=bool)
    return ok


def integer_values(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ints, ok)``: ``values`` as ``int64`` (0 where not an integer) and a mask of
    the rows that hold an integer (ints, integral floats, or decimal text such as ``"12"``)."""
    dtype = values.dtype
    n = len(values)
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return values.to_numpy(dtype=np.int64), np.ones(n, dtype=bool)
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        return np.zeros(n, np.int64), np.zeros(n, dtype=bool)
    if not isinstance(dtype, np.dtype) and pd.api.types.is_integer_dtype(dtype):
        ok = values.notna().to_numpy(dtype=bool)
        return values.to_numpy(dtype=np.int64, na_value=0), ok
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        f = values.to_numpy()
        ok = np.isfinite(f) & (f == np.round(f)) & (np.abs(f) < 2.0**63)
        return np.where(ok, f, 0).astype(np.int64), ok
    objects = values.astype(object).to_numpy()
    out = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    try:
        codes, uniques = pd.factorize(objects, use_na_sentinel=True)
    except TypeError:  # lists or objects among the values: never integers
        objects = np.array([repr(o) if isinstance(o, (list, dict, set)) else o
                            for o in objects.tolist()] + [None], dtype=object)[:-1]
        codes, uniques = pd.factorize(objects, use_na_sentinel=True)
    table = np.zeros(len(uniques), dtype=np.int64)
    good = np.zeros(len(uniques), dtype=bool)
    for i, u in enumerate(uniques.tolist()):
        v = _as_int(u)
        if v is not None:
            table[i], good[i] = v, True
    has = codes >= 0
    out[has] = table[codes[has]]
    ok[has] = good[codes[has]]
    return out, ok


def _as_int(value: object) -> int | None:
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        v = int(value)
    elif isinstance(value, float | np.floating):
        if not np.isfinite(value) or value != round(value):
            return None
        v = int(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            v = int(text)
        except ValueError:
            return None
        if str(v) != text.lstrip("+") and text not in ("-0",):
            return None
    else:
        return None
    return v if -(2**63) <= v < 2**63 else None


def _first_present(frame: pd.DataFrame, columns: Sequence[str]
                   ) -> tuple[pd.Series | None, np.ndarray]:
    """Coalesce ``columns`` of ``frame`` row by row: the first present value of each row.

    Returns the coalesced values (``None`` when no column exists) and the present mask.
    """
    found = [c for c in columns if c in frame.columns]
    n = len(frame)
    if not found:
        return None, np.zeros(n, dtype=bool)
    first = frame[found[0]]
    mask = present_mask(first)
    if len(found) == 1 or mask.all():
        return first, mask
    values = first.astype(object).to_numpy().copy()
    for c in found[1:]:
        more = present_mask(frame[c]) & ~mask
        if more.any():
            values[more] = frame[c].astype(object).to_numpy()[more]
            mask = mask | more
    return pd.Series(values, index=frame.index, dtype=object), mask


def part_values(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(part, ok)``: the part number of each event (``int64``, from ``arg_part`` or
    ``part``) and a mask of the rows that have one."""
    values, present = _first_present(frame, PART_COLUMNS)
    if values is None:
        n = len(frame)
        return np.full(n, -1, np.int64), np.zeros(n, dtype=bool)
    ints, ok = integer_values(values)
    ok = ok & present
    return np.where(ok, ints, -1), ok


def kind_values(frame: pd.DataFrame, kind: str, columns: Sequence[str] | None = None
                ) -> tuple[pd.Series | None, np.ndarray]:
    """Return the key values of ``kind`` for every row and the mask of rows that have one.

    ``columns`` overrides the columns looked at (default :data:`KEY_COLUMNS`). For
    ``part_op`` a row needs both a part and an op index.
    """
    values, present = _first_present(frame, columns or KEY_COLUMNS[kind])
    if kind == "part_op":
        _, has_part = part_values(frame)
        present = present & has_part
    return values, present


def extract_keys(frame: pd.DataFrame, kinds: Sequence[str] = AUTO_KINDS,
                 columns: dict[str, Sequence[str]] | None = None, *, generic: bool = False
                 ) -> tuple[np.ndarray, pd.Categorical]:
    """As :func:`extract_keys_ints`, without the ``int64`` keys."""
    key, kind, _ints = extract_keys_ints(frame, kinds, columns, generic=generic)
    return key, kind


def extract_keys_ints(frame: pd.DataFrame, kinds: Sequence[str] = AUTO_KINDS,
                      columns: dict[str, Sequence[str]] | None = None, *,
                      generic: bool = False
                      ) -> tuple[np.ndarray, pd.Categorical, np.ndarray | None]:
    """As :func:`extract_keys_mixed`, without the mask of integer keys: ``ints`` is None
    unless every row that has a key has an integer one."""
    key, kind, ints, int_rows = extract_keys_mixed(frame, kinds, columns, generic=generic)
    return key, kind, ints if int_rows is None else None


def extract_keys_mixed(frame: pd.DataFrame, kinds: Sequence[str] = AUTO_KINDS,
                       columns: dict[str, Sequence[str]] | None = None, *,
                       generic: bool = False
                       ) -> tuple[np.ndarray, pd.Categorical, np.ndarray | None,
                                  np.ndarray | None]:
    """Find each event's key: for every row, the first of ``kinds`` it has a value for.

    With ``generic``, rows that have none of ``kinds`` take a generic ``key`` column
    (:data:`GENERIC_COLUMNS`, as the event tracer writes): an integer is a ``debug_handle``,
    anything else a ``name``; the event ``name`` column (the key's text there) then does not
    count as a name key, ``op_name`` does.

    Returns ``(key, key_kind, ints, int_rows)``: ``key`` is an ``int64`` array when every row
    got an integer key, else an ``object`` array of ``int`` / ``str`` (``None`` for rows without
    a key; keys of integer kinds that are not integers keep their original value);
    ``key_kind`` is a categorical over :data:`KEY_KINDS` plus ``""`` (no key); ``ints`` is
    the integer keys as ``int64`` (0 for rows without one), None when no row has one;
    ``int_rows`` is None when every row that has a key has an integer one, else the ``bool``
    mask of the rows whose key is an integer (held in ``ints``).
    """
    n = len(frame)
    code = np.full(n, -1, dtype=np.int16)
    ints = np.zeros(n, dtype=np.int64)
    is_int = np.zeros(n, dtype=bool)
    other: np.ndarray | None = None
    columns = dict(columns or {})
    if generic and any(c in frame.columns for c in GENERIC_COLUMNS):
        # the event name is the generic key's text: only op_name columns are names
        columns.setdefault("name", _both("op_name"))
    for kind in kinds:
        values, present = kind_values(frame, kind, columns.get(kind))
        if values is None:
            continue
        take = present & (code < 0)
        if not take.any():
            continue
        code[take] = KEY_KINDS.index(kind)
        rows = np.flatnonzero(take)  # read only the rows taken (often a few of many)
        sub = values if len(rows) == n else values.iloc[rows]
        if kind == "name" or kind == "source_name":
            as_int, ok = np.zeros(len(rows), np.int64), np.zeros(len(rows), dtype=bool)
        else:
            as_int, ok = integer_values(sub)
        good = rows[ok]
        ints[good] = as_int[ok]
        is_int[good] = True
        if not ok.all():
            if other is None:
                other = np.full(n, None, dtype=object)
            other[rows[~ok]] = sub.astype(object).to_numpy()[~ok]
    if generic:
        values, present = _first_present(frame, GENERIC_COLUMNS)
        take = present & (code < 0)
        if values is not None and take.any():
            as_int, ok = integer_values(values)
            handle = take & ok
            code[handle] = KEY_KINDS.index("debug_handle")
            ints[handle] = as_int[handle]
            is_int |= handle
            named = take & ~ok
            if named.any():
                code[named] = KEY_KINDS.index("name")
                if other is None:
                    other = np.full(n, None, dtype=object)
                other[named] = values.astype(object).to_numpy()[named]
    categories = ["", *KEY_KINDS]
    kind_cat = pd.Categorical.from_codes(code.astype(np.int64) + 1,
                                         categories=pd.Index(categories, dtype="str"))
    if other is None and is_int.all():
        return ints, kind_cat, ints, None
    if other is None:  # integer keys and rows without one (None)
        key = _int_objects(ints)
        key[~is_int] = None
        return key, kind_cat, ints, None
    if not is_int.any():
        return other, kind_cat, None, None
    key = _int_objects(ints)
    texts = np.flatnonzero(~is_int)  # few: text keys and rows without a key
    key[texts] = other[texts]
    return key, kind_cat, ints, is_int


def _int_objects(ints: np.ndarray) -> np.ndarray:
    """``ints`` as an ``object`` array of Python ``int``; when the values lie close together,
    one ``int`` object per distinct value, shared by its rows (no object per row)."""
    n = len(ints)
    low, high = (int(ints.min()), int(ints.max())) if n else (0, -1)
    if high - low < 4 * n + 4096:
        return np.arange(low, high + 1, dtype=np.int64).astype(object)[ints - low]
    return ints.astype(object)
