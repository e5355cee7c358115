"""The reference runtime: a NumPy interpreter for plain, compiled and partitioned models.

It plays the part of the "interpreter" target of the nnc design: it walks the ops of a model
(or the command queue of a compiled model) in order, runs a NumPy kernel for each, and, when
asked, records one trace event per op (or per command) with the event tracer.
"""

from __future__ import annotations

import copy as _copy
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit.compiler.compiled import model_and_commands
from toolkit.errors import RuntimeInputError, ToolkitError, UnsupportedOpError
from toolkit.ir import Op, Tensor
from toolkit.runtime.codegen import Line, generate
from toolkit.runtime.control_flow import (
    CONTROL_FLOW_OPS,
    DEFAULT_MAX_ITERATIONS,
    control_flow_kernel,
)
from toolkit.runtime.kernels import bind_kernel, get_kernel
from toolkit.runtime.kernels.common import quiet
from toolkit.runtime.result import RunResult
from toolkit.runtime.stripes import stripe_step
from toolkit.runtime.threads import limit_blas_threads
from toolkit.runtime.tracer import EventTracer
from toolkit.util.args import check_bool

__all__ = ["run_model", "Interpreter", "RunResult"]


@dataclass
class _Step:
    kernel: Any
    op: Op
    ins: list[int]
    outs: list[int]
    key: int
    args: dict[str, Any]
    rows: tuple[int, int] | None = None  # output rows written by a stripe (axis 1)
    prepare: Any = None  # callable(args) -> args for stripes
    full_shape: tuple[int, ...] = ()


@dataclass
class _Plan:
    steps: list[_Step]
    slot: dict[Tensor, int]
    consts: list[tuple[int, np.ndarray]]
    inputs: list[Tensor]
    outputs: list[Tensor]
    key_name: str
    out_buffers: dict[int, Tensor] = field(default_factory=dict)


