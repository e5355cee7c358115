"""int8 MUL and PRELU take their real multipliers as LiteRT's kernels compute them: the scales
multiplied and divided in float32 (C ``float``), then widened. The scales here are ones where
the double-precision quotient gives another fixed-point multiplier (checked first, so the test
would see a regression); the reference runtime's outputs equal LiteRT's builtin and reference
kernels' bit for bit, on equal shapes and on each broadcast LiteRT runs by another loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import litert_run

from toolkit.builder import ModelBuilder
from toolkit.fixed_point import quantize_multiplier, single_precision_ratio
from toolkit.formats.flatbuffer_write import write_model
from toolkit.ir import Quantization as Q
from toolkit.runtime.interpreter import run_model

I8 = np.int8
A_SCALE, B_SCALE = 0.05, 1 / 256
OUT_SCALES = (0.02, 0.04, 0.011)
SHAPES = {"same": (1, 7, 9, 37), "channels": (1, 1, 1, 37), "rows": (1, 7, 1, 37),
          "scalar": (1, 1, 1, 1), "pixels": (1, 7, 9, 1)}


def _differs(num: float, den: float, factor: float) -> bool:
    double = float(np.float64(np.float32(num)) * np.float64(np.float32(factor))
                   / np.float64(np.float32(den)))
    return quantize_multiplier(double) != quantize_multiplier(
        single_precision_ratio(num, den, factor))


@pytest.mark.parametrize("out_scale", OUT_SCALES)
def test_scales_tell_single_from_double_precision(out_scale: float) -> None:
    assert _differs(A_SCALE, out_scale, B_SCALE)


def _check(tmp_path: Path, build: ModelBuilder, inputs: dict[str, np.ndarray]) -> None:
    model = build.build()
    path = tmp_path / "m.tflite"
    path.write_bytes(bytes(write_model(model, "tflite")))
    ref = run_model(model, inputs).outputs
    for resolver in ("BUILTIN_WITHOUT_DEFAULT_DELEGATES", "BUILTIN_REF"):
        lite = litert_run(path, inputs, resolver=resolver)
        for name, want in lite.items():
            np.testing.assert_array_equal(ref[name], want, err_msg=f"{name} ({resolver})")


@pytest.mark.parametrize("out_scale", OUT_SCALES)
@pytest.mark.parametrize("shape", list(SHAPES), ids=str)
def test_int8_mul_equals_litert(tmp_path: Path, out_scale: float, shape: str) -> None:
    mb = ModelBuilder("mul")
    a = mb.input("a", [1, 7, 9, 37], I8, quant=Q.make(A_SCALE, -3))
    b = mb.input("b", list(SHAPES[shape]), I8, quant=Q.make(B_SCALE, -128))
    mb.output(mb.mul(a, b, name="y", quant=Q.make(out_scale, 2)))
    rng = np.random.default_rng(len(shape))
    _check(tmp_path, mb, {"a": rng.integers(-128, 128, (1, 7, 9, 37)).astype(I8),
                          "b": rng.integers(-128, 128, SHAPES[shape]).astype(I8)})


@pytest.mark.parametrize("out_scale", OUT_SCALES)
def test_int8_prelu_equals_litert(tmp_path: Path, out_scale: float) -> None:
    mb = ModelBuilder("prelu")
    x = mb.input("x", [1, 7, 9, 37], I8, quant=Q.make(A_SCALE, -3))
    alpha = mb.const("alpha", np.random.default_rng(1).integers(-128, 128, (1, 1, 37)).astype(I8),
                     quant=Q.make(B_SCALE, -128))
    mb.output(mb.binary("PRELU", x, alpha, name="y", quant=Q.make(out_scale, 2)))
    rng = np.random.default_rng(2)
    _check(tmp_path, mb, {"x": rng.integers(-128, 128, (1, 7, 9, 37)).astype(I8)})
