"""The CUSTOM op ``ONNX_REFERENCE``: one ONNX node the lowering of
:mod:`toolkit.importers.onnx_lower` could not express in the IR's op set, run with ONNX's own
reference evaluator (``onnx.reference``). The op keeps the serialised node in
``op.extra["onnx_node"]`` and the model's opsets in ``op.extra["onnx_opsets"]``; the evaluator
is built once per op and kept in the op's ``extra``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolkit.errors import UnsupportedOpError
from toolkit.importers.onnx_lower import REFERENCE_OP
from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register


def _evaluator(op: Op) -> tuple[Any, list[str]]:
    cached: tuple[Any, list[str]] | None = op.extra.get("_onnx_evaluator")
    if cached is not None:
        return cached
    raw = op.extra.get("onnx_node")
    if raw is None:
        raise UnsupportedOpError(f"custom op {REFERENCE_OP} {op.name!r} holds no ONNX node",
                                 where=f"{REFERENCE_OP} op {op.name!r}",
                                 fix="lower the ONNX model again with tk.load('m.onnx')")
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    node = onnx.NodeProto()
    node.ParseFromString(bytes(raw))
    names = [*node.input, *(op.extra.get("onnx_outer_inputs") or [])]
    inputs = [helper.make_value_info(n, onnx.TypeProto()) for n in dict.fromkeys(names) if n]
    outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in node.output if n]
    graph = helper.make_graph([node], "node", inputs, outputs)
    opsets = op.extra.get("onnx_opsets") or {"": 17}
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(k, int(v))
                                                for k, v in opsets.items()])
    m.ir_version = max(m.ir_version, 8)
    ev = ReferenceEvaluator(m)
    op.extra["_onnx_evaluator"] = (ev, names)
    return ev, names


@register(REFERENCE_OP)
def onnx_reference(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """Run the op's ONNX node with ``onnx.reference``; return its outputs (reference-only)."""
    ev, names = _evaluator(op)
    feeds = {n: a for n, a in zip(names, args, strict=False) if n and a is not None}
    outs = ev.run(None, feeds)
    return [np.asarray(o).astype(t.dtype, copy=False) if t.dtype is not None else np.asarray(o)
            for o, t in zip(outs, op.outputs, strict=False)]
