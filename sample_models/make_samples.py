"""Make the committed sample models with the toolkit's model builder.

    python sample_models/make_samples.py [OUTDIR]

Writes, with fixed seeds (so the files are reproducible):

* ``Net_InstanceNorm_003.circle`` / ``.tflite``: instance norm written out in primitive ops,
  the example of ONE's circle-partitioner documentation.
* ``cnn.tflite``: Conv2D, batch norm as Mul/Add constants, Relu/Relu6, DepthwiseConv2D, a
  residual Add, MaxPool, FullyConnected, Softmax (float32).
* ``cnn_int8.tflite``: the same network quantized to int8 (per-channel weights, int32 bias,
  ranges calibrated by running the float model in LiteRT); accepted by Vela.
* ``transformer.tflite``: a transformer block: layer norms in primitive ops, FullyConnected,
  BatchMatMul, Softmax, Reshape/Transpose, residual Adds.
* ``two_branch.tflite``: two inputs, two outputs, branches that meet and split again.

Layer names follow the ``block/layer/op`` style of converter-written models.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import toolkit as tk
import toolkit.formats.flatbuffer_write
from toolkit.builder import ModelBuilder
from toolkit.ir import Model, Quantization, Tensor

HERE = Path(__file__).resolve().parent


def instance_norm_003() -> Model:
    """Net_InstanceNorm_003: input ``Input`` [1,8,6,12], output ``Add_as_terminal``."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder("Net_InstanceNorm_003")
    x = mb.input("Input", [1, 8, 6, 12])
    mean = mb.mean(x, [1, 2], name="Mean_of_ifm")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name="SquaredDifference")
    var = mb.mean(sqd, [1, 2], name="Mean_as_variance")
    add = mb.add(var, mb.const("Epsilon", np.float32(0.001)), name="Add_as_variance")
    pow_ = mb.binary("POW", add, mb.const("Exponent", np.float32(0.5)), name="Pow")
    sub = mb.sub(x, mean, name="Sub")
    div = mb.div(sub, pow_, name="Div")
    gamma = mb.const("Gamma", rng.uniform(0.5, 1.5, 12).astype(np.float32))
    beta = mb.const("Beta", rng.uniform(-0.5, 0.5, 12).astype(np.float32))
    mul = mb.mul(div, gamma, name="Mul_gamma")
    out = mb.add(mul, beta, activation="RELU", name="Add_as_terminal")
    mb.output(out)
    return mb.build()


