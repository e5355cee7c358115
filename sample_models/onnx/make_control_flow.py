"""Make the ONNX Runtime control-flow fixture: a small model with an ``If`` node, and ORT
profiles of it in which both branches run.

Run by hand, once, in an environment with ``onnx`` and ``onnxruntime`` (the project's dev
environment has both; no torch needed)::

    python sample_models/onnx/make_control_flow.py

It writes into this folder:

* ``gate.onnx``: ``x -> /pre/fc/MatMul -> /pre/act/Relu -> /gate/If -> /post/fc/MatMul``;
  the ``If`` takes ``/gate/ReduceSum(x) > 0``; its ``then`` branch is ``/gate/then/MatMul ->
  /gate/then/Relu``, its ``else`` branch ``/gate/else/MatMul -> /gate/else/Sigmoid``.
  Node names are TorchScript-style scopes (``/<module path>/<op>``), so each node has a layer.
* ``gate.disable.prof.json.gz``: ORT's profile of ``gate.onnx`` run at ``ORT_DISABLE_ALL``,
  ``WARMUP + RUNS`` model runs, inputs alternately positive and negative (both branches
  run); ORT times the branch's nodes inside the ``If`` node's own kernel time.
* ``gate.all.opt.onnx`` and ``gate.all.prof.json.gz``: the graph ORT saved at
  ``ORT_ENABLE_ALL`` and its profile of ``gate.onnx`` at that level.
* ``gate.inputs.npz``: the inputs, one array per run (``run0`` ...).
* ``gate.MANIFEST.json``: versions and, per profile, the branch each run took.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
WARMUP = 1
RUNS = 3
WIDTH = 32


def _weight(name: str, rng: np.random.Generator) -> onnx.TensorProto:
    values = rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)
    return numpy_helper.from_array(values.astype(np.float32), name)


def _branch(tag: str, act: str, rng: np.random.Generator) -> onnx.GraphProto:
    w = _weight(f"gate.{tag}.weight", rng)
    nodes = [helper.make_node("MatMul", ["h", w.name], [f"/gate/{tag}/MatMul_output_0"],
                              name=f"/gate/{tag}/MatMul"),
             helper.make_node(act, [f"/gate/{tag}/MatMul_output_0"], [f"{tag}_out"],
                              name=f"/gate/{tag}/{act}")]
    out = helper.make_tensor_value_info(f"{tag}_out", TensorProto.FLOAT, [1, WIDTH])
    return helper.make_graph(nodes, f"{tag}_branch", [], [out], [w])


def build() -> onnx.ModelProto:
    """The model (see the module docstring)."""
    rng = np.random.default_rng(0)
    w_pre, w_post = _weight("pre.fc.weight", rng), _weight("post.fc.weight", rng)
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    nodes = [
        helper.make_node("MatMul", ["x", w_pre.name], ["/pre/fc/MatMul_output_0"],
                         name="/pre/fc/MatMul"),
        helper.make_node("Relu", ["/pre/fc/MatMul_output_0"], ["h"], name="/pre/act/Relu"),
        helper.make_node("ReduceSum", ["x"], ["/gate/ReduceSum_output_0"], keepdims=0,
                         name="/gate/ReduceSum"),
        helper.make_node("Greater", ["/gate/ReduceSum_output_0", "zero"],
                         ["/gate/Greater_output_0"], name="/gate/Greater"),
        helper.make_node("If", ["/gate/Greater_output_0"], ["/gate/If_output_0"],
                         name="/gate/If", then_branch=_branch("then", "Relu", rng),
                         else_branch=_branch("else", "Sigmoid", rng)),
        helper.make_node("MatMul", ["/gate/If_output_0", w_post.name], ["y"],
                         name="/post/fc/MatMul"),
    ]
    graph = helper.make_graph(
        nodes, "gate", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        [w_pre, w_post, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="make_control_flow")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def profile(model: Path, level: str, out: Path, inputs: list[np.ndarray],
            optimized: Path | None = None) -> list[str]:
    """Run ``model`` once per input at ``level`` with profiling; gzip the profile into
    ``out``; return the branch each run took."""
    levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = levels[level]
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "prof")
        if optimized is not None:
            so.optimized_model_filepath = str(optimized)
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        for x in inputs:
            sess.run(None, {"x": x})
        path = sess.end_profiling()
        data = Path(path).read_bytes()
        for extra in glob.glob(os.path.join(tmp, "prof*")):
            if extra != path:
                os.remove(extra)
    with gzip.GzipFile(out, "wb", mtime=0) as g:
        g.write(data)
    return ["then" if float(x.sum()) > 0 else "else" for x in inputs]


def main() -> None:
    model = build()
    path = HERE / "gate.onnx"
    onnx.save(model, str(path))
    rng = np.random.default_rng(1)
    inputs = []
    for k in range(WARMUP + RUNS):
        x = np.abs(rng.standard_normal((1, WIDTH))).astype(np.float32)
        inputs.append(x if k % 2 == 0 else -x)
    np.savez(HERE / "gate.inputs.npz", **{f"run{k}": x for k, x in enumerate(inputs)})
    branches = {
        "gate.disable.prof.json.gz": profile(path, "disable", HERE / "gate.disable.prof.json.gz",
                                             inputs),
        "gate.all.prof.json.gz": profile(path, "all", HERE / "gate.all.prof.json.gz", inputs,
                                         HERE / "gate.all.opt.onnx"),
    }
    manifest = {"onnx": onnx.__version__, "onnxruntime": ort.__version__,
                "warmup": WARMUP, "runs": RUNS, "branches": branches}
    (HERE / "gate.MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True)
                                             + "\n")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()
