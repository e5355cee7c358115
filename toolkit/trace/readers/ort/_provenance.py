"""ONNX Runtime as an adapter of the one join: a profile becomes a keyed
:class:`~toolkit.trace.readers.read.Trace` and the (model, optimized graph) pair a provenance.

    prov = OrtProvenance(load_onnx("m.onnx"), load_onnx("m.opt.onnx"))
    trace = ort_trace(read_ort_profile("prof.json"), prov)
    att = toolkit.trace.join.join.trace_join(trace, prov)     # what tk.trace_join does

**Provenance** (:class:`OrtProvenance`, the :class:`~toolkit.provenance.Provenance` tables):

- source ops: the nodes of the exported model in file order (``source_id`` = ``op_index`` =
  the position), then the nodes of its ``If``/``Loop``/``Scan`` bodies (``op_index`` -1);
- layers: each node's ``model.origin(oid).layers`` with its ``main`` layer, as every table
  reads them (``(no layer)`` for a node of none); a body node whose origins name no layer
  has its enclosing node's;
- compiled ops: the nodes ORT ran (the optimized graph's, in file order, ``optimised_id`` =
  the position), then the nodes of their bodies;
- origins: an optimized node -> the original nodes it owns (the exact groups and second tier
  of :func:`~toolkit.trace.readers.ort.attribution.group_mapping`); a body node -> the original body
  node of the same name, else the original nodes its enclosing node owns;
- ``macs`` of a source op is a relative compute weight (convolutions, matrix products,
  recurrent and normalisation ops 8, other arithmetic 1, data movement 0: an ONNX graph
  carries no MAC counts), ``output_bytes`` the bytes of its outputs whose shapes are known;
- removed: the original nodes no optimized node reaches, with the reason (a ``Constant``,
  folded, unused).

**Trace** (:func:`ort_trace`): the kernel events keyed by node name (``name``); in a profile of
the saved optimized model (every named main-graph event's ``node_index`` is its node's
position), an event of a node saved without a name is keyed by that position
(``op_index``). ``op_type`` carries ORT's ``op_name`` so the join checks it against the node's
op. A branch node of an ``If`` runs inside the ``If`` node's kernel span: spans nest, each
counts its exclusive time once.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.ir import Model, Op
from toolkit.layer_names import NO_LAYER
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS
from toolkit.source_table import layers_table
from toolkit.trace.join.keys import KEY_KINDS
from toolkit.trace.readers.ort.attribution import (
    OrtGroups,
    group_mapping,
    node_label,
    ort_generated,
)
from toolkit.trace.readers.read import Trace

__all__ = ["OrtProvenance", "ort_trace", "compute_weight", "GENERATED"]

_I64 = np.int64
_STR = pd.Series([""]).dtype
_HEAVY = frozenset({
    "Conv", "ConvTranspose", "Gemm", "MatMul", "MatMulInteger", "QLinearConv", "QLinearMatMul",
    "LSTM", "GRU", "RNN", "Attention", "MultiHeadAttention", "FusedConv", "FusedGemm",
    "FusedMatMul", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
    "GroupNormalization", "SkipLayerNormalization", "Softmax", "Einsum",
})
_MOVES = frozenset({
    "Reshape", "Transpose", "Identity", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Gather",
    "Concat", "Split", "Slice", "Cast", "Expand", "Constant", "ConstantOfShape", "Size",
    "ReorderInput", "ReorderOutput", "Dropout",
})
#: the reason of an event of a node ORT created without a name, outside a profile of the
#: saved optimized model
GENERATED = ("a node ORT created without a name cannot be placed by index here: profile the "
             "saved optimized model at ORT_DISABLE_ALL")


def compute_weight(op: Op) -> int:
    """The relative compute weight of an ONNX node: 8 (convolution, matrix product,
    recurrent, normalisation, softmax), 0 (data movement), else 1."""
    if op.type in _HEAVY:
        return 8
    if op.type in _MOVES:
        return 0
    return 1


def _output_bytes(op: Op) -> int:
    total = 0
    for t in op.outputs:
        if t is None or t.dtype is None or not t.shape or any(int(d) < 0 for d in t.shape):
            continue
        total += int(np.prod([int(d) for d in t.shape])) * int(t.dtype.itemsize)
    return total


def _bodies(model: Model, op: Op) -> list[Op]:
    """Every node of ``op``'s bodies (nested bodies included), in subgraph order."""
    out: list[Op] = []
    for index in (op.extra.get("subgraphs") or {}).values():
        for inner in model.subgraphs[int(index)].ops:
            out.append(inner)
            out.extend(_bodies(model, inner))
    return out


