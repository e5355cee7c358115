"""Read .tflite (``TFL3``) and .circle (``CIR0``) FlatBuffers into a :class:`toolkit.ir.Model`.

Reading goes through the circle-schema bindings' lazy accessors: constant data becomes
read-only NumPy views of the file bytes (no copy; the file is memory-mapped), and builtin
options are decoded only when an op's ``options`` is first read.
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import struct
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from flatbuffers.number_types import Int8Flags, Int32Flags
from flatbuffers.table import Table

from toolkit.errors import GraphError, ModelFormatError, ToolkitError
from toolkit.formats.fb_columns import FlatColumns
from toolkit.formats.origin_tables import (
    OP_TABLE,
    SOURCE_TABLE,
    decode_op_table,
    decode_source_table,
)
from toolkit.formats.sparsity import SparsityError, densify, read_layout
from toolkit.ir import Graph, Model, Op, Quantization, SignatureDef, Tensor
from toolkit.limits import check as check_limit
from toolkit.limits import current as current_limits
from toolkit.schema import (
    BUILTIN_NAMES,
    OPTIONS_TYPE_NAMES,
    PLACEHOLDER_FOR_GREATER_OP_CODES,
    fb,
    numpy_dtype,
)
from toolkit.util.files import check_path, open_regular, os_error
from toolkit.util.gc_pause import paused_gc

__all__ = ["read_model", "load", "IDENTIFIERS"]

IDENTIFIERS = {b"TFL3": "tflite", b"CIR0": "circle"}
# The fix for a FlatBuffer whose tables do not hold together: the file was damaged after its
# converter (tflite_convert / TFLiteConverter, ONE's one-import, `toolkit compile`) wrote it
_DAMAGED = ("the model file is damaged or was not written by a TFLite/Circle converter: convert "
            "the model again (TFLiteConverter, one-import) or compile it again")
_ORIGINS_DAMAGED = ("the model's origin metadata is damaged: compile the source model again "
                    "(`toolkit compile`, or ONE's one-optimize) to rewrite ONE_source_table / "
                    "ONE_op_table")
_options_creator = fb.BuiltinOptions.BuiltinOptionsCreator
_KNOWN_OPTIONS = np.array(sorted(OPTIONS_TYPE_NAMES), dtype=np.int64)
_options2_creator = fb.BuiltinOptions2.BuiltinOptions2Creator


def load(path: str | os.PathLike[str] | bytes | bytearray | memoryview) -> Model:
    """Load a .tflite or .circle model from a path (memory-mapped) or from bytes.

    Returns a :class:`Model` whose ops carry their origins (from the ONE tables when present,
    else op *i* gets origin *i* named after its first output tensor). Raises
    :class:`ModelFormatError` naming the file and what is wrong for anything undecodable.
    """
    if isinstance(path, (bytes, bytearray, memoryview)):
        return read_model(path, where="<bytes>")
    p = Path(check_path(path, what="model file", error=ModelFormatError))
    with open_regular(p, what="model file", error=ModelFormatError,
                      fix="pass a .tflite or .circle model file") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise ModelFormatError("file is empty", where=str(p),
                                   fix="pass a .tflite or .circle model file")
        try:
            data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise os_error(p, e if isinstance(e, OSError) else OSError(str(e)),
                           what="model file", error=ModelFormatError) from None
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
    # tens of thousands of new objects would trigger the cyclic garbage collector again and
    # again (each pass scanning everything built so far), and every object built here is kept
    # in the result, so a collection would free nothing
    try:
        with paused_gc():
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


def _present(tensors: list[Tensor | None]) -> list[Tensor]:
    """The tensors of a list that may not hold absent (-1) entries, typed as such."""
    return [t for t in tensors if t is not None]


def _empty_constants(tensors: list[Tensor], ops: list[Op], inputs: list[Tensor]) -> None:
    """Give zero-element tensors that no op writes and the graph does not take as input
    (an ``INT32[0]`` shape operand: a buffer of no bytes reads as no data) their empty
    array, so that they are constants like any other."""
    candidates = [t for t in tensors if t.data is None and not t.is_variable
                  and t.dtype is not None and 0 in t.shape
                  and not (t.shape_signature and any(d < 0 for d in t.shape_signature))]
    if not candidates:
        return
    made = {t for op in ops for t in op.outputs}
    taken = set(inputs)
    for t in candidates:
        if t not in made and t not in taken:
            empty = np.zeros(t.shape, dtype=t.dtype)
            empty.flags.writeable = False
            t.data = empty


class _OptionsDecoder:
    """Decodes one op's builtin options on first access (see ``Op.options``)."""

    __slots__ = ("data", "pos", "type", "what", "where")

    def __init__(self, type: int, data: Any, pos: int, where: str,
                 what: tuple[int, int, str]) -> None:
        self.type, self.data, self.pos, self.where, self.what = type, data, pos, where, what

    def __call__(self) -> Any:
        try:
            return _options_creator(self.type, Table(self.data, self.pos))
        except (struct.error, IndexError, ValueError, TypeError, OverflowError,
                UnicodeDecodeError) as e:
            s, i, name = self.what
            raise ModelFormatError(f"subgraph {s} operator {i} ({name}): corrupt builtin "
                                   f"options ({e})", where=self.where,
                                   fix=("the file is damaged, or its options do not match the "
                                        "schema of the op: convert the model again with its "
                                        "converter (tflite_convert, one-import)")) from None


