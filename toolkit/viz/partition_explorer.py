"""Interactive partition experiments: choose backends and rules, see parts, cuts and time.

:func:`experiment` is the plain-function path: it partitions a model under a rule set,
verifies the chained parts against the source model, runs them traced and joins the trace
back to the original layers. :func:`explorer` wraps the same function in ipywidgets controls
(backends, ``comply``, one backend choice per op type or per op name) so the experiment can be
repeated by clicking; without a browser, call :func:`experiment` directly.

Figures are built as plain :class:`matplotlib.figure.Figure` objects, never through pyplot, and
the explorer shows them as PNG bytes in an ``Image`` widget: no pyplot hook can draw a figure
while it is still being built, and nothing depends on an ``Output`` widget capturing in time.
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from toolkit.formats.part_file import PartSpec, format_part
from toolkit.ir import Model, Op
from toolkit.viz.graph import draw_graph, palette
from toolkit.viz.plots import plot_layer_bars

__all__ = ["experiment", "PartitionExperiment", "explorer", "cut_tensors", "figure_png"]


@dataclass
class PartitionExperiment:
    """The outcome of one partition experiment.

    ``result`` is the ``PartitionResult``; ``verified`` says whether the chained parts give
    outputs identical to the source model (reference runtime), ``max_abs_diff`` by how much
    they differ; ``attribution`` is the trace-join of a traced chained run (None when
    ``run=False``).
    """

    spec: PartSpec
    model: Model
    result: Any
    verified: bool
    max_abs_diff: float
    attribution: Any = None
    backend_colors: dict[str, Any] = field(default_factory=dict)

    @property
    def part_file_text(self) -> str:
        """The ``.part`` file of this experiment."""
        return format_part(self.spec)

    def export_part(self, path: str | Path) -> Path:
        """Write the ``.part`` file and return its path."""
        p = Path(path)
        p.write_text(self.part_file_text)
        return p

    def parts(self) -> pd.DataFrame:
        """Per part: ``part``, ``backend``, ``op_count``, ``op_types``, ``inputs``,
        ``outputs``, ``cut_in_bytes``, ``cut_out_bytes``."""
        return self.result.parts_table()[["part", "backend", "op_count", "op_types", "inputs",
                                          "outputs", "cut_in_bytes", "cut_out_bytes"]]

    def cuts(self) -> pd.DataFrame:
        """The tensors crossing a cut; see :func:`cut_tensors`."""
        return cut_tensors(self.result)

    def by_backend(self) -> pd.DataFrame:
        """Time per backend of the traced run (empty when not run)."""
        return self.attribution.by_backend() if self.attribution is not None else pd.DataFrame()

    def by_layer(self) -> pd.DataFrame:
        """Time per original layer of the traced run (empty when not run)."""
        return self.attribution.by_layer() if self.attribution is not None else pd.DataFrame()

    def figure(self) -> Figure:
        """Graph coloured by backend, bytes crossing each cut (when something is cut: no empty
        axes), and time per backend (when the experiment ran).

        A plain Figure (not registered with pyplot): a notebook shows it when it is a cell's
        value; :func:`figure_png` renders it."""
        cuts = self.cuts()
        side = [k for k, present in (("cuts", len(cuts) > 0),
                                      ("time", self.attribution is not None)) if present]
        fig = Figure(figsize=(8, 5.6) if side else (5.5, 5.6), layout="constrained")
        gs = fig.add_gridspec(max(len(side), 1), 2 if side else 1,
                              width_ratios=[1.1, 1] if side else [1])
        ax_g = fig.add_subplot(gs[:, 0])
        backend_of = {op: row for op, row in _backend_by_op(self.result, self.model).items()}
        one = "" if len(cuts) else "; nothing is cut (one part)"
        draw_graph(self.model, color_by=lambda op: backend_of.get(op, "?"), ax=ax_g,
                   colors=self.backend_colors, legend_title="backend",
                   title=f"{len(self.model.graph.ops)} ops by backend, [part]{one}",
                   label=lambda op: f"{op.kind} [{_part_of(self.result, self.model, op)}]")
        if "cuts" in side:
            ax_c = fig.add_subplot(gs[side.index("cuts"), 1])
            labels = [f"{r.tensor} ({r.from_part}→{r.to_part})" for r in cuts.itertuples()]
            ax_c.barh(range(len(cuts)), cuts["bytes"] / 1024,
                      color=[self.backend_colors.get(b, "0.6") for b in cuts["from_backend"]])
            ax_c.set_yticks(range(len(cuts)), labels, fontsize=9)
            ax_c.invert_yaxis()
            ax_c.set_xlabel("KiB crossing the cut (per inference)")
            ax_c.set_ylabel("tensor (from part → to part)")
            ax_c.set_title(f"{len(cuts)} tensor(s) cross a cut; outputs "
                           f"{'identical' if self.verified else 'DIFFER'}")
        if "time" in side:
            ax_t = fig.add_subplot(gs[side.index("time"), 1])
            bb = self.by_backend()
            plot_layer_bars(bb, label="backend", ax=ax_t, per_run=True,
                            colors=self.backend_colors, title="time per backend (reference run)")
        return fig


def figure_png(fig: Figure) -> bytes:
    """Render a figure to PNG bytes as a notebook's inline backend does (tight bounding box,
    the figure's own dpi)."""
    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def _backend_by_op(result: Any, model: Model) -> dict[Op, str]:
    ops = result.ops_table()
    by_index = dict(zip(ops["op_index"], ops["backend"]))
    return {op: by_index[i] for i, op in enumerate(model.graph.ops) if i in by_index}


