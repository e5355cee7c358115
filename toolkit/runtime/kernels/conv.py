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

Each op prepares its constants once per input shape (see :mod:`.common`): padding, the
filter as a matrix (float32, or ``w - zp_w`` exactly in float), the tiled bias, the fused
activation and the requantization. Patches are then a strided view of the padded input
copied to a matrix, depthwise taps strided views multiplied by tiled filter rows. Quantized
accumulators are computed in float32 (float64) wherever a static bound on their magnitude
shows every partial sum exact, so they equal the integer sums.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from toolkit.fixed_point import dequantize_filter
from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.blocks import block_len, tile_block
from toolkit.runtime.kernels.common import (
    GENERAL,
    FloatClamp,
    QParams,
    bad_input,
    conv_out_and_pad,
    exact_float_dtype,
    float_activation,
    float_clamp,
    int_range,
    is_quantized,
    need,
    opt,
    out_dtype,
    padding_same,
    plain_float,
    qparams,
    quant_activation_range,
    quantize_float,
    quiet,
    run_weighted_plan,
    unsupported,
)
from toolkit.runtime.kernels.fixedpoint import Requantizer, quantize_multiplier, split_rounding

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
    y = run_weighted_plan(op, args, _conv_plan)
    if y is not None:
        return [y]
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
    acc: np.ndarray = np.empty((n, oh, ow, o), dtype=acc_dtype)
    w_mats = [filter_matrix(wf[g * og:(g + 1) * og], acc_dtype) for g in range(groups)]
    for b in range(n):
        for r0, r1 in _row_blocks(oh, ow * kdim * groups):
            blk = v[b, r0:r1]  # [rows, OW, C, KH, KW]
            for g in range(groups):
                pg = blk[:, :, g * ci:(g + 1) * ci].transpose(0, 1, 3, 4, 2)
                pm: np.ndarray = np.array(pg.reshape(-1, kdim), dtype=acc_dtype, order="C")
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


def filter_matrix(w: np.ndarray, dtype: type) -> np.ndarray:
    """The [KH * KW * CI, O] C-contiguous matrix of an OHWI filter, in ``dtype``.

    Every path multiplies patches by this one layout: BLAS rounds differently for a
    transposed operand, and a convolution's result should not depend on the path taken."""
    return np.ascontiguousarray(w.reshape(w.shape[0], -1).T, dtype=dtype)


@register("DEPTHWISE_CONV_2D")
def depthwise_conv2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """DEPTHWISE_CONV_2D: output channel ``c * M + m`` filters input channel ``c``."""
    y = run_weighted_plan(op, args, _depthwise_plan)
    if y is not None:
        return [y]
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


# ------------------------------------------------------------------ prepared convolutions
_F32 = np.dtype(np.float32)
_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))


