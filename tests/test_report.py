"""toolkit report / tk.report: the self-contained HTML profiling report and its notebook."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.cli import main
from toolkit.formats.chrome_trace import write_chrome_trace


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample CNN compiled with and without the default passes, a trace of each."""
    root = tmp_path_factory.mktemp("report")
    source = tk.load(SAMPLES / "cnn.tflite")
    out = {}
    for name, passes in (("fused", None), ("unfused", [])):
        compiled = tk.compile(source, passes=passes)
        compiled.save(root / name)
        _, trace = tk.run(compiled, trace=True, repeat=8, warmup=1)
        out[name] = root / name
        out[f"{name}_trace"] = write_chrome_trace(trace.to_frame(), root / f"{name}.json")
    out["root"] = root
    return out


def test_toolkit_report_writes_one_self_contained_html_file(
        sample: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "report.html"
    rc = main(["report", str(sample["fused_trace"]), "--compiled", str(sample["fused"]),
               "--diff", str(sample["unfused_trace"]), "--diff-compiled", str(sample["unfused"]),
               "--labels", "fused", "unfused", "-o", str(html)])
    assert rc == 0, capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # nothing else left
    text = html.read_text(encoding="utf-8")
    assert "<script" not in text and "http://" not in text.replace(
        "http://www.w3.org", "") and "https://" not in text  # opens offline
    images = re.findall(r'<img[^>]+src="data:image/png;base64,([^"]+)"', text)
    assert len(images) >= 3  # top layers, backends, the diff's waterfall
    for b64 in images:
        assert base64.b64decode(b64)[:8] == b"\x89PNG\r\n\x1a\n"
    att = tk.trace_join(sample["fused_trace"], sample["fused"])
    top = att.top_layers(3)["layer"].tolist()
    assert all(layer in text for layer in top)
    for heading in ("Summary", "Top 15 layers", "Time per backend", "Diff: fused → unfused",
                    "Unattributed events, by reason", "Provenance of the top layers"):
        assert heading in text
    assert "check() passed" in text
    assert f"{100 * att.match_score:.1f} %" in text
    d = tk.diff(att, tk.trace_join(sample["unfused_trace"], sample["unfused"]))
    for op in d.moved_ops()["op"].head(3):  # the ops the two compiles group differently
        assert op in text
    assert "import toolkit" not in text and "inputs_pickle" not in text  # no code cells


def test_a_report_whose_join_fails_stops_with_the_joins_error_and_writes_nothing(
        sample: dict[str, Path], tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    with pytest.raises(tk.ToolkitError, match=r"keyed trace events .* match the model"):
        tk.report(html, sample["fused_trace"], SAMPLES / "two_branch.tflite")
    other = tk.compile(tk.load(SAMPLES / "two_branch.tflite"))
    _, trace = tk.run(other, trace=True, repeat=4)
    with pytest.raises(tk.ToolkitError, match="different source models"):
        tk.report(html, sample["fused_trace"], sample["fused"],
                  attribution_b=tk.trace_join(trace, other))
    assert list(tmp_path.iterdir()) == []
    assert main(["report", str(sample["fused_trace"]), "--compiled",
                 str(SAMPLES / "two_branch.tflite"), "-o", str(html)]) == 2
    assert list(tmp_path.iterdir()) == []


class _Numerics:
    """Stands for tk.compare's result: anything with by_layer() returning a DataFrame."""

    def __init__(self, layers: list[str]) -> None:
        self.layers = layers

    def by_layer(self) -> pd.DataFrame:
        return pd.DataFrame({"layer": self.layers,
                             "max_abs_err": [0.5 / (i + 1) for i in range(len(self.layers))]})


def test_the_report_notebook_keeps_its_objects_and_renders_numerics(
        sample: dict[str, Path], tmp_path: Path) -> None:
    att = tk.trace_join(sample["fused_trace"], sample["fused"])
    layers = att.by_layer()["layer"].tolist()
    path = tk.report(tmp_path / "report.ipynb", attribution=att,
                     numerics=_Numerics(layers), title="CNN on the reference runtime")
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in code)
    assert not [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    shown = "\n".join(str(o.get("data", {}).get("text/html", "")) + str(
        o.get("data", {}).get("text/markdown", "")) for c in code for o in c.get("outputs", []))
    assert "# CNN on the reference runtime" in shown
    assert "## Numerics" in shown and "max_abs_err" in shown
    assert "## Diff" not in shown  # no second trace: no diff section
    with pytest.raises(tk.ToolkitError, match="by_layer"):
        tk.report(tmp_path / "r.html", attribution=att, numerics=object())
    with pytest.raises(tk.ToolkitError, match="unknown report format"):
        tk.report(tmp_path / "r.html", attribution=att, format="pdf")
    assert [p.name for p in tmp_path.iterdir()] == ["report.ipynb"]
