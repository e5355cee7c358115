"""The toolkit command line: one sub-command per verb, mirroring the library.

    toolkit inspect MODEL                      ops, tensors and origins of a model
    toolkit compile MODEL -o OUTDIR            compiled model + provenance files
                  [--target cpp [--build]]     ... or a C++ artifact of the compiled model
    toolkit partition --part-file P.part --input-file M.circle [--work-path DIR] ...
    toolkit run MODEL [--inputs X.npz] [--repeat N] [--trace OUT.json|.csv|.parquet]
    toolkit run M.onnx --runtime onnxruntime [--optimization all] [--repeat N]
    toolkit trace-join TRACE --compiled OUTDIR [--policy macs] ...
    toolkit trace-join PROFILE --model M.onnx [--optimized M.opt.onnx] [--by layer]
    toolkit trace-join-many GLOB --compiled OUTDIR [--engine local|dask] [--workers N]
    toolkit vela OUTDIR --model M.tflite       Vela's estimates per original layer
    toolkit compare A B [--inputs X.npz] [--runtime-a R] [--runtime-b R] [--by layer]
                  [--model-explorer OUT.json]  numerics of B against A, per original layer
    toolkit nnc --caffe|--tflite -m MODEL --target interpreter|cpp ...   nnc's command line
    toolkit demo [--out out]                   the end-to-end demo on the sample models
    toolkit report TRACE --compiled OUT [--diff TRACE_B] [-o report.html]   profiling report

toolkit VERB --help describes every argument of a verb. Multi-word flags take hyphens or
underscores (--part-file or ONE's --part_file). A bad input prints
"error: <where>: <what>. Fix: <how>" and exits with status 2; toolkit --debug VERB ... shows
the traceback as well. Output piped into a reader that stops early (| head) ends quietly.
Every file is written atomically and named on a "wrote" line. Tables fit 100 columns; --wide
prints every column and --format csv|json prints them for machines.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

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
from toolkit.util.textable import (
    FORMATS,
    Column,
    fit_table,
    fmt_count,
    machine_text,
    wide_text,
    wrap,
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


def write_csv(df: pd.DataFrame, path: Path, flag: str, log: TextIO | None = None) -> None:
    """Write ``df`` as CSV to ``path`` atomically (the ``flag`` names it in messages) and print
    a "wrote" line."""
    from toolkit.util.atomic import atomic_write

    atomic_write(out_file(path, flag), df.to_csv(index=False).encode("utf-8"))
    print(f"wrote {path} ({len(df)} rows)", file=log or sys.stdout)


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
    p.add_argument("--wide", action="store_true",
                   help="print every column, names in full (default: tables of at most 100 "
                        "characters per line, long names elided in the middle)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table: for people (default); csv: the one table asked for, every "
                        "column; json: every table asked for, by name, every column")
    return p


def _fmt_shape(shape: object) -> str:
    return "x".join(map(str, shape)) if isinstance(shape, (tuple, list)) and shape else "scalar"


_INSPECT_COLUMNS: dict[str, list[Column]] = {
    "ops": [Column("op_index", "#", fmt_count, right=True), Column("op_type", "op"),
            Column("activation", "act"), Column("origins", "origins"),
            Column("layer", "layer"), Column("name", "name (first output)", flex=True)],
    "tensors": [Column("tensor_index", "#", fmt_count, right=True), Column("dtype", "dtype"),
                Column("shape", "shape", _fmt_shape), Column("kind", "kind"),
                Column("bytes", "bytes", fmt_count, right=True),
                Column("consumers", "uses", fmt_count, right=True),
                Column("name", "name", flex=True)],
    "origins": [Column("op_index", "op #", fmt_count, right=True), Column("op_type", "op"),
                Column("origin_id", "origin", fmt_count, right=True),
                Column("origin_name", "origin name", flex=True)],
}


def cmd_inspect(argv: Sequence[str]) -> int:
    """Run ``toolkit inspect``; return the exit status (0)."""
    a = inspect_parser().parse_args(argv)
    from toolkit.model_arg import resolve_model

    if a.csv:
        out_dir(a.csv, "--csv")

    if a.format == "csv" and a.tensors + a.origins:
        raise ToolkitError("--format csv prints one table; --tensors/--origins ask for more",
                           where="toolkit inspect --format",
                           fix="use --format json (every table, by name), or --csv DIR (a file "
                               "per table)")
    m = resolve_model(a.model, purpose="toolkit inspect", accept=("model", "compiled")).model
    if not 0 <= a.subgraph < len(m.subgraphs):
        raise ToolkitError(f"subgraph {a.subgraph} does not exist", where=str(a.model),
                           fix=f"give --subgraph 0 to {len(m.subgraphs) - 1} (the model has "
                               f"{len(m.subgraphs)} subgraph(s))")
    tables = {"ops": m.ops_table(a.subgraph)}
    if a.tensors:
        tables["tensors"] = m.tensors_table(a.subgraph)
    if a.origins:
        tables["origins"] = m.origins_table(a.subgraph)
    if a.format == "csv":
        print(machine_text(tables["ops"], "csv"))
    elif a.format == "json":
        import json

        print("{" + ", ".join(f"{json.dumps(name)}: {machine_text(df, 'json')}"
                              for name, df in tables.items()) + "}")
    else:
        head = (f"{a.model}: {m.format}, {len(m.subgraphs)} subgraph(s), "
                f"{len(m.subgraphs[a.subgraph])} ops, origin tables: "
                f"{'yes' if m.had_origin_tables else 'no'}")
        print(head if a.wide else wrap(head))
        for name, df in tables.items():
            print(f"\n== {name} ({len(df)} rows)")
            print(wide_text(df) if a.wide else fit_table(df, _INSPECT_COLUMNS[name]))
    for name, df in tables.items():
        if a.csv:
            write_csv(df, a.csv / f"{a.model.stem}.{name}.csv", "--csv",
                      log=sys.stdout if a.format == "table" else sys.stderr)
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
                   help="file to write the trace to, in the format its suffix names: .json "
                        "(or .json.gz) a Chrome trace, .csv the event table, .parquet the "
                        "event table as Parquet")
    p.add_argument("--csv", type=Path, help="file to write the trace to as CSV (as --trace "
                                            "T.csv)")
    p.add_argument("--outputs", type=Path,
                   help="file to write the outputs to (.npz, one array per output name)")
    p.add_argument("--threads", type=positive_int,
                   help="threads: a C++ artifact splits its large ops across them (default: "
                        "the artifact's own); the reference runtime's BLAS limit (default 1)")
    return p


def cmd_run(argv: Sequence[str]) -> int:
    """Run ``toolkit run`` (``--runtime onnxruntime``: ONNX Runtime); return the exit status."""
    if _routing_option(argv, "--runtime") is not None:
        from toolkit.cli._ort import main_ort_run

        return main_ort_run(list(argv))
    a = run_parser().parse_args(argv)
    from toolkit.api import run

    for flag, path in (("--trace", a.trace), ("--csv", a.csv), ("--outputs", a.outputs)):
        if path is not None:
            out_file(path, flag)
    if a.trace is not None:
        trace_format(a.trace)
    if a.outputs is not None and a.outputs.suffix.lower() != ".npz":
        raise ToolkitError("--outputs writes an .npz archive", where=str(a.outputs),
                           fix=f"give it an .npz name, e.g. {a.outputs.with_suffix('.npz')}")
    want_trace = a.trace is not None or a.csv is not None
    from toolkit.generator import is_artifact_dir

    native = a.model.is_dir() and is_artifact_dir(a.model)
    res = run(a.model, read_inputs(a.inputs), trace=want_trace, repeat=a.repeat,
              warmup=a.warmup, threads=a.threads if native else (a.threads or 1))
    outputs = res.outputs
    for name, arr in outputs.items():
        print(f"{name}: {arr.dtype} {list(arr.shape)} mean={float(np.mean(arr)):.6g}")
    if a.outputs:
        import io

        from toolkit.util.atomic import atomic_write

        buf = io.BytesIO()
        np.savez(buf, **outputs)  # type: ignore[arg-type]
        atomic_write(a.outputs, buf.getvalue())
        print(f"wrote {a.outputs} ({len(outputs)} output array(s))")
    if want_trace:
        from toolkit.formats.trace_csv import write_trace_csv

        frame = res.trace.to_frame()  # the runtime's own events
        if a.trace:
            write_trace(frame, a.trace, process_name=str(a.model.name))
            print(f"wrote {a.trace} ({len(frame)} events, {trace_format(a.trace)})")
        if a.csv:
            write_trace_csv(frame, a.csv)
            print(f"wrote {a.csv} ({len(frame)} events, csv)")
    return 0


_TRACE_SUFFIXES = {".json": "chrome", ".json.gz": "chrome", ".csv": "csv",
                   ".parquet": "parquet"}


def trace_format(path: Path) -> str:
    """Return the trace format the name of ``path`` asks for (``chrome``, ``csv`` or
    ``parquet``); ToolkitError for any other suffix."""
    name = path.name.lower()
    for suffix, fmt in _TRACE_SUFFIXES.items():
        if name.endswith(suffix):
            return fmt
    raise ToolkitError(f"--trace cannot tell the format from the name {path.name!r}",
                       where=str(path),
                       fix="end the name with .json (Chrome trace, .json.gz compressed), .csv "
                           "or .parquet")


def write_trace(frame: pd.DataFrame, path: Path, process_name: str) -> None:
    """Write the event ``frame`` to ``path`` in the format its suffix names
    (:func:`trace_format`), atomically."""
    fmt = trace_format(path)
    if fmt == "chrome":
        from toolkit.formats.chrome_trace import write_chrome_trace

        write_chrome_trace(frame, path, process_name=process_name)
    elif fmt == "csv":
        from toolkit.formats.trace_csv import write_trace_csv

        write_trace_csv(frame, path)
    else:
        from toolkit.formats.trace_parquet import write_trace_parquet

        write_trace_parquet(frame, path)


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
    p.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS",
                   help="set an input's free dimensions before compiling, e.g. "
                        "input=1x16000 (repeatable; default: none set, and with --target cpp "
                        "free dimensions take the file's shape, as LiteRT does)")
    return p


def _shape_args(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=1x16000`` values as a dict (UsageError for a malformed one)."""
    from toolkit.errors import UsageError

    out = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not sep or not name or not shape:
            raise UsageError(f"--shape {item!r} is not NAME=DIMS",
                             fix="write the input's name, '=', and its dimensions joined by "
                                 "'x': --shape input=1x16000")
        out[name] = shape
    return out


