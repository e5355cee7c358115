"""Readers: any runtime's output -> a :class:`~toolkit.trace.readers.read.Trace` (and, for a
runtime with its own compiled form, the provenance the one join takes).

:mod:`~toolkit.trace.readers.read` reads Chrome JSON, CSV, records, Parquet and the tracer;
one subpackage per other runtime: :mod:`~toolkit.trace.readers.executorch`,
:mod:`~toolkit.trace.readers.ort`. :mod:`~toolkit.trace.readers.inputs` decides which one a
user's arguments go to.
"""