def _part_of(result: Any, model: Model, op: Op) -> str:
    ops = result.ops_table()
    idx = model.graph.ops.index(op)
    return str(int(ops.loc[ops["op_index"] == idx, "part"].iloc[0]))


def cut_tensors(result: Any) -> pd.DataFrame:
    """One row per (tensor, producing part, consuming part) crossing a cut.

    Columns: ``tensor``, ``from_part``, ``to_part`` (int64), ``from_backend``,
    ``to_backend``, ``bytes`` (int64, per inference).
    """
    parts = result.parts
    produced = {name: p for p in parts for name in p.outputs}
    g = result.source.graph
    rows = []
    for p in parts:
        for name in p.inputs:
            src = produced.get(name)
            if src is None:
                continue
            rows.append((name, src.index, p.index, src.backend, p.backend,
                         g.tensor(name).nbytes))
    return pd.DataFrame(rows, columns=["tensor", "from_part", "to_part", "from_backend",
                                       "to_backend", "bytes"]).astype(
        {"from_part": np.int64, "to_part": np.int64, "bytes": np.int64})


def experiment(model: Model, *, backends: list[str], default: str, comply: str = "opcode",
               opcode: dict[str, str] | None = None, opname: dict[str, str] | None = None,
               run: bool = True, repeat: int = 3, seed: int = 0) -> PartitionExperiment:
    """Partition ``model`` under the given rules and return a :class:`PartitionExperiment`.

    The chained parts are run with the reference runtime on random inputs (``seed``) and
    compared with the source model; with ``run=True`` the chain is also run ``repeat`` times
    traced and joined back to the original layers.
    """
    from toolkit.partitioner import partition
    from toolkit.runtime.chain import run_connection
    from toolkit.runtime.interpreter import Interpreter, run_model
    from toolkit.trace import trace_join

    spec = PartSpec(backends=list(backends), default=default, comply=comply,
                    opcode=dict(opcode or {}), opname=dict(opname or {})).validate()
    result = partition(model, spec)
    inputs = Interpreter(model).random_inputs(seed)
    ref = run_model(model, inputs).outputs
    chained = run_connection(result, inputs).outputs
    diffs = [float(np.max(np.abs(chained[k].astype(np.float64) - ref[k].astype(np.float64))))
             if ref[k].size else 0.0 for k in ref]
    verified = all(np.array_equal(chained[k], ref[k]) for k in ref)
    att = None
    if run:
        _, trace = run_connection(result, inputs, trace=True, repeat=repeat)
        att = trace_join(trace, result)
        att.check()
    colors = dict(zip(backends, palette(len(backends))))
    return PartitionExperiment(spec, model, result, verified, max(diffs, default=0.0), att,
                               colors)


