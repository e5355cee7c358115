"""Sequence ops: UNIDIRECTIONAL_SEQUENCE_LSTM (float32, hybrid, int8) and
UNIDIRECTIONAL_SEQUENCE_RNN (float32, hybrid).

The LSTM takes TFLite's 24 inputs (input; the input-to-gate weights i, f, c, o; the
recurrent weights; the optional peephole weights; the gate biases; the optional projection
weights and bias; the output and cell states; the optional layer-norm coefficients) and
computes, per time step::

    i = sigmoid(W_i x + R_i h + p_i * c + b_i)      (i = 1 - f when W_i is absent: CIFG)
    f = sigmoid(W_f x + R_f h + p_f * c + b_f)
    g = act(W_c x + R_c h + b_c)
    c = clip(f * c + i * g)
    o = sigmoid(W_o x + R_o h + p_o * c + b_o)
    h = clip(P (o * act(c)) + b_p)                  (h = o * act(c) without projection)

The states start from the state inputs (zeros for a variable tensor without data): the
reference runtime keeps no state between inferences, as LiteRT after
``reset_all_variables``. Hybrid models (int8 weights, float input) use the dequantized
weights. A fully quantized LSTM (int8 input, output and hidden state, int16 cell state) runs
TFLite's integer kernel (:mod:`toolkit.integer_lstm`, bit-exact with LiteRT, peephole,
projection and layer norm included); one the integer kernel does not take (per-channel
weights, no hidden-state intermediate) computes its gates in float32 from dequantized values
instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.errors import UnsupportedOpError
from toolkit.integer_lstm import prepare_integer_lstm, run_integer_lstm
from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    bad_input,
    dequantize,
    float_activation,
    is_quantized,
    need,
    opt,
    out_dtype,
    qparams,
    quantize_float,
    unsupported,
)

__all__: list[str] = []

Args = list[np.ndarray | None]
_F32 = np.dtype(np.float32)


def _float(op: Op, args: Args, i: int) -> np.ndarray | None:
    """Input ``i`` as float32 (dequantized weights of a hybrid op), None when absent."""
    if i >= len(args) or args[i] is None:
        return None
    a = np.asarray(args[i])
    if a.dtype == _F32:
        return a
    t = op.inputs[i]
    if is_quantized(t):
        return dequantize(a, qparams(op, t))
    raise unsupported(op, f"input {i} of {op.type} has dtype {a.dtype}: only float32 and "
                          "hybrid (int8-weight) sequence ops are supported")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)


def _layer_norm(x: np.ndarray, coef: np.ndarray | None) -> np.ndarray:
    if coef is None:
        return x
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(1e-8)) * coef).astype(np.float32)


def _state(s: np.ndarray | None, batch: int, width: int) -> np.ndarray:
    if s is None:
        return np.zeros((batch, width), dtype=np.float32)
    return np.broadcast_to(s.reshape(-1, width), (batch, width)).astype(np.float32)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM")
def unidirectional_sequence_lstm(op: Op, args: Args) -> list[np.ndarray]:
    """UNIDIRECTIONAL_SEQUENCE_LSTM in float32 (batch-major unless ``timeMajor``)."""
    x = need(op, args, 0)
    if x.dtype == np.int8 and is_quantized(op.inputs[0]) and is_quantized(op.outputs[0]):
        try:
            plan = prepare_integer_lstm(op)
        except UnsupportedOpError:  # not TFLite's integer LSTM: gates in float32
            return [_lstm_int8(op, args, x)]
        state = [args[i] if i < len(args) else None for i in (18, 19)]
        return [run_integer_lstm(plan, x, state[0], state[1])]
    if x.dtype != _F32:
        raise unsupported(op, f"UNIDIRECTIONAL_SEQUENCE_LSTM on {x.dtype} input (float32, "
                              "hybrid and int8 only)")
    if x.ndim != 3:
        raise bad_input(op, f"the input must be 3-d, got {list(x.shape)}")
    w = [_float(op, args, i) for i in range(24)]
    return [_lstm_float(op, w, None, None)]


Round = Callable[[np.ndarray], np.ndarray] | None


def _lstm_float(op: Op, w: list[np.ndarray | None], h_round: Round, c_round: Round
                ) -> np.ndarray:
    """The LSTM on float32 inputs ``w`` (the op's 24 inputs); ``h_round`` / ``c_round``
    round the hidden and cell states at every step (None: kept as computed)."""
    x = w[0]
    assert x is not None
    time_major = bool(opt(op, "timeMajor", False))
    seq = x if time_major else x.transpose(1, 0, 2)  # [T, B, I]
    wf, wc, wo = w[2], w[3], w[4]
    if wf is None or wc is None or wo is None or w[6] is None or w[7] is None \
            or w[8] is None:
        raise bad_input(op, "the forget, cell and output weights are required")
    units = wf.shape[0]
    batch = seq.shape[1]
    cifg = w[1] is None
    proj = w[16]
    out_w = proj.shape[0] if proj is not None else units
    h = _state(w[18], batch, out_w)
    c = _state(w[19], batch, units)
    cell_clip = float(opt(op, "cellClip", 0.0))
    proj_clip = float(opt(op, "projClip", 0.0))
    zero = np.zeros(units, dtype=np.float32)

    def bias(i: int) -> np.ndarray:
        b = w[i]
        return zero if b is None else b

    tanh = op.activation == 4  # TANH, the usual cell activation

    def act(v: np.ndarray) -> np.ndarray:
        return np.tanh(v) if tanh else float_activation(op, v)

    # the input projections of every step at once; per step one recurrent product
    gates = [1, 2, 3, 4] if not cifg else [2, 3, 4]
    w_in = np.concatenate([w[i] for i in gates], axis=0).T
    w_rec = np.concatenate([w[i + 4] for i in gates], axis=0).T
    steps, width = seq.shape[0], len(gates) * units
    x_proj = (seq.reshape(-1, seq.shape[2]) @ w_in).reshape(steps, batch, width)
    lnorm = any(w[i] is not None for i in (20, 21, 22, 23))
    biases = np.concatenate([bias(i + 11) for i in gates])
    if not lnorm:  # without layer norm the biases add before the activations
        x_proj = x_proj + biases
    spans = [slice(units * k, units * (k + 1)) for k in range(len(gates))]
    one = np.float32(1)
    outs = []
    for t in range(steps):
        g = x_proj[t] + h @ w_rec
        parts = [g[:, sp] for sp in spans]
        if cifg:
            gf, gc, go = parts
        else:
            gi, gf, gc, go = parts
            if w[9] is not None:
                gi = gi + w[9] * c
            gi = _sigmoid(_layer_norm(gi, w[20]) + bias(12)) if lnorm else _sigmoid(gi)
        if w[10] is not None:
            gf = gf + w[10] * c
        gf = _sigmoid(_layer_norm(gf, w[21]) + bias(13)) if lnorm else _sigmoid(gf)
        if cifg:
            gi = one - gf
        gc = act(_layer_norm(gc, w[22]) + bias(14) if lnorm else gc)
        c = (gf * c + gi * gc).astype(np.float32)
        if cell_clip > 0:
            c = np.clip(c, -cell_clip, cell_clip)
        if c_round is not None:
            c = c_round(c)
        if w[11] is not None:
            go = go + w[11] * c
        go = _sigmoid(_layer_norm(go, w[23]) + bias(15)) if lnorm else _sigmoid(go)
        hv = (go * act(c)).astype(np.float32)
        if proj is not None:
            hv = hv @ proj.T
            if w[17] is not None:
                hv = hv + w[17]
            if proj_clip > 0:
                hv = np.clip(hv, -proj_clip, proj_clip)
        h = hv.astype(np.float32) if h_round is None else h_round(hv.astype(np.float32))
        outs.append(h)
    y = np.stack(outs, axis=0)
    if not time_major:
        y = y.transpose(1, 0, 2)
    return np.ascontiguousarray(y, dtype=np.float32)


def _lstm_int8(op: Op, args: Args, x: np.ndarray) -> np.ndarray:
    """The fully quantized LSTM (int8 input, output and hidden state, int16 cell state):
    the gates in float32 from dequantized values, the states quantized at every step as
    LiteRT's integer kernel keeps them, so each step reads the hidden state the integer
    kernel reads (to within its 16-bit gate arithmetic). As in LiteRT, the hidden values are
    written with the hidden intermediate's scale and zero point, the output takes those
    bytes, and the next step reads them with the state tensor's parameters."""
    if x.ndim != 3:
        raise bad_input(op, f"the input must be 3-d, got {list(x.shape)}")
    out_t, h_t, c_t = op.outputs[0], op.inputs[18], op.inputs[19]
    if h_t is None or c_t is None or not (is_quantized(h_t) and is_quantized(c_t)):
        raise unsupported(op, "a quantized LSTM needs quantized state tensors")
    floats: Args = list(args)
    floats[0] = dequantize(x, qparams(op, op.inputs[0]))
    for i in (18, 19):
        floats[i] = None if args[i] is None else dequantize(np.asarray(args[i]),
                                                            qparams(op, op.inputs[i]))
    for i in range(1, 24):
        a, t = (args[i] if i < len(args) else None), (op.inputs[i] if i < len(op.inputs)
                                                      else None)
        if i in (18, 19) or a is None or t is None:
            continue
        if np.asarray(a).dtype == np.int32:  # biases: scale s_in * s_w
            floats[i] = (np.asarray(a).astype(np.float64) * float(qparams(op, t).s)).astype(
                np.float32)
        elif is_quantized(t):
            floats[i] = dequantize(np.asarray(a), qparams(op, t))
    hq, cq = qparams(op, h_t), qparams(op, c_t)
    inter = [t for t in op.extra.get("intermediates", []) if t is not None]
    # the hidden values are quantized with the hidden intermediate's parameters (the last
    # intermediate) and read back, at the next step, with the state tensor's parameters
    wq = qparams(op, inter[-1]) if inter and is_quantized(inter[-1]) else \
        qparams(op, out_t)
    raws: list[np.ndarray] = []

    def h_round(h: np.ndarray) -> np.ndarray:
        q = quantize_float(h, wq, np.dtype(np.int8))
        raws.append(q)
        return dequantize(q, hq)

    def c_round(c: np.ndarray) -> np.ndarray:
        return dequantize(quantize_float(c, cq, np.dtype(np.int16)), cq)

    _lstm_float(op, floats, h_round, c_round)
    y = np.stack(raws, axis=0)
    if not bool(opt(op, "timeMajor", False)):
        y = y.transpose(1, 0, 2)
    return np.ascontiguousarray(y).astype(out_dtype(op))


@register("UNIDIRECTIONAL_SEQUENCE_RNN")
def unidirectional_sequence_rnn(op: Op, args: Args) -> list[np.ndarray]:
    """UNIDIRECTIONAL_SEQUENCE_RNN(input, W, R, bias, hidden state) in float32:
    ``h = act(W x + R h + b)`` per time step."""
    x = need(op, args, 0)
    if x.dtype != _F32 or x.ndim != 3:
        raise unsupported(op, f"UNIDIRECTIONAL_SEQUENCE_RNN on {x.dtype} {list(x.shape)} "
                              "input (3-d float32 only)")
    time_major = bool(opt(op, "timeMajor", False))
    seq = x if time_major else x.transpose(1, 0, 2)
    wx, wh, b = _float(op, args, 1), _float(op, args, 2), _float(op, args, 3)
    if wx is None or wh is None or b is None:
        raise bad_input(op, "the input, recurrent weights and bias are required")
    h = _state(_float(op, args, 4), seq.shape[1], wx.shape[0])
    outs = []
    for t in range(seq.shape[0]):
        h = float_activation(op, (seq[t] @ wx.T + h @ wh.T + b).astype(np.float32))
        outs.append(h)
    y = np.stack(outs, axis=0)
    if not time_major:
        y = y.transpose(1, 0, 2)
    return [np.ascontiguousarray(y, dtype=np.float32)]
