"""Where a capture keeps its tensors: in memory up to a budget, then in ``.npy`` files.

A :class:`TensorStore` holds one array per tensor name. Arrays are copied in (a runtime may
reuse its buffers) and kept in RAM while the total stays within ``budget_bytes``; past it, each
new array is written to a ``.npy`` file in a temporary folder and read back memory-mapped
(``np.load(..., mmap_mode="r")``), so that capturing every tensor of a large model needs only
the budget plus the page cache. The folder is removed when the store is closed or collected.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

from toolkit.errors import NumericsError

__all__ = ["TensorStore", "DEFAULT_BUDGET_BYTES"]

DEFAULT_BUDGET_BYTES = 256 << 20
"""Bytes of tensor data a capture keeps in RAM before it spills to disk."""


class TensorStore:
    """Arrays by name, in RAM up to ``budget_bytes``, then memory-mapped ``.npy`` files.

    Args:
        budget_bytes: bytes kept in RAM (0 spills every array); ``None`` never spills.
    """

    def __init__(self, budget_bytes: int | None = DEFAULT_BUDGET_BYTES) -> None:
        if budget_bytes is not None and (isinstance(budget_bytes, bool)
                                         or not isinstance(budget_bytes, int)
                                         or budget_bytes < 0):
            raise NumericsError(f"budget_bytes must be an int >= 0 or None, got "
                                f"{budget_bytes!r}", where="tk.capture",
                                fix="pass a number of bytes, e.g. budget_bytes=256 << 20")
        self.budget_bytes = budget_bytes
        self.ram_bytes = 0
        self.disk_bytes = 0
        self._arrays: dict[str, np.ndarray] = {}
        self._folder: Path | None = None
        self._finalizer: weakref.finalize | None = None

    def __len__(self) -> int:
        return len(self._arrays)

    def __contains__(self, name: object) -> bool:
        return name in self._arrays

    def names(self) -> list[str]:
        """The names stored, in the order they were put."""
        return list(self._arrays)

    @property
    def folder(self) -> Path | None:
        """The temporary folder of the spilled arrays (None while nothing spilled)."""
        return self._folder

    def put(self, name: str, value: np.ndarray) -> None:
        """Store a copy of ``value`` under ``name`` (in RAM, or spilled past the budget)."""
        a = np.asarray(value)
        if self.budget_bytes is None or self.ram_bytes + a.nbytes <= self.budget_bytes:
            self._arrays[name] = np.array(a, copy=True, order="C")
            self.ram_bytes += a.nbytes
            return
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="toolkit-capture-"))
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._folder), True)
        path = self._folder / f"{len(self._arrays)}.npy"
        np.save(path, np.ascontiguousarray(a), allow_pickle=False)
        self._arrays[name] = np.load(path, mmap_mode="r", allow_pickle=False).reshape(a.shape)
        self.disk_bytes += a.nbytes

    def get(self, name: str) -> np.ndarray:
        """The array stored under ``name`` (read-only when spilled)."""
        return self._arrays[name]

    def spilled(self, name: str) -> bool:
        """True when ``name`` lives in a memory-mapped file."""
        return isinstance(self._arrays[name], np.memmap)

    def close(self) -> None:
        """Drop every array and remove the spill folder."""
        self._arrays.clear()
        if self._finalizer is not None:
            self._finalizer()
        self._folder = None
