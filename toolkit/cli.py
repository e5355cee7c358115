"""The toolkit command line: one sub-command per verb, mirroring the library.

    toolkit inspect MODEL                      ops, tensors and origins of a model
    toolkit compile MODEL -o OUTDIR            compiled model + provenance files
                  [--target cpp [--build]]     ... or a C++ artifact of the compiled model
    toolkit partition --part-file P.part --input-file M.circle [--work-path DIR] ...
    toolkit run MODEL [--inputs X.npz] [--repeat N] [--trace OUT.json]
    toolkit run M.onnx --runtime onnxruntime [--optimization all] [--repeat N]
    toolkit trace-join TRACE --compiled OUTDIR [--policy macs] ...
    toolkit trace-join PROFILE --model M.onnx [--optimized M.opt.onnx] [--by layer]
    toolkit trace-join-many GLOB --compiled OUTDIR [--engine local|dask] [--workers N]
    toolkit vela OUTDIR --model M.tflite       Vela's estimates per original layer
    toolkit nnc --caffe|--tflite -m MODEL --target interpreter|cpp ...   nnc's command line
    toolkit demo [--out out]                   the end-to-end demo on the sample models

toolkit VERB --help describes every argument of a verb. Multi-word flags take hyphens or
underscores (--part-file or ONE's --part_file). A bad input prints
"error: <where>: <what>. Fix: <how>" and exits with status 2; toolkit --debug VERB ... shows
the traceback as well. Every file is written atomically.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.util.cliargs import (
    ToolkitParser,
    count_arg,
    error_line,
    positive_int,
    read_inputs,
)

__all__ = ["main", "parsers", "COMMANDS"]


def out_file(path: Path, flag: str) -> Path:
    """Check that ``path`` (given with ``flag``) can be an output file: not a folder."""
    if path.is_dir():
        raise ToolkitError(f"{flag} names a folder, a file is expected", where=str(path),
                           fix=f"give {flag} a file name, e.g. {path / 'out'}")
    return path


def out_dir(path: Path, flag: str) -> Path:
    """Check that ``path`` (given with ``flag``) can be an output folder: not a file."""
    if path.exists() and not path.is_dir():
        raise ToolkitError(f"{flag} names a file, a folder is expected", where=str(path),
                           fix=f"give {flag} a folder name (it is created when missing)")
    return path


def write_csv(df: pd.DataFrame, path: Path, flag: str) -> None:
    """Write ``df`` as CSV to ``path`` atomically (the ``flag`` names it in messages)."""
    from toolkit.util.atomic import atomic_write

    atomic_write(out_file(path, flag), df.to_csv(index=False).encode("utf-8"))


def _print_frame(df: pd.DataFrame, title: str | None = None) -> None:
    if title:
        print(f"\n== {title} ({len(df)} rows)")
    with pd.option_context("display.max_rows", 500, "display.max_columns", 20,
                           "display.width", 160, "display.max_colwidth", 60):
        print(df.to_string(index=False) if len(df) else "(empty)")


def inspect_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit inspect``."""
    p = ToolkitParser(prog="toolkit inspect",
                      description="Print the ops (and optionally tensors and origins) of a "
                                  "model.")
    p.add_argument("model", type=Path,
                   help="the model: a .tflite/.circle file or a compiled output folder")
    p.add_argument("--tensors", action="store_true", help="also print the tensors table")
    p.add_argument("--origins", action="store_true",
                   help="also print the (op, origin) pairs")
    p.add_argument("--subgraph", type=count_arg, default=0,
                   help="index of the subgraph to show (default 0, the main graph)")
    p.add_argument("--csv", type=Path,
                   help="folder to write the tables into as CSV files (created when missing)")
    return p


