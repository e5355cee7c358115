"""ONNX Runtime: a profile (with the model and ORT's optimized graph) read as a keyed trace and
a provenance, joined by the one join."""
