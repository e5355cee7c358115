"""The provenance tables of one compiled (or partitioned) model, as arrays ready to join.

A :class:`Catalog` is built once per provenance object (:func:`catalog_of` caches it). It
holds the source ops, their layers, the compiled ops and the *targets* an event key can name:

============== ===================================================================================
target kind    members (the (compiled op, source op, layer) triples an event's time is split over)
============== ===================================================================================
``op``         one per compiled op: its origins
``handle``     one per debug handle: the source ops of ``debug_handles()``
``source_idx`` one per source-model op index: the source ops with that ``op_index``
``source``     one per source op name: the source ops of that name
``part``       one per part of a partitioned model: the origins of every op of the part
============== ===================================================================================

A source op with several original layers appears once per layer, each with weight factor
``lcm / n_layers`` (``lcm`` over the target's source ops), so that splitting over members
splits a source op's share equally between its layers.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.provenance import Provenance

__all__ = ["Catalog", "IntLookup", "catalog_of", "TARGET_KINDS", "AMBIGUOUS", "UNKNOWN"]

TARGET_KINDS: tuple[str, ...] = ("op", "handle", "source_idx", "source", "part")
UNKNOWN = -1
AMBIGUOUS = -2
_PART_SHIFT = 32


class IntLookup:
    """Map ``int64`` keys to ``int64`` values, vectorised (:data:`UNKNOWN` when absent).

    A key listed twice with different values maps to :data:`AMBIGUOUS`.
    """

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.int64)
        values = np.asarray(values, dtype=np.int64)
        if len(keys):
            order = np.lexsort((values, keys))
            keys, values = keys[order], values[order]
            same = keys[1:] == keys[:-1]
            clash = same & (values[1:] != values[:-1])
            if clash.any():
                bad = np.zeros(len(keys), dtype=bool)
                bad[1:] |= clash
                bad[:-1] |= clash
                values = np.where(np.isin(keys, keys[bad]), AMBIGUOUS, values)
            keep = np.ones(len(keys), dtype=bool)
            keep[1:] = ~same
            keys, values = keys[keep], values[keep]
        self.keys, self.values = keys, values
        self._dense: np.ndarray | None = None
        self._index: pd.Index | None = None
        if len(keys) and keys[0] >= 0 and keys[-1] < 8 * len(keys) + 4096:
            table = np.full(int(keys[-1]) + 1, UNKNOWN, dtype=np.int64)
            table[keys] = values
            self._dense = table
        else:
            self._index = pd.Index(keys)

    def get(self, query: np.ndarray) -> np.ndarray:
        """Return the value of each key of ``query`` (``int64``; UNKNOWN when absent)."""
        query = np.asarray(query, dtype=np.int64)
        if self._dense is not None:
            table = self._dense
            if len(query) == 0 or (query.min() >= 0 and query.max() < len(table)):
                return table[query]
            inside = (query >= 0) & (query < len(table))
            out = np.full(len(query), UNKNOWN, dtype=np.int64)
            out[inside] = table[query[inside]]
            return out
        assert self._index is not None
        if len(self.keys) == 0:
            return np.full(len(query), UNKNOWN, dtype=np.int64)
        pos = self._index.get_indexer(query)
        return np.where(pos >= 0, self.values[pos], UNKNOWN)


def _text_lookup(names: np.ndarray, values: np.ndarray) -> dict[str, int]:
    """``{name: value}``; a name listed with two different values maps to AMBIGUOUS."""
    out: dict[str, int] = {}
    for name, value in zip(names.tolist(), values.tolist()):
        if name is None or name == "":
            continue
        name = str(name)
        old = out.get(name)
        out[name] = value if old is None or old == value else AMBIGUOUS
    return out


def _column(df: pd.DataFrame, name: str, default: Any, dtype: Any) -> np.ndarray:
    if name in df.columns:
        series = df[name]
        if dtype is object:
            return series.astype(object).where(series.notna(), default).to_numpy(dtype=object)
        return series.fillna(default).to_numpy(dtype=dtype)
    return np.full(len(df), default, dtype=dtype)


@dataclass
class Catalog:
    """Provenance as arrays (positions, not ids, index every array).

    Source ops (``S``): ``source_id`` (ascending), ``source_name``, ``source_operator``,
    ``source_op_index``, ``source_macs``, ``source_bytes``, ``removed`` (reason or ``""``);
    their layers in CSR form ``source_layers_ptr`` (``S + 1``) / ``source_layers`` (codes into
    ``layer_names``). Compiled ops (``O``): ``ops`` (``optimised_ops()`` rows in order),
    ``op_ids``, ``op_backend``. Commands: ``commands`` (``commands()``), ``command_op`` (op
    position of each command). Targets (``T``) in CSR form: ``target_ptr`` (``T + 1``),
    ``target_kind`` (codes into :data:`TARGET_KINDS`), ``target_op`` (the op position when
    all members share one, else -1); members: ``member_op``, ``member_source``,
    ``member_layer``, ``member_factor``, ``member_main`` (bool: the layer is its source op's
    main layer, ``layers().main``; ``source_main`` the same per ``source_layers`` entry).
    """

    source_id: np.ndarray
    source_name: np.ndarray
    source_operator: np.ndarray
    source_op_index: np.ndarray
    source_macs: np.ndarray
    source_bytes: np.ndarray
    removed: np.ndarray
    layer_names: np.ndarray
    source_layers_ptr: np.ndarray
    source_layers: np.ndarray
    ops: pd.DataFrame
    op_ids: np.ndarray
    op_backend: np.ndarray
    commands: pd.DataFrame
    command_op: np.ndarray
    target_ptr: np.ndarray
    target_kind: np.ndarray
    target_op: np.ndarray
    member_op: np.ndarray
    member_source: np.ndarray
    member_layer: np.ndarray
    member_factor: np.ndarray
    member_main: np.ndarray
    source_main: np.ndarray
    command_lookup: IntLookup
    command_target_lookup: IntLookup
    op_lookup: IntLookup
    part_op_lookup: IntLookup
    part_lookup: IntLookup
    source_index_lookup: IntLookup
    handle_int_lookup: IntLookup
    handle_text_lookup: dict[str, int]
    name_lookup: dict[str, int]
    source_name_lookup: dict[str, int]

    @property
    def targets(self) -> int:
        """Number of targets."""
        return len(self.target_kind)

    def target_sizes(self) -> np.ndarray:
        """Members per target (``int64``)."""
        return np.diff(self.target_ptr)

    def part_op_key(self, part: np.ndarray, op_index: np.ndarray) -> np.ndarray:
        """The ``int64`` key of (part, op index in the part) used by ``part_op_lookup``."""
        return (np.asarray(part, np.int64) << _PART_SHIFT) + np.asarray(op_index, np.int64)


# --------------------------------------------------------------------------------------------
# Building


_CACHE: dict[int, tuple[Any, Catalog]] = {}


def catalog_of(provenance: Provenance) -> Catalog:
    """Return the :class:`Catalog` of ``provenance`` (built on first use, then cached for as
    long as the object lives)."""
    hit = _CACHE.get(id(provenance))
    if hit is not None and hit[0]() is provenance:
        return hit[1]
    catalog = build_catalog(provenance)
    key = id(provenance)
    try:
        ref = weakref.ref(provenance, _forget(key))
    except TypeError:
        return catalog
    _CACHE[key] = (ref, catalog)
    return catalog


def _forget(key: int) -> Any:
    """A weakref callback that drops the cache entry ``key``."""
    return lambda _ref: _CACHE.pop(key, None)


def _ids(df: pd.DataFrame, column: str, table: str) -> np.ndarray:
    if column not in df.columns:
        raise ToolkitError(f"the provenance table {table}() has no column {column!r}",
                           where=f"columns {list(df.columns)}",
                           fix="see toolkit.provenance for the columns every table needs")
    values = df[column]
    if values.isna().any():
        raise ToolkitError(
            f"{table}().{column} has missing values", where=table,
            fix=(
                f"give every row of {table}() a {column} (see toolkit.provenance for the columns "
                "every table needs)"
            ),
        )
    return values.to_numpy(dtype=np.int64)


def _empty_lookup() -> IntLookup:
    """Return an :class:`IntLookup` of no keys (every query: :data:`UNKNOWN`)."""
    return IntLookup(np.zeros(0, np.int64), np.zeros(0, np.int64))


@dataclass
class _Sources:
    """Every source op any table names, by position (``ids`` ascending), with its columns."""

    ids: np.ndarray
    name: np.ndarray
    operator: np.ndarray
    op_index: np.ndarray
    macs: np.ndarray
    bytes: np.ndarray
    removed: np.ndarray


def _source_ops(src: pd.DataFrame, lay: pd.DataFrame, org: pd.DataFrame, dh: pd.DataFrame,
                rem: pd.DataFrame) -> _Sources:
    """Return the source ops: the union of the ``source_id`` of every table, with the columns of
    ``source_ops()`` (``""``/-1/0 for an id it lacks; ``macs`` and ``output_bytes`` at least 0)
    and the ``removed()`` reason (``"removed"`` when it gives none, ``""`` when kept)."""
    src_ids = _ids(src, "source_id", "source_ops")
    all_ids = np.unique(np.concatenate([
        src_ids, _ids(org, "source_id", "origins"), _ids(lay, "source_id", "layers"),
        _ids(dh, "source_id", "debug_handles") if len(dh) else np.zeros(0, np.int64),
        _ids(rem, "source_id", "removed") if len(rem) else np.zeros(0, np.int64)]))
    s = len(all_ids)
    row = pd.Index(src_ids).get_indexer(all_ids) if len(src_ids) else np.full(s, -1)
    have = row >= 0
    rows = row[have]

    def source_col(name: str, default: Any, dtype: Any) -> np.ndarray:
        out = np.full(s, default, dtype=dtype)
        if len(rows):
            out[have] = _column(src, name, default, dtype)[rows]
        return out

    removed = np.full(s, "", dtype=object)
    if len(rem):
        pos = np.searchsorted(all_ids, _ids(rem, "source_id", "removed"))
        removed[pos] = _column(rem, "reason", "removed", object)
        removed[pos] = [r if r else "removed" for r in removed[pos].tolist()]
    return _Sources(
        ids=all_ids, name=source_col("name", "", object),
        operator=source_col("operator", "", object),
        op_index=source_col("op_index", -1, np.int64),
        macs=np.maximum(source_col("macs", 0, np.int64), 0),
        bytes=np.maximum(source_col("output_bytes", 0, np.int64), 0), removed=removed)


@dataclass
class _Layers:
    """The layers of each source op in CSR form: ``codes[ptr[s]:ptr[s + 1]]`` (into ``names``)
    and ``main`` (bool) per entry, ``counts`` (``int64``) the number of layers per source op."""

    names: np.ndarray
    ptr: np.ndarray
    codes: np.ndarray
    main: np.ndarray
    counts: np.ndarray


def _source_layers(lay: pd.DataFrame, sources: _Sources) -> _Layers:
    """Return the layers of every source op from ``layers()`` (empty names dropped, duplicates
    once), names in first-appearance order; a source op without one is its own layer (its
    name, else ``#<source_id>``)."""
    s = len(sources.ids)
    lay_pos = np.searchsorted(sources.ids, _ids(lay, "source_id", "layers"))
    lay_text = _column(lay, "layer", "", object)
    keep = np.array([bool(t) for t in lay_text.tolist()], dtype=bool) if len(lay) else \
        np.zeros(0, bool)
    lay_main = (_column(lay, "main", False, bool) if len(lay) else np.zeros(0, bool))
    lay_pos, lay_text, lay_main = lay_pos[keep], lay_text[keep], lay_main[keep]
    pairs = pd.DataFrame({"s": lay_pos, "l": pd.Series(lay_text, dtype=object),
                          "m": lay_main})
    pairs = pairs.drop_duplicates(["s", "l"])
    missing = np.setdiff1d(np.arange(s), pairs["s"].to_numpy(dtype=np.int64))
    if len(missing):
        fallback = [n if n else f"#{i}" for n, i in zip(sources.name[missing].tolist(),
                                                         sources.ids[missing].tolist())]
        pairs = pd.concat([pairs, pd.DataFrame({"s": missing, "l": pd.Series(
            fallback, dtype=object), "m": np.zeros(len(missing), bool)})], ignore_index=True)
    layer_codes, layer_names = pd.factorize(pairs["l"].to_numpy(dtype=object))
    order = np.argsort(pairs["s"].to_numpy(dtype=np.int64), kind="stable")
    counts = np.bincount(pairs["s"].to_numpy(dtype=np.int64), minlength=s)
    ptr = np.zeros(s + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return _Layers(names=np.asarray(layer_names, dtype=object), ptr=ptr,
                   codes=np.asarray(layer_codes, dtype=np.int64)[order],
                   main=pairs["m"].to_numpy(dtype=bool)[order], counts=counts)


@dataclass
class _Ops:
    """The compiled ops (``ids``, ``lookup`` id -> position, ``backend``), the origins as
    (``org_op``, ``org_src``) position pairs, and ``carrier``: the one op that carries each
    source op (-1 when none or several)."""

    ids: np.ndarray
    lookup: IntLookup
    backend: np.ndarray
    org_op: np.ndarray
    org_src: np.ndarray
    carrier: np.ndarray


def _compiled_ops(opt: pd.DataFrame, org: pd.DataFrame, sources: _Sources) -> _Ops:
    """Return the compiled ops of ``optimised_ops()`` and the origins between them and the
    source ops (origins naming an unknown compiled op left out)."""
    op_ids = _ids(opt, "optimised_id", "optimised_ops")
    lookup = IntLookup(op_ids, np.arange(len(op_ids)))
    org_op = lookup.get(_ids(org, "optimised_id", "origins"))
    org_src = np.searchsorted(sources.ids, _ids(org, "source_id", "origins"))
    good = org_op >= 0
    org_op, org_src = org_op[good], org_src[good]
    s = len(sources.ids)
    carrier = np.full(s, -1, dtype=np.int64)
    if len(org_src):
        uniq = pd.DataFrame({"s": org_src, "o": org_op}).drop_duplicates()
        counts = np.bincount(uniq["s"].to_numpy(), minlength=s)
        single = uniq[counts[uniq["s"].to_numpy()] == 1]
        carrier[single["s"].to_numpy()] = single["o"].to_numpy()
    return _Ops(ids=op_ids, lookup=lookup, backend=_column(opt, "backend", "", object),
                org_op=org_op, org_src=org_src, carrier=carrier)


class _Targets:
    """The targets as (target, op, source) position triples, added kind by kind."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.kinds: list[np.ndarray] = []
        self.count = 0

    def add(self, kind: str, count: int, tgt: np.ndarray, op: np.ndarray,
            source: np.ndarray) -> int:
        """Add ``count`` targets of ``kind`` (``tgt`` numbers them from 0); return the number
        of the first."""
        base = self.count
        self.parts.append((tgt + base, op, source))
        self.kinds.append(np.full(count, TARGET_KINDS.index(kind), dtype=np.int8))
        self.count += count
        return base

    def kind_codes(self) -> np.ndarray:
        """Return the kind of every target (``int8`` codes into :data:`TARGET_KINDS`)."""
        return np.concatenate(self.kinds) if self.kinds else np.zeros(0, np.int8)


def _handle_targets(dh: pd.DataFrame, sources: _Sources, ops: _Ops, targets: _Targets
                    ) -> tuple[IntLookup, dict[str, int]]:
    """Add one target per debug handle of ``debug_handles()``; return the lookups integer
    handle -> target and handle text -> target."""
    if not len(dh):
        return _empty_lookup(), {}
    handles = dh["handle"].astype(object).to_numpy()
    h_codes, h_uniques = pd.factorize(pd.Series(
        [h if isinstance(h, str) else int(h) for h in handles.tolist()], dtype=object))
    h_op = ops.lookup.get(_ids(dh, "optimised_id", "debug_handles"))
    h_src = np.searchsorted(sources.ids, _ids(dh, "source_id", "debug_handles"))
    h_base = targets.add("handle", len(h_uniques), np.asarray(h_codes, np.int64), h_op, h_src)
    uniq = list(h_uniques)
    int_keys = [i for i, h in enumerate(uniq) if not isinstance(h, str)]
    int_lookup = IntLookup(np.array([uniq[i] for i in int_keys], dtype=np.int64),
                           np.array(int_keys, dtype=np.int64) + h_base)
    text_lookup = _text_lookup(np.array([str(h) for h in uniq], dtype=object),
                               np.arange(len(uniq), dtype=np.int64) + h_base)
    return int_lookup, text_lookup


def _source_index_targets(sources: _Sources, ops: _Ops, targets: _Targets) -> IntLookup:
    """Add one target per source-model op index; return the lookup op index -> target."""
    si_src = np.flatnonzero(sources.op_index >= 0)
    si_codes, si_uniques = pd.factorize(sources.op_index[si_src])
    si_base = targets.add("source_idx", len(si_uniques), np.asarray(si_codes, np.int64),
                          ops.carrier[si_src], si_src)
    return IntLookup(np.asarray(si_uniques, dtype=np.int64),
                     np.arange(len(si_uniques), dtype=np.int64) + si_base)


def _source_name_targets(sources: _Sources, ops: _Ops, targets: _Targets) -> dict[str, int]:
    """Add one target per source op name; return the lookup name -> target."""
    named = np.flatnonzero(np.array([bool(x) for x in sources.name.tolist()], dtype=bool))
    sn_codes, sn_uniques = pd.factorize(sources.name[named].astype(object))
    sn_base = targets.add("source", len(sn_uniques), np.asarray(sn_codes, np.int64),
                          ops.carrier[named], named)
    return {str(n): i + sn_base for i, n in enumerate(list(sn_uniques))}


def _part_targets(opt: pd.DataFrame, ops: _Ops, targets: _Targets, op_base: int
                  ) -> tuple[IntLookup, IntLookup]:
    """Add one target per part of a partitioned model (``optimised_ops().part``); return the
    lookups part -> target and (part, op index in the part) key -> the op's target (both
    empty without those columns)."""
    if "part" not in opt.columns:
        return _empty_lookup(), _empty_lookup()
    op_part = _column(opt, "part", -1, np.int64)
    p_codes, p_uniques = pd.factorize(op_part[ops.org_op])
    p_base = targets.add("part", len(p_uniques), np.asarray(p_codes, np.int64), ops.org_op,
                         ops.org_src)
    part_lookup = IntLookup(np.asarray(p_uniques, np.int64),
                            np.arange(len(p_uniques), dtype=np.int64) + p_base)
    part_op_lookup = _empty_lookup()
    if "part_op_index" in opt.columns:
        part_op_lookup = IntLookup(
            (op_part << _PART_SHIFT) + _column(opt, "part_op_index", -1, np.int64),
            np.arange(len(ops.ids), dtype=np.int64) + op_base)
    return part_lookup, part_op_lookup


@dataclass
class _Members:
    """The members of every target in CSR form (``target_ptr``): ``op``, ``source``,
    ``layer``, ``factor``, ``main`` per member; ``target_op`` the op all of a target's members
    share, else -1."""

    target_ptr: np.ndarray
    target_op: np.ndarray
    op: np.ndarray
    source: np.ndarray
    layer: np.ndarray
    factor: np.ndarray
    main: np.ndarray


def _members(targets: _Targets, layers: _Layers, op_base: int, o: int) -> _Members:
    """Return the members: the triples sorted by (target, source id, op), each source op
    expanded to its layers with weight factor ``lcm(layer counts over the target's source ops)
    / its layer count``; the ``op`` targets (from ``op_base``, ``o`` of them) name their op."""
    tgt = np.concatenate([p[0] for p in targets.parts]).astype(np.int64)
    mop = np.concatenate([p[1] for p in targets.parts]).astype(np.int64)
    msrc = np.concatenate([p[2] for p in targets.parts]).astype(np.int64)
    order = np.lexsort((mop, msrc, tgt))
    tgt, mop, msrc = tgt[order], mop[order], msrc[order]
    t_count = targets.count
    nl = layers.counts[msrc]
    rep = np.repeat(np.arange(len(tgt)), nl)
    starts = np.zeros(len(tgt) + 1, dtype=np.int64)
    np.cumsum(nl, out=starts[1:])
    within = np.arange(len(rep), dtype=np.int64) - starts[:-1][rep]
    member_layer = layers.codes[layers.ptr[msrc[rep]] + within]
    member_main = layers.main[layers.ptr[msrc[rep]] + within]
    member_target = tgt[rep]
    member_op = mop[rep]
    member_source = msrc[rep]
    per_target = np.bincount(member_target, minlength=t_count)
    target_ptr = np.zeros(t_count + 1, dtype=np.int64)
    np.cumsum(per_target, out=target_ptr[1:])
    member_nl = layers.counts[member_source]
    lcm = np.ones(t_count, dtype=np.int64)
    nonempty = per_target > 0
    if len(member_nl):
        lcm[nonempty] = np.lcm.reduceat(member_nl, target_ptr[:-1][nonempty])
    member_factor = lcm[member_target] // np.maximum(member_nl, 1)
    target_op = np.full(t_count, -1, dtype=np.int64)
    if len(member_op):
        lo = np.minimum.reduceat(member_op, target_ptr[:-1][nonempty])
        hi = np.maximum.reduceat(member_op, target_ptr[:-1][nonempty])
        target_op[nonempty] = np.where(lo == hi, lo, -1)
    target_op[op_base:op_base + o] = np.arange(o)
    return _Members(target_ptr=target_ptr, target_op=target_op, op=member_op,
                    source=member_source, layer=member_layer, factor=member_factor,
                    main=member_main)


def _name_lookup(opt: pd.DataFrame, op_base: int, source_names: dict[str, int]
                 ) -> dict[str, int]:
    """Return the lookup name -> target: compiled op names first (their ``op`` target), then
    source op names not taken (their ``source`` target)."""
    op_names = _column(opt, "name", "", object)
    lookup = _text_lookup(op_names, np.arange(len(op_names), dtype=np.int64) + op_base)
    for text, t in source_names.items():
        lookup.setdefault(text, t)
    return lookup


def _command_lookups(cmd: pd.DataFrame, ops: _Ops, op_base: int
                     ) -> tuple[np.ndarray, IntLookup, IntLookup]:
    """Return the op position of every command (``int64``, -1 for an unknown op) and the
    lookups command id -> command position and command id -> its op's target."""
    command_op = ops.lookup.get(_ids(cmd, "optimised_id", "commands")) if len(cmd) else \
        np.zeros(0, np.int64)
    command_ids = _ids(cmd, "command_id", "commands") if len(cmd) else np.zeros(0, np.int64)
    return (command_op, IntLookup(command_ids, np.arange(len(cmd), dtype=np.int64)),
            IntLookup(command_ids, command_op + op_base))


def build_catalog(prov: Provenance) -> Catalog:
    """Build the :class:`Catalog` of a provenance (see the module docstring): source ops,
    their layers, compiled ops, then the targets kind by kind (``op``, ``handle``,
    ``source_idx``, ``source``, ``part``), their members, and the name and command lookups."""
    src = prov.source_ops()
    lay = prov.layers()
    opt = prov.optimised_ops().reset_index(drop=True)
    org = prov.origins()
    cmd = prov.commands().reset_index(drop=True)
    dh = prov.debug_handles()
    rem = prov.removed()

    sources = _source_ops(src, lay, org, dh, rem)
    layers = _source_layers(lay, sources)
    ops = _compiled_ops(opt, org, sources)
    o = len(ops.ids)
    targets = _Targets()
    op_base = targets.add("op", o, ops.org_op, ops.org_op, ops.org_src)
    handle_int_lookup, handle_text_lookup = _handle_targets(dh, sources, ops, targets)
    source_index_lookup = _source_index_targets(sources, ops, targets)
    source_name_lookup = _source_name_targets(sources, ops, targets)
    part_lookup, part_op_lookup = _part_targets(opt, ops, targets, op_base)
    members = _members(targets, layers, op_base, o)
    command_op, command_lookup, command_target_lookup = _command_lookups(cmd, ops, op_base)

    return Catalog(
        source_id=sources.ids, source_name=sources.name, source_operator=sources.operator,
        source_op_index=sources.op_index, source_macs=sources.macs,
        source_bytes=sources.bytes, removed=sources.removed, layer_names=layers.names,
        source_layers_ptr=layers.ptr, source_layers=layers.codes, ops=opt,
        op_ids=ops.ids, op_backend=ops.backend, commands=cmd, command_op=command_op,
        target_ptr=members.target_ptr, target_kind=targets.kind_codes(),
        target_op=members.target_op, member_op=members.op, member_source=members.source,
        member_layer=members.layer, member_factor=members.factor, member_main=members.main,
        source_main=layers.main,
        command_lookup=command_lookup, command_target_lookup=command_target_lookup,
        op_lookup=IntLookup(ops.ids, np.arange(o) + op_base),
        part_op_lookup=part_op_lookup, part_lookup=part_lookup,
        source_index_lookup=source_index_lookup, handle_int_lookup=handle_int_lookup,
        handle_text_lookup=handle_text_lookup,
        name_lookup=_name_lookup(opt, op_base, source_name_lookup),
        source_name_lookup=source_name_lookup)
