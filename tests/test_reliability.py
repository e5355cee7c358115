"""Reliability: connection files stay in their folder, partition sets are whole or refused,
writers are atomic, bad arguments and OS errors are ToolkitErrors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import toolkit as tk
from toolkit.errors import PartitionError, ToolkitError
from toolkit.formats.conn_file import (
    Connection,
    ConnPart,
    format_conn_ini,
    parse_conn_ini,
    read_connection,
)
from toolkit.util.atomic import JOURNAL_NAME, LOCK_NAME, folder_lock

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_models"
STEM = "Net_InstanceNorm_003"
PART = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
        "OPCODE": {"DIV": "npu"}}


def _write_partition(folder: Path) -> tk.PartitionResult:
    result = tk.partition(SAMPLES / f"{STEM}.circle", PART)
    result.write(folder)
    return result


# ---------------------------------------------------------------- containment
def test_conn_ini_refuses_names_that_would_add_sections() -> None:
    bad = "x\n[evil]\nfile=/etc/passwd"
    conn = Connection(ConnPart("m.circle", [bad], ["y"]), [ConnPart("p.circle", [bad], ["y"])])
    with pytest.raises(PartitionError, match=r"cannot be written to a \.conn\.ini"):
        format_conn_ini(conn)
    for name in (" lead", "trail ", "[sec", ";c", "#c", "a\rb", "nul\0"):
        with pytest.raises(PartitionError):
            format_conn_ini(Connection(ConnPart("m.circle", [name], []), []))
    # names the format can carry round-trip exactly
    ok = ["a=b", "model/conv/Relu;model/conv/BiasAdd", "ü名", "x y"]
    conn = Connection(ConnPart("m.circle", ok, ok), [ConnPart("p.circle", ok, ok)])
    back = parse_conn_ini(format_conn_ini(conn))
    assert back.source.inputs == ok and back.parts[0].outputs == ok


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.circle", "sub/part.circle",
                                  "..", "a\\b.circle"])
def test_connection_files_only_name_files_beside_them(tmp_path: Path, name: str) -> None:
    _write_partition(tmp_path)
    conn_path = tmp_path / f"{STEM}.conn.json"
    obj = json.loads(conn_path.read_text())
    obj["parts"][0]["file"] = name
    conn_path.write_text(json.dumps(obj))
    with pytest.raises(PartitionError, match="not a plain file name") as info:
        tk.run(conn_path, None)
    assert "root:" not in str(info.value)  # no bytes of another file in the message


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    work, other = tmp_path / "work", tmp_path / "other"
    _write_partition(work)
    other.mkdir()
    part = work / f"{STEM}.00001_cpu.circle"
    (other / part.name).write_bytes(part.read_bytes())
    part.unlink()
    part.symlink_to(other / part.name)
    with pytest.raises(PartitionError, match="link that leads out"):
        tk.run(work / f"{STEM}.conn.json", None)


# ---------------------------------------------------------------- the set is its manifest
def test_a_mixed_set_is_refused(tmp_path: Path) -> None:
    _write_partition(tmp_path)
    x = {"Input": np.ones((1, 8, 6, 12), np.float32)}
    good = tk.run(tmp_path / f"{STEM}.conn.json", x).outputs
    assert good
    # a part of another partition of the same model put in place of one of this set
    other = tk.partition(SAMPLES / f"{STEM}.circle",
                         {"partition": {"backends": "cpu,npu", "default": "npu"}})
    (tmp_path / "other").mkdir()
    paths = other.write(tmp_path / "other")
    (tmp_path / f"{STEM}.00001_cpu.circle").write_bytes(paths[0].read_bytes())
    for conn in (f"{STEM}.conn.json", f"{STEM}.conn.ini"):
        with pytest.raises(PartitionError, match="does not match the connection file"):
            tk.run(tmp_path / conn, x)


def test_the_manifest_is_read_from_both_forms(tmp_path: Path) -> None:
    _write_partition(tmp_path)
    a = read_connection(tmp_path / f"{STEM}.conn.json")
    b = read_connection(tmp_path / f"{STEM}.conn.ini")
    assert [(p.file, p.size, p.sha256) for p in a.parts] == \
        [(p.file, p.size, p.sha256) for p in b.parts]
    assert all(p.size and p.sha256 for p in a.parts)


def test_a_bom_and_a_folder_named_like_a_connection(tmp_path: Path) -> None:
    _write_partition(tmp_path)
    p = tmp_path / f"{STEM}.conn.json"
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    assert read_connection(p).parts
    (tmp_path / "d.conn.json").mkdir()
    with pytest.raises(ToolkitError, match="connection"):
        tk.run(tmp_path / "d.conn.json", None)


def test_deep_json_is_a_toolkit_error(tmp_path: Path) -> None:
    p = tmp_path / "x.conn.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ToolkitError):
        read_connection(p)


# ---------------------------------------------------------------- locks
def test_a_held_lock_refuses_a_second_writer(tmp_path: Path) -> None:
    result = tk.partition(SAMPLES / f"{STEM}.circle", PART)
    with folder_lock(tmp_path):
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            (tmp_path / LOCK_NAME).write_text(f"{holder.pid}\n")
            with pytest.raises(ToolkitError, match=f"process {holder.pid}"):
                result.write(tmp_path)
        finally:
            holder.kill()
            holder.wait()
            (tmp_path / LOCK_NAME).write_text(f"{os.getpid()}\n")
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_stale_lock_and_stale_temp_files_are_cleaned(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(f"{dead.pid}\n")
    junk = tmp_path / f".{STEM}.00001_cpu.circle.abc123.tmp"
    junk.write_bytes(b"half")
    paths = _write_partition(tmp_path).paths
    assert not junk.exists() and not (tmp_path / LOCK_NAME).exists()
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in paths)


_KILL_WRITER = """
import sys, toolkit as tk
spec = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
        "OPCODE": {"DIV": "npu"}}