def cmd_inspect(argv: Sequence[str]) -> int:
    """Run ``toolkit inspect``; return the exit status (0)."""
    a = inspect_parser().parse_args(argv)
    from toolkit.model_arg import resolve_model

    if a.csv:
        out_dir(a.csv, "--csv")

    m = resolve_model(a.model, purpose="toolkit inspect", accept=("model", "compiled")).model
    if not 0 <= a.subgraph < len(m.subgraphs):
        raise ToolkitError(f"subgraph {a.subgraph} does not exist", where=str(a.model),
                           fix=f"give --subgraph 0 to {len(m.subgraphs) - 1} (the model has "
                               f"{len(m.subgraphs)} subgraph(s))")
    print(f"{a.model}: {m.format}, {len(m.subgraphs)} subgraph(s), "
          f"{len(m.subgraphs[a.subgraph])} ops, origin tables: "
          f"{'yes' if m.had_origin_tables else 'no'}")
    tables = {"ops": m.ops_table(a.subgraph)}
    if a.tensors:
        tables["tensors"] = m.tensors_table(a.subgraph)
    if a.origins:
        tables["origins"] = m.origins_table(a.subgraph)
    for name, df in tables.items():
        _print_frame(df, name)
        if a.csv:
            write_csv(df, a.csv / f"{a.model.stem}.{name}.csv", "--csv")
    return 0


def run_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit run`` (the reference and native runtimes)."""
    p = ToolkitParser(
        prog="toolkit run",
        description="Run a model in the reference runtime and optionally trace it. "
                    "MODEL may be a .tflite/.circle file, a compiled output folder, a "
                    ".conn.json/.conn.ini, or a C++ artifact folder (compile --target cpp: "
                    "run natively, built when needed); --runtime onnxruntime runs an .onnx "
                    "model in ONNX Runtime instead (toolkit run M.onnx --runtime onnxruntime "
                    "--help).")
    p.add_argument("model", type=Path,
                   help="the model: a .tflite/.circle file, a compiled output folder, a "
                        ".conn.json/.conn.ini or a C++ artifact folder")
    p.add_argument("--inputs", type=Path, help=".npz with one array per input name "
                                              "(default: random inputs, seed 0)")
    p.add_argument("--repeat", type=positive_int, default=1,
                   help="number of inferences to record (default 1)")
    p.add_argument("--warmup", type=count_arg, default=0,
                   help="inferences to run first, untraced (default 0)")
    p.add_argument("--trace", type=Path,
                   help="file to write a Chrome trace to (.json, or .json.gz compressed)")
    p.add_argument("--csv", type=Path, help="file to write the trace to as CSV")
    p.add_argument("--outputs", type=Path,
                   help="file to write the outputs to (.npz, one array per output name)")
    p.add_argument("--threads", type=positive_int,
                   help="threads: a C++ artifact splits its large ops across them (default: "
                        "the artifact's own); the reference runtime's BLAS limit (default 1)")
    return p


def cmd_run(argv: Sequence[str]) -> int:
    """Run ``toolkit run`` (``--runtime onnxruntime``: ONNX Runtime); return the exit status."""
    if any(a == "--runtime" or a.startswith("--runtime=") for a in argv):
        from toolkit.trace.ort_cli import main_ort_run

        return main_ort_run(list(argv))
    a = run_parser().parse_args(argv)
    from toolkit.api import run

    for flag, path in (("--trace", a.trace), ("--csv", a.csv), ("--outputs", a.outputs)):
        if path is not None:
            out_file(path, flag)
    want_trace = a.trace is not None or a.csv is not None
    from toolkit.generator import is_artifact_dir

    if a.model.is_dir() and is_artifact_dir(a.model):
        from toolkit.runtime.native import run_native

        res = run_native(a.model, read_inputs(a.inputs), trace=want_trace, repeat=a.repeat,
                         warmup=a.warmup, threads=a.threads)
    else:
        res = run(a.model, read_inputs(a.inputs), trace=want_trace, repeat=a.repeat,
                  warmup=a.warmup, threads=a.threads or 1)
    outputs = res.outputs
    for name, arr in outputs.items():
        print(f"{name}: {arr.dtype} {list(arr.shape)} mean={float(np.mean(arr)):.6g}")
    if a.outputs:
        import io

        from toolkit.util.atomic import atomic_write

        buf = io.BytesIO()
        np.savez(buf, **outputs)  # type: ignore[arg-type]
        atomic_write(a.outputs, buf.getvalue())
    if want_trace:
        from toolkit.formats.chrome_trace import write_chrome_trace
        from toolkit.formats.trace_csv import write_trace_csv

        frame = res.trace.to_frame()
        if a.trace:
            write_chrome_trace(frame, a.trace, process_name=str(a.model.name))
            print(f"trace: {len(frame)} events -> {a.trace}")
        if a.csv:
            write_trace_csv(frame, a.csv)
            print(f"trace: {len(frame)} events -> {a.csv}")
    return 0


def compile_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit compile``."""
    p = ToolkitParser(
        prog="toolkit compile",
        description="Compile a model with the origin-preserving passes and lower it to a "
                    "command queue; write the compiled model and its provenance files (or, "
                    "with --target cpp, a C++ artifact).")
    p.add_argument("model", type=Path, help="the model to compile: a .tflite/.circle file")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="output folder (created when missing)")
    p.add_argument("--buffer-bytes", type=positive_int,
                   help="target buffer size in bytes; ops above it are cut into stripes "
                        "(default: the target's, no limit)")
    p.add_argument("--passes", help="comma-separated pass names (default: all passes)")
    p.add_argument("--target", choices=["circle", "cpp"], default="circle",
                   help="circle: the compiled model and provenance files (default); cpp: "
                        "also a C++ artifact of the compiled model")
    p.add_argument("--build", action="store_true",
                   help="with --target cpp: build the artifact with the system compiler")
    return p


