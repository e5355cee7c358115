"""Attribute every tick of an ExecuTorch profile to nn.Module layers or to a named bucket.

Each event of an ``Execute`` block gives its *exclusive* time (duration minus its children's):

- a ``native_call_*`` kernel -> the edge nodes of its instruction's debug handles (``kernel``);
  a kernel call of a control-flow body has none: with the program it is matched in order to
  the body graph's node of the same operator (:func:`_body_kernels`);
- an ``OPERATOR_CALL`` (or another instruction span) -> the same nodes (``dispatch``);
- an XNNPACK per-op event (with the program) -> the nodes of its XNNPACK node's handle and of
  the handles fused into it (``delegate``); handle 65535 -> ``<delegate-inserted>``;
- ``DELEGATE_CALL`` minus its per-op events -> ``<delegate not covered by op events>``;
  without the program, the whole ``DELEGATE_CALL`` is split over the delegate's handles
  (``delegate``) and its per-op events are listed as unmapped (they are inside it);
- ``Method::execute`` minus its instructions -> ``<runtime between instructions>``;
- anything that cannot be joined -> ``<unattributed>``, every event listed with its reason.

The buckets sum to the sum of ``Method::execute`` durations of every run, to the tick
(:meth:`ExecutorchAttribution.check`). Load-time events are reported apart
(:meth:`~ExecutorchAttribution.load_time`) and counted in none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.formats.etrecord import EdgeNode, ETRecord
from toolkit.formats.executorch_program import read_xnnpack_blob
from toolkit.layer_names import module_stack_layer
from toolkit.trace.et_xnnpack import INSERTED_HANDLE, align, fused_handles
from toolkit.trace.stats import STAT_COLUMNS, matrix_per_run, matrix_stats_frame
from toolkit.trace.views import LayerAttribution

if TYPE_CHECKING:
    from toolkit.trace.executorch import ExecutorchProfile

__all__ = ["ExecutorchAttribution", "attribute", "node_table", "BUCKETS", "COMPONENTS"]

_STR = pd.Series([""]).dtype
#: Rows of :meth:`ExecutorchAttribution.by_layer` that are not layers.
BUCKETS: tuple[str, ...] = ("<runtime between instructions>",
                            "<delegate not covered by op events>", "<delegate-inserted>",
                            "<unattributed>")
#: How a layer's time was spent.
COMPONENTS: tuple[str, ...] = ("kernel", "dispatch", "delegate")
_RUNTIME, _DELEGATE_OVERHEAD, _INSERTED, _UNATTRIBUTED = range(4)
_POLICIES = ("equal", "nodes")


def _usable(node: EdgeNode) -> bool:
    return node.target != "_operator.getitem"


def _layers(record: ETRecord, method: str) -> tuple[list[EdgeNode], list[str], list[str]]:
    """Nodes, their layer and where the layer came from."""
    nodes = [n for n in record.nodes.get(method, []) if _usable(n)]
    by_name = {("", n.name): n for n in nodes if n.graph == ""}
    layers: list[str] = []
    sources: list[str] = []
    for n in nodes:
        layer = module_stack_layer(n.module_stack)
        if layer is not None:
            layers.append(layer)
            sources.append("nn_module_stack")
            continue
        owner = by_name.get(("", n.graph.split("/", 1)[0])) if n.graph else None
        owner_layer = module_stack_layer(owner.module_stack) if owner is not None else None
        if owner is not None and owner_layer is not None:
            layers.append(owner_layer)
            sources.append(f"enclosing node {owner.name}")
        else:
            layers.append("")
            sources.append("root module (no nn_module_stack)")
    return nodes, layers, sources


def node_table(record: ETRecord, method: str) -> pd.DataFrame:
    """See :meth:`toolkit.trace.executorch.ExecutorchProfile.nodes`."""
    nodes, layers, sources = _layers(record, method)
    handles = pd.array([n.handle for n in nodes], dtype="Int64")
    return pd.DataFrame({
        "node": np.arange(len(nodes), dtype=np.int64),
        "graph": pd.Series([n.graph for n in nodes], dtype=_STR),
        "name": pd.Series([n.name for n in nodes], dtype=_STR),
        "handle": handles,
        "op": pd.Series([n.op for n in nodes], dtype=_STR),
        "module_path": pd.Series([n.module_path for n in nodes], dtype=object),
        "module_type": pd.Series([n.module_type for n in nodes], dtype=object),
        "layer": pd.Series(layers, dtype=_STR),
        "layer_source": pd.Series(sources, dtype=_STR),
        "stack_trace": pd.Series([n.stack_trace for n in nodes], dtype=object),
        "torch_node": pd.Series([n.torch_node for n in nodes], dtype=object),
        "backend": pd.Series([n.backend for n in nodes], dtype=object),
    })


class _Targets:
    """Things time goes to: a node set with weights (one entry per node), or a bucket."""

    def __init__(self, n_nodes: int) -> None:
        self.n_nodes = n_nodes
        self.members: list[list[tuple[int, int]]] = []  # (row, weight)
        self.index: dict[Any, int] = {}

    def add(self, key: Any, members: list[tuple[int, int]]) -> int:
        if key not in self.index:
            self.index[key] = len(self.members)
            self.members.append(members)
        return self.index[key]

    def bucket(self, b: int) -> int:
        return self.add(("bucket", b), [(3 * self.n_nodes + b, 1)])


def _weights(handles: list[int], nodes_of: dict[int, list[int]], policy: str,
             component: int, n_nodes: int) -> list[tuple[int, int]]:
    """(row, weight) per node of ``handles``; row = component * n_nodes + node."""
    uniq = list(dict.fromkeys(handles))
    out: dict[int, int] = {}
    if policy == "nodes":
        for h in uniq:
            for node in nodes_of.get(h, []):
                out[node] = 1
    else:
        counts = [len(nodes_of.get(h, [])) for h in uniq]
        lcm = int(np.lcm.reduce([c for c in counts if c] or [1]))
        for h, c in zip(uniq, counts):
            for node in nodes_of.get(h, []):
                out[node] = out.get(node, 0) + lcm // c
    return [(component * n_nodes + node, w) for node, w in out.items()]


def _split(total: np.ndarray, members: list[tuple[int, int]], matrix: np.ndarray) -> None:
    """Add ``total`` (ns per run) over ``members`` into ``matrix`` rows, exactly."""
    weights = np.array([w for _, w in members], dtype=np.int64)
    w_sum = int(weights.sum())
    shares = (total[None, :] * weights[:, None]) // w_sum
    left = total - shares.sum(axis=0)
    # the remainder goes one tick at a time to the first members (stable, exact)
    for k in range(len(members)):
        give = np.minimum(left, 1) * (left > 0)
        shares[k] += give
        left = left - give
        if not left.any():
            break
    shares[0] += left  # left is zero unless a remainder exceeded the member count
    for (row, _), s in zip(members, shares):
        matrix[row] += s


def attribute(profile: ExecutorchProfile, policy: str = "equal") -> ExecutorchAttribution:
    """Build the :class:`ExecutorchAttribution` of a profile (see the module docstring)."""
    if policy not in _POLICIES:
        raise ToolkitError(f"unknown policy {policy!r}", fix=f"use one of {_POLICIES}")
    ev = profile.events
    record = profile.record
    method = profile.method
    nodes, layers, _ = _layers(record, method) if record else ([], [], [])
    n_nodes = len(nodes)
    nodes_of: dict[int, list[int]] = {}
    node_ids: dict[int, int] = {}
    for i, node in enumerate(nodes):
        node_ids[id(node)] = i
        if node.handle is not None and node.backend is None:
            nodes_of.setdefault(node.handle, []).append(i)
    handle_map = record.debug_handle_map.get(method, {}) if record else {}
    delegate_map = record.delegate_map.get(method, {}) if record else {}
    targets = _Targets(n_nodes)
    reasons: list[str] = []
    reason_index: dict[str, int] = {}

    def reason_code(text: str) -> int:
        if text not in reason_index:
            reason_index[text] = len(reasons)
            reasons.append(text)
        return reason_index[text]

    n = len(ev)
    role = ev["role"].cat.codes.to_numpy()
    run = ev["run"].to_numpy()
    instr = ev["instruction_id"].fillna(-1).to_numpy(dtype=np.int64)
    dur = ev["dur_ns"].to_numpy()
    excl = ev["exclusive_ns"].to_numpy().copy()
    parent = ev["parent"].to_numpy()
    names = ev["name"].astype(object).to_numpy() if n < 0 else None
    name_codes = ev["name"].cat.codes.to_numpy()
    name_cats = list(ev["name"].cat.categories)
    execute = (ev["phase"] == "execute").to_numpy() & (ev["problem"] != "not a profile event "
                                                        "(no time)").to_numpy()
    target = np.full(n, -1, dtype=np.int64)
    reason = np.full(n, -1, dtype=np.int64)
    mapped_to = np.full(n, -1, dtype=np.int64)  # xnode index for delegate ops
    del names

    # ---- instruction-level targets (kernels, spans)
    is_dcall = np.zeros(n, dtype=bool)
    if "DELEGATE_CALL" in name_cats:
        is_dcall = name_codes == name_cats.index("DELEGATE_CALL")
    plan = profile.program.plans.get(method) if profile.program else None
    xnodes_of: dict[int, list[Any]] = {}
    owner_of: dict[int, tuple[dict[int, int], dict[int, str]]] = {}
    skipped: list[dict[str, Any]] = []
    body = _body_kernels(plan, nodes, handle_map) if plan is not None and record else {}
    for value in np.unique(instr[execute & ((role == 3) | (role == 4))]).tolist():
        handles = handle_map.get(value)
        at = execute & (instr == value) & ((role == 3) | (role == 4))
        if record is None:
            code = reason_code("no ETRecord given (events cannot be joined to layers)")
            reason[at] = code
            target[at] = targets.bucket(_UNATTRIBUTED)
            continue
        if not handles and value in body:
            body_node = body[value]
            for comp, mask in ((0, at & (role == 4)), (1, at & (role == 3))):
                if mask.any():
                    target[mask] = targets.add(("body", value, comp),
                                               [(comp * n_nodes + body_node, 1)])
            continue
        if not handles:
            kind = ""
            if plan is not None and plan.chains and 0 <= value < len(plan.chains[0]):
                ins = plan.chains[0][value]
                kind = (f" ({plan.operators[ins.op_index][0]})" if ins.op_index is not None
                        else f" ({ins.kind})")
            code = reason_code(f"instruction {value}{kind} has no debug handle in the ETRecord "
                               "(control flow or an op inserted after export)")
            reason[at] = code
            target[at] = targets.bucket(_UNATTRIBUTED)
            continue
        delegated = value in delegate_map
        for comp, mask in ((0, at & (role == 4)), (1, at & (role == 3) & ~is_dcall),
                           (2, at & is_dcall)):
            if not mask.any():
                continue
            if comp == 2 and plan is not None and delegated:
                target[mask] = targets.bucket(_DELEGATE_OVERHEAD)
                continue
            if comp == 2:  # no program: split the whole delegate call over its handles
                excl[mask] = dur[mask]
            members = _weights(handles, nodes_of, policy, comp, n_nodes)
            if not members:
                reason[mask] = reason_code(f"instruction {value}: no edge node has its handles "
                                           f"{sorted(set(handles))}")
                target[mask] = targets.bucket(_UNATTRIBUTED)
                continue
            target[mask] = targets.add(("instr", value, comp), members)

    # ---- delegate per-op events
    dop = np.flatnonzero(execute & (role == 5))
    if dop.size:
        if plan is None or record is None:
            code = reason_code("unmapped (needs the program): the delegate's time is split "
                               "over its handles on the DELEGATE_CALL"
                               if record is not None else
                               "no ETRecord given (events cannot be joined to layers)")
            reason[dop] = code
            excl[dop] = 0
            target[dop] = targets.bucket(_UNATTRIBUTED) if record is None else -2
        else:
            _map_delegate_ops(profile, dop, parent, instr, plan, record, method, nodes,
                              node_ids, nodes_of, policy, targets, target, reason, reason_code,
                              mapped_to, xnodes_of, owner_of, skipped)

    # ---- roots and anything left
    root = execute & (role == 1)
    target[root] = targets.bucket(_RUNTIME)
    left = execute & (target == -1)
    if left.any():
        target[left] = targets.bucket(_UNATTRIBUTED)
        reason[left & (reason < 0)] = reason_code("an event of no known kind (no name, or "
                                                  "outside any instruction)")
    if (root.sum() == 0) and execute.any():
        pass

    counted = execute & (target >= 0)
    runs = int(run.max() + 1) if n and execute.any() else 0
    n_rows = 3 * n_nodes + len(BUCKETS)
    matrix = np.zeros((n_rows, runs), dtype=np.int64)
    events_per_row = np.zeros(n_rows, dtype=np.int64)
    n_targets = len(targets.members)
    if counted.any() and runs:
        cell = target[counted] * runs + run[counted]
        flat = np.zeros(n_targets * runs, dtype=np.int64)
        np.add.at(flat, cell, excl[counted])
        sums = flat.reshape(n_targets, runs)
        hits = np.bincount(target[counted], minlength=n_targets)
        for t, members in enumerate(targets.members):
            if not members:
                continue
            _split(sums[t], members, matrix)
            for row, _ in members:
                events_per_row[row] += hits[t]
    top = execute & (parent < 0)
    total_per_run = np.zeros(runs, dtype=np.int64)
    if runs:
        np.add.at(total_per_run, run[top], dur[top])
    return ExecutorchAttribution(profile, policy, nodes, layers, matrix, events_per_row,
                                 total_per_run, target, reason, reasons, excl, mapped_to,
                                 skipped, targets.members)


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


def _map_delegate_ops(profile: ExecutorchProfile, dop: np.ndarray, parent: np.ndarray,
                      instr: np.ndarray, plan: Any, record: ETRecord, method: str,
                      nodes: list[EdgeNode], node_ids: dict[int, int],
                      nodes_of: dict[int, list[int]], policy: str, targets: _Targets,
                      target: np.ndarray, reason: np.ndarray, reason_code: Any,
                      mapped_to: np.ndarray, xnodes_of: dict[int, list[Any]],
                      owner_of: dict[int, tuple[dict[int, int], dict[int, str]]],
                      skipped: list[dict[str, Any]]) -> None:
    """Targets of the delegate per-op events ``dop``, one delegate call at a time; the
    result for a call is cached by (instruction, sequence of event names)."""
    ev = profile.events
    dstr = ev["delegate_debug_id_str"]
    codes = dstr.cat.codes.to_numpy()
    texts = list(dstr.cat.categories)
    did_present = ev["delegate_debug_id_int"].notna().to_numpy()
    did_value = ev["delegate_debug_id_int"].fillna(-1).to_numpy(dtype=np.int64)
    n_nodes = len(nodes)
    handle_map = record.debug_handle_map.get(method, {})
    delegate_map = record.delegate_map.get(method, {})
    cache: dict[tuple[int, bytes, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    seen_skips: set[tuple[int, int]] = set()
    chain = plan.chains[0] if plan.chains else []
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
            hit = _delegate_call_targets(
                value, int(par[g0]), codes[rows], did_present[rows], did_value[rows], texts,
                chain, plan, profile, record, method, nodes, nodes_of, policy, targets,
                reason_code, handle_map, delegate_map, n_nodes, xnodes_of, owner_of, skipped,
                seen_skips)
            cache[key] = hit
        target[rows], reason[rows], mapped_to[rows] = hit


def _delegate_call_targets(value: int, parent: int, codes: np.ndarray, did_present: np.ndarray,
                           did_value: np.ndarray, texts: list[str], chain: list[Any],
                           plan: Any, profile: ExecutorchProfile, record: ETRecord,
                           method: str, nodes: list[EdgeNode], nodes_of: dict[int, list[int]],
                           policy: str, targets: _Targets, reason_code: Any,
                           handle_map: dict[int, list[int]],
                           delegate_map: dict[int, dict[str, Any]], n_nodes: int,
                           xnodes_of: dict[int, list[Any]],
                           owner_of: dict[int, tuple[dict[int, int], dict[int, str]]],
                           skipped: list[dict[str, Any]], seen_skips: set[tuple[int, int]]
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(target, reason code, xnode) for the per-op events of one delegate call."""
    k = codes.size
    tgt = np.full(k, -1, dtype=np.int64)
    why = np.full(k, -1, dtype=np.int64)
    xn = np.full(k, -1, dtype=np.int64)
    ins = chain[value] if 0 <= value < len(chain) else None
    if parent < 0 or ins is None or ins.kind != "DelegateCall":
        why[:] = reason_code(f"delegate event of instruction {value}, which is not a "
                             "delegate call in the program")
        tgt[:] = targets.bucket(_UNATTRIBUTED)
        return tgt, why, xn
    delegate = plan.delegates[ins.delegate_index]
    if did_present.any():  # integer ids: the delegate map names the handles
        inner = (delegate_map.get(value) or {}).get("delegate_map") or {}
        for r in range(k):
            ident = str(int(did_value[r])) if did_present[r] else None
            handles = inner.get(ident) if ident is not None else None
            if handles is None:
                why[r] = reason_code(f"delegate id {ident} is not in the delegate map")
                tgt[r] = targets.bucket(_UNATTRIBUTED)
                continue
            hs = handles if isinstance(handles, list) else [handles]
            members = _weights(hs, nodes_of, policy, 2, n_nodes)
            tgt[r] = (targets.add(("did", value, ident), members) if members
                      else targets.bucket(_UNATTRIBUTED))
        return tgt, why, xn
    if value not in xnodes_of:
        xnodes_of[value] = (read_xnnpack_blob(delegate.data, f"delegate {ins.delegate_index}")
                            if delegate.id == "XnnpackBackend" else [])
        handles = set(handle_map.get(value, []))
        prefix = _delegate_graph(nodes, value, record, method)
        graph = [nd for nd in nodes if nd.graph.startswith(prefix)]
        owner_of[value] = fused_handles(handles, {x.debug_handle for x in xnodes_of[value]},
                                        graph)
        for h, text in owner_of[value][1].items():
            skipped.append({"instruction_id": value, "xnode": -1, "handle": h,
                            "reason": text})
    xnodes = xnodes_of[value]
    if not xnodes:
        why[:] = reason_code(f"delegate {delegate.id} has no node list this reader knows")
        tgt[:] = targets.bucket(_UNATTRIBUTED)
        return tgt, why, xn
    al = align([texts[c] if c >= 0 else "" for c in codes.tolist()], xnodes)
    owner, _ = owner_of[value]
    for s, text in al.skipped:
        if (value, s) not in seen_skips:
            seen_skips.add((value, s))
            skipped.append({"instruction_id": value, "xnode": s,
                            "handle": xnodes[s].debug_handle, "reason": text})
    for r, (node_k, text) in enumerate(zip(al.node_of, al.reason_of)):
        xn[r] = node_k
        if node_k < 0:
            why[r] = reason_code(text)
            tgt[r] = targets.bucket(_UNATTRIBUTED)
            continue
        h = xnodes[node_k].debug_handle
        if h == INSERTED_HANDLE:
            tgt[r] = targets.bucket(_INSERTED)
            continue
        hs = [h, *sorted(f for f, o in owner.items() if o == h)]
        members = _weights(hs, nodes_of, policy, 2, n_nodes)
        if not members:
            why[r] = reason_code(f"XNNPACK node {node_k} has handle {h}, which no edge node "
                                 "carries")
            tgt[r] = targets.bucket(_UNATTRIBUTED)
            continue
        tgt[r] = targets.add(("xnode", value, node_k), members)
    return tgt, why, xn


