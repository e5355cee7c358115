"""ONNX model files (``.onnx``) decoded into plain objects, with the ``onnx`` package.

:func:`read_onnx` returns an :class:`OnnxModel`: its main :class:`OnnxGraph` (nodes in file
order, graph inputs/outputs with their shapes, initializers as NumPy arrays, value infos) and
every subgraph (``If``/``Loop``/``Scan`` bodies) nested in its node's attributes. Weights kept
as external data are read from their file beside the model (a location that leaves the model's
folder, a missing file or a range past the end of the file is refused). Nothing here knows the
toolkit's IR; :mod:`toolkit.importers.onnx` builds a :class:`~toolkit.ir.Model` from this.

``onnx`` is an optional dependency (``pip install toolkit[onnx]``).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ModelFormatError, ToolkitError

__all__ = ["OnnxModel", "OnnxGraph", "OnnxNode", "ValueInfo", "Initializer", "read_onnx",
           "parse_name_scopes", "ONNX_DTYPES"]

#: ONNX ``TensorProto.DataType`` code -> NumPy dtype name (types NumPy lacks are left out).
ONNX_DTYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64",
    15: "complex128",
}
#: ONNX ``TensorProto.DataType`` code -> its name (``FLOAT``, ``INT64`` ...).
ONNX_DTYPE_NAMES: dict[int, str] = {
    0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
    7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32",
    13: "UINT64", 14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
    23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2",
}


# The fix for a model whose protobuf decodes but holds inconsistent data
_RESAVE = ("the model file is damaged or was written by a faulty exporter: check it with "
           "onnx.checker.check_model and export or save it again (onnx.save_model)")


@dataclass
class ValueInfo:
    """A typed value of a graph: ``name``, ``elem_type`` (ONNX code, 0 when unknown),
    ``shape`` (tuple of int or str per dimension: a ``dim_param`` name or ``"?"``; None when
    the rank is unknown)."""

    name: str
    elem_type: int = 0
    shape: tuple[int | str, ...] | None = None


@dataclass
class Initializer:
    """A constant of a graph: ``name``, ``elem_type``, ``dims``, ``data`` (read-only NumPy
    array, None for types NumPy lacks), ``external`` (``{"location", "offset", "length"}``
    when the bytes came from an external file, else None)."""

    name: str
    elem_type: int
    dims: tuple[int, ...]
    data: np.ndarray | None
    external: dict[str, Any] | None = None


@dataclass
class OnnxNode:
    """One node: ``name`` (may be ``""``), ``op_type``, ``domain`` (``""`` = ai.onnx),
    ``inputs`` (``""`` for an absent optional input), ``outputs``, ``attributes`` (plain
    Python values; tensors as arrays, graphs as :class:`OnnxGraph`), ``metadata``
    (``metadata_props``), ``doc``."""

    name: str
    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    doc: str = ""

    def subgraphs(self) -> dict[str, OnnxGraph]:
        """The node's graph attributes by attribute name (``GRAPHS`` lists as ``name[i]``)."""
        out: dict[str, OnnxGraph] = {}
        for key, value in self.attributes.items():
            if isinstance(value, OnnxGraph):
                out[key] = value
            elif isinstance(value, list) and value and all(isinstance(v, OnnxGraph)
                                                           for v in value):
                out.update({f"{key}[{i}]": v for i, v in enumerate(value)})
        return out


@dataclass
class OnnxGraph:
    """A graph: ``name``, ``nodes`` (file order), ``inputs``/``outputs``/``value_info``
    (:class:`ValueInfo`), ``initializers`` (by name, file order)."""

    name: str
    nodes: list[OnnxNode]
    inputs: list[ValueInfo]
    outputs: list[ValueInfo]
    initializers: dict[str, Initializer]
    value_info: dict[str, ValueInfo]


@dataclass
class OnnxModel:
    """A decoded ``.onnx`` file: ``graph``, ``opsets`` (domain -> version), ``ir_version``,
    ``producer`` (name and version), ``metadata`` (model ``metadata_props``), ``functions``
    (names of local functions, ``domain::name``), ``path``."""

    graph: OnnxGraph
    opsets: dict[str, int]
    ir_version: int
    producer: str
    metadata: dict[str, str]
    functions: list[str]
    path: str | None = None

    def external_data(self) -> list[dict[str, Any]]:
        """One dict per initializer read from an external file: ``tensor``, ``location``,
        ``offset``, ``length`` (bytes), over the main graph and every subgraph."""
        rows: list[dict[str, Any]] = []

        def visit(g: OnnxGraph) -> None:
            for init in g.initializers.values():
                if init.external is not None:
                    rows.append({"tensor": init.name, **init.external})
            for node in g.nodes:
                for sub in node.subgraphs().values():
                    visit(sub)

        visit(self.graph)
        return rows


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ToolkitError("reading .onnx files needs the 'onnx' package",
                           fix="pip install 'toolkit[onnx]'") from None
    return onnx


