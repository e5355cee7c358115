"""Honest cut tables and rich (HTML) views, shared by every object a notebook shows.

A table cut to ``n`` rows is sorted by the quantity that matters and says so: "k of n shown,
x % of the total". :func:`top_rows` makes the cut and the note, :func:`format_top` prints it
as text (CLI, demo), :func:`html_table` renders it for ``_repr_html_``, :func:`html_bars` draws a
small inline SVG bar chart and :func:`html_view` puts a title, a summary line and sections
together. Only pandas is imported, so any layer may use this module.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["TopRows", "top_rows", "format_top", "html_table", "html_bars", "html_view"]


@dataclass(frozen=True)
class TopRows:
    """The first rows of a table sorted by ``by``, with what was left out.

    ``frame`` holds the rows shown; ``shown`` / ``total_rows`` count rows; ``covered`` /
    ``total`` sum ``by`` over the rows shown / all rows (None when ``by`` is None).
    """

    frame: pd.DataFrame
    shown: int
    total_rows: int
    by: str | None
    covered: float | None
    total: float | None

    @property
    def note(self) -> str:
        """E.g. ``"5 of 14 rows shown (largest total_ns first), 93.1 % of the total"``."""
        if self.by is None:
            return f"{self.shown} of {self.total_rows} rows shown"
        text = f"{self.shown} of {self.total_rows} rows shown (largest {self.by} first)"
        if self.total:
            text += f", {100 * (self.covered or 0.0) / self.total:.1f} % of the total"
        return text


def top_rows(df: pd.DataFrame, by: str | None = None, n: int = 10,
             ascending: bool = False) -> TopRows:
    """Return the ``n`` rows of ``df`` with the largest ``by`` (all rows when ``by`` is None
    keep their order) and how much of the total they cover."""
    n = max(int(n), 0)
    if by is None:
        return TopRows(df.head(n), min(n, len(df)), len(df), None, None, None)
    values = pd.to_numeric(df[by], errors="coerce").fillna(0)
    order = values.sort_values(ascending=ascending, kind="stable").index
    head = df.loc[order[:n]]
    return TopRows(head, len(head), len(df), by, float(values.loc[order[:n]].sum()),
                   float(values.sum()))


def format_top(df: pd.DataFrame, by: str | None = None, n: int = 10, *,
               title: str | None = None, columns: Sequence[str] | None = None) -> str:
    """Text of the top ``n`` rows by ``by`` with a title line and the "k of n shown" note."""
    cut = top_rows(df, by, n)
    frame = cut.frame if columns is None else cut.frame[list(columns)]
    with pd.option_context("display.max_rows", n + 5, "display.max_columns", 30,
                           "display.width", 160, "display.max_colwidth", 60):
        body = frame.to_string(index=False) if len(frame) else "(empty)"
    head = f"== {title}: {cut.note}" if title else f"({cut.note})"
    return f"{head}\n{body}"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"


def html_table(df: pd.DataFrame, by: str | None = None, n: int = 10, *,
               columns: Sequence[str] | None = None, caption: str | None = None) -> str:
    """An HTML table of the top ``n`` rows by ``by`` with the "k of n shown" note below."""
    cut = top_rows(df, by, n)
    frame = cut.frame if columns is None else cut.frame[list(columns)]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False, name=None))
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return (f"<table class='toolkit-table'>{cap}<thead><tr>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            f"<div class='toolkit-note' style='color:#666;font-size:90%'>"
            f"{html.escape(cut.note)}</div>")


def html_bars(labels: Sequence[str], values: Sequence[float], *, unit: str = "",
              title: str = "", width: int = 420, color: str = "#4c78a8") -> str:
    """A small horizontal bar chart as inline SVG: one bar per label, the value and unit
    written beside it, a title above. Returns ``""`` when there is nothing to draw."""
    vals = [float(v) for v in values]
    if not vals or max(vals) <= 0:
        return ""
    row, label_w, top = 16, 170, 20
    bar_w = width - label_w - 90
    peak = max(vals)
    height = top + row * len(vals) + 4
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"role='img' aria-label='{html.escape(title)}' style='font:11px sans-serif'>",
             f"<text x='0' y='13' font-weight='bold'>{html.escape(title)}</text>"]
    for i, (lab, v) in enumerate(zip(labels, vals)):
        y = top + i * row
        short = lab if len(lab) <= 26 else "…" + lab[-25:]
        w = max(bar_w * v / peak, 0.0)
        parts.append(f"<text x='{label_w - 4}' y='{y + 11}' text-anchor='end'>"
                     f"<title>{html.escape(lab)}</title>{html.escape(short)}</text>")
        parts.append(f"<rect x='{label_w}' y='{y + 2}' width='{w:.1f}' height='{row - 4}' "
                     f"fill='{color}'/>")
        parts.append(f"<text x='{label_w + w + 4:.1f}' y='{y + 11}'>"
                     f"{html.escape(_fmt(v))}{html.escape(unit)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def html_view(title: str, summary: str, sections: Sequence[tuple[str, str]] = (),
              figure: str = "") -> str:
    """A rich view: bold title, one summary line, an optional inline figure, then each
    ``(heading, html)`` section."""
    out = [f"<div class='toolkit-view'><b>{html.escape(title)}</b> "
           f"<span>{html.escape(summary)}</span>"]
    if figure:
        out.append(f"<div>{figure}</div>")
    for heading, body in sections:
        out.append(f"<details open><summary>{html.escape(heading)}</summary>{body}</details>")
    out.append("</div>")
    return "".join(out)
