"""The end-to-end demo behind ``make demo`` (``toolkit demo --out out``).

1. compile ``sample_models/cnn.tflite`` (stripes for a 4 KiB buffer) and write its
   provenance (circle origin tables, Vela-style debug database, debug-handle map);
2. run the compiled model 10 times with the reference runtime, tracing every command;
3. join the trace back to the original layers and write the attribution tables, a Chrome
   trace whose events carry their layers, and Model Explorer node data;
4. partition ``Net_InstanceNorm_003`` as circle-partitioner's example does and check that the
   chained parts compute what the source model computes;
5. run the real Vela compiler (when installed) on the int8 CNN and attribute its estimates to
   the same layers;
6. execute the notebooks and render them to HTML (``--no-notebooks`` skips this).

Everything is written under ``--out``; a summary is printed.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

import toolkit as tk
from toolkit.errors import ToolkitError

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
NOTEBOOKS = ROOT / "notebooks"

PART_EXAMPLE = """[partition]
backends=cpu,acl_cl
default=cpu
comply=opcode

[OPCODE]
DIV=acl_cl
"""


def _say(msg: str) -> None:
    print(msg, flush=True)


def _table(df: pd.DataFrame, title: str, by: str | None, n: int = 12,
           columns: list[str] | None = None) -> str:
    """The ``n`` rows with the largest ``by`` (the first ``n`` when None) under a title
    line that says how many of how many rows are shown and their share of the total."""
    from toolkit.reprs import top_rows
    from toolkit.util.textable import Column, fit_table, fmt_ms, fmt_ns, fmt_share, wrap

    cut = top_rows(df, by, n)
    names = list(columns or cut.frame.columns)

    def column(i: int, name: str) -> Column:
        if name.endswith("_ns"):
            return Column(name, name[:-3], fmt_ns, right=True)
        if name.endswith("_ms"):
            return Column(name, name[:-3], fmt_ms, right=True)
        if name == "share":
            return Column(name, name, fmt_share, right=True)
        numeric = pd.api.types.is_numeric_dtype(cut.frame[name])
        return Column(name, name, right=numeric, flex=i == 0 and not numeric)

    return wrap(f"== {title}: {cut.note}") + "\n" + fit_table(cut.frame, [column(i, c) for i, c in
                                                              enumerate(names)])


def compile_run_join(out: Path) -> None:
    """Steps 1-3 on the CNN sample; writes into ``out/cnn``."""
    from toolkit.compiler import Target, compile_model
    from toolkit.formats.chrome_trace import write_chrome_trace
    from toolkit.trace import trace_join
    from toolkit.trace.views.export import to_chrome_trace, to_model_explorer

    d = out / "cnn"
    model = tk.load(SAMPLES / "cnn.tflite")
    compiled = compile_model(model, target=Target(buffer_bytes=4096))
    written = compiled.save(d, stem="cnn")
    _say(f"[compile] cnn.tflite: {len(model.graph)} source ops -> {len(compiled.model.graph)} "
         f"compiled ops -> {len(compiled.commands())} commands")
    for p in written:
        _say(f"          wrote {p}")
    _say(_table(compiled.rewrites(), "rewrites, in the order the passes made them", None, 20,
                ["relation", "pass", "sources", "result"]))

    outputs, trace = tk.run(compiled, None, trace=True, repeat=10, warmup=5)
    reference = tk.run(model, None).outputs
    for name, arr in reference.items():
        np.testing.assert_allclose(outputs[name], arr, rtol=1e-5, atol=1e-6)
    events = trace.to_frame()
    write_chrome_trace(events, d / "runtime_trace.json", process_name="cnn (compiled)")
    att = trace_join(trace, compiled, policy="macs")
    att.check()
    by_layer = att.by_layer()
    by_layer.to_csv(d / "by_layer.csv", index=False)
    att.by_source_op().to_csv(d / "by_source_op.csv", index=False)
    att.by_op().to_csv(d / "by_op.csv", index=False)
    att.by_command().to_csv(d / "by_command.csv", index=False)
    to_chrome_trace(att, d / "trace_with_layers.json")
    to_model_explorer(att, d / "model_explorer_node_data.json")
    s = att.summary()
    _say(f"[run]     {len(events)} trace events over {s['runs']} runs (after 5 warm-up runs)")
    _say(f"          wrote {d / 'runtime_trace.json'}")
    _say(f"[join]    {s['attributed_ns']} of {s['total_ns']} ns attributed, "
         f"{s['unattributed_ns']} ns unattributed (policy {s['policy']}, key {s['key_used']})")
    _say(_table(by_layer, "time per original layer", "total_ns", 12,
                ["layer", "total_ns", "share", "avg_ms", "p50_ms"]))


def partition_example(out: Path) -> None:
    """Step 4: circle-partitioner's Net_InstanceNorm_003 example; writes ``out/partition``."""
    from toolkit.partitioner import partition

    d = out / "partition"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLES / "Net_InstanceNorm_003.circle", d)
    (d / "Net_InstanceNorm_003.part").write_text(PART_EXAMPLE)
    result = partition(d / "Net_InstanceNorm_003.circle", d / "Net_InstanceNorm_003.part",
                       work_path=d)
    files = result.write(d)
    x = {"Input": np.random.default_rng(0).uniform(-1, 1, (1, 8, 6, 12)).astype(np.float32)}
    chained = tk.run(d / "Net_InstanceNorm_003.conn.json", x).outputs
    source = tk.run(result.source, x).outputs
    same = all(np.array_equal(chained[k], source[k]) for k in source)
    _say(f"[part]    {len(result.parts)} parts, chained outputs "
         f"{'identical to' if same else 'DIFFER from'} the source model's")
    for p in files:
        _say(f"          wrote {p}")
    _say(_table(result.parts_table(), "parts, in order", None, 12,
                ["part", "backend", "op_count", "inputs", "outputs", "cut_in_bytes"]))
    if not same:
        raise ToolkitError(
            "partitioned model does not reproduce the source model",
            fix=(
                "this is a bug in the partitioner or the chained runtime: report it with the "
                "printed parts table"
            ),
        )


