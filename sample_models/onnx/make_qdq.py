"""Make the quantized ONNX fixtures with ONNX Runtime's own quantizer (run by hand:
``python sample_models/onnx/make_qdq.py``; needs onnxruntime, which the project's
``onnxruntime`` extra installs).

From the float TorchScript exports of ``make_fixtures.py`` (``cnn.ts.onnx``, ``mlp.ts.onnx``)
``onnxruntime.quantization.quantize_static`` writes, calibrated on 8 seeded random inputs
(MinMax, int8 activations and weights):

``<model>.qdq.onnx``: QuantizeLinear/DequantizeLinear pairs around float ops (QDQ format,
the format ORT recommends for int8; per-channel weights for the CNN). ORT's QOperator format
writes com.microsoft ops (QLinearAdd, QGemm) beside QLinearConv; the tests build their
QLinearConv / QLinearMatMul models with ``onnx.helper`` instead.

The tests compare the toolkit with ONNX Runtime on ``inputs.npz``; they need neither this script
nor the quantizer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)

HERE = Path(__file__).resolve().parent


class _Reader(CalibrationDataReader):
    def __init__(self, shape: tuple[int, ...]) -> None:
        rng = np.random.default_rng(28)
        self.batches = iter([{"input": rng.standard_normal(shape).astype(np.float32)}
                             for _ in range(8)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


def main() -> None:
    inputs = np.load(HERE / "inputs.npz")
    for name in ("cnn", "mlp"):
        src = HERE / f"{name}.ts.onnx"
        out = HERE / f"{name}.qdq.onnx"
        quantize_static(str(src), str(out), _Reader(inputs[name].shape),
                        quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8, per_channel=name == "cnn")
        print(out.name, out.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
