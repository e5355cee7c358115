"""ONNX converters of recurrent ops (see :mod:`toolkit.importers.onnx_lower`).

* LSTM: one UNIDIRECTIONAL_SEQUENCE_LSTM per direction (time-major; the reverse direction
  reads and writes its sequence through REVERSE_V2), Y and Y_h; with Y_c read or peepholes,
  unrolled over the sequence as GRU is; clip and other activations run reference-only.
* GRU: unrolled over the (static) sequence, per step FULLY_CONNECTED, LOGISTIC, TANH and
  element-wise ops (the IR has no GRU op), both ``linear_before_reset`` forms, any direction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from toolkit.importers.onnx_lower_base import _lowers, _NoLoweringError, _options
from toolkit.ir import Tensor

if TYPE_CHECKING:
    from toolkit.importers.onnx_lower import _Lowerer


def _directions(lw: _Lowerer) -> list[bool]:
    """One entry per direction of the node: True for the reverse one."""
    d = lw.attr("direction", "forward") or "forward"
    d = d.decode() if isinstance(d, bytes) else d
    if d not in ("forward", "reverse", "bidirectional"):
        raise _NoLoweringError(f"direction {d!r}")
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[d]


def _common_checks(lw: _Lowerer, acts_default: list[str], kind: str) -> None:
    if int(lw.attr("layout", 0)):
        raise _NoLoweringError("layout=1")
    if lw.attr("clip") is not None:
        raise _NoLoweringError("clip")
    acts = lw.attr("activations")
    if acts is not None:
        names = [a.decode() if isinstance(a, bytes) else a for a in acts]
        dirs = len(_directions(lw))
        if names != acts_default * dirs:
            raise _NoLoweringError(f"activations {names}")
    xv = lw.need(0)
    if len(xv.shape) != 3:
        raise _NoLoweringError(f"a {len(xv.shape)}-D input (3-D: sequence, batch, width)")
    if lw.inp(4) is not None:
        sl = lw.const_of(4, "sequence_lens")
        if sl is not None and int(np.min(sl)) != xv.shape[0]:
            raise _NoLoweringError(f"{kind} sequence_lens shorter than the sequence")


def _read(lw: _Lowerer, i: int) -> bool:
    assert lw.op is not None
    outs = lw.op.outputs
    return i < len(outs) and bool(outs[i].name) and (
        bool(outs[i].consumers) or outs[i] in lw.src.graph.outputs)


def _reverse(lw: _Lowerer, x: Tensor) -> Tensor:
    return lw.emit("REVERSE_V2", [x, lw.i32([0], "axis")], x.shape, x.dtype)


def _finish(lw: _Lowerer, ys: list[Tensor], lasts: list[Tensor]) -> None:
    """Y [seq, dirs, batch, hidden] from each direction's [seq, batch, hidden] output, Y_h
    [dirs, batch, hidden] from each direction's final [1, batch, hidden] state."""
    seq, batch, hidden = ys[0].shape
    if _read(lw, 0):
        parts = [lw.emit("RESHAPE", [y, lw.i32([seq, 1, batch, hidden], "shape")],
                         (seq, 1, batch, hidden), newShape=[seq, 1, batch, hidden])
                 for y in ys]
        y = parts[0] if len(parts) == 1 else lw.emit(
            "CONCATENATION", parts, (seq, len(parts), batch, hidden), axis=1,
            fusedActivationFunction=0)
        lw.set(0, y)
    if _read(lw, 1):
        h = lasts[0] if len(lasts) == 1 else lw.emit(
            "CONCATENATION", lasts, (len(lasts), batch, hidden), axis=0,
            fusedActivationFunction=0)
        lw.set(1, h)


def _computed(lw: _Lowerer, i: int) -> bool:
    v = lw.inp(i)
    return v is not None and v.const is None


def _state_of(lw: _Lowerer, i: int, d: int, h_shape: tuple[int, int]) -> Tensor:
    """Direction ``d`` of initial state input ``i`` ([dirs, batch, hidden]) as a
    [batch, hidden] tensor (zeros when absent)."""
    v = lw.inp(i)
    if v is None:
        return lw.const(np.zeros(h_shape, np.float32), np.float32, "state")
    if v.const is not None:
        return lw.const(np.broadcast_to(np.asarray(v.const, np.float32)[d], h_shape).copy(),
                        np.float32, "state")
    t = lw.tensor_of(v)
    one = _time_slice(lw, t, d)
    return lw.emit("RESHAPE", [one, lw.i32(list(h_shape), "shape")], h_shape,
                   newShape=list(h_shape))