class Interpreter:
    """Prepared execution of one model (or compiled model's command queue).

    Build once, call :meth:`invoke` many times; the plan (kernels, tensor slots, stripes) is
    made in the constructor so that per-inference overhead is one Python call per step.

    Args:
        model: a Model or a CompiledModel.
        bind: on a model whose shapes are all static, bind every op to a kernel specialised
            to its input shapes (see :mod:`toolkit.runtime.kernels.binders`; the results are
            the same bit for bit). False calls each op's kernel as it is, as for a model with
            dynamic shapes.
        threads: limit the BLAS libraries NumPy uses to this many threads (see
            :func:`~toolkit.runtime.threads.limit_blas_threads`; the limit is process-wide
            and stays after the interpreter). Default 1, so that timings are reproducible on
            a busy machine; None leaves the current limit.
        subgraph: the subgraph to run (0, the main graph, unless a control-flow op runs
            another).
        max_iterations: a WHILE loop that has not ended after this many iterations raises
            :class:`~toolkit.errors.RuntimeInputError`.
    """

    def __init__(self, model: Any, *, bind: bool = True, threads: int | None = 1,
                 subgraph: int = 0, max_iterations: int = DEFAULT_MAX_ITERATIONS) -> None:
        self.model, commands = model_and_commands(model, "the reference runtime")
        if not 0 <= subgraph < len(self.model.subgraphs):
            raise ToolkitError(f"the model has no subgraph {subgraph}",
                               fix=f"pick one of 0..{len(self.model.subgraphs) - 1}")
        if subgraph and commands is not None:
            raise ToolkitError("a compiled model's command queue runs subgraph 0 only",
                               fix="run compiled.model with subgraph=N")
        self.subgraph = subgraph
        self.bind = bind
        self.threads = threads
        self.max_iterations = int(max_iterations)
        limit_blas_threads(threads)
        g = self.model.subgraphs[subgraph]
        slot: dict[Tensor, int] = {t: i for i, t in enumerate(g.tensors)}
        consts = [(slot[t], t.data) for t in g.tensors if t.data is not None]
        steps: list[_Step] = []
        if commands is None:
            for i, op in enumerate(g.ops):
                steps.append(_Step(self._kernel(op, i), op, self._slots(op.inputs, slot),
                                   [slot[t] for t in op.outputs], i,
                                   {"op_index": i, "op_type": op.kind, "op_name": op.name,
                                    "key_kind": "op_index"}))
            key_name = "op_index"
        else:
            op_index = {op: i for i, op in enumerate(g.ops)}
            for c in commands:
                op = c.op
                step = _Step(self._kernel(op, op_index[op]), op, self._slots(op.inputs, slot),
                             [slot[t] for t in op.outputs], int(c.command_id),
                             {"command_id": int(c.command_id), "optimised_id": op_index[op],
                              "stripe": int(c.stripe), "op_type": op.kind, "op_name": op.name,
                              "key_kind": "command_id"})
                if int(c.stripes) > 1:
                    step.rows = (int(c.row_start), int(c.row_end))
                    step.full_shape = op.outputs[0].shape
                    step.prepare, step.kernel, step.op = stripe_step(op, step.rows, step.kernel)
                steps.append(step)
            key_name = "command_id"
        self.plan = _Plan(steps, slot, consts, list(g.inputs), list(g.outputs), key_name)
        # every shape fixed: kernels may be bound to the shapes of the first inference
        self._static = bind and all(
            t.shape_signature is None or all(d >= 0 for d in t.shape_signature)
            for t in g.tensors)
        self._fast: tuple[Any, Any] | None = None
        self._events = ([s.key for s in steps], [s.args for s in steps])  # keys, args
        self._sink: tuple[Any, bool, Any, Any] | None = None  # tracer, new_run, sink, clock
        self._bound: list[bool] | None = None
        self._lines: list[Line] | None = None
        self._input_specs = [(t.name, t.dtype, tuple(t.shape)) for t in g.inputs]
        self._output_order = [t.name for t in g.outputs]
        self._arg_specs: list[tuple[Any, tuple[int, ...]]] | None = None
        self._busy = threading.Lock()  # held by the inference running

    @staticmethod
    def _slots(ts: Sequence[Tensor | None], slot: dict[Tensor, int]) -> list[int]:
        return [-1 if t is None else slot[t] for t in ts]

    def _where(self, op: Op, index: int) -> str:
        """Where an op is, for error messages: subgraph, op index, kind and name."""
        return f"subgraph {self.subgraph} op {index} ({op.kind} {op.name!r})"

    def _kernel(self, op: Op, index: int) -> Any:
        """The kernel of op ``index`` (an UnsupportedOpError naming it when there is none)."""
        where = self._where(op, index)
        if op.type in CONTROL_FLOW_OPS:
            return control_flow_kernel(self, op, where)
        try:
            return get_kernel(op)
        except UnsupportedOpError as e:
            raise UnsupportedOpError(e.what, where=where, fix=e.fix) from None

    @staticmethod
    def _op_static(op: Op) -> bool:
        """True when every input and output of ``op`` has a static shape (in a graph with
        dynamic tensors elsewhere, such an op still sees the same shapes every inference)."""
        return all(t is None or not t.is_dynamic for t in (*op.inputs, *op.outputs))

    def sub_interpreter(self, subgraph: int) -> Interpreter:
        """An interpreter of another subgraph of this model with the same settings (for the
        control-flow ops, see :mod:`.control_flow`)."""
        return Interpreter(self.model, bind=self.bind, threads=None, subgraph=subgraph,
                           max_iterations=self.max_iterations)

    # ------------------------------------------------------------------ api
    @property
    def bound(self) -> list[bool] | None:
        """Per step, whether it runs a kernel bound to its input shapes (see ``bind``);
        None before the first inference, which binds them."""
        return self._bound

    @property
    def input_names(self) -> list[str]:
        """Names of the graph inputs, in order."""
        return [t.name for t in self.plan.inputs]

    @property
    def output_names(self) -> list[str]:
        """Names of the graph outputs, in order."""
        return [t.name for t in self.plan.outputs]

    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Return random inputs of the right shapes and dtypes (float in [-1, 1))."""
        rng = np.random.default_rng(seed)
        out = {}
        for t in self.plan.inputs:
            dt = t.dtype
            if dt is None:
                raise RuntimeInputError(f"input {t.name!r} has type {t.type_name}, which the "
                                        "reference runtime cannot make random values of",
                                        where=f"input {t.name!r}",
                                        fix="pass the inputs yourself (a dict name -> array)")
            if np.issubdtype(dt, np.floating):
                out[t.name] = rng.uniform(-1, 1, t.shape).astype(dt)
            elif dt == np.bool_:
                out[t.name] = rng.integers(0, 2, t.shape).astype(dt)
            else:
                info = np.iinfo(dt)
                out[t.name] = rng.integers(max(info.min, -128), min(info.max, 127) + 1,
                                           t.shape, endpoint=False).astype(dt)
        return out

    def _bind(self, inputs: Any) -> list[np.ndarray]:
        """The input arrays in graph-input order, checked, C-contiguous."""
        specs = self._input_specs
        if type(inputs) is dict and len(inputs) == len(specs):
            arrays = []
            for name, dtype, shape in specs:  # the usual case, in few operations
                a = inputs.get(name)
                if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape \
                        or not a.flags.c_contiguous:
                    break
                arrays.append(a)
            else:
                return arrays
        return self._bind_checked(inputs)

    def _bind_checked(self, inputs: Any) -> list[np.ndarray]:
        ins = self.plan.inputs
        if inputs is None:
            raise RuntimeInputError("no inputs given",
                                    fix=f"pass a dict with keys {[t.name for t in ins]}")
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - {t.name for t in ins})
            if unknown:
                raise RuntimeInputError(
                    f"unknown input name(s) {unknown}", where="inputs",
                    fix=f"the model's inputs are {[t.name for t in ins]}")
            missing = [t.name for t in ins if t.name not in inputs]
            if missing:
                raise RuntimeInputError(f"missing input(s) {missing}", where="inputs",
                                        fix="pass one array per model input, by name "
                                            "(model.graph.inputs lists them)")
            arrays = [inputs[t.name] for t in ins]
        else:
            arrays = list(inputs)
            if len(arrays) != len(ins):
                raise RuntimeInputError(f"got {len(arrays)} input(s), the model has {len(ins)}",
                                        fix=f"inputs are {[t.name for t in ins]}")
        out = []
        for t, a in zip(ins, arrays):
            a = np.asarray(a)
            if a.dtype != t.dtype:
                raise RuntimeInputError(
                    f"input {t.name!r} has dtype {a.dtype}, the model expects {t.dtype}",
                    where=f"input {t.name!r}", fix=f"cast with .astype(np.{t.dtype})")
            sig = t.shape_signature or t.shape
            if len(a.shape) != len(t.shape) or any(
                    d != e and s >= 0 for d, e, s in zip(a.shape, t.shape, sig)):
                raise RuntimeInputError(
                    f"input {t.name!r} has shape {list(a.shape)}, the model expects "
                    f"{list(sig)}", where=f"input {t.name!r}",
                    fix="give the input the model's shape (-1 in the expected shape is free)")
            out.append(a if a.flags.c_contiguous else a.copy())  # 0-d stays 0-d
        return out

    def invoke(self, inputs: Any, tracer: EventTracer | None = None, *,
               new_run: bool = False) -> dict[str, np.ndarray]:
        """Run one inference; return outputs by name. Records one event per step in
        ``tracer`` when given (key: op index, or command id for a compiled model), as a new
        run of the tracer with ``new_run=True`` (as ``tracer.new_run()`` before the call).

        Events are back to back: each runs from the end of the previous step (or the start of
        the inference) to the end of its own, so it covers gathering the step's inputs, the
        kernel and storing its outputs, and one clock read per step is all tracing costs
        (the readings go to the tracer's :meth:`~.EventTracer.step_sink`, packed inline).

        The first inference checks every output shape and binds each op to a kernel
        specialised to its inputs; the second generates straight-line code for the steps
        (see :mod:`.codegen`), which it and later ones run. An interpreter must not run in
        two threads at once: a call made while another runs raises a ToolkitError."""
        if not self._busy.acquire(blocking=False):
            raise ToolkitError("this Interpreter is running an inference in another thread",
                               where="Interpreter.invoke", fix="give each thread its own "
                               "Interpreter, or serialise the calls with a lock")
        try:
            return self._invoke(inputs, tracer, new_run)
        finally:
            self._busy.release()

    def _invoke(self, inputs: Any, tracer: EventTracer | None,
                new_run: bool) -> dict[str, np.ndarray]:
        arrays = self._bind(inputs)
        fast = self._fast
        if fast is None:
            if self._lines is None:
                if new_run and tracer is not None:
                    tracer.new_run()
                return quiet(self._first_invoke, arrays, tracer)
            fast = self._fast = self._generate(self._lines)
        if tracer is None:
            return quiet(fast[0], *arrays)
        sink = self._sink
        if sink is None or sink[0] is not tracer or sink[1] != new_run:
            sink = self._sink = (tracer, new_run,
                                 tracer.step_sink(*self._events, new_run=new_run), tracer.clock)
        return quiet(fast[1], *arrays, sink[2], sink[3])

    def call_arrays(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run one inference on arrays in input order; return the outputs in output order.

        The entry point of the control-flow ops, which call a subgraph once per loop
        iteration: after the first call, inputs of the shapes and dtypes of that call go
        straight to the generated code (other inputs take :meth:`invoke`'s checks)."""
        names = self._output_order
        fast = self._fast
        if fast is not None and self._arg_specs == [(a.dtype, a.shape) for a in arrays]:
            out = quiet(fast[0], *arrays)
        else:
            out = self.invoke(list(arrays))
            if self._fast is not None or self._lines is not None:
                self._arg_specs = [(a.dtype, a.shape) for a in arrays]
        return [out[n] for n in names]

    def _step(self, s: _Step, vals: list[Any]) -> Line:
        """Run one step on the values by slot, checking its outputs (the step-by-step runs:
        the first inference and the observed one; later inferences run generated code).
        Returns the step's bound line; a kernel's failure is raised located at the step."""
        args = [None if i < 0 else vals[i] for i in s.ins]
        try:
            line = self._line(s, args)
            if line.mode == "stripe":
                vals[s.outs[0]] = line.fn(vals[s.outs[0]], *args)
            else:
                res = [line.fn(*args)] if line.mode == "one" else line.fn(*args)
                self._check(s, res)
                for i, r in zip(s.outs, res):
                    vals[i] = r
        except ToolkitError as e:
            raise self._located(s, e) from e
        except Exception as e:  # a kernel bug or an input the kernel cannot take
            raise self._step_error(s, e) from e
        return line

    def _first_invoke(self, arrays: list[np.ndarray],
                      tracer: EventTracer | None) -> dict[str, np.ndarray]:
        """Run step by step, checking output shapes and binding kernels, and keep the
        steps' lines for the code the next inference generates."""
        plan = self.plan
        vals: list[Any] = [None] * len(plan.slot)
        for i, a in plan.consts:
            vals[i] = a
        for t, a in zip(plan.inputs, arrays):
            vals[plan.slot[t]] = a
        lines: list[Line] = []
        if tracer is not None:
            clock = tracer.clock
            t0 = clock()
        for s in plan.steps:
            line = self._step(s, vals)
            lines.append(line)
            if tracer is not None:
                t1 = clock()
                tracer.record(s.key, t0, t1, s.args)
                t0 = t1
        out = {t.name: vals[plan.slot[t]] for t in plan.outputs}
        self._bound = [ln.mode == "one" for ln in lines]
        self._lines = lines
        return out

    def invoke_observed(self, inputs: Any,
                        observe: Callable[[Tensor, np.ndarray], None]) -> dict[str, np.ndarray]:
        """Run one inference step by step and call ``observe(tensor, value)`` once per graph
        input and per op output, as soon as its value is complete (a striped output after its
        last stripe), in execution order. A value no later step reads is dropped once
        observed, so only the live tensors stay in memory. Returns the outputs by name."""
        if not self._busy.acquire(blocking=False):
            raise ToolkitError("this Interpreter is running an inference in another thread",
                               where="Interpreter.invoke_observed",
                               fix="give each thread its own Interpreter")
        try:
            return quiet(self._observed, self._bind(inputs), observe)
        finally:
            self._busy.release()

    def _observed(self, arrays: list[np.ndarray],
                  observe: Callable[[Tensor, np.ndarray], None]) -> dict[str, np.ndarray]:
        plan = self.plan
        tensor_of = {i: t for t, i in plan.slot.items()}
        last_write: dict[int, int] = {}
        last_read: dict[int, int] = {}
        for k, s in enumerate(plan.steps):
            last_write.update((o, k) for o in s.outs)
            last_read.update((i, k) for i in s.ins if i >= 0)
        keep = {plan.slot[t] for t in plan.outputs} | {i for i, _ in plan.consts}
        vals: list[Any] = [None] * len(plan.slot)
        for i, a in plan.consts:
            vals[i] = a
        for t, a in zip(plan.inputs, arrays):
            vals[plan.slot[t]] = a
            observe(t, a)
        for k, s in enumerate(plan.steps):
            self._step(s, vals)
            for o in s.outs:
                if last_write[o] == k:
                    observe(tensor_of[o], vals[o])
            for i in {*s.ins, *s.outs}:
                if i >= 0 and i not in keep and last_read.get(i, -1) <= k \
                        and last_write.get(i, -1) <= k:
                    vals[i] = None
        return {t.name: vals[plan.slot[t]] for t in plan.outputs}

    def _generate(self, lines: list[Line]) -> tuple[Any, Any]:
        plan = self.plan
        return generate(lines, [plan.slot[t] for t in plan.inputs], dict(plan.consts),
                        [(t.name, plan.slot[t]) for t in plan.outputs], self._fail)

    def _line(self, s: _Step, args: list[Any]) -> Line:
        """The generated-code line of step ``s`` (first run, with its real inputs)."""
        ins, outs = tuple(s.ins), tuple(s.outs)
        kernel, op = s.kernel, s.op
        if s.rows is not None:
            prepare, full_shape = s.prepare, s.full_shape
            r0, r1 = s.rows

            def stripe(buf: np.ndarray | None, *a: Any) -> np.ndarray:
                res = kernel(op, prepare(list(a)))
                if buf is None:
                    buf = np.empty(full_shape, dtype=res[0].dtype)
                buf[:, r0:r1] = res[0]
                return buf

            return Line(stripe, ins, outs, "stripe")
        if self._static or (self.bind and self._op_static(op)):
            bound = bind_kernel(op, args)
            if bound is not None:
                return Line(bound, ins, outs, "one")

        def generic(*a: Any) -> list[np.ndarray]:
            return kernel(op, list(a))

        return Line(generic, ins, outs, "many")

    def _step_index(self, s: _Step) -> int:
        return int(s.args.get("op_index", s.args.get("optimised_id", -1)))

    def _step_error(self, s: _Step, e: BaseException) -> RuntimeInputError:
        first = s.op.outputs[0].name if s.op.outputs else "<none>"
        return RuntimeInputError(
            f"{s.op.kind} failed: {type(e).__name__}: {e}",
            where=f"subgraph {self.subgraph} op {self._step_index(s)} ({s.op.kind} "
                  f"{s.op.name!r}, output tensor {first!r})",
            fix="check that the model runs in LiteRT with the same inputs; if it does, this "
                "is a bug of the reference runtime: report it with the model")

    def _located(self, s: _Step, e: ToolkitError) -> ToolkitError:
        """``e`` (raised by step ``s``) with the step's subgraph and op index in its where
        (as it is when it already names a subgraph)."""
        if e.where is not None and e.where.startswith("subgraph "):
            return e
        where = self._where(s.op, self._step_index(s))
        if e.where:
            where = f"{where}: {e.where}"
        located = _copy.copy(e)  # same class and attributes, the new location
        ToolkitError.__init__(located, e.what, where=where, fix=e.fix)
        return located

    def _fail(self, index: int, e: BaseException) -> None:
        """Raise the error of step ``index`` of the generated code failing with ``e``."""
        if not 0 <= index < len(self.plan.steps):
            raise e
        if isinstance(e, ToolkitError):
            raise self._located(self.plan.steps[index], e) from e
        raise self._step_error(self.plan.steps[index], e) from e

    def _check(self, s: _Step, res: Sequence[np.ndarray]) -> None:
        if len(res) != len(s.outs):
            raise RuntimeInputError(f"{s.op.kind} returned {len(res)} outputs, expected "
                                    f"{len(s.outs)}", where=f"op {s.op.name!r}",
                                    fix="give the op as many output tensors as the operator "
                                        "has (see LiteRT's builtin op reference)")
        for t, r in zip(s.op.outputs, res):
            dynamic = t.shape_signature is not None and any(d < 0 for d in t.shape_signature)
            if not dynamic and tuple(r.shape) != t.shape:
                raise RuntimeInputError(
                    f"{s.op.kind} produced shape {list(r.shape)} for tensor {t.name!r}, the "
                    f"model declares {list(t.shape)}", where=f"op {s.op.name!r}",
                    fix="the model's static shapes disagree with its inputs")


def run_model(model: Any, inputs: Any = None, *, trace: bool = False, repeat: int = 1,
              warmup: int = 0, tracer: EventTracer | None = None,
              threads: int | None = 1) -> RunResult:
    """Run a Model or a CompiledModel (command by command) with the reference runtime.

    ``inputs`` is a dict name -> array, a list in input order, or one array; ``None`` uses
    random inputs (seed 0). ``warmup`` inferences run first, untraced; then ``repeat``
    inferences, each a run of the trace when ``trace=True`` (or a ``tracer`` is given).
    ``threads`` limits NumPy's BLAS threads (see :class:`Interpreter`).

    Returns:
        A :class:`~toolkit.runtime.result.RunResult`: the outputs of the last inference by
        name, and the :class:`EventTracer` (``None`` when not traced).
    """
    check_bool(trace, "trace", "run")
    if getattr(model, "format", None) == "onnx":  # an ONNX model of load_onnx: lowered
        from toolkit.importers.onnx_lower import lowered_for

        model = lowered_for(model, "tk.run", inputs, allow_reference=True)
    it = Interpreter(model, threads=threads)
    if inputs is None:
        inputs = it.random_inputs()
    if trace and tracer is None:
        tracer = EventTracer()
    out: dict[str, np.ndarray] = {}
    from toolkit.progress import progress

    for _ in progress(range(warmup), desc="warm-up inferences", unit="run"):
        out = it.invoke(inputs)
    for _ in progress(range(repeat), desc="inferences", unit="run"):
        out = it.invoke(inputs, tracer, new_run=True)
    return RunResult(out, tracer)
