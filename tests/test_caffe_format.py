"""toolkit.formats.caffe: NetParameter bytes/text <-> messages, blobs, the writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolkit.errors import ModelFormatError, ToolkitError
from toolkit.formats.caffe import (
    blob_array,
    blob_proto,
    caffe_pb2,
    parse_binary,
    parse_text,
    read_net,
    write_binary,
    write_net,
    write_text,
)
from toolkit.formats.caffe.writer import NetBuilder


def _net() -> object:
    nb = NetBuilder("rt")
    nb.input("data", [1, 2, 3, 3])
    nb.layer("conv", "Convolution", ["data"], ["conv"],
             blobs=[np.arange(8, dtype=np.float32).reshape(2, 2, 1, 2)],
             convolution_param={"num_output": 2, "kernel_h": 1, "kernel_w": 2,
                                "bias_term": False})
    nb.layer("pool", "Pooling", ["conv"], ["pool"],
             pooling_param={"pool": "AVE", "global_pooling": True})
    return nb.net()


def test_round_trips(tmp_path: Path) -> None:
    net = _net()
    assert parse_binary(write_binary(net)) == net
    assert parse_text(write_text(net)) == net
    for name in ("n.caffemodel", "n.prototxt"):
        assert read_net(write_net(net, tmp_path / name)) == net
    assert (tmp_path / "n.prototxt").read_text().startswith('name: "rt"')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.caffemodel", "n.prototxt"]


def test_blob_shapes_new_legacy_and_double() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(blob_array(blob_proto(a)), a)
    legacy = blob_proto(a, legacy=True)
    assert (legacy.num, legacy.channels, legacy.height, legacy.width) == (1, 1, 2, 3)
    np.testing.assert_array_equal(blob_array(legacy), a.reshape(1, 1, 2, 3))
    b = caffe_pb2.BlobProto()
    b.double_data.extend([1.5, 2.5])
    np.testing.assert_array_equal(blob_array(b), np.array([1.5, 2.5], np.float32))
    bad = blob_proto(a)
    bad.shape.dim[0] = 3
    with pytest.raises(ModelFormatError, match=r"holds 6 values, expected 9"):
        blob_array(bad, where="w")
    bad.shape.dim[0] = -2
    with pytest.raises(ModelFormatError, match="invalid dimensions"):
        blob_array(bad)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="cannot read the Caffe file"):
        read_net(tmp_path / "missing.prototxt")
    p = tmp_path / "latin1.prototxt"
    p.write_bytes(b'name: "caf\xe9"')
    with pytest.raises(ModelFormatError, match="not UTF-8"):
        read_net(p)
    p = tmp_path / "text.caffemodel"
    p.write_text('name: "oops, text"')
    with pytest.raises(ModelFormatError, match="not a valid Caffe NetParameter"):
        read_net(p)


def test_v1_writer() -> None:
    nb = NetBuilder(v1=True)
    nb.input("data", [1, 1, 2, 2])
    nb.layer("relu", "ReLU", ["data"], ["data"])
    net = nb.net()
    assert list(net.input_dim) == [1, 1, 2, 2]
    assert net.layers[0].type == caffe_pb2.V1LayerParameter.RELU
    assert "layers {" in write_text(net) and "type: RELU" in write_text(net)
    with pytest.raises(ToolkitError, match="does not exist in the V1 format"):
        nb.layer("bn", "BatchNorm", ["data"], ["data"])
    with pytest.raises(ToolkitError, match="4-D inputs"):
        nb.input("x", [1, 2])
