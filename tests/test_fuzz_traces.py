"""Fuzz of every trace reader: Chrome JSON and ``.json.gz``, CSV and ``.csv.gz``,
debug-handle records, Parquet, ExecuTorch ETDump / ETRecord / ``.pte`` and ONNX Runtime
profiles (plain and gzip). Each seed file is mutated with the fixed seed (byte, line and
JSON-value mutations from ``test_fuzz``; for gzip inputs, half the mutants are of the
compressed bytes, half of the content, compressed again) and read through the public entry
point: every case must end in a result or a ToolkitError, within the time and memory guards
of ``test_fuzz``. Each test prints the count of cases tried (``TOOLKIT_FUZZ_CASES`` raises it,
``make fuzz`` uses 3,000).
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import SAMPLES
from test_fuzz import SEED, Fuzz, _cases, _mutate_json, _mutator

import toolkit as tk
from toolkit.formats.chrome_trace import write_chrome_trace
from toolkit.formats.trace_csv import write_trace_csv

DEFAULT_CASES = 40
ET = SAMPLES / "executorch"
ONNX = SAMPLES / "onnx"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[bytes]]]:
    """Seed files per format, written by the toolkit or by the real tools (fixtures)."""
    folder = tmp_path_factory.mktemp("seeds")
    result = tk.run(SAMPLES / "cnn.tflite", trace=True, repeat=2)
    frame = result.trace.runtime.to_frame()
    chrome = write_chrome_trace(frame, folder / "t.json").read_bytes()
    events = tk.read_trace(folder / "t.json").events
    csv = write_trace_csv(events, folder / "t.csv").read_bytes()
    records = json.dumps([{"delegate_debug_identifier": int(k), "start_time": int(s),
                           "end_time": int(s + d), "run": int(r)}
                          for k, s, d, r in zip(frame["key"], frame["start_ns"],
                                                frame["dur_ns"], frame["run"])]).encode()
    small = json.dumps({"traceEvents": [
        {"ph": "B", "name": "a", "ts": 1, "pid": 1, "tid": 1, "args": {"x": [1, {"y": 2}]}},
        {"ph": "E", "name": "a", "ts": 3.5, "pid": 1, "tid": 1},
        {"ph": "X", "name": "b", "ts": "4", "dur": 1, "pid": "p", "tid": 2},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}}],
        "displayTimeUnit": "ns"}).encode()
    profiles = [gzip.decompress(p.read_bytes()) for p in sorted(ONNX.glob("*.prof.json.gz"))[:2]]
    yield {
        "chrome": [chrome, small],
        "csv": [csv, b"op,start_us,dur_us\nconv,1.5,2\nrelu,3.5,0.25\n"],
        "records": [records, b'{"events": [{"debug_handle": 1, "start_ns": 1, "dur_ns": 2}]}'],
        "parquet": [_parquet(events, folder)],
        "etdump": [p.read_bytes() for p in sorted(ET.glob("*.etdp"))[:2]],
        "etrecord": [(ET / "cnn_portable.etrecord.bin").read_bytes()],
        "pte": [(ET / "cnn_portable.pte").read_bytes()],
        "ort": profiles,
    }


def _parquet(events: Any, folder: Path) -> bytes:
    from toolkit.formats.trace_parquet import write_trace_parquet

    return write_trace_parquet(events, folder / "t.parquet").read_bytes()


def _run(fuzz: Fuzz, seeds: list[bytes], path: Path, read: Callable[[Path], Any], *,
         gz: bool = False, structure: Callable[..., bytes] | None = None,
         binary: bool = False) -> None:
    """Write ``_cases(DEFAULT_CASES)`` mutants of ``seeds`` to ``path`` and read each."""
    rng = random.Random(SEED + zlib.crc32(fuzz.name.encode()))
    compressed = [gzip.compress(s, mtime=0) for s in seeds] if gz else []
    for i in range(_cases(DEFAULT_CASES)):
        if gz and rng.random() < 0.5:
            pool = compressed
            mutate = _mutator(rng, None) if not binary else _bytes_only(rng)
        else:
            pool = seeds
            mutate = _bytes_only(rng) if binary else _mutator(rng, structure)
        data = mutate(rng, pool[i % len(pool)], pool)
        if gz and pool is seeds:
            data = gzip.compress(data, mtime=0)
        path.write_bytes(data)
        fuzz.case(lambda: read(path), data)


def _bytes_only(rng: random.Random) -> Callable[[random.Random, bytes, list[bytes]], bytes]:
    from test_fuzz import _mutate_bytes

    return _mutate_bytes


def _read_events(path: Path, **kw: Any) -> None:
    trace = tk.read_trace(path, **kw)
    assert {"start_ns", "dur_ns"} <= set(trace.events.columns)


@pytest.mark.parametrize("gz", [False, True], ids=["json", "json.gz"])
def test_fuzz_chrome_json(seeds: dict[str, list[bytes]], tmp_path: Path, gz: bool) -> None:
    fuzz = Fuzz(f"Chrome trace {'.json.gz' if gz else '.json'}")
    _run(fuzz, seeds["chrome"], tmp_path / f"t.json{'.gz' if gz else ''}", _read_events,
         gz=gz, structure=_mutate_json)
    fuzz.report()


@pytest.mark.parametrize("gz", [False, True], ids=["csv", "csv.gz"])
def test_fuzz_csv(seeds: dict[str, list[bytes]], tmp_path: Path, gz: bool) -> None:
    fuzz = Fuzz(f"trace {'.csv.gz' if gz else '.csv'}")
    _run(fuzz, seeds["csv"], tmp_path / f"t.csv{'.gz' if gz else ''}", _read_events, gz=gz)
    fuzz.report()


def test_fuzz_records(seeds: dict[str, list[bytes]], tmp_path: Path) -> None:
    fuzz = Fuzz("debug-handle records JSON")
    _run(fuzz, seeds["records"], tmp_path / "r.json",
         lambda p: _read_events(p, format="records"), structure=_mutate_json)
    fuzz.report()


def test_fuzz_parquet(seeds: dict[str, list[bytes]], tmp_path: Path) -> None:
    fuzz = Fuzz("trace Parquet")
    _run(fuzz, seeds["parquet"], tmp_path / "t.parquet", _read_events, binary=True)
    fuzz.report()


def test_fuzz_executorch(seeds: dict[str, list[bytes]], tmp_path: Path) -> None:
    etdp, etrecord, pte = (ET / "cnn_portable.etdp", ET / "cnn_portable.etrecord.bin",
                           ET / "cnn_portable.pte")

    def whole(d: Path, r: Path, p: Path) -> None:
        profile = tk.read_executorch(d, r, p)
        profile.attribution().by_layer()

    for name, key, read in (
            ("ETDump .etdp", "etdump", lambda p: whole(p, etrecord, pte)),
            ("ETRecord", "etrecord", lambda p: whole(etdp, p, pte)),
            ("ExecuTorch program .pte", "pte", lambda p: whole(etdp, etrecord, p))):
        fuzz = Fuzz(name)
        _run(fuzz, seeds[key], tmp_path / f"x.{key}", read, binary=True)
        fuzz.report()


@pytest.mark.parametrize("gz", [False, True], ids=["json", "json.gz"])
def test_fuzz_ort_profiles(seeds: dict[str, list[bytes]], tmp_path: Path, gz: bool) -> None:
    fuzz = Fuzz(f"ONNX Runtime profile {'.json.gz' if gz else '.json'}")
    _run(fuzz, seeds["ort"], tmp_path / f"p.json{'.gz' if gz else ''}",
         lambda p: _read_events(p, format="ort"), gz=gz, structure=_mutate_json)
    fuzz.report()