class Window:
    """The geometry of a windowed op (convolution or pooling) on NHWC inputs of one shape:
    output size, padding (as :func:`windows` pads) and the strides of the window view."""

    __slots__ = ("c", "dh", "dw", "h", "hp", "kh", "kw", "n", "oh", "ow", "pl", "pt", "sh",
                 "sw", "w", "wp")

    def __init__(self, shape: tuple[int, ...], kh: int, kw: int, sh: int, sw: int, dh: int,
                 dw: int, same: bool) -> None:
        self.n, self.h, self.w, self.c = shape
        self.kh, self.kw, self.sh, self.sw, self.dh, self.dw = kh, kw, sh, sw, dh, dw
        self.oh, self.pt, pb = conv_out_and_pad(self.h, kh, sh, dh, same)
        self.ow, self.pl, pr = conv_out_and_pad(self.w, kw, sw, dw, same)
        effh, effw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        pb += max(0, (self.oh - 1) * sh + effh - (self.h + self.pt + pb))
        pr += max(0, (self.ow - 1) * sw + effw - (self.w + self.pl + pr))
        self.hp, self.wp = self.h + self.pt + pb, self.w + self.pl + pr

    @property
    def padded(self) -> bool:
        """True when the input needs padding."""
        return (self.hp, self.wp) != (self.h, self.w)

    @property
    def usable(self) -> bool:
        """True when there is at least one output position."""
        return self.oh > 0 and self.ow > 0 and self.n > 0 and self.c > 0

    def pad(self, x: np.ndarray, value: float | int) -> np.ndarray:
        """``x`` padded with ``value`` (``x`` itself, C-contiguous, when no padding)."""
        if not self.padded:
            return np.ascontiguousarray(x)
        shape = (self.n, self.hp, self.wp, self.c)
        if value == 0:
            buf = np.zeros(shape, dtype=x.dtype)
        else:
            buf = np.empty(shape, dtype=x.dtype)
            buf.fill(value)
        buf[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w] = x
        return buf

    def tap(self, xp: np.ndarray, i: int, j: int) -> np.ndarray:
        """The input values under tap ``(i, j)`` of every window: [N, OH, OW, C]."""
        r, q = i * self.dh, j * self.dw
        return xp[:, r:r + (self.oh - 1) * self.sh + 1:self.sh,
                  q:q + (self.ow - 1) * self.sw + 1:self.sw]

    def patches(self, xp: np.ndarray, b: int, r0: int, r1: int) -> np.ndarray:
        """The windows of output rows ``r0:r1`` of batch ``b`` as a [rows * OW, KH * KW * C]
        matrix (rows of patch values in (ky, kx, c) order) laid out as the general path's."""
        c, wp, it = self.c, self.wp, xp.itemsize
        if self.kh == self.kw == self.sh == self.sw == 1 and not self.padded:
            return xp[b].reshape(-1, c)[r0 * self.ow:r1 * self.ow]
        offset = ((b * self.hp + r0 * self.sh) * wp) * c * it
        view = np.ndarray((r1 - r0, self.ow, self.kh, self.kw, c), dtype=xp.dtype, buffer=xp,
                          offset=offset,
                          strides=(self.sh * wp * c * it, self.sw * c * it,
                                   self.dh * wp * c * it, self.dw * c * it, it))
        # C order, as every path gives BLAS its patches (it rounds differently for another
        # layout)
        return np.array(view.reshape(-1, self.kh * self.kw * c), order="C")


def quant_setup(op: Op, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, n_out: int,
                 terms: int, w_eff: np.ndarray, out_size: int, block: int,
                float_product: bool) -> tuple[type, Requantizer] | None:
    """The exact float dtype for the accumulators (without bias) and the output stage (bias
    and requantization) of a quantized op, or None when the op takes the general path."""
    out = op.outputs[0] if len(op.outputs) == 1 else None
    if out is None or op.activation == 4 or out.dtype is None \
            or not is_quantized(op.outputs[0]) or x.dtype not in _BYTES:
        return None
    if b is not None and (b.dtype.kind not in "iu" or b.size != n_out):
        return None
    iq, wq, oq = qparams(op, op.inputs[0]), qparams(op, op.inputs[1]), qparams(op, out)
    qmin, qmax = int_range(x.dtype)
    x_mag = max(abs(qmin - iq.zp), abs(qmax - iq.zp))
    w_mag = float(np.abs(w_eff).max(initial=0))
    bound = terms * x_mag * w_mag
    if bound >= 2.0**53:
        return None
    dtype = exact_float_dtype(terms, x_mag, w_mag)
    acc_bound = int(bound) + (int(np.abs(b.astype(np.int64)).max(initial=0))
                              if b is not None else 0)
    mult = channel_multipliers(op, iq, wq, oq, n_out, float_product=float_product)
    m, sh = quantize_multiplier(mult)
    lo, hi = quant_activation_range(op, out)
    bias = None if b is None else b.reshape(-1)
    return dtype, Requantizer(m, sh, block, oq.zp, lo, hi, out.dtype, out_size, n_out,
                              acc_bound, bias)


