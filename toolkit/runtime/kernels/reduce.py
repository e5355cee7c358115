"""Reductions: MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD (axis tensor, keepDims).

Float: float32 sum divided by the element count (MEAN), max / min / product.
Quantized, as TFLite computes them:

* MEAN over H and W of a 4-D tensor with keep_dims: raw int32 sum, times the fixed-point
  multiplier of ``float32(s_in / (n * s_out))``, plus ``zp_out - round(zp_in s_in / s_out)``
  (all in float32). Whole blocks of 16 channels round the final shift's ties upward, the
  remaining channels as the scalar ``MultiplyByQuantizedMultiplier`` (LiteRT's SIMD body and
  scalar tail).
* MEAN otherwise: ``sum(q) - zp_in * n`` times the multiplier of ``s_in / s_out`` with
  ``1 / n`` folded into the mantissa (``(M << k) / n``, ``k = floor(log2 n)``), plus
  ``zp_out``.
* SUM: ``round(sum * (s_in / s_out) - zp_in (s_in / s_out) n) + zp_out`` in float32.
* REDUCE_MAX / REDUCE_MIN on raw values (TFLite requires equal input/output parameters).

ARG_MAX (axis tensor, first index of equal maxima) works on raw values of any dtype.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    GENERAL,
    QParams,
    cached_plan,
    int_range,
    is_quantized,
    need,
    norm_axis,
    opt,
    out_dtype,
    qparams,
    quiet,
    store_plan,
    unsupported,
)
from toolkit.runtime.kernels.fixedpoint import (
    Requantizer,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
    split_rounding,
)


def _axes(op: Op, args: list[np.ndarray | None], rank: int) -> tuple[int, ...]:
    a = args[1] if len(args) > 1 else None
    if a is None:
        return tuple(range(rank))
    out: list[int] = []
    for v in np.asarray(a).reshape(-1).tolist():
        ax = norm_axis(op, int(v), rank)
        if ax not in out:
            out.append(ax)
    return tuple(out)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _mean_quantized(op: Op, x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
    dt = out_dtype(op)
    lo, hi = int_range(dt)
    n = _count(x.shape, axes)
    total = np.sum(x.astype(np.int64), axis=axes, keepdims=keep)
    if n == 0:
        return np.zeros(total.shape, dtype=dt)
    if keep and x.ndim == 4 and sorted(axes) == [1, 2] and x.dtype in (np.int8, np.uint8):
        bias, mult, shift = _spatial_mean_requant(iq, oq, n)
        y = split_rounding(total, mult, shift, 16, axis=-1) + bias
        return np.clip(y, lo, hi).astype(dt)
    mult, shift = quantize_multiplier(np.float64(iq.s) / np.float64(oq.s))
    m, s = int(mult), int(shift)
    k = min(n.bit_length() - 1, 32, 31 + s)
    m = int((m << k) // n) if k >= 0 else int((m >> -k) // n)
    s = s - k
    y = multiply_by_quantized_multiplier(total - iq.zp * n, m, s) + oq.zp
    return np.clip(y, lo, hi).astype(dt)


@register("MEAN")
def mean(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MEAN over the axes of input 1."""
    y = _mean_prepared(op, args)
    if y is not None:
        return [y]
    x = need(op, args, 0)
    axes = _axes(op, args, x.ndim)
    keep = bool(opt(op, "keepDims", False))
    dt = out_dtype(op)
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        return [_mean_quantized(op, x, axes, keep)]
    if np.issubdtype(x.dtype, np.floating):
        n = _count(x.shape, axes)
        s = np.sum(x.astype(np.float32), axis=axes, keepdims=keep, dtype=np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            return [(s / np.float32(n)).astype(dt)]
    n = _count(x.shape, axes)
    s = np.sum(x.astype(np.int64), axis=axes, keepdims=keep)
    return [(s // max(n, 1)).astype(dt)]


class _MeanPlan:
    """A prepared MEAN of float32 input, or the quantized 4-D spatial mean, for one input
    shape and constant axes."""

    __slots__ = ("axes", "axes_arg", "count", "keep", "requant")

    def __init__(self, axes_arg: np.ndarray | None, axes: tuple[int, ...], keep: bool,
                 count: int, requant: Requantizer | None) -> None:
        self.axes_arg, self.axes, self.keep, self.count = axes_arg, axes, keep, count
        self.requant = requant

    def __call__(self, x: np.ndarray) -> Any:
        """The mean (a NumPy scalar for a float32 mean over every axis without keepDims, as
        the general path returns)."""
        # NumPy's stubs type ``keepdims`` of ufunc.reduce only as a literal True or False
        keep = cast(Any, self.keep)
        if self.requant is not None:
            total = np.add.reduce(x, axis=self.axes, dtype=np.int64, keepdims=keep)
            return self.requant(total)
        s = np.add.reduce(x, axis=self.axes, dtype=np.float32, keepdims=keep)
        return quiet(np.divide, s, np.float32(self.count))


def _mean_prepared(op: Op, args: list[np.ndarray | None]) -> Any:
    """Run MEAN through its prepared plan; None when it takes the general path."""
    if len(args) != 2:
        return None
    x, a = args
    if type(x) is not np.ndarray or not x.flags.c_contiguous:
        return None
    key = (op.options, op.inputs, op.outputs, x.shape, x.dtype)
    plan = cached_plan(op, key)
    if plan is None or (plan is not GENERAL and plan.axes_arg is not a):
        plan = store_plan(op, key, _mean_plan(op, x, a))
    if plan is GENERAL:
        return None
    return plan(x)


def _mean_plan(op: Op, x: np.ndarray, a: np.ndarray | None) -> _MeanPlan | str:
    """The plan of MEAN (constant axes) or GENERAL."""
    ins = op.inputs
    if len(ins) != 2 or ins[1] is None or not ins[1].is_const or len(op.outputs) != 1:
        return GENERAL
    axes = _axes(op, [x, a], x.ndim)
    keep = bool(opt(op, "keepDims", False))
    n = _count(x.shape, axes)
    dt = op.outputs[0].dtype
    if x.dtype == np.float32 and dt == np.float32 and not is_quantized(ins[0]):
        return _MeanPlan(a, axes, keep, n, None)
    if not (is_quantized(ins[0]) and is_quantized(op.outputs[0])) or dt is None or n == 0:
        return GENERAL
    if keep and x.ndim == 4 and sorted(axes) == [1, 2] and x.dtype in (np.int8, np.uint8):
        iq, oq = qparams(op, ins[0]), qparams(op, op.outputs[0])
        lo, hi = int_range(dt)
        bias, mult, shift = _spatial_mean_requant(iq, oq, n)
        c = x.shape[3]
        requant = Requantizer(mult, shift, 16, bias, lo, hi, dt, x.shape[0] * c, c)
        return _MeanPlan(a, axes, keep, n, requant)
    return GENERAL


@register("SUM")
def reduce_sum(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SUM over the axes of input 1."""
    x = need(op, args, 0)
    axes = _axes(op, args, x.ndim)
    keep = bool(opt(op, "keepDims", False))
    dt = out_dtype(op)
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
        n = _count(x.shape, axes)
        total = np.sum(x.astype(np.int64), axis=axes, keepdims=keep)
        scale = np.float32(iq.s) / np.float32(oq.s)
        bias = np.float32(-iq.zp) * scale * np.float32(n)
        v = round_half_away(total.astype(np.float32) * scale + bias).astype(np.int64) + oq.zp
        lo, hi = int_range(dt)
        return [np.clip(v, lo, hi).astype(dt)]
    if np.issubdtype(x.dtype, np.floating):
        return [np.sum(x.astype(np.float32), axis=axes, keepdims=keep,
                       dtype=np.float32).astype(dt)]
    return [np.sum(x, axis=axes, keepdims=keep).astype(dt)]


def _extreme(op: Op, args: list[np.ndarray | None], fn: np.ufunc) -> list[np.ndarray]:
    x = need(op, args, 0)
    axes = _axes(op, args, x.ndim)
    keep = bool(opt(op, "keepDims", False))
    dt = out_dtype(op)
    if x.size == 0:
        raise unsupported(op, "reduction of an empty tensor")
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
        if iq.s != oq.s or iq.zp != oq.zp:
            raise unsupported(op, f"{op.type} with different input and output quantization",
                              fix="give the input and output the same scale and zero point")
    return [fn.reduce(x, axis=axes, keepdims=keep).astype(dt)]


@register("REDUCE_MAX")
def reduce_max(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """REDUCE_MAX over the axes of input 1."""
    return _extreme(op, args, np.maximum)


@register("REDUCE_MIN")
def reduce_min(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """REDUCE_MIN over the axes of input 1."""
    return _extreme(op, args, np.minimum)


@register("ARG_MAX")
def arg_max(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """ARG_MAX over the single axis of input 1; the first index of equal maxima, as the
    output dtype (int32 or int64)."""
    x = need(op, args, 0)
    axis = norm_axis(op, int(np.asarray(need(op, args, 1)).reshape(-1)[0]), x.ndim)
    return [np.argmax(x, axis=axis).astype(out_dtype(op))]


@register("REDUCE_PROD")
def reduce_prod(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """REDUCE_PROD over the axes of input 1 (float and plain integer tensors)."""
    x = need(op, args, 0)
    if is_quantized(op.inputs[0]):
        raise unsupported(op, "quantized REDUCE_PROD is not supported")
    axes = _axes(op, args, x.ndim)
    keep = bool(opt(op, "keepDims", False))
    dt = out_dtype(op)
    return [np.prod(x, axis=axes, keepdims=keep, dtype=dt)]


def _spatial_mean_requant(iq: QParams, oq: QParams, n: int
                          ) -> tuple[int, np.ndarray, np.ndarray]:
    """TFLite's output stage of an 8-bit MEAN over axes 1 and 2 of ``n`` values:
    ``(bias, multiplier, shift)``, the bias rounded half away from zero in float32."""
    in_s, out_s = np.float32(iq.s), np.float32(oq.s)
    temp = np.float32(iq.zp) * in_s / out_s
    temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
    real = in_s / (np.float32(n) * out_s)
    mult, shift = quantize_multiplier(np.float64(real))
    return oq.zp - int(temp), mult, shift
