"""Pause Python's cyclic garbage collector around code that builds many objects it keeps."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused_gc"]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; restore its previous state after.

    Readers and builders that create tens of thousands of objects and keep them all (a model's
    tensors and ops, a trace's events, a compiled graph) would otherwise trigger collection
    after collection, each scanning everything built so far, so the work grows faster than
    linearly while freeing nothing.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
