"""Figures (matplotlib) and interactive explorers (ipywidgets) for notebooks.

Importing :mod:`toolkit.viz` applies the toolkit's Matplotlib style (:func:`use_style`), so
every figure of a notebook, pandas' included, has the same look and palette.
"""

from toolkit.viz.graph import draw_graph, layout, origin_colors, palette
from toolkit.viz.style import PALETTE, ROOT_LAYER, layer_label, setup_notebook, use_style

use_style()

__all__ = ["draw_graph", "layout", "origin_colors", "palette", "PALETTE", "ROOT_LAYER",
           "layer_label", "setup_notebook", "use_style"]
