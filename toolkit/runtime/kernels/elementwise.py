"""Element-wise binary and unary math ops (NumPy broadcasting, as TFLite's up-to-6-D
broadcast).

Float ops compute in float32 like TFLite (``RSQRT`` is ``1.f / sqrt(x)``,
``SQUARED_DIFFERENCE`` is ``d * d``). Quantized (int8/uint8/int16) ops:

* ADD / SUB: TFLite's rescaling: each input ``(q - zp) << left_shift`` (20 for 8-bit, 15 for
  16-bit) times its fixed-point multiplier ``s_i / (2 max(s1, s2))``, sum or difference, times
  ``2 max(s1, s2) / (2**left_shift s_out)``, plus ``zp_out``, clamped to the activation range.
* MUL: ``MultiplyByQuantizedMultiplier((q1 - zp1) (q2 - zp2), s1 s2 / s_out) + zp_out``.
* MINIMUM / MAXIMUM compare the raw stored values, as LiteRT does (it assumes the inputs and
  the output share their quantization, as the converter guarantees).
* NEG negates the raw stored value with wrap-around, as LiteRT does.
* ABS: TFLite's ``|q - zp_in|`` rescaled by ``s_in / s_out``.
* int8 SQUARED_DIFFERENCE: TFLite's fixed-point kernel: each input ``(q - zp) << 7`` times
  its multiplier ``s_i / (2 max(s1, s2))``, the difference squared, times
  ``(2 max(s1, s2))**2 / (2**14 s_out)``, plus ``zp_out``, clamped to int8 (LiteRT applies
  no fused activation here).
* DIV, POW and other quantized SQUARED_DIFFERENCE: dequantize, compute in float32,
  quantize. LiteRT's int8 DIV is not followed (its reciprocal-based kernel returns the type
  minimum when ``q1 - zp1 == -1``).
* RSQRT, SQRT, EXP: a table over every input value built from the float function (TFLite's
  ``LUTPopulate``: dequantize in float32, transform, ``round(y * (1 / s_out)) + zp_out``);
  exact for EXP and RSQRT, within one unit for SQRT.

Each op prepares its constants once (see :mod:`.common`): float32 ops apply a constant
operand broadcast along the trailing axes (a per-channel scale or bias) as a tiled block and
the fused activation in place; 8-bit quantized binary ops with per-tensor parameters look
their results up in a table of the fixed-point computation over every pair of input values,
and quantized unary ops in a table over every input value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from toolkit.fixed_point import single_precision_ratio, squared_difference_int8
from toolkit.ir import Op, Tensor
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.blocks import block_len, tile_block
from toolkit.runtime.kernels.common import (
    FloatClamp,
    cached_plan,
    dequantize,
    float_activation,
    float_clamp,
    int_range,
    is_quantized,
    lookup_index,
    need,
    out_dtype,
    pair_table,
    qparams,
    quant_activation_range,
    quantize_float,
    quiet,
    requantize,
    store_plan,
    unsupported,
    value_table,
)
from toolkit.runtime.kernels.fixedpoint import (
    c_div,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
)

__all__ = ["lut_unary", "quantized_via_float", "FloatFn", "unary_table"]

FloatFn = Callable[[np.ndarray], np.ndarray]


# ------------------------------------------------------------------ helpers
def _int_activation(op: Op, y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Fused activation on a non-quantized integer result (TFLite clamps)."""
    code = op.activation
    lo, hi = int_range(dt)
    if code == 1:
        lo = max(lo, 0)
    elif code == 2:
        lo, hi = max(lo, -1), min(hi, 1)
    elif code == 3:
        lo, hi = max(lo, 0), min(hi, 6)
    elif code != 0:
        raise unsupported(op, f"fused activation {code} on integer tensors")
    return np.clip(y, lo, hi)


def quantized_via_float(op: Op, args: list[np.ndarray], fn: Callable[..., np.ndarray]
                        ) -> np.ndarray:
    """Dequantize the inputs, apply ``fn`` and the fused activation in float32, quantize."""
    reals = [dequantize(a, qparams(op, t)) for a, t in zip(args, op.inputs, strict=False)]
    with np.errstate(all="ignore"):
        y = np.asarray(fn(*reals), dtype=np.float32)
    y = float_activation(op, y)
    out = op.outputs[0]
    lo, hi = quant_activation_range(op, out)
    return quantize_float(y, qparams(op, out), out_dtype(op), lo, hi)


