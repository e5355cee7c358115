"""Build a :class:`~toolkit.ir.Model` from an ONNX file, each node with its original layer.

    model = load_onnx("resnet.onnx")
    model.ops_table()[["name", "op_type", "layer"]]
    model.extra["modules_without_nodes"]    # modules that own no node, with the reason

Op kinds are ONNX op types (``Conv``, ``FusedConv``), the domain in ``op.extra["domain"]``;
the reference runtime does not run ONNX models. Node ``i`` of the main graph has origin ``i``
(named after the node in ``model.source_table``).

**Layers**: every node's :class:`~toolkit.ir.Origin` (``model.origin(i).layers``), named by
:func:`toolkit.layer_names.onnx_layers` (rules and examples in ``docs/layers.md``: dynamo
``name_scopes``, TorchScript scopes with nested ``Sequential``s, nodes an optimizer made,
tf2onnx, unscoped files); ``op.extra["layer"]`` mirrors the first layer (``""`` for the top
module or none) and ``op.extra["layer_from"]`` the rule. Nodes no rule places are listed in
``model.extra["nodes_without_layer"]``.

**Exporter fusions** (``op.extra["exporter_fused"]``, a reason or ``""``): the dynamo exporter
folds BatchNorm into the Conv and gives the Conv the BatchNorm's metadata (the node's class
hierarchy ends in a norm module while the op is not a norm); the TorchScript exporter folds it
into the Conv's weights, which it renames ``onnx::Conv_N``.

**Modules without nodes** (``model.extra["modules_without_nodes"]``: ``module``, ``reason``):
modules whose parameters are initializers (``fc.weight``) or that appear in a scope but own no
node themselves (containers, modules folded into another module's node by the exporter).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from typing import Any

import numpy as np

from toolkit.errors import GraphError
from toolkit.formats.onnx_model import (
    ONNX_DTYPE_NAMES,
    ONNX_DTYPES,
    OnnxGraph,
    OnnxModel,
    parse_name_scopes,
    read_onnx,
)
from toolkit.ir import Graph, Model, Op, Tensor
from toolkit.layer_names import onnx_layers, scope_layers
from toolkit.schema import TENSOR_TYPE_CODES, tensor_type_of

__all__ = ["load_onnx", "model_from_onnx", "scope_layers", "NAME_SCOPES_KEY",
           "CLASS_HIERARCHY_KEY", "UNKNOWN_TYPE_CODE"]

NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY_KEY = "pkg.torch.onnx.class_hierarchy"
#: ``Tensor.type_code`` of an ONNX type the schema has no code for (the ONNX type name is in
#: ``tensor.extra["onnx_dtype"]``).
UNKNOWN_TYPE_CODE = -100
_NORMS = ("BatchNorm", "InstanceNorm", "GroupNorm", "LayerNorm", "RMSNorm")
_NORM_OPS = frozenset({"BatchNormalization", "InstanceNormalization", "GroupNormalization",
                       "LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"})
_WEIGHTED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
_PARAM = re.compile(r"^(.+)\.(weight|bias|running_mean|running_var|weight_ih_l\d+|"
                    r"weight_hh_l\d+|bias_ih_l\d+|bias_hh_l\d+|in_proj_weight|in_proj_bias)$")


def load_onnx(path: str | os.PathLike[str] | bytes) -> Model:
    """Load an ``.onnx`` file (or its bytes) into a :class:`~toolkit.ir.Model`.

    Returns a model with ``format == "onnx"``: subgraph 0 is the main graph; the bodies of
    ``If``/``Loop``/``Scan`` nodes follow as further subgraphs (their node lists them in
    ``op.extra["subgraphs"]``: attribute -> subgraph index). Each op's ``extra`` holds
    ``node_name``, ``domain``, ``attributes``, ``metadata``, ``node_index``, ``layer``,
    ``layer_from``, ``exporter_fused``. ``model.extra`` holds ``opsets``, ``producer``,
    ``external_data`` (one dict per tensor read from an external file),
    ``modules_without_nodes`` and ``nodes_without_layer``.

    Raises :class:`~toolkit.errors.ModelFormatError` (undecodable file, missing external data)
    or :class:`~toolkit.errors.GraphError` (a cycle, a value read but never written).
    """
    return model_from_onnx(read_onnx(path))


def _type_code(elem_type: int) -> int:
    dtype = ONNX_DTYPES.get(elem_type)
    if dtype is not None:
        return tensor_type_of(np.dtype(dtype))
    name = ONNX_DTYPE_NAMES.get(elem_type, "")
    return TENSOR_TYPE_CODES.get(name, UNKNOWN_TYPE_CODE)


class _Builder:
    def __init__(self, model: Model) -> None:
        self.model = model
        self.next_origin = 0

    def graph(self, og: OnnxGraph, name: str, subgraph: bool) -> Graph:
        """Build one graph; in a subgraph, values read but defined by none of its nodes,
        initializers or inputs come from an enclosing graph: they become inputs, listed in
        ``graph.extra["outer_scope"]``."""
        g = Graph(og.name or name)
        infos = {**og.value_info, **{v.name: v for v in og.inputs},
                 **{v.name: v for v in og.outputs}}
        tensors: dict[str, Tensor] = {}
        outer_refs: list[str] = []

        def tensor(tname: str) -> Tensor:
            t = tensors.get(tname)
            if t is not None:
                return t
            init = og.initializers.get(tname)
            info = infos.get(tname)
            extra: dict[str, Any] = {}
            if init is not None:
                elem, dims = init.elem_type, init.dims
                shape: tuple[int | str, ...] | None = dims
                data = init.data
                if init.external is not None:
                    extra["external_data"] = dict(init.external)
            else:
                elem = info.elem_type if info is not None else 0
                shape = info.shape if info is not None else None
                data = None
            code = _type_code(elem)
            if code == UNKNOWN_TYPE_CODE or elem not in ONNX_DTYPES:
                extra["onnx_dtype"] = ONNX_DTYPE_NAMES.get(elem, str(elem))
            static = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in (shape or ()))
            signature = None
            if shape is not None and any(not isinstance(d, int) for d in shape):
                signature = tuple(d if isinstance(d, int) else -1 for d in shape)
            if data is not None and init is not None and init.data is not None:
                static = tuple(init.data.shape)
            t = Tensor(tname, static, code, data=data, shape_signature=signature,
                       has_rank=shape is not None, extra=extra)
            g.attach_tensor(t)
            tensors[tname] = t
            return t

        for v in og.inputs:
            if v.name in og.initializers:
                continue  # an initializer listed as input (old exporters): a constant
            g.inputs.append(tensor(v.name))
        for init in og.initializers.values():
            tensor(init.name)
        produced: set[str] = set()
        for node in og.nodes:
            produced.update(x for x in node.outputs if x)
        for node in og.nodes:
            for x in node.inputs:
                if (x and x not in produced and x not in og.initializers and x not in tensors
                        and subgraph):
                    t = tensor(x)
                    outer_refs.append(x)
                    g.inputs.append(t)  # captured from the enclosing graph
        ops: list[Op] = []
        for i, node in enumerate(og.nodes):
            ins = [tensor(x) if x else None for x in node.inputs]
            outs = []
            for x in node.outputs:
                if not x:
                    continue
                t = tensor(x)
                if t.producer is not None or t.is_const:
                    raise GraphError(f"value {x!r} is written twice",
                                     where=f"graph {g.name!r} node {i} ({node.op_type})",
                                     fix="each ONNX value has one producer")
                outs.append(t)
            origin = self.next_origin
            self.next_origin += 1
            self.model.source_table[origin] = node.name or f"{node.op_type}_{i}"
            op = Op(node.op_type, ins, outs, origins=(origin,), extra={
                "node_name": node.name, "domain": node.domain,
                "attributes": {k: v for k, v in node.attributes.items()
                               if not isinstance(v, OnnxGraph)
                               and not (isinstance(v, list) and v
                                        and isinstance(v[0], OnnxGraph))},
                "metadata": dict(node.metadata), "node_index": i,
            })
            g.attach_op(op)
            op._seq = float(i)
            ops.append(op)
        for v in og.outputs:
            g.outputs.append(tensor(v.name))
        g.extra["outer_scope"] = outer_refs
        g.extra["onnx_nodes"] = ops
        return g


def model_from_onnx(om: OnnxModel) -> Model:
    """Build a :class:`~toolkit.ir.Model` from a decoded :class:`OnnxModel` (see
    :func:`load_onnx`)."""
    model = Model([], format="onnx", description=om.producer or None)
    model.path = om.path
    builder = _Builder(model)
    main = builder.graph(om.graph, "main", False)
    model.subgraphs.append(main)
    queue: list[tuple[OnnxGraph, Graph]] = [(om.graph, main)]
    while queue:
        og, g = queue.pop(0)
        for node, op in zip(og.nodes, g.extra["onnx_nodes"]):
            subs = node.subgraphs()
            if not subs:
                continue
            op.extra["subgraphs"] = {}
            for key, sub in subs.items():
                sg = builder.graph(sub, f"{g.name}/{node.name or node.op_type}/{key}", True)
                op.extra["subgraphs"][key] = len(model.subgraphs)
                model.subgraphs.append(sg)
                queue.append((sub, sg))
    main.verify()
    for g in model.subgraphs:
        g.extra.pop("onnx_nodes", None)
    model.extra = {
        "opsets": dict(om.opsets), "producer": om.producer, "ir_version": om.ir_version,
        "metadata": dict(om.metadata), "functions": list(om.functions),
        "external_data": om.external_data(),
    }
    _assign_layers(model)
    return model


# ------------------------------------------------------------------------------------- layers


def _hierarchy(metadata: dict[str, str]) -> list[str]:
    text = metadata.get(CLASS_HIERARCHY_KEY)
    return (parse_name_scopes(text) or []) if text is not None else []


def _assign_layers(model: Model) -> None:
    """Name every node's layers (:func:`toolkit.layer_names.onnx_layers`: ``model.origins``,
    mirrored in ``op.extra["layer"]``), then list the exporter's fusions, the nodes without a
    layer and the modules without a node."""
    onnx_layers(model)
    ops = sorted(model.graph.ops, key=lambda o: o.extra["node_index"])
    missing = []
    for g in model.subgraphs:
        for op in g.ops:
            op.extra["exporter_fused"] = _exporter_fused(op)
    for op in ops:
        if not op.extra["layer"] and op.extra["layer_from"] == "none":
            missing.append(op.extra["node_name"] or f"{op.type}_{op.extra['node_index']}")
    model.extra["nodes_without_layer"] = missing
    model.extra["modules_without_nodes"] = _modules_without_nodes(model, ops)


def _exporter_fused(op: Op) -> str:
    hierarchy = _hierarchy(op.extra["metadata"])
    if op.type not in _NORM_OPS and len(hierarchy) >= 2:
        module = hierarchy[-2].rsplit(".", 1)[-1]
        if any(module.startswith(n) for n in _NORMS):
            return (f"{op.type} carries the metadata of a {module}: the exporter folded the "
                    f"norm into it")
    if op.type in _WEIGHTED_OPS:
        renamed = [t.name for t in op.inputs[1:] if t is not None and t.is_const
                   and t.name.startswith("onnx::") and t.dtype is not None
                   and t.dtype.kind == "f"]
        if renamed:
            return (f"its parameters {renamed} were computed by the exporter (a norm folded "
                    f"into the {op.type})")
    return ""


def _modules_without_nodes(model: Model, ops: list[Op]) -> list[dict[str, str]]:
    owners: dict[str, list[str]] = defaultdict(list)
    for op in ops:
        for layer in {x for o in op.origins for x in model.origin(o).layers} or {""}:
            owners[layer].append(op.extra["node_name"] or op.type)
    modules: dict[str, str] = {}
    for layer in list(owners):
        parts = layer.split(".") if layer else []
        for k in range(1, len(parts)):
            prefix = ".".join(parts[:k])
            if prefix not in owners:
                modules.setdefault(prefix, "container: its submodules own its nodes")
    param_users: dict[str, list[Op]] = defaultdict(list)
    g = model.graph
    for t in g.tensors:
        m = _PARAM.match(t.name)
        if m and t.is_const:
            param_users[m.group(1)].extend(t.consumers)
    for module, users in param_users.items():
        if module in owners:
            continue
        if users:
            other = sorted({f"{u.extra['node_name'] or u.type} ({u.extra['layer'] or '<top>'})"
                            for u in users})
            modules[module] = ("folded by the exporter: its parameters feed "
                               + ", ".join(other))
        else:
            modules[module] = "its parameters are in the file but no node reads them"
        parts = module.split(".")
        for k in range(1, len(parts)):
            prefix = ".".join(parts[:k])
            if prefix not in owners:
                modules.setdefault(prefix, "container: its submodules own its nodes")
    return [{"module": k, "reason": v} for k, v in sorted(modules.items())]
