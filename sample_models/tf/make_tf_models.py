"""Build the TensorFlow-converted sample models of this folder.

Needs TensorFlow; not needed to use the toolkit; re-run by hand to regenerate the committed files.
Install TensorFlow in a virtual environment of its own (``pip install tensorflow-cpu``), then::

    python sample_models/tf/make_tf_models.py [OUTPUT_DIR]

OUTPUT_DIR defaults to the folder of this script. Every weight and every calibration sample comes
from a NumPy generator with a fixed seed, so the numbers are the same on every run (the exact
bytes may still differ between TensorFlow versions).

Files written:

- ``tf_cnn.tflite``: float32 CNN, input [1, 16, 16, 3]; conv + batch norm + ReLU, depthwise conv +
  batch norm + ReLU6, residual add, max pool, global average pool, dense, softmax.
- ``tf_cnn_int8.tflite``: the same CNN fully quantized to int8 (int8 input and output), for Vela.
- ``tf_instance_norm.tflite``: float32 instance norm over H and W of an [1, 8, 6, 12] input,
  written with primitive TF ops (MEAN, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, MUL, ...).
- ``tf_layer_norm.tflite``: float32 block on an [1, 10, 16] input: Keras LayerNormalization,
  Dense, residual add.

Each model is run once in the TFLite interpreter and its op list is printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

keras = tf.keras
SEED = 1234


def _rng(offset: int) -> np.random.Generator:
    """Return a NumPy generator seeded with ``SEED + offset``."""
    return np.random.default_rng(SEED + offset)


def _set_random_weights(model: keras.Model, seed_offset: int) -> None:
    """Give every weight of ``model`` a fixed pseudo-random value.

    Batch-norm moving variances get values in [0.5, 1.5] so the folded scales stay sensible.
    """
    rng = _rng(seed_offset)
    for layer in model.layers:
        new = []
        for var in layer.weights:
            shape = tuple(var.shape)
            name = var.path if hasattr(var, "path") else var.name
            if "moving_variance" in name:
                new.append(rng.uniform(0.5, 1.5, shape).astype(np.float32))
            elif "gamma" in name:
                new.append(rng.uniform(0.8, 1.2, shape).astype(np.float32))
            else:
                new.append((rng.standard_normal(shape) * 0.3).astype(np.float32))
        if new:
            layer.set_weights(new)


def build_cnn() -> keras.Model:
    """Return the small float32 CNN (input [1, 16, 16, 3], output [1, 10] probabilities)."""
    layers = keras.layers
    inp = keras.Input(shape=(16, 16, 3), batch_size=1, name="input")
    x = layers.Conv2D(8, 3, padding="same", use_bias=False, name="stem_conv")(inp)
    x = layers.BatchNormalization(name="stem_bn")(x)
    stem = layers.ReLU(name="stem_relu")(x)
    x = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw_conv")(stem)
    x = layers.BatchNormalization(name="dw_bn")(x)
    x = layers.ReLU(max_value=6.0, name="dw_relu6")(x)
    x = layers.Add(name="res_add")([stem, x])
    x = layers.MaxPool2D(2, name="pool")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(10, name="fc")(x)
    out = layers.Softmax(name="softmax")(x)
    model = keras.Model(inp, out, name="model")
    _set_random_weights(model, 0)
    return model


def build_layer_norm_block() -> keras.Model:
    """Return the float32 block LayerNormalization -> Dense -> residual add on [1, 10, 16]."""
    layers = keras.layers
    inp = keras.Input(shape=(10, 16), batch_size=1, name="input")
    x = layers.LayerNormalization(axis=-1, epsilon=1e-5, name="ln")(inp)
    x = layers.Dense(16, name="proj")(x)
    out = layers.Add(name="residual")([inp, x])
    model = keras.Model(inp, out, name="model")
    _set_random_weights(model, 2)
    return model


def _instance_norm_concrete() -> tuple[tf.types.experimental.ConcreteFunction, tf.Module]:
    """Return a concrete function computing instance norm of an [1, 8, 6, 12] float32 tensor.

    ``y = (x - mean) * rsqrt(var + eps) * gamma + beta`` with mean and variance over axes 1 and 2
    and per-channel constants gamma and beta of shape [12].
    """
    rng = _rng(1)
    module = tf.Module(name="model")
    module.gamma = tf.constant(rng.uniform(0.5, 1.5, 12).astype(np.float32))
    module.beta = tf.constant((rng.standard_normal(12) * 0.1).astype(np.float32))
    eps = 1e-5

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 6, 12], tf.float32, name="input")])
    def instance_norm(x: tf.Tensor) -> tf.Tensor:
        with tf.name_scope("instance_norm"):
            mean = tf.reduce_mean(x, axis=[1, 2], keepdims=True, name="mean")
            sq = tf.math.squared_difference(x, mean, name="squared_difference")
            var = tf.reduce_mean(sq, axis=[1, 2], keepdims=True, name="variance")
            inv = tf.math.rsqrt(tf.add(var, eps, name="add_eps"), name="rsqrt")
            centred = tf.subtract(x, mean, name="centred")
            normed = tf.multiply(centred, inv, name="normalised")
            scaled = tf.multiply(normed, module.gamma, name="scale")
            return tf.add(scaled, module.beta, name="shift")

    return instance_norm.get_concrete_function(), module


def _convert(
    conv: tf.lite.TFLiteConverter,
    representative: Callable[[], Iterator[list[np.ndarray]]] | None = None,
) -> bytes:
    """Return the TFLite flatbuffer ``conv`` makes; int8 quantized when a dataset is given."""
    if representative is not None:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def _cnn_calibration() -> Iterator[list[np.ndarray]]:
    """Yield 64 fixed pseudo-random calibration inputs of shape [1, 16, 16, 3] in [-1, 1]."""
    rng = _rng(100)
    for _ in range(64):
        yield [rng.uniform(-1.0, 1.0, (1, 16, 16, 3)).astype(np.float32)]


def describe(path: Path) -> list[tuple[str, str]]:
    """Run ``path`` once on random input and return its ops as (op type, output tensor names).

    Uses the LiteRT interpreter when ``ai_edge_litert`` is installed, else TensorFlow's, both
    without default delegates (so no DELEGATE node hides the built-in ops). Several output names
    of one op are joined with ``;;``.
    """
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        Interpreter = tf.lite.Interpreter
        OpResolverType = tf.lite.experimental.OpResolverType
    interp = Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interp.allocate_tensors()
    rng = _rng(200)
    for d in interp.get_input_details():
        if d["dtype"] == np.int8:
            data = rng.integers(-128, 128, d["shape"]).astype(np.int8)
        else:
            data = rng.standard_normal(d["shape"]).astype(d["dtype"])
        interp.set_tensor(d["index"], data)
    interp.invoke()
    tensors = {t["index"]: t["name"] for t in interp.get_tensor_details()}
    ops = []
    for op in interp._get_ops_details():
        outs = [tensors.get(i, "?") for i in op["outputs"]]
        ops.append((op["op_name"], ";;".join(outs)))
    return ops


def main(out_dir: Path) -> None:
    """Write the four sample models into ``out_dir`` and print their op lists."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)

    from_keras = tf.lite.TFLiteConverter.from_keras_model
    cnn = build_cnn()
    models = {
        "tf_cnn.tflite": _convert(from_keras(cnn)),
        "tf_cnn_int8.tflite": _convert(from_keras(cnn), _cnn_calibration),
    }
    in_cf, in_module = _instance_norm_concrete()
    models["tf_instance_norm.tflite"] = _convert(
        tf.lite.TFLiteConverter.from_concrete_functions([in_cf], in_module)
    )
    models["tf_layer_norm.tflite"] = _convert(from_keras(build_layer_norm_block()))

    for name, data in models.items():
        path = out_dir / name
        path.write_bytes(data)
        print(f"== {name} ({len(data)} bytes)")
        for i, (op, out) in enumerate(describe(path)):
            print(f"  {i:2d} {op:24s} {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