class OrtProvenance:
    """Provenance tables of an ONNX model as ONNX Runtime ran it (see the module docstring).

    Args:
        model: the exported model (:func:`~toolkit.importers.onnx.load_onnx`).
        optimized: the graph ORT saved for the profiled session; None when the profile is of
            ``model`` run at ``ORT_DISABLE_ALL`` (or of ``optimized`` passed as ``model``).

    Attributes:
        model, optimized, mapping (:class:`~toolkit.trace.readers.ort.attribution.OrtGroups`).
    """

    def __init__(self, model: Model, optimized: Model | None = None) -> None:
        self.model = model
        self.optimized = optimized
        self.mapping: OrtGroups = group_mapping(model, optimized)
        o0 = self.mapping.original
        # original body nodes: (node, enclosing original position)
        #: the nodes of the original model's If/Loop/Scan bodies, each with the position of
        #: its enclosing main-graph node
        self.body_original: list[tuple[Op, int]] = [(inner, j) for j, op in enumerate(o0)
                                             for inner in _bodies(model, op)]
        ran = optimized if optimized is not None else model
        #: the same for the graph ORT ran (the optimized graph, else the model)
        self.body_ran: list[tuple[Op, int]] = [(inner, i)
                                             for i, op in enumerate(self.mapping.optimized)
                                             for inner in _bodies(ran, op)]

    def __repr__(self) -> str:
        return (f"<OrtProvenance {len(self.mapping.original)} node(s) of "
                f"{self.model.path or 'model'}, {len(self.mapping.optimized)} run by ORT"
                + (f" ({self.optimized.path or 'optimized graph'})" if self.optimized else "")
                + ">")

    # ------------------------------------------------------------------ internals
    @cached_property
    def _sources(self) -> list[Op]:
        return [*self.mapping.original, *(op for op, _ in self.body_original)]

    @cached_property
    def _source_origins(self) -> dict[int, tuple[int, ...]]:
        """Origin ids of each source op (``source_id``): the node's own, else (a body node
        whose origins name no layer) its enclosing node's."""
        n0 = len(self.mapping.original)
        out: dict[int, tuple[int, ...]] = {}
        for k, op in enumerate(self._sources):
            own = tuple(sorted(op.origins))
            if k >= n0 and not any(self.model.origin(o).layers for o in own):
                enclosing = self.mapping.original[self.body_original[k - n0][1]]
                own = tuple(sorted(enclosing.origins)) or own
            out[k] = own
        return out

    @cached_property
    def _layers(self) -> pd.DataFrame:
        return layers_table(self.model, range(len(self._sources)), self._source_origins)

    @cached_property
    def _by_source(self) -> dict[int, tuple[tuple[str, ...], str]]:
        out: dict[int, tuple[tuple[str, ...], str]] = {}
        for sid, layer, main in self._layers.itertuples(index=False):
            layers, first_main = out.get(int(sid), ((), ""))
            out[int(sid)] = ((*layers, str(layer)), first_main or (str(layer) if main else ""))
        return out

    def layers_of(self, source_id: int) -> tuple[str, ...]:
        """The layers of source op ``source_id`` as :meth:`layers` lists them (in the order
        the importer recorded them; ``(no layer)`` when none)."""
        return self._by_source.get(int(source_id), ((), ""))[0]

    def main_layer_of(self, source_id: int) -> str:
        """The main layer of source op ``source_id`` (the one the ``macs`` policy gives its
        time), else its first layer (``(no layer)`` when none)."""
        layers, main = self._by_source.get(int(source_id), ((), ""))
        return main or (layers[0] if layers else NO_LAYER)

    # ------------------------------------------------------------------ Provenance protocol
    def source_ops(self) -> pd.DataFrame:
        """One row per original node (main graph, then bodies):
        :data:`~toolkit.provenance.SOURCE_COLUMNS` (``macs``: the compute weight)."""
        n0 = len(self.mapping.original)
        rows = [(k, k if k < n0 else -1, op.type, node_label(op), compute_weight(op),
                 _output_bytes(op), 1, 1, 1, 1, 1) for k, op in enumerate(self._sources)]
        df = pd.DataFrame(rows, columns=SOURCE_COLUMNS)
        return df.astype({c: (_STR if c in ("operator", "name") else _I64)
                          for c in SOURCE_COLUMNS})

    def layers(self) -> pd.DataFrame:
        """One row per (original node, layer), read from ``model.origin(oid).layers`` like
        every table (:func:`~toolkit.source_table.layers_table`): ``source_id`` (int64),
        ``layer`` (str, :data:`~toolkit.layer_names.NO_LAYER` for a node of no layer),
        ``main`` (bool: the layer the ``macs`` policy gives the node's time)."""
        return self._layers.copy()

    def optimised_ops(self) -> pd.DataFrame:
        """One row per node ORT ran (main graph, then bodies):
        :data:`~toolkit.provenance.OPTIMISED_COLUMNS` (``backend`` ``"onnxruntime"``)."""
        ran = [*self.mapping.optimized, *(op for op, _ in self.body_ran)]
        rows = [(i, op.type, str(op.extra.get("node_name") or ""), 0, _output_bytes(op),
                 1, 1, 1, 1, 1, "onnxruntime") for i, op in enumerate(ran)]
        df = pd.DataFrame(rows, columns=OPTIMISED_COLUMNS)
        return df.astype({c: (_STR if c in ("operator", "name", "backend") else _I64)
                          for c in OPTIMISED_COLUMNS})

    def origins(self) -> pd.DataFrame:
        """One row per (node ORT ran, original node it owns): ``optimised_id``,
        ``source_id`` (int64)."""
        pairs: list[tuple[int, int]] = []
        for i, owned in enumerate(self.mapping.owned):
            pairs.extend((i, j) for j in owned)
        n0, n1 = len(self.mapping.original), len(self.mapping.optimized)
        body_names: dict[str, list[int]] = {}
        for k, (op, _) in enumerate(self.body_original):
            name = op.extra.get("node_name")
            if name:
                body_names.setdefault(str(name), []).append(n0 + k)
        for k, (op, enclosing) in enumerate(self.body_ran):
            same = body_names.get(str(op.extra.get("node_name") or ""), [])
            if len(same) == 1:
                pairs.append((n1 + k, same[0]))
            else:
                pairs.extend((n1 + k, j) for j in self.mapping.owned[enclosing])
        pairs = sorted(set(pairs))
        return pd.DataFrame(pairs, columns=["optimised_id", "source_id"]).astype(_I64)

    def commands(self) -> pd.DataFrame:
        """No command queue: an empty frame of :data:`~toolkit.provenance.COMMAND_COLUMNS`."""
        return pd.DataFrame({c: np.zeros(0, dtype=_I64) for c in COMMAND_COLUMNS})

    def debug_handles(self) -> pd.DataFrame:
        """No debug handles: an empty frame (``handle``, ``optimised_id``, ``source_id``)."""
        return pd.DataFrame({"handle": pd.Series([], dtype=object),
                             "optimised_id": np.zeros(0, _I64), "source_id": np.zeros(0, _I64)})

    def removed(self) -> pd.DataFrame:
        """Original nodes no node ORT ran reaches: ``source_id`` (int64), ``reason`` (str)."""
        items = sorted(self.mapping.unmapped.items())
        return pd.DataFrame({"source_id": np.array([j for j, _ in items], dtype=_I64),
                             "reason": pd.Series([r for _, r in items], dtype=_STR)})

    # ------------------------------------------------------------------ events
    def main_positions(self) -> np.ndarray:
        """Position in the saved file of each main-graph node ORT ran (``Constant`` nodes,
        which ORT does not run, get -1 and are not counted)."""
        out = np.full(len(self.mapping.optimized), -1, dtype=_I64)
        k = 0
        for i, op in enumerate(self.mapping.optimized):
            if op.type != "Constant":
                out[i] = k
                k += 1
        return out


