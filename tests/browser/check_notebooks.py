"""Run every notebook in JupyterLab in headless Chromium, as a person would, and check it.

``make browser-check`` runs this script. It

1. makes sure Debian's ``chromium`` is installed (``apt-get install chromium`` when running as
   root, a clear message otherwise) and that Playwright for Python is importable (the ``dev``
   extra); Playwright drives the system browser, it never downloads one;
2. executes each notebook off-screen with nbclient, logging every figure the kernel renders
   (pixel size, axes count and what each axes holds, see ``figure_log.py``): the reference;
3. starts JupyterLab on a copy of ``notebooks/`` on a loopback port with a token, opens each
   notebook, runs all cells from the Run menu and waits until every cell has run;
4. fails on a traceback in any output, on a figure missing or differing from the reference in
   pixel size, axes count or per-axes structure (artists, title, labels, legend: an empty or
   half-drawn figure), and, in the partition explorer, on
   a control change that does not re-run the experiment exactly once or shows an incomplete
   figure (each compared with the same experiment's figure rendered off-screen);
5. in a 1280x900 window, fails when the explorer's controls and its figure are not visible
   together, or when any table of a notebook scrolls sideways (wider than its output area).

Every wait is on a condition (a cell's state, the kernel idle, an element's box), with a
generous time limit, never a fixed sleep: a slow machine takes longer, it does not fail.
6. writes ``toolkit report`` of the sample model (cnn.tflite, compiled with and without the
   default passes, the second trace diffed against the first) and opens the HTML file in
   Chromium with every network request refused: no console error, every figure decoded, the
   top layer's name visible.

Screenshots of every figure and of the explorer after each interaction go to ``out/browser/``.
Exit status: 0 when every check holds, 1 when one fails, 2 when the set-up is missing.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
EXPLORER_NOTEBOOK = "03_partition_experiments.ipynb"
VIEWPORT = {"width": 1280, "height": 900}
"""The window every notebook is checked in: a laptop's, where controls and figure must fit."""
SIZE_TOLERANCE = 0.03
"""Pixel sizes may differ by 3 %: a tight bounding box follows tick labels that measured
data change (a missing or empty figure is off by far more)."""


def _tolerance(px: int) -> float:
    return max(2.0, SIZE_TOLERANCE * px)


class SetupError(Exception):
    """Something the check needs is missing; the message says how to get it."""


# --------------------------------------------------------------------------- set-up

