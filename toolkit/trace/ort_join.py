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

**Events.** A kernel event names its optimized node; the name is looked up in the optimized
graph (its op must agree). When every named event's ``node_index`` is its node's position in
the optimized file (a profile of the saved optimized model run at ``ORT_DISABLE_ALL``), an
event of a node saved without a name is placed by that index; otherwise it is unattributed
(ORT's indices of nodes it creates change between levels). Events outside every ``model_run``
span, of a node that is not in the graph or whose group replaced no original node are
unattributed with the reason.

**Second tier.** In a group of several optimized nodes, each optimized node owns part of the
group's original nodes (:func:`owned_nodes`: anchored by the original node or value its name
derives from, then the rest of the group by dataflow), so a fused Conv owns its Conv, the Add
of its sum input and its activation. An event's time goes to its node's owned original nodes,
split by the policy's integer weights exactly (:func:`toolkit.trace.split.split_targets`):
``equal`` (each the same) or ``compute`` (convolutions, matrix products, recurrent and
normalisation ops weigh 8, other arithmetic 1, data movement such as ``Reshape`` or
``Transpose`` 0; all 0 splits equally).
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
from toolkit.trace.codes import TextCodes
from toolkit.trace.read import Trace
from toolkit.trace.split import TargetWeights, group_sum, split_targets
from toolkit.trace.stats import matrix_per_run, matrix_stats_frame
from toolkit.trace.views import LayerAttribution

__all__ = ["join_ort", "OrtAttribution", "OrtGroups", "group_mapping", "check_pair", "owned_nodes",
           "ORT_POLICIES"]

ORT_POLICIES = ("equal", "compute")
_STR = pd.Series([""]).dtype
_HEAVY = frozenset({
    "Conv", "ConvTranspose", "Gemm", "MatMul", "MatMulInteger", "QLinearConv", "QLinearMatMul",
    "LSTM", "GRU", "RNN", "Attention", "MultiHeadAttention", "FusedConv", "FusedGemm",
    "FusedMatMul", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
    "GroupNormalization", "SkipLayerNormalization", "Softmax", "Einsum",
})
_MOVES = frozenset({
    "Reshape", "Transpose", "Identity", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Gather",
    "Concat", "Split", "Slice", "Cast", "Expand", "Constant", "ConstantOfShape", "Size",
    "ReorderInput", "ReorderOutput", "Dropout",
})


# The fix for a failed conservation check: the join's numbers cannot disagree unless the
# attribution was changed after the join or the join has a bug
_TAMPERED = ("the attribution was modified after the join, or this is a bug: join again; if it "
             "persists, report it with the ONNX Runtime profile and the model")


def _node_label(op: Op) -> str:
    name = op.extra.get("node_name") or ""
    return name or f"{op.type}_{op.extra.get('node_index', '?')}"


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


def _policy_weight(op: Op, policy: str) -> int:
    if policy == "equal":
        return 1
    if op.type in _HEAVY:
        return 8
    if op.type in _MOVES:
        return 0
    return 1


