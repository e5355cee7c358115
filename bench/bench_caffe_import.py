"""Benchmark of the Caffe importer: reading a Caffe model against reading the same model as a
FlatBuffer, and the reference runtime on it against OpenCV's DNN module.

Run: ``python bench/bench_caffe_import.py [--scale 0.5] [--repeat 5]``. An AlexNet-shaped
network (227x227 input; ``--scale`` multiplies its channel and fully-connected widths) is
written with the toolkit's Caffe writer into a temporary folder. Prints, best of ``--repeat``:

* ``load_caffe`` (prototxt + caffemodel: protobuf parsing, graph building, weight layout
  conversion), the protobuf parse alone, and ``flatbuffer_read.load`` of the same model saved
  as ``.tflite`` (the baseline), as times and as ratios to the baseline;
* one inference with the reference runtime and with OpenCV's DNN module on one thread (when
  ``cv2`` is installed), and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import best

from toolkit.formats.caffe import parse_binary
from toolkit.formats.caffe.writer import NetBuilder
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import save
from toolkit.importers.caffe import load_caffe
from toolkit.runtime.interpreter import Interpreter


def alexnet(scale: float, seed: int = 0) -> NetBuilder:
    """An AlexNet-shaped Caffe network with random weights."""
    rng = np.random.default_rng(seed)
    nb = NetBuilder("alexnet_bench")
    nb.input("data", [1, 3, 227, 227])
    ch = {"data": 3}

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    def conv(name: str, bottom: str, n: int, k: int, stride: int = 1, pad: int = 0,
             group: int = 1) -> str:
        n = max(group, int(n * scale) // group * group)
        nb.layer(name, "Convolution", [bottom], [name],
                 blobs=[w(n, ch[bottom] // group, k, k), np.zeros(n, np.float32)],
                 convolution_param={"num_output": n, "kernel_size": [k], "stride": [stride],
                                    "pad": [pad], "group": group})
        nb.layer(f"relu_{name}", "ReLU", [name], [name])
        ch[name] = n
        return name

    def pool(name: str, bottom: str) -> str:
        nb.layer(name, "Pooling", [bottom], [name],
                 pooling_param={"pool": "MAX", "kernel_size": 3, "stride": 2})
        ch[name] = ch[bottom]
        return name

    x = pool("pool1", conv("conv1", "data", 96, 11, 4))
    nb.layer("norm1", "LRN", [x], ["norm1"], lrn_param={"local_size": 5, "alpha": 1e-4})
    ch["norm1"] = ch[x]
    x = pool("pool2", conv("conv2", "norm1", 256, 5, pad=2, group=2))
    x = conv("conv3", x, 384, 3, pad=1)
    x = conv("conv4", x, 384, 3, pad=1, group=2)
    x = pool("pool5", conv("conv5", x, 256, 3, pad=1, group=2))
    k = ch[x] * 6 * 6
    fc = int(1024 * scale)
    nb.layer("fc6", "InnerProduct", [x], ["fc6"], blobs=[w(fc, k), np.zeros(fc, np.float32)],
             inner_product_param={"num_output": fc})
    nb.layer("relu6", "ReLU", ["fc6"], ["fc6"])
    nb.layer("drop6", "Dropout", ["fc6"], ["fc6"])
    nb.layer("fc8", "InnerProduct", ["fc6"], ["fc8"],
             blobs=[w(1000, fc), np.zeros(1000, np.float32)],
             inner_product_param={"num_output": 1000})
    nb.layer("prob", "Softmax", ["fc8"], ["prob"])
    return nb




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        nb = alexnet(a.scale)
        pt, cm = d / "alexnet.prototxt", d / "alexnet.caffemodel"
        nb.save(pt, cm)
        model = load_caffe(pt, weights=cm)
        tfl = save(model, d / "alexnet.tflite")
        data = cm.read_bytes()
        t_base = best(lambda: load(tfl), a.repeat)
        t_parse = best(lambda: parse_binary(data), a.repeat)
        t_load = best(lambda: load_caffe(pt, weights=cm), a.repeat)
        print(f"caffemodel {len(data) / 1e6:.1f} MB, {len(model.graph.ops)} ops")
        print(f"{'step':<36}{'ms':>10}{'x baseline':>12}")
        for name, t in (("flatbuffer load of the .tflite", t_base),
                        ("protobuf parse of the .caffemodel", t_parse),
                        ("load_caffe (prototxt + caffemodel)", t_load)):
            print(f"{name:<36}{t * 1e3:>10.1f}{t / t_base:>12.2f}")
        x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 227, 227)).astype(np.float32)
        it = Interpreter(model)
        it.invoke({"data": x})
        t_ref = best(lambda: it.invoke({"data": x}), a.repeat)
        try:
            import cv2
        except ImportError:
            print(f"reference runtime inference: {t_ref * 1e3:.1f} ms (no cv2 for a baseline)")
            return
        cv2.setNumThreads(1)
        net = cv2.dnn.readNetFromCaffe(str(pt), str(cm))
        net.setInput(x, "data")
        net.forward()

        def cv_run() -> None:
            net.setInput(x, "data")
            net.forward()

        t_cv = best(cv_run, a.repeat)
        print(f"{'OpenCV DNN inference, 1 thread':<36}{t_cv * 1e3:>10.1f}{1.0:>12.2f}")
        print(f"{'reference runtime inference':<36}{t_ref * 1e3:>10.1f}{t_ref / t_cv:>12.2f}")


if __name__ == "__main__":
    main()
