"""trace-join: read runtime traces and attribute their time to the original layers.

    import toolkit as tk
    trace = tk.read_trace("run.json")                 # Chrome JSON, CSV, records, EventTracer
    att = tk.trace_join(trace, compiled, policy="macs")
    att.by_layer(); att.by_op(); att.unattributed()
    to_chrome_trace(att, "joined.json")               # Perfetto, layers in each event's args
    to_model_explorer(att, "node_data.json")          # Model Explorer per-node values
"""

from toolkit.trace.attribution import STAT_COLUMNS, Attribution
from toolkit.trace.export import to_chrome_trace, to_model_explorer
from toolkit.trace.join import POLICIES, trace_join
from toolkit.trace.keys import KEY_KINDS
from toolkit.trace.read import Trace, read_trace

__all__ = ["read_trace", "Trace", "trace_join", "Attribution", "POLICIES", "KEY_KINDS",
           "STAT_COLUMNS", "to_chrome_trace", "to_model_explorer"]
