"""Control-flow ops of the reference runtime: WHILE, IF, CALL and CALL_ONCE over subgraphs.

Their kernels run other subgraphs of the model, so they are made by the interpreter (which
knows the model) rather than taken from the kernel registry: :func:`control_flow_kernel`
returns a kernel ``(op, args) -> outputs`` that runs one :class:`Interpreter` per subgraph it
calls, each made on first use and kept. A WHILE loop that has not ended after
``max_iterations`` iterations raises :class:`~toolkit.errors.RuntimeInputError` instead of
running on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.errors import RuntimeInputError, UnsupportedOpError
from toolkit.ir import Op

if TYPE_CHECKING:
    from toolkit.runtime.interpreter import Interpreter

__all__ = ["CONTROL_FLOW_OPS", "control_flow_kernel", "DEFAULT_MAX_ITERATIONS"]

CONTROL_FLOW_OPS = frozenset({"WHILE", "IF", "CALL", "CALL_ONCE"})
"""Op types whose kernels run other subgraphs."""

DEFAULT_MAX_ITERATIONS = 100_000
"""Iterations after which a WHILE loop is taken not to terminate."""

ControlKernel = Callable[[Op, list[np.ndarray | None]], list[np.ndarray]]


def _index(op: Op, field: str, where: str, n_subgraphs: int) -> int:
    opts = op.options
    value = getattr(opts, field, None) if opts is not None else None
    if value is None or not 0 < int(value) < n_subgraphs:
        raise UnsupportedOpError(
            f"{op.type} has no valid {field} ({value!r}; the model has {n_subgraphs} "
            "subgraphs)", where=where, fix="the model file is damaged: re-convert it")
    return int(value)


def control_flow_kernel(parent: Interpreter, op: Op, where: str) -> ControlKernel:
    """Return the kernel of the control-flow ``op`` of ``parent``'s model (``where`` names
    the op in errors). Sub-interpreters share ``parent``'s binding, thread and iteration
    settings."""
    model = parent.model
    n = len(model.subgraphs)
    subs: dict[int, Interpreter] = {}

    def sub(index: int) -> Interpreter:
        it = subs.get(index)
        if it is None:
            it = subs[index] = parent.sub_interpreter(index)
        return it

    def call(index: int, values: list[np.ndarray | None]) -> list[np.ndarray]:
        it = sub(index)
        if len(values) != len(it.plan.inputs):
            raise RuntimeInputError(
                f"{op.type} passes {len(values)} values to subgraph {index}, which has "
                f"{len(it.plan.inputs)} inputs", where=where,
                fix="give the control-flow op one input per input of the subgraph it calls "
                    "(convert the model again if it came from a converter)")
        return it.call_arrays(values)  # type: ignore[arg-type]

    if op.type == "WHILE":
        cond = _index(op, "condSubgraphIndex", where, n)
        body = _index(op, "bodySubgraphIndex", where, n)
        limit = parent.max_iterations

        def while_kernel(_: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
            values: list[Any] = list(args)
            for i in range(limit + 1):  # ``limit`` runs of the body, then one more check
                flag = call(cond, values)[0]
                if not bool(np.asarray(flag).reshape(-1)[0]):
                    return [np.asarray(v) for v in values]
                if i == limit:
                    break
                values = [np.array(v, copy=True) for v in call(body, values)]
            raise RuntimeInputError(
                f"WHILE did not terminate within {limit} iterations", where=where,
                fix="check the loop bound of the inputs, or raise Interpreter(..., "
                    "max_iterations=N)")

        return while_kernel
    if op.type == "IF":
        then_i = _index(op, "thenSubgraphIndex", where, n)
        else_i = _index(op, "elseSubgraphIndex", where, n)

        def if_kernel(_: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
            flag = args[0]
            if flag is None:
                raise RuntimeInputError("IF has no condition input", where=where,
                                        fix="make input 0 of the IF its boolean condition")
            branch = then_i if bool(np.asarray(flag).reshape(-1)[0]) else else_i
            return [np.array(v, copy=True) for v in call(branch, list(args[1:]))]

        return if_kernel
    if op.type == "CALL":
        target = _index(op, "subgraph", where, n)

        def call_kernel(_: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
            return [np.array(v, copy=True) for v in call(target, list(args))]

        return call_kernel
    if op.type == "CALL_ONCE":
        init = _index(op, "initSubgraphIndex", where, n)
        done: list[bool] = []

        def call_once_kernel(_: Op, args: list[np.ndarray | None]) -> list[np.ndarray]:
            if not done:
                call(init, [])
                done.append(True)
            return []

        return call_once_kernel
    raise UnsupportedOpError(f"{op.type} is not a control-flow op", where=where,
                             fix="only WHILE, IF, CALL and CALL_ONCE run subgraphs")