def _time_slice(lw: _Lowerer, y: Tensor, t: int) -> Tensor:
    _, batch, hidden = y.shape
    return lw.emit("STRIDED_SLICE", [y, lw.i32([t, 0, 0], "begin"),
                                     lw.i32([t + 1, batch, hidden], "end"),
                                     lw.i32([1, 1, 1], "strides")], (1, batch, hidden),
                   beginMask=0, endMask=0, ellipsisMask=0, newAxisMask=0, shrinkAxisMask=0,
                   offset=False)


@_lowers("LSTM")
def _lstm(lw: _Lowerer) -> None:
    assert lw.op is not None
    _common_checks(lw, ["Sigmoid", "Tanh", "Tanh"], "LSTM")
    if int(lw.attr("input_forget", 0)):
        raise _NoLoweringError("input_forget")
    if _read(lw, 2) or lw.inp(7) is not None or _computed(lw, 5) or _computed(lw, 6):
        # the cell state, peepholes or states computed at run time: step by step
        _lstm_unrolled(lw)
        return
    xv = lw.need(0)
    w, r = lw.const_of(1, "W"), lw.const_of(2, "R")
    assert w is not None and r is not None
    b = lw.const_of(3, "B")
    h0, c0 = lw.const_of(5, "initial_h"), lw.const_of(6, "initial_c")
    hidden = int(r.shape[-1])
    seq, batch, _ = xv.shape
    x = lw.tensor_of(xv)
    base = lw.op.name

    def c(a: np.ndarray, s: str) -> Tensor:
        return lw.const(np.ascontiguousarray(a, np.float32), np.float32, s)

    def state(v: np.ndarray | None, d: int, s: str) -> Tensor:
        if v is None:
            return lw.graph.add_tensor(lw.name(f"{base}/{s}"), (batch, hidden), np.float32,
                                       is_variable=True)
        arr = np.broadcast_to(np.asarray(v, np.float32).reshape(-1, batch, hidden)[d],
                              (batch, hidden))
        return lw.graph.add_tensor(lw.name(f"{base}/{s}"), (batch, hidden), np.float32,
                                   data=np.ascontiguousarray(arr), is_variable=True)

    ys, lasts = [], []
    for d, reverse in enumerate(_directions(lw)):
        wi, wo, wf, wc = np.split(w[d].astype(np.float32), 4)
        ri, ro, rf, rc = np.split(r[d].astype(np.float32), 4)
        bsum = (b[d].astype(np.float32)[:4 * hidden] + b[d].astype(np.float32)[4 * hidden:]
                if b is not None else np.zeros(4 * hidden, np.float32))
        bi, bo, bf, bc = np.split(bsum, 4)
        xd = _reverse(lw, x) if reverse else x
        ins: list[Tensor | None] = [
            xd, c(wi, "w_i"), c(wf, "w_f"), c(wc, "w_c"), c(wo, "w_o"), c(ri, "r_i"),
            c(rf, "r_f"), c(rc, "r_c"), c(ro, "r_o"), None, None, None, c(bi, "b_i"),
            c(bf, "b_f"), c(bc, "b_c"), c(bo, "b_o"), None, None, state(h0, d, "h"),
            state(c0, d, "c"), None, None, None, None]
        y = lw.emit("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, (seq, batch, hidden),
                    fusedActivationFunction=4, cellClip=0.0, projClip=0.0, timeMajor=True,
                    asymmetricQuantizeInputs=False, diagonalRecurrentTensors=False)
        lasts.append(_time_slice(lw, y, seq - 1))
        ys.append(_reverse(lw, y) if reverse else y)
    _finish(lw, ys, lasts)


