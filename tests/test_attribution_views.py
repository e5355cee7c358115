"""Every attribution (the toolkit's own join, ExecuTorch, ONNX Runtime, a fleet) is a
LayerAttribution: the same views, the same core columns, the same totals."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pytest

import toolkit as tk
from toolkit.trace.join.layer_views import LAYER_COLUMNS, SUMMARY_KEYS, UNATTRIBUTED_COLUMNS

S = Path(__file__).resolve().parent.parent / "sample_models"


def _own() -> tk.LayerAttribution:
    compiled = tk.compile(tk.load(S / "cnn.tflite"))
    return tk.trace_join(tk.run(compiled, trace=True, repeat=3).trace, compiled)


def _executorch() -> tk.LayerAttribution:
    ex = S / "executorch"
    return tk.read_executorch(ex / "cnn_xnnpack.etdp", ex / "cnn_xnnpack.etrecord.bin",
                              ex / "cnn_xnnpack.pte").attribution()


def _ort() -> tk.LayerAttribution:
    d = S / "onnx"
    return tk.trace_join(d / "cnn.ts.all.opt.prof.json.gz", d / "cnn.ts.onnx",
                         optimized=d / "cnn.ts.all.opt.onnx")


def _fleet() -> tk.LayerAttribution:
    compiled = tk.compile(tk.load(S / "cnn.tflite"))
    traces = [tk.read_trace(tk.run(compiled, trace=True, repeat=2).trace) for _ in range(2)]
    return tk.trace_join_many(traces, compiled, workers=0, runs="per-partition")


@pytest.mark.parametrize("make", [_own, _executorch, _ort, _fleet],
                         ids=["toolkit", "executorch", "onnxruntime", "fleet"])
def test_every_attribution_has_the_same_views(make) -> None:
    att = make()
    assert isinstance(att, tk.LayerAttribution)
    att.check()
    layers = att.by_layer()
    assert set(LAYER_COLUMNS) <= set(layers.columns)
    assert layers["total_ns"].dtype == np.int64 and layers["layer"].map(type).eq(str).all()
    assert "total_ns" in att.by_op().columns
    assert set(UNATTRIBUTED_COLUMNS) <= set(att.unattributed().columns)
    summary = att.summary()
    assert set(SUMMARY_KEYS) <= set(summary)
    assert summary["total_ns"] == (summary["attributed_ns"] + summary["overhead_ns"]
                                   + summary["unattributed_ns"]) > 0
    # layers hold the attributed time (ExecuTorch also lists its runtime buckets as rows)
    layer_ns = int(layers.loc[layers.get("kind", "layer") == "layer", "total_ns"].sum()) \
        if "kind" in layers.columns else int(layers["total_ns"].sum())
    assert layer_ns == summary["attributed_ns"]
    top = att.top_layers(3)
    assert list(top.columns) == ["layer", "total_ns", "share", "events"]
    assert top["total_ns"].is_monotonic_decreasing and len(top) == min(3, len(layers))
    assert top["total_ns"].iloc[0] == layers["total_ns"].max()
    view = att._repr_html_()
    assert type(att).__name__ in view and html.escape(top["layer"].iloc[0]) in view