def _delegate_graph(nodes: list[EdgeNode], instruction: int, record: ETRecord,
                    method: str) -> str:
    """The graph prefix of the delegated graph whose nodes carry the instruction's handles."""
    handles = set(record.debug_handle_map.get(method, {}).get(instruction, []))
    for node in nodes:
        if node.graph and node.handle in handles:
            return node.graph
    return "\0"


class ExecutorchAttribution(LayerAttribution):
    """Every tick of an ExecuTorch profile, by layer, by edge node, or by bucket.

    Attributes:
        policy: the split policy. ``total_ns``: sum of ``Method::execute`` (top-level spans)
        over all runs. ``runs``: number of runs. ``attributed_ns``: time given to layers.
        ``unattributed_ns``: time in the ``<unattributed>`` bucket. ``overhead_ns``: time in
        the other buckets (runtime between instructions, delegate time not covered by op
        events, delegate-inserted ops); the three sum to ``total_ns``.
    """

    def __init__(self, profile: ExecutorchProfile, policy: str, nodes: list[EdgeNode],
                 layers: list[str], matrix: np.ndarray, events: np.ndarray,
                 total_per_run: np.ndarray, target: np.ndarray, reason: np.ndarray,
                 reasons: list[str], exclusive: np.ndarray, mapped_to: np.ndarray,
                 skipped: list[dict[str, Any]], members: list[list[tuple[int, int]]]) -> None:
        self.profile = profile
        self.policy = policy
        self._nodes = nodes
        self._layers = layers
        self._m = matrix
        self._events = events
        self._total_per_run = total_per_run
        self._target = target
        self._reason = reason
        self._reasons = reasons
        self._exclusive = exclusive
        self._mapped_to = mapped_to
        self._skipped = skipped
        self._members = members
        self.runs = int(matrix.shape[1])
        self.total_ns = int(total_per_run.sum())
        k = len(nodes)
        self.attributed_ns = int(matrix[:3 * k].sum())
        self.unattributed_ns = int(matrix[3 * k + _UNATTRIBUTED].sum())
        self.overhead_ns = self.total_ns - self.attributed_ns - self.unattributed_ns

    def __repr__(self) -> str:
        return (f"<ExecutorchAttribution policy={self.policy!r}: {self.attributed_ns} of "
                f"{self.total_ns} ticks to layers over {self.runs} run(s)>")

    # ----------------------------------------------------------------- views
    def _stats(self, matrix: np.ndarray, events: np.ndarray) -> pd.DataFrame:
        return matrix_stats_frame(matrix, events, self.total_ns)

    def _layer_index(self) -> tuple[list[str], np.ndarray, dict[str, str]]:
        names = sorted(set(self._layers), key=lambda p: (p.split(".") if p else []))
        index = {p: i for i, p in enumerate(names)}
        row_of_node = np.array([index[p] for p in self._layers], dtype=np.int64)
        types: dict[str, str] = {}
        for node in self._nodes:
            for _, path, ty in node.module_stack:
                types.setdefault(path, ty)
        return names, row_of_node, types

    def by_layer(self) -> pd.DataFrame:
        """One row per layer (exact ``nn_module_stack`` path; ``""`` is the root module), in
        path order, then one row per bucket (:data:`BUCKETS`).

        Columns: ``layer`` (str), ``module_type`` (str; ``""`` for buckets), ``kind``
        (``layer`` or ``bucket``), ``nodes`` (int64 edge nodes), ``kernel_ns``,
        ``dispatch_ns``, ``delegate_ns`` (int64 ticks by component), then ``total_ns``,
        ``share``, ``events``, ``avg_ms`` ... ``max_ms`` (ticks taken as ns), then
        ``reason`` (why a layer has 0: its nodes ran no instruction).
        """
        names, row_of_node, types = self._layer_index()
        k = len(self._nodes)
        n_l = len(names)
        comp = np.zeros((3, n_l, self.runs), dtype=np.int64)
        events = np.zeros(n_l, dtype=np.int64)
        for c in range(3):
            np.add.at(comp[c], row_of_node, self._m[c * k:(c + 1) * k])
            np.add.at(events, row_of_node, self._events[c * k:(c + 1) * k])
        total = comp.sum(axis=0)
        bucket_m = self._m[3 * k:]
        stats = self._stats(np.vstack([total, bucket_m]),
                            np.r_[events, self._events[3 * k:]])
        node_count = np.bincount(row_of_node, minlength=n_l)
        ops_by_layer: dict[int, list[str]] = {}
        for node, r in zip(self._nodes, row_of_node.tolist()):
            ops_by_layer.setdefault(r, []).append(node.op)
        tot = stats["total_ns"].to_numpy()
        reasons = [("" if tot[i] or events[i] else
                    "its nodes ran no instruction (" + ", ".join(sorted(set(ops_by_layer[i])))
                    + ")") for i in range(n_l)] + [""] * len(BUCKETS)
        head = pd.DataFrame({
            "layer": pd.Series(names + list(BUCKETS), dtype=_STR),
            "module_type": pd.Series([types.get(p, "") for p in names] + [""] * len(BUCKETS),
                                     dtype=_STR),
            "kind": pd.Series(["layer"] * n_l + ["bucket"] * len(BUCKETS), dtype=_STR),
            "nodes": np.r_[node_count, np.zeros(len(BUCKETS), np.int64)].astype(np.int64),
            "kernel_ns": np.r_[comp[0].sum(axis=1), np.zeros(len(BUCKETS), np.int64)],
            "dispatch_ns": np.r_[comp[1].sum(axis=1), np.zeros(len(BUCKETS), np.int64)],
            "delegate_ns": np.r_[comp[2].sum(axis=1), np.zeros(len(BUCKETS), np.int64)],
        })
        out = pd.concat([head, stats], axis=1)
        out["reason"] = pd.Series(reasons, dtype=_STR)
        return out

    def by_op(self) -> pd.DataFrame:
        """One row per edge node (``getitem`` left out), in graph order.

        Columns: ``node`` (int64), ``graph``, ``name``, ``op``, ``handle`` (Int64), ``layer``,
        ``kernel_ns``, ``dispatch_ns``, ``delegate_ns``, then :data:`STAT_COLUMNS`.
        """
        k = len(self._nodes)
        m = self._m[:k] + self._m[k:2 * k] + self._m[2 * k:3 * k]
        ev = self._events[:k] + self._events[k:2 * k] + self._events[2 * k:3 * k]
        head = pd.DataFrame({
            "node": np.arange(k, dtype=np.int64),
            "graph": pd.Series([n.graph for n in self._nodes], dtype=_STR),
            "name": pd.Series([n.name for n in self._nodes], dtype=_STR),
            "op": pd.Series([n.op for n in self._nodes], dtype=_STR),
            "handle": pd.array([n.handle for n in self._nodes], dtype="Int64"),
            "layer": pd.Series(self._layers, dtype=_STR),
            "kernel_ns": self._m[:k].sum(axis=1),
            "dispatch_ns": self._m[k:2 * k].sum(axis=1),
            "delegate_ns": self._m[2 * k:3 * k].sum(axis=1),
        })
        return pd.concat([head, self._stats(m, ev)], axis=1)

    def per_run(self, by: str = "layer") -> pd.DataFrame:
        """The per-run table: one row per (row of :meth:`by_layer` or :meth:`by_op`, run) with
        ticks. Columns: ``row`` (int64: position in that view), ``layer`` (str) or ``node``
        (int64), ``run`` (int64, 0 .. runs-1), ``ns`` (int64 ticks). Per row, ``ns`` sums to
        the view's ``total_ns``; a (row, run) pair absent here has 0.

        Raises:
            ToolkitError: ``by`` is not ``"layer"`` or ``"op"``.
        """
        k = len(self._nodes)
        runs = np.arange(self.runs, dtype=np.int64)
        if by == "layer":
            names, row_of_node, _ = self._layer_index()
            total = np.zeros((len(names), self.runs), dtype=np.int64)
            for c in range(3):
                np.add.at(total, row_of_node, self._m[c * k:(c + 1) * k])
            return matrix_per_run(np.vstack([total, self._m[3 * k:]]),
                                  pd.Series(names + list(BUCKETS), dtype=_STR), "layer", runs)
        if by == "op":
            m = self._m[:k] + self._m[k:2 * k] + self._m[2 * k:3 * k]
            return matrix_per_run(m, pd.Series(np.arange(k, dtype=np.int64)), "node", runs)
        raise ToolkitError(f"per_run(by={by!r}): an ExecuTorch profile has per-run tables by "
                           "layer and by op", fix='pass by="layer" or by="op"')

    def rollup(self) -> pd.DataFrame:
        """Time per module path prefix on ``.`` boundaries (``stem`` includes ``stem.0``...).

        Columns: ``module`` (str; ``""`` the root), ``depth`` (int64), then
        :data:`STAT_COLUMNS` (a module's row includes its submodules').
        """
        layers = self.by_layer()
        rows = layers[layers["kind"] == "layer"]
        k = len(self._nodes)
        node_m = self._m[:k] + self._m[k:2 * k] + self._m[2 * k:3 * k]
        prefixes: list[str] = []
        for p in rows["layer"].tolist():
            parts = p.split(".") if p else []
            for d in range(len(parts) + 1):
                q = ".".join(parts[:d])
                if q not in prefixes:
                    prefixes.append(q)
        prefixes.sort(key=lambda p: p.split(".") if p else [])
        index = {p: i for i, p in enumerate(prefixes)}
        m = np.zeros((len(prefixes), self.runs), dtype=np.int64)
        ev = np.zeros(len(prefixes), dtype=np.int64)
        node_ev = self._events[:k] + self._events[k:2 * k] + self._events[2 * k:3 * k]
        for i, p in enumerate(self._layers):
            parts = p.split(".") if p else []
            for d in range(len(parts) + 1):
                r = index[".".join(parts[:d])]
                m[r] += node_m[i]
                ev[r] += node_ev[i]
        head = pd.DataFrame({"module": pd.Series(prefixes, dtype=_STR),
                             "depth": np.array([len(p.split(".")) if p else 0
                                                for p in prefixes], dtype=np.int64)})
        return pd.concat([head, self._stats(m, ev)], axis=1)

    def module_total(self, module: str) -> int:
        """Ticks of ``module`` and its submodules (an exact path; ``""`` the root).

        Raises:
            ToolkitError: no layer has this path or lies under it (never a substring match).
        """
        table = self.rollup()
        hit = table[table["module"] == module]
        if hit.empty:
            close = [m for m in table["module"].tolist() if module and module in m][:5]
            raise ToolkitError(f"no module named {module!r} owns a graph node",
                               where=self.profile.dump.source,
                               fix=f"use an exact path ({close or table['module'].tolist()[:8]})")
        return int(hit["total_ns"].iloc[0])

    def unattributed(self) -> pd.DataFrame:
        """Every event counted in ``<unattributed>`` or left out as unmapped, with the reason.

        Columns: ``event_id``, ``run`` (int64), ``name`` (str), ``dur_ns``, ``counted_ns``
        (int64: the ticks this event put in ``<unattributed>``; 0 for per-op events whose time
        is counted on their ``DELEGATE_CALL``), ``reason`` (str).
        """
        rows = np.flatnonzero(self._reason >= 0)
        ev = self.profile.events
        texts = np.array([*self._reasons, ""], dtype=object)
        return pd.DataFrame({
            "event_id": rows.astype(np.int64),
            "run": ev["run"].to_numpy()[rows],
            "name": pd.Series(ev["name"].astype(str).to_numpy()[rows], dtype=_STR),
            "dur_ns": ev["dur_ns"].to_numpy()[rows],
            "counted_ns": np.where(self._target[rows] >= 0, self._exclusive[rows], 0
                                   ).astype(np.int64),
            "reason": pd.Series(texts[self._reason[rows]].tolist(), dtype=_STR),
        })

    def skipped_nodes(self) -> pd.DataFrame:
        """XNNPACK nodes that made no operator event and handles with no owner, with the reason.

        Columns: ``instruction_id`` (int64), ``xnode`` (int64, -1 for a handle), ``handle``
        (int64), ``reason`` (str).
        """
        return pd.DataFrame(self._skipped, columns=["instruction_id", "xnode", "handle",
                                                    "reason"])

    def delegate_ops(self) -> pd.DataFrame:
        """Each delegate per-op event with the XNNPACK node it was matched to.

        Columns: ``event_id``, ``run``, ``name`` (the runtime name), ``xnode`` (int64, -1 when
        unmatched or unmapped), ``dur_ns``.
        """
        ev = self.profile.events
        rows = np.flatnonzero((ev["role"] == "delegate_op").to_numpy())
        return pd.DataFrame({"event_id": rows.astype(np.int64),
                             "run": ev["run"].to_numpy()[rows],
                             "name": pd.Series(ev["name"].astype(str).to_numpy()[rows],
                                               dtype=_STR),
                             "xnode": self._mapped_to[rows],
                             "dur_ns": ev["dur_ns"].to_numpy()[rows]})

    def load_time(self) -> pd.DataFrame:
        """Load-time events (``Method::init``, ``Program::load_method``), counted in no bucket.

        Columns: ``event_id``, ``name`` (str), ``dur_ns`` (int64).
        """
        ev = self.profile.events
        rows = np.flatnonzero((ev["phase"] == "load").to_numpy())
        return pd.DataFrame({"event_id": rows.astype(np.int64),
                             "name": pd.Series(ev["name"].astype(str).to_numpy()[rows],
                                               dtype=_STR),
                             "dur_ns": ev["dur_ns"].to_numpy()[rows]})

    def check(self) -> None:
        """Verify that the rows of every run sum to that run's ``Method::execute`` time.

        Raises:
            ToolkitError: naming the first run that does not add up.
        """
        per_run = self._m.sum(axis=0)
        bad = np.flatnonzero(per_run != self._total_per_run)
        if bad.size:
            r = int(bad[0])
            raise ToolkitError(f"run {r}: rows sum to {int(per_run[r])} ticks, "
                               f"Method::execute to {int(self._total_per_run[r])}",
                               where=self.profile.dump.source,
                               fix=("the attribution was modified after the join, or this is a "
                                    "bug: join again; if it persists, report it with the ETDump "
                                    "and the model"))
        layers = self.by_layer()
        if int(layers["total_ns"].sum()) != self.total_ns:
            raise ToolkitError("by_layer() does not sum to the total",
                               where=self.profile.dump.source,
                               fix=("the attribution was modified after the join, or this is a "
                                    "bug: join again; if it persists, report it with the ETDump "
                                    "and the model"))

    def summary(self) -> dict[str, Any]:
        """The headline figures, with the keys of ``Attribution.summary()``: ``events``
        (execute-time events), ``attributed_events`` (those whose time went to a layer),
        ``runs``, ``total_ns``, ``attributed_ns``, ``unattributed_ns``, ``overhead_ns`` (the
        runtime and delegate buckets), ``policy``, ``key_used``
        (``"instruction_id+delegate"``)."""
        ev = self.profile.events
        execute = (ev["phase"] == "execute").to_numpy()
        k = len(self._nodes)
        on_layers = np.zeros(len(ev), dtype=bool)
        on_layers[execute] = self._reason[execute] < 0
        on_layers &= self._target >= 0
        bucket_rows = {3 * k + b for b in range(len(BUCKETS))}
        # a target is a layer target when none of its rows is a bucket row
        return {"events": int(execute.sum()),
                "attributed_events": int((on_layers & ~np.isin(
                    self._target, self._bucket_targets(bucket_rows))).sum()),
                "runs": self.runs, "total_ns": self.total_ns,
                "attributed_ns": self.attributed_ns, "unattributed_ns": self.unattributed_ns,
                "overhead_ns": self.overhead_ns, "policy": self.policy,
                "key_used": "instruction_id+delegate"}

    def _bucket_targets(self, bucket_rows: set[int]) -> np.ndarray:
        return np.array([t for t, members in enumerate(self._members)
                         if any(row in bucket_rows for row, _ in members)], dtype=np.int64)


__all__ += ["STAT_COLUMNS"]
