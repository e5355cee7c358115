"""``toolkit partition``: the command line of ONE's circle-partitioner.

    toolkit partition --part-file M.part --input-file M.circle [--work-path DIR]
                      [--backends cpu,npu] [--default cpu]

The ``.part`` and input files are read from the work path (default: the current folder), and
the part models, ``<stem>.conn.json`` and ``<stem>.conn.ini`` are written there. ``--backends``
and ``--default`` override the ``[partition]`` section. ``.tflite`` input is accepted too.
ONE's spellings (``--part_file``, ``--input_file``, ``--work_path``) are accepted as well.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from toolkit.errors import PartitionError, ToolkitError
from toolkit.util.cliargs import ToolkitParser, error_line

__all__ = ["main_partition", "build_parser"]


def build_parser(prog: str = "toolkit partition") -> argparse.ArgumentParser:
    """Return the argument parser of the ``partition`` command."""
    ap = ToolkitParser(
        prog=prog, description="Partition a .circle/.tflite model across backends as ONE's "
        "circle-partitioner does: part models plus .conn.json/.conn.ini connection files. "
        "ONE's spellings (--part_file, --input_file, --work_path) are accepted too.")
    ap.add_argument("--part-file", required=True,
                    help="partition file (.part), a name relative to the work path")
    ap.add_argument("--input-file", required=True,
                    help="input .circle (or .tflite) model, a name relative to the work path")
    ap.add_argument("--work-path", default=".",
                    help="existing folder of the input files and of the outputs (default: "
                         "the current folder)")
    ap.add_argument("--backends",
                    help="comma-separated backend names, e.g. cpu,npu (default: the .part "
                         "file's [partition] backends)")
    ap.add_argument("--default",
                    help="backend of the ops no rule names (default: the .part file's "
                         "[partition] default)")
    return ap


def _in_work(work: Path, name: str, flag: str) -> Path:
    """Return ``work / name`` for a name that stays inside ``work``; else PartitionError."""
    p = Path(name)
    target = (work / p).resolve()
    root = work.resolve()
    if p.is_absolute() or (target != root and root not in target.parents):
        raise PartitionError(f"{flag} {name!r} is outside the work path {str(work)!r}",
                             where=name, fix="put the file in the work path and give its "
                                             "name relative to it")
    return work / p


def main_partition(argv: Sequence[str] | None = None) -> int:
    """Run the ``partition`` command with ``argv`` (without the command name); return the exit
    status: 0 on success, 2 on a :class:`ToolkitError` (printed to stderr) or bad flags."""
    ap = build_parser()
    try:
        args = ap.parse_args(list(argv) if argv is not None else None)
    except SystemExit as e:  # --help
        return int(e.code or 0)
    except ToolkitError as e:
        print(error_line(e, "partition"), file=sys.stderr)
        return 2
    from toolkit.formats.flatbuffer_read import load
    from toolkit.partitioner import partition

    work = Path(args.work_path or ".")
    try:
        if not work.is_dir():
            raise PartitionError("the work path is not an existing folder",
                                 where=f"--work-path {work}",
                                 fix=f"create it (mkdir -p {work}) and put the .part and "
                                     "model files in it, or pass the folder that holds them")
        part_path = _in_work(work, args.part_file, "--part-file")
        input_path = _in_work(work, args.input_file, "--input-file")
        for flag, path in (("--part-file", part_path), ("--input-file", input_path)):
            if not path.is_file():
                raise PartitionError(f"{flag} {path.name} is not a file in the work path",
                                     where=str(path),
                                     fix=f"put it in {work} or give --work-path the folder "
                                         "that holds it")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = load(input_path)
            result = partition(model, part_path, args.backends, args.default,
                               source_file=args.input_file)
            paths = result.write(work)
        for w in caught:
            print(f"warning: {w.message}", file=sys.stderr)
    except ToolkitError as e:
        print(error_line(e, "partition"), file=sys.stderr)
        return 2
    for p, path in zip(result.parts, paths):
        print(f"wrote {path}: {p.backend}, {len(p.op_indices)} op(s), inputs {p.inputs}, "
              f"outputs {p.outputs}")
    for path in paths[len(result.parts):]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_partition())
