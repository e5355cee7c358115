"""TFLite's STRIDED_SLICE semantics as a NumPy index, shared by the NumPy kernel and the C++
generator's index maps (which must select the same elements)."""

from __future__ import annotations

from collections.abc import Sequence
from types import EllipsisType

__all__ = ["slice_index", "strided_slice_index"]


def strided_slice_index(begin: Sequence[int], end: Sequence[int], strides: Sequence[int], *,
                        begin_mask: int, end_mask: int, ellipsis_mask: int, new_axis_mask: int,
                        shrink_axis_mask: int, offset: bool
                        ) -> tuple[int | slice | EllipsisType | None, ...]:
    """The index ``x[index]`` that STRIDED_SLICE takes: per axis an ellipsis, a new axis, a
    shrunk (integer) axis or a slice; with ``offset``, ``end`` counts from ``begin``.
    ``begin``, ``end`` and ``strides`` have one entry per axis (the caller checks lengths and
    that no stride is 0)."""
    index: list[int | slice | EllipsisType | None] = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=True)):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(b)
        else:
            index.append(slice(None if begin_mask & bit else b,
                               None if end_mask & bit else (b + e if offset else e), s))
    return tuple(index)


def slice_index(begin: Sequence[int], size: Sequence[int], shape: Sequence[int]
                ) -> tuple[slice, ...]:
    """The index ``x[index]`` that SLICE takes on a tensor of ``shape``: per axis
    ``slice(begin, begin + size)``, a size of -1 running to the end.

    Raises ValueError (its message names the axis) when ``begin``/``size`` do not have one
    value per axis or a slice falls outside its axis; callers turn it into their own error."""
    if len(begin) != len(shape) or len(size) != len(shape):
        raise ValueError(f"begin/size need {len(shape)} values")
    index = []
    for d, (b, s) in enumerate(zip(begin, size, strict=True)):
        stop = shape[d] if s == -1 else b + s
        if b < 0 or stop > shape[d] or stop < b:
            raise ValueError(f"slice [{b}, {stop}) is out of range for axis {d} of size "
                             f"{shape[d]}")
        index.append(slice(b, stop))
    return tuple(index)
