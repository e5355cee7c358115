"""One place that names the FlatBuffers bindings and the schema enums the toolkit uses.

The `circle-schema` package generates bindings for the circle schema, a superset of the TFLite
schema: the same tables read and write both formats (file identifier ``CIR0`` vs ``TFL3``).
"""

from __future__ import annotations

import numpy as np
from circle_schema.v0_10 import circle as fb

__all__ = [
    "fb",
    "BUILTIN_NAMES",
    "BUILTIN_CODES",
    "TENSOR_TYPE_NAMES",
    "TENSOR_TYPE_CODES",
    "numpy_dtype",
    "tensor_type_of",
    "OPTIONS_TYPE_NAMES",
    "OPTIONS_CLASS",
    "PLACEHOLDER_FOR_GREATER_OP_CODES",
    "ACTIVATIONS",
    "ACTIVATION_CODES",
]


def _enum(cls: type) -> dict[str, int]:
    return {k: v for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


BUILTIN_CODES: dict[str, int] = _enum(fb.BuiltinOperator.BuiltinOperator)
BUILTIN_NAMES: dict[int, str] = {v: k for k, v in BUILTIN_CODES.items()}
PLACEHOLDER_FOR_GREATER_OP_CODES = 127

TENSOR_TYPE_CODES: dict[str, int] = _enum(fb.TensorType.TensorType)
TENSOR_TYPE_NAMES: dict[int, str] = {v: k for k, v in TENSOR_TYPE_CODES.items()}

_NUMPY = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "FLOAT64": np.float64,
    "INT32": np.int32,
    "UINT8": np.uint8,
    "INT64": np.int64,
    "BOOL": np.bool_,
    "INT16": np.int16,
    "COMPLEX64": np.complex64,
    "COMPLEX128": np.complex128,
    "INT8": np.int8,
    "UINT64": np.uint64,
    "UINT32": np.uint32,
    "UINT16": np.uint16,
}


def numpy_dtype(type_code: int) -> np.dtype | None:
    """Return the NumPy dtype of a schema ``TensorType`` code, or None when NumPy has none
    (STRING, RESOURCE, VARIANT, INT4, BFLOAT16 and circle's packed types)."""
    t = _NUMPY.get(TENSOR_TYPE_NAMES.get(type_code, ""))
    return np.dtype(t) if t is not None else None


_TYPE_OF = {np.dtype(v): TENSOR_TYPE_CODES[k] for k, v in _NUMPY.items()}


def tensor_type_of(dtype: np.dtype | type) -> int:
    """Return the schema ``TensorType`` code of a NumPy dtype (KeyError when none)."""
    return _TYPE_OF[np.dtype(dtype)]


OPTIONS_TYPE_CODES: dict[str, int] = _enum(fb.BuiltinOptions.BuiltinOptions)
OPTIONS_TYPE_NAMES: dict[int, str] = {v: k for k, v in OPTIONS_TYPE_CODES.items()}


def _options_class(name: str) -> type | None:
    mod = getattr(fb, name, None)
    return getattr(mod, name + "T", None) if mod is not None else None


OPTIONS_CLASS: dict[str, type] = {
    n: c for n in OPTIONS_TYPE_CODES if n != "NONE" and (c := _options_class(n)) is not None
}

ACTIVATION_CODES: dict[str, int] = _enum(fb.ActivationFunctionType.ActivationFunctionType)
ACTIVATIONS: dict[int, str] = {v: k for k, v in ACTIVATION_CODES.items()}
