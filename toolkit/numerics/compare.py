"""Compare two executions tensor by tensor and layer by layer: where did the accuracy go?

:func:`compare` takes two captures, or two models (anything :func:`tk.run` takes, an
``.onnx`` file too) run on the same inputs, matches their tensors through provenance
(:mod:`.match`) and returns a :class:`NumericsComparison`:

- :meth:`~NumericsComparison.by_layer`: one row per original layer of the reference, at its
  boundary tensor (the output of the layer's last op), with the *inherited* error (the
  candidate's full run) and the *isolated* error (the candidate's ops of that layer re-run on
  the reference's inputs, :mod:`.isolated`): columns :data:`LAYER_COLUMNS`, stable;
- :meth:`~NumericsComparison.by_tensor` (:data:`TENSOR_COLUMNS`), :meth:`~NumericsComparison.by_op`
  (:data:`OP_COLUMNS`), :meth:`~NumericsComparison.unmatched` (:data:`UNMATCHED_COLUMNS`);
- :meth:`~NumericsComparison.first_divergence`, :meth:`~NumericsComparison.worst`,
  :meth:`~NumericsComparison.summary`, :meth:`~NumericsComparison.plot`, ``_repr_html_``;
- exports: Model Explorer node data and a visq-compatible JSON (:mod:`.export`).

Same inputs: a float input given to a quantized model is quantized with that model's input
scale and zero point; an integer input given to a float model is dequantized with the other
model's input quantization. Metrics are in :mod:`.metrics` (NaN and Inf counted per row,
never averaged in).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.errors import NumericsError
from toolkit.ir import Tensor
from toolkit.numerics.capture import Capture, TensorRecord, capture, dequantize_array
from toolkit.numerics.isolated import layer_region, origin_keys_of, rerun_region
from toolkit.numerics.match import Matching, layer_boundaries, match_captures
from toolkit.numerics.metrics import METRIC_COLUMNS, metrics
from toolkit.numerics.store import DEFAULT_BUDGET_BYTES

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["compare", "NumericsComparison", "LAYER_COLUMNS", "TENSOR_COLUMNS", "OP_COLUMNS",
           "UNMATCHED_COLUMNS", "DEFAULT_DIVERGENCE_DB"]

LAYER_COLUMNS = [
    "layer", "position", "ref_tensor", "cand_tensor", "match", "shape", "ref_dtype",
    "cand_dtype", "sqnr_db", "mse", "cosine", "max_abs_error", "mpeir", "nonfinite_ref",
    "nonfinite_cand", "isolated_sqnr_db", "isolated_mse", "isolated_max_abs_error", "note"]
"""Columns of :meth:`NumericsComparison.by_layer`, in order (a stable list):

