"""Native kernels of int8 ops computed through lookup tables (HARD_SWISH, SQUARED_DIFFERENCE,
DIV, POW, ABS), int8 MINIMUM / MAXIMUM and REDUCE_MAX on stored values, int8 SUM and
requantization, and in float32 and int8: TILE, comparisons, SELECT_V2, PRELU, LOG_SOFTMAX:
generated, built and run, equal to the reference runtime (int8 bit-exact, float32 within 1e-5).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolkit.builder import ModelBuilder
from toolkit.errors import ToolkitError, UnsupportedOpError
from toolkit.generator import codegen
from toolkit.generator.build import build_bundle
from toolkit.ir import Model, Tensor
from toolkit.ir import Quantization as Q
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.native import run_native


def _int8_model() -> Model:
    """Binary ops of a [2, 3, 8] and a broadcast b [3, 1], HARD_SWISH in both of TFLite's
    regimes (fixed point, and the float table for a fine output scale), TILE, SUM,
    and REDUCE_MAX."""
    mb = ModelBuilder("tables_q8")
    a = mb.input("a", [2, 3, 8], np.int8, quant=Q.make(0.05, 3))
    b = mb.input("b", [3, 1], np.int8, quant=Q.make(0.04, -7))
    outs = [
        mb.binary("SQUARED_DIFFERENCE", a, b, name="sqd", quant=Q.make(0.12, -128)),
        mb.binary("DIV", a, b, name="div_relu", activation="RELU", quant=Q.make(0.3, -20)),
        mb.binary("POW", a, b, name="pow", quant=Q.make(0.5, 0)),
        mb.binary("MAXIMUM", a, b, name="max"),
        mb.binary("MINIMUM", b, a, name="min"),
        mb.unary("HARD_SWISH", a, name="hswish", quant=Q.make(0.04, -90)),
        mb.unary("HARD_SWISH", a, name="hswish_fine", quant=Q.make(0.0002, 10)),
        mb.op("TILE", [a, mb.const("m", np.array([2, 1, 3], np.int32))], [4, 3, 24],
              name="tile"),
        mb.reduce("SUM", a, [2], keep_dims=False, name="sum", quant=Q.make(0.3, 5)),
        mb.reduce("SUM", a, [0, 1], name="sum01", quant=Q.make(0.2, -3)),
        mb.reduce("REDUCE_MAX", a, [0, 2], name="rmax"),
    ]
    c = mb.input("c", [5, 7], np.int8, quant=Q.make(0.06, -9))
    alpha = mb.const("alpha", np.arange(-3, 4, dtype=np.int8) * 30, np.int8,
                     quant=Q.make(0.01, 4))
    outs += _compare_select(mb, a, b, np.int8)
    outs += [
        mb.op("QUANTIZE", [c], [5, 7], name="requant", quant=Q.make(0.023, 11)),
        mb.unary("ABS", c, name="abs", quant=Q.make(0.04, -100)),
        mb.op("PRELU", [c, alpha], [5, 7], name="prelu", quant=Q.make(0.05, 20)),
        mb.op("LOG_SOFTMAX", [c], [5, 7], name="log_softmax", quant=Q.make(16 / 256, 127)),
    ]
    mb.output(*outs)
    return mb.build()


def _compare_select(mb: ModelBuilder, a: Tensor, b: Tensor, dt: type) -> list[Tensor]:
    """The six comparisons of ``a`` and broadcast ``b``, each choosing between ``a`` and
    ``b`` by SELECT_V2 (bool tensors are not graph outputs)."""
    shape = list(np.broadcast_shapes(a.shape, b.shape))
    outs = []
    for kind in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
        cond = mb.op(kind, [a, b], shape, name=kind.lower(), dtype=np.bool_)
        outs.append(mb.op("SELECT_V2", [cond, a, b], shape, name=f"select_{kind.lower()}",
                          dtype=dt, quant=a.quant))
    return outs


def _float_model() -> Model:
    """TILE of float32 on ranks 4 and 1, comparisons, SELECT_V2, PRELU, LOG_SOFTMAX, and
    GATHER on axis 1 by int32 indices, themselves compared and added to in int32."""
    mb = ModelBuilder("tables_f32")
    x = mb.input("x", [2, 1, 3, 5])
    v = mb.input("v", [7])
    t1 = mb.op("TILE", [x, mb.const("m1", np.array([1, 4, 2, 3], np.int32))], [2, 4, 6, 15],
               name="tile4")
    t2 = mb.op("TILE", [v, mb.const("m2", np.array([3], np.int32))], [21], name="tile1")
    a = mb.input("a", [2, 3, 37])
    b = mb.input("b", [3, 1])
    alpha = mb.const("alpha", np.linspace(-1, 1, 37).astype(np.float32))
    extra = _compare_select(mb, a, b, np.float32)
    extra += [mb.op("PRELU", [a, alpha], [2, 3, 37], name="prelu"),
              mb.op("LOG_SOFTMAX", [a], [2, 3, 37], name="log_softmax")]
    idx = mb.input("idx", [2, 3], np.int32)
    table = mb.const("table", np.arange(40, dtype=np.float32).reshape(2, 5, 4))
    extra.append(mb.op("GATHER", [table, idx], [2, 2, 3, 4], name="gather", axis=1))
    shifted = mb.binary("ADD", idx, mb.const("one", np.array(1, np.int32)), name="shifted")
    low = mb.op("LESS", [idx, mb.const("three", np.array(3, np.int32))], [2, 3], name="low",
                dtype=np.bool_)
    extra.append(mb.op("SELECT_V2", [low, shifted, idx], [2, 3], name="bumped",
                       dtype=np.int32))
    mb.output(t1, t2, *extra)
    return mb.build()


def _inputs(model: Model, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """int8 over its range, int32 indices (each of [0, 5) at least once), floats in
    [-3, 3)."""
    out = {}
    for t in model.graph.inputs:
        if t.dtype == np.int8:
            out[t.name] = rng.integers(-128, 128, t.shape).astype(np.int8)
        elif t.dtype == np.int32:
            out[t.name] = rng.permutation(np.arange(t.size) % 5).reshape(t.shape).astype(
                np.int32)  # every index in [0, 5)
        else:
            out[t.name] = rng.uniform(-3, 3, t.shape).astype(np.float32)
    return out


@pytest.mark.parametrize("int8", [True, False], ids=["int8", "float32"])
def test_table_and_tile_kernels_match_the_reference(tmp_path: Path, int8: bool) -> None:
    model = _int8_model() if int8 else _float_model()
    art = codegen(model, tmp_path / "art", name="tables")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    rng = np.random.default_rng(5)
    for _ in range(3):
        inputs = _inputs(model, rng)
        want = Interpreter(model).invoke(inputs)
        got = run_native(art, inputs).outputs
        assert sorted(got) == sorted(want)
        for k, w in want.items():
            assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
            if w.dtype == np.float32:
                np.testing.assert_allclose(got[k], w, rtol=1e-5, atol=1e-6, err_msg=k)
            else:
                np.testing.assert_array_equal(got[k], w, err_msg=k)
            if k.startswith(("select_less", "select_greater")):  # both chosen somewhere
                a = np.broadcast_to(inputs["a"], w.shape)
                b = np.broadcast_to(inputs["b"], w.shape)
                assert ((w == a) & (w != b)).any() and ((w == b) & (w != a)).any(), k
            elif k == "bumped":
                assert (w != inputs["idx"]).any() and (w == inputs["idx"]).any()
            elif int8 and k not in ("tile", "hswish_fine", "rmax") \
                    and not k.startswith("select_"):  # (the fine HARD_SWISH saturates)
                assert len(np.unique(w)) > 4, k  # not a constant output


def test_gather_index_out_of_range_is_an_error(tmp_path: Path) -> None:
    model = _float_model()
    art = codegen(model, tmp_path / "art", name="gather_bad")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    inputs = _inputs(model, np.random.default_rng(1))
    inputs["idx"][1, 2] = 5
    with pytest.raises(ToolkitError, match=r"GATHER gather: an index is outside \[0, 5\)"):
        run_native(art, inputs)


def test_hard_swish_covers_both_regimes() -> None:
    """The fine output scale (below the input's / 128) takes the float table, the other
    TFLite's fixed point: each table over all 256 inputs equals the reference."""
    from toolkit.fixed_point import qparams_of
    from toolkit.generator.tables import hard_swish_table

    model = _int8_model()
    ops = {op.outputs[0].name: op for op in model.graph.ops}
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256)
    for name in ("hswish", "hswish_fine"):
        op = ops[name]
        fine = float(op.inputs[0].quant.scale[0]) / 128 > float(op.outputs[0].quant.scale[0])
        assert fine == (name == "hswish_fine")
        table = hard_swish_table(qparams_of(op.inputs[0].quant), qparams_of(op.outputs[0].quant))
        mb = ModelBuilder("hs")
        t = mb.input("x", [1, 1, 256], np.int8, quant=op.inputs[0].quant)
        mb.output(mb.unary("HARD_SWISH", t, name="y", quant=op.outputs[0].quant))
        want = Interpreter(mb.build()).invoke({"x": x})["y"].reshape(-1)
        np.testing.assert_array_equal(table, want, err_msg=name)


