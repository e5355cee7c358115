"""Make the tf2onnx fixture: one Keras model of the TFLite zoo exported to ONNX by tf2onnx.

Run by hand, once, in an environment with ``tensorflow`` (2.21) and ``tf2onnx`` (the tests
need neither)::

    python sample_models/onnx/make_tf2onnx.py

It rebuilds ``ds_cnn_b1`` exactly as ``sample_models/zoo/make_zoo.py`` does (the same
deterministic build and random weights as ``ds_cnn_b1.tflite``), exports it with
``tf2onnx.convert.from_function`` at opset 17 and writes into this folder:

* ``ds_cnn_b1.tf2onnx.onnx``: the export (tf2onnx keeps TensorFlow scopes in node names,
  ``ds_cnn_1/block_0_pw_1/BiasAdd``; the depthwise convolutions it rebuilds NCHW are renamed
  ``Conv__N``);
* ``tf2onnx.json``: the tool versions, the Keras layer list (``keras_layers``: ``[name,
  class]``, as ``zoo.json`` records it) the importer's layer names are checked against, and
  Keras's own output on the input (``keras_output``, to the file's float32 precision);
* ``inputs_tf2onnx.npz``: the input (``mfcc``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import tf2onnx

HERE = Path(__file__).resolve().parent
ZOO = HERE.parent / "zoo"
NAME = "ds_cnn_b1"


def main() -> None:
    sys.path.insert(0, str(ZOO))
    import make_zoo

    model = make_zoo.ds_cnn_kws_b1()
    spec = [tf.TensorSpec(t.shape, t.dtype, name="mfcc") for t in model.inputs]
    path = HERE / f"{NAME}.tf2onnx.onnx"
    tf2onnx.convert.from_function(tf.function(lambda x: model(x)), input_signature=spec,
                                  opset=17, output_path=str(path))
    x = np.random.default_rng(26).standard_normal((1, 49, 10, 1)).astype(np.float32)
    np.savez(HERE / "inputs_tf2onnx.npz", mfcc=x)
    record = {"tensorflow": tf.__version__, "tf2onnx": tf2onnx.__version__, "model": NAME,
              "file": path.name, "keras_layers": make_zoo.keras_layers(model),
              "keras_output": np.asarray(model(x)).astype(np.float32).tolist()}
    (HERE / "tf2onnx.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
    shutil.rmtree(ZOO / "__pycache__", ignore_errors=True)
    print(path.name, "done")


if __name__ == "__main__":
    main()
