"""README.md and docs/ as tests: every sh and python block of a page runs as written, in order,
in a fresh folder for that page (a page never depends on another having run).

The folder holds `sample_models` (a link to the committed ones) and the files a block names
as the user's own (a Caffe deploy net, its weights and an input file for `toolkit nnc`).
`toolkit` lines run in this process through the console script's `main`; other shell lines
run in bash with the interpreter's bin folder first on the PATH, as after
`. .venv/bin/activate`. The README opens with its two set-up commands (`make demo`,
`make test`), which build `.venv` and are what CI runs, so that block is checked for its shape
and not run here. Any other block that cannot run is marked `<!-- not run: why -->` just above
its fence, and the test counts those.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from caffe_nets import NETS
from support import ROOT, SAMPLES

from toolkit.cli import main

README = ROOT / "README.md"
# README first, then every page of docs/ (pages that other pages link to are found by the glob:
# a new page's blocks run without being listed here).
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")
RUN_LANGS = {"sh", "python"}
TEXT_LANGS = {"text", "yaml", "ini", "json"}

# The blocks that say why they are not run (their first line), by page; a new one must be
# listed here.
NOT_RUN_EXPECTED: dict[str, list[str]] = {
    "docs/fleet.md": ["from toolkit.trace.fleet.join_many import trace_join_many",
                      "toolkit trace-join-many 'nightly/*.parquet' --compiled out/ --engine "
                      "local --workers 2",
                      "import pickle"],
}

# What a page's blocks say they make, checked after they ran.
MADE: dict[str, tuple[str, ...]] = {
    "README.md": ("out/tour/cnn/cnn.circle", "out/tour/cnn/cnn_debug.xml",
                  "out/tour/trace.json"),
    "docs/library.md": ("out/library/cnn/cnn.circle", "out/library/work/cnn.conn.json",
                        "out/library/vela/cnn_int8_debug.xml"),
    "docs/verbs/trace-join.md": ("out/cnn/layers.json", "out/cnn/by_layer.csv"),
    "docs/verbs/run.md": ("out/cnn/trace.json", "out/cnn/trace.parquet",
                          "out/cnn/outputs.npz"),
    "docs/verbs/partition.md": ("work/Net.conn.json", "work/chain.json"),
    "docs/verbs/vela.md": ("vela_out/cnn_int8_debug.xml",),
    "docs/verbs/nnc.md": ("out.npz",),
    "docs/verbs/inspect.md": ("out/inspect/mobilenet_v2.ops.csv",),
}


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def page_blocks(page: Path) -> list[Block]:
    """The blocks of ``page`` that are the page's own (README's set-up block left out)."""
    blocks = readme_blocks(page.read_text(encoding="utf-8"))
    return blocks[1:] if page == README else blocks


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: language, text, line of its opening fence (1-based)
    and the reason it is not run (None: it runs)."""

    lang: str
    text: str
    line: int
    not_run: str | None


def readme_blocks(text: str) -> list[Block]:
    """Return every fenced block of ``text`` in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        prev = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        reason = NOT_RUN.match(prev)
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"README.md:{start + 1}: the block is never closed"
        blocks.append(Block(m.group(1), "\n".join(body) + "\n", start + 1,
                            reason.group(1) if reason else None))
        i += 1
    return blocks


def shell_commands(text: str) -> list[str]:
    """The commands of an sh block: continuation lines joined, blank lines dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    return [ln.strip() for ln in joined.splitlines() if ln.strip()]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_block_runs_or_says_why(page: Path) -> None:
    where = _name(page)
    blocks = page_blocks(page)
    for b in blocks:
        assert b.lang in RUN_LANGS | TEXT_LANGS, (
            f"{where}:{b.line}: a block needs a language (sh, python, or text for figures)")
        if b.lang in TEXT_LANGS:
            assert b.not_run is None, f"{where}:{b.line}: text blocks are never run"
    not_run = [b for b in blocks if b.lang in RUN_LANGS and b.not_run]
    assert [b.text.splitlines()[0] for b in not_run] == NOT_RUN_EXPECTED.get(where, [])
    assert all(len(b.not_run or "") > 20 for b in not_run)  # a reason, not a bare marker