def ensure_chromium(path: str = CHROMIUM) -> str:
    """Return the path of Debian's chromium, installing it with apt-get when running as root."""
    if Path(path).exists():
        return path
    if os.geteuid() != 0:
        raise SetupError(f"{path} is missing. Fix: run `sudo apt-get install chromium` "
                         "(Debian's package), then `make browser-check` again")
    print("browser-check: installing Debian's chromium with apt-get (once; apt shows its "
          "progress)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "-q", "update"], ["apt-get", "-q", "install", "-y",
                                              "--no-install-recommends", "chromium"]):
        print(f"browser-check: {' '.join(cmd)}", flush=True)
        r = subprocess.run(cmd, env=env, stdout=sys.stdout, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise SetupError(f"`{' '.join(cmd)}` failed:\n{r.stderr[-2000:]}\nFix: install "
                             "Debian's chromium package by hand")
    if not Path(path).exists():
        raise SetupError(f"apt-get installed chromium but {path} is missing")
    return path


def ensure_playwright() -> None:
    """Raise SetupError unless Playwright for Python can be imported."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as e:
        raise SetupError("Playwright for Python is missing. Fix: pip install -e '.[dev]' "
                         "(it drives the system chromium; no browser download is needed)") from e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Workspace:
    """A scratch copy of the notebooks plus the kernel set-up that logs rendered figures."""

    root: Path
    notebooks: Path
    env: dict[str, str]
    log: Path

    def read_log(self) -> list[dict[str, Any]]:
        """Every logged figure so far, in render order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def make_workspace(root: Path) -> Workspace:
    """Copy ``notebooks/`` (outputs are never saved into the repository) and set up IPython."""
    nbs = root / "notebooks"
    shutil.copytree(ROOT / "notebooks", nbs, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "sample_models").symlink_to(ROOT / "sample_models")
    ipy = root / "ipython"
    (ipy / "profile_default" / "startup").mkdir(parents=True)
    shutil.copy(HERE / "figure_log.py", ipy / "profile_default" / "startup" / "00_figure_log.py")
    settings = root / "lab-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # every cell in the DOM, so outputs below the fold can be read
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    apputils = root / "lab-settings" / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True)
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    log = root / "figures.jsonl"
    env = dict(os.environ, IPYTHONDIR=str(ipy), TOOLKIT_FIGURE_LOG=str(log),
               JUPYTERLAB_SETTINGS_DIR=str(root / "lab-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(root / "lab-workspaces"),
               JUPYTER_RUNTIME_DIR=str(root / "runtime"), MPLBACKEND="module://matplotlib_inline"
               ".backend_inline", PYTHONUNBUFFERED="1")
    return Workspace(root, nbs, env, log)


# --------------------------------------------------------------------------- off-screen reference

def cell_key(source: str) -> str:
    """The sha1 the kernel-side figure log uses for a cell."""
    return hashlib.sha1(source.encode()).hexdigest()


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    old = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


def execute_offscreen(ws: Workspace, path: Path) -> dict[str, list[dict[str, Any]]]:
    """Execute a notebook with nbclient; return the logged figures per cell key (in order)."""
    import nbformat

    from toolkit.util.nbrun import execute_notebook

    start = len(ws.read_log())
    nb = nbformat.read(path, as_version=4)
    with _environ(ws.env):
        execute_notebook(nb, path.parent)
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for row in ws.read_log()[start:]:
        by_cell.setdefault(row["cell"] or "(callback)", []).append(row)
    return by_cell


@dataclass
class ExplorerState:
    """What the explorer's controls say; ``kwargs`` are :func:`experiment`'s arguments."""

    backends: str = "cpu,npu"
    default: str = "npu"
    comply: str = "opcode"
    opcode: dict[str, str] = field(default_factory=dict)
    opname: dict[str, str] = field(default_factory=dict)

    def kwargs(self) -> dict[str, Any]:
        bs = [b.strip() for b in self.backends.split(",") if b.strip()]
        return {"backends": bs, "default": self.default, "comply": self.comply,
                "opcode": self.opcode if self.comply == "opcode" else None,
                "opname": self.opname if self.comply == "opname" else None}

    def copy(self, **changes: Any) -> ExplorerState:
        d: dict[str, Any] = {"backends": self.backends, "default": self.default,
                             "comply": self.comply, "opcode": dict(self.opcode),
                             "opname": dict(self.opname)}
        d.update(changes)
        return ExplorerState(**d)


def explorer_references(ws: Workspace, states: list[ExplorerState]) -> list[dict[str, Any]]:
    """Render each state's experiment figure off-screen, as the notebook's inline backend
    would; return one logged figure row per state."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nfrom IPython.display import display\n"
        "import toolkit as tk\nfrom toolkit.viz.partition_explorer import experiment\n"
        "cnn = tk.load('../sample_models/cnn.tflite')"))
    keys = []
    for i, st in enumerate(states):
        src = (f"# state {i}\ndisplay(experiment(cnn, repeat=3, **{st.kwargs()!r}).figure())\n"
               "plt.close('all')")
        nb.cells.append(nbformat.v4.new_code_cell(src))
        keys.append(cell_key(src))
    path = ws.notebooks / "_explorer_reference.ipynb"
    nbformat.write(nb, path)
    by_cell = execute_offscreen(ws, path)
    path.unlink()
    return [by_cell[k][0] for k in keys]


# --------------------------------------------------------------------------- JupyterLab

@contextlib.contextmanager
def jupyterlab(ws: Workspace) -> Iterator[str]:
    """Run JupyterLab on the workspace's notebooks; yield its base URL with the token."""
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={ws.notebooks}",
           f"--IdentityProvider.token={token}", "--ServerApp.allow_root=True",
           "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = (ws.root / "jupyterlab.log").open("w")
    proc = subprocess.Popen(cmd, env=ws.env, stdout=log, stderr=subprocess.STDOUT,
                            cwd=ws.notebooks)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SetupError("JupyterLab did not start; see "
                                     f"{ws.root / 'jupyterlab.log'}:\n"
                                     + (ws.root / "jupyterlab.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        yield f"{url}|{token}"
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# --------------------------------------------------------------------------- checks in the page

@dataclass
class Report:
    """Failures and notes gathered while checking."""

    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, text: str) -> None:
        print(f"  FAIL {text}", flush=True)
        self.failures.append(text)

    def note(self, text: str) -> None:
        print(f"  ok   {text}", flush=True)
        self.notes.append(text)


_IMAGE_BYTES_JS = """async els => Promise.all(els.map(async e => {
    let b64 = null;
    try {
        const bytes = new Uint8Array(await (await fetch(e.src)).arrayBuffer());
        let s = "";
        for (let i = 0; i < bytes.length; i += 8192)
            s += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
        b64 = btoa(s);
    } catch (err) { b64 = null; }
    return {b64: b64, w: e.naturalWidth, h: e.naturalHeight};
}))"""


def _image_rows(imgs: Any) -> list[dict[str, Any]]:
    """sha1 of the bytes and natural size of each <img> of a locator (data: or blob: URLs)."""
    rows = []
    for info in imgs.evaluate_all(_IMAGE_BYTES_JS):
        sha = hashlib.sha1(base64.b64decode(info["b64"])).hexdigest() if info["b64"] else None
        rows.append({"sha1": sha, "width": info["w"], "height": info["h"]})
    return rows


def structure_changes(shown: list[dict[str, Any]], reference: list[dict[str, Any]]) -> list[str]:
    """What the shown figure lacks or has in excess against the off-screen reference, axes by
    axes: patch, collection and image counts, lines present, title, axis labels and legend.

    Structure, not pixels: measured data move and scale bars (one slow run's whisker squeezes
    every bar of its axes), while a half-built figure lacks artists or labels whatever the data."""
    out = []
    for i, (a, b) in enumerate(zip(shown, reference, strict=False)):
        for key in ("patches", "collections", "images"):
            if a.get(key) != b.get(key):
                out.append(f"axes {i}: {a.get(key)} {key} (off-screen: {b.get(key)})")
        # lines only present or not: a marker per clipped whisker comes and goes with the data
        if b.get("lines") and not a.get("lines"):
            out.append(f"axes {i}: no lines (off-screen: {b.get('lines')})")
        for key in ("title", "xlabel", "ylabel", "legend"):
            if b.get(key) and not a.get(key):
                out.append(f"axes {i}: no {key}")
    return out


def compare_figure(report: Report, where: str, shown: dict[str, Any],
                   expected: dict[str, Any], logged: dict[str, dict[str, Any]]) -> None:
    """Fail unless a shown image is a complete figure: the off-screen reference's axes count,
    pixel size and per-axes structure (artists, title, labels, legend), and about as many text
    labels."""
    row = logged.get(shown["sha1"] or "")
    if row is None:
        report.fail(f"{where}: the image shown is not a figure the kernel rendered")
        return
    problems = []
    if row["axes"] != expected["axes"]:
        problems.append(f"{row['axes']} axes (off-screen: {expected['axes']})")
    problems += structure_changes(row.get("artists", []), expected.get("artists", []))
    if (abs(shown["width"] - expected["width"]) > _tolerance(expected["width"])
            or abs(shown["height"] - expected["height"]) > _tolerance(expected["height"])):
        problems.append(f"{shown['width']}x{shown['height']} px (off-screen: "
                        f"{expected['width']}x{expected['height']} px)")
    if row["texts"] < 0.8 * expected["texts"]:  # tick labels vary a little with the data
        problems.append(f"{row['texts']} text labels (off-screen: {expected['texts']})")
    if problems:
        report.fail(f"{where}: half-drawn figure: " + ", ".join(problems))
    else:
        report.note(f"{where}: figure complete ({row['axes']} axes, "
                    f"{shown['width']}x{shown['height']} px)")


def open_and_run_all(page: Any, base: str, token: str, name: str, timeout_s: float) -> None:
    """Open a notebook in JupyterLab, Run All from the Run menu, wait until every cell ran."""
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
    panel = page.locator(".jp-NotebookPanel").first
    panel.wait_for(timeout=60_000)
    # a notebook saved without kernel metadata asks which kernel to start: the default one
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    with contextlib.suppress(Exception):
        dialog.first.wait_for(timeout=8_000)
        dialog.first.click()
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(
        timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).first.click()
    deadline = time.monotonic() + timeout_s
    while True:
        prompts = panel.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        done = all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts)
        idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count() > 0
        if prompts and done and idle:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: cells still running after {timeout_s:.0f} s: {prompts}")
        if time.monotonic() > deadline - timeout_s + 30 and all(
                p.strip() == "[ ]:" for p in prompts):
            raise TimeoutError(f"{name}: no cell started 30 s after Run All")
        time.sleep(0.5)


def check_notebook(page: Any, report: Report, name: str, reference: dict[str, Any],
                   logged: dict[str, dict[str, Any]], shots: Path) -> None:
    """Check every code cell's outputs against the off-screen reference."""
    panel = page.locator(".jp-NotebookPanel").first
    cells = panel.locator(".jp-CodeCell")
    stem = Path(name).stem
    n_figures = 0
    for i in range(cells.count()):
        cell = cells.nth(i)
        source = cell.locator(".jp-InputArea-editor .cm-content").evaluate(
            "e => e.cmView ? e.cmView.view.state.doc.toString() : e.innerText")
        outputs = cell.locator(".jp-OutputArea-output")
        text = "\n".join(outputs.all_inner_texts())
        if "Traceback" in text or cell.locator("[data-mime-type="
                                               "'application/vnd.jupyter.error']").count():
            report.fail(f"{stem} cell {i}: traceback in the output:\n{text[-1500:]}")
        imgs = cell.locator(".jp-OutputArea-output img:not(.jupyter-widgets img)")
        shown = [r for r in _image_rows(imgs)]
        expected = reference.get(cell_key(source), [])
        if cell.locator(".widget-vbox").count() > 0:
            continue  # the explorer is checked interaction by interaction
        if len(shown) != len(expected):
            report.fail(f"{stem} cell {i}: {len(shown)} figure(s) shown, "
                        f"{len(expected)} rendered off-screen")
        for k, (s, e) in enumerate(zip(shown, expected)):
            n_figures += 1
            compare_figure(report, f"{stem} cell {i} figure {k}", s, e, logged)
            imgs.nth(k).screenshot(path=str(shots / f"{stem}_cell{i:02d}_fig{k}.png"))
    report.note(f"{stem}: {cells.count()} code cells ran, {n_figures} figure(s) checked")


_WIDE_TABLES_JS = """panel => {
  const out = [];
  panel.querySelectorAll('.jp-CodeCell').forEach((cell, i) => {
    cell.querySelectorAll('.jp-OutputArea-output').forEach(area => {
      area.querySelectorAll('table').forEach(t => {
        // the table, or a box around it inside the output area, scrolls sideways
        let e = t;
        while (e && e !== area.parentElement) {
          if (e.scrollWidth > e.clientWidth + 2 &&
              getComputedStyle(e).overflowX !== 'visible') {
            out.push({cell: i, scroll: e.scrollWidth, client: e.clientWidth});
            return;
          }
          e = e.parentElement;
        }
        if (t.getBoundingClientRect().right > area.getBoundingClientRect().right + 2) {
          out.push({cell: i, scroll: t.scrollWidth, client: area.clientWidth});
        }
      });
    });
  });
  return out;
}"""


def check_tables_fit(page: Any, report: Report, name: str) -> None:
    """Fail for each table of the notebook that is wider than its output area (it would
    scroll sideways) in the checked window."""
    panel = page.locator(".jp-NotebookPanel").first
    wide = panel.evaluate(_WIDE_TABLES_JS)
    stem = Path(name).stem
    for row in wide:
        report.fail(f"{stem} cell {row['cell']}: a table scrolls sideways ({row['scroll']} px "
                    f"wide in {row['client']} px at {VIEWPORT['width']}x{VIEWPORT['height']})")
    n = panel.locator(".jp-OutputArea-output table").count()
    report.note(f"{stem}: {n} table(s), none scrolls sideways" if not wide else
                f"{stem}: {len(wide)} of {n} table(s) scroll sideways")


def _inside(box: dict[str, float] | None, width: int, height: int) -> bool:
    return (box is not None and box["width"] > 0 and box["height"] > 0 and box["x"] >= -1
            and box["y"] >= -1 and box["x"] + box["width"] <= width + 1
            and box["y"] + box["height"] <= height + 1)


def check_explorer_layout(page: Any, report: Report, shots: Path,
                          timeout_s: float = 60) -> None:
    """The explorer's controls and its figure are visible together in the window: scrolled
    to the explorer's top, both boxes lie inside the viewport (waited for, not assumed)."""
    cell = page.locator(".jp-NotebookPanel .jp-CodeCell").filter(
        has=page.locator(".widget-vbox")).last
    box = cell.locator(".jp-OutputArea-output .widget-vbox").first
    controls = box.locator(".widget-text").filter(
        has=page.locator("label", has_text=re.compile("^backends$"))).first
    rules = box.locator(".widget-dropdown").last
    figure = box.locator("img").first
    figure.wait_for(state="visible", timeout=timeout_s * 1000)
    w, h = VIEWPORT["width"], VIEWPORT["height"]
    deadline = time.monotonic() + timeout_s
    boxes: list[Any] = []
    while time.monotonic() < deadline:
        box.evaluate("e => e.scrollIntoView({block: 'start'})")
        boxes = [controls.bounding_box(), figure.bounding_box()]
        if all(_inside(b, w, h) for b in boxes):
            break
        page.wait_for_timeout(250)  # let the scroll and the image layout settle, then re-read
    page.screenshot(path=str(shots / "explorer_layout.png"))
    if not all(_inside(b, w, h) for b in boxes):
        report.fail(f"explorer: controls {boxes[0]} and figure {boxes[1]} are not visible "
                    f"together in a {w}x{h} window")
        return
    rb = rules.bounding_box()
    fb = boxes[1]
    if rb is not None and fb is not None and rb["x"] + rb["width"] > fb["x"] + 1:
        report.fail(f"explorer: the rules {rb} are not beside the figure {fb}")
    report.note(f"explorer: controls and figure visible together in {w}x{h}")


@dataclass
class Step:
    """One explorer interaction: a description, what it does in the page, the state after."""

    text: str
    act: Callable[[Any], None]
    state: ExplorerState


def explorer_steps() -> tuple[ExplorerState, list[Step]]:
    """The notebook's explorer state after Run All, and six interactions from there."""

    def dropdown(label: str, value: str) -> Callable[[Any], None]:
        def act(box: Any) -> None:
            dd = box.locator(".widget-dropdown").filter(
                has=box.page.locator("label", has_text=re.compile(f"^{re.escape(label)}$")))
            dd.locator("select").first.select_option(value)
        return act

    def toggle(value: str) -> Callable[[Any], None]:
        def act(box: Any) -> None:
            box.locator("button.widget-toggle-button", has_text=re.compile(
                f"^{value}$")).first.click()
        return act

    def type_backends(value: str) -> Callable[[Any], None]:
        def act(box: Any) -> None:
            field_ = box.locator(".widget-text").filter(
                has=box.page.locator("label", has_text=re.compile("^backends$"))).locator(
                "input").first
            field_.click()
            field_.press("Control+a")
            field_.press_sequentially(value, delay=60)
            field_.press("Enter")
        return act

    s0 = ExplorerState()  # the notebook shows the explorer as it opens, no state forced
    s1 = s0.copy(default="cpu")
    s2 = s1.copy(opcode={"CONV_2D": "npu"})
    s3 = s2.copy(comply="opname")
    s4 = s3.copy(opname={"cnn/stem_conv/Conv2D": "npu"})
    s5 = s4.copy(comply="opcode")
    s6 = s5.copy(backends="npu,cpu")
    return s0, [
        Step("default backend -> cpu", dropdown("default", "cpu"), s1),
        Step("CONV_2D -> npu", dropdown("CONV_2D", "npu"), s2),
        Step("comply -> opname", toggle("opname"), s3),
        # comply=opname put the per-op rules on screen: no tab to pick
        Step("op cnn/stem_conv/Conv2D -> npu", dropdown("cnn/stem_conv/Conv2D", "npu"), s4),
        Step("comply -> opcode", toggle("opcode"), s5),
        Step("type 'npu,cpu' in backends, Enter", type_backends("npu,cpu"), s6),
    ]


def _explorer_view(box: Any) -> dict[str, Any]:
    status = " ".join(box.locator(".widget-html").all_inner_texts())
    shown = _image_rows(box.locator("img"))
    return {"status": status, "shown": shown}


def _shoot(box: Any, path: Path) -> None:
    """Screenshot the explorer's figure (the whole box when it shows none)."""
    img = box.locator("img").last
    with contextlib.suppress(Exception):
        img.screenshot(path=str(path), timeout=10_000)
        return
    box.screenshot(path=str(path))


def _run_number(status: str) -> int | None:
    m = re.search(r"run (\d+)", status)
    return int(m.group(1)) if m else None


def check_explorer(page: Any, report: Report, ws: Workspace, shots: Path,
                   settle_s: float = 1.5, timeout_s: float = 60) -> None:
    """Click through the explorer's controls; each must re-run once and draw completely."""
    start, steps = explorer_steps()
    refs = explorer_references(ws, [start, *(s.state for s in steps)])
    cell = page.locator(".jp-NotebookPanel .jp-CodeCell").filter(
        has=page.locator(".widget-vbox")).last
    box = cell.locator(".jp-OutputArea-output .widget-vbox").first
    box.scroll_into_view_if_needed()
    logged = {r["sha1"]: r for r in ws.read_log()}
    view = _explorer_view(box)
    _shoot(box, shots / "explorer_step0.png")
    if len(view["shown"]) != 1:
        report.fail(f"explorer after Run All: {len(view['shown'])} figure(s) shown, expected 1")
    else:
        compare_figure(report, "explorer after Run All", view["shown"][0], refs[0], logged)
    for k, (step, ref) in enumerate(zip(steps, refs[1:]), start=1):
        before = view
        step.act(box)
        deadline = time.monotonic() + timeout_s
        stable: tuple[float, dict[str, Any]] | None = None
        while time.monotonic() < deadline:
            time.sleep(0.3)
            view = _explorer_view(box)
            idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count()
            if view != before and idle and view["shown"] and "running" not in view["status"]:
                # done once nothing changed for settle_s (a late redraw would arrive by then)
                if stable is None or stable[1] != view:
                    stable = (time.monotonic(), view)
                elif time.monotonic() - stable[0] >= settle_s:
                    break
            else:
                stable = None
        _shoot(box, shots / f"explorer_step{k}.png")
        where = f"explorer step {k} ({step.text})"
        if view == before:
            report.fail(f"{where}: the widget did not update within {timeout_s:.0f} s")
            continue
        logged = {r["sha1"]: r for r in ws.read_log()}
        if len(view["shown"]) != 1:
            report.fail(f"{where}: {len(view['shown'])} figure(s) shown, expected 1")
        else:
            compare_figure(report, where, view["shown"][0], ref, logged)
        n0, n1 = _run_number(before["status"]), _run_number(view["status"])
        if n0 is None or n1 is None:
            report.fail(f"{where}: the status line has no run number: {view['status']!r}")
        elif n1 - n0 != 1:
            report.fail(f"{where}: the experiment ran {n1 - n0} times (expected once)")


# --------------------------------------------------------------------------- the report

def make_sample_report(folder: Path) -> tuple[Path, str]:
    """Write ``toolkit report`` of the sample CNN (two compiles, diffed) into ``folder``;
    return the HTML file and the name of the top layer (of the first trace's join)."""
    import toolkit as tk
    from toolkit.formats.chrome_trace import write_chrome_trace

    source = tk.load(ROOT / "sample_models" / "cnn.tflite")
    traces = []
    for name, passes in (("fused", None), ("unfused", [])):
        compiled = tk.compile(source, passes=passes)
        compiled.save(folder / name)
        _, trace = tk.run(compiled, trace=True, repeat=12, warmup=2)
        traces.append(write_chrome_trace(trace.to_frame(), folder / f"{name}.json"))
    top = str(tk.trace_join(traces[0], folder / "fused").top_layers(1)["layer"].iloc[0])
    html = folder / "report.html"
    cmd = [sys.executable, "-m", "toolkit", "report", str(traces[0]), "--compiled",
           str(folder / "fused"), "--diff", str(traces[1]), "--diff-compiled",
           str(folder / "unfused"), "--labels", "fused", "unfused", "-o", str(html)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if r.returncode != 0:
        raise RuntimeError(f"toolkit report failed ({r.returncode}): {r.stderr[-2000:]}")
    return html, top


def check_report(browser: Any, report: Report, html: Path, top: str, shots: Path) -> None:
    """Open the report file offline: no console error or failed load, every <img> decoded,
    ``top`` visible."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
        ("file:", "data:")) else route.abort())
    try:
        page.goto(html.as_uri(), wait_until="load")
        page.wait_for_timeout(500)
        images = page.locator("img").evaluate_all(
            "els => els.map(e => ({ok: e.complete && e.naturalWidth > 0, w: e.naturalWidth}))")
        if len(images) < 3:
            report.fail(f"report: {len(images)} figure(s), expected 3 (layers, backends, diff)")
        bad = [i for i, im in enumerate(images) if not im["ok"]]
        if bad:
            report.fail(f"report: figure(s) {bad} not rendered")
        if not page.get_by_text(top, exact=True).first.is_visible():
            report.fail(f"report: the top layer {top!r} is not visible")
        for text in problems:
            report.fail(f"report: {text}")
        if not problems and not bad and len(images) >= 3:
            report.note(f"report: {len(images)} figures rendered, top layer {top!r} visible, "
                        "no console error, nothing fetched")
        page.screenshot(path=str(shots / "report_page.png"), full_page=True)
    finally:
        page.close()


# --------------------------------------------------------------------------- main

def run_check(out: Path, only: list[str] | None = None, timeout_s: float = 240,
              with_report: bool = True) -> Report:
    """Run the whole check; screenshots into ``out``; return the report."""
    chromium = ensure_chromium()
    ensure_playwright()
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    report = Report()
    with tempfile.TemporaryDirectory(prefix="toolkit-browser-") as tmp:
        ws = make_workspace(Path(tmp))
        names = [p.name for p in sorted(ws.notebooks.glob("*.ipynb"))
                 if not only or p.name in only or p.stem in only]
        references = {}
        for name in names:
            t = time.monotonic()
            references[name] = execute_offscreen(ws, ws.notebooks / name)
            print(f"browser-check: {name} executed off-screen ({time.monotonic() - t:.0f} s)",
                  flush=True)
        with jupyterlab(ws) as server, sync_playwright() as pw:
            base, token = server.split("|")
            browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                for name in names:
                    print(f"browser-check: {name} in JupyterLab", flush=True)
                    page = browser.new_page(viewport=VIEWPORT)
                    t = time.monotonic()
                    try:
                        open_and_run_all(page, base, token, name, timeout_s)
                        report.note(f"{name}: Run All finished in {time.monotonic() - t:.0f} s")
                        logged = {r["sha1"]: r for r in ws.read_log()}
                        check_notebook(page, report, name, references[name], logged, out)
                        check_tables_fit(page, report, name)
                        if name == EXPLORER_NOTEBOOK:
                            check_explorer_layout(page, report, out)
                            check_explorer(page, report, ws, out)
                    except Exception as e:  # a page that cannot be driven is a failure
                        report.fail(f"{name}: {type(e).__name__}: {e}")
                    finally:
                        with contextlib.suppress(Exception):
                            page.screenshot(path=str(out / f"{Path(name).stem}_page.png"))
                        page.close()
                if with_report:
                    print("browser-check: the report of the sample model", flush=True)
                    try:
                        html, top = make_sample_report(Path(tmp))
                        check_report(browser, report, html, top, out)
                    except Exception as e:
                        report.fail(f"report: {type(e).__name__}: {e}")
            finally:
                browser.close()
    return report


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "out" / "browser",
                   help="folder for the screenshots (default: out/browser)")
    p.add_argument("--notebook", action="append", help="check only this notebook (repeatable)")
    p.add_argument("--no-report", action="store_true",
                   help="leave out the check of the sample model's toolkit report")
    a = p.parse_args(argv)
    t = time.monotonic()
    try:
        report = run_check(a.out, a.notebook, with_report=not a.no_report)
    except SetupError as e:
        print(f"browser-check: {e}", file=sys.stderr)
        return 2
    took = time.monotonic() - t
    if report.failures:
        print(f"\nbrowser-check: {len(report.failures)} failure(s) in {took:.0f} s "
              f"(screenshots in {a.out}):", file=sys.stderr)
        for f in report.failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print(f"\nbrowser-check: all {len(report.notes)} checks passed in {took:.0f} s "
          f"(screenshots in {a.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
