"""A fuzz pass over the command line itself: every verb with random mixes of arguments (missing
files, folders, files of the wrong kind, arguments swapped, flags with values of every kind)
where the argument that names the verb's main input is always wrong. Each must exit with
status 2 and print exactly one line "error: <where>: <what>. Fix: <how>": never a traceback,
never an internal error (status 3), never silence.

``TOOLKIT_CLI_FUZZ_CASES`` cases per verb (default 12 in `make test`; `make fuzz` runs 500).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.cli import main, parsers

CASES = int(os.environ.get("TOOLKIT_CLI_FUZZ_CASES", "12"))
ERROR_LINE = re.compile(r"^error: .+?: .+? Fix: .+\S$")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A folder of things a user might pass: real files of each kind and wrong ones."""
    d = tmp_path_factory.mktemp("cli_fuzz")
    w: dict[str, Path] = {"dir": d}
    w["model"] = Path(shutil.copy(SAMPLES / "cnn.tflite", d / "cnn.tflite"))
    w["circle"] = Path(shutil.copy(SAMPLES / "Net_InstanceNorm_003.circle", d / "net.circle"))
    w["compiled"] = d / "compiled"
    tk.compile(w["model"]).save(w["compiled"], stem="cnn")
    w["trace"] = d / "trace.json"
    assert main(["run", str(w["model"]), "--repeat", "2", "--trace", str(w["trace"])]) == 0
    w["trace_csv"] = d / "trace.csv"
    assert main(["run", str(w["model"]), "--trace", str(w["trace_csv"])]) == 0
    w["npz"] = d / "inputs.npz"
    np.savez(w["npz"], image=np.zeros((1, 32, 32, 3), np.float32))
    w["npy"] = d / "x.npy"
    np.save(w["npy"], np.zeros(3))
    w["part"] = d / "net.part"
    w["part"].write_text("[partition]\nbackends=cpu,npu\ndefault=cpu\ncomply=opcode\n\n"
                         "[OPCODE]\nDIV=npu\n")
    w["txt"] = d / "notes.txt"
    w["txt"].write_text("some notes\n")
    w["empty"] = d / "empty.tflite"
    w["empty"].write_bytes(b"")
    w["garbage"] = d / "garbage.tflite"
    w["garbage"].write_bytes(bytes(range(256)) * 4)
    w["cut"] = d / "cut.tflite"
    w["cut"].write_bytes(w["model"].read_bytes()[:300])
    w["folder"] = d / "plain_folder"
    w["folder"].mkdir()
    w["bad_json"] = d / "bad.json"
    w["bad_json"].write_text('{"traceEvents": [')
    w["onnx_fake"] = d / "m.onnx"
    w["onnx_fake"].write_bytes(b"\x08\x07garbage")
    w["prototxt_missing"] = d / "net.prototxt"
    return w


def _missing(w: dict[str, Path], rng: random.Random) -> Path:
    real = rng.choice(["model", "trace", "npz", "compiled", "part"])
    name = w[real].name
    return w["dir"] / rng.choice([name[:-1], name + "x", "no_such_" + name, "nowhere/" + name])


def _bad_model(w: dict[str, Path], rng: random.Random) -> str:
    """A path that is not a model: missing, a typo, a folder, a trace, garbage, cut short."""
    pick = rng.choice(["missing", "folder", "trace", "trace_csv", "npz", "npy", "txt", "empty",
                       "garbage", "cut", "part", "bad_json", "prototxt_missing"])
    return str(_missing(w, rng) if pick == "missing" else w[pick])


def _bad_trace(w: dict[str, Path], rng: random.Random) -> str:
    """A path that is not a trace: missing, a model (arguments swapped), a compiled folder."""
    pick = rng.choice(["missing", "model", "circle", "compiled", "folder", "npz", "npy", "txt",
                       "empty", "bad_json", "part"])
    return str(_missing(w, rng) if pick == "missing" else w[pick])


def _any_value(w: dict[str, Path], rng: random.Random, action: argparse.Action) -> list[str]:
    """A value for ``action``: anything a user might type, right or wrong."""
    if action.nargs == 0:
        return []
    if action.choices and rng.random() < 0.6:
        return [str(rng.choice(list(action.choices)))]
    kind = rng.random()
    if kind < 0.4:
        key = rng.choice([k for k in w if k != "dir"])
        return [str(w[key])]
    if kind < 0.55:
        return [str(_missing(w, rng))]
    if kind < 0.8:
        return [rng.choice(["0", "-1", "3", "1e9", "abc", "", "1,2", "nan"])]
    return [str(w["dir"] / f"out{rng.randrange(1000)}{rng.choice(['.json', '.csv', '.txt', ''])}")]


