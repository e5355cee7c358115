"""Per-op code emission: one C++ statement block per step, calling the op library.

:func:`emit_step` returns the C++ code of one step. Constant arrays the call needs (filters in
the layout the kernels read, biases, per-channel multipliers, tables) go to the parameters
file through the :class:`Emitter`'s :class:`~.params.ParamsBuilder`; shapes, strides and
scalar constants are written into the code. Quantized constants are TFLite's (see
:mod:`.quant`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from toolkit.custom_ops import custom_op, unregistered
from toolkit.errors import UnsupportedOpError
from toolkit.fixed_point import dequantize_filter, squared_difference_int8
from toolkit.generator.analysis import Analysis, Step
from toolkit.generator.movement import MOVEMENT, affine_map, index_map
from toolkit.generator.params import ParamsBuilder
from toolkit.generator.quant import (
    activation_range,
    channel_multipliers,
    is_quantized,
    mean_requant,
    qp,
    quantize_multiplier,
    round_half_away,
    spatial_mean_requant,
)
from toolkit.generator.tables import (
    abs_table,
    float_pair_table,
    hard_swish_table,
)
from toolkit.integer_lstm import prepare_integer_lstm
from toolkit.ir import Op, Tensor
from toolkit.util.resample import bilinear_axis_float, bilinear_axis_int

__all__ = ["Emitter", "emit_step", "SUPPORTED", "ctype"]

_F32, _I8, _I32 = np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.int32)
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.int8): "int8_t",
           np.dtype(np.uint8): "uint8_t", np.dtype(np.int16): "int16_t",
           np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t",
           np.dtype(np.bool_): "bool"}

ELEMENTWISE = frozenset({
    "ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "POW",
    "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "TANH", "LOGISTIC", "RSQRT", "SQRT", "EXP",
    "ABS", "NEG", "QUANTIZE", "DEQUANTIZE", "LEAKY_RELU", "LOG", "GELU", "HARD_SWISH", "ELU",
    "SQUARE",
})
WINDOWED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D"})


def ctype(dt: np.dtype | None, where: str) -> str:
    """The C++ type of a NumPy dtype (UnsupportedOpError for others)."""
    if dt is None or dt not in _CTYPES:
        raise UnsupportedOpError(f"tensor type {dt} has no C++ kernel", where=where,
                                 fix="use float32 or int8 tensors (float16 or sparse weights "
                                     "read by DEQUANTIZE / DENSIFY are computed at generation "
                                     "time; a float16 activation is not: convert the model "
                                     "with float32 activations)")
    return _CTYPES[dt]


@dataclass
class Emitter:
    """Where each tensor lives in the generated code, and the parameters being collected."""

    analysis: Analysis
    params: ParamsBuilder
    names: dict[Tensor, str] = field(default_factory=dict)  # input/output buffer members
    members: list[str] = field(default_factory=list)  # extra members of the model class
    ctor: list[str] = field(default_factory=list)  # statements of its constructor

    def table(self, size: int, fill: str, unless: str | None = None) -> str:
        """A member table of ``size`` int8 values filled by the constructor statement
        ``fill`` (``@TABLE@`` stands for its data pointer); returns the pointer expression.
        With ``unless`` (a preprocessor condition), builds where it holds leave it empty."""
        name = f"table{len(self.members)}_"
        self.members.append(f"std::vector<int8_t> {name};")
        code = f"{name}.resize({size});\n  {fill.replace('@TABLE@', f'{name}.data()')}"
        self.ctor.append(code if unless is None else f"#if !({unless})\n  {code}\n#endif")
        return f"{name}.data()"

    def ptr(self, t: Tensor | None, const: bool = True) -> str:
        """A C++ expression for a typed pointer to the data of ``t`` (``nullptr`` for None)."""
        if t is None:
            return "nullptr"
        ct = ctype(t.dtype, f"tensor {t.name!r}")
        if t in self.names:
            return f"{self.names[t]}.data()"
        off = self.analysis.arena_offsets.get(t)
        if off is not None:
            return f"A<{ct}>({off})"
        if t.data is not None:
            return f"P<{ct}>({self.params.add(np.asarray(t.data, dtype=t.dtype))})"
        raise UnsupportedOpError(f"tensor {t.name!r} is read before any op writes it",
                                 where=f"tensor {t.name!r}",
                                 fix="give the tensor a producer op or constant data (check "
                                     "that the model runs in the reference runtime, tk.run)")

    def param(self, array: np.ndarray, ct: str) -> str:
        """A pointer expression to ``array`` stored in the parameters file."""
        return f"P<{ct}>({self.params.add(array)})"


def _where(op: Op) -> str:
    return f"op {op.kind} {op.name!r}"


def _unsupported(op: Op, what: str, fix: str | None = None) -> UnsupportedOpError:
    return UnsupportedOpError(what, where=_where(op),
                              fix=fix or "compute this op with the reference runtime "
                                         "(toolkit.runtime.interpreter.run)")


def _opt(op: Op, name: str, default: object = None) -> object:
    o = op.options
    v = getattr(o, name, default) if o is not None else default
    return default if v is None else v


def _int(op: Op, name: str, default: int) -> int:
    v = _opt(op, name, default)
    return int(v) if isinstance(v, (int, float, np.integer)) else default


def _const(op: Op, i: int) -> np.ndarray:
    t = op.inputs[i] if i < len(op.inputs) else None
    if t is None or t.data is None:
        raise _unsupported(op, f"input {i} must be a constant for code generation",
                           fix="fold it into a constant first (toolkit.compiler)")
    return np.asarray(t.data)


def _input(op: Op, i: int) -> Tensor | None:
    return op.inputs[i] if i < len(op.inputs) else None


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _arr(values: list[int] | tuple[int, ...]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def _flt(v: float | np.floating) -> str:
    """A float32 literal that round-trips exactly."""
    f = float(np.float32(v))
    if math.isinf(f):
        return "std::numeric_limits<float>::infinity()" if f > 0 else \
            "-std::numeric_limits<float>::infinity()"
    return f"{f!r}f" if "e" in repr(f) or "." in repr(f) else f"{f!r}.0f"


def _dbl(v: float) -> str:
    return repr(float(v))


def _conv_out_and_pad(size: int, k: int, stride: int, dilation: int, same: bool
                      ) -> tuple[int, int]:
    eff = (k - 1) * dilation + 1
    out = (size + stride - 1) // stride if same else (size + stride - eff) // stride
    out = max(out, 0)
    total = max(0, (out - 1) * stride + eff - size) if same else 0
    return out, total // 2


def _same(op: Op) -> bool:
    p = _int(op, "padding", 0)
    if p not in (0, 1):
        raise _unsupported(op, f"padding type {p}")
    return p == 0


def _rows(step: Step, full: int) -> tuple[int, int]:
    return step.rows if step.rows is not None else (0, full)


#: work (multiply-adds, or values read by a window) from which a windowed op's rows are split
#: across the model's threads; below it the split would cost more than it saves
PARALLEL_WORK = 1 << 17


def _row_call(call: str, r0: int, r1: int, work: int) -> str:
    """The statement calling ``call`` (a call missing its last two arguments, the rows) on
    rows ``[r0, r1)``: through the model's thread pool (``pool_.rows``, one contiguous part
    of the rows per thread) when ``work`` reaches :data:`PARALLEL_WORK`, else directly."""
    if work < PARALLEL_WORK or r1 - r0 < 2:
        return f"{call}, {r0}, {r1});"
    return f"pool_.rows({r0}, {r1}, [&](int tk_r0, int tk_r1) {{ {call}, tk_r0, tk_r1); }});"


def _act(op: Op) -> int:
    a = op.activation
    if a not in (0, 1, 2, 3, 4):
        raise _unsupported(op, f"fused activation {a}")
    return a


def _float_filter(op: Op, w: np.ndarray, axis: int) -> np.ndarray:
    """A float32 filter (dequantized when the filter alone is quantized: hybrid)."""
    t = op.inputs[1]
    if w.dtype == _F32:
        return w
    if not is_quantized(t):
        raise _unsupported(op, f"filter of type {w.dtype} with float input")
    return dequantize_filter(w, qp(op, t), axis)


def _filter_offsets(op: Op, n_out: int) -> np.ndarray:
    p = qp(op, op.inputs[1])
    zp = p.zero_point.astype(np.int64)
    return np.broadcast_to(zp, (n_out,)).copy() if zp.size in (1, n_out) \
        else np.zeros(n_out, dtype=np.int64)


def _check_int8(op: Op, *ts: Tensor | None) -> None:
    for t in ts:
        if t is not None and t.dtype != _I8:
            raise _unsupported(op, f"tensor {t.name!r} of type {t.dtype} in a quantized op "
                                   "(the C++ kernels take int8)")


def _quant_out(e: Emitter, op: Op, mult: np.ndarray, upward: int) -> str:
    """A ``tk::QuantOut`` initialiser for per-channel real multipliers ``mult``."""
    out = op.outputs[0]
    if op.activation == 4:
        raise _unsupported(op, "fused TANH on a quantized output")
    m, s = quantize_multiplier(mult)
    per = int(m.size > 1 and (np.unique(m).size > 1 or np.unique(s).size > 1))
    if not per:
        m, s = m[:1], s[:1]
    lo, hi = activation_range(op, out)
    return (f"tk::QuantOut{{{e.param(m.astype(np.int32), 'int32_t')}, "
            f"{e.param(s.astype(np.int32), 'int32_t')}, {per}, {qp(op, out).zp}, {lo}, {hi}, "
            f"{upward}}}")


def _bias(op: Op, n_out: int, dt: np.dtype) -> np.ndarray | None:
    t = _input(op, 2)
    if t is None:
        return None
    if t.data is None:
        raise _unsupported(op, "bias must be a constant")
    b = np.asarray(t.data).reshape(-1)
    if b.size != n_out:
        raise _unsupported(op, f"bias has {b.size} values for {n_out} outputs")
    return b.astype(dt)


# ------------------------------------------------------------------ convolution
def _conv(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    w = _const(op, 1)
    assert x is not None
    if len(x.shape) != 4 or w.ndim != 4:
        raise _unsupported(op, "convolution needs 4-D input and filter")
    depthwise = op.type == "DEPTHWISE_CONV_2D"
    n, h, wd, c = x.shape
    if depthwise:
        _, kh, kw, o = w.shape
        if c == 0 or o % c:
            raise _unsupported(op, f"{o} filter channels for {c} input channels")
        mult = o // c
    else:
        o, kh, kw, ci = w.shape
        if ci != c:
            raise _unsupported(op, f"grouped convolution ({c} input channels, filter {ci})")
        mult = 1
    sh, sw = _int(op, "strideH", 1) or 1, _int(op, "strideW", 1) or 1
    dh, dw = _int(op, "dilationHFactor", 1) or 1, _int(op, "dilationWFactor", 1) or 1
    same = _same(op)
    oh, pt = _conv_out_and_pad(h, kh, sh, dh, same)
    ow, pl = _conv_out_and_pad(wd, kw, sw, dw, same)
    if tuple(out.shape) != (n, oh, ow, o):
        raise _unsupported(op, f"output shape {list(out.shape)} is not the convolution's "
                               f"{[n, oh, ow, o]}")
    r0, r1 = _rows(step, oh)
    work = n * (r1 - r0) * ow * o * kh * kw * (1 if depthwise else c)
    geom = f"tk::ConvGeom{{{n}, {h}, {wd}, {c}, {kh}, {kw}, {oh}, {ow}, {o}, {sh}, {sw}, " \
           f"{dh}, {dw}, {pt}, {pl}, {mult}}}"
    if is_quantized(x):
        _check_int8(op, x, out)
        iq, wq, oq = qp(op, x), qp(op, op.inputs[1]), qp(op, out)
        if w.dtype not in (_I8, np.dtype(np.uint8)):
            raise _unsupported(op, f"quantized convolution with a {w.dtype} filter")
        bias = _bias(op, o, _I32)
        if depthwise:
            w_eff = (w.astype(np.int64) - _filter_offsets(op, o)).reshape(kh, kw, o)
            upward = (o // 8) * 8
        else:
            w_eff = (w.astype(np.int64) - _filter_offsets(op, o).reshape(o, 1, 1, 1)
                     ).transpose(1, 2, 3, 0)  # [KH, KW, C, O]
            if w_eff.size and int(w_eff.min()) >= -128 and int(w_eff.max()) <= 127:
                return _conv_q8x4(e, op, geom, w_eff, bias, iq.zp,
                                  channel_multipliers(iq, wq, oq, o, float_product=False),
                                  r0, r1, work)
            if c % 2:
                w_eff = np.concatenate([w_eff, np.zeros((kh, kw, 1, o), np.int64)], axis=2)
            # pairs of input channels side by side: [KH, KW, C/2, O, 2]
            w_eff = w_eff.reshape(kh, kw, -1, 2, o).transpose(0, 1, 2, 4, 3)
            upward = o
        wq_p = e.param(np.ascontiguousarray(w_eff.astype(np.int16)), "int16_t")
        mults = channel_multipliers(iq, wq, oq, o, float_product=False)
        b = "nullptr" if bias is None else e.param(bias, "int32_t")
        fn = "depthwise_q8" if depthwise else "conv2d_q8"
        if depthwise and mult == 1:  # the AVX2 kernel's filter and bias, prepared here
            wi, folded = _depthwise_q8_prepared(w_eff, bias, iq.zp)
            fn = "depthwise_q8_pre"
            b += f", {e.param(wi, 'int16_t')}, {e.param(folded, 'int32_t')}"
        return (f"const tk::QuantOut q = {_quant_out(e, op, mults, upward)};\n"
                + _row_call(f"tk::{fn}({geom}, {e.ptr(x)}, {iq.zp}, {wq_p}, {b}, q, "
                            f"{e.ptr(out)}", r0, r1, work))
    if x.dtype != _F32 or out.dtype != _F32:
        raise _unsupported(op, f"convolution of {x.dtype} input without quantization")
    wf = _float_filter(op, w, 3 if depthwise else 0)
    bias = _bias(op, o, _F32)
    b = "nullptr" if bias is None else e.param(bias, "float")
    if depthwise:
        wk = e.param(np.ascontiguousarray(wf.reshape(kh, kw, o)), "float")
        if mult == 1:  # the AVX2 kernel's filter and bias, packed here
            return _row_call(f"tk::depthwise_f32_pre({geom}, {e.ptr(x)}, {wk}, {b}, "
                             f"{e.param(_depthwise_f32_packed(wf, bias), 'float')}, "
                             f"{_act(op)}, {e.ptr(out)}", r0, r1, work)
        return _row_call(f"tk::depthwise_f32({geom}, {e.ptr(x)}, {wk}, {b}, {_act(op)}, "
                         f"{e.ptr(out)}", r0, r1, work)
    if o <= FEW_CHANNELS and (kh * kw > 1 or o <= 2):
        # the GEMM's panels of 16 channels would be mostly empty (a pointwise GEMM reads its
        # pixels in place, which beats gathering them unless nearly every lane is empty)
        k = kh * kw * c
        packed = np.zeros((o, -(-k // 8) * 8), np.float32)
        packed[:, :k] = wf.reshape(o, k)
        return _row_call(f"tk::conv2d_f32_few({geom}, {e.ptr(x)}, {e.param(packed, 'float')}, "
                         f"{b}, {_act(op)}, {e.ptr(out)}", r0, r1, work)
    nr, panels = gemm_panels(wf.transpose(1, 2, 3, 0).reshape(kh * kw * c, o))
    n_panels = panels.shape[0]
    if ((r0, r1) == (0, oh) and work >= PARALLEL_WORK and n_panels >= 2
            and panels.size > n * h * wd * c):
        # more filter than input: threads split the output channels (each reads only its
        # panels, where row stripes would each stream the whole filter)
        return (f"pool_.rows(0, {n_panels}, [&](int tk_p0, int tk_p1) {{ "
                f"tk::conv2d_f32_panels({geom}, {e.ptr(x)}, {e.param(panels, 'float')}, {nr}, "
                f"{b}, {_act(op)}, {e.ptr(out)}, tk_p0, tk_p1); }});")
    return _row_call(f"tk::conv2d_f32_packed({geom}, {e.ptr(x)}, {e.param(panels, 'float')}, "
                     f"{nr}, {b}, {_act(op)}, {e.ptr(out)}", r0, r1, work)


#: float convolutions with at most this many output channels (pointwise ones: 2) dot each
#: pixel's gathered taps with each filter (tk::conv2d_f32_few) instead of going through the
#: GEMM's channel panels
FEW_CHANNELS = 8


def gemm_panels(w: np.ndarray) -> tuple[int, np.ndarray]:
    """A float ``[K, O]`` weight matrix packed for the op library's GEMM microkernels:
    ``(nr, panels)`` with ``panels`` float32 ``[ceil(O / nr), K, nr]`` (panels of ``nr``
    output channels, 16 when O <= 16 else 32, zeros after the last channel)."""
    k, o = w.shape
    nr = 16 if o <= 16 else 32
    n_panels = -(-o // nr)
    padded = np.zeros((k, n_panels * nr), np.float32)
    padded[:, :o] = w
    return nr, np.ascontiguousarray(padded.reshape(k, n_panels, nr).transpose(1, 0, 2))


def _transpose_conv(e: Emitter, step: Step) -> str:
    op = step.op
    shape = [int(v) for v in _const(op, 0).reshape(-1)]
    w = _const(op, 1)
    x, out = op.inputs[2], op.outputs[0]
    assert x is not None
    if len(x.shape) != 4 or w.ndim != 4 or len(shape) != 4:
        raise _unsupported(op, "TRANSPOSE_CONV needs 4-D input, filter and output shape")
    n, h, wd, c = x.shape
    o, kh, kw, c2 = w.shape
    if c2 != c or tuple(shape) != tuple(out.shape) or shape[0] != n or shape[3] != o:
        raise _unsupported(op, f"filter {list(w.shape)} does not fit input {list(x.shape)} "
                               f"and output {list(out.shape)}")
    sh, sw = _int(op, "strideH", 1) or 1, _int(op, "strideW", 1) or 1
    same = _same(op)
    oh, ow = shape[1], shape[2]
    _, pt = _conv_out_and_pad(oh, kh, sh, 1, same)
    _, pl = _conv_out_and_pad(ow, kw, sw, 1, same)
    geom = f"tk::TConvGeom{{{n}, {h}, {wd}, {c}, {kh}, {kw}, {o}, {sh}, {sw}, {oh}, {ow}, " \
           f"{pt}, {pl}}}"
    bias_t = _input(op, 3)
    if is_quantized(x):
        _check_int8(op, x, out)
        if w.dtype != _I8:
            raise _unsupported(op, f"quantized TRANSPOSE_CONV with a {w.dtype} filter")
        iq, wq, oq = qp(op, x), qp(op, op.inputs[1]), qp(op, out)
        if wq.scale.size not in (1, o):
            raise _unsupported(op, f"filter has {wq.scale.size} scales for {o} channels")
        zp_w = wq.zero_point.reshape(-1, 1, 1, 1) if wq.zero_point.size == o else wq.zp
        w_eff = np.ascontiguousarray((w.astype(np.int64) - zp_w).astype(np.int16))
        bias = None
        if bias_t is not None:
            if bias_t.data is None:
                raise _unsupported(op, "bias must be a constant")
            bias = np.asarray(bias_t.data).reshape(-1).astype(np.int64)
            if bias.size != o or np.abs(bias).max(initial=0) >= 2**31:
                raise _unsupported(op, f"bias of {bias.size} values for {o} channels")
        b = "nullptr" if bias is None else e.param(bias.astype(np.int32), "int32_t")
        mults = channel_multipliers(iq, wq, oq, o, float_product=False)
        return (f"const tk::QuantOut q = {_quant_out(e, op, mults, o)};\n"
                f"tk::transpose_conv_q8({geom}, {e.ptr(x)}, {iq.zp}, "
                f"{e.param(w_eff, 'int16_t')}, {b}, q, {e.ptr(out)});")
    if x.dtype != _F32 or out.dtype != _F32 or w.dtype != _F32:
        raise _unsupported(op, f"TRANSPOSE_CONV of {x.dtype} input, {w.dtype} filter")
    bf = None
    if bias_t is not None:
        bf = _const(op, 3).astype(np.float32).reshape(-1)
        if bf.size != o:
            raise _unsupported(op, f"bias of {bf.size} values for {o} channels")
    b = "nullptr" if bf is None else e.param(bf, "float")
    return (f"tk::transpose_conv_f32({geom}, {e.ptr(x)}, "
            f"{e.param(np.ascontiguousarray(w), 'float')}, {b}, {_act(op)}, {e.ptr(out)});")


def _conv3d(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    w = _const(op, 1)
    assert x is not None
    if len(x.shape) != 5 or w.ndim != 5 or w.shape[3] != x.shape[4]:
        raise _unsupported(op, f"filter {list(w.shape)} does not fit input {list(x.shape)}")
    if x.dtype != _F32 or out.dtype != _F32 or w.dtype != _F32:
        raise _unsupported(op, f"CONV_3D of {x.dtype} (float32 only)")
    n, d, h, wd, c = x.shape
    kd, kh, kw, _, o = w.shape
    st = [_int(op, f"stride{a}", 1) or 1 for a in "DHW"]
    dil = [_int(op, f"dilation{a}Factor", 1) or 1 for a in "DHW"]
    same = _same(op)
    dims = [_conv_out_and_pad(s, k, s_, d_, same)
            for s, k, s_, d_ in zip((d, h, wd), (kd, kh, kw), st, dil, strict=True)]
    if tuple(out.shape) != (n, *(v for v, _ in dims), o):
        raise _unsupported(op, f"output {list(out.shape)} is not the convolution's")
    bias = _bias(op, o, _F32)
    b = "nullptr" if bias is None else e.param(bias, "float")
    geom = (f"tk::Conv3Geom{{{n}, {d}, {h}, {wd}, {c}, {kd}, {kh}, {kw}, {o}, "
            f"{', '.join(str(v) for v, _ in dims)}, {', '.join(map(str, st))}, "
            f"{', '.join(map(str, dil))}, {', '.join(str(p) for _, p in dims)}}}")
    return (f"tk::conv3d_f32({geom}, {e.ptr(x)}, {e.param(np.ascontiguousarray(w), 'float')}, "
            f"{b}, {_act(op)}, {e.ptr(out)});")


def _float_constant(op: Op, i: int) -> np.ndarray | None:
    """Constant input ``i`` of a sequence op as float32 (None when absent); int8 weights of a
    hybrid op dequantized as the reference runtime does."""
    t = _input(op, i)
    if t is None:
        return None
    if t.data is None:
        raise _unsupported(op, f"input {i} must be a constant")
    v = np.asarray(t.data)
    if v.dtype != _F32 and is_quantized(t):  # hybrid: the reference's dequantized weights
        return _dequantized(op, t, v)
    if v.dtype != _F32:
        raise _unsupported(op, f"input {i} of {v.dtype} without quantization")
    return v.astype(np.float32)


def _lstm(e: Emitter, step: Step) -> str:
    """UNIDIRECTIONAL_SEQUENCE_LSTM in float32 (TFLite's 24 inputs; no projection and no
    layer norm)."""
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if x.dtype == _I8 and is_quantized(x):
        return _lstm_q8(e, op)
    if x.dtype != _F32 or out.dtype != _F32 or len(x.shape) != 3:
        raise _unsupported(op, f"UNIDIRECTIONAL_SEQUENCE_LSTM of {x.dtype} {list(x.shape)} "
                               "(float32, 3-D only)")

    if any(_input(op, i) is not None for i in (16, 17, 20, 21, 22, 23)):
        raise _unsupported(op, "an LSTM with projection or layer norm")
    cifg = _input(op, 1) is None
    gates = [2, 3, 4] if cifg else [1, 2, 3, 4]
    ws: list[np.ndarray] = []
    rs: list[np.ndarray] = []
    for i in gates:
        w_i, r_i = _float_constant(op, i), _float_constant(op, i + 4)
        if w_i is None or r_i is None:
            raise _unsupported(op, "missing gate weights")
        ws.append(w_i)
        rs.append(r_i)
    units = ws[0].shape[0]
    time_major = bool(_opt(op, "timeMajor", False))
    steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    if tuple(out.shape) != (*x.shape[:2], units):
        raise _unsupported(op, f"output {list(out.shape)} for {units} units")
    w_in = np.ascontiguousarray(np.concatenate(ws, axis=0).T)
    w_rec = np.ascontiguousarray(np.concatenate(rs, axis=0).T)
    biases = [_float_constant(op, i + 11) for i in gates]
    bias = np.concatenate([np.zeros(units, np.float32) if b is None else b.reshape(-1)
                           for b in biases])
    peep = [_float_constant(op, i) for i in (9, 10, 11)]
    states = []
    for i, width in ((18, units), (19, units)):
        t = _input(op, i)
        if t is None or t.data is None:
            states.append("nullptr")
        else:
            v = np.broadcast_to(np.asarray(t.data, np.float32).reshape(-1, width),
                                (batch, width))
            states.append(e.param(np.ascontiguousarray(v), "float"))
    act = op.activation
    if act not in (0, 1, 2, 3, 4):
        raise _unsupported(op, f"cell activation {act}")
    clip = float(_opt(op, "cellClip", 0.0))  # type: ignore[arg-type]
    pp = ["nullptr" if v is None else e.param(v.reshape(-1), "float") for v in peep]
    geom = (f"tk::LstmGeom{{{steps}, {batch}, {x.shape[2]}, {units}, {len(gates)}, "
            f"{int(time_major)}, {act}, {_flt(clip)}}}")
    return (f"tk::lstm_f32({geom}, {e.ptr(x)}, {e.param(w_in, 'float')}, "
            f"{e.param(w_rec, 'float')}, {e.param(bias, 'float')}, {', '.join(pp)}, "
            f"{states[0]}, {states[1]}, {e.ptr(out)});")


def _rnn(e: Emitter, step: Step) -> str:
    """UNIDIRECTIONAL_SEQUENCE_RNN (input, W, R, bias, hidden state) in float32; hybrid
    weights dequantized as the reference runtime does."""
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if x.dtype != _F32 or out.dtype != _F32 or len(x.shape) != 3:
        raise _unsupported(op, f"UNIDIRECTIONAL_SEQUENCE_RNN of {x.dtype} {list(x.shape)} "
                               "(float32, 3-D only)")

    w, r, b = _float_constant(op, 1), _float_constant(op, 2), _float_constant(op, 3)
    if w is None or r is None or b is None or w.ndim != 2:
        raise _unsupported(op, "the input weights, recurrent weights and bias are required")
    units, n_in = w.shape
    time_major = bool(_opt(op, "timeMajor", False))
    steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    if n_in != x.shape[2] or r.shape != (units, units) or b.size != units \
            or tuple(out.shape) != (*x.shape[:2], units):
        raise _unsupported(op, f"weights {list(w.shape)}, {list(r.shape)} do not fit input "
                               f"{list(x.shape)} and output {list(out.shape)}")
    h0 = "nullptr"
    t = _input(op, 4)
    if t is not None and t.data is not None:
        v = np.broadcast_to(np.asarray(t.data, np.float32).reshape(-1, units), (batch, units))
        h0 = e.param(np.ascontiguousarray(v), "float")
    geom = f"tk::RnnGeom{{{steps}, {batch}, {n_in}, {units}, {int(time_major)}, {_act(op)}}}"
    return (f"tk::rnn_f32({geom}, {e.ptr(x)}, {e.param(np.ascontiguousarray(w), 'float')}, "
            f"{e.param(np.ascontiguousarray(r), 'float')}, "
            f"{e.param(b.reshape(-1).astype(np.float32), 'float')}, {h0}, {e.ptr(out)});")


def _dequantized(op: Op, t: Tensor, v: np.ndarray) -> np.ndarray:
    """The float32 values of quantized constant ``v`` (tensor ``t``), computed as the
    reference runtime dequantizes a hybrid op's weights: ``scale * (q - zp)`` in float64
    (per channel along the quantized dimension), rounded to float32."""
    p = qp(op, t)
    scale, zp = p.scale.astype(np.float64), p.zero_point.astype(np.int64)
    if scale.size > 1:
        if not 0 <= p.axis < v.ndim or scale.size != v.shape[p.axis]:
            raise _unsupported(op, f"{scale.size} scales for {list(v.shape)} along axis "
                                   f"{p.axis}")
        shape = [1] * v.ndim
        shape[p.axis] = scale.size
        scale = scale.reshape(shape)
        zp = zp.reshape(shape) if zp.size > 1 else zp.reshape(-1)[0]
    else:
        scale, zp = scale.reshape(-1)[0], zp.reshape(-1)[0]
    return (scale * (v.astype(np.int64) - zp)).astype(np.float32)


def _lstm_q8(e: Emitter, op: Op) -> str:
    """The integer UNIDIRECTIONAL_SEQUENCE_LSTM (``tk::lstm_q8``): the constants TFLite's
    ``Prepare`` computes (:func:`toolkit.integer_lstm.prepare_integer_lstm`) in the
    parameters file, the steps in the op library."""
    p = prepare_integer_lstm(op)
    if p.tanh_skipped:
        raise _unsupported(op, f"integer LSTM with a cell state of scale 2**{p.cell_log2} "
                               "(LiteRT skips the tanh of the cell; the native kernel computes "
                               "it): quantize with a cell state of 2**-15 or coarser")
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    steps, batch = (x.shape[0], x.shape[1]) if p.time_major else (x.shape[1], x.shape[0])
    if tuple(out.shape) != (*x.shape[:2], p.n_output):
        raise _unsupported(op, f"output {list(out.shape)} for {p.n_output} outputs")
    states = []
    for i, dt, width in ((18, np.int8, p.n_output), (19, np.int16, p.n_cell)):
        t = _input(op, i)
        if t is None or t.data is None:
            states.append("nullptr")  # a reset state: the output state's zero point, cell 0
            continue
        v = np.broadcast_to(np.asarray(t.data, dt).reshape(-1, width), (batch, width))
        states.append(e.param(np.ascontiguousarray(v), ctype(np.dtype(dt), t.name)))
    i32 = np.int32
    peep = "nullptr, nullptr"
    if p.peep is not None and p.m_peep is not None:
        peep = (f"{e.param(p.peep, 'int16_t')}, "
                f"{e.param(p.m_peep.astype(i32), 'int32_t')}")
    proj = "nullptr, nullptr"
    if p.proj is not None and p.proj_bias is not None:
        proj = f"{e.param(p.proj, 'int8_t')}, {e.param(p.proj_bias.astype(i32), 'int32_t')}"
    ln = "nullptr, nullptr, nullptr, nullptr"
    if p.ln is not None and p.ln_bias is not None and p.m_ln is not None \
            and p.ln_guard is not None:
        ln = (f"{e.param(p.ln, 'int16_t')}, {e.param(p.ln_bias.astype(i32), 'int32_t')}, "
              f"{e.param(p.m_ln.astype(i32), 'int32_t')}, "
              f"{e.param(p.ln_guard.astype(i32), 'int32_t')}")
    geom = (f"tk::IntLstmGeom{{{steps}, {batch}, {p.n_input}, {p.n_cell}, {int(p.time_major)}, "
            f"{int(p.cifg)}, {p.cell_log2}, {p.cell_clip}, {p.hidden[0]}, {p.hidden[1]}, "
            f"{p.hidden_zp}, {p.h_zp}, {p.n_output}, {p.m_proj[0]}, {p.m_proj[1]}, "
            f"{p.proj_clip}}}")
    return (f"tk::lstm_q8({geom}, {e.ptr(x)}, {e.param(p.w_in, 'int8_t')}, "
            f"{e.param(p.w_rec, 'int8_t')}, {e.param(p.b_in.astype(i32), 'int32_t')}, "
            f"{e.param(p.b_rec.astype(i32), 'int32_t')}, "
            f"{e.param(p.m_in.astype(i32), 'int32_t')}, "
            f"{e.param(p.m_rec.astype(i32), 'int32_t')}, {peep}, {proj}, {ln}, "
            f"{states[0]}, {states[1]}, {e.ptr(out)});")


def _pack(e: Emitter, step: Step) -> str:
    """PACK (stack along ``axis``) as a concatenation of the inputs, and UNPACK as a split."""
    op = step.op
    unpack = op.type == "UNPACK"
    whole = op.inputs[0] if unpack else op.outputs[0]
    parts = list(op.outputs) if unpack else list(op.inputs)
    assert whole is not None
    rank = len(whole.shape)
    axis = _int(op, "axis", 0)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or any(p is None for p in parts) or len(parts) != whole.shape[axis]:
        raise _unsupported(op, f"{len(parts)} parts along axis {axis} of {list(whole.shape)}")
    want = tuple(whole.shape[:axis]) + tuple(whole.shape[axis + 1:])
    for part in parts:
        assert part is not None
        if tuple(part.shape) != want or part.dtype != whole.dtype:
            raise _unsupported(op, f"part {list(part.shape)} of {part.dtype} does not stack to "
                                   f"{list(whole.shape)} of {whole.dtype}")
        if is_quantized(part) or is_quantized(whole):
            pq, wq = qp(op, part), qp(op, whole)
            if pq.s != wq.s or pq.zp != wq.zp:
                raise _unsupported(op, f"{op.type} of tensors quantized unlike each other")
    outer, inner = _size(whole.shape[:axis]), _size(whole.shape[axis + 1:])
    block = _size(whole.shape[axis:])
    item = whole.dtype.itemsize  # type: ignore[union-attr]
    lines = []
    for k, part in enumerate(parts):
        if unpack:
            lines.append(f"tk::copy_blocks({e.ptr(whole)} + {k * inner}, {block}, "
                         f"{e.ptr(part)}, {inner}, {outer}, {inner}, {item});")
        else:
            lines.append(f"tk::copy_blocks({e.ptr(part)}, {inner}, {e.ptr(whole)} + "
                         f"{k * inner}, {block}, {outer}, {inner}, {item});")
    return "\n".join(lines) if lines else f"// {op.type} of nothing"


def _shape(e: Emitter, step: Step) -> str:
    """SHAPE: the input's shape, fixed when the artifact is generated."""
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if out.dtype not in (_I32, np.dtype(np.int64)) or _size(out.shape) != len(x.shape):
        raise _unsupported(op, f"SHAPE of rank {len(x.shape)} into {out.dtype} "
                               f"{list(out.shape)}")
    shape = np.asarray(x.shape, dtype=out.dtype)
    return (f"std::memcpy({e.ptr(out)}, {e.param(shape, ctype(out.dtype, out.name))}, "
            f"{shape.nbytes});")


