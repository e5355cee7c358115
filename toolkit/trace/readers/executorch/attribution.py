"""An ExecuTorch profile joined by the one join, with ExecuTorch's own views.

:func:`attribute` keys the profile's events and builds its provenance
(:mod:`toolkit.trace.readers.executorch._provenance`), then runs
:func:`toolkit.trace.join.join.run_join`: each event counts its exclusive time (the runtime's
nesting), ``Method::execute`` and a delegate call whose per-op events are mapped are wrappers (their
own time is :meth:`~toolkit.trace.join.attribution.Attribution.overhead`: the runtime between
instructions, the delegate's time not covered by its op events), every event that cannot be joined
is in ``unattributed()`` with its reason. ``total_ns`` is the sum of ``Method::execute`` durations
of the runs joined; attributed + overhead + unattributed adds up to it, to the tick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.formats.etrecord import ETRecord
from toolkit.trace.join.attribution import Attribution, JoinResult
from toolkit.trace.join.split import group_sum
from toolkit.trace.join.stats import STAT_COLUMNS, matrix_stats_frame
from toolkit.trace.readers.executorch._provenance import (
    COMPONENTS,
    ExecutorchProvenance,
    edge_layers,
    executorch_inputs,
    layer_row,
)

if TYPE_CHECKING:
    from toolkit.trace.readers.executorch.profile import ExecutorchProfile

__all__ = ["ExecutorchAttribution", "attribute", "node_table", "COMPONENTS", "STAT_COLUMNS"]

_STR = pd.Series([""]).dtype
_COMPONENT_OF_ROLE = {"kernel": 0, "instruction": 1, "delegate_op": 2}


def node_table(record: ETRecord, method: str) -> pd.DataFrame:
    """See :meth:`toolkit.trace.readers.executorch.profile.ExecutorchProfile.nodes`."""
    nodes, layers, sources = edge_layers(record, method)
    handles = pd.array([n.handle for n in nodes], dtype="Int64")
    return pd.DataFrame({
        "node": np.arange(len(nodes), dtype=np.int64),
        "graph": pd.Series([n.graph for n in nodes], dtype=_STR),
        "name": pd.Series([n.name for n in nodes], dtype=_STR),
        "handle": handles,
        "op": pd.Series([n.op for n in nodes], dtype=_STR),
        "module_path": pd.Series([n.module_path for n in nodes], dtype=object),
        "module_type": pd.Series([n.module_type for n in nodes], dtype=object),
        "layer": pd.Series([layer_row(x) for x in layers], dtype=_STR),
        "layer_source": pd.Series(sources, dtype=_STR),
        "stack_trace": pd.Series([n.stack_trace for n in nodes], dtype=object),
        "torch_node": pd.Series([n.torch_node for n in nodes], dtype=object),
        "backend": pd.Series([n.backend for n in nodes], dtype=object),
    })


def attribute(profile: ExecutorchProfile, policy: str = "equal", key: str | None = None, *,
              overlaps: str = "self", strict: bool = True, skip_runs: int = 0
              ) -> ExecutorchAttribution:
    """Join a profile with the one join (arguments as
    :func:`toolkit.trace.join.join.trace_join`); return the :class:`ExecutorchAttribution`."""
    from toolkit.trace.join.join import run_join

    trace, prov = executorch_inputs(profile)
    result = run_join(trace, prov, policy, key, overlaps=overlaps, strict=strict,
                      skip_runs=skip_runs)
    return ExecutorchAttribution(result, profile)


class ExecutorchAttribution(Attribution):
    """Every tick of an ExecuTorch profile: the views of
    :class:`~toolkit.trace.join.attribution.Attribution` (``by_op()`` has one row per compiled
    unit: an instruction, an XNNPACK node), plus :meth:`by_node` (one row per edge node),
    :meth:`rollup`, :meth:`module_total`, :meth:`delegate_ops`, :meth:`skipped_nodes` and
    :meth:`load_time`. ``by_layer()`` adds, after the shared columns, ``module_type``,
    ``nodes`` and the time by component (``kernel_ns``, ``dispatch_ns``, ``delegate_ns``).

    Attributes (beside :class:`Attribution`'s): ``profile``.
    """

    def __init__(self, result: JoinResult, profile: ExecutorchProfile) -> None:
        super().__init__(result)
        self.profile = profile
        prov = result.provenance
        assert isinstance(prov, ExecutorchProvenance)
        self._prov = prov

    def __repr__(self) -> str:
        return "<Executorch" + super().__repr__()[1:]

    # ----------------------------------------------------------------- components
    def _components(self) -> np.ndarray:
        """``int64`` ns per (component, source op): the attributed pieces by the role of
        their event (kernel, instruction span, delegate)."""
        if "components" not in self._cache:
            r = self._r
            cat = r.catalog
            s = len(cat.source_id)
            role = r.trace.events["role"].array
            comp_of_role = np.array([_COMPONENT_OF_ROLE.get(str(c), 2)
                                     for c in role.categories], dtype=np.int64)
            comp_of_event = comp_of_role[np.asarray(role.codes, dtype=np.int64)]
            out = np.zeros(3 * s, dtype=np.int64)
            for _b0, _b1, rows, member, ns in self._blocks():
                cell = comp_of_event[rows] * s + cat.member_source[member]
                out += group_sum(cell, ns, 3 * s)
            self._cache["components"] = pd.DataFrame(out.reshape(3, s).T)
        return self._cache["components"].to_numpy(dtype=np.int64).T

    # ----------------------------------------------------------------- views
    def by_layer(self) -> pd.DataFrame:
        """:meth:`Attribution.by_layer` (one row per module path; the nodes of the root module
        share the row :data:`~toolkit.layer_names.NO_LAYER`, as in every join), then
        ``module_type`` (str), ``nodes`` (int64 edge nodes), ``kernel_ns``, ``dispatch_ns``,
        ``delegate_ns`` (int64: the layer's time by component; they sum to ``total_ns``) and
        ``reason`` (why a layer has no time: its nodes ran no instruction)."""
        table = super().by_layer()
        cat = self._r.catalog
        n_l = len(cat.layer_names)
        comp = self._components()
        per_layer = np.zeros((3, n_l), dtype=np.int64)
        nodes = np.zeros(n_l, dtype=np.int64)
        ops: list[list[str]] = [[] for _ in range(n_l)]
        for s in range(len(cat.source_id)):
            a, b = cat.source_layers_ptr[s], cat.source_layers_ptr[s + 1]
            rows = cat.source_layers[a:b]
            for row in rows.tolist():
                nodes[row] += 1
                ops[row].append(str(cat.source_operator[s]))
            if len(rows):  # a node of several layers splits equally (none here)
                for c in range(3):
                    share = comp[c, s] // len(rows)
                    per_layer[c, rows] += share
                    per_layer[c, rows[0]] += comp[c, s] - share * len(rows)
        types: dict[str, str] = {}
        for node in self._prov.nodes:
            for _, path, ty in node.module_stack:
                types.setdefault(path, ty)
        names = [str(x) for x in cat.layer_names.tolist()]
        table["module_type"] = pd.Series([types.get(p, "") for p in names], dtype=_STR)
        table["nodes"] = nodes
        for c, label in enumerate(COMPONENTS):
            table[f"{label}_ns"] = per_layer[c]
        total = table["total_ns"].to_numpy()
        events = table["events"].to_numpy()
        table["reason"] = pd.Series(
            ["" if total[i] or events[i] else
             "its nodes ran no instruction (" + ", ".join(sorted(set(ops[i]))) + ")"
             for i in range(n_l)], dtype=_STR)
        return table

    def by_node(self) -> pd.DataFrame:
        """One row per edge node (``getitem`` left out), in graph order: ``node`` (int64),
        ``graph``, ``name``, ``op`` (str), ``handle`` (Int64), ``layer`` (str: the
        :meth:`by_layer` row: the module path, ``(no layer)`` for the root module),
        ``kernel_ns``, ``dispatch_ns``, ``delegate_ns``, then :data:`STAT_COLUMNS` (of
        :meth:`by_source_op`)."""
        nodes = self._prov.nodes
        k = len(nodes)
        comp = self._components()
        stats = self.by_source_op()[list(STAT_COLUMNS)]
        head = pd.DataFrame({
            "node": np.arange(k, dtype=np.int64),
            "graph": pd.Series([n.graph for n in nodes], dtype=_STR),
            "name": pd.Series([n.name for n in nodes], dtype=_STR),
            "op": pd.Series([n.op for n in nodes], dtype=_STR),
            "handle": pd.array([n.handle for n in nodes], dtype="Int64"),
            "layer": pd.Series([layer_row(x) for x in self._prov.node_layers], dtype=_STR),
            "kernel_ns": comp[0], "dispatch_ns": comp[1], "delegate_ns": comp[2],
        })
        return pd.concat([head, stats.reset_index(drop=True)], axis=1)

    def rollup(self) -> pd.DataFrame:
        """Time per module path prefix on ``.`` boundaries (``stem`` includes ``stem.0``...).

        Columns: ``module`` (str; ``""`` the root), ``depth`` (int64), then
        :data:`STAT_COLUMNS` (a module's row includes its submodules'; per-run statistics
        from the runs' cells).
        """
        layers = self._prov.node_layers
        prefixes: list[str] = []
        for p in layers:
            parts = p.split(".") if p else []
            for d in range(len(parts) + 1):
                q = ".".join(parts[:d])
                if q not in prefixes:
                    prefixes.append(q)
        prefixes.sort(key=lambda p: p.split(".") if p else [])
        index = {p: i for i, p in enumerate(prefixes)}
        node_m = self._node_run_matrix()
        node_ev = self.by_source_op()["events"].to_numpy(dtype=np.int64)
        m = np.zeros((len(prefixes), self.runs), dtype=np.int64)
        ev = np.zeros(len(prefixes), dtype=np.int64)
        for i, p in enumerate(layers):
            parts = p.split(".") if p else []
            for d in range(len(parts) + 1):
                r = index[".".join(parts[:d])]
                m[r] += node_m[i]
                ev[r] += node_ev[i]
        head = pd.DataFrame({"module": pd.Series(prefixes, dtype=_STR),
                             "depth": np.array([len(p.split(".")) if p else 0
                                                for p in prefixes], dtype=np.int64)})
        return pd.concat([head, matrix_stats_frame(m, ev, self.total_ns)], axis=1)

    def _node_run_matrix(self) -> np.ndarray:
        """``int64`` ns per (edge node, run code)."""
        r = self._r
        cat = r.catalog
        run, column, ns = r.sums.triplets()
        source = cat.member_source[r.hit_members][column]
        k = len(self._prov.nodes)
        cells = group_sum(source * max(self.runs, 1) + run, ns, k * max(self.runs, 1))
        return cells.reshape(k, max(self.runs, 1))[:, :self.runs]

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

    def skipped_nodes(self) -> pd.DataFrame:
        """XNNPACK nodes that made no operator event and handles with no owner, with the reason.

        Columns: ``instruction_id`` (int64), ``xnode`` (int64, -1 for a handle), ``handle``
        (int64), ``reason`` (str).
        """
        return pd.DataFrame(self._prov.skipped, columns=["instruction_id", "xnode", "handle",
                                                         "reason"])

    def delegate_ops(self) -> pd.DataFrame:
        """Each delegate per-op event joined with the XNNPACK node it was matched to.

        Columns: ``event_id``, ``run``, ``name`` (the runtime name), ``xnode`` (int64, -1 when
        unmatched or without the program), ``dur_ns``.
        """
        ev = self._r.trace.events
        rows = np.flatnonzero((ev["role"] == "delegate_op").to_numpy())
        return pd.DataFrame({"event_id": ev["event_id"].to_numpy(dtype=np.int64)[rows],
                             "run": ev["run"].to_numpy()[rows],
                             "name": pd.Series(ev["name"].astype(str).to_numpy()[rows],
                                               dtype=_STR),
                             "xnode": ev["xnode"].to_numpy(dtype=np.int64)[rows],
                             "dur_ns": ev["dur_ns"].to_numpy()[rows]})

    def load_time(self) -> pd.DataFrame:
        """Load-time events (``Method::init``, ``Program::load_method``), counted in no run.

        Columns: ``event_id``, ``name`` (str), ``dur_ns`` (int64).
        """
        load = self._r.trace.meta.get("load_events")
        return load.copy() if load is not None else pd.DataFrame(
            {"event_id": np.zeros(0, np.int64), "name": pd.Series([], dtype=_STR),
             "dur_ns": np.zeros(0, np.int64)})

    def check(self) -> None:
        """:meth:`Attribution.check`, and the components of every layer add up to its
        ``total_ns``.

        Raises:
            ToolkitError: naming the first failure.
        """
        super().check()
        layers = self.by_layer()
        parts = layers[[f"{c}_ns" for c in COMPONENTS]].sum(axis=1)
        if not (parts == layers["total_ns"]).all():
            raise ToolkitError("by_layer()'s components do not add up to total_ns",
                               where=self.profile.dump.source,
                               fix=("the attribution was modified after the join, or this is a "
                                    "bug: join again; if it persists, report it with the ETDump "
                                    "and the model"))
