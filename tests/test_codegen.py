"""The native backend: generate, build and run C++ artifacts; compare with the reference
runtime and LiteRT; join the native trace; bad input.

Builds use ``-O1``; the op library is compiled once per flags into the object cache (see
``toolkit.generator.build``), and the sample artifacts are compiled together as one bundle (one
translation unit), so the headers are parsed once.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pytest
from support import ALL_TFLITE, SAMPLES, int8_lstm_model, litert_run

import toolkit as tk
from toolkit.compiler import CompiledModel, compile_model
from toolkit.errors import RuntimeInputError, ToolkitError, UnsupportedOpError
from toolkit.generator import Artifact, BuildError, codegen, load_artifact
from toolkit.generator.analysis import plan_arena
from toolkit.generator.build import build_bundle
from toolkit.generator.params import PARAMS_MAGIC, read_header
from toolkit.runtime.interpreter import Interpreter, run_model
from toolkit.runtime.native import NativeModel, run_native
from toolkit.trace import read_trace, trace_join

OPT = "-O1"
MODELS = [*ALL_TFLITE, SAMPLES / "Net_InstanceNorm_003.circle"]
REPEAT = 3


def run(model: object, inputs: object = None) -> dict[str, np.ndarray]:
    """The reference runtime's outputs."""
    return run_model(model, inputs).outputs


def _same(ref: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    """int8 bit-exact; float32 within 1e-5 of the output's largest magnitude."""
    assert ref.keys() == out.keys()
    for k, r in ref.items():
        o = out[k]
        assert o.dtype == r.dtype and o.shape == r.shape, k
        if r.dtype == np.int8:
            np.testing.assert_array_equal(o, r, err_msg=k)
        else:
            tol = 1e-5 * max(float(np.abs(r).max()), 1e-30)
            assert float(np.abs(o - r).max()) <= tol, k


def _check_join(trace: tk.EventTracer, model: object, steps: int) -> None:
    att = trace_join(trace, model)
    att.check()
    assert att.runs == REPEAT
    assert len(trace) == steps * REPEAT
    assert att.unattributed_ns == 0 and len(att.unattributed()) == 0
    assert att.attributed_ns == att.total_ns > 0
    assert int(att.by_layer()["total_ns"].sum()) == att.total_ns


def _name(path: Path, kind: str) -> str:
    return f"{path.stem}_{path.suffix[1:]}_{kind}"


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, Artifact]]:
    """Every sample, plain and compiled, generated and built into one bundle library."""
    root = tmp_path_factory.mktemp("samples")
    arts: dict[str, tuple[object, Artifact]] = {}
    for path in MODELS:
        model = tk.load(path)
        for kind, obj in (("plain", model), ("compiled", compile_model(model))):
            name = _name(path, kind)
            arts[name] = (obj, codegen(obj, root / name, name=name))
    striped = compile_model(tk.load(SAMPLES / "cnn.tflite"), target=tk.Target(buffer_bytes=4096))
    arts["cnn_striped"] = (striped, codegen(striped, root / "cnn_striped", name="cnn_striped"))
    build_bundle([(a.out_dir, a.name, a.library.name) for _, a in arts.values()],
                 root / "bundle", opt=OPT)
    return arts


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
@pytest.mark.parametrize("kind", ["plain", "compiled"])
def test_sample_generated_built_and_run(samples: dict[str, tuple[object, Artifact]],
                                        path: Path, kind: str) -> None:
    obj, art = samples[_name(path, kind)]
    assert art.built
    assert art.arena_bytes <= max(art.temporaries_bytes, 64) or art.temporaries_bytes == 0
    inputs = NativeModel(art).random_inputs(seed=1)
    ref = run(obj, inputs)
    out, trace = run_native(art, inputs, trace=True, repeat=REPEAT, warmup=1)
    _same(ref, out)
    _check_join(trace, obj, len(art.manifest["steps"]))
    frame = trace.to_frame()
    key = "op_index" if kind == "plain" else "command_id"
    assert frame["key"].tolist() == frame[key].tolist()
    if kind == "plain" and path.suffix == ".tflite":
        lite = litert_run(path, [inputs[n] for n in art.input_names])
        _same({k: lite[k] for k in out}, out)


def test_striped_compiled_model(samples: dict[str, tuple[object, Artifact]]) -> None:
    obj, art = samples["cnn_striped"]
    compiled = cast(CompiledModel, obj)
    stripes = [c for c in compiled.command_list if int(c.stripes) > 1]
    assert len(stripes) >= 8
    assert sum(s["rows"] is not None for s in art.manifest["steps"]) == len(stripes)
    inputs = NativeModel(art).random_inputs(seed=2)
    out, trace = run_native(art, inputs, trace=True, repeat=REPEAT)
    _same(run(compiled, inputs), out)
    _check_join(trace, compiled, len(compiled.command_list))
    assert trace.to_frame()["stripe"].max() >= 1