def _lut_table(op: Op, x_dtype: np.dtype, fn: FloatFn) -> np.ndarray:
    """The table of :func:`lut_unary`: output values for inputs ``qmin .. qmax``."""
    iq = qparams(op, op.inputs[0])
    oq = qparams(op, op.outputs[0])
    dt = out_dtype(op)
    qmin, qmax = int_range(x_dtype)
    if qmax - qmin > 65535:
        raise unsupported(op, f"table lookup on {x_dtype} inputs")
    vals = np.arange(qmin, qmax + 1, dtype=np.int64)
    deq = np.float32(iq.s) * (vals - iq.zp).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(deq), dtype=np.float32)
        inv = np.float32(1) / np.float32(oq.s)
        r = round_half_away(y * inv)
        r = np.clip(np.nan_to_num(r, nan=0.0), -(2.0**40), 2.0**40)
    omin, omax = int_range(dt)
    return np.clip(r.astype(np.int64) + oq.zp, omin, omax).astype(dt)


def lut_unary(op: Op, x: np.ndarray, fn: FloatFn) -> np.ndarray:
    """Apply ``fn`` to quantized ``x`` through a table over every input value (LUTPopulate)."""
    table = _lut_table(op, x.dtype, fn)
    return table[x.astype(np.int64) - int_range(x.dtype)[0]]


BYTE_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))
_TABLE_DTYPES = (*BYTE_DTYPES, np.dtype(np.int16))


def per_tensor(*ts: Tensor | None) -> bool:
    """True when every tensor is quantized with a single scale and zero point."""
    return all(is_quantized(t) and t is not None and t.quant is not None
               and t.quant.scale.size == 1 and t.quant.zero_point.size <= 1 for t in ts)


