"""Progress bars for loops a user can make long (repeat runs, big files, Vela, partition writes).

:func:`progress` wraps an iterable in a ``tqdm.auto`` bar (a widget in Jupyter, text on a
terminal) that appears only after :data:`DELAY_S` seconds, so short loops stay silent.
Whether bars are shown at all (:func:`progress_enabled`): ``TOOLKIT_PROGRESS=1`` forces them
on and ``TOOLKIT_PROGRESS=0`` off; otherwise they are off under pytest and on when stderr is
a terminal or the code runs in a Jupyter kernel. Bars always go to stderr, never to stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["progress", "progress_enabled", "ByteProgress", "DELAY_S"]

T = TypeVar("T")

DELAY_S = float(os.environ.get("TOOLKIT_PROGRESS_DELAY", "0.5"))
"""Seconds a loop runs before its bar appears (``TOOLKIT_PROGRESS_DELAY`` sets it)."""


def _in_jupyter_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    ip = shell.get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def progress_enabled() -> bool:
    """True when progress bars should be drawn (see the module docstring for the rules)."""
    forced = os.environ.get("TOOLKIT_PROGRESS", "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    if _in_jupyter_kernel():
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress(iterable: Iterable[T], *, total: int | float | None = None, desc: str = "",
             unit: str = "it", delay: float | None = None, **kw: Any) -> Iterator[T]:
    """Iterate ``iterable`` with a progress bar on stderr when :func:`progress_enabled`.

    ``total`` defaults to ``len(iterable)`` when it has one; ``desc`` and ``unit`` label the
    bar; ``delay`` (default :data:`DELAY_S`) is how long the loop runs before the bar shows.
    Returns an iterator over the same items.
    """
    if not progress_enabled():
        return iter(iterable)
    from tqdm.auto import tqdm

    kw.update({k: v for k, v in _fallback_size().items() if k not in kw})
    return iter(tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                     delay=_delay() if delay is None else delay, leave=False, **kw))


def _fallback_size() -> dict[str, int]:
    """``{}`` (tqdm measures the terminal) unless stderr is a terminal that reports no size (a
    pseudo-terminal nobody sized, as under some CI runners and ``docker exec``): then 80
    columns and 24 rows, since tqdm would otherwise draw nothing at all."""
    try:
        if sys.stderr.isatty():
            size = os.get_terminal_size(sys.stderr.fileno())
            if size.columns <= 0 or size.lines <= 0:
                return {"ncols": size.columns or 80, "nrows": size.lines or 24}
    except (AttributeError, ValueError, OSError):
        pass
    return {}


def _delay() -> float:
    return float(DELAY_S)


class ByteProgress:
    """A file-like reader that advances a bytes bar as it is read (for large files).

    Use as ``with ByteProgress(f, total, desc) as r: data = r.read()``; reads are done in
    chunks so the bar moves. Without progress it reads straight through.
    """

    CHUNK = 8 << 20

    def __init__(self, raw: Any, total: int, desc: str) -> None:
        self._raw = raw
        self.name = getattr(raw, "name", "<file>")
        self._bar: Any = None
        if progress_enabled():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True,
                             unit_divisor=1024, file=sys.stderr, delay=_delay(), leave=False,
                             **_fallback_size())

    def read(self, n: int = -1) -> bytes:
        """Read ``n`` bytes (all when negative), advancing the bar."""
        if self._bar is None:
            return bytes(self._raw.read(n))
        if n >= 0:
            data = bytes(self._raw.read(n))
            self._bar.update(len(data))
            return data
        chunks = []
        while True:
            chunk = self._raw.read(self.CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            self._bar.update(len(chunk))
        return b"".join(chunks)

    def close(self) -> None:
        """Close the bar and the underlying file."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._raw.close()

    def __enter__(self) -> ByteProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
