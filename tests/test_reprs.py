"""Rich views (``_repr_html_``) and short reprs of the objects a notebook shows, and the
honest-table helpers behind them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toolkit as tk
from toolkit.reprs import format_top, html_bars, html_table, top_rows

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"


def _note(html: str) -> tuple[int, int]:
    m = re.search(r"(\d+) of (\d+) rows shown", html)
    assert m, html[:300]
    return int(m.group(1)), int(m.group(2))


def _first_column_values(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr><td>([^<]*)</td>", body)


# ------------------------------------------------------------------- helpers

def test_top_rows_sorts_by_the_quantity_and_counts_the_rest() -> None:
    df = pd.DataFrame({"layer": list("abcdef"), "total_ns": [5, 40, 1, 30, 20, 4]})
    cut = top_rows(df, "total_ns", 3)
    assert cut.frame["layer"].tolist() == ["b", "d", "e"]
    assert (cut.shown, cut.total_rows) == (3, 6)
    assert cut.covered == 90 and cut.total == 100
    assert cut.note == "3 of 6 rows shown (largest total_ns first), 90.0 % of the total"
    text = format_top(df, "total_ns", 2, title="time per layer")
    assert text.splitlines()[0] == ("== time per layer: 2 of 6 rows shown (largest total_ns "
                                    "first), 70.0 % of the total")
    assert "b" in text and "c " not in text


def test_html_table_escapes_and_notes() -> None:
    df = pd.DataFrame({"name": ["<script>", "x"], "v": [1, 2]})
    h = html_table(df, "v", 1)
    assert "<script>" not in h and "&lt;script&gt;" not in h   # the small row was cut
    assert _note(h) == (1, 2)
    assert "&lt;script&gt;" in html_table(df, "v", 2)


def test_html_bars_draws_one_bar_per_value() -> None:
    svg = html_bars(["a", "b", "c"], [3.0, 1.0, 2.0], unit=" ms", title="t")
    assert svg.startswith("<svg") and svg.count("<rect") == 3
    widths = [float(w) for w in re.findall(r"<rect [^>]*width='([\d.]+)'", svg)]
    assert widths[0] == max(widths) and widths[1] == min(widths)
    assert html_bars([], []) == "" and html_bars(["a"], [0.0]) == ""


# ------------------------------------------------------------------- objects

@pytest.fixture(scope="module")
def cnn() -> tk.Model:
    return tk.load(SAMPLES / "cnn.tflite")


@pytest.fixture(scope="module")
def compiled(cnn: tk.Model):  # type: ignore[no-untyped-def]
    return tk.compile(cnn, target=tk.Target(buffer_bytes=4096))


def test_model_views(cnn: tk.Model) -> None:
    assert repr(cnn) == "<Model tflite 1 subgraph(s), 14 ops, 28 tensors>"
    h = cnn._repr_html_()
    assert "14 ops of 10 types" in h
    # op types, most frequent first: ADD (3), then MUL (2) and CONV_2D (2)
    assert _first_column_values(h)[0] == "ADD"
    assert _note(h) == (8, 10)
    assert "<svg" in h


def test_compiled_model_views(compiled) -> None:  # type: ignore[no-untyped-def]
    r = repr(compiled)
    assert r.startswith("<CompiledModel 14 source ops -> ") and len(r) < 120
    h = compiled._repr_html_()
    cycles = compiled.commands().groupby("optimised_id")["est_cycles"].sum()
    biggest = compiled.optimised_ops().set_index("optimised_id").loc[cycles.idxmax(), "name"]
    rows = _first_column_values(h)
    assert rows[0] == str(int(cycles.idxmax()))
    assert str(biggest) in h
    k, n = _note(h)
    assert n == len(compiled.optimised_ops()) and k == min(10, n)


def test_partition_result_views(cnn: tk.Model) -> None:
    from toolkit.formats.part_file import PartSpec

    res = tk.partition(cnn, PartSpec(backends=["cpu", "npu"], default="npu",
                                     opcode={"MAX_POOL_2D": "cpu"}).validate())
    r = repr(res)
    assert r == "<PartitionResult cnn.tflite: 3 part(s) over npu, cpu, 14 ops, 0 warning(s)>"
    h = res._repr_html_()
    assert "3 part(s) over npu, cpu" in h and _note(h) == (3, 3)
    # largest part (by op count) first
    parts = res.parts_table().sort_values("op_count", ascending=False)
    assert _first_column_values(h)[0] == str(int(parts["part"].iloc[0]))


def test_attribution_and_trace_views(compiled) -> None:  # type: ignore[no-untyped-def]
    _, trace = tk.run(compiled, trace=True, repeat=3)
    t = tk.read_trace(trace.to_frame())
    att = tk.trace_join(t, compiled)
    assert repr(att).startswith("<Attribution policy='macs'")
    h = att._repr_html_()
    layers = att.by_layer()
    assert _note(h) == (10, len(layers))
    assert _first_column_values(h)[0] == layers.sort_values("total_ns").iloc[-1]["layer"]
    assert f"over {att.runs} run(s)" in h and "<svg" in h
    th = t._repr_html_()
    assert f"{len(t.events):,} events, 3 run(s)" in th
    assert len(repr(t)) < 200


def test_vela_result_views(tmp_path: Path) -> None:
    pytest.importorskip("ethosu.vela")
    from toolkit.vela import read_vela, run_vela

    model = SAMPLES / "cnn_int8.tflite"
    v = read_vela(run_vela(model, tmp_path / "vela", accelerator="ethos-u55-128"), model=model)
    r = repr(v)
    assert len(r) < 200 and "scheduled op(s)" in r and "cnn_int8.tflite" in r
    h = v._repr_html_()
    layers = v.attribution().by_layer()
    assert _first_column_values(h)[0] == layers.sort_values("op_cycles").iloc[-1]["layer"]
    k, n = _note(h)
    assert n == len(layers) and k == min(10, n)
    assert "Ethos_U55_128" in h and "estimated inference time" in h
    assert np.isclose(layers["share"].sum(), 1.0)
