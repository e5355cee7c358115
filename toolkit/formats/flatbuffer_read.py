"""Read .tflite (``TFL3``) and .circle (``CIR0``) FlatBuffers into a :class:`toolkit.ir.Model`.

Reading goes through the circle-schema bindings' lazy accessors: constant data becomes
read-only NumPy views of the file bytes (no copy; the file is memory-mapped), and builtin
options are decoded only when an op's ``options`` is first read.
"""

from __future__ import annotations

import mmap
import os
import struct
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import GraphError, ModelFormatError, ToolkitError
from toolkit.formats.origin_tables import (
    OP_TABLE,
    SOURCE_TABLE,
    decode_op_table,
    decode_source_table,
)
from toolkit.ir import Graph, Model, Op, Quantization, SignatureDef, Tensor
from toolkit.schema import (
    BUILTIN_NAMES,
    OPTIONS_TYPE_NAMES,
    PLACEHOLDER_FOR_GREATER_OP_CODES,
    fb,
    numpy_dtype,
)

__all__ = ["read_model", "load", "IDENTIFIERS"]

IDENTIFIERS = {b"TFL3": "tflite", b"CIR0": "circle"}
_options_creator = fb.BuiltinOptions.BuiltinOptionsCreator
_options2_creator = fb.BuiltinOptions2.BuiltinOptions2Creator


def load(path: str | os.PathLike[str] | bytes | bytearray | memoryview) -> Model:
    """Load a .tflite or .circle model from a path (memory-mapped) or from bytes.

    Returns a :class:`Model` whose ops carry their origins (from the ONE tables when present,
    else op *i* gets origin *i* named after its first output tensor). Raises
    :class:`ModelFormatError` naming the file and what is wrong for anything undecodable.
    """
    if isinstance(path, (bytes, bytearray, memoryview)):
        return read_model(path, where="<bytes>")
    p = Path(path)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise ModelFormatError("file is empty", where=str(p),
                                       fix="pass a .tflite or .circle model file")
            data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ModelFormatError("file not found", where=str(p)) from None
    except IsADirectoryError:
        raise ModelFormatError("is a directory, not a model file", where=str(p)) from None
    model = read_model(data, where=str(p))
    model.path = str(p)
    return model


def read_model(data: Any, where: str = "<bytes>") -> Model:
    """Decode model bytes (any buffer object) into a :class:`Model` (see :func:`load`)."""
    n = len(data)
    if n < 8:
        raise ModelFormatError(f"file is only {n} bytes: too short for a FlatBuffer",
                               where=where, fix="pass a complete .tflite or .circle file")
    ident = bytes(data[4:8])
    fmt = IDENTIFIERS.get(ident)
    if fmt is None:
        raise ModelFormatError(
            f"file identifier is {ident!r}, expected b'TFL3' (TFLite) or b'CIR0' (circle)",
            where=where, fix="is this a .tflite/.circle model? (not a saved model or ONNX)")
    try:
        return _Reader(data, where, fmt).read()
    except GraphError as e:
        raise ModelFormatError(e.what, where=where if e.where is None else f"{where}: {e.where}",
                               fix=e.fix) from None
    except ToolkitError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError,
            AttributeError, KeyError, RecursionError, MemoryError) as e:
        raise ModelFormatError(
            f"corrupt FlatBuffer ({type(e).__name__}: {e})", where=where,
            fix="the file is truncated or damaged; export the model again") from None