def _fill(e: Emitter, step: Step) -> str:
    """FILL (the value of input 1) and ONES_LIKE over the output's fixed shape."""
    op = step.op
    out = op.outputs[0]
    ct = ctype(out.dtype, out.name)
    if is_quantized(out):
        raise _unsupported(op, f"{op.type} of a quantized tensor")
    n = _size(out.shape)
    if op.type == "ONES_LIKE":
        return f"std::fill_n({e.ptr(out)}, {n}, static_cast<{ct}>(1));"
    dims = [int(v) for v in _const(op, 0).reshape(-1)]
    value = _input(op, 1)
    if dims != list(out.shape) or value is None or _size(value.shape) != 1:
        raise _unsupported(op, f"FILL of {dims} with a value of shape "
                               f"{None if value is None else list(value.shape)} into "
                               f"{list(out.shape)}")
    return f"std::fill_n({e.ptr(out)}, {n}, static_cast<{ct}>({e.ptr(value)}[0]));"


def _range(e: Emitter, step: Step) -> str:
    """RANGE(start, limit, delta): ``start + i * delta`` for the output's fixed length; the
    artifact throws when the inputs ask for another length."""
    op = step.op
    out = op.outputs[0]
    ins = [_input(op, i) for i in range(3)]
    if len(out.shape) != 1 or any(t is None or _size(t.shape) != 1 for t in ins):
        raise _unsupported(op, "RANGE needs three scalars and a 1-D output")
    ct = ctype(out.dtype, out.name)
    if ct not in ("int32_t", "int64_t", "float"):
        raise _unsupported(op, f"RANGE of {out.dtype}")
    start, limit, delta = (f"static_cast<double>({e.ptr(t)}[0])" for t in ins)
    n = out.shape[0]
    return (f"{{ if (tk::range_count({start}, {limit}, {delta}) != {n})\n"
            f"    throw std::runtime_error(\"RANGE {_cstr(op.name)}: the inputs ask for another "
            f"length than the {n} of the generated shape\");\n"
            f"  for (int64_t i = 0; i < {n}; ++i) {e.ptr(out)}[i] = static_cast<{ct}>("
            f"{e.ptr(ins[0])}[0] + i * {e.ptr(ins[2])}[0]); }}")


