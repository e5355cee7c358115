"""Run the installed Vela compiler and read what it wrote into one :class:`VelaResult`.

    res = run_vela("model_int8.tflite", "out/vela", accelerator="ethos-u55-128")
    vela = read_vela("out/vela", model="model_int8.tflite")
    vela.attribution().by_layer()

Vela writes into its ``--output-dir``, for an input ``<stem>.tflite``: ``<stem>_vela.tflite``,
``<stem>_debug.xml`` (``--enable-debug-db``), ``<stem>_per-layer.csv``
(``--verbose-performance``) and ``<stem>_summary_<system config>.csv``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from toolkit.errors import VelaError
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.vela_csv import read_per_layer_csv, read_summary_csv
from toolkit.formats.vela_db import VelaDebugDB, read_debug_db
from toolkit.ir import Model
from toolkit.layer_names import name_layers
from toolkit.util.files import check_folder, read_bytes
from toolkit.vela.estimates import (
    ScheduledEstimates,
    VelaAttribution,
    estimate_attribution,
    read_estimates,
)
from toolkit.vela.provenance import VelaProvenance

if TYPE_CHECKING:
    from toolkit.trace import Attribution

__all__ = ["VelaResult", "read_vela", "run_vela", "vela_command"]

_TAIL = 2000


def vela_command() -> list[str]:
    """Return the command that starts the installed Vela (without arguments).

    ``[sys.executable, "-m", "ethosu.vela"]`` when the ``ethosu.vela`` module is importable,
    else the ``vela`` console script beside ``sys.executable`` or on ``PATH``.

    Raises:
        VelaError: Vela is not installed.
    """
    if importlib.util.find_spec("ethosu") is not None and \
            importlib.util.find_spec("ethosu.vela") is not None:
        return [sys.executable, "-m", "ethosu.vela"]
    beside = Path(sys.executable).with_name("vela")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("vela")
    if found:
        return [found]
    raise VelaError("Vela is not installed (no ethosu.vela module, no 'vela' command)",
                    fix="pip install ethos-u-vela (the toolkit's dev extra installs it)")


def run_vela(model_path: str | os.PathLike[str], outdir: str | os.PathLike[str],
             accelerator: str = "ethos-u55-128", legacy: bool = False,
             extra_args: Sequence[str] = (), *, timeout: float = 600.0) -> Path:
    """Compile ``model_path`` with Vela, with the debug database and per-layer estimates.

    Runs ``vela --accelerator-config ACCELERATOR --enable-debug-db --verbose-performance
    --output-dir OUTDIR [--debug-force-legacy-core] EXTRA_ARGS MODEL``.

    Args:
        model_path: the ``.tflite`` model.
        outdir: Vela's output folder (created when missing).
        accelerator: Vela's ``--accelerator-config`` (``ethos-u55-128``, ``ethos-u85-256``...).
        legacy: use Vela's legacy core (``--debug-force-legacy-core``; Ethos-U55/U65 only).
        extra_args: more Vela arguments (e.g. ``["--system-config", "..."]``).
        timeout: seconds before Vela is stopped.

    Returns:
        ``outdir`` as a Path, holding ``<stem>_debug.xml`` and the other outputs.

    Raises:
        VelaError: Vela is missing, fails (the message ends with the tail of its output), times
            out, or writes no debug database.
    """
    model = Path(model_path)
    out = Path(outdir)
    if not model.is_file():
        raise VelaError("the model file does not exist", where=str(model),
                        fix="pass the path of a .tflite file")
    out.mkdir(parents=True, exist_ok=True)
    cmd = [*vela_command(), "--accelerator-config", accelerator, "--enable-debug-db",
           "--verbose-performance", "--output-dir", str(out)]
    if legacy:
        cmd.append("--debug-force-legacy-core")
    cmd += [*extra_args, str(model)]
    try:
        proc = _run_with_progress(cmd, timeout, f"vela {model.name}")
    except subprocess.TimeoutExpired:
        raise VelaError(f"vela did not finish within {timeout:g} s", where=str(model),
                        fix="raise the timeout or try a smaller model") from None
    except OSError as exc:
        raise VelaError(f"cannot start vela ({exc})", where=cmd[0],
                        fix="reinstall ethos-u-vela") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip())[-_TAIL:]
        raise VelaError(f"vela exited with status {proc.returncode}:\n{tail}\n", where=str(model),
                        fix="read vela's message above; check the model and the arguments "
                        f"({' '.join(cmd[len(vela_command()):])})")
    debug = out / f"{model.stem}_debug.xml"
    if not debug.is_file():
        raise VelaError(f"vela wrote no {debug.name}", where=str(out),
                        fix="check that this Vela supports --enable-debug-db")
    return out


def _run_with_progress(cmd: list[str], timeout: float, desc: str
                       ) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` capturing its output, with an elapsed-seconds bar while it runs (see
    :mod:`toolkit.progress`); raises ``subprocess.TimeoutExpired`` after ``timeout`` s (the
    process is killed) and ``OSError`` when it cannot start."""
    import time

    from toolkit.progress import progress

    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        start = time.monotonic()

        def ticks() -> Iterator[tuple[str, str]]:
            while True:
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    proc.kill()
                    proc.communicate()
                    raise subprocess.TimeoutExpired(cmd, timeout)
                try:
                    yield proc.communicate(timeout=min(0.5, left))
                    return
                except subprocess.TimeoutExpired:
                    yield ("", "")

        out = err = ""
        try:
            for o, e in progress(ticks(), desc=desc, unit="tick",
                                 bar_format="{desc}: {elapsed} elapsed"):
                out, err = out + o, err + e
        except BaseException:
            proc.kill()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@dataclass
