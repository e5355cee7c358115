"""TFLite's integer UNIDIRECTIONAL_SEQUENCE_LSTM (8-bit input, weights and hidden state,
16-bit cell state: ``lstm_eval.cc``'s ``EvalInteger8x8_16``), shared by the
reference runtime (NumPy, :func:`run_integer_lstm`) and the C++ generator (which writes the
constants of :func:`prepare_integer_lstm` and runs the same steps in ``tk_ops.cpp``).

Per time step and batch row, with every gate's pre-activation in Q3.12 (int16)::

    gate  = sat16(mbqm(b_in + W x, s_in) + sat16(mbqm(b_rec + R h, s_rec)))
    f, i, o = sigmoid(gate)  (Q0.15, gemmlowp's int16 logistic)     i = 32767 - f under CIFG
    g     = tanh(gate)       (Q0.15, gemmlowp's int16 tanh; both in toolkit.fixed_point)
    c     = sat16(rdbpot(f c, 15) + rdbpot(i g, 30 + cell_log2))   clipped to +-cell_clip
    h     = clamp8(mbqm(o tanh(c), s_hidden) + hidden_zp)           tanh of c in Q(15 + cell_log2)

A cell state finer than 2**-15 (Q(15 + cell_log2) with fewer than 0 integer bits) is what the
converter writes for an LSTM whose cell stays small (a stacked LSTM fed by another); LiteRT's
``ApplyTanh`` dispatches 0 to 6 integer bits and returns without writing otherwise, so its
hidden values are ``o`` times its scratch, which then holds the step's input gate ``i``. That
is reproduced (with a warning), so the model's outputs are LiteRT's.

where ``b_in = bias - zp_x * rowsum(W)`` and ``b_rec = -zp_h * rowsum(R)`` are folded once,
``mbqm`` is TFLite's MultiplyByQuantizedMultiplier and ``rdbpot`` gemmlowp's
RoundingDivideByPOT. The hidden values carry the hidden intermediate's scale and zero point
(also the output's bytes) and are read back, at the next step, as the output state. Peephole
weights (int16) add ``sat16(mbqm(p * c, s_peep))`` to the input and forget gates (the old
cell) and the output gate (the new one); a projection maps the hidden values (then carrying
``-hidden_zp``) to the output state: ``clamp8(mbqm(P h + b_proj, s_proj) + zp_h)``, clipped.
With layer norm the gates' pre-activations carry their intermediates' scales, the gate biases
are not folded, and TFLite's integer ``ApplyLayerNorm`` (mean and variance of the row, an
inverse square root in fixed point, coefficients and bias) brings each gate to Q3.12 before
its activation.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np

from toolkit.errors import UnsupportedOpError
from toolkit.fixed_point import (
    c_div,
    int16_logistic,
    int16_tanh,
    inv_sqrt_multiplier,
    qparams_of,
    quantize_multiplier,
    rdbpot,
    rounding_divide_by_pot,
    sat16,
    wrap16,
)
from toolkit.ir import Op, Tensor

__all__ = ["IntegerLstm", "prepare_integer_lstm", "run_integer_lstm"]

#: TFLite's gate order of the LSTM's inputs (input, forget, cell, output)
GATES = ("input", "forget", "cell", "output")
_MBQM_PAIR = tuple[int, int]


@dataclass(frozen=True)
class IntegerLstm:
    """The constants TFLite's ``Prepare`` computes for one integer LSTM.

    ``w_in`` int8 [4, cell, input] and ``w_rec`` int8 [4, cell, output] hold the gates in
    :data:`GATES` order (the input gate's rows are zeros under CIFG); ``b_in`` / ``b_rec``
    int32 [4, cell] the folded effective biases; ``m_in`` / ``m_rec`` int64 [4, 2] the
    (multiplier, shift) pairs of the gates' effective scales. Peephole and projection
    constants are None without them."""

    n_input: int
    n_cell: int
    cifg: bool
    w_in: np.ndarray
    w_rec: np.ndarray
    b_in: np.ndarray
    b_rec: np.ndarray
    m_in: np.ndarray
    m_rec: np.ndarray
    hidden: _MBQM_PAIR
    hidden_zp: int
    cell_log2: int
    cell_clip: int
    time_major: bool
    h_zp: int  # the output state's zero point (the value of a reset state)
    n_output: int = 0  # the hidden state's width: the projection's rows, else n_cell
    #: peephole weights int16 [3, cell] (input, forget, output gates) and their pairs [3, 2]
    peep: np.ndarray | None = None
    m_peep: np.ndarray | None = None
    #: projection weights int8 [output, cell], effective bias int32 [output], its pair, and
    #: the quantized projection clip (0: none)
    proj: np.ndarray | None = None
    proj_bias: np.ndarray | None = None
    m_proj: _MBQM_PAIR = (0, 0)
    proj_clip: int = 0
    #: layer norm: coefficients int16 [4, cell], the gate biases int32 [4, cell] (applied
    #: after the norm, not folded), the coefficients' pairs [4, 2] and variance guards [4]
    ln: np.ndarray | None = None
    ln_bias: np.ndarray | None = None
    m_ln: np.ndarray | None = None
    ln_guard: np.ndarray | None = None
    #: a cell state finer than 2**-15: LiteRT's ApplyTanh takes 0 to 6 integer bits and
    #: returns without writing for fewer, so its hidden values multiply the output gate by
    #: what its scratch holds then, the step's input gate, in place of tanh(c)
    tanh_skipped: bool = False


def _where(op: Op) -> str:
    return f"op {op.kind} {op.name!r}"


def _refuse(op: Op, what: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"integer UNIDIRECTIONAL_SEQUENCE_LSTM {what}", where=_where(op),
                              fix="quantize the LSTM as TensorFlow's converter does (8-bit "
                                  "weights and hidden state, 16-bit power-of-two cell state, "
                                  "16-bit peephole and layer-norm coefficients, per-tensor "
                                  "scales)")


def _scale(op: Op, t: Tensor | None, name: str) -> tuple[np.float32, int]:
    if t is None or t.quant is None or t.quant.scale.size == 0:
        raise _refuse(op, f"needs a quantized {name}")
    q = qparams_of(t.quant)
    if q.scale.size != 1:
        raise _refuse(op, f"with per-channel {name} ({q.scale.size} scales)")
    return q.s, q.zp


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.int64) + 2**31) % 2**32 - 2**31


def _pair(m: float | np.floating) -> _MBQM_PAIR:
    mult, shift = quantize_multiplier(np.float64(m))
    return int(mult), int(shift)


def prepare_integer_lstm(op: Op) -> IntegerLstm:
    """The integer LSTM constants of ``op`` (TFLite's ``PopulateQuantizedLstmParams8x8_16``
    and ``PopulatePrecomputedZPTimesWeightsWithBias``). Raises UnsupportedOpError for what
    TFLite's integer kernel does not take."""
    ins = list(op.inputs) + [None] * (24 - len(op.inputs))
    x, out = ins[0], op.outputs[0]
    if x is None or x.dtype != np.int8 or out.dtype != np.int8 or len(x.shape) != 3:
        raise _refuse(op, "needs a 3-D int8 input and an int8 output")
    if op.activation != 4:
        raise _refuse(op, f"with cell activation {op.activation} (TANH only)")
    inter = op.extra.get("intermediates") or []
    if len(inter) < 5 or inter[4] is None:
        raise _refuse(op, "without its hidden-state intermediate tensor (5 intermediates)")
    hs, hzp = _scale(op, inter[4], "hidden intermediate")
    xs, xzp = _scale(op, x, "input")
    h_t, c_t = ins[18], ins[19]
    if h_t is None or c_t is None or h_t.dtype != np.int8 or c_t.dtype != np.int16:
        raise _refuse(op, "needs an int8 output state and an int16 cell state")
    os_, ozp = _scale(op, h_t, "output state")
    cs, _ = _scale(op, c_t, "cell state")
    log2 = float(np.float32(np.log(cs)) * (np.float32(1) / np.float32(np.log(2.0))))
    cell_log2 = int(np.round(log2))
    if abs(log2 - cell_log2) >= 1e-3:
        raise _refuse(op, f"with a cell state scale {float(cs)} that is not a power of two")
    cifg = ins[1] is None
    if 15 + cell_log2 > 6:
        raise _refuse(op, f"with a cell state scale of 2**{cell_log2} (2**-9 at most)")
    tanh_skipped = 15 + cell_log2 < 0
    if tanh_skipped:
        if cifg:  # LiteRT's scratch then holds what an earlier op left there
            raise _refuse(op, f"with a cell state scale of 2**{cell_log2} and CIFG (LiteRT "
                              "computes no tanh of the cell then and reads a scratch buffer "
                              "no gate wrote)")
        warnings.warn(f"{_where(op)}: its cell state scale 2**{cell_log2} is finer than "
                      "2**-15, for which LiteRT skips the tanh of the cell (its hidden values "
                      "are output gate x input gate); computed as LiteRT does. Quantize the "
                      "model again with a cell state of scale 2**-15 or coarser for a "
                      "working LSTM", stacklevel=3)
    first = ins[2]
    if first is None or first.data is None:
        raise _refuse(op, "needs constant forget-gate weights")
    n_cell, n_input = first.shape
    n_output = h_t.shape[-1]
    proj_t = ins[16]
    if tuple(out.shape[-1:]) != (n_output,) or (proj_t is None and n_output != n_cell):
        raise _refuse(op, f"with {n_output} outputs for {n_cell} cells")
    peeps = [ins[9], ins[10], ins[11]]
    if any(t is not None for t in peeps) and n_output != n_cell:
        raise _refuse(op, "with peephole weights and a projection to another width")
    use_ln = any(ins[i] is not None for i in range(20, 24))
    # the gates' scales: Q3.12, or with layer norm the intermediates' (its input)
    inter_sc = [np.float32(2.0 ** -12)] * 4
    ln = ln_bias = m_ln = ln_guard = None
    if use_ln:
        ln, ln_bias = np.zeros((4, n_cell), np.int16), np.zeros((4, n_cell), np.int32)
        m_ln, ln_guard = np.zeros((4, 2), np.int64), np.ones(4, np.int64)
        for g in range(4):
            if g == 0 and cifg:
                continue
            lt, it = ins[20 + g], inter[g]
            if lt is None or lt.data is None or lt.dtype != np.int16 or lt.shape[-1] != n_cell:
                raise _refuse(op, f"needs constant int16 layer-norm coefficients [{n_cell}] of "
                                  f"the {GATES[g]} gate")
            inter_sc[g], _ = _scale(op, it, f"{GATES[g]} gate's layer-norm intermediate")
            ls, _ = _scale(op, lt, "layer-norm coefficients")
            ln[g] = np.asarray(lt.data).reshape(-1)
            m_ln[g] = _pair(ls)
            ln_guard[g] = max(1, int(np.float32(10000) * ls))
    w_in = np.zeros((4, n_cell, n_input), np.int8)
    w_rec = np.zeros((4, n_cell, n_output), np.int8)
    b_in = np.zeros((4, n_cell), np.int64)
    b_rec = np.zeros((4, n_cell), np.int64)
    m_in = np.zeros((4, 2), np.int64)
    m_rec = np.zeros((4, 2), np.int64)
    for g in range(4):
        if g == 0 and cifg:
            continue
        wt, rt, bt = ins[1 + g], ins[5 + g], ins[12 + g]
        for t, shape, name in ((wt, (n_cell, n_input), "input"),
                               (rt, (n_cell, n_output), "recurrent")):
            if t is None or t.data is None or t.dtype != np.int8 or tuple(t.shape) != shape:
                raise _refuse(op, f"needs constant int8 {name} weights {list(shape)} of the "
                                  f"{GATES[g]} gate")
        assert wt is not None and rt is not None
        w, r = np.asarray(wt.data), np.asarray(rt.data)
        ws, _ = _scale(op, wt, f"{GATES[g]} gate's input weights")
        rs, _ = _scale(op, rt, f"{GATES[g]} gate's recurrent weights")
        w_in[g], w_rec[g] = w, r
        bias = np.zeros(n_cell, np.int64)
        if bt is not None:
            if bt.data is None or bt.dtype != np.int32 or bt.shape[-1] != n_cell:
                raise _refuse(op, f"needs a constant int32 bias of the {GATES[g]} gate")
            bias = np.asarray(bt.data).reshape(-1).astype(np.int64)
        if ln_bias is not None:  # layer norm: the bias is added after the norm
            ln_bias[g] = bias
            bias = np.zeros(n_cell, np.int64)
        b_in[g] = _wrap32(bias + (-xzp) * w.astype(np.int64).sum(axis=1))
        b_rec[g] = _wrap32((-ozp) * r.astype(np.int64).sum(axis=1))
        m_in[g] = _pair(np.float32(np.float32(ws * xs) / inter_sc[g]))
        m_rec[g] = _pair(np.float32(np.float32(rs * os_) / inter_sc[g]))
    hidden = _pair(np.float32(2.0 ** -15 / np.float64(hs) * 2.0 ** -15))
    peep = m_peep = None
    if any(t is not None for t in peeps):
        peep, m_peep = np.zeros((3, n_cell), np.int16), np.zeros((3, 2), np.int64)
        for k, t in enumerate(peeps):
            if k == 0 and cifg:
                continue
            if t is None or t.data is None or t.dtype != np.int16 or t.shape[-1] != n_cell:
                raise _refuse(op, f"needs constant int16 peephole weights [{n_cell}] of the "
                                  f"{GATES[(0, 1, 3)[k]]} gate")
            ps, _ = _scale(op, t, "peephole weights")
            peep[k] = np.asarray(t.data).reshape(-1)
            m_peep[k] = _pair(np.float32(2.0 ** cell_log2 * np.float64(ps)
                                         / np.float64(inter_sc[(0, 1, 3)[k]])))
    proj = proj_bias = None
    m_proj, proj_clip = (0, 0), 0
    if proj_t is not None:
        if proj_t.data is None or proj_t.dtype != np.int8 or \
                tuple(proj_t.shape) != (n_output, n_cell):
            raise _refuse(op, f"needs constant int8 projection weights [{n_output}, {n_cell}]")
        proj = np.asarray(proj_t.data)
        pws, _ = _scale(op, proj_t, "projection weights")
        pb = np.zeros(n_output, np.int64)
        pb_t = ins[17]
        if pb_t is not None:
            if pb_t.data is None or pb_t.dtype != np.int32 or pb_t.shape[-1] != n_output:
                raise _refuse(op, "needs a constant int32 projection bias")
            pb = np.asarray(pb_t.data).reshape(-1).astype(np.int64)
        # the hidden values carry -zp (see run_integer_lstm): + zp * row sum
        proj_bias = _wrap32(pb + hzp * proj.astype(np.int64).sum(axis=1)).astype(np.int32)
        m_proj = _pair(np.float32(np.float32(pws * hs) / os_))
        pclip = float(getattr(op.options, "projClip", 0.0) or 0.0)
        if pclip > 0:
            o_s, _ = _scale(op, out, "output")
            proj_clip = int(np.float32(min(max(np.float32(pclip) / o_s, np.float32(-128)),
                                           np.float32(127))))
    clip = float(getattr(op.options, "cellClip", 0.0) or 0.0)
    cell_clip = 0
    if clip > 0:
        cell_clip = int(np.float32(min(max(np.float32(clip) / cs, np.float32(-32768)),
                                       np.float32(32767))))
    return IntegerLstm(int(n_input), int(n_cell), cifg, w_in, w_rec,
                       b_in.astype(np.int32), b_rec.astype(np.int32), m_in, m_rec, hidden,
                       int(hzp), cell_log2, cell_clip,
                       bool(getattr(op.options, "timeMajor", False)), int(ozp),
                       int(n_output), peep, m_peep, proj, proj_bias, m_proj, proj_clip,
                       ln, ln_bias, m_ln, ln_guard, tanh_skipped)


# ---------------------------------------------------------------- evaluation
@functools.lru_cache(maxsize=16)
def _table(kind: str, int_bits: int) -> np.ndarray:
    """``kind`` ("logistic" / "tanh") of every int16 value (index ``raw + 32768``)."""
    a = np.arange(-32768, 32768, dtype=np.int64)
    v = int16_logistic(a, int_bits) if kind == "logistic" else int16_tanh(a, int_bits)
    v.flags.writeable = False
    return v


def _c_div_int(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _mbqm(x: np.ndarray, mult: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` of int32 values held in int64 (multiplier
    and shift scalars, or arrays broadcasting over ``x``)."""
    m, s = np.asarray(mult, np.int64), np.asarray(shift, np.int64)
    v = _wrap32(x << np.maximum(s, 0))
    ab = v * m
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where((v == -(2**31)) & (m == -(2**31)), 2**31 - 1, c_div(ab + nudge, 1 << 31))
    return rounding_divide_by_pot(high, np.maximum(-s, 0))


def _layer_norm(gate: np.ndarray, w: np.ndarray, bias: np.ndarray, pair: np.ndarray,
                guard: int) -> np.ndarray:
    """TFLite's ``ApplyLayerNorm`` of int16 rows ``gate`` [batch, n]: int64 Q3.12 values."""
    n = gate.shape[1]
    out = np.empty_like(gate)
    w64, b64 = w.astype(np.int64), bias.astype(np.int64)
    for r in range(gate.shape[0]):
        v = gate[r]
        mean = _c_div_int(int(v.sum()) * 1024, n)
        variance = int((v * v).sum()) * ((1 << 20) // n) - mean * mean
        var2 = _c_div_int(variance, 1 << 20)
        a, s = inv_sqrt_multiplier(var2 if var2 >= 1 else guard)
        rescaled = _mbqm(1024 * v - mean, a, s)
        val3 = _wrap32(rescaled * w64 + b64)
        val4 = c_div(np.where(val3 > 0, val3 + 512, val3 - 512), 1024)
        out[r] = sat16(_mbqm(val4, int(pair[0]), int(pair[1]) + 12))
    return out


def run_integer_lstm(p: IntegerLstm, x: np.ndarray, h0: np.ndarray | None,
                     c0: np.ndarray | None) -> np.ndarray:
    """The integer LSTM on int8 ``x`` ([batch, time, input], or [time, batch, input] when
    time-major) from the states ``h0`` (int8 [batch, output]) and ``c0`` (int16
    [batch, cell]); a missing state starts reset (the output state's zero point, cell 0).
    Returns the int8 outputs (the hidden values of every step), shaped as ``x``."""
    seq = np.asarray(x, dtype=np.int64)
    if not p.time_major:
        seq = seq.transpose(1, 0, 2)
    steps, batch = seq.shape[:2]
    n_out = p.n_output or p.n_cell
    h = np.full((batch, n_out), p.h_zp, np.int64) if h0 is None else \
        np.broadcast_to(np.asarray(h0, np.int64).reshape(-1, n_out), (batch, n_out))
    c = np.zeros((batch, p.n_cell), np.int64) if c0 is None else \
        np.broadcast_to(np.asarray(c0, np.int64).reshape(-1, p.n_cell), (batch, p.n_cell))
    # gemmlowp's activations of every int16 value, looked up (index raw + 32768)
    sigmoid, tanh_gate = _table("logistic", 3), _table("tanh", 3)
    tanh_cell = None if p.tanh_skipped else _table("tanh", 15 + p.cell_log2)
    # the four gates side by side: rows [4 * cell]
    w_in = p.w_in.reshape(-1, p.n_input).T.astype(np.int64)
    w_rec = p.w_rec.reshape(-1, n_out).T.astype(np.int64)
    b_in, b_rec = p.b_in.reshape(-1).astype(np.int64), p.b_rec.reshape(-1).astype(np.int64)
    m_in, s_in = (np.repeat(p.m_in[:, k], p.n_cell) for k in (0, 1))
    m_rec, s_rec = (np.repeat(p.m_rec[:, k], p.n_cell) for k in (0, 1))
    n = p.n_cell
    outs = []
    for t in range(steps):
        gate = sat16(_mbqm(seq[t] @ w_in + b_in, m_in, s_in))
        gate = sat16(_mbqm(h @ w_rec + b_rec, m_rec, s_rec) + gate)
        if p.peep is not None and p.m_peep is not None:  # input and forget: the old cell
            for k, g_k in ((0, 0), (1, 1)):
                sl = slice(g_k * n, (g_k + 1) * n)
                gate[:, sl] = sat16(gate[:, sl] + _mbqm(p.peep[k].astype(np.int64) * c,
                                                         *p.m_peep[k]))
        if p.ln is not None and p.ln_bias is not None and p.m_ln is not None \
                and p.ln_guard is not None:
            for g_k in range(1 if p.cifg else 0, 4):
                if g_k == 3:
                    continue  # the output gate: after its peephole on the new cell
                sl = slice(g_k * n, (g_k + 1) * n)
                gate[:, sl] = _layer_norm(gate[:, sl], p.ln[g_k], p.ln_bias[g_k],
                                          p.m_ln[g_k], int(p.ln_guard[g_k]))
        gate = gate + 32768
        f = sigmoid[gate[:, n:2 * n]]
        g = tanh_gate[gate[:, 2 * n:3 * n]]
        i = wrap16(32767 - f) if p.cifg else sigmoid[gate[:, :n]]
        c = wrap16(rdbpot(f * c, 15))
        c = sat16(c + wrap16(rdbpot(i * g, 30 + p.cell_log2)))
        if p.cell_clip > 0:
            c = np.clip(c, -p.cell_clip, p.cell_clip)
        og = gate[:, 3 * n:] - 32768
        if p.peep is not None and p.m_peep is not None:  # output: the new cell
            og = sat16(og + _mbqm(p.peep[2].astype(np.int64) * c, *p.m_peep[2]))
        if p.ln is not None and p.ln_bias is not None and p.m_ln is not None \
                and p.ln_guard is not None:
            og = _layer_norm(og, p.ln[3], p.ln_bias[3], p.m_ln[3], int(p.ln_guard[3]))
        o = sigmoid[og + 32768]
        # the hidden values: with a projection TFLite subtracts the zero point (and adds
        # it back through the projection's folded bias), else adds it
        zp = -p.hidden_zp if p.proj is not None else p.hidden_zp
        th = i if tanh_cell is None else tanh_cell[c + 32768]  # (see tanh_skipped)
        h = np.clip(_mbqm(o * th, *p.hidden) + zp, -128, 127)
        if p.proj is not None and p.proj_bias is not None:
            acc = h @ p.proj.T.astype(np.int64) + p.proj_bias.astype(np.int64)
            h = np.clip(_mbqm(acc, *p.m_proj) + p.h_zp, -128, 127)
            if p.proj_clip > 0:
                h = np.clip(h, -p.proj_clip, p.proj_clip)
        outs.append(h)
    y = np.stack(outs, axis=0)
    if not p.time_major:
        y = y.transpose(1, 0, 2)
    return np.ascontiguousarray(y).astype(np.int8)
