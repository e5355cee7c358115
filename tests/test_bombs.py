"""Decompression bombs and files that claim too much, read in a memory-bounded process
(``resource.setrlimit(RLIMIT_AS)``): each fails fast with a LimitError naming the limit,
never a MemoryError or minutes of work.

The bombs are gzip files of many members (a gzip reader reads concatenated members as one
stream), so a 1 GiB payload is built by compressing 16 MiB once.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import toolkit as tk
from toolkit.errors import LimitError
from toolkit.limits import limits

ROOT = Path(__file__).resolve().parents[1]
BLOCK = 16 << 20


def _bomb(path: Path, head: bytes, block: bytes, repeat: int, tail: bytes) -> Path:
    """Write ``head + block * repeat + tail`` as gzip members; return ``path``."""
    member = gzip.compress(block, compresslevel=9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(repeat):
            f.write(member)
        f.write(gzip.compress(tail))
    return path


@pytest.fixture(scope="module")
def json_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Chrome trace of one event whose name is a 1 GiB string, in about 1 MB."""
    return _bomb(tmp_path_factory.mktemp("bomb") / "big.json.gz",
                 b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "name": "', b"a" * BLOCK,
                 (1 << 30) // BLOCK, b'"}]}')


@pytest.fixture(scope="module")
def csv_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CSV of 180 M rows (1 GB unpacked), in about 1.5 MB."""
    rows = b"1,2,3\n" * (1 << 20)
    return _bomb(tmp_path_factory.mktemp("bomb") / "rows.csv.gz",
                 b"command_id,start_ns,dur_ns\n", rows, 180, b"")


_BOUNDED = """
import resource, sys, time
import toolkit as tk
from toolkit.errors import LimitError
from toolkit.limits import limits
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (768 << 20), resource.RLIM_INFINITY))
t = time.perf_counter()
try:
    with limits(**eval(sys.argv[2])):
        tk.read_trace(sys.argv[1])
except LimitError as e:
    print("LimitError", round(time.perf_counter() - t, 2), str(e))
except MemoryError:
    print("MemoryError")
else:
    print("read")
"""


def _read_bounded(path: Path, **changes: int) -> tuple[str, float, str]:
    """Read ``path`` in a process of at most 768 MiB more address space than after its
    imports; returns (what ended the read, seconds, message)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_BOUNDED), str(path),
                           repr(changes)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    word, _, rest = done.stdout.strip().partition(" ")
    seconds, _, message = rest.partition(" ")
    return word, float(seconds or 0), message


def test_bombs_are_small(json_bomb: Path, csv_bomb: Path) -> None:
    assert json_bomb.stat().st_size < 1_200_000
    assert csv_bomb.stat().st_size < 2_000_000


def test_a_gzip_string_bomb_stops_at_the_decompressed_bound(json_bomb: Path) -> None:
    """1 MB unpacking to 1 GiB: the reader stops after max_decompressed_bytes, within a
    memory bound the whole string would not fit in."""
    word, seconds, message = _read_bounded(json_bomb, max_decompressed_bytes=128 << 20,
                                           max_compression_ratio=1 << 20)
    assert word == "LimitError", (word, message)
    assert "max_decompressed_bytes=134,217,728" in message and "(gzip)" in message
    assert seconds < 60


def test_a_gzip_string_bomb_stops_at_the_ratio_bound_by_default(json_bomb: Path) -> None:
    """Default limits: about 1000 bytes unpacked per byte read is a bomb, refused once
    64 MiB came out, within a memory bound the whole string would not fit in."""
    word, seconds, message = _read_bounded(json_bomb)
    assert word == "LimitError", (word, message)
    assert "max_compression_ratio=256" in message and "(gzip)" in message
    assert seconds < 60


def test_a_csv_of_180m_rows_stops_at_the_event_bound(csv_bomb: Path) -> None:
    """1.5 MB of 180 M rows, the ratio bound raised: the rows are counted as the file unpacks
    (constant memory) and refused past max_events_per_file, before pandas sees one."""
    word, seconds, message = _read_bounded(csv_bomb, max_compression_ratio=1 << 20)
    assert word == "LimitError", (word, message)
    assert "max_events_per_file=134,217,728" in message and "rows" in message
    assert seconds < 60


def test_the_bounds_in_process(tmp_path: Path) -> None:
    """Small versions of the same, in this process: Chrome JSON (events), CSV (bytes and
    rows), records and ORT-named JSON, gzip or not."""
    events = [{"ph": "X", "ts": i, "dur": 1, "name": "a"} for i in range(2000)]
    chrome = tmp_path / "t.json.gz"
    chrome.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    plain = tmp_path / "t.json"
    plain.write_text(json.dumps(events))
    csv = tmp_path / "t.csv"
    csv.write_text("command_id,start_ns,dur_ns\n" + "1,2,3\n" * 2000)
    csv_gz = tmp_path / "t.csv.gz"
    csv_gz.write_bytes(gzip.compress(csv.read_bytes()))
    records = tmp_path / "r.json.gz"
    records.write_bytes(gzip.compress(json.dumps(
        [{"delegate_debug_identifier": 1, "start_time": i, "end_time": i + 1}
         for i in range(2000)]).encode()))
    for path in (chrome, plain, csv, csv_gz):
        assert len(tk.read_trace(path).events) == 2000
        with limits(max_events_per_file=1000), pytest.raises(LimitError,
                                                             match="max_events_per_file"):
            tk.read_trace(path)
    for path in (chrome, csv_gz, records):
        with limits(max_decompressed_bytes=10_000), pytest.raises(
                LimitError, match="max_decompressed_bytes=10,000"):
            tk.read_trace(path)


def test_the_bounds_fail_fast(tmp_path: Path) -> None:
    """A 10 MB-unpacking gzip is refused after reading about the bound, not all of it."""
    path = _bomb(tmp_path / "b.json.gz", b"[", b" " * (1 << 20), 64, b"]")
    t = time.perf_counter()
    with limits(max_decompressed_bytes=1 << 20), pytest.raises(LimitError):
        tk.read_trace(path)
    assert time.perf_counter() - t < 5