def _lstm_unrolled(lw: _Lowerer) -> None:
    """LSTM unrolled over its static sequence (FULLY_CONNECTED, LOGISTIC, TANH, element-wise
    ops per step), for what the sequence op does not give: Y_c, peepholes."""
    assert lw.op is not None
    xv = lw.need(0)
    w, r = lw.const_of(1, "W"), lw.const_of(2, "R")
    assert w is not None and r is not None
    b, p = lw.const_of(3, "B"), lw.const_of(7, "P")
    hidden = int(r.shape[-1])
    seq, batch, _ = xv.shape
    if seq > 256:
        raise _NoLoweringError(f"a sequence of {seq} steps (unrolled up to 256)")
    h_shape = (batch, hidden)
    x = lw.tensor_of(xv)
    flat = lw.emit("RESHAPE", [x, lw.i32([seq * batch, x.shape[2]], "shape")],
                   (seq * batch, x.shape[2]), newShape=[seq * batch, x.shape[2]])

    def fc(v: Tensor, weights: np.ndarray, bias: np.ndarray | None) -> Tensor:
        ins = [v, lw.const(np.ascontiguousarray(weights, np.float32), np.float32, "weights"),
               lw.const(bias, np.float32, "bias") if bias is not None else None]
        return lw.emit("FULLY_CONNECTED", ins, (v.shape[0], weights.shape[0]),
                       fusedActivationFunction=0, keepNumDims=False)

    def op2(kind: str, a: Tensor, c: Tensor) -> Tensor:
        return lw.emit(kind, [a, c], h_shape, fusedActivationFunction=0)

    def split(v: Tensor, n: int, axis: int) -> list[Tensor]:
        shape = list(v.shape)
        shape[axis] //= n
        outs = [lw.graph.add_tensor(lw.name(f"{v.name}/part"), shape, np.float32)
                for _ in range(n)]
        lw.graph.add_op("SPLIT", [lw.i32(np.asarray(axis), "axis"), v], outs,
                        _options("SPLIT", numSplits=n), origins=lw.origins)
        return outs

    ys, lasts, cells = [], [], []
    for d, reverse in enumerate(_directions(lw)):
        bd = b[d].astype(np.float32) if b is not None else np.zeros(8 * hidden, np.float32)
        xw = fc(flat, w[d].astype(np.float32), bd[:4 * hidden] + bd[4 * hidden:])
        steps = split(xw, seq, 0) if seq > 1 else [xw]
        pi, po, pf = ((lw.const(np.asarray(p[d][k * hidden:(k + 1) * hidden], np.float32),
                                np.float32, "peephole") for k in range(3)) if p is not None
                      else (None, None, None))
        h, cell = _state_of(lw, 5, d, h_shape), _state_of(lw, 6, d, h_shape)
        hs: dict[int, Tensor] = {}
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            g = lw.emit("ADD", [steps[t], fc(h, r[d].astype(np.float32), None)],
                        (batch, 4 * hidden), fusedActivationFunction=0)
            gi, go, gf, gc = split(g, 4, 1)
            if pi is not None and pf is not None:
                gi = op2("ADD", gi, op2("MUL", pi, cell))
                gf = op2("ADD", gf, op2("MUL", pf, cell))
            i = lw.emit("LOGISTIC", [gi], h_shape)
            f = lw.emit("LOGISTIC", [gf], h_shape)
            cell = op2("ADD", op2("MUL", f, cell), op2("MUL", i, lw.emit("TANH", [gc],
                                                                           h_shape)))
            if po is not None:
                go = op2("ADD", go, op2("MUL", po, cell))
            h = op2("MUL", lw.emit("LOGISTIC", [go], h_shape), lw.emit("TANH", [cell],
                                                                        h_shape))
            hs[t] = lw.emit("RESHAPE", [h, lw.i32([1, batch, hidden], "shape")],
                            (1, batch, hidden), newShape=[1, batch, hidden])
        ys.append(lw.emit("CONCATENATION", [hs[t] for t in range(seq)], (seq, batch, hidden),
                          axis=0, fusedActivationFunction=0) if seq > 1 else hs[0])
        lasts.append(hs[0] if reverse else hs[seq - 1])
        cells.append(lw.emit("RESHAPE", [cell, lw.i32([1, batch, hidden], "shape")],
                             (1, batch, hidden), newShape=[1, batch, hidden]))
    _finish(lw, ys, lasts)
    if _read(lw, 2):
        lw.set(2, cells[0] if len(cells) == 1 else lw.emit(
            "CONCATENATION", cells, (len(cells), batch, hidden), axis=0,
            fusedActivationFunction=0))


