"""Read ExecuTorch ETRecord files (a zip of JSON members) with ``zipfile`` and ``json`` only.

An ETRecord holds the debug-handle map (instruction id -> debug handles), the delegate map, the
number of outputs per instruction, the torch.export graph id and the programs as torch.export
JSON (``exported_program``, ``edge_dialect_exported_program/<method>``). The members named
``*_state_dict``, ``*_constants`` and ``*_example_inputs`` are pickles: they are never read.

:func:`read_etrecord` returns plain objects: one :class:`EdgeNode` per ``call_function`` node of
the edge program, including the nodes of control-flow bodies and of the original graphs of
delegated (lowered) modules, each with its debug handle, ``nn_module_stack`` (parsed), stack
trace and the torch.export node it came from.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.limits import check
from toolkit.util.files import read_bytes

__all__ = ["ETRecord", "EdgeNode", "read_etrecord", "parse_module_stack", "ETRecordError"]

_IDENTIFIER = "ETRECORD_V0"
_EDGE_PREFIX = "edge_dialect_exported_program/"
# The fix for a member whose JSON has the wrong structure: only a damaged or hand-edited file has it
_REGENERATE = ("the ETRecord is damaged or was not written by ExecuTorch: regenerate it with "
               "executorch.devtools.generate_etrecord from the same export")
_PICKLED_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")


class ETRecordError(ToolkitError):
    """An ETRecord cannot be read."""


@dataclass
class EdgeNode:
    """One operator node of an edge program.

    Attributes:
        graph: where the node sits: ``""`` for the method's graph, ``"<node>/<subgraph>"`` for
            a control-flow body (``map_impl/submodule_0``) and ``"<delegate node>/<lowered
            module>"`` for the original graph of a delegated module.
        name: the node's name (``aten_convolution_default``).
        target: the call target as serialized (``executorch.exir.dialects.edge.ops.aten...``).
        op: the target's short name as torch prints it (``aten.convolution.default``).
        handle: the debug handle (None when the node has none).
        module_stack: ``[(key, path, type), ...]`` outermost first (``nn_module_stack``).
        stack_trace: the Python stack trace text (None when absent).
        from_node: the raw provenance chain (a list of dicts; empty when absent).
        torch_node: the torch.export node it came from (the ``from_node`` entry whose
            ``graph_id`` is the ETRecord's ``export_graph_id``), else None.
        inputs: names of the tensors it reads; ``outputs``: names of the tensors it writes.
        backend: the backend id for a delegate call node (``XnnpackBackend``), else None.
        index: position in the order nodes were listed (graph order, depth first).
    """

    graph: str
    name: str
    target: str
    op: str
    handle: int | None
    module_stack: list[tuple[str, str, str]]
    stack_trace: str | None
    from_node: list[dict[str, Any]]
    torch_node: str | None
    inputs: list[str]
    outputs: list[str]
    backend: str | None = None
    index: int = 0

    @property
    def module_path(self) -> str | None:
        """The innermost ``nn.Module`` path (the layer), None without a module stack."""
        return self.module_stack[-1][1] if self.module_stack else None

    @property
    def module_type(self) -> str | None:
        """The innermost module's type, None without a module stack."""
        return self.module_stack[-1][2] if self.module_stack else None


@dataclass
class ETRecord:
    """A decoded ETRecord.

    ``debug_handle_map``: method -> instruction id -> handles (a list, duplicates kept);
    ``debug_handle_map_raw``: the same as stored (an int or a list per instruction);
    ``delegate_map``: method -> instruction id -> ``{"name": backend, "delegate_map": ...}``;
    ``num_outs``: method -> instruction id -> outputs; ``export_graph_id`` (None if absent);
    ``nodes``: method -> :class:`EdgeNode` list; ``members``: the zip's member names;
    ``programs``: the JSON programs that were read (``exported_program``, ``edge:<method>``).
    """

    source: str
    debug_handle_map: dict[str, dict[int, list[int]]]
    debug_handle_map_raw: dict[str, dict[str, Any]]
    delegate_map: dict[str, dict[int, dict[str, Any]]]
    num_outs: dict[str, dict[int, int]]
    export_graph_id: int | None
    nodes: dict[str, list[EdgeNode]]
    members: list[str]
    exported_nodes: list[EdgeNode] = field(default_factory=list)

    def methods(self) -> list[str]:
        """Method names with an edge program (``["forward"]``)."""
        return list(self.nodes)


def parse_module_stack(text: str | None) -> list[tuple[str, str, str]]:
    """Parse a serialized ``nn_module_stack`` (``key,path,type;key,path,type;...``).

    Items are split on ``;``, then on commas outside parentheses and brackets (Sequential
    slices give paths like ``layers.slice(1, None, None)``).

    Raises:
        ETRecordError: an item has not exactly three fields.
    """
    if not text:
        return []
    out: list[tuple[str, str, str]] = []
    for item in text.split(";"):
        parts: list[str] = []
        depth = 0
        cur: list[str] = []
        for ch in item:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append("".join(cur))
                cur = []
            else:
                cur.append(ch)
        parts.append("".join(cur))
        if len(parts) != 3:
            raise ETRecordError(f"an nn_module_stack entry has {len(parts)} fields, not 3: "
                                f"{item[:120]!r}", fix="the ETRecord is corrupt")
        out.append((parts[0], parts[1], parts[2]))
    return out


def read_etrecord(source: str | os.PathLike[str] | bytes) -> ETRecord:
    """Read an ETRecord without unpickling anything.

    Returns:
        An :class:`ETRecord`.

    Raises:
        ETRecordError: not a zip, not an ETRecord (the message names an ETDump or a program
            passed by mistake), a missing or malformed JSON member.
    """
    if isinstance(source, (bytes, bytearray)):
        data, where = bytes(source), "<bytes>"
    else:
        where = str(source)
        data = read_bytes(source, what="ETRecord", fix="check the path", error=ETRecordError)
    if data[:4] != b"PK\x03\x04":
        from toolkit.formats.etdump import _fix_for, sniff_executorch_file

        kind = sniff_executorch_file(data)
        what = {"etdump": "an ETDump (.etdp), not an ETRecord",
                "program": "an ExecuTorch program (.pte), not an ETRecord"}.get(
            kind or "", "not an ETRecord (not a zip file)")
        raise ETRecordError(what, where=where, fix=_fix_for(kind, "etrecord"))
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return _read(z, where)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            RuntimeError, NotImplementedError, KeyError, IndexError, TypeError,
            AttributeError, RecursionError, OverflowError) as exc:
        raise ETRecordError(f"corrupt ETRecord ({type(exc).__name__}: {exc})", where=where,
                            fix="regenerate it with executorch.devtools.generate_etrecord"
                            ) from None


