"""A loaded artifact stays loaded: ``tk.run(artifact, ...)`` reuses one opened model per
artifact and thread, ``tk.session(artifact)`` calls it with preallocated outputs, inputs are
checked and read in place; threads split the large ops with the same results.

The sample CNNs (float32 and int8, written by the TFLite converter) and the zoo's MobileNet
v1 are generated, built (``-O1``) and compared with the reference runtime and LiteRT.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from support import SAMPLES, litert_run

import toolkit as tk
from toolkit.errors import RuntimeInputError, ToolkitError
from toolkit.generator import Artifact, codegen
from toolkit.generator.build import build_bundle
from toolkit.runtime.interpreter import run_model
from toolkit.runtime.native import NativeModel, open_native
from toolkit.runtime.static_shapes import fix_free_dims

STEMS = ["cnn", "cnn_int8"]


@pytest.fixture(scope="module")
def arts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Artifact]:
    root = tmp_path_factory.mktemp("session")
    out = {}
    for stem in STEMS:
        out[stem] = codegen(SAMPLES / f"{stem}.tflite", root / stem, name=stem)
    # a MobileNet (64x64 input, converter-written), whose large ops split across threads
    mobilenet = fix_free_dims(tk.load(SAMPLES / "zoo" / "mobilenet_v1.tflite"), 1)
    out["mobilenet"] = codegen(mobilenet, root / "mobilenet", name="mobilenet")
    out["mobilenet_two"] = codegen(mobilenet, root / "mobilenet_two", name="mobilenet_two",
                                   threads=2)
    build_bundle([(a.out_dir, a.name, a.library.name) for a in out.values()], root / "bundle",
                 opt="-O1")
    return out


def _same(ref: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    """int8 bit-exact; float32 within 1e-5 of the output's largest magnitude."""
    assert ref.keys() == out.keys()
    for k, r in ref.items():
        assert out[k].dtype == r.dtype and out[k].shape == r.shape, k
        if r.dtype == np.int8:
            np.testing.assert_array_equal(out[k], r, err_msg=k)
        else:
            assert float(np.abs(out[k] - r).max()) <= 1e-5 * max(float(np.abs(r).max()), 1e-30)


@pytest.mark.parametrize("stem", STEMS)
def test_session_reads_inputs_in_place_and_fills_the_same_outputs(arts: dict[str, Artifact],
                                                                  stem: str) -> None:
    art = arts[stem]
    session = tk.session(art)
    x = NativeModel(art).random_inputs(seed=3)[art.input_names[0]]
    first = session(x)
    _same(run_model(tk.load(SAMPLES / f"{stem}.tflite"), [x]).outputs, first)
    lite = litert_run(SAMPLES / f"{stem}.tflite", [x])
    _same({k: lite[k] for k in first}, first)
    kept = {k: v.copy() for k, v in first.items()}
    # the same array changed in place: the next call reads its new values
    y = NativeModel(art).random_inputs(seed=4)[art.input_names[0]]
    x[...] = y
    second = session(x)
    assert second is first  # the same dict of the same arrays, overwritten
    _same(run_model(tk.load(SAMPLES / f"{stem}.tflite"), [y]).outputs, second)
    assert any(not np.array_equal(kept[k], second[k]) for k in kept)
    # by name, and a non-contiguous view (copied first) give the same values
    _same({k: v.copy() for k, v in second.items()}, session({art.input_names[0]: y}))
    flipped = np.ascontiguousarray(y[:, ::-1])[:, ::-1]
    assert not flipped.flags.c_contiguous
    _same({k: v.copy() for k, v in second.items()}, session(flipped))


def test_session_refuses_wrong_inputs(arts: dict[str, Artifact]) -> None:
    art = arts["cnn_int8"]
    session = tk.session(art)
    x = NativeModel(art).random_inputs(seed=1)[art.input_names[0]]
    with pytest.raises(RuntimeInputError, match="dtype") as e:
        session(x.astype(np.float32))
    assert e.value.fix
    with pytest.raises(RuntimeInputError, match="shape"):
        session(x[:, :-1])
    with pytest.raises(RuntimeInputError, match="got 2 input"):
        session(x, x)
    with pytest.raises(RuntimeInputError, match="unknown input"):
        session({"nope": x})
    session(x)  # still usable


