"""Helpers shared by the kernels: options, quantization parameters, fused activations, and
the per-op cache of prepared constants.

Per-op cache: a kernel derives constants from its op and its constant inputs (padding,
reshaped filters, fixed-point multipliers, activation bounds) once and keeps them as
``(key, plan)`` in a cache of the runtime keyed weakly by the op (never in the op itself, so a
run leaves the model as it found it, and the plan goes when the op goes). The key holds the
op's options object and its input and output tensor tuples (compared by identity: the toolkit
replaces these rather than editing them) and the shapes and dtypes of the input arrays; a
plan also checks that its constant inputs are the same array objects, so a different input
shape, a rewired op or new weights prepare a new plan. Tensors' quantization parameters are
read when a plan is made; give an op new tensors rather than editing the quantization of
tensors it has used.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, Literal, TypeVar

import numpy as np

from toolkit.errors import RuntimeInputError, UnsupportedOpError
from toolkit.fixed_point import QParams, qparams_of
from toolkit.ir import Op, Tensor
from toolkit.runtime.kernels.blocks import block_len, const_block
from toolkit.runtime.kernels.fixedpoint import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
)
from toolkit.schema import ACTIVATIONS

__all__ = [
    "QParams",
    "opt",
    "need",
    "where",
    "unsupported",
    "bad_input",
    "out_dtype",
    "qparams",
    "is_quantized",
    "int_range",
    "float_activation",
    "quant_activation_range",
    "quantize_float",
    "dequantize",
    "requantize",
    "norm_axis",
    "exact_float_dtype",
    "int_matmul",
    "padding_same",
    "conv_out_and_pad",
    "GENERAL",
    "General",
    "cached_plan",
    "single_input_plan",
    "plain_float",
    "weighted_inputs",
    "weighted_plan",
    "store_plan",
    "quiet",
    "FloatClamp",
    "float_clamp",
    "value_table",
    "pair_table",
    "lookup_index",
]

_F32 = np.dtype(np.float32)
QUANT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def where(op: Op) -> str:
    """The location string used in error messages."""
    return f"op {op.kind} {op.name!r}"


#: what to do about an op (or a type or option of it) the reference runtime does not run
UNSUPPORTED_FIX = ("docs/ops.md lists the ops, types and options the reference runtime runs: "
                   "convert or quantize the model so that this op uses one of them, or run "
                   "the model in LiteRT")
#: what to do when an op's inputs or options do not fit together
BAD_INPUT_FIX = ("check the inputs given to tk.run (names, shapes, types), and that the model "
                 "loads and runs in LiteRT; convert the model again if it does not")


def unsupported(op: Op, what: str, fix: str = UNSUPPORTED_FIX) -> UnsupportedOpError:
    """Return an UnsupportedOpError about ``op`` (``fix``: what the user can do; by default
    where the supported ops are listed)."""
    return UnsupportedOpError(what, where=where(op), fix=fix)


def bad_input(op: Op, what: str, fix: str = BAD_INPUT_FIX) -> RuntimeInputError:
    """Return a RuntimeInputError about the inputs of ``op`` (``fix``: what the user can do;
    by default, check the inputs and the model)."""
    return RuntimeInputError(what, where=where(op), fix=fix)


def need(op: Op, args: list[np.ndarray | None], i: int) -> np.ndarray:
    """Return input ``i`` of ``op`` (RuntimeInputError when it is absent)."""
    if i >= len(args) or args[i] is None:
        raise bad_input(op, f"input {i} is missing", fix="pass one array per op input")
    return np.asarray(args[i])


def opt(op: Op, name: str, default: Any = None) -> Any:
    """Return option ``name`` of ``op`` (``default`` when the op has no options or field)."""
    o = op.options
    if o is None:
        return default
    v = getattr(o, name, default)
    return default if v is None else v


def out_dtype(op: Op, i: int = 0) -> np.dtype:
    """NumPy dtype of output ``i`` of ``op``."""
    dt = op.outputs[i].dtype
    if dt is None:
        raise unsupported(op, f"output {op.outputs[i].name!r} has type "
                              f"{op.outputs[i].type_name}, which NumPy cannot hold")
    return dt


def is_quantized(t: Tensor | None) -> bool:
    """True for an integer tensor with affine quantization parameters."""
    return (t is not None and t.dtype in QUANT_DTYPES and t.quant is not None
            and t.quant.scale.size > 0)


def qparams(op: Op, t: Tensor | None) -> QParams:
    """Quantization parameters of ``t`` (an input or output of ``op``)."""
    if t is None or t.quant is None or t.quant.scale.size == 0:
        name = t.name if t is not None else "<absent>"
        raise unsupported(op, f"tensor {name!r} has no quantization parameters",
                          fix="give the tensor a scale and zero point")
    return qparams_of(t.quant)


def int_range(dt: np.dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype."""
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def float_activation(op: Op, x: np.ndarray, code: int | None = None) -> np.ndarray:
    """Apply the fused activation of ``op`` (or ``code``) to float values."""
    code = op.activation if code is None else code
    if code == 0:
        return x
    name = ACTIVATIONS.get(code, str(code))
    if name == "RELU":
        return np.maximum(x, x.dtype.type(0))
    if name == "RELU_N1_TO_1":
        return np.minimum(np.maximum(x, x.dtype.type(-1)), x.dtype.type(1))
    if name == "RELU6":
        return np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6))
    if name == "TANH":
        return np.tanh(x)
    raise unsupported(op, f"fused activation {name} is not supported")


