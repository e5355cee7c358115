"""``toolkit trace-join-many GLOB --compiled X --engine local|dask --workers N``: join a fleet.

One partition per file (one device session per file), joined on a process pool or on Dask;
a progress bar on stderr advances per file; the merged result is checked and printed like
``toolkit trace-join``, with the per-file slice.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.cli._join_args import add_join_options, add_table_options
from toolkit.trace.fleet.join_many import ENGINES
from toolkit.util.cliargs import ToolkitParser, count_arg

__all__ = ["main_trace_join_many", "trace_join_many_parser"]

_VIEWS = ("layer", "source_op", "op", "command", "backend")


def trace_join_many_parser() -> argparse.ArgumentParser:
    """The argument parser of ``toolkit trace-join-many``."""
    p = ToolkitParser(
        prog="toolkit trace-join-many",
        description="Attribute the time of a fleet of traces (one device session per file) "
                    "to the original layers of one compiled model.")
    p.add_argument("sources", nargs="+",
                   help="trace files, folders or quoted glob patterns (Chrome JSON/.gz, CSV, "
                        "Parquet)")
    p.add_argument("--compiled", type=Path, required=True,
                   help="compiled output folder, a partitioned model's .conn.json, or a model")
    p.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: a process pool (default); dask: a Dask cluster")
    p.add_argument("--workers", type=count_arg, default=None, metavar="N",
                   help="worker processes (default: one per core; 0 with --engine local: "
                        "in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --engine dask: the address of a running scheduler (default: "
                        "start a local cluster)")
    p.add_argument("--partition-by", metavar="COLUMN",
                   help="column naming the device (session) of each event, for files that "
                        "hold several")
    p.add_argument("--runs", choices=("distinct", "per-partition"), default="distinct",
                   help="distinct: run values are unique across files (default); "
                        "per-partition: each file numbers its runs from 0 (a runtime's trace)")
    add_join_options(p, policy_default="macs", runs_of="every partition",
                     policy_help="how an op's time is split over its source ops (default: macs)")
    add_table_options(p, _VIEWS)
    p.add_argument("--partitions-csv", type=Path,
                   help="file to write the per-file table to as CSV")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


class _Bar:
    """A one-line progress bar on stderr, advanced per partition."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.t0 = time.perf_counter()

    def __call__(self, partial: Any, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        fill = int(width * done / max(total, 1))
        elapsed = time.perf_counter() - self.t0
        name = Path(partial.label).name + (f" [{partial.device}]" if partial.device else "")
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} files "
                         f"{elapsed:6.1f} s  {name[:40]:<40}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _write_csv(table: pd.DataFrame, path: Path) -> None:
    from toolkit.util.atomic import atomic_open

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as f:
        f.write(table.to_csv(index=False).encode())
    print(f"wrote {path}")


def main_trace_join_many(argv: Sequence[str]) -> int:
    """Run ``toolkit trace-join-many``; return the exit status (0). Bad input raises
    :class:`~toolkit.errors.ToolkitError` (the main command line prints it, status 2)."""
    a = trace_join_many_parser().parse_args(list(argv))
    from toolkit.errors import ToolkitError
    from toolkit.trace.fleet.join_many import trace_join_many

    client = None
    if a.scheduler:
        if a.engine != "dask":
            raise ToolkitError("--scheduler needs --engine dask",
                               where="toolkit trace-join-many --scheduler",
                               fix="add --engine dask, or drop --scheduler")
        from toolkit.trace.fleet.engines import import_distributed

        client = import_distributed().Client(a.scheduler)
    t0 = time.perf_counter()
    try:
        fleet = trace_join_many(a.sources, a.compiled, engine=a.engine, client=client,
                                workers=a.workers, partition_by=a.partition_by,
                                policy=a.policy, key=a.key, overlaps=a.overlaps,
                                strict=not a.no_strict, skip_runs=a.skip_runs,
                                runs=a.runs, progress=_Bar(not a.quiet))
    finally:
        if client is not None:
            client.close()
    fleet.check()
    seconds = time.perf_counter() - t0
    s = fleet.summary()
    share = s["attributed_ns"] / s["total_ns"] if s["total_ns"] else 0.0
    print(f"{s['partitions']} partition(s), {s['events']} events, {s['runs']} run(s) joined "
          f"in {seconds:.1f} s ({a.engine}); key {s['key_used'] or '-'}, policy "
          f"{s['policy']}, match score {s['match_score']:.1%}")
    print(f"attributed {s['attributed_ns']} of {s['total_ns']} ns ({share:.1%}); "
          f"unattributed {s['unattributed_ns']} ns; dispatch overhead {s['overhead_ns']} ns"
          + (f"; skipped {s['skipped_runs']} warm-up run(s)" if s["skipped_runs"] else ""))
    table = getattr(fleet, f"by_{a.by}")()
    shown = table.sort_values("total_ns", ascending=False, kind="stable")
    if a.top > 0:
        shown = shown.head(a.top)
    parts = fleet.by_partition()
    with pd.option_context("display.max_rows", None, "display.max_columns", 20,
                           "display.width", 200, "display.max_colwidth", 60):
        print(f"\n== by {a.by} ({len(table)} rows, largest {len(shown)} shown)")
        print(shown.to_string(index=False) if len(shown) else "(empty)")
        print("\n== by file")
        print(parts[["source", "device", "runs", "events", "total_ns", "attributed_ns",
                     "match_score"]].head(a.top if a.top > 0 else len(parts))
              .to_string(index=False))
        un = fleet.unattributed()
        if len(un):
            print("\n== unattributed by reason")
            print(un.to_string(index=False))
    if a.csv:
        _write_csv(table, a.csv)
    if a.partitions_csv:
        _write_csv(parts, a.partitions_csv)
    sys.stdout.flush()
    return 0
