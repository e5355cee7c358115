"""ExecuTorch as an adapter of the one join: an ETDump becomes a nested
:class:`~toolkit.trace.readers.read.Trace` and its ETRecord (with the ``.pte``) a provenance.

    trace, prov = executorch_inputs(read_executorch(etdp, etrecord, pte))
    att = toolkit.trace.join.join.trace_join(trace, prov)      # what tk.trace_join does

**Trace** (:func:`etdump_trace`): one row per event of an ``Execute`` block (``run``: its
ordinal), with its parent span as the runtime nests them (``parent_id``; see
:func:`toolkit.trace.readers.executorch.profile.etdump_events`), so each span counts its exclusive
time. Load-time events (``Method::init``, ``Program::load_method``) are no run: they are kept in
``meta["load_events"]``.

**Provenance** (:class:`ExecutorchProvenance`): the source ops are the edge nodes of the
ETRecord (``source_id`` = the node's row of ``ExecutorchProfile.nodes()``), each with its
``nn.Module`` path as layer (a node of a control-flow body without one: its enclosing node's;
a node of the root module: :data:`~toolkit.layer_names.NO_LAYER`, as in every join). The
compiled units, each with the edge nodes it stands for, are:

- an instruction of the program (``optimised_id`` = the instruction id): the nodes of its
  debug handles; its ``native_call_*`` kernel and its ``OPERATOR_CALL`` span are keyed to it;
- a kernel call of a control-flow body (no handle): the body node of the same operator,
  matched in order (with the program);
- an XNNPACK node (with the program): the nodes of its debug handle and of the handles
  XNNPACK fused into it (a batch norm folded into its convolution, an activation fused as its
  output clamp): one group that shares the event under the policy;
- a delegate id of a delegate that reports integer ids: the handles the delegate map names.

**Keys** (:func:`executorch_inputs`): every event is keyed by its unit (``op_index``), except
``Method::execute`` and a ``DELEGATE_CALL`` whose per-op events are mapped: those are
wrappers, whose own time is dispatch overhead (:meth:`Attribution.overhead`). Without the
program, a delegate's per-op events cannot be placed on its nodes: they are keyed to the
delegate call's instruction (the delegate's nodes). An event that cannot be joined carries
its reason as ``problem`` (a node the delegate made at runtime, handle 65535; an instruction
without handles; no ETRecord). The edge nodes have no MAC counts: ``macs`` splits equally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.formats.etrecord import EdgeNode, ETRecord
from toolkit.formats.executorch_program import read_xnnpack_blob
from toolkit.layer_names import NO_LAYER
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS
from toolkit.trace.join.keys import KEY_KINDS
from toolkit.trace.readers.executorch._xnnpack import INSERTED_HANDLE, align, fused_handles
from toolkit.trace.readers.read import Trace

if TYPE_CHECKING:
    from toolkit.trace.readers.executorch.profile import ExecutorchProfile

__all__ = ["ExecutorchProvenance", "executorch_inputs", "etdump_trace", "edge_layers", "layer_row",
           "NO_ETRECORD", "COMPONENTS"]

_I64 = np.int64
_STR = pd.Series([""]).dtype
#: the reason of every event when no ETRecord is given
NO_ETRECORD = "no ETRecord given (events cannot be joined to layers)"
#: how an event's time is spent: a kernel, an instruction's dispatch span, a delegate
COMPONENTS: tuple[str, ...] = ("kernel", "dispatch", "delegate")
_ROLE_ROOT, _ROLE_SPAN, _ROLE_KERNEL, _ROLE_DOP = 1, 3, 4, 5


def layer_row(module_path: str) -> str:
    """The ``by_layer()`` row of a node whose layer is ``module_path`` (``""``, the root
    module: :data:`~toolkit.layer_names.NO_LAYER`)."""
    return module_path or NO_LAYER


def _usable(node: EdgeNode) -> bool:
    return node.target != "_operator.getitem"


def edge_layers(record: ETRecord, method: str) -> tuple[list[EdgeNode], list[str], list[str]]:
    """The edge nodes of ``method`` (``getitem`` left out), each node's layer (its module
    path, else its enclosing node's, else ``""``: the root module) and where it came from."""
    nodes = [n for n in record.nodes.get(method, []) if _usable(n)]
    by_name = {("", n.name): n for n in nodes if n.graph == ""}
    layers: list[str] = []
    sources: list[str] = []
    for n in nodes:
        if n.module_path is not None:
            layers.append(n.module_path)
            sources.append("nn_module_stack")
            continue
        owner = by_name.get(("", n.graph.split("/", 1)[0])) if n.graph else None
        if owner is not None and owner.module_path is not None:
            layers.append(owner.module_path)
            sources.append(f"enclosing node {owner.name}")
        else:
            layers.append("")
            sources.append("root module (no nn_module_stack)")
    return nodes, layers, sources


