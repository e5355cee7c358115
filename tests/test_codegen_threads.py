"""Work split across the native model's threads: a float FULLY_CONNECTED with more weights
than the split threshold runs its output-channel panels on the thread pool
(tk::conv2d_f32_panels), giving LiteRT's and the reference runtime's results within 1e-5 and
the same bits on one, two and three threads; a small one stays on the calling thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _single_op_tflite import SingleOp, Spec, options
from support import ISAS, build_for_isa

import toolkit as tk
from toolkit.generator import codegen
from toolkit.runtime.interpreter import run_model
from toolkit.runtime.native import NativeModel

F32 = np.float32


def _fc(batch: int, k: int, o: int, act: int, seed: int) -> tuple[SingleOp, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((o, k)) * 0.3).astype(F32)
    b = rng.standard_normal(o).astype(F32)
    case = SingleOp("FULLY_CONNECTED", [Spec("x", (batch, k)), Spec.const("w", w),
                                        Spec.const("b", b)],
                    [Spec("y", (batch, o))],
                    options=options("FullyConnectedOptions", fusedActivationFunction=act))
    return case, rng.standard_normal((batch, k)).astype(F32)


def _outputs(tmp_path: Path, case: SingleOp, x: np.ndarray, isa: str,
             monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict, list[np.ndarray]]:
    assert case.model is not None
    path = tmp_path / "fc.tflite"
    path.write_bytes(case.model)
    model = tk.load(path)
    art = codegen(model, tmp_path / "art", name="fc")
    build_for_isa(art, isa, monkeypatch)
    ref = run_model(model, {"x": x}).outputs
    got = []
    for threads in (1, 2, 3):
        m = NativeModel(art, threads=threads)
        try:
            got.append(m.invoke({"x": x})["y"])
        finally:
            m.close()
    return art.source.read_text(), ref, got


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("batch,k,o,act", [(1, 1024, 1000, 0), (3, 200, 700, 1),
                                           (2, 517, 291, 3)])
def test_large_fully_connected_splits_its_panels(tmp_path: Path, isa: str, batch: int, k: int,
                                                 o: int, act: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    case, x = _fc(batch, k, o, act, seed=k + o)
    source, ref, got = _outputs(tmp_path, case, x, isa, monkeypatch)
    assert "pool_.rows(0, " in source and "tk::conv2d_f32_panels(" in source
    want = case.run_litert([x])[0]
    tol = 1e-5 * float(np.abs(want).max())
    assert float(np.abs(ref["y"] - want).max()) <= tol
    assert float(np.abs(got[0] - want).max()) <= tol
    for other in got[1:]:
        np.testing.assert_array_equal(got[0], other)


def test_small_fully_connected_stays_on_the_calling_thread(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    case, x = _fc(1, 16, 24, 0, seed=3)
    source, ref, got = _outputs(tmp_path, case, x, ISAS[0], monkeypatch)
    assert "tk::fully_connected_f32_packed(" in source and "conv2d_f32_panels" not in source
    np.testing.assert_allclose(got[0], ref["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[0], got[1])
