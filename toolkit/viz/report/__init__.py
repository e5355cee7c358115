"""The profiling report: one self-contained HTML file (or an executed notebook) per profile.

The report is a notebook, :file:`template.ipynb` beside this module: papermill runs it with
the report's parameters, and nbconvert exports it without its code cells (figures embedded as
base64 PNG, no script fetched from anywhere: it opens offline). Sections: summary (totals,
match score, ``check()``), top layers, time per backend, the diff against a second trace,
unattributed events with their reasons, the provenance of the top layers, and a numerics
comparison (any object with ``by_layer()``).

Traces given as paths are joined by the notebook itself (so that its executed copy runs
again); attributions and traces in memory are joined here and handed over through a temporary
pickle. A join's or a diff's error stops the report with that error (raised again here, of its
own class, when the notebook raised it), and nothing is written: the output appears
atomically, whole or not at all.
"""

from __future__ import annotations

import contextlib
import html
import importlib
import logging
import mmap
import os
import pickle
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError

__all__ = ["write_report", "TEMPLATE", "FORMATS"]

TEMPLATE = Path(__file__).resolve().parent / "template.ipynb"
FORMATS = ("html", "notebook")
_KERNEL = "python3"


def _format_of(out: Path, fmt: str | None) -> str:
    if fmt is None:
        return "notebook" if out.suffix == ".ipynb" else "html"
    if fmt not in FORMATS:
        raise ToolkitError(f"unknown report format {fmt!r}", fix=f"use one of {FORMATS}")
    return fmt


def _join(trace: Any, model: Any, policy: str, skip_runs: int, side: str) -> Any:
    from toolkit.trace.join.join import trace_join
    from toolkit.trace.readers.read import read_trace

    if trace is None or model is None:
        raise ToolkitError(f"the report needs {side}'s trace and its model (or an "
                           "attribution)", where="report",
                           fix="pass trace= and model= (a compiled folder, model file or "
                               ".conn.json), or attribution= from tk.trace_join")
    if not hasattr(trace, "events"):
        trace = read_trace(trace)
    return trace_join(trace, model, policy=policy, skip_runs=skip_runs)


@contextlib.contextmanager
def _without_iri_grammar() -> Iterator[None]:
    """Import papermill and nbconvert without ``rfc3987_syntax``: jsonschema (under nbformat)
    imports it when present only to check IRI formats, which notebooks never use, and it
    builds a parser grammar at import (seconds). Left alone when jsonschema is loaded."""
    block = "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules
    if block:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    # nbconvert is needed only once the notebook has run: imported meanwhile, while this
    # process waits for the kernel
    exporter = threading.Thread(target=importlib.import_module, args=("nbconvert",),
                                daemon=True)
    try:
        import papermill  # noqa: F401
        exporter.start()
        yield
    finally:
        if exporter.is_alive() or exporter.ident is not None:
            exporter.join()
        if block:
            del sys.modules["rfc3987_syntax"]


@contextlib.contextmanager
def _stderr_into(path: Path) -> Iterator[None]:
    """Send file descriptor 2 into ``path`` for the block: the notebook's kernel inherits it
    and logs its start and shutdown there (transport warnings, the interrupt at shutdown),
    which are no business of the report's reader."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "wb") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _execute(params: dict[str, Any], workdir: Path) -> Any:
    """Run the template with ``params``; return the executed notebook (nbformat)."""
    import nbformat
    import papermill

    out = workdir / "report.ipynb"
    try:
        papermill.execute_notebook(str(TEMPLATE), str(out), parameters=params,
                                   kernel_name=_KERNEL, progress_bar=False, log_output=False,
                                   cwd=str(workdir))
    except papermill.PapermillExecutionError as exc:
        raise _notebook_error(exc.ename, exc.evalue, exc.exec_count) from None
    return nbformat.read(str(out), as_version=4)


_STYLE = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.8em; border-bottom: 2px solid #4c78a8; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f5f8; }
td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; height: auto; display: block; margin: .6em 0; }
pre { background: #f7f7f7; padding: .5em; overflow-x: auto; }
.jp-OutputArea-output { margin: 0; }
"""


def _notebook_error(ename: str, evalue: str, cell: int) -> ToolkitError:
    """The error a cell of the report raised: a ToolkitError (the join's, the diff's) as it
    was raised, of its own class; anything else named with its cell."""
    from toolkit import errors

    cls = getattr(errors, ename, None)
    if isinstance(cls, type) and issubclass(cls, ToolkitError):
        what, _, fix = evalue.rpartition(" Fix: ")
        return cls(what or evalue, fix=fix or "check the report's inputs")
    return ToolkitError(f"the report notebook failed in cell {cell}: {ename}: {evalue}",
                        where=str(TEMPLATE),
                        fix=f"run {TEMPLATE.name}'s cells in a notebook with the same inputs "
                            "to see the traceback; report it if the inputs are right")


