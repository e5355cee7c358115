"""ExecuTorch profiles: ETDump events nested, joined to nn.Module layers through the ETRecord.

:func:`read_executorch` reads an ETDump (and optionally the ETRecord and the ``.pte``) into an
:class:`ExecutorchProfile`: ``events`` (one row per ETDump event, integer ticks, each with its
parent span and exclusive time), ``nodes()`` (the edge nodes with handle, op, module path and
type, stack trace, torch.export node), ``inspector_table()`` (the Inspector's own view, built by
our readers) and ``attribution()`` (every tick of every ``Method::execute`` given to a layer or
to a named bucket; see :mod:`toolkit.trace.readers.executorch.attribution`).

Nesting is structural, from the runtime's rules (events are stored in end order): a
``native_call_*`` kernel belongs to the next ``OPERATOR_CALL`` with its instruction id; a
delegate's per-op event to the next ``DELEGATE_CALL`` with its instruction id; an instruction
span to the next ``Method::execute`` of its block. Exclusive time is a span's duration minus
its children's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.formats.etdump import ETDump, read_etdump
from toolkit.formats.etrecord import ETRecord, read_etrecord
from toolkit.formats.executorch_program import Program, read_program
from toolkit.trace.join.nesting import structural_tree
from toolkit.trace.readers.read import Trace

__all__ = ["read_executorch", "ExecutorchProfile", "etdump_events", "executorch_join",
           "main_executorch", "ROLES"]

_STR = pd.Series([""]).dtype
#: ``role`` categories of :attr:`ExecutorchProfile.events`.
ROLES: tuple[str, ...] = ("other", "execute", "load", "instruction", "kernel", "delegate_op")
_ROOT, _LOAD, _SPAN, _KERNEL, _DOP = 1, 2, 3, 4, 5
_LOAD_NAMES = ("Method::init", "Program::load_method")
_SPAN_NAMES = ("OPERATOR_CALL", "DELEGATE_CALL", "JF_CALL", "MOVE_CALL", "FREE_CALL")
_WRAP = 1 << 32


def _next_index(mask: np.ndarray) -> np.ndarray:
    """For each position p, the smallest q > p with ``mask[q]`` (``len`` when none)."""
    n = mask.size
    idx = np.where(mask, np.arange(n, dtype=np.int64), n)
    nxt = np.minimum.accumulate(idx[::-1])[::-1]
    return np.append(nxt[1:], n)


def etdump_events(dump: ETDump) -> pd.DataFrame:
    """One row per ETDump event with its nesting, in the :class:`~toolkit.trace.readers.read.Trace`
    schema.

    Columns: ``event_id`` (int64), ``run`` (int64: ordinal of the ``Execute`` block; -1 for
    load-time blocks), ``key`` (object: the delegate id for delegate events, else the name),
    ``key_kind`` (categorical: ``name``), ``name`` (categorical: the event name; a delegate
    event keeps its runtime name), ``start_ns``, ``dur_ns`` (int64 ticks; ns on Linux; a
    32-bit wrap is undone), ``problem`` (categorical), ``phase`` (``load`` / ``execute``),
    ``block`` (int64), ``role`` (categorical of :data:`ROLES`), ``instruction_id``,
    ``chain_index``, ``delegate_debug_id_int`` (Int64, NA when absent; ``problem`` also flags
    a span whose children add up to more than it, as XNNPACK's synthetic op times can),
    ``delegate_debug_id_str`` (categorical), ``parent`` (int64 event id, -1 at the top),
    ``exclusive_ns`` (int64: duration minus the children's).
    """
    ev = dump.events
    n = len(ev)
    profile = (ev["kind"] == "profile").to_numpy()
    start = ev["start_time"].to_numpy().astype(np.int64)
    end = ev["end_time"].to_numpy().astype(np.int64)
    dur = end - start
    wrap = (dur < 0) & (start < _WRAP) & (end < _WRAP)
    dur = np.where(wrap, _WRAP - start + end, dur)
    problem = np.zeros(n, dtype=np.int64)
    problems = ["", "negative duration", "not a profile event (no time)"]
    problem[dur < 0] = 1
    problem[~profile] = 2
    dur = np.where(profile, dur, 0)

    block = ev["block"].to_numpy()
    block_names = [b.name or "" for b in dump.blocks]
    is_exec_block = np.array([nm == "Execute" for nm in block_names], dtype=bool)
    execute = is_exec_block[block] if n else np.zeros(0, bool)
    run_of_block = np.cumsum(is_exec_block) - 1
    run = np.where(execute, run_of_block[block] if n else 0, -1).astype(np.int64)

    names = ev["name"]
    cats = list(names.cat.categories)
    codes = names.cat.codes.to_numpy()
    role_of_cat = np.zeros(len(cats) + 1, dtype=np.int8)
    for i, c in enumerate(cats):
        if c == "Method::execute":
            role_of_cat[i] = _ROOT
        elif c in _LOAD_NAMES:
            role_of_cat[i] = _LOAD
        elif c in _SPAN_NAMES or c.endswith("_CALL"):
            role_of_cat[i] = _SPAN
        elif c.startswith("native_call_"):
            role_of_cat[i] = _KERNEL
    role = role_of_cat[codes]  # code -1 (no name) reads the last entry: 0
    did_int = ev["delegate_debug_id_int"]
    did_str = ev["delegate_debug_id_str"]
    has_did = (did_int.notna() | did_str.notna()).to_numpy()
    role = np.where(has_did & (role != _SPAN) & (role != _ROOT), _DOP, role).astype(np.int8)
    role = np.where(~execute & profile, _LOAD, role).astype(np.int8)
    role = np.where(~profile, 0, role).astype(np.int8)

    instr = ev["instruction_id"].fillna(-1).to_numpy(dtype=np.int64)
    delegate_span = role_of_cat[codes] == _SPAN
    if "DELEGATE_CALL" in cats:
        delegate_span &= codes == cats.index("DELEGATE_CALL")
    else:
        delegate_span &= False
    parent = np.full(n, -1, dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    nxt_root = _next_index(role == _ROOT)
    nxt_span = _next_index(role == _SPAN)
    nxt_dcall = _next_index(delegate_span)

    def link(mask: np.ndarray, nxt: np.ndarray, same_instr: bool) -> np.ndarray:
        q = nxt[mask]
        ok = q < n
        qq = np.where(ok, q, 0)
        ok &= block[qq] == block[mask]
        if same_instr:
            ok &= instr[qq] == instr[mask]
        out = np.full(q.size, -1, dtype=np.int64)
        out[ok] = q[ok]
        return out

    kern = role == _KERNEL
    parent[kern] = link(kern, nxt_span, True)
    dop = role == _DOP
    parent[dop] = link(dop, nxt_dcall, True)
    other = (role == _SPAN) | (role == 0) & profile & execute
    parent[other] = link(other, nxt_root, False)
    orphan = (kern | dop) & (parent < 0)
    parent[orphan] = link(orphan, nxt_root, False)
    # a negative duration takes no part: nothing is taken from its parent, it counts 0 ns
    negative = problem == 1
    tree = structural_tree(idx, parent, np.where(negative, -1, dur))
    exclusive = np.where(negative, 0, tree.self_ns)
    problems.append("children last longer than the span (negative exclusive time)")
    problem[(exclusive < 0) & (problem == 0)] = len(problems) - 1

    key = pd.Series(np.where(did_str.notna().to_numpy(), did_str.astype(object).to_numpy(),
                             names.astype(object).to_numpy()), dtype=object)
    if did_int.notna().any():
        ints = did_int.notna().to_numpy()
        key[ints] = did_int[ints].astype(int).tolist()
    key = key.where(key.notna(), None)
    display = names.astype(object).where(names.notna(), did_str.astype(object))
    display = display.where(display.notna(), did_int.astype(object))
    name_cat = pd.Categorical(display.where(display.notna(), "").astype(str))
    name_cat = pd.Categorical.from_codes(
        name_cat.codes, categories=pd.Index([str(c) for c in name_cat.categories], dtype=_STR))
    frame = pd.DataFrame({
        "event_id": idx,
        "run": run,
        "key": key,
        "key_kind": pd.Categorical.from_codes(np.full(n, 1, dtype=np.int64),
                                              categories=pd.Index(["", "name"], dtype=_STR)),
        "name": name_cat,
        "start_ns": start,
        "dur_ns": dur.astype(np.int64),
        "problem": pd.Categorical.from_codes(problem, categories=pd.Index(problems, dtype=_STR)),
        "phase": pd.Categorical.from_codes(np.where(execute, 1, 0).astype(np.int64),
                                           categories=pd.Index(["load", "execute"], dtype=_STR)),
        "block": block.astype(np.int64),
        "role": pd.Categorical.from_codes(role.astype(np.int64),
                                          categories=pd.Index(ROLES, dtype=_STR)),
        "instruction_id": ev["instruction_id"].array,
        "chain_index": ev["chain_index"].array,
        "delegate_debug_id_int": did_int.array,
        "delegate_debug_id_str": did_str.array,
        "parent": parent,
        "exclusive_ns": exclusive.astype(np.int64),
    })
    return frame


@dataclass
class ExecutorchProfile:
    """An ETDump read with its ETRecord and program (either may be None).

    Attributes:
        dump: the decoded :class:`~toolkit.formats.etdump.ETDump`.
        record: the :class:`~toolkit.formats.etrecord.ETRecord` (None when not given).
        program: the :class:`~toolkit.formats.executorch_program.Program` (None when not
            given).
        method: the method profiled (``forward``).
        events: see :func:`etdump_events`.
    """

    dump: ETDump
    record: ETRecord | None
    program: Program | None
    method: str
    events: pd.DataFrame

    def __repr__(self) -> str:
        runs = int(self.events["run"].max() + 1) if len(self.events) else 0
        return (f"<ExecutorchProfile {len(self.events)} events, {runs} run(s), "
                f"etrecord={'yes' if self.record else 'no'}, "
                f"program={'yes' if self.program else 'no'}, from {self.dump.source}>")

    @property
    def runs(self) -> int:
        """Number of ``Execute`` blocks."""
        return int(self.events["run"].max() + 1) if len(self.events) else 0

    def nodes(self) -> pd.DataFrame:
        """One row per operator node of the edge program (control-flow bodies and delegated
        graphs included; ``getitem`` nodes left out).

        Columns: ``node`` (int64 id), ``graph`` (``""`` for the method's graph), ``name``,
        ``handle`` (Int64, NA without one), ``op``, ``module_path`` (the layer; None without
        an ``nn_module_stack``), ``module_type``, ``layer`` (the row used by
        ``attribution().by_layer()``: ``module_path``, else the enclosing node's, else
        :data:`~toolkit.layer_names.NO_LAYER` (the root module)), ``stack_trace``,
        ``torch_node`` (the torch.export node name), ``backend`` (for delegate call nodes).
        """
        from toolkit.trace.readers.executorch.attribution import node_table

        return node_table(self._record_or_raise(), self.method)

    def _record_or_raise(self) -> ETRecord:
        if self.record is None:
            raise ToolkitError("this needs the ETRecord", where=self.dump.source,
                               fix="pass etrecord= to read_executorch (CLI: --etrecord)")
        return self.record

    def inspector_table(self) -> pd.DataFrame:
        """The ExecuTorch Inspector's ``to_dataframe()``, rebuilt by our readers (see
        :func:`toolkit.trace.readers.executorch.inspector.inspector_table` for its columns and
        losses)."""
        from toolkit.trace.readers.executorch.inspector import inspector_table

        return inspector_table(self.dump, self.record, self.method)

    def trace(self) -> Trace:
        """The ``Execute`` events as a nested :class:`~toolkit.trace.readers.read.Trace`, not keyed
        (see :func:`toolkit.trace.readers.executorch._provenance.etdump_trace`)."""
        from toolkit.trace.readers.executorch._provenance import etdump_trace

        return etdump_trace(self)

    def attribution(self, policy: str = "equal", key: str | None = None, *,
                    overlaps: str = "self", strict: bool = True, skip_runs: int = 0) -> Any:
        """Join the profile with the one join (:func:`toolkit.trace.join.join.trace_join`, whose
        arguments these are): every tick of every ``Method::execute`` goes to a layer, to
        dispatch overhead or to ``unattributed()`` with its reason.

        Args:
            policy: how an event is split over the edge nodes its unit stands for:
                ``"equal"``; ``"macs"`` and ``"bytes"`` split equally too (an ETRecord has
                no costs).
            key, overlaps, strict, skip_runs: as :func:`toolkit.trace.join.join.trace_join`.

        Returns:
            An :class:`~toolkit.trace.readers.executorch.attribution.ExecutorchAttribution`.
        """
        from toolkit.trace.readers.executorch.attribution import attribute

        return attribute(self, policy, key, overlaps=overlaps, strict=strict,
                         skip_runs=skip_runs)


def _load(value: Any, reader: Any, kind: str) -> Any:
    if value is None or isinstance(value, (ETDump, ETRecord, Program)):
        return value
    if isinstance(value, (str, os.PathLike, bytes, bytearray)):
        return reader(value)
    raise ToolkitError(f"cannot read {kind} from a {type(value).__name__}",
                       fix="pass a path or the bytes of the file")


def read_executorch(etdump: Any, etrecord: Any = None, program: Any = None, *,
                    method: str = "forward") -> ExecutorchProfile:
    """Read an ExecuTorch profile.

    Args:
        etdump: the ETDump (``.etdp`` path, bytes or a decoded ``ETDump``).
        etrecord: the ETRecord (path, bytes or a decoded ``ETRecord``); needed for layers.
        program: the ``.pte`` (path, bytes or a decoded ``Program``); needed to map
            XNNPACK per-op events to layers.
        method: the method profiled.

    Returns:
        An :class:`ExecutorchProfile`.

    Raises:
        ToolkitError: a file is not what its argument expects (the message says which file
            it is and where it goes) or is corrupt.
    """
    dump = _load(etdump, read_etdump, "an ETDump")
    record = _load(etrecord, read_etrecord, "an ETRecord")
    prog = _load(program, read_program, "a program")
    if record is not None and record.nodes and method not in record.nodes:
        raise ToolkitError(f"the ETRecord has no method {method!r}", where=record.source,
                           fix=f"use one of {record.methods()}")
    if prog is not None and method not in prog.plans:
        raise ToolkitError(f"the program has no method {method!r}", where=prog.source,
                           fix=f"use one of {list(prog.plans)}")
    return ExecutorchProfile(dump, record, prog, method, etdump_events(dump))


def main_executorch(etdump: Path, etrecord: Path, program: Path | None, *, policy: str,
                    by: str, csv: Path | None, top: int, overlaps: str = "self",
                    strict: bool = True, skip_runs: int = 0) -> int:
    """``toolkit trace-join X.etdp --etrecord R.bin [--program M.pte] --by layer|op``.

    Prints the totals, the table (largest ``total_ns`` first, ``top`` rows; 0: all) and the
    unattributed time by reason; writes the table as CSV when asked. Returns 0.
    """
    if by not in ("layer", "op"):
        raise ToolkitError(f"--by {by} is not a view of an ExecuTorch profile",
                           fix="use --by layer or --by op")
    profile = read_executorch(etdump, etrecord, program)
    att = profile.attribution(policy, overlaps=overlaps, strict=strict, skip_runs=skip_runs)
    att.check()
    share = att.attributed_ns / att.total_ns if att.total_ns else 0.0
    print(f"{etdump}: {len(profile.events)} events, {att.runs} run(s), policy {policy}, "
          f"program {'given' if program else 'not given'}")
    print(f"to layers {att.attributed_ns} of {att.total_ns} ticks ({share:.1%}) of "
          f"Method::execute; overhead {att.overhead_ns}, unattributed {att.unattributed_ns}")
    table = att.by_layer() if by == "layer" else att.by_op()
    shown = table.sort_values("total_ns", ascending=False, kind="stable")
    if top > 0:
        shown = shown.head(top)
    with pd.option_context("display.max_rows", None, "display.max_columns", 20,
                           "display.width", 200, "display.max_colwidth", 60):
        print(f"\n== by {by} ({len(table)} rows, largest {len(shown)} shown)")
        print(shown.to_string(index=False) if len(shown) else "(empty)")
        over = att.overhead()
        if len(over):
            print("\n== dispatch overhead")
            print(over[["bucket", "total_ns", "events"]].to_string(index=False))
        un = att.unattributed()
        if len(un):
            why = un.groupby("reason", observed=True)[["dur_ns", "self_ns"]].agg("sum")
            why.insert(0, "events", un.groupby("reason", observed=True).size())
            print("\n== unattributed, by reason")
            print(why.to_string())
    if csv is not None:
        from toolkit.util.atomic import atomic_write

        atomic_write(Path(csv), table.to_csv(index=False).encode())
        print(f"wrote {csv}")
    return 0


def executorch_join(trace: Any, model: Any, policy: str = "equal", key: str | None = None,
                    *, overlaps: str = "self", strict: bool = True, skip_runs: int = 0,
                    program: Any = None) -> Any:
    """``trace_join`` for ExecuTorch: the attribution when ``trace`` is an ETDump (a path,
    a decoded ``ETDump`` or the :class:`Trace` :func:`~toolkit.trace.readers.read.read_trace` made
    of one) or ``model`` an ETRecord (path or decoded), else None (not an ExecuTorch join).

    The other arguments are :func:`toolkit.trace.join.join.trace_join`'s; the ETRecord carries no
    costs, so every policy splits equally.

    Returns:
        An :class:`~toolkit.trace.readers.executorch.attribution.ExecutorchAttribution`, or None.

    Raises:
        ToolkitError: one of the two is an ExecuTorch file and the other is not the file it
            pairs with (the message names what was passed).
    """
    from toolkit.trace.readers.inputs import executorch_kind

    kinds = (executorch_kind(trace), executorch_kind(model))
    if "etdump" not in kinds and "etrecord" not in kinds:
        return None
    if kinds != ("etdump", "etrecord"):
        raise ToolkitError(f"an ExecuTorch join takes the ETDump and then the ETRecord; got "
                           f"{kinds[0] or type(trace).__name__} and "
                           f"{kinds[1] or type(model).__name__}",
                           fix="trace_join('run.etdp', 'model.etrecord.bin'), or "
                               "read_executorch(etdump, etrecord, program)")
    if isinstance(trace, Trace):
        trace = trace.meta["etdump"]
    return read_executorch(trace, model, program).attribution(
        policy, key, overlaps=overlaps, strict=strict, skip_runs=skip_runs)
