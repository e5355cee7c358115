"""Command lines for ONNX Runtime: ``toolkit trace-join PROFILE --model M.onnx ...`` and
``toolkit run M.onnx --runtime onnxruntime ...``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from toolkit.cli._join_args import add_join_options, add_table_options
from toolkit.util.cliargs import ToolkitParser, count_arg, positive_int, read_inputs

__all__ = ["main_ort_join", "main_ort_run", "ort_join_parser", "ort_run_parser"]

_VIEWS = ("layer", "node", "op", "origins", "groups", "unmapped")


def _show(table: pd.DataFrame, title: str, top: int) -> None:
    shown = table
    if "total_ns" in table.columns:
        shown = table.sort_values("total_ns", ascending=False, kind="stable")
    if top > 0:
        shown = shown.head(top)
    with pd.option_context("display.max_rows", None, "display.max_columns", 20,
                           "display.width", 200, "display.max_colwidth", 60):
        print(f"\n== {title} ({len(table)} rows, {len(shown)} shown)")
        print(shown.to_string(index=False) if len(shown) else "(empty)")


def _report(att: object, by: str, top: int, csv: Path | None) -> None:
    from toolkit.trace.readers.ort.attribution import OrtAttribution

    assert isinstance(att, OrtAttribution)
    att.check()
    s = att.summary()
    share = s["attributed_ns"] / s["total_ns"] if s["total_ns"] else 0.0
    print(f"{s['events']} kernel events, {s['runs']} run(s), {s['groups']} group(s) "
          f"({s['fused_groups']} fused), policy {s['policy']}, "
          f"index exact: {s['index_exact']}")
    print(f"attributed {s['attributed_ns']} of {s['total_ns']} ns ({share:.1%})")
    view = {"layer": att.by_layer, "node": att.by_node, "op": att.by_op,
            "origins": att.origins, "groups": att.groups, "unmapped": att.unmapped}[by]
    table = view()
    _show(table, f"by {by}" if by in ("layer", "node", "op") else by, top)
    un = att.unattributed()
    if len(un):
        why = un.groupby("reason", observed=True)["dur_ns"].agg(["count", "sum"])
        print("\n== unattributed by reason")
        print(why.rename(columns={"count": "events", "sum": "dur_ns"}).to_string())
    if csv is not None:
        from toolkit.util.atomic import atomic_write

        atomic_write(csv, table.to_csv(index=False).encode("utf-8"))
        print(f"wrote {csv}")
    sys.stdout.flush()


def ort_join_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit trace-join PROFILE --model M.onnx``."""
    p = ToolkitParser(
        prog="toolkit trace-join",
        description="Attribute an ONNX Runtime profile's kernel time to the layers of the "
                    "exported ONNX model, through the graph ORT optimized.")
    p.add_argument("trace", type=Path, help="the ONNX Runtime profile (.json, .json.gz)")
    p.add_argument("--model", type=Path, required=True, help="the exported .onnx model")
    p.add_argument("--optimized", type=Path,
                   help="the graph ORT saved for the session (optimized_model_filepath; "
                        "default: the exported graph itself)")
    add_join_options(p, policy_default="equal", runs_of="the profile", key=False,
                     policy_help="how a fused group's time is split over its original nodes "
                                 "(default: equal; macs: by compute weight)")
    add_table_options(p, _VIEWS)
    return p


def main_ort_join(argv: Sequence[str]) -> int:
    """Run ``toolkit trace-join PROFILE --model M.onnx``: attribute an ONNX Runtime profile to
    the layers of an ONNX model; return 0. Bad input raises
    :class:`~toolkit.errors.ToolkitError` (printed by the main command)."""
    a = ort_join_parser().parse_args(list(argv))
    from toolkit.trace.readers.ort.attribution import join_ort

    att = join_ort(a.trace, a.model, a.optimized, policy=a.policy, overlaps=a.overlaps,
                   strict=not a.no_strict, skip_runs=a.skip_runs)
    print(f"{a.trace} on {a.model}" + (f" via {a.optimized}" if a.optimized else ""))
    _report(att, a.by, a.top, a.csv)
    return 0


def ort_run_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit run M.onnx --runtime onnxruntime``."""
    p = ToolkitParser(prog="toolkit run --runtime onnxruntime",
                      description="Run an .onnx model in ONNX Runtime, profile the optimized "
                                  "graph and print the time per layer.")
    p.add_argument("model", type=Path, help="the .onnx model to run")
    p.add_argument("--runtime", choices=("onnxruntime",), required=True,
                   help="the runtime: onnxruntime")
    p.add_argument("--optimization", choices=("disable", "basic", "extended", "all"),
                   default="all", help="ORT's graph optimization level (default: all)")
    p.add_argument("--repeat", type=positive_int, default=10,
                   help="number of inferences to time and profile (default 10)")
    p.add_argument("--warmup", type=count_arg, default=2,
                   help="inferences to run first, untimed (default 2)")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="ORT intra-op threads (default 1)")
    p.add_argument("--inputs", type=Path, help=".npz with one array per input name "
                                              "(default: random inputs)")
    p.add_argument("--out", type=Path, help="folder for the optimized graph and the profile "
                                           "(default: a temporary folder)")
    p.add_argument("--no-trace", action="store_true", help="time only, no profile")
    p.add_argument("--by", choices=_VIEWS, default="layer",
                   help="table to print and write (default: layer)")
    p.add_argument("--top", type=count_arg, default=40,
                   help="rows to print, largest total_ns first (default 40; 0: all)")
    p.add_argument("--csv", type=Path, help="file to write the --by table to as CSV")
    return p


def main_ort_run(argv: Sequence[str]) -> int:
    """Run ``toolkit run M.onnx --runtime onnxruntime``: run in ONNX Runtime, profile the
    optimized graph exactly and print the time per layer; return 0."""
    a = ort_run_parser().parse_args(list(argv))
    import numpy as np

    from toolkit.runtime.onnxruntime import run_onnxruntime

    inputs = read_inputs(a.inputs)
    r = run_onnxruntime(a.model, inputs, optimization=a.optimization, trace=not a.no_trace,
                        repeat=a.repeat, warmup=a.warmup, threads=a.threads, workdir=a.out)
    for name, arr in r.outputs.items():
        print(f"{name}: {arr.dtype} {list(arr.shape)} mean={float(np.mean(arr)):.6g}")
    t = r.timings
    print(f"optimized graph: {r.optimized_path}")
    print(f"unprofiled run: median {t['unprofiled_ns'].median() / 1e3:.1f} us over "
          f"{len(t)} run(s)")
    if r.profile_path is None:
        return 0
    print(f"profiled run: median {t['profiled_ns'].median() / 1e3:.1f} us, kernel time "
          f"median {t['kernel_ns'].median() / 1e3:.1f} us; profile: {r.profile_path}")
    from toolkit.trace.readers.ort.attribution import join_ort

    _report(join_ort(r.profile_path, a.model, r.optimized_path), a.by, a.top, a.csv)
    return 0