def _html(nb: Any, title: str) -> bytes:
    """The notebook as one HTML page: outputs only (no code cells, no prompts), figures as
    base64 PNG, the page's own style, no script (it opens offline, without a server)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="basic", exclude_input=True,
                            exclude_input_prompt=True, exclude_output_prompt=True,
                            anchor_link_text="")
    # nbconvert gives every figure without alt text a generic one and logs a warning for it;
    # each figure of the report follows a heading that says what it shows, so the warning is
    # only noise on the user's terminal (and in a notebook that writes a report)
    level = exporter.log.level
    exporter.log.setLevel(logging.ERROR)
    try:
        body, _ = exporter.from_notebook_node(nb)
    finally:
        exporter.log.setLevel(level)
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n").encode()


def write_report(out: str | os.PathLike[str], *, trace: Any = None, model: Any = None,
                 trace_b: Any = None, model_b: Any = None, attribution: Any = None,
                 attribution_b: Any = None, numerics: Any = None, policy: str = "macs",
                 skip_runs: int = 0, match: str = "model",
                 labels: Sequence[str] = ("a", "b"), title: str = "Profiling report",
                 top: int = 15, format: str | None = None) -> Path:
    """Write the profiling report of one trace (and optionally a second one to diff against)
    to ``out``; return its path. See :func:`toolkit.report` for the arguments.

    Raises:
        ToolkitError: the join's own error when a trace does not join its model; the diff's
            when the two traces measured different models; an unknown format; a numerics
            object without ``by_layer()``. Nothing is written then.
    """
    from toolkit.trace.views.diff import LayerDiff
    from toolkit.util.atomic import atomic_write
    from toolkit.viz.report.sections import generic_by_layer

    path = Path(out)
    fmt = _format_of(path, format)
    if path.is_dir():
        raise ToolkitError("the report's output names a folder, a file is expected",
                           where=str(path), fix=f"give a file name, e.g. {path / 'report.html'}")
    # paths are joined by the notebook itself (so that its copy can be run again); objects
    # are joined here and handed over in a pickle
    handed: dict[str, Any] = {}
    att, att_b = attribution, attribution_b
    if att is None and not _is_path(trace, model):
        att = _join(trace, model, policy, skip_runs, "the first")
    if att is None and (trace is None or model is None):
        _join(trace, model, policy, skip_runs, "the first")  # raises: says what is missing
    model_b = model_b if model_b is not None else model
    if att_b is None and trace_b is not None and not _is_path(trace_b, model_b):
        att_b = _join(trace_b, model_b, policy, skip_runs, "the second")
    if att is not None and att_b is not None:
        LayerDiff(att, att_b, match=match, labels=(str(labels[0]), str(labels[1])))
    comparison = numerics
    if isinstance(numerics, (str, os.PathLike)):
        import pandas as pd

        comparison = pd.read_csv(numerics)
    if comparison is not None:  # its table, so that the kernel needs not its class
        comparison = generic_by_layer(comparison, None)
    for key, value in (("a", att), ("b", att_b), ("numerics", comparison)):
        if value is not None:
            handed[key] = value
    with tempfile.TemporaryDirectory(prefix="toolkit-report-") as tmp:
        work = Path(tmp)
        pickled = work / "inputs.pickle"
        if handed:
            with open(pickled, "wb") as f:
                _Pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(handed)
        params = {
            "title": str(title), "policy": policy, "skip_runs": int(skip_runs),
            "labels": [str(labels[0]), str(labels[1])], "match": match, "top": int(top),
            "inputs_pickle": str(pickled) if handed else None,
            "trace": _path_or_none(trace), "model": _path_or_none(model),
            "trace_b": _path_or_none(trace_b), "model_b": _path_or_none(model_b),
            "numerics": _path_or_none(numerics),
        }
        with _without_iri_grammar(), _stderr_into(work / "kernel.log"):
            nb = _execute(params, work)
    if fmt == "html":
        data = _html(nb, str(title))
    else:
        import nbformat

        data = nbformat.writes(nb).encode("utf-8")
    return atomic_write(path, data)


class _Pickler(pickle.Pickler):
    """Pickles a memory-mapped model file's buffer as its bytes (a model loaded from a
    ``.tflite`` keeps an ``mmap``, which pickle cannot take)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, mmap.mmap):
            return bytes, (obj[:],)
        return NotImplemented


def _is_path(*values: Any) -> bool:
    return all(isinstance(v, (str, os.PathLike)) for v in values)


def _path_or_none(value: Any) -> str | None:
    """A path argument as an absolute path string for the notebook (None for objects)."""
    if isinstance(value, (str, os.PathLike)):
        return str(Path(value).resolve())
    return None