def quant_activation_range(op: Op, out: Tensor, code: int | None = None) -> tuple[int, int]:
    """TFLite ``CalculateActivationRangeQuantized``: the clamp range of a quantized output.

    RELU-type activations clamp; NONE (and TANH, which cannot be a clamp) give the full
    range of the output type.
    """
    code = op.activation if code is None else code
    if out.dtype is None:
        raise unsupported(op, f"output {out.name!r} has type {out.type_name}, "
                              "which NumPy cannot hold")
    qmin, qmax = int_range(out.dtype)
    name = ACTIVATIONS.get(code, str(code))
    if name in ("NONE", "TANH"):
        return qmin, qmax
    qp = qparams(op, out)
    scale, zp = qp.s, qp.zp

    def q(v: float) -> int:
        return zp + int(round_half_away(np.float32(v) / scale))

    if name == "RELU":
        return max(qmin, q(0.0)), qmax
    if name == "RELU6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if name == "RELU_N1_TO_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise unsupported(op, f"fused activation {name} is not supported on quantized tensors")


def _broadcast_qparams(scale: np.ndarray, zp: np.ndarray, ndim: int, axis: int
                       ) -> tuple[Any, Any]:
    """Scale and zero point shaped to broadcast over an ``ndim``-d tensor (per-channel along
    ``axis``), or as scalars for per-tensor parameters."""
    if scale.size > 1:
        shape = [1] * ndim
        shape[axis] = scale.size
        return scale.reshape(shape), (zp.reshape(shape) if zp.size > 1 else zp.reshape(-1)[0])
    return scale[0], zp[0]


def dequantize(x: np.ndarray, qp: QParams) -> np.ndarray:
    """Real values of quantized ``x`` as float32 (per-tensor or per-channel along qp.axis)."""
    scale, zp = _broadcast_qparams(qp.scale.astype(np.float64), qp.zero_point, x.ndim, qp.axis)
    return (scale * (x.astype(np.int64) - zp)).astype(np.float32)