results = [tk.partition(path, spec) for path in sys.argv[1:3]]
print("ready", flush=True)
while True:
    for result in results:  # two sets with the same file names and different bytes
        result.write(sys.argv[3])
"""


def _variant(path: Path) -> Path:
    """The sample with Gamma doubled: partitions into files of the same names."""
    model = tk.load(SAMPLES / f"{STEM}.circle")
    gamma = next(t for t in model.graph.tensors if t.name == "Gamma")
    assert gamma.data is not None
    gamma.data = gamma.data * np.float32(2)
    tk.save(model, path)
    return path


_DIES_BETWEEN_RENAMES = """
import os, sys, toolkit as tk
import toolkit.util.atomic as atomic
spec = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
        "OPCODE": {"DIV": "npu"}}
result = tk.partition(sys.argv[1], spec)
renames = []
def replace(src, dst):
    renames.append(dst)
    if len(renames) == int(sys.argv[3]):  # dies with this rename not done, like SIGKILL
        os._exit(9)
    os.rename(src, dst)
atomic.os.replace = replace
result.write(sys.argv[2])
"""


@pytest.mark.parametrize("dies_at", [1, 2, 3, 4])
def test_a_set_left_between_renames_is_finished_by_the_next_reader(
        tmp_path: Path, dies_at: int) -> None:
    """A writer that dies at its ``dies_at``-th rename (the first puts the journal in place,
    the others the set's files): before the journal the old set stays; after it, the next
    reader finishes the renames and runs the new set. Never a mixed set."""
    work = tmp_path / "work"
    _write_partition(work)
    x = {"Input": np.random.default_rng(1).uniform(-1, 1, (1, 8, 6, 12)).astype(np.float32)}
    variant = _variant(tmp_path / f"{STEM}.circle")
    source = variant if dies_at > 1 else SAMPLES / f"{STEM}.circle"
    want = tk.run(source, x).outputs["Add_as_terminal"]
    done = subprocess.run([sys.executable, "-c", _DIES_BETWEEN_RENAMES, str(variant), str(work),
                           str(dies_at)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 9, done.stderr[-2000:]
    assert (work / JOURNAL_NAME).is_file() == (dies_at > 1)
    (work / LOCK_NAME).unlink()  # as a stale-lock takeover would
    got = tk.run(work / f"{STEM}.conn.json", x).outputs["Add_as_terminal"]
    np.testing.assert_array_equal(got, want)
    assert not (work / JOURNAL_NAME).exists()
    if dies_at > 1:
        assert not [n for n in os.listdir(work) if n.endswith(".tmp")]


def test_a_damaged_journal_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _write_partition(work)
    (work / JOURNAL_NAME).write_text('{"renames": [[".x.1.tmp", "../outside"]]}')
    with pytest.raises(ToolkitError, match="plan is damaged"):
        tk.run(work / f"{STEM}.conn.json")


def test_killed_partition_writes_leave_an_old_or_new_set(tmp_path: Path) -> None:
    """SIGKILL a process that rewrites a partition set in a loop, at random moments: the set
    it leaves is always complete and consistent (the chain runs and matches one source's
    outputs), a set killed between renames being finished by the reader."""
    rng = np.random.default_rng(0)
    work = tmp_path / "work"
    _write_partition(work)
    x = {"Input": np.random.default_rng(1).uniform(-1, 1, (1, 8, 6, 12)).astype(np.float32)}
    models = [SAMPLES / f"{STEM}.circle", _variant(tmp_path / f"{STEM}.circle")]
    wants = [tk.run(m, x).outputs["Add_as_terminal"] for m in models]
    assert not np.array_equal(*wants)
    tries = int(os.environ.get("TOOLKIT_KILL_TRIES", "6"))
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(tries):
        proc = subprocess.Popen([sys.executable, "-c", _KILL_WRITER, *map(str, models),
                                 str(work)], stdout=subprocess.PIPE, cwd=ROOT)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(float(rng.uniform(0.0, 0.15)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        (work / LOCK_NAME).unlink(missing_ok=True)  # as a stale-lock takeover would
        try:
            got = tk.run(work / f"{STEM}.conn.json", x).outputs
        except PartitionError as e:
            assert "does not match the connection file" in str(e)
            outcomes["refused"] += 1
        else:
            assert any(np.array_equal(got["Add_as_terminal"], w) for w in wants)
            outcomes["ok"] += 1
        for name in os.listdir(work):  # every final name is a complete file
            assert not name.endswith(".circle") or (work / name).stat().st_size > 0
    assert outcomes["ok"] == tries, outcomes
    print(f"kill test: {tries} kills, {outcomes}")


# ---------------------------------------------------------------- bounded work
def _tiny_model(shape: tuple[int, ...], ops: int = 1) -> tk.Model:
    from toolkit.builder import ModelBuilder

    mb = ModelBuilder()
    y = mb.input("x", (1, 8, 1, 1))
    for i in range(ops):
        y = mb.op("RELU", [y], (1, 8, 1, 1), name=f"y{i}")
    mb.output(y)
    model = mb.build()
    for t in model.graph.tensors:
        t.shape = shape
    return model


def test_a_shared_shape_vector_bomb_fails_fast(tmp_path: Path, monkeypatch) -> None:
    """Tensors whose shape vectors all point at one long vector: refused before decoding."""
    import toolkit.formats.flatbuffer_write as fw
    from toolkit.errors import LimitError
    from toolkit.limits import limits

    real = fw._Writer._int_vector
    shared: dict[tuple[int, ...], int] = {}

    def one_vector(self, values, dtype=np.int32):  # type: ignore[no-untyped-def]
        key = tuple(np.asarray(values).reshape(-1).tolist())
        if len(key) < 1000:
            return real(self, values, dtype)
        if key not in shared:
            shared[key] = real(self, values, dtype)
        return shared[key]

    monkeypatch.setattr(fw._Writer, "_int_vector", one_vector)
    model = _tiny_model((1,) * 250_000, ops=40)  # 41 tensors share one shape vector
    tk.save(model, tmp_path / "bomb.tflite")
    size = (tmp_path / "bomb.tflite").stat().st_size
    assert size < 2_000_000
    t0 = time.perf_counter()
    with pytest.raises(LimitError, match=r"max_tensor_rank.*limits\(max_tensor_rank="):
        tk.load(tmp_path / "bomb.tflite")
    assert time.perf_counter() - t0 < 5  # fails fast (not a timing target: a hang guard)
    with limits(max_tensor_rank=300_000), pytest.raises(LimitError, match="entries"):
        tk.load(tmp_path / "bomb.tflite")


def test_element_and_stripe_claims_fail_fast(tmp_path: Path) -> None:
    from toolkit.errors import LimitError
    from toolkit.limits import limits

    tk.save(_tiny_model((1 << 20, 1 << 20)), tmp_path / "huge.tflite")
    with pytest.raises(LimitError, match="max_tensor_elements"):
        tk.load(tmp_path / "huge.tflite")
    with pytest.raises(ToolkitError, match="does not fit"):
        tk.save(_tiny_model((1, 1 << 31, 1, 1)), tmp_path / "rows.tflite")
    tk.save(_tiny_model((1, (1 << 31) - 1, 1, 1)), tmp_path / "rows.tflite")
    model = tk.load(tmp_path / "rows.tflite")  # 2**31-1 elements: under the element bound
    with pytest.raises(LimitError, match="max_stripes_per_op"):
        tk.compile(model, passes=[], target={"buffer_bytes": 1024})
    with pytest.raises(ToolkitError, match="positive integer"), limits(max_stripes_per_op=0):
        pass


# ---------------------------------------------------------------- the command line
def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_ordinary_cli_mistakes_exit_2_with_a_fix_and_no_traceback(tmp_path: Path) -> None:
    model = str(SAMPLES / "cnn.tflite")
    (tmp_path / "afile").write_text("")
    (tmp_path / "adir").mkdir()
    (tmp_path / "bad.npz").write_text("garbage")
    cases = [
        ["compile", model, "-o", "afile"],
        ["compile", model, "-o", "out", "--buffer-bytes", "0"],
        ["compile", model, "-o", "out", "--buffer-bytes", "-5"],
        ["run", model, "--csv", "adir"],
        ["run", model, "--trace", "adir"],
        ["run", model, "--outputs", "adir"],
        ["run", model, "--inputs", "bad.npz"],
        ["run", model, "--repeat", "0"],
        ["run", "adir"],
        ["inspect", model, "--csv", "afile"],
        ["trace-join", "missing.json", "--compiled", model],
        ["partition", "--part_file", "x.part", "--input_file", "y.circle", "--work_path",
         "nodir"],
        ["no-such-verb"],
    ]
    for args in cases:
        done = _cli(args, tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert "error" in done.stderr, (args, done.stderr)
    assert sorted(os.listdir(tmp_path)) == ["adir", "afile", "bad.npz"]  # nothing written


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    done = _cli(["--debug", "run", str(tmp_path / "missing.tflite")], tmp_path)
    assert done.returncode != 0 and "Traceback" in done.stderr


def test_outputs_and_csv_are_written_whole(tmp_path: Path) -> None:
    done = _cli(["run", str(SAMPLES / "cnn.tflite"), "--outputs", "o.npz", "--csv", "t.csv"],
                tmp_path)
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "o.npz") as z:
        assert z.files
    assert (tmp_path / "t.csv").read_text().count("\n") > 1
    assert sorted(os.listdir(tmp_path)) == ["o.npz", "t.csv"]  # no temporary file left


def test_api_arguments_are_checked() -> None:
    for call in (lambda: tk.load(123), lambda: tk.run(SAMPLES / "cnn.tflite", repeat=2.5),
                 lambda: tk.read_trace(123)):
        with pytest.raises(ToolkitError):
            call()  # type: ignore[no-untyped-call]