def test_the_pages_run_both_languages() -> None:
    runs = [b for p in PAGES for b in page_blocks(p) if b.lang in RUN_LANGS and not b.not_run]
    assert len(runs) >= 10 and {b.lang for b in runs} == RUN_LANGS
    assert any(b.lang == "sh" for b in page_blocks(README))  # the tour


def test_readme_is_a_short_first_page() -> None:
    """What it is, the two commands, a tour with its output, and links to docs/."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 90, "README.md is the first page: move detail to docs/"
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), f"README.md links to a missing page {link}"
    tour = [b for b in page_blocks(README) if b.lang == "text"][-1]
    assert len(tour.text.splitlines()) <= 25


def test_readme_opens_with_the_two_setup_commands() -> None:
    """The title, then one sh block of exactly `make demo` and `make test`, nothing between."""
    text = README.read_text(encoding="utf-8")
    head = [ln for ln in text.splitlines() if ln.strip()][:5]
    assert head[0].startswith("# ") and head[1] == "```sh" and head[4] == "```", head
    assert [shlex.split(ln, comments=True) for ln in head[2:4]] == [["make", "demo"],
                                                                      ["make", "test"]]
    assert readme_blocks(text)[0].line == text.splitlines().index("```sh") + 1


def test_parser_sees_markers_and_continuations() -> None:
    text = ("a\n<!-- not run: needs a GPU we do not have -->\n```sh\nx \\\n  --y\n```\n"
            "```python\nprint(1)\n```\n")
    a, b = readme_blocks(text)
    assert (a.lang, a.line, a.not_run) == ("sh", 3, "needs a GPU we do not have")
    assert shell_commands(a.text) == ["x --y"]
    assert (b.lang, b.not_run, b.text) == ("python", None, "print(1)\n")


def _user_files(d: Path) -> None:
    """The files the README names as the user's own: a Caffe deploy net with its weights, and
    one input of float32 values for it."""
    NETS["lenet"](False).save(d / "deploy.prototxt", d / "net.caffemodel")
    x = np.random.default_rng(3).uniform(-1, 1, (1, 1, 28, 28)).astype("<f4")
    x.tofile(d / "input.bin")


def _run_shell(cmd: str, cwd: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    tokens = shlex.split(cmd, comments=True)
    if not tokens:
        return
    if tokens[0] == "toolkit":
        status = main(tokens[1:])
        cap = capsys.readouterr()
        assert status == 0, f"{where}: {cmd}\n{cap.err}"
        return
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"{where}: {cmd}\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.filterwarnings("ignore:profiled kernel time:UserWarning")
@pytest.mark.parametrize("page", [p for p in PAGES if any(
    b.lang in RUN_LANGS and not b.not_run for b in page_blocks(p))], ids=_name)
def test_page_blocks_run_as_written(page: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sample_models").symlink_to(SAMPLES, target_is_directory=True)
    _user_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    name = _name(page)
    for b in page_blocks(page):
        if b.lang not in RUN_LANGS or b.not_run:
            continue
        where = f"{name}:{b.line}"
        if b.lang == "python":
            exec(compile(b.text, where, "exec"), {"__name__": "__readme__"})
        else:
            for cmd in shell_commands(b.text):
                _run_shell(cmd, tmp_path, where, capsys)
    # what the blocks say they make is there
    for made in MADE.get(name, ()):
        assert (tmp_path / made).is_file(), f"{name}: {made} was not made"
    if name == "docs/verbs/nnc.md":
        with np.load(tmp_path / "out.npz") as z:
            assert list(z.files) == ["prob"] and z["prob"].shape[-1] == 10
            assert abs(float(z["prob"].sum()) - 1.0) < 1e-4  # a softmax over LeNet's classes