def vela_example(out: Path) -> None:
    """Step 5: Vela's estimates for the int8 CNN per original layer; writes ``out/vela``."""
    try:
        from toolkit.vela import read_vela, run_vela
    except ImportError as e:  # pragma: no cover - vela is part of the notebooks extra
        _say(f"[vela]    skipped: {e}")
        return
    d = out / "vela"
    try:
        run_vela(SAMPLES / "cnn_int8.tflite", d, accelerator="ethos-u55-128")
    except ToolkitError as e:
        _say(f"[vela]    skipped: {e}")
        return
    att = read_vela(d, model=SAMPLES / "cnn_int8.tflite").attribution()
    by_layer = att.by_layer()
    by_layer.to_csv(d / "vela_by_layer.csv", index=False)
    _say("[vela]    Vela's estimates per original layer")
    _say(f"          wrote {d / 'vela_by_layer.csv'}")
    _say(_table(by_layer, "Vela's estimates by layer", att.metric,
                12, [c for c in ("layer", att.metric, "mac_count", "share")
                     if c in by_layer.columns]))


def render_notebooks(out: Path) -> None:
    """Step 6: execute every notebook and write it as HTML into ``out/notebooks``."""
    try:
        import nbformat
        from nbconvert import HTMLExporter
    except ImportError as e:  # pragma: no cover
        _say(f"[notebooks] skipped: {e}")
        return
    from toolkit.util.nbrun import execute_notebook

    d = out / "notebooks"
    d.mkdir(parents=True, exist_ok=True)
    for nb_path in sorted(NOTEBOOKS.glob("*.ipynb")):
        _say(f"[notebooks] executing {nb_path.name} ...")
        nb = execute_notebook(nbformat.read(nb_path, as_version=4), NOTEBOOKS)
        html, _ = HTMLExporter().from_notebook_node(nb)
        target = d / (nb_path.stem + ".html")
        target.write_text(html, encoding="utf-8")
        _say(f"            wrote {target}")


def demo_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit demo``."""
    from toolkit.util.cliargs import ToolkitParser

    p = ToolkitParser(
        prog="toolkit demo", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The end-to-end demo behind make demo:\n\n"
        "1. compile sample_models/cnn.tflite (stripes for a 4 KiB buffer) and write its\n"
        "   provenance (circle origin tables, Vela-style debug database, debug-handle map);\n"
        "2. run the compiled model 10 times with the reference runtime, tracing every command;\n"
        "3. join the trace back to the original layers and write the attribution tables, a\n"
        "   Chrome trace whose events carry their layers, and Model Explorer node data;\n"
        "4. partition Net_InstanceNorm_003 as circle-partitioner's example does and check\n"
        "   that the chained parts compute what the source model computes;\n"
        "5. run the real Vela compiler (when installed) on the int8 CNN and attribute its\n"
        "   estimates to the same layers;\n"
        "6. execute the notebooks and render them to HTML (--no-notebooks skips this).")
    p.add_argument("--out", type=Path, default=Path("out"),
                   help="folder for every result (created when missing; default: out)")
    p.add_argument("--no-notebooks", action="store_true",
                   help="skip executing and rendering the notebooks")
    return p


def main_demo(argv: list[str] | None = None) -> int:
    """Run the demo; return 0 on success."""
    a = demo_parser().parse_args(argv)
    if a.out.exists() and not a.out.is_dir():
        raise ToolkitError("--out names a file, a folder is expected", where=str(a.out),
                           fix="give --out a folder name (it is created when missing)")
    a.out.mkdir(parents=True, exist_ok=True)
    compile_run_join(a.out)
    partition_example(a.out)
    vela_example(a.out)
    if not a.no_notebooks:
        render_notebooks(a.out)
    _say(f"done: results under {a.out.resolve()}")
    return 0
