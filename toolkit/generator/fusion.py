"""The fusion plan of the native backend: ops whose work the generated code does inside the
step of another op, which then writes or reads the tensors directly.

Two folds, each only where the tensor between the two ops is read by nothing else and is no
model input or output, both ops are whole steps (no stripes) and the model has no control
flow:

* **PAD into a convolution.** A PAD (or a PADV2 whose value is the pad value) of the spatial
  axes of a 4-D tensor, with the value 0 (float32) or the zero point (int8, input and output
  quantized alike), whose output only a CONV_2D / DEPTHWISE_CONV_2D reads as its input: the
  convolution reads the PAD's input with the padding before (top, left) added to its own, and
  skips the taps outside it, which is what a tap on the pad value adds (0, or ``x - zp = 0``).
* **An activation into its producer.** A RELU, RELU6 or RELU_N1_TO_1 whose input is written
  by an ADD, SUB, MUL, CONV_2D or DEPTHWISE_CONV_2D without a fused activation: the producer
  runs with the activation fused and writes the activation's output (int8: when the
  activation's input and output are quantized alike, its clamp is the fused one, bit for bit).
  A float32 PRELU by a constant alpha after one of those producers: the producer writes the
  PRELU's output and the PRELU runs in place on the rows it has just written (a convolution's
  rows inside the same thread's part of the rows, while they are in cache).

An absorbed op keeps its step, which does no work: its trace event lasts ~0 and its
arguments carry ``fused_into`` (the key of the step that computes it); that step's arguments
carry ``absorbed`` (the keys of the ops it computes, comma-separated), so a trace still has
one event per op in order.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from toolkit.generator.quant import is_quantized, qp
from toolkit.ir import Model, Op, Tensor

if TYPE_CHECKING:
    from toolkit.generator.analysis import Step

__all__ = ["ACTIVATIONS", "AddFold", "FusionPlan", "PadFold", "plan_fusion"]

#: activation op -> the fused activation code that computes it
ACTIVATIONS = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}
_PRODUCERS = frozenset({"ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D"})
_CONVS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})
#: the ops a spatial PAD folds into
PAD_HOSTS = _CONVS
_F32, _I8 = np.dtype(np.float32), np.dtype(np.int8)


@dataclass(frozen=True)
class PadFold:
    """A PAD a convolution reads through: the PAD's input and its padding before."""

    pad: int          # step index of the PAD
    source: Tensor    # the PAD's input, which the convolution reads
    top: int
    left: int


@dataclass(frozen=True)
class AddFold:
    """A float32 residual ADD a convolution computes on its output rows right after them."""

    add: int           # step index of the ADD
    other: Tensor      # the ADD's other operand (a folded channel PAD's input)
    c0: int            # the folded channel PAD's padding before (0 without one)
    act: int           # the activation after the sum (the ADD's own, or a folded one's)
    pad: int | None    # step index of the folded channel PAD


@dataclass
class FusionPlan:
    """Which steps run inside which: ``into`` maps an absorbed step's index to the index of
    the step computing it; ``pads`` a convolution's step index to the PAD it reads through;
    ``acts`` a producer's step index to the op emitted in its place (the producer writing the
    activation's output with the activation fused); ``prelus`` a producer's step index to the
    float32 PRELU it computes on its output rows right after them (in place); ``adds`` a
    convolution's step index to the residual ADD it computes likewise."""

    into: dict[int, int] = field(default_factory=dict)
    pads: dict[int, PadFold] = field(default_factory=dict)
    acts: dict[int, Op] = field(default_factory=dict)
    prelus: dict[int, Op] = field(default_factory=dict)
    adds: dict[int, AddFold] = field(default_factory=dict)

    def reads(self, index: int, op: Op) -> list[Tensor]:
        """The tensors step ``index`` of ``op`` reads in the generated code."""
        if index in self.into:
            return []
        ins = [t for t in op.inputs if t is not None]
        fold = self.pads.get(index)
        if fold is not None:
            ins = [fold.source, *ins[1:]]
        add = self.adds.get(index)
        if add is not None:
            ins.append(add.other)
        return ins

    def writes(self, index: int, op: Op) -> list[Tensor]:
        """The tensors step ``index`` of ``op`` writes in the generated code."""
        if index in self.into:
            return []
        return list(self.acts[index].outputs if index in self.acts else op.outputs)