class _ConvPlan:
    """A prepared CONV_2D (one group; float32, or 8-bit quantized) for one input shape."""

    __slots__ = ("b", "bias", "blocks", "clamp", "dtype", "length", "n_out", "qout", "w",
                 "win", "wmat", "zp")

    def __init__(self, w: np.ndarray, b: np.ndarray | None, win: Window, wmat: np.ndarray,
                 dtype: type, n_out: int) -> None:
        self.w, self.b, self.win, self.wmat, self.dtype, self.n_out = w, b, win, wmat, dtype, \
            n_out
        kdim = wmat.shape[0]
        self.blocks = _row_blocks(win.oh, win.ow * kdim)
        self.bias: np.ndarray | None = None
        self.length = 0
        self.clamp: FloatClamp | None = None
        self.qout: Requantizer | None = None
        self.zp: int | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        win, n_out = self.win, self.n_out
        if self.zp is None:
            xp = win.pad(x, 0.0)
        else:
            xs = np.subtract(x, self.zp, dtype=self.dtype)
            xp = win.pad(xs, 0)
        n, oh, ow = win.n, win.oh, win.ow
        if n == 1 and len(self.blocks) == 1:
            acc = (win.patches(xp, 0, 0, oh) @ self.wmat).reshape(1, oh, ow, n_out)
        else:
            acc = np.empty((n, oh, ow, n_out), dtype=self.dtype)
            for bi in range(n):
                for r0, r1 in self.blocks:
                    res = win.patches(xp, bi, r0, r1) @ self.wmat
                    acc[bi, r0:r1] = res.reshape(r1 - r0, ow, n_out)
        if self.qout is not None:
            return self.qout(acc)
        if self.bias is not None:
            v = acc.reshape(-1, self.length) if self.length else acc
            np.add(v, self.bias, out=v)
        if self.clamp is not None:
            self.clamp(acc)
        return acc


def _window(op: Op, shape: tuple[int, ...], kh: int, kw: int) -> Window:
    """The window geometry of a convolution ``op`` with a ``kh`` x ``kw`` filter."""
    sh, sw, dh, dw = _strides(op)
    return Window(shape, kh, kw, sh, sw, dh, dw, padding_same(op))


def float_bias(b: np.ndarray | None, size: int, n_out: int
                ) -> tuple[np.ndarray | None, int] | None:
    """The float32 bias tiled for adding to [size] outputs (None when it cannot be)."""
    if b is None:
        return None, 0
    if b.dtype != _F32 or b.size != n_out:
        return None
    length = block_len(size, n_out)
    return (tile_block(b, length) if length else b.reshape(-1)), length


def _conv_plan(op: Op, x: np.ndarray, w: np.ndarray, b: np.ndarray | None
               ) -> _ConvPlan | str:
    """The plan of CONV_2D (one group, constant filter and bias) or GENERAL."""
    ins = op.inputs
    if x.ndim != 4 or w.ndim != 4 or len(ins) < 2 or ins[1] is None or not ins[1].is_const \
            or (b is not None and (len(ins) < 3 or ins[2] is None or not ins[2].is_const)) \
            or len(op.outputs) != 1:
        return GENERAL
    o, kh, kw, ci = w.shape
    if ci != x.shape[3] or o == 0:
        return GENERAL  # grouped (or invalid): general path
    win = _window(op, x.shape, kh, kw)
    if not win.usable:
        return GENERAL
    kdim = kh * kw * ci
    size = win.n * win.oh * win.ow * o
    if is_quantized(ins[0]):
        if w.dtype not in _BYTES or not is_quantized(ins[1]):
            return GENERAL
        wq = qparams(op, ins[1])
        w_eff = w.astype(np.float64) - filter_offsets(wq, o).reshape(o, 1, 1, 1)
        setup = quant_setup(op, x, w, b, o, kdim, w_eff, size, 1, x.dtype == np.uint8)
        if setup is None:
            return GENERAL
        dtype, qout = setup
        wmat = filter_matrix(w_eff, dtype)
        plan = _ConvPlan(w, b, win, wmat, dtype, o)
        plan.qout, plan.zp = qout, qparams(op, ins[0]).zp
        return plan
    if not plain_float(op, x, w):
        return GENERAL
    bias = float_bias(b, size, o)
    if bias is None:
        return GENERAL
    plan = _ConvPlan(w, b, win, filter_matrix(w, np.float32), np.float32, o)
    plan.bias, plan.length = bias
    plan.clamp = float_clamp(op, size, _F32, shape=(win.n, win.oh, win.ow, o))
    return plan