def test_tk_run_keeps_one_opened_model_per_artifact_and_thread(arts: dict[str, Artifact]
                                                               ) -> None:
    art = arts["cnn_int8"]
    x = NativeModel(art).random_inputs(seed=2)
    a = tk.run(art, x).outputs
    model = open_native(art)
    b = tk.run(art, x).outputs
    assert open_native(art) is model and len(art.opened) == 1
    _same(a, b)
    assert all(a[k] is not b[k] for k in a)  # tk.run returns arrays of their own
    other: list[NativeModel] = []
    t = threading.Thread(target=lambda: other.append(open_native(art)))
    t.start()
    t.join()
    assert other[0] is not model and len(art.opened) == 2
    # a traced run on the kept model, then an untraced one: tracing goes off again
    _, trace = tk.run(art, x, trace=True, repeat=2)
    assert trace is not None and len(trace) == 2 * len(art.manifest["steps"])
    recorded = model.events()[0].size
    _same(a, tk.run(art, x).outputs)
    assert model.events()[0].size == recorded  # tracing is off again
    # by directory: kept too, opened again when the library is written again
    by_dir = open_native(art.out_dir)
    assert open_native(art.out_dir) is by_dir
    art.build(opt="-O1")
    assert not art.opened
    assert open_native(art.out_dir) is not by_dir


def test_threads_give_the_same_bits(arts: dict[str, Artifact]) -> None:
    two = arts["mobilenet_two"]
    assert two.manifest["threads"] == 2
    assert two.source.read_text().count("pool_.rows(") >= 10
    model = NativeModel(two)
    assert model.threads == 2
    x = model.random_inputs(seed=6)
    want = tk.run(arts["mobilenet"], x, threads=1).outputs
    _same(run_model(arts["mobilenet"].model, x).outputs, want)
    for threads in (2, 1, 2):
        got = tk.run(two, x, threads=threads).outputs
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    with pytest.raises(ToolkitError, match="threads") as e:
        model.set_threads(0)
    assert e.value.fix
    with pytest.raises(ToolkitError, match="threads"):
        codegen(SAMPLES / "cnn.tflite", Path(two.out_dir).parent / "bad", threads=0)


def test_cli_run_threads(arts: dict[str, Artifact], tmp_path: Path) -> None:
    from toolkit.cli import main

    art = arts["mobilenet"]
    x = NativeModel(art).random_inputs(seed=7)
    np.savez(tmp_path / "in.npz", **x)
    outs = {}
    for threads in ("1", "2"):
        f = tmp_path / f"out{threads}.npz"
        assert main(["run", str(art.out_dir), "--inputs", str(tmp_path / "in.npz"),
                     "--threads", threads, "--outputs", str(f)]) == 0
        outs[threads] = dict(np.load(f))
    _same(run_model(art.model, x).outputs, outs["1"])
    for k, v in outs["1"].items():
        np.testing.assert_array_equal(outs["2"][k], v, err_msg=k)
    assert main(["run", str(SAMPLES / "cnn.tflite"), "--threads", "1"]) == 0


def test_convolutions_of_few_output_channels(tmp_path: Path) -> None:
    """Float convolutions of at most 8 output channels and few input channels (taps read in
    place, tk::conv2d_f32_direct): strided, dilated, SAME and VALID, one to eight channels,
    against the reference runtime and LiteRT, on one thread and two (the same bits)."""
    from support import litert_run

    from toolkit.builder import ModelBuilder

    rng = np.random.default_rng(0)
    mb = ModelBuilder("few")
    x = mb.input("x", [2, 21, 19, 3])

    def conv(t: tk.Tensor, o: int, k: int, **kw: object) -> tk.Tensor:
        w = mb.const(f"w{o}_{k}", rng.standard_normal((o, k, k, t.shape[3])).astype(np.float32))
        b = mb.const(f"b{o}_{k}", rng.standard_normal(o).astype(np.float32))
        return mb.conv2d(t, w, b, name=f"conv{o}_{k}", **kw)  # type: ignore[arg-type]

    y = conv(x, 8, 3, stride=2, activation="RELU6")
    y = conv(y, 5, 3, padding="VALID", dilation=2)
    y = conv(y, 1, 3, activation="RELU")
    mb.output(y)
    mb.output(conv(x, 3, 1))
    model = mb.build()
    path = tmp_path / "few.tflite"
    tk.save(model, path)
    art = codegen(tk.load(path), tmp_path / "art", name="few")
    assert art.source.read_text().count("tk::conv2d_f32_direct(") == 3  # not the pointwise one
    art.build(opt="-O1")
    inputs = {"x": rng.uniform(-1, 1, (2, 21, 19, 3)).astype(np.float32)}
    one = tk.run(art, inputs, threads=1).outputs
    _same(run_model(tk.load(path), inputs).outputs, one)
    _same(litert_run(path, [inputs["x"]]), one)
    two = tk.run(art, inputs, threads=2).outputs
    for k, v in one.items():
        np.testing.assert_array_equal(two[k], v, err_msg=k)
