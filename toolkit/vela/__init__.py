"""Arm Ethos-U Vela interop: run Vela, read its outputs, attribute its estimates and NPU traces
to the original layers of the input model.

    from toolkit.vela import run_vela, read_vela
    run_vela("model_int8.tflite", "out/vela", accelerator="ethos-u55-128")
    vela = read_vela("out/vela", model="model_int8.tflite")
    att = vela.attribution()            # Vela's estimates (cycles, MACs, memory accesses)
    att.by_layer(), att.by_source_op(), att.unattributed()
    vela.npu_trace_join("npu_trace.json").by_source_op()   # events with args.qread
"""

from toolkit.vela.estimates import POLICIES, ScheduledEstimates, VelaAttribution, read_estimates
from toolkit.vela.npu_trace import join_npu_trace, make_npu_trace
from toolkit.vela.provenance import VelaProvenance
from toolkit.vela.run import VelaResult, read_vela, run_vela, vela_command

__all__ = [
    "POLICIES",
    "ScheduledEstimates",
    "VelaAttribution",
    "VelaProvenance",
    "VelaResult",
    "join_npu_trace",
    "make_npu_trace",
    "read_estimates",
    "read_vela",
    "run_vela",
    "vela_command",
]