class _DepthwisePlan:
    """A prepared DEPTHWISE_CONV_2D (depth multiplier 1; float32, or 8-bit quantized).

    Every output accumulates its taps in (ky, kx) order, each product rounded to the
    accumulator dtype first, as the general path does (which starts the sum from +0: where
    every product is -0 its result is +0 and the stride-1 path's -0). With stride 1 the taps are
    contiguous runs of the flattened padded input when each output row is computed over the
    full padded width (the extra columns are dropped): every multiply and add then runs
    over contiguous memory."""

    __slots__ = ("all_taps", "b", "bias", "clamp", "dtype", "ext", "offsets", "qout", "rows",
                 "taps", "w", "win", "zp")

    def __init__(self, w: np.ndarray, b: np.ndarray | None, win: Window,
                 weights: list[np.ndarray], dtype: type) -> None:
        self.w, self.b, self.win, self.dtype = w, b, win, dtype
        self.bias: np.ndarray | None = None
        self.clamp: FloatClamp | None = None
        self.qout: Requantizer | None = None
        self.zp: int | None = None
        c = win.c
        if win.sh == win.sw == 1:
            # output row r (over all batches) starts at flat input row r, tap (i, j) at
            # offset (i dh Wp + j dw) C: rows of batch b are b Hp .. b Hp + OH - 1
            self.ext = ((win.n - 1) * win.hp + win.oh) * win.wp * c
            self.offsets = [(i * win.dh * win.wp + j * win.dw) * c
                            for i in range(win.kh) for j in range(win.kw)]
            length = block_len(self.ext, c) or self.ext
            self.rows: tuple[int, ...] = (length,) if length == self.ext else (-1, length)
            self.taps = [tile_block(wk, length) for wk in weights]
            self.all_taps = None
            if self.rows == (self.ext,):  # small: the taps' products in one call
                self.all_taps = np.stack(self.taps).reshape(win.kh, win.kw, self.ext)
        else:
            self.all_taps = None
            self.ext = 0
            self.offsets = []
            self.rows = ()
            self.taps = [np.ascontiguousarray(np.broadcast_to(wk, (win.ow, c)))
                         for wk in weights]

    def _rows(self, x: np.ndarray) -> np.ndarray:
        """Stride-1 accumulators, the bias added and the activation applied (float): a
        [N, OH, OW, C] view into the full-width rows."""
        win, dtype = self.win, self.dtype
        full = win.n * win.hp * win.wp * win.c
        buf: np.ndarray = np.zeros(full + self.offsets[-1], dtype=dtype)
        xp = buf[:full].reshape(win.n, win.hp, win.wp, win.c)
        inner = xp[:, win.pt:win.pt + win.h, win.pl:win.pl + win.w]
        if self.zp is None:
            inner[...] = x
        else:
            np.subtract(x, self.zp, out=inner, dtype=dtype)
        ext, rows = self.ext, self.rows
        acc: np.ndarray = np.zeros(full, dtype=dtype)
        a = acc[:ext].reshape(rows)
        if self.all_taps is not None:
            # one multiply for every tap: [KH, KW, ext] runs of the input
            it = buf.itemsize
            runs = np.ndarray((win.kh, win.kw, ext), dtype=dtype, buffer=buf,
                              strides=(win.dh * win.wp * win.c * it, win.dw * win.c * it, it))
            prods = np.multiply(runs, self.all_taps).reshape(-1, ext)
            np.add.reduce(prods, axis=0, out=a)  # row by row, in (ky, kx) order
        else:
            tmp: np.ndarray = np.empty(ext, dtype=dtype).reshape(rows)
            np.multiply(buf[:ext].reshape(rows), self.taps[0], out=a)
            for off, wt in zip(self.offsets[1:], self.taps[1:]):
                np.multiply(buf[off:off + ext].reshape(rows), wt, out=tmp)
                np.add(a, tmp, out=a)
        if self.bias is not None:
            np.add(a, self.bias, out=a)
        if self.clamp is not None and not self.clamp.tanh:
            self.clamp(a)
        return acc.reshape(win.n, win.hp, win.wp, win.c)[:, :win.oh, :win.ow]

    def _taps(self, x: np.ndarray) -> np.ndarray:
        """Strided taps: the [N, OH, OW, C] accumulators."""
        win = self.win
        if self.zp is None:
            xp = win.pad(x, 0.0)
        else:
            xp = win.pad(np.subtract(x, self.zp, dtype=self.dtype), 0)
        shape = (win.n, win.oh, win.ow, win.c)
        acc: np.ndarray = np.zeros(shape, dtype=self.dtype)
        tmp: np.ndarray = np.empty(shape, dtype=self.dtype)
        k = 0
        for i in range(win.kh):
            for j in range(win.kw):
                np.multiply(win.tap(xp, i, j), self.taps[k], out=tmp)
                np.add(acc, tmp, out=acc)
                k += 1
        return acc

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.qout is not None:
            acc = self._rows(x) if self.ext else self._taps(x)
            return self.qout(np.ascontiguousarray(acc))
        if self.ext:
            # the extra columns of the stride-1 rows may overflow where no output does
            out = np.ascontiguousarray(quiet(self._rows, x))
            if self.clamp is not None and self.clamp.tanh:
                self.clamp(out)  # on the output array, as the general path
            return out
        acc = self._taps(x)
        if self.bias is not None:
            out = np.empty(acc.shape, dtype=np.float32)
            np.add(acc, self.bias, out=out)
        else:
            out = np.ascontiguousarray(acc)
        if self.clamp is not None:
            self.clamp(out)
        return out


