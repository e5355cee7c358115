"""Write Caffe networks in code: ``NetParameter`` messages, new or legacy V1 format.

    nb = NetBuilder("tiny")
    nb.input("data", [1, 3, 8, 8])
    nb.layer("conv1", "Convolution", ["data"], ["conv1"], blobs=[w, b],
             convolution_param={"num_output": 4, "kernel_size": [3]})
    nb.layer("relu1", "ReLU", ["conv1"], ["conv1"])          # in place
    nb.save("tiny.prototxt", "tiny.caffemodel")              # deploy text + binary weights

:meth:`NetBuilder.net` returns the whole message (layers and blobs); :meth:`deploy` the same
without blobs (what a ``.prototxt`` holds). With ``v1=True`` layers are written as
``V1LayerParameter`` (``layers`` field, enum types, legacy 4-D blob dims) and the inputs as
the net-level ``input``/``input_dim`` fields.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError

from . import V1_TYPE_NAMES, blob_proto, caffe_pb2, write_net

__all__ = ["NetBuilder", "set_fields"]

_V1_CODES = {name: code for code, name in V1_TYPE_NAMES.items()}


def set_fields(msg: Any, fields: Mapping[str, Any]) -> None:
    """Set the fields of a protobuf message from a (nested) dict; lists extend repeated
    fields, dicts fill sub-messages, strings name enum values."""
    for k, v in fields.items():
        if isinstance(v, Mapping):
            set_fields(getattr(msg, k), v)
        elif isinstance(v, (list, tuple)):
            rep = getattr(msg, k)
            for item in v:
                if isinstance(item, Mapping):
                    set_fields(rep.add(), item)
                else:
                    rep.append(item)
        else:
            setattr(msg, k, v)


class NetBuilder:
    """Assemble a Caffe ``NetParameter`` layer by layer (see the module docstring)."""

    def __init__(self, name: str = "net", *, v1: bool = False) -> None:
        self.v1 = v1
        self._net = caffe_pb2.NetParameter()
        self._net.name = name

    def input(self, name: str, shape: Sequence[int]) -> None:
        """Declare an input blob: an Input layer (new format) or net-level input_dim (V1)."""
        if self.v1:
            self._net.input.append(name)
            if len(shape) != 4:
                raise ToolkitError(
                    "V1 nets declare 4-D inputs (input_dim)",
                    fix=(
                        "give a 4-D shape (N, C, H, W), or build the net with v1=False for another "
                        "rank"
                    ),
                )
            self._net.input_dim.extend(int(d) for d in shape)
            return
        lay = self._net.layer.add()
        lay.name, lay.type = name, "Input"
        lay.top.append(name)
        lay.input_param.shape.add().dim.extend(int(d) for d in shape)

    def layer(self, name: str, type: str, bottom: Sequence[str], top: Sequence[str], *,
              blobs: Sequence[np.ndarray] = (), **params: Mapping[str, Any]) -> Any:
        """Append a layer; ``params`` are its parameter messages as dicts, e.g.
        ``pooling_param={"pool": "MAX", "kernel_size": 2}``. Returns the layer message."""
        if self.v1:
            if type not in _V1_CODES:
                raise ToolkitError(
                    f"layer type {type!r} does not exist in the V1 format",
                    fix=(
                        f"V1 layer types are {', '.join(sorted(_V1_CODES))}; build the net with "
                        "v1=False for the others"
                    ),
                )
            lay = self._net.layers.add()
            lay.type = _V1_CODES[type]
        else:
            lay = self._net.layer.add()
            lay.type = type
        lay.name = name
        lay.bottom.extend(bottom)
        lay.top.extend(top)
        for b in blobs:
            lay.blobs.append(blob_proto(b, legacy=self.v1))
        set_fields(lay, params)
        return lay

    def net(self) -> Any:
        """The whole network with its blobs (a copy)."""
        out = caffe_pb2.NetParameter()
        out.CopyFrom(self._net)
        return out

    def deploy(self) -> Any:
        """The network without blobs (a deploy ``.prototxt``'s content)."""
        out = self.net()
        for lay in list(out.layer) + list(out.layers):
            del lay.blobs[:]
        return out

    def save(self, prototxt: str | os.PathLike[str] | None = None,
             caffemodel: str | os.PathLike[str] | None = None) -> list[Path]:
        """Write the deploy text to ``prototxt`` and the network with blobs to
        ``caffemodel`` (either may be None); return the paths written."""
        out = []
        if prototxt is not None:
            out.append(write_net(self.deploy(), prototxt))
        if caffemodel is not None:
            out.append(write_net(self.net(), caffemodel))
        return out
