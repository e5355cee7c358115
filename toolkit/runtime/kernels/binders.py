"""Kernels bound to fixed input shapes: the interpreter's fast path (see ``Bound``).

A model with static shapes runs its ops on inputs of the same shapes, dtypes and constant
arrays at every inference, so the interpreter binds each op once to a callable made for
exactly those inputs. A binder takes the op's prepared plan (the kernel's own, cached on the
op, see :mod:`.common`) and returns a closure that calls it without the per-call lookup; for
the ops that dominate small convolutional models it goes further and keeps scratch buffers
whose views are computed once: the zero-padded input of a convolution (only its interior
is rewritten), the patch matrix, the depthwise accumulators. The arithmetic is the plan's,
operation for operation, so a bound kernel's results equal the kernel's bit for bit.

Binders return None for inputs their kernel's plan does not take; the interpreter then calls
the kernel itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import Bound, binds
from toolkit.runtime.kernels.activation import _relu_plan, _softmax_plan, softmax_f
from toolkit.runtime.kernels.common import FloatClamp, single_input_plan, weighted_plan
from toolkit.runtime.kernels.conv import (
    Window,
    _conv_plan,
    _ConvPlan,
    _depthwise_plan,
    _DepthwisePlan,
)
from toolkit.runtime.kernels.elementwise import _NoPlan, binary_plan
from toolkit.runtime.kernels.matmul import _fc_plan
from toolkit.runtime.kernels.pool import pool_plan

__all__: list[str] = []

_F32 = np.dtype(np.float32)
Args = list[np.ndarray | None]


def _call(plan: Callable[[np.ndarray], Any], first: bool = False) -> Bound:
    """``plan`` as a bound kernel of the op's first input (``first``: it returns a list)."""
    if first:
        def bound_list(x: np.ndarray, *_: Any) -> np.ndarray:
            return plan(x)[0]

        return bound_list

    def bound(x: np.ndarray, *_: Any) -> np.ndarray:
        return plan(x)

    return bound


def _clamp_fn(clamp: FloatClamp | None) -> Callable[[np.ndarray], Any] | None:
    """The clamp as a function of an array of its own shape (None: no activation)."""
    if clamp is None:
        return None
    if clamp.tanh or clamp.length != -1:
        return clamp
    lo, hi = clamp.lo, clamp.hi
    maximum, minimum = np.maximum, np.minimum
    if lo is not None and hi is not None:
        def both(y: np.ndarray) -> None:
            maximum(y, lo, out=y)
            minimum(y, hi, out=y)

        return both
    if lo is not None:
        return lambda y: maximum(y, lo, out=y)
    if hi is None:  # no bounds: the clamp's own call
        return clamp
    return lambda y: minimum(y, hi, out=y)


# ------------------------------------------------------------------ convolutions
@binds("CONV_2D")
def bind_conv2d(op: Op, args: Args) -> Bound | None:
    """CONV_2D: float32 single-batch convolutions patch into a kept buffer."""
    plan = weighted_plan(op, args, _conv_plan)
    if plan is None:
        return None
    win = plan.win
    if plan.zp is not None or win.n != 1 or len(plan.blocks) != 1:
        return _call(plan)
    return _float_conv(plan)


def _float_conv(plan: _ConvPlan) -> Bound:
    win, wmat, bias, length = plan.win, plan.wmat, plan.bias, plan.length
    clamp = _clamp_fn(plan.clamp)
    out_shape = (1, win.oh, win.ow, plan.n_out)
    flat = bias is not None and length
    matmul, add = np.matmul, np.add
    patch = _patcher(win)

    def conv(x: np.ndarray, *_: Any) -> np.ndarray:
        y = matmul(patch(x), wmat).reshape(out_shape)
        if bias is not None:
            v = y.reshape(-1, length) if flat else y
            add(v, bias, out=v)
        if clamp is not None:
            clamp(y)
        return y

    return conv