def _sole_reader(t: Tensor, readers: dict[Tensor, list[Op]], special: set[Tensor]
                 ) -> Op | None:
    r = readers.get(t, [])
    if t in special or len(r) != 1 or sum(u is t for u in r[0].inputs) != 1:
        return None
    return r[0]


def _same_quant(op: Op, a: Tensor, b: Tensor) -> bool:
    if a.dtype != b.dtype:
        return False
    if a.dtype == _F32 and not is_quantized(a) and not is_quantized(b):
        return True
    if a.dtype != _I8 or not (is_quantized(a) and is_quantized(b)):
        return False
    pa, pb = qp(op, a), qp(op, b)
    return (pa.scale.size == pb.scale.size == 1 and float(pa.s) == float(pb.s)
            and pa.zp == pb.zp)


def _pad_fold(op: Op, index: int) -> PadFold | None:
    """The fold of a spatial PAD of the pad value, or None."""
    if op.type not in ("PAD", "PADV2") or len(op.inputs) < 2 or not op.outputs:
        return None
    x, p, y = op.inputs[0], op.inputs[1], op.outputs[0]
    if x is None or p is None or p.data is None or len(x.shape) != 4 \
            or not _same_quant(op, x, y):
        return None
    if np.asarray(p.data).size != 8:
        return None
    pads = np.asarray(p.data).astype(np.int64).reshape(4, 2)
    if (pads < 0).any() or pads[0].any() or pads[3].any():
        return None
    pad_value = qp(op, y).zp if is_quantized(y) else 0
    if op.type == "PADV2" and len(op.inputs) > 2 and op.inputs[2] is not None:
        v = op.inputs[2]
        if v.data is None or np.asarray(v.data).size != 1:
            return None
        if np.asarray(v.data).reshape(-1)[0].item() != pad_value:
            return None
    return PadFold(index, x, int(pads[1, 0]), int(pads[2, 0]))


def plan_fusion(model: Model, steps: list[Step], special: set[Tensor]) -> FusionPlan:
    """The fusion plan of the main graph's ``steps`` (see the module docstring); ``special``
    holds the model's inputs and outputs, which are never folded away."""
    plan = FusionPlan()
    g = model.graph
    readers: dict[Tensor, list[Op]] = {}
    for op in g.ops:
        for u in op.inputs:
            if u is not None:
                readers.setdefault(u, []).append(op)
    if any(s.rows is not None for s in steps) or len({s.op for s in steps}) != len(steps):
        return plan  # striped ops: each stripe reads and writes part of the tensors
    step_of = {s.op: s for s in steps}
    # PAD -> convolution
    for s in steps:
        fold = _pad_fold(s.op, s.index)
        if fold is None:
            continue
        conv = _sole_reader(s.op.outputs[0], readers, special)
        if conv is None or conv.type not in PAD_HOSTS or conv.inputs[0] is not s.op.outputs[0]:
            continue
        c = step_of.get(conv)
        if c is None or c.index < s.index or not _same_quant(conv, fold.source, s.op.outputs[0]):
            continue
        plan.pads[c.index] = fold
        plan.into[s.index] = c.index
    # activation -> producer
    for s in steps:
        op = s.op
        if op.type not in _PRODUCERS or op.options is None \
                or not hasattr(op.options, "fusedActivationFunction") or len(op.outputs) != 1:
            continue
        t = op.outputs[0]
        act = _sole_reader(t, readers, special) if t.dtype in (_F32, _I8) else None
        a = step_of.get(act) if act is not None else None
        if act is None or a is None or a.index < s.index or len(act.outputs) != 1:
            continue
        if act.type in ACTIVATIONS and op.activation == 0 \
                and _same_quant(act, t, act.outputs[0]):
            fused = op.clone(op.inputs, [act.outputs[0]])
            options = copy.copy(op.options)
            options.fusedActivationFunction = ACTIVATIONS[act.type]
            fused.options = options
        elif act.type == "PRELU" and _float_prelu(act, t):
            fused = op.clone(op.inputs, [act.outputs[0]])
            plan.prelus[s.index] = act
        else:
            continue
        plan.acts[s.index] = fused
        plan.into[a.index] = s.index
    # residual ADD -> the convolution writing one of its operands
    producer = {t: s for s in steps for t in s.op.outputs}
    for s in steps:
        found = _add_fold(s, plan, readers, special, producer)
        if found is None:
            continue
        cs, add, final = found
        plan.adds[cs.index] = add
        plan.acts[cs.index] = cs.op.clone(cs.op.inputs, [final])
        plan.into[s.index] = cs.index
        for i, host in list(plan.into.items()):  # an activation the ADD computed
            if host == s.index:
                plan.into[i] = cs.index
        plan.acts.pop(s.index, None)
        if add.pad is not None:
            plan.into[add.pad] = cs.index
    return plan