def _depthwise_plan(op: Op, x: np.ndarray, w: np.ndarray, b: np.ndarray | None
                    ) -> _DepthwisePlan | str:
    """The plan of DEPTHWISE_CONV_2D (multiplier 1, constant filter and bias) or GENERAL."""
    ins = op.inputs
    if x.ndim != 4 or w.ndim != 4 or len(ins) < 2 or ins[1] is None or not ins[1].is_const \
            or (b is not None and (len(ins) < 3 or ins[2] is None or not ins[2].is_const)) \
            or len(op.outputs) != 1 or w.shape[0] != 1:
        return GENERAL
    _, kh, kw, o = w.shape
    c = x.shape[3]
    if o != c or c == 0:
        return GENERAL  # depth multiplier > 1 (or invalid): general path
    win = _window(op, x.shape, kh, kw)
    if not win.usable:
        return GENERAL
    size = win.n * win.oh * win.ow * o
    if is_quantized(ins[0]):
        if w.dtype not in _BYTES or not is_quantized(ins[1]):
            return GENERAL
        wq = qparams(op, ins[1])
        w_eff = (w.astype(np.int64) - filter_offsets(wq, o)).reshape(kh, kw, c)
        setup = quant_setup(op, x, w, b, o, kh * kw, w_eff, size, 8, x.dtype == np.uint8)
        if setup is None:
            return GENERAL
        dtype, qout = setup
        plan = _DepthwisePlan(w, b, win, [w_eff[i, j].astype(dtype) for i in range(kh)
                                          for j in range(kw)], dtype)
        plan.qout, plan.zp = qout, qparams(op, ins[0]).zp
        return plan
    if not plain_float(op, x, w):
        return GENERAL
    if b is not None and (b.dtype != _F32 or b.size != o):
        return GENERAL
    wf = w.reshape(kh, kw, c)
    plan = _DepthwisePlan(w, b, win, [wf[i, j] for i in range(kh) for j in range(kw)],
                          np.float32)
    if plan.ext:
        length = plan.rows[-1]
        plan.bias = None if b is None else tile_block(b, length)
        plan.clamp = float_clamp(op, length, _F32)  # applied to the [-1, length] rows
        if plan.clamp is not None and plan.clamp.tanh:
            plan.clamp = float_clamp(op, size, _F32, shape=(win.n, win.oh, win.ow, o))
    else:
        plan.bias = None if b is None else b.reshape(-1)
        plan.clamp = float_clamp(op, size, _F32, shape=(win.n, win.oh, win.ow, o))
    return plan
