"""FULLY_CONNECTED and BATCH_MATMUL.

FULLY_CONNECTED flattens the input to ``[batch, in]`` (``batch = size / in``), multiplies by
the ``[out, in]`` weights and adds the bias; ``keep_num_dims`` keeps the input's leading
dimensions. Float is a float32 matmul. Quantized uses the exact integer accumulator and
TFLite's requantization (multiplier ``s_in * s_w / s_out``; TFLite forms the product in
float32 for a per-tensor filter and in double per channel), rounding the final shift's ties
upward as LiteRT's ruy GEMM does. A float input with an int8
filter (hybrid, as dynamic-range quantization writes it) is TFLite's hybrid kernel: each
input row quantized on the fly (symmetric, or asymmetric with ``asymmetricQuantizeInputs``),
an exact integer dot product, scaled back in float32 (:func:`hybrid_fully_connected`).

BATCH_MATMUL multiplies the last two axes with NumPy broadcasting over the others;
``adjointLhs`` / ``adjointRhs`` transpose the last two axes of the operands first. Quantized
BATCH_MATMUL requantizes with the scalar ``MultiplyByQuantizedMultiplier`` and the float32
product ``s_a * s_b``, as LiteRT does.
"""

from __future__ import annotations

import numpy as np

from toolkit.fixed_point import dequantize_filter
from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    GENERAL,
    FloatClamp,
    QParams,
    bad_input,
    float_activation,
    float_clamp,
    int_matmul,
    int_range,
    is_quantized,
    need,
    opt,
    out_dtype,
    plain_float,
    qparams,
    requantize,
    run_weighted_plan,
    unsupported,
)
from toolkit.runtime.kernels.conv import (
    channel_multipliers,
    filter_offsets,
    float_bias,
    quant_setup,
    quantized_output,
)
from toolkit.runtime.kernels.fixedpoint import Requantizer, round_half_away