def test_tile_beyond_six_axes_is_refused(tmp_path: Path) -> None:
    mb = ModelBuilder("tile7")
    x = mb.input("x", [2, 3, 4, 5])
    mb.output(mb.op("TILE", [x, mb.const("m", np.array([2, 2, 2, 2], np.int32))],
                    [4, 6, 8, 10], name="tile"))
    with pytest.raises(UnsupportedOpError, match="at most 6"):
        codegen(mb.build(), tmp_path / "t", name="t")
    assert not (tmp_path / "t" / "t.cpp").exists()


def test_bool_graph_output_is_refused(tmp_path: Path) -> None:
    mb = ModelBuilder("cmp")
    a, b = mb.input("a", [4]), mb.input("b", [4])
    mb.output(mb.op("GREATER", [a, b], [4], name="gt", dtype=np.bool_))
    with pytest.raises(UnsupportedOpError, match="graph output 'gt' is bool"):
        codegen(mb.build(), tmp_path / "c", name="c")
    assert not (tmp_path / "c" / "c.cpp").exists()


def _opts(name: str, **fields: object) -> object:
    """An options object of the schema's object API with ``fields`` set."""
    from toolkit.builder import OPTIONS_CLASS

    obj = OPTIONS_CLASS[name]()
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj


def _resampling(int8: bool) -> Model:
    """TRANSPOSE_CONV (SAME stride 2 with a bias and RELU, VALID stride (1, 2); per-channel
    filter scales in int8) and RESIZE_BILINEAR (half-pixel centres, aligned corners, plain)."""
    rng = np.random.default_rng(11)
    mb = ModelBuilder("resample")
    if int8:
        x = mb.input("x", [2, 5, 4, 3], np.int8, quant=Q.make(0.05, -4))
        w = mb.const("w", rng.integers(-127, 128, (6, 3, 3, 3)).astype(np.int8), np.int8,
                     quant=Q.make(list(np.linspace(0.002, 0.01, 6)), 0, 0))
        bias = mb.const("bias", rng.integers(-500, 500, 6).astype(np.int32), np.int32)
        outs = [mb.op("TRANSPOSE_CONV", [mb.const("s1", np.array([2, 10, 8, 6], np.int32)),
                                         w, x, bias], [2, 10, 8, 6], name="tconv_same",
                      dtype=x.dtype,
                      options=_opts("TransposeConvOptions", padding=0, strideH=2, strideW=2,
                                    fusedActivationFunction=1), quant=Q.make(0.04, -100)),
                mb.op("TRANSPOSE_CONV", [mb.const("s2", np.array([2, 7, 9, 6], np.int32)),
                                         w, x], [2, 7, 9, 6], name="tconv_valid", dtype=x.dtype,
                      options=_opts("TransposeConvOptions", padding=1, strideH=1, strideW=2),
                      quant=Q.make(0.06, 7))]
    else:
        x = mb.input("x", [2, 5, 4, 3])
        w = mb.const("w", rng.standard_normal((6, 3, 3, 3)).astype(np.float32))
        bias = mb.const("bias", rng.standard_normal(6).astype(np.float32))
        outs = [mb.op("TRANSPOSE_CONV", [mb.const("s1", np.array([2, 10, 8, 6], np.int32)),
                                         w, x, bias], [2, 10, 8, 6], name="tconv_same",
                      dtype=x.dtype,
                      options=_opts("TransposeConvOptions", padding=0, strideH=2, strideW=2,
                                    fusedActivationFunction=1)),
                mb.op("TRANSPOSE_CONV", [mb.const("s2", np.array([2, 7, 9, 6], np.int32)),
                                         w, x], [2, 7, 9, 6], name="tconv_valid", dtype=x.dtype,
                      options=_opts("TransposeConvOptions", padding=1, strideH=1, strideW=2))]
    for name, size, opts in (("half", [9, 7], {"halfPixelCenters": True}),
                             ("corners", [8, 11], {"alignCorners": True}),
                             ("plain", [3, 6], {})):
        outs.append(mb.op("RESIZE_BILINEAR", [x, mb.const(f"{name}_size",
                                                          np.array(size, np.int32))],
                          [2, *size, 3], name=f"resize_{name}",
                          options=_opts("ResizeBilinearOptions", **opts)))
    mb.output(*outs)
    return mb.build()


