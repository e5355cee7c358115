"""Original layer names, per producer: the one place where layers are named.

Every importer fills ``model.origins`` (one :class:`~toolkit.ir.Origin` per source op) through
:func:`name_layers`; every table reads layers from ``model.origin(oid).layers``. The rules, with
examples from real files, are in ``docs/layers.md``:

* **TensorFlow's converter** (``.tflite``; a ``.circle`` whose ONE source table keeps the
  converter's names): :func:`tf_layers`. ``model/layer/op/path`` names; the model scope and the
  op path under the layer are stripped, the tracing suffix Keras 3 adds to every scope (``_1``)
  is removed where every scope of the file carries one, ``;``-joined fused names give one layer
  per part, empty parts and parts that are not scoped names (tensor names such as
  ``StatefulPartitionedCall_1:0``, converter ops such as ``tfl.dequantize``) are dropped.
* **ONNX** (:func:`onnx_layers`): the dynamo exporter's ``name_scopes`` metadata; the
  TorchScript exporter's scoped node names (:func:`scope_layers`); tf2onnx's TF scopes (as
  above); unscoped nodes (paddle2onnx, hand-made files) are their own layer, named after the node.
* **Caffe**: the layer's name. **ONE origins** (a ``.circle`` with origin tables): the origin
  names, by the TensorFlow rule when they are converter names.
* **Ops no name places**: a converter op named after a tensor (the ``SOFTMAX`` of the output
  layer named ``StatefulPartitionedCall_1:0``, a ``QUANTIZE`` of an input) belongs to no layer,
  the reason in ``Origin.why`` (the file does not say; the op next to it is no evidence). An
  ONNX node an optimizer made takes the layers its tensors name (parameters it reads, scoped
  values it writes), else the one layer every node writing its inputs (else reading its
  outputs) has, else none.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from toolkit.ir import Model, Op, Origin

__all__ = ["name_layers", "tf_layers", "tf_scope", "scope_layers", "onnx_layers",
           "module_stack_layer",
           "MAIN_TF_OPS", "NO_LAYER"]

#: The one ``layer`` row of the source ops that belong to no layer (their ``Origin.why`` says
#: why), the nodes of the top (root) module included: every join lists them under it (the
#: reference's :func:`toolkit.source_table.layers_table`, ONNX Runtime's and ExecuTorch's
#: provenance) and the notebooks' tables and figures label the unnamed root layer with it.
NO_LAYER = "(no layer)"

_SUFFIX = re.compile(r"^(.*)_(\d+)$")
_TRAILING_DIGITS = re.compile(r"\d+$")
#: TensorFlow ops (the last component of a converter name, trailing digits dropped) that do
#: a fused op's multiply-accumulates: the layer they belong to is the op's main layer.
MAIN_TF_OPS = frozenset({
    "Conv2D", "Conv3D", "convolution", "depthwise", "DepthwiseConv2dNative", "Conv2DBackpropInput",
    "conv_transpose", "conv2d_transpose", "MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum",
    "Tensordot", "conv1d", "Conv1D"})
#: ONNX op types that do a node's multiply-accumulates.
_MAIN_ONNX_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "FusedConv",
                            "FusedGemm", "FusedMatMul", "QLinearConv", "QLinearMatMul",
                            "ConvInteger", "MatMulInteger"})


def name_layers(model: Model, exporter: str = "") -> Model:
    """Fill ``model.origins`` with one :class:`~toolkit.ir.Origin` per origin id of the source
    table that has none yet, by the rule of the model's producer; return ``model``.

    ``exporter`` names the producer when the caller knows it (``"tflite_converter"``,
    ``"caffe"``, ``"one"`` ...); else it is told from the model's format and names.
    Idempotent: records already there are kept.
    """
    fmt = model.format or "tflite"
    if fmt == "onnx":
        onnx_layers(model)
    elif fmt == "caffe" or exporter == "caffe":
        for oid, name in model.source_table.items():
            model.origins.setdefault(oid, Origin(oid, name, (name,) if name else (), "caffe",
                                                 "caffe", "the Caffe layer's name"))
    else:
        _tflite_origins(model, exporter)
    return model


# ----------------------------------------------------------------------------- ExecuTorch


def module_stack_layer(stack: Sequence[tuple[str, str, str]]) -> str | None:
    """The layer of an ExecuTorch (``torch.export``) node: the innermost module path of its
    ``nn_module_stack`` (``[(key, path, type), ...]`` outermost first), e.g.
    ``features.1.conv.0.0``; None without a stack (the caller then takes the enclosing
    node's, else the root module)."""
    return stack[-1][1] if stack else None


# ----------------------------------------------------------------------------- TensorFlow


def tf_scope(names: Iterable[str]) -> tuple[str | None, bool]:
    """Return ``(model scope, strip suffix)`` of a file's converter names.

    The model scope is the first component every scoped (``/``) part of every name shares,
    provided at least half of the names (those the converter made, ``tfl.…`` or ``x:0``, left
    out) have such a part and some part names a layer under it (``scope/layer/op``: a Keras
    model converted whole);
    ``None`` for a ``tf.function`` of raw ops. ``strip suffix`` is True when the scope and every
    layer component under it end in ``_<n>``: the suffix Keras 3's tracing adds to each scope
    (``bn_Conv1_1``), removed once; a file where some layer has no such suffix keeps names as
    they are (``block_1_expand`` is a layer of its own).
    """
    names = [n for n in names if not _converter_made(n)]
    firsts: Counter[str] = Counter()
    scoped = 0
    for name in names:
        parts = [p for p in (x.strip() for x in name.split(";")) if "/" in p]
        if parts:
            scoped += 1
        firsts.update({p.split("/", 1)[0] for p in parts})
    if len(firsts) != 1 or scoped * 2 < max(len(names), 1):
        return None, False
    scope = next(iter(firsts))
    layer_comps = {p.split("/")[1] for n in names for p in (x.strip() for x in n.split(";"))
                   if p.count("/") >= 2}
    if not layer_comps:  # "blk/conv", "blk/sin": no layer under a scope, the scope is none
        return None, False
    strip = bool(_SUFFIX.match(scope)) and bool(layer_comps) and all(
        _SUFFIX.match(c) for c in layer_comps)
    return scope, strip


def _converter_made(name: str) -> bool:
    """True for a name the converter made (``tfl.unidirectional_sequence_lstm1``) or took from
    a tensor (``StatefulPartitionedCall:0``), not from a TensorFlow op."""
    parts = [p.strip() for p in name.split(";") if p.strip()]
    return bool(parts) and all("/" not in p and (p.startswith("tfl.") or ":" in p)
                               for p in parts)


def tf_layers(name: str, scope: str | None, strip: bool) -> tuple[tuple[str, ...], str]:
    """Return ``(layers, main layer)`` of one converter name (see :func:`tf_scope`).

    With a model scope, a part ``scope/layer/op/path`` gives ``layer`` (its tracing suffix
    removed when ``strip``); a part ``scope/op`` (an op of the model outside any layer) or a
    part without ``/`` (a tensor name, a converter-made op, a stray digit) gives none. Without a
    model scope (a ``tf.function``), a part's first component is the TF op the user called
    (``clip_by_value/Minimum`` -> ``clip_by_value``), a part without ``/`` is that op unless
    it is a tensor name (``x:0``) or a converter op (``tfl.``). ``main`` is the layer of the
    part whose op does the multiply-accumulates (:data:`MAIN_TF_OPS`), ``""`` when none does.
    Layers are in the order they ran (the converter lists the last first):
    ``m/Conv1_relu_1/Relu6;m/bn_Conv1_1/batchnorm/add_1;m/Conv1_1/convolution`` gives
    ``("Conv1", "bn_Conv1", "Conv1_relu")``, main ``Conv1``.
    """
    layers: list[str] = []
    main = ""
    for part in (p.strip() for p in name.split(";")):
        if not part:
            continue
        comps = part.split("/")
        if scope is not None:
            if comps[0] != scope or len(comps) < 3:
                continue
            layer = comps[1]
            if strip:
                m = _SUFFIX.match(layer)
                layer = m.group(1) if m else layer
        else:
            if len(comps) == 1 and (":" in part or part.startswith("tfl.")):
                continue
            layer = comps[0]
        if not layer:
            continue
        if layer not in layers:
            layers.append(layer)
        if not main and _TRAILING_DIGITS.sub("", comps[-1]) in MAIN_TF_OPS:
            main = layer
    # the converter lists a fused op's layers last-applied first (Relu6;batchnorm;conv):
    # give them in the order they ran, the main layer first
    layers.reverse()
    if main:
        layers.remove(main)
        layers.insert(0, main)
    return tuple(layers), main


def _tflite_origins(model: Model, exporter: str) -> None:
    names = model.source_table
    todo = [oid for oid in names if oid not in model.origins]
    if not todo:
        return
    fmt = model.format or "tflite"
    scope, strip = tf_scope(names.values())
    converter = scope is not None or any(("/" in n or ";" in n) for n in names.values())
    exporter = exporter or ("tflite_converter" if converter else
                            "one" if fmt == "circle" else "")
    found: dict[int, tuple[tuple[str, ...], str, str]] = {}
    for oid in todo:
        name = names[oid]
        if converter:
            layers, main = tf_layers(name, scope, strip)
            why = ("TensorFlow converter name: model scope and op path stripped"
                   + (", tracing suffix removed" if strip else "")) if scope is not None else \
                "TensorFlow op name (no model scope: a tf.function)"
        else:
            layers = (name,) if name and ":" not in name else ()
            main, why = "", "the origin's own name"
        found[oid] = (layers, main, why)
    params = _param_layers(model, scope, strip) if converter else {}
    for oid, (layers, _main, _why) in found.items():
        if layers:
            continue
        if params.get(oid):
            found[oid] = (params[oid], params[oid][0],
                          "the converter named it after a tensor: the layer of the parameters "
                          "it reads (constants named by the layer's scope)")
        else:
            found[oid] = ((), "", "the converter named it after a tensor or made it itself "
                          f"({names[oid]!r}): the file does not say which layer it belongs to")
    for oid in todo:
        layers, main, why = found[oid]
        model.origins[oid] = Origin(oid, names[oid], layers, fmt, exporter, why,
                                    main if main in layers else "")


def _param_layers(model: Model, scope: str | None, strip: bool) -> dict[int, tuple[str, ...]]:
    """Origin id -> the layers the constant inputs of its ops name (``fused_lstm/fc/MatMul``,
    a weight the converter named by its layer's scope -> ``fc``)."""
    out: dict[int, tuple[str, ...]] = {}
    for g in model.subgraphs:
        for op in g.ops:
            layers: list[str] = []
            for t in op.inputs:
                if t is not None and t.is_const:
                    for layer in tf_layers(t.name, scope, strip)[0] if scope is not None else ():
                        if layer not in layers:
                            layers.append(layer)
            for oid in op.origins:
                if layers:
                    out[oid] = tuple(dict.fromkeys((*out.get(oid, ()), *layers)))
    return out


# ----------------------------------------------------------------------------------- ONNX


def scope_layers(names: Sequence[str]) -> list[str | None]:
    """Module paths of TorchScript-exporter node names (``/layer1/layer1.0/conv1/Conv`` ->
    ``layer1.0.conv1``; ``/features/features.1/conv/conv.0/conv.0.0/Conv`` ->
    ``features.1.conv.0.0``; ``/Flatten`` -> ``""``; a name not starting with ``/`` -> None).

    Each scope is a module's attribute name, or its path when it nests in a ``Sequential``
    (``conv.0`` under ``conv``): a component that starts with its parent's last attribute name
    plus ``.`` replaces it (``features`` + ``features.1`` -> ``features.1``; ``conv`` +
    ``conv.0`` -> ``conv.0``), any other is appended. A scope ``X_N`` is folded onto ``X`` when
    ``X`` is a scope under the same parent (the exporter's suffix for a module called again).
    """
    split: list[list[str] | None] = []
    for name in names:
        if not name.startswith("/"):
            split.append(None)
            continue
        split.append([s for s in name[1:].split("/")[:-1] if s])

    def walk(parts: list[str], known: set[str] | None) -> list[str]:
        comps: list[str] = []  # the scopes seen, as written
        full: list[str] = []   # their module paths
        for s in parts:
            path = ""
            for c, f in zip(reversed(comps), reversed(full)):
                if s.startswith(c + "."):  # a Sequential child, named relative to c's parent
                    path = f[:len(f) - len(c)] + s
                    break
            if not path:
                path = f"{full[-1]}.{s}" if full else s
            if known is not None:
                m = _SUFFIX.match(path)
                if m and m.group(1) in known:
                    path = m.group(1)
            comps.append(s)
            full.append(path)
        return full

    known: set[str] = set()
    for parts in split:
        if parts:
            known.update(walk(parts, None))
    result: list[str | None] = []
    for parts in split:
        if parts is None:
            result.append(None)
            continue
        full = walk(parts, known)
        result.append(full[-1] if full else "")
    return result


def _dynamo_layer(metadata: dict[str, str]) -> str | None:
    from toolkit.formats.onnx_model import parse_name_scopes

    text = metadata.get("pkg.torch.onnx.name_scopes")
    if text is None:
        return None
    scopes = parse_name_scopes(text)
    if not scopes:
        return None
    return scopes[-2] if len(scopes) >= 2 else ""


def _onnx_exporter(model: Model) -> str:
    producer = str((model.extra or {}).get("producer") or "").lower()
    for key, name in (("pytorch", "pytorch"), ("tf2onnx", "tf2onnx"),
                      ("paddle", "paddle2onnx"), ("onnxruntime", "onnxruntime")):
        if key in producer:
            return name
    return producer


_PARAM = re.compile(r"^(.+)\.(weight|bias|running_mean|running_var|weight_ih_l\d+|"
                    r"weight_hh_l\d+|bias_ih_l\d+|bias_hh_l\d+|in_proj_weight|in_proj_bias)$")
_TS_NODE = re.compile(r"^[A-Z][A-Za-z0-9]*?(_\d+)?$")


def _trusted_scope(name: str, op_type: str) -> bool:
    """True for a node name as the TorchScript exporter writes it: ``/scope/.../OpType`` or
    ``/scope/.../OpType_N`` with the node's own op type; an optimizer's renamed or fused
    node (``/qkv/MatMul/MatMulAddFusion`` now a Gemm, ``/relu/Relu_output_0_nchwc``,
    ``fused /fc1/Gemm``) is not."""
    if not name.startswith("/") or name.endswith("/"):
        return False
    last = name.rsplit("/", 1)[-1]
    m = _TS_NODE.match(last)
    return bool(m) and (last == op_type or last.startswith(op_type + "_"))


_WHY = {"name_scopes": "the dynamo exporter's name_scopes",
        "scope": "the TorchScript exporter's scoped node name",
        "tensors": ("a node an exporter or optimizer made: the modules of the parameters it "
                    "reads and of the scoped values it writes"),
        "tf_scope": "tf2onnx: TensorFlow scope, model scope and op path stripped",
        "tf_params": ("tf2onnx: a node it made anew, the TensorFlow layer of the parameters "
                      "it reads"),
        "producers": "no scope: the layer of the nodes writing its inputs",
        "consumers": "no scope: the layer of the nodes reading its outputs",
        "node": "no scope in the file: the node's own name"}


def onnx_layers(model: Model) -> None:
    """Fill ``model.origins`` for an ONNX model (see ``docs/layers.md``) and mirror each
    op's first layer in ``op.extra["layer"]`` (the module path; ``""`` for the top module or
    no layer) and the rule in ``op.extra["layer_from"]``.

    Rules in order: the dynamo exporter's ``name_scopes`` (``name_scopes``; a Conv into which
    the exporter folded a norm carries the norm's scopes: the modules of the parameters it
    reads come first, ``("layer1.0.conv1", "layer1.0.bn1")``); a TorchScript
    node name (``scope``); for a node an exporter or optimizer made or renamed, the modules
    of the parameters it reads (``fc1.bias`` -> ``fc1``) and of the TorchScript values it
    writes (``/act1/Relu_output_0`` -> ``act1``) (``tensors``: ORT's ``Gelu_AddBias`` of
    ``fc1``'s bias and ``act1`` gets both); a tf2onnx name (``tf_scope``); the one layer every
    node reading its outputs, else writing its inputs, has (``consumers``/``producers``); in a
    file without any scoped name (paddle2onnx, hand-made), the node's own name (``node``);
    else no layer (``none``, the reason in ``Origin.why``).
    """
    exporter = _onnx_exporter(model)
    graphs = [sorted(g.ops, key=lambda o: o.extra.get("node_index", 0))
              for g in model.subgraphs]
    # scopes are read file-wide: a branch of an If (``/pos/0/Gemm`` inside a scripted
    # module's ``If``) is named as the main graph is, and a module called again in a branch
    # folds onto the same known scopes
    names = [[str(o.extra.get("node_name") or "") for o in ops] for ops in graphs]
    values_of = [[t.name for op in ops for t in op.outputs] for ops in graphs]
    flat = scope_layers([x for nn_, vs in zip(names, values_of) for x in (*nn_, *vs)])
    tf_s, tf_strip = tf_scope(names[0]) if graphs else (None, False)
    at = 0
    for gi, ops in enumerate(graphs):
        node_names, values = names[gi], values_of[gi]
        scoped = flat[at:at + len(ops) + len(values)]
        at += len(ops) + len(values)
        value_layer = dict(zip(values, scoped[len(ops):]))
        any_scope = any(s is not None for s in scoped) or tf_s is not None
        multi: dict[int, tuple[str, ...]] = {}
        for op, sl, nn in zip(ops, scoped, node_names):
            dl = _dynamo_layer(op.extra.get("metadata") or {})
            tensor_layers = _tensor_layers(op, value_layer)
            if dl is not None:
                op.extra["layer"], op.extra["layer_from"] = dl, "name_scopes"
                params = _tensor_layers(op, {})
                if params and dl not in params:
                    # the exporter folded a norm into this Conv and gave it the norm's
                    # metadata: the Conv's module (its parameters) ran it, then the norm
                    multi[id(op)] = (*params, dl)
                    op.extra["layer"] = params[0]
            elif sl is not None and _trusted_scope(nn, op.type):
                op.extra["layer"], op.extra["layer_from"] = sl, "scope"
            elif tensor_layers:
                op.extra["layer"], op.extra["layer_from"] = tensor_layers[0], "tensors"
                multi[id(op)] = tensor_layers
            elif tf_s is not None and tf_layers(nn, tf_s, tf_strip)[0]:
                op.extra["layer"] = tf_layers(nn, tf_s, tf_strip)[0][0]
                op.extra["layer_from"] = "tf_scope"
            elif tf_s is not None and _tf_param_layers(op, tf_s, tf_strip):
                # a node tf2onnx made anew (``Conv__43``, a depthwise Conv rebuilt NCHW, its
                # kernel now ``const_fold_opt__116``) reading a TF-scoped parameter (the
                # bias ``ds_cnn_1/block_0_dw_1/Squeeze:0``): that parameter's layer
                layers = _tf_param_layers(op, tf_s, tf_strip)
                op.extra["layer"], op.extra["layer_from"] = layers[0], "tf_params"
                multi[id(op)] = layers
            else:
                op.extra["layer"], op.extra["layer_from"] = None, "none"
        _onnx_neighbours(ops)
        for op in ops:
            if op.extra["layer"] is None:
                if not any_scope and gi == 0:
                    own = op.extra.get("node_name") or f"{op.type}_{op.extra.get('node_index')}"
                    op.extra["layer"], op.extra["layer_from"] = own, "node"
                else:
                    op.extra["layer"] = ""
        for op in ops:
            layer = op.extra["layer"]
            how = op.extra["layer_from"]
            why = _WHY.get(how, "no scope, and the nodes around it do not agree on a layer")
            if how in ("name_scopes", "scope") and layer == "":
                why += " (the top module)"
            layers = multi.get(id(op)) or ((layer,) if layer else ())
            for oid in op.origins:
                model.origins.setdefault(oid, Origin(
                    oid, model.source_table.get(oid, op.name), layers, "onnx", exporter, why,
                    layers[0] if layers and op.type in _MAIN_ONNX_OPS else ""))


def _tf_param_layers(op: Op, scope: str, strip: bool) -> tuple[str, ...]:
    """The TF layers (:func:`tf_layers`) of the constants a computing node reads (tf2onnx
    names a parameter after the TF op that made it); none for a node reading no activation."""
    if not any(t is not None and not t.is_const for t in op.inputs):
        return ()
    out: list[str] = []
    for t in op.inputs:
        if t is not None and t.is_const:
            for layer in tf_layers(t.name, scope, strip)[0]:
                if layer not in out:
                    out.append(layer)
    return tuple(out)


def _tensor_layers(op: Op, value_layer: dict[str, str | None]) -> tuple[str, ...]:
    """The modules of the parameters a computing node reads and of the scoped values it
    writes; none for a node that reads no activation (a copy of a shared parameter)."""
    out: list[str] = []
    if not any(t is not None and not t.is_const for t in op.inputs):
        return ()
    for t in op.inputs:
        if t is not None and t.is_const:
            m = _PARAM.match(t.name)
            if m and m.group(1) not in out:
                out.append(m.group(1))
    for t in op.outputs:
        layer = value_layer.get(t.name)
        if layer and layer not in out:
            out.append(layer)
    return tuple(out)


def _onnx_neighbours(ops: list[Op]) -> None:
    """Nodes without a layer: the one layer every node reading their outputs has, else every
    node writing their inputs (a Split of ``qkv``'s output read by its block is the
    block's); repeated until nothing changes."""
    for _ in range(len(ops)):
        changed = False
        for op in reversed(ops):
            if op.extra["layer"] is not None:
                continue
            readers = {c.extra.get("layer") for t in op.outputs for c in t.consumers}
            if readers and None not in readers and len(readers) == 1:
                op.extra["layer"], op.extra["layer_from"] = readers.pop(), "consumers"
                changed = True
        for op in ops:
            if op.extra["layer"] is not None:
                continue
            writers = {t.producer.extra.get("layer") for t in op.inputs
                       if t is not None and t.producer is not None}
            if writers and None not in writers and len(writers) == 1:
                op.extra["layer"], op.extra["layer_from"] = writers.pop(), "producers"
                changed = True
        if not changed:
            break