@register("FULLY_CONNECTED")
def fully_connected(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """FULLY_CONNECTED with weights ``[out, in]``, optional bias and keep_num_dims."""
    y = run_weighted_plan(op, args, _fc_plan)
    if y is not None:
        return [y]
    x, w = need(op, args, 0), need(op, args, 1)
    if w.ndim != 2:
        raise bad_input(op, f"weights must be 2-D [out, in], got shape {w.shape}")
    o, k = w.shape
    if k == 0 or x.size % k:
        raise bad_input(op, f"input of shape {x.shape} cannot be split into rows of {k}")
    batch = x.size // k
    keep = bool(opt(op, "keepNumDims", False))
    out_shape = (*x.shape[:-1], o) if keep else (batch, o)
    if keep and x.shape[-1] != k:
        raise bad_input(op, f"keep_num_dims needs the last input dimension to be {k}")
    b = args[2] if len(args) > 2 else None
    if b is not None and np.asarray(b).size != o:
        raise bad_input(op, f"bias has {np.asarray(b).size} values for {o} outputs")
    if is_quantized(op.inputs[0]):
        iq = qparams(op, op.inputs[0])
        wq = qparams(op, op.inputs[1])
        oq = qparams(op, op.outputs[0])
        xi = x.reshape(batch, k).astype(np.int64) - iq.zp
        wi = w.astype(np.int64) - filter_offsets(wq, o)[:, None]
        acc = int_matmul(xi, wi.T)
        if b is not None:
            acc += np.asarray(b).reshape(-1).astype(np.int64)
        mult = channel_multipliers(op, iq, wq, oq, o, float_product=wq.scale.size == 1)
        return [quantized_output(op, acc, mult).reshape(out_shape)]
    if not np.issubdtype(x.dtype, np.floating):
        raise unsupported(op, f"FULLY_CONNECTED on {x.dtype} input without quantization")
    if is_quantized(op.inputs[1]) and w.dtype == np.int8 and x.dtype == _F32:
        y = hybrid_fully_connected(x.reshape(batch, k), w, qparams(op, op.inputs[1]), b,
                                   bool(opt(op, "asymmetricQuantizeInputs", False)))
        return [float_activation(op, y).astype(out_dtype(op)).reshape(out_shape)]
    if is_quantized(op.inputs[1]):
        wf32 = dequantize_filter(w, qparams(op, op.inputs[1]), axis=0)
    else:
        wf32 = w.astype(np.float32)
    accf = x.reshape(batch, k).astype(np.float32) @ wf32.T
    if b is not None:
        accf = accf + np.asarray(b).reshape(-1).astype(np.float32)
    return [float_activation(op, accf).astype(out_dtype(op)).reshape(out_shape)]


_F32 = np.dtype(np.float32)


def quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TFLite's ``BatchQuantizeFloats``: each row of float32 ``x`` quantized to int8 on the
    fly. Returns (int64 values, float32 scaling factor per row, int64 offset per row).

    Symmetric: ``round(x * 127 / max|x|)`` in [-127, 127]. Asymmetric: the range
    ``[min(0, x), max(0, x)]`` over [-128, 127] with the zero point nudged to the side with
    the smaller error (as ``AsymmetricQuantizeFloats``), ``round(x / s) + zp`` (rounded half
    away from zero before the zero point is added, as LiteRT does: ``round(zp + x / s)``
    differs on ties); a row of zeros quantizes to zeros with scale 1."""
    rows = x.shape[0]
    q = np.zeros(x.shape, dtype=np.int64)
    scale = np.ones(rows, dtype=np.float32)
    offset = np.zeros(rows, dtype=np.int64)
    for r in range(rows):
        v = x[r]
        if not asymmetric:
            rng = np.float32(max(abs(float(v.min(initial=0))), abs(float(v.max(initial=0)))))
            if rng == 0:
                continue
            scale[r] = rng / np.float32(127)
            inv = np.float32(127) / rng
            q[r] = np.clip(round_half_away(v * inv), -127, 127).astype(np.int64)
            continue
        rmin = float(min(np.float32(0), v.min(initial=0)))
        rmax = float(max(np.float32(0), v.max(initial=0)))
        if rmin == rmax:
            continue
        s = (rmax - rmin) / 255.0
        zp_min, zp_max = -128.0 - rmin / s, 127.0 - rmax / s
        err_min, err_max = 128.0 + abs(rmin / s), 127.0 + abs(rmax / s)
        zp = zp_min if err_min < err_max else zp_max
        nudged = -128 if zp <= -128 else 127 if zp >= 127 else int(round_half_away(zp))
        scale[r] = np.float32(s)
        offset[r] = nudged
        inv = np.float32(1) / np.float32(s)
        # LiteRT rounds the scaled value, then adds the zero point (not round(zp + v / s))
        q[r] = np.clip(round_half_away(v * inv).astype(np.int64) + nudged, -128, 127)
    return q, scale, offset


def hybrid_fully_connected(x: np.ndarray, w: np.ndarray, wq: QParams, bias: np.ndarray | None,
                           asymmetric: bool) -> np.ndarray:
    """TFLite's hybrid FULLY_CONNECTED (float32 rows ``x`` [batch, in], int8 weights
    [out, in] with per-tensor or per-channel scales): each row quantized on the fly
    (:func:`quantize_rows`), an exact integer dot product per output, less
    ``offset * sum(w row)`` for asymmetric inputs, scaled by ``row scale * weight scale``
    in float32 and added to the bias. Returns float32 [batch, out] (no activation)."""
    q, scale, offset = quantize_rows(x.astype(np.float32), asymmetric)
    wi = w.astype(np.int64)
    dot = int_matmul(q, wi.T)
    if asymmetric:
        dot = dot - offset[:, None] * wi.sum(axis=1)[None, :]
    ws = np.broadcast_to(wq.scale.astype(np.float32), (w.shape[0],))
    factor = scale[:, None] * ws[None, :]
    out = dot.astype(np.float32) * factor
    if bias is not None:
        out = np.asarray(bias, dtype=np.float32).reshape(1, -1) + out
    return out.astype(np.float32)


class _FCPlan:
    """A prepared FULLY_CONNECTED (float32, or 8-bit quantized) for one input shape."""

    __slots__ = ("b", "batch", "bias", "clamp", "dtype", "k", "length", "out_shape", "qout",
                 "w", "wmat", "zp")

    def __init__(self, w: np.ndarray, b: np.ndarray | None, wmat: np.ndarray, dtype: type,
                 batch: int, out_shape: tuple[int, ...]) -> None:
        self.w, self.b, self.wmat, self.dtype = w, b, wmat, dtype
        self.batch, self.k, self.out_shape = batch, wmat.shape[0], out_shape
        self.bias: np.ndarray | None = None
        self.length = 0
        self.clamp: FloatClamp | None = None
        self.qout: Requantizer | None = None
        self.zp: int | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x2 = x.reshape(self.batch, self.k)
        if self.zp is not None:
            acc = np.subtract(x2, self.zp, dtype=self.dtype) @ self.wmat
            return self.qout(acc).reshape(self.out_shape)  # type: ignore[misc]
        acc = x2 @ self.wmat
        if self.bias is not None:
            v = acc.reshape(-1, self.length) if self.length else acc
            np.add(v, self.bias, out=v)
        if self.clamp is not None:
            self.clamp(acc)
        return acc.reshape(self.out_shape)


def _fc_plan(op: Op, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> _FCPlan | str:
    """The plan of FULLY_CONNECTED (constant weights and bias) or GENERAL."""
    ins = op.inputs
    if w.ndim != 2 or len(ins) < 2 or ins[1] is None or not ins[1].is_const \
            or (b is not None and (len(ins) < 3 or ins[2] is None or not ins[2].is_const)) \
            or len(op.outputs) != 1:
        return GENERAL
    o, k = w.shape
    if k == 0 or o == 0 or x.size % k or x.size == 0:
        return GENERAL
    batch = x.size // k
    keep = bool(opt(op, "keepNumDims", False))
    if keep and x.shape[-1] != k:
        return GENERAL
    out_shape = (*x.shape[:-1], o) if keep else (batch, o)
    size = batch * o
    if is_quantized(ins[0]):
        if w.dtype.kind not in "iu" or not is_quantized(ins[1]):
            return GENERAL
        wq = qparams(op, ins[1])
        w_eff = w.astype(np.int64) - filter_offsets(wq, o)[:, None]
        setup = quant_setup(op, x, w, b, o, k, w_eff, size, 1, wq.scale.size == 1)
        if setup is None:
            return GENERAL
        dtype, qout = setup
        plan = _FCPlan(w, b, np.ascontiguousarray(w_eff.astype(dtype)).T, dtype, batch,
                       out_shape)
        plan.qout, plan.zp = qout, qparams(op, ins[0]).zp
        return plan
    if not plain_float(op, x, w):
        return GENERAL
    bias = float_bias(b, size, o)
    if bias is None:
        return GENERAL
    # the weights exactly as the general path multiplies them (same layout)
    plan = _FCPlan(w, b, w.astype(np.float32).T, np.float32, batch, out_shape)
    plan.bias, plan.length = bias
    plan.clamp = float_clamp(op, size, _F32, shape=(batch, o))
    return plan


@register("BATCH_MATMUL")
def batch_matmul(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """BATCH_MATMUL with adjoint flags and broadcast batch dimensions."""
    a, b = need(op, args, 0), need(op, args, 1)
    if a.ndim < 2 or b.ndim < 2:
        raise bad_input(op, f"BATCH_MATMUL needs rank >= 2 operands, got {a.shape}, {b.shape}")
    if opt(op, "adjointLhs", False) or opt(op, "adjX", False):
        a = np.swapaxes(a, -1, -2)
    if opt(op, "adjointRhs", False) or opt(op, "adjY", False):
        b = np.swapaxes(b, -1, -2)
    if a.shape[-1] != b.shape[-2]:
        raise bad_input(op, f"inner dimensions differ: {a.shape} x {b.shape}")
    if is_quantized(op.inputs[0]):
        aq, bq, oq = qparams(op, op.inputs[0]), qparams(op, op.inputs[1]), \
            qparams(op, op.outputs[0])
        acc = int_matmul(a.astype(np.int64) - aq.zp, b.astype(np.int64) - bq.zp)
        real = np.float64(np.float32(aq.s) * np.float32(bq.s)) / np.float64(oq.s)
        dt = out_dtype(op)
        lo, hi = int_range(dt)
        return [requantize(acc, real, oq.zp, lo, hi, dt)]
    if np.issubdtype(a.dtype, np.floating):
        return [np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(out_dtype(op))]
    return [np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(out_dtype(op))]
