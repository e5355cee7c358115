"""Recognise a normalisation written out in primitive ops.

A match starts at ``m = MEAN(x, axes, keep_dims)`` and needs the variance chain::

    SQUARED_DIFFERENCE(x, m) -> MEAN(axes) -> [ADD eps] -> RSQRT        (inv = 1/sqrt(v+eps))
                                                         -> POW 0.5 | SQRT  (den = sqrt(v+eps))

Everything downstream of ``m`` and ``inv``/``den`` is then evaluated *symbolically*: each
tensor is an affine form ``a·x + b·m + c`` whose coefficients are per-channel vectors times
``inv`` to the power 0 or 1 (MUL, ADD, SUB, NEG, DIV by ``den`` or by a constant). The region
must have exactly one tensor read from outside, ``y``, and ``y`` must equal
``inv·G·(x - m) + B``: then it is a normalisation with ``gamma = G`` and ``beta = B``. This
one check covers every arrangement converters write, e.g.

* ``(x - m) * inv * gamma + beta`` and ``(x - m) / pow(v + eps, 0.5) * gamma + beta``;
* ``x * (inv * gamma) + (beta - m * (inv * gamma))`` (TensorFlow, with SUB or with NEG);
* ``x * inv - m * inv + beta`` (no gamma).

Only float32 tensors with static shapes (or a free batch dimension that is not reduced)
match; a region containing any other op type, an op
with a fused activation (other than on ``y``'s producer) or a tensor used outside is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from toolkit.compiler.passes._match import (
    const_array,
    is_float32,
    is_graph_output,
    op_is_static,
    per_channel,
    sole_consumer,
)
from toolkit.ir import Graph, Op, Tensor

__all__ = ["NormMatch", "match_norm"]

_MAX_REGION = 16
_LINEAR = frozenset({"MUL", "ADD", "SUB", "DIV", "NEG"})

# An affine form: {"x" | "m" | "1": (power of inv, per-channel float64 vector)}
Form = dict[str, tuple[int, np.ndarray]]


@dataclass
class NormMatch:
    """A recognised normalisation ``y = (x - mean) / sqrt(var + eps) * gamma + beta``.

    ``axes`` are the reduced axes (sorted, non-negative); ``gamma``/``beta`` are float64
    vectors over the last axis of ``x``; ``ops`` are all ops computing ``y`` from ``x``;
    ``activation`` is the fused activation of ``y``'s producer.
    """

    x: Tensor
    y: Tensor
    axes: tuple[int, ...]
    eps: float
    gamma: np.ndarray
    beta: np.ndarray
    ops: list[Op]
    activation: int


def _axes(op: Op, rank: int) -> tuple[int, ...] | None:
    a = const_array(op.inputs[1] if len(op.inputs) > 1 else None)
    if a is None or a.dtype.kind not in "iu":
        return None
    axes = sorted({int(v) % rank for v in a.reshape(-1)})
    return tuple(axes) if axes else None


def free_batch_only(op: Op, axes: tuple[int, ...] = ()) -> bool:
    """True when every tensor of ``op`` has a static shape, or a free (-1) batch dimension
    (axis 0) and static others, the batch not among the reduced ``axes``: a normalisation
    over static axes is the same for any batch."""
    if op_is_static(op):
        return True
    if 0 in axes:
        return False
    for t in (*op.inputs, *op.outputs):
        if t is not None and t.is_dynamic and t.shape_signature is not None and (
                len(t.shape_signature) < 2 or any(d < 0 for d in t.shape_signature[1:])):
            return False
    return True


def _mean_of(op: Op, x: Tensor) -> tuple[int, ...] | None:
    """Reduced axes of ``op`` when it is MEAN(x, axes) with kept dims, else None."""
    if op.type != "MEAN" or not op.inputs or op.inputs[0] is not x or len(op.outputs) != 1:
        return None
    if not bool(getattr(op.options, "keepDims", False)):
        return None
    out = op.outputs[0]
    if len(out.shape) != len(x.shape) or not is_float32(out):
        return None
    axes = _axes(op, len(x.shape))
    if axes is None or not free_batch_only(op, axes):
        return None
    return axes


def _scalar(t: Tensor | None) -> float | None:
    a = const_array(t)
    if a is None or a.size != 1 or not is_float32(t):
        return None
    return float(a.reshape(-1)[0])


def _variance_chain(graph: Graph, mean: Op, x: Tensor, axes: tuple[int, ...]
                    ) -> tuple[list[Op], float, Tensor, bool] | None:
    """Return (chain ops, eps, inv-or-den tensor, is_den) for the variance chain of ``mean``."""
    m = mean.outputs[0]
    sqds = [c for c in m.consumers if c.type == "SQUARED_DIFFERENCE"
            and {id(t) for t in c.inputs} == {id(x), id(m)} and len(c.inputs) == 2]
    if len(sqds) != 1:
        return None
    sqd = sqds[0]
    var_op = sole_consumer(graph, sqd.outputs[0])
    if var_op is None or _mean_of(var_op, sqd.outputs[0]) != axes:
        return None
    chain = [mean, sqd, var_op]
    t = var_op.outputs[0]
    nxt = sole_consumer(graph, t)
    eps = 0.0
    if nxt is not None and nxt.type == "ADD" and nxt.activation == 0:
        other = nxt.inputs[1] if nxt.inputs[0] is t else nxt.inputs[0]
        e = _scalar(other)
        if e is None:
            return None
        eps = e
        chain.append(nxt)
        t = nxt.outputs[0]
        nxt = sole_consumer(graph, t)
    if nxt is None or nxt.inputs[0] is not t:
        return None
    if nxt.type == "RSQRT":
        is_den = False
    elif nxt.type == "SQRT" or (nxt.type == "POW" and _scalar(nxt.inputs[1]) == 0.5):
        is_den = True
    else:
        return None
    chain.append(nxt)
    if not all(is_float32(o.outputs[0]) for o in chain):
        return None
    return chain, eps, nxt.outputs[0], is_den


def _const_form(t: Tensor, rank: int, channels: int) -> Form | None:
    a = const_array(t)
    if a is None or not is_float32(t):
        return None
    v = per_channel(a, rank, channels)
    return None if v is None else {"1": (0, v)}


def _mul(a: Form, b: Form) -> Form | None:
    if set(a) != {"1"}:
        a, b = b, a
    if set(a) != {"1"}:
        return None  # product of two forms in x: not affine
    k, s = a["1"]
    out: Form = {}
    for key, (kb, v) in b.items():
        if k + kb > 1:
            return None
        out[key] = (k + kb, v * s)
    return out


def _add(a: Form, b: Form, sign: float) -> Form | None:
    out = dict(a)
    for key, (kb, v) in b.items():
        if key in out:
            ka, u = out[key]
            if ka != kb:
                return None
            out[key] = (ka, u + sign * v)
        else:
            out[key] = (kb, sign * v)
    return out


def _evaluate(op: Op, forms: dict[Tensor, Form], den: Tensor | None, rank: int,
              channels: int) -> Form | None:
    """Return the affine form of ``op``'s output, or None when it is not affine."""
    ins: list[Form | None] = []
    for t in op.inputs:
        if t is None:
            return None
        if t is den:
            ins.append(None)
            continue
        f = forms.get(t)
        if f is None:
            f = _const_form(t, rank, channels)
            if f is None:
                return None
        ins.append(f)
    if op.type == "NEG" and len(ins) == 1 and ins[0] is not None:
        return {k: (p, -v) for k, (p, v) in ins[0].items()}
    if len(ins) != 2:
        return None
    a, b = ins
    if op.type == "DIV":
        if a is None:
            return None
        if b is None:  # divided by den = sqrt(var + eps): multiply by inv
            return _mul({"1": (1, np.ones(channels))}, a)
        if set(b) != {"1"} or b["1"][0] != 0 or np.any(b["1"][1] == 0):
            return None
        return _mul({"1": (0, 1.0 / b["1"][1])}, a)
    if a is None or b is None:
        return None
    if op.type == "MUL":
        return _mul(a, b)
    if op.type == "ADD":
        return _add(a, b, 1.0)
    if op.type == "SUB":
        return _add(a, b, -1.0)
    return None


