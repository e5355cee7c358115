"""Lower a compiled graph to an ordered command queue, with a cost estimate per command.

**Commands.** Ops of subgraph 0 are taken in their execution order; each becomes one or more
commands. An op whose output is larger than ``target.buffer_bytes`` is cut into *stripes* of
output rows (axis 1 of the output, H of NHWC) when its rows can be computed independently:

* CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D (any padding) and AVERAGE_POOL_2D (VALID padding):
  each stripe reads the input rows of its receptive field;
* elementwise ops (:data:`STRIPE_ELEMENTWISE`) on outputs of rank >= 2 whose inputs are either
  broadcast along axis 1 or non-constant with the output's extent there (sliced like the
  output).

Every other op is one command (``stripes = 1``) however large. A stripe covers output rows
``[row_start, row_end)``; an unsplit op covers all rows (``[0, 1)`` for outputs of rank < 2).
Stripes have ``ceil(rows / stripes)`` rows, the last one fewer, with
``stripes = ceil(rows / max(1, buffer_bytes // row_bytes))``.

**Queue.** Command ``i`` sits at byte offset ``i * target.command_bytes`` of one command
stream (id 0): Vela's ``queue`` table.

**Cost model.** For each command::

    macs   = the op's MACs (toolkit.costs.op_macs) × rows of the stripe / rows of the output
    bytes  = output bytes of the stripe + input bytes it reads + constant bytes (weights,
             biases: read again for every stripe)
    est_cycles = max(ceil(macs / macs_per_cycle), ceil(bytes / bytes_per_cycle))

i.e. compute and data movement overlap and the slower one bounds the command. Integer shares
of an op's MACs and output bytes are cut so that its stripes sum exactly to the op's totals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.compiler.target import Target
from toolkit.costs import nbytes, op_const_bytes, op_input_bytes, op_macs, op_output_bytes
from toolkit.ir import Op, Tensor
from toolkit.limits import check as check_limit

__all__ = ["Command", "lower", "stripe_rows", "can_stripe", "estimate_cycles",
           "STRIPE_ELEMENTWISE", "STRIPE_WINDOWED", "ROW_AXIS"]

ROW_AXIS = 1
STRIPE_WINDOWED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"})
STRIPE_ELEMENTWISE = frozenset({
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW", "RELU",
    "RELU6", "RELU_N1_TO_1", "TANH", "LOGISTIC", "QUANTIZE", "DEQUANTIZE", "RSQRT", "SQRT",
    "EXP", "ABS", "NEG", "LEAKY_RELU", "HARD_SWISH", "GELU",
})
_VALID = 1


@dataclass(frozen=True, slots=True)
class Command:
    """One entry of the command queue.

    ``op`` is the compiled op (an :class:`~toolkit.ir.Op` of the compiled model) and
    ``optimised_id`` its index; the command computes output rows ``[row_start, row_end)``
    along ``axis`` (stripe ``stripe`` of ``stripes``). ``macs``, ``bytes`` and ``est_cycles``
    are the cost model's figures; ``queue_offset`` is its byte offset in the queue.
    """

    command_id: int
    op: Op
    optimised_id: int
    stripe: int
    stripes: int
    row_start: int
    row_end: int
    axis: int
    macs: int
    bytes: int
    est_cycles: int
    queue_offset: int


def _aligned_axis(t: Tensor, rank: int) -> int:
    """Axis of ``t`` that broadcasting lines up with output axis 1 (negative: none)."""
    return ROW_AXIS - (rank - len(t.shape))


def can_stripe(op: Op) -> bool:
    """True when ``op``'s output rows (axis 1) can be computed stripe by stripe."""
    if len(op.outputs) != 1:
        return False
    out = op.outputs[0]
    rank = len(out.shape)
    if rank < 2 or out.shape[ROW_AXIS] < 2 or out.is_dynamic:
        return False
    if op.type in STRIPE_WINDOWED:
        x = op.inputs[0] if op.inputs else None
        if x is None or len(x.shape) != 4 or rank != 4 or op.options is None:
            return False
        return op.type != "AVERAGE_POOL_2D" or op.options.padding == _VALID
    if op.type not in STRIPE_ELEMENTWISE:
        return False
    for t in op.inputs:
        if t is None:
            continue
        a = _aligned_axis(t, rank)
        if a < 0 or t.shape[a] == 1:
            continue
        if t.is_const or t.shape[a] != out.shape[ROW_AXIS]:
            return False
    return True