def explorer(model: Model, *, backends: tuple[str, ...] = ("cpu", "npu"),
             default: str | None = None, repeat: int = 3,
             export_dir: str | Path | None = None) -> Any:
    """Return an ipywidgets box that re-runs :func:`experiment` whenever a control changes.

    Laid out side by side to fit a 1280x900 window: the controls on the left (the backend
    list, applied on Enter or when the field loses focus; the default backend; ``comply``,
    which also decides which rules are shown and live: one dropdown per op type for
    ``opcode``, per op name for ``opname``; the export of the ``.part`` file), the status
    line and the figure on the right; the parts table below both. Each change runs the
    experiment once; while it runs the status line says so (with the run number) and the
    controls are disabled. ``.part`` files are written into ``export_dir`` (default: a new
    scratch folder under the system's temporary folder, never the working folder).

    The box's ``.experiment`` holds the latest result, ``.refresh()`` runs it again,
    ``.controls`` names the controls (``backends``, ``default``, ``comply``, ``opcode`` and
    ``opname``: dicts of dropdowns by op type and op name, ``export_name``, ``export``), and
    ``.status``, ``.figure``, ``.table`` the outputs.
    """
    import tempfile

    import ipywidgets as w

    ops = model.graph.ops
    types = sorted({op.kind for op in ops})
    names = [op.name for op in ops]
    scratch = Path(export_dir) if export_dir is not None else \
        Path(tempfile.mkdtemp(prefix="toolkit-parts-"))
    narrow = {"description_width": "initial"}
    # continuous_update=False: the experiment runs on Enter (or leaving the field), not per key
    backends_box = w.Text(value=",".join(backends), description="backends",
                          continuous_update=False, style=narrow,
                          layout=w.Layout(width="320px"),
                          placeholder="comma-separated; press Enter to apply")
    default_dd = w.Dropdown(options=list(backends), value=default or backends[0],
                            description="default", style=narrow,
                            layout=w.Layout(width="320px"))
    comply_dd = w.ToggleButtons(options=["opcode", "opname"], value="opcode",
                                description="comply", style=narrow,
                                tooltips=["rules by op type: [OPCODE]",
                                          "rules by op name: [OPNAME]"])
    type_dd = {t: w.Dropdown(options=["(default)", *backends], value="(default)",
                             description=t, style={"description_width": "150px"},
                             layout=w.Layout(width="300px")) for t in types}
    name_dd = {n: w.Dropdown(options=["(default)", *backends], value="(default)",
                             description=n if len(n) <= 24 else "…" + n[-23:],
                             description_allow_html=False,
                             style={"description_width": "180px"},
                             layout=w.Layout(width="300px")) for n in names}
    for n, dd in name_dd.items():
        dd.tooltip = n
    rules_title = w.HTML()
    rules = w.VBox(layout=w.Layout(max_height="420px", overflow="auto", width="320px"))
    table = w.HTML(layout=w.Layout(max_width="100%", overflow="auto"))
    picture = w.Image(format="png", layout=w.Layout(max_width="100%", height="auto"))
    export_path = w.Text(value="experiment.part", description="file", style=narrow,
                         layout=w.Layout(width="200px"))
    export_btn = w.Button(description="export .part", layout=w.Layout(width="110px"))
    status = w.HTML()
    box = w.VBox()
    controls: list[Any] = [backends_box, default_dd, comply_dd, *type_dd.values(),
                           *name_dd.values()]
    state = {"runs": 0, "syncing": False}
    lock = threading.Lock()

    def current_backends() -> list[str]:
        return [b.strip() for b in backends_box.value.split(",") if b.strip()]

    def show_rules() -> None:
        """Show the rules ``comply`` makes live; the others are kept but not shown."""
        opcode = comply_dd.value == "opcode"
        rules.children = list((type_dd if opcode else name_dd).values())
        rules_title.value = ("<b>[OPCODE]</b> a backend per op type" if opcode else
                             "<b>[OPNAME]</b> a backend per op (by name)")

    def sync_options(bs: list[str]) -> None:
        """Give every dropdown the current backends without re-running per dropdown."""
        state["syncing"] = True
        try:
            for dd in [default_dd, *type_dd.values(), *name_dd.values()]:
                keep = dd.value
                opts = bs if dd is default_dd else ["(default)", *bs]
                if list(dd.options) != opts:
                    dd.options = opts
                dd.value = keep if keep in opts else opts[0]
        finally:
            state["syncing"] = False

    def refresh(*_: Any) -> None:
        if state["syncing"]:
            return
        with lock:
            show_rules()
            bs = current_backends()
            if not bs:
                status.value = ("<b>no backend</b>: type at least one backend name, "
                                "comma-separated, then press Enter")
                return
            sync_options(bs)
            live = type_dd if comply_dd.value == "opcode" else name_dd
            chosen = {k: dd.value for k, dd in live.items() if dd.value != "(default)"}
            state["runs"] += 1
            run_no = state["runs"]
            status.value = f"<i>⏳ running experiment (run {run_no})…</i>"
            for c in controls:
                c.disabled = True
            try:
                exp = experiment(model, backends=bs, default=default_dd.value,
                                 comply=comply_dd.value,
                                 opcode=chosen if comply_dd.value == "opcode" else None,
                                 opname=chosen if comply_dd.value == "opname" else None,
                                 repeat=repeat)
                png = figure_png(exp.figure())
            except Exception as e:  # shown to the user, not raised inside a callback
                status.value = f"<b>run {run_no}: error</b>: {html.escape(str(e))}"
                return
            finally:
                for c in controls:
                    c.disabled = False
            box.experiment = exp
            table.value = exp.parts().to_html(index=False)
            picture.value = png
            status.value = (f"run {run_no}: <b>{len(exp.result.parts)} parts</b>, outputs "
                            f"{'identical to the source model' if exp.verified else 'differ'}")

    def export(_: Any) -> None:
        exp = getattr(box, "experiment", None)
        if exp is not None:
            name = Path(export_path.value or "experiment.part").name
            p = exp.export_part(scratch / name)
            status.value = f"wrote {html.escape(str(p))}"

    for c in controls:
        c.observe(refresh, names="value")
    export_btn.on_click(export)
    left = w.VBox([backends_box, default_dd, comply_dd, rules_title, rules,
                   w.HBox([export_path, export_btn])],
                  layout=w.Layout(width="330px", flex="0 0 330px"))
    right = w.VBox([status, picture], layout=w.Layout(flex="1 1 auto", min_width="0"))
    box.children = [w.HBox([left, right], layout=w.Layout(width="100%",
                                                          align_items="flex-start")), table]
    box.controls = {"backends": backends_box, "default": default_dd, "comply": comply_dd,
                    "opcode": type_dd, "opname": name_dd, "export_name": export_path,
                    "export": export_btn}
    box.status, box.figure, box.table = status, picture, table
    box.export_dir = scratch
    box.refresh = refresh
    refresh()
    return box
