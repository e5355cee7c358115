"""Read ExecuTorch programs (``.pte``, FlatBuffer ``ET12``) and XNNPACK delegate blobs.

Only what profiling needs is decoded: the extended header, each execution plan's
instructions (kernel calls with their operator, delegate calls with their delegate, moves,
jumps, frees), the operator table, the delegates with their processed data (inline or in a
segment) and, for XNNPACK delegates, the node list (``XNode``: kind, debug handle, whether an
output min/max is fused). Tables are read by vtable slot (slot *k* is vtable entry
``4 + 2k``) following ``exir/_serialize/program.fbs`` and
``backends/xnnpack/serialization/schema.fbs``; every offset is bounds-checked.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from toolkit.errors import ToolkitError
from toolkit.util.files import read_bytes

__all__ = ["Program", "ExecutionPlan", "Instruction", "Delegate", "XnnNode",
           "read_program", "read_xnnpack_blob", "ProgramError", "XNODE_KINDS"]

INSTRUCTION_KINDS = ("", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall")
#: ``XNodeUnion`` members in schema order (union type 1 is the first).
XNODE_KINDS: tuple[str, ...] = (
    "XNNAdd", "XNNFullyConnected", "XNNSoftmax", "XNNSigmoid", "XNNStaticTranspose",
    "XNNClamp", "XNNConv2d", "XNNDiv", "XNNStaticResizeBilinear2D", "XNNStaticConstantPad",
    "XNNAvgPooling2d", "XNNMinimum", "XNNDepthwiseConv2d", "XNNMaxPooling2d", "XNNMultiply",
    "XNNSubtract", "XNNFloor", "XNNConvert", "XNNGlobalAvgPooling2d", "XNNStaticReshape",
    "XNNArgMaxPooling2d", "XNNSquareRoot", "XNNCeiling", "XNNHardswish", "XNNLeakyReLU",
    "XNNMaximum", "XNNNegate", "XNNSquare", "XNNELU", "XNNAbs", "XNNPReLU", "XNNConcatenate2",
    "XNNConcatenate3", "XNNConcatenate4", "XNNStaticSlice", "XNNScaledDotProductAttention",
    "XNNBatchMatrixMultiply", "XNNConcatenate5", "XNNConvTranspose2d",
    "XNNReciprocalSquareRoot", "XNNLog", "XNNGelu", "XNNTanh", "XNNExp", "XNNSin", "XNNCopy",
    "XNNCos",
)


# The fix for a program whose tables name entries that do not exist
_REEXPORT = ("the program is damaged or was not written by ExecuTorch: export it again "
             "(to_executorch() then write_to_file) and pass that .pte")


class ProgramError(ToolkitError):
    """An ExecuTorch program or delegate blob cannot be decoded."""


@dataclass
class Instruction:
    """One instruction: ``kind`` (``KernelCall``, ``DelegateCall``, ``MoveCall``,
    ``JumpFalseCall``, ``FreeCall`` or ``""``), ``op_index`` / ``delegate_index`` (None for
    other kinds), ``args`` (EValue indices)."""

    kind: str
    op_index: int | None = None
    delegate_index: int | None = None
    args: list[int] = field(default_factory=list)


@dataclass
class Delegate:
    """A backend delegate: ``id`` (``XnnpackBackend``), ``location`` (``inline`` or
    ``segment``), ``index`` and the processed bytes."""

    id: str | None
    location: str
    index: int
    data: bytes


@dataclass
class XnnNode:
    """One XNNPACK node: ``kind`` (``XNNConv2d`` ...; ``union<k>`` for an unknown member),
    ``debug_handle`` (65535: inserted by the delegate), ``min_max`` (an output clamp is
    fused)."""

    kind: str
    debug_handle: int
    min_max: bool


@dataclass
class ExecutionPlan:
    """A method: ``name``, ``operators`` (``(name, overload)``), ``chains`` (instruction
    lists), ``delegates``."""

    name: str
    operators: list[tuple[str, str]]
    chains: list[list[Instruction]]
    delegates: list[Delegate]

    def kernel_name(self, instruction_id: int, chain: int = 0) -> str | None:
        """The ETDump event name of a kernel call (``native_call_convolution.out``)."""
        ins = self.chains[chain][instruction_id]
        if ins.kind != "KernelCall" or ins.op_index is None:
            return None
        name, overload = self.operators[ins.op_index]
        base = name.split("::", 1)[-1]
        return f"native_call_{base}.{overload}" if overload else f"native_call_{base}"


@dataclass
class Program:
    """A decoded ``.pte``: ``version``, ``plans`` (by method), ``segment_base_offset`` and
    the header fields (``program_size``, ``segment_data_size``; None without a header)."""

    source: str
    version: int
    plans: dict[str, ExecutionPlan]
    program_size: int | None
    segment_base_offset: int | None
    segment_data_size: int | None


class _Buf:
    """Bounds-checked FlatBuffer table reads."""

    def __init__(self, data: bytes, where: str, base: int = 0) -> None:
        self.data = data
        self.where = where
        self.base = base

    def _need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or pos + size > len(self.data):
            raise ProgramError(f"{what} at byte {pos} lies outside the buffer "
                               f"({len(self.data)} bytes)", where=self.where,
                               fix="the file is truncated or corrupt")

    def u8(self, pos: int, what: str) -> int:
        self._need(pos, 1, what)
        return self.data[pos]

    def u16(self, pos: int, what: str) -> int:
        self._need(pos, 2, what)
        return int(struct.unpack_from("<H", self.data, pos)[0])

    def u32(self, pos: int, what: str) -> int:
        self._need(pos, 4, what)
        return int(struct.unpack_from("<I", self.data, pos)[0])

    def i32(self, pos: int, what: str) -> int:
        self._need(pos, 4, what)
        return int(struct.unpack_from("<i", self.data, pos)[0])

    def u64(self, pos: int, what: str) -> int:
        self._need(pos, 8, what)
        return int(struct.unpack_from("<Q", self.data, pos)[0])

    def field(self, table: int, slot: int, what: str) -> int:
        """Absolute position of field ``slot`` of ``table``, 0 when absent."""
        vt = table - self.i32(table, f"{what} vtable offset")
        vt_len = self.u16(vt, f"{what} vtable")
        entry = 4 + 2 * slot
        if vt_len < entry + 2:
            return 0
        off = self.u16(vt + entry, f"{what} vtable")
        return table + off if off else 0

    def table(self, table: int, slot: int, what: str) -> int:
        pos = self.field(table, slot, what)
        return pos + self.u32(pos, what) if pos else 0

    def scalar(self, table: int, slot: int, kind: str, default: int, what: str) -> int:
        pos = self.field(table, slot, what)
        if not pos:
            return default
        return {"u8": self.u8, "u32": self.u32, "i32": self.i32, "u64": self.u64}[kind](
            pos, what)

    def vector(self, table: int, slot: int, what: str) -> tuple[int, int]:
        """(first element position, length) of a vector field; (0, 0) when absent."""
        pos = self.field(table, slot, what)
        if not pos:
            return 0, 0
        vec = pos + self.u32(pos, what)
        n = self.u32(vec, what)
        self._need(vec + 4, n, what)
        return vec + 4, n

    def tables(self, table: int, slot: int, what: str) -> list[int]:
        start, n = self.vector(table, slot, what)
        self._need(start, 4 * n, what)
        return [start + 4 * i + self.u32(start + 4 * i, what) for i in range(n)]

    def ints(self, table: int, slot: int, what: str) -> list[int]:
        start, n = self.vector(table, slot, what)
        self._need(start, 4 * n, what)
        return list(struct.unpack_from(f"<{n}i", self.data, start)) if n else []

    def bytes_field(self, table: int, slot: int, what: str) -> bytes:
        start, n = self.vector(table, slot, what)
        return bytes(self.data[start:start + n])

    def string(self, table: int, slot: int, what: str) -> str | None:
        pos = self.field(table, slot, what)
        if not pos:
            return None
        s = pos + self.u32(pos, what)
        n = self.u32(s, what)
        self._need(s + 4, n, what)
        try:
            return self.data[s + 4:s + 4 + n].decode("utf-8")
        except UnicodeDecodeError:
            raise ProgramError(f"{what} at byte {s} is not UTF-8", where=self.where,
                               fix="the file is truncated or corrupt") from None


def read_program(source: str | os.PathLike[str] | bytes) -> Program:
    """Decode an ExecuTorch program.

    Returns:
        A :class:`Program`.

    Raises:
        ProgramError: not a program (the message names an ETDump or an ETRecord passed by
            mistake) or a corrupt one.
    """
    if isinstance(source, (bytes, bytearray)):
        data, where = bytes(source), "<bytes>"
    else:
        where = str(source)
        data = read_bytes(source, what="program", fix="check the path", error=ProgramError)
    if len(data) < 8 or data[4:8] != b"ET12":
        from toolkit.formats.etdump import _fix_for, sniff_executorch_file

        kind = sniff_executorch_file(data)
        what = {"etdump": "an ETDump (.etdp), not an ExecuTorch program",
                "etrecord": "an ETRecord, not an ExecuTorch program"}.get(
            kind or "", "not an ExecuTorch program (no ET12 identifier at byte 4)")
        raise ProgramError(what, where=where, fix=_fix_for(kind, "program"))
    try:
        return _decode(data, where)
    except RecursionError:
        raise ProgramError(
            "corrupt program (nesting too deep)", where=where,
            fix=_REEXPORT,
        ) from None


def _decode(data: bytes, where: str) -> Program:
    b = _Buf(data, where)
    program_size = segment_base = segment_size = None
    if data[8:12] == b"eh00":
        hlen = b.u32(12, "extended header")
        if hlen >= 32:
            program_size = b.u64(16, "program_size")
            segment_base = b.u64(24, "segment_base_offset")
            segment_size = b.u64(32, "segment_data_size") if hlen >= 40 else None
    root = b.u32(0, "root offset")
    version = b.scalar(root, 0, "u32", 0, "Program.version")
    inline = [b.bytes_field(t, 0, "BackendDelegateInlineData")
              for t in b.tables(root, 3, "Program.backend_delegate_data")]
    segments = [(b.scalar(t, 0, "u64", 0, "DataSegment.offset"),
                 b.scalar(t, 1, "u64", 0, "DataSegment.size"))
                for t in b.tables(root, 4, "Program.segments")]
    plans: dict[str, ExecutionPlan] = {}
    for plan in b.tables(root, 1, "Program.execution_plan"):
        name = b.string(plan, 0, "ExecutionPlan.name") or ""
        operators = [(b.string(t, 0, "Operator.name") or "", b.string(t, 1, "Operator.overload")
                      or "") for t in b.tables(plan, 6, "ExecutionPlan.operators")]
        chains = []
        for chain in b.tables(plan, 5, "ExecutionPlan.chains"):
            instructions = []
            for ins in b.tables(chain, 2, "Chain.instructions"):
                kind_code = b.scalar(ins, 0, "u8", 0, "Instruction.instr_args_type")
                kind = (INSTRUCTION_KINDS[kind_code] if kind_code < len(INSTRUCTION_KINDS)
                        else f"union{kind_code}")
                args = b.table(ins, 1, "Instruction.instr_args")
                item = Instruction(kind)
                if args and kind in ("KernelCall", "DelegateCall"):
                    index = b.scalar(args, 0, "i32", 0, f"{kind} index")
                    if kind == "KernelCall":
                        item.op_index = index
                        if not 0 <= index < len(operators):
                            raise ProgramError(f"a kernel call names operator {index} of "
                                               f"{len(operators)}", where=where,
                                               fix=_REEXPORT)
                    else:
                        item.delegate_index = index
                    item.args = b.ints(args, 1, f"{kind}.args")
                instructions.append(item)
            chains.append(instructions)
        delegates = []
        for d in b.tables(plan, 7, "ExecutionPlan.delegates"):
            ref = b.table(d, 1, "BackendDelegate.processed")
            location = b.scalar(ref, 0, "u8", 0, "DataReference.location") if ref else 0
            index = b.scalar(ref, 1, "u32", 0, "DataReference.index") if ref else 0
            if location == 0:
                if index >= len(inline):
                    raise ProgramError(f"a delegate names inline data {index} of {len(inline)}",
                                       where=where,
                                       fix=_REEXPORT)
                blob = inline[index]
                loc = "inline"
            else:
                if index >= len(segments) or segment_base is None:
                    raise ProgramError(f"a delegate names segment {index} of {len(segments)}",
                                       where=where,
                                       fix=_REEXPORT)
                off, size = segments[index]
                start = segment_base + off
                if start + size > len(data):
                    raise ProgramError(f"segment {index} runs past the end of the file",
                                       where=where, fix="the file is truncated")
                blob = data[start:start + size]
                loc = "segment"
            delegates.append(Delegate(b.string(d, 0, "BackendDelegate.id"), loc, index, blob))
        for chain_ins in chains:
            for call in chain_ins:
                if call.kind == "DelegateCall" and not (
                        call.delegate_index is not None
                        and 0 <= call.delegate_index < len(delegates)):
                    raise ProgramError(f"a delegate call names delegate {call.delegate_index} "
                                       f"of {len(delegates)}", where=where,
                                       fix=_REEXPORT)
        plans[name] = ExecutionPlan(name, operators, chains, delegates)
    return Program(where, version, plans, program_size, segment_base, segment_size)


def read_xnnpack_blob(blob: bytes, where: str = "<XNNPACK delegate>") -> list[XnnNode]:
    """The node list of an XNNPACK delegate's processed data, in execution order.

    Raises:
        ProgramError: not an XNNPACK blob (``XH00`` header, ``XN01`` FlatBuffer) or corrupt.
    """
    if len(blob) < 30 or blob[4:8] != b"XH00":
        raise ProgramError(
            "not an XNNPACK delegate blob (no XH00 header)", where=where,
            fix=(
                "pass the processed data of an XnnpackBackend delegate (lowered with "
                "XnnpackPartitioner), not another backend's"
            ),
        )
    hb = _Buf(blob, where)
    fb_off = hb.u32(10, "XNNPACK flatbuffer offset")
    fb_size = hb.u32(14, "XNNPACK flatbuffer size")
    if fb_off + fb_size > len(blob) or fb_size < 8:
        raise ProgramError(
            "the XNNPACK flatbuffer lies outside the blob", where=where,
            fix="the delegate blob is truncated or damaged: lower and export the program again",
        )
    fb = blob[fb_off:fb_off + fb_size]
    if fb[4:8] != b"XN01":
        raise ProgramError(
            "the XNNPACK flatbuffer has no XN01 identifier", where=where,
            fix=(
                "the delegate blob is damaged or from an unknown XNNPACK schema version: lower and "
                "export the program again with ExecuTorch 1.x"
            ),
        )
    b = _Buf(fb, where)
    root = b.u32(0, "root offset")
    nodes = []
    for t in b.tables(root, 1, "XNNGraph.xnodes"):
        code = b.scalar(t, 0, "u8", 0, "XNode.xnode_union_type")
        kind = XNODE_KINDS[code - 1] if 1 <= code <= len(XNODE_KINDS) else f"union{code}"
        nodes.append(XnnNode(kind, b.scalar(t, 2, "u32", 0, "XNode.debug_handle"),
                             bool(b.field(t, 3, "XNode.output_min_max"))))
    return nodes