def test_arena_planning_never_overlaps_live_tensors() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        first = rng.integers(0, 20, n)
        tensors = [(int(rng.integers(1, 5000)), int(f), int(f + rng.integers(0, 6)))
                   for f in first]
        offsets, total = plan_arena(tensors)
        assert total <= sum(-(-s // 64) * 64 for s, _, _ in tensors)
        for i, (si, fi, li) in enumerate(tensors):
            assert offsets[i] % 64 == 0 and offsets[i] + si <= total
            for j, (sj, fj, lj) in enumerate(tensors[:i]):
                if not (li < fj or lj < fi):
                    assert offsets[i] + si <= offsets[j] or offsets[j] + sj <= offsets[i]


def test_arena_is_smaller_than_the_sum_on_a_chain(tmp_path: Path) -> None:
    art = codegen(tk.load(SAMPLES / "cnn.tflite"), tmp_path)
    assert art.arena_bytes < art.temporaries_bytes / 2


@pytest.mark.parametrize("kind", ["plain", "compiled"])
def test_a_native_trace_joins_against_its_artifact(samples: dict[str, tuple[object, Artifact]],
                                                   kind: str) -> None:
    """tk.trace_join(trace, artifact) joins against what the artifact was generated from;
    an artifact loaded from its folder does not know it and is refused with the fix."""
    obj, art = samples[_name(SAMPLES / "cnn.tflite", kind)]
    assert art.model is obj
    _, trace = tk.run(art, trace=True, repeat=2)
    got = tk.trace_join(trace, art)
    want = tk.trace_join(trace, obj)
    assert got.attributed_ns == want.attributed_ns == got.total_ns > 0
    pd.testing.assert_frame_equal(got.by_layer(), want.by_layer())
    loaded = load_artifact(art.out_dir)
    assert loaded.model is None
    with pytest.raises(ToolkitError, match="does not know the model") as err:
        tk.trace_join(trace, loaded)
    assert "tk.trace_join(trace, compiled)" in str(err.value)


@pytest.fixture(scope="module")
def cnn_int8(tmp_path_factory: pytest.TempPathFactory) -> Artifact:
    art = codegen(SAMPLES / "cnn_int8.tflite", tmp_path_factory.mktemp("cnn_int8"))
    art.build(opt=OPT)
    return art


def test_parameters_file_header_and_alignment(cnn_int8: Artifact) -> None:
    data = cnn_int8.params.read_bytes()
    head = read_header(data, str(cnn_int8.params))
    assert data[:8] == PARAMS_MAGIC
    assert head["size"] == len(data) and len(data) % 16 == 0
    assert head["model_hash"] == cnn_int8.manifest["model_hash"]
    assert f'"{head["model_hash"]}"' in cnn_int8.source.read_text()
    offsets = [int(x) for x in __import__("re").findall(r"P<\w+>\((\d+)\)",
                                                         cnn_int8.source.read_text())]
    assert offsets and all(o % 64 == 0 and o >= 64 for o in offsets)


def test_mismatching_or_missing_parameters_are_refused(cnn_int8: Artifact,
                                                        tmp_path: Path) -> None:
    other = codegen(SAMPLES / "cnn.tflite", tmp_path / "cnn")
    with pytest.raises(ToolkitError, match="parameters file is for model"):
        NativeModel(cnn_int8, params=_same_size_other(cnn_int8, tmp_path))
    with pytest.raises(ToolkitError, match="model expects"):
        NativeModel(cnn_int8, params=other.params)
    with pytest.raises(ToolkitError, match="cannot open the parameters file"):
        NativeModel(cnn_int8, params=tmp_path / "missing.params")
    bad = tmp_path / "bad.params"
    bad.write_bytes(b"NOTPARAM" + bytes(100))
    with pytest.raises(ToolkitError, match="bad magic"):
        NativeModel(cnn_int8, params=bad)


def _same_size_other(art: Artifact, tmp_path: Path) -> Path:
    """The artifact's parameters with another model hash in the header."""
    data = bytearray(art.params.read_bytes())
    data[24:56] = b"0" * 32
    p = tmp_path / "other_hash.params"
    p.write_bytes(bytes(data))
    return p


def test_wrong_input_sizes_through_the_c_abi(cnn_int8: Artifact) -> None:
    m = NativeModel(cnn_int8)
    buf = np.zeros(7, np.int8)
    with pytest.raises(RuntimeInputError, match="got 7 bytes; the model expects"):
        m.set_raw(0, buf.ctypes.data, buf.nbytes)
    with pytest.raises(RuntimeInputError, match="does not exist"):
        m.set_raw(5, buf.ctypes.data, buf.nbytes)
    name = cnn_int8.input_names[0]
    with pytest.raises(RuntimeInputError, match="shape"):
        run_native(cnn_int8, {name: np.zeros((1, 2), np.int8)})
    with pytest.raises(RuntimeInputError, match="dtype"):
        run_native(cnn_int8, {name: np.zeros(m.random_inputs()[name].shape, np.float32)})
    m.close()


def test_tracing_is_off_by_default(cnn_int8: Artifact) -> None:
    m = NativeModel(cnn_int8)
    m.set_inputs(m.random_inputs())
    m.run(3)
    assert len(m.events()[0]) == 0
    m.enable_trace(len(m.keys))
    m.run(2)  # one inference fits: the second is dropped, and said so
    with pytest.raises(ToolkitError, match="dropped"):
        m.events()
    m.close()


def test_build_failure_shows_the_compiler_message(tmp_path: Path) -> None:
    art = codegen(SAMPLES / "two_branch.tflite", tmp_path)
    art.library.write_bytes(b"an earlier build")
    with art.source.open("a") as f:
        f.write("\nthis is not C++;\n")
    with pytest.raises(BuildError, match="the C\\+\\+ compiler failed") as err:
        art.build(opt=OPT)
    assert "two_branch.cpp" in str(err.value)
    assert not art.library.exists() and not art.built
    assert not list(tmp_path.glob(".build-*"))


def test_no_compiler_names_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    art = codegen(SAMPLES / "two_branch.tflite", tmp_path)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BuildError, match="apt-get install g\\+\\+"):
        art.build()
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(BuildError, match="CXX"):
        art.build()


def test_unsupported_op_is_named(tmp_path: Path) -> None:
    model = tk.load(SAMPLES / "two_branch.tflite")
    op = model.graph.ops[0]
    op.type = "GATHER_ND"
    with pytest.raises(UnsupportedOpError, match="GATHER_ND"):
        codegen(model, tmp_path)
    assert not list(tmp_path.glob("*.cpp"))


def test_standalone_main_with_the_plain_compiler_command(tmp_path: Path) -> None:
    compiled = compile_model(tk.load(SAMPLES / "transformer.tflite"))
    art = codegen(compiled, tmp_path, name="transformer")
    cmd = art.compiler_command().replace("-O2", "-O0").split()
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    inputs = NativeModel(art).random_inputs(seed=3)
    files = []
    for i, name in enumerate(art.input_names):
        p = tmp_path / f"in{i}.bin"
        p.write_bytes(np.ascontiguousarray(inputs[name]).tobytes())
        files.append(str(p))
    (tmp_path / "out").mkdir()
    proc = subprocess.run([str(tmp_path / "transformer_main"), "transformer.params", *files,
                           "--out", "out", "--repeat", str(REPEAT), "--trace", "trace.csv"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ref = run(compiled, inputs)
    for o in art.manifest["outputs"]:
        got = np.fromfile(tmp_path / "out" / f"{o['cname']}.bin", dtype=o["dtype"])
        _same({o["name"]: ref[o["name"]]}, {o["name"]: got.reshape(o["shape"])})
    trace = read_trace(tmp_path / "trace.csv")
    assert trace.events["key_kind"].astype(str).unique().tolist() == ["command_id"]
    _check_join(trace, compiled, len(compiled.command_list))
    bad = subprocess.run([str(tmp_path / "transformer_main"), "missing.params", *files],
                         cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and "cannot open the parameters file" in bad.stderr
    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 3)
    bad = subprocess.run([str(tmp_path / "transformer_main"), "transformer.params",
                          str(short)], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 2 and "3 bytes, the model expects" in bad.stderr


def test_load_artifact_and_run_by_directory(cnn_int8: Artifact) -> None:
    again = load_artifact(cnn_int8.out_dir)
    assert again.manifest == cnn_int8.manifest
    res = run_native(cnn_int8.out_dir)
    assert res.trace is None
    want = run(tk.load(SAMPLES / "cnn_int8.tflite"))  # the same random inputs, seed 0
    _same(want, res.outputs)
    for target in (cnn_int8, cnn_int8.out_dir, str(cnn_int8.out_dir)):  # the front door
        outputs, trace = tk.run(target, trace=True, repeat=2, warmup=1)
        _same(want, outputs)
        assert trace.to_frame()["run"].nunique() == 2  # same random inputs, seed 0
    assert isinstance(ctypes.CDLL(str(cnn_int8.library)), ctypes.CDLL)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_cmake_configures_the_artifact(tmp_path: Path) -> None:
    """CMake accepts the generated CMakeLists.txt and makes both targets (compiling them is
    what the plain compiler command test does)."""
    art = codegen(SAMPLES / "two_branch.tflite", tmp_path / "src")
    subprocess.run(["cmake", "-S", str(art.out_dir), "-B", str(tmp_path / "b")], check=True,
                   capture_output=True)
    makefile = (tmp_path / "b" / "Makefile").read_text()
    assert "two_branch_main" in makefile and "two_branch" in makefile


def test_cli_compile_target_cpp_run_and_join(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    out = tmp_path / "art"
    assert main(["compile", str(SAMPLES / "cnn_int8.tflite"), "-o", str(out),
                 "--target", "cpp"]) == 0
    load_artifact(out).build(opt=OPT)
    csv = tmp_path / "trace.csv"
    assert main(["run", str(out), "--repeat", str(REPEAT), "--csv", str(csv)]) == 0
    assert "14 commands -> C++ artifact" in capsys.readouterr().out
    compiled = tk.compiler.load_compiled(out)
    _check_join(read_trace(csv), compiled, len(compiled.command_list))


def test_partition_chain_with_parts_on_the_cpp_backend(tmp_path: Path) -> None:
    from toolkit.formats.part_file import PartSpec
    from toolkit.partitioner import partition
    from toolkit.runtime.chain import run_connection
    from toolkit.runtime.native import native_runner

    model = tk.load(SAMPLES / "cnn.tflite")
    spec = PartSpec(["cpu", "cpp"], "cpu", "opcode",
                    opcode={"CONV_2D": "cpp", "DEPTHWISE_CONV_2D": "cpp"})
    result = partition(model, spec, work_path=tmp_path / "parts")
    conn = next((tmp_path / "parts").glob("*.conn.json"))
    backends = {p.backend for p in result.parts}
    assert backends == {"cpu", "cpp"}
    inputs = Interpreter(model).random_inputs(4)
    runner = native_runner(tmp_path / "native", backends=["cpp"], opt=OPT)
    got = run_connection(conn, inputs, run=runner).outputs
    _same(run(model, inputs), got)
    built = sorted((tmp_path / "native").glob("part*/libpart*.so"))
    assert len(built) == sum(p.backend == "cpp" for p in result.parts)


def _int8_edge_model(seed: int) -> tk.Model:
    """An int8 model whose shapes reach every rounding path of the kernels: 3 input channels
    (odd: the last channel pair is half empty), 20 output channels (a 16-wide block and a
    tail), depthwise over 20 channels (16 rounding upward, 4 as the scalar tail), MEAN over
    20 channels, an FC whose multiplier exceeds 1 (a left shift), broadcast ADD / MUL,
    average pooling, a table op and RELU6."""
    from toolkit.builder import ModelBuilder
    from toolkit.ir import Quantization as Q

    rng = np.random.default_rng(seed)
    i8 = np.int8

    def act(scale: float, zp: int) -> Q:
        return Q.make(scale, zp)

    def w8(shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(-127, 128, shape).astype(i8)

    mb = ModelBuilder("edge")
    x = mb.input("x", [1, 9, 7, 3], i8, quant=act(0.05, -3))
    wq = Q.make(rng.uniform(0.002, 0.01, 20).tolist(), [0] * 20, 0)
    c1 = mb.conv2d(x, mb.const("c1/w", w8((20, 3, 3, 3)), quant=wq),
                   mb.const("c1/b", rng.integers(-500, 500, 20).astype(np.int32),
                            quant=Q.make((0.05 * wq.scale).tolist(), [0] * 20, 0)),
                   stride=2, activation="RELU", name="c1", quant=act(0.04, -128))
    dq = Q.make(rng.uniform(0.005, 0.02, 20).tolist(), [0] * 20, 3)
    d1 = mb.depthwise_conv2d(c1, mb.const("d1/w", w8((1, 3, 3, 20)), quant=dq), None,
                             name="d1", quant=act(0.03, 5))
    a1 = mb.add(d1, mb.const("a1/c", w8((20,)), quant=act(0.02, 1)), name="a1",
                quant=act(0.06, -2))
    m1 = mb.mul(a1, c1, name="m1", quant=act(0.1, 0))
    p1 = mb.pool("AVERAGE_POOL_2D", m1, 2, 2, name="p1")
    r1 = mb.unary("RELU6", p1, name="r1", quant=act(0.03, -128))
    g1 = mb.mean(r1, [1, 2], keep_dims=True, name="g1", quant=act(0.01, 3))
    f1 = mb.fully_connected(mb.reshape(g1, [1, 20], name="flat"),
                            mb.const("f1/w", w8((6, 20)), quant=Q.make(0.05, 0)), None,
                            name="f1", quant=act(0.0002, 0))
    mb.output(mb.unary("LOGISTIC", f1, name="sig", quant=act(1 / 256, -128)))
    return mb.build()


@pytest.mark.parametrize("native", [True, False], ids=["host-isa", "portable"])
def test_int8_rounding_paths_bit_exact(tmp_path: Path, native: bool) -> None:
    """Bit-exact with the host's vector instructions (-march=native) and without them (the
    portable kernels a cross build gets)."""
    seed = 0
    model = _int8_edge_model(seed)
    kinds = {op.kind for op in model.graph.ops}
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MEAN", "LOGISTIC"} <= kinds
    art = codegen(model, tmp_path, name="edge")
    art.build(opt=OPT, native=native)
    m = NativeModel(art)
    for k in range(5):
        inputs = m.random_inputs(seed=10 * seed + k)
        m.set_inputs(inputs)
        m.run(1)
        ref = run(model, inputs)
        _same(ref, m.outputs())
        assert len(np.unique(next(iter(ref.values())))) > 1  # not all saturated
    m.close()


def test_regenerated_artifact_reloads_in_the_same_process(tmp_path: Path) -> None:
    first = codegen(SAMPLES / "cnn_int8.tflite", tmp_path, name="m")
    first.build(opt=OPT)
    a = NativeModel(first)
    other = codegen(SAMPLES / "tf" / "tf_cnn_int8.tflite", tmp_path, name="m")  # same name
    other.build(opt=OPT)
    b = NativeModel(other)  # the new library, not the one loaded above
    inputs = b.random_inputs(5)
    b.set_inputs(inputs)
    b.run(1)
    _same(run(tk.load(SAMPLES / "tf" / "tf_cnn_int8.tflite"), inputs), b.outputs())
    a.close()
    b.close()


def test_caffe_imported_nets(tmp_path: Path) -> None:
    """The networks the Caffe importer's tests build (convolutions with padding, LRN-free
    pooling, inception and residual blocks, squeeze-excitation, leaky ReLU, PAD, LOG ...),
    imported, generated and run natively, plain and compiled, in one bundle."""
    from caffe_nets import NETS

    arts: list[tuple[object, Artifact]] = []
    for name, make in NETS.items():
        make(False).save(tmp_path / f"{name}.prototxt", tmp_path / f"{name}.caffemodel")
        model = tk.load(tmp_path / f"{name}.prototxt", weights=tmp_path / f"{name}.caffemodel")
        for kind, obj in (("plain", model), ("compiled", compile_model(model))):
            arts.append((obj, codegen(obj, tmp_path / f"{name}_{kind}",
                                      name=f"{name}_{kind}")))
    build_bundle([(a.out_dir, a.name, a.library.name) for _, a in arts], tmp_path / "bundle",
                 opt=OPT)
    for obj, art in arts:
        res = run_native(art, trace=True, repeat=REPEAT)
        _same(run(obj), res.outputs)
        _check_join(res.trace, obj, len(art.manifest["steps"]))


def test_build_reuses_the_library_of_identical_code(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKIT_CODEGEN_CACHE", str(tmp_path / "cache"))
    first = codegen(SAMPLES / "cnn.tflite", tmp_path / "a", name="m")
    first.build(opt=OPT)
    (cached,) = (tmp_path / "cache" / "lib").glob("*.so")
    assert cached.read_bytes() == first.library.read_bytes()
    again = codegen(SAMPLES / "cnn.tflite", tmp_path / "b", name="m")
    again.build(opt=OPT)  # same code and flags: the cached library, no compiler run
    assert again.built and again.library.read_bytes() == cached.read_bytes()
    assert len(list((tmp_path / "cache" / "lib").glob("*.so"))) == 1
    inputs = NativeModel(again).random_inputs(2)
    _same(run(tk.load(SAMPLES / "cnn.tflite"), inputs), run_native(again, inputs).outputs)
    other = codegen(SAMPLES / "cnn_int8.tflite", tmp_path / "c", name="m")
    other.build(opt=OPT)  # other code: compiled, a second cache entry
    assert len(list((tmp_path / "cache" / "lib").glob("*.so"))) == 2
    other.build(opt=OPT, cache=False)  # compiled again, the cache untouched
    assert other.built and len(list((tmp_path / "cache" / "lib").glob("*.so"))) == 2


def test_invoke_is_one_inference(samples: dict[str, tuple[object, Artifact]]) -> None:
    obj, art = samples[_name(SAMPLES / "cnn_int8.tflite", "plain")]
    m = NativeModel(art)
    inputs = m.random_inputs(seed=4)
    want = run(obj, inputs)
    _same(want, m.invoke(inputs))
    _same(want, m.invoke(list(inputs.values())))  # a list in input order
    (name,) = inputs
    with pytest.raises(RuntimeInputError, match="dtype"):
        m.invoke({name: inputs[name].astype(np.float32)})
    with pytest.raises(RuntimeInputError, match="missing"):
        m.invoke({})
    flipped = np.ascontiguousarray(inputs[name][:, ::-1])[:, ::-1]  # a non-contiguous view
    assert not flipped.flags.c_contiguous
    _same(want, m.invoke({name: flipped}))
    m.close()


def test_cache_key_follows_what_the_compiler_targets() -> None:
    """Objects built for one CPU (``-march=native``) are never reused for another: the cache
    key holds the macros the compiler predefines for the flags."""
    from toolkit.generator.build import _target_id, find_compiler

    cxx = find_compiler()
    a = _target_id(cxx, ("-std=c++17", "-DTOOLKIT_PROBE=1"))
    b = _target_id(cxx, ("-std=c++17", "-DTOOLKIT_PROBE=2"))
    assert "#define TOOLKIT_PROBE 1" in a and "#define TOOLKIT_PROBE 2" in b
    assert "__cplusplus" in a


def _hybrid_fc_model(asymmetric: bool, per_channel: bool) -> tk.Model:
    """Hybrid FULLY_CONNECTED (float32 input, int8 weights): one keeping the input's leading
    dimensions with a bias and RELU (21 outputs: vector blocks and a tail), one flattening to
    rows without a bias (21 inputs: an odd count)."""
    from toolkit.builder import ModelBuilder
    from toolkit.ir import Quantization as Q

    rng = np.random.default_rng(7)
    mb = ModelBuilder("hybrid")
    x = mb.input("x", [2, 3, 24])

    def weights(name: str, o: int, k: int) -> tk.Tensor:
        scale = rng.uniform(0.002, 0.02, o).tolist() if per_channel else [0.01]
        q = Q.make(scale, [0] * len(scale), 0)
        return mb.const(name, rng.integers(-127, 128, (o, k)).astype(np.int8), quant=q)

    h = mb.fully_connected(x, weights("fc1/w", 21, 24),
                           mb.const("fc1/b", rng.uniform(-1, 1, 21).astype(np.float32)),
                           activation="RELU", keep_num_dims=True, name="fc1")
    y = mb.fully_connected(h, weights("fc2/w", 5, 21), None, name="fc2")
    for op in mb.graph.ops:
        op.options.asymmetricQuantizeInputs = asymmetric
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("asymmetric", [False, True], ids=["symmetric", "asymmetric"])
def test_hybrid_fully_connected_matches_the_reference_and_litert(
        bundled: dict[str, tuple[tk.Model, Artifact]], asymmetric: bool, tmp_path: Path) -> None:
    """Rows quantized at run time: all signs, a row of zeros (scale 1), a row without
    negative values (asymmetric: the zero point at -128) and rows meeting ties, which round
    away from zero."""
    from toolkit.formats.flatbuffer_write import write_model

    results = []
    for per_channel in (False, True):
        model, art = bundled[f"hybrid_{int(asymmetric)}{int(per_channel)}"]
        rng = np.random.default_rng(11)
        x = rng.uniform(-3, 3, (2, 3, 24)).astype(np.float32)
        x[0, 1] = 0
        x[1, 2] = np.abs(x[1, 2])
        out = run_native(art, {"x": x}).outputs
        _same(run(model, {"x": x}), out)
        lite = litert_run(bytes(write_model(model, "tflite")), [x])
        _same({k: lite[k] for k in out}, out)
        (y,) = out.values()
        assert np.unique(y).size > 5
        results.append(y)
        # rows whose quantization meets ties (x.5 exactly), which round away from zero
        # before the zero point is added: symmetric with range 127 (scale 1), asymmetric over
        # [-127.5, 127.5] (scale 1, zero point -0.5 -> -1) and [-128.5, 126.5] (0.5 -> 1)
        halves = np.arange(-10.5, 11, 1.0, dtype=np.float32)
        x[0, 0] = np.concatenate([[127, -127], halves])
        x[1, 0] = np.concatenate([[127.5, -127.5], halves])
        x[1, 1] = np.concatenate([[126.5, -128.5], halves])
        out = run_native(art, {"x": x}).outputs
        _same(run(model, {"x": x}), out)
        lite = litert_run(bytes(write_model(model, "tflite")), [x])
        _same({k: lite[k] for k in out}, out)
    assert not np.array_equal(results[0], results[1])  # per-channel scales make a difference
    # the portable kernel (no vector instructions) gives the same values
    portable = codegen(model, tmp_path / "portable", name="hybrid_portable")
    portable.build(opt=OPT, native=False)
    np.testing.assert_array_equal(run_native(portable, {"x": x}).outputs["fc2"],
                                  run_native(art, {"x": x}).outputs["fc2"])


LSTM_CONFIGS: list[dict[str, object]] = [
    {}, {"time_major": True, "cifg": True}, {"cell_log2": -15, "clip": 3.0},
    {"peephole": True, "cifg": True, "time_major": True}, {"projection": 9, "proj_clip": 0.3},
    {"projection": 6, "peephole": True}, {"projection": 4}, {"layer_norm": True},
    {"layer_norm": True, "cifg": True, "peephole": True},
    {"layer_norm": True, "projection": 5, "time_major": True},
    {"cell_log2": -9, "batch": 1, "steps": 12}]


def _lstm_models() -> list[tk.Model]:
    """Integer LSTMs: batch- and time-major, CIFG, cell states of scale 2**-11, 2**-15
    (clipped) and 2**-9, peephole weights, projections (wider and clipped, as wide,
    narrower), layer norm (with CIFG and peepholes; with a projection); the last from a
    constant initial state."""
    models = [int8_lstm_model(2, **c) for c in LSTM_CONFIGS]  # type: ignore[arg-type]
    for i, dt, lim in ((18, np.int8, 128), (19, np.int16, 3000)):
        t = models[-1].graph.ops[0].inputs[i]
        assert t is not None
        t.is_variable = False  # a constant initial state
        t.data = np.random.default_rng(5).integers(-lim, lim, t.shape).astype(dt)
    return models


def test_int8_lstm_bit_exact_with_the_reference_and_litert(
        bundled: dict[str, tuple[tk.Model, Artifact]]) -> None:
    from toolkit.formats.flatbuffer_write import write_model

    for k in range(len(LSTM_CONFIGS)):
        model, art = bundled[f"lstm{k}"]
        m = NativeModel(art)
        for seed in range(3):
            inputs = m.random_inputs(seed=seed)
            ref = run(model, inputs)
            _same(ref, m.invoke(inputs))
            (y,) = ref.values()
            assert np.unique(y).size > 20
            if k < len(LSTM_CONFIGS) - 1:  # LiteRT starts from reset states
                lite = litert_run(bytes(write_model(model, "tflite")), inputs)
                _same(lite, ref)
        m.close()


def test_int16_logistic_and_tanh_of_the_op_library_are_the_reference_s(tmp_path: Path) -> None:
    """Every int16 value through the C++ gemmlowp logistic (Q3.12) and tanh (Q0.15 to Q6.9)
    equals the NumPy port the reference runtime uses."""
    from toolkit.fixed_point import int16_logistic, int16_tanh
    from toolkit.generator.build import build_library
    from toolkit.generator.generate import copy_library

    copy_library(tmp_path)
    (tmp_path / "probe.cpp").write_text(
        '#include "tk_ops.h"\n'
        'extern "C" void probe(int bits, int32_t* out) {\n'
        "  for (int32_t a = -32768; a < 32768; ++a)\n"
        "    out[a + 32768] = bits < 0 ? tk::logistic_q3_12(a) : tk::tanh_q16(a, bits);\n"
        "}\n")
    lib = ctypes.CDLL(str(build_library(tmp_path, "probe", "libprobe.so", opt=OPT)))
    a = np.arange(-32768, 32768, dtype=np.int64)
    out = np.zeros(65536, np.int32)
    ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    lib.probe(-1, ptr)
    np.testing.assert_array_equal(out, int16_logistic(a))
    for bits in range(7):
        lib.probe(bits, ptr)
        np.testing.assert_array_equal(out, int16_tanh(a, bits), err_msg=str(bits))


def _sequence_model(hybrid: bool) -> tk.Model:
    """UNIDIRECTIONAL_SEQUENCE_RNN (batch-major and time-major, from a reset state) and a
    UNIDIRECTIONAL_SEQUENCE_LSTM on [2, 6, 5] floats; with ``hybrid`` their weights are int8
    (per-tensor scales, the LSTM's input weights per channel) and the time-major RNN starts
    from a constant state."""
    from toolkit.builder import OPTIONS_CLASS, ModelBuilder
    from toolkit.ir import Quantization as Q

    rng = np.random.default_rng(4)
    mb = ModelBuilder("seq")
    x = mb.input("x", [2, 6, 5])

    def weight(name: str, shape: tuple[int, int], per_channel: bool = False) -> tk.Tensor:
        w = (0.4 * rng.standard_normal(shape)).astype(np.float32)
        if not hybrid:
            return mb.const(name, w)
        s = (np.abs(w).max(axis=1 if per_channel else None) / 127).reshape(-1)
        q = np.clip(np.round(w / (s[:, None] if per_channel else s[0])), -127, 127)
        return mb.const(name, q.astype(np.int8), quant=Q.make(s.tolist(), [0] * s.size, 0))

    def opts(name: str, **fields: object) -> object:
        o = OPTIONS_CLASS[name]()
        for k, v in fields.items():
            setattr(o, k, v)
        return o

    outs = []
    for k, tm in enumerate((False, True)):
        xin = mb.transpose(x, [1, 0, 2], name=f"tm{k}") if tm else x
        if tm and hybrid:  # LiteRT takes a variable state only
            state = mb.const(f"h{k}", rng.uniform(-1, 1, (2, 4)).astype(np.float32))
        else:
            state = mb.graph.add_tensor(f"h{k}", [2, 4], np.float32, is_variable=True)
        ins = [xin, weight(f"rnn{k}/w", (4, 5)), weight(f"rnn{k}/r", (4, 4)),
               mb.const(f"rnn{k}/b", rng.uniform(-0.5, 0.5, 4).astype(np.float32)), state]
        outs.append(mb.op("UNIDIRECTIONAL_SEQUENCE_RNN", ins, [*xin.shape[:2], 4],
                          name=f"rnn{k}", dtype=np.float32,
                          options=opts("SequenceRNNOptions", timeMajor=tm,
                                       fusedActivationFunction=4 if k == 0 else 1)))
    ins = [x] + [weight(f"lstm/w_{g}", (3, 5), per_channel=True) for g in "ifco"]
    ins += [weight(f"lstm/r_{g}", (3, 3)) for g in "ifco"] + [None] * 3
    ins += [mb.const(f"lstm/b_{g}", rng.uniform(-0.5, 0.5, 3).astype(np.float32))
            for g in "ifco"] + [None, None]
    ins += [mb.graph.add_tensor(f"lstm/{s}", [2, 3], np.float32, is_variable=True)
            for s in ("h", "c")] + [None] * 4
    outs.append(mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [2, 6, 3], name="lstm",
                      dtype=np.float32, options=opts("UnidirectionalSequenceLSTMOptions",
                                                     fusedActivationFunction=4)))
    mb.output(*outs)
    return mb.build()


@pytest.mark.parametrize("hybrid", [False, True], ids=["float32", "hybrid"])
def test_sequence_rnn_and_hybrid_sequences_match_the_reference(
        bundled: dict[str, tuple[tk.Model, Artifact]], hybrid: bool) -> None:
    """UNIDIRECTIONAL_SEQUENCE_RNN, and RNN / LSTM with int8 weights, which the reference
    runtime computes from the dequantized weights (float32 also against LiteRT)."""
    from toolkit.formats.flatbuffer_write import write_model

    model, art = bundled[f"seq_{int(hybrid)}"]
    x = np.random.default_rng(8).uniform(-2, 2, (2, 6, 5)).astype(np.float32)
    ref = run(model, {"x": x})
    out = run_native(art, {"x": x}).outputs
    _same(ref, out)
    assert all(float(v.std()) > 0.05 for v in ref.values())
    if not hybrid:  # LiteRT's hybrid kernels quantize the inputs at run time
        lite = litert_run(bytes(write_model(model, "tflite")), [x])
        _same({k: lite[k] for k in out}, out)


def _tensor_ops_model(ones_like: bool) -> tk.Model:
    """RESIZE_NEAREST_NEIGHBOR (half-pixel centres; aligned corners), UNPACK and PACK, SHAPE,
    FILL from a run-time value, RANGE (int32 and float32), SELECT by rows and LOGICAL_NOT:
    the ops a plain (uncompiled) model may carry; and ONES_LIKE (circle only)."""
    from toolkit.builder import OPTIONS_CLASS, ModelBuilder

    def opts(name: str, **fields: object) -> object:
        o = OPTIONS_CLASS[name]()
        for k, v in fields.items():
            setattr(o, k, v)
        return o

    mb = ModelBuilder("tensor_ops")
    x = mb.input("x", [2, 4, 5, 3])
    v = mb.input("v", [])
    c = mb.input("c", [2])
    size = [mb.const("size_a", np.asarray([7, 9], np.int32)),
            mb.const("size_b", np.asarray([3, 8], np.int32))]
    r1 = mb.op("RESIZE_NEAREST_NEIGHBOR", [x, size[0]], [2, 7, 9, 3], name="near_half",
               options=opts("ResizeNearestNeighborOptions", halfPixelCenters=True))
    r2 = mb.op("RESIZE_NEAREST_NEIGHBOR", [x, size[1]], [2, 3, 8, 3], name="near_align",
               options=opts("ResizeNearestNeighborOptions", alignCorners=True))
    rows = mb.op("UNPACK", [x], name="unpack", options=opts("UnpackOptions", num=4, axis=1),
                 outputs=[(f"row{k}", [2, 5, 3]) for k in range(4)])
    packed = mb.op("PACK", [rows[3], rows[0], rows[2]], [2, 5, 3, 3], name="pack",
                   options=opts("PackOptions", valuesCount=3, axis=2))
    shape = mb.op("SHAPE", [packed], [4], name="shape", dtype=np.int32,
                  options=opts("ShapeOptions", outType=2))
    filled = mb.op("FILL", [mb.const("dims", np.asarray([2, 3], np.int32)), v], [2, 3],
                   name="fill", dtype=np.float32)
    ones = [mb.op("ONES_LIKE", [shape], [4], name="ones")] if ones_like else []
    ranges = [mb.op("RANGE", [mb.const(f"r{k}/{n}", np.asarray(val, dt)) for n, val in
                              zip(("start", "limit", "delta"), vals)], [length],
                    name=f"range{k}", dtype=dt)
              for k, (vals, length, dt) in enumerate(
                  [((2, 20, 3), 6, np.int32), ((0.5, 3.0, 0.25), 10, np.float32)])]
    neg = mb.op("LESS", [c, mb.const("zero", np.zeros(1, np.float32))], [2], name="neg",
                dtype=np.bool_)
    picked = mb.op("SELECT", [neg, packed, mb.unary("NEG", packed, name="flip")],
                   [2, 5, 3, 3], name="select", dtype=np.float32)
    pos = mb.op("LOGICAL_NOT", [neg], [2], name="pos")
    kept = mb.op("SELECT_V2", [pos, c, mb.const("zeros", np.zeros(2, np.float32))], [2],
                 name="keep", dtype=np.float32)
    mb.output(r1, r2, picked, shape, filled, *ones, *ranges, kept)
    return mb.build()


def test_tensor_ops_of_plain_models_match_the_reference_and_litert(
        bundled: dict[str, tuple[tk.Model, Artifact]]) -> None:
    from toolkit.formats.flatbuffer_write import write_model

    rng = np.random.default_rng(2)
    inputs = {"x": rng.uniform(-1, 1, (2, 4, 5, 3)).astype(np.float32),
              "v": np.asarray(1.25, np.float32), "c": np.asarray([-0.5, 0.75], np.float32)}
    for ones_like in (True, False):
        model, art = bundled[f"tensor_ops_{int(ones_like)}"]
        ref = run(model, inputs)
        out = run_native(art, inputs).outputs
        assert sorted(out) == sorted(ref)
        for k, r in ref.items():  # moved or exact values
            assert out[k].dtype == r.dtype
            np.testing.assert_array_equal(out[k], r, err_msg=k)
    lite = litert_run(bytes(write_model(model, "tflite")), inputs)
    for k, r in ref.items():
        np.testing.assert_array_equal(lite[k], r, err_msg=k)


def _range_model() -> tk.Model:
    """RANGE from a run-time start to 20 by 3, generated for 6 values."""
    from toolkit.builder import ModelBuilder

    mb = ModelBuilder("range")
    s = mb.input("s", [], np.int32)
    mb.output(mb.op("RANGE", [s, mb.const("limit", np.asarray(20, np.int32)),
                              mb.const("delta", np.asarray(3, np.int32))], [6], name="steps"))
    return mb.build()


def test_range_of_another_length_than_generated_is_an_error(
        bundled: dict[str, tuple[tk.Model, Artifact]]) -> None:
    """RANGE from a run-time start: the generated length holds or the inference fails with
    a message naming the op (the artifact's shapes are fixed)."""
    model, art = bundled["range"]
    m = NativeModel(art)
    start = np.asarray(2, np.int32)
    want = run(model, {"s": start})["steps"]
    np.testing.assert_array_equal(m.invoke({"s": start})["steps"], want)
    assert want.tolist() == [2, 5, 8, 11, 14, 17]
    with pytest.raises(ToolkitError, match=r"RANGE steps: .*another length than the 6"):
        m.invoke({"s": np.asarray(5, np.int32)})
    m.close()


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[tk.Model, Artifact]]:
    """The small models of the hybrid, sequence, integer LSTM and tensor-op tests, generated
    and built together as one bundle."""
    root = tmp_path_factory.mktemp("bundled")
    models: dict[str, tk.Model] = {}
    for asym in (0, 1):
        for pc in (0, 1):
            models[f"hybrid_{asym}{pc}"] = _hybrid_fc_model(bool(asym), bool(pc))
    for k, model in enumerate(_lstm_models()):
        models[f"lstm{k}"] = model
    for flag in (0, 1):
        models[f"seq_{flag}"] = _sequence_model(bool(flag))
        models[f"tensor_ops_{flag}"] = _tensor_ops_model(bool(flag))
    models["range"] = _range_model()
    arts = {name: (m, codegen(m, root / name, name=name)) for name, m in models.items()}
    build_bundle([(a.out_dir, a.name, a.library.name) for _, a in arts.values()],
                 root / "bundle", opt=OPT)
    return arts