def _w(rng: np.random.Generator, *shape: int, fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def cnn() -> Model:
    """A small image classifier, input ``image`` [1,32,32,3], output ``cnn/softmax/Softmax``."""
    rng = np.random.default_rng(7)
    mb = ModelBuilder("cnn")
    x = mb.input("image", [1, 32, 32, 3])
    c1 = mb.conv2d(x, mb.const("cnn/stem_conv/kernel", _w(rng, 16, 3, 3, 3, fan_in=27)),
                   mb.const("cnn/stem_conv/bias", rng.normal(0, .1, 16).astype(np.float32)),
                   stride=2, name="cnn/stem_conv/Conv2D")
    bn1 = mb.mul(c1, mb.const("cnn/stem_bn/scale", rng.uniform(.5, 1.5, 16)),
                 name="cnn/stem_bn/mul")
    bn1 = mb.add(bn1, mb.const("cnn/stem_bn/shift", rng.normal(0, .1, 16)),
                 name="cnn/stem_bn/add")
    r1 = mb.unary("RELU", bn1, name="cnn/stem_relu/Relu")
    dw = mb.depthwise_conv2d(r1, mb.const("cnn/dw_conv/depthwise_kernel",
                                          _w(rng, 1, 3, 3, 16, fan_in=9)),
                             mb.const("cnn/dw_conv/bias", np.zeros(16, np.float32)),
                             name="cnn/dw_conv/depthwise")
    bn2 = mb.mul(dw, mb.const("cnn/dw_bn/scale", rng.uniform(.5, 1.5, 16)), name="cnn/dw_bn/mul")
    bn2 = mb.add(bn2, mb.const("cnn/dw_bn/shift", rng.normal(0, .1, 16)), name="cnn/dw_bn/add")
    r2 = mb.unary("RELU6", bn2, name="cnn/dw_relu6/Relu6")
    pj = mb.conv2d(r2, mb.const("cnn/project_conv/kernel", _w(rng, 16, 1, 1, 16, fan_in=16)),
                   mb.const("cnn/project_conv/bias", rng.normal(0, .1, 16).astype(np.float32)),
                   name="cnn/project_conv/Conv2D")
    res = mb.add(pj, r1, name="cnn/residual/add")
    pool = mb.pool("MAX_POOL_2D", res, 2, name="cnn/pool/MaxPool")
    flat = mb.reshape(pool, [1, -1], name="cnn/flatten/Reshape")
    fc = mb.fully_connected(flat, mb.const("cnn/classifier/kernel",
                                           _w(rng, 10, flat.shape[1], fan_in=flat.shape[1])),
                            mb.const("cnn/classifier/bias", np.zeros(10, np.float32)),
                            name="cnn/classifier/MatMul")
    out = mb.softmax(fc, name="cnn/softmax/Softmax")
    mb.output(out)
    return mb.build()


def _layer_norm_tf(mb: ModelBuilder, x: Tensor, gamma: np.ndarray, beta: np.ndarray,
                   eps: float, p: str) -> Tensor:
    """Layer norm as TensorFlow's converter writes it: y = x*m + (beta - mean*m),
    m = rsqrt(var + eps) * gamma."""
    mean = mb.mean(x, [-1], name=f"{p}/moments/mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name=f"{p}/moments/SquaredDifference")
    var = mb.mean(sqd, [-1], name=f"{p}/moments/variance")
    ve = mb.add(var, mb.const(f"{p}/batchnorm/epsilon", np.float32(eps)),
                name=f"{p}/batchnorm/add")
    rs = mb.unary("RSQRT", ve, name=f"{p}/batchnorm/Rsqrt")
    m = mb.mul(rs, mb.const(f"{p}/gamma", gamma), name=f"{p}/batchnorm/mul")
    xm = mb.mul(x, m, name=f"{p}/batchnorm/mul_1")
    mm = mb.mul(mean, m, name=f"{p}/batchnorm/mul_2")
    sub = mb.sub(mb.const(f"{p}/beta", beta), mm, name=f"{p}/batchnorm/sub")
    return mb.add(xm, sub, name=f"{p}/batchnorm/add_1")


def _layer_norm_plain(mb: ModelBuilder, x: Tensor, beta: np.ndarray, eps: float,
                      p: str) -> Tensor:
    """Layer norm without scale: Mean, SquaredDifference, Mean, Add, Rsqrt, Mul, Mul, Sub,
    Add (y = x*r - mean*r + beta)."""
    mean = mb.mean(x, [-1], name=f"{p}/moments/mean")
    sqd = mb.binary("SQUARED_DIFFERENCE", x, mean, name=f"{p}/moments/SquaredDifference")
    var = mb.mean(sqd, [-1], name=f"{p}/moments/variance")
    ve = mb.add(var, mb.const(f"{p}/epsilon", np.float32(eps)), name=f"{p}/add")
    rs = mb.unary("RSQRT", ve, name=f"{p}/Rsqrt")
    xr = mb.mul(x, rs, name=f"{p}/mul")
    mr = mb.mul(mean, rs, name=f"{p}/mul_1")
    sub = mb.sub(xr, mr, name=f"{p}/sub")
    return mb.add(sub, mb.const(f"{p}/beta", beta), name=f"{p}/add_1")


def transformer() -> Model:
    """One transformer encoder block, input ``tokens`` [1,16,32] (2 heads of 16)."""
    rng = np.random.default_rng(11)
    seq, d, heads = 16, 32, 2
    hd = d // heads
    mb = ModelBuilder("transformer")
    x = mb.input("tokens", [1, seq, d])
    ln1 = _layer_norm_tf(mb, x, rng.uniform(.5, 1.5, d).astype(np.float32),
                         rng.normal(0, .1, d).astype(np.float32), 1e-5, "block/ln1")

    def dense(t: Tensor, n: int, name: str, act: str | None = None) -> Tensor:
        w = mb.const(f"{name}/kernel", _w(rng, n, t.shape[-1], fan_in=t.shape[-1]))
        b = mb.const(f"{name}/bias", rng.normal(0, .05, n).astype(np.float32))
        return mb.fully_connected(t, w, b, keep_num_dims=True, activation=act,
                                  name=f"{name}/MatMul")

    def heads_of(t: Tensor, name: str) -> Tensor:
        r = mb.reshape(t, [1, seq, heads, hd], name=f"{name}/Reshape")
        return mb.transpose(r, [0, 2, 1, 3], name=f"{name}/transpose")

    q = heads_of(dense(ln1, d, "block/attn/query"), "block/attn/query")
    k = heads_of(dense(ln1, d, "block/attn/key"), "block/attn/key")
    v = heads_of(dense(ln1, d, "block/attn/value"), "block/attn/value")
    scores = mb.batch_matmul(q, k, adj_y=True, name="block/attn/scores/MatMul")
    scaled = mb.mul(scores, mb.const("block/attn/scale", np.float32(1 / np.sqrt(hd))),
                    name="block/attn/scores/mul")
    probs = mb.softmax(scaled, name="block/attn/softmax/Softmax")
    ctx = mb.batch_matmul(probs, v, name="block/attn/context/MatMul")
    ctx = mb.transpose(ctx, [0, 2, 1, 3], name="block/attn/context/transpose")
    ctx = mb.reshape(ctx, [1, seq, d], name="block/attn/context/Reshape")
    att = dense(ctx, d, "block/attn/output")
    h = mb.add(x, att, name="block/attn/residual/add")
    ln2 = _layer_norm_plain(mb, h, rng.normal(0, .1, d).astype(np.float32), 1e-5, "block/ln2")
    ff = dense(ln2, 2 * d, "block/ffn/dense_1", act="RELU")
    ff = dense(ff, d, "block/ffn/dense_2")
    out = mb.add(h, ff, name="block/ffn/residual/add")
    mb.output(out)
    return mb.build()


def two_branch() -> Model:
    """Two inputs (``left``, ``right``), two outputs (``features``, ``scores``)."""
    rng = np.random.default_rng(5)
    mb = ModelBuilder("two_branch")
    a = mb.input("left", [1, 16, 16, 4])
    b = mb.input("right", [1, 16, 16, 4])
    ca = mb.conv2d(a, mb.const("left/conv/kernel", _w(rng, 8, 3, 3, 4, fan_in=36)),
                   mb.const("left/conv/bias", np.zeros(8, np.float32)), activation="RELU",
                   name="left/conv/Relu")
    cb = mb.conv2d(b, mb.const("right/conv/kernel", _w(rng, 8, 3, 3, 4, fan_in=36)),
                   mb.const("right/conv/bias", np.zeros(8, np.float32)), name="right/conv/Conv2D")
    tb = mb.unary("TANH", cb, name="right/tanh/Tanh")
    cat = mb.concat([ca, tb], axis=3, name="merge/concat")
    parts = mb.split(cat, 2, axis=3, name="merge/split")
    feat = mb.conv2d(parts[0], mb.const("head_a/conv/kernel", _w(rng, 8, 1, 1, 8, fan_in=8)),
                     mb.const("head_a/conv/bias", np.zeros(8, np.float32)),
                     name="features")
    mix = mb.add(parts[1], ca, name="head_b/add")
    pooled = mb.mean(mix, [1, 2], keep_dims=False, name="head_b/gap/Mean")
    fc = mb.fully_connected(pooled, mb.const("head_b/dense/kernel", _w(rng, 5, 8, fan_in=8)),
                            mb.const("head_b/dense/bias", np.zeros(5, np.float32)),
                            name="head_b/dense/MatMul")
    scores = mb.unary("LOGISTIC", fc, name="scores")
    mb.output(feat, scores)
    return mb.build()


# ---------------------------------------------------------------------- int8
def calibrate(model: Model, n: int = 16, seed: int = 1) -> dict[str, tuple[float, float]]:
    """Run the float model in LiteRT on ``n`` random inputs; return (min, max) per tensor."""
    from ai_edge_litert.interpreter import Interpreter

    data = bytes(tk.formats.flatbuffer_write.write_model(model, "tflite"))
    it = Interpreter(model_content=data, num_threads=1, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    rng = np.random.default_rng(seed)
    ranges: dict[str, tuple[float, float]] = {}
    details = [d for d in it.get_tensor_details() if d["dtype"] == np.float32]
    for _ in range(n):
        for d in it.get_input_details():
            it.set_tensor(d["index"], rng.uniform(-1, 1, d["shape"]).astype(np.float32))
        it.invoke()
        for d in details:
            try:
                v = it.get_tensor(d["index"])
            except ValueError:
                continue
            if v.size == 0:
                continue
            lo, hi = float(v.min()), float(v.max())
            old = ranges.get(d["name"])
            ranges[d["name"]] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
    return ranges


def _asym(lo: float, hi: float) -> Quantization:
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = max(hi - lo, 1e-8) / 255.0
    zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
    return Quantization.make(scale, zp)


def quantize_int8(model: Model, ranges: dict[str, tuple[float, float]]) -> Model:
    """Return an int8 copy of ``model`` (which this rewrites in place: pass a fresh one).

    Activations: per-tensor asymmetric int8 from the calibrated ranges. Weights of
    CONV_2D/FULLY_CONNECTED (axis 0) and DEPTHWISE_CONV_2D (axis 3): per-channel symmetric
    int8. Biases: int32 with scale input_scale * weight_scale. Other constants: per-tensor
    asymmetric int8. SOFTMAX/LOGISTIC outputs use scale 1/256, zero point -128; MAX_POOL_2D and
    RESHAPE outputs reuse their input's parameters, as TFLite requires.
    """
    g = model.graph
    int8 = tk.schema.TENSOR_TYPE_CODES["INT8"]
    int32 = tk.schema.TENSOR_TYPE_CODES["INT32"]
    for t in g.tensors:
        if t.dtype == np.float32 and not t.is_const:
            lo, hi = ranges[t.name]
            t.quant, t.type_code = _asym(lo, hi), int8
    for op in g.ops:
        out = op.outputs[0]
        if op.type in ("SOFTMAX", "LOGISTIC"):
            out.quant = Quantization.make(1 / 256, -128)
        elif op.type in ("MAX_POOL_2D", "RESHAPE"):
            out.quant = op.inputs[0].quant
    for op in g.ops:
        for i, t in enumerate(op.inputs):
            if t is None or not t.is_const or t.dtype != np.float32:
                continue
            w = np.asarray(t.data, dtype=np.float64)
            if op.type in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D") and i == 1:
                axis = 3 if op.type == "DEPTHWISE_CONV_2D" else 0
                red = tuple(a for a in range(w.ndim) if a != axis)
                scale = np.maximum(np.abs(w).max(axis=red), 1e-8) / 127.0
                shape = [1] * w.ndim
                shape[axis] = -1
                q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
                t.data, t.type_code = q, int8
                t.quant = Quantization.make(scale.astype(np.float32), 0, axis)
                t.data.flags.writeable = False
            elif op.type in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D") and i == 2:
                continue  # biases after their weights
            else:
                qz = _asym(float(w.min()), float(w.max()))
                q = np.clip(np.round(w / qz.scale[0]) + qz.zero_point[0], -128, 127)
                t.data, t.type_code, t.quant = q.astype(np.int8), int8, qz
                t.data.flags.writeable = False
        if op.type in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D") and len(op.inputs) > 2:
            b = op.inputs[2]
            if b is not None and b.dtype == np.float32:
                s = (op.inputs[0].quant.scale[0] * op.inputs[1].quant.scale).astype(np.float64)
                q = np.round(np.asarray(b.data, np.float64) / s).astype(np.int32)
                b.data, b.type_code = q, int32
                b.quant = Quantization.make(s.astype(np.float32), 0)
                b.data.flags.writeable = False
    model.verify()
    return model


def make_all(outdir: Path) -> list[Path]:
    """Write every sample model into ``outdir``; return the paths written."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    inorm = instance_norm_003()
    written.append(tk.save(inorm, outdir / "Net_InstanceNorm_003.circle"))
    written.append(tk.save(inorm, outdir / "Net_InstanceNorm_003.tflite"))
    written.append(tk.save(cnn(), outdir / "cnn.tflite"))
    ranges = calibrate(cnn())
    written.append(tk.save(quantize_int8(cnn(), ranges), outdir / "cnn_int8.tflite"))
    written.append(tk.save(transformer(), outdir / "transformer.tflite"))
    written.append(tk.save(two_branch(), outdir / "two_branch.tflite"))
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for p in make_all(out):
        print(p)
