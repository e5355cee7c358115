"""``compile_model``: copy, optimise, lower, and collect provenance.

The steps: load the model if given a path; copy it (the caller's model is never changed); run
the passes with the :class:`~toolkit.compiler.pass_manager.PassManager`; lower subgraph 0 to the
command queue for the target; give every compiled op a debug handle. The result is a
:class:`~toolkit.compiler.compiled.CompiledModel`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from toolkit.compiler.compiled import CompiledModel
from toolkit.compiler.copy_model import copy_model
from toolkit.compiler.lowering import lower
from toolkit.compiler.pass_manager import PassManager
from toolkit.compiler.passes import DEFAULT_PASSES, PASSES, GraphPass
from toolkit.compiler.target import Target
from toolkit.errors import ToolkitError
from toolkit.formats.debug_handles import DelegateMappingBuilder
from toolkit.ir import Model, Tensor
from toolkit.layer_names import name_layers
from toolkit.util.args import check_bool, check_int
from toolkit.util.gc_pause import paused_gc

__all__ = ["compile_model", "resolve_passes"]


def resolve_passes(passes: Sequence[str | GraphPass] | None) -> list[GraphPass]:
    """Return pass objects for ``passes`` (names or pass objects; None = the defaults)."""
    if passes is None:
        passes = DEFAULT_PASSES
    if isinstance(passes, (str, GraphPass)):
        passes = [passes]
    if not isinstance(passes, (list, tuple)):
        raise ToolkitError(f"passes must be None, a pass name, a pass or a list of them, got "
                           f"a {type(passes).__name__}", where="compile",
                           fix="pass passes=None (the default passes), [] or ['fold_constants']")
    out: list[GraphPass] = []
    for p in passes:
        if isinstance(p, GraphPass):
            out.append(p)
        elif isinstance(p, str) and p in PASSES:
            out.append(PASSES[p]())
        else:
            raise ToolkitError(f"unknown pass {p!r}", fix=f"passes are {sorted(PASSES)}")
    return out


def _target(target: Target | dict[str, Any] | None) -> Target:
    if target is None:
        return Target()
    if isinstance(target, Target):
        target.validate()
        return target
    if isinstance(target, dict):
        return Target.from_dict(target)
    raise ToolkitError(
        f"target must be a Target or a dict, got {type(target).__name__}",
        fix="pass a toolkit.Target or a dict of its fields (or no target for the default)",
    )


def _handles(model: Model, identifiers: str) -> list[int | str]:
    ops = [op for g in model.subgraphs for op in g.ops]
    if identifiers == "generated":
        b = DelegateMappingBuilder(generated_identifiers=True)
        return [b.insert_delegate_mapping_entry(op) for op in ops]
    if identifiers == "names":
        b = DelegateMappingBuilder()
        used: set[str] = set()
        out: list[int | str] = []
        for i, op in enumerate(ops):
            name = op.name if op.name not in used else f"{op.name}#{i}"
            used.add(name)
            out.append(b.insert_delegate_mapping_entry(op, name))
        return out
    raise ToolkitError(
        f"debug_identifiers must be 'generated' or 'names', got {identifiers!r}",
        fix="pass debug_identifiers='generated' (numbers) or 'names' (op names)",
    )


def _follow_outputs(model: Model, before: list[list[Tensor]]) -> None:
    """Point signature outputs at the tensors that now hold each graph output (a pass that
    bypasses or absorbs the op producing an output moves the output to another tensor)."""
    for sd in model.signature_defs:
        old = before[sd.subgraph_index]
        new = model.subgraphs[sd.subgraph_index].outputs
        if len(old) != len(new):
            continue
        moved = {id(a): b for a, b in zip(old, new) if a is not b}
        sd.outputs = [(name, moved.get(id(t), t)) for name, t in sd.outputs]


def compile_model(model: Model | str | os.PathLike[str],
                  passes: Sequence[str | GraphPass] | None = None,
                  target: Target | dict[str, Any] | None = None, *,
                  debug_identifiers: str = "generated", max_sweeps: int = 8,
                  check: bool = True) -> CompiledModel:
    """Compile ``model`` for ``target`` and return a :class:`CompiledModel`.

    Args:
        model: a :class:`Model` (not modified) or a path to a .tflite/.circle file.
        passes: pass names or pass objects, in order; None runs ``DEFAULT_PASSES``, ``[]``
            none.
        target: a :class:`Target` (or a dict of its fields); None uses ``Target()``.
        debug_identifiers: ``"generated"`` (ints 1, 2, ...) or ``"names"`` (op names) as the
            debug handle of each compiled op.
        max_sweeps: bound on sweeps of the pass manager over the passes.
        check: verify the graph and origin conservation after every pass.

    Raises:
        ToolkitError: an invalid target, an unknown pass name, an unreadable model file.
        PassError: a pass failed (names it and the passes run before it).
    """
    check_int(max_sweeps, "max_sweeps", "compile", low=1)
    check_bool(check, "check", "compile")
    tgt = _target(target)
    pass_objs = resolve_passes(passes)
    if not isinstance(model, Model):
        from toolkit.formats.flatbuffer_read import load

        model = load(model)
    name_layers(model)  # the source's Origin records, kept by the copy
    with paused_gc():  # compiling builds many small objects and no cycles worth collecting
        work = copy_model(model)
        outputs = [list(g.outputs) for g in work.subgraphs]
        manager = PassManager(pass_objs, max_sweeps=max_sweeps, check=check)
        manager(work)
        _follow_outputs(work, outputs)
        commands = lower(work.graph.ops, tgt)
        handles = _handles(work, debug_identifiers)
        return CompiledModel(model, work, tgt, commands, handles, list(manager.runs))