def _candidates(ts: Iterable[Tensor]) -> list[Op]:
    return [c for t in ts for c in t.consumers]


def match_norm(graph: Graph, mean: Op) -> NormMatch | None:
    """Return the normalisation that starts at the MEAN op ``mean``, or None (see module)."""
    if mean.graph is not graph or mean.type != "MEAN" or not mean.inputs:
        return None
    x = mean.inputs[0]
    if x is None or not is_float32(x) or not x.shape:
        return None
    rank, channels = len(x.shape), x.shape[-1]
    axes = _mean_of(mean, x)
    if axes is None:
        return None
    found = _variance_chain(graph, mean, x, axes)
    if found is None:
        return None
    chain, eps, inv, is_den = found
    m = mean.outputs[0]
    forms: dict[Tensor, Form] = {x: {"x": (0, np.ones(channels))},
                                 m: {"m": (0, np.ones(channels))}}
    den = inv if is_den else None
    if not is_den:
        forms[inv] = {"1": (1, np.ones(channels))}
    chain_set = set(chain)
    region: list[Op] = []
    region_set: set[Op] = set()
    pending = _candidates([m, inv])
    progress = True
    while progress and pending:
        progress = False
        rest = []
        for op in pending:
            if op in region_set or op in chain_set:
                continue
            if op.type not in _LINEAR or len(op.outputs) != 1 or not is_float32(op.outputs[0]) \
                    or not free_batch_only(op, axes):
                continue
            f = _evaluate(op, forms, den, rank, channels)
            if f is None:
                if all(t is None or t in forms or t.is_const or t is den for t in op.inputs):
                    continue  # all inputs known but not affine: not part of the region
                rest.append(op)
                continue
            region.append(op)
            region_set.add(op)
            if len(region) > _MAX_REGION:
                return None
            out = op.outputs[0]
            forms[out] = f
            rest.extend(out.consumers)
            progress = True
        pending = rest
    best: tuple[Op, list[Op]] | None = None
    for last in region:
        if _norm_form(forms[last.outputs[0]], channels) is None:
            continue
        needed = _needed(last, region_set)
        if _self_contained(graph, last, needed, chain_set, [m, inv], den) and (
                best is None or len(needed) > len(best[1])):
            best = (last, needed)
    if best is None:
        return None
    last, needed = best
    y = last.outputs[0]
    if y.shape != x.shape:
        return None
    found_form = _norm_form(forms[y], channels)
    assert found_form is not None
    gamma, beta = found_form
    ops = [*chain, *(o for o in region if o in needed)]
    return NormMatch(x, y, axes, eps, gamma, beta, ops, last.activation)


