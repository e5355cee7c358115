"""Export small PyTorch models to ExecuTorch, run them with ETDump on, save every file.

Run by hand, once, in an environment with ``torch==2.13.*`` and ``executorch==1.5.*``::

    python sample_models/executorch/make_fixtures.py            # every model
    python sample_models/executorch/make_fixtures.py mobile     # one model

For each model and backend (``portable``, ``xnnpack``) it writes, next to this script:
``<name>_<backend>.pte`` (the program), ``<name>_<backend>.etrecord.bin`` (ETRecord),
``<name>_<backend>.etdp`` (ETDump of ``RUNS`` executions, written by the runtime),
``<name>_<backend>.inspector.csv`` (``Inspector.to_dataframe()``) and
``<name>_<backend>.etdump.json`` (``gen_etdump_object`` decoded, for parity tests) and
``<name>_<backend>.modules.json`` (``named_modules()``: the layer list, path and type).
The tests read these files without torch or executorch.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
RUNS = 4
torch.manual_seed(0)


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


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + x


class LoopBlock(nn.Module):
    """A block run in a loop (``torch.ops.higher_order.map``: the runtime repeats the body's
    instructions within one execution), then the same block called again and a head."""

    def __init__(self, unrolled: bool = False) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(16, 4)
        self.unrolled = unrolled  # XNNPACK cannot lower the body of a map: unroll it there

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.map import map as loop_map

        if self.unrolled:
            y = sum(self.block(xs[i]) for i in range(xs.shape[0]))
        else:
            y = loop_map(lambda x: self.block(x), xs).sum(0)
        return self.head(self.block(y))


class Slices(nn.Module):
    """A Sequential run in slices (paths like ``layers.slice(1, None, None)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 24), nn.Tanh(),
                                    nn.Linear(24, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers[:1](x)
        x = self.layers[1:](x)
        return x.view(x.shape[0], 2, 3).sum(-1)


class MobileBlock(nn.Module):
    """A MobileNet-like block: a Conv/BatchNorm/ReLU6 stem, an inverted residual (pointwise
    expand, depthwise, pointwise project, each with its BatchNorm; ReLU6 between) added to its
    input, a ReLU6, a global mean pool, a reshape and two Linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU6())
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16),
                                    nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False),
                                       nn.BatchNorm2d(16), nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.act = nn.ReLU6()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.act(x + self.project(self.depthwise(self.expand(x))))
        x = x.mean(dim=(2, 3), keepdim=True)
        x = x.reshape(x.shape[0], -1)
        return self.fc2(self.fc1(x))


MODELS: dict[str, tuple[Any, tuple[torch.Tensor, ...]]] = {
    "cnn": (ResidualCNN, (torch.randn(1, 3, 16, 16),)),
    "loop": (LoopBlock, (torch.randn(3, 2, 16),)),
    "slices": (Slices, (torch.randn(3, 12),)),
    "mobile": (MobileBlock, (torch.randn(1, 3, 16, 16),)),
}


def export(name: str, backend: str) -> None:
    from executorch.devtools import Inspector, generate_etrecord
    from executorch.devtools.inspector._inspector_utils import gen_etdump_object
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    cls, inputs = MODELS[name]
    model = (cls(unrolled=True) if cls is LoopBlock and backend == "xnnpack" else cls()).eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    exported = torch.export.export(model, inputs)
    partitioners = []
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners = [XnnpackPartitioner()]
    edge = to_edge_transform_and_lower(exported, partitioner=partitioners)
    edge_copy = copy.deepcopy(edge)
    program = edge.to_executorch()
    stem = HERE / f"{name}_{backend}"
    pte = stem.with_suffix(".pte")
    pte.write_bytes(program.buffer)
    etrecord = Path(f"{stem}.etrecord.bin")
    generate_etrecord(str(etrecord), edge_copy, program, exported_program=exported)

    module = _load_for_executorch(str(pte), enable_etdump=True)
    for _ in range(RUNS):
        module.forward(list(inputs))
    etdp = stem.with_suffix(".etdp")
    module.write_etdump_result_to_file(str(etdp))

    modules = [{"path": path, "type": type(m).__name__} for path, m in model.named_modules()]
    Path(f"{stem}.modules.json").write_text(json.dumps(modules, indent=1) + "\n")
    inspector = Inspector(etdump_path=str(etdp), etrecord=str(etrecord))
    inspector.to_dataframe().to_csv(f"{stem}.inspector.csv", index=False)
    dump = gen_etdump_object(etdump_path=str(etdp))
    Path(f"{stem}.etdump.json").write_text(json.dumps(_plain(dump), indent=1) + "\n")
    inspector_extras(stem)
    print(f"{stem.name}: {pte.stat().st_size} B program, {etdp.stat().st_size} B ETDump")


MODULE_QUERIES = ("conv", "stem", "conv1", "fc", "relu", "block", "head", "layers", "layers.1")


def inspector_extras(stem: Path) -> None:
    """``<stem>.inspector_totals.json``: ``Inspector.find_total_for_module`` for a few names
    (the Inspector matches them as substrings)."""
    from executorch.devtools import Inspector

    inspector = Inspector(etdump_path=f"{stem}.etdp", etrecord=f"{stem}.etrecord.bin")
    totals = {m: float(inspector.find_total_for_module(m)) for m in MODULE_QUERIES}
    Path(f"{stem}.inspector_totals.json").write_text(json.dumps(totals, indent=1) + "\n")


def _plain(value: Any) -> Any:
    """A JSON-able copy of the deserialized ETDump dataclasses (bytes as base64)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, enum.Enum):
        return value.name
    return value


def main() -> None:
    import sys

    if sys.argv[1:2] == ["--extras-only"]:  # re-derive from the committed files
        for etdp in sorted(HERE.glob("*.etdp")):
            inspector_extras(etdp.with_suffix(""))
        return
    for name in sys.argv[1:] or MODELS:
        for backend in ("portable", "xnnpack"):
            export(name, backend)


if __name__ == "__main__":
    main()