class _Reader:
    def __init__(self, data: Any, where: str, fmt: str) -> None:
        self.data = data
        self.cols = FlatColumns(data, where)
        self.size = len(data)
        self.where = where
        self.fmt = fmt
        self.file_ops: list[list[Op]] = []

    # ------------------------------------------------------------ helpers
    def _err(self, what: str, fix: str = _DAMAGED) -> ModelFormatError:
        """The error for ``what`` in this file (by default: a damaged file, convert again)."""
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
        if nb == 0:
            return []
        cols = self.cols
        o = m._tab.Offset(12)  # Model.buffers
        tables = cols.table_vector(o + m._tab.Pos + int(cols.u32(np.array([o + m._tab.Pos]))[0]),
                                   "buffer list")
        start, length = cols.vectors(cols.fields(tables, 0, "buffer"), "buffer data")
        off = cols.scalar(cols.fields(tables, 1, "buffer"), "u64", 0, "buffer offset")
        size = cols.scalar(cols.fields(tables, 2, "buffer"), "u64", 0, "buffer size")
        out: list[np.ndarray | None] = []
        self.buffer_pos: list[int] = []
        u8 = cols.u8
        for i, (s0, n, fo, fs) in enumerate(zip(start.tolist(), length.tolist(), off.tolist(),
                                                size.tolist())):
            if fo > 1:
                if fo + fs > self.size:
                    raise self._err(f"buffer {i} points to bytes {fo}..{fo + fs} beyond the "
                                    f"end of the file ({self.size} bytes)")
                out.append(u8[fo:fo + fs])
                self.buffer_pos.append(fo)
            elif n > 0:
                if s0 + n > self.size:
                    raise self._err(f"buffer {i} data runs past the end of the file")
                out.append(u8[s0:s0 + n])
                self.buffer_pos.append(s0)
            else:
                out.append(None)
                self.buffer_pos.append(0)
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

    def _vector_of_tables(self, table_pos: int, slot: int, what: str) -> np.ndarray:
        cols = self.cols
        f = cols.fields(np.array([table_pos], dtype=np.int64), slot, what)
        if f[0] == 0:
            return np.zeros(0, dtype=np.int64)
        return cols.table_vector(int(f[0] + cols.u32(f, what)[0]), what)

    def _int_lists(self, tables: np.ndarray, slot: int, what: str,
                   dtype: str = "<i4") -> tuple[list[np.ndarray], np.ndarray]:
        """Vector field of every table as a list of arrays, plus the lengths (-1: absent)."""
        vals, bounds, length = self._flat_lists(tables, slot, what, dtype)
        return [vals[a:b] for a, b in itertools.pairwise(bounds)], length

    def _check_vectors(self, tables: np.ndarray, slot: int, what: str) -> None:
        """Check what the ``slot`` vectors of ``tables`` claim before decoding them: no vector
        longer than :data:`~toolkit.limits.Limits.max_tensor_rank` and no more entries in all
        than the file could hold (vectors shared by many tables would multiply the work)."""
        cols = self.cols
        _, length = cols.vectors(cols.fields(tables, slot, what), what)
        if not length.size:
            return
        limits = current_limits()
        longest = int(length.max())
        if longest > limits.max_tensor_rank:
            i = int(np.argmax(length))
            check_limit("max_tensor_rank", longest, what=f"{what} {i} has {longest} dimensions",
                        where=self.where)
        total = int(np.maximum(length, 0).sum())
        check_limit("max_shape_entries_per_file_byte", total // max(self.cols.size, 1),
                    what=f"{total:,} {what} entries in a {self.cols.size:,}-byte file",
                    where=self.where)

    def _check_elements(self, shape_vals: np.ndarray, bounds: list[int],
                        names: list[str | None], sidx: int) -> None:
        """Check every tensor's element count (activations included) against
        :data:`~toolkit.limits.Limits.max_tensor_elements` before any work follows it."""
        n = len(bounds) - 1
        if not shape_vals.size or n <= 0:
            return
        starts = np.asarray(bounds[:-1], dtype=np.int64)
        nonempty = np.asarray(bounds[1:], dtype=np.int64) > starts
        dims = np.abs(shape_vals.astype(np.float64))
        counts = np.ones(n, dtype=np.float64)
        counts[nonempty] = np.multiply.reduceat(dims, starts[nonempty])
        worst = int(np.argmax(counts))
        bound = current_limits().max_tensor_elements
        if counts[worst] > bound:
            shape = shape_vals[bounds[worst]:bounds[worst + 1]].tolist()
            check_limit("max_tensor_elements", int(min(counts[worst], 2.0**62)),
                        where=self.where, what=f"subgraph {sidx} tensor {worst} "
                                               f"({names[worst]!r}) has shape {shape}")

    def _flat_lists(self, tables: np.ndarray, slot: int, what: str, dtype: str = "<i4"
                    ) -> tuple[np.ndarray, list[int], np.ndarray]:
        """Vector field of every table as one flat array and bounds (list of n+1 ints)."""
        cols = self.cols
        start, length = cols.vectors(cols.fields(tables, slot, what), what)
        vals, _ = cols.flat(start, length, np.dtype(dtype).itemsize, dtype, what)
        bounds = [0, *np.cumsum(np.maximum(length, 0)).tolist()]
        return vals, bounds, length

    def _read_quants(self, qpos: np.ndarray) -> list[Quantization | None]:
        """Decode QuantizationParameters tables (0 = absent) column-wise."""
        cols = self.cols
        out: list[Quantization | None] = [None] * qpos.size
        idx = np.nonzero(qpos)[0]
        if idx.size == 0:
            return out
        tabs = qpos[idx]
        mins, lmin = self._int_lists(tabs, 0, "quantization min", "<f4")
        maxs, lmax = self._int_lists(tabs, 1, "quantization max", "<f4")
        scales, lsc = self._int_lists(tabs, 2, "quantization scale", "<f4")
        zps, lzp = self._int_lists(tabs, 3, "quantization zero point", "<i8")
        dtype_ = cols.scalar(cols.fields(tabs, 4, "quantization"), "u8", 0, "details type")
        qdim = cols.scalar(cols.fields(tabs, 6, "quantization"), "i32", 0, "quantized dim")
        for j, i in enumerate(idx.tolist()):
            if lsc[j] <= 0 and lmin[j] <= 0 and lmax[j] <= 0 and dtype_[j] == 0:
                continue
            details = None
            if dtype_[j]:
                q = fb.QuantizationParameters.QuantizationParameters()
                q.Init(self.data, int(tabs[j]))
                details = fb.QuantizationParameters.QuantizationParametersT.InitFromObj(
                    q).details
            scale = scales[j] if lsc[j] > 0 else np.zeros(0, np.float32)
            zp = zps[j] if lzp[j] > 0 else np.zeros(scale.size, np.int64)
            out[i] = Quantization(
                scale=scale.astype(np.float32), zero_point=zp.astype(np.int64),
                quantized_dimension=int(qdim[j]),
                min=mins[j].astype(np.float32) if lmin[j] > 0 else None,
                max=maxs[j].astype(np.float32) if lmax[j] > 0 else None,
                details_type=int(dtype_[j]), details=details)
        return out

    def _read_tensors(self, sg: Any, sidx: int) -> list[Tensor]:
        cols = self.cols
        what = f"subgraph {sidx} tensor"
        tabs = self._vector_of_tables(sg._tab.Pos, 0, f"subgraph {sidx} tensor list")
        nt = int(tabs.size)
        self._check_vectors(tabs, 0, f"{what} shape")
        self._check_vectors(tabs, 7, f"{what} shape signature")
        shape_vals, sb, _ = self._flat_lists(tabs, 0, f"{what} shape")
        flat_shapes = shape_vals.tolist()
        types = cols.scalar(cols.fields(tabs, 1, what), "i8", 0, f"{what} type")
        bufs = cols.scalar(cols.fields(tabs, 2, what), "u32", 0, f"{what} buffer")
        names = cols.strings(cols.fields(tabs, 3, what), f"{what} name")
        quants = self._read_quants(cols.tables_at(cols.fields(tabs, 4, what), what))
        is_var = cols.scalar(cols.fields(tabs, 5, what), "u8", 0, what)
        sparse = cols.fields(tabs, 6, what)
        sig_vals, sigb, lsig = self._flat_lists(tabs, 7, f"{what} shape signature")
        flat_sigs, has_sig = sig_vals.tolist(), (lsig >= 0).tolist()
        has_rank = cols.scalar(cols.fields(tabs, 8, what), "u8", 0, what)
        variants = cols.fields(tabs, 9, what)
        compression = cols.scalar(cols.fields(tabs, 10, what), "i8", 0, what)
        nbuf = len(self.buffers)
        bad = np.nonzero(bufs >= max(nbuf, 1))[0]
        if bad.size:
            i = int(bad[0])
            raise self._err(f"subgraph {sidx} tensor {i} ({names[i]!r}) refers to buffer "
                            f"{int(bufs[i])}, but the model has {nbuf} buffers")
        out: list[Tensor] = []
        types_l, bufs_l = types.tolist(), bufs.tolist()
        dtypes = {c: numpy_dtype(c) for c in set(types_l)}
        sparse_l, variants_l = (sparse > 0).tolist(), (variants > 0).tolist()
        compression_l = compression.tolist()
        is_var_l, has_rank_l = (is_var > 0).tolist(), (has_rank > 0).tolist()
        rare_l = ((sparse > 0) | (variants > 0) | (compression != 0)).tolist()
        trusted_tensor = Tensor.trusted
        self._check_elements(shape_vals, sb, names, sidx)
        buffers, buffer_pos = self.buffers, self.buffer_pos
        for i in range(nt):
            shape = flat_shapes[sb[i]:sb[i + 1]]
            type_code = types_l[i]
            name = names[i] or f"tensor_{i}"
            b = bufs_l[i]
            raw = buffers[b] if nbuf else None
            data = None
            extra: dict[str, Any] = {}
            if rare_l[i]:
                tt = fb.Tensor.Tensor()
                tt.Init(self.data, int(tabs[i]))
                full = fb.Tensor.TensorT.InitFromObj(tt)
                if sparse_l[i]:
                    extra["sparsity"] = full.sparsity
                if variants_l[i]:
                    extra["variant_tensors"] = full.variantTensors
                if compression_l[i]:
                    extra["compression_type"] = compression_l[i]
            if raw is not None:
                dt = dtypes[type_code]
                if dt is not None and "sparsity" in extra:
                    data = self._densify(raw, dt, extra, tuple(shape), sidx, i, name,
                                         int(bufs[i]))
                elif dt is not None:
                    count = math.prod(shape)
                    if raw.size != count * dt.itemsize:
                        raise self._err(
                            f"subgraph {sidx} tensor {i} ({name!r}) has shape {shape} "
                            f"of {dt} ({count * dt.itemsize} bytes) but its buffer "
                            f"{int(bufs[i])} holds {raw.size} bytes")
                    if buffer_pos[b] % dt.alignment:
                        data = np.frombuffer(raw.tobytes(), dtype=dt).reshape(shape)
                        data.flags.writeable = False
                    else:
                        data = raw.view(dt).reshape(shape)
                else:
                    data = raw
            out.append(trusted_tensor(
                name, tuple(shape), type_code, quants[i], data,
                tuple(flat_sigs[sigb[i]:sigb[i + 1]]) if has_sig[i] else None,
                is_var_l[i], has_rank_l[i], extra))
        return out

    def _densify(self, raw: np.ndarray, dt: np.dtype, extra: dict[str, Any],
                 shape: tuple[int, ...], sidx: int, i: int, name: str, buf: int
                 ) -> np.ndarray:
        """The dense array of a sparse constant (see :mod:`toolkit.formats.sparsity`); its
        stored values stay in ``extra["sparse_values"]`` for writing the file back."""
        where = f"subgraph {sidx} tensor {i} ({name!r})"
        if raw.size % dt.itemsize:
            raise self._err(f"{where} is sparse {dt} but its buffer {buf} holds {raw.size} "
                            f"bytes, not a whole number of values")
        values = np.frombuffer(raw.tobytes(), dtype=dt)
        try:
            dense = densify(values, read_layout(extra["sparsity"]), shape)
        except SparsityError as e:
            raise self._err(f"{where} has sparsity metadata that does not match its shape "
                            f"{list(shape)} and buffer {buf}: {e}") from None
        values.flags.writeable = False
        dense.flags.writeable = False
        extra["sparse_values"] = values
        extra["sparse_dense"] = dense
        return dense

    def _read_subgraph(self, sg: Any, sidx: int) -> Graph:
        extra: dict[str, Any] = {}
        tensors = self._tensors = self._read_tensors(sg, sidx)
        nt = len(tensors)

        def tlist(arr: Any, what: str, allow_absent: bool = False) -> list[Tensor | None]:
            arr = np.asarray(arr, dtype=np.int64)
            if arr.size and (arr.max() >= nt or arr.min() < (-1 if allow_absent else 0)):
                bad = int(arr[(arr >= nt) | (arr < -1 if allow_absent else arr < 0)][0])
                raise self._err(f"subgraph {sidx}: {what} refers to tensor {bad}, but the "
                                f"subgraph has {nt} tensors")
            return [None if x < 0 else tensors[x] for x in arr.tolist()]

        inputs = _present(tlist(sg.InputsAsNumpy() if sg.InputsLength() else (),
                                "graph inputs"))
        outputs = _present(tlist(sg.OutputsAsNumpy() if sg.OutputsLength() else (),
                                 "graph outputs"))
        # circle keeps a deprecated data_format in the slot where TFLite has
        # debug_metadata_index; read each format's own slot.
        tab = sg._tab
        o = tab.Offset(14)
        if self.fmt == "tflite":
            if o:
                extra["debug_metadata_index"] = tab.Get(Int32Flags, o + tab.Pos)
        else:
            if o:
                extra["data_format"] = tab.Get(Int8Flags, o + tab.Pos)
            if sg.DebugMetadataIndex() != -1:
                extra["debug_metadata_index"] = sg.DebugMetadataIndex()
        file_ops = self._read_ops(sg, sidx, tlist)
        self.file_ops.append(file_ops)
        _empty_constants(tensors, file_ops, inputs)
        try:
            g = Graph.adopt(self._str(sg.Name()), tensors, file_ops, inputs, outputs)
        except GraphError as e:
            raise self._err(f"subgraph {sidx}: {e.what}") from None
        g.extra.update(extra)
        return g

    def _read_ops(self, sg: Any, sidx: int, tlist: Callable[..., list[Tensor | None]]
                  ) -> list[Op]:
        cols = self.cols
        what = f"subgraph {sidx} operator"
        tabs = self._vector_of_tables(sg._tab.Pos, 3, f"subgraph {sidx} operator list")
        opcode = cols.scalar(cols.fields(tabs, 0, what), "u32", 0, f"{what} opcode index")
        ins, ib, _ = self._flat_lists(tabs, 1, f"{what} inputs")
        outs, ob, _ = self._flat_lists(tabs, 2, f"{what} outputs")
        tlist(ins, f"{what} input", True)  # range checks, vectorised
        tlist(outs, f"{what} output")
        tensors = self._tensors
        ins_l = [tensors[x] if x >= 0 else None for x in ins.tolist()]
        outs_l = [tensors[x] for x in outs.tolist()]
        opt_type = cols.scalar(cols.fields(tabs, 3, what), "u8", 0, f"{what} options type")
        opt_tab = cols.tables_at(cols.fields(tabs, 4, what), f"{what} options")
        rare = np.zeros(tabs.size, dtype=bool)
        for slot in range(5, 14):
            rare |= cols.fields(tabs, slot, what) > 0
        bad = np.nonzero(opcode >= len(self.opcodes))[0]
        if bad.size:
            i = int(bad[0])
            raise self._err(f"subgraph {sidx} operator {i} uses opcode index {int(opcode[i])}, "
                            f"but the model has {len(self.opcodes)} operator codes")
        unknown = np.nonzero((opt_type > 0) & ~np.isin(opt_type, _KNOWN_OPTIONS))[0]
        if unknown.size:
            i = int(unknown[0])
            raise self._err(f"subgraph {sidx} operator {i} has unknown builtin options type "
                            f"{int(opt_type[i])}")
        ops: list[Op] = []
        where = self.where
        opcode_l, opt_type_l = opcode.tolist(), opt_type.tolist()
        opt_tab_l, rare_l, tabs_l = opt_tab.tolist(), rare.tolist(), tabs.tolist()
        data = self.data
        trusted_op = Op.trusted
        for i in range(tabs.size):
            type_name, custom, version = self.opcodes[opcode_l[i]]
            o_ins = ins_l[ib[i]:ib[i + 1]]
            o_outs = outs_l[ob[i]:ob[i + 1]]
            t = opt_type_l[i]
            options_src = None
            if t:
                if opt_tab_l[i] == 0:
                    raise self._err(f"subgraph {sidx} operator {i} ({type_name}) names options "
                                    f"type {t} but has no options table")
                options_src = _OptionsDecoder(t, data, opt_tab_l[i], where,
                                              (sidx, i, type_name))
            # origins are set by _assign_origins once every subgraph is read
            op = trusted_op(type_name, tuple(o_ins), tuple(o_outs), options_src=options_src,
                            options_type=OPTIONS_TYPE_NAMES.get(t) if t else None,
                            custom_code=custom, version=version, index=i)
            if rare_l[i]:
                self._read_rare_fields(op, tabs_l[i], i, sidx, tlist)
            ops.append(op)
        return ops

    def _read_rare_fields(self, op: Op, pos: int, i: int, sidx: int,
                          tlist: Callable[..., list[Tensor | None]]) -> None:
        o = fb.Operator.Operator()
        o.Init(self.data, pos)
        if o.CustomOptionsLength():
            op.custom_options = o.CustomOptionsAsNumpy().tobytes()
        if o.LargeCustomOptionsSize():
            off, size = o.LargeCustomOptionsOffset(), o.LargeCustomOptionsSize()
            if off + size > self.size:
                raise self._err(f"operator {i} large custom options run past the end")
            op.custom_options = bytes(self.data[off:off + size])
        if o.CustomOptionsFormat():
            op.extra["custom_options_format"] = o.CustomOptionsFormat()
        if o.MutatingVariableInputsLength():
            op.extra["mutating_variable_inputs"] = [bool(x) for x in
                                                    o.MutatingVariableInputsAsNumpy()]
        if o.IntermediatesLength():
            op.extra["intermediates"] = tlist(o.IntermediatesAsNumpy(),
                                              f"operator {i} intermediate", True)
        if o.DebugMetadataIndex() != -1:
            op.extra["debug_metadata_index"] = o.DebugMetadataIndex()
        t2 = o.BuiltinOptions2Type()
        if t2:
            op.extra["options2_type"] = t2
            op.extra["options2"] = _options2_creator(t2, o.BuiltinOptions2())

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

            def maps(get: Callable[[int], Any], count: int, what: str, i: int = i,
                     tl: list[Tensor] = tl) -> list[tuple[str, Tensor]]:
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
                                        f"that {SOURCE_TABLE} does not name",
                                        fix=_ORIGINS_DAMAGED)
                    op.origins = org
                else:
                    missing.append(i)
                    op.origins = frozenset((next_id,))
                    names[next_id] = op.name
                    next_id += 1
            extra_ops = sorted(k for k in table if k >= len(main))
            if extra_ops:
                raise self._err(f"{OP_TABLE} names op(s) {extra_ops[:5]} but subgraph 0 has "
                                f"{len(main)} ops", fix=_ORIGINS_DAMAGED)
            used = frozenset().union(*(op.origins for op in self.file_ops[0]))
            for oid in names.keys() - used:
                main.removed_origins[oid] = "named in ONE_source_table, used by no op"
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
