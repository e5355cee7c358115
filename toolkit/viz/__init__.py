"""Figures (matplotlib) and interactive explorers (ipywidgets) for notebooks."""

from toolkit.viz.graph import draw_graph, layout, origin_colors, palette

__all__ = ["draw_graph", "layout", "origin_colors", "palette"]