def _norm_form(form: Form, channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Return (gamma, beta) when ``form`` is ``inv * gamma * (x - m) + beta``, else None."""
    if set(form) - {"x", "m", "1"} or "x" not in form or "m" not in form:
        return None
    (kx, g), (km, gm) = form["x"], form["m"]
    if kx != 1 or km != 1 or not np.allclose(g, -gm, rtol=1e-12, atol=0.0):
        return None
    kb, beta = form.get("1", (0, np.zeros(channels)))
    if kb != 0 or not (np.all(np.isfinite(g)) and np.all(np.isfinite(beta))):
        return None
    return g, beta


def _needed(last: Op, region: set[Op]) -> list[Op]:
    """Return the region ops that ``last`` depends on (itself included)."""
    seen = {last}
    stack = [last]
    while stack:
        op = stack.pop()
        for t in op.inputs:
            p = t.producer if t is not None else None
            if p is not None and p in region and p not in seen:
                seen.add(p)
                stack.append(p)
    return list(seen)


def _self_contained(graph: Graph, last: Op, needed: list[Op], chain: set[Op],
                    seeds: list[Tensor], den: Tensor | None) -> bool:
    """True when only ``last``'s output of the ops ``chain + needed`` is used outside them,
    and only ``last`` has a fused activation."""
    inside = chain | set(needed)
    inner = [*seeds, *(o.outputs[0] for o in needed if o is not last)]
    for t in inner:
        if is_graph_output(graph, t) or any(c not in inside for c in t.consumers):
            return False
    if den is not None and any(c.type != "DIV" or c.inputs[1] is not den or c.inputs[0] is den
                               for c in den.consumers):
        return False
    return all(o.activation == 0 for o in needed if o is not last)
