"""Split policies: the integer weight of each member of a target.

``equal``  every source op of an event's op gets the same share.
``macs``   each source op in proportion to its multiply-accumulates (``source_ops().macs``);
           within a source op that has a main layer (``layers().main``: the layer whose work
           the MACs are, e.g. ``Conv1`` of TensorFlow's fused ``Conv1 + bn_Conv1 +
           Conv1_relu`` op), that layer takes the op's whole share and the layers fused into
           it (a batch norm folded into the weights, a bias, an activation in the output
           stage) none: fused work shown as it ran. The default policy.
``bytes``  each source op in proportion to its output bytes (``source_ops().output_bytes``):
           for memory-bound ops.

When every source op of a target weighs 0 (a fused reshape + transpose under ``macs``), the
target splits equally. A source op with several original layers splits its share equally
between them (each layer member carries the factor ``lcm / n_layers``; see
:mod:`toolkit.trace.join.catalog`), but under ``macs`` as said above. Weights are scaled down
when a target's weights sum above :data:`~toolkit.trace.join.split.MAX_TOTAL_WEIGHT`
(ratios kept to 1 part in 2**31).
"""

from __future__ import annotations

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.trace.join.catalog import Catalog
from toolkit.trace.join.split import MAX_TOTAL_WEIGHT

__all__ = ["POLICIES", "member_weights"]

#: Policies for splitting an event over the source ops of its op.
POLICIES: tuple[str, ...] = ("equal", "macs", "bytes")


def member_weights(cat: Catalog, policy: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(weight per member, total weight per target)`` (``int64``) for ``policy``.

    Each member's weight is its source op's policy weight times the member's layer factor; a
    target whose source ops all weigh 0 uses weight 1 for each; a target's total stays in
    ``1 .. MAX_TOTAL_WEIGHT`` (0 for a target without members).
    """
    if policy not in POLICIES:
        raise ToolkitError(f"unknown policy {policy!r}", fix=f"use one of {POLICIES}")
    s = len(cat.source_id)
    per_source = {"equal": np.ones(s, dtype=np.int64), "macs": cat.source_macs,
                  "bytes": cat.source_bytes}[policy]
    sizes = cat.target_sizes()
    t = len(sizes)
    member_target = np.repeat(np.arange(t, dtype=np.int64), sizes)
    raw = per_source[cat.member_source].astype(np.int64)
    nonempty = sizes > 0
    starts = cat.target_ptr[:-1][nonempty]
    raw_total = np.zeros(t, dtype=np.int64)
    if len(raw):
        raw_total[nonempty] = np.add.reduceat(raw, starts)
    raw = np.where(raw_total[member_target] > 0, raw, 1)
    weight = raw * cat.member_factor
    if policy == "macs" and len(weight):
        # a source op with a main layer gives it all of its share (raw * lcm), the rest none
        source_has_main = np.zeros(s, dtype=bool)
        n_lay = np.diff(cat.source_layers_ptr)
        owner = np.repeat(np.arange(s), n_lay)
        source_has_main[owner[cat.source_main]] = True
        has = source_has_main[cat.member_source] & (raw_total[member_target] > 0)
        lcm = cat.member_factor * np.maximum(n_lay[cat.member_source], 1)
        weight = np.where(has, np.where(cat.member_main, raw * lcm, 0), weight)
    total = np.zeros(t, dtype=np.int64)
    if len(weight):
        total[nonempty] = np.add.reduceat(weight, starts)
    big = total > MAX_TOTAL_WEIGHT
    if big.any():
        rows = big[member_target]
        scale = MAX_TOTAL_WEIGHT / total[member_target[rows]].astype(np.float64)
        weight[rows] = np.floor(weight[rows] * scale).astype(np.int64)
        total = np.zeros(t, dtype=np.int64)
        total[nonempty] = np.add.reduceat(weight, starts)
    return weight, total
