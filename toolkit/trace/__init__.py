"""trace-join: read runtime traces and attribute their time to the original layers.

    import toolkit as tk
    trace = tk.read_trace("run.json")                 # Chrome JSON, CSV, records, EventTracer
    att = tk.trace_join(trace, compiled, policy="macs")
    att.by_layer(); att.by_op(); att.unattributed()
    to_chrome_trace(att, "joined.json")               # Perfetto, layers in each event's args
    to_model_explorer(att, "node_data.json")          # Model Explorer per-node values

Modules, one job each: :mod:`~toolkit.trace.readers.read` (any source -> :class:`Trace`),
:mod:`~toolkit.trace.join.keys` (which column names what), :mod:`~toolkit.trace.join.catalog`
(provenance tables -> arrays and key lookups), :mod:`~toolkit.trace.join._resolve` (key -> target),
:mod:`~toolkit.trace.join.overlaps`, :mod:`~toolkit.trace.join.policies` (split weights),
:mod:`~toolkit.trace.join.split` (exact integer split), :mod:`~toolkit.trace.join._accumulate` (sums per
run), :mod:`~toolkit.trace.join.join` (the pipeline), :mod:`~toolkit.trace.join.attribution` and
:mod:`~toolkit.trace.join.stats` (the DataFrame views), :mod:`~toolkit.trace.views.export`,
:mod:`~toolkit.trace.join.tables` (provenance from DataFrames) and :mod:`~toolkit.cli._trace_join`.

Other runtimes are adapters of the same join: their reader yields a :class:`Trace` and a
provenance, and :mod:`~toolkit.trace.join.join` does the rest. ExecuTorch:
:mod:`~toolkit.trace.readers.executorch.profile` (ETDump events), :mod:`~toolkit.trace.readers.executorch._provenance` (keys
and the ETRecord/``.pte`` provenance), :mod:`~toolkit.trace.readers.executorch.attribution` (its extra
views); ONNX Runtime: :mod:`~toolkit.trace.readers.ort.profile` (profiles), :mod:`~toolkit.trace.readers.ort._provenance`
(keys and the model pair's provenance), :mod:`~toolkit.trace.readers.ort.attribution` (ORT's groups and its
extra views); Vela: :mod:`toolkit.vela.provenance`. :mod:`~toolkit.trace.readers.inputs` decides which
one a user's arguments go to; :mod:`~toolkit.trace.join.layer_views` lists the columns every
attribution's views start with.
"""

from toolkit.trace.join.attribution import STAT_COLUMNS, Attribution
from toolkit.trace.join.join import trace_join
from toolkit.trace.join.keys import KEY_KINDS
from toolkit.trace.join.policies import POLICIES
from toolkit.trace.join.tables import ProvenanceTables
from toolkit.trace.readers.read import Trace, read_trace
from toolkit.trace.views.export import model_explorer_data, to_chrome_trace, to_model_explorer

__all__ = ["read_trace", "Trace", "trace_join", "Attribution", "POLICIES", "KEY_KINDS",
           "STAT_COLUMNS", "to_chrome_trace", "to_model_explorer", "model_explorer_data",
           "ProvenanceTables"]
