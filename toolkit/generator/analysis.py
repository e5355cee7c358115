"""Analysis of a model for code generation: the inference sequence, tensor roles and the arena.

The inference sequence is one step per op (plain model, key ``op_index``) or per command
(compiled model, key ``command_id``; a striped op has one step per stripe of output rows).
Every step carries the same trace arguments as the reference runtime's events, so a native
trace joins like a NumPy one.

Tensors are inputs, outputs (each with its own buffer), constants (in the parameters file) or
temporaries, which share one arena: each temporary lives from the first step that writes it to
the last step that reads it, and is placed at the lowest offset (64-byte aligned) that no
tensor living at the same time occupies, largest tensors first. A control-flow op (WHILE, IF,
CALL, CALL_ONCE) is one step; the ops of the subgraphs it runs take positions inside its span
and share the arena (see :mod:`toolkit.generator.control`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.compiler.compiled import model_and_commands
from toolkit.errors import UnsupportedOpError
from toolkit.generator.fusion import FusionPlan, plan_fusion
from toolkit.ir import Model, Op, Tensor

if TYPE_CHECKING:
    from toolkit.generator.control import ControlPlan

__all__ = ["Step", "Analysis", "analyse", "plan_arena", "c_identifier", "ARENA_ALIGN",
           "FREE_DIMS_FIX"]

ARENA_ALIGN = 64
#: the fix of every "free dimension" refusal of the generator
FREE_DIMS_FIX = ("fix the free dimensions first: tk.codegen(model, dir, shapes={input: "
                 "shape}) sets them (default: the file's shape), or "
                 "tk.fix_free_dims(model, shapes=...) before tk.compile")
_CPP_KEYWORDS = frozenset([
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char16_t", "char32_t", "class", "compl", "const", "constexpr",
    "const_cast", "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "return", "short", "signed", "sizeof", "static", "static_assert",
    "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try",
    "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "wchar_t", "while", "xor", "xor_eq"
])


def c_identifier(name: str, taken: set[str] | None = None) -> str:
    """``name`` as a C++ identifier: other characters become ``_`` (runs of ``_`` become
    one, none leads or trails); a leading digit, a keyword, ``tk``, ``std``, ``main`` or a
    ``tk_`` prefix (the generated code's own names) gets a ``t_`` prefix, and a name
    already in ``taken`` a numeric suffix (the result is added to ``taken``)."""
    s = re.sub(r"_+", "_", re.sub(r"[^0-9A-Za-z_]", "_", name)).strip("_") or "t"
    if s[0].isdigit() or s in _CPP_KEYWORDS or s in ("tk", "std", "main") \
            or s.startswith("tk_"):
        s = "t_" + s
    if taken is not None:
        base, k = s, 1
        while s in taken:
            s = f"{base}_{k}"
            k += 1
        taken.add(s)
    return s


@dataclass
class Step:
    """One call of the inference sequence."""

    index: int            # position in the sequence
    key: int              # trace key: op index or command id
    op: Op
    op_index: int         # index of the op in the graph
    args: dict[str, Any]  # trace arguments, as the reference runtime's events
    rows: tuple[int, int] | None = None  # output rows (axis 1) of a stripe


@dataclass
class Analysis:
    """What the generator needs to know about a model."""

    model: Model
    steps: list[Step]
    key_name: str                      # "op_index" or "command_id"
    inputs: list[Tensor]
    outputs: list[Tensor]
    temporaries: list[Tensor]
    lifetimes: dict[Tensor, tuple[int, int]]
    arena_offsets: dict[Tensor, int] = field(default_factory=dict)
    arena_bytes: int = 0
    control: ControlPlan | None = None  # WHILE and IF: see toolkit.generator.control
    fusion: FusionPlan | None = None  # ops run inside others: see toolkit.generator.fusion

    def size_of(self, t: Tensor) -> int:
        """Arena bytes of a temporary (a tensor of run-time shape: its capacity)."""
        if self.control is not None and t in self.control.sizes:
            return int(self.control.sizes[t])
        return nbytes(t)

    @property
    def temporaries_bytes(self) -> int:
        """Sum of the sizes of all temporaries (what the arena saves against)."""
        return sum(self.size_of(t) for t in self.temporaries)


def nbytes(t: Tensor) -> int:
    """Bytes of a tensor of static shape."""
    if t.dtype is None:
        raise UnsupportedOpError(f"tensor {t.name!r} has type {t.type_name}",
                                 where=f"tensor {t.name!r}", fix="use float32 or int8 tensors")
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize


def analyse(obj: Any, fuse: bool = True) -> Analysis:
    """The inference sequence, tensor roles, lifetimes and arena plan of a Model or a
    CompiledModel. ``fuse``: fold ops into others (see :mod:`toolkit.generator.fusion`;
    off for a debug build, which copies out every tensor)."""
    model, commands = model_and_commands(obj, "codegen")
    g = model.graph
    control = bool({"IF", "WHILE", "CALL", "CALL_ONCE"} & {o.type for o in g.ops})
    for t in g.tensors if not control else ():  # (the control-flow plan checks them)
        if t.shape_signature is not None and any(d < 0 for d in t.shape_signature):
            raise UnsupportedOpError(f"tensor {t.name!r} has a dynamic shape "
                                     f"{list(t.shape_signature)}", where=f"tensor {t.name!r}",
                                     fix=FREE_DIMS_FIX)
    steps: list[Step] = []
    op_index = {op: i for i, op in enumerate(g.ops)}
    if commands is None:
        for i, op in enumerate(g.ops):
            steps.append(Step(i, i, op, i, {"op_index": i, "op_type": op.kind,
                                            "op_name": op.name}))
        key_name = "op_index"
    else:
        for c in commands:
            op = c.op
            rows = (int(c.row_start), int(c.row_end)) if int(c.stripes) > 1 else None
            steps.append(Step(len(steps), int(c.command_id), op, op_index[op],
                              {"command_id": int(c.command_id), "optimised_id": op_index[op],
                               "stripe": int(c.stripe), "op_type": op.kind,
                               "op_name": op.name}, rows))
        key_name = "command_id"
    inputs, outputs = list(g.inputs), list(g.outputs)
    special = set(inputs) | set(outputs)
    if control:
        return _analyse_control(model, steps, key_name, inputs, outputs, special)
    fusion = None
    if fuse:
        fusion = plan_fusion(model, steps, special)
        _mark_fused(steps, fusion)
    lifetimes: dict[Tensor, list[int]] = {}
    for s in steps:
        writes = s.op.outputs if fusion is None else fusion.writes(s.index, s.op)
        reads = s.op.inputs if fusion is None else fusion.reads(s.index, s.op)
        for t in writes:
            if t is not None and t not in special and t.data is None:
                span = lifetimes.setdefault(t, [s.index, s.index])
                span[0] = min(span[0], s.index)
                span[1] = max(span[1], s.index)
        for u in reads:
            if u is not None and u in lifetimes:
                lifetimes[u][1] = max(lifetimes[u][1], s.index)
    temporaries = list(lifetimes)
    a = Analysis(model, steps, key_name, inputs, outputs, temporaries,
                 {t: (v[0], v[1]) for t, v in lifetimes.items()}, fusion=fusion)
    offsets, a.arena_bytes = plan_arena([(nbytes(t), *a.lifetimes[t]) for t in temporaries])
    a.arena_offsets = dict(zip(temporaries, offsets))
    return a


def _mark_fused(steps: list[Step], fusion: FusionPlan) -> None:
    """Trace arguments of the folds: ``fused_into`` (the key of the step computing the op)
    on an absorbed step, ``absorbed`` (the keys of the ops it computes, comma-separated, in
    order) on the step computing them."""
    absorbed: dict[int, list[int]] = {}
    for i, j in sorted(fusion.into.items()):
        steps[i].args["fused_into"] = steps[j].key
        absorbed.setdefault(j, []).append(steps[i].key)
    for j, keys in absorbed.items():
        steps[j].args["absorbed"] = ",".join(str(k) for k in keys)


def _analyse_control(model: Model, steps: list[Step], key_name: str, inputs: list[Tensor],
                     outputs: list[Tensor], special: set[Tensor]) -> Analysis:
    """The analysis of a model with WHILE or IF: every subgraph they run shares the arena
    (see :mod:`toolkit.generator.control`)."""
    from toolkit.generator.control import plan

    cp = plan(model, steps, special)
    temporaries = list(cp.lifetimes)
    a = Analysis(model, steps, key_name, inputs, outputs, temporaries,
                 {t: (v[0], v[1]) for t, v in cp.lifetimes.items()}, control=cp)
    offsets, a.arena_bytes = plan_arena([(a.size_of(t), *a.lifetimes[t]) for t in temporaries])
    a.arena_offsets = dict(zip(temporaries, offsets))
    return a


def plan_arena(tensors: list[tuple[int, int, int]], align: int = ARENA_ALIGN
               ) -> tuple[list[int], int]:
    """Offsets of tensors ``(size, first_step, last_step)`` in one arena and its size.

    Greedy by size (largest first): each tensor goes to the lowest aligned offset where it
    overlaps no placed tensor whose lifetime intersects its own. Returns the offsets in the
    order given and the arena size in bytes (a multiple of ``align``)."""
    order = sorted(range(len(tensors)), key=lambda i: (-tensors[i][0], tensors[i][1]))
    placed: list[tuple[int, int, int, int]] = []  # offset, end, first, last
    offsets = [0] * len(tensors)
    total = 0
    for i in order:
        size, first, last = tensors[i]
        size = -(-max(size, 1) // align) * align
        busy = sorted((o, e) for o, e, f, la in placed if not (la < first or last < f))
        offset = 0
        for o, e in busy:
            if offset + size <= o:
                break
            offset = max(offset, e)
        offsets[i] = offset
        placed.append((offset, offset + size, first, last))
        total = max(total, offset + size)
    return offsets, total