class _Reader:
    def __init__(self, data: Any, where: str, fmt: str) -> None:
        self.data = data
        self.size = len(data)
        self.where = where
        self.fmt = fmt
        self.file_ops: list[list[Op]] = []

    # ------------------------------------------------------------ helpers
    def _err(self, what: str, fix: str | None = None) -> ModelFormatError:
        return ModelFormatError(what, where=self.where, fix=fix)

    def _check_len(self, n: int, elem: int, what: str) -> int:
        if n < 0 or n * elem > self.size:
            raise self._err(f"{what} claims {n} entries, more than the file can hold")
        return n

    def _str(self, b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8")

    # --------------------------------------------------------------- read
    def read(self) -> Model:
        root = struct.unpack_from("<I", self.data, 0)[0]
        if root + 4 > self.size:
            raise self._err(f"root table offset {root} is beyond the end ({self.size} bytes)")
        m = fb.Model.Model.GetRootAs(self.data, 0)
        model = Model([], version=m.Version(), description=self._str(m.Description()),
                      format=self.fmt)
        self.buffers = self._read_buffers(m)
        self.opcodes = self._read_opcodes(m)
        nsub = self._check_len(m.SubgraphsLength(), 4, "subgraph list")
        if nsub == 0:
            raise self._err("model has no subgraph")
        for s in range(nsub):
            model.subgraphs.append(self._read_subgraph(m.Subgraphs(s), s))
        self._read_metadata(m, model)
        if not m.MetadataBufferIsNone():
            model.metadata_buffer = [int(x) for x in m.MetadataBufferAsNumpy()]
        self._read_signatures(m, model)
        self._assign_origins(model)
        return model

    def _read_buffers(self, m: Any) -> list[np.ndarray | None]:
        nb = self._check_len(m.BuffersLength(), 4, "buffer list")
        out: list[np.ndarray | None] = []
        for i in range(nb):
            b = m.Buffers(i)
            off, size = b.Offset(), b.Size()
            if off > 1:
                if off + size > self.size:
                    raise self._err(f"buffer {i} points to bytes {off}..{off + size} beyond the "
                                    f"end of the file ({self.size} bytes)")
                out.append(np.frombuffer(self.data, dtype=np.uint8, count=size, offset=off))
            elif b.DataLength() > 0:
                self._check_len(b.DataLength(), 1, f"buffer {i}")
                out.append(b.DataAsNumpy())
            else:
                out.append(None)
        return out

    def _read_opcodes(self, m: Any) -> list[tuple[str, str | None, int]]:
        n = self._check_len(m.OperatorCodesLength(), 4, "operator code list")
        out = []
        for i in range(n):
            oc = m.OperatorCodes(i)
            dep = oc.DeprecatedBuiltinCode()
            bc = oc.BuiltinCode()
            if dep == PLACEHOLDER_FOR_GREATER_OP_CODES:
                code = bc
            elif dep < 0 or bc < 0:
                if bc not in (0, dep):
                    raise self._err(f"operator code {i}: deprecated_builtin_code {dep} and "
                                    f"builtin_code {bc} disagree for a circle-only op")
                code = dep
            else:
                code = max(dep, bc)
            name = BUILTIN_NAMES.get(code)
            if name is None:
                raise self._err(f"operator code {i} has unknown builtin code {code}",
                                fix="the model needs a newer schema than circle-schema knows")
            out.append((name, self._str(oc.CustomCode()), oc.Version()))
        return out

    def _read_quant(self, q: Any) -> Quantization | None:
        scale = q.ScaleAsNumpy() if q.ScaleLength() else None
        mn = q.MinAsNumpy() if q.MinLength() else None
        mx = q.MaxAsNumpy() if q.MaxLength() else None
        if scale is None and mn is None and mx is None and q.DetailsType() == 0:
            return None
        zp = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(
            0 if scale is None else scale.size, dtype=np.int64)
        details = None
        if q.DetailsType():
            details = fb.QuantizationParameters.QuantizationParametersT.InitFromObj(q).details
        return Quantization(
            scale=np.asarray(scale if scale is not None else np.zeros(0, np.float32),
                             dtype=np.float32),
            zero_point=np.asarray(zp, dtype=np.int64),
            quantized_dimension=q.QuantizedDimension(),
            min=mn, max=mx, details_type=q.DetailsType(), details=details,
        )

    def _read_tensor(self, t: Any, i: int, sidx: int) -> Tensor:
        shape = t.ShapeAsNumpy() if t.ShapeLength() else ()
        type_code = t.Type()
        name = self._str(t.Name()) or f"tensor_{i}"
        bidx = t.Buffer()
        if bidx < 0 or bidx >= max(len(self.buffers), 1):
            raise self._err(f"subgraph {sidx} tensor {i} ({name!r}) refers to buffer {bidx}, "
                            f"but the model has {len(self.buffers)} buffers")
        raw = self.buffers[bidx] if self.buffers else None
        q = t.Quantization()
        quant = self._read_quant(q) if q is not None else None
        sig = t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else None
        data = None
        if raw is not None:
            dt = numpy_dtype(type_code)
            if dt is not None:
                count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
                if raw.size != count * dt.itemsize:
                    raise self._err(
                        f"subgraph {sidx} tensor {i} ({name!r}) has shape {list(shape)} of "
                        f"{dt} ({count * dt.itemsize} bytes) but its buffer {bidx} holds "
                        f"{raw.size} bytes")
                if raw.ctypes.data % dt.alignment:
                    data = np.frombuffer(raw.tobytes(), dtype=dt).reshape(shape)
                else:
                    data = raw.view(dt).reshape(shape)
            else:
                data = raw
        extra: dict[str, Any] = {}
        if t.Sparsity() is not None:
            extra["sparsity"] = fb.Tensor.TensorT.InitFromObj(t).sparsity
        if t.VariantTensorsLength():
            extra["variant_tensors"] = fb.Tensor.TensorT.InitFromObj(t).variantTensors
        if t.CompressionType():
            extra["compression_type"] = t.CompressionType()
        tensor = Tensor(name, shape, type_code, data=data, quant=quant, shape_signature=sig,
                        is_variable=t.IsVariable(), has_rank=t.HasRank(), extra=extra)
        return tensor

    def _read_subgraph(self, sg: Any, sidx: int) -> Graph:
        g = Graph(self._str(sg.Name()))
        nt = self._check_len(sg.TensorsLength(), 4, f"subgraph {sidx} tensor list")
        tensors = [self._read_tensor(sg.Tensors(i), i, sidx) for i in range(nt)]
        for t in tensors:
            g.attach_tensor(t)

        def tref(idx: int, what: str) -> Tensor | None:
            if idx == -1:
                return None
            if not 0 <= idx < nt:
                raise self._err(f"subgraph {sidx}: {what} refers to tensor {idx}, but the "
                                f"subgraph has {nt} tensors")
            return tensors[idx]

        def tlist(arr: Any, what: str) -> list[Tensor]:
            out = []
            for x in arr:
                t = tref(int(x), what)
                if t is None:
                    raise self._err(f"subgraph {sidx}: {what} lists tensor -1")
                out.append(t)
            return out

        g.inputs = tlist(sg.InputsAsNumpy() if sg.InputsLength() else (), "graph inputs")
        g.outputs = tlist(sg.OutputsAsNumpy() if sg.OutputsLength() else (), "graph outputs")
        # circle keeps a deprecated data_format in the slot where TFLite has
        # debug_metadata_index; read each format's own slot.
        tab = sg._tab
        if self.fmt == "tflite":
            o = tab.Offset(14)
            if o:
                g.extra["debug_metadata_index"] = tab.Get(fb.SubGraph.flatbuffers.number_types
                                                          .Int32Flags, o + tab.Pos)
        else:
            o = tab.Offset(14)
            if o:
                g.extra["data_format"] = tab.Get(fb.SubGraph.flatbuffers.number_types
                                                 .Int8Flags, o + tab.Pos)
            if sg.DebugMetadataIndex() != -1:
                g.extra["debug_metadata_index"] = sg.DebugMetadataIndex()
        nops = self._check_len(sg.OperatorsLength(), 4, f"subgraph {sidx} operator list")
        file_ops = []
        for i in range(nops):
            op = self._read_op(sg.Operators(i), i, sidx, tref)
            g.attach_op(op)  # origins are a placeholder until _assign_origins
            op._seq = float(i)
            file_ops.append(op)
        self.file_ops.append(file_ops)
        g.ops  # noqa: B018  (orders the ops; raises GraphError on a cycle)
        return g

    def _read_op(self, o: Any, i: int, sidx: int,
                 tref: Callable[[int, str], Tensor | None]) -> Op:
        oc = o.OpcodeIndex()
        if not 0 <= oc < len(self.opcodes):
            raise self._err(f"subgraph {sidx} operator {i} uses opcode index {oc}, but the "
                            f"model has {len(self.opcodes)} operator codes")
        type_name, custom, version = self.opcodes[oc]
        ins = [tref(int(x), f"operator {i} ({type_name}) input")
               for x in (o.InputsAsNumpy() if o.InputsLength() else ())]
        outs = []
        for x in o.OutputsAsNumpy() if o.OutputsLength() else ():
            t = tref(int(x), f"operator {i} ({type_name}) output")
            if t is None:
                raise self._err(f"subgraph {sidx} operator {i} ({type_name}) has output -1")
            outs.append(t)
        extra: dict[str, Any] = {}
        opt_type = o.BuiltinOptionsType()
        custom_options = None
        if o.CustomOptionsLength():
            custom_options = o.CustomOptionsAsNumpy().tobytes()
        if o.LargeCustomOptionsSize():
            off, size = o.LargeCustomOptionsOffset(), o.LargeCustomOptionsSize()
            if off + size > self.size:
                raise self._err(f"operator {i} large custom options run past the end")
            custom_options = bytes(self.data[off:off + size])
        if o.CustomOptionsFormat():
            extra["custom_options_format"] = o.CustomOptionsFormat()
        if o.MutatingVariableInputsLength():
            extra["mutating_variable_inputs"] = [bool(x) for x in
                                                 o.MutatingVariableInputsAsNumpy()]
        if o.IntermediatesLength():
            extra["intermediates"] = [tref(int(x), f"operator {i} intermediate")
                                      for x in o.IntermediatesAsNumpy()]
        if o.DebugMetadataIndex() != -1:
            extra["debug_metadata_index"] = o.DebugMetadataIndex()
        t2 = o.BuiltinOptions2Type()
        if t2:
            tab2 = o.BuiltinOptions2()
            extra["options2_type"] = t2
            extra["options2"] = _options2_creator(t2, tab2)
        op = Op(type_name, ins, outs, None, origins=(-1,), custom_code=custom, version=version,
                options_type=OPTIONS_TYPE_NAMES.get(opt_type) if opt_type else None,
                custom_options=custom_options, extra=extra)
        if opt_type:
            if opt_type not in OPTIONS_TYPE_NAMES:
                raise self._err(f"subgraph {sidx} operator {i} ({type_name}) has unknown "
                                f"builtin options type {opt_type}")
            table = o.BuiltinOptions()
            where = self.where

            def decode(opt_type: int = opt_type, table: Any = table) -> Any:
                try:
                    return _options_creator(opt_type, table)
                except (struct.error, IndexError, ValueError, TypeError, OverflowError) as e:
                    raise ModelFormatError(
                        f"subgraph {sidx} operator {i} ({type_name}): corrupt builtin options "
                        f"({e})", where=where) from None

            op._options_src = decode
        return op

    def _read_metadata(self, m: Any, model: Model) -> None:
        n = self._check_len(m.MetadataLength(), 4, "metadata list")
        for i in range(n):
            md = m.Metadata(i)
            name = self._str(md.Name()) or f"metadata_{i}"
            b = md.Buffer()
            if not 0 <= b < len(self.buffers):
                raise self._err(f"metadata {name!r} refers to buffer {b}, but the model has "
                                f"{len(self.buffers)} buffers")
            raw = self.buffers[b]
            model.metadata[name] = b"" if raw is None else raw.tobytes()

    def _read_signatures(self, m: Any, model: Model) -> None:
        n = self._check_len(m.SignatureDefsLength(), 4, "signature list")
        for i in range(n):
            sd = m.SignatureDefs(i)
            s = sd.SubgraphIndex()
            if not 0 <= s < len(model.subgraphs):
                raise self._err(f"signature {i} refers to subgraph {s}")
            g = model.subgraphs[s]
            tl = g.tensors

            def maps(get: Callable[[int], Any], count: int, what: str) -> list[tuple[str, Tensor]]:
                out = []
                for j in range(self._check_len(count, 4, what)):
                    tm = get(j)
                    ti = tm.TensorIndex()
                    if not 0 <= ti < len(tl):
                        raise self._err(f"signature {i} {what} refers to tensor {ti}")
                    out.append((self._str(tm.Name()) or "", tl[ti]))
                return out

            model.signature_defs.append(SignatureDef(
                key=self._str(sd.SignatureKey()), subgraph_index=s,
                inputs=maps(sd.Inputs, sd.InputsLength(), "inputs"),
                outputs=maps(sd.Outputs, sd.OutputsLength(), "outputs")))

    def _assign_origins(self, model: Model) -> None:
        src = model.metadata.pop(SOURCE_TABLE, None)
        opt = model.metadata.pop(OP_TABLE, None)
        main = model.subgraphs[0]
        if src is not None and opt is not None:
            model.had_origin_tables = True
            names = decode_source_table(src, where=f"{self.where}: {SOURCE_TABLE}")
            table = decode_op_table(opt, where=f"{self.where}: {OP_TABLE}")
            model.source_table = names
            next_id = max(names, default=-1) + 1
            missing = []
            for i, op in enumerate(self.file_ops[0]):
                org = table.get(i)
                if org:
                    unknown = org - names.keys()
                    if unknown:
                        raise self._err(f"{OP_TABLE}: op {i} has origin ids {sorted(unknown)} "
                                        f"that {SOURCE_TABLE} does not name")
                    op.origins = org
                else:
                    missing.append(i)
                    op.origins = frozenset((next_id,))
                    names[next_id] = op.name
                    next_id += 1
            extra_ops = sorted(k for k in table if k >= len(main))
            if extra_ops:
                raise self._err(f"{OP_TABLE} names op(s) {extra_ops[:5]} but subgraph 0 has "
                                f"{len(main)} ops")
            if missing:
                warnings.warn(f"{self.where}: {len(missing)} op(s) missing from {OP_TABLE} "
                              f"(first: {missing[:5]}); gave them new origin ids", stacklevel=3)
            start = next_id
        else:
            if (src is None) != (opt is None):
                warnings.warn(f"{self.where}: only one of {SOURCE_TABLE}/{OP_TABLE} present; "
                              "ignored it", stacklevel=3)
            for i, op in enumerate(self.file_ops[0]):
                op.origins = frozenset((i,))
                model.source_table[i] = op.name
            start = len(main)
        for ops in self.file_ops[1:]:
            for op in ops:
                op.origins = frozenset((start,))
                model.source_table[start] = op.name
                start += 1