def _json_member(z: zipfile.ZipFile, name: str, where: str) -> Any:
    try:
        info = z.getinfo(name)
    except KeyError:
        return None
    check("max_decompressed_bytes", info.file_size, what=f"bytes of ETRecord member {name!r}",
          where=where)
    raw = z.read(info)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ETRecordError(f"member {name!r} is not JSON ({exc})", where=where,
                            fix="regenerate the ETRecord with ExecuTorch 1.x (JSON members)"
                            ) from None


def _int_key(key: Any, what: str, where: str) -> int:
    try:
        return int(key)
    except (TypeError, ValueError):
        raise ETRecordError(
            f"{what} key {key!r} is not an integer", where=where,
            fix=_REGENERATE,
        ) from None


def _handles(value: Any, what: str, where: str) -> list[int]:
    items = value if isinstance(value, list) else [value]
    out: list[int] = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ETRecordError(
                f"{what}: debug handle {v!r} is not an integer", where=where,
                fix=_REGENERATE,
            )
        out.append(v)
    return out


def _read(z: zipfile.ZipFile, where: str) -> ETRecord:
    members = z.namelist()
    if _IDENTIFIER not in members:
        raise ETRecordError("a zip file without the ETRECORD_V0 marker", where=where,
                            fix="pass the ETRecord written by generate_etrecord")
    dhm = _json_member(z, "debug_handle_map", where) or {}
    dmap = _json_member(z, "delegate_map", where) or {}
    nouts = _json_member(z, "instruction_id_to_num_outs_map", where) or {}
    graph_id = _json_member(z, "export_graph_id", where)
    for name, value in (("debug_handle_map", dhm), ("delegate_map", dmap),
                        ("instruction_id_to_num_outs_map", nouts)):
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise ETRecordError(
                f"member {name!r} is not a map of methods to maps", where=where,
                fix=_REGENERATE,
            )
    handle_map = {m: {_int_key(k, "debug_handle_map", where):
                      _handles(v, f"debug_handle_map[{m}][{k}]", where) for k, v in d.items()}
                  for m, d in dhm.items()}
    delegate_map: dict[str, dict[int, dict[str, Any]]] = {}
    for m, d in dmap.items():
        delegate_map[m] = {}
        for k, v in d.items():
            if not isinstance(v, dict):
                raise ETRecordError(
                    f"delegate_map[{m}][{k}] is not an object", where=where,
                    fix=_REGENERATE,
                )
            delegate_map[m][_int_key(k, "delegate_map", where)] = v
    num_outs = {m: {_int_key(k, "instruction_id_to_num_outs_map", where): int(v)
                    for k, v in d.items()} for m, d in nouts.items()}
    if graph_id is not None and (isinstance(graph_id, bool) or not isinstance(graph_id, int)):
        raise ETRecordError(
            f"export_graph_id {graph_id!r} is not an integer", where=where,
            fix=_REGENERATE,
        )
    nodes: dict[str, list[EdgeNode]] = {}
    for member in members:
        if member.startswith(_EDGE_PREFIX) and not member.endswith(_PICKLED_SUFFIXES):
            method = member[len(_EDGE_PREFIX):]
            program = _json_member(z, member, where)
            nodes[method] = _program_nodes(program, graph_id, f"{where}:{member}")
    exported = _json_member(z, "exported_program", where)
    exported_nodes = (_program_nodes(exported, graph_id, f"{where}:exported_program")
                      if exported is not None else [])
    return ETRecord(where, handle_map, dhm, delegate_map, num_outs, graph_id, nodes, members,
                    exported_nodes)


