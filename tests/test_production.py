"""The production models of sample_models/production (MediaPipe's own .tflite files: sparse and
float16 weights, MediaPipe custom ops) through every verb: each loads, runs in the reference
runtime within 1e-5 (of the output's largest magnitude) of LiteRT where LiteRT runs it, compiles
and runs as the reference does, partitions without fragmenting, generates native code that
builds and matches, and joins at 100 %. A sparse model written back by ``tk.save`` gives LiteRT
the very same outputs.

The artifacts are built once, together (one translation unit, ``-O1``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import litert_run

import toolkit as tk
from toolkit.generator import Artifact
from toolkit.generator.build import build_bundle
from toolkit.runtime.native import run_native

PROD = Path(__file__).resolve().parent.parent / "sample_models" / "production"
MANIFEST = json.loads((PROD / "manifest.json").read_text())
STEMS = [Path(m["file"]).stem for m in MANIFEST["models"]]
#: LiteRT refuses this one: its custom ops are not in LiteRT (nor in its XNNPACK delegate)
NOT_IN_LITERT = {"face_landmark_with_attention"}
#: the custom op only XNNPACK's delegate runs (LiteRT's builtin resolver lacks it)
NEEDS_XNNPACK = {"selfie_segmentation"}


def _inputs(model: tk.Model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t.name: rng.uniform(-1, 1, t.shape).astype(np.float32) for t in model.graph.inputs}


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    assert sorted(got) == sorted(want), what
    for k, w in want.items():
        g = np.asarray(got[k])
        assert g.shape == w.shape and g.dtype == w.dtype, (what, k)
        tol = 1e-5 * max(float(np.abs(w).max()), 1e-30)
        assert float(np.abs(g - w).max()) <= tol, (what, k, float(np.abs(g - w).max()), tol)


@pytest.fixture(scope="module")
def models() -> dict[str, tk.Model]:
    return {s: tk.load(PROD / f"{s}.tflite") for s in STEMS}


@pytest.fixture(scope="module")
def artifacts(models: dict[str, tk.Model], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, Artifact]:
    root = tmp_path_factory.mktemp("production")
    arts = {s: tk.codegen(m, root / s, name=s) for s, m in models.items()}
    build_bundle([(a.out_dir, a.name, a.library.name) for a in arts.values()],
                 root / "bundle", opt="-O1")
    return arts


def test_the_files_are_the_manifests() -> None:
    import hashlib

    for m in MANIFEST["models"]:
        data = (PROD / m["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == m["sha256"], m["file"]
    assert sum((PROD / m["file"]).stat().st_size for m in MANIFEST["models"]) < 5_000_000


@pytest.mark.parametrize("stem", STEMS)
def test_loads_with_the_manifests_ops(models: dict[str, tk.Model], stem: str) -> None:
    m = models[stem]
    entry = next(e for e in MANIFEST["models"] if e["file"] == f"{stem}.tflite")
    kinds: dict[str, int] = {}
    for op in m.graph.ops:
        kinds[op.kind] = kinds.get(op.kind, 0) + 1
    assert kinds == entry["ops"]
    sparse = [t for t in m.graph.tensors if t.extra.get("sparsity") is not None]
    assert len(sparse) == entry["sparse_tensors"]


@pytest.mark.parametrize("stem", [s for s in STEMS if s not in NOT_IN_LITERT | NEEDS_XNNPACK])
def test_reference_runtime_matches_litert(models: dict[str, tk.Model], stem: str) -> None:
    m = models[stem]
    x = _inputs(m)
    _close(tk.run(m, x).outputs, litert_run(PROD / f"{stem}.tflite", x), stem)


def test_segmentation_matches_litert_with_xnnpack(models: dict[str, tk.Model],
                                                  tmp_path: Path) -> None:
    """Only XNNPACK's delegate runs Convolution2DTransposeBias in LiteRT; its reordered sums
    move the logits by a few ulps, which the final LOGISTIC turns into large relative
    differences of probabilities near 0. So: the probabilities within 1e-5 (absolute: they
    are probabilities), and the logits (the model without its LOGISTIC, written by tk.save)
    within 1e-5 of their largest magnitude."""
    from toolkit.compiler.copy_model import copy_model

    m = models["selfie_segmentation"]
    x = _inputs(m)
    want = litert_run(PROD / "selfie_segmentation.tflite", x, resolver="AUTO")
    got = tk.run(m, x).outputs
    np.testing.assert_allclose(got["activation_10"], want["activation_10"], rtol=0, atol=1e-5)
    logits = copy_model(m)
    g = logits.graph
    last = g.ops[-1]
    assert last.type == "LOGISTIC"
    g.outputs[:] = [last.inputs[0]]
    g.remove(last, "the logits are compared")
    path = tk.save(logits, tmp_path / "logits.tflite")
    _close(tk.run(logits, x).outputs, litert_run(path, x, resolver="AUTO"), "logits")


def test_litert_refuses_the_attention_model_without_its_ops() -> None:
    with pytest.raises(RuntimeError, match="Landmarks2TransformMatrix"):
        litert_run(PROD / "face_landmark_with_attention.tflite", resolver="AUTO")


@pytest.mark.parametrize("stem", STEMS)
def test_compiled_runs_as_the_model(models: dict[str, tk.Model], stem: str) -> None:
    m = models[stem]
    x = _inputs(m, seed=1)
    compiled = tk.compile(m)
    kinds = {op.type for op in compiled.model.graph.ops}
    assert not kinds & {"DENSIFY", "DEQUANTIZE"}  # weights folded into constants
    _close(tk.run(compiled, x).outputs, tk.run(m, x).outputs, stem)


@pytest.mark.parametrize("stem", STEMS)
def test_partition_follows_the_compute_ops(models: dict[str, tk.Model], stem: str) -> None:
    m = models[stem]
    # a rule that matches no op: one part, not one per weight DEQUANTIZE, and a warning
    with pytest.warns(UserWarning, match=r"\[OPCODE\] SVDF matches no op of the model"):
        none = tk.partition(m, {"partition": {"backends": "cpu,npu", "default": "cpu",
                                              "comply": "opcode"}, "OPCODE": {"SVDF": "npu"}})
    assert len(none.parts) == 1
    # convolutions on the NPU: every weight op sits in the part of the op reading it
    spec = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
            "OPCODE": {"CONV_2D": "npu", "DEPTHWISE_CONV_2D": "npu"}}
    result = tk.partition(m, spec)
    part_of = {i: p.index for p in result.parts for i in p.op_indices}
    ops = m.graph.ops
    weight_ops = [i for i, op in enumerate(ops) if op.type in ("DEQUANTIZE", "DENSIFY")
                  and all(t is not None and t.data is not None for t in op.inputs)]
    for i in weight_ops:
        readers = [ops.index(c) for t in ops[i].outputs for c in t.consumers]
        assert part_of[i] == part_of[readers[0]], ops[i].name
    compute = [op for op in ops if op.type not in ("DEQUANTIZE", "DENSIFY")]
    assert len(result.parts) <= len(compute)
    x = _inputs(m, seed=2)
    _close(tk.run(result, x).outputs, tk.run(m, x).outputs, f"{stem} partitioned")


@pytest.mark.parametrize("stem", STEMS)
def test_native_matches_and_joins(models: dict[str, tk.Model], artifacts: dict[str, Artifact],
                                  stem: str) -> None:
    m, art = models[stem], artifacts[stem]
    assert art.built
    x = _inputs(m, seed=3)
    got, trace = run_native(art, x, trace=True, repeat=2)
    _close(got, tk.run(m, x).outputs, f"{stem} native")
    assert trace is not None
    att = tk.trace_join(trace, art)
    att.check()
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0


@pytest.mark.parametrize("stem", STEMS)
def test_native_threads_give_the_same_bits(models: dict[str, tk.Model],
                                           artifacts: dict[str, Artifact], stem: str) -> None:
    x = _inputs(models[stem], seed=4)
    one = run_native(artifacts[stem], x, threads=1).outputs
    for threads in (2, 3):
        got = run_native(artifacts[stem], x, threads=threads).outputs
        assert sorted(got) == sorted(one)
        for k, v in one.items():
            np.testing.assert_array_equal(got[k], v, err_msg=f"{stem} {k}, {threads} threads")


@pytest.mark.parametrize("stem", STEMS)
def test_reference_trace_joins_fully(models: dict[str, tk.Model], stem: str) -> None:
    m = models[stem]
    r = tk.run(m, _inputs(m), trace=True)
    att = tk.trace_join(r.trace, m)
    att.check()
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0
    layers = {layer for op in m.graph.ops for o in op.origins for layer in m.origin(o).layers}
    assert set(att.by_layer()["layer"]) <= layers


def test_sparse_model_round_trips_bit_identically(models: dict[str, tk.Model],
                                                  tmp_path: Path) -> None:
    src = PROD / "face_detection_full_range_sparse.tflite"
    out = tk.save(models["face_detection_full_range_sparse"], tmp_path / "again.tflite")
    again = tk.load(out)
    sparse = [t for t in again.graph.tensors if t.extra.get("sparsity") is not None]
    assert len(sparse) == 46
    x = _inputs(again, seed=4)
    want = litert_run(src, x)
    got = litert_run(out, x)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    first = models["face_detection_full_range_sparse"]
    for a, b in zip(first.graph.tensors, again.graph.tensors, strict=True):
        if a.extra.get("sparsity") is not None:
            np.testing.assert_array_equal(a.extra["sparse_values"], b.extra["sparse_values"])
            np.testing.assert_array_equal(a.data, b.data)
