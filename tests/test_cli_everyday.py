"""The command line in pipes and scripts, tried as a new user would: a reader that stops early,
files given in the wrong place, typos, and what each verb says it wrote."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import ROOT, SAMPLES

import toolkit as tk
from toolkit.cli import COMMANDS, main
from toolkit.compiler import load_compiled
from toolkit.errors import ModelFormatError, ToolkitError, TraceError

CNN = SAMPLES / "cnn.tflite"
ERROR_LINE = re.compile(r"^error: .+?: .+?[.?!] Fix: .+$")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _closed_pipe(*args: str) -> tuple[int, str]:
    """Run ``toolkit ARGS`` with its stdout a pipe whose reader is gone before it writes
    (what `| head` does once it has its lines); return the status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), err


@pytest.mark.parametrize("args", [
    ["--help"],
    ["inspect", str(CNN), "--tensors"],
    ["run", str(CNN), "--repeat", "3"],
    *[[verb, "--help"] for verb in COMMANDS],
], ids=lambda a: " ".join(Path(x).name for x in a))
def test_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    status, err = _closed_pipe(*args)
    assert status in (0, 141), err
    assert err == "", err


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``toolkit ARGV`` in-process; assert status 2 and one error line; return it."""
    assert main(list(argv)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert ERROR_LINE.match(lines[0]), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled")
    tk.compile(CNN).save(out, stem="cnn")
    return out


def test_a_single_npy_as_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    line = _error(capsys, "run", str(CNN), "--inputs", str(tmp_path / "x.npy"))
    assert "single .npy array" in line and "numpy.savez" in line


@pytest.mark.parametrize("content", [b"not a zip at all", b"PK\x03\x04cut short"])
def test_an_npz_that_is_not_a_zip(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  content: bytes) -> None:
    (tmp_path / "bad.npz").write_bytes(content)
    line = _error(capsys, "run", str(CNN), "--inputs", str(tmp_path / "bad.npz"))
    assert "zip" in line.lower() and "pickle" not in line


def test_a_model_as_inputs_is_called_swapped(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "run", str(CNN), "--inputs", str(CNN))
    assert "this is a model file" in line and "swapped" in line


def test_a_csv_with_only_times(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("start_ns,dur_ns\n0,10\n10,5\n")
    with pytest.raises(TraceError, match="only time columns") as e:
        tk.trace_join(tmp_path / "t.csv", CNN)
    assert e.value.fix and "key" in e.value.fix


def test_remove_unused_tensors_keeps_lstm_intermediates(tmp_path: Path) -> None:
    m = tk.load(SAMPLES / "zoo" / "fused_bilstm_int8.tflite")
    lstm = [op for op in m.graph.ops if op.extra.get("intermediates")]
    assert lstm, "the fixture has an LSTM with intermediates"
    before = {t.name for op in lstm for t in op.extra["intermediates"] if t is not None}
    m.graph.remove_unused_tensors()
    tk.save(m, tmp_path / "m.tflite")
    again = tk.load(tmp_path / "m.tflite")
    kept = {t.name for op in again.graph.ops for t in op.extra.get("intermediates") or ()
            if t is not None}
    assert before <= kept


def test_an_intermediate_removed_by_hand_is_named_on_save(tmp_path: Path) -> None:
    m = tk.load(SAMPLES / "zoo" / "fused_bilstm_int8.tflite")
    op = next(op for op in m.graph.ops if op.extra.get("intermediates"))
    t = next(t for t in op.extra["intermediates"] if t is not None)
    m.graph.remove_tensor(t)
    with pytest.raises(ModelFormatError, match="intermediate tensor"):
        tk.save(m, tmp_path / "m.tflite")


def test_a_model_as_the_trace(capsys: pytest.CaptureFixture[str], compiled: Path) -> None:
    line = _error(capsys, "trace-join", str(CNN), "--compiled", str(compiled))
    assert "this is a model file, not a trace (arguments swapped?)" in line


def test_a_compiled_folder_as_the_trace(capsys: pytest.CaptureFixture[str],
                                        compiled: Path) -> None:
    line = _error(capsys, "trace-join", str(compiled), "--compiled", str(compiled))
    assert "compiled output folder" in line and "not a trace" in line
    assert "no such" not in line


def test_load_takes_a_compiled_folder(compiled: Path) -> None:
    m = tk.load(compiled)
    assert [op.kind for op in m.graph.ops] == \
        [op.kind for op in load_compiled(compiled).model.graph.ops]


def test_load_of_a_plain_folder_says_what_it_takes(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match=r"_debug\.xml"):
        tk.load(tmp_path)


def test_did_you_mean(capsys: pytest.CaptureFixture[str], compiled: Path) -> None:
    assert "did you mean toolkit inspect?" in _error(capsys, "inspct", str(CNN))
    line = _error(capsys, "inspect", str(CNN)[:-1])
    assert f"did you mean {CNN}?" in line
    assert "did you mean --repeat?" in _error(capsys, "run", str(CNN), "--repet", "3")
    assert "did you mean --by layer?" in _error(capsys, "trace-join", "t.json", "--compiled",
                                                 str(compiled), "--by", "layr")
    line = _error(capsys, "trace-join", str(compiled / "cnn.circl"), "--compiled",
                  str(compiled))
    assert f"did you mean {compiled / 'cnn.circle'}?" in line


def test_a_missing_prototxt_says_check_the_path(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "inspect", str(tmp_path / "net.prototxt"))
    assert "no such" in line and "check the path" in line


def test_debug_keeps_status_2_and_shows_the_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    assert main(["--debug", "inspect", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert ERROR_LINE.match(err.strip().splitlines()[-1])


@pytest.mark.parametrize("suffix,fmt", [(".json", "chrome"), (".csv", "csv"),
                                        (".parquet", "parquet"), (".json.gz", "chrome")])
def test_trace_format_follows_the_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         suffix: str, fmt: str) -> None:
    path = tmp_path / f"t{suffix}"
    assert main(["run", str(CNN), "--repeat", "2", "--trace", str(path)]) == 0
    assert f"wrote {path} (28 events, {fmt})" in capsys.readouterr().out
    trace = tk.read_trace(path)
    assert trace.meta["format"] == fmt and len(trace.events) == 28
    if fmt == "csv":
        assert not path.read_text().lstrip().startswith(("{", "["))  # not Chrome JSON


def test_trace_with_another_suffix_is_refused(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "run", str(CNN), "--trace", str(tmp_path / "t.txt"))
    assert ".json" in line and ".csv" in line and ".parquet" in line
    assert not (tmp_path / "t.txt").exists()


def test_every_written_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = tmp_path / "o.npz"
    assert main(["run", str(CNN), "--outputs", str(outs), "--csv", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert f"wrote {outs} (1 output array(s))" in out and f"wrote {tmp_path / 'c.csv'}" in out
    with np.load(outs) as z:
        assert list(z.files) == ["cnn/softmax/Softmax"]
    assert main(["inspect", str(CNN), "--csv", str(tmp_path / "tables")]) == 0
    out = capsys.readouterr().out
    written = tmp_path / "tables" / "cnn.ops.csv"
    assert f"wrote {written} (14 rows)" in out
    assert len(pd.read_csv(written)) == 14


def test_a_progress_bar_shows_in_an_unsized_terminal() -> None:
    """`toolkit run --repeat 200000` on a pseudo-terminal that reports no size (as some CI
    runners give) draws its bar; waited for as a condition, not a fixed sleep."""
    pty = pytest.importorskip("pty")
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ.pop("PYTEST_CURRENT_TEST", None)
        os.environ.pop("TOOLKIT_PROGRESS", None)
        os.environ["PYTHONPATH"] = str(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "toolkit", "run", str(CNN),
                                  "--repeat", "200000"])
    import select
    import signal

    seen = b""
    deadline = time.monotonic() + 120
    try:
        while b"inferences:" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 1 << 16)
                except OSError:
                    break
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    assert b"inferences:" in seen and (b"run/s" in seen or b"s/run" in seen), seen[-400:]


# -- tables that fit ---------------------------------------------------------------------------

MOBILENET = SAMPLES / "zoo" / "mobilenet_v2.tflite"


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.fixture(scope="module")
def mobilenet_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace of three runs of the compiled TF MobileNetV2 (long TensorFlow names)."""
    out = tmp_path_factory.mktemp("mnv2")
    path = out / "t.json"
    assert main(["run", str(MOBILENET), "--repeat", "3", "--trace", str(path)]) == 0
    return path


