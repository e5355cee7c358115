"""Normalisations that TFLite lacks: circle's INSTANCE_NORM and the custom ``LAYER_NORM``.

INSTANCE_NORM (circle builtin; InstanceNormOptions ``epsilon``, ``fusedActivationFunction``):
inputs ``x`` (N, spatial..., C), ``gamma`` [C] and ``beta`` [C]; for each sample and channel,
over the spatial axes::

    y = (x - mean) / sqrt(var + epsilon) * gamma + beta      (var: biased, mean of squares)

LAYER_NORM (CUSTOM op, custom code ``LAYER_NORM``): inputs ``x`` (..., D), ``gamma`` [D] and
``beta`` [D] (gamma and beta optional: 1 and 0); the same formula over the last axis.
Its ``custom_options`` encode epsilon as **exactly 4 bytes, a little-endian IEEE-754 float32**
(``struct.pack("<f", eps)``). Empty or absent options mean epsilon = 1e-5. For
interoperability a FlexBuffers map with a float ``epsilon`` key is accepted too; anything
else is an error.

Both compute mean and variance in float64 and round the result to float32 (float32 tensors
only).
"""

from __future__ import annotations

import struct

import numpy as np

from toolkit.ir import Op
from toolkit.runtime.kernels._registry import register
from toolkit.runtime.kernels.common import (
    bad_input,
    float_activation,
    need,
    opt,
    out_dtype,
    unsupported,
)

__all__ = ["LAYER_NORM_DEFAULT_EPSILON", "layer_norm_epsilon", "encode_layer_norm_options"]

LAYER_NORM_DEFAULT_EPSILON = 1e-5


def encode_layer_norm_options(epsilon: float) -> bytes:
    """The ``custom_options`` bytes of a LAYER_NORM op with this epsilon."""
    return struct.pack("<f", float(epsilon))


def layer_norm_epsilon(op: Op) -> float:
    """Decode epsilon from the ``custom_options`` of a LAYER_NORM op (see module docs)."""
    raw = op.custom_options
    if raw is None or len(raw) == 0:
        return LAYER_NORM_DEFAULT_EPSILON
    raw = bytes(raw)
    if len(raw) == 4:
        return float(struct.unpack("<f", raw)[0])
    try:
        from flatbuffers import flexbuffers

        value = flexbuffers.Loads(raw)
    except Exception:  # any decoding failure means the options are not an epsilon map
        value = None
    if isinstance(value, dict) and isinstance(value.get("epsilon"), (int, float)):
        return float(value["epsilon"])
    raise unsupported(op, f"LAYER_NORM custom_options of {len(raw)} bytes are not an epsilon",
                      fix="store epsilon as 4 bytes: struct.pack('<f', eps)")


def _vector(op: Op, a: np.ndarray | None, n: int, name: str, default: float) -> np.ndarray:
    if a is None:
        return np.full(n, default, dtype=np.float64)
    v = np.asarray(a, dtype=np.float64).reshape(-1)
    if v.size == 1:
        return np.full(n, v[0])
    if v.size != n:
        raise bad_input(op, f"{name} has {v.size} values for {n} channels")
    return v


def _normalise(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes, keepdims=True)
    centred = xd - mean
    var = (centred * centred).mean(axis=axes, keepdims=True)
    return centred / np.sqrt(var + eps)


@register("INSTANCE_NORM")
def instance_norm(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """circle INSTANCE_NORM over the spatial axes of a channels-last tensor."""
    x = need(op, args, 0)
    if not np.issubdtype(x.dtype, np.floating):
        raise unsupported(op, f"INSTANCE_NORM on {x.dtype} input (float32 only)")
    if x.ndim < 3:
        raise bad_input(op, f"INSTANCE_NORM needs (N, spatial..., C), got shape {x.shape}")
    c = x.shape[-1]
    gamma = _vector(op, args[1] if len(args) > 1 else None, c, "gamma", 1.0)
    beta = _vector(op, args[2] if len(args) > 2 else None, c, "beta", 0.0)
    eps = float(opt(op, "epsilon", 0.0))
    y = _normalise(x, tuple(range(1, x.ndim - 1)), eps) * gamma + beta
    return [float_activation(op, y.astype(np.float32)).astype(out_dtype(op))]


@register("LAYER_NORM")
def layer_norm(op: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """Custom LAYER_NORM over the last axis."""
    x = need(op, args, 0)
    if not np.issubdtype(x.dtype, np.floating):
        raise unsupported(op, f"LAYER_NORM on {x.dtype} input (float32 only)")
    d = x.shape[-1]
    gamma = _vector(op, args[1] if len(args) > 1 else None, d, "gamma", 1.0)
    beta = _vector(op, args[2] if len(args) > 2 else None, d, "beta", 0.0)
    y = _normalise(x, (x.ndim - 1,), layer_norm_epsilon(op)) * gamma + beta
    return [y.astype(np.float32).astype(out_dtype(op))]
