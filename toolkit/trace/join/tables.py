"""A :class:`~toolkit.provenance.Provenance` made of DataFrames given by the caller.

For joining traces against provenance that comes from elsewhere (another compiler's tables, a
synthetic model in a benchmark, a test):

    prov = ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": [0, 1], "macs": [900, 100]}),
        origins=pd.DataFrame({"optimised_id": [0, 0], "source_id": [0, 1]}))
    trace_join(trace, prov)

Missing tables are empty and missing columns get defaults (ints -1 or 0, text ``""``), so only
the columns a join needs must be given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS

__all__ = ["ProvenanceTables"]

_TEXT = frozenset({"operator", "name", "backend", "layer", "reason"})
_MINUS_ONE = frozenset({"op_index", "row_start", "row_end", "queue_offset", "stripe"})
_COLUMNS: dict[str, list[str]] = {
    "source_ops": SOURCE_COLUMNS,
    "layers": ["source_id", "layer"],
    "optimised_ops": OPTIMISED_COLUMNS,
    "origins": ["optimised_id", "source_id"],
    "commands": COMMAND_COLUMNS,
    "debug_handles": ["handle", "optimised_id", "source_id"],
    "removed": ["source_id", "reason"],
}


def _complete(frame: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """``frame`` with every column of ``columns`` (defaults for missing ones) first."""
    frame = pd.DataFrame(columns=columns) if frame is None else frame.reset_index(drop=True)
    n = len(frame)
    out: dict[str, Any] = {}
    for c in columns:
        if c in frame.columns:
            values = frame[c]
            if c == "handle":
                out[c] = values.astype(object)
            elif c in _TEXT:
                out[c] = values.astype(object).where(values.notna(), "").astype(str)
            else:
                out[c] = values.to_numpy(dtype=np.int64) if n else np.zeros(0, np.int64)
        elif c in _TEXT:
            out[c] = pd.Series([""] * n, dtype=str)
        elif c == "handle":
            out[c] = pd.Series([None] * n, dtype=object)
        else:
            out[c] = np.full(n, -1 if c in _MINUS_ONE else 0, dtype=np.int64)
    extra = {c: frame[c].to_numpy() for c in frame.columns if c not in out}
    return pd.DataFrame({**out, **extra})


@dataclass(eq=False)
class ProvenanceTables:
    """The seven provenance tables as DataFrames (columns as :mod:`toolkit.provenance`).

    Build with :meth:`build`, which fills defaults; the methods return copies.
    """

    source_ops_df: pd.DataFrame
    layers_df: pd.DataFrame
    optimised_ops_df: pd.DataFrame
    origins_df: pd.DataFrame
    commands_df: pd.DataFrame
    debug_handles_df: pd.DataFrame
    removed_df: pd.DataFrame

    @classmethod
    def build(cls, *, source_ops: pd.DataFrame | None = None,
              layers: pd.DataFrame | None = None, optimised_ops: pd.DataFrame | None = None,
              origins: pd.DataFrame | None = None, commands: pd.DataFrame | None = None,
              debug_handles: pd.DataFrame | None = None,
              removed: pd.DataFrame | None = None) -> ProvenanceTables:
        """Return tables with every standard column (defaults where not given).

        Without ``optimised_ops``, one row per ``optimised_id`` of ``origins`` is made;
        without ``source_ops``, one row per ``source_id`` any table names. Extra columns
        (``part``, ``part_op_index`` ...) are kept.
        """
        if origins is None:
            origins = pd.DataFrame({"optimised_id": np.zeros(0, np.int64),
                                    "source_id": np.zeros(0, np.int64)})
        if optimised_ops is None:
            ids = np.unique(origins["optimised_id"].to_numpy(dtype=np.int64))
            optimised_ops = pd.DataFrame({"optimised_id": ids})
        if source_ops is None:
            named = [t["source_id"].to_numpy(dtype=np.int64)
                     for t in (origins, layers, debug_handles, removed) if t is not None]
            source_ops = pd.DataFrame({"source_id": np.unique(np.concatenate(named))})
        return cls(_complete(source_ops, _COLUMNS["source_ops"]),
                   _complete(layers, _COLUMNS["layers"]),
                   _complete(optimised_ops, _COLUMNS["optimised_ops"]),
                   _complete(origins, _COLUMNS["origins"]),
                   _complete(commands, _COLUMNS["commands"]),
                   _complete(debug_handles, _COLUMNS["debug_handles"]),
                   _complete(removed, _COLUMNS["removed"]))

    def source_ops(self) -> pd.DataFrame:
        """Source ops (see :mod:`toolkit.provenance`)."""
        return self.source_ops_df.copy()

    def layers(self) -> pd.DataFrame:
        """(source op, original layer) pairs."""
        return self.layers_df.copy()

    def optimised_ops(self) -> pd.DataFrame:
        """Compiled ops."""
        return self.optimised_ops_df.copy()

    def origins(self) -> pd.DataFrame:
        """(compiled op, source op) pairs."""
        return self.origins_df.copy()

    def commands(self) -> pd.DataFrame:
        """The command queue."""
        return self.commands_df.copy()

    def debug_handles(self) -> pd.DataFrame:
        """(debug handle, source op) pairs."""
        return self.debug_handles_df.copy()

    def removed(self) -> pd.DataFrame:
        """Source ops removed by a pass."""
        return self.removed_df.copy()
