"""Helpers shared by the tests: sample model paths and a LiteRT runner."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
SAMPLE_TFLITE = sorted(SAMPLES.glob("*.tflite"))
TF_TFLITE = sorted((SAMPLES / "tf").glob("*.tflite"))
ALL_TFLITE = SAMPLE_TFLITE + TF_TFLITE

#: the zoo's files with an LSTM whose cell state is finer than LiteRT's tanh takes (2**-16 in
#: stacked_bilstm_int8): the reference runtime computes it as LiteRT does and warns each run
#: (tests/test_integer_lstm.py checks the values)
FINE_LSTM_CELL = {"stacked_bilstm_int8"}


def expect_run_warnings(path: Path) -> contextlib.AbstractContextManager[Any]:
    """``pytest.warns`` of the warning running ``path`` on the reference runtime gives (a
    cell state finer than LiteRT's tanh takes), else a context that expects none."""
    if path.stem in FINE_LSTM_CELL:
        return pytest.warns(UserWarning, match=r"cell state scale 2\*\*-16 is finer than")
    return contextlib.nullcontext()


def random_inputs(details: list[dict], seed: int = 0) -> list[np.ndarray]:
    """Random inputs for LiteRT input details: floats in [-1, 1), ints over int8's range."""
    rng = np.random.default_rng(seed)
    out = []
    for d in details:
        if np.issubdtype(d["dtype"], np.floating):
            out.append(rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]))
        else:
            out.append(rng.integers(-128, 128, d["shape"]).astype(d["dtype"]))
    return out


def litert_run(model: bytes | Path, inputs: list[np.ndarray] | dict | None = None,
               seed: int = 0, resolver: str = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"
               ) -> dict[str, np.ndarray]:
    """Run a .tflite (path or bytes) in LiteRT, one thread; return outputs by tensor name.

    ``inputs`` may be a list (input order) or a dict by input tensor name; None makes random
    inputs with ``seed``. ``resolver`` names LiteRT's op resolver: the default runs LiteRT's
    builtin kernels without the XNNPACK delegate (whose reordered float sums differ by a few
    ulps), ``"BUILTIN_REF"`` its reference kernels, ``"AUTO"`` what applications get.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = getattr(OpResolverType, resolver)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(model, (bytes, bytearray)):
            it = Interpreter(model_content=bytes(model), num_threads=1,
                             experimental_op_resolver_type=kind)
        else:
            it = Interpreter(model_path=str(model), num_threads=1,
                             experimental_op_resolver_type=kind)
    it.allocate_tensors()
    det = it.get_input_details()
    if inputs is None:
        inputs = random_inputs(det, seed)
    if isinstance(inputs, dict):
        inputs = [inputs[d["name"]] for d in det]
    for d, x in zip(det, inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


def int8_lstm_model(seed: int, *, batch: int = 2, steps: int = 5, n_in: int = 7, cells: int = 6,
                    time_major: bool = False, cifg: bool = False, cell_log2: int = -11,
                    clip: float = 0.0, peephole: bool = False, projection: int = 0,
                    proj_clip: float = 0.0, layer_norm: bool = False) -> Any:
    """A fully quantized UNIDIRECTIONAL_SEQUENCE_LSTM as TensorFlow's converter writes one
    (TFLite's 24 inputs; int8 input, weights and hidden state; int32 biases; an int16 cell
    state of scale ``2**cell_log2``; the five intermediates, the last the hidden values'
    scale and zero point), random weights from ``seed``; its output is the model's. With
    ``peephole`` int16 peephole weights; with ``projection`` an int8 projection to that many
    outputs (and an int32 bias); with ``layer_norm`` int16 layer-norm coefficients and the
    gates' intermediates quantized."""
    from toolkit.builder import OPTIONS_CLASS, ModelBuilder
    from toolkit.ir import Quantization as Q

    rng = np.random.default_rng(seed)
    mb = ModelBuilder("lstm8")
    xshape = [steps, batch, n_in] if time_major else [batch, steps, n_in]
    xs, hs, hzp = 0.02, 0.006, -4
    out_w = projection or cells
    ins: list[Any] = [mb.input("x", xshape, np.int8, quant=Q.make(xs, 3))]
    for kind, k in (("w", n_in), ("r", out_w)):
        for g in "ifco":
            w = rng.integers(-127, 128, (cells, k)).astype(np.int8)
            q = Q.make(float(rng.uniform(0.004, 0.012)), 0)
            ins.append(None if cifg and g == "i" else mb.const(f"{kind}_{g}", w, quant=q))
    for g in "ifo":  # peephole
        ins.append(mb.const(f"p_{g}", rng.integers(-20000, 20000, cells).astype(np.int16),
                            quant=Q.make(float(rng.uniform(1e-5, 3e-5)), 0))
                   if peephole and not (cifg and g == "i") else None)
    for j, g in enumerate("ifco"):
        w_t = ins[1 + j]
        ins.append(None if w_t is None else mb.const(
            f"b_{g}", rng.integers(-3000, 3000, cells).astype(np.int32),
            quant=Q.make(xs * float(w_t.quant.scale[0]), 0)))
    if projection:
        ps = float(rng.uniform(0.004, 0.012))
        ins += [mb.const("proj", rng.integers(-127, 128, (projection, cells)).astype(np.int8),
                         quant=Q.make(ps, 0)),
                mb.const("proj_b", rng.integers(-2000, 2000, projection).astype(np.int32),
                         quant=Q.make(ps * hs, 0))]
    else:
        ins += [None, None]
    ins.append(mb.graph.add_tensor("h_state", [batch, out_w], np.int8, quant=Q.make(0.007, -2),
                                   is_variable=True))
    ins.append(mb.graph.add_tensor("c_state", [batch, cells], np.int16,
                                   quant=Q.make(2.0 ** cell_log2, 0), is_variable=True))
    for g in "ifco":  # layer norm
        ins.append(mb.const(f"ln_{g}", rng.integers(8000, 32000, cells).astype(np.int16),
                            quant=Q.make(float(rng.uniform(2e-5, 4e-5)), 0))
                   if layer_norm and not (cifg and g == "i") else None)
    opts = OPTIONS_CLASS["UnidirectionalSequenceLSTMOptions"]()
    opts.fusedActivationFunction, opts.cellClip, opts.timeMajor = 4, clip, time_major
    opts.projClip = proj_clip
    y = mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [*xshape[:2], out_w], name="lstm",
              dtype=np.int8, quant=Q.make(0.007, -2) if projection else Q.make(hs, hzp),
              options=opts)
    inter = [mb.graph.add_tensor(f"inter{k}", [0], np.int16,
                                 quant=Q.make(float(rng.uniform(2e-4, 6e-4)), 0))
             if layer_norm else mb.graph.add_tensor(f"inter{k}", [0], np.float32)
             for k in range(4)]
    inter.append(mb.graph.add_tensor("hidden", [0], np.int8, quant=Q.make(hs, hzp)))
    mb.graph.ops[-1].extra["intermediates"] = inter
    mb.output(y)
    return mb.build()


