"""Write a :class:`toolkit.ir.Model` as a .tflite (``TFL3``) or .circle (``CIR0``) FlatBuffer.

Written with the circle-schema bindings' builder functions. Constant data is stored once per
distinct array (tensors sharing one array share one buffer), 16-byte aligned. The ONE origin
tables are written as metadata so that loading the file restores every op's origins.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np

from toolkit.errors import ModelFormatError, ToolkitError
from toolkit.formats.origin_tables import (
    OP_TABLE,
    SOURCE_TABLE,
    encode_op_table,
    encode_source_table,
)
from toolkit.ir import Graph, Model, Op, Tensor
from toolkit.schema import (
    ACTIVATION_CODES,
    BUILTIN_CODES,
    OPTIONS_TYPE_CODES,
    PLACEHOLDER_FOR_GREATER_OP_CODES,
    fb,
)
from toolkit.util.args import check_optional_bool
from toolkit.util.atomic import atomic_write

__all__ = ["save", "write_model", "origin_tables", "ignored_activations", "ignores_activation",
           "TANH_ACTIVATION_OPS"]

_IDENT = {"tflite": b"TFL3", "circle": b"CIR0"}
_MAX_TFLITE_OPTIONS = 249  # union values above belong to circle-only options
_LIMIT = 2**31 - 1


def save(model: Model, path: str | os.PathLike[str], *, origin_tables: bool | None = None) -> Path:
    """Write ``model`` to ``path``; the format follows the extension (.tflite or .circle).

    ``origin_tables``: write ``ONE_source_table``/``ONE_op_table``; by default always for
    .circle, and for .tflite when the model carries origins other than the identity.
    The file is written atomically (temp file + rename). Returns the path.
    """
    check_optional_bool(origin_tables, "origin_tables", "save")
    p = Path(path)
    ext = p.suffix.lower()
    fmt = {".tflite": "tflite", ".circle": "circle"}.get(ext)
    if fmt is None:
        raise ToolkitError(f"cannot tell the model format from extension {ext!r}", where=str(p),
                           fix="use a .tflite or .circle file name")
    data = write_model(model, fmt, origin_tables=origin_tables, where=str(p))
    atomic_write(p, data)
    return p


def _identity_origins(model: Model) -> bool:
    offset = 0
    for g in model.subgraphs:
        for i, op in enumerate(g.ops):
            if op.origins != {i + offset} or model.source_table.get(i + offset) != op.name:
                return False
        offset += len(g)
    return not any(g.removed_origins for g in model.subgraphs)


def origin_tables(model: Model) -> tuple[bytes, bytes]:
    """Return the (source table, op table) bytes for the model's subgraph 0.

    The op table's key is the op's index in the written subgraph 0; the source table names
    every origin id used (falling back to the id's op name when the model has no name).
    """
    ops = model.graph.ops
    used: set[int] = set()
    table = {}
    for i, op in enumerate(ops):
        table[i] = op.origins
        used |= op.origins
    used |= set(model.graph.removed_origins)
    names = {oid: model.source_table.get(oid, f"origin_{oid}") for oid in used}
    if any(o < 0 or o > 0xFFFFFFFF for o in used):
        raise ToolkitError(
            "origin ids must fit in uint32 for the ONE tables",
            fix=(
                "give the model's ops origin ids between 0 and 4294967295 (Graph.origin_from with "
                "small ids), or write it without origin_tables"
            ),
        )
    return encode_source_table(names), encode_op_table(table)


TANH_ACTIVATION_OPS = frozenset({
    "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "RNN",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "SVDF"})
"""Ops whose LiteRT kernels apply a fused TANH (their cell activation); others ignore it."""


def ignores_activation(op: Op) -> bool:
    """True when LiteRT would ignore the fused activation of ``op`` (a fused TANH on an op
    other than the recurrent ones of :data:`TANH_ACTIVATION_OPS`)."""
    return op.activation == ACTIVATION_CODES["TANH"] and op.type not in TANH_ACTIVATION_OPS


def ignored_activations(model: Model) -> list[str]:
    """Return one line per op of ``model`` whose fused activation LiteRT ignores, naming its
    subgraph, index, type and name (empty when there is none)."""
    return [f"{op.type} {op.name!r} (subgraph {si} op {i}) has a fused TANH"
            for si, g in enumerate(model.subgraphs) for i, op in enumerate(g.ops)
            if ignores_activation(op)]


def write_model(model: Model, fmt: str = "circle", *, origin_tables: bool | None = None,
                where: str = "<model>") -> bytearray:
    """Return the FlatBuffer bytes of ``model`` in ``fmt`` (``"tflite"`` or ``"circle"``).

    A model with fused activations that LiteRT ignores (see :func:`ignored_activations`)
    cannot be written as ``"tflite"``: LiteRT would run it without them, silently wrong.
    """
    if fmt not in _IDENT:
        raise ToolkitError(f"unknown model format {fmt!r}", fix="use 'tflite' or 'circle'")
    if fmt == "tflite":
        ignored = ignored_activations(model)
        if ignored:
            more = f" (and {len(ignored) - 3} more)" if len(ignored) > 3 else ""
            raise ModelFormatError(
                "LiteRT ignores fused activations of this model: " + "; ".join(ignored[:3])
                + more, where=where,
                fix="save as .circle, compile without fusing TANH (e.g. FuseActivation(['RELU', "
                    "'RELU6', 'RELU_N1_TO_1'])), or split them out first with "
                    "toolkit.compiler.lite_safe.unfuse_ignored_activations(model)")
    if origin_tables is None:
        origin_tables = fmt == "circle" or model.had_origin_tables or not _identity_origins(model)
    return _Writer(model, fmt, where).write(origin_tables)


class _Writer:
    def __init__(self, model: Model, fmt: str, where: str) -> None:
        self.model = model
        self.fmt = fmt
        self.where = where
        total = sum(t.data.nbytes for g in model.subgraphs for t in g.tensors
                    if t.data is not None)
        if total > _LIMIT - 2**20:
            raise ModelFormatError(f"constant data is {total} bytes, over the 2 GiB FlatBuffer "
                                   "limit", where=where, fix="split the model")
        self.b = flatbuffers.Builder(max(1024, total + 2**16))
        self.buffers: list[int] = []  # offsets of Buffer tables, index = buffer index
        self.buffer_of: dict[tuple[int, int, str], int] = {}
        self.opcodes: dict[tuple[int, str | None, int], int] = {}

    def _err(self, what: str, fix: str | None = None) -> ModelFormatError:
        return ModelFormatError(what, where=self.where, fix=fix)

    # ---------------------------------------------------------------- data
    def _bytes_vector(self, raw: bytes | np.ndarray, align: int = 16) -> int:
        b = self.b
        payload = raw.tobytes() if isinstance(raw, np.ndarray) else bytes(raw)
        n = len(payload)
        b.StartVector(1, n, align)
        b.head = b.head - n
        b.Bytes[b.head:b.head + n] = payload
        b.vectorNumElems = n
        return b.EndVector()

    def _buffer_for(self, t: Tensor) -> int:
        arr = t.data
        if arr is None:
            return 0
        arr = np.asarray(arr)
        if t.extra.get("sparsity") is not None:
            arr = self._sparse_values(t, arr)
        key = (arr.__array_interface__["data"][0], arr.nbytes, arr.dtype.str + str(arr.shape))
        idx = self.buffer_of.get(key)
        if idx is None:
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            if arr.dtype.byteorder == ">":
                arr = arr.byteswap().view(arr.dtype.newbyteorder("<"))
            idx = self._add_buffer(arr)
            self.buffer_of[key] = idx
        return idx

    def _sparse_values(self, t: Tensor, dense: np.ndarray) -> np.ndarray:
        """The stored values of a sparse constant (read with it), when its dense data is
        still what they encode."""
        values = t.extra.get("sparse_values")
        known = t.extra.get("sparse_dense")
        if values is None or known is None or not (
                dense is known or (dense.shape == known.shape and dense.dtype == known.dtype
                                   and np.array_equal(dense, known))):
            raise self._err(f"tensor {t.name!r} has a sparsity field but its data is not the "
                            "sparse values it was read with",
                            fix="remove the sparsity (del tensor.extra['sparsity']) to write "
                                "the tensor dense, with no DENSIFY op reading it")
        return np.asarray(values)

    def _add_buffer(self, raw: bytes | np.ndarray) -> int:
        vec = self._bytes_vector(raw)
        fb.Buffer.Start(self.b)
        fb.Buffer.AddData(self.b, vec)
        self.buffers.append(fb.Buffer.End(self.b))
        return len(self.buffers) - 1

    def _int_vector(self, values: Any, dtype: Any = np.int32) -> int:
        try:
            arr = np.asarray(values, dtype=dtype).reshape(-1)
        except (OverflowError, ValueError) as e:
            raise self._err(f"a value does not fit the file's {np.dtype(dtype).name} vector "
                            f"({e})", fix="shapes and indices must fit 32-bit integers"
                            ) from None
        return self.b.CreateNumpyVector(arr)

    def _table_vector(self, offsets: list[int]) -> int:
        b = self.b
        b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        b.vectorNumElems = len(offsets)
        return b.EndVector()

    # -------------------------------------------------------------- tensors
    def _quant(self, t: Tensor) -> int | None:
        q = t.quant
        if q is None:
            return None
        qt: Any = fb.QuantizationParameters.QuantizationParametersT()
        qt.scale = np.asarray(q.scale, dtype=np.float32) if q.scale.size else None
        qt.zeroPoint = np.asarray(q.zero_point, dtype=np.int64) if q.zero_point.size else None
        qt.min = None if q.min is None else np.asarray(q.min, dtype=np.float32)
        qt.max = None if q.max is None else np.asarray(q.max, dtype=np.float32)
        qt.quantizedDimension = q.quantized_dimension
        qt.detailsType = q.details_type
        qt.details = q.details
        return qt.Pack(self.b)

    def _tensor(self, t: Tensor) -> int:
        b = self.b
        if t.type_code < 0 and self.fmt == "tflite":
            raise self._err(f"tensor {t.name!r} has circle-only type {t.type_name}",
                            fix="save as .circle")
        buf = self._buffer_for(t)
        name = b.CreateString(t.name)
        shape = self._int_vector(t.shape)
        sig = None if t.shape_signature is None else self._int_vector(t.shape_signature)
        quant = self._quant(t)
        sparsity = t.extra.get("sparsity")
        sp = sparsity.Pack(b) if sparsity is not None else None
        variants = t.extra.get("variant_tensors")
        vt = self._table_vector([v.Pack(b) for v in variants]) if variants else None
        T = fb.Tensor
        T.Start(b)
        T.AddShape(b, shape)
        T.AddType(b, t.type_code)
        T.AddBuffer(b, buf)
        T.AddName(b, name)
        if quant is not None:
            T.AddQuantization(b, quant)
        if t.is_variable:
            T.AddIsVariable(b, True)
        if sp is not None:
            T.AddSparsity(b, sp)
        if sig is not None:
            T.AddShapeSignature(b, sig)
        if t.has_rank:
            T.AddHasRank(b, True)
        if vt is not None:
            T.AddVariantTensors(b, vt)
        if t.extra.get("compression_type"):
            T.AddCompressionType(b, t.extra["compression_type"])
        return T.End(b)

    # ------------------------------------------------------------------ ops
    def _opcode(self, op: Op) -> int:
        code = BUILTIN_CODES.get(op.type)
        if code is None:
            raise self._err(
                f"op {op.name!r} has unknown type {op.type!r}",
                fix=(
                    "use an op type the TFLite/Circle schemas know (toolkit.schema "
                    "BUILTIN_CODES), or CUSTOM with a custom_code"
                ),
            )
        if code < 0 and self.fmt == "tflite":
            raise self._err(f"op {op.name!r} is circle-only ({op.type})",
                            fix="save as .circle, or compile without circle-only passes")
        key = (code, op.custom_code if op.type == "CUSTOM" else None, op.version)
        idx = self.opcodes.get(key)
        if idx is None:
            idx = self.opcodes[key] = len(self.opcodes)
        return idx

    def _options(self, op: Op) -> tuple[int, int | None]:
        opts = op.options
        if opts is None:
            return 0, None
        tname = op.options_type or type(opts).__name__.removesuffix("T")
        code = OPTIONS_TYPE_CODES.get(tname)
        if code is None:
            raise self._err(
                f"op {op.name!r}: unknown options type {tname!r}",
                fix=(
                    "give the op an options object of the schema (toolkit.builder.options_for), or "
                    "none"
                ),
            )
        if self.fmt == "tflite" and code > _MAX_TFLITE_OPTIONS:
            raise self._err(f"op {op.name!r} uses circle-only options {tname}",
                            fix="save as .circle")
        return code, opts.Pack(self.b)

    def _op(self, op: Op, index: dict[Tensor, int]) -> int:
        b = self.b
        opcode = self._opcode(op)
        try:
            ins = [(-1 if t is None else index[t]) for t in op.inputs]
            outs = [index[t] for t in op.outputs]
        except KeyError as e:
            raise self._err(f"op {op.kind} {op.name!r} uses a tensor that is not in its graph "
                            f"({e})",
                            fix=("add the tensor to the graph (Graph.attach_tensor) or rewire "
                                 "the op to one of the graph's tensors (Graph.set_input)")
                            ) from None
        in_vec = self._int_vector(ins)
        out_vec = self._int_vector(outs)
        opt_type, opt = self._options(op)
        custom = self._bytes_vector(op.custom_options, 1) if op.custom_options else None
        mvi = op.extra.get("mutating_variable_inputs")
        mvi_vec = self._int_vector(mvi, np.bool_) if mvi else None
        inter = op.extra.get("intermediates")
        lost = [t.name for t in inter or () if t is not None and t not in index]
        if lost:
            raise self._err(f"op {op.kind} {op.name!r} has intermediate tensor(s) {lost} that "
                            "are not in its graph (removed by hand?)",
                            fix="keep the op's intermediates in the graph: remove tensors with "
                                "Graph.remove_unused_tensors(), which keeps them, or reload "
                                "the model")
        inter_vec = self._int_vector([-1 if t is None else index[t] for t in inter]) \
            if inter else None
        opt2 = op.extra.get("options2")
        opt2_off = opt2.Pack(b) if opt2 is not None else None
        OP = fb.Operator
        OP.Start(b)
        OP.AddOpcodeIndex(b, opcode)
        OP.AddInputs(b, in_vec)
        OP.AddOutputs(b, out_vec)
        if opt is not None:
            OP.AddBuiltinOptionsType(b, opt_type)
            OP.AddBuiltinOptions(b, opt)
        if custom is not None:
            OP.AddCustomOptions(b, custom)
        if op.extra.get("custom_options_format"):
            OP.AddCustomOptionsFormat(b, op.extra["custom_options_format"])
        if mvi_vec is not None:
            OP.AddMutatingVariableInputs(b, mvi_vec)
        if inter_vec is not None:
            OP.AddIntermediates(b, inter_vec)
        if opt2_off is not None:
            OP.AddBuiltinOptions2Type(b, op.extra["options2_type"])
            OP.AddBuiltinOptions2(b, opt2_off)
        if "debug_metadata_index" in op.extra:
            OP.AddDebugMetadataIndex(b, op.extra["debug_metadata_index"])
        return OP.End(b)

    def _subgraph(self, g: Graph) -> int:
        b = self.b
        tensors = g.tensors
        index = {t: i for i, t in enumerate(tensors)}
        for t in (*g.inputs, *g.outputs):
            if t not in index:
                raise self._err(
                    f"graph input/output {t.name!r} is not a tensor of the graph",
                    fix=(
                        "list only the graph's own tensors in Graph.inputs / Graph.outputs (look "
                        "them up with Graph.tensor)"
                    ),
                )
        t_offs = [self._tensor(t) for t in tensors]
        tvec = self._table_vector(t_offs)
        o_offs = [self._op(op, index) for op in g.ops]
        ovec = self._table_vector(o_offs)
        ivec = self._int_vector([index[t] for t in g.inputs])
        outvec = self._int_vector([index[t] for t in g.outputs])
        name = b.CreateString(g.name) if g.name is not None else None
        S = fb.SubGraph
        S.Start(b)
        S.AddTensors(b, tvec)
        S.AddInputs(b, ivec)
        S.AddOutputs(b, outvec)
        S.AddOperators(b, ovec)
        if name is not None:
            S.AddName(b, name)
        dmi = g.extra.get("debug_metadata_index")
        if self.fmt == "circle":
            if g.extra.get("data_format"):
                b.PrependInt8Slot(5, g.extra["data_format"], 0)
            if dmi is not None:
                S.AddDebugMetadataIndex(b, dmi)
        elif dmi is not None:
            # TFLite's SubGraph has debug_metadata_index in field 5, where circle keeps the
            # deprecated data_format: write the TFLite slot directly.
            b.PrependInt32Slot(5, dmi, -1)
        self._index = index
        return S.End(b)

    # ---------------------------------------------------------------- model
    def write(self, with_origin_tables: bool) -> bytearray:
        b = self.model
        bld = self.b
        fb.Buffer.Start(bld)  # buffer 0: the empty sentinel
        self.buffers.append(fb.Buffer.End(bld))
        indexes = []
        sg_offs = []
        for g in b.subgraphs:
            sg_offs.append(self._subgraph(g))
            indexes.append(self._index)
        metadata = dict(b.metadata)
        if with_origin_tables:
            src, opt = origin_tables(b)
            metadata[SOURCE_TABLE] = src
            metadata[OP_TABLE] = opt
        md_offs = []
        for name, payload in metadata.items():
            bi = self._add_buffer(payload)
            n = bld.CreateString(name)
            fb.Metadata.Start(bld)
            fb.Metadata.AddName(bld, n)
            fb.Metadata.AddBuffer(bld, bi)
            md_offs.append(fb.Metadata.End(bld))
        sig_offs = [self._signature(sd, indexes[sd.subgraph_index]) for sd in b.signature_defs]
        oc_offs = []
        for (code, custom, version) in self.opcodes:
            c = bld.CreateString(custom) if custom is not None else None
            fb.OperatorCode.Start(bld)
            dep = code if code < 0 else min(code, PLACEHOLDER_FOR_GREATER_OP_CODES)
            fb.OperatorCode.AddDeprecatedBuiltinCode(bld, dep)
            if c is not None:
                fb.OperatorCode.AddCustomCode(bld, c)
            fb.OperatorCode.AddVersion(bld, version)
            fb.OperatorCode.AddBuiltinCode(bld, code)
            oc_offs.append(fb.OperatorCode.End(bld))
        ocvec = self._table_vector(oc_offs)
        sgvec = self._table_vector(sg_offs)
        bufvec = self._table_vector(self.buffers)
        mdvec = self._table_vector(md_offs) if md_offs else None
        sigvec = self._table_vector(sig_offs) if sig_offs else None
        mbvec = self._int_vector(b.metadata_buffer) if b.metadata_buffer else None
        desc = bld.CreateString(b.description) if b.description is not None else None
        M = fb.Model
        M.Start(bld)
        M.AddVersion(bld, b.version)
        M.AddOperatorCodes(bld, ocvec)
        M.AddSubgraphs(bld, sgvec)
        if desc is not None:
            M.AddDescription(bld, desc)
        M.AddBuffers(bld, bufvec)
        if mbvec is not None:
            M.AddMetadataBuffer(bld, mbvec)
        if mdvec is not None:
            M.AddMetadata(bld, mdvec)
        if sigvec is not None:
            M.AddSignatureDefs(bld, sigvec)
        root = M.End(bld)
        bld.Finish(root, file_identifier=_IDENT[self.fmt])
        return bld.Output()

    def _signature(self, sd: Any, index: dict[Tensor, int]) -> int:
        bld = self.b

        def maps(items: list[tuple[str, Tensor]]) -> int:
            offs = []
            for name, t in items:
                if t not in index:
                    raise self._err(f"signature {sd.key!r} names tensor {t.name!r}, which is no "
                                    "longer in the graph",
                                    fix=(f"point signature {sd.key!r} at a tensor of the graph, "
                                         "or drop it from model.signature_defs"))
                n = bld.CreateString(name)
                fb.TensorMap.Start(bld)
                fb.TensorMap.AddName(bld, n)
                fb.TensorMap.AddTensorIndex(bld, index[t])
                offs.append(fb.TensorMap.End(bld))
            return self._table_vector(offs)

        ins, outs = maps(sd.inputs), maps(sd.outputs)
        key = bld.CreateString(sd.key) if sd.key is not None else None
        fb.SignatureDef.Start(bld)
        fb.SignatureDef.AddInputs(bld, ins)
        fb.SignatureDef.AddOutputs(bld, outs)
        if key is not None:
            fb.SignatureDef.AddSignatureKey(bld, key)
        fb.SignatureDef.AddSubgraphIndex(bld, sd.subgraph_index)
        return fb.SignatureDef.End(bld)