def _add_fold(s: Step, plan: FusionPlan, readers: dict[Tensor, list[Op]],
              special: set[Tensor], producer: dict[Tensor, Step]
              ) -> tuple[Step, AddFold, Tensor] | None:
    """The fold of the float32 ADD of step ``s`` into the convolution writing one of its
    operands: that step, the fold and the tensor the convolution then writes; None when the
    ADD does not fold."""
    op = s.op
    if op.type != "ADD" or s.index in plan.into or s.index in plan.prelus \
            or len(op.inputs) != 2 or op.activation not in (0, *ACTIVATIONS.values()):
        return None
    y = op.outputs[0]
    if y.dtype != _F32 or len(y.shape) != 4 or is_quantized(y):
        return None
    for k in (0, 1):
        t, o = op.inputs[k], op.inputs[1 - k]
        if t is None or o is None or t is o:
            continue
        conv = producer.get(t)
        if conv is None or conv.op.type not in _CONVS or t.dtype != _F32 \
                or tuple(t.shape) != tuple(y.shape) or conv.index in plan.acts \
                or _sole_reader(t, readers, special) is not op:
            continue
        pad, c0, other = None, 0, o
        p: Step | None = producer.get(o)
        if p is not None and p.op.type in ("PAD", "PADV2") and p.index not in plan.into:
            ch = _channel_pad(p.op)
            if ch is not None and _sole_reader(o, readers, special) is op:
                pad, c0, x = p.index, ch, p.op.inputs[0]
                if x is None:
                    continue
                other, p = x, producer.get(x)
        if other.dtype != _F32 or len(other.shape) != 4 \
                or tuple(other.shape[:3]) != tuple(y.shape[:3]) \
                or (pad is None and tuple(other.shape) != tuple(y.shape)) \
                or (p is not None and p.index >= conv.index):
            continue
        final = plan.acts[s.index].outputs[0] if s.index in plan.acts else y
        act = plan.acts[s.index].activation if s.index in plan.acts else op.activation
        return conv, AddFold(s.index, other, c0, act, pad), final
    return None


def _channel_pad(op: Op) -> int | None:
    """The padding before of a float32 PAD of the last axis of a 4-D tensor by zeros (None
    for any other PAD)."""
    x, y = op.inputs[0], op.outputs[0]
    if x is None or x.dtype != _F32 or y.dtype != _F32 or is_quantized(x) \
            or len(x.shape) != 4 or len(op.inputs) < 2:
        return None
    p = op.inputs[1]
    if p is None or p.data is None or np.asarray(p.data).size != 8:
        return None
    pads = np.asarray(p.data).astype(np.int64).reshape(4, 2)
    if pads[:3].any() or (pads < 0).any():
        return None
    if op.type == "PADV2" and len(op.inputs) > 2 and op.inputs[2] is not None:
        v = op.inputs[2]
        if v.data is None or np.asarray(v.data).size != 1 \
                or float(np.asarray(v.data).reshape(-1)[0]) != 0.0:
            return None
    return int(pads[3, 0])


def _float_prelu(prelu: Op, x: Tensor) -> bool:
    """Whether ``prelu`` is a float32 PRELU of ``x`` (rank 2 or more) by a constant alpha
    that broadcasts to it."""
    if len(prelu.inputs) != 2 or prelu.inputs[0] is not x:
        return False
    alpha, y = prelu.inputs[1], prelu.outputs[0]
    if alpha is None or alpha.data is None or alpha.dtype != _F32 or y.dtype != _F32 \
            or x.dtype != _F32 or is_quantized(x) or len(x.shape) < 2 \
            or tuple(y.shape) != tuple(x.shape):
        return False
    try:
        return tuple(np.broadcast_shapes(tuple(x.shape), tuple(alpha.shape))) == tuple(x.shape)
    except ValueError:
        return False

