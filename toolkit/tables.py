"""DataFrame views of a model: ops, tensors and (op, origin) pairs.

Empty results keep their columns and dtypes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from toolkit.ir import Model

__all__ = ["ops_table", "tensors_table", "origins_table", "exact_ints"]


def ops_table(model: Model, subgraph: int = 0) -> pd.DataFrame:
    """Return one row per op of a subgraph, in execution order.

    Columns: ``op_index`` (int64), ``op_type`` (str; the custom code for CUSTOM ops),
    ``name`` (str, first output tensor), ``inputs`` / ``outputs`` (list of tensor names, None
    for an absent optional input), ``activation`` (str, fused activation or ``NONE``),
    ``origins`` (tuple of int origin ids), ``origin_names`` (tuple of str), ``layers``
    (tuple of str: the original layers of its origins, ``model.origin(oid).layers``, e.g. the
    Keras layers of a converter op or the PyTorch module of an ONNX node), ``layer`` (str:
    the first of them, ``""`` when none).
    """
    g = model.subgraphs[subgraph]
    names = model.source_table
    from toolkit.schema import ACTIVATIONS

    def layers(op: object) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for o in sorted(op.origins):  # type: ignore[attr-defined]
            out.update(dict.fromkeys(model.origin(o).layers))
        return tuple(out)

    rows = [{
        "op_index": i,
        "op_type": op.kind,
        "name": op.name,
        "inputs": [None if t is None else t.name for t in op.inputs],
        "outputs": [t.name for t in op.outputs],
        "activation": ACTIVATIONS.get(op.activation, str(op.activation)),
        "origins": tuple(sorted(op.origins)),
        "origin_names": tuple(names.get(o, "") for o in sorted(op.origins)),
        "layers": (ls := layers(op)),
        "layer": ls[0] if ls else "",
    } for i, op in enumerate(g.ops)]
    df = pd.DataFrame(rows, columns=["op_index", "op_type", "name", "inputs", "outputs",
                                     "activation", "origins", "origin_names", "layers",
                                     "layer"])
    return df.astype({"op_index": np.int64})


def tensors_table(model: Model, subgraph: int = 0) -> pd.DataFrame:
    """Return one row per tensor of a subgraph.

    Columns: ``tensor_index`` (int64), ``name``, ``dtype`` (schema type name), ``shape``
    (tuple), ``shape_signature`` (tuple or None), ``kind`` (``input``, ``output``,
    ``constant``, ``variable`` or ``activation``), ``bytes`` (int64, size of the data; a
    column of exact Python ints when a size does not fit int64),
    ``producer`` (name of the producing op or None), ``consumers`` (int64, how many ops read
    it), ``quant_scale`` (tuple of float or None), ``quant_zero_point`` (tuple of int or
    None), ``quantized_dimension`` (int64).
    """
    g = model.subgraphs[subgraph]
    ins, outs = set(g.inputs), set(g.outputs)
    rows = []
    for i, t in enumerate(g.tensors):
        kind = ("input" if t in ins else "output" if t in outs else "variable" if t.is_variable
                else "constant" if t.data is not None else "activation")
        q = t.quant
        rows.append({
            "tensor_index": i, "name": t.name, "dtype": t.type_name, "shape": t.shape,
            "shape_signature": t.shape_signature, "kind": kind, "bytes": t.nbytes,
            "producer": t.producer.name if t.producer is not None else None,
            "consumers": len(t.consumers),
            "quant_scale": None if q is None else tuple(float(s) for s in q.scale),
            "quant_zero_point": None if q is None else tuple(int(z) for z in q.zero_point),
            "quantized_dimension": 0 if q is None else q.quantized_dimension,
        })
    cols = ["tensor_index", "name", "dtype", "shape", "shape_signature", "kind", "bytes",
            "producer", "consumers", "quant_scale", "quant_zero_point", "quantized_dimension"]
    return exact_ints(pd.DataFrame(rows, columns=cols),
                      ["tensor_index", "bytes", "consumers", "quantized_dimension"])


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def exact_ints(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Return ``frame`` with each of ``columns`` (Python or NumPy integers) as ``int64``
    when every value fits, else as ``object`` holding exact Python ints: a count or size
    past int64 (possible when the limits are raised) is kept exact, never wrapped around."""
    for column in columns:
        values = frame[column]
        if values.dtype == np.int64:
            continue
        wide = values.dtype == np.uint64 and len(values) and int(values.max()) > _INT64_MAX
        if wide or (values.dtype == object and any(
                isinstance(v, int) and not _INT64_MIN <= v <= _INT64_MAX
                for v in values.tolist())):
            frame[column] = pd.Series([int(v) for v in values.tolist()], index=frame.index,
                                      dtype=object)
        else:
            frame[column] = values.astype(np.int64)
    return frame


def origins_table(model: Model, subgraph: int = 0) -> pd.DataFrame:
    """Return one row per (op, origin) pair: ``op_index`` (int64), ``op_type``, ``name``,
    ``origin_id`` (int64), ``origin_name`` (str)."""
    g = model.subgraphs[subgraph]
    rows = [(i, op.kind, op.name, o, model.source_table.get(o, ""))
            for i, op in enumerate(g.ops) for o in sorted(op.origins)]
    df = pd.DataFrame(rows, columns=["op_index", "op_type", "name", "origin_id", "origin_name"])
    return df.astype({"op_index": np.int64, "origin_id": np.int64})