def _patcher(win: Window) -> Callable[[np.ndarray], np.ndarray]:
    """``patch(x)``: the [OH * OW, KH * KW * C] patch matrix of a single-batch float32
    input, C-contiguous as the plan makes it (a 1x1 convolution's input viewed as one)."""
    if win.kh == win.kw == win.sh == win.sw == 1 and not win.padded:
        rows = (win.oh * win.ow, win.c)
        return lambda x: x.reshape(rows)
    c, it = win.c, np.dtype(np.float32).itemsize
    xp = np.zeros((1, win.hp, win.wp, c), dtype=np.float32)  # its border stays zero
    inner = xp[:, win.pt:win.pt + win.h, win.pl:win.pl + win.w]
    patches = np.empty((win.oh * win.ow, win.kh * win.kw * c), dtype=np.float32)
    # the windows of the padded input; with dilation 1 a window row (kx, c) is one run
    if win.dw == 1:
        shape: tuple[int, ...] = (win.oh, win.ow, win.kh, win.kw * c)
        strides: tuple[int, ...] = (win.sh * win.wp * c * it, win.sw * c * it,
                                    win.dh * win.wp * c * it, it)
    else:
        shape = (win.oh, win.ow, win.kh, win.kw, c)
        strides = (win.sh * win.wp * c * it, win.sw * c * it, win.dh * win.wp * c * it,
                   win.dw * c * it, it)
    src = np.ndarray(shape, dtype=np.float32, buffer=xp, strides=strides)
    dst = patches.reshape(shape)
    copyto = np.copyto

    def patch(x: np.ndarray) -> np.ndarray:
        copyto(inner, x)
        copyto(dst, src)
        return patches

    return patch


@binds("DEPTHWISE_CONV_2D")
def bind_depthwise_conv2d(op: Op, args: Args) -> Bound | None:
    """DEPTHWISE_CONV_2D: float32 stride-1 taps over a kept padded buffer."""
    plan = weighted_plan(op, args, _depthwise_plan)
    if plan is None:
        return None
    if plan.zp is not None or not plan.ext or (plan.clamp is not None and plan.clamp.tanh):
        return _call(plan)
    return _float_depthwise(plan)


def _float_depthwise(plan: _DepthwisePlan) -> Bound:
    win, ext, rows, offsets = plan.win, plan.ext, plan.rows, plan.offsets
    full = win.n * win.hp * win.wp * win.c
    buf = np.zeros(full + offsets[-1], dtype=np.float32)
    inner = buf[:full].reshape(win.n, win.hp, win.wp, win.c)[
        :, win.pt:win.pt + win.h, win.pl:win.pl + win.w]
    acc = np.zeros(full, dtype=np.float32)
    a = acc[:ext].reshape(rows)
    out_view = acc.reshape(win.n, win.hp, win.wp, win.c)[:, :win.oh, :win.ow]
    out_shape = (win.n, win.oh, win.ow, win.c)
    bias = plan.bias
    clamp = plan.clamp
    lo = hi = None
    if clamp is not None:
        lo, hi = clamp.lo, clamp.hi
        if clamp.length > 0:
            a_clamp: np.ndarray = a.reshape(-1, clamp.length)
        else:
            a_clamp = a
    copyto, multiply, add = np.copyto, np.multiply, np.add
    maximum, minimum, empty = np.maximum, np.minimum, np.empty
    if plan.all_taps is not None:
        it = buf.itemsize
        runs = np.ndarray((win.kh, win.kw, ext), dtype=np.float32, buffer=buf,
                          strides=(win.dh * win.wp * win.c * it, win.dw * win.c * it, it))
        taps3 = plan.all_taps
        prods3 = np.empty((win.kh, win.kw, ext), dtype=np.float32)
        prods = prods3.reshape(-1, ext)
        add_reduce = np.add.reduce

        def accumulate() -> None:
            multiply(runs, taps3, out=prods3)
            add_reduce(prods, axis=0, out=a)
    else:
        pairs = [(buf[off:off + ext].reshape(rows), wt)
                 for off, wt in zip(offsets, plan.taps)]
        tmp = np.empty(ext, dtype=np.float32).reshape(rows)
        src0, w0 = pairs[0]

        def accumulate() -> None:
            multiply(src0, w0, out=a)
            for src, wt in pairs[1:]:
                multiply(src, wt, out=tmp)
                add(a, tmp, out=a)

    def depthwise(x: np.ndarray, *_: Any) -> np.ndarray:
        copyto(inner, x)
        accumulate()
        if bias is not None:
            add(a, bias, out=a)
        if lo is not None:
            maximum(a_clamp, lo, out=a_clamp)
        if hi is not None:
            minimum(a_clamp, hi, out=a_clamp)
        y = empty(out_shape, dtype=np.float32)
        copyto(y, out_view)
        return y

    return depthwise


@binds("FULLY_CONNECTED")
def bind_fully_connected(op: Op, args: Args) -> Bound | None:
    """FULLY_CONNECTED: its plan, called directly."""
    plan = weighted_plan(op, args, _fc_plan)
    return None if plan is None else _call(plan)


