"""Numerics attributed to layers: capture the tensors of one execution, compare two of them
tensor by tensor and layer by layer through provenance (see :mod:`.capture`, :mod:`.compare`).
"""

from __future__ import annotations

from toolkit.numerics.capture import Capture, TensorRecord, capture

__all__ = ["Capture", "TensorRecord", "capture"]
