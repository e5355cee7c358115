"""TFLite/circle sparse tensors: decode a ``SparsityParameters`` table and its values.

A sparse constant stores only its kept values; its ``sparsity`` field says where they go
(TFLite's ``FormatConverter``, ``tensorflow/lite/kernels/internal/utils/sparsity_format_
converter.cc``):

* the tensor's ``shape`` is the dense shape, of rank ``r``;
* ``block_map[k]`` names the dense dimension that block dimension ``k`` divides; the tensor is
  traversed in ``r + len(block_map)`` levels: the ``r`` dense dimensions (divided by their
  block sizes) then the block dimensions, permuted by ``traversal_order``;
* ``dim_metadata[level]`` is DENSE (every index ``0 .. dense_size-1``) or SPARSE_CSR (for each
  position of the levels before it, the indices ``array_indices[segments[p]:segments[p+1]]``).

Traversing every level in order visits the kept values in storage order. :func:`densify`
returns the dense array; :func:`check_sparsity` validates the metadata against the shape and
the buffer first. Pure format code: plain arrays in, plain arrays out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SparseLayout", "SparsityError", "read_layout", "densify", "dense_positions"]

DENSE, SPARSE_CSR = 0, 1


class SparsityError(ValueError):
    """The sparsity metadata does not hold together (the message says what)."""


@dataclass(frozen=True)
class SparseLayout:
    """The sparsity of one tensor, as plain values.

    ``levels`` holds one entry per traversal level: ``("dense", size)`` or
    ``("csr", segments, indices)`` (1-D int64 arrays)."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    levels: tuple[tuple[Any, ...], ...]


def _vector(v: Any) -> np.ndarray:
    if v is None or getattr(v, "values", None) is None:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(v.values, dtype=np.int64).reshape(-1)


def read_layout(sp: Any) -> SparseLayout:
    """The layout of a ``SparsityParametersT`` object (from the schema's object API)."""
    order = tuple(int(x) for x in (sp.traversalOrder if sp.traversalOrder is not None
                                   else ()))
    bmap = tuple(int(x) for x in (sp.blockMap if sp.blockMap is not None else ()))
    levels: list[tuple[Any, ...]] = []
    for i, dm in enumerate(sp.dimMetadata or ()):
        if dm.format == DENSE:
            levels.append(("dense", int(dm.denseSize)))
        elif dm.format == SPARSE_CSR:
            levels.append(("csr", _vector(dm.arraySegments), _vector(dm.arrayIndices)))
        else:
            raise SparsityError(f"dim_metadata {i} has unknown format {dm.format}")
    return SparseLayout(order, bmap, tuple(levels))


def dense_positions(layout: SparseLayout, shape: tuple[int, ...]) -> np.ndarray:
    """Flat (C-order) positions in the dense tensor of ``shape`` of every stored value, in
    storage order. Raises :class:`SparsityError` for metadata that does not fit the shape."""
    rank = len(shape)
    nb = len(layout.block_map)
    n = rank + nb
    order = layout.traversal_order or tuple(range(rank))
    if sorted(order) != list(range(n)):
        raise SparsityError(f"traversal_order {list(order)} is not a permutation of "
                            f"0..{n - 1} (rank {rank} with {nb} block dimensions)")
    if len(layout.levels) != n:
        raise SparsityError(f"{len(layout.levels)} dim_metadata entries for {n} levels")
    if any(not 0 <= b < rank for b in layout.block_map) or len(set(layout.block_map)) != nb:
        raise SparsityError(f"block_map {list(layout.block_map)} does not name distinct "
                            f"dimensions of a rank-{rank} tensor")
    if any(o >= rank for o in order[:rank]):
        raise SparsityError(f"traversal_order {list(order)} visits a block dimension before "
                            "every dense dimension")
    # the size of each traversed dimension: dense dims divided by their block sizes
    sizes = [0] * n
    for level, dim in enumerate(order):
        spec = layout.levels[level]
        if spec[0] == "dense":
            sizes[dim] = spec[1]
    block = [1] * rank
    for k, d in enumerate(layout.block_map):
        bs = sizes[rank + k]
        if layout.levels[order.index(rank + k)][0] != "dense" or bs <= 0:
            raise SparsityError(f"block dimension {k} is not dense with a positive size")
        if shape[d] % bs:
            raise SparsityError(f"block size {bs} does not divide dimension {d} of {shape}")
        block[d] = bs
    for d in range(rank):
        if layout.levels[order.index(d)][0] == "dense" and sizes[d] * block[d] != shape[d]:
            raise SparsityError(f"dim_metadata of dimension {d} says {sizes[d]} "
                                f"(x block {block[d]}), the shape says {shape[d]}")
        if layout.levels[order.index(d)][0] == "csr":
            sizes[d] = shape[d] // block[d]
    prev = np.zeros(1, dtype=np.int64)
    idx: list[np.ndarray] = []
    for level, spec in enumerate(layout.levels):
        size = sizes[order[level]]
        if spec[0] == "dense":
            if spec[1] < 0:
                raise SparsityError(f"dim_metadata {level} has dense_size {spec[1]}")
            reps = np.repeat(prev, spec[1])
            here = np.tile(np.arange(spec[1], dtype=np.int64), prev.size)
            idx = [np.repeat(a, spec[1]) for a in idx]
            prev = reps * spec[1] + here
        else:
            seg, ind = spec[1], spec[2]
            if seg.size < int(prev.max(initial=-1)) + 2:
                raise SparsityError(f"dim_metadata {level}: {seg.size} array_segments for "
                                    f"{int(prev.max(initial=-1)) + 1} positions")
            lo, hi = seg[prev], seg[prev + 1]
            counts = hi - lo
            if (counts < 0).any() or (lo < 0).any() or int(hi.max(initial=0)) > ind.size:
                raise SparsityError(f"dim_metadata {level}: array_segments are not ascending "
                                    f"offsets into its {ind.size} array_indices")
            total = int(counts.sum())
            starts = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
            pos = np.arange(total, dtype=np.int64) + starts
            here = ind[pos]
            if here.size and (int(here.min()) < 0 or int(here.max()) >= size):
                raise SparsityError(f"dim_metadata {level}: an array index is outside "
                                    f"0..{size - 1}")
            idx = [np.repeat(a, counts) for a in idx]
            prev = pos
        idx.append(here)
    orig = [np.zeros(prev.size, dtype=np.int64) for _ in range(rank)]
    for level, dim in enumerate(order):
        if dim < rank:
            orig[dim] = idx[level]
    for level, dim in enumerate(order):
        if dim >= rank:
            d = layout.block_map[dim - rank]
            orig[d] = orig[d] * block[d] + idx[level]
    flat = np.zeros(prev.size, dtype=np.int64)
    for d in range(rank):
        flat = flat * shape[d] + orig[d]
    return flat


def densify(values: np.ndarray, layout: SparseLayout, shape: tuple[int, ...]) -> np.ndarray:
    """The dense array of ``shape`` whose stored values are ``values`` (zeros elsewhere).

    Raises :class:`SparsityError` when the metadata does not fit the shape or names another
    number of values than ``values`` holds."""
    flat = dense_positions(layout, shape)
    if flat.size != values.size:
        raise SparsityError(f"the sparsity metadata places {flat.size} values, the buffer "
                            f"holds {values.size}")
    out = np.zeros(math.prod(shape), dtype=values.dtype)
    out[flat] = values.reshape(-1)
    return out.reshape(shape)
