"""MAX_POOL_2D and AVERAGE_POOL_2D (NHWC, Pool2DOptions: filter, strides, padding, fused
activation).

Padded positions never count: max pooling pads with the lowest value, average pooling
divides by the number of in-image taps. Quantized average pooling is TFLite's: the int32 sum
of the raw values divided by the tap count, rounding half away from zero, clamped to the
activation range (input and output share their quantization in TFLite).

Each op prepares its window geometry, tap counts and activation once per input shape (see
:mod:`.common`) and reduces the taps (strided views of the padded input) in window order.
"""

from __future__ import annotations

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    GENERAL,
    FloatClamp,
    General,
    bad_input,
    float_activation,
    float_clamp,
    int_range,
    is_quantized,
    need,
    opt,
    out_dtype,
    padding_same,
    quant_activation_range,
    quiet,
    single_input_plan,
)
from toolkit.runtime.kernels.conv import Window, windows
from toolkit.runtime.kernels.fixedpoint import c_div


def _params(op: Op, x: np.ndarray) -> tuple[int, int, int, int, bool]:
    if x.ndim != 4:
        raise bad_input(op, f"pooling needs a 4-D NHWC input, got shape {x.shape}")
    fh = int(opt(op, "filterHeight", 1)) or 1
    fw = int(opt(op, "filterWidth", 1)) or 1
    sh = int(opt(op, "strideH", 1)) or 1
    sw = int(opt(op, "strideW", 1)) or 1
    return fh, fw, sh, sw, padding_same(op)


def _taps(v: np.ndarray) -> np.ndarray:
    """[N, OH, OW, C, KH, KW] -> [N, OH, OW, C, KH*KW]."""
    return v.reshape(*v.shape[:4], -1)


