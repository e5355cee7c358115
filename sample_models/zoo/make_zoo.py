"""Build the converter zoo: Keras architectures converted by TensorFlow's TFLite converter.

Needs TensorFlow; not needed to use the toolkit; re-run by hand to regenerate the committed
files. Install TensorFlow in a virtual environment of its own
(``pip install tensorflow-cpu==2.21.0``), then::

    python sample_models/zoo/make_zoo.py [OUTPUT_DIR] [--only NAME,NAME]
    python sample_models/zoo/make_zoo.py --layers-only [--only NAME,NAME]

``--layers-only`` rebuilds each Keras model (the same deterministic build) without converting
it, checks that every layer name appears as a scope of the committed ``.tflite`` and records
the layer list in ``zoo.json`` (``keras_layers``).

OUTPUT_DIR defaults to the folder of this script. Weights are random (fixed NumPy seeds),
inputs small. Each model is written as ``<name>.tflite`` (float32) and, where the converter
quantizes every op, ``<name>_int8.tflite`` (full int8, int8 input and output, calibrated on
fixed pseudo-random data); ``<name>_dynamic.tflite`` is dynamic-range quantized (int8
weights, float32 activations: LiteRT's hybrid kernels). A model whose Keras input has no
batch size has a free batch dimension (``shape_signature`` -1) in the file; ``_b1`` models
fix it to 1.

``zoo.json`` lists every file with its inputs (name, shape signature, dtype, value range for
integer inputs), op codes and ``keras_layers``: the Keras model's layers (``model.layers``, nested
models flattened) as ``[name, class]`` pairs, ``null`` for a ``tf.function`` model (which has
none); README.md is the human-readable form of it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

keras = tf.keras
layers = keras.layers
SEED = 4321


def _rng(offset: int) -> np.random.Generator:
    """Return a NumPy generator seeded with ``SEED + offset``."""
    return np.random.default_rng(SEED + offset)


def _set_random_weights(model: keras.Model, seed_offset: int) -> None:
    """Give every weight of ``model`` a fixed pseudo-random value of a sensible scale.

    Kernels get a fan-in scaled normal (so activations neither vanish nor explode through a
    deep network), batch-norm variances values in [0.5, 1.5], gammas values near 1.
    """
    rng = _rng(seed_offset)
    for var in model.weights:
        shape = tuple(var.shape)
        name = var.path if hasattr(var, "path") else var.name
        if "moving_variance" in name:
            value = rng.uniform(0.5, 1.5, shape)
        elif "gamma" in name or False:
            value = rng.uniform(0.8, 1.2, shape)
        elif len(shape) >= 2:
            fan_in = int(np.prod(shape[:-1])) if "depthwise" not in name else int(
                np.prod(shape[:2]))
            if "embeddings" in name:
                fan_in = 1
            value = rng.standard_normal(shape) * (1.0 / np.sqrt(max(fan_in, 1)))
        else:
            value = rng.standard_normal(shape) * 0.1
        var.assign(value.astype(var.dtype if isinstance(var.dtype, str) else "float32"))


@dataclass
class Spec:
    """One zoo model: how to build it, its inputs and whether to quantize it."""

    name: str
    build: Callable[[], keras.Model | tf.types.experimental.ConcreteFunction]
    int8: bool = True
    f32: bool = True
    dynamic: bool = False  # also a dynamic-range (hybrid: int8 weights, float32 input) file
    about: str = ""
    int_range: tuple[int, int] = (0, 8)  # value range of integer inputs
    concrete: bool = False
    extra: dict[str, object] = field(default_factory=dict)


# ---------------------------------------------------------------- keras.applications
def _app(fn: Callable[..., keras.Model], size: int, **kw: object) -> Callable[[], keras.Model]:
    def build() -> keras.Model:
        m = fn(input_shape=(size, size, 3), weights=None, classes=10, **kw)
        _set_random_weights(m, 1)
        return m

    return build


def mobilenet_v1() -> keras.Model:
    """MobileNet v1, alpha 0.25, 64x64 input, 10 classes."""
    return _app(keras.applications.MobileNet, 64, alpha=0.25)()


def mobilenet_v2() -> keras.Model:
    """MobileNet v2, alpha 0.35, 64x64 input, 10 classes."""
    return _app(keras.applications.MobileNetV2, 64, alpha=0.35)()


def mobilenet_v3_small() -> keras.Model:
    """MobileNet v3 small, alpha 0.75, 64x64, 10 classes (hard-swish, squeeze-excite)."""
    return _app(keras.applications.MobileNetV3Small, 64, alpha=0.75,
                include_preprocessing=False)()


def mobilenet_v3_large() -> keras.Model:
    """MobileNet v3 large, alpha 0.75, minimalistic, 64x64, 10 classes."""
    return _app(keras.applications.MobileNetV3Large, 64, alpha=0.75, minimalistic=True,
                include_preprocessing=False)()


def efficientnet_b0() -> keras.Model:
    """EfficientNet B0 at 64x64, 10 classes (swish, squeeze-excite, no rescaling)."""
    m = keras.applications.EfficientNetB0(input_shape=(64, 64, 3), weights=None, classes=10,
                                          include_top=True)
    _set_random_weights(m, 2)
    return m


# ---------------------------------------------------------------- hand-written models
def _finish(inp: object, out: object, name: str, seed: int) -> keras.Model:
    m = keras.Model(inp, out, name=name)
    _set_random_weights(m, seed)
    return m


def ds_cnn_kws(batch: int | None = None) -> keras.Model:
    """A DS-CNN keyword spotter on [49, 10, 1] MFCCs: conv, 4 depthwise-separable blocks
    with batch norm and ReLU, global average pool, dense, softmax."""
    inp = keras.Input((49, 10, 1), batch_size=batch, name="mfcc")
    x = layers.Conv2D(16, (10, 4), strides=(2, 2), padding="same", name="conv0")(inp)
    x = layers.BatchNormalization(name="bn0")(x)
    x = layers.ReLU(name="relu0")(x)
    for i in range(4):
        x = layers.DepthwiseConv2D(3, padding="same", name=f"block_{i}_dw")(x)
        x = layers.BatchNormalization(name=f"block_{i}_dw_bn")(x)
        x = layers.ReLU(name=f"block_{i}_dw_relu")(x)
        x = layers.Conv2D(16, 1, name=f"block_{i}_pw")(x)
        x = layers.BatchNormalization(name=f"block_{i}_pw_bn")(x)
        x = layers.ReLU(name=f"block_{i}_pw_relu")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(12, name="fc")(x)
    out = layers.Softmax(name="softmax")(x)
    return _finish(inp, out, "ds_cnn", 3)


def ds_cnn_kws_b1() -> keras.Model:
    """The DS-CNN keyword spotter with the batch fixed to 1."""
    return ds_cnn_kws(1)


def unet() -> keras.Model:
    """A small U-Net on [32, 32, 3]: conv/max-pool encoder, a Conv2DTranspose decoder stage
    and a bilinear UpSampling2D stage, skip concatenations, a 1x1 head with sigmoid."""
    inp = keras.Input((32, 32, 3), name="image")
    e1 = layers.Conv2D(8, 3, padding="same", activation="relu", name="enc1_conv")(inp)
    p1 = layers.MaxPooling2D(name="enc1_pool")(e1)
    e2 = layers.Conv2D(16, 3, padding="same", activation="relu", name="enc2_conv")(p1)
    p2 = layers.MaxPooling2D(name="enc2_pool")(e2)
    b = layers.Conv2D(32, 3, padding="same", activation="relu", name="bottleneck_conv")(p2)
    u2 = layers.Conv2DTranspose(16, 2, strides=2, padding="same", name="dec2_up")(b)
    d2 = layers.Concatenate(name="dec2_concat")([u2, e2])
    d2 = layers.Conv2D(16, 3, padding="same", activation="relu", name="dec2_conv")(d2)
    u1 = layers.UpSampling2D(interpolation="bilinear", name="dec1_up")(d2)
    d1 = layers.Concatenate(name="dec1_concat")([u1, e1])
    d1 = layers.Conv2D(8, 3, padding="same", activation="relu", name="dec1_conv")(d1)
    out = layers.Conv2D(1, 1, activation="sigmoid", name="head")(d1)
    return _finish(inp, out, "unet", 4)


def conv_variants() -> keras.Model:
    """Convolutions on [16, 16, 4]: dilated conv, separable conv, depthwise with multiplier,
    strided conv, Conv2DTranspose (valid, stride 2), nearest UpSampling2D, ZeroPadding2D,
    Cropping2D, average/max pooling, global max pooling."""
    inp = keras.Input((16, 16, 4), name="x")
    a = layers.Conv2D(8, 3, dilation_rate=2, padding="same", name="dilated")(inp)
    b = layers.SeparableConv2D(8, 3, padding="same", activation="relu", name="separable")(inp)
    c = layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="dw_mult")(inp)
    x = layers.Add(name="sum")([a, b, c])
    x = layers.Conv2D(8, 3, strides=2, padding="valid", name="strided")(x)
    x = layers.Conv2DTranspose(8, 3, strides=2, padding="valid", name="deconv")(x)
    x = layers.ZeroPadding2D(((1, 2), (0, 1)), name="pad")(x)
    x = layers.Cropping2D(((1, 1), (2, 0)), name="crop")(x)
    x = layers.AveragePooling2D(2, name="avg_pool")(x)
    x = layers.UpSampling2D(2, interpolation="nearest", name="up_nearest")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="max_pool")(x)
    out = layers.GlobalMaxPooling2D(name="gmp")(x)
    return _finish(inp, out, "convs", 5)


def conv1d_3d() -> keras.Model:
    """Conv1D (causal and strided), pooling 1D, and Conv3D on a second input."""
    seq = keras.Input((20, 6), name="seq")
    vol = keras.Input((6, 8, 8, 2), name="volume")
    x = layers.Conv1D(8, 3, padding="causal", activation="relu", name="causal")(seq)
    x = layers.Conv1D(8, 3, strides=2, name="strided1d")(x)
    x = layers.MaxPooling1D(2, name="pool1d")(x)
    x = layers.AveragePooling1D(2, padding="same", name="avg1d")(x)
    x = layers.GlobalAveragePooling1D(name="gap1d")(x)
    v = layers.Conv3D(4, 3, padding="same", activation="relu", name="conv3d")(vol)
    v = layers.Conv3D(4, (1, 3, 3), strides=(1, 2, 2), name="conv3d_s2")(v)
    v = layers.Flatten(name="flatten3d")(v)
    v = layers.Dense(8, name="fc3d")(v)
    out = layers.Concatenate(name="merge")([x, v])
    return _finish([seq, vol], out, "conv1d_3d", 6)


def norms() -> keras.Model:
    """Batch, Layer, Group and Unit normalization on [8, 8, 8] feature maps."""
    inp = keras.Input((8, 8, 8), name="x")
    x = layers.Conv2D(8, 1, name="conv")(inp)
    x = layers.BatchNormalization(name="bn")(x)
    x = layers.LayerNormalization(name="ln")(x)
    x = layers.GroupNormalization(groups=4, name="gn")(x)
    x = layers.UnitNormalization(name="unit")(x)
    out = layers.Dense(4, name="fc")(x)
    return _finish(inp, out, "norms", 7)


def activations() -> keras.Model:
    """Activation layers on a dense feature: PReLU, ELU, LeakyReLU, softplus, swish,
    GELU (tanh form; the exact form is in ``vit_block``), hard-sigmoid, hard-swish, sigmoid,
    tanh, relu6, selu, softsign, log-softmax."""
    inp = keras.Input((16,), name="x")
    h = layers.Dense(16, name="fc")(inp)
    acts: list[object] = [
        layers.PReLU(name="prelu")(h),
        layers.ELU(name="elu")(h),
        layers.LeakyReLU(negative_slope=0.2, name="leaky")(h),
        layers.Activation("softplus", name="softplus")(h),
        layers.Activation("swish", name="swish")(h),
        layers.Lambda(lambda v: tf.nn.gelu(v, approximate=True), name="gelu_tanh")(h),
        layers.Activation("hard_sigmoid", name="hard_sigmoid")(h),
        layers.Activation("hard_swish", name="hard_swish")(h),
        layers.Activation("sigmoid", name="sigmoid")(h),
        layers.Activation("tanh", name="tanh")(h),
        layers.ReLU(max_value=6.0, name="relu6")(h),
        layers.Activation("selu", name="selu")(h),
        layers.Activation("softsign", name="softsign")(h),
        layers.Activation("log_softmax", name="log_softmax")(h),
    ]
    out = layers.Concatenate(name="all")(acts)
    return _finish(inp, out, "activations", 8)


def written_out_activations() -> keras.Model:
    """Hard-swish written out in TF ops, ``x * relu6(x + 3) / 6`` and
    ``x * (relu6(x + 3) * (1/6))``, after convolutions: the converter writes both as
    HARD_SWISH builtins."""
    inp = keras.Input((8, 8, 4), name="x")
    x = layers.Conv2D(8, 3, padding="same", name="conv1")(inp)
    x = layers.Lambda(lambda v: v * tf.nn.relu6(v + 3.0) / 6.0, name="hswish1")(x)
    x = layers.Conv2D(8, 3, padding="same", name="conv2")(x)
    x = layers.Lambda(lambda v: v * (tf.nn.relu6(v + 3.0) * (1.0 / 6.0)), name="hswish2")(x)
    out = layers.GlobalAveragePooling2D(name="gap")(x)
    return _finish(inp, out, "written_out", 16)


def reshapes_merges() -> keras.Model:
    """Permute, RepeatVector, Flatten, Reshape and the merge layers (add, subtract,
    multiply, average, maximum, minimum, concatenate, dot) on two inputs."""
    a = keras.Input((4, 6), name="a")
    b = keras.Input((4, 6), name="b")
    merged = [
        layers.Add(name="add")([a, b]),
        layers.Subtract(name="subtract")([a, b]),
        layers.Multiply(name="multiply")([a, b]),
        layers.Average(name="average")([a, b]),
        layers.Maximum(name="maximum")([a, b]),
        layers.Minimum(name="minimum")([a, b]),
    ]
    x = layers.Concatenate(axis=-1, name="concat")(merged)  # [4, 36]
    x = layers.Permute((2, 1), name="permute")(x)  # [36, 4]
    x = layers.Reshape((6, 24), name="reshape")(x)
    d = layers.Dot(axes=(2, 2), name="dot")([x, x])  # [6, 6]
    f = layers.Flatten(name="flatten")(d)
    f = layers.Dense(5, name="fc")(f)
    out = layers.RepeatVector(3, name="repeat")(f)
    return _finish([a, b], out, "reshapes_merges", 9)


def transformer_block(batch: int | None = None) -> keras.Model:
    """A ViT-style encoder block on 16 tokens of width 32: LayerNormalization,
    MultiHeadAttention (4 heads), residual, LayerNormalization, GELU MLP, residual."""
    inp = keras.Input((16, 32), batch_size=batch, name="tokens")
    x = layers.LayerNormalization(epsilon=1e-6, name="block_0_ln1")(inp)
    x = layers.MultiHeadAttention(4, 8, name="block_0_mha")(x, x)
    x = layers.Add(name="block_0_res1")([inp, x])
    y = layers.LayerNormalization(epsilon=1e-6, name="block_0_ln2")(x)
    y = layers.Dense(64, activation="gelu", name="block_0_mlp1")(y)
    y = layers.Dense(32, name="block_0_mlp2")(y)
    out = layers.Add(name="block_0_res2")([x, y])
    return _finish(inp, out, "vit_block", 10)


def transformer_block_b1() -> keras.Model:
    """The transformer block with the batch fixed to 1."""
    return transformer_block(1)


def embedding_classifier() -> keras.Model:
    """Embedding (vocabulary 32, width 8) over 12 int32 tokens, 1D conv, global average
    pooling, dense."""
    inp = keras.Input((12,), dtype="int32", name="tokens")
    x = layers.Embedding(32, 8, name="embed")(inp)
    x = layers.Conv1D(8, 3, activation="relu", name="conv")(x)
    x = layers.GlobalAveragePooling1D(name="gap")(x)
    out = layers.Dense(3, name="fc")(x)
    return _finish(inp, out, "embedding", 11)


def _rnn(kind: str, bidirectional: bool = False, batch: int | None = 1) -> keras.Model:
    inp = keras.Input((10, 6), batch_size=batch, name="seq")
    cls = {"lstm": layers.LSTM, "gru": layers.GRU, "rnn": layers.SimpleRNN}[kind]
    rnn = cls(8, return_sequences=True, name=kind)
    x = layers.Bidirectional(rnn, name=f"bi_{kind}")(inp) if bidirectional else rnn(inp)
    x = cls(8, name=f"{kind}_last")(x)
    out = layers.Dense(4, name="fc")(x)
    return _finish(inp, out, f"{kind}_model", 12)


def lstm() -> keras.Model:
    """Two stacked Keras LSTM layers (8 units) on [10, 6], dense head."""
    return _rnn("lstm")


def gru() -> keras.Model:
    """Two stacked Keras GRU layers (8 units) on [10, 6], dense head."""
    return _rnn("gru")


def simple_rnn() -> keras.Model:
    """Two stacked Keras SimpleRNN layers (8 units) on [10, 6], dense head."""
    return _rnn("rnn")


def bi_lstm() -> keras.Model:
    """A Bidirectional LSTM then an LSTM (8 units) on [10, 6], dense head."""
    return _rnn("lstm", bidirectional=True)


def bi_gru_b1() -> keras.Model:
    """A Bidirectional GRU then a GRU on [1, 10, 6] (batch fixed), dense head."""
    return _rnn("gru", bidirectional=True, batch=1)


# ---------------------------------------------------------------- tf.function models
def _concrete(fn: Callable[..., tf.Tensor], *specs: tf.TensorSpec
              ) -> tf.types.experimental.ConcreteFunction:
    return tf.function(fn, input_signature=list(specs)).get_concrete_function()


def fused_lstm() -> object:
    """The fused LSTM form: a Keras 2 (``tf_keras``) LSTM, which the converter turns into
    ``UNIDIRECTIONAL_SEQUENCE_LSTM``, and a Bidirectional one (two such ops and a
    REVERSE_V2-free concatenation), batch 1, [10, 6] input."""
    import tf_keras

    kl = tf_keras.layers
    inp = tf_keras.Input((10, 6), batch_size=1, name="seq")
    x = kl.Bidirectional(kl.LSTM(8, return_sequences=True, name="lstm"), name="bi_lstm")(inp)
    x = kl.LSTM(8, name="lstm_last")(x)
    out = kl.Dense(4, name="fc")(x)
    m = tf_keras.Model(inp, out, name="fused_lstm")
    _set_random_weights(m, 15)
    return m


def fused_bilstm() -> object:
    """One Bidirectional ``tf_keras`` LSTM (8 units, fused: two UNIDIRECTIONAL_SEQUENCE_LSTM)
    on [1, 10, 6], concatenated last states, dense head; int8 too (the integer LSTM kernel
    with 16-bit cell state)."""
    import tf_keras

    kl = tf_keras.layers
    inp = tf_keras.Input((10, 6), batch_size=1, name="seq")
    x = kl.Bidirectional(kl.LSTM(8, name="lstm"), name="bi_lstm")(inp)
    out = kl.Dense(4, name="fc")(x)
    m = tf_keras.Model(inp, out, name="fused_bilstm")
    _set_random_weights(m, 17)
    return m


def stacked_bilstm() -> object:
    """Stacked ``tf_keras`` LSTMs (fused): a Bidirectional LSTM (8 units) returning sequences,
    then an LSTM (6 units), then a dense head of 12 on [1, 10, 6]: three
    UNIDIRECTIONAL_SEQUENCE_LSTM and REVERSE_V2 in the file; int8 too."""
    import tf_keras

    kl = tf_keras.layers
    inp = tf_keras.Input((10, 6), batch_size=1, name="seq")
    x = kl.Bidirectional(kl.LSTM(8, return_sequences=True, name="lstm"), name="bi_lstm")(inp)
    x = kl.LSTM(6, name="lstm_top")(x)
    out = kl.Dense(12, name="fc")(x)
    m = tf_keras.Model(inp, out, name="stacked_bilstm")
    _set_random_weights(m, 29)
    return m


def tensor_ops() -> tf.types.experimental.ConcreteFunction:
    """Raw TF ops on a free-batch [N, 6, 8] float input: mean/max/min/sum/prod reductions,
    argmax/argmin, comparisons and ``where``, strided slices (negative strides, shrink
    and new axes), tile, broadcast_to, gather and gather_nd, reverse, mirror pad, clip,
    floor/ceil/round, square, log, sin/cos, cumsum, one-hot-free select; shape arithmetic."""
    idx = tf.constant([5, 0, 2, 2], tf.int32)

    def fn(x: tf.Tensor) -> tuple[tf.Tensor, ...]:
        m = tf.reduce_mean(x, axis=1, keepdims=True)
        mx = tf.reduce_max(x, axis=-1)
        mn = tf.reduce_min(x, axis=[1, 2])
        s = tf.reduce_sum(tf.square(x), axis=2)
        p = tf.reduce_prod(tf.clip_by_value(x, 0.5, 1.5), axis=1)
        am = tf.argmax(x, axis=-1, output_type=tf.int32)
        an = tf.argmin(x, axis=2, output_type=tf.int32)
        cond = tf.logical_and(tf.greater(x, m), tf.less_equal(x, 0.8))
        w = tf.where(cond, x, tf.zeros_like(x) - 1.0)
        eq = tf.cast(tf.equal(am, 3), tf.float32) + tf.cast(tf.not_equal(an, 0), tf.float32)
        sl = x[:, ::-2, 1:7:3]
        sl2 = x[:, 2, tf.newaxis, :]
        t = tf.tile(sl2, [1, 3, 2])
        bshape = tf.stack([tf.shape(x)[0], 4, 6, 8])
        bc = tf.broadcast_to(x[:, tf.newaxis, :, :], bshape)
        g = tf.gather(x, idx, axis=1)
        rv = tf.reverse(x, axis=[2])
        mp = tf.pad(x, [[0, 0], [1, 2], [2, 1]], mode="REFLECT")
        rnd = tf.floor(x * 3.0) + tf.math.ceil(x) + tf.round(x * 2.0)
        tr = tf.sin(x) * tf.cos(x) + tf.math.log(tf.abs(x) + 1.0)
        cs = tf.math.cumsum(x, axis=2)
        flat = tf.reshape(x, [tf.shape(x)[0], -1])
        return (m, mx, mn, s, p, am, an, w, eq, sl, t, bc, g, rv, mp, rnd, tr, cs, flat)

    return _concrete(fn, tf.TensorSpec([None, 6, 8], tf.float32, name="x"))


def gather_embed_ops() -> tf.types.experimental.ConcreteFunction:
    """Integer inputs: gather and gather_nd by index tensors, one-hot free lookups,
    comparisons of ints, int32 arithmetic, and a float table lookup."""
    table = tf.constant(_rng(14).standard_normal((16, 5)).astype("f4"))

    def fn(ids: tf.Tensor) -> tuple[tf.Tensor, ...]:
        e = tf.gather(table, ids)  # [N, 4, 5]
        nd = tf.gather_nd(table, tf.expand_dims(ids, -1))
        big = tf.cast(ids > 7, tf.int32) * 2 + ids % 3
        mx = tf.reduce_max(ids, axis=1)
        sel = tf.where(ids >= 4, ids, 15 - ids)
        return e, nd, big, mx, sel

    return _concrete(fn, tf.TensorSpec([None, 4], tf.int32, name="ids"))


def control_flow() -> tf.types.experimental.ConcreteFunction:
    """``tf.cond`` (IF) and a ``tf.while_loop`` (WHILE) with a data-dependent bound."""
    def fn(x: tf.Tensor, n: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        y = tf.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: tf.nn.relu(x) - 1.0)

        def body(i: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return i + 1, tf.tanh(acc * 0.9 + x)

        _, z = tf.while_loop(lambda i, acc: i < n[0], body, (tf.constant(0), y))
        return y, z

    return _concrete(fn, tf.TensorSpec([2, 5], tf.float32, name="x"),
                     tf.TensorSpec([1], tf.int32, name="n"))


SPECS: list[Spec] = [
    Spec("mobilenet_v1", mobilenet_v1),
    Spec("mobilenet_v2", mobilenet_v2),
    Spec("mobilenet_v3_small", mobilenet_v3_small),
    Spec("mobilenet_v3_large", mobilenet_v3_large, f32=False),
    Spec("efficientnet_b0", efficientnet_b0, f32=False),
    Spec("ds_cnn", ds_cnn_kws),
    Spec("ds_cnn_b1", ds_cnn_kws_b1),
    Spec("unet", unet),
    Spec("convs", conv_variants),
    Spec("conv1d_3d", conv1d_3d),
    Spec("norms", norms),
    Spec("activations", activations),
    Spec("reshapes_merges", reshapes_merges),
    Spec("hard_swish_ops", written_out_activations),
    Spec("vit_block", transformer_block),
    Spec("vit_block_b1", transformer_block_b1, dynamic=True),
    Spec("embedding", embedding_classifier, int8=False),
    Spec("lstm", lstm, int8=False),
    Spec("gru", gru, int8=False),
    Spec("simple_rnn", simple_rnn, int8=False),
    Spec("bi_lstm", bi_lstm, int8=False),
    Spec("bi_gru_b1", bi_gru_b1, int8=False),
    Spec("fused_lstm", fused_lstm, int8=False),
    Spec("fused_bilstm", fused_bilstm),
    Spec("stacked_bilstm", stacked_bilstm),
    Spec("tensor_ops", tensor_ops, int8=False, concrete=True),
    Spec("gather_ops", gather_embed_ops, int8=False, concrete=True, int_range=(0, 16)),
    Spec("control_flow", control_flow, int8=False, concrete=True, int_range=(0, 6)),
]


# ---------------------------------------------------------------- conversion
def _input_specs(obj: object) -> list[tuple[list[int], str]]:
    if hasattr(obj, "layers"):
        return [([-1 if d is None else int(d) for d in i.shape], str(i.dtype))
                for i in obj.inputs]
    specs = obj.structured_input_signature[0]  # type: ignore[attr-defined]
    return [([-1 if d is None else int(d) for d in s.shape], s.dtype.name) for s in specs]


def _calibration(specs: list[tuple[list[int], str]], spec: Spec
                 ) -> Callable[[], Iterator[list[np.ndarray]]]:
    def data() -> Iterator[list[np.ndarray]]:
        rng = _rng(100)
        for _ in range(32):
            row = []
            for shape, dtype in specs:
                shp = [1 if d < 0 else d for d in shape]
                if "int" in dtype:
                    row.append(rng.integers(*spec.int_range, shp).astype(dtype))
                else:
                    row.append(rng.uniform(-1.0, 1.0, shp).astype(np.float32))
            yield row

    return data


def _converter(obj: object) -> tf.lite.TFLiteConverter:
    if hasattr(obj, "layers"):
        return tf.lite.TFLiteConverter.from_keras_model(obj)
    return tf.lite.TFLiteConverter.from_concrete_functions([obj])


def convert(spec: Spec, obj: object, int8: bool, dynamic: bool = False) -> bytes:
    """Return the flatbuffer of ``obj``: float32, full int8 with int8 input and output, or
    (``dynamic``) dynamic-range quantized: int8 weights, float32 activations."""
    conv = _converter(obj)
    if dynamic:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif int8:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = _calibration(_input_specs(obj), spec)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def op_codes(path: Path) -> list[str]:
    """Run ``path`` once in TF's interpreter (builtin kernels) and return its op names in
    execution order over all subgraphs (subgraph 0 first)."""
    interp = tf.lite.Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType
        .BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interp.allocate_tensors()
    rng = _rng(200)
    for d in interp.get_input_details():
        if d["dtype"] == np.int8:
            data = rng.integers(-128, 128, d["shape"]).astype(np.int8)
        elif np.issubdtype(d["dtype"], np.integer):
            data = rng.integers(0, 6, d["shape"]).astype(d["dtype"])
        else:
            data = rng.uniform(-1, 1, d["shape"]).astype(d["dtype"])
        interp.set_tensor(d["index"], data)
    interp.invoke()
    return sorted({op["op_name"] for op in interp._get_ops_details()})


def keras_layers(obj: object) -> list[list[str]] | None:
    """Return ``[name, class name]`` of every layer of a Keras model (``model.layers``, the
    layers of a nested model in its place), or None for a ``tf.function``."""
    if not hasattr(obj, "layers"):
        return None
    out: list[list[str]] = []

    def walk(model: object) -> None:
        for layer in model.layers:  # type: ignore[attr-defined]
            if hasattr(layer, "layers") and type(layer).__name__ in ("Functional", "Model",
                                                                     "Sequential"):
                walk(layer)
            else:
                out.append([layer.name, type(layer).__name__])

    walk(obj)
    return out


def record_layers(out_dir: Path, only: set[str] | None) -> None:
    """Record ``keras_layers`` of every zoo file in ``zoo.json`` from a rebuild of its model,
    checking each name is a scope of the committed file (``/name/`` or ``/name_1/``)."""
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    index_path = out_dir / "zoo.json"
    index = json.loads(index_path.read_text())
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        try:
            obj = spec.build()
        except ImportError as e:
            print(f"!! {spec.name}: {e}")
            continue
        found = keras_layers(obj)
        for name, entry in index.items():
            if name not in (spec.name, f"{spec.name}_int8", f"{spec.name}_dynamic"):
                continue
            data = (out_dir / entry["file"]).read_bytes()
            if found is not None:
                absent = [n for n, c in found if c != "InputLayer"
                          and f"/{n}/".encode() not in data
                          and f"/{n}_1/".encode() not in data]
                print(f"== {name}: {len(found)} layers; not a scope of the file: {absent}")
            entry["keras_layers"] = found
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")


def main(out_dir: Path, only: set[str] | None) -> None:
    """Write the zoo into ``out_dir``, with ``zoo.json``, and print each file's ops."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    index_path = out_dir / "zoo.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        obj = spec.build()
        kinds = ["f32"] * spec.f32 + ["int8"] * spec.int8 + ["dynamic"] * spec.dynamic
        for kind in kinds:
            int8 = kind == "int8"
            name = spec.name if kind == "f32" else f"{spec.name}_{kind}"
            try:
                data = convert(spec, obj, int8, kind == "dynamic")
            except Exception as e:
                print(f"!! {name}: {type(e).__name__}: {str(e)[:300]}")
                continue
            path = out_dir / f"{name}.tflite"
            path.write_bytes(data)
            ops = op_codes(path)
            index[name] = {
                "file": path.name,
                "about": (spec.build.__doc__ or "").strip().split("\n\n")[0],
                "int8": int8,
                "inputs": [{"shape": s, "dtype": "int8" if int8 and "float" in d else d}
                           for s, d in _input_specs(obj)],
                "int_range": list(spec.int_range),
                "bytes": len(data),
                "ops": ops,
                "keras_layers": keras_layers(obj),
            }
            print(f"== {name} ({len(data)} bytes): {' '.join(ops)}")
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only_arg = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--only=")]
    run = record_layers if "--layers-only" in sys.argv else main
    run(Path(args[0]) if args else Path(__file__).resolve().parent,
        set(only_arg[0].split(",")) if only_arg else None)
