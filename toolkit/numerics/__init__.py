"""Numerics attributed to layers: capture the tensors of one execution, compare two of them
tensor by tensor and layer by layer through provenance (see :mod:`.capture`, :mod:`.match`,
:mod:`.compare`, :mod:`.isolated`, :mod:`.metrics`, :mod:`.export`; docs/numerics.md).
"""

from __future__ import annotations

from toolkit.numerics.capture import Capture, TensorRecord, capture
from toolkit.numerics.compare import LAYER_COLUMNS, NumericsComparison, compare

__all__ = ["Capture", "TensorRecord", "capture", "compare", "NumericsComparison",
           "LAYER_COLUMNS"]
