"""Custom ops: the registry every verb reads (a toy op through run, compile, partition, codegen,
costs and trace-join), unregistered and malformed ops refused by name, and MediaPipe's ops
against LiteRT's XNNPACK delegate (which runs the pooling pair and the transpose convolution)
or against the formulas of MediaPipe's kernels (the landmark ops, which LiteRT lacks)."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import litert_run

import toolkit as tk
from toolkit.builder import ModelBuilder
from toolkit.costs import op_macs
from toolkit.custom_ops import CUSTOM_OPS, decode_options, unregister_custom_op
from toolkit.errors import ModelFormatError, UnsupportedOpError
from toolkit.ir import Model, Op

PROD = Path(__file__).resolve().parent.parent / "sample_models" / "production"


# ------------------------------------------------------------------- a toy op
def _scale_shift_options(op: Op) -> tuple[float, float]:
    raw = op.custom_options or b""
    if len(raw) != 8:
        raise ValueError(f"ScaleShift options are 2 float32 (8 bytes), got {len(raw)}")
    a, b = struct.unpack("<2f", raw)
    return a, b


def _scale_shift(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    a, b = _scale_shift_options(op)
    x = args[0]
    assert x is not None
    return [(x * np.float32(a) + np.float32(b)).astype(np.float32)]


def _scale_shift_emit(e, step) -> str:  # type: ignore[no-untyped-def]
    op = step.op
    a, b = _scale_shift_options(op)
    n = math.prod(op.outputs[0].shape)
    return (f"{{ const float* x = {e.ptr(op.inputs[0])}; float* y = {e.ptr(op.outputs[0], False)};"
            f"\n  for (int i = 0; i < {n}; ++i) y[i] = x[i] * {a!r}f + {b!r}f; }}")


@pytest.fixture
def scale_shift() -> Iterator[None]:
    tk.register_custom_op("ScaleShift", _scale_shift, options=_scale_shift_options,
                          macs=lambda op: 7 * math.prod(op.outputs[0].shape),
                          emit=_scale_shift_emit, doc="y = a x + b")
    yield
    unregister_custom_op("ScaleShift")


def _toy_model(code: str = "ScaleShift", options: bytes = struct.pack("<2f", 2.0, 0.5)
               ) -> Model:
    mb = ModelBuilder("toy")
    x = mb.input("x", [1, 16])
    h = mb.unary("TANH", x, name="pre")
    y = mb.op("CUSTOM", [h], (1, 16), custom_code=code, custom_options=options, name="scaled")
    mb.output(mb.unary("LOGISTIC", y, name="post"))
    return mb.build()


def _want(x: np.ndarray) -> np.ndarray:
    y = np.tanh(x) * np.float32(2.0) + np.float32(0.5)
    return (1 / (1 + np.exp(-y.astype(np.float64)))).astype(np.float32)


X = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)


def test_a_registered_toy_op_runs_through_every_verb(scale_shift: None, tmp_path: Path) -> None:
    model = _toy_model()
    op = model.graph.ops[1]
    assert op.kind == "ScaleShift" and op_macs(op) == 7 * 16
    # run
    ref = tk.run(model, {"x": X}).outputs["post"]
    np.testing.assert_allclose(ref, _want(X), rtol=1e-6)
    # a file written and read again, then compile
    again = tk.load(tk.save(model, tmp_path / "toy.tflite"))
    compiled = tk.compile(again)
    assert "ScaleShift" in {o.kind for o in compiled.model.graph.ops}
    np.testing.assert_array_equal(tk.run(compiled, {"x": X}).outputs["post"], ref)
    # partition: the custom op on its own backend, the chain computes the model
    result = tk.partition(again, {"partition": {"backends": "cpu,npu", "default": "cpu",
                                                "comply": "opcode"},
                                  "OPCODE": {"CUSTOM(ScaleShift)": "npu"}})
    assert [p.backend for p in result.parts] == ["cpu", "npu", "cpu"]
    np.testing.assert_array_equal(tk.run(result, {"x": X}).outputs["post"], ref)
    # codegen through the registered emitter, built and run natively
    art = tk.codegen(again, tmp_path / "cpp")
    assert "x[i] * 2.0f + 0.5f" in art.source.read_text()
    r = tk.run(art, {"x": X}, trace=True)
    np.testing.assert_allclose(r.outputs["post"], ref, rtol=1e-6, atol=1e-7)
    # the join splits by the registered MACs
    att = tk.trace_join(r.trace, art)
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0


def test_an_unregistered_custom_op_loads_compiles_and_its_run_names_it(tmp_path: Path) -> None:
    assert "Mystery" not in CUSTOM_OPS
    path = tk.save(_toy_model("Mystery"), tmp_path / "m.tflite")
    model = tk.load(path)
    compiled = tk.compile(model)
    with pytest.raises(UnsupportedOpError, match=r"'Mystery'.*register_custom_op\('Mystery'"):
        tk.run(model, {"x": X})
    with pytest.raises(UnsupportedOpError, match="Mystery"):
        tk.run(compiled, {"x": X})
    with pytest.raises(UnsupportedOpError, match=r"native backend.*register_custom_op"):
        tk.codegen(model, tmp_path / "cpp")


def test_a_registered_op_without_an_emitter_is_refused_by_codegen(tmp_path: Path) -> None:
    tk.register_custom_op("ScaleShift", _scale_shift)
    try:
        with pytest.raises(UnsupportedOpError, match="without a C\\+\\+ emitter"):
            tk.codegen(_toy_model(), tmp_path)
    finally:
        unregister_custom_op("ScaleShift")


def test_a_malformed_option_blob_is_refused_at_load_naming_the_op(scale_shift: None,
                                                                   tmp_path: Path) -> None:
    path = tk.save(_toy_model(options=b"\x01\x02\x03"), tmp_path / "bad.tflite")
    with pytest.raises(ModelFormatError, match=r"ScaleShift 'scaled'.*malformed custom_options "
                                               r"\(3 bytes\)"):
        tk.load(path)
    with pytest.raises(ModelFormatError, match="ScaleShift 'scaled'"):
        tk.load(path.read_bytes())


def test_a_malformed_mediapipe_blob_is_refused(tmp_path: Path) -> None:
    model = tk.load(PROD / "selfie_segmentation.tflite")
    op = next(o for o in model.graph.ops if o.type == "CUSTOM")
    op.custom_options = b"\x01\x00\x00\x00"  # padding only: the strides are missing
    path = tk.save(model, tmp_path / "bad.tflite")
    with pytest.raises(ModelFormatError, match=r"Convolution2DTransposeBias 'segment'.*"
                                               r"TfLiteTransposeConvParams needs 12 bytes"):
        tk.load(path)


def test_registration_is_checked() -> None:
    with pytest.raises(tk.ToolkitError, match="non-empty string"):
        tk.register_custom_op("", _scale_shift)
    with pytest.raises(tk.ToolkitError, match="not callable"):
        tk.register_custom_op("X", 3)


# --------------------------------------------------------- MediaPipe's ops
def _pool_options(pad: int, stride: int, filt: int) -> bytes:
    return struct.pack("<10i", pad, stride, stride, filt, filt, 0, 0, 0, 0, 0)


@pytest.mark.parametrize("pad", [1, 2])  # SAME, VALID
def test_max_pooling_with_argmax_and_unpooling_match_litert(pad: int, tmp_path: Path) -> None:
    """LiteRT runs both through XNNPACK's delegate: the pooled values and the unpooled image
    must be equal. XNNPACK writes its argmax as integers in another order, so the argmax
    output is checked against MediaPipe's formula (y * filter_w + x + 0.1) instead."""
    mb = ModelBuilder("mp")
    x = mb.input("x", [1, 9, 10, 3])
    oh, ow = (5, 5) if pad == 1 else (4, 5)
    opts = _pool_options(pad, 2, 2)
    vals, idx = mb.op("CUSTOM", [x], outputs=[("pooled", (1, oh, ow, 3)),
                                             ("argmax", (1, oh, ow, 3))],
                      custom_code="MaxPoolingWithArgmax2D", custom_options=opts)
    mb.output(vals, idx)
    if pad == 2:  # XNNPACK unpools with VALID padding only
        mb.output(mb.op("CUSTOM", [vals, idx], (1, 2 * oh, 2 * ow, 3),
                        custom_code="MaxUnpooling2D", custom_options=opts, name="unpooled"))
    model = mb.build()
    path = tk.save(model, tmp_path / "mp.tflite")
    xin = np.random.default_rng(pad).uniform(-1, 1, (1, 9, 10, 3)).astype(np.float32)
    lite = litert_run(path, [xin], resolver="AUTO")
    got = tk.run(model, {"x": xin}).outputs
    np.testing.assert_array_equal(got["pooled"], lite["pooled"])
    if pad == 2:
        np.testing.assert_array_equal(got["unpooled"], lite["unpooled"])
    native = tk.run(tk.codegen(model, tmp_path / "cpp"), {"x": xin}).outputs
    for k, v in got.items():
        np.testing.assert_array_equal(native[k], v, err_msg=k)
    # the formula, one window at a time
    ph = max(0, ((oh - 1) * 2 + 2 - 9) // 2) if pad == 1 else 0
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * 2 - ph, j * 2
            win = xin[0, max(y0, 0):y0 + 2, x0:x0 + 2]
            for c in range(3):
                flat = win[..., c]
                k = int(np.argmax(flat))
                ky, kx = divmod(k, flat.shape[1])
                ky += max(y0, 0) - y0
                assert got["pooled"][0, i, j, c] == flat.max()
                assert got["argmax"][0, i, j, c] == np.float32(ky * 2 + kx + np.float32(0.1))


def test_transpose_conv_bias_matches_litert(tmp_path: Path) -> None:
    mb = ModelBuilder("tcb")
    x = mb.input("x", [1, 5, 6, 4])
    rng = np.random.default_rng(3)
    w = mb.const("w", rng.uniform(-1, 1, (3, 3, 3, 4)).astype(np.float32))
    b = mb.const("b", rng.uniform(-1, 1, (3,)).astype(np.float32))
    # SAME: 2 * (5 - 1) + 3 - pad, pad = 3 - (5 - 1) % 2 - 1 = 2 rows; 2 * 5 + 3 - 1 columns
    y = mb.op("CUSTOM", [x, w, b], (1, 9, 12, 3), custom_code="Convolution2DTransposeBias",
              custom_options=struct.pack("<3i", 1, 2, 2), name="up")
    mb.output(y)
    model = mb.build()
    path = tk.save(model, tmp_path / "tcb.tflite")
    xin = rng.uniform(-1, 1, (1, 5, 6, 4)).astype(np.float32)
    want = litert_run(path, [xin], resolver="AUTO")["up"]
    got = tk.run(model, {"x": xin}).outputs["up"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
    art = tk.codegen(model, tmp_path / "cpp")
    np.testing.assert_allclose(tk.run(art, {"x": xin}).outputs["up"], got, rtol=0,
                               atol=1e-5 * float(np.abs(want).max()))


def _landmark_model() -> tuple[Model, dict[str, Op]]:
    model = tk.load(PROD / "face_landmark_with_attention.tflite")
    ops = {}
    for op in model.graph.ops:
        if op.type == "CUSTOM":
            ops.setdefault(op.kind, op)
    return model, ops


def _rot(r: float) -> np.ndarray:
    return np.array([[math.cos(r), -math.sin(r)], [math.sin(r), math.cos(r)]])


def test_landmarks_to_transform_matrix_is_the_documented_matrix() -> None:
    """MediaPipe's v2: rotate the subset by the angle that levels the two rotation landmarks,
    take the bounding box there, and map an output pixel (centred, scaled by scale * box /
    output size) back through the rotation to the box centre. Checked in float64."""
    from toolkit.custom_ops import decode_options

    _, ops = _landmark_model()
    op = ops["Landmarks2TransformMatrix"]
    o = decode_options(op)
    lm = np.random.default_rng(0).uniform(0, 100, (1, 468, 3)).astype(np.float32)
    got = CUSTOM_OPS["Landmarks2TransformMatrix"].kernel(op, [lm])[0][0].astype(np.float64)
    p = lm[0].astype(np.float64)
    a, b = p[o["left"]], p[o["right"]]
    rot = float(o["target"]) - math.atan2(b[1] - a[1], b[0] - a[0])
    pts = p[o["subset"], :2] @ _rot(rot).T
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = _rot(-rot) @ ((lo + hi) / 2)
    size = (hi - lo) * np.array([o["scale_x"], o["scale_y"]]) / np.array([o["out_w"],
                                                                         o["out_h"]])
    lin = _rot(-rot) @ np.diag(size)
    want = np.eye(4)
    want[:2, :2] = lin
    want[:2, 3] = centre - lin @ np.array([o["out_w"] / 2, o["out_h"] / 2])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_transform_landmarks_is_the_matrix_product() -> None:
    _, ops = _landmark_model()
    op = ops["TransformLandmarks"]
    rng = np.random.default_rng(1)
    n = op.inputs[0].shape[1]
    x = rng.uniform(-5, 5, (1, n, 2)).astype(np.float32)
    m = rng.uniform(-2, 2, (1, 4, 4)).astype(np.float32)
    got = CUSTOM_OPS["TransformLandmarks"].kernel(op, [x, m])[0]
    h = np.concatenate([x[0], np.zeros((n, 1)), np.ones((n, 1))], axis=1)  # (x, y, 0, 1)
    want = h @ m[0, :2].T.astype(np.float64)
    np.testing.assert_allclose(got[0], want, rtol=1e-6, atol=1e-5)


def test_transform_tensor_bilinear_is_bilinear_sampling() -> None:
    """Output pixel (i, j) samples the input bilinearly at the matrix's image of its centre
    (j + 0.5, i + 0.5) minus half a pixel, zero outside; a pure translation by whole pixels
    is a crop."""
    _, ops = _landmark_model()
    op = ops["TransformTensorBilinear"]
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (1, 48, 48, 32)).astype(np.float32)
    shift = np.eye(4, dtype=np.float32)
    shift[0, 3], shift[1, 3] = 7, 3
    got = CUSTOM_OPS["TransformTensorBilinear"].kernel(op, [x, shift[None]])[0]
    np.testing.assert_array_equal(got[0], x[0, 3:19, 7:23])
    m = np.eye(4, dtype=np.float32)
    m[:2, :2] = [[1.3, 0.2], [-0.1, 0.9]]
    m[:2, 3] = [5.25, 8.5]
    got = CUSTOM_OPS["TransformTensorBilinear"].kernel(op, [x, m[None]])[0][0]
    for i, j in [(0, 0), (5, 9), (15, 15), (10, 2)]:
        px = m[0, 0] * (j + 0.5) + m[0, 1] * (i + 0.5) + m[0, 3] - 0.5
        py = m[1, 0] * (j + 0.5) + m[1, 1] * (i + 0.5) + m[1, 3] - 0.5
        x0, y0 = math.floor(px), math.floor(py)
        fx, fy = px - x0, py - y0
        want = ((1 - fy) * ((1 - fx) * x[0, y0, x0] + fx * x[0, y0, x0 + 1])
                + fy * ((1 - fx) * x[0, y0 + 1, x0] + fx * x[0, y0 + 1, x0 + 1]))
        np.testing.assert_allclose(got[i, j], want, rtol=1e-5, atol=1e-5)


def test_fuzzed_option_blobs_load_or_are_refused(tmp_path: Path) -> None:
    """Random and truncated option blobs of MediaPipe's ops (a struct and a FlexBuffers map):
    ``tk.load`` returns a model or raises a ToolkitError naming the op, and a loaded model's
    run raises nothing else either."""
    import random

    model = tk.load(PROD / "face_landmark_with_attention.tflite")
    l2m = next(o for o in model.graph.ops if o.kind == "Landmarks2TransformMatrix")
    good = bytes(l2m.custom_options or b"")
    rng = random.Random(29)
    refused = 0
    for case in range(40):
        raw = bytearray(good)
        if case % 3 == 0:
            raw = raw[:rng.randrange(len(raw))]
        else:
            for _ in range(rng.randint(1, 8)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        op = Op("CUSTOM", [], [], custom_code="Landmarks2TransformMatrix",
                custom_options=bytes(raw), version=2)
        try:
            decode_options(op)
        except tk.ToolkitError as e:
            assert "Landmarks2TransformMatrix" in str(e)
            refused += 1
    assert refused > 10
    for blob in (b"", b"\x01", struct.pack("<3i", 3, 2, 2), struct.pack("<3i", 1, 0, 2)):
        op = Op("CUSTOM", [], [], custom_code="Convolution2DTransposeBias",
                custom_options=blob)
        with pytest.raises(ModelFormatError, match="Convolution2DTransposeBias"):
            decode_options(op)