def stripe_rows(op: Op, target: Target) -> list[tuple[int, int]]:
    """Return the ``(row_start, row_end)`` of each command of ``op`` (one range if unsplit)."""
    out = op.outputs[0] if op.outputs else None
    if out is None or len(out.shape) < 2:
        return [(0, 1)]
    rows = out.shape[ROW_AXIS]
    out_bytes = op_output_bytes(op)
    if out_bytes <= target.buffer_bytes or not can_stripe(op):
        return [(0, rows)]
    row_bytes = math.ceil(out_bytes / rows)
    per = max(1, target.buffer_bytes // row_bytes)
    n = math.ceil(rows / per)
    check_limit("max_stripes_per_op", n, where=f"op {op.kind} {op.name!r}",
                what=f"{rows:,} output rows of {row_bytes:,} bytes in a "
                     f"{target.buffer_bytes:,}-byte buffer make {n:,} stripes")
    per = math.ceil(rows / n)
    return [(r, min(rows, r + per)) for r in range(0, rows, per)]


def _share(total: int, r0: int, r1: int, rows: int) -> int:
    """Integer share of ``total`` for rows ``[r0, r1)`` of ``rows`` (shares sum to total)."""
    return total * r1 // rows - total * r0 // rows


def _window_rows(op: Op, r0: int, r1: int) -> int:
    """Input rows the output rows ``[r0, r1)`` of a windowed op read (at most all)."""
    opts = op.options
    x = op.inputs[0]
    assert x is not None
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = op.inputs[1]
        kh = w.shape[1] if w is not None and len(w.shape) == 4 else 1
        dh = int(getattr(opts, "dilationHFactor", 1) or 1)
    else:
        kh = int(getattr(opts, "filterHeight", 1) or 1)
        dh = 1
    sh = int(getattr(opts, "strideH", 1) or 1)
    return min(x.shape[ROW_AXIS], (r1 - r0 - 1) * sh + (kh - 1) * dh + 1)


def _stripe_input_bytes(op: Op, r0: int, r1: int, rows: int) -> int:
    out = op.outputs[0]
    if op.type in STRIPE_WINDOWED:
        x = op.inputs[0]
        assert x is not None
        return _share(nbytes(x), 0, _window_rows(op, r0, r1), x.shape[ROW_AXIS])
    total = 0
    rank = len(out.shape)
    for t in op.inputs:
        if t is None or t.is_const:
            continue
        a = _aligned_axis(t, rank)
        if a >= 0 and t.shape[a] == rows:
            total += _share(nbytes(t), r0, r1, rows)
        else:
            total += nbytes(t)
    return total


def estimate_cycles(macs: int, moved: int, target: Target) -> int:
    """Return the cost model's cycles for ``macs`` MACs and ``moved`` bytes:
    ``max(ceil(macs / macs_per_cycle), ceil(moved / bytes_per_cycle))``."""
    return max(-(-macs // target.macs_per_cycle), -(-moved // target.bytes_per_cycle))


def lower(ops: Sequence[Op], target: Target) -> list[Command]:
    """Return the command queue of ``ops`` (in execution order; ``optimised_id`` = index)."""
    commands: list[Command] = []
    for oid, op in enumerate(ops):
        spans = stripe_rows(op, target)
        macs = op_macs(op)
        out_bytes = op_output_bytes(op)
        const_bytes = op_const_bytes(op)
        n = len(spans)
        if n == 1:
            r0, r1 = spans[0]
            costs = [(macs, out_bytes + op_input_bytes(op) + const_bytes)]
        else:
            rows = op.outputs[0].shape[ROW_AXIS]
            costs = [(_share(macs, r0, r1, rows),
                      _share(out_bytes, r0, r1, rows) + _stripe_input_bytes(op, r0, r1, rows)
                      + const_bytes) for r0, r1 in spans]
        for s, ((r0, r1), (m, b)) in enumerate(zip(spans, costs)):
            cid = len(commands)
            commands.append(Command(
                command_id=cid, op=op, optimised_id=oid, stripe=s, stripes=n, row_start=r0,
                row_end=r1, axis=ROW_AXIS, macs=m, bytes=b,
                est_cycles=estimate_cycles(m, b, target),
                queue_offset=cid * target.command_bytes))
    return commands