``layer`` (str, an original layer of the reference, read through ``model.origin(oid).layers``;
``"(no layer)"``, :data:`~toolkit.layer_names.NO_LAYER`, for the ops of no layer, at the last
of them),
``position`` (int, the rank of its boundary in the reference's execution order, from 0),
``ref_tensor`` / ``cand_tensor`` (str, the boundary tensor on each side; ``cand_tensor`` is
None when unmatched), ``match`` (str, the matching rule: ``"graph input"``,
``"tensor name"``, ``"origin"``, ``"layer boundary"``, or None), ``shape`` (tuple, the
reference's), ``ref_dtype`` / ``cand_dtype`` (str, raw dtypes: quantized tensors are compared
dequantized), ``sqnr_db`` (float, dB, +inf when equal), ``mse``, ``cosine``, ``max_abs_error``
(float, in the reference's real units), ``mpeir`` (float, ONE visq's peak error-to-interval
ratio), ``nonfinite_ref`` / ``nonfinite_cand`` (int, NaN or Inf elements on each side; the
metrics leave those elements out), ``isolated_sqnr_db``, ``isolated_mse``,
``isolated_max_abs_error`` (float, the same metrics for the candidate's ops of the layer
re-run on the reference's inputs; NaN when they could not be re-run), ``note`` (str, why a
value is missing, else ``""``)."""

TENSOR_COLUMNS = ["ref_tensor", "cand_tensor", "match", "ref_op", "cand_op", "layers", "shape",
                  "ref_dtype", "cand_dtype", *METRIC_COLUMNS]
"""Columns of :meth:`NumericsComparison.by_tensor` (one row per matched pair, reference
execution order): ``ref_op`` / ``cand_op`` the producing ops' kinds (None for graph inputs),
``layers`` the reference tensor's layers (tuple), the rest as in :data:`LAYER_COLUMNS`."""

OP_COLUMNS = ["cand_op", "op_kind", "origins", "layers", "ref_tensor", "cand_tensor", "match",
              *METRIC_COLUMNS]
"""Columns of :meth:`NumericsComparison.by_op` (one row per candidate op with a matched
output, the first such output; ``cand_op`` its name, ``origins`` its origin ids)."""

UNMATCHED_COLUMNS = ["side", "tensor", "op_kind", "reason"]
"""Columns of :meth:`NumericsComparison.unmatched`: ``side`` is ``"reference"`` or
``"candidate"``."""

DEFAULT_DIVERGENCE_DB = 30.0
"""SQNR below which :meth:`NumericsComparison.first_divergence` calls a layer divergent."""


class NumericsComparison:
    """Two captures compared through provenance (see the module docstring).

    Attributes:
        reference, candidate: the two :class:`~toolkit.numerics.capture.Capture`.
        matching: the :class:`~toolkit.numerics.match.Matching` of their tensors.
    """

    def __init__(self, reference: Capture, candidate: Capture, *, isolated: bool = True
                 ) -> None:
        self.reference = reference
        self.candidate = candidate
        self.isolated = isolated
        self.matching: Matching = match_captures(reference, candidate)
        if not any(m.rule != "graph input" for m in self.matching.matches):
            raise NumericsError(
                f"no tensor of {candidate.source} matches one of {reference.source} (by name, "
                "origin or layer)", where="tk.compare",
                fix="compare two conversions or compilations of the same model (their ops "
                    "must share tensor names, origin names or layer names)")
        self._metrics: dict[str, dict[str, float | int]] = {}
        self._layers: pd.DataFrame | None = None
        self._isolated: dict[tuple[Any, ...], tuple[dict[str, float | int] | None, str]] = {}

    # ------------------------------------------------------------------ helpers
    def _pair_metrics(self, ref_name: str) -> dict[str, float | int]:
        got = self._metrics.get(ref_name)
        if got is None:
            m = self.matching.by_ref[ref_name]
            got = self._metrics[ref_name] = metrics(self.reference.value(m.ref),
                                                    self.candidate.value(m.cand))
        return got

    def _ref_value_of(self, cand_name: str) -> np.ndarray | None:
        m = self.matching.by_cand.get(cand_name)
        return None if m is None else self.reference.value(m.ref)

    # ------------------------------------------------------------------ tables
    def by_tensor(self) -> pd.DataFrame:
        """One row per matched tensor pair, reference execution order: :data:`TENSOR_COLUMNS`."""
        import pandas as pd

        rows = []
        for m in self.matching.matches:
            r, c = self.reference.records[m.ref], self.candidate.records[m.cand]
            rows.append({"ref_tensor": m.ref, "cand_tensor": m.cand, "match": m.rule,
                         "ref_op": r.op_kind, "cand_op": c.op_kind, "layers": r.layers,
                         "shape": r.shape, "ref_dtype": r.dtype, "cand_dtype": c.dtype,
                         **self._pair_metrics(m.ref)})
        return _typed(pd.DataFrame(rows, columns=TENSOR_COLUMNS))

    def by_op(self) -> pd.DataFrame:
        """One row per candidate op with a matched output (its first), candidate execution
        order: :data:`OP_COLUMNS`."""
        import pandas as pd

        rows, seen = [], set()
        for c in self.candidate.records.values():
            m = self.matching.by_cand.get(c.name)
            if c.op is None or m is None or id(c.op) in seen:
                continue
            seen.add(id(c.op))
            rows.append({"cand_op": c.op.name, "op_kind": c.op_kind, "origins": c.origins,
                         "layers": c.layers, "ref_tensor": m.ref, "cand_tensor": m.cand,
                         "match": m.rule, **self._pair_metrics(m.ref)})
        return _typed(pd.DataFrame(rows, columns=OP_COLUMNS))

    def by_layer(self) -> pd.DataFrame:
        """One row per original layer of the reference, in the order of their boundary
        tensors: :data:`LAYER_COLUMNS` (documented there; a stable list)."""
        if self._layers is None:
            self._layers = self._by_layer()
        return self._layers.copy()

    def _by_layer(self) -> pd.DataFrame:
        import pandas as pd

        nan = math.nan
        rows = []
        for pos, (layer, r) in enumerate(layer_boundaries(self.reference).items()):
            m = self.matching.by_ref.get(r.name)
            row: dict[str, Any] = {"layer": layer, "position": pos, "ref_tensor": r.name,
                                   "cand_tensor": None, "match": None, "shape": r.shape,
                                   "ref_dtype": r.dtype, "cand_dtype": None, "note": ""}
            row.update(dict.fromkeys(METRIC_COLUMNS, nan))
            row.update(isolated_sqnr_db=nan, isolated_mse=nan, isolated_max_abs_error=nan)
            if m is None:
                row["note"] = self.matching.ref_unmatched.get(r.name, "no counterpart")
                rows.append(row)
                continue
            c = self.candidate.records[m.cand]
            row.update(cand_tensor=m.cand, match=m.rule, cand_dtype=c.dtype,
                       **self._pair_metrics(r.name))
            if self.isolated:
                ops = layer_region(self.candidate, layer if layer in c.layers else None, c,
                                   origin_keys_of(r))
                key = (c.name, *map(id, ops))
                hit = self._isolated.get(key)
                if hit is None:  # the layers of one op share its re-run
                    value, why = rerun_region(self.candidate, ops, c, self._ref_value_of)
                    hit = self._isolated[key] = (
                        None if value is None else metrics(self.reference.value(r.name), value),
                        why)
                iso, why = hit
                if iso is None:
                    row["note"] = f"isolated: {why}"
                else:
                    row.update(isolated_sqnr_db=iso["sqnr_db"], isolated_mse=iso["mse"],
                               isolated_max_abs_error=iso["max_abs_error"])
            rows.append(row)
        return _typed(pd.DataFrame(rows, columns=LAYER_COLUMNS))

    def unmatched(self) -> pd.DataFrame:
        """Every tensor left unmatched, with the reason: :data:`UNMATCHED_COLUMNS`."""
        import pandas as pd

        rows = []
        for side, cap, miss in (("reference", self.reference, self.matching.ref_unmatched),
                                ("candidate", self.candidate, self.matching.cand_unmatched)):
            for name, reason in miss.items():
                rec = cap.records.get(name)
                rows.append({"side": side, "tensor": name,
                             "op_kind": None if rec is None else rec.op_kind,
                             "reason": reason})
        return pd.DataFrame(rows, columns=UNMATCHED_COLUMNS)

    # ------------------------------------------------------------------ questions
    def first_divergence(self, sqnr_db: float = DEFAULT_DIVERGENCE_DB) -> pd.Series | None:
        """The first layer (reference order) whose SQNR is below ``sqnr_db`` or that has a
        NaN/Inf the other side lacks; None when every matched layer stays above."""
        df = self.by_layer()
        bad = (df["sqnr_db"] < sqnr_db) | (df["nonfinite_ref"] != df["nonfinite_cand"])
        hits = df[bad.fillna(False)]
        return None if hits.empty else hits.iloc[0]

    def worst(self, n: int = 5, by: str = "isolated_sqnr_db") -> pd.DataFrame:
        """The ``n`` layers with the lowest ``by`` (an SQNR column: lowest is worst) or the
        highest (an error column such as ``mse``, ``max_abs_error``, ``mpeir``); rows
        without a value last."""
        if by not in LAYER_COLUMNS[8:18]:
            raise NumericsError(f"cannot rank layers by {by!r}", where="worst",
                                fix=f"use one of {LAYER_COLUMNS[8:18]}")
        df = self.by_layer()
        ascending = by.endswith("sqnr_db") or by == "cosine"
        return df.sort_values(by, ascending=ascending, na_position="last",
                              kind="stable").head(int(n))

    def summary(self) -> dict[str, Any]:
        """Counts and headline numbers: ``reference``, ``candidate`` (sources and runtimes),
        ``tensors_matched``, ``ref_unmatched``, ``cand_unmatched``, ``layers``,
        ``layers_matched``, ``layers_matched_share`` (0..1), ``output_sqnr_db`` (per
        reference graph output), ``first_divergence`` (layer name at
        :data:`DEFAULT_DIVERGENCE_DB`, or None), ``worst_isolated`` (layer with the lowest
        isolated SQNR, or None), ``layers_with_nonfinite`` (layers with NaN/Inf on a side)."""
        df = self.by_layer()
        matched = int(df["cand_tensor"].notna().sum())
        first = self.first_divergence()
        iso = df.dropna(subset=["isolated_sqnr_db"])
        outs = {}
        for name in self.reference.outputs:
            if name in self.matching.by_ref:
                outs[name] = float(self._pair_metrics(name)["sqnr_db"])
        nonfinite = df[(df["nonfinite_ref"] > 0) | (df["nonfinite_cand"] > 0)]["layer"]
        return {
            "reference": f"{self.reference.source} ({self.reference.runtime})",
            "candidate": f"{self.candidate.source} ({self.candidate.runtime})",
            "tensors_matched": len(self.matching.matches),
            "ref_unmatched": len(self.matching.ref_unmatched),
            "cand_unmatched": len(self.matching.cand_unmatched),
            "layers": len(df), "layers_matched": matched,
            "layers_matched_share": matched / len(df) if len(df) else 0.0,
            "output_sqnr_db": outs,
            "first_divergence": None if first is None else str(first["layer"]),
            "worst_isolated": None if iso.empty else str(
                iso.sort_values("isolated_sqnr_db", kind="stable").iloc[0]["layer"]),
            "layers_with_nonfinite": [str(x) for x in nonfinite],
        }

    # ------------------------------------------------------------------ views
    def plot(self, ax: Any = None, *, cap_db: float = 120.0) -> Figure:
        """SQNR along the graph: the inherited (full run) and isolated SQNR of each layer in
        reference order; +inf (no error) is drawn at ``cap_db``. Returns the Figure."""
        import matplotlib.pyplot as plt

        df = self.by_layer()
        if ax is None:
            fig, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(df)), 3.5))
        else:
            fig = ax.figure
        x = df["position"].to_numpy()
        for col, label, style in (("sqnr_db", "inherited (full run)", "o-"),
                                  ("isolated_sqnr_db", "isolated (reference inputs)", "s--")):
            y = df[col].to_numpy(dtype=float)
            ax.plot(x, np.clip(y, -cap_db, cap_db), style, label=label, markersize=3)
        ax.set_xlabel("layer (reference order)")
        ax.set_ylabel("SQNR (dB)")
        ax.set_title(f"{self.candidate.source} vs {self.reference.source}")
        if len(df) <= 40:
            ax.set_xticks(x)
            ax.set_xticklabels([_short(s) for s in df["layer"]], rotation=75, fontsize=7)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig

    def _repr_html_(self) -> str:
        from toolkit.reprs import html_table, html_view

        s = self.summary()
        first = s["first_divergence"] or "none"
        head = (f"{s['candidate']} vs {s['reference']}: {s['tensors_matched']} tensors "
                f"matched, {s['layers_matched']} of {s['layers']} layers, first divergence "
                f"(< {DEFAULT_DIVERGENCE_DB:g} dB): {first}")
        cols = ["layer", "sqnr_db", "isolated_sqnr_db", "mse", "max_abs_error", "mpeir",
                "nonfinite_cand"]
        worst = self.worst(len(self.by_layer()), by="isolated_sqnr_db")[cols]
        return html_view("NumericsComparison", head, [
            ("layers, lowest isolated SQNR first", html_table(worst, None, 10)),
            ("unmatched tensors", html_table(self.unmatched(), None, 5)),
        ])

    def __repr__(self) -> str:
        s = self.summary()
        return (f"<NumericsComparison {s['candidate']} vs {s['reference']}: "
                f"{s['layers_matched']}/{s['layers']} layers matched, first divergence "
                f"{s['first_divergence']}>")

    # ------------------------------------------------------------------ exports
    def model_explorer_data(self, metric: str = "sqnr_db", *,
                            graph_id: str | None = None) -> dict[str, Any]:
        """Model Explorer node data of ``metric`` per reference op output (see
        :func:`toolkit.numerics.export.model_explorer_data`)."""
        from toolkit.numerics.export import model_explorer_data

        return model_explorer_data(self, metric, graph_id=graph_id)

    def to_model_explorer(self, path: str | os.PathLike[str], metric: str = "sqnr_db", *,
                          graph_id: str | None = None) -> os.PathLike[str]:
        """Write :meth:`model_explorer_data` as JSON (atomically); return the path."""
        from toolkit.numerics.export import write_json

        return write_json(path, self.model_explorer_data(metric, graph_id=graph_id))

    def to_visq(self, path: str | os.PathLike[str], metric: str = "MPEIR"
                ) -> os.PathLike[str]:
        """Write a visq-compatible JSON of ``metric`` (``"MPEIR"`` or ``"MSE"``) per reference
        tensor (see :func:`toolkit.numerics.export.visq_data`); return the path."""
        from toolkit.numerics.export import visq_data, write_json

        return write_json(path, visq_data(self, metric))


