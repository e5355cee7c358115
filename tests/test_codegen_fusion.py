"""The native backend's folds (toolkit.generator.fusion): spatial zero PADs read by a
convolution, activations after an ADD / SUB / MUL / convolution.

Small float32 and int8 models written by the project's builder (each branch a fold, or a case
that must not fold) and the production models: the folds are the ones expected, the outputs
are the reference runtime's (float32 within 1e-5 of the largest value, int8 bit for bit; the
reference itself checked against LiteRT), the same for 1 and 2 threads, and the native trace
has one event per op in order, the absorbed ones marked with the step that computed them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import litert_run, reference_equals_litert

import toolkit as tk
import toolkit.generator.ops as ops_mod
from toolkit.builder import ModelBuilder
from toolkit.formats.flatbuffer_write import write_model
from toolkit.generator import Artifact, codegen
from toolkit.generator.analysis import analyse
from toolkit.ir import Model, Tensor
from toolkit.ir import Quantization as Q
from toolkit.runtime.native import run_native

PROD = Path(__file__).resolve().parent.parent / "sample_models" / "production"
OPT = "-O1"


def _pad(mb: ModelBuilder, x: Tensor, pads: list[list[int]], name: str,
         value: Tensor | None = None) -> Tensor:
    shape = [d + a + b for d, (a, b) in zip(x.shape, pads, strict=True)]
    p = mb.const(f"{name}_p", np.asarray(pads, np.int32))
    return mb.op("PADV2" if value is not None else "PAD",
                 [x, p] + ([value] if value is not None else []), shape, name=name)


def _float_model() -> Model:
    rng = np.random.default_rng(3)
    mb = ModelBuilder("fuse_f32")
    x = mb.input("x", [1, 13, 11, 8])
    y = mb.input("y", [1, 13, 11, 8])
    r = mb.input("r", [1, 13, 11, 16])

    def w(name: str, *shape: int) -> Tensor:
        return mb.const(name, rng.standard_normal(shape).astype(np.float32))

    outs = [
        # folds: PAD -> depthwise (VALID, 1), -> conv (VALID, stride 2, asymmetric),
        # -> conv (SAME, pads of different sizes), -> depthwise stride 2 with a multiplier
        mb.depthwise_conv2d(_pad(mb, x, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_dw"),
                            w("w_dw", 1, 3, 3, 8), w("b_dw", 8), padding="VALID",
                            name="dw_valid"),
        mb.conv2d(_pad(mb, x, [[0, 0], [0, 1], [0, 1], [0, 0]], "pad_conv2"),
                  w("w_c2", 6, 3, 3, 8), w("b_c2", 6), stride=2, padding="VALID",
                  name="conv_s2"),
        mb.conv2d(_pad(mb, x, [[0, 0], [2, 1], [1, 3], [0, 0]], "pad_same"),
                  w("w_cs", 20, 3, 3, 8), w("b_cs", 20), padding="SAME", name="conv_same"),
        mb.depthwise_conv2d(_pad(mb, y, [[0, 0], [1, 2], [2, 1], [0, 0]], "pad_dw2"),
                            w("w_dm", 1, 3, 3, 16), w("b_dm", 16), stride=2, padding="VALID",
                            depth_multiplier=2, name="dw_s2"),
        # folds: activations into their producers
        mb.unary("RELU", mb.add(x, y, name="add_r"), name="relu_add"),
        mb.unary("RELU6", mb.sub(x, y, name="sub_r"), name="relu6_sub"),
        mb.unary("RELU_N1_TO_1", mb.mul(x, y, name="mul_r"), name="relu1_mul"),
        mb.unary("RELU", mb.conv2d(x, w("w_cr", 24, 1, 1, 8), w("b_cr", 24), name="conv_r"),
                 name="relu_conv"),
        # a PAD and an activation in one convolution
        mb.unary("RELU6", mb.depthwise_conv2d(
            _pad(mb, y, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_both"), w("w_db", 1, 3, 3, 8),
            w("b_db", 8), padding="VALID", name="dw_both"), name="relu_dw"),
        # the channel PAD of a residual
        mb.add(_pad(mb, x, [[0, 0], [0, 0], [0, 0], [0, 8]], "pad_ch"), r, name="add_ch"),
        # PRELU on the rows a convolution has just written, or after an ADD
        mb.op("PRELU", [mb.conv2d(x, w("w_cp", 24, 3, 3, 8), w("b_cp", 24), name="conv_p"),
                        w("alpha_c", 1, 1, 24)], [1, 13, 11, 24], name="prelu_conv"),
        mb.op("PRELU", [mb.depthwise_conv2d(y, w("w_dp", 1, 3, 3, 8), w("b_dp", 8),
                                            stride=2, name="dw_p"),
                        w("alpha_d", 8)], [1, 7, 6, 8], name="prelu_dw"),
        mb.op("PRELU", [mb.add(x, y, name="add_p"), w("alpha_a", 1, 11, 8)], [1, 13, 11, 8],
              name="prelu_add"),
        # residual ADDs on the rows a convolution has just written: of a tensor, of a
        # channel PAD's input (then a RELU), with the ADD's own activation
        mb.add(mb.conv2d(x, w("w_res", 8, 1, 1, 8), w("b_res", 8), name="conv_res"), y,
               name="add_res"),
        mb.unary("RELU", mb.add(
            mb.conv2d(x, w("w_rp", 16, 3, 3, 8), w("b_rp", 16), name="conv_rp"),
            _pad(mb, y, [[0, 0], [0, 0], [0, 0], [4, 4]], "pad_res"), name="add_rp"),
            name="relu_res"),
        mb.add(x, mb.depthwise_conv2d(y, w("w_dr", 1, 3, 3, 8), w("b_dr", 8), name="dw_res"),
               activation="RELU6", name="add_dw"),
    ]
    # must not fold: a PAD read twice, a PAD of another value, a PAD that is an output, an
    # activation's input read twice or an output, an ADD with its own activation
    twice = _pad(mb, x, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_twice")
    outs += [mb.depthwise_conv2d(twice, w("w_t1", 1, 3, 3, 8), w("b_t1", 8), padding="VALID",
                                 name="dw_t1"),
             mb.depthwise_conv2d(twice, w("w_t2", 1, 3, 3, 8), w("b_t2", 8), padding="VALID",
                                 name="dw_t2")]
    ones = _pad(mb, x, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_value",
                value=mb.const("one", np.asarray(1.5, np.float32)))
    outs.append(mb.depthwise_conv2d(ones, w("w_v", 1, 3, 3, 8), w("b_v", 8), padding="VALID",
                                    name="dw_value"))
    shown = _pad(mb, y, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_out")
    outs += [shown, mb.depthwise_conv2d(shown, w("w_o", 1, 3, 3, 8), w("b_o", 8), padding="VALID",
                                        name="dw_out")]
    both = mb.add(x, y, name="add_twice")
    outs += [mb.unary("RELU", both, name="relu_twice"), mb.mul(both, x, name="mul_twice")]
    add_out = mb.sub(y, x, name="sub_out")
    outs += [add_out, mb.unary("RELU", add_out, name="relu_out")]
    outs.append(mb.unary("RELU", mb.add(x, y, activation="RELU6", name="add_act"),
                         name="relu_act"))
    # PADs computed by the pad kernel: every axis, asymmetric; the last axis before others
    outs += [_pad(mb, x, [[1, 0], [0, 2], [3, 1], [2, 1]], "pad_all"),
             _pad(mb, r, [[0, 0], [2, 0], [0, 0], [1, 3]], "pad_hc")]
    late = mb.conv2d(x, w("w_late", 8, 1, 1, 8), w("b_late", 8), name="conv_late")
    outs.append(mb.add(late, mb.mul(x, y, name="mul_late"), name="add_late"))  # made after
    read2 = mb.conv2d(x, w("w_p2", 8, 1, 1, 8), w("b_p2", 8), name="conv_twice")
    outs += [mb.op("PRELU", [read2, w("alpha_2", 8)], [1, 13, 11, 8], name="prelu_twice"),
             mb.add(read2, y, name="add_read2")]
    mb.output(*outs)
    return mb.build()


FLOAT_FOLDS = {"pad_dw": "dw_valid", "pad_conv2": "conv_s2", "pad_same": "conv_same",
               "pad_dw2": "dw_s2", "relu_add": "add_r", "relu6_sub": "sub_r",
               "relu1_mul": "mul_r", "relu_conv": "conv_r", "pad_both": "dw_both",
               "relu_dw": "dw_both", "prelu_conv": "conv_p", "prelu_dw": "dw_p",
               "prelu_add": "add_p", "add_res": "conv_res", "add_rp": "conv_rp",
               "pad_res": "conv_rp", "relu_res": "conv_rp", "add_dw": "dw_res"}


def _int8_model() -> Model:
    rng = np.random.default_rng(5)
    i8 = np.int8
    mb = ModelBuilder("fuse_q8")
    qx = Q.make(0.05, -3)
    x = mb.input("x", [1, 14, 10, 16], i8, quant=qx)
    y = mb.input("y", [1, 14, 10, 16], i8, quant=Q.make(0.04, 6))

    def w(name: str, *shape: int) -> Tensor:
        return mb.const(name, rng.integers(-127, 128, shape).astype(i8), i8,
                        quant=Q.make(0.02, 0))

    def b(name: str, n: int) -> Tensor:
        return mb.const(name, rng.integers(-300, 300, n).astype(np.int32), np.int32,
                        quant=Q.make(0.05 * 0.02, 0))

    def relu(t: Tensor, kind: str, name: str, q: Q | None = None) -> Tensor:
        return mb.unary(kind, t, name=name, quant=q or t.quant)

    outs = [
        mb.depthwise_conv2d(_pad(mb, x, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_dw"),
                            w("w_dw", 1, 3, 3, 16), b("b_dw", 16), padding="VALID",
                            name="dw_valid", quant=Q.make(0.08, 2)),
        mb.conv2d(_pad(mb, x, [[0, 0], [0, 1], [1, 0], [0, 0]], "pad_conv2"),
                  w("w_c2", 8, 3, 3, 16), b("b_c2", 8), stride=2, padding="VALID",
                  name="conv_s2", quant=Q.make(0.5, -5)),
        mb.conv2d(_pad(mb, x, [[0, 0], [2, 1], [1, 2], [0, 0]], "pad_same"),
                  w("w_cs", 20, 3, 3, 16), b("b_cs", 20), padding="SAME", name="conv_same",
                  quant=Q.make(0.6, 1)),
        relu(mb.add(x, y, name="add_r", quant=Q.make(0.07, -20)), "RELU", "relu_add"),
        relu(mb.sub(x, y, name="sub_r", quant=Q.make(0.01, 4)), "RELU_N1_TO_1", "relu1_sub"),
        relu(mb.mul(x, y, name="mul_r", quant=Q.make(0.03, 1)), "RELU6", "relu6_mul"),
        relu(mb.conv2d(x, w("w_cr", 24, 1, 1, 16), b("b_cr", 24), name="conv_r",
                       quant=Q.make(0.3, -10)), "RELU6", "relu_conv"),
        relu(mb.depthwise_conv2d(_pad(mb, y, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_both"),
                                 w("w_db", 1, 3, 3, 16), b("b_db", 16), padding="VALID",
                                 name="dw_both", quant=Q.make(0.06, -7)), "RELU", "relu_dw"),
        mb.add(_pad(mb, x, [[0, 0], [0, 0], [0, 0], [0, 8]], "pad_ch"),
               mb.input("r", [1, 14, 10, 24], i8, quant=Q.make(0.05, 9)), name="add_ch",
               quant=Q.make(0.09, -1)),
        # must not fold: a RELU that requantizes, a PAD whose value is not the zero point
        relu(mb.add(x, y, name="add_rq", quant=Q.make(0.07, -20)), "RELU", "relu_rq",
             Q.make(0.05, -128)),
        mb.depthwise_conv2d(_pad(mb, x, [[0, 0], [1, 1], [1, 1], [0, 0]], "pad_value",
                                 value=mb.const("v", np.asarray(40, i8), i8, quant=qx)),
                            w("w_v", 1, 3, 3, 16), b("b_v", 16), padding="VALID",
                            name="dw_value", quant=Q.make(0.08, 2)),
    ]
    mb.output(*outs)
    return mb.build()


INT8_FOLDS = {"pad_dw": "dw_valid", "pad_conv2": "conv_s2", "pad_same": "conv_same",
              "relu_add": "add_r", "relu1_sub": "sub_r", "relu6_mul": "mul_r",
              "relu_conv": "conv_r", "pad_both": "dw_both", "relu_dw": "dw_both"}


def _folds(art: Artifact) -> dict[str, str]:
    """Absorbed op name -> the name of the op whose step computes it, from the manifest."""
    steps = art.manifest["steps"]
    by_key = {s["key"]: s["args"]["op_name"] for s in steps}
    return {s["args"]["op_name"]: by_key[s["args"]["fused_into"]] for s in steps
            if "fused_into" in s["args"]}


def _check_trace(art: Artifact, trace: tk.EventTracer, runs: int) -> None:
    """One event per op and run, in the ops' order; an absorbed op's event empty-handed
    (``fused_into`` its host's key, listed in the host's ``absorbed``)."""
    df = trace.to_frame()
    model = art.model
    assert isinstance(model, Model)
    n = len(model.graph.ops)
    assert len(df) == runs * n
    assert df["key"].tolist() == list(range(n)) * runs
    steps = art.manifest["steps"]
    for s in steps:
        host = s["args"].get("fused_into")
        if host is not None:
            assert str(s["key"]) in steps[host]["args"]["absorbed"].split(",")
            assert steps[host]["args"]["op_type"] != s["args"]["op_type"]
    att = tk.trace_join(trace, art)
    att.check()
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0


def _run_both_threads(art: Artifact, x: dict[str, np.ndarray]
                      ) -> tuple[dict[str, np.ndarray], tk.EventTracer]:
    got, trace = run_native(art, x, trace=True, repeat=2)
    got2, _ = run_native(art, x, threads=2)
    for k, v in got.items():
        np.testing.assert_array_equal(got2[k], v, err_msg=f"{k}: 2 threads")
    assert trace is not None
    return got, trace


def test_float_folds_match_the_reference_and_litert(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 1)  # every op's rows split across threads
    model = _float_model()
    path = tmp_path / "fuse_f32.tflite"
    path.write_bytes(bytes(write_model(model, "tflite")))
    rng = np.random.default_rng(11)
    x = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in model.graph.inputs}
    want = tk.run(model, x).outputs
    lite = litert_run(path, x)
    art = codegen(model, tmp_path / "art", name="fuse_f32")
    assert _folds(art) == FLOAT_FOLDS
    art.build(opt=OPT)
    got, trace = _run_both_threads(art, x)
    for k, w in want.items():
        tol = 1e-5 * max(float(np.abs(w).max()), 1.0)
        assert float(np.abs(lite[k] - w).max()) <= tol, k
        assert got[k].shape == w.shape and float(np.abs(got[k] - w).max()) <= tol, k
    _check_trace(art, trace, 2)
    # the arena no longer holds the folded tensors
    folded = {op.outputs[0] for op in model.graph.ops
              if op.name in set(FLOAT_FOLDS.values()) | {n for n in FLOAT_FOLDS
                                                         if n.startswith("pad")}}
    a = analyse(model)
    assert not folded & set(a.temporaries)
    assert a.arena_bytes <= analyse(model, fuse=False).arena_bytes


def test_int8_folds_bit_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_mod, "PARALLEL_WORK", 1)
    model = _int8_model()
    path = tmp_path / "fuse_q8.tflite"
    path.write_bytes(bytes(write_model(model, "tflite")))
    rng = np.random.default_rng(13)
    inputs = [{t.name: rng.integers(-128, 128, t.shape).astype(np.int8)
               for t in model.graph.inputs} for _ in range(2)]
    expected = reference_equals_litert(model, path, inputs)
    art = codegen(model, tmp_path / "art", name="fuse_q8")
    assert _folds(art) == INT8_FOLDS
    art.build(opt=OPT)
    for x, want in expected:
        got, trace = _run_both_threads(art, x)
        for k, w in want.items():
            np.testing.assert_array_equal(got[k], w, err_msg=k)
    _check_trace(art, trace, 2)


def test_a_debug_build_folds_nothing(tmp_path: Path) -> None:
    art = codegen(_float_model(), tmp_path / "dbg", name="fuse_dbg", debug=True)
    assert _folds(art) == {}
    assert not any("absorbed" in s["args"] for s in art.manifest["steps"])


@pytest.mark.parametrize("stem, folded", [
    ("face_detection_full_range_sparse", {"PAD": 43, "ADD": 16}),
    ("face_detection_short_range", {"RELU": 17, "ADD": 16, "PAD": 11}),
    ("hand_recrop", {"PRELU": 7, "ADD": 6, "PAD": 3}),
])
def test_production_models_fold(tmp_path: Path, stem: str, folded: dict[str, int]) -> None:
    """The converter's PAD -> convolution, ADD -> RELU, CONV_2D -> PRELU and residual
    convolution -> ADD (of a channel PAD) chains fold; the artifact still computes the model
    and its trace joins every op."""
    art = codegen(PROD / f"{stem}.tflite", tmp_path / stem, name=stem)
    kinds: dict[str, int] = {}
    for s in art.manifest["steps"]:
        if "fused_into" in s["args"]:
            kinds[s["args"]["op_type"]] = kinds.get(s["args"]["op_type"], 0) + 1
    assert kinds == folded
    art.build(opt=OPT)
    model = art.model
    assert isinstance(model, Model)
    rng = np.random.default_rng(2)
    x = {t.name: rng.random(t.shape, dtype=np.float32) for t in model.graph.inputs}
    got, trace = _run_both_threads(art, x)
    want = tk.run(model, x).outputs
    lite = litert_run(PROD / f"{stem}.tflite", x)
    for k, w in want.items():
        tol = 1e-5 * max(float(np.abs(w).max()), 1.0)
        assert float(np.abs(lite[k] - w).max()) <= tol, k
        assert float(np.abs(got[k] - w).max()) <= tol, k
    _check_trace(art, trace, 2)


def test_a_compiled_model_folds_by_command_id(tmp_path: Path) -> None:
    """The compiler's own passes run first (its fused activations stay its own); what is left
    folds by command id, and the trace still joins every command."""
    from toolkit.compiler import compile_model

    model = _float_model()
    compiled = compile_model(model)
    art = codegen(compiled, tmp_path / "art", name="fuse_compiled")
    steps = art.manifest["steps"]
    assert art.manifest["key_name"] == "command_id"
    keys = [s["key"] for s in steps]
    fused = [s for s in steps if "fused_into" in s["args"]]
    assert {s["args"]["op_type"] for s in fused} >= {"PAD", "ADD", "PRELU"}
    for s in fused:
        host = steps[keys.index(s["args"]["fused_into"])]
        assert str(s["key"]) in host["args"]["absorbed"].split(",")
    art.build(opt=OPT)
    rng = np.random.default_rng(17)
    x = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in model.graph.inputs}
    got, trace = _run_both_threads(art, x)
    want = tk.run(model, x).outputs
    for k, w in want.items():
        tol = 1e-5 * max(float(np.abs(w).max()), 1.0)
        assert float(np.abs(got[k] - w).max()) <= tol, k
    df = trace.to_frame()
    assert df["key"].tolist() == keys * 2
    att = tk.trace_join(trace, art)
    att.check()
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0