def _program_nodes(program: Any, graph_id: int | None, where: str) -> list[EdgeNode]:
    if not isinstance(program, dict) or not isinstance(program.get("graph_module"), dict):
        raise ETRecordError(
            "not a torch.export JSON program (no graph_module)", where=where,
            fix=(
                "pass the ETRecord written by generate_etrecord, whose exported_program members "
                "hold torch.export JSON programs; regenerate it if it is damaged"
            ),
        )
    out: list[EdgeNode] = []
    _graph_nodes(program["graph_module"].get("graph"), "", graph_id, where, out)
    for i, node in enumerate(out):
        node.index = i
    return out


_SHORT_PREFIXES = ("executorch.exir.dialects.edge.ops.", "torch.ops.higher_order.",
                   "torch.ops.aten.", "torch.ops.")


def short_op(target: str) -> str:
    """The name torch gives a call target (``aten.convolution.default``, ``map_impl``)."""
    for prefix in _SHORT_PREFIXES:
        if target.startswith(prefix):
            return target[len(prefix):]
    return target.rsplit(".", 1)[-1] if target.startswith("_operator.") else target


def _torch_node(chain: list[dict[str, Any]], graph_id: int | None) -> str | None:
    if graph_id is None:
        return None
    stack = list(chain)
    while stack:
        entry = stack.pop(0)
        if not isinstance(entry, dict):
            continue
        if entry.get("graph_id") == graph_id:
            name = entry.get("name")
            return name if isinstance(name, str) else None
        nested = entry.get("from_node")
        if isinstance(nested, list):
            stack[:0] = nested
    return None