# ------------------------------------------------------------------ pooling
def _bind_pool(op: Op, args: Args, kind: str) -> Bound | None:
    plan = pool_plan(op, args, kind)
    if plan is None:
        return None
    x0 = args[0]
    if x0 is None:  # pool_plan has no plan for a missing input
        return None
    win = plan.win
    if plan.kind != "tiles" or x0.dtype != _F32 or win.kh != 2 or win.kw != 2:
        return _call(plan, first=True)
    # 2x2 tiles: the maximum of each window row, then of the two rows (see _tiles_max)
    shape5 = (win.n, win.h, win.ow, 2, win.c)
    shape4 = (win.n, win.oh, 2, win.ow * win.c)
    out_shape = (win.n, win.oh, win.ow, win.c)
    rows = np.empty((win.n, win.h, win.ow, win.c), dtype=np.float32)
    r4 = rows.reshape(shape4)
    top, bottom = r4[:, :, 0], r4[:, :, 1]
    clamp = _clamp_fn(plan.clamp)
    maximum = np.maximum

    def max_pool(x: np.ndarray, *_: Any) -> np.ndarray:
        x5 = x.reshape(shape5)
        maximum(x5[:, :, :, 0], x5[:, :, :, 1], out=rows)
        y = maximum(top, bottom).reshape(out_shape)
        if clamp is not None:
            clamp(y)
        return y

    return max_pool


@binds("MAX_POOL_2D")
def bind_max_pool2d(op: Op, args: Args) -> Bound | None:
    """MAX_POOL_2D: 2x2 float32 tiles in two maximums; other inputs through the plan."""
    return _bind_pool(op, args, "max")


@binds("AVERAGE_POOL_2D")
def bind_average_pool2d(op: Op, args: Args) -> Bound | None:
    """AVERAGE_POOL_2D: its plan, called directly."""
    return _bind_pool(op, args, "avg")


# ------------------------------------------------------------------ elementwise
def _bind_binary(op: Op, args: Args, fn: Callable[..., np.ndarray],
                 raw: bool = False) -> Bound | None:
    if len(args) != 2:
        return None
    a, b = args
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None
    plan = binary_plan(op, a, b, fn, raw)
    if isinstance(plan, _NoPlan):
        return None
    return plan.run


for _kind, _fn, _raw in (("ADD", np.add, False), ("SUB", np.subtract, False),
                         ("MUL", np.multiply, False), ("DIV", np.divide, False),
                         ("MINIMUM", np.minimum, True), ("MAXIMUM", np.maximum, True)):
    def _binder(op: Op, args: Args, fn: Callable[..., np.ndarray] = _fn,
                raw: bool = _raw) -> Bound | None:
        return _bind_binary(op, args, fn, raw)

    _binder.__doc__ = f"{_kind}: its prepared plan, called directly."
    binds(_kind)(_binder)

_RELU_BOUNDS = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0),
                "RELU_0_TO_1": (0.0, 1.0)}


@binds(*_RELU_BOUNDS)
def bind_relu(op: Op, args: Args) -> Bound | None:
    """The RELU family: a float32 clamp, or a table of every 8/16-bit input value."""
    x = args[0] if len(args) == 1 else None
    if type(x) is not np.ndarray or not x.flags.c_contiguous:
        return None
    lo, hi = _RELU_BOUNDS[op.type]
    plan = single_input_plan(op, x, _relu_plan, lo, hi)
    if isinstance(plan, FloatClamp):
        return plan.of
    if isinstance(plan, np.ndarray):
        table, intp = plan, np.intp
        return lambda v: table[v.astype(intp)]
    return None


@binds("SOFTMAX")
def bind_softmax(op: Op, args: Args) -> Bound | None:
    """SOFTMAX on float32: the kernel's arithmetic, without the plan lookup."""
    x = args[0] if len(args) == 1 else None
    if type(x) is not np.ndarray or not x.flags.c_contiguous:
        return None
    plan = single_input_plan(op, x, _softmax_plan)
    if not isinstance(plan, tuple) or plan[1] is not None:
        return None
    beta = plan[0]
    return lambda v: softmax_f(v, beta)


@binds("RESHAPE")
def bind_reshape(op: Op, args: Args) -> Bound | None:
    """RESHAPE with a constant (or no) shape input: a view of the input in the new shape."""
    if not args or type(args[0]) is not np.ndarray:
        return None
    if len(args) > 1 and args[1] is not None and not (
            len(op.inputs) > 1 and op.inputs[1] is not None and op.inputs[1].is_const):
        return None
    from toolkit.runtime.kernels.shape_ops import reshape

    shape = reshape(op, list(args))[0].shape
    return lambda x, *_: x.reshape(shape)
