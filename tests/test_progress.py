"""Progress bars (on when forced or on a terminal, off in tests and when stderr is not a
terminal) and Ctrl-C in the command line (one line, exit status 130)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

import toolkit as tk
from toolkit import progress as progress_mod

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"
CNN = SAMPLES / "cnn.tflite"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_CURRENT_TEST", "TOOLKIT_PROGRESS", "TOOLKIT_PROGRESS_DELAY")}
    env.update(extra)
    return env


@pytest.fixture
def bars_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKIT_PROGRESS", "1")
    monkeypatch.setattr(progress_mod, "DELAY_S", 0.0)


def test_off_in_tests_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLKIT_PROGRESS", raising=False)
    assert progress_mod.progress_enabled() is False
    monkeypatch.setenv("TOOLKIT_PROGRESS", "1")
    assert progress_mod.progress_enabled() is True
    monkeypatch.setenv("TOOLKIT_PROGRESS", "0")
    assert progress_mod.progress_enabled() is False


def test_repeat_runs_show_a_bar_when_on(bars_on: None, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    tk.run(tk.load(CNN), repeat=40)
    err = capsys.readouterr()
    assert "inferences" in err.err and "/40 [" in err.err
    assert "inferences" not in err.out


def test_repeat_runs_are_silent_when_off(capsys: pytest.CaptureFixture[str]) -> None:
    tk.run(tk.load(CNN), repeat=40)
    assert capsys.readouterr().err == ""


def test_partition_write_and_trace_read_show_bars(bars_on: None, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.formats.chrome_trace import write_chrome_trace
    from toolkit.formats.part_file import PartSpec
    from toolkit.trace.readers import read as read_mod

    res = tk.partition(tk.load(CNN), PartSpec(backends=["cpu", "npu"], default="npu",
                                              opcode={"SOFTMAX": "cpu"}).validate())
    res.write(tmp_path)
    err = capsys.readouterr().err
    assert "writing parts" in err and "/2 [" in err   # 2 parts
    compiled = tk.compile(tk.load(CNN))
    _, trace = tk.run(compiled, trace=True, repeat=3)
    capsys.readouterr()
    path = write_chrome_trace(trace.to_frame(), tmp_path / "t.json")
    monkeypatch.setattr(read_mod, "_PROGRESS_BYTES", 0)
    t = tk.read_trace(path)
    err = capsys.readouterr().err
    assert "reading t.json" in err
    monkeypatch.setenv("TOOLKIT_PROGRESS", "0")
    again = tk.read_trace(path)          # the same events with or without the bar
    assert t.events.equals(again.events) and t.meta == again.meta


def test_vela_run_shows_a_bar(bars_on: None, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ethosu.vela")
    from toolkit.vela import run_vela

    out = run_vela(SAMPLES / "cnn_int8.tflite", tmp_path / "vela")
    assert (out / "cnn_int8_debug.xml").is_file()
    assert "vela cnn_int8.tflite" in capsys.readouterr().err


def _toolkit(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from toolkit.cli import main; "
            "sys.exit(main(sys.argv[1:]))", *args]


def test_cli_not_on_a_terminal_prints_no_bar(tmp_path: Path) -> None:
    r = subprocess.run(_toolkit("run", str(CNN), "--repeat", "50"), capture_output=True,
                       text=True, env=_env(TOOLKIT_PROGRESS_DELAY="0"), cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "inferences" not in r.stderr and "inferences" not in r.stdout


def test_cli_on_a_terminal_prints_a_bar(tmp_path: Path) -> None:
    master, slave = pty.openpty()   # the child's terminal (its own session), never ours
    # a terminal 100 columns wide (a new pty has 0 columns, and a bar fits in none)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(_toolkit("run", str(CNN), "--repeat", "50"), stdin=slave,
                            stdout=subprocess.PIPE, stderr=slave, cwd=tmp_path,
                            env=_env(TOOLKIT_PROGRESS_DELAY="0"), start_new_session=True)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(30)
    os.close(master)
    assert proc.returncode == 0
    assert b"inferences" in seen and b"/50 [" in seen


def test_ctrl_c_stops_cleanly_with_status_130(tmp_path: Path) -> None:
    proc = subprocess.Popen(_toolkit("run", str(CNN), "--repeat", "100000000"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env=_env(TOOLKIT_PROGRESS="1", TOOLKIT_PROGRESS_DELAY="0"),
                            start_new_session=True)   # the signal reaches the child alone
    assert proc.stderr is not None
    # wait until the loop is running (its bar has started), then press Ctrl-C
    os.set_blocking(proc.stderr.fileno(), False)
    seen = b""
    deadline = time.monotonic() + 60
    while b"inferences" not in seen and time.monotonic() < deadline:
        time.sleep(0.1)
        seen += proc.stderr.read() or b""
    assert b"inferences" in seen
    proc.send_signal(signal.SIGINT)
    os.set_blocking(proc.stderr.fileno(), True)
    _, rest = proc.communicate(timeout=60)
    err = (seen + rest).decode()
    assert proc.returncode == 130
    assert "Traceback" not in err
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()
             and "inferences" not in ln]
    assert lines == ["toolkit run: interrupted (Ctrl-C); nothing more was written"]
