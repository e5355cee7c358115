"""Write a numerics comparison for viewers: Model Explorer node data, visq JSON.

**Model Explorer node data** (:func:`model_explorer_data`): the same JSON as the time overlay
(:mod:`toolkit.trace.views.export`), keyed by the output tensor name of each reference op (Model
Explorer attaches a key to the node whose output has that ``tensor_name``), graph id the
reference subgraph's name (``"main"`` when it has none)::

    {"<graph id>": {"results": {"<tensor>": {"value": 12.5}, ...}, "gradient": [...]}}

SQNR is drawn from red (low) to white (high); error metrics from white (0) to red. A value
that is not finite (``sqnr_db`` of two equal tensors is +inf) is written as ``cap`` (and its
sign), so that the viewer still paints the node.

**visq JSON** (:func:`visq_data`): what ONE's ``visq`` writes with ``--mpeir_output`` /
``--mse_output``: ``{"meta": {"model", "metric", "colorscheme": [{"b", "e", "c"}]},
"error": [{tensor name: value}]}`` over the reference's op outputs; a tensor whose value is
not finite (NaN/Inf somewhere) is left out of ``error`` and listed in ``meta["nonfinite"]``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.errors import NumericsError

if TYPE_CHECKING:
    from toolkit.numerics.compare import NumericsComparison

__all__ = ["model_explorer_data", "visq_data", "write_json", "EXPORT_METRICS"]

EXPORT_METRICS = ("sqnr_db", "mse", "cosine", "max_abs_error", "mpeir")
_HIGH_GOOD = [{"stop": 0, "bgColor": "#d32f2f"}, {"stop": 1, "bgColor": "#ffffff"}]
_LOW_GOOD = [{"stop": 0, "bgColor": "#ffffff"}, {"stop": 1, "bgColor": "#d32f2f"}]
# ColorBrewer YlOrRd, 9 classes (as visq's palette)
_YLORRD9 = ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c",
            "#bd0026", "#800026"]


def _op_outputs(comp: NumericsComparison, metric: str) -> dict[str, float]:
    if metric not in EXPORT_METRICS:
        raise NumericsError(f"unknown metric {metric!r}", where="export",
                            fix=f"use one of {EXPORT_METRICS}")
    df = comp.by_tensor()
    df = df[df["ref_op"].notna()]
    return {str(k): float(v) for k, v in zip(df["ref_tensor"], df[metric])}


def model_explorer_data(comp: NumericsComparison, metric: str = "sqnr_db", *,
                        graph_id: str | None = None, cap: float = 200.0) -> dict[str, Any]:
    """``{graph_id: {"results": {tensor: {"value": v}}, "gradient": [...]}}`` of ``metric``
    per matched reference op output; +-inf written as +-``cap``, NaN left out."""
    values = _op_outputs(comp, metric)
    results = {k: {"value": (max(-cap, min(cap, v)))} for k, v in values.items()
               if not math.isnan(v)}
    if graph_id is None:
        graph_id = comp.reference.model.graph.name or "main"
    gradient = _HIGH_GOOD if metric in ("sqnr_db", "cosine") else _LOW_GOOD
    return {graph_id: {"results": results, "gradient": gradient}}


def visq_data(comp: NumericsComparison, metric: str = "MPEIR") -> dict[str, Any]:
    """The visq JSON of ``metric`` (``"MPEIR"`` or ``"MSE"``): see the module docstring."""
    key = {"MPEIR": "mpeir", "MSE": "mse"}.get(metric)
    if key is None:
        raise NumericsError(f"visq writes MPEIR or MSE, not {metric!r}", where="to_visq",
                            fix="pass metric='MPEIR' or 'MSE'")
    values = _op_outputs(comp, key)
    finite = {k: v for k, v in values.items() if math.isfinite(v)}
    lo, hi = (0.0, 1.0) if key == "mpeir" else (min(finite.values(), default=0.0),
                                                  max(finite.values(), default=1.0))
    step = (hi - lo) / len(_YLORRD9)
    colors = [{"b": lo + i * step, "e": lo + (i + 1) * step, "c": c}
              for i, c in enumerate(_YLORRD9)]
    return {"meta": {"model": comp.reference.source, "metric": metric, "colorscheme": colors,
                     "nonfinite": sorted(set(values) - set(finite))},
            "error": [finite]}


def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path`` atomically; return the path."""
    from toolkit.util.atomic import atomic_write

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, (json.dumps(data, indent=1, allow_nan=False) + "\n").encode("utf-8"))
    return out