class VelaResult:
    """What Vela wrote for one model, joined with the model.

    Attributes:
        outdir: Vela's output folder.
        model_path: the input model file (None when a loaded model was given).
        model: the input model.
        db: the debug database.
        per_layer: the per-layer CSV (:func:`toolkit.formats.vela_csv.read_per_layer_csv`);
            None when absent; an empty frame when Vela wrote an empty file (no NPU op).
        summary: the summary CSV as a dict (:func:`read_summary_csv`); None when absent.
        estimates: Vela's estimates per scheduled op (fixed point: see
            :mod:`toolkit.vela.estimates`).
        provenance: the provenance tables (:class:`VelaProvenance`).
    """

    outdir: Path
    model_path: Path | None
    model: Model
    db: VelaDebugDB
    per_layer: pd.DataFrame | None
    summary: dict[str, Any] | None
    estimates: ScheduledEstimates = field(repr=False)
    provenance: VelaProvenance = field(repr=False)
    _attributions: dict[tuple[str, str], VelaAttribution] = field(
        default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        n_sched = len(self.estimates.frame())
        return (f"<VelaResult {self.outdir} ({self.core} core): {n_sched} scheduled op(s) for "
                f"{len(self.model.graph)} source ops of "
                f"{self.model_path.name if self.model_path else 'a loaded model'}>")

    def _repr_html_(self) -> str:
        """Rich view: summary line (Vela's summary figures when present), layers by
        estimated cycles (largest first) with their share, and a bar chart of the shares."""
        from toolkit.reprs import html_bars, html_table, html_view

        att = self.attribution()
        layers = att.by_layer()
        s = self.summary or {}
        known = []
        if "accelerator_configuration" in s:
            known.append(str(s["accelerator_configuration"]))
        if isinstance(s.get("inference_time"), (int, float)):
            known.append(f"estimated inference time {1e3 * float(s['inference_time']):.3f} ms")
        if isinstance(s.get("cycles_total"), (int, float)):
            known.append(f"{float(s['cycles_total']):,.0f} cycles in total")
        summary = (f"{self.outdir} ({self.core} core), {len(self.estimates.frame())} "
                   f"scheduled op(s), {len(layers)} original layers"
                   + (", " + ", ".join(known) if known else ""))
        by = att.metric if att.metric in layers.columns else None
        top = (layers.sort_values(by, ascending=False, kind="stable").head(8) if by
               else layers.head(0))
        figure = (html_bars(top["layer"].astype(str).tolist(), (100 * top["share"]).tolist(),
                            unit=" %", title=f"share of Vela's {att.metric}")
                  if "share" in top.columns else "")
        return html_view("VelaResult", summary, [
            (f"Vela's estimates per original layer ({att.metric})",
             html_table(layers, by, 10)),
        ], figure=figure)

    @property
    def core(self) -> str:
        """``"default"`` or ``"legacy"``: the Vela core that wrote the output."""
        return self.db.core

    def scheduled(self) -> pd.DataFrame:
        """Return Vela's estimates per scheduled op, in execution order.

        Columns: ``scheduled_id``, ``optimised_id``, ``group_id``, ``vela_source_id``
        (int64), ``operator``, ``name``, ``backend`` (str), ``source_id`` (int64, operator
        index of the op's own source op; -1 unknown), then the metrics: ``op_cycles``,
        ``npu_cycles`` and each ``<memory>_ac`` (float64 cycles), ``mac_count`` (int64).
        """
        ids = self.provenance.scheduled()[["scheduled_id", "source_id"]]
        frame = self.estimates.frame()
        frame.insert(7, "source_id", ids["source_id"].to_numpy())
        return frame

    def attribution(self, metric: str = "op_cycles", policy: str = "macs") -> VelaAttribution:
        """Return Vela's estimates attributed to the source ops and layers of the model.

        Args:
            metric: the figure ``pct`` columns refer to (``op_cycles``, ``npu_cycles``,
                ``mac_count`` or a ``<memory>_ac``); every figure is in every frame.
            policy: how a group's figures are split over its source ops: ``macs``,
                ``bytes``, ``equal`` (trace-join's) or ``vela`` (no split; Vela's own rows).

        Returns:
            a :class:`VelaAttribution`: ``by_source_op()`` (every op of the model, NPU or
            CPU), ``by_layer()``, ``by_op()``, ``unattributed()``, ``events()``,
            ``totals()``, ``check()``.
        """
        key = (metric, policy)
        if key not in self._attributions:
            self._attributions[key] = estimate_attribution(self.estimates, self.provenance,
                                                           metric=metric, policy=policy)
        return self._attributions[key]

    def npu_trace_join(self, trace: pd.DataFrame | str | os.PathLike[str], *,
                       policy: str = "macs", point: str = "at", overlaps: str = "leaves"
                       ) -> Attribution:
        """Join an NPU trace whose events carry ``args.qread`` with this output.

        Returns:
            trace-join's :class:`~toolkit.trace.Attribution` (nanoseconds), as
            :func:`toolkit.vela.npu_trace.join_npu_trace` gives it.
        """
        from toolkit.vela.npu_trace import join_npu_trace

        return join_npu_trace(trace, self.provenance, policy=policy, point=point,
                              overlaps=overlaps)


def _read_optional_csv(path: Path) -> pd.DataFrame | None:
    """Return the per-layer CSV at ``path``, an empty frame for an empty file, None if absent."""
    if not path.is_file():
        return None
    if not read_bytes(path, what="Vela CSV", error=VelaError).strip():
        return pd.DataFrame()
    return read_per_layer_csv(path)


def read_vela(outdir: str | os.PathLike[str], model: str | os.PathLike[str] | Model | None = None,
              *, stem: str | None = None) -> VelaResult:
    """Read Vela's output folder for one model.

    Args:
        outdir: Vela's ``--output-dir``.
        model: the model given to Vela: a path, or a loaded :class:`toolkit.ir.Model` (then
            pass ``stem``). When None, the legacy core's ``<debug source=...>`` path is used.
        stem: the file stem of the outputs (default: the model file's stem).

    Returns:
        a :class:`VelaResult`.

    Raises:
        VelaError: no ``<stem>_debug.xml`` in ``outdir`` (the message lists what is there), a
            legacy-core output without its per-layer CSV, a database that does not fit the
            model, or unreadable files.
    """
    out = Path(check_folder(outdir, what="Vela output folder", error=VelaError,
                            fix="pass the folder given to vela --output-dir"))
    model_path: Path | None = None
    if isinstance(model, Model):
        loaded = model
        if stem is None:
            if not model.path:
                raise VelaError("a loaded model needs stem= to find Vela's files",
                                fix="pass stem='<model file stem>' or the model's path")
            stem = Path(model.path).stem
    else:
        if model is None:
            debugs = sorted(out.glob("*_debug.xml"))
            if len(debugs) != 1:
                raise VelaError(f"found {len(debugs)} debug databases and no model",
                                where=str(out), fix="pass model=PATH of the model given to vela")
            db0 = read_debug_db(debugs[0])
            if not db0.source_file or not Path(db0.source_file).is_file():
                raise VelaError("the debug database does not name a readable input model",
                                where=str(debugs[0]), fix="pass model=PATH")
            model = db0.source_file
        model_path = Path(model)
        stem = stem or model_path.stem
        loaded = name_layers(load(model_path))  # layers named as tk.load names them
    debug = out / f"{stem}_debug.xml"
    if not debug.is_file():
        present = sorted(p.name for p in out.iterdir())
        raise VelaError(f"no {debug.name} in Vela's output folder (it holds: "
                        f"{', '.join(present) if present else 'nothing'})", where=str(out),
                        fix="run vela with --enable-debug-db --verbose-performance on "
                        f"{stem}.tflite into this folder (or pass stem=)")
    db = read_debug_db(debug)
    per_layer = _read_optional_csv(out / f"{stem}_per-layer.csv")
    if db.core == "legacy" and per_layer is None:
        raise VelaError(f"no {stem}_per-layer.csv: the legacy core's estimates are only there",
                        where=str(out), fix="re-run vela with --verbose-performance")
    summaries = sorted(out.glob(f"{stem}_summary_*.csv"))
    summary = read_summary_csv(summaries[0]) if len(summaries) == 1 else None
    estimates = read_estimates(db, per_layer)
    provenance = VelaProvenance(db, loaded, estimates)
    return VelaResult(out, model_path, loaded, db, per_layer, summary, estimates, provenance)
