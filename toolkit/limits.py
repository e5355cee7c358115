"""Bounds on the work a file may ask for, stated once.

A file says how big things are (a tensor's rank, a shape vector, the rows of an activation, the
bytes a compressed trace unpacks to and per compressed byte, the events of a trace). Readers
and stages check what a file claims against these bounds before doing the work, and fail fast
with a :class:`~toolkit.errors.LimitError` that names the limit and how to raise it, instead of
running for minutes or exhausting memory.

Every bound can be raised for one block of code::

    from toolkit.limits import limits
    with limits(max_stripes_per_op=1_000_000):
        compiled = tk.compile(huge_model)

or for the process with :func:`set_limits`. The current values are :func:`current`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolkit.errors import LimitError

__all__ = ["Limits", "current", "limits", "set_limits", "check"]


@dataclass(frozen=True)
class Limits:
    """The bounds (each a maximum).

    Attributes:
        max_tensor_rank: dimensions of one tensor shape.
        max_tensor_elements: elements of one tensor (activations included).
        max_shape_entries_per_file_byte: shape-vector entries a model may decode per byte of
            the file (a shape entry takes 4 bytes, so an honest file stays below 1; a file
            whose tensors all point at one huge shared vector does not).
        max_stripes_per_op: commands the lowering may cut one op into.
        max_decompressed_bytes: bytes one compressed input file may unpack to.
        max_compression_ratio: bytes unpacked per compressed byte read, checked once 64 MiB
            came out: traces compress 5-30x, a bomb (a 1 MB gzip of a 1 GiB string) ~1000x.
        max_events_per_file: events (rows) one trace file may hold; 2**27 (134 M): a frame
            of that many events already takes several GB.
    """

    max_tensor_rank: int = 16
    max_tensor_elements: int = 1 << 34
    max_shape_entries_per_file_byte: int = 1
    max_stripes_per_op: int = 1 << 16
    max_decompressed_bytes: int = 8 << 30
    max_compression_ratio: int = 256
    max_events_per_file: int = 1 << 27


DEFAULTS = Limits()
"""The bounds when nothing was changed (a frozen value, so one instance serves everyone)."""

_CURRENT: contextvars.ContextVar[Limits] = contextvars.ContextVar("toolkit_limits",
                                                                  default=DEFAULTS)


def current() -> Limits:
    """The bounds in force (for this thread or task)."""
    return _CURRENT.get()


def _replace(base: Limits, changes: dict[str, Any]) -> Limits:
    fields = {f.name for f in dataclasses.fields(Limits)}
    for name, value in changes.items():
        if name not in fields:
            raise LimitError(f"unknown limit {name!r}", fix=f"limits are {sorted(fields)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LimitError(
                f"limit {name} must be a positive integer, got {value!r}",
                fix=f"give {name} as a positive integer",
            )
    return dataclasses.replace(base, **changes)


@contextlib.contextmanager
def limits(**changes: int) -> Iterator[Limits]:
    """Raise (or lower) bounds for the block; yields the bounds in force inside it."""
    token = _CURRENT.set(_replace(current(), changes))
    try:
        yield current()
    finally:
        _CURRENT.reset(token)


def set_limits(**changes: int) -> Limits:
    """Change bounds for the rest of the process (this context); return the new bounds."""
    new = _replace(current(), changes)
    _CURRENT.set(new)
    return new


def check(name: str, value: int, *, what: str, where: str | None = None) -> None:
    """Raise :class:`LimitError` when ``value`` exceeds the bound ``name``.

    The message names the claim (``what``), the bound, and how to raise it.
    """
    bound = getattr(current(), name)
    if value > bound:
        raise LimitError(
            f"{what}: {value:,} exceeds the limit {name}={bound:,}", where=where,
            fix=f"if the file is trusted, raise it: with toolkit.limits.limits({name}=...): ...")
