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
* ``MANIFEST.json``: versions of the tools and the runs per profile, and each model's
  ``named_modules()`` (``named_modules``: ``[path, class]``, the layer list the importer's
  names are checked against).

``python sample_models/onnx/make_fixtures.py --modules`` exports only ``nested`` (a CNN with
torchvision's nested ``Sequential``s: MobileNetV2 inverted residual blocks and a ResNet block
with ``downsample``; ``nested.ts.onnx``, ``nested.dynamo.onnx``, inputs in
``inputs_nested.npz``) and records ``named_modules`` for every model, leaving the other files.

``python sample_models/onnx/make_fixtures.py --control`` exports only ``gated`` (a module
whose ``forward`` branches on its data, ``torch.jit.script``-ed so that the TorchScript
exporter writes an ONNX ``If`` with one subgraph per branch; ``gated.ts.onnx``, one input per
branch in ``inputs_gated.npz``) and records ``named_modules`` as ``--modules`` does.

``EXTRA_MODELS`` (``mnv2_like``: a MobileNetV2-like CNN with nested Sequentials) are exported
with both exporters, without profiles: ``python make_fixtures.py mnv2_like`` adds them alone.

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


class InvertedResidual(nn.Module):
    """MobileNetV2's block: its layers in a ``conv`` Sequential nesting Sequentials
    (``conv.0.0`` is the expand convolution), as torchvision writes it."""

    def __init__(self, cin: int, cout: int, expand: int, stride: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Sequential(nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden),
                          nn.ReLU6()),
            nn.Sequential(nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                          nn.BatchNorm2d(hidden), nn.ReLU6()),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return x + y if self.use_res else y


class BasicBlock(nn.Module):
    """ResNet's block with a ``downsample`` Sequential (1x1 strided conv + norm)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False),
                                        nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + self.downsample(x))


class NestedCNN(nn.Module):
    """A small CNN with torchvision's nesting: ``features`` (a stem Sequential and inverted
    residual blocks), a ResNet ``layer1`` with ``downsample``, a ``classifier`` Sequential."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6()),
            InvertedResidual(8, 8, 2, 1),
            InvertedResidual(8, 12, 2, 2),
        )
        self.layer1 = nn.Sequential(BasicBlock(12, 16))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.features(x))
        return self.classifier(torch.flatten(self.pool(x), 1))


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 24, batch_first=True)
        self.head = nn.Linear(24, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1,
            act: bool = True) -> nn.Sequential:
    """Conv, BatchNorm and ReLU6 as torchvision's ``Conv2dNormActivation`` nests them."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class MnInvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, 1x1 projection (one Sequential)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(conv_bn(cin, hidden, 1))
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2Like(nn.Module):
    """A narrow MobileNetV2 (random weights): ``features`` is a Sequential of Sequentials,
    as in torchvision, so module paths are ``features.2.conv.1.0``."""

    def __init__(self) -> None:
        super().__init__()
        cfg = [(1, 8, 1, 1), (4, 12, 2, 2), (4, 16, 2, 2), (4, 24, 1, 1)]
        layers: list[nn.Module] = [conv_bn(3, 8, 3, 2)]
        cin = 8
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(MnInvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 64, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1)
        return self.classifier(torch.flatten(x, 1))


class Gated(nn.Module):
    """Data-dependent control flow: the ``pos`` or the ``neg`` Sequential runs after the stem,
    as the stem's output sums above zero or not (an ONNX ``If`` once scripted)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.pos = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
        self.neg = nn.Sequential(nn.Linear(16, 16), nn.Tanh())
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        if bool(y.sum() > 0):
            y = self.pos(y)
        else:
            y = self.neg(y)
        return self.head(y)


MODELS = {
    "cnn": (CNN, (1, 3, 16, 16)),
    "transformer": (Transformer, (1, 8, 32)),
    "mlp": (MLP, (2, 64)),
    "lstm": (LSTMNet, (1, 6, 16)),
}
#: Made on their own (``python make_fixtures.py mnv2_like``) without touching the fixtures
#: above: both exports, the input, and the PyTorch module list (``<name>.modules.json``) the
#: layer names are checked against.
EXTRA_MODELS = {
    "mnv2_like": (MobileNetV2Like, (1, 3, 32, 32)),
}

