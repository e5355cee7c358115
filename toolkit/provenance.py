"""The provenance tables every stage agrees on.

A compiled model (``toolkit.compiler``), a partitioned model (``toolkit.partitioner``) and a Vela
output (``toolkit.read_vela``) all describe the same thread::

    original layer ──< source op >── compiled op ──< command >── trace event

as the DataFrames below. trace-join reads only these tables, so anything that provides them
(the :class:`Provenance` protocol) can be joined with a trace.

``source_ops()``: one row per source op (an op of the model as the user gave it)
    ``source_id`` (int64, the origin id), ``op_index`` (int64, index in the source model,
    -1 if unknown), ``operator`` (str, e.g. ``CONV_2D``), ``name`` (str, output tensor name),
    ``macs`` (int64, multiply-accumulates of one inference), ``output_bytes`` (int64),
    ``kernel_w``, ``kernel_h``, ``ofm_w``, ``ofm_h``, ``ofm_d`` (int64, Vela's columns).

``layers()``: long form, one row per (source op, original layer)
    ``source_id`` (int64), ``layer`` (str). A name written by TensorFlow's converter such as
    ``model/relu/Relu;model/conv/Conv2D`` gives one row per ``;``-separated part.

``optimised_ops()``: one row per compiled op
    ``optimised_id`` (int64, the compiled op's index), ``operator``, ``name``, ``macs``,
    ``output_bytes``, ``kernel_w``, ``kernel_h``, ``ofm_w``, ``ofm_h``, ``ofm_d``,
    ``backend`` (str; ``"npu"``/part backend, or the target name).

``origins()``: long form, one row per (compiled op, source op) pair
    ``optimised_id`` (int64), ``source_id`` (int64).

``commands()``: the ordered command queue, one row per command
    ``command_id`` (int64, position in the queue), ``optimised_id`` (int64), ``stripe``
    (int64, 0-based), ``stripes`` (int64, stripes of this op), ``row_start``, ``row_end``
    (int64, output rows of the stripe, end exclusive), ``macs`` (int64), ``bytes`` (int64,
    bytes moved), ``est_cycles`` (int64, cost-model estimate), ``queue_offset`` (int64, byte
    offset of the command in the queue).

``debug_handles()``: one row per (debug handle, source op)
    ``handle`` (object: int or str), ``optimised_id`` (int64), ``source_id`` (int64).

``removed()``: source ops whose op was removed by a pass
    ``source_id`` (int64), ``reason`` (str).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pandas as pd

__all__ = ["Provenance", "SOURCE_COLUMNS", "OPTIMISED_COLUMNS", "COMMAND_COLUMNS"]

SOURCE_COLUMNS = ["source_id", "op_index", "operator", "name", "macs", "output_bytes",
                  "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d"]
OPTIMISED_COLUMNS = ["optimised_id", "operator", "name", "macs", "output_bytes", "kernel_w",
                     "kernel_h", "ofm_w", "ofm_h", "ofm_d", "backend"]
COMMAND_COLUMNS = ["command_id", "optimised_id", "stripe", "stripes", "row_start", "row_end",
                   "macs", "bytes", "est_cycles", "queue_offset"]


@runtime_checkable
class Provenance(Protocol):
    """Anything that can be joined with a trace: see the module docstring for the columns."""

    def source_ops(self) -> pd.DataFrame: ...

    def layers(self) -> pd.DataFrame: ...

    def optimised_ops(self) -> pd.DataFrame: ...

    def origins(self) -> pd.DataFrame: ...

    def commands(self) -> pd.DataFrame: ...

    def debug_handles(self) -> pd.DataFrame: ...

    def removed(self) -> pd.DataFrame: ...
