"""trace-join: read runtime traces and attribute their time to the original layers.

    import toolkit as tk
    trace = tk.read_trace("run.json")                 # Chrome JSON, CSV, records, EventTracer
    att = tk.trace_join(trace, compiled, policy="macs")
    att.by_layer(); att.by_op(); att.unattributed()
    to_chrome_trace(att, "joined.json")               # Perfetto, layers in each event's args
    to_model_explorer(att, "node_data.json")          # Model Explorer per-node values

Rooms, one job each (a lower room never imports a higher one; import-linter checks it):

``join/``     the one engine: :mod:`~toolkit.trace.join.keys` (which column names what),
              :mod:`~toolkit.trace.join.catalog` (provenance -> arrays and key lookups),
              :mod:`~toolkit.trace.join.nesting` and :mod:`~toolkit.trace.join.overlaps`
              (exclusive time per span), :mod:`~toolkit.trace.join.policies` and
              :mod:`~toolkit.trace.join.split` (exact integer split),
              :mod:`~toolkit.trace.join.join` (the pipeline, :func:`trace_join`),
              :mod:`~toolkit.trace.join.attribution` and :mod:`~toolkit.trace.join.stats`
              (the DataFrame views), :mod:`~toolkit.trace.join.tables` (provenance from
              DataFrames).
``readers/``  any source -> :class:`Trace`: :mod:`~toolkit.trace.readers.read` (Chrome JSON,
              CSV, records, Parquet, the EventTracer), and one subpackage per runtime that is an
              adapter of the join (its reader yields a trace and a provenance, the join does
              the rest): :mod:`~toolkit.trace.readers.executorch` (ETDump + ETRecord + ``.pte``),
              :mod:`~toolkit.trace.readers.ort` (ONNX Runtime profile + optimized graph); Vela's
              is :mod:`toolkit.vela.provenance`. :mod:`~toolkit.trace.readers.inputs` decides
              which one a user's arguments go to.
``views/``    what is made of attributions: :mod:`~toolkit.trace.views.export` (Perfetto, Model
              Explorer), :mod:`~toolkit.trace.views.diff` (two attributions compared).
``fleet/``    many device sessions joined partition by partition and merged exactly.

The command lines (``toolkit trace-join``, ``trace-join-many``) live in :mod:`toolkit.cli`.
"""

from typing import Any

from toolkit.trace.join.attribution import STAT_COLUMNS, Attribution
from toolkit.trace.join.join import trace_join as _join_trace
from toolkit.trace.join.keys import KEY_KINDS
from toolkit.trace.join.policies import POLICIES
from toolkit.trace.join.tables import ProvenanceTables
from toolkit.trace.readers.read import Trace, read_trace
from toolkit.trace.views.export import model_explorer_data, to_chrome_trace, to_model_explorer

__all__ = ["read_trace", "Trace", "trace_join", "Attribution", "POLICIES", "KEY_KINDS",
           "STAT_COLUMNS", "to_chrome_trace", "to_model_explorer", "model_explorer_data",
           "ProvenanceTables"]


def trace_join(trace: Any, provenance: Any, policy: str = "macs", key: str | None = None, *,
               overlaps: str = "self", strict: bool = True, skip_runs: int = 0
               ) -> Attribution:
    """:func:`toolkit.trace.join.join.trace_join` of anything :func:`read_trace` reads.

    ``trace`` is a :class:`Trace` or what :func:`read_trace` takes (a path, an EventTracer, a
    DataFrame, a list of records); the other arguments and the returned
    :class:`Attribution` are those of :func:`toolkit.trace.join.join.trace_join`.
    """
    if not isinstance(trace, Trace):
        trace = read_trace(trace)
    return _join_trace(trace, provenance, policy, key, overlaps=overlaps, strict=strict,
                       skip_runs=skip_runs)
