"""Constant folding: compute at compile time an op whose inputs are all constants.

Origins: **remove**. The op disappears and its output becomes a constant tensor (a constant
carries no origin), so the op's origin is recorded as removed (reason ``"constant folded"``).

Folded op types (float32 / int32 / int64 without quantization; results identical to the
runtime's, since every one is exactly rounded IEEE arithmetic or pure data movement): ADD,
SUB, MUL (with fused RELU-type activation), DIV (float), NEG, SQRT, RSQRT, SQUARED_DIFFERENCE,
MAXIMUM, MINIMUM, RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, PACK, CAST,
STRIDED_SLICE, GATHER, REDUCE_PROD (integers), DEQUANTIZE of float16 constants, DENSIFY of
sparse constants, and SHAPE of
a tensor whose shape is static: the shape arithmetic converters write for reshapes (SHAPE,
STRIDED_SLICE, PACK, ...) folds away when the batch is fixed.

Left alone: quantized tensors, other op types (transcendental functions differ between math
libraries), graph outputs, dynamic shapes, and results that exceed the constants they read by
more than ``max_bytes`` (default 1 MiB).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.compiler.passes._match import ACT, const_array, is_graph_output, op_is_static
from toolkit.compiler.passes.base import GraphPass
from toolkit.ir import Graph, Op

__all__ = ["FoldConstants", "FOLDERS"]

Folder = Callable[[Op, list[np.ndarray]], np.ndarray | None]


def _act(op: Op, y: np.ndarray) -> np.ndarray | None:
    code = op.activation
    if code == ACT["NONE"]:
        return y
    if not np.issubdtype(y.dtype, np.floating):
        return None
    lo, hi = {ACT["RELU"]: (0.0, None), ACT["RELU6"]: (0.0, 6.0),
              ACT["RELU_N1_TO_1"]: (-1.0, 1.0)}.get(code, (None, None))
    if lo is None:
        return None
    y = np.maximum(y, y.dtype.type(lo))
    return y if hi is None else np.minimum(y, y.dtype.type(hi))


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], floats_only: bool = False
            ) -> Folder:
    def fold(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
        if len(a) != 2 or a[0].dtype != a[1].dtype:
            return None
        if floats_only and a[0].dtype != np.float32:
            return None
        with np.errstate(all="ignore"):
            return _act(op, fn(a[0], a[1]))
    return fold


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Folder:
    def fold(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
        if a[0].dtype != np.float32 and fn is not np.negative:
            return None
        with np.errstate(all="ignore"):
            return fn(a[0])
    return fold


def _reshape(op: Op, a: list[np.ndarray]) -> np.ndarray:
    return a[0].reshape(op.outputs[0].shape)


def _transpose(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    if len(a) < 2 or a[1].size != a[0].ndim:
        return None
    return np.transpose(a[0], [int(v) for v in a[1].reshape(-1)])


def _concat(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    if len({x.dtype for x in a}) != 1:
        return None
    return _act(op, np.concatenate(a, axis=int(getattr(op.options, "axis", 0))))


def _pack(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    if len({x.dtype for x in a}) != 1:
        return None
    return np.stack(a, axis=int(getattr(op.options, "axis", 0)))


def _cast(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    dt = op.outputs[0].dtype
    if dt is None or a[0].dtype.kind not in "fiu" or dt.kind not in "fiu":
        return None
    if a[0].dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        if not np.all(np.isfinite(a[0])) or a[0].min(initial=0) < info.min \
                or a[0].max(initial=0) > info.max:
            return None
    return a[0].astype(dt)


def _dequantize(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    if a[0].dtype != np.float16 or op.outputs[0].dtype != np.float32:
        return None
    return a[0].astype(np.float32)


def _densify(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    """A sparse constant's data is its dense array (the reader densifies it)."""
    return a[0] if a[0].dtype == op.outputs[0].dtype else None