def cmd_compile(argv: Sequence[str]) -> int:
    """Run ``toolkit compile``; return the exit status (0)."""
    a = compile_parser().parse_args(argv)
    from toolkit.api import compile
    from toolkit.compiler import Target

    out_dir(a.output, "-o/--output")
    target = Target(buffer_bytes=a.buffer_bytes) if a.buffer_bytes else None
    passes = a.passes.split(",") if a.passes else None
    shapes = _shape_args(a.shape)
    model: Any = a.model
    if shapes or a.target == "cpp":
        from toolkit.api import fix_free_dims, load
        from toolkit.runtime.static_shapes import has_free_dims

        model = load(a.model)
        if shapes or has_free_dims(model):
            model = fix_free_dims(model, shapes)
    compiled = compile(model, passes=passes, target=target)
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


def _routing_option(argv: Sequence[str], option: str) -> str | None:
    """The value of ``option`` in ``argv``, read by argparse (every other argument left to
    the verb's own parser), or None: which parser a verb's arguments go to."""
    router = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    router.add_argument(option)
    known, _ = router.parse_known_args(list(argv))
    value = getattr(known, option.lstrip("-").replace("-", "_"))
    return None if value is None else str(value)


def _trace_join(argv: Sequence[str]) -> int:
    if _routing_option(argv, "--model") is not None:
        from toolkit.cli._ort import main_ort_join

        return main_ort_join(list(argv))
    from toolkit.cli._trace_join import main_trace_join

    return main_trace_join(list(argv))