def _event_nodes(trace: Trace, mapping: OrtGroups, reasons: TextCodes,
                 where: str) -> tuple[np.ndarray, bool]:
    """Optimized node position of every event (-1 when none) and whether ``node_index`` is
    the position in the optimized file."""
    ev = trace.events
    n = len(ev)
    names = ev["name"].array
    cats = [str(c) for c in names.categories]
    codes = np.asarray(names.codes, dtype=np.int64)
    o1 = mapping.optimized
    by_name: dict[str, list[int]] = defaultdict(list)
    for i, op in enumerate(o1):
        if op.extra.get("node_name"):
            by_name[op.extra["node_name"]].append(i)
    cat_node = np.full(len(cats), -1, dtype=np.int64)
    cat_dup = np.zeros(len(cats), dtype=bool)
    for c, name in enumerate(cats):
        hits = by_name.get(name, [])
        if len(hits) == 1:
            cat_node[c] = hits[0]
        elif len(hits) > 1:
            cat_dup[c] = True
    node = np.where(codes >= 0, cat_node[np.maximum(codes, 0)], -1) if len(cats) else \
        np.full(n, -1, np.int64)
    # index mode: positions in the optimized file, Constant nodes not counted (ORT skips them)
    position = np.full(len(o1), -1, dtype=np.int64)
    k = 0
    for i, op in enumerate(o1):
        if op.type != "Constant":
            position[i] = k
            k += 1
    index = ev["node_index"].to_numpy(dtype=np.int64) if "node_index" in ev else \
        np.full(n, -1, np.int64)
    named = node >= 0
    exact = bool(named.any()) and bool(np.all(index[named] == position[node[named]]))
    at = np.full(k, -1, dtype=np.int64)
    at[position[position >= 0]] = np.flatnonzero(position >= 0)
    unnamed = np.array([not op.extra.get("node_name") for op in o1], dtype=bool)
    if exact:
        cand = np.where((index >= 0) & (index < k), at[np.clip(index, 0, max(k - 1, 0))], -1) \
            if k else np.full(n, -1, np.int64)
        use = (node < 0) & (cand >= 0)
        use &= unnamed[np.maximum(cand, 0)] if len(unnamed) else False
        node = np.where(use, cand, node)
    # foreign profile: most of the node names it times are not in the graph
    known = np.zeros(len(cats), dtype=bool)
    present = np.zeros(len(cats), dtype=bool)
    if n:
        present[np.unique(codes[codes >= 0])] = True
        found = np.unique(codes[(node >= 0) & (codes >= 0)])
        known[found] = True
    distinct = int(present.sum())
    if distinct and int(known.sum()) * 2 < distinct:
        sample = [cats[c] for c in np.flatnonzero(present & ~known)[:3].tolist()]
        raise ToolkitError(
            f"{distinct - int(known.sum())} of the {distinct} nodes the profile times are not "
            f"in the graph (e.g. {sample})", where=where,
            fix="pass the model the profiled session ran and, for a profile at a level above "
                "ORT_DISABLE_ALL, optimized= (the graph it saved with "
                "optimized_model_filepath)")
    # op check, once per distinct (node, op) pair
    mapped = np.flatnonzero(node >= 0)
    if len(mapped) and "op" in ev:
        op_values = ev["op"].array
        op_texts = [str(c) for c in op_values.categories]
        op_codes = np.asarray(op_values.codes, dtype=np.int64)[mapped]
        width = len(op_texts) + 1
        pairs, inverse = np.unique(node[mapped] * width + (op_codes + 1), return_inverse=True)
        pair_bad = np.array([
            bool(op_texts[int(p % width) - 1]) and op_texts[int(p % width) - 1]
            != o1[int(p // width)].type if p % width else False
            for p in pairs.tolist()], dtype=bool)
        wrong = pair_bad[inverse.reshape(-1)]
        if wrong.any():
            bad = np.zeros(n, dtype=bool)
            bad[mapped[wrong]] = True
            reasons.set_mask(bad, "its op differs from its node's op in the optimized graph")
            node = np.where(bad, -1, node)
    dup = np.zeros(n, dtype=bool)
    if cat_dup.any():
        dup = (codes >= 0) & cat_dup[np.maximum(codes, 0)]
    reasons.set_mask(dup & (node < 0), "ambiguous: several nodes of the graph have this name")
    cat_generated = np.array([_ort_generated(c) for c in cats], dtype=bool)
    generated = (node < 0) & (codes >= 0) & (cat_generated[np.maximum(codes, 0)]
                                             if len(cats) else False)
    if not exact:
        reasons.set_mask(generated, "a node ORT created without a name cannot be placed by index "
                               "here: profile the saved optimized model at ORT_DISABLE_ALL")
    reasons.set_mask(node < 0, "its node is not in the graph")
    return node, exact


def _ort_generated(name: str) -> bool:
    head, _, tail = name.rpartition("_")
    return bool(head) and tail.isdigit() and head.isidentifier()


class OrtAttribution(LayerAttribution):
    """Time of an ORT profile attributed to the original nodes and layers of an ONNX model.

    Attributes: ``policy``, ``trace``, ``model``, ``optimized`` (None when the profile is of
    the model itself), ``mapping`` (:class:`OrtGroups`), ``index_exact`` (True when events
    were placed by ``node_index``: a profile of the saved optimized model), ``total_ns``,
    ``attributed_ns``, ``unattributed_ns`` (``attributed_ns + unattributed_ns ==
    total_ns``), ``runs``.

    Grouped views end with :data:`~toolkit.trace.stats.STAT_COLUMNS` (``total_ns``,
    ``share`` of all event time, ``events``, per-run ``avg_ms`` ... ``max_ms``).
    """

    def __init__(self, trace: Trace, model: Model, optimized: Model | None,
                 mapping: OrtGroups, policy: str, node: np.ndarray, reasons: TextCodes,
                 index_exact: bool) -> None:
        self.trace, self.model, self.optimized = trace, model, optimized
        self.mapping, self.policy, self.index_exact = mapping, policy, index_exact
        ev = trace.events
        self._node = node
        self._reasons = reasons
        dur = ev["dur_ns"].to_numpy(dtype=np.int64)
        run = ev["run"].to_numpy(dtype=np.int64)
        n_runs = len(trace.meta.get("runs", ())) or (int(run.max()) + 1 if len(run) else 0)
        self.runs = max(n_runs, int(run.max()) + 1 if len(run) else 0)
        # member layout: slots per optimized op (its owned original ops)
        counts = np.array([len(m) for m in mapping.owned], dtype=np.int64)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) \
            else np.zeros(0, np.int64)
        slot_node = np.array([j for m in mapping.owned for j in m], dtype=np.int64)
        weight = np.array([_policy_weight(mapping.original[j], policy) for j in
                           slot_node.tolist()], dtype=np.int64)
        totals = np.zeros(len(counts), dtype=np.int64)
        for g in range(len(counts)):
            a, b = int(first[g]), int(first[g] + counts[g])
            if counts[g] and weight[a:b].sum() == 0:
                weight[a:b] = 1
            totals[g] = weight[a:b].sum()
        self._slot_node = slot_node
        self._weights = TargetWeights(first, counts, weight, totals)
        group = node.copy()  # the split's target: the optimized op
        empty_group = (group >= 0) & (counts[np.maximum(group, 0)] == 0 if len(counts)
                                      else True)
        reasons.set_mask(empty_group, "its optimized node replaced no node of the model")
        problem = ev["problem"].astype(str).to_numpy() if len(ev) else np.zeros(0, object)
        bad_problem = problem != ""
        for text in np.unique(problem[bad_problem]).tolist():
            reasons.set_mask(problem == text, text)
        reasons.set_mask(run < 0, "outside every model_run span")
        reasons.set_mask(dur < 0, "negative duration")
        ok = reasons.codes == 0
        self._target = np.where(ok, group, -1)
        counted = np.where(dur < 0, 0, dur)  # a negative duration is kept out of the totals
        self.total_ns = int(counted.sum())
        self.unattributed_ns = int(counted[~ok].sum())
        # split and accumulate (run, slot) sums
        rows = np.flatnonzero(ok)
        n_slots = len(slot_node)
        cells = np.zeros(n_slots * max(self.runs, 1), dtype=np.int64)
        self._event_slots = np.zeros(n_slots, dtype=np.int64)
        for rows_k, share in split_targets(dur[rows], self._target[rows], self._weights):
            k = share.shape[0]
            ev_rows = rows[rows_k]
            slots = first[self._target[ev_rows]][None, :] + np.arange(k)[:, None]
            keys = (slots * max(self.runs, 1) + run[ev_rows][None, :]).ravel()
            cells += group_sum(keys, share.ravel(), len(cells))
            self._event_slots += np.bincount(slots.ravel(), minlength=n_slots)
        self._cells = cells.reshape(n_slots, max(self.runs, 1))[:, : self.runs]
        self.attributed_ns = int(self._cells.sum())
        self._dur = dur
        self._run = run

    def __repr__(self) -> str:
        return (f"<OrtAttribution policy={self.policy!r}: {self.attributed_ns} of "
                f"{self.total_ns} ns attributed over {self.runs} run(s), "
                f"{int((self._reasons.codes != 0).sum())} event(s) unattributed>")

    # --------------------------------------------------------------------------- helpers
    def _rows(self, slot_row: np.ndarray, n_rows: int) -> pd.DataFrame:
        """Statistics per row of slots mapped by ``slot_row``."""
        matrix = np.zeros((n_rows, self.runs), dtype=np.int64)
        keep = slot_row >= 0
        if keep.any():
            np.add.at(matrix, slot_row[keep], self._cells[keep])
        events = np.zeros(n_rows, dtype=np.int64)
        ok = self._target >= 0
        if ok.any() and n_rows:
            # an event counts once per row it gives time to
            first = self._weights.first
            groups, counts = np.unique(self._target[ok], return_counts=True)
            for g, c in zip(groups.tolist(), counts.tolist()):
                a = int(first[g])
                rows = {int(slot_row[s]) for s in range(a, a + int(self._weights.count[g]))
                        if slot_row[s] >= 0}
                for r in rows:
                    events[r] += c
        return matrix_stats_frame(matrix, events, self.total_ns)

    def _layer_of(self, j: int) -> str:
        """The original node's layer: the first of its origin's layers (the module whose
        parameters it reads when the exporter folded a norm into it), ``""`` when none."""
        op = self.mapping.original[j]
        layers = [x for o in sorted(op.origins) for x in self.model.origin(o).layers]
        return layers[0] if layers else ""

    # ----------------------------------------------------------------------------- views
    def by_layer(self) -> pd.DataFrame:
        """One row per layer (module path, ``""`` for the top module) that owns a node of the
        model, in order of first node: ``layer`` (str), ``nodes`` (int64, original nodes it
        owns), then the statistics. ``total_ns`` sums to :attr:`attributed_ns`."""
        layers, slot_row = self._layer_slots()
        where = {name: i for i, name in enumerate(layers)}
        nodes = np.bincount([where[self._layer_of(j)] for j in range(len(self.mapping.original))],
                            minlength=len(layers)).astype(np.int64)
        ids = pd.DataFrame({"layer": pd.Series(layers, dtype=_STR), "nodes": nodes})
        return pd.concat([ids, self._rows(slot_row, len(layers))], axis=1)

    def _layer_slots(self) -> tuple[list[str], np.ndarray]:
        """The layers of :meth:`by_layer`, in order, and the row of each slot."""
        layers = list(dict.fromkeys(self._layer_of(j) for j in range(len(self.mapping.original))))
        where = {name: i for i, name in enumerate(layers)}
        return layers, np.array([where[self._layer_of(j)] for j in self._slot_node.tolist()],
                                dtype=np.int64)

    def per_run(self, by: str = "layer") -> pd.DataFrame:
        """The per-run table: one row per (row of :meth:`by_layer` or :meth:`by_op`, run) with
        time. Columns: ``row`` (int64: position in that view), ``layer`` (str) or
        ``node_index`` (int64), ``run`` (int64), ``ns`` (int64). Per row, ``ns`` sums to the
        view's ``total_ns``; a (row, run) pair absent here has 0.

        Raises:
            ToolkitError: ``by`` is not ``"layer"`` or ``"op"``.
        """
        runs = np.arange(self.runs, dtype=np.int64)
        if by == "layer":
            layers, slot_row = self._layer_slots()
            matrix = np.zeros((len(layers), self.runs), dtype=np.int64)
            if len(slot_row):
                np.add.at(matrix, slot_row, self._cells)
            return matrix_per_run(matrix, pd.Series(layers, dtype=_STR), "layer", runs)
        if by == "op":
            n1 = len(self.mapping.optimized)
            ok = self._target >= 0
            matrix = np.zeros((n1, self.runs), dtype=np.int64)
            if ok.any():
                np.add.at(matrix, (self._node[ok], self._run[ok]), self._dur[ok])
            return matrix_per_run(matrix, pd.Series(np.arange(n1, dtype=np.int64)),
                                  "node_index", runs)
        raise ToolkitError(f"per_run(by={by!r}): an ONNX Runtime profile has per-run tables "
                           "by layer and by op", fix='pass by="layer" or by="op"')

    def by_node(self) -> pd.DataFrame:
        """One row per original node, in file order: ``node_index`` (int64), ``name``,
        ``op``, ``layer`` (str), ``groups`` (object: tuple of group ids), ``unmapped`` (str:
        the reason, ``""`` when a group holds it), then the statistics."""
        o0 = self.mapping.original
        ids = pd.DataFrame({
            "node_index": np.arange(len(o0), dtype=np.int64),
            "name": pd.Series([_node_label(op) for op in o0], dtype=_STR),
            "op": pd.Series([op.type for op in o0], dtype=_STR),
            "layer": pd.Series([self._layer_of(j) for j in range(len(o0))], dtype=_STR),
            "groups": pd.Series([tuple(g) for g in self.mapping.owners], dtype=object),
            "unmapped": pd.Series([self.mapping.unmapped.get(j, "") for j in range(len(o0))],
                                  dtype=_STR),
        })
        return pd.concat([ids, self._rows(self._slot_node, len(o0))], axis=1)

    def by_op(self) -> pd.DataFrame:
        """One row per optimized node (the nodes ORT ran), in file order: ``node_index``
        (int64), ``name``, ``op``, ``domain`` (str), ``group`` (int64), ``original``
        (object: tuple of the original node names its group replaced), then the statistics
        of the events attributed to it (``total_ns`` sums to :attr:`attributed_ns`)."""
        o1 = self.mapping.optimized
        n1 = len(o1)
        ok = self._target >= 0
        node = self._node
        matrix = np.zeros((n1, self.runs), dtype=np.int64)
        if ok.any():
            np.add.at(matrix, (node[ok], self._run[ok]), self._dur[ok])
        events = np.bincount(node[ok], minlength=n1).astype(np.int64)
        o0 = self.mapping.original
        ids = pd.DataFrame({
            "node_index": np.arange(n1, dtype=np.int64),
            "name": pd.Series([_node_label(op) for op in o1], dtype=_STR),
            "op": pd.Series([op.type for op in o1], dtype=_STR),
            "domain": pd.Series([str(op.extra.get("domain", "")) for op in o1], dtype=_STR),
            "group": self.mapping.group_of.astype(np.int64),
            "original": pd.Series([tuple(_node_label(o0[j]) for j in
                                         self.mapping.members[g])
                                   for g in self.mapping.group_of.tolist()], dtype=object),
        })
        return pd.concat([ids, matrix_stats_frame(matrix, events, self.total_ns)], axis=1)

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
                "node_index": i, "name": _node_label(op), "op": op.type, "group": g,
                "group_size": len(self.mapping.groups[g]),
                "original": tuple(_node_label(o0[j]) for j in members),
                "original_ops": tuple(o0[j].type for j in members),
                "layers": tuple(dict.fromkeys(self._layer_of(j) for j in members)),
                "owned": tuple(_node_label(o0[j]) for j in self.mapping.owned[i]),
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
        rows = [{"group": g, "optimized": tuple(_node_label(o1[i]) for i in nodes),
                 "original": tuple(_node_label(o0[j]) for j in self.mapping.members[g]),
                 "layers": tuple(dict.fromkeys(self._layer_of(j)
                                               for j in self.mapping.members[g]))}
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
                rows.append({"node_index": j, "name": _node_label(op), "op": op.type,
                             "layer": self._layer_of(j), "reason": reason})
        return pd.DataFrame(rows, columns=["node_index", "name", "op", "layer", "reason"]
                            ).astype({"node_index": np.int64})

    def unattributed(self) -> pd.DataFrame:
        """Every event not attributed, in trace order: ``event_id``, ``run`` (int64),
        ``name``, ``op`` (str), ``dur_ns`` (int64), ``reason`` (categorical str).
        ``dur_ns`` sums to :attr:`unattributed_ns`."""
        rows = np.flatnonzero(self._reasons.codes != 0)
        ev = self.trace.events
        return pd.DataFrame({
            "event_id": ev["event_id"].to_numpy(dtype=np.int64)[rows],
            "run": self._run[rows],
            "name": pd.Series(ev["name"].astype(str).to_numpy()[rows], dtype=_STR),
            "op": pd.Series(ev["op"].astype(str).to_numpy()[rows] if "op" in ev else
                            [""] * len(rows), dtype=_STR),
            "dur_ns": self._dur[rows],
            "reason": pd.Categorical.from_codes(self._reasons.codes[rows],
                                                categories=pd.Index(self._reasons.texts,
                                                                    dtype=_STR)),
        })

    def summary(self) -> dict[str, Any]:
        """Headline figures: ``events``, ``attributed_events``, ``runs``, ``total_ns``,
        ``attributed_ns``, ``unattributed_ns``, ``overhead_ns`` (0: every kernel event is a
        node's), ``groups``, ``fused_groups``, ``unmapped_nodes``, ``policy``,
        ``index_exact``."""
        ok = self._reasons.codes == 0
        fused = sum(1 for g, nodes in enumerate(self.mapping.groups)
                    if len(nodes) > 1 or len(self.mapping.members[g]) > 1)
        return {"events": len(ok), "attributed_events": int(ok.sum()), "runs": self.runs,
                "total_ns": self.total_ns, "attributed_ns": self.attributed_ns,
                "unattributed_ns": self.unattributed_ns, "overhead_ns": 0,
                "groups": len(self.mapping.groups),
                "fused_groups": fused, "unmapped_nodes": len(self.mapping.unmapped),
                "policy": self.policy, "index_exact": self.index_exact}

    def check(self) -> None:
        """Verify conservation; raise :class:`ToolkitError` naming the first failure.

        attributed + unattributed = total; every attributed event split again gives pieces
        >= 0 that sum to its duration; ``by_layer``, ``by_node`` (each node once per group
        holding it) and ``by_op`` sum to :attr:`attributed_ns`."""
        if self.attributed_ns + self.unattributed_ns != self.total_ns:
            raise ToolkitError(f"attributed {self.attributed_ns} + unattributed "
                               f"{self.unattributed_ns} != total {self.total_ns} ns",
                               fix=_TAMPERED)
        ok = np.flatnonzero(self._target >= 0)
        again = 0
        for rows_k, share in split_targets(self._dur[ok], self._target[ok], self._weights):
            if share.size and int(share.min()) < 0:
                raise ToolkitError("a negative share was attributed", fix=_TAMPERED)
            sums = share.sum(axis=0)
            want = self._dur[ok[rows_k]]
            if not np.array_equal(sums, want):
                i = int(ok[rows_k][np.flatnonzero(sums != want)[0]])
                raise ToolkitError(f"event {i} splits into {int(sums[i])} ns for a duration "
                                   f"of {int(self._dur[i])} ns",
                                   fix=_TAMPERED)
            again += int(sums.sum())
        if again != self.attributed_ns:
            raise ToolkitError(f"the split gives {again} ns, the sums hold "
                               f"{self.attributed_ns} ns",
                               fix=_TAMPERED)
        for view in ("by_layer", "by_node", "by_op"):
            got = int(getattr(self, view)()["total_ns"].sum())
            if got != self.attributed_ns:
                raise ToolkitError(f"{view}() sums to {got} ns, attributed is "
                                   f"{self.attributed_ns} ns",
                                   fix=_TAMPERED)
        unatt = int(self.unattributed()["dur_ns"].clip(lower=0).sum())  # negative: 0 ns
        if unatt != self.unattributed_ns:
            raise ToolkitError(
                f"unattributed() sums to {unatt} ns, not {self.unattributed_ns}",
                fix=_TAMPERED,
            )


def join_ort(trace: Trace | str | os.PathLike[str], model: Model | str | os.PathLike[str],
             optimized: Model | str | os.PathLike[str] | None = None, *,
             policy: str = "equal") -> OrtAttribution:
    """Attribute an ORT profile's kernel time to the original nodes and layers of ``model``.

    Args:
        trace: an ORT profile (path, or a :class:`Trace` read from one).
        model: the exported ONNX model (path or :func:`~toolkit.importers.onnx.load_onnx`).
        optimized: the graph ORT saved for that session (``optimized_model_filepath``); None
            when the profile is of ``model`` run at ``ORT_DISABLE_ALL``, or of ``optimized``
            itself passed as ``model``.
        policy: ``"equal"`` or ``"compute"`` (how a group's time is split between the
            original nodes it replaced; see the module doc).

    Returns:
        An :class:`OrtAttribution`.

    Raises:
        ToolkitError: an unknown policy; a model that is not ONNX; an optimized graph that is
            not ORT's optimization of the model; a profile most of whose nodes are not in the
            graph; a trace that is not an ORT profile.
    """
    if policy not in ORT_POLICIES:
        raise ToolkitError(f"unknown policy {policy!r}", fix=f"use one of {ORT_POLICIES}")
    if not isinstance(trace, Trace):
        from toolkit.trace.ort import read_ort_profile

        trace = read_ort_profile(trace)
    if trace.meta.get("format") != "ort":
        raise ToolkitError(f"the trace is a {trace.meta.get('format', '?')} trace, not an ORT "
                           "profile", where=str(trace.meta.get("source", "")),
                           fix="pass the JSON file ORT's profiler wrote")
    m0 = _as_model(model, "model")
    m1 = _as_model(optimized, "optimized") if optimized is not None else None
    mapping = group_mapping(m0, m1)
    reasons = TextCodes(len(trace.events))
    where = f"{trace.meta.get('source', 'trace')} vs {(m1 or m0).path or 'model'}"
    node, exact = _event_nodes(trace, mapping, reasons, where)
    return OrtAttribution(trace, m0, m1, mapping, policy, node, reasons, exact)