def unary_table(op: Op, args: list[np.ndarray | None],
                fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """Run the element-wise integer function ``fn`` on ``args[0]`` (8- or 16-bit) through a
    table over every input value, prepared once per op and input shape; None when
    ``args[0]`` is not such an array (the caller then computes ``fn`` directly)."""
    x = args[0] if args else None
    if type(x) is not np.ndarray or x.dtype not in _TABLE_DTYPES:
        return None
    key = (op.options, op.inputs, op.outputs, x.shape, x.dtype)
    table = cached_plan(op, key)
    if table is None:
        table = store_plan(op, key, value_table(fn, x.dtype))
    return table[x.astype(np.intp)]


# ------------------------------------------------------------------ binary
def _quant_add_sub(op: Op, a: np.ndarray, b: np.ndarray, sign: int) -> np.ndarray:
    if op.activation == 4:  # TANH cannot be a clamp: apply it to the real values
        return quantized_via_float(op, [a, b], np.add if sign > 0 else np.subtract)
    out = op.outputs[0]
    dt = out_dtype(op)
    q1, q2, qo = qparams(op, op.inputs[0]), qparams(op, op.inputs[1]), qparams(op, out)
    left_shift = 15 if dt == np.int16 else 20
    twice_max = 2.0 * np.float64(max(q1.s, q2.s))
    m1, s1 = quantize_multiplier(np.float64(q1.s) / twice_max)
    m2, s2 = quantize_multiplier(np.float64(q2.s) / twice_max)
    mo, so = quantize_multiplier(twice_max / (float(1 << left_shift) * np.float64(qo.s)))
    v1 = multiply_by_quantized_multiplier((a.astype(np.int64) - q1.zp) << left_shift, m1, s1)
    v2 = multiply_by_quantized_multiplier((b.astype(np.int64) - q2.zp) << left_shift, m2, s2)
    raw = v1 + v2 if sign > 0 else v1 - v2
    y = multiply_by_quantized_multiplier(raw, mo, so) + qo.zp
    lo, hi = quant_activation_range(op, out)
    return np.clip(y, lo, hi).astype(dt)


def _quant_mul(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = op.outputs[0]
    dt = out_dtype(op)
    q1, q2, qo = qparams(op, op.inputs[0]), qparams(op, op.inputs[1]), qparams(op, out)
    if op.activation == 4:
        return quantized_via_float(op, [a, b], np.multiply)
    real = single_precision_ratio(q1.s, qo.s, q2.s)
    prod = (a.astype(np.int64) - q1.zp) * (b.astype(np.int64) - q2.zp)
    lo, hi = quant_activation_range(op, out)
    return requantize(prod, real, qo.zp, lo, hi, dt)


def _int8_sqd(op: Op) -> bool:
    """True for an int8 SQUARED_DIFFERENCE with per-tensor parameters (LiteRT's
    fixed-point case)."""
    return op.type == "SQUARED_DIFFERENCE" and len(op.inputs) == 2 and bool(op.outputs) \
        and all(t is not None and t.dtype == np.int8 for t in (*op.inputs, op.outputs[0])) \
        and _quantized_pair(op) and per_tensor(*op.inputs, op.outputs[0])


def _quant_squared_difference(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LiteRT's int8 SQUARED_DIFFERENCE
    (:func:`toolkit.fixed_point.squared_difference_int8`)."""
    return squared_difference_int8(a, b, qparams(op, op.inputs[0]), qparams(op, op.inputs[1]),
                                   qparams(op, op.outputs[0]))


def _binary(op: Op, args: list[np.ndarray | None], ffn: Callable[..., np.ndarray],
            ifn: Callable[..., np.ndarray] | None = None) -> list[np.ndarray]:
    y = _binary_prepared(op, args, ffn)
    if y is not None:
        return [y]
    return _binary_general(op, args, ffn, ifn)


def _binary_general(op: Op, args: list[np.ndarray | None], ffn: Callable[..., np.ndarray],
                    ifn: Callable[..., np.ndarray] | None = None) -> list[np.ndarray]:
    a, b = need(op, args, 0), need(op, args, 1)
    dt = out_dtype(op)
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        with np.errstate(all="ignore"):
            y = ffn(a.astype(np.float32), b.astype(np.float32))
        return [float_activation(op, np.asarray(y, dtype=np.float32)).astype(dt)]
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        return [quantized_via_float(op, [a, b], ffn)]
    if ifn is None:
        raise unsupported(op, f"{op.type} on {a.dtype} tensors")
    wide = np.int64 if a.dtype != np.uint64 else np.uint64
    with np.errstate(all="ignore"):
        y = ifn(a.astype(wide), b.astype(wide))
    return [_int_activation(op, y, dt).astype(dt)]


def _quantized_pair(op: Op) -> bool:
    return is_quantized(op.inputs[0]) and is_quantized(op.inputs[1]) \
        and is_quantized(op.outputs[0])


# ------------------------------------------------------------------ prepared binary ops
_F32 = np.dtype(np.float32)


class _NoPlan:
    """The op's inputs take the general path."""

    __slots__ = ()
    const = None
    const_pos = 0

    def run(self, a: np.ndarray, b: np.ndarray) -> None:
        return None


_NO_PLAN = _NoPlan()


class _BinaryPlan:
    """A binary op on arrays of fixed shapes and dtypes with an optional constant operand.

    ``kind`` is ``"float"`` (float32 ``fn`` with errors ignored, then the fused activation;
    ``"pow"`` for ``np.power``, whose results depend on the operands' layout, which gets
    C-contiguous operands of the input shapes, as the general path gives it), ``"raw"``
    (``fn`` on the stored values) or ``"table"`` (8-bit values looked up in a
    :func:`pair_table`). A constant operand ``const`` (input ``const_pos``) that repeats
    along the trailing axes of the other, full-shape, operand is kept as ``tile``: one or
    more periods, ``rows[-1]`` elements long; the other operand is viewed as ``rows``."""

    __slots__ = ("clamp", "const", "const_pos", "fn", "rows", "run", "shape", "table",
                 "tile")

    def __init__(self, kind: str, fn: Callable[..., np.ndarray], shape: tuple[int, ...],
                 const: np.ndarray | None, const_pos: int, length: int,
                 tile: np.ndarray | None, clamp: FloatClamp | None = None,
                 table: np.ndarray | None = None) -> None:
        self.fn, self.shape, self.clamp, self.table = fn, shape, clamp, table
        self.const, self.const_pos = const, const_pos
        size = int(np.prod(shape, dtype=np.int64))
        # a whole-array tile takes the arrays' shape: no reshaping per call
        self.rows: tuple[int, ...] | None = None if length == size else (-1, length)
        if tile is not None and self.rows is None:
            tile = tile.reshape(shape)
        self.tile = tile
        runs = {"float": (self._float, self._float_tile_a, self._float_tile_b),
                "pow": (self._float_copies, self._float_copies, self._float_copies),
                "raw": (self._raw, self._raw_tile_a, self._raw_tile_b),
                "table": (self._table, self._table_tile_a, self._table_tile_b)}[kind]
        self.run = runs[0] if tile is None else runs[1 + const_pos]

    def _float(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """float32 ``fn`` on the operands as given, then the activation."""
        y = quiet(self.fn, a, b)
        if not y.flags.c_contiguous:
            y = y.copy()  # C order, as the general path (which computes on copies)
        if self.clamp is not None:
            self.clamp(y)
        return y

    def _float_copies(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # NumPy's power rounds differently for scalar, broadcast and strided operands
        if not a.flags.c_contiguous:
            a = a.copy()
        if not b.flags.c_contiguous:
            b = b.copy()
        y = quiet(self.fn, a, b)
        if self.clamp is not None:
            self.clamp(y)
        return y

    def _float_tile_a(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.rows is None:
            y = quiet(self.fn, self.tile, b)
        else:
            y = quiet(self.fn, self.tile, b.reshape(self.rows)).reshape(self.shape)
        if self.clamp is not None:
            self.clamp(y)
        return y

    def _float_tile_b(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.rows is None:
            y = quiet(self.fn, a, self.tile)
        else:
            y = quiet(self.fn, a.reshape(self.rows), self.tile).reshape(self.shape)
        if self.clamp is not None:
            self.clamp(y)
        return y

    def _raw(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        y = self.fn(a, b)
        return y if y.flags.c_contiguous else y.copy()

    def _raw_tile_a(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.rows is None:
            return self.fn(self.tile, b)
        return self.fn(self.tile, b.reshape(self.rows)).reshape(self.shape)

    def _raw_tile_b(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.rows is None:
            return self.fn(a, self.tile)
        return self.fn(a.reshape(self.rows), self.tile).reshape(self.shape)

    def _table(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        assert self.table is not None
        return self.table[lookup_index(a, b, self.shape)]

    def _table_tile_a(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        assert self.table is not None and self.tile is not None
        idx = (b if self.rows is None else b.reshape(self.rows)).astype(np.intp)
        np.add(idx, self.tile, out=idx)
        return self.table[idx].reshape(self.shape)

    def _table_tile_b(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # the table of a constant second operand is indexed by b * 256 + a
        assert self.table is not None and self.tile is not None
        idx = (a if self.rows is None else a.reshape(self.rows)).astype(np.intp)
        np.add(idx, self.tile, out=idx)
        return self.table[idx].reshape(self.shape)


def _trailing_period(const: np.ndarray, shape: tuple[int, ...]) -> bool:
    """True when ``const`` broadcast to ``shape`` repeats every ``const.size`` elements."""
    dims = list(const.shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    return len(dims) <= len(shape) and tuple(dims) == shape[len(shape) - len(dims):]


def _make_binary_plan(op: Op, a: np.ndarray, b: np.ndarray, fn: Callable[..., np.ndarray],
                      raw: bool) -> _BinaryPlan | _NoPlan:
    """The plan of a binary op for inputs like ``a`` and ``b`` (``raw``: MINIMUM/MAXIMUM on
    the stored values)."""
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return _NO_PLAN
    dt = op.outputs[0].dtype if op.outputs else None
    if raw:
        if not (a.dtype == b.dtype == dt):
            return _NO_PLAN
        kind = "raw"
    elif a.dtype == b.dtype == dt == _F32:
        kind = "pow" if fn is np.power else "float"
    elif a.dtype in BYTE_DTYPES and b.dtype in BYTE_DTYPES and _quantized_pair(op) \
            and dt in BYTE_DTYPES and per_tensor(*op.inputs[:2], op.outputs[0]):
        kind = "table"
    else:
        return _NO_PLAN
    size = int(np.prod(shape, dtype=np.int64))
    const, pos, length, tile = None, 1, 0, None
    for i, (arr, other) in enumerate(((b, a), (a, b))):
        t = op.inputs[1 - i] if len(op.inputs) > 1 - i else None
        if t is not None and t.is_const and other.shape == shape and arr.size \
                and _trailing_period(arr, shape):
            length = block_len(size, arr.size)
            if length:
                const, pos = arr, 1 - i
                break
    if kind == "pow":
        const = None
    if const is not None:
        if kind == "table":
            tile = tile_block(const.astype(np.intp) * 256, length)
        elif kind == "float" or const.dtype == dt:
            tile = tile_block(const, length)
    table = clamp = None
    if kind == "table":
        f = _table_fn(op, fn)
        if const is not None and pos == 1:  # indexed by b * 256 + a
            table = pair_table(lambda vb, va: f(va, vb), b.dtype, a.dtype)
        else:
            table = pair_table(f, a.dtype, b.dtype)
    elif kind in ("float", "pow"):
        clamp = float_clamp(op, size, _F32, shape=shape)
    return _BinaryPlan(kind, fn, shape, const, pos, length, tile, clamp, table)


def _table_fn(op: Op, fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """The 8-bit quantized computation of ``op`` (``fn`` is its float function)."""
    if op.type == "ADD":
        return lambda a, b: _quant_add_sub(op, a, b, +1)
    if op.type == "SUB":
        return lambda a, b: _quant_add_sub(op, a, b, -1)
    if op.type == "MUL":
        return lambda a, b: _quant_mul(op, a, b)
    if _int8_sqd(op):
        return lambda a, b: _quant_squared_difference(op, a, b)
    return lambda a, b: quantized_via_float(op, [a, b], fn)


def binary_plan(op: Op, a: np.ndarray, b: np.ndarray, fn: Callable[..., np.ndarray],
                raw: bool = False) -> _BinaryPlan | _NoPlan:
    """The plan of a binary op for operands like ``a`` and ``b``, cached on the op (remade
    when a constant operand is another array)."""
    key = (op.options, op.inputs, op.outputs, a.shape, a.dtype, b.shape, b.dtype)
    plan: Any = cached_plan(op, key)
    if plan is not None:
        const = plan.const
        if const is None or (b if plan.const_pos else a) is const:
            return plan
    return store_plan(op, key, _make_binary_plan(op, a, b, fn, raw))


def _binary_prepared(op: Op, args: list[np.ndarray | None], fn: Callable[..., np.ndarray],
                     raw: bool = False) -> np.ndarray | None:
    """Run a binary op through its prepared plan; None when it takes the general path."""
    if len(args) != 2:
        return None
    a, b = args
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None
    return binary_plan(op, a, b, fn, raw).run(a, b)


@register("ADD")
def add(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """ADD with broadcasting and fused activation."""
    y = _binary_prepared(op, args, np.add)
    if y is not None:
        return [y]
    if _quantized_pair(op):
        return [_quant_add_sub(op, need(op, args, 0), need(op, args, 1), +1)]
    return _binary_general(op, args, np.add, np.add)


@register("SUB")
def sub(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SUB with broadcasting and fused activation."""
    y = _binary_prepared(op, args, np.subtract)
    if y is not None:
        return [y]
    if _quantized_pair(op):
        return [_quant_add_sub(op, need(op, args, 0), need(op, args, 1), -1)]
    return _binary_general(op, args, np.subtract, np.subtract)


@register("MUL")
def mul(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MUL with broadcasting and fused activation."""
    y = _binary_prepared(op, args, np.multiply)
    if y is not None:
        return [y]
    if _quantized_pair(op):
        return [_quant_mul(op, need(op, args, 0), need(op, args, 1))]
    return _binary_general(op, args, np.multiply, np.multiply)


@register("DIV")
def div(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """DIV (integer division truncates toward zero, as C)."""
    return _binary(op, args, np.divide, c_div)


@register("SQUARED_DIFFERENCE")
def squared_difference(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SQUARED_DIFFERENCE: ``(a - b) * (a - b)``."""

    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = a - b
        return d * d

    y = _binary_prepared(op, args, f)
    if y is not None:
        return [y]
    if _int8_sqd(op):
        return [_quant_squared_difference(op, need(op, args, 0), need(op, args, 1))]
    return _binary_general(op, args, f, f)


@register("POW")
def power(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """POW: ``a ** b``."""
    return _binary(op, args, np.power, np.power)


def _min_max(op: Op, args: list[np.ndarray | None], fn: Callable[..., np.ndarray]
             ) -> list[np.ndarray]:
    y = _binary_prepared(op, args, fn, raw=True)
    if y is not None:
        return [y]
    a, b = need(op, args, 0), need(op, args, 1)
    return [fn(a, b).astype(out_dtype(op))]


@register("MINIMUM")
def minimum(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MINIMUM (element-wise, broadcasting)."""
    return _min_max(op, args, np.minimum)


@register("MAXIMUM")
def maximum(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """MAXIMUM (element-wise, broadcasting)."""
    return _min_max(op, args, np.maximum)


# ------------------------------------------------------------------ unary
def unary(op: Op, args: list[np.ndarray | None], ffn: FloatFn,
          ifn: Callable[[np.ndarray], np.ndarray] | None = None) -> list[np.ndarray]:
    """Run a unary float function on float, quantized (table) or plain integer input."""
    x = need(op, args, 0)
    dt = out_dtype(op)
    if x.dtype == _F32 and dt == _F32 and x.flags.c_contiguous:
        y = np.asarray(quiet(ffn, x), dtype=np.float32)
        return [y.copy() if y is x else y]
    if np.issubdtype(x.dtype, np.floating):
        with np.errstate(all="ignore"):
            return [np.asarray(ffn(x.astype(np.float32)), dtype=np.float32).astype(dt)]
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        t = unary_table(op, args, lambda v: lut_unary(op, v, ffn))
        return [lut_unary(op, x, ffn) if t is None else t]
    if ifn is None:
        raise unsupported(op, f"{op.type} on non-quantized {x.dtype} input")
    return [ifn(x).astype(dt)]


def rsqrt_f(x: np.ndarray) -> np.ndarray:
    """``1.f / sqrt(x)`` in float32."""
    return np.float32(1) / np.sqrt(x)


@register("RSQRT")
def rsqrt(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """RSQRT: ``1 / sqrt(x)``."""
    return unary(op, args, rsqrt_f)


@register("SQRT")
def sqrt(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """SQRT."""
    return unary(op, args, np.sqrt)


@register("EXP")
def exp(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """EXP."""
    return unary(op, args, np.exp)


@register("LOG")
def log(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """LOG (natural logarithm)."""
    return unary(op, args, np.log)


@register("NEG")
def neg(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """NEG; integer (also quantized) values are negated raw, wrapping as LiteRT does."""
    x = need(op, args, 0)
    if np.issubdtype(x.dtype, np.floating):
        return unary(op, args, np.negative)
    return [np.negative(x.astype(np.int64)).astype(x.dtype).astype(out_dtype(op))]


def _quant_abs(op: Op, x: np.ndarray) -> np.ndarray:
    """TFLite's quantized ABS: ``|q - zp_in|`` rescaled by ``s_in / s_out``."""
    iq, oq = qparams(op, op.inputs[0]), qparams(op, op.outputs[0])
    dt = out_dtype(op)
    lo, hi = int_range(dt)
    v = np.abs(x.astype(np.int64) - iq.zp)
    if iq.s == oq.s and iq.zp == oq.zp:
        return np.clip(v + oq.zp, lo, hi).astype(dt)
    return requantize(v, np.float64(iq.s) / np.float64(oq.s), oq.zp, lo, hi, dt)


@register("ABS")
def absolute(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """ABS; quantized as TFLite: ``|q - zp_in|`` rescaled by ``s_in / s_out``."""
    x = need(op, args, 0)
    if is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        y = unary_table(op, args, lambda v: _quant_abs(op, v))
        return [_quant_abs(op, x) if y is None else y]
    return unary(op, args, np.abs, lambda v: np.abs(v.astype(np.int64)))