def _tensor_names(args: Any) -> list[str]:
    out: list[str] = []
    if isinstance(args, dict):
        for key, value in args.items():
            if key in ("as_tensor", "as_sym_int") and isinstance(value, dict):
                if isinstance(value.get("name"), str):
                    out.append(value["name"])
            elif key in ("as_tensors", "as_optional_tensors") and isinstance(value, list):
                for v in value:
                    if isinstance(v, dict):
                        name = v.get("name", v.get("as_tensor", {}).get("name")
                                     if isinstance(v.get("as_tensor"), dict) else None)
                        if isinstance(name, str):
                            out.append(name)
    return out


def _graph_nodes(graph: Any, scope: str, graph_id: int | None, where: str,
                 out: list[EdgeNode]) -> None:
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise ETRecordError(
            f"graph {scope or '<method>'} has no node list", where=where,
            fix=_REGENERATE,
        )
    for raw in graph["nodes"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise ETRecordError(f"a node of graph {scope or '<method>'} is malformed",
                                where=where,
                                fix=_REGENERATE)
        meta = raw.get("metadata") or {}
        if not isinstance(meta, dict):
            raise ETRecordError(
                f"node {raw['name']}: metadata is not an object", where=where,
                fix=_REGENERATE,
            )
        target = str(raw.get("target", ""))
        handle = _node_handle(meta.get("debug_handle"), raw["name"], where)
        chain: list[dict[str, Any]] = []
        if isinstance(meta.get("from_node"), str) and meta["from_node"]:
            try:
                parsed = json.loads(meta["from_node"])
            except ValueError:
                raise ETRecordError(f"node {raw['name']}: from_node is not JSON",
                                    where=where,
                                    fix=_REGENERATE) from None
            chain = parsed if isinstance(parsed, list) else []
        inputs: list[str] = []
        subgraphs: list[tuple[str, Any]] = []
        lowered: list[tuple[str, dict[str, Any]]] = []
        for arg in raw.get("inputs") or []:
            if not isinstance(arg, dict):
                continue
            value = arg.get("arg")
            inputs.extend(_tensor_names(value))
            if isinstance(value, dict):
                if isinstance(value.get("as_graph"), dict):
                    g = value["as_graph"]
                    subgraphs.append((str(g.get("name", "")), g.get("graph")))
                text = value.get("as_string")
                if (isinstance(text, str) and text.startswith("{")
                        and '"original_module"' in text[:200_000]):
                    try:
                        lm = json.loads(text)
                    except ValueError:
                        lm = None
                    if isinstance(lm, dict) and isinstance(lm.get("original_module"), dict):
                        lowered.append((str(arg.get("name", "")), lm))
        outputs: list[str] = []
        for o in raw.get("outputs") or []:
            outputs.extend(_tensor_names(o))
        stack_trace = meta.get("stack_trace")
        node = EdgeNode(
            graph=scope, name=raw["name"], target=target, op=short_op(target), handle=handle,
            module_stack=parse_module_stack(meta.get("nn_module_stack")),
            stack_trace=stack_trace if isinstance(stack_trace, str) else None,
            from_node=chain, torch_node=_torch_node(chain, graph_id), inputs=inputs,
            outputs=outputs,
            backend=str(lowered[0][1].get("backend_id")) if lowered else None)
        out.append(node)
        for sub_name, sub in subgraphs:
            _graph_nodes(sub, f"{_join(scope, raw['name'])}/{sub_name}", graph_id, where, out)
        for lm_name, lm in lowered:
            gm = lm["original_module"].get("graph_module")
            if not isinstance(gm, dict):
                raise ETRecordError(f"delegate {raw['name']}: original module has no graph",
                                    where=where,
                                    fix=_REGENERATE)
            _graph_nodes(gm.get("graph"), f"{_join(scope, raw['name'])}/{lm_name}", graph_id,
                         where, out)


def _join(scope: str, name: str) -> str:
    return f"{scope}/{name}" if scope else name


def _node_handle(value: Any, name: str, where: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ETRecordError(
            f"node {name}: debug handle {value!r} is not an integer", where=where,
            fix=_REGENERATE,
        )
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ETRecordError(f"node {name}: debug handle {value!r} is not an integer",
                            where=where,
                            fix=_REGENERATE) from None
