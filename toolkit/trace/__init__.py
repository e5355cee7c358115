"""trace-join: read runtime traces and attribute their time to the original layers.

    import toolkit as tk
    trace = tk.read_trace("run.json")                 # Chrome JSON, CSV, records, EventTracer
    att = tk.trace_join(trace, compiled, policy="macs")
    att.by_layer(); att.by_op(); att.unattributed()
    to_chrome_trace(att, "joined.json")               # Perfetto, layers in each event's args
    to_model_explorer(att, "node_data.json")          # Model Explorer per-node values

Modules, one job each: :mod:`~toolkit.trace.read` (any source -> :class:`Trace`),
:mod:`~toolkit.trace.keys` (which column names what), :mod:`~toolkit.trace.catalog`
(provenance tables -> arrays and key lookups), :mod:`~toolkit.trace.resolve` (key -> target),
:mod:`~toolkit.trace.overlaps`, :mod:`~toolkit.trace.policies` (split weights),
:mod:`~toolkit.trace.split` (exact integer split), :mod:`~toolkit.trace.accumulate` (sums per
run), :mod:`~toolkit.trace.join` (the pipeline), :mod:`~toolkit.trace.attribution` and
:mod:`~toolkit.trace.stats` (the DataFrame views), :mod:`~toolkit.trace.export`,
:mod:`~toolkit.trace.tables` (provenance from DataFrames) and :mod:`~toolkit.trace.cli`.

Other runtimes are adapters of the same join: their reader yields a :class:`Trace` and a
provenance, and :mod:`~toolkit.trace.join` does the rest. ExecuTorch:
:mod:`~toolkit.trace.executorch` (ETDump events), :mod:`~toolkit.trace.et_provenance` (keys
and the ETRecord/``.pte`` provenance), :mod:`~toolkit.trace.et_attribution` (its extra
views); ONNX Runtime: :mod:`~toolkit.trace.ort` (profiles), :mod:`~toolkit.trace.ort_provenance`
(keys and the model pair's provenance), :mod:`~toolkit.trace.ort_join` (ORT's groups and its
extra views); Vela: :mod:`toolkit.vela.provenance`. :mod:`~toolkit.trace.inputs` decides which
one a user's arguments go to; :mod:`~toolkit.trace.views` lists the columns every
attribution's views start with.
"""

from toolkit.trace.attribution import STAT_COLUMNS, Attribution
from toolkit.trace.export import model_explorer_data, to_chrome_trace, to_model_explorer
from toolkit.trace.join import trace_join
from toolkit.trace.keys import KEY_KINDS
from toolkit.trace.policies import POLICIES
from toolkit.trace.read import Trace, read_trace
from toolkit.trace.tables import ProvenanceTables

__all__ = ["read_trace", "Trace", "trace_join", "Attribution", "POLICIES", "KEY_KINDS",
           "STAT_COLUMNS", "to_chrome_trace", "to_model_explorer", "model_explorer_data",
           "ProvenanceTables"]