def _logical_not(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if x.dtype != np.dtype(np.bool_) or out.dtype != x.dtype or x.shape != out.shape:
        raise _unsupported(op, f"LOGICAL_NOT of {x.dtype} {list(x.shape)}")
    return (f"for (int64_t i = 0; i < {_size(out.shape)}; ++i) {e.ptr(out)}[i] = "
            f"!{e.ptr(x)}[i];")


def _resize_bilinear(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    size = [int(v) for v in _const(op, 1).reshape(-1)]
    if len(x.shape) != 4 or len(size) != 2 or min(size) < 1:
        raise _unsupported(op, f"RESIZE_BILINEAR of {list(x.shape)} to {size}")
    n, h, w, c = x.shape
    oh, ow = size
    if tuple(out.shape) != (n, oh, ow, c) or out.dtype != x.dtype:
        raise _unsupported(op, f"output {list(out.shape)} is not {[n, oh, ow, c]}")
    align = bool(_opt(op, "alignCorners", False))
    half = bool(_opt(op, "halfPixelCenters", False))
    i32 = np.int32
    if x.dtype == _F32:
        axes = [bilinear_axis_float(o, s, align, half) for o, s in ((oh, h), (ow, w))]
        (y0, y1, fy), (x0, x1, fx) = axes
        ct, fn = "float", "resize_bilinear_f32"
    elif x.dtype == _I8:
        (y0, y1, fy), (x0, x1, fx) = (bilinear_axis_int(o, s, align, half)
                                      for o, s in ((oh, h), (ow, w)))
        ct, fn = "int32_t", "resize_bilinear_q8"
    else:
        raise _unsupported(op, f"RESIZE_BILINEAR of {x.dtype}")
    geom = (f"tk::ResizeGeom{{{n}, {h}, {w}, {c}, {oh}, {ow}, {e.param(y0.astype(i32), 'int32_t')}"
            f", {e.param(y1.astype(i32), 'int32_t')}, {e.param(x0.astype(i32), 'int32_t')}, "
            f"{e.param(x1.astype(i32), 'int32_t')}}}")
    return (f"tk::{fn}({geom}, {e.param(fy, ct)}, {e.param(fx, ct)}, {e.ptr(x)}, "
            f"{e.ptr(out)});")


def _conv_q8x4(e: Emitter, op: Op, geom: str, w_eff: np.ndarray, bias: np.ndarray | None,
               zp_in: int, mults: np.ndarray, r0: int, r1: int, work: int = 0) -> str:
    """CONV_2D int8 through ``tk::conv2d_q8x4``: the filter ``w_eff`` ([KH, KW, C, O], zero
    point removed, within int8) in quads of input channels [KH, KW, C/4, O16, 4], and the
    bias less ``(128 + zp_in)`` times each channel's filter sum (int32 wrap-around, as the
    accumulators)."""
    kh, kw, c, o = w_eff.shape
    c4, o16 = -(-c // 4) * 4, -(-o // 16) * 16
    packed = np.zeros((kh, kw, c4, o16), np.int64)
    packed[:, :, :c, :o] = w_eff
    packed = packed.reshape(kh, kw, c4 // 4, 4, o16).transpose(0, 1, 2, 4, 3)
    total = (np.zeros(o, np.int64) if bias is None else bias.astype(np.int64)) \
        - (128 + int(zp_in)) * w_eff.sum(axis=(0, 1, 2))
    folded = ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    out = op.outputs[0]
    return (f"const tk::QuantOut q = {_quant_out(e, op, mults, o)};\n"
            + _row_call(f"tk::conv2d_q8x4({geom}, {e.ptr(op.inputs[0])}, {zp_in}, "
                        f"{e.param(np.ascontiguousarray(packed.astype(np.int8)), 'int8_t')}, "
                        f"{e.param(folded, 'int32_t')}, q, {e.ptr(out)}", r0, r1, work))


def _pool(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if len(x.shape) != 4:
        raise _unsupported(op, "pooling needs a 4-D NHWC input")
    n, h, w, c = x.shape
    fh, fw = _int(op, "filterHeight", 1) or 1, _int(op, "filterWidth", 1) or 1
    sh, sw = _int(op, "strideH", 1) or 1, _int(op, "strideW", 1) or 1
    same = _same(op)
    oh, pt = _conv_out_and_pad(h, fh, sh, 1, same)
    ow, pl = _conv_out_and_pad(w, fw, sw, 1, same)
    r0, r1 = _rows(step, oh)
    geom = f"tk::PoolGeom{{{n}, {h}, {w}, {c}, {fh}, {fw}, {sh}, {sw}, {oh}, {ow}, {pt}, {pl}}}"
    kind = "max" if op.type == "MAX_POOL_2D" else "avg"
    work = n * (r1 - r0) * ow * c * fh * fw
    if x.dtype == _F32:
        return _row_call(f"tk::{kind}_pool_f32({geom}, {e.ptr(x)}, {_act(op)}, {e.ptr(out)}",
                         r0, r1, work)
    _check_int8(op, x, out)
    if is_quantized(out):
        lo, hi = activation_range(op, out)
    else:
        lo, hi = -128, 127
    return _row_call(f"tk::{kind}_pool_q8({geom}, {e.ptr(x)}, {lo}, {hi}, {e.ptr(out)}", r0, r1,
                     work)


# ------------------------------------------------------------------ matmul
def _fully_connected(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    w = _const(op, 1)
    if w.ndim != 2:
        raise _unsupported(op, f"weights of shape {list(w.shape)} (2-D [out, in] needed)")
    o, k = w.shape
    size = _size(x.shape)
    if k == 0 or size % k:
        raise _unsupported(op, f"input of shape {list(x.shape)} cannot be split into rows of {k}")
    batch = size // k
    if is_quantized(x):
        _check_int8(op, x, out)
        iq, wq, oq = qp(op, x), qp(op, op.inputs[1]), qp(op, out)
        w_eff = (w.astype(np.int64) - _filter_offsets(op, o)[:, None]).T
        bias = _bias(op, o, _I32)
        mults = channel_multipliers(iq, wq, oq, o, float_product=wq.scale.size == 1)
        if w_eff.size and int(w_eff.min()) >= -128 and int(w_eff.max()) <= 127:
            # a 1x1 convolution over a row of `batch` pixels
            geom = (f"tk::ConvGeom{{1, 1, {batch}, {k}, 1, 1, 1, {batch}, {o}, 1, 1, 1, 1, "
                    f"0, 0, 1}}")
            return _conv_q8x4(e, op, geom, w_eff.reshape(1, 1, k, o), bias, iq.zp, mults, 0, 1)
        b = "nullptr" if bias is None else e.param(bias, "int32_t")
        return (f"const tk::QuantOut q = {_quant_out(e, op, mults, o)};\n"
                f"tk::fully_connected_q8({e.ptr(x)}, {iq.zp}, "
                f"{e.param(np.ascontiguousarray(w_eff.astype(np.int16)), 'int16_t')}, {b}, "
                f"{batch}, {k}, {o}, q, {e.ptr(out)});")
    if x.dtype != _F32:
        raise _unsupported(op, f"FULLY_CONNECTED of {x.dtype} input without quantization")
    if w.dtype == _I8 and is_quantized(op.inputs[1]) and out.dtype == _F32:
        return _hybrid_fully_connected(e, op, w, batch)
    nr, panels = gemm_panels(_float_filter(op, w, 0).T)
    bias = _bias(op, o, _F32)
    b = "nullptr" if bias is None else e.param(bias, "float")
    return (f"tk::fully_connected_f32_packed({e.ptr(x)}, {e.param(panels, 'float')}, {nr}, "
            f"{b}, {batch}, {k}, {o}, {_act(op)}, {e.ptr(out)});")


def _input_pairs(w: np.ndarray) -> np.ndarray:
    """Weights [out, in] as int16 [ceil(in / 2), out, 2]: each output's weights of inputs
    2p and 2p + 1 side by side (0 for a missing last input)."""
    o, k = w.shape
    padded = np.zeros((o, k + k % 2), np.int16)
    padded[:, :k] = w
    return np.ascontiguousarray(padded.reshape(o, -1, 2).transpose(1, 0, 2))


def _hybrid_fully_connected(e: Emitter, op: Op, w: np.ndarray, batch: int) -> str:
    """Hybrid FULLY_CONNECTED (float32 input and output, int8 weights [out, in]): TFLite's
    dynamic-range kernel, each input row quantized at run time (``tk::fully_connected_hybrid``,
    the arithmetic of the reference runtime's ``hybrid_fully_connected``)."""
    o, k = w.shape
    wq = qp(op, op.inputs[1])
    if wq.scale.size not in (1, o):
        raise _unsupported(op, f"weights have {wq.scale.size} scales for {o} outputs")
    if np.any(wq.zero_point != 0):
        raise _unsupported(op, "hybrid FULLY_CONNECTED with asymmetric weights (non-zero "
                               "zero point)", fix="quantize the weights symmetrically")
    scales = np.ascontiguousarray(np.broadcast_to(wq.scale.astype(np.float32), (o,)))
    asym = bool(_opt(op, "asymmetricQuantizeInputs", False))
    wsum = "nullptr"
    if asym:
        wsum = e.param(w.astype(np.int64).sum(axis=1).astype(np.int32), "int32_t")
    bias = _bias(op, o, _F32)
    b = "nullptr" if bias is None else e.param(bias, "float")
    return (f"tk::fully_connected_hybrid({e.ptr(op.inputs[0])}, "
            f"{e.param(_input_pairs(w), 'int16_t')}, {e.param(scales, 'float')}, "
            f"{wsum}, {b}, {batch}, {k}, {o}, {int(asym)}, {_act(op)}, "
            f"{e.ptr(op.outputs[0])});")


def _batch_matmul(e: Emitter, step: Step) -> str:
    op = step.op
    a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
    assert a is not None and b is not None
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise _unsupported(op, "BATCH_MATMUL needs rank >= 2 operands")
    adj_a = bool(_opt(op, "adjointLhs", False) or _opt(op, "adjX", False))
    adj_b = bool(_opt(op, "adjointRhs", False) or _opt(op, "adjY", False))
    ar, ac = a.shape[-2:]
    br, bc = b.shape[-2:]
    m, k = (ac, ar) if adj_a else (ar, ac)
    k2, n = (bc, br) if adj_b else (br, bc)
    if k != k2:
        raise _unsupported(op, f"inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    batch_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nb = _size(batch_shape)
    a_idx = np.broadcast_to(np.arange(_size(a.shape[:-2])).reshape(a.shape[:-2]),
                            batch_shape).reshape(-1)
    b_idx = np.broadcast_to(np.arange(_size(b.shape[:-2])).reshape(b.shape[:-2]),
                            batch_shape).reshape(-1)
    a_off = (a_idx * ar * ac).astype(np.int32)
    b_off = (b_idx * br * bc).astype(np.int32)
    a_rs, a_cs = (1, m) if adj_a else (k, 1)
    b_rs, b_cs = (1, k) if adj_b else (n, 1)
    geom = (f"tk::MatmulGeom{{{nb}, {m}, {n}, {k}, {e.param(a_off, 'int32_t')}, "
            f"{e.param(b_off, 'int32_t')}, {a_rs}, {a_cs}, {b_rs}, {b_cs}}}")
    if is_quantized(a):
        _check_int8(op, a, b, out)
        aq, bq, oq = qp(op, a), qp(op, b), qp(op, out)
        real = np.float64(np.float32(aq.s) * np.float32(bq.s)) / np.float64(oq.s)
        mm, ss = quantize_multiplier(real)
        return (f"tk::batch_matmul_q8({geom}, {e.ptr(a)}, {aq.zp}, {e.ptr(b)}, {bq.zp}, "
                f"{int(mm)}, {int(ss)}, {oq.zp}, -128, 127, {e.ptr(out)});")
    if a.dtype != _F32 or b.dtype != _F32:
        raise _unsupported(op, f"BATCH_MATMUL of {a.dtype} x {b.dtype}")
    return f"tk::batch_matmul_f32({geom}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)});"


# ------------------------------------------------------------------ element-wise
_BINOPS = {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "POW": 4, "SQUARED_DIFFERENCE": 5,
           "MINIMUM": 6, "MAXIMUM": 7}
_INT_BINOPS = {"ADD": 0, "SUB": 1, "MUL": 2, "MINIMUM": 6, "MAXIMUM": 7, "FLOOR_MOD": 9,
               "FLOOR_DIV": 10}
#: int8 binary ops the reference runtime computes in float between dequantizing and
#: quantizing: looked up in a table of every pair of inputs
_FLOAT_PAIR: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "DIV": np.divide, "POW": np.power,
}
_PAIRS = np.repeat(np.arange(-128, 128, dtype=np.int64), 256), \
    np.tile(np.arange(-128, 128, dtype=np.int64), 256)


def _strides6(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of an operand of ``shape`` broadcast to the 6-D ``out``."""
    full = (1,) * (6 - len(shape)) + tuple(shape)
    st = [0] * 6
    acc = 1
    for d in range(5, -1, -1):
        st[d] = 0 if full[d] == 1 and out[d] != 1 else acc
        acc *= full[d]
    return st


def _bcast(op: Op, step: Step, a: Tensor, b: Tensor, out: Tensor) -> tuple[str, int, int]:
    oshape = tuple(out.shape)
    if len(oshape) > 6 or len(a.shape) > 6 or len(b.shape) > 6:
        raise _unsupported(op, "broadcast of more than 6 dimensions")
    try:
        if tuple(np.broadcast_shapes(a.shape, b.shape)) != oshape:
            raise ValueError
    except ValueError:
        raise _unsupported(op, f"operands {list(a.shape)} and {list(b.shape)} do not "
                               f"broadcast to the output {list(oshape)}") from None
    o6 = (1,) * (6 - len(oshape)) + oshape
    row_dim, r0, r1 = -1, 0, 0
    if step.rows is not None and len(oshape) >= 2:
        row_dim = 6 - len(oshape) + 1
        r0, r1 = step.rows
    g = (f"tk::Bcast{{{_arr(o6)}, {_arr(_strides6(a.shape, o6))}, "
         f"{_arr(_strides6(b.shape, o6))}, {row_dim}}}")
    return g, r0, r1


_VECTOR_BINARY = "defined(__AVX2__)"  # builds that compute int8 ADD / SUB / MUL directly


def _vector_or_table(direct: str, table: str) -> str:
    """An int8 binary op computed directly where the build has AVX2 (8 or 16 lanes at a
    time), else looked up in its table of every pair of values (the same results; the
    table is filled only by the builds that read it)."""
    return f"#if {_VECTOR_BINARY}\n{direct}\n#else\n{table}\n#endif"


def _binary(e: Emitter, step: Step) -> str:
    op = step.op
    a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
    assert a is not None and b is not None
    g, r0, r1 = _bcast(op, step, a, b, out)
    if a.dtype == _F32 and b.dtype == _F32 and out.dtype == _F32:
        if op.type not in _BINOPS:
            raise _unsupported(op, f"float32 {op.type}")
        return (f"tk::binary_f32({g}, {_BINOPS[op.type]}, {e.ptr(a)}, {e.ptr(b)}, "
                f"{_act(op)}, {e.ptr(out)}, {r0}, {r1});")
    if a.dtype == _I32 and b.dtype == _I32 and out.dtype == _I32 and op.type in _INT_BINOPS:
        lo, hi = {0: (-2**31, 2**31 - 1), 1: (0, 2**31 - 1), 2: (-1, 1), 3: (0, 6)}.get(
            _act(op), (None, None))
        if lo is None:
            raise _unsupported(op, f"fused activation {op.activation} on int32 tensors")
        return (f"tk::binary_i32({g}, {_INT_BINOPS[op.type]}, {e.ptr(a)}, {e.ptr(b)}, "
                f"INT64_C({lo}), INT64_C({hi}), {e.ptr(out)}, {r0}, {r1});")
    if not (is_quantized(a) and is_quantized(b) and is_quantized(out)):
        raise _unsupported(op, f"{op.type} of {a.dtype} x {b.dtype}")
    _check_int8(op, a, b, out)
    if op.type in ("MINIMUM", "MAXIMUM"):  # stored values compared, as LiteRT
        return (f"tk::minmax_q8({g}, {int(op.type == 'MAXIMUM')}, {e.ptr(a)}, {e.ptr(b)}, "
                f"{e.ptr(out)}, {r0}, {r1});")
    qa, qb, qo = qp(op, a), qp(op, b), qp(op, out)
    for t, p in ((a, qa), (b, qb), (out, qo)):
        if p.scale.size > 1:
            raise _unsupported(op, f"per-channel quantization of {t.name!r} in a binary op")
    if op.type == "SQUARED_DIFFERENCE":  # LiteRT's fixed-point kernel, tabled
        table = e.param(squared_difference_int8(*_PAIRS, qa, qb, qo), "int8_t")
        return (f"tk::lookup2_q8({g}, {table}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, "
                f"{r1});")
    if op.type in _FLOAT_PAIR:
        act = _act(op)
        lo, hi = (-128, 127) if act == 4 else activation_range(op, out)
        table = e.param(float_pair_table(qa, qb, qo, act, lo, hi, _FLOAT_PAIR[op.type]),
                        "int8_t")
        return (f"tk::lookup2_q8({g}, {table}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, "
                f"{r1});")
    lo, hi = activation_range(op, out)
    if op.type in ("ADD", "SUB"):
        left = 20
        twice = 2.0 * np.float64(max(qa.s, qb.s))
        ma, sa = quantize_multiplier(np.float64(qa.s) / twice)
        mb, sb = quantize_multiplier(np.float64(qb.s) / twice)
        mo, so = quantize_multiplier(twice / (float(1 << left) * np.float64(qo.s)))
        sign = 1 if op.type == "ADD" else -1
        q = (f"tk::AddQ{{{qa.zp}, {qb.zp}, {qo.zp}, {int(ma)}, {int(mb)}, {int(mo)}, "
             f"{int(sa)}, {int(sb)}, {int(so)}, {left}, {lo}, {hi}}}")
        table = e.table(65536, f"tk::add_table_q8({q}, {sign}, @TABLE@);", _VECTOR_BINARY)
        return _vector_or_table(
            f"tk::add_q8({g}, {q}, {sign}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, {r1});",
            f"tk::lookup2_q8({g}, {table}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, {r1});")
    if op.type == "MUL":
        if op.activation == 4:
            raise _unsupported(op, "fused TANH on a quantized MUL")
        real = np.float64(qa.s) * np.float64(qb.s) / np.float64(qo.s)
        m, s = quantize_multiplier(real)
        gate = _logistic_gate(e, a, b, out)
        if gate is not None:  # x * LOGISTIC(x) (swish): a function of x alone, as a table
            sig_op, x_first = gate
            sig = e.param(_lut_table(sig_op, _LUT_FNS["LOGISTIC"]), "int8_t")
            swish = e.table(256, f"tk::mul_gate_table_q8({sig}, {int(x_first)}, {qa.zp}, "
                                 f"{qb.zp}, {int(m)}, {int(s)}, {qo.zp}, {lo}, {hi}, @TABLE@);")
            px, py = e.ptr(a if x_first else b), e.ptr(out)
            return _flat_rows(step, tuple(out.shape), lambda o, n: f"tk::lut_q8({px} + {o}, "
                                                                  f"{swish}, {py} + {o}, {n});")
        table = e.table(65536, f"tk::mul_table_q8({qa.zp}, {qb.zp}, {int(m)}, {int(s)}, "
                               f"{qo.zp}, {lo}, {hi}, @TABLE@);", _VECTOR_BINARY)
        return _vector_or_table(
            f"tk::mul_q8({g}, {qa.zp}, {qb.zp}, {int(m)}, {int(s)}, {qo.zp}, {lo}, {hi}, "
            f"{e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, {r1});",
            f"tk::lookup2_q8({g}, {table}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, {r1});")
    raise _unsupported(op, f"quantized {op.type}")


def _depthwise_f32_packed(wf: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """depthwise_f32_pre's ``packed`` filter (float32 [groups of 8 channels][1 + KH KW][8]:
    per group the bias then the taps in (ky, kx) order, zeros after the last channel) of the
    depthwise filter ``wf`` [1, KH, KW, C] and ``bias`` [C] (None: zeros)."""
    _, kh, kw, c = wf.shape
    groups = -(-c // 8)
    full = np.zeros((1 + kh * kw, groups * 8), np.float32)
    if bias is not None:
        full[0, :c] = bias
    full[1:, :c] = wf.reshape(kh * kw, c)
    return np.ascontiguousarray(full.reshape(1 + kh * kw, groups, 8).transpose(1, 0, 2))


def _depthwise_q8_prepared(w_eff: np.ndarray, bias: np.ndarray | None, zp_in: int
                           ) -> tuple[np.ndarray, np.ndarray]:
    """depthwise_q8_pre's ``wi`` (int16 [blocks of 16 channels][pairs of taps][32]) and
    ``folded`` (int32 [16 blocks]) of the filter ``w_eff`` [KH, KW, C] (w - zp_w)."""
    kh, kw, c = w_eff.shape
    taps, blocks = kh * kw, -(-c // 16)
    pairs = -(-taps // 2)
    full = np.zeros((blocks * 16, 2 * pairs), np.int64)
    full[:c, :taps] = w_eff.reshape(taps, c).T
    order = [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]  # VPUNPCKL/HWD's lanes
    wi = full.reshape(blocks, 16, pairs, 2)[:, order].transpose(0, 2, 1, 3)
    folded = np.zeros(blocks * 16, np.int64)
    folded[:c] = (0 if bias is None else bias.astype(np.int64)) - zp_in * full[:c].sum(axis=1)
    return (np.ascontiguousarray(wi.reshape(blocks, pairs, 32).astype(np.int16)),
            folded.astype(np.uint64).astype(np.uint32).view(np.int32))


def _logistic_gate(e: Emitter, a: Tensor, b: Tensor, out: Tensor) -> tuple[Op, bool] | None:
    """The int8 LOGISTIC op of per-tensor scale that makes one input of a MUL from the other,
    all three of one shape, and whether the other is the MUL's first input; None else."""
    if not (tuple(a.shape) == tuple(b.shape) == tuple(out.shape)):
        return None
    for op in e.analysis.model.graph.ops:
        if op.type != "LOGISTIC" or not op.outputs or op.outputs[0] not in (a, b):
            continue
        x, y = op.inputs[0], op.outputs[0]
        if x is None or {x, y} != {a, b} or x.dtype != _I8 or y.dtype != _I8:
            return None
        if qp(op, x).scale.size > 1 or qp(op, y).scale.size > 1:
            return None
        return op, x is a
    return None


def _read_by_gates_only(e: Emitter, sig: Op) -> bool:
    """Whether the output of the int8 LOGISTIC ``sig`` is read by nothing but int8 MULs that
    make it part of their swish table (_logistic_gate), and is no model output."""
    y = sig.outputs[0]
    if e.analysis.control is not None or y in e.analysis.outputs:
        return False
    readers = [op for op in e.analysis.model.graph.ops if y in op.inputs]
    for op in readers:
        if op.type != "MUL" or len(op.inputs) != 2 or not op.outputs:
            return False
        a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
        if (a is None or b is None or op.activation == 4 or out.dtype != _I8
                or not is_quantized(out) or qp(op, out).scale.size > 1):
            return False
        gate = _logistic_gate(e, a, b, out)
        if gate is None or gate[0] is not sig:
            return False
    return bool(readers)


def _prelu(e: Emitter, step: Step) -> str:
    op = step.op
    x, alpha, out = op.inputs[0], op.inputs[1], op.outputs[0]
    assert x is not None and alpha is not None
    g, r0, r1 = _bcast(op, step, x, alpha, out)
    if x.dtype == _F32 and alpha.dtype == _F32 and out.dtype == _F32:
        return (f"tk::binary_f32({g}, 8, {e.ptr(x)}, {e.ptr(alpha)}, 0, {e.ptr(out)}, {r0}, "
                f"{r1});")
    if not (is_quantized(x) and is_quantized(alpha) and is_quantized(out)):
        raise _unsupported(op, f"PRELU of {x.dtype} x {alpha.dtype}")
    _check_int8(op, x, alpha, out)
    iq, aq, oq = qp(op, x), qp(op, alpha), qp(op, out)
    if max(iq.scale.size, aq.scale.size, oq.scale.size) > 1:
        raise _unsupported(op, "per-channel quantization in PRELU")
    m1, s1 = quantize_multiplier(float(np.float64(iq.s) / np.float64(oq.s)))
    m2, s2 = quantize_multiplier(float(np.float64(iq.s) * np.float64(aq.s) / np.float64(oq.s)))
    return (f"tk::prelu_q8({g}, {e.ptr(x)}, {iq.zp}, {e.ptr(alpha)}, {aq.zp}, {int(m1)}, "
            f"{int(s1)}, {int(m2)}, {int(s2)}, {oq.zp}, {e.ptr(out)}, {r0}, {r1});")


_CMPOPS = {"EQUAL": 0, "NOT_EQUAL": 1, "LESS": 2, "LESS_EQUAL": 3, "GREATER": 4,
           "GREATER_EQUAL": 5}


def _compare(e: Emitter, step: Step) -> str:
    op = step.op
    a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
    assert a is not None and b is not None
    if out.dtype != np.dtype(np.bool_):
        raise _unsupported(op, f"{op.type} with a {out.dtype} output (bool expected)")
    g, r0, r1 = _bcast(op, step, a, b, out)
    code = _CMPOPS[op.type]
    if a.dtype == _F32 and b.dtype == _F32:
        return (f"tk::compare_f32({g}, {code}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, "
                f"{r1});")
    if a.dtype == _I32 and b.dtype == _I32:
        return (f"tk::compare_i32({g}, {code}, {e.ptr(a)}, {e.ptr(b)}, {e.ptr(out)}, {r0}, "
                f"{r1});")
    if not (is_quantized(a) and is_quantized(b)):
        raise _unsupported(op, f"{op.type} of {a.dtype} x {b.dtype}")
    _check_int8(op, a, b)
    qa, qb = qp(op, a), qp(op, b)
    ma, sa = quantize_multiplier(float(qa.s))
    mb, sb = quantize_multiplier(float(qb.s))
    return (f"tk::compare_q8({g}, {code}, {e.ptr(a)}, {qa.zp}, {int(ma)}, {int(sa)}, "
            f"{e.ptr(b)}, {qb.zp}, {int(mb)}, {int(sb)}, {e.ptr(out)}, {r0}, {r1});")


def _select(e: Emitter, step: Step) -> str:
    op = step.op
    c, a, b = (_input(op, i) for i in range(3))
    out = op.outputs[0]
    if c is None or a is None or b is None:
        raise _unsupported(op, f"{op.type} needs a condition and two values")
    if c.dtype != np.dtype(np.bool_) or a.dtype != out.dtype or b.dtype != out.dtype:
        raise _unsupported(op, f"{op.type} of {c.dtype} ? {a.dtype} : {b.dtype}")
    oshape = tuple(out.shape)
    cshape = tuple(c.shape)
    if op.type == "SELECT" and len(cshape) == 1 and len(a.shape) > 1:  # picks rows
        cshape = cshape + (1,) * (len(a.shape) - 1)
    try:
        ok = tuple(np.broadcast_shapes(cshape, a.shape, b.shape)) == oshape
    except ValueError:
        ok = False
    if not ok or len(oshape) > 6:
        raise _unsupported(op, f"operands {list(c.shape)}, {list(a.shape)}, {list(b.shape)} "
                               f"do not broadcast to the output {list(oshape)} (up to 6-D)")
    o6 = (1,) * (6 - len(oshape)) + oshape
    item = out.dtype.itemsize  # type: ignore[union-attr]
    return (f"{{ static const int64_t s[6] = {_arr(o6)}; "
            f"static const int64_t sc[6] = {_arr(_strides6(cshape, o6))}; "
            f"static const int64_t sa[6] = {_arr(_strides6(a.shape, o6))}; "
            f"static const int64_t sb[6] = {_arr(_strides6(b.shape, o6))};\n"
            f"  tk::select(s, sc, sa, sb, {e.ptr(c)}, {e.ptr(a)}, "
            f"{e.ptr(b)}, {e.ptr(out)}, {item}); }}")


_UNOPS = {"RELU": 0, "RELU6": 1, "RELU_N1_TO_1": 2, "RELU_0_TO_1": 3, "TANH": 4,
          "LOGISTIC": 5, "RSQRT": 6, "SQRT": 7, "EXP": 8, "NEG": 9, "ABS": 10, "LOG": 11,
          "GELU": 12, "HARD_SWISH": 14, "ELU": 15, "SQUARE": 16, "FLOOR": 17, "CEIL": 18,
          "ROUND": 19, "SIN": 20, "COS": 21}
_GELU_TANH = 13
_RELU_BOUNDS = {"RELU": (0.0, math.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0),
                "RELU_0_TO_1": (0.0, 1.0)}


def _logistic(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, np.expm1(x), x).astype(np.float32)


_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def _gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    """GELU in float32: ``0.5 x erfc(-x / sqrt 2)`` (erfc in float64), or the tanh form."""
    x = np.asarray(x, dtype=np.float32)
    half = np.float32(0.5)
    if approximate:
        inner = np.float32(math.sqrt(2.0 / math.pi)) * (x + np.float32(0.044715) * x * x * x)
        return half * x * (np.float32(1) + np.tanh(inner))
    e = _ERFC((x * np.float32(-math.sqrt(0.5))).astype(np.float64)).astype(np.float32)
    return half * x * e


_LUT_FNS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "TANH": np.tanh, "LOGISTIC": _logistic, "EXP": np.exp, "SQRT": np.sqrt, "LOG": np.log,
    "RSQRT": lambda v: np.float32(1) / np.sqrt(v), "ELU": _elu,
    "GELU": lambda v: _gelu(v, False),
}


def _lut_table(op: Op, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """TFLite's LUTPopulate over the 256 int8 input values."""
    iq, oq = qp(op, op.inputs[0]), qp(op, op.outputs[0])
    vals = np.arange(-128, 128, dtype=np.int64)
    deq = np.float32(iq.s) * (vals - iq.zp).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(deq), dtype=np.float32)
        r = round_half_away(y * (np.float32(1) / np.float32(oq.s)))
        r = np.clip(np.nan_to_num(r, nan=0.0), -(2.0**40), 2.0**40)
    return np.clip(r.astype(np.int64) + oq.zp, -128, 127).astype(np.int8)


def _flat_rows(step: Step, shape: tuple[int, ...], call: Callable[[str, str], str]) -> str:
    """``call(offset, count)`` over the whole tensor, or over the stripe's rows of axis 1."""
    size = _size(shape)
    if step.rows is None or len(shape) < 2:
        return call("0", str(size))
    r0, r1 = step.rows
    inner = _size(shape[2:])
    return (f"for (int64_t b = 0; b < {shape[0]}; ++b) {{\n"
            f"  const int64_t off = (b * {shape[1]} + {r0}) * {inner};\n"
            f"  {call('off', str((r1 - r0) * inner))}\n}}")


def _unary(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    shape = tuple(out.shape)
    if tuple(x.shape) != shape:
        raise _unsupported(op, "input and output shapes differ")
    px, py = e.ptr(x), e.ptr(out)
    approximate = op.type == "GELU" and bool(_opt(op, "approximate", False))
    if x.dtype == _F32 and out.dtype == _F32:
        code = _GELU_TANH if approximate else _UNOPS[op.type]
        return _flat_rows(step, shape,
                          lambda o, n: f"tk::unary_f32({code}, {px} + {o}, {py} + {o}, {n});")
    if not (is_quantized(x) and is_quantized(out)):
        raise _unsupported(op, f"{op.type} of non-quantized {x.dtype} input")
    _check_int8(op, x, out)
    if op.type in _RELU_BOUNDS:
        iq, oq = qp(op, x), qp(op, out)
        lo_f, hi_f = _RELU_BOUNDS[op.type]
        lo = max(-128, oq.zp + int(round_half_away(np.float32(lo_f) / oq.s)))
        hi = min(127, oq.zp + int(round_half_away(np.float32(hi_f) / oq.s))) \
            if hi_f != math.inf else 127
        m, s = quantize_multiplier(np.float64(iq.s) / np.float64(oq.s))
        relu = e.table(256, f"tk::relu_table_q8({iq.zp}, {int(m)}, {int(s)}, {oq.zp}, {lo}, "
                            f"{hi}, @TABLE@);")
        return _flat_rows(step, shape, lambda o, n: f"tk::lut_q8({px} + {o}, {relu}, "
                                                     f"{py} + {o}, {n});")
    if op.type in ("HARD_SWISH", "ABS"):
        iq, oq = qp(op, x), qp(op, out)
        table = e.param((hard_swish_table if op.type == "HARD_SWISH" else abs_table)(iq, oq),
                        "int8_t")
        return _flat_rows(step, shape, lambda o, n: f"tk::lut_q8({px} + {o}, {table}, "
                                                     f"{py} + {o}, {n});")
    if op.type == "LOGISTIC" and _read_by_gates_only(e, op):
        return "// LOGISTIC: read only by the swish MUL(s) that compute it in their table"
    fn = (lambda v: _gelu(v, True)) if approximate else _LUT_FNS.get(op.type)
    if fn is None:
        raise _unsupported(op, f"quantized {op.type}")
    table = e.param(_lut_table(op, fn), "int8_t")
    return _flat_rows(step, shape, lambda o, n: f"tk::lut_q8({px} + {o}, {table}, {py} + {o}, "
                                                 f"{n});")


def _quantize(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    shape = tuple(out.shape)
    px, py = e.ptr(x), e.ptr(out)
    if op.type == "QUANTIZE" and x.dtype == _F32 and out.dtype == _I8:
        q = qp(op, out)
        if q.scale.size > 1:
            raise _unsupported(op, "per-channel QUANTIZE")
        return _flat_rows(step, shape, lambda o, n: (
            f"tk::quantize_f32_q8({px} + {o}, {_flt(q.s)}, {q.zp}, {py} + {o}, {n});"))
    if op.type == "DEQUANTIZE" and x.dtype == _I8 and out.dtype == _F32:
        q = qp(op, x)
        if q.scale.size > 1:
            raise _unsupported(op, "per-channel DEQUANTIZE")
        return _flat_rows(step, shape, lambda o, n: (
            f"tk::dequantize_q8_f32({px} + {o}, {_dbl(float(q.s))}, {q.zp}, {py} + {o}, "
            f"{n});"))
    if op.type == "QUANTIZE" and x.dtype == _I8 and out.dtype == _I8 and is_quantized(x):
        iq, oq = qp(op, x), qp(op, out)
        if iq.scale.size > 1 or oq.scale.size > 1:
            raise _unsupported(op, "per-channel requantization")
        m, s = quantize_multiplier(np.float64(iq.s) / np.float64(oq.s))
        # LiteRT rounds whole blocks of 16 of the tensor it is given (a stripe's rows when
        # striped) upward
        if step.rows is None or len(shape) < 2:
            first, total = "0", _size(shape)
        else:
            per_batch = (step.rows[1] - step.rows[0]) * _size(shape[2:])
            first, total = f"b * {per_batch}", shape[0] * per_batch
        upward = (total // 16) * 16
        return _flat_rows(step, shape, lambda o, n: (
            f"tk::requantize_q8({px} + {o}, {iq.zp}, {int(m)}, {int(s)}, {oq.zp}, {py} + {o}, "
            f"{n}, {first}, {upward});"))
    raise _unsupported(op, f"{op.type} from {x.dtype} to {out.dtype}")


# ------------------------------------------------------------------ softmax, reductions
def _softmax(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if not x.shape:
        raise _unsupported(op, "SOFTMAX of a scalar")
    depth = x.shape[-1]
    rows = _size(x.shape) // max(depth, 1)
    beta = float(_opt(op, "beta", 1.0))  # type: ignore[arg-type]
    if x.dtype == _F32 and out.dtype == _F32:
        return (f"tk::softmax_f32({e.ptr(x)}, {e.ptr(out)}, {rows}, {depth}, {_flt(beta)});")
    if not (is_quantized(x) and is_quantized(out)):
        raise _unsupported(op, f"SOFTMAX of {x.dtype}")
    _check_int8(op, x, out)
    iq, oq = qp(op, x), qp(op, out)
    return (f"tk::softmax_q8({e.ptr(x)}, {_dbl(float(iq.s))}, {iq.zp}, {_flt(oq.s)}, {oq.zp}, "
            f"{_flt(beta)}, {e.ptr(out)}, {rows}, {depth});")


def _log_softmax(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if not x.shape:
        raise _unsupported(op, "LOG_SOFTMAX of a scalar")
    depth = x.shape[-1]
    rows = _size(x.shape) // max(depth, 1)
    if x.dtype == _F32 and out.dtype == _F32:
        return f"tk::log_softmax_f32({e.ptr(x)}, {e.ptr(out)}, {rows}, {depth});"
    if not (is_quantized(x) and is_quantized(out)):
        raise _unsupported(op, f"LOG_SOFTMAX of {x.dtype}")
    _check_int8(op, x, out)
    iq, oq = qp(op, x), qp(op, out)
    return (f"tk::log_softmax_q8({e.ptr(x)}, {_dbl(float(iq.s))}, {iq.zp}, {_flt(oq.s)}, "
            f"{oq.zp}, {e.ptr(out)}, {rows}, {depth});")


_REDOPS = {"MEAN": 0, "SUM": 1, "REDUCE_MAX": 2, "REDUCE_MIN": 3, "REDUCE_PROD": 4}


def _reduce(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    rank = len(x.shape)
    if rank > 6:
        raise _unsupported(op, "reduction of more than 6 dimensions")
    axes: list[int] = []
    raw = _const(op, 1).reshape(-1).tolist() if len(op.inputs) > 1 else list(range(rank))
    for v in raw:
        a = int(v) + rank if int(v) < 0 else int(v)
        if not 0 <= a < max(rank, 1):
            raise _unsupported(op, f"axis {v} out of range for rank {rank}")
        if a not in axes:
            axes.append(a)
    kept = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    # output strides of the kept-dims layout, 0 on reduced axes
    st = [0] * rank
    acc = 1
    for d in range(rank - 1, -1, -1):
        st[d] = 0 if d in axes else acc
        acc *= kept[d]
    shape6 = (1,) * (6 - rank) + tuple(x.shape)
    st6 = [0] * (6 - rank) + st
    count = _size(tuple(x.shape[a] for a in axes))
    out_size = _size(out.shape)
    if out_size != _size(kept):
        raise _unsupported(op, f"output shape {list(out.shape)} does not match the reduction")
    g = f"tk::Reduce{{{_arr(shape6)}, {_arr(st6)}, {out_size}, {count}}}"
    if x.dtype == _F32 and out.dtype == _F32:
        return f"tk::reduce_f32({g}, {_REDOPS[op.type]}, {e.ptr(x)}, {e.ptr(out)});"
    if x.dtype == _I32 and out.dtype == _I32 and op.type in ("REDUCE_MAX", "REDUCE_MIN"):
        if _size(x.shape) == 0:
            raise _unsupported(op, f"{op.type} of an empty tensor")
        return (f"tk::extreme_i32({g}, {int(op.type == 'REDUCE_MAX')}, {e.ptr(x)}, "
                f"{e.ptr(out)});")
    if op.type not in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN") \
            or not (is_quantized(x) and is_quantized(out)):
        raise _unsupported(op, f"{op.type} of {x.dtype}")
    _check_int8(op, x, out)
    iq, oq = qp(op, x), qp(op, out)
    if op.type == "SUM":
        scale = np.float32(iq.s) / np.float32(oq.s)
        shift = np.float32(-iq.zp) * scale * np.float32(count)
        return (f"tk::sum_q8({g}, {e.ptr(x)}, {_flt(scale)}, {_flt(shift)}, {oq.zp}, "
                f"{e.ptr(out)});")
    if op.type in ("REDUCE_MAX", "REDUCE_MIN"):
        if iq.s != oq.s or iq.zp != oq.zp:
            raise _unsupported(op, f"{op.type} with different input and output quantization")
        if _size(x.shape) == 0:
            raise _unsupported(op, f"{op.type} of an empty tensor")
        return (f"tk::extreme_q8({g}, {int(op.type == 'REDUCE_MAX')}, {e.ptr(x)}, "
                f"{e.ptr(out)});")
    keep = bool(_opt(op, "keepDims", False))
    if count == 0:
        raise _unsupported(op, "MEAN over an empty axis")
    if keep and rank == 4 and sorted(axes) == [1, 2]:
        bias, m, s = spatial_mean_requant(iq, oq, count)
        channels = x.shape[3]
        return (f"tk::mean_q8({g}, {e.ptr(x)}, 1, {m}, {s}, {iq.zp}, {bias}, -128, 127, "
                f"{channels}, {(channels // 16) * 16}, {e.ptr(out)});")
    m, s = mean_requant(iq, oq, count)
    return (f"tk::mean_q8({g}, {e.ptr(x)}, 0, {m}, {s}, {iq.zp}, {oq.zp}, -128, 127, 1, 0, "
            f"{e.ptr(out)});")


# ------------------------------------------------------------------ normalisation
def _vector(op: Op, i: int, n: int, default: float) -> np.ndarray:
    t = _input(op, i)
    if t is None:
        return np.full(n, default, dtype=np.float32)
    v = _const(op, i).astype(np.float32).reshape(-1)
    if v.size == 1:
        return np.full(n, v[0], dtype=np.float32)
    if v.size != n:
        raise _unsupported(op, f"input {i} has {v.size} values for {n} channels")
    return v


def layer_norm_epsilon(op: Op) -> float:
    """Epsilon of a custom LAYER_NORM: 4 bytes float32, empty for 1e-5, or a FlexBuffers map
    with an ``epsilon`` key."""
    raw = op.custom_options
    if raw is None or len(raw) == 0:
        return 1e-5
    raw = bytes(raw)
    if len(raw) == 4:
        return float(struct.unpack("<f", raw)[0])
    try:
        from flatbuffers import flexbuffers

        value = flexbuffers.Loads(raw)
    except Exception:  # any decoding failure: not an epsilon map
        value = None
    if isinstance(value, dict) and isinstance(value.get("epsilon"), (int, float)):
        return float(value["epsilon"])
    raise _unsupported(op, f"LAYER_NORM custom_options of {len(raw)} bytes are not an epsilon")


def _norm(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if x.dtype != _F32 or out.dtype != _F32:
        raise _unsupported(op, f"{op.kind} of {x.dtype} (float32 only)")
    c = x.shape[-1]
    gamma = e.param(_vector(op, 1, c, 1.0), "float")
    beta = e.param(_vector(op, 2, c, 0.0), "float")
    if op.kind == "INSTANCE_NORM":
        if len(x.shape) < 3:
            raise _unsupported(op, "INSTANCE_NORM needs (N, spatial..., C)")
        eps = float(_opt(op, "epsilon", 0.0))  # type: ignore[arg-type]
        spatial = _size(x.shape[1:-1])
        return (f"tk::instance_norm_f32({e.ptr(x)}, {gamma}, {beta}, {x.shape[0]}, {spatial}, "
                f"{c}, {_dbl(eps)}, {_act(op)}, {e.ptr(out)});")
    rows = _size(x.shape) // max(c, 1)
    return (f"tk::layer_norm_f32({e.ptr(x)}, {gamma}, {beta}, {rows}, {c}, "
            f"{_dbl(layer_norm_epsilon(op))}, {e.ptr(out)});")


# ------------------------------------------------------------------ data movement
def _copy(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if _size(x.shape) != _size(out.shape) or x.dtype != out.dtype:
        raise _unsupported(op, f"{op.type} from {list(x.shape)} to {list(out.shape)}")
    n = _size(out.shape) * out.dtype.itemsize  # type: ignore[union-attr]
    return f"std::memcpy({e.ptr(out)}, {e.ptr(x)}, {n});"


def _transpose(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    perm = [int(v) for v in _const(op, 1).reshape(-1)]
    rank = len(x.shape)
    if sorted(perm) != list(range(rank)) or rank > 6:
        raise _unsupported(op, f"permutation {perm} for rank {rank}")
    in_st = [0] * rank
    acc = 1
    for d in range(rank - 1, -1, -1):
        in_st[d] = acc
        acc *= x.shape[d]
    oshape = [x.shape[p] for p in perm]
    shape6 = [1] * (6 - rank) + oshape
    st6 = [0] * (6 - rank) + [in_st[p] for p in perm]
    item = x.dtype.itemsize  # type: ignore[union-attr]
    return (f"{{ static const int64_t s[6] = {_arr(shape6)}; static const int64_t t[6] = "
            f"{_arr(st6)};\n  tk::transpose({e.ptr(x)}, {e.ptr(out)}, {item}, s, t); }}")


def _tile(e: Emitter, step: Step) -> str:
    """TILE as a strided gather (``tk::transpose``): each tiled axis becomes a repeat axis of
    stride 0 before the axis itself; at most 6 such axes after dropping those of size 1."""
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    mult = [int(v) for v in _const(op, 1).reshape(-1)]
    rank = len(x.shape)
    if len(mult) != rank or any(m < 0 for m in mult):
        raise _unsupported(op, f"multiples {mult} for rank {rank}")
    if tuple(out.shape) != tuple(d * m for d, m in zip(x.shape, mult)):
        raise _unsupported(op, f"output shape {list(out.shape)} is not the input's "
                               f"{list(x.shape)} tiled {mult} times")
    in_st = [0] * rank
    acc = 1
    for d in range(rank - 1, -1, -1):
        in_st[d] = acc
        acc *= x.shape[d]
    dims: list[tuple[int, int]] = []  # (size, input stride)
    for d in range(rank):
        if mult[d] != 1:
            dims.append((mult[d], 0))
        if x.shape[d] != 1:
            dims.append((x.shape[d], in_st[d]))
    if len(dims) > 6:
        raise _unsupported(op, f"TILE of {list(x.shape)} by {mult} needs {len(dims)} axes "
                               "(at most 6)")
    if _size(out.shape) == 0:
        return "// TILE with an empty output"
    dims = [(1, 0)] * (6 - len(dims)) + dims
    item = x.dtype.itemsize  # type: ignore[union-attr]
    return (f"{{ static const int64_t s[6] = {_arr([d for d, _ in dims])}; static const "
            f"int64_t t[6] = {_arr([st for _, st in dims])};\n  tk::transpose({e.ptr(x)}, "
            f"{e.ptr(out)}, {item}, s, t); }}")


def _gather(e: Emitter, step: Step) -> str:
    op = step.op
    x, idx, out = op.inputs[0], _input(op, 1), op.outputs[0]
    assert x is not None
    if idx is None or idx.dtype not in (_I32, np.dtype(np.int64)):
        raise _unsupported(op, "GATHER needs int32 or int64 indices")
    rank = len(x.shape)
    axis = _int(op, "axis", 0)
    axis = axis + rank if axis < 0 else axis
    if _int(op, "batchDims", 0) != 0:
        raise _unsupported(op, "GATHER with batch_dims")
    if not 0 <= axis < rank:
        raise _unsupported(op, f"axis {axis} for rank {rank}")
    want = (*x.shape[:axis], *idx.shape, *x.shape[axis + 1:])
    if tuple(out.shape) != want or x.dtype != out.dtype:
        raise _unsupported(op, f"output {list(out.shape)} is not the gather's {list(want)}")
    outer, inner = _size(x.shape[:axis]), _size(x.shape[axis + 1:])
    item = x.dtype.itemsize  # type: ignore[union-attr]
    n = x.shape[axis]
    return (f"if (!tk::gather({e.ptr(x)}, {e.ptr(idx)}, {e.ptr(out)}, {item}, {outer}, {n}, "
            f"{inner}, {_size(idx.shape)}))\n"
            f"  throw std::runtime_error(\"GATHER {_cstr(op.name)}: an index is outside "
            f"[0, {n})\");")


def _gather_nd(e: Emitter, step: Step) -> str:
    op = step.op
    x, idx, out = op.inputs[0], _input(op, 1), op.outputs[0]
    assert x is not None
    if idx is None or idx.dtype != _I32 or not idx.shape:
        raise _unsupported(op, "GATHER_ND needs int32 indices of rank >= 1")
    k = idx.shape[-1]
    if not 0 < k <= len(x.shape):
        raise _unsupported(op, f"index depth {k} for params of rank {len(x.shape)}")
    want = (*idx.shape[:-1], *x.shape[k:])
    if tuple(out.shape) != want or out.dtype != x.dtype:
        raise _unsupported(op, f"output {list(out.shape)} is not the gather's {list(want)}")
    inner = _size(x.shape[k:])
    strides = [_size(x.shape[j + 1:]) for j in range(k)]
    item = x.dtype.itemsize  # type: ignore[union-attr]
    return (f"{{ static const int64_t dims[{k}] = {_arr(x.shape[:k])}; static const int64_t "
            f"st[{k}] = {_arr(strides)};\n"
            f"  if (!tk::gather_nd({e.ptr(x)}, {e.ptr(idx)}, {e.ptr(out)}, {item}, "
            f"{_size(idx.shape[:-1])}, {k}, dims, st, {inner}))\n"
            f"    throw std::runtime_error(\"GATHER_ND {_cstr(op.name)}: an index is out of "
            f"range\"); }}")


def _cast(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if is_quantized(x) or is_quantized(out):
        raise _unsupported(op, "CAST of quantized tensors")
    if _size(x.shape) != _size(out.shape):
        raise _unsupported(op, f"CAST from {list(x.shape)} to {list(out.shape)}")
    src, dst = ctype(x.dtype, x.name), ctype(out.dtype, out.name)
    if dst == "bool" and src != "bool":  # != 0, as the reference
        return (f"for (int64_t i = 0; i < {_size(out.shape)}; ++i) {e.ptr(out)}[i] = "
                f"{e.ptr(x)}[i] != 0;")
    return f"tk::cast({e.ptr(x)}, {e.ptr(out)}, {_size(out.shape)});"


def _logical(e: Emitter, step: Step) -> str:
    op = step.op
    a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
    assert a is not None and b is not None
    if not a.dtype == b.dtype == out.dtype == np.dtype(np.bool_):
        raise _unsupported(op, f"{op.type} of {a.dtype} x {b.dtype}")
    g, r0, r1 = _bcast(op, step, a, b, out)
    return (f"tk::logical_bool({g}, {int(op.type == 'LOGICAL_OR')}, {e.ptr(a)}, {e.ptr(b)}, "
            f"{e.ptr(out)}, {r0}, {r1});")


def _axis_split(op: Op, shape: tuple[int, ...], axis_input: int) -> tuple[int, int, int]:
    """``(outer, n, inner)`` around the axis named by constant input ``axis_input``."""
    rank = len(shape)
    axis = int(_const(op, axis_input).reshape(-1)[0])
    if not -rank <= axis < max(rank, 1):
        raise _unsupported(op, f"axis {axis} for rank {rank}")
    axis %= rank
    return _size(shape[:axis]), shape[axis], _size(shape[axis + 1:])


def _arg_extreme(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if x.dtype != _F32 or out.dtype not in (_I32, np.dtype(np.int64)):
        raise _unsupported(op, f"{op.type} of {x.dtype} to {out.dtype} (float32 only)")
    outer, n, inner = _axis_split(op, tuple(x.shape), 1)
    if n == 0:
        raise _unsupported(op, f"{op.type} over an empty axis")
    return (f"tk::arg_extreme_f32({e.ptr(x)}, {e.ptr(out)}, {outer}, {n}, {inner}, "
            f"{int(op.type == 'ARG_MAX')});")


def _cumsum(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    if x.dtype != _F32 or out.dtype != _F32:
        raise _unsupported(op, f"CUMSUM of {x.dtype} (float32 only)")
    outer, n, inner = _axis_split(op, tuple(x.shape), 1)
    excl, rev = int(bool(_opt(op, "exclusive", False))), int(bool(_opt(op, "reverse", False)))
    return (f"tk::cumsum_f32({e.ptr(x)}, {e.ptr(out)}, {outer}, {n}, {inner}, {excl}, "
            f"{rev});")


def _zeros_like(e: Emitter, step: Step) -> str:
    op = step.op
    out = op.outputs[0]
    if is_quantized(out):
        raise _unsupported(op, "ZEROS_LIKE of a quantized tensor")
    n = _size(out.shape) * out.dtype.itemsize  # type: ignore[union-attr]
    return f"std::memset({e.ptr(out)}, 0, {n});"


def _cstr(text: str) -> str:
    """``text`` safe inside a C++ string literal: printable ASCII but quotes, backslashes
    and question marks (trigraphs); anything else becomes ``_``."""
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\?' else "_"
                   for c in text)


def _movement(e: Emitter, step: Step) -> str:
    """An op that only moves data: one strided walk of the input (``tk::transpose``) when its
    index map is affine, else the map itself (``tk::gather_map``)."""
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None and out.dtype is not None
    if x.dtype != out.dtype:
        raise _unsupported(op, f"{op.type} from {x.dtype} to {out.dtype}")
    if is_quantized(x) and is_quantized(out):
        iq, oq = qp(op, x), qp(op, out)
        if iq.s != oq.s or iq.zp != oq.zp:
            raise _unsupported(op, f"{op.type} with different input and output quantization")
    m = index_map(op)
    item = out.dtype.itemsize
    if m.size == 0:
        return f"// {op.type} with an empty output"
    if _size(x.shape) >= 2**31:
        raise _unsupported(op, "input of 2**31 elements or more")
    aff = affine_map(m)
    if aff is not None:
        offset, shape6, st6 = aff
        return (f"{{ static const int64_t s[6] = {_arr(shape6)}; static const int64_t t[6] = "
                f"{_arr(st6)};\n  tk::transpose({e.ptr(x)} + {offset}, {e.ptr(out)}, {item}, "
                f"s, t); }}")
    value: float | int = qp(op, out).zp if is_quantized(out) else 0
    fill = e.param(np.asarray([value], dtype=out.dtype), ctype(out.dtype, out.name))
    return (f"tk::gather_map({e.ptr(x)}, {e.param(m.reshape(-1).astype(np.int32), 'int32_t')}, "
            f"{e.ptr(out)}, {m.size}, {item}, {fill});")


def _concat(e: Emitter, step: Step) -> str:
    op = step.op
    out = op.outputs[0]
    rank = len(out.shape)
    axis = _int(op, "axis", 0)
    axis = axis + rank if axis < 0 else axis
    if is_quantized(out):
        oq = qp(op, out)
        for t in op.inputs:
            if t is not None and is_quantized(t):
                iq = qp(op, t)
                if iq.s != oq.s or iq.zp != oq.zp:
                    raise _unsupported(op, "CONCATENATION of inputs quantized unlike the "
                                           "output")
    outer = _size(out.shape[:axis])
    y_block = _size(out.shape[axis:])
    item = out.dtype.itemsize  # type: ignore[union-attr]
    lines, offset = [], 0
    for t in op.inputs:
        if t is None:
            continue
        inner = _size(t.shape[axis:])
        lines.append(f"tk::copy_blocks({e.ptr(t)}, {inner}, {e.ptr(out)} + {offset}, "
                     f"{y_block}, {outer}, {inner}, {item});")
        offset += inner
    act = _act(op)
    if act and out.dtype == _F32:
        lines.append(f"tk::activate_f32({e.ptr(out)}, {_size(out.shape)}, {act});")
    elif act:
        raise _unsupported(op, "fused activation on a quantized CONCATENATION")
    return "\n".join(lines)


def _split(e: Emitter, step: Step) -> str:
    op = step.op
    if op.type == "SPLIT":
        x = op.inputs[1]
        axis = int(_const(op, 0).reshape(-1)[0])
    else:
        x = op.inputs[0]
        axis = int(_const(op, 2).reshape(-1)[0])
    assert x is not None
    rank = len(x.shape)
    axis = axis + rank if axis < 0 else axis
    outer = _size(x.shape[:axis])
    x_block = _size(x.shape[axis:])
    item = x.dtype.itemsize  # type: ignore[union-attr]
    lines, offset = [], 0
    for t in op.outputs:
        inner = _size(t.shape[axis:])
        lines.append(f"tk::copy_blocks({e.ptr(x)} + {offset}, {x_block}, {e.ptr(t)}, {inner}, "
                     f"{outer}, {inner}, {item});")
        offset += inner
    if offset != x_block:
        raise _unsupported(op, "outputs do not add up to the input")
    return "\n".join(lines)


def _leaky_relu(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None
    shape = tuple(out.shape)
    alpha = np.float32(_opt(op, "alpha", 0.2))  # type: ignore[arg-type]
    px, py = e.ptr(x), e.ptr(out)
    if x.dtype == _F32 and out.dtype == _F32:
        return _flat_rows(step, shape, lambda o, n: (
            f"tk::leaky_relu_f32({px} + {o}, {_flt(alpha)}, {py} + {o}, {n});"))
    if not (is_quantized(x) and is_quantized(out)):
        raise _unsupported(op, f"LEAKY_RELU of non-quantized {x.dtype} input")
    _check_int8(op, x, out)
    iq, oq = qp(op, x), qp(op, out)
    m_id, s_id = quantize_multiplier(np.float64(np.float32(iq.s) / np.float32(oq.s)))
    m_al, s_al = quantize_multiplier(np.float64(np.float32(iq.s) * alpha / np.float32(oq.s)))
    table = e.table(256, f"tk::leaky_table_q8({iq.zp}, {int(m_id)}, {int(s_id)}, "
                         f"{int(m_al)}, {int(s_al)}, {oq.zp}, @TABLE@);")
    return _flat_rows(step, shape, lambda o, n: f"tk::lut_q8({px} + {o}, {table}, {py} + {o}, "
                                                 f"{n});")


def _pad(e: Emitter, step: Step) -> str:
    op = step.op
    x, out = op.inputs[0], op.outputs[0]
    assert x is not None and out.dtype is not None
    rank = len(x.shape)
    pads = _const(op, 1).astype(np.int64).reshape(-1, 2) if rank else np.zeros((0, 2), np.int64)
    if rank > 6 or pads.shape[0] != rank or (pads < 0).any():
        raise _unsupported(op, f"paddings {pads.tolist()} for rank {rank}")
    want = tuple(int(d + p0 + p1) for d, (p0, p1) in zip(x.shape, pads.tolist()))
    if want != tuple(out.shape):
        raise _unsupported(op, f"padded shape {list(want)} is not the output's")
    value: float | int = 0
    const = _input(op, 2)
    if op.type == "PADV2" and const is not None:
        value = _const(op, 2).reshape(-1)[0].item()
    elif is_quantized(out):
        value = qp(op, out).zp
    fill = e.param(np.asarray([value], dtype=out.dtype), ctype(out.dtype, out.name))
    lead = 6 - rank
    in6 = [1] * lead + list(x.shape)
    out6 = [1] * lead + list(out.shape)
    before6 = [0] * lead + [int(p) for p in pads[:, 0]]
    return (f"{{ static const int64_t si[6] = {_arr(in6)}; static const int64_t so[6] = "
            f"{_arr(out6)}; static const int64_t sb[6] = {_arr(before6)};\n"
            f"  tk::pad({e.ptr(x)}, {e.ptr(out)}, {out.dtype.itemsize}, si, so, sb, {fill}); }}")


_EMITTERS: dict[str, Callable[[Emitter, Step], str]] = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "TRANSPOSE_CONV": _transpose_conv,
    "RESIZE_BILINEAR": _resize_bilinear, "CONV_3D": _conv3d,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _lstm, "UNIDIRECTIONAL_SEQUENCE_RNN": _rnn,
    "MAX_POOL_2D": _pool, "AVERAGE_POOL_2D": _pool,
    "FULLY_CONNECTED": _fully_connected, "BATCH_MATMUL": _batch_matmul,
    **dict.fromkeys(_BINOPS, _binary), **dict.fromkeys(_UNOPS, _unary),
    "QUANTIZE": _quantize, "DEQUANTIZE": _quantize,
    "SOFTMAX": _softmax, **dict.fromkeys(_REDOPS, _reduce),
    "INSTANCE_NORM": _norm, "LAYER_NORM": _norm,
    "RESHAPE": _copy, "SQUEEZE": _copy, "EXPAND_DIMS": _copy,
    "TRANSPOSE": _transpose, "TILE": _tile, "CONCATENATION": _concat, "SPLIT": _split,
    "SPLIT_V": _split,
    "LEAKY_RELU": _leaky_relu, "PAD": _pad, "PADV2": _pad,
    "LOG_SOFTMAX": _log_softmax, "PRELU": _prelu, **dict.fromkeys(_CMPOPS, _compare),
    "SELECT_V2": _select, "GATHER": _gather, "GATHER_ND": _gather_nd, "CAST": _cast,
    "FLOOR_MOD": _binary, "FLOOR_DIV": _binary, "LOGICAL_AND": _logical,
    "LOGICAL_OR": _logical, "ARG_MAX": _arg_extreme, "ARG_MIN": _arg_extreme,
    "CUMSUM": _cumsum, "ZEROS_LIKE": _zeros_like, **dict.fromkeys(MOVEMENT, _movement),
    "PACK": _pack, "UNPACK": _pack, "SHAPE": _shape, "FILL": _fill, "ONES_LIKE": _fill,
    "RANGE": _range, "SELECT": _select, "LOGICAL_NOT": _logical_not,
}

#: Op kinds the generator emits (CUSTOM ops by custom code).
SUPPORTED: frozenset[str] = frozenset(_EMITTERS)


def emit_step(e: Emitter, step: Step) -> str:
    """The C++ statements of one step (UnsupportedOpError for an op it cannot generate)."""
    op = step.op
    fn = _EMITTERS.get(op.kind)
    if fn is None and op.type == "CUSTOM":
        rec = custom_op(op)
        if rec is None:
            raise unregistered(op, "the native backend")
        if rec.emit is None:
            raise UnsupportedOpError(
                f"custom op {op.kind!r} (op {op.name!r}) is registered without a C++ emitter",
                where=_where(op), fix=f"register it again with emit=: tk.register_custom_op("
                                      f"{op.kind!r}, kernel, emit=...) (see toolkit.custom_ops)")
        fn = rec.emit
    if fn is None:
        raise UnsupportedOpError(
            f"no C++ kernel for {op.kind} (op {op.name!r}, first output "
            f"{op.outputs[0].name if op.outputs else '<none>'!r})", where=_where(op),
            fix=f"the generator supports {', '.join(sorted(SUPPORTED))}")
    # windowed and element-wise ops compute a stripe's rows; any other op is computed whole
    # at each of its stripes, which leaves the stripe's rows right as well
    return fn(e, step)
