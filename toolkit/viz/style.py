"""One Matplotlib style for every toolkit figure, pandas' plots included.

:func:`use_style` sets Matplotlib's ``rcParams`` (fonts readable at notebook width, a light
grid, no top/right spines, the toolkit's colour cycle), so a ``DataFrame.plot`` beside a
toolkit figure looks the same. :data:`PALETTE` is 20 colours chosen to stay distinct from one
another (Matplotlib's ``tab10``, then ten of Sasha Trubetskoy's distinct colours instead of
``tab20``'s lighter twins, which look alike in a legend).
"""

from __future__ import annotations

from typing import Any

from toolkit.layer_names import NO_LAYER

__all__ = ["PALETTE", "STYLE", "use_style", "setup_notebook", "ROOT_LAYER", "layer_label",
           "TABLE_CSS"]

PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#000075", "#808000", "#f032e6", "#469990", "#9a6324",
    "#800000", "#42d4f4", "#bfef45", "#ffe119", "#dcbeff",
)

STYLE: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "figure.figsize": (8.0, 4.5),
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "axes.grid": True,
    "axes.grid.axis": "x",
    "grid.color": "0.88",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
"""The rcParams :func:`use_style` sets (plus the colour cycle of :data:`PALETTE`)."""

ROOT_LAYER = NO_LAYER
"""How tables and figures spell the unnamed root layer (a layer name ``""``): the row every
join lists the ops of no layer under, :data:`toolkit.layer_names.NO_LAYER`."""


def layer_label(name: str) -> str:
    """The label of a layer in a table or figure: :data:`ROOT_LAYER` (``(no layer)``, the
    joins' row) for the unnamed root layer (``""``), else the name."""
    return name if name else ROOT_LAYER


def use_style() -> None:
    """Apply the toolkit's Matplotlib style to every figure drawn from now on (the toolkit's
    and pandas' alike); idempotent."""
    import matplotlib as mpl
    from cycler import cycler

    params: Any = mpl.rcParams  # typed by key literals; STYLE is a plain dict of the same keys
    params.update(STYLE)
    params["axes.prop_cycle"] = cycler(color=list(PALETTE))


TABLE_CSS = """<style>
/* toolkit: tables wrap long names in their cells instead of scrolling sideways */
.jp-OutputArea-output table.dataframe, .output_html table.dataframe,
.jp-OutputArea-output table.toolkit-table { max-width: 100%; table-layout: auto; }
.jp-OutputArea-output table.dataframe td, .jp-OutputArea-output table.dataframe th,
.output_html table.dataframe td, .output_html table.dataframe th,
.jp-OutputArea-output table.toolkit-table td, .jp-OutputArea-output table.toolkit-table th {
  white-space: normal; overflow-wrap: anywhere; max-width: 28em; }
</style>"""
"""CSS that :func:`setup_notebook` adds to the page: table cells wrap long names."""


def setup_notebook(max_colwidth: int = 48) -> None:
    """Set up a notebook the toolkit way: :func:`use_style` for every figure; pandas tables
    that fit the output area (cells of at most ``max_colwidth`` characters, long names wrapped
    in their cell instead of scrolling the table sideways); nothing else is changed."""
    import pandas as pd

    use_style()
    pd.set_option("display.max_colwidth", max_colwidth)
    pd.set_option("display.width", 100)
    try:
        from IPython.display import HTML, display
    except ImportError:  # pragma: no cover - outside IPython there is no page to style
        return
    display(HTML(TABLE_CSS))