@pytest.mark.parametrize("by", ["layer", "source_op", "op", "command", "backend"])
def test_trace_join_fits_100_columns(mobilenet_trace: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, by: str) -> None:
    monkeypatch.chdir(mobilenet_trace.parent)
    capsys.readouterr()
    assert main(["trace-join", "t.json", "--compiled", str(MOBILENET), "--by", by,
                 "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert _widest(out) <= 100, max(out.splitlines(), key=len)
    header = out.split(f"== by {by}:", 1)[1].splitlines()[1]
    words = header.split()
    assert words[words.index("time"):][:4] == ["time", "share", "p50/event", "events"]
    if by == "layer":  # the Keras layers (short names, whole), not the converter's op names
        table = out.split("== by layer:", 1)[1]
        assert re.search(r"^Conv1 ", table, re.M) and "mobilenetv2_0.35_64_1/" not in table
        assert re.search(r"\d+(\.\d+)? (µs|ms|s)\s+\d+\.\d %", out)
    if by == "source_op":
        assert "…" in out  # long TensorFlow names are elided in the middle


def test_trace_join_wide_and_machine_formats(mobilenet_trace: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    args = ["trace-join", str(mobilenet_trace), "--compiled", str(MOBILENET)]
    assert main([*args, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert _widest(wide) > 100 and "p90_ms" in wide and "…" not in wide
    assert main([*args, "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    full = tk.trace_join(mobilenet_trace, MOBILENET).by_layer()
    assert list(frame.columns) == list(full.columns) and len(frame) == len(full)
    assert frame["total_ns"].sum() == full["total_ns"].sum()
    assert main([*args, "--format", "json", "--by", "backend"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["backend"] for r in rows] == full_backends(mobilenet_trace)


def full_backends(trace: Path) -> list[str]:
    return tk.trace_join(trace, MOBILENET).by_backend()["backend"].tolist()


@pytest.mark.parametrize("extra", [[], ["--tensors"], ["--origins"]])
def test_inspect_fits_100_columns(capsys: pytest.CaptureFixture[str], extra: list[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SAMPLES)
    assert main(["inspect", "zoo/mobilenet_v2.tflite", *extra]) == 0
    out = capsys.readouterr().out
    assert _widest(out) <= 100, max(out.splitlines(), key=len)
    assert "== ops (65 rows)" in out and "…" in out


def test_inspect_wide_and_machine_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(MOBILENET), "--wide"]) == 0
    assert _widest(capsys.readouterr().out) > 100
    assert main(["inspect", str(MOBILENET), "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(frame) == 65 and "origin_names" in frame.columns
    assert main(["inspect", str(MOBILENET), "--format", "json", "--tensors"]) == 0
    tables = json.loads(capsys.readouterr().out)
    assert set(tables) == {"ops", "tensors"}
    assert len(tables["tensors"]) == len(tk.load(MOBILENET).tensors_table())
    _error(capsys, "inspect", str(MOBILENET), "--format", "csv", "--tensors")


def test_demo_prints_a_short_log_and_no_warning(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """What `make demo` shows: one line per step and tables of at most 100 columns, nothing
    on stderr, no warning raised (the notebooks' part is checked by test_notebooks.py)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["demo", "--out", str(tmp_path / "out"), "--no-notebooks"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and not [str(w.message) for w in caught]
    lines = cap.out.splitlines()
    steps = [ln.split()[0] for ln in lines if ln.startswith("[")]
    assert steps[:4] == ["[compile]", "[run]", "[join]", "[part]"]
    long = [ln for ln in lines if len(ln) > 100 and "wrote" not in ln]
    assert not long, long
    assert len(lines) < 90
