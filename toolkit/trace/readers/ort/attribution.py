"""Attribute ONNX Runtime kernel time to the layers of the exported model, through ORT's fusions.

    att = join_ort("prof.json", "m.onnx", optimized="m.opt.onnx")
    att.by_layer()          # time per PyTorch module
    att.origins()           # optimized node -> the original nodes it replaced
    att.unattributed()      # every event not attributed, with the reason
    att.check()             # conservation to the nanosecond

**Groups (exact).** ORT rewrites the exported graph before it runs it and names the
*optimized* nodes in its profile; ``optimized`` is the graph it saved
(``SessionOptions.optimized_model_filepath``). A value name present in both graphs holds the
same value. Optimized nodes joined by values that exist only in the optimized graph form a
*group*; the original nodes a group replaced are those reached walking the original graph
backwards from the group's outputs, stopping at values that still exist (an original value ORT
folded into an initializer does not stop the walk; ``Constant`` nodes, which ORT holds as
initializers and never runs, are not walked into). Original nodes no group reaches are listed
by :meth:`OrtAttribution.unmapped` with the reason (a ``Constant``, folded to a constant, its
outputs unused); one reached by several groups is listed there too (``shared``) and shares
the time of each.

**Events** are joined by the one join (:func:`toolkit.trace.join.join.trace_join`): ORT is an
adapter (:mod:`toolkit.trace.readers.ort._provenance`) that turns the profile into a keyed trace and
the model pair into a provenance, so ``policy``, ``key``, ``overlaps``, ``strict`` and
``skip_runs`` mean what they mean for every trace. A kernel event names its optimized node;
the name is looked up in the optimized graph (its op must agree); an event of a node saved
without a name is placed by its ``node_index`` in a profile of the saved optimized model.

**Second tier.** In a group of several optimized nodes, each optimized node owns part of the
group's original nodes (:func:`owned_nodes`: anchored by the original node or value its name
derives from, then the rest of the group by dataflow), so a fused Conv owns its Conv, the Add
of its sum input and its activation. An event's time goes to its node's owned original nodes,
split by the policy: ``equal`` (each the same), ``macs`` (each by its compute weight,
:func:`~toolkit.trace.readers.ort._provenance.compute_weight`: convolutions, matrix products,
recurrent and normalisation ops 8, other arithmetic 1, data movement 0; all 0 splits equally) or
``bytes`` (by output bytes).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.ir import Model, Op
from toolkit.trace.join.attribution import Attribution, JoinResult
from toolkit.trace.readers.read import Trace

__all__ = ["join_ort", "OrtAttribution", "OrtGroups", "group_mapping", "check_pair", "owned_nodes",
           "node_label", "ort_generated"]

_STR = pd.Series([""]).dtype


def node_label(op: Op) -> str:
    """The node's name, or ``<op type>_<node index>`` for a node saved without one."""
    name = op.extra.get("node_name") or ""
    return name or f"{op.type}_{op.extra.get('node_index', '?')}"


_node_label = node_label


def _ordered(model: Model) -> list[Op]:
    return sorted(model.graph.ops, key=lambda o: o.extra.get("node_index", 0))


def _as_model(value: Any, what: str) -> Model:
    if isinstance(value, Model):
        model = value
    elif isinstance(value, (str, os.PathLike, bytes)):
        from toolkit.importers.onnx import load_onnx

        model = load_onnx(value)
    else:
        raise ToolkitError(f"{what} must be an ONNX model or its path, not a "
                           f"{type(value).__name__}", fix="pass load_onnx(path) or the path")
    if model.format != "onnx":
        raise ToolkitError(f"{what} is a {model.format} model, not ONNX",
                           fix="pass the .onnx file the profile's session ran")
    return model


@dataclass
class OrtGroups:
    """The exact mapping between the original and the optimized graph.

    ``original`` / ``optimized``: the ops in file order. ``group_of`` (``int64`` per optimized
    op): its group. ``members``: per group, the original op positions it replaced (ascending).
    ``owners``: per original op position, the groups that reach it. ``unmapped``: original op
    position -> reason, for those no group reaches. ``owned``: per optimized op, the original
    op positions its own events go to (second tier, see :func:`owned_nodes`); ``anchor``: per
    optimized op, the original op position its name derives from (-1 when none).
    """

    original: list[Op]
    optimized: list[Op]
    group_of: np.ndarray
    groups: list[list[int]]
    members: list[list[int]]
    owners: list[list[int]]
    unmapped: dict[int, str]
    owned: list[list[int]]
    anchor: list[int]