@pytest.mark.parametrize("int8", [True, False], ids=["int8", "float32"])
def test_transpose_conv_and_resize_match_the_reference(tmp_path: Path, int8: bool) -> None:
    model = _resampling(int8)
    art = codegen(model, tmp_path / "art", name="resample")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    inputs = _inputs(model, np.random.default_rng(2))
    want = Interpreter(model).invoke(inputs)
    got = run_native(art, inputs).outputs
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
        if int8:
            np.testing.assert_array_equal(got[k], w, err_msg=k)
            assert len(np.unique(w)) > 20, k
        else:
            tol = 1e-5 * float(np.abs(w).max())
            assert float(np.abs(got[k] - w).max()) <= tol, k


def _movement(int8: bool) -> Model:
    """STRIDED_SLICE (negative stride, shrink and new axis), SLICE, REVERSE_V2,
    SPACE_TO_BATCH_ND (padded: the pad value is the zero point in int8) and
    BATCH_TO_SPACE_ND (cropped)."""
    from toolkit.ir import Quantization

    dt = np.int8 if int8 else np.float32
    quant = Q.make(0.1, 9) if int8 else None
    mb = ModelBuilder("movement")
    x = mb.input("x", [2, 5, 6, 3], dt, quant=quant)

    def op(kind: str, ins: list[Tensor], shape: list[int], name: str,
           q: Quantization | None = quant, **opts: object) -> Tensor:
        options = _opts(opts.pop("options_name"), **opts) if "options_name" in opts else None
        return mb.op(kind, ins, shape, name=name, dtype=dt, quant=q, options=options)

    def c(name: str, v: list[int]) -> Tensor:
        return mb.const(name, np.array(v, np.int32))

    outs = [
        op("STRIDED_SLICE", [x, c("b1", [0, 4, 1, 0]), c("e1", [2, 0, 6, 3]),
                             c("s1", [1, -2, 2, 1])], [2, 2, 3, 3], "ss_rev",
           options_name="StridedSliceOptions"),
        op("STRIDED_SLICE", [x, c("b2", [1, 0, 0, 2]), c("e2", [2, 5, 6, 3]),
                             c("s2", [1, 1, 3, 1])], [5, 2], "ss_shrink",
           options_name="StridedSliceOptions", shrinkAxisMask=9),
        op("SLICE", [x, c("b3", [0, 1, 2, 0]), c("z3", [-1, 3, 2, 2])], [2, 3, 2, 2], "slice"),
        op("REVERSE_V2", [x, c("axes", [1, 3])], [2, 5, 6, 3], "reverse"),
        op("SPACE_TO_BATCH_ND", [x, c("blk", [2, 3]), c("pads", [1, 0, 2, 1])],
           [12, 3, 3, 3], "s2b"),
        op("BATCH_TO_SPACE_ND", [x, c("blk2", [1, 2]), c("crops", [1, 1, 0, 3])],
           [1, 3, 9, 3], "b2s"),
    ]
    mb.output(*outs)
    return mb.build()


