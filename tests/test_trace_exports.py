"""Exports people open: Perfetto slices named by layer, Model Explorer node data that attaches.

The Model Explorer checks convert each sample with Model Explorer's own TFLite adapter
(``model_explorer.builtin_tflite_flatbuffer_adapter``, offline) and load the node data through
its ``node_data_builder`` classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import ALL_TFLITE, SAMPLES

import toolkit as tk
from toolkit import run
from toolkit.compiler import compile_model
from toolkit.compiler.lite_safe import unfuse_ignored_activations
from toolkit.formats.flatbuffer_write import BUILTIN_CODES, write_model
from toolkit.trace import model_explorer_data, to_chrome_trace, trace_join

node_data_builder = pytest.importorskip("model_explorer.node_data_builder")
adapter = pytest.importorskip("model_explorer.builtin_tflite_flatbuffer_adapter")


def explorer_graphs(path: Path) -> dict[str, set[str]]:
    """``{graph id: node ids and output tensor names}`` as Model Explorer's adapter sees them."""
    graphs = adapter.BuiltinTfliteFlatbufferAdapter().convert(str(path), {})
    out: dict[str, set[str]] = {}
    for collection in graphs["graphCollections"]:
        for graph in collection.graphs:
            keys = out.setdefault(graph["id"], set())
            for node in graph["nodes"]:
                keys.add(str(node["id"]))
                for meta in node.get("outputsMetadata", []):
                    keys.update(a["value"] for a in meta["attrs"] if a["key"] == "tensor_name")
    return out


def loads_through_node_data_builder(data: dict[str, Any]) -> None:
    """Build Model Explorer's own node-data objects from the JSON and compare the round trip."""
    model = node_data_builder.ModelNodeData(graphsData={
        gid: node_data_builder.GraphNodeData(
            results={k: node_data_builder.NodeDataResult(**v)
                     for k, v in g["results"].items()},
            gradient=[node_data_builder.GradientItem(**x) for x in g["gradient"]])
        for gid, g in data.items()})
    again = json.loads(model.to_json_string())
    assert set(again) == set(data)
    for gid, g in data.items():
        assert again[gid]["results"] == g["results"]
        assert again[gid]["gradient"] == g["gradient"]


@pytest.mark.parametrize("path", ALL_TFLITE, ids=lambda p: p.name)
def test_model_explorer_node_data_attaches_to_every_sample(path: Path, tmp_path: Path) -> None:
    model = tk.load(path)
    compiled = compile_model(model)
    att = trace_join(run(compiled, None, trace=True).trace, compiled)
    # the model as given: keys are source op names
    graphs = explorer_graphs(path)
    data = model_explorer_data(att, level="source_op")
    (gid, node_data), = data.items()
    assert gid in graphs, (gid, list(graphs))
    assert node_data["results"] and set(node_data["results"]) <= graphs[gid]
    loads_through_node_data_builder(data)
    # the compiled model: keys are compiled op names, graph id of the compiled subgraph
    # Model Explorer's TFLite adapter reads no circle-only op, and crashes on the custom
    # layer-norm op of the fused transformers: those compiled models are checked as source only
    unreadable = {op.type for op in compiled.ops
                  if op.type == "CUSTOM" or BUILTIN_CODES.get(op.type, 0) < 0}
    if unreadable:
        return
    compiled_path = tmp_path / "compiled.tflite"
    lite = unfuse_ignored_activations(compiled.model)  # LiteRT's tools ignore a fused TANH
    compiled_path.write_bytes(bytes(write_model(lite, "tflite")))
    graphs = explorer_graphs(compiled_path)
    data = model_explorer_data(att, level="op")
    (gid, node_data), = data.items()
    assert gid in graphs
    assert node_data["results"] and set(node_data["results"]) <= graphs[gid]
    loads_through_node_data_builder(data)


def test_perfetto_slices_are_named_by_layer(tmp_path: Path) -> None:
    model = tk.load(SAMPLES / "cnn.tflite")
    compiled = compile_model(model)
    frame = run(compiled, None, trace=True, repeat=2).trace.runtime.to_frame()
    att = trace_join(frame, compiled)
    joined = att.event_layers()
    events = json.loads(to_chrome_trace(att, tmp_path / "t.json").read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(frame)
    layer_names = set(compiled.layers()["layer"])
    for e, layers, op, cmd in zip(slices, joined["layers"], frame["optimised_id"],
                                  frame["command_id"]):
        assert e["name"] == " + ".join(layers)
        assert set(e["name"].split(" + ")) <= layer_names
        assert e["args"]["optimised_id"] == op and e["args"]["command_id"] == cmd
        assert e["args"]["event"] == str(cmd)