def _names(g: Any) -> set[str]:
    return {t.name for t in g.tensors}


def check_pair(model: Model, optimized: Model) -> None:
    """Raise :class:`ToolkitError` when ``optimized`` is not ORT's optimization of ``model``:
    other graph inputs or outputs, an input of another shape or type, a shared initializer
    with other values, or (for a model of two or more nodes) no intermediate value or node
    name in common."""
    g0, g1 = model.graph, optimized.graph
    where = f"{optimized.path or 'optimized'} vs {model.path or 'model'}"
    fix = "pass the graph ORT saved (optimized_model_filepath) for this very model"
    in0 = {t.name: t for t in g0.inputs if not t.is_const}
    in1 = {t.name: t for t in g1.inputs if not t.is_const}
    if set(in0) != set(in1):
        raise ToolkitError(f"the graphs have different inputs: {sorted(in0)} vs {sorted(in1)}",
                           where=where, fix=fix)
    out0, out1 = [t.name for t in g0.outputs], [t.name for t in g1.outputs]
    if sorted(out0) != sorted(out1):
        raise ToolkitError(f"the graphs have different outputs: {out0} vs {out1}",
                           where=where, fix=fix)
    for name, t0 in in0.items():
        t1 = in1[name]
        if (t0.shape_signature or t0.shape) != (t1.shape_signature or t1.shape) or \
                t0.type_code != t1.type_code:
            raise ToolkitError(f"input {name!r} is {t0.type_name}{list(t0.shape)} in the model "
                               f"but {t1.type_name}{list(t1.shape)} in the optimized graph",
                               where=where, fix=fix)
    consts1 = {t.name: t for t in g1.tensors if t.is_const}
    for t0 in g0.tensors:
        c1 = consts1.get(t0.name)
        if c1 is None or not t0.is_const:
            continue
        t1 = c1
        assert t0.data is not None and t1.data is not None
        if t0.data.shape != t1.data.shape or t0.data.dtype != t1.data.dtype or \
                not np.array_equal(t0.data, t1.data, equal_nan=t0.data.dtype.kind == "f"):
            raise ToolkitError(f"initializer {t0.name!r} holds other values in the optimized "
                               "graph", where=where, fix=fix)
    ends = set(in0) | set(out0)
    inner0 = {t.name for t in g0.tensors if not t.is_const and t.name not in ends}
    inner1 = {t.name for t in g1.tensors if not t.is_const and t.name not in ends}
    nodes0 = {o.extra.get("node_name") for o in g0.ops} - {"", None}
    nodes1 = {o.extra.get("node_name") for o in g1.ops} - {"", None}
    if len(g0) >= 2 and inner0 and inner1 and not (inner0 & inner1) and not (nodes0 & nodes1):
        raise ToolkitError("the optimized graph shares no intermediate value and no node name "
                           "with the model", where=where, fix=fix)


