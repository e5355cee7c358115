"""``toolkit compare A B --inputs X.npz --by layer``: the command line of tk.compare."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.numerics.capture import RUNTIMES
from toolkit.util.cliargs import ToolkitParser, read_inputs

__all__ = ["compare_parser", "main_compare"]

_VIEWS = ("layer", "tensor", "op", "unmatched")
_SHOWN = {"layer": ["layer", "cand_tensor", "match", "sqnr_db", "isolated_sqnr_db", "mse",
                    "max_abs_error", "mpeir", "nonfinite_cand", "note"],
          "tensor": ["ref_tensor", "match", "ref_op", "cand_op", "sqnr_db", "mse",
                     "max_abs_error", "mpeir"],
          "op": ["cand_op", "op_kind", "match", "sqnr_db", "mse", "max_abs_error"],
          "unmatched": ["side", "tensor", "op_kind", "reason"]}


def compare_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit compare``."""
    p = ToolkitParser(
        prog="toolkit compare",
        description="Compare two models (or two runtimes of one model) tensor by tensor and "
                    "layer by layer on the same inputs: SQNR, MSE, cosine, max abs error and "
                    "MPEIR per original layer, with the error each layer adds on its own "
                    "(isolated) beside the error it inherits.")
    p.add_argument("reference", type=Path,
                   help="the reference model: .tflite/.circle, compiled folder, "
                        ".conn.json/.conn.ini or .onnx")
    p.add_argument("candidate", type=Path,
                   help="the candidate model compared against it (a quantized conversion, a "
                        "compiled or partitioned version, the same file in another runtime)")
    p.add_argument("--inputs", type=Path,
                   help=".npz with one array per input name, given to both models (default: "
                        "random inputs, seed 0)")
    p.add_argument("--runtime-a", choices=RUNTIMES,
                   help="runtime of the reference (default: reference; onnxruntime for .onnx)")
    p.add_argument("--runtime-b", choices=RUNTIMES,
                   help="runtime of the candidate (default: reference; onnxruntime for .onnx)")
    p.add_argument("--by", choices=_VIEWS, default="layer",
                   help="table to print and write (default: layer)")
    p.add_argument("--no-isolated", action="store_true",
                   help="skip re-running each candidate layer on the reference's inputs")
    p.add_argument("--csv", type=Path, help="file to write the --by table to as CSV")
    p.add_argument("--model-explorer", type=Path,
                   help="file to write Model Explorer node data (JSON, SQNR per node) to")
    p.add_argument("--visq", type=Path,
                   help="file to write a visq-compatible JSON (MPEIR per tensor) to")
    return p


def main_compare(argv: Sequence[str]) -> int:
    """Run ``toolkit compare``; return the exit status."""
    a = compare_parser().parse_args(list(argv))
    for flag, path in (("--csv", a.csv), ("--model-explorer", a.model_explorer),
                       ("--visq", a.visq)):
        if path is not None and path.is_dir():
            raise ToolkitError(f"{flag} names a folder, a file is expected", where=str(path),
                               fix=f"give {flag} a file name")
    for flag, path in (("reference", a.reference), ("candidate", a.candidate)):
        if not path.exists():
            raise ToolkitError(f"no such {flag} model", where=str(path),
                               fix="check the path (a .tflite/.circle, compiled folder, "
                                   ".conn.json or .onnx)")
    from toolkit.numerics.compare import compare

    comp = compare(str(a.reference), str(a.candidate), read_inputs(a.inputs),
                   reference_runtime=a.runtime_a, candidate_runtime=a.runtime_b,
                   isolated=not a.no_isolated)
    table = {"layer": comp.by_layer, "tensor": comp.by_tensor, "op": comp.by_op,
             "unmatched": comp.unmatched}[a.by]()
    s = comp.summary()
    print(f"{s['candidate']} vs {s['reference']}: {s['tensors_matched']} tensors matched "
          f"({s['ref_unmatched']} reference, {s['cand_unmatched']} candidate unmatched), "
          f"{s['layers_matched']} of {s['layers']} layers; first divergence: "
          f"{s['first_divergence']}; worst isolated: {s['worst_isolated']}")
    if s["layers_with_nonfinite"]:
        print(f"NaN/Inf in: {', '.join(s['layers_with_nonfinite'])}")
    with pd.option_context("display.max_rows", 500, "display.max_columns", 20,
                           "display.width", 160, "display.max_colwidth", 48):
        print(table[_SHOWN[a.by]].to_string(index=False) if len(table) else "(empty)")
    if a.csv:
        from toolkit.util.atomic import atomic_write

        atomic_write(a.csv, table.to_csv(index=False).encode("utf-8"))
        print(f"{a.by} table -> {a.csv}")
    if a.model_explorer:
        print(f"Model Explorer node data -> {comp.to_model_explorer(a.model_explorer)}")
    if a.visq:
        print(f"visq JSON -> {comp.to_visq(a.visq)}")
    return 0