# The argument that must be wrong, per command line (the first entry is the parser's key).
def _wrong_main(verb: str, w: dict[str, Path], rng: random.Random) -> list[str]:
    if verb == "inspect":
        return [_bad_model(w, rng)]
    if verb == "compile":
        return [_bad_model(w, rng), "-o", str(w["dir"] / f"o{rng.randrange(99)}")]
    if verb == "run":
        return [_bad_model(w, rng)]
    if verb == "run --runtime onnxruntime":
        return [rng.choice([_bad_model(w, rng), str(w["onnx_fake"])]), "--runtime", "onnxruntime"]
    if verb == "trace-join":
        return [_bad_trace(w, rng), "--compiled",
                rng.choice([str(w["compiled"]), str(w["model"]), _bad_model(w, rng)])]
    if verb == "trace-join --model":
        return [_bad_trace(w, rng), "--model", rng.choice([str(w["onnx_fake"]),
                                                           _bad_model(w, rng)])]
    if verb == "trace-join-many":
        return [rng.choice([str(w["dir"] / "no_such_*.json"), str(w["model"]),
                            str(w["dir"] / "*.tflite"), str(w["folder"])]),
                "--compiled", rng.choice([str(w["compiled"]), _bad_model(w, rng)])]
    if verb == "vela":
        return [rng.choice([str(_missing(w, rng)), str(w["folder"]), str(w["model"]),
                            str(w["compiled"])]), "--model", rng.choice([str(w["model"]),
                                                                         _bad_model(w, rng)])]
    if verb == "nnc":
        return [rng.choice(["--caffe", "--tflite"]), "-m", _bad_model(w, rng), "--target",
                rng.choice(["interpreter", "cpp"]), "-o", str(w["dir"] / "nnc_out")]
    if verb == "partition":
        wrong = rng.choice(["work", "part", "input", "swap"])
        part, model, work_path = w["part"].name, w["circle"].name, str(w["dir"])
        if wrong == "work":
            work_path = str(rng.choice([_missing(w, rng), w["txt"]]))
        elif wrong == "part":
            part = rng.choice(["missing.part", w["txt"].name, w["circle"].name, "../x.part"])
        elif wrong == "input":
            model = rng.choice(["missing.circle", w["txt"].name, w["garbage"].name,
                                w["part"].name])
        else:
            part, model = model, part
        return ["--part-file", part, "--input-file", model, "--work-path", work_path]
    if verb == "demo":
        return ["--out", str(rng.choice([w["txt"], w["model"]]))]
    if verb == "report":
        return [_bad_trace(w, rng), "--compiled",
                rng.choice([str(w["compiled"]), str(w["model"]), _bad_model(w, rng)])]
    if verb == "compare":
        good = rng.choice([str(w["model"]), str(w["circle"]), str(w["compiled"])])
        pair = [_bad_model(w, rng), rng.choice([good, _bad_model(w, rng)])]
        return pair if rng.random() < 0.5 else pair[::-1]
    raise AssertionError(verb)


VERBS = sorted(parsers())
# Flags left out of the random mixes: they select another parser (already a key of VERBS)
# or name the main input (set by _wrong_main).
_FIXED = {"--runtime", "--model", "--compiled", "-o", "--output", "-m", "--part-file",
          "--input-file", "--work-path", "--out", "--etrecord", "--program", "--output-dir"}


@pytest.mark.parametrize("verb", VERBS)
def test_cli_fuzz(verb: str, work: dict[str, Path], capsys: pytest.CaptureFixture[str],
                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work["dir"])
    monkeypatch.setenv("TOOLKIT_PROGRESS", "0")
    p = parsers()[verb]
    flags = [a for a in p._actions if a.option_strings
             and not isinstance(a, argparse._HelpAction)
             and not set(a.option_strings) & _FIXED]
    rng = random.Random(f"cli-fuzz-{verb}")
    for case in range(CASES):
        argv = _wrong_main(verb, work, rng)
        for action in rng.sample(flags, k=min(len(flags), rng.randrange(0, 4))):
            flag = rng.choice(action.option_strings)
            if flag.startswith("--") and rng.random() < 0.2:  # ONE's underscore spelling
                flag = flag.replace("-", "_").replace("__", "--", 1)
            argv += [flag, *_any_value(work, rng, action)]
        if rng.random() < 0.1:
            argv.insert(rng.randrange(len(argv) + 1), rng.choice(["--bogus", "-z", "extra"]))
        full = [verb.split()[0], *argv]
        status = main(full)
        cap = capsys.readouterr()
        lines = [ln for ln in cap.err.splitlines() if ln.strip()]
        assert status == 2, (case, full, status, cap.err[-2000:])
        assert len(lines) == 1, (case, full, cap.err[-2000:])
        assert ERROR_LINE.match(lines[0]), (case, full, lines[0])
        assert "internal error" not in lines[0] and "Traceback" not in cap.err
