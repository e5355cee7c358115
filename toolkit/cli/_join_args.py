"""The arguments of the one join, shared by every trace-join command line (``trace-join``,
``trace-join-many``, ``trace-join PROFILE --model M.onnx``): each option means the same in all
of them, as in :func:`toolkit.trace_join`."""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.trace.join.join import OVERLAPS
from toolkit.trace.join.keys import KEY_KINDS
from toolkit.trace.join.policies import POLICIES
from toolkit.util.cliargs import count_arg

__all__ = ["add_join_options", "add_table_options"]


def add_join_options(p: argparse.ArgumentParser, *, policy_default: str | None,
                     policy_help: str, runs_of: str, key: bool = True) -> None:
    """Add ``--policy`` (``policy_default``, ``policy_help``), ``--key`` (when ``key``),
    ``--overlaps``, ``--skip-runs`` (of ``runs_of``: "the trace", "every partition" ...) and
    ``--no-strict`` to ``p``; return None."""
    p.add_argument("--policy", choices=POLICIES, default=policy_default, help=policy_help)
    if key:
        p.add_argument("--key", choices=KEY_KINDS,
                       help="key kind of every event (default: each event's own)")
    p.add_argument("--overlaps", choices=OVERLAPS, default="self",
                   help="self: nested spans count their exclusive time (default); leaves: "
                        "enclosing spans are unattributed; keep: every span counts whole")
    p.add_argument("--skip-runs", type=count_arg, default=0, metavar="N",
                   help=f"drop the first N runs (warm-up inferences) of {runs_of} (default 0)")
    p.add_argument("--no-strict", action="store_true",
                   help="attribute what matches even when most events do not match the model")


def add_table_options(p: argparse.ArgumentParser, views: tuple[str, ...]) -> None:
    """Add ``--by`` (one of ``views``, default ``layer``), ``--csv`` and ``--top`` to ``p``;
    return None."""
    p.add_argument("--by", choices=views, default="layer",
                   help="table to print and write (default: layer)")
    p.add_argument("--csv", type=Path, help="file to write the --by table to as CSV")
    p.add_argument("--top", type=count_arg, default=40,
                   help="rows to print, largest total_ns first (default 40; 0: all)")
