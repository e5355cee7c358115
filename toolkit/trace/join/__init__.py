"""The one join: event keys -> compiled units -> original ops -> layers, time split exactly.

Every source (the toolkit's own trace, ExecuTorch, ONNX Runtime, Vela, fleets) ends here: a
:class:`~toolkit.trace.readers.read.Trace` and a provenance go in, an
:class:`~toolkit.trace.join.attribution.Attribution` comes out.
"""