def _sqd(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d = x - y
    return d * d


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / np.sqrt(x)


def _strided_slice(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    """STRIDED_SLICE of a constant, with the begin/end/ellipsis/new-axis/shrink masks."""
    if len(a) < 3 or getattr(op.options, "offset", False):
        return None
    x = a[0]
    begin, end = (v.reshape(-1).tolist() for v in a[1:3])
    strides = a[3].reshape(-1).tolist() if len(a) > 3 else [1] * len(begin)
    if not len(begin) == len(end) == len(strides) or 0 in strides:
        return None
    masks = {m: int(getattr(op.options, m, 0) or 0) for m in
             ("beginMask", "endMask", "ellipsisMask", "newAxisMask", "shrinkAxisMask")}
    index: list[object] = []
    for i, (b, e, st) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if masks["ellipsisMask"] & bit:
            index.append(Ellipsis)
        elif masks["newAxisMask"] & bit:
            index.append(None)
        elif masks["shrinkAxisMask"] & bit:
            index.append(int(b))
        else:
            index.append(slice(None if masks["beginMask"] & bit else int(b),
                               None if masks["endMask"] & bit else int(e), int(st)))
    return np.array(x[tuple(index)])  # type: ignore[arg-type]


def _gather(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    if len(a) != 2 or a[1].dtype.kind not in "iu" or int(getattr(op.options, "batchDims", 0)
                                                         or 0):
        return None
    axis = int(getattr(op.options, "axis", 0) or 0)
    idx = a[1].astype(np.int64)
    size = a[0].shape[axis] if a[0].ndim else 0
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        return None
    return np.take(a[0], idx, axis=axis)


def _reduce_prod(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    if len(a) != 2 or a[0].dtype.kind not in "iu":
        return None
    axes = tuple(sorted({int(v) % max(a[0].ndim, 1) for v in a[1].reshape(-1)}))
    keep = bool(getattr(op.options, "keepDims", False))
    return np.prod(a[0], axis=axes, keepdims=keep).astype(a[0].dtype)


def _shape(op: Op, a: list[np.ndarray]) -> np.ndarray | None:
    """Unused: SHAPE folds from its input's static shape (see ``FoldConstants._fold``)."""
    return None


#: Op type → function computing its output from the constant input arrays (None: not folded).
FOLDERS: dict[str, Folder] = {
    "ADD": _binary(np.add), "SUB": _binary(np.subtract), "MUL": _binary(np.multiply),
    "DIV": _binary(np.divide, floats_only=True), "SQUARED_DIFFERENCE": _binary(_sqd, True),
    "MAXIMUM": _binary(np.maximum), "MINIMUM": _binary(np.minimum),
    "NEG": _unary(np.negative), "SQRT": _unary(np.sqrt), "RSQRT": _unary(_rsqrt),
    "RESHAPE": _reshape, "SQUEEZE": _reshape, "EXPAND_DIMS": _reshape,
    "TRANSPOSE": _transpose, "CONCATENATION": _concat, "PACK": _pack, "CAST": _cast,
    "DEQUANTIZE": _dequantize, "STRIDED_SLICE": _strided_slice, "GATHER": _gather,
    "REDUCE_PROD": _reduce_prod, "SHAPE": _shape, "DENSIFY": _densify,
}


def _plain(t: object) -> bool:
    q = getattr(t, "quant", None)
    return q is None or q.scale.size == 0


class FoldConstants(GraphPass):
    """Replace ops whose inputs are all constants by constant tensors.

    Args:
        max_bytes: largest result folded (bytes); a result may also not be larger than the
            constants it reads plus this bound.
    """

    name = "fold_constants"
    relation = "remove"

    def __init__(self, max_bytes: int = 1 << 20) -> None:
        self.max_bytes = max_bytes

    def run(self, graph: Graph) -> bool:
        """Fold every foldable op (consumers of new constants too); return True on change."""
        changed = False
        work = [op for op in graph.ops if op.type in FOLDERS]
        while work:
            nxt: list[Op] = []
            for op in work:
                if op.graph is not graph:
                    continue
                out = self._fold(graph, op)
                if out is not None:
                    changed = True
                    nxt.extend(c for c in out if c.type in FOLDERS)
            work = nxt
        return changed

    def _fold(self, graph: Graph, op: Op) -> list[Op] | None:
        if len(op.outputs) != 1 or not op.inputs or not op_is_static(op):
            return None
        out = op.outputs[0]
        if op.type == "SHAPE":  # the shape of a static tensor is a constant
            x = op.inputs[0]
            if x is None or out.dtype is None or out.dtype.kind not in "iu":
                return None
            return self._replace(graph, op, np.asarray(x.shape, dtype=out.dtype))
        arrays = []
        for t in op.inputs:
            a = const_array(t)
            if a is None or not _plain(t):
                return None
            arrays.append(a)
        if is_graph_output(graph, out) or not _plain(out) or out.dtype is None:
            return None
        if out.nbytes > self.max_bytes + sum(a.nbytes for a in arrays):
            return None
        try:
            y = FOLDERS[op.type](op, arrays)
        except (ValueError, TypeError, IndexError):
            return None
        if y is None:
            return None
        return self._replace(graph, op, np.asarray(y))

    def _replace(self, graph: Graph, op: Op, y: np.ndarray) -> list[Op] | None:
        """Replace ``op`` by the constant ``y`` (None when it does not fit the output)."""
        out = op.outputs[0]
        if is_graph_output(graph, out) or y.dtype != out.dtype or tuple(y.shape) != out.shape:
            return None
        const = graph.add_const(graph.unique_name(out.name + "/folded"),
                                y if y.flags.c_contiguous else y.copy())
        const.quant = out.quant
        readers = list(out.consumers)
        graph.replace_all_uses_with(out, const)
        graph.remove(op, "constant folded")
        return readers
