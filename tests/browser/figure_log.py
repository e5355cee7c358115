"""IPython start-up file of the browser check: log every figure the kernel renders.

Copied into the kernel's ``profile_default/startup/``. Each time matplotlib renders a figure
into a PNG for display (``FigureCanvasBase.print_figure`` into a byte buffer), one JSON line is
appended to ``$TOOLKIT_FIGURE_LOG``: the PNG's ``sha1``, its pixel ``width`` / ``height``; as
the figure was when the rendering started, its ``axes`` count, ``texts`` (visible text artists
with text, annotations aside) and ``artists`` (per axes: how many patches, lines, collections
and images it holds, and whether it has a title, axis labels and a legend); ``cell`` (sha1 of
the cell being run, or None inside a widget callback) and ``thread``. The PNG itself is kept as
``figures/<sha1>.png`` beside the log. The browser check looks up every image it sees on the
page by its sha1, so it knows what the displayed picture is.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from pathlib import Path
from typing import Any

_LOG = os.environ.get("TOOLKIT_FIGURE_LOG")
_state: dict[str, Any] = {"cell": None}
_lock = threading.Lock()


def axes_structure(ax: Any) -> dict[str, Any]:
    """What one axes holds, independent of the values plotted: counts of patches (bars),
    lines, collections (scatter, error bars) and images, and whether the title, the x and y
    labels and a legend are set."""
    return {"patches": len(ax.patches), "lines": len(ax.lines),
            "collections": len(ax.collections), "images": len(ax.images),
            "title": bool(ax.get_title()), "xlabel": bool(ax.get_xlabel()),
            "ylabel": bool(ax.get_ylabel()), "legend": ax.get_legend() is not None}


def _install() -> None:
    from IPython import get_ipython
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.text import Annotation, Text

    ip = get_ipython()
    if ip is not None:
        def pre(info: Any) -> None:
            _state["cell"] = hashlib.sha1(info.raw_cell.encode()).hexdigest()

        def post(result: Any) -> None:
            _state["cell"] = None

        ip.events.register("pre_run_cell", pre)
        ip.events.register("post_run_cell", post)

    original = FigureCanvasBase.print_figure

    def print_figure(self: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
        fig = self.figure
        axes = len(fig.axes)  # as the figure was when this rendering started
        texts = sum(1 for t in fig.findobj(Text)  # annotations come and go with the data
                    if t.get_visible() and t.get_text() and not isinstance(t, Annotation))
        artists = [axes_structure(ax) for ax in fig.axes]
        out = original(self, filename, *args, **kwargs)
        if isinstance(filename, io.BytesIO):
            data = filename.getvalue()
            if data[:8] == b"\x89PNG\r\n\x1a\n":
                sha = hashlib.sha1(data).hexdigest()
                row = {"sha1": sha, "width": int.from_bytes(data[16:20], "big"),
                       "height": int.from_bytes(data[20:24], "big"),
                       "axes": axes, "texts": texts, "artists": artists, "cell": _state["cell"],
                       "thread": threading.current_thread().name}
                with _lock:
                    with open(_LOG, "a") as f:  # type: ignore[arg-type]
                        f.write(json.dumps(row) + "\n")
                    (Path(_LOG).parent / "figures").mkdir(exist_ok=True)  # type: ignore[arg-type]
                    (Path(_LOG).parent / "figures" / f"{sha}.png").write_bytes(  # type: ignore[arg-type]
                        data)
        return out

    FigureCanvasBase.print_figure = print_figure  # type: ignore[method-assign]


if _LOG:
    _install()
