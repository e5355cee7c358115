"""What the converters of :mod:`toolkit.importers.onnx_lower` share: the value record
(:class:`_V`: an ONNX value's IR tensor, whether it is held NHWC, its constant data), the
converter registry (:data:`LOWERERS`, filled by ``onnx_lower_math``, ``onnx_lower_nn`` and
``onnx_lower_shape``), options, axes and the layout of element-wise operands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.builder import options_for as _builder_options
from toolkit.ir import Tensor
from toolkit.schema import OPTIONS_CLASS

if TYPE_CHECKING:
    from toolkit.importers.onnx_lower import _Lowerer


#: ``custom_code`` of the CUSTOM op that runs one ONNX node with ``onnx.reference``.
REFERENCE_OP = "ONNX_REFERENCE"
#: The ai.onnx opsets the lowering knows (inclusive); a node of another opset runs
#: reference-only.
OPSET_RANGE = (7, 21)
_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)
_AXIS_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # ONNX (NCHW) axis -> axis of the NHWC tensor
_F32_MIN = float(np.finfo(np.float32).min)
_FOLD_MAX = 1 << 22  # elements: larger constant results stay ops

_OPTIONS = {
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "MIRROR_PAD": "MirrorPadOptions", "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions",
    "PADV2": "PadV2Options", "SPLIT_V": "SplitVOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "TILE": "TileOptions", "SELECT_V2": "SelectV2Options",
    "BROADCAST_TO": None, "LOG_SOFTMAX": "LogSoftmaxOptions", "FILL": "FillOptions",
    "RANGE": "RangeOptions", "TRANSPOSE_CONV": "TransposeConvOptions",
}


_KEEPS_QUANT = frozenset({"RESHAPE", "TRANSPOSE", "STRIDED_SLICE", "SLICE", "PAD", "GATHER",
                          "MAX_POOL_2D", "SQUEEZE", "EXPAND_DIMS", "BROADCAST_TO", "TILE"})


class _NoLoweringError(Exception):
    """A node the lowering does not handle: it runs reference-only (the message says why)."""


def _options(op_type: str, **fields: Any) -> Any:
    if op_type in _OPTIONS:
        name = _OPTIONS[op_type]
        if name is None or name not in OPTIONS_CLASS:
            return None
        obj = OPTIONS_CLASS[name]()
        for k, v in fields.items():
            setattr(obj, k, v)
        return obj
    return _builder_options(op_type, **fields)


@dataclass
class _V:
    """An ONNX value: its IR tensor (``nhwc``: a 4-D value held in NHWC order) and, for a
    constant, its data in ONNX order."""

    t: Tensor | None
    nhwc: bool = False
    const: np.ndarray | None = None
    shape: tuple[int, ...] = ()
    dtype: Any = np.float32



def _dequantize_array(x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int
                      ) -> np.ndarray:
    """ONNX DequantizeLinear of a constant: ``(x - zp) * scale`` in float32 (per axis when
    ``scale`` has several values)."""
    shape = [1] * x.ndim
    if scale.size > 1:
        shape[axis % x.ndim] = scale.size
    s = np.asarray(scale, np.float32).reshape(shape if scale.size > 1 else ())
    z = np.zeros((), np.int64) if zp is None else np.asarray(zp).astype(np.int64).reshape(
        shape if scale.size > 1 else ())
    return ((x.astype(np.int64) - z).astype(np.float32) * s).astype(np.float32)



LOWERERS: dict[str, Callable[[_Lowerer], None]] = {}


def _lowers(*types: str) -> Callable[[Callable[[_Lowerer], None]], Callable[[_Lowerer], None]]:
    def deco(fn: Callable[[_Lowerer], None]) -> Callable[[_Lowerer], None]:
        for t in types:
            LOWERERS[t] = fn
        return fn
    return deco


def _norm(axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise _NoLoweringError(f"axis {axis} is out of range for rank {rank}")
    return a


def _same_layout(lw: _Lowerer, v: _V) -> tuple[Tensor, bool]:
    if v.t is None:
        return lw.tensor_of(v), False
    return v.t, v.nhwc



def _nhwc_const(c: np.ndarray) -> np.ndarray:
    """A constant broadcasting against an NCHW 4-D value, made to broadcast against its NHWC
    tensor (leading 1s dropped)."""
    full = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(_TO_NHWC)
    shape = list(full.shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    return full.reshape(shape)


def _binary_operands(lw: _Lowerer, vals: list[_V]) -> tuple[list[Tensor], tuple[int, ...], bool]:
    """The operands as tensors of one layout: NHWC when every computed operand is NHWC (4-D)
    and the constants broadcast against it; else ONNX order."""
    computed = [v for v in vals if v.const is None]
    nhwc = bool(computed) and all(v.nhwc for v in computed) and all(
        v.const is None or v.const.ndim <= 4 for v in vals)
    onnx_shape = tuple(np.broadcast_shapes(*(v.shape for v in vals)))
    if nhwc and len(onnx_shape) != 4:
        nhwc = False
    out: list[Tensor] = []
    for v in vals:
        if nhwc:
            if v.const is not None:
                out.append(lw.const(_nhwc_const(v.const), v.const.dtype, "operand"))
            else:
                assert v.t is not None
                out.append(v.t)
        else:
            out.append(lw.tensor_of(v))
    shape = tuple(onnx_shape[i] for i in _TO_NHWC) if nhwc else onnx_shape
    return out, shape, nhwc
