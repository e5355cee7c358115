"""Remove quantization round trips that are exact no-ops.

* ``DEQUANTIZE(q) -> QUANTIZE`` back to the same type, scale and zero point: the QUANTIZE's
  readers read ``q``; both ops are removed (the DEQUANTIZE once nothing else reads it).
* ``QUANTIZE`` from a quantized tensor to the same type, scale and zero point (an identity
  requantization): bypassed and removed.

Origins: **remove** (reason ``"quantize pair cancels"`` / ``"identity requantize"``).

Left alone: ``QUANTIZE -> DEQUANTIZE`` (float → int → float rounds, so it is not a no-op),
different quantization parameters, dynamic shapes, a pair from a graph input straight to a graph
output.
"""

from __future__ import annotations

from toolkit.compiler.passes._match import is_graph_output, op_is_static, same_type
from toolkit.compiler.passes.base import GraphPass
from toolkit.compiler.passes.remove_noop_reshape import can_bypass
from toolkit.ir import Graph, Op

__all__ = ["CancelQuantizePairs"]


def _quantized(t: object) -> bool:
    q = getattr(t, "quant", None)
    return q is not None and q.scale.size > 0


class CancelQuantizePairs(GraphPass):
    """Bypass and remove DEQUANTIZE→QUANTIZE pairs and identity QUANTIZEs."""

    name = "cancel_quantize_pairs"
    relation = "remove"

    def run(self, graph: Graph) -> bool:
        """Remove no-op quantize round trips; return True when any was removed."""
        changed = False
        for op in list(graph.ops):
            if op.graph is graph and op.type == "QUANTIZE" and self._cancel(graph, op):
                changed = True
        return changed

    @staticmethod
    def _cancel(graph: Graph, quant: Op) -> bool:
        if len(quant.inputs) != 1 or len(quant.outputs) != 1 or not op_is_static(quant):
            return False
        x, out = quant.inputs[0], quant.outputs[0]
        if x is None or not _quantized(out) or x.shape != out.shape:
            return False
        if _quantized(x):
            if same_type(x, out) and can_bypass(graph, quant, x):
                graph.bypass(quant, x, "identity requantize")
                return True
            return False
        deq = x.producer
        if deq is None or deq.type != "DEQUANTIZE" or len(deq.inputs) != 1:
            return False
        src = deq.inputs[0]
        if src is None or not _quantized(src) or src.shape != out.shape \
                or not same_type(src, out) or not can_bypass(graph, quant, src):
            return False
        graph.bypass(quant, src, "quantize pair cancels")
        if not x.consumers and not is_graph_output(graph, x):
            graph.remove(deq, "quantize pair cancels")
        return True
