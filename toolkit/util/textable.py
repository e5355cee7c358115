"""Terminal tables that fit: a few chosen columns, times in µs/ms, shares in %, long names
elided in the middle, every line at most :data:`WIDTH` characters.

The command line prints these by default; ``--wide`` prints every column of the frame
(:func:`wide_text`) and ``--format csv|json`` prints the frame for machines
(:func:`machine_text`).
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = ["WIDTH", "Column", "elide", "fmt_ns", "fmt_ms", "fmt_share", "fmt_count",
           "fit_table", "wide_text", "machine_text", "wrap", "FORMATS"]

WIDTH = 100
"""Characters per line of every table and message the command line prints by default."""

FORMATS = ("table", "csv", "json")
"""Values of ``--format``: ``table`` (fits :data:`WIDTH`), ``csv`` and ``json`` (every
column, for machines)."""

_MIN_FLEX = 16


def elide(text: str, width: int) -> str:
    """Return ``text`` cut to ``width`` characters by replacing its middle with ``…`` (the
    start and the end of a layer path say the most); unchanged when it fits."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def fmt_ns(ns: Any) -> str:
    """A duration in ns as people read it: ``850 ns``, ``12.3 µs``, ``4.56 ms``, ``1.23 s``."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    v = float(ns)
    a = abs(v)
    if a < 1e3:
        return f"{v:.0f} ns"
    if a < 1e6:
        return f"{v / 1e3:.3g} µs" if a < 1e5 else f"{v / 1e3:.0f} µs"
    if a < 1e9:
        return f"{v / 1e6:.3g} ms" if a < 1e8 else f"{v / 1e6:.0f} ms"
    return f"{v / 1e9:.3g} s"


def fmt_ms(ms: Any) -> str:
    """A duration in ms, as :func:`fmt_ns` writes it."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "-"
    return fmt_ns(float(ms) * 1e6)


def fmt_share(share: Any) -> str:
    """A fraction (0..1) as a percentage with one decimal: ``77.7 %``."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "-"
    return f"{float(share) * 100:.1f} %"


def fmt_count(n: Any) -> str:
    """An integer count with thousands separators."""
    try:
        return f"{int(n):,}"
    except (TypeError, ValueError):
        return str(n)


def _plain(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(value)


@dataclass(frozen=True)
class Column:
    """One printed column: the frame's ``source`` column, its ``title``, how a value is
    written (``fmt``), whether it is right-aligned, and whether it takes the width left over
    (``flex``: one per table, elided in the middle)."""

    source: str
    title: str
    fmt: Callable[[Any], str] = _plain
    right: bool = False
    flex: bool = False


def fit_table(df: pd.DataFrame, columns: Sequence[Column], width: int = WIDTH) -> str:
    """Text of ``df`` in ``columns`` with every line at most ``width`` characters: the flex
    column gets what the others leave (at least 16) and its long values are elided in the
    middle; any other value longer than its share is elided too. Columns missing from
    ``df`` are skipped. Returns ``(empty)`` for a frame without rows."""
    cols = [c for c in columns if c.source in df.columns]
    if not len(df):
        return "(empty)"
    cells = [[c.fmt(v) for v in df[c.source].tolist()] for c in cols]
    widths = [max([len(c.title), *map(len, cell)]) for c, cell in zip(cols, cells)]
    flex = next((i for i, c in enumerate(cols) if c.flex), None)
    gaps = 2 * (len(cols) - 1)
    if flex is not None:
        others = sum(w for i, w in enumerate(widths) if i != flex) + gaps
        widths[flex] = max(min(widths[flex], width - others), _MIN_FLEX, len(cols[flex].title))
    while sum(widths) + gaps > width:  # still too wide: cut the widest fixed column
        i = max((j for j in range(len(cols)) if j != flex), key=lambda j: widths[j],
                default=None)
        if i is None or widths[i] <= 8:
            break
        widths[i] = max(8, widths[i] - (sum(widths) + gaps - width))
    lines = []
    for row in [[c.title for c in cols], *zip(*cells)]:
        parts = []
        for c, w, v in zip(cols, widths, row):
            v = elide(v, w)
            parts.append(v.rjust(w) if c.right else v.ljust(w))
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def wide_text(df: pd.DataFrame) -> str:
    """Text of every column and row of ``df``, nothing elided (``--wide``)."""
    if not len(df):
        return "(empty)"
    with pd.option_context("display.max_rows", None, "display.max_columns", None,
                           "display.width", None, "display.max_colwidth", None):
        return df.to_string(index=False)


def machine_text(df: pd.DataFrame, fmt: str) -> str:
    """``df`` as CSV (``fmt="csv"``, a header row then one line per row) or JSON (a list of
    one object per row; tuples become lists, NaN becomes null)."""
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    records = json.loads(df.to_json(orient="records", default_handler=str))
    return json.dumps(records, indent=None, ensure_ascii=False)


def wrap(text: str, width: int = WIDTH) -> str:
    """``text`` wrapped at ``width`` (continuation lines indented by two spaces; a word longer
    than the width, such as a long path, is elided in the middle)."""
    words = [elide(w, width - 2) for w in text.split(" ")]
    return textwrap.fill(" ".join(words), width=width, subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)
