"""Straight-line Python for a prepared list of steps: the interpreter's fast path.

Once the interpreter has run a model (checking every output shape and binding each op to a
kernel specialised to its inputs), it generates Python code for the model: a line per step
that calls the step's kernel. An inference is then one call, with no loop, no argument lists
and no dictionary of values, which matters for small models whose kernels take a few
microseconds each. The traced variant reads the clock after each step (events are back to
back, see the interpreter).

Models of up to :data:`LOCALS_LIMIT` steps get one function keeping every value in a local
variable. Larger ones run a plain loop over the steps instead: compiling costs about 10 us
per generated line, more than a large model's inferences would save beside its kernels.

Errors inside a step are passed, with the index of the failing step, to a ``fail``
callback, which raises the error the user sees.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Line", "generate", "LOCALS_LIMIT"]

Mode = Literal["one", "many", "stripe"]

LOCALS_LIMIT = 512
"""Models with at most this many steps get generated code; larger ones a loop."""


@dataclass(frozen=True)
class Line:
    """One step: ``fn`` called on the values of slots ``ins`` (-1: None).

    ``mode`` says what ``fn`` returns: ``"one"`` the step's single output, ``"many"`` a
    sequence of its outputs, ``"stripe"`` the updated buffer of its single output, which it
    receives as its first argument (None before the first stripe of the buffer)."""

    fn: Callable[..., Any]
    ins: tuple[int, ...]
    outs: tuple[int, ...]
    mode: Mode = "one"


Fail = Callable[[int, BaseException], Any]
Runner = Callable[..., Any]


def generate(lines: Sequence[Line], inputs: Sequence[int], consts: dict[int, Any],
             outputs: Sequence[tuple[str, int]], fail: Fail) -> tuple[Runner, Runner]:
    """Return ``(run, run_traced)`` for the steps ``lines``.

    ``run(*arrays)`` takes the graph inputs (slots ``inputs``, in order) and returns the
    outputs as a dict name -> array (``outputs``: (name, slot) pairs; a slot no step, input
    or constant fills gives None). ``run_traced(*arrays, sink, clock)`` does the same and
    records in the :class:`~toolkit.runtime.tracer.StepSink` ``sink``, once the steps are
    done, ``t0`` (``clock()`` read before the first step) and ``t[k + 1]`` (read after step
    ``k``), packing them inline as the sink's documentation shows. ``consts`` maps slots to the
    constant arrays the steps read.
    """
    if len(lines) > LOCALS_LIMIT:
        return _loop(lines, inputs, consts, outputs, fail)
    written = {o for ln in lines for o in ln.outs} | set(inputs)

    def ref(slot: int) -> str:
        if slot in written:
            return f"v{slot}"
        return f"c{slot}" if slot in consts else "None"

    def step(k: int, ln: Line) -> str:
        args = ", ".join(ref(i) for i in ln.ins)
        if ln.mode == "one":
            return f"v{ln.outs[0]} = f{k}({args})"
        if ln.mode == "many":
            return "".join(f"v{o}, " for o in ln.outs) + f"= f{k}({args})"
        o = ln.outs[0]
        return f"v{o} = f{k}(v{o}{', ' if args else ''}{args})"

    stripe_outs = sorted({o for ln in lines if ln.mode == "stripe" for o in ln.outs})
    result = "{" + ", ".join(f"{name!r}: {ref(slot)}" for name, slot in outputs) + "}"
    params = "".join(f"a{k}, " for k in range(len(inputs)))
    start = [f"v{slot} = a{k}" for k, slot in enumerate(inputs)]
    start += [f"v{o} = None" for o in stripe_outs]
    cells = [f"f{k}" for k in range(len(lines))] + [f"c{s}" for s in sorted(consts)]
    src = ["def _factory(F, C, fail, step_at, StructError):"]
    if cells:
        src.append(f"    ({', '.join(cells)},) = (*F, *C)")
    step_at: dict[int, int] = {}  # source line -> step, to name the step that failed
    for traced in (False, True):
        src.append(f"    def run{'_traced' if traced else ''}({params}"
                   f"{'sink, clock' if traced else ''}):")
        src.append("        try:")
        src += ["            " + line for line in start]
        if traced:
            src.append("            _t0 = clock()")
        for k, ln in enumerate(lines):
            src.append("            " + step(k, ln))
            step_at[len(src)] = k
            if traced:
                src.append(f"            _t{k + 1} = clock()")
        src += ["            pass", "        except Exception as e:",
                "            fail(step_at.get(e.__traceback__.tb_lineno, -1), e)"]
        if traced:
            times = ", ".join(f"_t{k}" for k in range(len(lines) + 1))
            src += ["        st = sink.state",
                    "        o = st[0]",
                    "        try:",
                    f"            sink.pack_into(st[1], o, sink.id, {times})",
                    "            st[0] = o + sink.size",
                    "        except StructError:",
                    f"            sink.spill({times})"]
        src.append(f"        return {result}")
    src.append("    return run, run_traced")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(src), "<toolkit.runtime.codegen>", "exec"), namespace)
    return namespace["_factory"]([ln.fn for ln in lines], [consts[s] for s in sorted(consts)],
                                 fail, step_at, struct.error)


def _loop(lines: Sequence[Line], inputs: Sequence[int], consts: dict[int, Any],
          outputs: Sequence[tuple[str, int]], fail: Fail) -> tuple[Runner, Runner]:
    """``generate`` for large models: a loop over the steps on one list of values."""
    slots = [*(o for ln in lines for o in ln.outs), *inputs, *consts, *(s for _, s in outputs)]
    template: list[Any] = [None] * (max(slots, default=-1) + 2)  # the last slot stays None
    for s, c in consts.items():
        template[s] = c
    steps = [(ln.fn, [i if i >= 0 else len(template) - 1 for i in ln.ins], ln.outs, ln.mode)
             for ln in lines]
    names = list(outputs)

    def execute(arrays: Sequence[Any], tick: Callable[[], Any] | None) -> list[Any]:
        v = template.copy()
        for s, a in zip(inputs, arrays):
            v[s] = a
        i = -1
        try:
            for i in range(len(steps)):
                fn, ins, outs, mode = steps[i]
                if mode == "one":
                    v[outs[0]] = fn(*[v[j] for j in ins])
                elif mode == "many":
                    for o, r in zip(outs, fn(*[v[j] for j in ins]), strict=True):
                        v[o] = r
                else:
                    v[outs[0]] = fn(v[outs[0]], *[v[j] for j in ins])
                if tick is not None:
                    tick()
        except Exception as e:
            fail(i, e)
        return v

    def run(*arrays: Any) -> dict[str, Any]:
        v = execute(arrays, None)
        return {name: v[s] for name, s in names}

    def run_traced(*a: Any) -> dict[str, Any]:
        *arrays, sink, clock = a
        times = [clock()]
        ap = times.append
        v = execute(arrays, lambda: ap(clock()))
        sink.record(*times)
        return {name: v[s] for name, s in names}

    return run, run_traced