def read_onnx(source: str | os.PathLike[str] | bytes, *, where: str | None = None,
              base_dir: str | os.PathLike[str] | None = None) -> OnnxModel:
    """Decode an ONNX model from a path or bytes into an :class:`OnnxModel`.

    ``base_dir`` is where external data files are looked for (default: the model's folder;
    for bytes, external data needs it). Raises :class:`ModelFormatError` naming the file and
    what is wrong for anything undecodable.
    """
    onnx = _onnx()
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        where = where or "<bytes>"
        base = Path(base_dir) if base_dir is not None else None
        path = None
    else:
        p = Path(source)
        where = where or str(p)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise ModelFormatError(
                "file not found", where=where,
                fix="check the path (relative paths start at the current folder)",
            ) from None
        except IsADirectoryError:
            raise ModelFormatError(
                "is a directory, not a model file", where=where,
                fix="pass the .onnx file inside the folder, not the folder",
            ) from None
        except OSError as exc:
            raise ModelFormatError(
                f"cannot read the file ({exc})", where=where,
                fix="check the file's permissions and that the disk can be read",
            ) from None
        base = Path(base_dir) if base_dir is not None else p.parent
        path = str(p)
    if not data:
        raise ModelFormatError("file is empty", where=where, fix="pass an .onnx model file")
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf raises DecodeError and others on bad bytes
        raise ModelFormatError(f"not a valid ONNX protobuf ({type(exc).__name__}: {exc})",
                               where=where, fix="pass an .onnx model file") from None
    if not proto.HasField("graph"):
        raise ModelFormatError("the model has no graph", where=where,
                               fix="pass an .onnx model file (not a bare tensor or graph)")
    reader = _Reader(onnx, where, base)
    try:
        graph = reader.graph(proto.graph, "graph")
        opsets = {str(o.domain): int(o.version) for o in proto.opset_import}
        functions = [f"{f.domain}::{f.name}" for f in proto.functions]
        producer = " ".join(x for x in (proto.producer_name, proto.producer_version) if x)
        metadata = {str(p.key): str(p.value) for p in proto.metadata_props}
        ir_version = int(proto.ir_version)
    except ToolkitError:
        raise
    except Exception as exc:  # a protobuf that decodes but holds nonsense
        raise ModelFormatError(f"cannot decode the model ({type(exc).__name__}: {exc})",
                               where=where,
                               fix=_RESAVE) from None
    return OnnxModel(graph, opsets, ir_version, producer, metadata, functions, path)