#: models exported by both exporters without ORT runs (``--nested``)
EXPORT_ONLY = {"nested": (NestedCNN, (1, 3, 32, 32))}
#: scripted models with control flow, exported by TorchScript only (``--control``)
CONTROL = {"gated": (Gated, (2, 8))}


def named_modules(name: str) -> list[list[str]]:
    """``[path, class name]`` of every module of model ``name`` (``named_modules()``, the top
    module left out), as PyTorch lists them."""
    cls, _shape = {**MODELS, **EXTRA_MODELS, **EXPORT_ONLY, **CONTROL}[name]
    torch.manual_seed(0)
    return [[path, type(m).__name__] for path, m in cls().named_modules() if path]


def record_modules() -> None:
    """Export the ``EXPORT_ONLY`` models with both exporters (their inputs in
    ``inputs_nested.npz``) and record every model's ``named_modules()`` in MANIFEST.json
    (``named_modules``), leaving the other files as they are."""
    manifest = json.loads((HERE / "MANIFEST.json").read_text())
    rng = np.random.default_rng(1)
    extra = {name: rng.standard_normal(shape).astype(np.float32)
             for name, (_cls, shape) in EXPORT_ONLY.items()}
    for name in EXPORT_ONLY:
        for exporter in ("ts", "dynamo"):
            export(name, exporter, extra[name])
    np.savez(HERE / "inputs_nested.npz", **extra)
    every = {**MODELS, **EXTRA_MODELS, **EXPORT_ONLY, **CONTROL}
    manifest["named_modules"] = {name: named_modules(name) for name in every}
    (HERE / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)


def make_control() -> None:
    """Export the ``CONTROL`` models, scripted, with the TorchScript exporter; save one input
    per branch (``<name>_pos``: the stem's output sums above zero; ``<name>_neg``: below) in
    ``inputs_gated.npz``, checked to take that branch in PyTorch; record ``named_modules``."""
    rng = np.random.default_rng(28)
    feeds: dict[str, np.ndarray] = {}
    for name, (cls, shape) in CONTROL.items():
        torch.manual_seed(0)
        model = cls().eval()
        scripted = torch.jit.script(model)
        path = HERE / f"{name}.ts.onnx"
        x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
        with torch.no_grad():
            torch.onnx.export(scripted, (x,), str(path), dynamo=False, input_names=["input"],
                              output_names=["output"], opset_version=17)
            onnx.checker.check_model(str(path))
            assert any(n.op_type == "If" for n in onnx.load(str(path)).graph.node), name
            for branch, want in (("pos", True), ("neg", False)):
                while True:  # draw until the stem's output sums on this branch's side
                    x = rng.standard_normal(shape).astype(np.float32)
                    if bool(model.stem(torch.from_numpy(x)).sum() > 0) == want:
                        break
                feeds[f"{name}_{branch}"] = x
    np.savez(HERE / "inputs_gated.npz", **feeds)
    manifest = json.loads((HERE / "MANIFEST.json").read_text())
    manifest["named_modules"].update({name: named_modules(name) for name in CONTROL})
    (HERE / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)


def export(name: str, exporter: str, inputs: np.ndarray) -> Path:
    cls, _shape = {**MODELS, **EXTRA_MODELS, **EXPORT_ONLY}[name]
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


def make_extra(name: str) -> None:
    """Export one model of :data:`EXTRA_MODELS` with both exporters; add its input to
    ``inputs.npz`` (the other arrays kept) and write its module list."""
    cls, shape = EXTRA_MODELS[name]
    known = dict(np.load(HERE / "inputs.npz"))
    known[name] = np.random.default_rng(28).standard_normal(shape).astype(np.float32)
    for exporter in ("ts", "dynamo"):
        export(name, exporter, known[name])
    torch.manual_seed(0)
    modules = [n for n, _ in cls().named_modules() if n]
    (HERE / f"{name}.modules.json").write_text(json.dumps(modules, indent=0) + "\n")
    np.savez(HERE / "inputs.npz", **known)
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
    print(name, "done")


if __name__ == "__main__":
    import sys

    if "--modules" in sys.argv:
        record_modules()
        make_control()
    elif "--control" in sys.argv:
        make_control()
    elif len(sys.argv) > 1:
        for extra in sys.argv[1:]:
            make_extra(extra)
    else:
        main()
        for extra in EXTRA_MODELS:
            make_extra(extra)