def cmd_compile(argv: Sequence[str]) -> int:
    """Run ``toolkit compile``; return the exit status (0)."""
    a = compile_parser().parse_args(argv)
    from toolkit.api import compile
    from toolkit.compiler import Target

    out_dir(a.output, "-o/--output")
    target = Target(buffer_bytes=a.buffer_bytes) if a.buffer_bytes else None
    passes = a.passes.split(",") if a.passes else None
    compiled = compile(a.model, passes=passes, target=target)
    if a.target == "cpp":  # the compiled model too, for trace-join --compiled OUTDIR
        from toolkit.generator import codegen

        compiled.save(a.output, stem=a.model.stem)
        art = codegen(compiled, a.output, name=a.model.stem)
        print(f"{a.model}: {len(compiled.commands())} commands -> C++ artifact {art.source} "
              f"(arena {art.arena_bytes} bytes, temporaries {art.temporaries_bytes} bytes)")
        if a.build:
            print(f"  built {art.build()}")
        return 0
    written = compiled.save(a.output, stem=a.model.stem)
    source_ops = len(compiled.source.graph) if compiled.source is not None else 0
    print(f"{a.model}: {source_ops} source ops -> "
          f"{len(compiled.model.graph)} compiled ops -> {len(compiled.commands())} commands")
    for f in written or []:
        print(f"  wrote {f}")
    return 0