@pytest.mark.parametrize("int8", [True, False], ids=["int8", "float32"])
def test_data_movement_matches_the_reference(tmp_path: Path, int8: bool) -> None:
    model = _movement(int8)
    art = codegen(model, tmp_path / "art", name="movement")
    code = (tmp_path / "art" / "movement.cpp").read_text()
    assert code.count("tk::gather_map(") == 2 and code.count("tk::transpose(") == 4
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    inputs = _inputs(model, np.random.default_rng(4))
    want = Interpreter(model).invoke(inputs)
    got = run_native(art, inputs).outputs
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
        np.testing.assert_array_equal(got[k], w, err_msg=k)
    pad = 9 if int8 else 0
    assert (got["s2b"] == pad).sum() >= 3 * (2 * 6 * 9 - 2 * 5 * 6)  # the padded cells


def test_conv3d_matches_the_reference(tmp_path: Path) -> None:
    """CONV_3D SAME with strides (1, 2, 2), a bias and RELU6, and VALID with dilation 2."""
    rng = np.random.default_rng(8)
    mb = ModelBuilder("conv3d")
    x = mb.input("x", [2, 4, 7, 6, 3])
    w = mb.const("w", rng.standard_normal((2, 3, 3, 3, 5)).astype(np.float32))
    bias = mb.const("bias", rng.standard_normal(5).astype(np.float32))
    mb.output(
        mb.op("CONV_3D", [x, w, bias], [2, 4, 4, 3, 5], name="same",
              options=_opts("Conv3DOptions", padding=0, strideD=1, strideH=2, strideW=2,
                            dilationDFactor=1, dilationHFactor=1, dilationWFactor=1,
                            fusedActivationFunction=3)),
        mb.op("CONV_3D", [x, w], [2, 2, 3, 2, 5], name="valid_dilated",
              options=_opts("Conv3DOptions", padding=1, strideD=1, strideH=1, strideW=1,
                            dilationDFactor=2, dilationHFactor=2, dilationWFactor=2)))
    model = mb.build()
    art = codegen(model, tmp_path / "art", name="conv3d")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    inputs = _inputs(model, rng)
    want = Interpreter(model).invoke(inputs)
    got = run_native(art, inputs).outputs
    for k, w_ in want.items():
        assert got[k].shape == w_.shape, k
        assert float(np.abs(got[k] - w_).max()) <= 1e-5 * float(np.abs(w_).max()), k
    assert float(want["same"].min()) == 0.0 and float(want["same"].max()) == 6.0  # RELU6 hit