def _short(name: str, width: int = 28) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1):]


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    kinds = {"nonfinite_ref": "Int64", "nonfinite_cand": "Int64", "position": "int64"}
    kinds.update(dict.fromkeys(("sqnr_db", "mse", "cosine", "max_abs_error", "mpeir",
                                "isolated_sqnr_db", "isolated_mse",
                                "isolated_max_abs_error"), "float64"))
    return df.astype({k: v for k, v in kinds.items() if k in df.columns})


# ---------------------------------------------------------------------------- sides
def _graph_inputs(obj: Any) -> tuple[Any, list[Tensor]]:
    """What to capture for ``obj`` and its graph inputs (in order)."""
    if isinstance(obj, (str, os.PathLike)) and str(obj).lower().endswith(".onnx"):
        from toolkit.importers.onnx import load_onnx

        return obj, list(load_onnx(obj).graph.inputs)
    from toolkit.model_arg import resolve_model

    arg = resolve_model(obj, purpose="tk.compare")
    value = arg.value
    if arg.kind == "model":
        if isinstance(obj, (str, os.PathLike)) and value.path is None:
            value.path = str(obj)
        return value, list(value.graph.inputs)
    if arg.kind == "compiled":
        return value, list(value.model.graph.inputs)
    from toolkit.runtime.chain import _stages

    _st, c, source = _stages(value)
    model = source if source is not None else _st[0].model
    return value, [model.graph.tensor(n) for n in c.source.inputs]