@dataclass
class _Units:
    """Compiled units: key -> id, each with its edge nodes, operator, name and backend."""

    index: dict[Any, int] = field(default_factory=dict)
    nodes: list[list[int]] = field(default_factory=list)
    rows: list[tuple[int, str, str, str]] = field(default_factory=list)
    next_id: int = 0

    def add(self, key: Any, nodes: list[int], operator: str, name: str, backend: str,
            unit_id: int | None = None) -> int:
        if key not in self.index:
            uid = self.next_id if unit_id is None else unit_id
            self.next_id = max(self.next_id, uid + 1)
            self.index[key] = uid
            self.nodes.append(list(dict.fromkeys(nodes)))
            self.rows.append((uid, operator, name, backend))
        return self.index[key]


def _members(handles: list[int], nodes_of: dict[int, list[int]]) -> list[int]:
    return [node for h in dict.fromkeys(handles) for node in nodes_of.get(h, [])]


class ExecutorchProvenance:
    """Provenance tables of an ExecuTorch program (see the module docstring); made by
    :func:`executorch_inputs` with the trace it keys.

    Attributes:
        nodes: the edge nodes (:class:`~toolkit.formats.etrecord.EdgeNode`), ``source_id``
            = position. ``node_layers``: each node's module path (``""``: the root module).
        skipped: XNNPACK nodes that made no operator event and handles with no owner.
    """

    def __init__(self, nodes: list[EdgeNode], node_layers: list[str], units: _Units,
                 skipped: list[dict[str, Any]], source: str) -> None:
        self.nodes = nodes
        self.node_layers = node_layers
        self._units = units
        self.skipped = skipped
        self.source = source

    def __repr__(self) -> str:
        return (f"<ExecutorchProvenance {len(self.nodes)} edge node(s), "
                f"{len(self._units.rows)} unit(s), from {self.source}>")

    def source_ops(self) -> pd.DataFrame:
        """One row per edge node: :data:`~toolkit.provenance.SOURCE_COLUMNS` (``source_id``
        = ``op_index`` = the node's position, ``operator`` its op, ``name`` its name;
        ``macs``/``output_bytes`` 0: the ETRecord has none)."""
        k = len(self.nodes)
        df = pd.DataFrame({c: np.zeros(k, dtype=_I64) for c in SOURCE_COLUMNS})
        df["source_id"] = df["op_index"] = np.arange(k, dtype=_I64)
        df["operator"] = pd.Series([n.op for n in self.nodes], dtype=_STR)
        df["name"] = pd.Series([n.name for n in self.nodes], dtype=_STR)
        return df[SOURCE_COLUMNS]

    def layers(self) -> pd.DataFrame:
        """One row per edge node: ``source_id`` (int64), ``layer`` (its module path;
        :data:`~toolkit.layer_names.NO_LAYER` for a node of the root module, as in every
        join)."""
        return pd.DataFrame({"source_id": np.arange(len(self.node_layers), dtype=_I64),
                             "layer": pd.Series([layer_row(x) for x in self.node_layers],
                                                dtype=_STR)})

    def optimised_ops(self) -> pd.DataFrame:
        """One row per unit: :data:`~toolkit.provenance.OPTIMISED_COLUMNS` (``operator``: the
        instruction's operator or the XNNPACK node kind; ``backend``: ``portable``, the
        delegate's id)."""
        rows = self._units.rows
        df = pd.DataFrame({c: np.zeros(len(rows), dtype=_I64) for c in OPTIMISED_COLUMNS})
        df["optimised_id"] = np.array([r[0] for r in rows], dtype=_I64)
        for c, k in (("operator", 1), ("name", 2), ("backend", 3)):
            df[c] = pd.Series([r[k] for r in rows], dtype=_STR)
        return df[OPTIMISED_COLUMNS]

    def origins(self) -> pd.DataFrame:
        """One row per (unit, edge node): ``optimised_id``, ``source_id`` (int64)."""
        pairs = sorted({(row[0], node) for row, nodes in zip(self._units.rows,
                                                              self._units.nodes)
                        for node in nodes})
        return pd.DataFrame(pairs, columns=["optimised_id", "source_id"]).astype(_I64)

    def commands(self) -> pd.DataFrame:
        """No command queue: an empty frame of :data:`~toolkit.provenance.COMMAND_COLUMNS`."""
        return pd.DataFrame({c: np.zeros(0, dtype=_I64) for c in COMMAND_COLUMNS})

    def debug_handles(self) -> pd.DataFrame:
        """One row per edge node with a debug handle (delegate calls left out): ``handle``,
        ``optimised_id`` (-1), ``source_id``."""
        rows = [(n.handle, i) for i, n in enumerate(self.nodes)
                if n.handle is not None and n.backend is None]
        return pd.DataFrame({"handle": pd.Series([h for h, _ in rows], dtype=object),
                             "optimised_id": np.full(len(rows), -1, dtype=_I64),
                             "source_id": np.array([i for _, i in rows], dtype=_I64)})

    def removed(self) -> pd.DataFrame:
        """None removed: an empty ``source_id``, ``reason`` frame."""
        return pd.DataFrame({"source_id": np.zeros(0, dtype=_I64),
                             "reason": pd.Series([], dtype=_STR)})


