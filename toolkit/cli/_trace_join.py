"""``toolkit trace-join TRACE --compiled OUTDIR_OR_MODEL ...``: the command line of trace-join."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.cli._join_args import add_join_options
from toolkit.errors import ToolkitError
from toolkit.util.cliargs import ToolkitParser, count_arg
from toolkit.util.textable import (
    FORMATS,
    Column,
    fit_table,
    fmt_count,
    fmt_ms,
    fmt_ns,
    fmt_share,
    machine_text,
    wide_text,
    wrap,
)

__all__ = ["main_trace_join", "trace_join_parser"]

_VIEWS = ("layer", "source_op", "op", "command", "backend")


def trace_join_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit trace-join`` (``--model``: the ONNX Runtime one)."""
    p = ToolkitParser(
        prog="toolkit trace-join",
        description="Attribute the time of a runtime trace to the original layers of a "
                    "model. With --model M.onnx the trace is an ONNX Runtime profile "
                    "(toolkit trace-join PROFILE --model M.onnx --help).")
    p.add_argument("trace", type=Path,
                   help="the trace file: Chrome trace JSON (.json, .json.gz), CSV, "
                        "debug-handle records, or an ExecuTorch ETDump (.etdp) with "
                        "--etrecord")
    p.add_argument("--compiled", type=Path,
                   help="compiled output folder (toolkit compile -o), a partitioned model's "
                        ".conn.json/.conn.ini, or a .circle/.tflite")
    p.add_argument("--etrecord", type=Path,
                   help="ExecuTorch ETRecord (the trace is then an ETDump .etdp)")
    p.add_argument("--program", type=Path, help="ExecuTorch program (.pte), with --etrecord")
    add_join_options(p, policy_default=None, runs_of="the trace",
                     policy_help="how an op's time is split over its source ops (default: "
                                 "macs; with --etrecord: equal)")
    p.add_argument("--by", choices=_VIEWS, default="layer",
                   help="table to print and write (default: layer)")
    p.add_argument("--csv", type=Path, help="file to write the --by table to as CSV")
    p.add_argument("--unattributed-csv", type=Path,
                   help="file to write the unattributed events to as CSV")
    p.add_argument("--chrome", type=Path,
                   help="file to write a Chrome trace to, with each event's layers in its args")
    p.add_argument("--model-explorer", type=Path,
                   help="file to write Model Explorer node data (JSON) to")
    p.add_argument("--graph-id", help="graph id for --model-explorer (default: the "
                                      "subgraph's name, as Model Explorer looks it up)")
    p.add_argument("--top", type=count_arg, default=40,
                   help="rows of the table to print, largest total_ns first (default 40; "
                        "0: all)")
    p.add_argument("--wide", action="store_true",
                   help="print every column of the table, names in full (default: a table "
                        "of at most 100 characters per line: name, time, share, p50, events)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table: for people (default); csv or json: only the --by table, every "
                        "column and row, on stdout for machines")
    g = p.add_argument_group("reading the trace (columns of a CSV or Chrome args)")
    g.add_argument("--key-column",
                   help="column holding each event's key (default: found by name)")
    g.add_argument("--start-column",
                   help="column holding each event's start time (default: found by name)")
    g.add_argument("--duration-column",
                   help="column holding each event's duration (default: found by name)")
    g.add_argument("--end-column",
                   help="column holding each event's end time, when there is no duration "
                        "column (default: found by name)")
    g.add_argument("--unit", choices=("ns", "us", "ms", "s", "cycles"),
                   help="unit of the time columns (default: from the column names, e.g. "
                        "dur_us)")
    g.add_argument("--clock-hz", type=float,
                   help="clock frequency in Hz, to turn --unit cycles into ns")
    return p