def _static_keys(value: Any) -> set[str] | None:
    """Tensor names, origin names and layers of a model, a compiled model's or a
    partition's source (None for what is only known once run: an .onnx path, a capture,
    a connection file)."""
    from toolkit.ir import Model

    model = getattr(value, "source", None) if hasattr(value, "parts") else \
        getattr(value, "model", value)
    if not isinstance(model, Model):
        return None
    out: set[str] = set()
    for op in model.graph.ops:
        out.update(t.name for t in op.outputs)
        for o in op.origins:
            rec = model.origin(o)
            out.add(rec.name)
            out.update(rec.layers)
    out.discard("")
    return out


def _quant(t: Tensor) -> tuple[np.ndarray, np.ndarray, int] | None:
    q = t.quant
    if q is None or q.scale is None or q.scale.size == 0 or t.dtype is None \
            or not np.issubdtype(t.dtype, np.integer):
        return None
    return (np.asarray(q.scale, np.float64), np.asarray(q.zero_point, np.int64),
            int(q.quantized_dimension))


def _as_list(inputs: Any, names: list[list[str]]) -> list[np.ndarray]:
    if isinstance(inputs, np.ndarray):
        return [inputs]
    if isinstance(inputs, Mapping):
        for side in names:
            if set(inputs) == set(side):
                return [np.asarray(inputs[n]) for n in side]
        if len(inputs) == 1 and all(len(side) == 1 for side in names):
            return [np.asarray(v) for v in inputs.values()]  # one input: its name is moot
        raise NumericsError(f"the inputs are named {sorted(inputs)}; the models take "
                            f"{names[0]} and {names[1]}", where="tk.compare",
                            fix="name the inputs as either model does, or pass a list in "
                                "input order")
    if isinstance(inputs, (list, tuple)):
        return [np.asarray(a) for a in inputs]
    raise NumericsError(f"inputs must be a dict, a list or an array, not "
                        f"{type(inputs).__name__}", where="tk.compare",
                        fix="pass a dict {input name: array} or a list in input order")


