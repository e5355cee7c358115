"""Map XNNPACK per-op profiling events to XNNPACK nodes, and nodes to edge-graph handles.

XNNPACK creates its operators in node order and its profiler names them ``"<type> #k"``.
:func:`align` walks a delegate call's events and the delegate's node list together: each
node kind allows a set of operator families (``XNNConv2d`` -> ``Convolution``, or ``Fully
Connected`` for a 1x1 convolution, which XNNPACK runs as a GEMM over the pixels); a node that
made no operator is skipped (with a reason), a binary node with a fused min/max may be followed
by a ``Clamp`` operator. Nothing is guessed: an event no remaining node can explain is
unmatched, with the reason.

:func:`fused_handles` recovers the handles of edge nodes that have no XNNPACK node (batch norm
folded into a convolution, an activation fused as an output min/max) through their producers
in the delegated graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.formats.etrecord import EdgeNode
from toolkit.formats.executorch_program import XnnNode

__all__ = ["align", "Alignment", "family", "FAMILIES", "fused_handles", "INSERTED_HANDLE"]

#: The debug handle of nodes the delegate inserted (layout transposes).
INSERTED_HANDLE = 65535
_BINARY = {"XNNAdd", "XNNSubtract", "XNNMultiply", "XNNDiv", "XNNMinimum", "XNNMaximum"}
_CONCAT = {"XNNConcatenate2", "XNNConcatenate3", "XNNConcatenate4", "XNNConcatenate5"}
#: Operator families (the profiler name before `` (`` / `` #``) each node kind may create.
FAMILIES: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    # a 1x1 convolution with stride 1 and no padding runs as a GEMM over the pixels
    "XNNConv2d": {"Convolution", "Fully Connected"}, "XNNDepthwiseConv2d": {"Convolution"},
    "XNNConvTranspose2d": {"Deconvolution"}, "XNNFullyConnected": {"Fully Connected"},
    "XNNAdd": {"Add"}, "XNNSubtract": {"Subtract"}, "XNNMultiply": {"Multiply"},
    "XNNDiv": {"Divide"}, "XNNMinimum": {"Minimum"}, "XNNMaximum": {"Maximum"},
    "XNNStaticTranspose": {"Transpose"}, "XNNClamp": {"Clamp"},
    "XNNGlobalAvgPooling2d": {"Mean", "Global Average Pooling"},
    "XNNAvgPooling2d": {"Average Pooling"}, "XNNMaxPooling2d": {"Max Pooling"},
    "XNNArgMaxPooling2d": {"ArgMax Pooling"}, "XNNStaticReshape": {"Static Reshape", "Copy"},
    "XNNTanh": {"TanH"}, "XNNSigmoid": {"Sigmoid"}, "XNNSoftmax": {"SoftMax"},
    "XNNHardswish": {"HardSwish"}, "XNNLeakyReLU": {"Leaky ReLU"}, "XNNELU": {"ELU"},
    "XNNGelu": {"GELU"}, "XNNNegate": {"Negate"}, "XNNSquare": {"Square"},
    "XNNSquareRoot": {"Square Root"}, "XNNReciprocalSquareRoot": {"Reciprocal Square Root"},
    "XNNAbs": {"Abs"}, "XNNFloor": {"Floor"}, "XNNCeiling": {"Ceiling"}, "XNNExp": {"Exp"},
    "XNNLog": {"Log"}, "XNNSin": {"Sine"}, "XNNCos": {"Cosine"}, "XNNConvert": {"Convert"},
    "XNNCopy": {"Copy"}, "XNNStaticSlice": {"Slice"}, "XNNStaticConstantPad": {"Constant Pad"},
    "XNNStaticResizeBilinear2D": {"Resize Bilinear"}, "XNNPReLU": {"PReLU"},
    "XNNBatchMatrixMultiply": {"Batch Matrix Multiply"},
    "XNNScaledDotProductAttention": {"Scaled Dot Product Attention"},
    **{k: {"Copy", "Concatenate"} for k in _CONCAT},
}.items()}
_SUFFIX = re.compile(r"\s*#\d+$")


def family(name: str) -> str:
    """The operator family of a profiler name: ``"Convolution (NHWC, F32) IGEMM #1"`` ->
    ``"Convolution"``."""
    base = _SUFFIX.sub("", name)
    return base.split(" (", 1)[0].strip()


@dataclass
class Alignment:
    """Events of one delegate call matched to nodes: ``node_of[i]`` (index into the node list
    or -1), ``reason_of[i]`` (``""`` when matched), ``skipped`` ((node index, reason) pairs)."""

    node_of: list[int]
    reason_of: list[str]
    skipped: list[tuple[int, str]]


def align(names: list[str], nodes: list[XnnNode]) -> Alignment:
    """Match profiler event names (in order) to XNNPACK nodes (in order).

    Returns:
        An :class:`Alignment`.
    """
    node_of: list[int] = []
    reason_of: list[str] = []
    skipped: list[tuple[int, str]] = []
    j = 0
    last = -1
    clamp_used: set[int] = set()
    for name in names:
        fam = family(name)
        if last >= 0:
            prev = nodes[last]
            if (fam == "Clamp" and prev.kind in _BINARY and prev.min_max
                    and last not in clamp_used):
                clamp_used.add(last)
                node_of.append(last)
                reason_of.append("")
                continue
            if prev.kind in _CONCAT and fam in FAMILIES[prev.kind] and (
                    j >= len(nodes) or fam not in FAMILIES.get(nodes[j].kind, frozenset())):
                node_of.append(last)
                reason_of.append("")
                continue
        k = j
        while k < len(nodes) and fam not in FAMILIES.get(nodes[k].kind, frozenset()):
            k += 1
        if k == len(nodes):
            node_of.append(-1)
            reason_of.append(f"no remaining XNNPACK node makes a {fam!r} operator "
                             f"(event {name!r})")
            continue
        for s in range(j, k):
            skipped.append((s, f"{nodes[s].kind} made no operator event before {name!r}"))
        node_of.append(k)
        reason_of.append("")
        last = k
        j = k + 1
    for s in range(j, len(nodes)):
        skipped.append((s, f"{nodes[s].kind} made no operator event (after the last event)"))
    return Alignment(node_of, reason_of, skipped)


def fused_handles(handles: set[int], with_xnode: set[int], graph: list[EdgeNode]
                  ) -> tuple[dict[int, int], dict[int, str]]:
    """Assign each handle without an XNNPACK node to the handle that absorbed it.

    Args:
        handles: the delegate's handles (from the debug-handle map).
        with_xnode: handles that have an XNNPACK node.
        graph: the delegated graph's nodes (from the ETRecord).

    Returns:
        ``(owner, reason)``: ``owner[h]`` is the handle with an XNNPACK node that produces
        ``h``'s input (through other fused nodes), else the nearest consumer with one;
        ``reason[h]`` says why a handle got no owner.
    """
    producer: dict[str, EdgeNode] = {}
    consumers: dict[str, list[EdgeNode]] = {}
    by_handle: dict[int, list[EdgeNode]] = {}
    for node in graph:
        if node.target == "_operator.getitem":
            continue
        for out in node.outputs:
            producer[out] = node
        for inp in node.inputs:
            consumers.setdefault(inp, []).append(node)
        if node.handle is not None:
            by_handle.setdefault(node.handle, []).append(node)
    owner: dict[int, int] = {}
    reason: dict[int, str] = {}
    for h in sorted(handles - with_xnode):
        if h not in by_handle:
            reason[h] = "no node of the delegated graph has this handle"
            continue
        found = _walk(by_handle[h], with_xnode, lambda n: [producer[i] for i in n.inputs
                                                           if i in producer])
        if found is None:
            found = _walk(by_handle[h], with_xnode,
                          lambda n: [c for o in n.outputs for c in consumers.get(o, [])])
        if found is None:
            reason[h] = "fused away, and no producer or consumer has an XNNPACK node"
        else:
            owner[h] = found
    return owner, reason


def _walk(start: list[EdgeNode], targets: set[int], step: object) -> int | None:
    seen: set[str] = set()
    frontier = list(start)
    while frontier:
        nxt: list[EdgeNode] = []
        for node in frontier:
            for other in step(node):  # type: ignore[operator]
                if other.name in seen:
                    continue
                seen.add(other.name)
                if other.handle is not None and other.handle in targets:
                    return other.handle
                nxt.append(other)
        frontier = nxt
    return None
