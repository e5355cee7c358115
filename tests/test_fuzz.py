"""Fuzz every format the toolkit reads: no exception but ToolkitError, no hang.

Each format starts from real files (sample models, files the toolkit writes, committed Vela
fixtures, Caffe nets) and mutates them: byte flips, truncation, insertion, deletion,
duplication, splicing with another file of the same format, and mutations that know the
structure (huge integers, deep nesting, wrong types, NULs, BOMs, unknown encodings, edited
lines). Every case runs under a time guard and a memory bound. The seed is fixed; the count
per format is ``TOOLKIT_FUZZ_CASES`` (``make fuzz`` raises it). Each test prints
``fuzz <format>: N cases (R refused, A accepted)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import resource
import shutil
import signal
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
from circle_schema.v0_10 import circle as fb
from support import SAMPLE_TFLITE, SAMPLES

import toolkit as tk
from toolkit.errors import ToolkitError
from toolkit.formats.flatbuffer_write import write_model

ROOT = Path(__file__).resolve().parents[1]
VELA_FIXTURES = ROOT / "tests" / "fixtures" / "vela"
STEM = "Net_InstanceNorm_003"
PART = {"partition": {"backends": "cpu,npu", "default": "cpu", "comply": "opcode"},
        "OPCODE": {"DIV": "npu"}}
SEED = 20_251_125
GUARD_S = float(os.environ.get("TOOLKIT_FUZZ_GUARD_S", "20"))
MEMORY_BYTES = 3 << 30  # address space a case may add to the process


def _cases(default: int) -> int:
    """Cases per format: ``TOOLKIT_FUZZ_CASES`` when set, else ``default``."""
    return int(os.environ.get("TOOLKIT_FUZZ_CASES", default))


# ------------------------------------------------------------------ the guard
class _Hang(BaseException):
    """Raised by the time guard inside a case that ran too long."""


@contextlib.contextmanager
def _time_guard(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise _Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _memory_bound(extra: int) -> Iterator[None]:
    """Bound the process's address space to what it uses now plus ``extra`` bytes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        yield
        return
    bound = used + extra
    if hard != resource.RLIM_INFINITY:
        bound = min(bound, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class Fuzz:
    """Runs cases of one format and records how each ended."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts = {"refused": 0, "accepted": 0}
        self.escapes: dict[str, tuple[int, str]] = {}

    def case(self, fn: Callable[[], Any], data: bytes | str = b"") -> None:
        try:
            with _memory_bound(MEMORY_BYTES), _time_guard(GUARD_S):
                fn()
        except ToolkitError:
            self.counts["refused"] += 1
        except (Exception, _Hang) as e:
            frames = [f for f in traceback.extract_tb(e.__traceback__)
                      if "/toolkit/" in f.filename] or traceback.extract_tb(e.__traceback__)
            last = frames[-1]
            key = f"{type(e).__name__} at {Path(last.filename).name}:{last.lineno}"
            n, example = self.escapes.get(key, (0, ""))
            self.escapes[key] = (n + 1, example or f"{str(e)[:200]!r} on {data[:300]!r}")
        else:
            self.counts["accepted"] += 1

    def report(self) -> None:
        total = sum(self.counts.values()) + sum(n for n, _ in self.escapes.values())
        print(f"\nfuzz {self.name}: {total} cases ({self.counts['refused']} refused, "
              f"{self.counts['accepted']} accepted, "
              f"{sum(n for n, _ in self.escapes.values())} escaped)")
        assert not self.escapes, "\n".join(
            f"{k}: {n} cases, e.g. {ex}" for k, (n, ex) in self.escapes.items())


# ------------------------------------------------------------------ mutations
TOKENS: list[bytes] = [
    b"9" * 5000, b"-" + b"9" * 40, b"18446744073709551616", b"9223372036854775808",
    b"-9223372036854775809", b"2147483648", b"-1", b"0", b"1e309", b"-1e309", b"NaN",
    b"Infinity", b"\x00", b"\xef\xbb\xbf", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80",
    b"[" * 5000, b'{"a":' * 5000, b"\n", b"\r\n", b"\r", b",", b'"', b"'", b"=", b";",
    b"#", b"\\", b"]]>", b"<![CDATA[", b'<!DOCTYPE d [<!ENTITY e "x">]>', b"&e;",
    b"<?xml version='1.0' encoding='bogus-enc'?>", b"<table name='t'>", b"</table>",
    b"[models]\n", b"file=/etc/hostname\n", b"../outside.circle", b"/etc/hostname",
    b"true", b"null", b"{}", b"[]", b" " * 64, b"\t", b"x" * 10_000,
]


def _mutate_bytes(rng: random.Random, raw: bytes, others: list[bytes]) -> bytes:
    """Apply 1 to 4 random byte-level mutations (see the module docstring)."""
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["flip", "set", "truncate", "insert", "token", "delete",
                           "duplicate", "splice", "number"])
        pos = rng.randrange(len(data) + 1)
        if kind == "flip" and data:
            pos = min(pos, len(data) - 1)
            data[pos] ^= 1 << rng.randrange(8)
        elif kind == "set" and data:
            pos = min(pos, len(data) - 1)
            data[pos] = rng.randrange(256)
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif kind == "token":
            data[pos:pos] = rng.choice(TOKENS)
        elif kind == "delete":
            del data[pos:pos + rng.randint(1, 64)]
        elif kind == "duplicate":
            data[pos:pos] = data[pos:pos + rng.randint(1, 256)]
        elif kind == "splice" and others:
            other = rng.choice(others)
            cut = rng.randrange(len(other) + 1)
            data = data[:pos] + bytearray(other[cut:])
        elif kind == "number":
            digits = [i for i, c in enumerate(data) if 48 <= c <= 57]
            if digits:
                i = rng.choice(digits)
                data[i:i + 1] = rng.choice(TOKENS[:12])
    return bytes(data)


def _mutate_lines(rng: random.Random, raw: bytes, others: list[bytes]) -> bytes:
    """Line-level mutations of a text file: drop, duplicate, swap, borrow a line, replace
    a value or a cell with a bad token."""
    lines = raw.split(b"\n")
    pool = [ln for o in others for ln in o.split(b"\n")] or lines
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        kind = rng.choice(["drop", "dup", "swap", "borrow", "value", "cell", "blank"])
        if kind == "drop" and len(lines) > 1:
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "borrow":
            lines.insert(i, rng.choice(pool))
        elif kind == "value" and b"=" in lines[i]:
            key = lines[i].split(b"=", 1)[0]
            lines[i] = key + b"=" + rng.choice(TOKENS)
        elif kind == "cell" and b"," in lines[i]:
            cells = lines[i].split(b",")
            cells[rng.randrange(len(cells))] = rng.choice(TOKENS)
            lines[i] = b",".join(cells)
        elif kind == "blank":
            lines[i] = rng.choice([b"", b"   ", b"\t"])
    return b"\n".join(lines)


_BAD_JSON_VALUES: list[str] = [
    "9" * 5000, str(2**63), str(-(2**63) - 1), str(2**64), "1e400", "-1", "0", "1.5", "true",
    "null", '""', '"x\\n[evil]\\nfile=/etc/hostname"', '"/etc/hostname"', '"../x.circle"',
    '"\\u0000"', "[]", "{}", "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000,
    "[[1, 2], [3]]", '{"1": [0]}', '"' + "y" * 100_000 + '"', "[-1]", "[1.5]", '["1"]',
    "[true]", "[null]",
]


def _json_paths(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _json_paths(v, (*path, i))


def _mutate_json(rng: random.Random, raw: bytes, others: list[bytes]) -> bytes:
    """Replace one value (or key) of a JSON document with a value of a wrong kind or size."""
    obj = json.loads(raw.decode("utf-8-sig"))
    marker = "\x01FUZZ\x01"
    paths = list(_json_paths(obj))
    path = rng.choice(paths)
    bad = rng.choice(_BAD_JSON_VALUES)
    if not path:
        return bad.encode()
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    if isinstance(parent, dict) and rng.random() < 0.2:
        parent[marker] = parent.pop(path[-1])  # a key replaced
        bad = json.dumps(rng.choice(["", "9" * 30, "\u0000", "x" * 1000, "-0", "01"]))
    elif isinstance(parent, dict) and rng.random() < 0.1:
        del parent[path[-1]]  # a key dropped
        return json.dumps(obj).encode()
    else:
        parent[path[-1]] = marker
    return json.dumps(obj).replace(json.dumps(marker), bad).encode()


def _mutator(rng: random.Random, structure: Callable[..., bytes] | None
             ) -> Callable[[random.Random, bytes, list[bytes]], bytes]:
    if structure is not None and rng.random() < 0.5:
        return structure
    return _mutate_bytes if rng.random() < 0.7 else _mutate_lines


def _fuzz_files(fuzz: Fuzz, seeds: list[bytes], n: int, path: Path,
                read: Callable[[Path], Any],
                structure: Callable[..., bytes] | None = None) -> None:
    """Write ``n`` mutants of ``seeds`` to ``path`` in turn and read each with ``read``."""
    rng = random.Random(SEED + zlib.crc32(fuzz.name.encode()) % 1000)  # same in every process
    for i in range(n):
        raw = seeds[i % len(seeds)]
        data = _mutator(rng, structure)(rng, raw, seeds)
        path.write_bytes(data)
        fuzz.case(lambda: read(path), data)


# ------------------------------------------------------------------ seeds
@pytest.fixture(scope="module")
def partition_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("partition")
    tk.partition(SAMPLES / f"{STEM}.circle", PART).write(folder)
    return folder


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compiled")
    tk.compile(SAMPLES / "two_branch.tflite").save(folder)
    return folder


_X = {"Input": np.linspace(-1, 1, 8 * 6 * 12, dtype=np.float32).reshape(1, 8, 6, 12)}


# ------------------------------------------------------------------ models
def _model_t_mutation(rng: random.Random, raw: bytes) -> bytes:
    """Mutate a model through the FlatBuffers object API: huge or negative shape entries,
    tensor indices, buffer indices, types, opcodes, option types, metadata bytes."""
    m = fb.Model.ModelT.InitFromPackedBuf(raw, 0)
    g = m.subgraphs[0]
    bad_ints = [-1, 0, 1 << 31 - 1, (1 << 31) - 1, -(1 << 31), 1 << 20, 255, 65_535]
    kind = rng.choice(["shape", "input", "buffer", "type", "opcode", "options", "metadata",
                       "rank", "outputs"])
    t = rng.choice(g.tensors)
    if kind == "shape" and t.shape is not None and len(t.shape):
        t.shape[rng.randrange(len(t.shape))] = rng.choice(bad_ints)
    elif kind == "rank":
        t.shape = np.ones(rng.choice([0, 17, 1000, 100_000]), dtype=np.int32)
    elif kind == "input":
        op = rng.choice(g.operators)
        if op.inputs is not None and len(op.inputs):
            op.inputs[rng.randrange(len(op.inputs))] = rng.choice(bad_ints)
    elif kind == "outputs":
        g.outputs = [rng.choice(bad_ints)]
    elif kind == "buffer":
        t.buffer = rng.choice([*bad_ints, len(m.buffers)])
    elif kind == "type":
        t.type = rng.choice([-1, 7, 17, 50, 127])
    elif kind == "opcode":
        oc = rng.choice(m.operatorCodes)
        oc.builtinCode = rng.choice([-1, 32, 127, 200, 1000])
        oc.deprecatedBuiltinCode = rng.choice([-128, 32, 127])
    elif kind == "options":
        op = rng.choice(g.operators)
        op.builtinOptionsType = rng.choice([0, 1, 50, 126, 127])
    elif kind == "metadata" and m.metadata:
        md = rng.choice(m.metadata)
        buf = m.buffers[md.buffer]
        if buf.data is not None and len(buf.data):
            buf.data = np.frombuffer(_mutate_bytes(rng, bytes(buf.data), []) or b"\0",
                                     dtype=np.uint8).copy()
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=raw[4:8])
    return bytes(b.Output())


def _exercise_model(data: bytes) -> None:
    """Load, tabulate and write back a model; a refusal propagates (so it is counted)."""
    m = tk.load(data)
    m.ops_table()
    m.tensors_table()
    write_model(m, "circle")


def test_fuzz_models() -> None:
    """Structure-aware and splicing mutations of the sample models (byte flips of each file
    alone are in test_bad_models.py), each loaded, tabulated and written back."""
    fuzz = Fuzz("models (.tflite/.circle)")
    seeds = [p.read_bytes() for p in [*SAMPLE_TFLITE, SAMPLES / f"{STEM}.circle"]]
    rng = random.Random(SEED)
    for i in range(_cases(150)):
        raw = seeds[i % len(seeds)]
        if i % 3 == 0:
            data = _mutate_bytes(rng, raw, seeds)
        else:
            try:
                data = _model_t_mutation(rng, raw)
            except Exception:
                continue
        fuzz.case(lambda: _exercise_model(data), data)  # noqa: B023
    fuzz.report()


def test_fuzz_origin_tables() -> None:
    """ONE_source_table / ONE_op_table bytes, decoded alone."""
    from toolkit.formats.origin_tables import (
        decode_op_table,
        decode_source_table,
        encode_op_table,
        encode_source_table,
    )

    fuzz = Fuzz("ONE origin tables")
    sources = [encode_source_table({i: f"layer/{i};x" for i in range(k)}) for k in (0, 1, 5)]
    ops = [encode_op_table({i: range(i, i + 3) for i in range(k)}) for k in (1, 4)]
    rng = random.Random(SEED)
    for i in range(_cases(1000)):
        if i % 2:
            data = _mutate_bytes(rng, rng.choice(sources), sources)
            fuzz.case(lambda: decode_source_table(data), data)  # noqa: B023
        else:
            data = _mutate_bytes(rng, rng.choice(ops), ops)
            fuzz.case(lambda: decode_op_table(data), data)  # noqa: B023
    fuzz.report()


# ------------------------------------------------------------------ partition files
_PART_SEEDS = [
    b"[partition]\nbackends=cpu,npu\ndefault=cpu\ncomply=opcode\n\n[OPCODE]\nDIV=npu\n",
    b"[partition]\nbackends=cpu,acl_cl\ndefault=cpu\ncomply=opname\n\n[OPNAME]\n"
    b"Sub=acl_cl\nmodel/conv\\;x=cpu\n",
    b"# comment\n[partition]\nbackends=a,b,c\ndefault=b\n[OPCODE]\n_=c\nCUSTOM(foo)=a\n",
]


# A mutated rule that names no op, or a mutated prototxt field the reader does not know, is
# reported with a UserWarning by design (pytest.warns in test_partition.py and
# test_caffe_import.py);
# here they are expected outcomes of the mutations, not news.
def test_fuzz_part_files(tmp_path: Path) -> None:
    from toolkit.formats.part_file import read_part

    fuzz = Fuzz(".part")
    model = tk.load(SAMPLES / f"{STEM}.circle")
    count = [0]

    def read(path: Path) -> None:
        read_part(path).validate()
        count[0] += 1
        if count[0] % 10 == 0:  # the whole partitioner on some of those read whole
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tk.partition(model, path)
            # the one warning a valid file may give: a mutated rule that names no op
            assert all(re.search(r"(names|matches) no op of the model; the rule was not applied",
                                 str(w.message)) for w in caught), [str(w.message) for w in caught]

    _fuzz_files(fuzz, _PART_SEEDS, _cases(400), tmp_path / "x.part", read)
    fuzz.report()


def _conn_reader(folder: Path, every: int) -> Callable[[Path], Any]:
    from toolkit.formats.conn_file import read_connection

    count = [0]

    def read(path: Path) -> None:
        read_connection(path)
        count[0] += 1
        if count[0] % every == 0:
            tk.run(path, _X)

    return read


def test_fuzz_conn_json(partition_dir: Path) -> None:
    fuzz = Fuzz(".conn.json")
    seed = (partition_dir / f"{STEM}.conn.json").read_bytes()
    seeds = [seed, b"\xef\xbb\xbf" + seed]
    path = partition_dir / f"fuzz_{os.getpid()}.conn.json"
    _fuzz_files(fuzz, seeds, _cases(300), path, _conn_reader(partition_dir, 5),
                structure=_mutate_json)
    fuzz.report()


def test_fuzz_conn_ini(partition_dir: Path) -> None:
    fuzz = Fuzz(".conn.ini")
    seed = (partition_dir / f"{STEM}.conn.ini").read_bytes()
    path = partition_dir / f"fuzz_{os.getpid()}.conn.ini"
    _fuzz_files(fuzz, [seed, b"\xef\xbb\xbf" + seed], _cases(300), path,
                _conn_reader(partition_dir, 5))
    fuzz.report()


# ------------------------------------------------------------------ compiled outputs
def test_fuzz_debug_handles(compiled_dir: Path, tmp_path: Path) -> None:
    from toolkit.formats.debug_handles import encode_debug_handles, read_debug_handles

    fuzz = Fuzz("debug-handle JSON")
    seeds = [next(compiled_dir.glob("*.debug_handles.json")).read_bytes(),
             encode_debug_handles({"a": [0, 1], "b;c": [2]}, {"a": 0, "b;c": 1})]
    _fuzz_files(fuzz, seeds, _cases(500), tmp_path / "x.debug_handles.json",
                read_debug_handles, structure=_mutate_json)
    fuzz.report()


def _mutate_xml(rng: random.Random, raw: bytes, others: list[bytes]) -> bytes:
    """XML-aware mutations: an unknown encoding, a whitespace-only table, a table dropped
    or doubled, a cell of a table made huge, a header cell dropped."""
    text = raw
    kind = rng.choice(["encoding", "blank_table", "drop_table", "cell", "header"])
    tables = text.split(b"<table ")
    if kind == "encoding":
        decl = b"<?xml version='1.0' encoding='" + rng.choice(
            [b"bogus-enc", b"utf-16", b"latin-1", b"ascii", b"UTF-32", b""]) + b"'?>"
        body = text.split(b"?>", 1)[-1] if text.startswith(b"<?xml") else text
        return decl + body
    if kind == "blank_table" and len(tables) > 1:
        i = rng.randrange(1, len(tables))
        head, _, rest = tables[i].partition(b"<![CDATA[")
        tail = rest.partition(b"]]>")[2]
        tables[i] = head + b"<![CDATA[" + rng.choice([b"   \n  ", b"\n", b""]) + b"]]>" + tail
    elif kind == "drop_table" and len(tables) > 2:
        del tables[rng.randrange(1, len(tables) - 1)]
    elif kind in ("cell", "header"):
        return _mutate_lines(rng, raw, others)
    return b"<table ".join(tables)


def test_fuzz_vela_debug_db(compiled_dir: Path, tmp_path: Path) -> None:
    from toolkit.formats.vela_db import read_debug_db

    fuzz = Fuzz("Vela debug DB XML")
    seeds = [next(compiled_dir.glob("*_debug.xml")).read_bytes(),
             (VELA_FIXTURES / "default_core_reordered_debug.xml").read_bytes()]
    _fuzz_files(fuzz, seeds, _cases(400), tmp_path / "x_debug.xml", read_debug_db,
                structure=_mutate_xml)
    fuzz.report()


_SUMMARY = (b"experiment,network,accelerator_configuration,system_config,memory_mode,"
            b"core_clock,cycles_total,cycles_npu,nn_macs,inference_time\n"
            b"default,cnn,ethos-u55-128,Ethos_U55_High_End_Embedded,Shared_Sram,500000000.0,"
            b"16848.0,16000.0,55296,3.3696e-05\n")


def test_fuzz_vela_csvs(tmp_path: Path) -> None:
    from toolkit.formats.vela_csv import read_per_layer_csv, read_summary_csv

    fuzz = Fuzz("Vela CSVs")
    seeds = [p.read_bytes() for p in sorted(VELA_FIXTURES.glob("*.csv"))]
    _fuzz_files(fuzz, seeds, _cases(400), tmp_path / "x_per-layer.csv", read_per_layer_csv)
    _fuzz_files(fuzz, [_SUMMARY], _cases(400) // 2, tmp_path / "x_summary.csv",
                read_summary_csv)
    fuzz.report()


def test_fuzz_compiled_folders(compiled_dir: Path, tmp_path: Path) -> None:
    """One of the three files of a compiled output mutated, then the folder loaded."""
    from toolkit.compiler.saved import load_compiled

    fuzz = Fuzz("compiled output folders")
    files = sorted(compiled_dir.iterdir())
    rng = random.Random(SEED)
    for i in range(_cases(120)):
        folder = tmp_path / f"c{i % 4}"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(compiled_dir, folder)
        victim = folder / files[i % len(files)].name
        raw = victim.read_bytes()
        if victim.suffix == ".json" and rng.random() < 0.5:
            data = _mutate_json(rng, raw, [])
        elif victim.suffix == ".xml" and rng.random() < 0.5:
            data = _mutate_xml(rng, raw, [])
        else:
            data = _mutate_bytes(rng, raw, [])
        victim.write_bytes(data)
        fuzz.case(lambda: load_compiled(folder), data)  # noqa: B023
    fuzz.report()


# ------------------------------------------------------------------ Caffe
def _mutate_caffe_net(rng: random.Random, net: Any) -> None:
    """Set a field of a Caffe message to a wrong or huge value."""
    layers = list(net.layer)
    if not layers:
        return
    lay = rng.choice(layers)
    kind = rng.choice(["blob_dim", "num_output", "kernel", "stride", "pad", "input_dim",
                       "bottom", "group", "axis", "drop_blob"])
    huge = rng.choice([0, 1 << 31, 1 << 40, (1 << 63) - 1, 7])
    if kind == "blob_dim" and len(lay.blobs):
        b = lay.blobs[rng.randrange(len(lay.blobs))]
        if len(b.shape.dim):
            b.shape.dim[rng.randrange(len(b.shape.dim))] = huge
    elif kind == "drop_blob" and len(lay.blobs):
        del lay.blobs[rng.randrange(len(lay.blobs))]
    elif kind == "num_output" and lay.HasField("convolution_param"):
        lay.convolution_param.num_output = huge % (1 << 32)
    elif kind == "kernel" and lay.HasField("convolution_param"):
        lay.convolution_param.kernel_size[:] = [huge % (1 << 32)]
    elif kind == "stride" and lay.HasField("pooling_param"):
        lay.pooling_param.stride = huge % (1 << 32)
    elif kind == "pad" and lay.HasField("pooling_param"):
        lay.pooling_param.pad = huge % (1 << 32)
    elif kind == "input_dim" and lay.HasField("input_param"):
        lay.input_param.shape[0].dim[rng.randrange(4)] = huge if rng.random() < .5 else -3
    elif kind == "bottom":
        lay.bottom.append(rng.choice(["nope", lay.name, ""]))
    elif kind == "group" and lay.HasField("convolution_param"):
        lay.convolution_param.group = rng.choice([0, 3, 1 << 31])
    elif kind == "axis" and lay.HasField("concat_param"):
        lay.concat_param.axis = rng.choice([-5, 4, 1 << 30])


@pytest.mark.filterwarnings("ignore:.*has fields the toolkit does not read:UserWarning")
def test_fuzz_caffe(tmp_path: Path) -> None:
    import caffe_nets

    from toolkit.formats.caffe import write_binary, write_text
    from toolkit.importers.caffe import load_caffe

    fuzz = Fuzz("Caffe prototxt/caffemodel")
    nets = [caffe_nets.lenet().net(), caffe_nets.inception().net(),
            caffe_nets.activations().net(), caffe_nets.lenet(v1=True).net()]
    deploys = [caffe_nets.lenet().deploy(), caffe_nets.squeezenet().deploy()]
    texts = [write_text(n).encode() for n in deploys]
    binaries = [write_binary(n) for n in nets]
    proto, model = tmp_path / "x.prototxt", tmp_path / "x.caffemodel"
    rng = random.Random(SEED)
    n = _cases(200)
    for i in range(n):
        which = i % 3
        if which == 0:
            data = _mutate_bytes(rng, rng.choice(texts), texts) if rng.random() < .5 \
                else _mutate_lines(rng, rng.choice(texts), texts)
            proto.write_bytes(data)
            fuzz.case(lambda: load_caffe(proto), data)
        elif which == 1:
            data = _mutate_bytes(rng, rng.choice(binaries), binaries)
            model.write_bytes(data)
            fuzz.case(lambda: load_caffe(model), data)
        else:
            net = type(nets[0])()
            net.CopyFrom(rng.choice(nets[:3]))
            _mutate_caffe_net(rng, net)
            data = write_binary(net)
            model.write_bytes(data)
            fuzz.case(lambda: load_caffe(model), data[:200])
    fuzz.report()


# ------------------------------------------------------------------ OS errors
def _readers() -> dict[str, tuple[str, Callable[[Any], Any]]]:
    """Reader name -> (file suffix, function reading a path)."""
    from toolkit.compiler.saved import load_compiled
    from toolkit.formats.conn_file import read_connection
    from toolkit.formats.debug_handles import read_debug_handles
    from toolkit.formats.part_file import read_part
    from toolkit.formats.vela_csv import read_per_layer_csv, read_summary_csv
    from toolkit.formats.vela_db import read_debug_db
    from toolkit.importers.caffe import load_caffe

    return {
        "tk.load": (".tflite", tk.load),
        "tk.run": (".circle", lambda p: tk.run(p, _X)),
        "caffe": (".prototxt", load_caffe),
        "caffemodel": (".caffemodel", tk.load),
        "part": (".part", read_part),
        "tk.partition": (".part", lambda p: tk.partition(SAMPLES / f"{STEM}.circle", p)),
        "conn.json": (".conn.json", read_connection),
        "conn.ini": (".conn.ini", read_connection),
        "tk.run conn": (".conn.json", lambda p: tk.run(p, _X)),
        "debug handles": (".debug_handles.json", read_debug_handles),
        "vela db": ("_debug.xml", read_debug_db),
        "vela per-layer": ("_per-layer.csv", read_per_layer_csv),
        "vela summary": ("_summary.csv", read_summary_csv),
        "compiled folder": ("", load_compiled),
        "tk.read_vela": ("", tk.read_vela),
    }


def _os_case(case: str, folder: Path, suffix: str) -> Any:
    """A path in ``folder`` that is wrong in the way ``case`` names."""
    if case == "long name":
        return folder / ("x" * 300 + suffix)
    if case == "link loop":
        a, b = folder / f"a{suffix}", folder / f"b{suffix}"
        a.symlink_to(b)
        b.symlink_to(a)
        return a
    if case == "folder":
        (folder / f"d{suffix}").mkdir()
        return folder / f"d{suffix}"
    if case == "nul":
        return str(folder / f"a\0b{suffix}")
    if case == "fifo":
        os.mkfifo(folder / f"f{suffix}")
        return folder / f"f{suffix}"
    if case == "missing":
        return folder / f"missing{suffix}"
    if case == "not a path":
        return 123
    if case == "file in path":
        (folder / "afile").write_bytes(b"x")
        return folder / "afile" / f"m{suffix}"
    raise AssertionError(case)


OS_CASES = ["long name", "link loop", "folder", "nul", "fifo", "missing", "not a path",
            "file in path"]


@pytest.mark.parametrize("reader", sorted(_readers()))
def test_os_errors_are_toolkit_errors(reader: str, tmp_path: Path) -> None:
    """Every reader refuses every OS case with a ToolkitError naming the path, quickly (a
    FIFO is never opened for a blocking read)."""
    suffix, read = _readers()[reader]
    fuzz = Fuzz(f"OS cases of {reader}")
    for case in OS_CASES:
        folder = tmp_path / case.replace(" ", "_")
        folder.mkdir()
        if suffix == "" and case in ("folder",):
            continue  # a folder is what these take
        path = _os_case(case, folder, suffix)
        with _time_guard(10):
            try:
                read(path)
            except ToolkitError as e:
                if case not in ("not a path", "nul"):
                    assert str(folder) in str(e), (case, str(e))
                fuzz.case(lambda: read(path))  # noqa: B023
                continue
            except _Hang:
                pytest.fail(f"{reader} blocked on a {case}")
            except Exception:
                fuzz.case(lambda: read(path))  # noqa: B023
                continue
        pytest.fail(f"{reader} accepted a {case}: {path!r}")
    fuzz.report()


def test_permission_denied_is_a_toolkit_error(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, chmod denies nothing: the OS's refusal is simulated at ``os.open``."""
    import errno

    real_open = os.open

    def denying_open(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        if "denied" in os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", denying_open)
    for reader, (suffix, read) in _readers().items():
        if not suffix:
            continue
        path = tmp_path / f"denied{suffix}"
        shutil.copy(SAMPLES / f"{STEM}.circle", path)
        with pytest.raises(ToolkitError, match="permission denied") as info:
            read(path)
        assert str(path) in str(info.value) and "Fix:" in str(info.value), reader

