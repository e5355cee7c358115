"""Caffe model files: bytes and text <-> ``NetParameter`` messages (pure, no graph logic).

A Caffe network is a protobuf ``NetParameter``: ``.prototxt`` files hold it in protobuf's
text format (usually the deploy network, without weights), ``.caffemodel`` files in the
binary wire format (usually layers and their blobs). The message description is our own
subset of Caffe's (:file:`caffe.proto`, same field numbers), compiled to ``caffe_pb2``.

* :func:`parse_binary` / :func:`parse_text` / :func:`read_net` return a ``NetParameter``.
* :func:`write_binary` / :func:`write_text` / :func:`write_net` write one back.
* :func:`blob_array` turns a ``BlobProto`` into a float32 array (``shape`` or the legacy
  num/channels/height/width dims).
* :data:`V1_TYPE_NAMES` maps the legacy ``V1LayerParameter.LayerType`` codes to the layer
  type strings of the new format.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ModelFormatError

from . import caffe_pb2

__all__ = [
    "caffe_pb2",
    "NetParameter",
    "LayerParameter",
    "V1LayerParameter",
    "BlobProto",
    "parse_binary",
    "parse_text",
    "read_net",
    "write_binary",
    "write_text",
    "write_net",
    "blob_array",
    "blob_proto",
    "unknown_fields",
    "V1_TYPE_NAMES",
    "MAX_ELEMENTS",
]

NetParameter = caffe_pb2.NetParameter
LayerParameter = caffe_pb2.LayerParameter
V1LayerParameter = caffe_pb2.V1LayerParameter
BlobProto = caffe_pb2.BlobProto

MAX_ELEMENTS = 1 << 31
"""Largest number of elements accepted in one blob or one declared shape."""

_V1 = caffe_pb2.V1LayerParameter
V1_TYPE_NAMES: dict[int, str] = {
    _V1.ABSVAL: "AbsVal", _V1.ACCURACY: "Accuracy", _V1.ARGMAX: "ArgMax", _V1.BNLL: "BNLL",
    _V1.CONCAT: "Concat", _V1.CONTRASTIVE_LOSS: "ContrastiveLoss",
    _V1.CONVOLUTION: "Convolution", _V1.DATA: "Data", _V1.DECONVOLUTION: "Deconvolution",
    _V1.DROPOUT: "Dropout", _V1.DUMMY_DATA: "DummyData", _V1.EUCLIDEAN_LOSS: "EuclideanLoss",
    _V1.ELTWISE: "Eltwise", _V1.EXP: "Exp", _V1.FLATTEN: "Flatten", _V1.HDF5_DATA: "HDF5Data",
    _V1.HDF5_OUTPUT: "HDF5Output", _V1.HINGE_LOSS: "HingeLoss", _V1.IM2COL: "Im2col",
    _V1.IMAGE_DATA: "ImageData", _V1.INFOGAIN_LOSS: "InfogainLoss",
    _V1.INNER_PRODUCT: "InnerProduct", _V1.LRN: "LRN", _V1.MEMORY_DATA: "MemoryData",
    _V1.MULTINOMIAL_LOGISTIC_LOSS: "MultinomialLogisticLoss", _V1.MVN: "MVN",
    _V1.POOLING: "Pooling", _V1.POWER: "Power", _V1.RELU: "ReLU", _V1.SIGMOID: "Sigmoid",
    _V1.SIGMOID_CROSS_ENTROPY_LOSS: "SigmoidCrossEntropyLoss", _V1.SILENCE: "Silence",
    _V1.SOFTMAX: "Softmax", _V1.SOFTMAX_LOSS: "SoftmaxWithLoss", _V1.SPLIT: "Split",
    _V1.SLICE: "Slice", _V1.TANH: "TanH", _V1.WINDOW_DATA: "WindowData",
    _V1.THRESHOLD: "Threshold",
}
"""Legacy layer type code -> layer type string (as Caffe's own upgrade names them)."""


def parse_binary(data: bytes | bytearray | memoryview, where: str = "<bytes>") -> Any:
    """Return the ``NetParameter`` encoded in ``data`` (protobuf wire format).

    Raises :class:`ModelFormatError` when the bytes are not a valid message.
    """
    net = caffe_pb2.NetParameter()
    try:
        net.ParseFromString(bytes(data))
    except Exception as e:  # DecodeError, and whatever the C parser raises on bad bytes
        raise ModelFormatError(f"not a valid Caffe NetParameter ({type(e).__name__}: {e})",
                               where=where,
                               fix="pass a .caffemodel written by Caffe (binary protobuf)"
                               ) from None
    return net


def parse_text(text: str | bytes, where: str = "<text>") -> Any:
    """Return the ``NetParameter`` written in protobuf text format (a ``.prototxt``).

    Fields that the toolkit's message subset does not describe (data-layer settings, for
    example) are skipped with a warning naming the first one. Raises :class:`ModelFormatError` with
    the line and column of a syntax error.
    """
    from google.protobuf import text_format

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ModelFormatError(f"prototxt is not UTF-8 text (byte {e.start})", where=where,
                                   fix="pass a Caffe .prototxt file") from None
    net = caffe_pb2.NetParameter()
    try:
        try:
            text_format.Parse(text, net)
        except text_format.ParseError as e:
            if "no field named" not in str(e):
                raise
            net = caffe_pb2.NetParameter()
            text_format.Parse(text, net, allow_unknown_field=True)
            warnings.warn(f"{where}: the prototxt has fields the toolkit does not read; they "
                          f"were skipped (the first: {e})", stacklevel=2)
    except text_format.ParseError as e:
        raise ModelFormatError(f"prototxt syntax error: {e}", where=where,
                               fix="check the text at that line and column") from None
    except Exception as e:  # the parser's other failures on odd input (RecursionError, ...)
        raise ModelFormatError(f"cannot parse prototxt ({type(e).__name__}: {e})", where=where,
                               fix="pass a Caffe .prototxt file") from None
    return net


def read_net(path: str | os.PathLike[str]) -> Any:
    """Read a ``.prototxt`` (text) or ``.caffemodel`` (binary) file; return its
    ``NetParameter``. The format follows the extension: ``.caffemodel``/``.binaryproto``
    are binary, everything else is text."""
    from toolkit.util.files import check_path, read_bytes

    p = Path(check_path(path, what="Caffe file", error=ModelFormatError))
    data = read_bytes(p, what="Caffe file", error=ModelFormatError,
                      fix="pass a .prototxt or .caffemodel file")
    if p.suffix.lower() in (".caffemodel", ".binaryproto"):
        return parse_binary(data, where=str(p))
    return parse_text(data, where=str(p))


def write_binary(net: Any) -> bytes:
    """Return ``net`` in the protobuf wire format (a ``.caffemodel``'s bytes)."""
    return bytes(net.SerializeToString())


def write_text(net: Any) -> str:
    """Return ``net`` in protobuf text format (a ``.prototxt``'s text)."""
    from google.protobuf import text_format

    return str(text_format.MessageToString(net))


def write_net(net: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``net`` to ``path`` (binary for ``.caffemodel``, else text) through a temporary
    file renamed into place; return the path."""
    from toolkit.util.atomic import atomic_write

    p = Path(path)
    data = write_binary(net) if p.suffix.lower() in (".caffemodel", ".binaryproto") \
        else write_text(net).encode()
    atomic_write(p, data)
    return p


def unknown_fields(msg: Any) -> list[int]:
    """Field numbers that ``msg`` or its set sub-messages (one level) hold without the
    toolkit's message description knowing them (binary files only), sorted."""
    from google.protobuf import unknown_fields as uf

    found = {f.field_number for f in uf.UnknownFieldSet(msg)}
    for fd, value in msg.ListFields():
        if fd.message_type is not None and not fd.is_repeated:
            found |= {f.field_number for f in uf.UnknownFieldSet(value)}
    return sorted(found)


def _dims(blob: Any, where: str) -> list[int]:
    if blob.HasField("shape"):
        dims = [int(d) for d in blob.shape.dim]
    elif any(blob.HasField(f) for f in ("num", "channels", "height", "width")):
        dims = [int(blob.num), int(blob.channels), int(blob.height), int(blob.width)]
    else:
        dims = [len(blob.data) or len(blob.double_data)]
    if any(d < 0 or d > MAX_ELEMENTS for d in dims):
        raise ModelFormatError(
            f"blob has invalid dimensions {dims}", where=where,
            fix=(
                "the blob's shape is damaged: regenerate the .caffemodel with Caffe (net.save) or "
                "check the BlobProto dims"
            ),
        )
    return dims


def blob_array(blob: Any, where: str = "<blob>") -> np.ndarray:
    """Return the values of a ``BlobProto`` as a float32 array of its declared shape.

    The shape is ``shape.dim`` when present, else the legacy ``[num, channels, height,
    width]``, else the number of values. ``double_data`` is used when ``data`` is empty.
    Raises :class:`ModelFormatError` when the number of values does not match the shape.
    """
    dims = _dims(blob, where)
    n = int(np.prod(dims, dtype=np.float64)) if dims else 1
    if n > MAX_ELEMENTS:
        raise ModelFormatError(
            f"blob of shape {dims} is too large", where=where,
            fix=(
                "a blob holds at most 2**31 elements: the weights file is damaged, or the net "
                "is too large to import"
            ),
        )
    values = blob.data if len(blob.data) else blob.double_data
    if len(values) != n:
        raise ModelFormatError(f"blob of shape {dims} holds {len(values)} values, "
                               f"expected {n}", where=where,
                               fix="the weights file is damaged or was written for another net")
    return np.asarray(values, dtype=np.float32).reshape(dims)


def blob_proto(array: np.ndarray, *, legacy: bool = False) -> Any:
    """Return a ``BlobProto`` holding ``array`` (float32): with ``shape`` or, when
    ``legacy``, with the 4-D num/channels/height/width dims (padded with leading 1s)."""
    a = np.asarray(array, dtype=np.float32)
    b = caffe_pb2.BlobProto()
    if legacy:
        if a.ndim > 4:
            raise ModelFormatError(
                f"a legacy blob has at most 4 dims, got {a.shape}",
                fix=(
                    "reshape the array to at most 4 dims, or write it without legacy=True (a "
                    "BlobProto shape)"
                ),
            )
        d = (1,) * (4 - a.ndim) + a.shape
        b.num, b.channels, b.height, b.width = (int(x) for x in d)
    else:
        b.shape.dim.extend(int(x) for x in a.shape)
    b.data.extend(a.ravel().tolist())
    return b