def quantize_float(x: np.ndarray, qp: QParams, dt: np.dtype,
                   lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """TFLite ``AffineQuantize``: ``round(x / scale) + zp`` (float32 division), clamped."""
    x = np.asarray(x, dtype=np.float32)
    scale, zp = _broadcast_qparams(qp.scale, qp.zero_point, x.ndim, qp.axis)
    qmin, qmax = int_range(dt)
    lo = qmin if lo is None else lo
    hi = qmax if hi is None else hi
    r = quiet(_rounded_bounded, x, scale)
    q = r.astype(np.int64)
    q += zp
    np.maximum(q, lo, out=q)
    np.minimum(q, hi, out=q)
    return q.astype(dt)


def _rounded_bounded(x: np.ndarray, scale: Any) -> np.ndarray:
    """``round_half_away(x / scale)`` with NaN as 0 and values clamped to ``±2**40``."""
    r = np.asarray(round_half_away(x / scale))
    r[np.isnan(r)] = 0  # NaN -> 0; infinities -> the bounds below
    np.maximum(r, -(2.0**40), out=r)
    np.minimum(r, 2.0**40, out=r)
    return r


def requantize(acc: np.ndarray, real_multiplier: float | np.ndarray, out_zp: int,
               lo: int, hi: int, dt: np.dtype) -> np.ndarray:
    """``clamp(MultiplyByQuantizedMultiplier(acc, M) + out_zp, lo, hi)`` cast to ``dt``."""
    mult, shift = quantize_multiplier(real_multiplier)
    y = multiply_by_quantized_multiplier(acc, mult, shift) + out_zp
    return np.clip(y, lo, hi).astype(dt)


def norm_axis(op: Op, axis: int, rank: int) -> int:
    """Normalise a possibly negative axis for a tensor of rank ``rank``."""
    a = int(axis)
    if a < 0:
        a += rank
    if not 0 <= a < max(rank, 1):
        raise bad_input(op, f"axis {axis} is out of range for a rank-{rank} tensor")
    return a


def padding_same(op: Op) -> bool:
    """True when the op's padding option is SAME (False for VALID)."""
    p = int(opt(op, "padding", 0))
    if p not in (0, 1):
        raise unsupported(op, f"padding type {p} is not supported")
    return p == 0


def conv_out_and_pad(size: int, k: int, stride: int, dilation: int, same: bool
                     ) -> tuple[int, int, int]:
    """TFLite ``ComputeOutSize`` / ``ComputePaddingWithOffset``: (out, pad_before, pad_after)."""
    eff = (k - 1) * dilation + 1
    out = (size + stride - 1) // stride if same else (size + stride - eff) // stride
    out = max(out, 0)
    total = max(0, (out - 1) * stride + eff - size) if same else 0
    return out, total // 2, total - total // 2


def exact_float_dtype(terms: int, a_mag: float, b_mag: float) -> type:
    """The float dtype in which sums of ``terms`` integer products ``|a| <= a_mag``,
    ``|b| <= b_mag`` are exact whatever the summation order: float32 while every partial sum
    stays below 2**24, else float64 (exact below 2**53)."""
    return np.float32 if terms * a_mag * b_mag < 2.0**24 else np.float64


def int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer ``a @ b`` (NumPy broadcasting) as int64, computed with BLAS in the
    smallest float dtype that keeps it exact (see :func:`exact_float_dtype`)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    a_mag = float(np.abs(a).max(initial=0))
    b_mag = float(np.abs(b).max(initial=0))
    terms = a.shape[-1]
    if terms * a_mag * b_mag >= 2.0**53:
        return np.matmul(a, b)
    dt = exact_float_dtype(terms, a_mag, b_mag)
    return np.rint(np.matmul(a.astype(dt), b.astype(dt))).astype(np.int64)


# ------------------------------------------------------------------ per-op cache
_PLANS: weakref.WeakKeyDictionary[Op, tuple[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()
"""The prepared-constants cache: op -> (key, plan) (see the module docstring)."""

GENERAL: Final = "general"
"""The plan of an op whose inputs take the general (unprepared) path."""

General = Literal["general"]
"""The type of :data:`GENERAL`, for the return types of plan makers."""

P = TypeVar("P")


def cached_plan(op: Op, key: tuple[Any, ...]) -> Any:
    """The plan cached on ``op`` for ``key``, or None."""
    entry = _PLANS.get(op)
    if entry is not None and entry[0] == key:
        return entry[1]
    return None


def store_plan(op: Op, key: tuple[Any, ...], plan: P) -> P:
    """Cache ``plan`` on ``op`` for ``key`` (replacing any other) and return it."""
    _PLANS[op] = (key, plan)
    return plan


PlanMaker = Callable[[Op, np.ndarray, np.ndarray, np.ndarray | None], Any]
"""Makes the plan of a weighted op from the op, input, weights and bias (or returns GENERAL)."""


def single_input_plan(op: Op, x: np.ndarray, make: Callable[..., P], *extra: Any) -> P:
    """The plan cached on ``op`` for one input like ``x``: ``make(op, x, *extra)`` on first
    use, and again when the op's wiring or options or the input's shape or dtype change."""
    key = (op.options, op.inputs, op.outputs, x.shape, x.dtype)
    plan = cached_plan(op, key)
    if plan is None:
        plan = store_plan(op, key, make(op, x, *extra))
    return plan


def plain_float(op: Op, x: np.ndarray, w: np.ndarray) -> bool:
    """True when an op with input ``x`` and weights ``w`` computes in plain float32: both
    and the output float32, the weights not quantized (hybrid)."""
    return x.dtype == _F32 and w.dtype == _F32 and op.outputs[0].dtype == _F32 \
        and not is_quantized(op.inputs[1])


def weighted_inputs(args: list[np.ndarray | None]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """``(x, weights, bias or None)`` of an op with inputs (x, weights[, bias]), or None
    when they are not arrays a plan takes (x must be C-contiguous)."""
    if len(args) not in (2, 3):
        return None
    x, w = args[0], args[1]
    b = args[2] if len(args) == 3 else None
    if type(x) is not np.ndarray or type(w) is not np.ndarray or not x.flags.c_contiguous:
        return None
    return x, w, b


def run_weighted_plan(op: Op, args: list[np.ndarray | None], make: PlanMaker
                      ) -> np.ndarray | None:
    """Run an op with inputs (x, weights[, bias]) through its cached plan (see
    :func:`weighted_plan`); None when the op takes the kernel's general path."""
    plan = weighted_plan(op, args, make)
    return None if plan is None else plan(args[0])


def weighted_plan(op: Op, args: list[np.ndarray | None], make: PlanMaker) -> Any:
    """The plan of an op with inputs (x, weights[, bias]), cached on the op: made by
    ``make`` on first use and remade when the input shape or dtype, the op's wiring or
    options, or the weight/bias arrays change; None when the op takes the kernel's general
    path (unusual inputs, or a plan of GENERAL)."""
    inputs = weighted_inputs(args)
    if inputs is None:
        return None
    x, w, b = inputs
    key = (op.options, op.inputs, op.outputs, x.shape, x.dtype)
    plan = cached_plan(op, key)
    if plan is None or (plan is not GENERAL and (plan.w is not w or plan.b is not b)):
        plan = store_plan(op, key, make(op, x, w, b))
    return None if plan is GENERAL else plan


# ------------------------------------------------------------------ quiet float errors
_QUIET_ON = contextvars.ContextVar("toolkit_kernels_quiet", default=False)
_QUIET_CONTEXTS: dict[int, contextvars.Context] = {}


def _enter_quiet() -> None:
    np.errstate(all="ignore").__enter__()
    _QUIET_ON.set(True)


def quiet(fn: Callable[..., P], *args: Any) -> P:
    """``fn(*args)`` with NumPy floating-point errors ignored.

    Same effect as calling it inside ``np.errstate(all="ignore")``, for a fraction of the
    cost: the call runs in a context (one per thread) where that error state is set once.
    A call made from inside another runs directly.
    """
    if _QUIET_ON.get():  # already inside the context
        return fn(*args)
    ctx = _QUIET_CONTEXTS.get(threading.get_ident())
    if ctx is None:
        ctx = contextvars.Context()
        ctx.run(_enter_quiet)
        _QUIET_CONTEXTS[threading.get_ident()] = ctx
    try:
        return ctx.run(fn, *args)
    except RuntimeError:
        if _QUIET_ON.get():  # already inside the context: fn has not run yet
            return fn(*args)
        raise


@lru_cache(maxsize=256)
def _const_shaped(value: float, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    a = np.full(shape, value, dtype=dtype)
    a.setflags(write=False)
    return a


class FloatClamp:
    """A fused float activation (RELU family or TANH) for arrays of one size, as
    :func:`float_activation` computes it.

    The bounds are kept as constant arrays (see :mod:`.blocks`): of the arrays' own
    ``shape`` when given and small, else as blocks the arrays are viewed in rows of."""

    __slots__ = ("hi", "length", "lo", "tanh")

    def __init__(self, lo: float | None, hi: float | None, tanh: bool, size: int,
                 dtype: np.dtype, shape: tuple[int, ...] | None = None) -> None:
        self.tanh = tanh
        length = block_len(size) if size else 0
        make: Callable[[float], Any]
        if shape is not None and size and length == size:
            self.length = -1  # constants of the arrays' shape: no reshaping

            def make(v: float) -> np.ndarray:
                return _const_shaped(v, dtype, shape)
        elif length:
            self.length = length

            def make(v: float) -> np.ndarray:
                return const_block(v, dtype, length)
        else:
            self.length = 0
            make = dtype.type
        self.lo = None if lo is None else make(lo)
        self.hi = None if hi is None else make(hi)

    def __call__(self, y: np.ndarray) -> np.ndarray:
        """Apply the activation to the C-contiguous array ``y`` in place; return ``y``."""
        if self.tanh:
            np.tanh(y, out=y)
            return y
        v = y.reshape(-1, self.length) if self.length > 0 else y
        if self.lo is not None:
            np.maximum(v, self.lo, out=v)
        if self.hi is not None:
            np.minimum(v, self.hi, out=v)
        return y

    def of(self, src: np.ndarray) -> np.ndarray:
        """The activation of the C-contiguous array ``src``, as a new array."""
        if self.tanh:
            return np.tanh(src)
        if self.length > 0:
            y = np.empty(src.shape, dtype=src.dtype)
            v, s = y.reshape(-1, self.length), src.reshape(-1, self.length)
            if self.lo is not None:
                np.maximum(s, self.lo, out=v)
                s = v
            if self.hi is not None:
                np.minimum(s, self.hi, out=v)
            elif s is not v:
                np.copyto(v, s)
            return y
        if self.lo is not None:
            y = np.maximum(src, self.lo)
            if self.hi is not None:
                np.minimum(y, self.hi, out=y)
            return y
        return np.minimum(src, self.hi) if self.hi is not None else src.copy()


_CLAMPS = {"RELU": (0.0, None), "RELU_N1_TO_1": (-1.0, 1.0), "RELU6": (0.0, 6.0)}


def float_clamp(op: Op, size: int, dtype: np.dtype, code: int | None = None,
                shape: tuple[int, ...] | None = None) -> FloatClamp | None:
    """The fused activation of ``op`` (or ``code``) as a :class:`FloatClamp` for arrays of
    ``size`` elements (of ``shape`` when given), None for NONE (UnsupportedOpError for an
    unknown activation)."""
    code = op.activation if code is None else code
    if code == 0:
        return None
    name = ACTIVATIONS.get(code, str(code))
    if name == "TANH":
        return FloatClamp(None, None, True, size, dtype, shape)
    if name not in _CLAMPS:
        raise unsupported(op, f"fused activation {name} is not supported")
    lo, hi = _CLAMPS[name]
    return FloatClamp(lo, hi, False, size, dtype, shape)


# ------------------------------------------------------------------ value tables
def value_table(fn: Callable[[np.ndarray], np.ndarray], dtype: np.dtype) -> np.ndarray:
    """``fn`` evaluated on every value of the 8- or 16-bit integer ``dtype``, as a table that
    the values index directly once cast to ``np.intp`` (negative values index from the end).

    For an element-wise ``fn`` (each output depends on its input value only),
    ``table[x.astype(np.intp)]`` equals ``fn(x)``."""
    info = np.iinfo(dtype)
    vals = np.arange(info.min, info.max + 1, dtype=np.int64)
    out = np.asarray(fn(vals.astype(dtype)))
    table = np.empty(vals.size, dtype=out.dtype)
    table[vals % vals.size] = out.reshape(-1)
    table.setflags(write=False)
    return table


def pair_table(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], a_dtype: np.dtype,
               b_dtype: np.dtype) -> np.ndarray:
    """``fn(a, b)`` for every pair of values of two 8-bit integer dtypes, as a table indexed
    by ``a * 256 + b`` (as ``np.intp``; negative indices count from the end).

    For an element-wise ``fn``, ``table[lookup_index(a, b)]`` equals ``fn(a, b)``."""
    ia, ib = np.iinfo(a_dtype), np.iinfo(b_dtype)
    av = np.arange(ia.min, ia.max + 1, dtype=np.int64)
    bv = np.arange(ib.min, ib.max + 1, dtype=np.int64)
    ga, gb = np.repeat(av, bv.size), np.tile(bv, av.size)
    out = np.asarray(fn(ga.astype(a_dtype), gb.astype(b_dtype)))
    n = av.size * bv.size
    table = np.empty(n, dtype=out.dtype)
    table[(ga * 256 + gb) % n] = out.reshape(-1)
    table.setflags(write=False)
    return table


def lookup_index(a: np.ndarray, b: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a * 256 + b`` broadcast to ``shape``, as ``np.intp`` (see :func:`pair_table`)."""
    if a.shape == shape:
        idx = a.astype(np.intp)
        idx <<= 8
    else:
        idx = np.empty(shape, dtype=np.intp)
        np.multiply(a, 256, out=idx, dtype=np.intp)
    np.add(idx, b, out=idx)
    return idx