def _integers() -> Model:
    """int32 FLOOR_MOD and FLOOR_DIV of mixed signs, REDUCE_MAX, CAST to float32 and to
    bool (then int8), GATHER_ND of pairs into a float table."""
    mb = ModelBuilder("ints")
    a = mb.input("a", [3, 4], np.int32)
    b = mb.input("b", [4], np.int32)
    table = mb.const("table", np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    idx = mb.input("pairs", [2, 2], np.int32)
    nz = mb.op("CAST", [a], [3, 4], name="nonzero", dtype=np.bool_)
    mb.output(
        mb.binary("FLOOR_MOD", a, b, name="fmod"),
        mb.binary("FLOOR_DIV", a, b, name="fdiv"),
        mb.reduce("REDUCE_MAX", a, [1], keep_dims=False, name="rmax_i32"),
        mb.op("CAST", [a], [3, 4], name="as_float", dtype=np.float32),
        mb.op("CAST", [nz], [3, 4], name="nonzero_i8", dtype=np.int8),
        mb.op("GATHER_ND", [table, idx], [2, 5], name="gather_nd", dtype=np.float32))
    return mb.build()


def test_integer_ops_match_the_reference(tmp_path: Path) -> None:
    model = _integers()
    art = codegen(model, tmp_path / "art", name="ints")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    rng = np.random.default_rng(6)
    inputs = {"a": rng.integers(-20, 21, (3, 4)).astype(np.int32),
              "b": np.array([3, -4, 7, -2], np.int32),
              "pairs": np.array([[2, 3], [0, 1]], np.int32)}
    inputs["a"][0, 0] = 0
    want = Interpreter(model).invoke(inputs)
    got = run_native(art, inputs).outputs
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
        np.testing.assert_array_equal(got[k], w, err_msg=k)
    assert (want["fmod"] < 0).any() and (want["fdiv"] < 0).any()
    inputs["pairs"][1, 0] = 3
    with pytest.raises(ToolkitError, match="GATHER_ND gather_nd: an index is out of range"):
        run_native(art, inputs)


def test_float_tensor_ops_match_the_reference(tmp_path: Path) -> None:
    """ARG_MIN / ARG_MAX with ties (the first index wins), CUMSUM exclusive and reversed,
    ROUND of halves (to even), MIRROR_PAD symmetric, BROADCAST_TO, LOGICAL_OR."""
    mb = ModelBuilder("tensor_ops")
    x = mb.input("x", [3, 4, 5])
    axis1 = mb.const("axis1", np.array(1, np.int32))
    pos = mb.op("GREATER", [x, mb.const("zero", np.array(0, np.float32))], [3, 4, 5],
                name="pos", dtype=np.bool_)
    big = mb.op("GREATER", [x, mb.const("one", np.array(1, np.float32))], [3, 4, 5],
                name="big", dtype=np.bool_)
    either = mb.op("LOGICAL_OR", [pos, big], [3, 4, 5], name="either", dtype=np.bool_)
    mb.output(
        mb.op("ARG_MIN", [x, axis1], [3, 5], name="argmin", dtype=np.int32,
              options=_opts("ArgMinOptions", outputType=2)),
        mb.op("ARG_MAX", [x, mb.const("axis2", np.array(-1, np.int32))], [3, 4],
              name="argmax", dtype=np.int64, options=_opts("ArgMaxOptions", outputType=4)),
        mb.op("CUMSUM", [x, axis1], [3, 4, 5], name="cumsum",
              options=_opts("CumsumOptions", exclusive=True, reverse=True)),
        mb.unary("ROUND", x, name="round"),
        mb.op("MIRROR_PAD", [x, mb.const("mp", np.array([[0, 0], [2, 1], [1, 3]], np.int32))],
              [3, 7, 9], name="mirror", options=_opts("MirrorPadOptions", mode=1)),
        mb.op("BROADCAST_TO", [mb.op("RESHAPE", [x, mb.const("shp", np.array(
            [3, 1, 4, 5], np.int32))], [3, 1, 4, 5], name="r"),
            mb.const("to", np.array([3, 2, 4, 5], np.int32))], [3, 2, 4, 5], name="bcast"),
        mb.op("SELECT_V2", [either, x, mb.const("m1", np.array(-1, np.float32))], [3, 4, 5],
              name="select_or", dtype=np.float32))
    model = mb.build()
    art = codegen(model, tmp_path / "art", name="tensor_ops")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    rng = np.random.default_rng(9)
    x_in = (rng.integers(-6, 7, (3, 4, 5)) / 2).astype(np.float32)  # halves and ties
    want = Interpreter(model).invoke({"x": x_in})
    got = run_native(art, {"x": x_in}).outputs
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
        np.testing.assert_array_equal(got[k], w, err_msg=k)
    assert np.array_equal(want["round"][x_in == 0.5], np.zeros((x_in == 0.5).sum()))


def _lstm(mb: ModelBuilder, x: Tensor, units: int, *, cifg: bool, peephole: bool,
          time_major: bool, clip: float, state: bool, name: str,
          rng: np.random.Generator) -> Tensor:
    """A float UNIDIRECTIONAL_SEQUENCE_LSTM with TFLite's 24 inputs."""
    n_in = x.shape[2]
    batch = x.shape[1] if time_major else x.shape[0]

    def const(tag: str, shape: tuple[int, ...]) -> Tensor:
        return mb.const(f"{name}/{tag}", (0.5 * rng.standard_normal(shape)).astype(np.float32))

    ins: list[Tensor | None] = [x]
    ins += [None if cifg and g == "i" else const(f"w_{g}", (units, n_in)) for g in "ifco"]
    ins += [None if cifg and g == "i" else const(f"r_{g}", (units, units)) for g in "ifco"]
    ins += [const(f"p_{g}", (units,)) if peephole and not (cifg and g == "i") else None
            for g in "ifo"]
    ins += [None if cifg and g == "i" else const(f"b_{g}", (units,)) for g in "ifco"]
    ins += [None, None]  # projection
    ins += [const("h0", (batch, units)) if state else None,
            const("c0", (batch, units)) if state else None]
    ins += [None] * 4  # layer norm
    shape = [*x.shape[:2], units]
    return mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, shape, name=name, dtype=np.float32,
                 options=_opts("UnidirectionalSequenceLSTMOptions", fusedActivationFunction=4,
                               cellClip=clip, timeMajor=time_major))


def test_lstm_matches_the_reference(tmp_path: Path) -> None:
    """Peepholes with CIFG, a cell clip, time-major input and initial states; and the plain
    batch-major LSTM."""
    rng = np.random.default_rng(12)
    mb = ModelBuilder("lstm")
    x = mb.input("x", [3, 7, 4])
    mb.output(_lstm(mb, x, 5, cifg=True, peephole=True, time_major=True, clip=0.8, state=True,
                    name="cifg", rng=rng),
              _lstm(mb, x, 6, cifg=False, peephole=False, time_major=False, clip=0.0,
                    state=False, name="plain", rng=rng))
    model = mb.build()
    art = codegen(model, tmp_path / "art", name="lstm")
    build_bundle([(art.out_dir, art.name, art.library.name)], tmp_path / "bundle", opt="-O1")
    inputs = _inputs(model, rng)
    want = Interpreter(model).invoke(inputs)
    got = run_native(art, inputs).outputs
    for k, w in want.items():
        assert got[k].shape == w.shape, k
        assert float(np.abs(got[k] - w).max()) <= 1e-5 * float(np.abs(w).max()), k
        assert float(np.abs(w).std()) > 0.05, k