class _Reader:
    def __init__(self, onnx: Any, where: str, base: Path | None) -> None:
        self.onnx = onnx
        self.where = where
        self.base = base
        self.depth = 0

    def graph(self, g: Any, path: str) -> OnnxGraph:
        self.depth += 1
        if self.depth > 64:
            raise ModelFormatError(
                "subgraphs nested more than 64 deep", where=self.where,
                fix=(
                    "no exporter nests If/Loop/Scan bodies this deep: the file is damaged or "
                    "crafted; export the model again"
                ),
            )
        try:
            inits: dict[str, Initializer] = {}
            for t in g.initializer:
                init = self.tensor(t, f"{path} initializer {t.name!r}")
                inits.setdefault(init.name, init)
            for st in g.sparse_initializer:
                raise ModelFormatError("sparse initializers are not supported",
                                       where=f"{self.where}: {path} {st.values.name!r}",
                                       fix="densify them (onnx.helper / onnxscript)")
            nodes = [self.node(n, f"{path} node {i}") for i, n in enumerate(g.node)]
            return OnnxGraph(
                name=str(g.name), nodes=nodes,
                inputs=[self.value_info(v) for v in g.input],
                outputs=[self.value_info(v) for v in g.output],
                initializers=inits,
                value_info={str(v.name): self.value_info(v) for v in g.value_info},
            )
        finally:
            self.depth -= 1

    def value_info(self, v: Any) -> ValueInfo:
        t = v.type
        if t.WhichOneof("value") != "tensor_type":
            return ValueInfo(str(v.name))
        tt = t.tensor_type
        shape: tuple[int | str, ...] | None = None
        if tt.HasField("shape"):
            dims: list[int | str] = []
            for d in tt.shape.dim:
                which = d.WhichOneof("value")
                dims.append(int(d.dim_value) if which == "dim_value" else
                            str(d.dim_param) if which == "dim_param" else "?")
            shape = tuple(dims)
        return ValueInfo(str(v.name), int(tt.elem_type), shape)

    def node(self, n: Any, where: str) -> OnnxNode:
        attributes: dict[str, Any] = {}
        for a in n.attribute:
            attributes[str(a.name)] = self.attribute(a, f"{where} attribute {a.name!r}")
        return OnnxNode(
            name=str(n.name), op_type=str(n.op_type), domain=str(n.domain),
            inputs=[str(x) for x in n.input], outputs=[str(x) for x in n.output],
            attributes=attributes,
            metadata={str(p.key): str(p.value) for p in n.metadata_props},
            doc=str(n.doc_string),
        )

    def attribute(self, a: Any, where: str) -> Any:
        kind = int(a.type)
        if kind == 1:
            return float(a.f)
        if kind == 2:
            return int(a.i)
        if kind == 3:
            return a.s.decode("utf-8", "replace")
        if kind == 4:
            return self.tensor(a.t, where).data
        if kind == 5:
            return self.graph(a.g, where)
        if kind == 6:
            return [float(x) for x in a.floats]
        if kind == 7:
            return [int(x) for x in a.ints]
        if kind == 8:
            return [s.decode("utf-8", "replace") for s in a.strings]
        if kind == 9:
            return [self.tensor(t, where).data for t in a.tensors]
        if kind == 10:
            return [self.graph(g, f"{where}[{i}]") for i, g in enumerate(a.graphs)]
        if kind == 0 and a.ref_attr_name:
            return {"ref_attr_name": str(a.ref_attr_name)}
        return None  # sparse tensors and type protos are kept as absent

    def tensor(self, t: Any, where: str) -> Initializer:
        dims = tuple(int(d) for d in t.dims)
        if any(d < 0 for d in dims):
            raise ModelFormatError(f"negative dimension in {list(dims)}",
                                   where=f"{self.where}: {where}",
                                   fix=_RESAVE)
        elem = int(t.data_type)
        external = None
        if int(t.data_location) == 1:  # EXTERNAL
            t, external = self._external(t, where)
        dtype = ONNX_DTYPES.get(elem)
        if dtype is None:
            return Initializer(str(t.name), elem, dims, None, external)
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if count > (1 << 40):
            raise ModelFormatError(
                f"tensor of {count} elements", where=f"{self.where}: {where}",
                fix=(
                    "the tensor claims more than 2**40 elements: the file is damaged; export or "
                    "save it again"
                ),
            )
        try:
            if t.raw_data or external is not None:
                raw = bytes(t.raw_data)
                arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
                if arr.size != count:
                    raise ModelFormatError(
                        f"holds {len(raw)} bytes for a {dtype} tensor of shape {list(dims)}",
                        where=f"{self.where}: {where}",
                        fix=_RESAVE)
                arr = arr.astype(np.dtype(dtype), copy=False).reshape(dims)
            else:
                arr = np.asarray(self.onnx.numpy_helper.to_array(t))
                if arr.size != count:
                    raise ModelFormatError(f"holds {arr.size} values for shape {list(dims)}",
                                           where=f"{self.where}: {where}",
                                           fix=_RESAVE)
        except ToolkitError:
            raise
        except Exception as exc:
            raise ModelFormatError(f"cannot decode the tensor ({type(exc).__name__}: {exc})",
                                   where=f"{self.where}: {where}",
                                   fix=_RESAVE) from None
        arr = np.array(arr, copy=True) if not arr.flags.owndata else arr
        arr.flags.writeable = False
        return Initializer(str(t.name), elem, dims, arr, external)

    def _external(self, t: Any, where: str) -> tuple[Any, dict[str, Any]]:
        info = {str(e.key): str(e.value) for e in t.external_data}
        location = info.get("location", "")
        here = f"{self.where}: {where}"
        if not location:
            raise ModelFormatError(
                "external data without a location", where=here,
                fix=(
                    "give the tensor's external_data a location, or save the model with "
                    "onnx.save_model(..., save_as_external_data=True) again"
                ),
            )
        if self.base is None:
            raise ModelFormatError(f"weights are in the external file {location!r}",
                                   where=here, fix="load the model from its path, or pass "
                                                   "base_dir= (the folder of the data file)")
        target = (self.base / location).resolve()
        if os.path.isabs(location) or self.base.resolve() not in target.parents:
            raise ModelFormatError(f"external data location {location!r} leaves the model's "
                                   "folder", where=here, fix="keep the data file beside "
                                                            "the model")
        try:
            offset = int(info.get("offset", "0") or 0)
            length = int(info["length"]) if info.get("length") else None
        except ValueError:
            raise ModelFormatError(f"bad external data offset/length {info}",
                                   where=here,
                                   fix=("offset and length must be integers: save the model and "
                                        "its data again (onnx.save_model)")) from None
        try:
            size = target.stat().st_size
            if offset < 0 or offset > size or (length is not None and
                                               (length < 0 or offset + length > size)):
                raise ModelFormatError(
                    f"external data range {offset}+{length} is outside {location!r} "
                    f"({size} bytes)", where=here, fix="save the model and its data again")
            with open(target, "rb") as f:
                f.seek(offset)
                raw = f.read(length if length is not None else size - offset)
        except FileNotFoundError:
            raise ModelFormatError(f"external data file {location!r} not found",
                                   where=here, fix="keep the data file beside the model") from None
        except OSError as exc:
            raise ModelFormatError(f"cannot read external data {location!r} ({exc})",
                                   where=here,
                                   fix=("check that the data file is readable and beside the "
                                        "model, or save the model and its data again")) from None
        copy = type(t)()
        copy.CopyFrom(t)
        del copy.external_data[:]
        copy.data_location = 0
        copy.raw_data = raw
        return copy, {"location": location, "offset": offset, "length": len(raw)}


def parse_name_scopes(text: str) -> list[str] | None:
    """The list in a dynamo exporter's ``pkg.torch.onnx.name_scopes`` entry (a Python list
    literal of strings), or None when it is not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None