def _nnc(argv: Sequence[str]) -> int:
    from toolkit.nnc_cli import main_nnc

    return main_nnc(list(argv))


def _trace_join_many(argv: Sequence[str]) -> int:
    from toolkit.cli._fleet import main_trace_join_many

    return main_trace_join_many(list(argv))


def _compare(argv: Sequence[str]) -> int:
    from toolkit.numerics.cli import main_compare

    return main_compare(list(argv))


def _report(argv: Sequence[str]) -> int:
    from toolkit.viz.report.cli import main_report

    return main_report(list(argv))


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
    "compare": _compare,
    "nnc": _nnc,
    "demo": _demo,
    "report": _report,
}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every argument parser of the command line, by the command line that selects it
    (``"run --runtime onnxruntime"`` and ``"trace-join --model"`` are the ONNX Runtime ones)."""
    from toolkit.cli._fleet import trace_join_many_parser
    from toolkit.cli._ort import ort_join_parser, ort_run_parser
    from toolkit.cli._trace_join import trace_join_parser
    from toolkit.demo import demo_parser
    from toolkit.nnc_cli import parser as nnc_parser
    from toolkit.numerics.cli import compare_parser
    from toolkit.partitioner.cli import build_parser as partition_parser
    from toolkit.viz.report.cli import report_parser

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
        "compare": compare_parser(),
        "nnc": nnc_parser(),
        "demo": demo_parser(),
        "report": report_parser(),
    }


def _quiet_stdout() -> None:
    """Point stdout at /dev/null after the reader closed the pipe, so that the interpreter's
    final flush does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolkit`` console script; returns the exit status.

    0 on success; 2 on a bad input, a bad flag or an OS error (``error: <where>: <what>.
    Fix: <how>``; ``--debug`` first prints the traceback before that line); 3 on an internal
    error (one such line naming the exception); 130 on Ctrl-C; 141 when the reader of stdout
    closed the pipe (``toolkit inspect M | head``), quietly, as Unix tools do.
    """
    try:
        status = _main(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return 141


def _main(args: list[str]) -> int:
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
        from toolkit.util.suggest import closest

        near = closest(args[0], [*COMMANDS, "--debug", "--help", "--version"])
        fix = (f"did you mean toolkit {near}?" if near else
               f"use one of {', '.join(COMMANDS)} (toolkit --help describes them)")
        print(f"error: toolkit: unknown command {args[0]!r}. Fix: {fix}", file=sys.stderr)
        return 2

    def shown(status: int) -> int:  # --debug: the traceback first, then the same one line
        if debug:
            traceback.print_exc()
        return status

    try:
        return cmd(args[1:])
    except BrokenPipeError:
        raise
    except ToolkitError as e:
        status = shown(2)
        print(error_line(e, args[0]), file=sys.stderr)
        return status
    except OSError as e:
        status = shown(2)
        where = e.filename if e.filename is not None else f"toolkit {args[0]}"
        what = str(e.strerror or e).rstrip(".")
        print(f"error: {where}: {what}. Fix: check the path and its permissions",
              file=sys.stderr)
        return status
    except SystemExit as e:  # argparse after --help (0), or a verb's own exit status
        return 2 if e.code not in (0, None) else 0
    except KeyboardInterrupt:
        print(f"toolkit {args[0]}: interrupted (Ctrl-C); nothing more was written",
              file=sys.stderr)
        return 130
    except Exception as e:  # a defect, not bad input: one line, the traceback with --debug
        status = shown(3)
        what = " ".join(str(e).split())[:300] or "no message"
        print(f"error: toolkit {args[0]}: internal error ({type(e).__name__}: {what}). "
              f"Fix: run toolkit --debug {args[0]} ... for the traceback and report it",
              file=sys.stderr)
        return status
