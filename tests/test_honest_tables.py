"""Printed tables cut to n rows are sorted by the quantity that matters and say how many rows
are shown and what share of the total they cover."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from toolkit import demo

NOTE = re.compile(r"^== (?P<title>.+): (?P<k>\d+) of (?P<n>\d+) rows shown"
                  r"(?: \(largest (?P<by>\w+) first\), (?P<pct>[\d.]+) % of the total)?$")


def _blocks(text: str) -> dict[str, tuple[re.Match[str], list[str]]]:
    out: dict[str, tuple[re.Match[str], list[str]]] = {}
    current = None
    for line in text.splitlines():
        m = NOTE.match(line)
        if m:
            current = m.group("title")
            out[current] = (m, [])
        elif current and line.startswith(("[", "done")):
            current = None
        elif current:
            out[current][1].append(line)
    return out


def test_demo_time_per_layer_is_cut_honestly(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    demo.compile_run_join(tmp_path)
    blocks = _blocks(capsys.readouterr().out)
    m, rows = blocks["time per original layer"]
    table = pd.read_csv(tmp_path / "cnn" / "by_layer.csv")
    k, n = int(m.group("k")), int(m.group("n"))
    assert (k, n) == (12, len(table)) and m.group("by") == "total_ns"
    top = table.sort_values("total_ns", ascending=False).head(k)
    assert float(m.group("pct")) == pytest.approx(
        100 * top["total_ns"].sum() / table["total_ns"].sum(), abs=0.05)
    shown = [r.split()[0] for r in rows[1:]]
    assert shown == top["layer"].tolist()   # largest first, none of the largest left out
    m, rows = blocks["rewrites, in the order the passes made them"]
    assert m.group("by") is None and int(m.group("k")) == len(rows) - 1


def test_demo_vela_table_starts_with_the_largest_layer(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    pytest.importorskip("ethosu.vela")
    demo.vela_example(tmp_path)
    blocks = _blocks(capsys.readouterr().out)
    (m, rows), = [v for t, v in blocks.items() if t.startswith("Vela's estimates")]
    table = pd.read_csv(tmp_path / "vela" / "vela_by_layer.csv")
    largest = table.sort_values("op_cycles", ascending=False)
    assert rows[1].split()[0] == largest["layer"].iloc[0]
    assert int(m.group("n")) == len(table)
    k = int(m.group("k"))
    assert float(m.group("pct")) == pytest.approx(
        100 * largest["op_cycles"].head(k).sum() / table["op_cycles"].sum(), abs=0.05)


def test_trace_join_cli_top_says_what_it_leaves_out(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    from toolkit.cli import main

    demo.compile_run_join(tmp_path)
    capsys.readouterr()
    d = tmp_path / "cnn"
    assert main(["trace-join", str(d / "runtime_trace.json"), "--compiled", str(d),
                 "--top", "3"]) == 0
    out = capsys.readouterr().out
    m = next(NOTE.match(line) for line in out.splitlines() if NOTE.match(line))
    assert m.group("title") == "by layer" and m.group("k") == "3" and m.group("n") == "12"
