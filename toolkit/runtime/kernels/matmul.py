"""FULLY_CONNECTED and BATCH_MATMUL.

FULLY_CONNECTED flattens the input to ``[batch, in]`` (``batch = size / in``), multiplies by
the ``[out, in]`` weights and adds the bias; ``keep_num_dims`` keeps the input's leading
dimensions. Float is a float32 matmul. Quantized uses the exact integer accumulator and
TFLite's requantization (multiplier ``s_in * s_w / s_out``; TFLite forms the product in
float32 for a per-tensor filter and in double per channel), rounding the final shift's ties
upward as LiteRT's ruy GEMM does. A float input with a quantized
filter (hybrid) dequantizes the filter and computes in float32, an approximation of TFLite's
hybrid kernel, which quantizes the input on the fly.

BATCH_MATMUL multiplies the last two axes with NumPy broadcasting over the others;
``adjointLhs`` / ``adjointRhs`` transpose the last two axes of the operands first. Quantized
BATCH_MATMUL requantizes with the scalar ``MultiplyByQuantizedMultiplier`` and the float32
product ``s_a * s_b``, as LiteRT does.
"""

from __future__ import annotations

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    GENERAL,
    FloatClamp,
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
    dequantize_filter,
    filter_offsets,
    float_bias,
    quant_setup,
    quantized_output,
)
from toolkit.runtime.kernels.fixedpoint import Requantizer


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
    if is_quantized(op.inputs[1]):
        wf32 = dequantize_filter(w, qparams(op, op.inputs[1]), axis=0)
    else:
        wf32 = w.astype(np.float32)
    accf = x.reshape(batch, k).astype(np.float32) @ wf32.T
    if b is not None:
        accf = accf + np.asarray(b).reshape(-1).astype(np.float32)
    return [float_activation(op, accf).astype(out_dtype(op)).reshape(out_shape)]


_F32 = np.dtype(np.float32)


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
