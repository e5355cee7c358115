"""CONV_2D and DEPTHWISE_CONV_2D (NHWC input, OHWI / 1HW(C*M) filters).

Patches come from ``sliding_window_view`` over the padded input (SAME / VALID padding as
TFLite's ``ComputePaddingWithOffset``, strides, dilation). Float convolution is a float32
matmul of the patches with the filter; depthwise convolution accumulates the taps in float32
in (ky, kx) order. Quantized convolution computes the exact int32 accumulator
``sum((x - zp_in) * (w - zp_w)) + bias`` (a float32 or float64 matmul, whichever keeps every
partial sum exact), then requantizes per output channel with TFLite's fixed-point multiplier
``s_in * s_w[c] / s_out`` and clamps to the fused activation range. The requantization
rounds as LiteRT's optimized kernels do: CONV_2D (ruy) rounds the final shift's ties upward;
DEPTHWISE_CONV_2D does so for whole blocks of 8 output channels and rounds the remaining
channels with the scalar ``MultiplyByQuantizedMultiplier``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    QParams,
    bad_input,
    conv_out_and_pad,
    exact_float_dtype,
    float_activation,
    is_quantized,
    need,
    opt,
    out_dtype,
    padding_same,
    qparams,
    quant_activation_range,
    quantize_float,
    unsupported,
)
from toolkit.runtime.kernels.fixedpoint import quantize_multiplier, split_rounding

# patches are built in blocks of about this many elements to bound memory
_BLOCK_ELEMS = 1 << 22


def windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
            same: bool, pad_value: float | int) -> np.ndarray:
    """Return the conv windows of NHWC ``x`` as a view of shape [N, OH, OW, C, KH, KW]."""
    n, h, w, c = x.shape
    oh, pt, pb = conv_out_and_pad(h, kh, sh, dh, same)
    ow, pl, pr = conv_out_and_pad(w, kw, sw, dw, same)
    effh, effw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if oh <= 0 or ow <= 0:
        return np.zeros((n, max(oh, 0), max(ow, 0), c, kh, kw), dtype=x.dtype)
    # make sure the padded input covers every window
    pb += max(0, (oh - 1) * sh + effh - (h + pt + pb))
    pr += max(0, (ow - 1) * sw + effw - (w + pl + pr))
    if pt or pb or pl or pr:
        x = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad_value)
    v = sliding_window_view(x, (effh, effw), axis=(1, 2))
    return v[:, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw, :, ::dh, ::dw]


def _strides(op: Op) -> tuple[int, int, int, int]:
    sh = int(opt(op, "strideH", 1)) or 1
    sw = int(opt(op, "strideW", 1)) or 1
    dh = int(opt(op, "dilationHFactor", 1)) or 1
    dw = int(opt(op, "dilationWFactor", 1)) or 1
    return sh, sw, dh, dw


def _bias(op: Op, args: list[np.ndarray | None], n_out: int) -> np.ndarray | None:
    b = args[2] if len(args) > 2 else None
    if b is None:
        return None
    b = np.asarray(b).reshape(-1)
    if b.size != n_out:
        raise bad_input(op, f"bias has {b.size} values for {n_out} output channels")
    return b


def channel_multipliers(op: Op, iq: QParams, wq: QParams, oq: QParams, n_out: int,
                        float_product: bool = False) -> np.ndarray:
    """Real requantization multipliers ``s_in * s_w[c] / s_out`` for each output channel.

    ``float_product`` computes ``s_in * s_w`` in float32 first, as TFLite does for
    per-tensor FULLY_CONNECTED / BATCH_MATMUL and uint8 convolution.
    """
    ws = wq.scale.astype(np.float32)
    if ws.size not in (1, n_out):
        raise bad_input(op, f"filter has {ws.size} scales for {n_out} output channels")
    if float_product:
        prod = (np.float32(iq.s) * ws).astype(np.float64)
    else:
        prod = np.float64(iq.s) * ws.astype(np.float64)
    m = prod / np.float64(oq.s)
    return np.broadcast_to(m, (n_out,)).copy()


def filter_offsets(wq: QParams, n_out: int) -> np.ndarray:
    """Zero points of the filter, one per output channel (int64)."""
    return np.broadcast_to(wq.zero_point.astype(np.int64), (n_out,)).copy() \
        if wq.zero_point.size in (1, n_out) else np.zeros(n_out, dtype=np.int64)


def quantized_output(op: Op, acc: np.ndarray, mult: np.ndarray, block: int = 1) -> np.ndarray:
    """Requantize int64 accumulators (last axis = channel) to the op's output tensor.

    Channels in whole ``block``-wide groups round ties upward in the final shift (SIMD /
    ruy); the remaining channels use the scalar TFLite rounding."""
    out = op.outputs[0]
    dt = out_dtype(op)
    oq = qparams(op, out)
    lo, hi = quant_activation_range(op, out)
    if op.activation == 4:  # TANH cannot be a clamp: apply it to the real values
        real = acc.astype(np.float64) * mult * np.float64(oq.s)
        return quantize_float(np.tanh(real).astype(np.float32), oq, dt)
    m, s = quantize_multiplier(mult)
    y = split_rounding(acc, m, s, block, axis=-1) + oq.zp
    return np.clip(y, lo, hi).astype(dt)


def _row_blocks(total_rows: int, row_elems: int) -> list[tuple[int, int]]:
    step = max(1, _BLOCK_ELEMS // max(row_elems, 1))
    return [(i, min(total_rows, i + step)) for i in range(0, total_rows, step)]


@register("CONV_2D")
def conv2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """CONV_2D: float32 or quantized (per-tensor / per-channel filter), grouped when the
    filter has fewer input channels than the input."""
    x, w = need(op, args, 0), need(op, args, 1)
    if x.ndim != 4 or w.ndim != 4:
        raise bad_input(op, f"CONV_2D needs 4-D input and filter, got {x.shape} and {w.shape}")
    n, _, _, c = x.shape
    o, kh, kw, ci = w.shape
    if ci == 0 or c % ci:
        raise bad_input(op, f"input has {c} channels, filter expects a multiple of {ci}")
    groups = c // ci
    if o % groups:
        raise bad_input(op, f"{o} output channels cannot be split into {groups} groups")
    og = o // groups
    sh, sw, dh, dw = _strides(op)
    same = padding_same(op)
    bias = _bias(op, args, o)
    quant = is_quantized(op.inputs[0])
    if quant:
        iq = qparams(op, op.inputs[0])
        wq = qparams(op, op.inputs[1])
        oq = qparams(op, op.outputs[0])
        pad_value: float | int = iq.zp
        wf = w.astype(np.float64) - filter_offsets(wq, o).reshape(o, 1, 1, 1)
        xin = x
    else:
        if not np.issubdtype(x.dtype, np.floating):
            raise unsupported(op, f"CONV_2D on {x.dtype} input without quantization")
        pad_value = 0.0
        if is_quantized(op.inputs[1]):  # hybrid: float input, quantized filter
            wq = qparams(op, op.inputs[1])
            wf = dequantize_filter(w, wq, axis=0)
        else:
            wf = w.astype(np.float32)
        xin = x.astype(np.float32)
    v = windows(xin, kh, kw, sh, sw, dh, dw, same, pad_value)
    oh, ow = v.shape[1], v.shape[2]
    kdim = kh * kw * ci
    acc_dtype: type = np.float32
    if quant:
        x_mag = max(abs(int(x.min(initial=0)) - iq.zp), abs(int(x.max(initial=0)) - iq.zp))
        acc_dtype = exact_float_dtype(kdim, x_mag, float(np.abs(wf).max(initial=0)))
    acc = np.empty((n, oh, ow, o), dtype=acc_dtype)
    w_mats = [wf[g * og:(g + 1) * og].reshape(og, kdim).T.astype(acc_dtype, copy=False)
              for g in range(groups)]
    for b in range(n):
        for r0, r1 in _row_blocks(oh, ow * kdim * groups):
            blk = v[b, r0:r1]  # [rows, OW, C, KH, KW]
            for g in range(groups):
                pg = blk[:, :, g * ci:(g + 1) * ci].transpose(0, 1, 3, 4, 2)
                pm = pg.reshape(-1, kdim).astype(acc_dtype)
                if quant:
                    pm -= iq.zp
                res = pm @ w_mats[g]
                acc[b, r0:r1, :, g * og:(g + 1) * og] = res.reshape(r1 - r0, ow, og)
    if quant:
        iacc = np.rint(acc).astype(np.int64)
        if bias is not None:
            iacc += bias.astype(np.int64)
        mult = channel_multipliers(op, iq, wq, oq, o,
                                   float_product=x.dtype == np.uint8)
        return [quantized_output(op, iacc, mult)]
    if bias is not None:
        acc += bias.astype(np.float32)
    return [float_activation(op, acc).astype(out_dtype(op))]


def dequantize_filter(w: np.ndarray, wq: QParams, axis: int) -> np.ndarray:
    """Dequantize a filter (per-tensor, or per-channel along its quantized dimension)."""
    scale = wq.scale.astype(np.float64)
    zp = wq.zero_point.astype(np.int64)
    if scale.size > 1:
        shape = [1] * w.ndim
        shape[wq.axis if wq.axis < w.ndim else axis] = scale.size
        scale = scale.reshape(shape)
        zp = zp.reshape(shape) if zp.size > 1 else zp.reshape(-1)[0]
    return (scale * (w.astype(np.int64) - zp)).astype(np.float32)


@register("DEPTHWISE_CONV_2D")
def depthwise_conv2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """DEPTHWISE_CONV_2D: output channel ``c * M + m`` filters input channel ``c``."""
    x, w = need(op, args, 0), need(op, args, 1)
    if x.ndim != 4 or w.ndim != 4:
        raise bad_input(op, f"DEPTHWISE_CONV_2D needs 4-D input and filter, got {x.shape} "
                            f"and {w.shape}")
    _, _, _, c = x.shape
    _, kh, kw, o = w.shape
    if c == 0 or o % c:
        raise bad_input(op, f"filter has {o} channels, not a multiple of the {c} input "
                            "channels")
    m = o // c
    sh, sw, dh, dw = _strides(op)
    same = padding_same(op)
    bias = _bias(op, args, o)
    quant = is_quantized(op.inputs[0])
    if quant:
        iq = qparams(op, op.inputs[0])
        wq = qparams(op, op.inputs[1])
        oq = qparams(op, op.outputs[0])
        v = windows(x, kh, kw, sh, sw, dh, dw, same, iq.zp)
        wi = (w.astype(np.int64) - filter_offsets(wq, o)).reshape(kh, kw, c, m)
        acc = np.zeros((*v.shape[:4], m), dtype=np.int64)
        for i in range(kh):
            for j in range(kw):
                acc += (v[..., i, j].astype(np.int64) - iq.zp)[..., None] * wi[i, j]
        acc = acc.reshape((*acc.shape[:3], o))
        if bias is not None:
            acc += bias.astype(np.int64)
        mult = channel_multipliers(op, iq, wq, oq, o, float_product=x.dtype == np.uint8)
        return [quantized_output(op, acc, mult, block=8)]
    if not np.issubdtype(x.dtype, np.floating):
        raise unsupported(op, f"DEPTHWISE_CONV_2D on {x.dtype} input without quantization")
    if is_quantized(op.inputs[1]):
        wf = dequantize_filter(w, qparams(op, op.inputs[1]), axis=3)
    else:
        wf = w.astype(np.float32)
    wf = wf.reshape(kh, kw, c, m)
    v = windows(x.astype(np.float32), kh, kw, sh, sw, dh, dw, same, 0.0)
    accf = np.zeros((*v.shape[:4], m), dtype=np.float32)
    for i in range(kh):
        for j in range(kw):
            accf += v[..., i, j][..., None] * wf[i, j]
    accf = accf.reshape((*accf.shape[:3], o))
    if bias is not None:
        accf += bias.astype(np.float32)
    return [float_activation(op, accf).astype(out_dtype(op))]
