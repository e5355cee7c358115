"""ExecuTorch profiles at scale: a 1-million-event ETDump decoded and attributed to layers.

The ETDump is generated (not committed): the ``Execute`` block of a real fixture
(``sample_models/executorch/<stem>.etdp``, written by ExecuTorch 1.5.1) is repeated with
shifted times until the file holds ``--events`` events, laid out as the runtime lays it out
(size-prefixed, one string per event, u64 times misaligned by the prefix). Two templates:
``cnn_portable`` (kernels inside ``OPERATOR_CALL`` spans) and ``cnn_xnnpack`` (XNNPACK per-op
events inside ``DELEGATE_CALL``, aligned to the delegate's node list through the ``.pte``).

Figures, each in a fresh process (peak RSS is that process's ``ru_maxrss``):

* decode: ``read_etdump`` (target <= 5 s for 1 M events);
* attribute: ``read_executorch(etdump, etrecord, program).attribution()`` with ``by_layer()``
  and ``check()`` (target <= 10 s, <= 0.8 GB peak RSS);
* the baseline: decoding the same file event by event through the ``flatbuffers`` package's
  table accessors (what generated bindings do), timed on the first 50,000 events and scaled
  linearly (said in the output); the ratio is decode speed against it.

For reference, ExecuTorch 1.5.1's ``Inspector(etdump_path, etrecord)`` was measured once on
the same machine with a 100,000-event file made the same way (``INSPECTOR_NOTE``, printed at
the end; ``--inspector`` times it again where executorch is installed).

Run: python bench/bench_executorch.py [--events N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "sample_models" / "executorch"
BASELINE_EVENTS = 50_000
INSPECTOR_NOTE = ("ExecuTorch 1.5.1 Inspector, measured once here (torch 2.13 CPU, 2 shared "
                  "cores): Inspector(etdump, etrecord).to_dataframe() on a 100,000-event file "
                  "made by make_etdump took 19.6 s (cnn_xnnpack, ~5,100 events/s) and 17.1 s "
                  "(cnn_portable, ~5,900 events/s), peak RSS ~530 MB; its table equals our "
                  "inspector_table() on that file byte for byte")

sys.path.insert(0, str(ROOT))


def _align(pos: int, a: int) -> int:
    return (pos + a - 1) // a * a


def make_etdump(stem: str, n_events: int) -> bytes:
    """A size-prefixed ETDump of about ``n_events`` events: the fixture's load block, then its
    first ``Execute`` block repeated with times shifted by the block's span."""
    from toolkit.formats.etdump import read_etdump

    dump = read_etdump(FIXTURES / f"{stem}.etdp")
    ev = dump.events
    first_exec = next(i for i, b in enumerate(dump.blocks) if b.name == "Execute")
    load = ev[ev["block"] == 0]
    block = ev[ev["block"] == first_exec]
    k = len(block)
    reps = max(1, (n_events - len(load)) // k)

    def columns(frame):  # type: ignore[no-untyped-def]
        name = frame["name"].astype(object).where(frame["name"].notna(), None).tolist()
        dstr = frame["delegate_debug_id_str"].astype(object)
        dstr = dstr.where(dstr.notna(), None).tolist()
        return (name, dstr, frame["instruction_id"].to_numpy(dtype=float, na_value=np.nan),
                frame["chain_index"].to_numpy(dtype=float, na_value=np.nan),
                frame["start_time"].to_numpy().astype(np.int64),
                frame["end_time"].to_numpy().astype(np.int64))

    l_cols, b_cols = columns(load), columns(block)
    span = int(b_cols[5].max() - b_cols[4].min()) + 1000
    n = len(load) + reps * k
    names = l_cols[0] + b_cols[0] * reps
    dstrs = l_cols[1] + b_cols[1] * reps
    instr = np.r_[l_cols[2], np.tile(b_cols[2], reps)]
    chain = np.r_[l_cols[3], np.tile(b_cols[3], reps)]
    shift = np.repeat(np.arange(reps, dtype=np.int64) * span, k)
    start = np.r_[l_cols[4], np.tile(b_cols[4], reps) + shift]
    end = np.r_[l_cols[5], np.tile(b_cols[5], reps) + shift]
    blocks = [("Default", len(load))] + [("Execute", k)] * reps

    texts = sorted({t for t in names + dstrs if t is not None} | {"Default", "Execute"})
    # Offsets point forward, so the layout runs from the root down to the leaves:
    # header | vtables | root | run_data vector | RunData tables | events vectors |
    # Event tables | ProfileEvent tables | strings
    buf = bytearray(b"\0\0\0\0ED00")
    # ProfileEvent layout: soffset, name|dstr @4, instruction_id @8, chain_index @12,
    # start @16, end @24 (32 bytes); one vtable per combination of present fields
    has_name = np.array([t is not None for t in names])
    has_dstr = np.array([t is not None for t in dstrs]) & ~has_name
    has_instr = ~np.isnan(instr)
    has_chain = ~np.isnan(chain)
    combo = has_name * 1 + has_dstr * 2 + has_instr * 4 + has_chain * 8
    vt_pos = np.zeros(16, dtype=np.int64)
    for c in np.unique(combo).tolist():
        vt_pos[c] = len(buf)
        offs = [4 if c & 1 else 0, 12 if c & 8 else 0, 8 if c & 4 else 0, 0,
                4 if c & 2 else 0, 0, 16, 24]
        buf += np.array([4 + 2 * 8, 32, *offs], dtype="<u2").tobytes()
    ev_vt = len(buf)
    buf += np.array([6, 8, 4, 0], dtype="<u2").tobytes()
    run_vt = len(buf)
    buf += np.array([4 + 2 * 4, 12, 4, 0, 0, 8], dtype="<u2").tobytes()
    root_vt = len(buf)
    buf += np.array([4 + 2 * 2, 8, 0, 4], dtype="<u2").tobytes()

    n_runs = len(blocks)
    counts = np.array([c for _, c in blocks], dtype=np.int64)
    root = _align(len(buf), 4)
    rv = root + 8
    run0 = rv + 4 + 4 * n_runs
    vec0 = run0 + 12 * n_runs
    vec_pos = vec0 + np.r_[0, np.cumsum(4 + 4 * counts)[:-1]]
    e0 = vec0 + int((4 + 4 * counts).sum())
    p0 = _align(e0 + 8 * n, 8)  # u64 times 8-aligned here, 4 bytes off in the file
    s0 = p0 + 32 * n
    string_pos: dict[str, int] = {}
    strings = bytearray()
    for t in texts:
        raw = t.encode()
        string_pos[t] = s0 + len(strings)
        strings += len(raw).to_bytes(4, "little") + raw + b"\0"
        strings += b"\0" * (_align(len(strings), 4) - len(strings))
    out = np.zeros(s0 + len(strings), dtype=np.uint8)
    out[:len(buf)] = np.frombuffer(bytes(buf), dtype=np.uint8)
    out[s0:] = np.frombuffer(bytes(strings), dtype=np.uint8)

    def put(pos: int, values: np.ndarray, dtype: str) -> None:
        raw = np.ascontiguousarray(values.astype(dtype)).view(np.uint8).ravel()
        out[pos:pos + raw.size] = raw

    put(root, np.array([root - root_vt, rv - (root + 4)]), "<i4")
    run_tables = run0 + 12 * np.arange(n_runs, dtype=np.int64)
    elems = rv + 4 + 4 * np.arange(n_runs, dtype=np.int64)
    put(rv, np.r_[n_runs, run_tables - elems], "<u4")
    name_abs = np.array([string_pos[nm] for nm, _ in blocks], dtype=np.int64)
    run_rows = np.stack([run_tables - run_vt, name_abs - (run_tables + 4),
                         vec_pos - (run_tables + 8)], axis=1)
    put(run0, run_rows, "<i4")
    etables = e0 + 8 * np.arange(n, dtype=np.int64)
    # events vectors: count, then one uoffset per event
    block_of = np.repeat(np.arange(n_runs), counts)
    index_in = np.arange(n) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
    elem_pos = vec_pos[block_of] + 4 + 4 * index_in
    put_rows = np.zeros(int((counts + 1).sum()), dtype=np.int64)
    slots = np.r_[0, np.cumsum(counts + 1)[:-1]]
    put_rows[slots] = counts
    put_rows[np.setdiff1d(np.arange(put_rows.size), slots)] = etables - elem_pos
    put(vec0, put_rows, "<u4")
    tables = p0 + 32 * np.arange(n, dtype=np.int64)
    put(e0, np.stack([etables - ev_vt, tables - (etables + 4)], axis=1), "<i4")
    codes = {t: string_pos[t] for t in texts}
    load_abs = [codes[t] if t is not None else codes[d] if d is not None else 0
                for t, d in zip(l_cols[0], l_cols[1])]
    block_abs = np.array([codes[t] if t is not None else codes[d] if d is not None else 0
                          for t, d in zip(b_cols[0], b_cols[1])], dtype=np.int64)
    str_abs = np.r_[np.array(load_abs, dtype=np.int64), np.tile(block_abs, reps)]
    pe = np.zeros((n, 32), dtype=np.uint8)
    pe[:, 0:4] = (tables - vt_pos[combo]).astype("<i4").view(np.uint8).reshape(n, 4)
    rel = np.where(str_abs > 0, str_abs - (tables + 4), 0)
    pe[:, 4:8] = rel.astype("<u4").view(np.uint8).reshape(n, 4)
    pe[:, 8:12] = np.nan_to_num(instr, nan=-1).astype("<i4").view(np.uint8).reshape(n, 4)
    pe[:, 12:16] = np.nan_to_num(chain, nan=0).astype("<i4").view(np.uint8).reshape(n, 4)
    pe[:, 16:24] = start.astype("<u8").view(np.uint8).reshape(n, 8)
    pe[:, 24:32] = end.astype("<u8").view(np.uint8).reshape(n, 8)
    out[p0:s0] = pe.ravel()
    out[0:4] = np.array([root], dtype="<u4").view(np.uint8)
    return int(out.size).to_bytes(4, "little") + out.tobytes()


def baseline_decode(data: bytes, limit: int) -> tuple[int, float]:
    """Per-event decoding through ``flatbuffers.table.Table`` (first ``limit`` events)."""
    import flatbuffers
    from flatbuffers.table import Table

    t0 = time.perf_counter()
    buf = bytearray(data[4:])
    root = Table(buf, int.from_bytes(buf[0:4], "little"))
    o = root.Offset(6)
    runs_vec = root.Vector(o)
    runs_n = root.VectorLen(o)
    seen = 0
    total = 0
    for r in range(runs_n):
        run = Table(buf, root.Indirect(runs_vec + 4 * r))
        ov = run.Offset(10)
        vec, count = run.Vector(ov), run.VectorLen(ov)
        for i in range(count):
            event = Table(buf, run.Indirect(vec + 4 * i))
            po = event.Offset(4)
            pe = Table(buf, event.Indirect(event.Pos + po))
            name_o = pe.Offset(4)
            _name = pe.String(name_o + pe.Pos) if name_o else None
            dstr_o = pe.Offset(12)
            _dstr = pe.String(dstr_o + pe.Pos) if dstr_o else None
            io = pe.Offset(8)
            _instr = pe.Get(flatbuffers.number_types.Int32Flags, io + pe.Pos) if io else -1
            s = pe.Get(flatbuffers.number_types.Uint64Flags, pe.Offset(16) + pe.Pos)
            e = pe.Get(flatbuffers.number_types.Uint64Flags, pe.Offset(18) + pe.Pos)
            total += e - s
            seen += 1
            if seen >= limit:
                return seen, time.perf_counter() - t0
    return seen, time.perf_counter() - t0


_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
from toolkit.formats.etdump import read_etdump
from toolkit.trace.readers.executorch.profile import read_executorch
path, stem, stage = sys.argv[1], sys.argv[2], sys.argv[3]
fx = {fixtures!r}
t0, c0 = time.perf_counter(), time.process_time()
if stage == "decode":
    d = read_etdump(path)
    n = len(d.events)
else:
    p = read_executorch(path, f"{{fx}}/{{stem}}.etrecord.bin", f"{{fx}}/{{stem}}.pte")
    a = p.attribution()
    a.by_layer(); a.check()
    n = len(p.events)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
load = open("/proc/loadavg").read().split()[0]
print(json.dumps({{"events": n, "s": dt, "cpu": cpu, "load": load,
                   "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_child(path: str, stem: str, stage: str) -> dict[str, float]:
    code = _CHILD.format(root=str(ROOT), fixtures=str(FIXTURES))
    out = subprocess.run([sys.executable, "-c", code, path, stem, stage], check=True,
                         capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def inspector_throughput(path: str, stem: str) -> None:
    """Time ExecuTorch's Inspector on ``path`` (needs torch and executorch)."""
    from executorch.devtools import Inspector

    t0 = time.perf_counter()
    inspector = Inspector(etdump_path=path, etrecord=str(FIXTURES / f"{stem}.etrecord.bin"))
    inspector.to_dataframe()
    dt = time.perf_counter() - t0
    n = os.path.getsize(path)
    print(f"Inspector: {dt:.2f} s for the file ({n} bytes)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--inspector", action="store_true",
                        help="also time ExecuTorch's Inspector (needs executorch)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for stem in ("cnn_portable", "cnn_xnnpack"):
            t0 = time.perf_counter()
            data = make_etdump(stem, args.events)
            path = os.path.join(tmp, f"{stem}.etdp")
            Path(path).write_bytes(data)
            gen = time.perf_counter() - t0
            seen, base_s = baseline_decode(data, BASELINE_EVENTS)
            dec = min((run_child(path, stem, "decode") for _ in range(2)),
                      key=lambda r: r["s"])
            att = run_child(path, stem, "attribute")
            n = int(dec["events"])
            base_full = base_s / seen * n
            print(f"{stem}: {n:,} events, {len(data) / 1e6:.1f} MB (generated in {gen:.1f} s)")
            print(f"  decode     {dec['s']:.2f} s  ({n / dec['s'] / 1e6:.2f} M events/s, "
                  f"peak RSS {dec['rss_mb']:.0f} MB; CPU {dec['cpu']:.2f} s, load {dec['load']})"
                  f"  target <= 5 s")
            print(f"  attribute  {att['s']:.2f} s  (read + nest + join + by_layer + check, "
                  f"peak RSS {att['rss_mb']:.0f} MB; CPU {att['cpu']:.2f} s, load {att['load']})"
                  f"  target <= 10 s, <= 800 MB")
            print(f"  baseline   per-event flatbuffers accessors: {base_s:.2f} s for {seen:,} "
                  f"events, scaled to {n:,}: {base_full:.1f} s -> decode is "
                  f"{base_full / dec['s']:.0f}x faster")
            if args.inspector:
                small = os.path.join(tmp, f"{stem}_100k.etdp")
                Path(small).write_bytes(make_etdump(stem, 100_000))
                inspector_throughput(small, stem)
            ok &= dec["s"] <= 5 and att["s"] <= 10 and att["rss_mb"] <= 800
    print(INSPECTOR_NOTE)
    print("targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
