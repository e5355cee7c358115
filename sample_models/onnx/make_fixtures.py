"""Make the ONNX / ONNX Runtime fixtures: small PyTorch models exported with both exporters,
ORT's optimized graphs at every level and ORT profiles of a few runs.

Run by hand, once, in an environment with ``torch``, ``onnx``, ``onnxruntime`` and
``onnxscript`` (the tests need none of them)::

    python sample_models/onnx/make_fixtures.py

For each model ``M`` (``cnn``, ``transformer``, ``mlp``, ``lstm``) and exporter ``E``
(``ts``: TorchScript, ``dynamo=False``; ``dynamo``: the dynamo exporter with its default
optimizer), it writes into this folder:

* ``M.E.onnx``: the exported model;
* ``M.E.L.opt.onnx``: ORT's optimized graph at level ``L`` (``disable``, ``basic``,
  ``extended``, ``all``), saved with ``optimized_model_filepath``;
* ``M.E.L.prof.json.gz``: ORT's profile of the original model run at level ``L``;
* ``M.E.L.opt.prof.json.gz``: ORT's profile of ``M.E.L.opt.onnx`` run at ``ORT_DISABLE_ALL``
  (each event's ``node_index`` is then its node's position in that file);
* ``mlp.ts.ext.onnx`` + ``mlp.ts.ext.onnx.data``: the MLP with its weights as external data;
* ``inputs.npz``: the inputs used (one array per model).
* ``MANIFEST.json``: versions of the tools and the runs per profile.

Every profile has ``WARMUP + RUNS`` model runs with one intra-op thread.
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
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
WARMUP = 1
RUNS = 3


class ConvBNReLU(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))  # self.relu is called twice
        y = self.bn2(self.conv2(y))
        return self.relu(y + x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = ConvBNReLU(3, 8)
        self.layer1 = nn.Sequential(Residual(8), Residual(8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class Block(nn.Module):
    """A pre-norm transformer block written out (attention, GELU MLP, residuals)."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // h) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(128, 64)
        self.act2 = nn.ReLU()
        self.out = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act2(self.fc2(self.act1(self.fc1(x)))))


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 24, batch_first=True)
        self.head = nn.Linear(24, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


MODELS = {
    "cnn": (CNN, (1, 3, 16, 16)),
    "transformer": (Transformer, (1, 8, 32)),
    "mlp": (MLP, (2, 64)),
    "lstm": (LSTMNet, (1, 6, 16)),
}


def export(name: str, exporter: str, inputs: np.ndarray) -> Path:
    cls, _shape = MODELS[name]
    torch.manual_seed(0)
    model = cls().eval()
    for m in model.modules():  # non-trivial BatchNorm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    x = torch.from_numpy(inputs)
    path = HERE / f"{name}.{exporter}.onnx"
    with torch.no_grad():
        if exporter == "ts":
            torch.onnx.export(model, (x,), str(path), dynamo=False, input_names=["input"],
                              output_names=["output"], opset_version=17)
        else:
            program = torch.onnx.export(model, (x,), dynamo=True, input_names=["input"],
                                        output_names=["output"])
            program.save(str(path))
    onnx.checker.check_model(str(path))
    return path


def _options(level: str) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return so


def profile(model: Path, level: str, out: Path, feed: dict[str, np.ndarray],
            optimized: Path | None = None) -> int:
    """Run ``model`` at ``level`` with profiling; gzip the profile into ``out``; return the
    number of events."""
    with tempfile.TemporaryDirectory() as tmp:
        so = _options(level)
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "prof")
        if optimized is not None:
            so.optimized_model_filepath = str(optimized)
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        for _ in range(WARMUP + RUNS):
            sess.run(None, feed)
        path = sess.end_profiling()
        with open(path, "rb") as f:
            raw = f.read()
    events = json.loads(raw)
    with gzip.GzipFile(out, "wb", mtime=0) as g:
        g.write(raw)
    return len(events)


def main() -> None:
    for old in glob.glob(str(HERE / "*.onnx")) + glob.glob(str(HERE / "*.gz")) + glob.glob(
            str(HERE / "*.data")):
        os.remove(old)
    rng = np.random.default_rng(0)
    inputs = {name: rng.standard_normal(shape).astype(np.float32)
              for name, (_cls, shape) in MODELS.items()}
    manifest: dict[str, object] = {
        "torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__,
        "warmup": WARMUP, "runs": RUNS, "profiles": {},
    }
    profiles: dict[str, int] = {}
    for name in MODELS:
        for exporter in ("ts", "dynamo"):
            model = export(name, exporter, inputs[name])
            feed = {"input": inputs[name]}
            for level in LEVELS:
                opt = HERE / f"{name}.{exporter}.{level}.opt.onnx"
                prof = HERE / f"{name}.{exporter}.{level}.prof.json.gz"
                profiles[prof.name] = profile(model, level, prof, feed, optimized=opt)
                oprof = HERE / f"{name}.{exporter}.{level}.opt.prof.json.gz"
                profiles[oprof.name] = profile(opt, "disable", oprof, feed)
            print(name, exporter, "done")
    # the MLP once more, its weights as external data
    ext = HERE / "mlp.ts.ext.onnx"
    m = onnx.load(str(HERE / "mlp.ts.onnx"))
    onnx.save(m, str(ext), save_as_external_data=True, all_tensors_to_one_file=True,
              location=ext.name + ".data", size_threshold=0)
    manifest["profiles"] = profiles
    np.savez(HERE / "inputs.npz", **inputs)
    (HERE / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)


if __name__ == "__main__":
    main()
