"""Error metrics of a candidate tensor against a reference tensor (both dequantized, float64).

``sqnr_db``: ``10 log10(sum(ref^2) / sum((ref - cand)^2))``, +inf when the two are equal;
``mse``: mean of ``(ref - cand)^2``; ``cosine``: cosine similarity of the flattened tensors
(1.0 when both are all zeros); ``max_abs_error``: the peak ``|ref - cand|``; ``mpeir``: ONE
visq's (relaxed) peak error-to-interval ratio, ``max|ref - cand| / (max(ref) - min(ref) + 1e-6)``.

NaN and Inf are never averaged in: ``nonfinite_ref`` / ``nonfinite_cand`` count the elements
that are NaN or +-Inf on each side, and the metrics are computed over the elements finite on
both sides (NaN when there is none).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["METRIC_COLUMNS", "metrics", "MPEIR_EPSILON"]

METRIC_COLUMNS = ["sqnr_db", "mse", "cosine", "max_abs_error", "mpeir", "nonfinite_ref",
                  "nonfinite_cand"]
MPEIR_EPSILON = 1e-6
"""visq's relaxation of the interval (so that a constant tensor has a finite MPEIR)."""


def metrics(ref: np.ndarray, cand: np.ndarray) -> dict[str, float | int]:
    """The metrics of :data:`METRIC_COLUMNS` for two arrays of the same size (flattened)."""
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    c = np.asarray(cand, dtype=np.float64).reshape(-1)
    fr, fc = np.isfinite(r), np.isfinite(c)
    bad_r, bad_c = int(r.size - fr.sum()), int(c.size - fc.sum())
    if bad_r or bad_c:
        keep = fr & fc
        r, c = r[keep], c[keep]
    out: dict[str, float | int] = {"nonfinite_ref": bad_r, "nonfinite_cand": bad_c}
    if r.size == 0:
        out.update(sqnr_db=math.nan, mse=math.nan, cosine=math.nan, max_abs_error=math.nan,
                   mpeir=math.nan)
        return out
    e = r - c
    noise = float(np.square(e).sum())  # pairwise sums, no BLAS call (threads, spin-up)
    signal = float(np.square(r).sum())
    if noise == 0.0:
        sqnr = math.inf
    elif signal == 0.0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / noise)
    nr, nc = math.sqrt(signal), math.sqrt(float(np.square(c).sum()))
    if nr == 0.0 or nc == 0.0:
        cosine = 1.0 if nr == nc else 0.0
    else:
        cosine = float((r * c).sum()) / (nr * nc)
    peak = float(np.max(np.abs(e)))
    out.update(sqnr_db=sqnr, mse=noise / r.size, cosine=cosine, max_abs_error=peak,
               mpeir=peak / (float(r.max() - r.min()) + MPEIR_EPSILON))
    return out