def ort_trace(trace: Trace, prov: OrtProvenance) -> Trace:
    """Return ``trace`` (an ORT profile read by
    :func:`~toolkit.trace.readers.ort.profile.read_ort_profile`) keyed for the join against ``prov``
    (see the module docstring): the same events and meta, ``meta["index_exact"]`` True when unnamed
    nodes were placed by ``node_index``.

    Raises:
        ToolkitError: the trace is not an ORT profile.
    """
    if trace.meta.get("format") != "ort":
        raise ToolkitError(f"the trace is a {trace.meta.get('format', '?')} trace, not an ORT "
                           "profile", where=str(trace.meta.get("source", "")),
                           fix="pass the JSON file ORT's profiler wrote")
    ev = trace.events.copy()
    n = len(ev)
    o1 = prov.mapping.optimized
    name_values = ev["name"].array  # categorical: one lookup per distinct name
    name_texts = [str(c) for c in name_values.categories]
    name_codes = np.asarray(name_values.codes, dtype=_I64)
    by_name: dict[str, int] = {}
    for i, op in enumerate(o1):
        name = op.extra.get("node_name")
        if name:
            by_name[str(name)] = i if str(name) not in by_name else -2
    node_of_name = np.array([by_name.get(x, -1) for x in name_texts] + [-1], dtype=_I64)
    node = node_of_name[name_codes]  # code -1 (no name) reads the last entry
    index = ev["node_index"].to_numpy(dtype=_I64) if "node_index" in ev else np.full(n, -1)
    position = prov.main_positions()
    named = node >= 0
    exact = bool(named.any()) and bool(np.all(index[named] == position[node[named]]))
    key = ev["key"].astype(object).to_numpy().copy()
    kind_codes = np.asarray(ev["key_kind"].cat.codes, dtype=_I64).copy()
    categories = pd.Index(["", *KEY_KINDS], dtype=_STR)
    kind_codes = categories.get_indexer(
        np.asarray(ev["key_kind"].cat.categories, dtype=object)[kind_codes]) if n else \
        kind_codes
    if exact:
        at = np.full(int(position.max()) + 1 if len(position) else 0, -1, dtype=_I64)
        at[position[position >= 0]] = np.flatnonzero(position >= 0)
        inside = (index >= 0) & (index < len(at))
        cand = np.where(inside, at[np.clip(index, 0, max(len(at) - 1, 0))] if len(at) else -1,
                        -1)
        unnamed_node = np.array([not op.extra.get("node_name") for op in o1] + [False],
                                dtype=bool)
        unnamed = unnamed_node[np.where(cand >= 0, cand, len(o1))]
        use = (node == -1) & unnamed
        key[use] = cand[use]
        kind_codes[use] = categories.get_loc("op_index")
    else:  # a node ORT made without a name cannot be placed: say so
        generated_name = np.array([ort_generated(x) for x in name_texts] + [False], dtype=bool)
        generated = generated_name[name_codes] & (node == -1)
        if generated.any():
            problem = ev["problem"].astype(object).to_numpy().copy()
            problem[generated & (problem == "")] = GENERATED
            ev["problem"] = pd.Categorical(problem.astype(str))
    ev["key"] = pd.Series(key, dtype=object, index=ev.index)
    ev["key_kind"] = pd.Categorical.from_codes(kind_codes, categories=categories)
    if "op" in ev.columns:
        ev["op_type"] = ev["op"]
    return Trace(ev, {**trace.meta, "index_exact": exact})

