"""Constants of TFLite's integer arithmetic that the generator prepares for the C++ kernels.

The kernels apply ``MultiplyByQuantizedMultiplier`` at run time (see ``cpp/tk_ops.h``); the
generator computes what TFLite computes once per op in ``Prepare``: ``QuantizeMultiplier``'s
(mantissa, shift) pairs, activation clamp ranges (``CalculateActivationRangeQuantized``) and the
per-channel real multipliers ``s_in * s_w[c] / s_out``. Every function returns plain Python
ints (or int32/int64 arrays) ready to be written into the code or the parameters file.
"""

from __future__ import annotations

import numpy as np

from toolkit.errors import UnsupportedOpError
from toolkit.fixed_point import QParams, qparams_of, quantize_multiplier, round_half_away
from toolkit.ir import Op, Tensor

__all__ = ["QP", "qp", "is_quantized", "round_half_away", "quantize_multiplier",
           "activation_range", "channel_multipliers", "spatial_mean_requant",
           "mean_requant", "ACT_CODES"]

#: Fused activation codes understood by the C++ kernels (TFLite's numbering).
ACT_CODES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH"}

_QUANT = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


QP = QParams
"""The quantization parameters the generator reads (scales, zero points, axis)."""


def is_quantized(t: Tensor | None) -> bool:
    """True for an 8/16-bit integer tensor with a scale."""
    return (t is not None and t.dtype in _QUANT and t.quant is not None
            and t.quant.scale.size > 0)


def qp(op: Op, t: Tensor | None) -> QP:
    """The quantization parameters of ``t`` (UnsupportedOpError when it has none)."""
    if t is None or t.quant is None or t.quant.scale.size == 0:
        raise UnsupportedOpError("a quantized op has a tensor without a scale",
                                 where=f"op {op.kind} {op.name!r}",
                                 fix="give every tensor of the op a scale and zero point")
    return qparams_of(t.quant)


def activation_range(op: Op, out: Tensor, code: int | None = None) -> tuple[int, int]:
    """TFLite ``CalculateActivationRangeQuantized`` for ``out`` (int8): ``(lo, hi)``."""
    code = op.activation if code is None else code
    info = np.iinfo(out.dtype) if out.dtype is not None else np.iinfo(np.int8)
    qmin, qmax = int(info.min), int(info.max)
    if code == 0:
        return qmin, qmax
    p = qp(op, out)

    def q(v: float) -> int:
        return p.zp + int(round_half_away(np.float32(v) / p.s))

    if code == 1:
        return max(qmin, q(0.0)), qmax
    if code == 3:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if code == 2:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise UnsupportedOpError(f"fused activation {ACT_CODES.get(code, code)} on a quantized "
                             "output", where=f"op {op.kind} {op.name!r}",
                             fix="run the activation as a separate op")


def channel_multipliers(iq: QP, wq: QP, oq: QP, n_out: int, float_product: bool) -> np.ndarray:
    """Real multipliers ``s_in * s_w[c] / s_out`` per output channel (float64); the product
    ``s_in * s_w`` in float32 first when ``float_product`` (per-tensor FULLY_CONNECTED)."""
    ws = wq.scale.astype(np.float32)
    if float_product:
        prod = (np.float32(iq.s) * ws).astype(np.float64)
    else:
        prod = np.float64(iq.s) * ws.astype(np.float64)
    return np.broadcast_to(prod / np.float64(oq.s), (n_out,)).copy()


def spatial_mean_requant(iq: QP, oq: QP, n: int) -> tuple[int, int, int]:
    """TFLite's 8-bit MEAN over axes 1 and 2 of ``n`` values: ``(bias, multiplier, shift)``."""
    in_s, out_s = np.float32(iq.s), np.float32(oq.s)
    temp = np.float32(iq.zp) * in_s / out_s
    temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
    real = in_s / (np.float32(n) * out_s)
    mult, shift = quantize_multiplier(np.float64(real))
    return oq.zp - int(temp), int(mult), int(shift)


def mean_requant(iq: QP, oq: QP, n: int) -> tuple[int, int]:
    """TFLite's general 8-bit MEAN: the multiplier of ``s_in / s_out`` with ``1 / n`` folded
    into the mantissa: ``(multiplier, shift)``."""
    mult, shift = quantize_multiplier(np.float64(iq.s) / np.float64(oq.s))
    m, s = int(mult), int(shift)
    k = min(n.bit_length() - 1, 32, 31 + s)
    m = int((m << k) // n) if k >= 0 else int((m >> -k) // n)
    return m, s - k
