"""Run one stripe (a range of output rows, NHWC axis 1) of an op.

The lowering splits an op whose output exceeds the target's buffer into stripes of output
rows. Each stripe is one command; the reference runtime computes exactly those rows:

* elementwise ops: inputs whose axis-1 extent matches the output are sliced to the rows;
* CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D and AVERAGE_POOL_2D (VALID): the input is padded
  as SAME padding would (zero point for quantized convolutions, the dtype's minimum for max
  pooling) and the receptive field of the rows is cut out, then the kernel runs with VALID
  padding on that window;
* any other op: computed whole, and the stripe's rows are taken (correct, but the work is not
  split; the lowering does not stripe such ops).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from toolkit.ir import Op, Tensor

__all__ = ["stripe_step", "ELEMENTWISE", "WINDOWED"]

ELEMENTWISE = frozenset({
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW",
    "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "LOGISTIC", "QUANTIZE", "DEQUANTIZE", "RSQRT",
    "SQRT", "EXP", "ABS", "NEG", "LEAKY_RELU", "HARD_SWISH", "GELU",
})
WINDOWED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"})
_SAME, _VALID = 0, 1

Prepare = Callable[[list[Any]], list[Any]]


def _fake(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    return Tensor(t.name, shape, t.type_code, data=t.data, quant=t.quant)


def _with_rows(shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    return (shape[0], n, *shape[2:])


def stripe_step(op: Op, rows: tuple[int, int], kernel: Any) -> tuple[Prepare, Any, Op]:
    """Return ``(prepare, kernel, op)`` computing output rows ``rows`` of ``op``.

    ``prepare(args)`` turns the op's full input arrays into the stripe's inputs; calling
    ``kernel(op, prepared)`` then returns the stripe of the output.
    """
    r0, r1 = rows
    out = op.outputs[0]
    full = out.shape
    if len(full) < 2 or not 0 <= r0 < r1 <= full[1]:
        raise ValueError(f"bad stripe rows {rows} for output shape {list(full)}")
    out_fake = _fake(out, _with_rows(full, r1 - r0))
    if op.type in ELEMENTWISE:
        rank = len(full)
        axes = []
        for t in op.inputs:
            ax = None
            if t is not None and not t.is_const:
                a = 1 - (rank - len(t.shape))
                if a >= 0 and t.shape[a] == full[1]:
                    ax = a
            axes.append(ax)
        ins = [t if (t is None or ax is None) else _fake(t, (*t.shape[:ax], r1 - r0,
                                                              *t.shape[ax + 1:]))
               for t, ax in zip(op.inputs, axes)]
        sop = Op(op.type, ins, [out_fake], op.options, origins=op.origins,
                 custom_code=op.custom_code, custom_options=op.custom_options)

        def prepare_elementwise(args: list[Any]) -> list[Any]:
            return [a if ax is None or a is None else
                    a[(slice(None),) * ax + (slice(r0, r1),)] for a, ax in zip(args, axes)]

        return prepare_elementwise, kernel, sop
    if op.type in WINDOWED and not (op.type == "AVERAGE_POOL_2D"
                                    and op.options.padding == _SAME):
        return _windowed(op, rows, kernel, out_fake)

    def prepare_whole(args: list[Any]) -> list[Any]:
        return args

    def whole(o: Op, args: list[Any]) -> list[np.ndarray]:
        res = kernel(op, args)
        return [res[0][:, r0:r1]]

    return prepare_whole, whole, op


def _windowed(op: Op, rows: tuple[int, int], kernel: Any, out_fake: Tensor
              ) -> tuple[Prepare, Any, Op]:
    r0, r1 = rows
    opts = op.options
    x = op.inputs[0]
    assert x is not None
    _, in_h, in_w, _ = x.shape
    _, out_h, out_w, _ = op.outputs[0].shape
    sh, sw = opts.strideH, opts.strideW
    if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = op.inputs[1]
        assert w is not None
        kh, kw = w.shape[1], w.shape[2]
        dh, dw = opts.dilationHFactor, opts.dilationWFactor
    else:
        kh, kw = opts.filterHeight, opts.filterWidth
        dh = dw = 1
    eff_h, eff_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if opts.padding == _SAME:
        ph = max((out_h - 1) * sh + eff_h - in_h, 0)
        pw = max((out_w - 1) * sw + eff_w - in_w, 0)
        pad = ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0))
    else:
        pad = None
    if op.type == "MAX_POOL_2D":
        dt = x.dtype
        fill = np.finfo(dt).min if np.issubdtype(dt, np.floating) else np.iinfo(dt).min
    elif x.quant is not None and x.quant.zero_point.size:
        fill = int(x.quant.zero_point[0])
    else:
        fill = 0
    start = r0 * sh
    stop = (r1 - 1) * sh + eff_h
    win_w = (in_w + (pad[2][0] + pad[2][1] if pad else 0))
    new_opts = copy.copy(opts)
    new_opts.padding = _VALID
    x_fake = _fake(x, (x.shape[0], stop - start, win_w, x.shape[3]))
    sop = Op(op.type, [x_fake, *op.inputs[1:]], [out_fake], new_opts, origins=op.origins)

    def prepare_window(args: list[Any]) -> list[Any]:
        a = args[0]
        if pad is not None:
            a = np.pad(a, pad, constant_values=fill)
        return [a[:, start:stop], *args[1:]]

    return prepare_window, kernel, sop