def _canonical(arrays: list[np.ndarray], sides: list[list[Tensor]]) -> list[np.ndarray]:
    """Each input as float64 when an integer array is a quantized input of either side
    (dequantized with that input's quantization), else as given."""
    out = []
    for i, a in enumerate(arrays):
        value = a
        if np.issubdtype(a.dtype, np.integer):
            for ins in sides:
                if i < len(ins) and ins[i].dtype == a.dtype and _quant(ins[i]) is not None:
                    s, z, ax = _quant(ins[i])  # type: ignore[misc]
                    value = dequantize_array(a, s, z, ax)
                    break
        out.append(value)
    return out


def _for_side(canon: list[np.ndarray], ins: list[Tensor]) -> list[np.ndarray]:
    from toolkit.numerics.isolated import to_candidate_dtype

    out = []
    for t, a in zip(ins, canon):
        q = _quant(t)
        if q is not None and np.issubdtype(a.dtype, np.floating):
            rec = TensorRecord(t.name, 0, None, (), (), (), (), None, tuple(a.shape),
                               str(t.dtype), q[0], q[1], q[2])
            out.append(to_candidate_dtype(a, rec))
        elif t.dtype is not None and np.issubdtype(a.dtype, np.floating) \
                and np.issubdtype(t.dtype, np.floating) and a.dtype != t.dtype:
            out.append(a.astype(t.dtype))
        else:
            out.append(a)
    return out