def etdump_trace(profile: ExecutorchProfile) -> Trace:
    """The profile's ``Execute`` events as a :class:`Trace` with their nesting, not keyed
    (see the module docstring): the columns of
    :func:`~toolkit.trace.readers.executorch.profile.etdump_events` (``parent`` as ``parent_id``),
    ``key`` None and ``key_kind`` ``""``. ``meta``: ``source``, ``format`` (``etdump``),
    ``run_from``, ``load_events`` (``event_id``, ``name``, ``dur_ns``), ``etdump`` (the
    decoded file, so that a join with the ETRecord can key the events)."""
    ev = profile.events
    execute = (ev["phase"] == "execute").to_numpy()
    load = ev.loc[~execute, ["event_id", "name", "dur_ns"]].reset_index(drop=True)
    load["name"] = pd.Series(load["name"].astype(object).to_numpy(), dtype=_STR)
    events = ev.loc[execute].reset_index(drop=True).rename(columns={"parent": "parent_id"})
    events["key"] = pd.Series([None] * len(events), dtype=object)
    events["key_kind"] = pd.Categorical.from_codes(
        np.zeros(len(events), dtype=_I64), categories=pd.Index(["", *KEY_KINDS], dtype=_STR))
    return Trace(events, {"source": str(profile.dump.source), "format": "etdump",
                          "run_from": "ordinal of the Execute block",
                          "load_events": load, "etdump": profile.dump})


def _base_op(name: str) -> str:
    """``aten::addmm`` and ``aten.addmm.default`` -> ``aten.addmm``."""
    if "::" in name:
        return name.replace("::", ".")
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else name


def _body_kernels(plan: Any, nodes: list[EdgeNode], handle_map: dict[int, list[int]]
                  ) -> dict[int, int]:
    """Kernel calls without a debug handle matched to control-flow body nodes.

    A loop or branch body's nodes (graph ``<node>/<subgraph>``, not a delegate's) have
    handles the debug-handle map does not list for the instructions emitted from them. Walking
    those instructions and the body nodes in order, a kernel call is matched to the next body
    node of the same operator (``aten::addmm`` <-> ``aten.addmm.default``); instructions of
    the runtime's loop machinery match no node and stay unattributed.

    Returns:
        ``{instruction id: node index}``.
    """
    delegates = {o.name for o in nodes if o.graph == "" and o.backend is not None}
    body = [i for i, nd in enumerate(nodes)
            if nd.graph and nd.backend is None and nd.graph.split("/", 1)[0] not in delegates]
    if not body or not plan.chains:
        return {}
    out: dict[int, int] = {}
    j = 0
    for value, ins in enumerate(plan.chains[0]):
        if ins.kind != "KernelCall" or ins.op_index is None or handle_map.get(value):
            continue
        want = _base_op(plan.operators[ins.op_index][0])
        k = j
        while k < len(body) and _base_op(nodes[body[k]].op) != want:
            k += 1
        if k < len(body):
            out[value] = body[k]
            j = k + 1
    return out


