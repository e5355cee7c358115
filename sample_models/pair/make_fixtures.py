"""Make one PyTorch model's profiles in two runtimes: ExecuTorch (XNNPACK) and ONNX Runtime.

The ExecuTorch and ONNX fixtures beside this folder come from different modules (their
``make_fixtures.py`` define a ``ResidualCNN`` and a ``CNN`` of other layers), so comparing
their profiles pairs only a few layers by name. This script exports ONE module (this
folder's ``ResidualCNN``, the ExecuTorch fixtures' model) with the same weights both ways,
runs each ``RUNS`` times on one thread with profiling on, and writes:

* ``cnn_xnnpack.pte``, ``cnn_xnnpack.etrecord.bin``, ``cnn_xnnpack.etdp``: the ExecuTorch
  program lowered to XNNPACK, its ETRecord and the ETDump of ``RUNS`` executions;
* ``cnn.onnx``: the TorchScript-exporter ONNX model (opset 17), ``cnn.all.opt.onnx``: ORT's
  optimized graph at ``ORT_ENABLE_ALL``, ``cnn.all.prof.json.gz``: ORT's profile of ``RUNS``
  runs of ``cnn.onnx`` at that level;
* ``layers.json``: the module paths of the model (``named_modules()``), the framework's own
  layer list, and the versions of the tools.

Run by hand, once, in an environment with ``torch==2.13.*``, ``executorch==1.5.*``, ``onnx``,
``onnxruntime`` (the tests need none of them)::

    python sample_models/pair/make_fixtures.py
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
RUNS = 20


class ResidualCNN(nn.Module):
    """Conv/BatchNorm/ReLU stem, one residual block, pooling and a Linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = self.relu(x + y)
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


def make_model() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = ResidualCNN().eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return model, torch.randn(1, 3, 32, 32)


def export_executorch(model: nn.Module, x: torch.Tensor) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools import generate_etrecord
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    exported = torch.export.export(model, (x,))
    edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    edge_copy = copy.deepcopy(edge)
    program = edge.to_executorch()
    pte = HERE / "cnn_xnnpack.pte"
    pte.write_bytes(program.buffer)
    generate_etrecord(str(HERE / "cnn_xnnpack.etrecord.bin"), edge_copy, program,
                      exported_program=exported)
    module = _load_for_executorch(str(pte), enable_etdump=True)
    for _ in range(RUNS):
        module.forward([x])
    module.write_etdump_result_to_file(str(HERE / "cnn_xnnpack.etdp"))


def export_onnx(model: nn.Module, x: torch.Tensor) -> str:
    import onnx
    import onnxruntime as ort

    path = HERE / "cnn.onnx"
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(path), dynamo=False, input_names=["input"],
                          output_names=["output"], opset_version=17)
    onnx.checker.check_model(str(path))
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "prof")
        so.optimized_model_filepath = str(HERE / "cnn.all.opt.onnx")
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        feed = {"input": x.numpy()}
        for _ in range(RUNS):
            sess.run(None, feed)
        raw = Path(sess.end_profiling()).read_bytes()
    with gzip.GzipFile(HERE / "cnn.all.prof.json.gz", "wb", mtime=0) as g:
        g.write(raw)
    return str(ort.__version__)


def main() -> None:
    import executorch

    model, x = make_model()
    export_executorch(copy.deepcopy(model), x)
    ort_version = export_onnx(model, x)
    layers = [name for name, _ in model.named_modules() if name]
    (HERE / "layers.json").write_text(json.dumps({
        "layers": layers, "runs": RUNS, "torch": torch.__version__,
        "executorch": getattr(executorch, "__version__", "1.5"), "onnxruntime": ort_version,
        "input": list(x.shape)}, indent=1) + "\n")
    np.save(HERE / "input.npy", x.numpy())
    print("wrote", sorted(p.name for p in HERE.iterdir()))


if __name__ == "__main__":
    main()
