"""Strength reduction: replace an op by a cheaper one that computes the same values.

Origins: **replace**. The new op copies the origins of the op it replaces.

Rewrites (float32 tensors without quantization, a scalar constant exponent or divisor):

* ``POW(x, 0.5)`` → ``SQRT(x)``; ``POW(x, -0.5)`` → ``RSQRT(x)``; ``POW(x, 2)`` →
  ``MUL(x, x)``;
* ``DIV(x, c)`` with ``c`` a power of two → ``MUL(x, 1/c)`` (exact: the reciprocal of a
  power of two is representable, and multiplying by it rounds like dividing).

Left alone: quantized tensors, non-scalar or non-constant exponents/divisors, DIV with a fused
activation other than NONE (it is carried over to the MUL, which supports the same ones),
dynamic shapes.
"""

from __future__ import annotations

import math

import numpy as np

from toolkit.builder import options_for
from toolkit.compiler.passes._match import const_array, is_float32, op_is_static
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op

__all__ = ["StrengthReduce"]


def _scalar(op: Op, i: int) -> float | None:
    if len(op.inputs) <= i:
        return None
    a = const_array(op.inputs[i])
    if a is None or a.size != 1 or a.dtype != np.float32:
        return None
    return float(a.reshape(-1)[0])


def _power_of_two(v: float) -> bool:
    if v == 0 or not math.isfinite(v):
        return False
    m, _ = math.frexp(abs(v))
    return m == 0.5


class StrengthReduce(GraphPass):
    """Replace POW by SQRT/RSQRT/MUL and DIV by a power of two with MUL."""

    name = "strength_reduce"
    relation = "replace"

    def run(self, graph: Graph) -> bool:
        """Apply every rewrite once; return True when any op was replaced."""
        changed = False
        for op in list(graph.ops):
            if op.graph is not graph or len(op.outputs) != 1 or not op_is_static(op):
                continue
            if op.type not in ("POW", "DIV") or not all(
                    is_float32(t) for t in (*op.inputs, *op.outputs)):
                continue
            x, out = op.inputs[0], op.outputs[0]
            c = _scalar(op, 1)
            if x is None or c is None or x.shape != out.shape:
                continue
            if op.type == "POW":
                if c == 0.5:
                    graph.replace(op, "SQRT", [x], [out])
                elif c == -0.5:
                    graph.replace(op, "RSQRT", [x], [out])
                elif c == 2.0:
                    graph.replace(op, "MUL", [x, x], [out],
                                  options_for("MUL", fusedActivationFunction=0))
                else:
                    continue
            elif _power_of_two(c):
                inv = graph.add_const(graph.unique_name(f"{out.name}/reciprocal"),
                                      np.array(1.0 / c, dtype=np.float32))
                graph.replace(op, "MUL", [x, inv], [out],
                              options_for("MUL", fusedActivationFunction=op.activation))
            else:
                continue
            changed = True
        return changed