def _capture_inputs(cap: Capture) -> tuple[list[np.ndarray], list[TensorRecord]]:
    recs = [r for r in cap.records.values() if r.is_input]
    return [cap.value(r.name) for r in recs], recs


def _same_inputs(a: Capture, b: Capture) -> None:
    va, ra = _capture_inputs(a)
    vb, rb = _capture_inputs(b)
    if len(va) != len(vb):
        raise NumericsError(f"{a.source} has {len(va)} input(s), {b.source} {len(vb)}",
                            where="tk.compare", fix="compare captures of the same model "
                                                    "(or conversions of it)")
    for x, y, rx, ry in zip(va, vb, ra, rb):
        step = max([float(np.max(r.scale)) for r in (rx, ry) if r.scale is not None] or [0.0])
        if x.size != y.size or not np.allclose(x.reshape(-1), y.reshape(-1),
                                               atol=step / 2 + 1e-6, rtol=1e-6):
            raise NumericsError(
                f"the captures ran on different inputs ({rx.name!r} and {ry.name!r} differ)",
                where="tk.compare", fix="capture both on the same inputs, or pass the models "
                                        "and inputs= to tk.compare")


def compare(reference: Any, candidate: Any, inputs: Any = None, *,
            reference_runtime: str | None = None, candidate_runtime: str | None = None,
            isolated: bool = True, budget_bytes: int | None = DEFAULT_BUDGET_BYTES
            ) -> NumericsComparison:
    """Compare ``candidate`` against ``reference``; see :func:`toolkit.compare`."""
    sides: list[Any] = []
    ins: list[list[Tensor] | None] = []
    for obj, rt, which in ((reference, reference_runtime, "reference"),
                           (candidate, candidate_runtime, "candidate")):
        if isinstance(obj, Capture) and rt is not None and rt != obj.runtime:
            raise NumericsError(f"the {which} is a capture already run in {obj.runtime}, not "
                                f"{rt}", where="tk.compare",
                                fix=f"leave {which}_runtime out, or pass the model instead")
        if isinstance(obj, Capture):
            sides.append(obj)
            ins.append(None)
        else:
            value, graph_inputs = _graph_inputs(obj)
            sides.append(value)
            ins.append(graph_inputs)
    keys = [_static_keys(s) for s in sides]
    if keys[0] is not None and keys[1] is not None and not keys[0] & keys[1]:
        raise NumericsError(
            "the two models share no tensor name, origin name or layer name: nothing can be "
            "matched", where="tk.compare",
            fix="compare two conversions or compilations of the same model")
    caps = [s for s in sides if isinstance(s, Capture)]
    if inputs is None and caps:
        canon = _capture_inputs(caps[0])[0]
    else:
        known = [i for i in ins if i is not None] or [
            [_input_tensor(r) for r in _capture_inputs(c)[1]] for c in caps]
        if inputs is None:
            from toolkit.numerics.capture import random_inputs

            rand = random_inputs(known[0])
            inputs = [rand[t.name] for t in known[0]]
        names = [[t.name for t in k] for k in known] + [[t.name for t in known[0]]]
        arrays = _as_list(inputs, names[:2])
        for k in known:
            if len(arrays) != len(k):
                raise NumericsError(f"{len(arrays)} input(s) given, a model takes {len(k)}",
                                    where="tk.compare", fix=f"pass {[t.name for t in k]}")
        canon = _canonical(arrays, known)
    if inputs is not None:
        for c in caps:
            vals = _capture_inputs(c)[0]
            if len(vals) != len(canon) or not all(
                    v.size == np.asarray(x).size
                    and np.allclose(v.reshape(-1), np.asarray(x, np.float64).reshape(-1),
                                    atol=_half_step(c), rtol=1e-6)
                    for v, x in zip(vals, canon)):
                raise NumericsError(f"the capture of {c.source} ran on other inputs than "
                                    "inputs=", where="tk.compare",
                                    fix="leave inputs out (the capture's are used), or "
                                        "capture again on these inputs")
    out: list[Capture] = []
    for side, side_inputs, rt in zip(sides, ins, (reference_runtime, candidate_runtime)):
        if isinstance(side, Capture) or side_inputs is None:
            out.append(side)
            continue
        graph_inputs = side_inputs
        if len(canon) != len(graph_inputs):
            raise NumericsError(f"{len(canon)} input(s) given, a model takes "
                                f"{len(graph_inputs)}", where="tk.compare",
                                fix=f"pass {[t.name for t in graph_inputs]}")
        feed = {t.name: a for t, a in zip(graph_inputs, _for_side(canon, graph_inputs))}
        out.append(capture(side, feed, runtime=rt, budget_bytes=budget_bytes))
    if caps:
        _same_inputs(out[0], out[1])
    return NumericsComparison(out[0], out[1], isolated=isolated)


def _half_step(cap: Capture) -> float:
    steps = [float(np.max(r.scale)) for r in cap.records.values()
             if r.is_input and r.scale is not None]
    return max(steps or [0.0]) / 2 + 1e-6


def _input_tensor(rec: TensorRecord) -> Tensor:
    from toolkit.ir import Quantization
    from toolkit.schema import tensor_type_of

    t = Tensor(rec.name, rec.shape, tensor_type_of(np.dtype(rec.dtype)))
    if rec.scale is not None and rec.zero_point is not None:
        t.quant = Quantization(rec.scale, rec.zero_point, rec.axis)
    return t
