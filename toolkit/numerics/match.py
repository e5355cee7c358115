"""Match the tensors of two captures through provenance.

Rules, tried in this order (a tensor is matched at most once):

1. ``"graph input"``: the graph inputs, by position (the files may name them differently).
2. ``"tensor name"``: the same tensor name and the same number of elements, unless either
   producer carries origins of ops that run later on the other side (a fused op that kept
   its first op's output name computes past it: it is compared by rule 3 instead).
3. ``"origin"``: source ops that the two sides group differently (a compile fused them, a
   partition split them) are tied together through their origins: two ops share an origin
   when they carry an origin of the same name (:attr:`Origin.name`; the id when it has no
   name). In each connected group, the last op of the reference and the last op of the
   candidate are compared output by output (a fused op's output against its last source
   op's output).
4. ``"layer boundary"``: the output of a layer's last op on each side (layers read through
   ``model.origin(oid).layers``).

Every tensor left over is listed with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from toolkit.layer_names import NO_LAYER
from toolkit.numerics.capture import Capture, TensorRecord

__all__ = ["Match", "Matching", "match_captures", "layer_boundaries"]


@dataclass(frozen=True)
class Match:
    """A reference tensor and the candidate tensor it is compared with, and the rule."""

    ref: str
    cand: str
    rule: str


@dataclass
class Matching:
    """The matches (reference execution order) and the tensors left over, with reasons."""

    matches: list[Match] = field(default_factory=list)
    ref_unmatched: dict[str, str] = field(default_factory=dict)
    cand_unmatched: dict[str, str] = field(default_factory=dict)
    by_ref: dict[str, Match] = field(default_factory=dict)
    by_cand: dict[str, Match] = field(default_factory=dict)

    def add(self, ref: str, cand: str, rule: str) -> None:
        m = Match(ref, cand, rule)
        self.matches.append(m)
        self.by_ref[ref] = m
        self.by_cand[cand] = m


def _size(rec: TensorRecord) -> int:
    return math.prod(rec.shape)


def _keys(rec: TensorRecord) -> list[str]:
    return [n if n else f"#{o}" for o, n in zip(rec.origins, rec.origin_names)]


def _computes_past(r: TensorRecord, c: TensorRecord, first_at: dict[str, int]) -> bool:
    """True when ``c``'s producer (a tensor named as ``r``, on the other side) also carries
    the origins of ops of ``r``'s side that run after ``r``'s producer: it computes past
    ``r`` (a fused op that kept its first op's output name), so the name does not mean the
    same value. ``first_at`` maps an origin key to its first op on ``r``'s side."""
    return any(first_at.get(k, -1) > r.order for k in _keys(c))


def layer_boundaries(cap: Capture) -> dict[str, TensorRecord]:
    """Each layer's boundary tensor: the last op output (execution order) whose op carries
    the layer; layers in the order their boundaries come. Ops that belong to no layer (a
    converter's last op named after the output tensor: ``docs/layers.md``) are listed under
    :data:`~toolkit.layer_names.NO_LAYER`, at the last of them."""
    last: dict[str, TensorRecord] = {}
    for rec in cap.records.values():
        if rec.op is None:
            continue
        for layer in rec.layers or (NO_LAYER,):
            last[layer] = rec
    return dict(sorted(last.items(), key=lambda kv: (kv[1].order, _pos(kv[1], kv[0]))))


def _pos(rec: TensorRecord, layer: str) -> int:
    return rec.layers.index(layer) if layer in rec.layers else 0


def match_captures(ref: Capture, cand: Capture) -> Matching:
    """Match the tensors of ``cand`` to those of ``ref`` (see the module docstring)."""
    out = Matching()
    rin = [r for r in ref.records.values() if r.is_input]
    cin = [r for r in cand.records.values() if r.is_input]
    for r, c in zip(rin, cin):
        if _size(r) == _size(c):
            out.add(r.name, c.name, "graph input")
    # 2. same name
    first_at: dict[str, int] = {}
    for r in ref.records.values():
        for k in _keys(r):
            first_at.setdefault(k, r.order)
    first_at_c: dict[str, int] = {}
    for c in cand.records.values():
        for k in _keys(c):
            first_at_c.setdefault(k, c.order)
    for r in ref.records.values():
        if r.name in out.by_ref or r.op is None:
            continue
        same = cand.records.get(r.name)
        if same is not None and same.op is not None and same.name not in out.by_cand \
                and _size(same) == _size(r) and not _computes_past(r, same, first_at) \
                and not _computes_past(same, r, first_at_c):
            out.add(r.name, same.name, "tensor name")
    # 3. groups tied by origins (union-find over ops of both sides)
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: tuple[str, str], b: tuple[str, str]) -> None:
        parent[find(a)] = find(b)

    ops: dict[tuple[str, str], list[TensorRecord]] = {}
    for side, cap in (("r", ref), ("c", cand)):
        for rec in cap.records.values():
            if rec.op is None:
                continue
            node = (side, rec.op.name if rec.op is not None else rec.name)
            ops.setdefault(node, []).append(rec)
            for k in _keys(rec):
                union(node, ("o", k))
    groups: dict[tuple[str, str], dict[str, list[TensorRecord]]] = {}
    for node, recs in ops.items():
        g = groups.setdefault(find(node), {"r": [], "c": []})
        g[node[0]].extend(recs)
    group_of: dict[tuple[str, str], tuple[str, str]] = {}
    for root, g in groups.items():
        for side in ("r", "c"):
            for rec in g[side]:
                group_of[(side, rec.name)] = root
        if not g["r"] or not g["c"]:
            continue
        r_last = _last_op_outputs(g["r"])
        c_last = _last_op_outputs(g["c"])
        if len(r_last) != len(c_last):
            continue
        for r, c in zip(r_last, c_last):
            if r.name in out.by_ref or c.name in out.by_cand or _size(r) != _size(c):
                continue
            out.add(r.name, c.name, "origin")
    # 4. layer boundaries
    cb = layer_boundaries(cand)
    for layer, r in layer_boundaries(ref).items():
        edge = cb.get(layer) if layer != NO_LAYER else None  # ops of no layer: no evidence
        if edge is None or r.name in out.by_ref or edge.name in out.by_cand \
                or _size(r) != _size(edge):
            continue
        out.add(r.name, edge.name, "layer boundary")
    order = {n: i for i, n in enumerate(ref.records)}
    out.matches.sort(key=lambda m: order[m.ref])
    # reasons for the rest
    for side, cap, taken, miss in (("r", ref, out.by_ref, out.ref_unmatched),
                                   ("c", cand, out.by_cand, out.cand_unmatched)):
        other_name = "candidate" if side == "r" else "reference"
        for rec in cap.records.values():
            if rec.name in taken:
                continue
            if rec.op is None:
                miss[rec.name] = f"a graph input with no {other_name} input of its size"
                continue
            g = groups[group_of[(side, rec.name)]]
            mine, theirs = g[side], g["c" if side == "r" else "r"]
            if not theirs:
                miss[rec.name] = (f"no op of the {other_name} carries its origins (an op "
                                  f"{'removed or not converted' if side == 'r' else 'added'}"
                                  f" by the converter or compiler)")
            elif rec not in _last_op_outputs(mine):
                last = _last_op_outputs(mine)[0]
                miss[rec.name] = (f"inside a group of ops the {other_name} "
                                  f"{'fuses' if side == 'r' else 'splits'} differently: "
                                  f"compared at the group's last output {last.name!r}")
            else:
                partner = _last_op_outputs(theirs)[0].name
                taken_by = (out.by_cand if side == "r" else out.by_ref).get(partner)
                if taken_by is not None:
                    miss[rec.name] = (f"its {other_name} counterpart {partner!r} computes "
                                      f"further (fused) and is compared with "
                                      f"{taken_by.ref if side == 'r' else taken_by.cand!r}")
                else:
                    miss[rec.name] = (f"the {other_name}'s counterpart {partner!r} has "
                                      f"another shape or output count")
    for name, reason in cand.missing.items():
        out.cand_unmatched.setdefault(name, f"not captured: {reason}")
    for name, reason in ref.missing.items():
        out.ref_unmatched.setdefault(name, f"not captured: {reason}")
    return out


def _last_op_outputs(recs: list[TensorRecord]) -> list[TensorRecord]:
    """The outputs of the last op (execution order) among ``recs``, in output order."""
    last = max(recs, key=lambda r: r.order)
    op = last.op
    same = [r for r in recs if r.op is op]
    names = [t.name for t in op.outputs] if op is not None else [last.name]
    return sorted(same, key=lambda r: names.index(r.name) if r.name in names else 0)
