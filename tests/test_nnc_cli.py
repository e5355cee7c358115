"""``toolkit nnc``: nnc's options on Caffe and TFLite models, interpreter and cpp targets."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from toolkit.cli import main
from toolkit.formats.flatbuffer_write import save
from toolkit.importers.caffe import load_caffe
from toolkit.runtime.interpreter import run_model

sys.path.insert(0, str(Path(__file__).parent))
from caffe_nets import NETS

NNC_OPTIONS = ["--caffe", "--tflite", "--target", "--nnmodel", "-m", "--output", "-o",
               "--output-dir", "-d", "--input-model-data", "--input-node", "--output-node",
               "--res-filename", "--debug", "--debug-area"]


@pytest.fixture(scope="module")
def lenet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("nnc")
    NETS["lenet"](False).save(d / "lenet.prototxt", d / "lenet.caffemodel")
    x = np.random.default_rng(5).uniform(-1, 1, (1, 1, 28, 28)).astype(np.float32)
    x.astype("<f4").tofile(d / "input.bin")
    np.save(d / "input.npy", x)
    return {"dir": d, "prototxt": d / "lenet.prototxt", "caffemodel": d / "lenet.caffemodel",
            "bin": d / "input.bin", "npy": d / "input.npy"}


def _expected(lenet: dict[str, Path]) -> np.ndarray:
    m = load_caffe(lenet["prototxt"], weights=lenet["caffemodel"])
    x = np.fromfile(lenet["bin"], "<f4").reshape(1, 1, 28, 28)
    return run_model(m, {"data": x}).outputs["prob"]


def test_help_lists_nnc_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nnc", "--help"]) == 0  # the CLI turns argparse's exit into a status
    text = capsys.readouterr().out
    for opt in NNC_OPTIONS:
        assert opt in text, opt
    assert "interpreter" in text and "cpp" in text


def test_caffe_interpreter_writes_results(lenet: dict[str, Path], tmp_path: Path) -> None:
    res = tmp_path / "res.npz"
    assert main(["nnc", "--caffe", "-m", str(lenet["prototxt"]), "--weights",
                 str(lenet["caffemodel"]), "--target=interpreter", "--input-model-data",
                 str(lenet["bin"]), "--input-node", "data", "--output-node", "prob",
                 "--res-filename", str(res)]) == 0
    with np.load(res) as z:
        assert list(z.keys()) == ["prob"]
        np.testing.assert_array_equal(z["prob"], _expected(lenet))
    # the self-contained caffemodel, a .npy input and the default result path (-d / -o)
    assert main(["nnc", "--caffe", "--nnmodel", str(lenet["caffemodel"]), "--target",
                 "interpreter", "--input-model-data", str(lenet["npy"]), "-d", str(tmp_path),
                 "-o", "run2"]) == 0
    with np.load(tmp_path / "run2.npz") as z:
        np.testing.assert_array_equal(z["prob"], _expected(lenet))


def test_tflite_interpreter(lenet: dict[str, Path], tmp_path: Path) -> None:
    m = load_caffe(lenet["prototxt"], weights=lenet["caffemodel"])
    path = save(m, tmp_path / "lenet.tflite")
    res = tmp_path / "out.npz"
    assert main(["nnc", "--tflite", "-m", str(path), "--target", "interpreter",
                 "--input-model-data", str(lenet["bin"]), "--res-filename", str(res)]) == 0
    with np.load(res) as z:
        np.testing.assert_array_equal(z["prob"], _expected(lenet))


def test_bad_inputs_exit_2_and_write_nothing(lenet: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "short.bin"
    np.zeros(10, "<f4").tofile(short)
    res = tmp_path / "res.npz"
    base = ["nnc", "--caffe", "-m", str(lenet["caffemodel"]), "--target", "interpreter"]
    assert main([*base, "--input-model-data", str(short), "--res-filename", str(res)]) == 2
    assert "holds 10 float(s)" in capsys.readouterr().err
    assert main([*base, "--input-model-data", str(lenet["bin"]), "--output-node", "nope",
                 "--res-filename", str(res)]) == 2
    assert "no output node 'nope'" in capsys.readouterr().err
    assert main([*base, "--res-filename", str(res)]) == 2
    assert "--input-model-data" in capsys.readouterr().err
    assert not res.exists()
    assert list(tmp_path.iterdir()) == [short]


def test_cpp_target(lenet: dict[str, Path], tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                    ) -> None:
    args = ["nnc", "--caffe", "-m", str(lenet["caffemodel"]), "--target", "cpp", "-d",
            str(tmp_path / "art"), "-o", "nnmodel"]
    import importlib.util

    if importlib.util.find_spec("toolkit.generator") is None:
        assert main(args) == 2
        assert "native backend is not available" in capsys.readouterr().err
    calls: list[tuple[object, Path, str]] = []
    fake = types.ModuleType("toolkit.generator")
    fake.codegen = lambda model, out, name: calls.append((model, out, name))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toolkit.generator", fake)
    assert main(args) == 0
    (model, out, name), = calls
    assert out == tmp_path / "art" and name == "nnmodel"
    assert [t.name for t in model.graph.outputs] == ["prob"]  # type: ignore[attr-defined]
    assert main([*args, "--res-filename", "x.npz"]) == 2