def group_mapping(model: Model, optimized: Model | None = None) -> OrtGroups:
    """Return the :class:`OrtGroups` of ``optimized`` against ``model`` (each optimized node a
    group of its own with itself as original node when ``optimized`` is None)."""
    o0 = _ordered(model)
    if optimized is None:
        n = len(o0)
        return OrtGroups(o0, o0, np.arange(n, dtype=np.int64), [[i] for i in range(n)],
                         [[i] for i in range(n)], [[i] for i in range(n)], {},
                         [[i] for i in range(n)],
                         list(range(n)))
    check_pair(model, optimized)
    o1 = _ordered(optimized)
    g0, g1 = model.graph, optimized.graph
    t0, t1 = _names(g0), _names(g1)
    shared = t0 & t1
    consts1 = {t.name for t in g1.tensors if t.is_const}
    produced0 = {t.name for op in o0 for t in op.outputs}
    stop = shared - (consts1 & produced0)
    # union-find over optimized nodes joined by optimized-only values
    parent = list(range(len(o1)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    pos1 = {op: i for i, op in enumerate(o1)}
    for i, op in enumerate(o1):
        for t in op.inputs:
            if t is None or t.name in shared or t.producer is None:
                continue
            j = pos1.get(t.producer)
            if j is not None:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    roots = [find(i) for i in range(len(o1))]
    order = list(dict.fromkeys(roots))
    gid = {r: k for k, r in enumerate(order)}
    group_of = np.array([gid[r] for r in roots], dtype=np.int64)
    groups: list[list[int]] = [[] for _ in order]
    for i, g in enumerate(group_of.tolist()):
        groups[g].append(i)
    pos0 = {op: i for i, op in enumerate(o0)}
    members: list[list[int]] = []
    owners: list[list[int]] = [[] for _ in o0]
    for k, nodes in enumerate(groups):
        seen: set[int] = set()
        stack = [pos0[g0.tensor(t.name).producer]  # type: ignore[index]
                 for i in nodes for t in o1[i].outputs
                 if t.name in shared and g0.tensor(t.name).producer is not None]
        while stack:
            j = stack.pop()
            if j in seen or o0[j].type == "Constant":
                continue
            seen.add(j)
            for t in o0[j].inputs:
                if t is not None and t.name not in stop and t.producer is not None:
                    stack.append(pos0[t.producer])
        members.append(sorted(seen))
        for j in seen:
            owners[j].append(k)
    unmapped: dict[int, str] = {}
    outputs0 = {t.name for t in g0.outputs}
    for j, op in enumerate(o0):
        if owners[j]:
            continue
        if op.type == "Constant":
            unmapped[j] = "Constant: ORT holds its value as an initializer (no kernel)"
        elif op.outputs and all(t.name in consts1 for t in op.outputs):
            unmapped[j] = "folded to a constant by ORT (its outputs are initializers)"
        elif all(not t.consumers and t.name not in outputs0 for t in op.outputs):
            unmapped[j] = "removed: its outputs are not used"
        else:
            unmapped[j] = "reached by no optimized node"
    owned, anchor = owned_nodes(o0, o1, groups, members)
    return OrtGroups(o0, o1, group_of, groups, members, owners, unmapped, owned, anchor)


def _anchor(name: str, candidates: dict[str, int]) -> int:
    """The original op whose node name or output value name is the longest prefix of
    ``name`` ending at a boundary (the rest empty or starting with a non-alphanumeric
    character other than ``.``), or -1."""
    best, best_len = -1, 0
    for text, j in candidates.items():
        if len(text) > best_len and name.startswith(text):
            rest = name[len(text):]
            if not rest or (not rest[0].isalnum() and rest[0] != "."):
                best, best_len = j, len(text)
    return best


def _nearest(start: int, step: Any, targets: set[int], allowed: set[int]) -> int:
    """Breadth-first from ``start`` along ``step`` (op position -> neighbour positions, in
    input or consumer order) within ``allowed``: the first position in ``targets`` met (ties:
    the one reached through the earlier input), or -1."""
    frontier, seen = [start], {start}
    while frontier:
        hits = [j for j in frontier if j in targets and j != start]
        if hits:
            return hits[0]
        nxt: list[int] = []
        for j in frontier:
            for k in step(j):
                if k in allowed and k not in seen:
                    seen.add(k)
                    nxt.append(k)
        frontier = nxt
    return -1


def owned_nodes(o0: list[Op], o1: list[Op], groups: list[list[int]],
                members: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """Second tier: which original ops each optimized op's events go to.

    A single-node group's op owns all the group's original ops. In a larger group, an
    optimized op whose name derives from an original op of the group (``<node name>/...``,
    ``<value name>_nchwc``) is *anchored* to it; every other original op of the group goes
    to the anchored op nearest upstream of it in the original graph (else nearest
    downstream), and an anchored optimized op owns those. An optimized op without an anchor
    (``ReorderOutput``, a reshape ORT added) owns what the nearest anchored optimized op
    upstream of it owns (else downstream); with no anchor in the group at all, every op owns
    the whole group.

    Returns ``(owned, anchor)``: per optimized op, the original op positions (ascending),
    and the anchor position (-1 when none).
    """
    pos0 = {op: i for i, op in enumerate(o0)}
    pos1 = {op: i for i, op in enumerate(o1)}
    owned: list[list[int]] = [[] for _ in o1]
    anchor = [-1] * len(o1)

    def up0(j: int) -> list[int]:
        return [pos0[t.producer] for t in o0[j].inputs
                if t is not None and t.producer in pos0]

    def down0(j: int) -> list[int]:
        return [pos0[c] for t in o0[j].outputs for c in t.consumers if c in pos0]

    def up1(i: int) -> list[int]:
        return [pos1[t.producer] for t in o1[i].inputs
                if t is not None and t.producer in pos1]

    def down1(i: int) -> list[int]:
        return [pos1[c] for t in o1[i].outputs for c in t.consumers if c in pos1]

    for nodes, mem in zip(groups, members):
        if len(nodes) == 1 or not mem:
            for i in nodes:
                owned[i] = list(mem)
            continue
        names: dict[str, int] = {}
        for j in mem:
            for t in o0[j].outputs:
                names.setdefault(t.name, j)
            if o0[j].extra.get("node_name"):
                names.setdefault(o0[j].extra["node_name"], j)
        for i in nodes:
            anchor[i] = _anchor(str(o1[i].extra.get("node_name") or ""), names)
        anchored = {anchor[i] for i in nodes if anchor[i] >= 0}
        if not anchored:
            for i in nodes:
                owned[i] = list(mem)
            continue
        allowed = set(mem)
        home: dict[int, int] = {j: j for j in anchored}
        for j in mem:
            if j in home:
                continue
            k = _nearest(j, up0, anchored, allowed)
            if k < 0:
                k = _nearest(j, down0, anchored, allowed)
            if k >= 0:
                home[j] = k
        by_anchor: dict[int, list[int]] = defaultdict(list)
        for j, k in home.items():
            by_anchor[k].append(j)
        group_nodes = set(nodes)
        with_anchor = {i for i in nodes if anchor[i] >= 0}
        for i in nodes:
            a = anchor[i]
            if a < 0:
                k = _nearest(i, up1, with_anchor, group_nodes)
                if k < 0:
                    k = _nearest(i, down1, with_anchor, group_nodes)
                a = anchor[k] if k >= 0 else -1
            owned[i] = sorted(by_anchor[a]) if a >= 0 else list(mem)
    return owned, anchor


def ort_generated(name: str) -> bool:
    """True for a name ORT gives a node it made without one (``<Identifier>_<digits>``)."""
    head, _, tail = name.rpartition("_")
    return bool(head) and tail.isdigit() and head.isidentifier()


class OrtAttribution(Attribution):
    """An ORT profile joined by the one join: every view of
    :class:`~toolkit.trace.join.attribution.Attribution` (``by_layer()``, ``by_op()`` one row per
    node ORT ran, ``by_source_op()`` one row per original node, ``unattributed()``,
    ``overhead()``, ``summary()``, ``check()``), plus ORT's own: :meth:`by_node`,
    :meth:`origins`, :meth:`groups`, :meth:`unmapped`.

    Attributes (beside :class:`Attribution`'s): ``model``, ``optimized`` (None when the
    profile is of the model itself), ``mapping`` (:class:`OrtGroups`), ``index_exact`` (True
    when every named event's ``node_index`` is its node's position in the saved file: a
    profile of the saved optimized model).
    """

    def __init__(self, result: JoinResult) -> None:
        super().__init__(result)
        prov = result.provenance
        self.model: Model = prov.model
        self.optimized: Model | None = prov.optimized
        self.mapping: OrtGroups = prov.mapping
        self.index_exact = bool(result.trace.meta.get("index_exact", False))

    def __repr__(self) -> str:
        return "<Ort" + super().__repr__()[1:]

    def _layers_of(self, j: int) -> tuple[str, ...]:
        """Source op ``j``'s layers, from ``model.origin(oid).layers`` as ``layers()`` lists
        them (``(no layer)`` for a node of none)."""
        return self.provenance.layers_of(j)

    def _layer_of(self, j: int) -> str:
        """Source op ``j``'s main layer (the one the ``macs`` policy gives its time), else
        its first."""
        return self.provenance.main_layer_of(j)

    def by_node(self) -> pd.DataFrame:
        """One row per original node (file order, then the nodes of ``If``/``Loop`` bodies):
        the columns of :meth:`by_source_op` (``source_id`` = ``op_index`` = the node's
        position) with ``layer`` (str: its main layer, ``(no layer)`` when none) after
        ``layers``, then ``groups`` (object: tuple of the groups holding it) and ``unmapped``
        (str: why no group holds it, ``""`` when one does)."""
        table = self.by_source_op()
        n0 = len(self.mapping.original)
        ids = table["source_id"].to_numpy(dtype=np.int64)
        table.insert(5, "layer", pd.Series([self._layer_of(j) for j in ids.tolist()],
                                           dtype=_STR))
        table["groups"] = pd.Series([tuple(self.mapping.owners[j]) if j < n0 else ()
                                     for j in ids.tolist()], dtype=object)
        table["unmapped"] = pd.Series([self.mapping.unmapped.get(j, "") if j < n0 else ""
                                       for j in ids.tolist()], dtype=_STR)
        return table

    def origins(self) -> pd.DataFrame:
        """Optimized node -> original nodes: one row per optimized node, in file order:
        ``node_index`` (int64), ``name``, ``op`` (str), ``group`` (int64), ``group_size``
        (int64, optimized nodes in the group), ``original`` (tuple of original node names),
        ``original_ops`` (tuple of str), ``layers`` (tuple of distinct layers, in node order),
        ``owned`` (tuple of the original node names its own events go to, second tier),
        ``fused`` (bool: the group replaced other than exactly one node of the same op)."""
        o0, o1 = self.mapping.original, self.mapping.optimized
        rows = []
        for i, op in enumerate(o1):
            g = int(self.mapping.group_of[i])
            members = self.mapping.members[g]
            rows.append({
                "node_index": i, "name": node_label(op), "op": op.type, "group": g,
                "group_size": len(self.mapping.groups[g]),
                "original": tuple(node_label(o0[j]) for j in members),
                "original_ops": tuple(o0[j].type for j in members),
                "layers": tuple(dict.fromkeys(x for j in members for x in self._layers_of(j))),
                "owned": tuple(node_label(o0[j]) for j in self.mapping.owned[i]),
                "fused": not (len(members) == 1 and len(self.mapping.groups[g]) == 1
                              and o0[members[0]].type == op.type),
            })
        cols = ["node_index", "name", "op", "group", "group_size", "original",
                "original_ops", "layers", "owned", "fused"]
        return pd.DataFrame(rows, columns=cols).astype({"node_index": np.int64,
                                                       "group": np.int64,
                                                       "group_size": np.int64})

    def groups(self) -> pd.DataFrame:
        """One row per group: ``group`` (int64), ``optimized`` (tuple of optimized node
        names), ``original`` (tuple of original node names), ``layers`` (tuple)."""
        o0, o1 = self.mapping.original, self.mapping.optimized
        rows = [{"group": g, "optimized": tuple(node_label(o1[i]) for i in nodes),
                 "original": tuple(node_label(o0[j]) for j in self.mapping.members[g]),
                 "layers": tuple(dict.fromkeys(x for j in self.mapping.members[g]
                                               for x in self._layers_of(j)))}
                for g, nodes in enumerate(self.mapping.groups)]
        return pd.DataFrame(rows, columns=["group", "optimized", "original", "layers"]).astype(
            {"group": np.int64})

    def unmapped(self) -> pd.DataFrame:
        """Every original node not held by exactly one group: ``node_index`` (int64),
        ``name``, ``op``, ``layer``, ``reason`` (str: why no group holds it, or ``shared by
        groups (...)``)."""
        o0 = self.mapping.original
        rows = []
        for j, op in enumerate(o0):
            reason = self.mapping.unmapped.get(j)
            owners = self.mapping.owners[j]
            if reason is None and len(owners) > 1:
                reason = f"shared by groups {tuple(owners)}: it gets time from each"
            if reason is not None:
                rows.append({"node_index": j, "name": node_label(op), "op": op.type,
                             "layer": self._layer_of(j), "reason": reason})
        return pd.DataFrame(rows, columns=["node_index", "name", "op", "layer", "reason"]
                            ).astype({"node_index": np.int64})

    def summary(self) -> dict[str, Any]:
        """:meth:`Attribution.summary`'s keys, then ``groups``, ``fused_groups``,
        ``unmapped_nodes`` and ``index_exact``."""
        fused = sum(1 for g, nodes in enumerate(self.mapping.groups)
                    if len(nodes) > 1 or len(self.mapping.members[g]) > 1)
        return {**super().summary(), "groups": len(self.mapping.groups),
                "fused_groups": fused, "unmapped_nodes": len(self.mapping.unmapped),
                "index_exact": self.index_exact}


def _as_trace(trace: Any) -> Trace:
    if isinstance(trace, Trace):
        return trace
    from toolkit.trace.readers.ort.profile import read_ort_profile

    return read_ort_profile(trace)


def _refuse_foreign(trace: Trace, prov: Any) -> None:
    """Raise when most of the node names a profile times are in neither graph (the profile
    of another model, or of an optimized graph not given): the one join would refuse it too,
    this says which file is missing."""
    known = {str(op.extra.get("node_name")) for op in prov.mapping.optimized}
    known |= {str(op.extra.get("node_name")) for op, _ in prov.body_ran}
    ev = trace.events
    placed = (ev["key_kind"] == "op_index").to_numpy()  # by node_index
    values = ev["name"].array  # categorical
    texts = np.array([str(c) for c in values.categories], dtype=object)
    codes = np.asarray(values.codes, dtype=np.int64)
    names = texts[np.unique(codes[codes >= 0])].tolist()
    placed_names = set(texts[np.unique(codes[placed & (codes >= 0)])].tolist())
    missing = [x for x in names if x not in known and x not in placed_names]
    if names and len(missing) * 2 > len(names):
        where = f"{trace.meta.get('source', 'trace')} vs {(prov.optimized or prov.model).path}"
        raise ToolkitError(
            f"{len(missing)} of the {len(names)} nodes the profile times are not in the graph "
            f"(e.g. {missing[:3]})", where=where,
            fix="pass the model the profiled session ran and, for a profile at a level above "
                "ORT_DISABLE_ALL, optimized= (the graph it saved with "
                "optimized_model_filepath); or strict=False to attribute what matches")


def join_ort(trace: Trace | str | os.PathLike[str], model: Model | str | os.PathLike[str],
             optimized: Model | str | os.PathLike[str] | None = None, *,
             policy: str = "equal", key: str | None = None, overlaps: str = "self",
             strict: bool = True, skip_runs: int = 0) -> OrtAttribution:
    """Attribute an ORT profile's kernel time to the original nodes and layers of ``model``,
    with the one join (:func:`toolkit.trace.join.join.trace_join`).

    Args:
        trace: an ORT profile (path, or a :class:`Trace` read from one).
        model: the exported ONNX model (path or :func:`~toolkit.importers.onnx.load_onnx`).
        optimized: the graph ORT saved for that session (``optimized_model_filepath``); None
            when the profile is of ``model`` run at ``ORT_DISABLE_ALL``, or of ``optimized``
            itself passed as ``model``.
        policy: ``"equal"``, ``"macs"`` (compute weights) or ``"bytes"``.
        key, overlaps, strict, skip_runs: as :func:`toolkit.trace.join.join.trace_join`.

    Returns:
        An :class:`OrtAttribution`.

    Raises:
        ToolkitError: an unknown policy; a model that is not ONNX; an optimized graph that is
            not ORT's optimization of the model; with ``strict``, a profile most of whose
            nodes are not in the graph; a trace that is not an ORT profile.
    """
    from toolkit.trace.join.join import run_join
    from toolkit.trace.readers.ort._provenance import OrtProvenance, ort_trace

    m0 = _as_model(model, "model")
    m1 = _as_model(optimized, "optimized") if optimized is not None else None
    trace = _as_trace(trace)
    prov = OrtProvenance(m0, m1)
    keyed = ort_trace(trace, prov)
    if strict:
        _refuse_foreign(keyed, prov)
    result = run_join(keyed, prov, policy=policy, key=key, overlaps=overlaps, strict=strict,
                      skip_runs=skip_runs)
    return OrtAttribution(result)