@register("MAX_POOL_2D")
def max_pool2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MAX_POOL_2D."""
    prepared = _prepared(op, args, "max")
    if prepared is not None:
        return prepared
    x = need(op, args, 0)
    fh, fw, sh, sw, same = _params(op, x)
    dt = out_dtype(op)
    if np.issubdtype(x.dtype, np.floating):
        xf = x.astype(np.float32)
        v = windows(xf, fh, fw, sh, sw, 1, 1, same, -np.inf)
        y = _taps(v).max(axis=-1)
        return [float_activation(op, y).astype(dt)]
    lo_t, _ = int_range(x.dtype)
    v = windows(x, fh, fw, sh, sw, 1, 1, same, lo_t)
    y = _taps(v).max(axis=-1).astype(np.int64)
    if is_quantized(op.outputs[0]):
        lo, hi = quant_activation_range(op, op.outputs[0])
        y = np.clip(y, lo, hi)
    return [y.astype(dt)]


@register("AVERAGE_POOL_2D")
def average_pool2d(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """AVERAGE_POOL_2D."""
    prepared = _prepared(op, args, "avg")
    if prepared is not None:
        return prepared
    x = need(op, args, 0)
    fh, fw, sh, sw, same = _params(op, x)
    dt = out_dtype(op)
    ones = np.ones((1, x.shape[1], x.shape[2], 1), dtype=np.int64)
    count = _taps(windows(ones, fh, fw, sh, sw, 1, 1, same, 0)).sum(axis=-1)
    if np.issubdtype(x.dtype, np.floating):
        v = windows(x.astype(np.float32), fh, fw, sh, sw, 1, 1, same, 0.0)
        t = _taps(v)
        total = np.zeros(t.shape[:-1], dtype=np.float32)
        for i in range(t.shape[-1]):
            total += t[..., i]
        with np.errstate(invalid="ignore", divide="ignore"):
            y = total / count.astype(np.float32)
        return [float_activation(op, y).astype(dt)]
    v = windows(x, fh, fw, sh, sw, 1, 1, same, 0)
    acc = _taps(v).astype(np.int64).sum(axis=-1)
    cnt = np.maximum(count, 1)
    half = cnt // 2
    y = np.where(acc > 0, c_div(acc + half, cnt), c_div(acc - half, cnt))
    if is_quantized(op.outputs[0]):
        lo, hi = quant_activation_range(op, op.outputs[0])
    else:
        lo, hi = int_range(dt)
    return [np.clip(y, lo, hi).astype(dt)]


# ------------------------------------------------------------------ prepared pooling
_F32 = np.dtype(np.float32)


class _PoolPlan:
    """A prepared MAX_POOL_2D / AVERAGE_POOL_2D for one input shape and dtype.

    ``kind``: ``"max"`` (taps reduced in (ky, kx) order), ``"tiles"`` (max over windows
    that tile the input, see :meth:`_tiles_max`) or ``"avg"``; ``lo`` / ``hi`` clamp
    integer results to a quantized activation range."""

    __slots__ = ("clamp", "count", "half", "hi", "kind", "lo", "pad", "win")

    def __init__(self, kind: str, win: Window, pad: float | int) -> None:
        self.kind, self.win, self.pad = kind, win, pad
        self.clamp: FloatClamp | None = None
        self.lo: int | None = None
        self.hi: int | None = None
        self.count: np.ndarray | None = None
        self.half: np.ndarray | None = None

    def _tiles_max(self, x: np.ndarray) -> np.ndarray:
        """Max over non-overlapping windows that tile the input: the maximum of each window
        row first, then of those rows.

        ``np.maximum`` returns its second operand on ties (and NaN when either is NaN), so
        both this and the general path return the last of the window's maximal values in
        (ky, kx) order: the results agree bit for bit (signed zeros included)."""
        win = self.win
        n, oh, ow, c, kh, kw = win.n, win.oh, win.ow, win.c, win.kh, win.kw
        x5 = np.ascontiguousarray(x).reshape(n, win.h, ow, kw, c)
        if kw == 1:
            rows = x5[:, :, :, 0]
        else:
            rows = np.maximum(x5[:, :, :, 0], x5[:, :, :, 1])
            for j in range(2, kw):
                np.maximum(rows, x5[:, :, :, j], out=rows)
        r4 = rows.reshape(n, oh, kh, ow * c)
        if kh == 1:
            y = np.array(r4[:, :, 0])
        else:
            y = np.maximum(r4[:, :, 0], r4[:, :, 1])
            for i in range(2, kh):
                np.maximum(y, r4[:, :, i], out=y)
        return y.reshape(n, oh, ow, c)

    def _average(self, x: np.ndarray, taps: list[np.ndarray]) -> np.ndarray:
        """The in-image average of every window (float32, or TFLite's integer rounding)."""
        if x.dtype == _F32:
            total = np.zeros(taps[0].shape, dtype=np.float32)
            for t in taps:
                np.add(total, t, out=total)
            quiet(np.divide, total, self.count, total)
            if self.clamp is not None:
                self.clamp(total)
            return total
        acc = np.zeros(taps[0].shape, dtype=np.int64)
        for t in taps:
            np.add(acc, t, out=acc)
        cnt, half, lo, hi = self.count, self.half, self.lo, self.hi
        if cnt is None or half is None or lo is None or hi is None:
            raise RuntimeError("integer average pooling plan without counts or range")
        y = np.where(acc > 0, c_div(acc + half, cnt), c_div(acc - half, cnt))
        np.maximum(y, lo, out=y)
        np.minimum(y, hi, out=y)
        return y.astype(x.dtype)

    def __call__(self, x: np.ndarray) -> list[np.ndarray]:
        win = self.win
        if self.kind == "tiles":
            y = self._tiles_max(x)
        else:
            xp = win.pad(x, self.pad)
            taps = [win.tap(xp, i, j) for i in range(win.kh) for j in range(win.kw)]
            if self.kind == "avg":
                return [self._average(x, taps)]
            y = np.ascontiguousarray(taps[0]) if len(taps) == 1 else \
                np.maximum(taps[0], taps[1])
            for t in taps[2:]:
                np.maximum(y, t, out=y)
        if self.clamp is not None:
            self.clamp(y)
        if self.lo is not None and self.hi is not None:  # set together
            np.maximum(y, self.lo, out=y)
            np.minimum(y, self.hi, out=y)
        return [y]


def pool_plan(op: Op, args: list[np.ndarray | None], kind: str) -> _PoolPlan | None:
    """The plan of a pooling op (``kind`` ``"max"`` or ``"avg"``) for ``args``, cached on
    the op; None when the op takes the general path."""
    x = args[0] if len(args) == 1 else None
    if type(x) is not np.ndarray:
        return None
    plan = single_input_plan(op, x, _pool_plan, kind)
    return plan if isinstance(plan, _PoolPlan) else None


def _prepared(op: Op, args: list[np.ndarray | None], kind: str) -> list[np.ndarray] | None:
    """Run a pooling op through its prepared plan; None when it takes the general path."""
    plan = pool_plan(op, args, kind)
    return None if plan is None else plan(need(op, args, 0))


def _pool_plan(op: Op, x: np.ndarray, kind: str) -> _PoolPlan | General:
    """The plan of a pooling op (``kind`` ``"max"`` or ``"avg"``) or GENERAL."""
    if x.ndim != 4 or len(op.outputs) != 1 or op.outputs[0].dtype != x.dtype:
        return GENERAL
    fh, fw, sh, sw, same = _params(op, x)
    win = Window(x.shape, fh, fw, sh, sw, 1, 1, same)
    if not win.usable:
        return GENERAL
    if kind == "max" and (fh, fw) == (sh, sw) and not win.padded \
            and (win.oh * fh, win.ow * fw) == (win.h, win.w):
        kind = "tiles"
    size = win.n * win.oh * win.ow * win.c
    if x.dtype == _F32:
        plan = _PoolPlan(kind, win, 0.0 if kind == "avg" else -np.inf)
        plan.clamp = float_clamp(op, size, _F32, shape=(win.n, win.oh, win.ow, win.c))
        if kind == "avg":
            plan.count = _counts(win, same).astype(np.float32)
        return plan
    if x.dtype.kind not in "iu" or x.dtype.itemsize > 4:
        return GENERAL
    dmin, dmax = int_range(x.dtype)
    if kind in ("max", "tiles"):
        plan = _PoolPlan(kind, win, dmin)
        if is_quantized(op.outputs[0]):
            lo, hi = quant_activation_range(op, op.outputs[0])
            if (lo, hi) != (dmin, dmax):
                plan.lo, plan.hi = max(lo, dmin), min(hi, dmax)
                if plan.lo > plan.hi:
                    return GENERAL
        return plan
    plan = _PoolPlan(kind, win, 0)
    count = _counts(win, same)
    plan.count = np.maximum(count, 1)
    plan.half = plan.count // 2
    if is_quantized(op.outputs[0]):
        plan.lo, plan.hi = quant_activation_range(op, op.outputs[0])
    else:
        plan.lo, plan.hi = dmin, dmax
    return plan


def _counts(win: Window, same: bool) -> np.ndarray:
    """The number of in-image taps of every window, [1, OH, OW, C] (int64)."""
    ones = np.ones((1, win.h, win.w, 1), dtype=np.int64)
    count = _taps(windows(ones, win.kh, win.kw, win.sh, win.sw, 1, 1, same, 0)).sum(axis=-1)
    return np.ascontiguousarray(np.broadcast_to(count, (1, win.oh, win.ow, win.c)))