def vela_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit vela``."""
    p = ToolkitParser(prog="toolkit vela",
                      description="Attribute Vela's per-layer estimates (cycles, bytes) to the "
                                  "original layers of the model given to Vela.")
    p.add_argument("outdir", type=Path,
                   help="Vela's output folder (its --output-dir, holding <stem>_debug.xml)")
    p.add_argument("--model", type=Path, required=True,
                   help="the .tflite model that was given to Vela")
    p.add_argument("--by", choices=["layer", "source_op"], default="layer",
                   help="table to print: per original layer (default) or per source op")
    p.add_argument("--csv", type=Path, help="file to write the --by table to as CSV")
    return p


def cmd_vela(argv: Sequence[str]) -> int:
    """Run ``toolkit vela``; return the exit status (0)."""
    a = vela_parser().parse_args(argv)
    from toolkit.api import read_vela

    att = read_vela(a.outdir, model=a.model).attribution()
    df = att.by_layer() if a.by == "layer" else att.by_source_op()
    _print_frame(df, f"Vela estimates by {a.by}")
    un = att.unattributed()
    if len(un):
        _print_frame(un, "unattributed")
    if a.csv:
        write_csv(df, a.csv, "--csv")
    return 0


def _partition(argv: Sequence[str]) -> int:
    from toolkit.partitioner.cli import main_partition

    return main_partition(list(argv))


def _trace_join(argv: Sequence[str]) -> int:
    if any(a == "--model" or a.startswith("--model=") for a in argv):
        from toolkit.trace.ort_cli import main_ort_join

        return main_ort_join(list(argv))
    from toolkit.trace.cli import main_trace_join

    return main_trace_join(list(argv))


def _nnc(argv: Sequence[str]) -> int:
    from toolkit.nnc_cli import main_nnc

    return main_nnc(list(argv))


def _trace_join_many(argv: Sequence[str]) -> int:
    from toolkit.trace.fleet_cli import main_trace_join_many

    return main_trace_join_many(list(argv))


def _demo(argv: Sequence[str]) -> int:
    from toolkit.demo import main_demo

    return main_demo(list(argv))


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "inspect": cmd_inspect,
    "compile": cmd_compile,
    "partition": _partition,
    "run": cmd_run,
    "trace-join": _trace_join,
    "trace-join-many": _trace_join_many,
    "vela": cmd_vela,
    "nnc": _nnc,
    "demo": _demo,
}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every argument parser of the command line, by the command line that selects it
    (``"run --runtime onnxruntime"`` and ``"trace-join --model"`` are the ONNX Runtime ones)."""
    from toolkit.demo import demo_parser
    from toolkit.nnc_cli import parser as nnc_parser
    from toolkit.partitioner.cli import build_parser as partition_parser
    from toolkit.trace.cli import trace_join_parser
    from toolkit.trace.fleet_cli import trace_join_many_parser
    from toolkit.trace.ort_cli import ort_join_parser, ort_run_parser

    return {
        "inspect": inspect_parser(),
        "compile": compile_parser(),
        "partition": partition_parser(),
        "run": run_parser(),
        "run --runtime onnxruntime": ort_run_parser(),
        "trace-join": trace_join_parser(),
        "trace-join --model": ort_join_parser(),
        "trace-join-many": trace_join_many_parser(),
        "vela": vela_parser(),
        "nnc": nnc_parser(),
        "demo": demo_parser(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolkit`` console script; returns the exit status.

    0 on success; 2 on a bad input, a bad flag or an OS error (``error: <where>: <what>.
    Fix: <how>``, no traceback unless ``--debug`` comes first); 3 on an internal error (one
    such line naming the exception); 130 on Ctrl-C.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = bool(args) and args[0] == "--debug"
    if debug:
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        if not args:
            print("error: toolkit: no command given. Fix: give one of "
                  f"{', '.join(COMMANDS)}, e.g. toolkit inspect sample_models/cnn.tflite",
                  file=sys.stderr)
        return 0 if args else 2
    if args[0] == "--version":
        from toolkit import __version__

        print(__version__)
        return 0
    cmd = COMMANDS.get(args[0])
    if cmd is None:
        print(f"error: toolkit: unknown command {args[0]!r}. Fix: use one of "
              f"{', '.join(COMMANDS)} (toolkit --help describes them)", file=sys.stderr)
        return 2
    try:
        return cmd(args[1:])
    except ToolkitError as e:
        if debug:
            raise
        print(error_line(e, args[0]), file=sys.stderr)
        return 2
    except OSError as e:
        if debug:
            raise
        where = e.filename if e.filename is not None else f"toolkit {args[0]}"
        what = str(e.strerror or e).rstrip(".")
        print(f"error: {where}: {what}. Fix: check the path and its permissions",
              file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse after --help (0), or a verb's own exit status
        return 2 if e.code not in (0, None) else 0
    except KeyboardInterrupt:
        print(f"toolkit {args[0]}: interrupted (Ctrl-C); nothing more was written",
              file=sys.stderr)
        return 130
    except Exception as e:  # a defect, not bad input: one line, the traceback with --debug
        if debug:
            raise
        what = " ".join(str(e).split())[:300] or "no message"
        print(f"error: toolkit {args[0]}: internal error ({type(e).__name__}: {what}). "
              f"Fix: run toolkit --debug {args[0]} ... for the traceback and report it",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
