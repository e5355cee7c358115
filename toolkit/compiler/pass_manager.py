"""Run passes to a fixed point, checking the graph and its provenance after every pass.

Each pass is run until it reports no change; the whole sequence is repeated until a sweep
changes nothing (or ``max_sweeps`` is reached). After every pass run the manager checks:

* ``Model.verify()``: links, acyclicity, every op has a non-empty origin set;
* origin conservation: the union of the live ops' origin sets plus the recorded removed
  origins is exactly the set of source ops it started with.

A pass run that reports no change and leaves the op and rewrite counts of every graph as they
were is not checked again (the graph it saw had passed the checks).

When a pass raises, or breaks a check, a :class:`~toolkit.errors.PassError` names the pass
and the passes run before it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from toolkit.compiler.passes.base import GraphPass, PassResult
from toolkit.errors import PassError, ToolkitError
from toolkit.ir import Model

__all__ = ["PassManager", "PassRun", "model_origins", "check_origins"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassRun:
    """One pass run: its sweep, name, whether it changed the model, and its time (s)."""

    sweep: int
    name: str
    modified: bool
    seconds: float


def model_origins(model: Model) -> frozenset[int]:
    """Return every origin id carried by an op of ``model`` or recorded as removed."""
    ids: set[int] = set()
    for g in model.subgraphs:
        ids |= g.live_origins()
        ids.update(g.removed_origins)
    return frozenset(ids)


def check_origins(model: Model, expected: frozenset[int]) -> None:
    """Raise ToolkitError unless live plus removed origins of ``model`` equal ``expected``."""
    got = model_origins(model)
    if got != expected:
        lost = sorted(expected - got)
        extra = sorted(got - expected)
        parts = []
        if lost:
            parts.append(f"origins lost: {lost[:10]}")
        if extra:
            parts.append(f"unknown origins appeared: {extra[:10]}")
        raise ToolkitError("origin conservation broken (" + "; ".join(parts) + ")",
                           fix="rewrite through graph.fuse/replace/absorb/remove")


def _fingerprint(model: Model) -> tuple[tuple[int, int], ...]:
    """Op and rewrite counts of every graph: what any rewrite through the graph changes."""
    return tuple((len(g), len(g.rewrites)) for g in model.subgraphs)


def _compact(names: list[str]) -> str:
    """Return ``names`` joined with commas, runs of one name written ``name (xN)``."""
    out: list[str] = []
    i = 0
    while i < len(names):
        j = i
        while j < len(names) and names[j] == names[i]:
            j += 1
        out.append(names[i] if j - i == 1 else f"{names[i]} (x{j - i})")
        i = j
    return ", ".join(out)


@dataclass
class PassManager:
    """Run ``passes`` in order, each to its fixed point, sweeping until nothing changes.

    Args:
        passes: the passes, in order.
        max_sweeps: bound on sweeps over the whole sequence.
        max_repeats: bound on consecutive runs of one pass within a sweep.
        check: verify the model and origin conservation after every pass run.
    """

    passes: Sequence[GraphPass]
    max_sweeps: int = 8
    max_repeats: int = 8
    check: bool = True
    runs: list[PassRun] = field(default_factory=list)

    def __call__(self, model: Model) -> PassResult:
        """Run the passes on ``model`` (in place); return ``PassResult(model, modified)``.

        Raises GraphError when ``model`` is invalid before any pass runs, PassError when a
        pass raises or leaves the model invalid.
        """
        if self.check:
            model.verify()
        expected = model_origins(model) if self.check else frozenset()
        history: list[str] = []
        modified = False
        for sweep in range(self.max_sweeps):
            sweep_changed = False
            for p in self.passes:
                for _ in range(self.max_repeats):
                    changed = self._run_one(p, model, sweep, history, expected)
                    sweep_changed |= changed
                    if not changed:
                        break
            modified |= sweep_changed
            if not sweep_changed:
                break
        else:
            log.warning("passes still changing the model after %d sweeps; stopped",
                        self.max_sweeps)
        return PassResult(model, modified)

    def _run_one(self, p: GraphPass, model: Model, sweep: int, history: list[str],
                 expected: frozenset[int]) -> bool:
        for g in model.subgraphs:
            g.current_pass = p.name
        t0 = time.perf_counter()
        before = _fingerprint(model)
        try:
            result = p(model)
            if self.check and (result.modified or _fingerprint(model) != before):
                model.verify()
                check_origins(model, expected)
        except Exception as e:
            ran = _compact(history) if history else "none"
            what = e.what if isinstance(e, ToolkitError) else f"{type(e).__name__}: {e}"
            err = PassError(f"{what} (sweep {sweep + 1}; passes run before it: {ran})",
                            where=f"pass {p.name!r}",
                            fix="compile with passes=[...] without this pass, and report it")
            err.pass_name = p.name  # type: ignore[attr-defined]
            err.previous_passes = list(history)  # type: ignore[attr-defined]
            raise err from e
        finally:
            for g in model.subgraphs:
                g.current_pass = "user"
        history.append(p.name)
        self.runs.append(PassRun(sweep, p.name, result.modified, time.perf_counter() - t0))
        return result.modified