def main_trace_join(argv: Sequence[str]) -> int:
    """Run ``toolkit trace-join``; return the exit status (0).

    Prints the totals and the match score, the ``--by`` table (largest ``total_ns`` first,
    ``--top`` rows; with ``--by layer``, layers whose first run is an outlier are named), the
    dispatch overhead and the unattributed time by reason; writes the files asked for. Bad
    input, and a trace that mostly does not match the model (unless ``--no-strict``), raise
    :class:`~toolkit.errors.ToolkitError` (the main command line prints it, status 2).
    """
    a = trace_join_parser().parse_args(list(argv))
    if a.etrecord is not None:
        from toolkit.trace.readers.executorch.profile import main_executorch

        return main_executorch(a.trace, a.etrecord, a.program, policy=a.policy or "equal",
                               by=a.by, csv=a.csv, top=a.top, overlaps=a.overlaps,
                               strict=not a.no_strict, skip_runs=a.skip_runs)
    if a.compiled is None:
        raise ToolkitError("trace-join needs --compiled (or --etrecord for an ETDump)",
                           where="toolkit trace-join",
                           fix="give --compiled OUT (a compiled folder, .conn.json or model "
                               "file), or for an ETDump --etrecord R.bin [--program M.pte]")
    if a.policy is None:
        a.policy = "macs"
    from toolkit.trace.join.join import as_provenance, trace_join
    from toolkit.trace.readers.read import read_trace

    for flag, path in (("--csv", a.csv), ("--unattributed-csv", a.unattributed_csv),
                       ("--chrome", a.chrome), ("--model-explorer", a.model_explorer)):
        if path is not None and path.is_dir():
            raise ToolkitError(f"{flag} names a folder, a file is expected", where=str(path),
                               fix=f"give {flag} a file name")

    trace = read_trace(a.trace, key_column=a.key_column, start_column=a.start_column,
                       duration_column=a.duration_column, end_column=a.end_column,
                       unit=a.unit, clock_hz=a.clock_hz)
    provenance = as_provenance(a.compiled)
    att = trace_join(trace, provenance, policy=a.policy, key=a.key, overlaps=a.overlaps,
                     strict=not a.no_strict, skip_runs=a.skip_runs)
    att.check()
    s = att.summary()
    table = getattr(att, f"by_{a.by}")()
    if a.format != "table":
        print(machine_text(table, a.format))
        _write_files(a, att, table, sys.stderr)
        return 0
    share = s["attributed_ns"] / s["total_ns"] if s["total_ns"] else 0.0
    say = print if a.wide else (lambda text="": print(wrap(text)))
    say(f"{a.trace}: {s['events']} events, {s['runs']} run(s), key {s['key_used'] or '-'}, "
        f"policy {s['policy']}, match score {s['match_score']:.1%} "
        f"({s['matched_events']} of {s['keyed_events']} keyed events match the model)")
    if s["skipped_runs"]:
        say(f"skipped the first {s['skipped_runs']} run(s) as warm-up: "
            f"{s['skipped_events']} event(s), {fmt_ns(s['skipped_ns'])}")
    say(f"attributed {fmt_ns(s['attributed_ns'])} of {fmt_ns(s['total_ns'])} ({share:.1%}); "
        f"unattributed {fmt_ns(s['unattributed_ns'])} in "
        f"{len(att.unattributed())} event(s)"
        + (f"; dispatch overhead {fmt_ns(s['overhead_ns'])}" if s["overhead_ns"] else "")
        + ("; spans nest: times are exclusive (self)" if s["nested"] else ""))
    if s["overlapping_events"]:
        say(f"{s['overlapping_events']} span(s) overlap an earlier span without nesting "
            "(unattributed)")
    from toolkit.reprs import top_rows

    print()
    cut = top_rows(table, "total_ns", a.top if a.top > 0 else len(table))
    say(f"== by {a.by}: {cut.note}")
    print(wide_text(cut.frame) if a.wide else fit_table(_flagged(cut.frame), _COLUMNS[a.by]))
    if a.by == "layer" and table["first_run_outlier"].any():
        slow = table.loc[table["first_run_outlier"], "layer"].tolist()
        print()
        say(f"first run is an outlier (warm-up) for {len(slow)} layer(s), e.g. "
            f"{slow[:3]}: pass --skip-runs 1, or record with `toolkit run --warmup N`")
    over = att.overhead()
    if len(over):
        print("\n== dispatch overhead (self time of spans holding others)")
        print(wide_text(over[["bucket", "total_ns", "share", "events"]]) if a.wide else
              fit_table(over, [Column("bucket", "bucket", flex=True), *_TIME_COLUMNS]))
    un = att.unattributed()
    if len(un):
        why = un.groupby("reason", observed=True)["dur_ns"].agg(["count", "sum"])
        why = why.rename(columns={"count": "events", "sum": "dur_ns"}).reset_index()
        print("\n== unattributed by reason")
        print(wide_text(why) if a.wide else fit_table(why, [
            Column("reason", "reason", flex=True), Column("events", "events", fmt_count, True),
            Column("dur_ns", "time", fmt_ns, True)]))
    _write_files(a, att, table, sys.stdout)
    sys.stdout.flush()
    return 0


_TIME_COLUMNS = [Column("total_ns", "time", fmt_ns, right=True),
                 Column("share", "share", fmt_share, right=True),
                 Column("p50_ms", "p50/event", fmt_ms, right=True),
                 Column("events", "events", fmt_count, right=True),
                 Column("_flag", "note")]

_COLUMNS: dict[str, list[Column]] = {
    "layer": [Column("layer", "layer", flex=True), *_TIME_COLUMNS],
    "source_op": [Column("name", "source op", flex=True), Column("operator", "operator"),
                  *_TIME_COLUMNS],
    "op": [Column("name", "op", flex=True), Column("operator", "operator"),
           Column("backend", "backend"), *_TIME_COLUMNS],
    "command": [Column("command_id", "command", right=True),
                Column("optimised_id", "op", right=True), Column("stripe", "stripe"),
                *_TIME_COLUMNS],
    "backend": [Column("backend", "backend", flex=True), *_TIME_COLUMNS],
}


def _flagged(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``_flag`` column saying which rows' first run is an outlier (only
    when some row's is)."""
    if "first_run_outlier" in frame.columns and frame["first_run_outlier"].any():
        frame = frame.copy()
        frame["_flag"] = ["1st run slow" if v else "" for v in frame["first_run_outlier"]]
    return frame


def _write_files(a: argparse.Namespace, att: Any, table: pd.DataFrame, log: Any) -> None:
    """Write the files the flags ask for, a "wrote" line each on ``log``."""
    from toolkit.trace.views.export import to_chrome_trace, to_model_explorer
    from toolkit.util.atomic import atomic_write

    if a.csv:
        atomic_write(a.csv, table.to_csv(index=False).encode("utf-8"))
        print(f"wrote {a.csv}", file=log)
    if a.unattributed_csv:
        atomic_write(a.unattributed_csv, att.unattributed().to_csv(index=False).encode("utf-8"))
        print(f"wrote {a.unattributed_csv}", file=log)
    if a.chrome:
        print(f"wrote {to_chrome_trace(att, a.chrome)}", file=log)
    if a.model_explorer:
        print(f"wrote {to_model_explorer(att, a.model_explorer, graph_id=a.graph_id)}",
              file=log)
