"""Place each op on a backend and group ops into parts, as ONE's circle-partitioner does.

circle-partitioner starts with one group per op (in model order), then repeats until nothing
changes: scanning groups in order, a group absorbs the first other group of the same backend
that consumes one of its outputs, provided every input of that group produced by some group is
produced by the absorbing group (graph inputs and constants do not count).

That fixed point is computed here in one pass over the ops in topological order, with no
rescans (O(ops + edges)). The pass is exact because:

* A group can only ever be absorbed by the one group that produces all its op-made inputs, and
  a merge never splits producers apart, so whether a group is absorbable only grows and the
  final sets do not depend on the merge order.
* The op of a group that absorbs the rest (its *root*) comes first in topological order; the
  other members read only tensors of their own group (and graph inputs / constants), so a
  group's external op-made inputs are its root's.
* Hence, visiting ops in topological order: an op joins the group of its producers when all
  its op-made inputs come from one group of its own backend, else it starts a new group. Later
  ops never merge earlier groups.

One departure from circle-partitioner: an op that reads only constants (a weight ``DEQUANTIZE``
or ``DENSIFY``, and ops reading only such outputs) does not start a part of its own; it joins
the part of the first op that reads its output, whatever its own placement, so that parts
follow the compute ops (a float16 model would otherwise get one part per weight). Another
reader in another part takes the tensor as a part input.

Parts are the groups in the order of their roots, which is the order circle-partitioner writes
them, and a valid execution order: a part's inputs are source inputs or outputs of earlier
parts. A part's inputs are its root's inputs in argument order, then graph inputs read by its
other members; its outputs are its ops' outputs (op order, then output order) that another part
reads or that are outputs of the source model.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from toolkit.errors import PartitionError
from toolkit.formats.part_file import OPCODE, OPNAME, PartSpec
from toolkit.ir import Graph, Op, Tensor

__all__ = ["Placement", "Group", "place_ops", "group_ops"]


@dataclass
class Placement:
    """Backend of one op and the rule that chose it: ``rule`` is ``"OPCODE DIV=acl_cl"``,
    ``"OPNAME Sub=npu"``, ``"default"`` or ``"OPCODE _=cpu"``; ``where`` is ``file:line``."""

    backend: str
    rule: str
    where: str


@dataclass
class Group:
    """One part: backend, op positions (in ``graph.ops``, model order), boundary tensors and,
    per op, why it starts or joins the part."""

    index: int
    backend: str
    ops: list[int] = field(default_factory=list)
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def _opcode_key(op: Op, table: dict[str, str]) -> str | None:
    if op.type == "CUSTOM" and op.custom_code:
        key = f"CUSTOM({op.custom_code})"
        if key in table:
            return key
    if op.type in table:
        return op.type
    for onnx_type in op.extra.get("onnx_op_types", ()):  # an op lowered from ONNX nodes
        if onnx_type in table:
            return str(onnx_type)
    return None


def place_ops(ops: Sequence[Op], spec: PartSpec) -> tuple[list[Placement], list[str]]:
    """Return the :class:`Placement` of every op under a validated ``spec`` and the warnings.

    With ``comply=opcode`` an op goes where ``[OPCODE]`` names its type; with ``comply=opname``
    where ``[OPNAME]`` names it (its first output tensor). Otherwise it goes to the default.
    Warnings (also issued with :func:`warnings.warn`): ``[OPNAME]`` names the model lacks, or
    that name a secondary output of a multi-output op; rules of the section ``comply`` does
    not select.
    """
    default = spec.default_backend
    assert default is not None
    default_rule = (f"OPCODE _={default}" if spec.opcode_default is not None else "default")
    default_where = spec.where(OPCODE, "_") if spec.opcode_default is not None else \
        spec.where("partition", "default")
    by_default = Placement(default, default_rule, default_where)
    out: list[Placement] = []
    notes: list[str] = []
    if spec.comply == "opname":
        table = spec.opname
        cache: dict[str, Placement] = {}
        used: set[str] = set()
        for op in ops:
            name = op.name
            backend = table.get(name)
            if backend is None:
                out.append(by_default)
                continue
            used.add(name)
            pl = cache.get(name)
            if pl is None:
                pl = cache[name] = Placement(backend, f"OPNAME {name}={backend}",
                                             spec.where(OPNAME, name))
            out.append(pl)
        missing = [k for k in table if k not in used]
        if missing:
            secondary = {t.name: (op, k) for op in ops for k, t in enumerate(op.outputs) if k}
            for k in missing:
                hit = secondary.get(k)
                if hit is not None:
                    msg = (f"[OPNAME] {k!r} is output {hit[1]} of {hit[0].kind} "
                           f"{hit[0].name!r}; a multi-output op is named by its first output, "
                           f"so the rule was not applied (use {hit[0].name!r})")
                else:
                    msg = f"[OPNAME] {k!r} names no op of the model; the rule was not applied"
                notes.append(f"{spec.where(OPNAME, k)}: {msg}")
    else:
        table = spec.opcode
        cache2: dict[str, Placement] = {}
        for op in ops:
            key = _opcode_key(op, table)
            if key is None:
                out.append(by_default)
                continue
            pl = cache2.get(key)
            if pl is None:
                pl = cache2[key] = Placement(table[key], f"OPCODE {key}={table[key]}",
                                             spec.where(OPCODE, key))
            out.append(pl)
        for key in table:
            if key not in cache2:
                notes.append(f"{spec.where(OPCODE, key)}: [OPCODE] {key} matches no op of the "
                             "model; the rule was not applied")
    ignored = (OPNAME, spec.opname) if spec.comply == "opcode" else (OPCODE, spec.opcode)
    if ignored[1]:
        notes.append(f"{spec.where(ignored[0])}: [{ignored[0]}] has {len(ignored[1])} rule(s) "
                     f"but comply={spec.comply}; they were not applied")
    for n in notes:
        warnings.warn(n, stacklevel=3)
    return out, notes


def _weight_ops(ops: Sequence[Op], graph_outputs: set[Tensor]) -> dict[Tensor, int]:
    """The outputs of the ops that read only constants (and outputs of such ops), such as a
    weight DEQUANTIZE or DENSIFY, mapped to the op's position; ops making a graph output and
    ops with side effects (stateful, control flow, custom) are not among them."""
    made: dict[Tensor, int] = {}
    for i, op in enumerate(ops):
        ins = [t for t in op.inputs if t is not None]
        if not ins or not op.outputs or op.type in _NOT_WEIGHT \
                or any(t in graph_outputs for t in op.outputs):
            continue
        if all(t.is_const or t in made for t in ins):
            for t in op.outputs:
                made[t] = i
    return made


#: op kinds that never count as weight ops (they run subgraphs, or a user's kernel)
_NOT_WEIGHT = frozenset({"CUSTOM", "IF", "WHILE", "CALL", "CALL_ONCE"})


def group_ops(graph: Graph, backends: Sequence[str]) -> list[Group]:
    """Group the ops of ``graph`` (``backends[i]`` is the backend of ``graph.ops[i]``) into
    parts; return the groups in part order (see the module docstring for the rule).

    Runs in O(ops + edges). Raises :class:`PartitionError` when the lengths disagree.
    """
    ops = graph.ops
    if len(backends) != len(ops):
        raise PartitionError(
            f"{len(backends)} backends for {len(ops)} ops",
            fix="pass one backend per op of graph.ops, in the same order",
        )
    graph_outputs = set(graph.outputs)
    weight_made = _weight_ops(ops, graph_outputs)  # tensor -> weight op making it
    weight_group: dict[int, int] = {}  # weight op -> the group that claimed it
    made_by: dict[Tensor, int] = {}  # tensor -> group index of its producer
    group_of: dict[Op, int] = {}
    groups: list[Group] = []
    seen_inputs: list[set[Tensor]] = []  # per group, the tensors already in its inputs

    def claim(t: Tensor, gi: int, reader: Op) -> None:
        """The weight op making ``t`` joins group ``gi`` (with the weight ops it reads) unless
        an earlier reader's group has it: then ``t`` is an input of ``gi``."""
        j = weight_made[t]
        have = weight_group.get(j)
        if have is None:
            weight_group[j] = gi
            groups[gi].ops.append(j)
            groups[gi].reasons.append(f"joins: reads only constants; computed for "
                                      f"{reader.kind} {reader.name!r} of part {gi + 1}")
            group_of[ops[j]] = gi
            for u in ops[j].inputs:
                if u is not None and u in weight_made:
                    claim(u, gi, reader)
        elif have != gi and t not in seen_inputs[gi]:
            groups[gi].inputs.append(t)
            seen_inputs[gi].add(t)

    for i, op in enumerate(ops):
        if any(t in weight_made for t in op.outputs):
            continue  # placed with the first op that reads it (claim)
        backend = backends[i]
        producers: list[int] = []
        for t in op.inputs:
            if t is None:
                continue
            g = made_by.get(t)
            if g is not None and g not in producers:
                producers.append(g)
        if len(producers) == 1 and groups[producers[0]].backend == backend:
            gi = producers[0]
            grp = groups[gi]
            grp.reasons.append(f"joins: all op inputs come from part {gi + 1}")
            seen = seen_inputs[gi]
            for t in op.inputs:
                if (t is not None and t not in made_by and not t.is_const
                        and not t.is_variable and t not in seen and t not in weight_made):
                    grp.inputs.append(t)
                    seen.add(t)
        else:
            gi = len(groups)
            grp = Group(gi, backend)
            groups.append(grp)
            seen = set()
            seen_inputs.append(seen)
            if not producers:
                why = "starts: reads only graph inputs and constants"
            elif len(producers) == 1:
                why = (f"starts: producer part {producers[0] + 1} is on backend "
                       f"{groups[producers[0]].backend}")
            else:
                why = f"starts: op inputs come from {len(producers)} parts"
            grp.reasons.append(why)
            for t in op.inputs:
                if t is not None and not t.is_const and not t.is_variable and t not in seen \
                        and t not in weight_made:  # (claim() decides for weight outputs)
                    grp.inputs.append(t)
                    seen.add(t)
        grp.ops.append(i)
        group_of[op] = gi
        for t in op.outputs:
            made_by[t] = gi
        for t in op.inputs:
            if t is not None and t in weight_made:
                claim(t, gi, op)
    # weight ops no compute op reads (dead chains): grouped among themselves, by the rule
    for j in sorted({j for j in weight_made.values() if j not in weight_group}):
        made = [weight_group[weight_made[t]] for t in ops[j].inputs
                if t is not None and t in weight_made]
        prod = list(dict.fromkeys(made))
        if len(prod) == 1 and groups[prod[0]].backend == backends[j] \
                and groups[prod[0]].ops[0] in weight_made.values():
            grp = groups[prod[0]]
            grp.ops.append(j)
            grp.reasons.append(f"joins: all op inputs come from part {grp.index + 1}")
        else:
            grp = Group(len(groups), backends[j], [j], [], [],
                        ["starts: reads only constants and no compute op reads it"])
            groups.append(grp)
        for t in ops[j].inputs:
            if t is not None and t in weight_made and weight_group[weight_made[t]] != \
                    grp.index and t not in grp.inputs:
                grp.inputs.append(t)
        weight_group[j] = grp.index
        group_of[ops[j]] = grp.index
    for grp in groups:
        if len(grp.ops) > 1:  # weight ops joined after their readers: back to model order
            order = sorted(range(len(grp.ops)), key=grp.ops.__getitem__)
            grp.ops = [grp.ops[k] for k in order]
            grp.reasons = [grp.reasons[k] for k in order]
    for grp in groups:
        for i in grp.ops:
            for t in ops[i].outputs:
                if t in graph_outputs or any(group_of[c] != grp.index for c in t.consumers):
                    grp.outputs.append(t)
    return groups
