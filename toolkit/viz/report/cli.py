"""``toolkit report TRACE --compiled OUT [-o report.html] ...``: the profiling report verb."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.trace.join.join import POLICIES
from toolkit.trace.views.diff import MATCH_MODES
from toolkit.util.cliargs import ToolkitParser, count_arg

__all__ = ["report_parser", "main_report"]


def report_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit report``."""
    p = ToolkitParser(
        prog="toolkit report",
        description="Write one self-contained HTML profiling report (figures embedded, opens "
                    "offline) of a trace joined with its model, optionally diffed against a "
                    "second trace; or the executed report notebook (--format notebook).")
    p.add_argument("trace", type=Path,
                   help="the trace file (Chrome trace JSON, CSV, ... as toolkit trace-join "
                        "reads)")
    p.add_argument("--compiled", type=Path, required=True,
                   help="the model the trace measured: compiled output folder (toolkit "
                        "compile -o), a partitioned model's .conn.json/.conn.ini, or a "
                        ".circle/.tflite")
    p.add_argument("--diff", type=Path, metavar="TRACE_B",
                   help="a second trace to compare with (the first is the baseline)")
    p.add_argument("--diff-compiled", type=Path, metavar="OUT_B",
                   help="the model TRACE_B measured (default: --compiled)")
    p.add_argument("--labels", nargs=2, default=("a", "b"), metavar=("A", "B"),
                   help="names of the two traces in the diff (default: a b)")
    p.add_argument("--match", choices=MATCH_MODES, default="model",
                   help="model: both traces measured one source model (default); name: "
                        "compare two models' layers of the same name")
    p.add_argument("--numerics", type=Path, metavar="CSV",
                   help="a numerics comparison's by_layer() table as CSV, shown as it is")
    p.add_argument("--policy", choices=POLICIES, default="macs",
                   help="how an op's time is split over its source ops (default: macs)")
    p.add_argument("--skip-runs", type=count_arg, default=0, metavar="N",
                   help="drop the first N runs (warm-up) of each trace (default 0)")
    p.add_argument("--top", type=count_arg, default=15,
                   help="layers in the tables and figures (default 15)")
    p.add_argument("--title", default="Profiling report",
                   help="the report's title (default: Profiling report)")
    p.add_argument("--format", choices=("html", "notebook"), default=None,
                   help="html: one HTML file without code (default, or when -o ends in "
                        ".html); notebook: the executed notebook (default when -o ends in "
                        ".ipynb)")
    p.add_argument("-o", "--out", type=Path, default=Path("report.html"),
                   help="the file to write (default: report.html)")
    return p


def main_report(argv: Sequence[str]) -> int:
    """Run ``toolkit report``; return the exit status (0). Bad input (a trace that does not
    join its model, two models without --match name) raises the join's or the diff's
    :class:`~toolkit.errors.ToolkitError`, and no file is written."""
    a = report_parser().parse_args(list(argv))
    from toolkit.viz.report import write_report

    if a.diff_compiled is not None and a.diff is None:
        raise ToolkitError("--diff-compiled is the model of --diff's trace, and --diff is "
                           "missing", where="toolkit report",
                           fix="add --diff TRACE_B, or leave out --diff-compiled")
    for flag, path in (("TRACE", a.trace), ("--compiled", a.compiled), ("--diff", a.diff),
                       ("--diff-compiled", a.diff_compiled), ("--numerics", a.numerics)):
        if path is not None and not path.exists():
            raise ToolkitError(f"{flag} names no file or folder", where=str(path),
                               fix=f"check the path given as {flag}")
    fmt = a.format or ("notebook" if a.out.suffix == ".ipynb" else "html")
    path = write_report(a.out, trace=a.trace, model=a.compiled, trace_b=a.diff,
                        model_b=a.diff_compiled, numerics=a.numerics, policy=a.policy,
                        skip_runs=a.skip_runs, match=a.match, labels=tuple(a.labels),
                        title=a.title, top=a.top if a.top > 0 else 15, format=fmt)
    print(f"wrote {path} ({fmt}, {path.stat().st_size:,} bytes)")
    return 0
