"""The command line as people use it: help without markup and with every argument described,
both spellings of multi-word flags, and one shape for every error line."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import SAMPLES

from toolkit.cli import COMMANDS, main, parsers
from toolkit.util.cliargs import generic_fix, normalize_flags

MARKUP = re.compile(r"``|:(func|class|mod|meth|attr|data|exc|obj|ref|doc):`")
ERROR_LINE = re.compile(r"^error: (?P<where>.+?): (?P<what>.+?[.?!]) Fix: (?P<fix>.+)$")

# What each parser needs besides the flag under test, to parse at all.
REQUIRED: dict[str, list[str]] = {
    "inspect": ["m.tflite"],
    "compile": ["m.tflite", "-o", "out"],
    "partition": ["--part-file", "p.part", "--input-file", "m.circle"],
    "run": ["m.tflite"],
    "run --runtime onnxruntime": ["m.onnx", "--runtime", "onnxruntime"],
    "trace-join": ["t.json"],
    "trace-join --model": ["t.json", "--model", "m.onnx"],
    "trace-join-many": ["t.json", "--compiled", "out"],
    "vela": ["out", "--model", "m.tflite"],
    "compare": ["a.tflite", "b.tflite"],
    "nnc": ["--target", "cpp", "-m", "m.tflite"],
    "demo": [],
    "report": ["t.json", "--compiled", "out"],
}


def _user_actions(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not isinstance(a, argparse._HelpAction)]


def test_every_parser_is_walked() -> None:
    ps = parsers()
    assert set(ps) == set(REQUIRED)
    assert {k.split()[0] for k in ps} == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_help_is_plain_and_describes_every_argument(name: str) -> None:
    p = parsers()[name]
    text = p.format_help()
    assert not MARKUP.search(text), MARKUP.search(text)
    assert p.description and not MARKUP.search(p.description)
    for action in _user_actions(p):
        label = "/".join(action.option_strings) or action.dest
        assert action.help and action.help != argparse.SUPPRESS, f"{name} {label}: no help"
        assert len(action.help) >= 12, f"{name} {label}: help too short: {action.help!r}"
        has_default = action.default not in (None, False, argparse.SUPPRESS)
        if has_default and action.option_strings:
            assert "default" in action.help, f"{name} {label}: default not said"


def test_help_through_the_console_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert not MARKUP.search(top) and "toolkit VERB --help" in top
    for argv in (["inspect", "--help"], ["run", "m.onnx", "--runtime", "onnxruntime", "-h"],
                 ["trace-join", "p.json", "--model", "m.onnx", "--help"],
                 ["partition", "--help"], ["nnc", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: toolkit") and not MARKUP.search(out), argv


def _value(action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(list(action.choices)[-1])]
    return ["7"]


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_multiword_flags_take_both_spellings(name: str) -> None:
    p = parsers()[name]
    base = REQUIRED[name]
    fmt = p._get_formatter()
    usage = p.format_usage() + "\n".join(fmt._format_action_invocation(a)
                                         for a in _user_actions(p))
    flags = [s for a in _user_actions(p) for s in a.option_strings
             if s.startswith("--") and re.search(r"[-_]", s[2:])]
    for flag in flags:
        action = p._option_string_actions[flag]
        declared = vars(p.parse_args([*base, flag, *_value(action)]))
        assert declared[action.dest] != action.default or action.nargs == 0, flag
        for alt in ("--" + flag[2:].replace("-", "_"), "--" + flag[2:].replace("_", "-")):
            if alt == flag:
                continue
            assert vars(p.parse_args([*base, alt, *_value(action)])) == declared, alt
            if action.nargs != 0:
                joined = vars(p.parse_args([*base, f"{alt}={_value(action)[0]}"]))
                assert joined == declared, alt
            assert alt not in usage, f"{name}: help shows {alt} beside {flag}"
    if name == "partition":  # ONE's spellings, as circle-partitioner takes them
        a = p.parse_args(["--part_file", "p.part", "--input_file", "m.circle",
                          "--work_path", "w"])
        assert (a.part_file, a.input_file, a.work_path) == ("p.part", "m.circle", "w")


def test_normalize_keeps_values_unknown_flags_and_what_follows_a_double_dash() -> None:
    known = ["--part-file", "--work_path", "-o"]
    assert normalize_flags(known, ["--part_file=a_b", "--work-path", "--x_y", "-o", "--",
                                   "--part_file"]) == \
        ["--part-file=a_b", "--work_path", "--x_y", "-o", "--", "--part_file"]


# -- error lines --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    (d / "notes.txt").write_text("not a model\n")
    (d / "fake.tflite").write_bytes(b"this is text, not a FlatBuffer\n" * 4)
    (d / "empty").mkdir()
    (d / "bad.npz").write_bytes(b"not an archive")
    (d / "bad.part").write_text("[partition]\nbackends=cpu,npu\ndefault=gpu\n")
    import shutil

    shutil.copy(SAMPLES / "Net_InstanceNorm_003.circle", d / "net.circle")
    (d / "ok.part").write_text("[partition]\nbackends=cpu,npu\ndefault=npu\n"
                               "comply=opcode\n\n[OPCODE]\nDIV=cpu\n")
    return {"dir": d, "txt": d / "notes.txt", "fake": d / "fake.tflite",
            "empty": d / "empty", "npz": d / "bad.npz", "cnn": SAMPLES / "cnn.tflite"}


def _mistakes(w: dict[str, Path]) -> list[tuple[str, list[str]]]:
    d, cnn, missing = w["dir"], str(w["cnn"]), str(w["dir"] / "missing.tflite")
    return [
        ("inspect", [missing]),
        ("inspect", [str(w["txt"])]),
        ("inspect", [str(w["fake"])]),
        ("inspect", [cnn, "--subgraph", "-1"]),
        ("inspect", [cnn, "--subgraph", "3"]),
        ("inspect", []),
        ("compile", [missing, "-o", str(d / "o")]),
        ("compile", [cnn]),
        ("compile", [cnn, "-o", str(w["txt"])]),
        ("compile", [cnn, "-o", str(d / "o"), "--buffer-bytes", "0"]),
        ("compile", [cnn, "-o", str(d / "o"), "--target", "gpu"]),
        ("compile", [cnn, "-o", str(d / "o"), "--passes", "no_such_pass"]),
        ("partition", ["--part_file", "ok.part", "--input_file", "net.circle",
                       "--work_path", str(d / "nowhere")]),
        ("partition", ["--part-file", "missing.part", "--input-file", "net.circle",
                       "--work-path", str(d)]),
        ("partition", ["--part-file", "ok.part", "--input-file", "notes.txt",
                       "--work-path", str(d)]),
        ("partition", ["--part-file", "bad.part", "--input-file", "net.circle",
                       "--work-path", str(d)]),
        ("partition", ["--part-file", "ok.part"]),
        ("run", [missing]),
        ("run", [str(w["txt"])]),
        ("run", [cnn, "--repeat", "0"]),
        ("run", [cnn, "--warmup", "many"]),
        ("run", [cnn, "--inputs", str(w["npz"])]),
        ("run", [cnn, "--inputs", str(d / "missing.npz")]),
        ("run", [cnn, "--trace", str(w["empty"])]),
        ("run", [cnn, "--bogus"]),
        ("run", [str(d / "m.onnx"), "--runtime", "onnxruntime", "--optimization", "max"]),
        ("run", [str(d / "m.onnx"), "--runtime", "onnxruntime"]),
        ("run", [str(d / "m.onnx"), "--runtime", "onnxruntime", "--inputs", str(w["npz"])]),
        ("run", [cnn, "--runtime", "onnxruntime"]),
        ("run", [str(w["empty"])]),
        ("trace-join", [str(d / "missing.json"), "--compiled", cnn]),
        ("trace-join", [str(w["txt"]), "--compiled", cnn]),
        ("trace-join", [str(w["txt"])]),
        ("trace-join", [str(w["txt"]), "--compiled", cnn, "--by", "colour"]),
        ("trace-join", [str(w["txt"]), "--compiled", cnn, "--skip-runs", "-2"]),
        ("trace-join", [str(d / "p.json"), "--model", str(d / "m.onnx"), "--policy", "x"]),
        ("trace-join", [str(d / "p.json"), "--model", str(d / "m.onnx")]),
        ("trace-join", [str(SAMPLES / "executorch" / "cnn_portable.etdp"), "--etrecord",
                        str(w["txt"])]),
        ("trace-join", [str(w["txt"]), "--etrecord",
                        str(SAMPLES / "executorch" / "cnn_portable.etrecord.bin")]),
        ("trace-join", [str(w["txt"]), "--compiled", str(w["empty"])]),
        ("trace-join-many", [str(d / "nothing*.json"), "--compiled", cnn]),
        ("trace-join-many", [str(w["txt"]), "--compiled", cnn, "--engine", "spark"]),
        ("trace-join-many", [str(w["txt"]), "--compiled", cnn, "--scheduler", "x:1"]),
        ("compare", [cnn, missing]),
        ("compare", [cnn, str(SAMPLES / "transformer.tflite")]),
        ("compare", [cnn, cnn, "--inputs", str(w["npz"])]),
        ("compare", [cnn, cnn, "--runtime-b", "gpu"]),
        ("vela", [str(d / "missing"), "--model", cnn]),
        ("vela", [str(w["empty"]), "--model", cnn]),
        ("vela", [str(w["empty"])]),
        ("nnc", ["--target", "interpreter", "-m", missing]),
        ("nnc", ["--target", "gpu", "-m", cnn]),
        ("nnc", ["--caffe", "--target", "interpreter", "-m", cnn]),
        ("nnc", ["--tflite", "--caffe", "--target", "interpreter", "-m", cnn]),
        ("nnc", ["--target", "interpreter", "-m", cnn]),
        ("nnc", ["--target", "interpreter", "-m", cnn, "--input_model_data",
                 str(w["txt"])]),
        ("demo", ["--out", str(w["txt"])]),
        ("report", [str(d / "missing.json"), "--compiled", cnn]),
        ("report", [str(w["txt"]), "--compiled", str(d / "missing_out")]),
        ("report", [str(w["txt"]), "--compiled", cnn, "--diff-compiled", cnn]),
        ("report", [str(w["txt"]), "--compiled", cnn, "--format", "pdf"]),
        ("report", [str(w["txt"])]),
        ("report", [str(w["txt"]), "--compiled", cnn, "-o", str(d)]),
        ("frobnicate", []),
    ]


def test_common_mistakes_print_one_shaped_line(work: dict[str, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    seen: set[str] = set()
    for verb, args in _mistakes(work):
        assert main([verb, *args]) == 2, (verb, args)
        cap = capsys.readouterr()
        lines = [ln for ln in cap.err.splitlines() if ln.strip()]
        assert len(lines) == 1, (verb, args, cap.err)
        m = ERROR_LINE.match(lines[0])
        assert m, (verb, args, lines[0])
        assert m["fix"] != generic_fix(verb), (verb, args, lines[0])
        assert len(m["fix"]) > 10 and len(m["what"]) > 5, lines[0]
        seen.add(verb)
    assert seen == set(COMMANDS) | {"frobnicate"}


def test_a_defect_is_one_line_and_debug_shows_it(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    def broken(argv: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(COMMANDS, "inspect", broken)
    assert main(["inspect", "m.tflite"]) == 3
    line = capsys.readouterr().err.strip()
    assert ERROR_LINE.match(line) and "ZeroDivisionError" in line and "--debug" in line
    assert main(["--debug", "inspect", "m.tflite"]) == 3  # the same status, traceback first
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)") and 'raise ZeroDivisionError' in err
    assert ERROR_LINE.match(err.strip().splitlines()[-1])


def test_no_command_is_an_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    cap = capsys.readouterr()
    assert "toolkit VERB --help" in cap.out
    assert ERROR_LINE.match(cap.err.strip()), cap.err
    assert main(["--debug"]) == 2 and ERROR_LINE.match(capsys.readouterr().err.strip())


def test_error_names_the_flag_and_what_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SAMPLES / "cnn.tflite"), "--repeat", "0"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: toolkit run --repeat: 0 is not a positive integer. Fix: ")
    assert "number of inferences" in line
    assert main(["trace-join", "t.json", "--by", "colour"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.endswith("Fix: use one of: layer, source_op, op, command, backend")


def test_python_m_toolkit_prints_the_line_and_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "toolkit", "partition", "--part_file", "x.part",
                           "--input_file", "m.circle", "--work_path", str(tmp_path / "no")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert ERROR_LINE.match(line) and "--work-path" in line and "mkdir -p" in line