def _host_has(flag: str) -> bool:
    try:
        return flag in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


#: The native builds a kernel test runs: the host's instructions (-march=native), AVX2 without
#: AVX-512 (where the host runs AVX2) and the portable kernels.
ISAS = ["host-isa", *(["avx2"] if _host_has("avx2") and _host_has("fma") else []), "portable"]


def build_for_isa(art: Any, isa: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the native artifact ``art`` for one of :data:`ISAS` (at -O1, to keep it quick)."""
    if isa == "avx2":
        import toolkit.generator.build as build_mod

        plain = build_mod.compile_flags
        monkeypatch.setattr(build_mod, "compile_flags",
                            lambda opt, native: [*plain(opt, False), "-mavx2", "-mfma"])
    art.build(opt="-O1", native=isa == "host-isa")


def reference_equals_litert(model: Any, path: Path, input_sets: list[dict[str, np.ndarray]]
                            ) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """``(inputs, outputs)`` of the reference runtime for each input set, each output checked
    equal to LiteRT's bit for bit (``path``: the model written as .tflite) and not saturated
    (more than 8 distinct values)."""
    from toolkit.runtime.interpreter import run_model

    out = []
    for inputs in input_sets:
        ref = run_model(model, inputs).outputs
        lite = litert_run(path, inputs)
        assert ref.keys() == lite.keys()
        for k, r in ref.items():
            np.testing.assert_array_equal(lite[k], r, err_msg=k)
            assert len(np.unique(r)) > 8, k  # not saturated
        out.append((inputs, ref))
    return out