def _instruction_text(plan: Any, value: int) -> tuple[str, str]:
    """(operator, backend) of an instruction of the program (``""``, ``portable`` when the
    program is not given)."""
    if plan is None or not plan.chains or not 0 <= value < len(plan.chains[0]):
        return "", "portable"
    ins = plan.chains[0][value]
    if ins.op_index is not None:
        return str(plan.operators[ins.op_index][0]), "portable"
    if ins.kind == "DelegateCall" and ins.delegate_index is not None:
        return "DelegateCall", str(plan.delegates[ins.delegate_index].id)
    return str(ins.kind), "portable"


def _delegate_graph(nodes: list[EdgeNode], instruction: int, record: ETRecord,
                    method: str) -> str:
    """The graph prefix of the delegated graph whose nodes carry the instruction's handles."""
    handles = set(record.debug_handle_map.get(method, {}).get(instruction, []))
    for node in nodes:
        if node.graph and node.handle in handles:
            return node.graph
    return "\0"


class _Keyer:
    """Per-event unit, problem and XNNPACK node of a profile (see the module docstring)."""

    def __init__(self, profile: ExecutorchProfile, events: pd.DataFrame) -> None:
        self.profile = profile
        self.ev = events
        n = len(events)
        self.unit = np.full(n, -1, dtype=_I64)
        self.problem = np.full(n, "", dtype=object)
        self.xnode = np.full(n, -1, dtype=_I64)
        self.wrapper = np.zeros(n, dtype=bool)
        self.units = _Units()
        self.skipped: list[dict[str, Any]] = []
        record = profile.record
        method = profile.method
        self.nodes, self.layers, _ = edge_layers(record, method) if record else ([], [], [])
        self.nodes_of: dict[int, list[int]] = {}
        for i, node in enumerate(self.nodes):
            if node.handle is not None and node.backend is None:
                self.nodes_of.setdefault(node.handle, []).append(i)
        self.handle_map = record.debug_handle_map.get(method, {}) if record else {}
        self.delegate_map = record.delegate_map.get(method, {}) if record else {}
        self.plan = profile.program.plans.get(method) if profile.program else None
        self.xnodes_of: dict[int, list[Any]] = {}
        self.owner_of: dict[int, tuple[dict[int, int], dict[int, str]]] = {}
        self.seen_skips: set[tuple[int, int]] = set()

    def instruction_unit(self, value: int, nodes: list[int]) -> int:
        operator, backend = _instruction_text(self.plan, value)
        return self.units.add(("instr", value), nodes, operator, f"instruction {value}",
                              backend, unit_id=value)

    def key(self) -> None:
        ev = self.ev
        n = len(ev)
        record = self.profile.record
        role = ev["role"].cat.codes.to_numpy()
        instr = ev["instruction_id"].fillna(-1).to_numpy(dtype=_I64)
        name_codes = ev["name"].cat.codes.to_numpy()
        name_cats = list(ev["name"].cat.categories)
        parent = ev["parent_id"].to_numpy(dtype=_I64)
        timed = (ev["problem"] != "not a profile event (no time)").to_numpy()
        self.wrapper = (role == _ROLE_ROOT) & timed
        if record is None:
            self.problem[timed & ~self.wrapper] = NO_ETRECORD
            return
        is_dcall = np.zeros(n, dtype=bool)
        if "DELEGATE_CALL" in name_cats:
            is_dcall = name_codes == name_cats.index("DELEGATE_CALL")
        dop = np.flatnonzero(timed & (role == _ROLE_DOP))
        has_ops = np.zeros(n, dtype=bool)
        if len(dop):
            has_ops[parent[dop][parent[dop] >= 0]] = True  # parent ids are row numbers here
        body = (_body_kernels(self.plan, self.nodes, self.handle_map)
                if self.plan is not None else {})
        spans = timed & ((role == _ROLE_SPAN) | (role == _ROLE_KERNEL))
        for value in np.unique(instr[spans]).tolist():
            at = spans & (instr == value)
            handles = self.handle_map.get(value)
            if not handles and value in body:
                node = body[value]
                self.unit[at] = self.units.add(
                    ("body", value), [node], self.nodes[node].op, f"instruction {value}",
                    "portable", unit_id=value)
                continue
            if not handles:
                operator, _ = _instruction_text(self.plan, value)
                kind = f" ({operator})" if operator else ""
                self.problem[at] = (f"instruction {value}{kind} has no debug handle in the "
                                    "ETRecord (control flow or an op inserted after export)")
                continue
            members = _members(handles, self.nodes_of)
            if not members:
                self.problem[at] = (f"instruction {value}: no edge node has its handles "
                                    f"{sorted(set(handles))}")
                continue
            uid = self.instruction_unit(value, members)
            delegated = value in self.delegate_map
            wraps = at & is_dcall & has_ops & delegated & (self.plan is not None)
            self.unit[at & ~wraps] = uid
            self.wrapper |= wraps
        if len(dop):
            if self.plan is None:  # no program: the delegate's nodes, through its call
                ok = parent[dop] >= 0
                self.unit[dop[ok]] = self.unit[parent[dop[ok]]]
                self.problem[dop[~ok]] = "a delegate event outside any delegate call"
                unkeyed = dop[ok][self.unit[dop[ok]] < 0]
                self.problem[unkeyed] = np.where(self.problem[parent[unkeyed]] != "",
                                                 self.problem[parent[unkeyed]],
                                                 "its delegate call names no edge node")
            else:
                self.delegate_ops(dop, parent, instr)
        left = timed & (self.unit < 0) & ~self.wrapper & (self.problem == "")
        self.problem[left] = "an event of no known kind (no name, or outside any instruction)"

    def delegate_ops(self, dop: np.ndarray, parent: np.ndarray, instr: np.ndarray) -> None:
        """Units of the delegate per-op events ``dop``, one delegate call at a time; the
        result for a call is cached by (instruction, sequence of event names)."""
        ev = self.ev
        dstr = ev["delegate_debug_id_str"]
        codes = dstr.cat.codes.to_numpy()
        texts = [str(c) for c in dstr.cat.categories]
        did_present = ev["delegate_debug_id_int"].notna().to_numpy()
        did_value = ev["delegate_debug_id_int"].fillna(-1).to_numpy(dtype=_I64)
        cache: dict[tuple[int, bytes, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        order = np.lexsort((dop, parent[dop]))
        dop = dop[order]
        par = parent[dop]
        bounds = np.flatnonzero(np.r_[True, par[1:] != par[:-1], True])
        for g0, g1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            rows = dop[g0:g1]
            value = int(instr[rows[0]])
            key = (value, codes[rows].tobytes(), did_value[rows].tobytes())
            hit = cache.get(key)
            if hit is None:
                hit = self.delegate_call(value, int(par[g0]), codes[rows], did_present[rows],
                                         did_value[rows], texts)
                cache[key] = hit
            self.unit[rows], self.problem[rows], self.xnode[rows] = hit

    def delegate_call(self, value: int, parent: int, codes: np.ndarray,
                      did_present: np.ndarray, did_value: np.ndarray, texts: list[str]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(unit, problem, XNNPACK node) of the per-op events of one delegate call."""
        k = codes.size
        unit = np.full(k, -1, dtype=_I64)
        why = np.full(k, "", dtype=object)
        xn = np.full(k, -1, dtype=_I64)
        plan = self.plan
        assert plan is not None and self.profile.record is not None
        record, method = self.profile.record, self.profile.method
        chain = plan.chains[0] if plan.chains else []
        ins = chain[value] if 0 <= value < len(chain) else None
        if parent < 0 or ins is None or ins.kind != "DelegateCall" or \
                ins.delegate_index is None:
            why[:] = (f"delegate event of instruction {value}, which is not a delegate call "
                      "in the program")
            return unit, why, xn
        delegate = plan.delegates[ins.delegate_index]
        if did_present.any():  # integer ids: the delegate map names the handles
            inner = (self.delegate_map.get(value) or {}).get("delegate_map") or {}
            for r in range(k):
                ident = str(int(did_value[r])) if did_present[r] else None
                handles = inner.get(ident) if ident is not None else None
                if handles is None:
                    why[r] = f"delegate id {ident} is not in the delegate map"
                    continue
                hs = handles if isinstance(handles, list) else [handles]
                members = _members(hs, self.nodes_of)
                if not members:
                    why[r] = f"delegate id {ident}: no edge node has its handles {hs}"
                    continue
                unit[r] = self.units.add(("did", value, ident), members, str(delegate.id),
                                         f"instruction {value} delegate id {ident}",
                                         str(delegate.id))
            return unit, why, xn
        if value not in self.xnodes_of:
            self.xnodes_of[value] = (
                read_xnnpack_blob(delegate.data, f"delegate {ins.delegate_index}")
                if delegate.id == "XnnpackBackend" else [])
            handles = set(self.handle_map.get(value, []))
            prefix = _delegate_graph(self.nodes, value, record, method)
            graph = [nd for nd in self.nodes if nd.graph.startswith(prefix)]
            self.owner_of[value] = fused_handles(
                handles, {x.debug_handle for x in self.xnodes_of[value]}, graph)
            for h, text in self.owner_of[value][1].items():
                self.skipped.append({"instruction_id": value, "xnode": -1, "handle": h,
                                     "reason": text})
        xnodes = self.xnodes_of[value]
        if not xnodes:
            why[:] = f"delegate {delegate.id} has no node list this reader knows"
            return unit, why, xn
        al = align([texts[c] if c >= 0 else "" for c in codes.tolist()], xnodes)
        owner, _ = self.owner_of[value]
        for s, text in al.skipped:
            if (value, s) not in self.seen_skips:
                self.seen_skips.add((value, s))
                self.skipped.append({"instruction_id": value, "xnode": s,
                                     "handle": xnodes[s].debug_handle, "reason": text})
        for r, (node_k, text) in enumerate(zip(al.node_of, al.reason_of)):
            xn[r] = node_k
            if node_k < 0:
                why[r] = text
                continue
            x = xnodes[node_k]
            h = x.debug_handle
            if h == INSERTED_HANDLE:
                why[r] = (f"made by the delegate at runtime: XNNPACK node {node_k} ({x.kind}) "
                          f"has handle {INSERTED_HANDLE}, no edge node")
                continue
            hs = [h, *sorted(f for f, o in owner.items() if o == h)]
            members = _members(hs, self.nodes_of)
            if not members:
                why[r] = f"XNNPACK node {node_k} has handle {h}, which no edge node carries"
                continue
            unit[r] = self.units.add(("xnode", value, node_k), members, str(x.kind),
                                     f"instruction {value} XNNPACK node {node_k}",
                                     str(delegate.id))
        return unit, why, xn


def executorch_inputs(profile: ExecutorchProfile, trace: Trace | None = None
                      ) -> tuple[Trace, ExecutorchProvenance]:
    """The keyed trace and the provenance of a profile, for the one join (see the module
    docstring).

    Returns:
        ``(trace, provenance)``: the trace of :func:`etdump_trace` with ``key`` (the unit,
        ``int``; None for wrappers and events that cannot be joined), ``key_kind``
        (``op_index`` or ``""``), ``problem`` (the reason an event cannot be joined) and
        ``xnode`` (``int64``: the XNNPACK node of a delegate per-op event, -1 otherwise).
    """
    base = trace if trace is not None else etdump_trace(profile)
    events = base.events.copy()
    # parent ids are event ids, and event ids are row numbers of the profile's events:
    # map them to rows of this trace for the keyer, back to ids after
    ids = events["event_id"].to_numpy(dtype=_I64)
    row_of = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=_I64)
    row_of[ids] = np.arange(len(ids))
    pid = events["parent_id"].to_numpy(dtype=_I64)
    inside = (pid >= 0) & (pid < len(row_of))
    parent_row = np.where(inside, row_of[np.clip(pid, 0, max(len(row_of) - 1, 0))], -1)
    keyer = _Keyer(profile, events.assign(parent_id=parent_row))
    keyer.key()
    unit = keyer.unit
    kinds = pd.Index(["", *KEY_KINDS], dtype=_STR)
    keyed = unit >= 0
    key = np.full(len(unit), None, dtype=object)
    key[keyed] = unit[keyed].tolist()
    events["key"] = pd.Series(key, dtype=object)
    events["key_kind"] = pd.Categorical.from_codes(
        np.where(keyed, kinds.get_loc("op_index"), 0).astype(_I64), categories=kinds)
    given = events["problem"].array
    old = np.asarray([str(c) for c in given.categories] + [""], dtype=object)[
        np.asarray(given.codes, dtype=np.int64)]
    problem = np.where(old != "", old, keyer.problem)
    codes, texts = pd.factorize(problem)
    events["problem"] = pd.Categorical.from_codes(
        np.asarray(codes, dtype=np.int64),
        categories=pd.Index([str(t) for t in texts], dtype=_STR))
    events["xnode"] = keyer.xnode
    prov = ExecutorchProvenance(keyer.nodes, keyer.layers, keyer.units, keyer.skipped,
                                str(profile.dump.source))
    int_keys = np.where(keyed, unit, 0).astype(_I64)
    keyed_trace = Trace(events, dict(base.meta), int_keys, None)
    return keyed_trace, prov
