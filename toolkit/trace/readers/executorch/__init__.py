"""ExecuTorch: an ETDump (with its ETRecord and ``.pte``) read as a nested trace and a
provenance, joined by the one join."""