@_lowers("GRU")
def _gru(lw: _Lowerer) -> None:
    assert lw.op is not None
    _common_checks(lw, ["Sigmoid", "Tanh"], "GRU")
    xv = lw.need(0)
    w, r = lw.const_of(1, "W"), lw.const_of(2, "R")
    assert w is not None and r is not None
    b = lw.const_of(3, "B")
    lbr = int(lw.attr("linear_before_reset", 0))
    hidden = int(r.shape[-1])
    seq, batch, _ = xv.shape
    if seq > 256:
        raise _NoLoweringError(f"a sequence of {seq} steps (unrolled up to 256)")
    x = lw.tensor_of(xv)
    flat = lw.emit("RESHAPE", [x, lw.i32([seq * batch, x.shape[2]], "shape")],
                   (seq * batch, x.shape[2]), newShape=[seq * batch, x.shape[2]])
    h_shape = (batch, hidden)

    def fc(v: Tensor, weights: np.ndarray, bias: np.ndarray | None) -> Tensor:
        ins = [v, lw.const(np.ascontiguousarray(weights, np.float32), np.float32, "weights"),
               lw.const(bias, np.float32, "bias") if bias is not None else None]
        return lw.emit("FULLY_CONNECTED", ins, (v.shape[0], weights.shape[0]),
                       fusedActivationFunction=0, keepNumDims=False)

    def binary(kind: str, a: Tensor, c: Tensor) -> Tensor:
        return lw.emit(kind, [a, c], h_shape, fusedActivationFunction=0)

    ys, lasts = [], []
    for d, reverse in enumerate(_directions(lw)):
        wd, rd = w[d].astype(np.float32), r[d].astype(np.float32)
        bd = b[d].astype(np.float32) if b is not None else np.zeros(6 * hidden, np.float32)
        wb, rb = bd[:3 * hidden], bd[3 * hidden:]
        xbias = wb + np.concatenate([rb[:2 * hidden], np.zeros(hidden, np.float32) if lbr
                                     else rb[2 * hidden:]])
        xw = fc(flat, wd, xbias)  # every step's input projection at once: [seq*batch, 3H]
        steps = lw.graph.add_tensor(lw.name(f"{xw.name}/steps"), (batch, 3 * hidden),
                                    np.float32)
        outs = [steps] + [lw.graph.add_tensor(lw.name(f"{xw.name}/steps"),
                                              (batch, 3 * hidden), np.float32)
                          for _ in range(seq - 1)]
        lw.graph.add_op("SPLIT", [lw.i32(np.asarray(0), "axis"), xw], outs,
                        _options("SPLIT", numSplits=seq), origins=lw.origins)
        h = _state_of(lw, 5, d, h_shape)
        order = range(seq - 1, -1, -1) if reverse else range(seq)
        hs: dict[int, Tensor] = {}
        for t in order:
            gates = [lw.graph.add_tensor(lw.name(f"{outs[t].name}/{g}"), h_shape, np.float32)
                     for g in ("z", "r", "h")]
            lw.graph.add_op("SPLIT", [lw.i32(np.asarray(1), "axis"), outs[t]], gates,
                            _options("SPLIT", numSplits=3), origins=lw.origins)
            xz, xr, xh = gates
            hzr = fc(h, rd[:2 * hidden], None)
            hz = lw.graph.add_tensor(lw.name(f"{hzr.name}/z"), h_shape, np.float32)
            hr = lw.graph.add_tensor(lw.name(f"{hzr.name}/r"), h_shape, np.float32)
            lw.graph.add_op("SPLIT", [lw.i32(np.asarray(1), "axis"), hzr], [hz, hr],
                            _options("SPLIT", numSplits=2), origins=lw.origins)
            z = lw.emit("LOGISTIC", [binary("ADD", xz, hz)], h_shape)
            rg = lw.emit("LOGISTIC", [binary("ADD", xr, hr)], h_shape)
            if lbr:
                hh = fc(h, rd[2 * hidden:], rb[2 * hidden:])
                n = lw.emit("TANH", [binary("ADD", xh, binary("MUL", rg, hh))], h_shape)
            else:
                hh = fc(binary("MUL", rg, h), rd[2 * hidden:], None)
                n = lw.emit("TANH", [binary("ADD", xh, hh)], h_shape)
            h = binary("ADD", n, binary("MUL", z, binary("SUB", h, n)))  # (1-z) n + z h
            hs[t] = lw.emit("RESHAPE", [h, lw.i32([1, batch, hidden], "shape")],
                            (1, batch, hidden), newShape=[1, batch, hidden])
        y = lw.emit("CONCATENATION", [hs[t] for t in range(seq)], (seq, batch, hidden),
                    axis=0, fusedActivationFunction=0) if seq > 1 else hs[0]
        ys.append(y)
        lasts.append(hs[0] if reverse else hs[seq - 1])
    _finish(lw, ys, lasts)
