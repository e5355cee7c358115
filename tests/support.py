"""Helpers shared by the tests: sample model paths and a LiteRT runner."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
SAMPLE_TFLITE = sorted(SAMPLES.glob("*.tflite"))
TF_TFLITE = sorted((SAMPLES / "tf").glob("*.tflite"))
ALL_TFLITE = SAMPLE_TFLITE + TF_TFLITE


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
