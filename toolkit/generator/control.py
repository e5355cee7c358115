"""Control flow in generated code: WHILE, IF, CALL and CALL_ONCE over the model's other
subgraphs.

The ops of a subgraph a control-flow op calls are generated inline, inside the block of the
op's step, so the artifact stays one function (``doInference``) over one arena:

* **WHILE** copies its inputs into its outputs, which are the loop-carried buffers; the cond
  and body subgraphs read them in place (their inputs are aliases of the carried buffers).
  Each iteration runs the cond's ops, reads its bool output, and, while true, runs the
  body's ops and copies the body's outputs back into the carried buffers (a body output that
  is another body input goes through a staging buffer first, so swaps stay right). A loop
  still running after ``max_iterations`` body runs throws, as the reference runtime raises.
* **IF** reads its bool input and runs the then or else subgraph, whose inputs alias the IF's
  inputs, then copies the branch's outputs into its own. **CALL** is an IF without a
  choice; **CALL_ONCE** runs its init subgraph in the first inference of the model object.

Arena planning (:func:`plan`) lays every op of the main graph and of the subgraphs it calls on
one timeline: a control-flow op takes a span (copy-in, the cond's ops, the body's ops,
copy-back), its carried buffers live over the whole span, and a subgraph's temporaries over
their positions inside it. Every iteration runs the same positions in order and nothing but
the carried buffers outlives an iteration, so two tensors whose spans do not meet never hold
values at the same time.

Shapes are fixed at generation time: a carried tensor whose shape differs between the loop's
input, the body's output or the cond's and body's inputs is refused. The one dynamic shape the
TF converter writes inside RNN loop bodies is handled: a SLICE whose begin or size is computed
at run time (the ``TensorListSetItem`` idiom) writes into a buffer as large as its input and
records its run-time shape, which the CONCATENATION that reads it uses (checking the inputs
fill the output exactly before copying). Any other op reading such a tensor is refused.

Tracing mirrors the reference runtime: the control-flow op is one step of the sequence, whose
event covers its whole loop or branch; the ops inside it have no events of their own (the
reference runtime runs them untraced in a sub-interpreter), so nothing counts twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from toolkit.errors import UnsupportedOpError
from toolkit.generator.analysis import FREE_DIMS_FIX, Analysis, Step, nbytes
from toolkit.generator.ops import Emitter, emit_step
from toolkit.generator.params import ParamsBuilder
from toolkit.ir import Graph, Model, Op, Tensor

__all__ = ["CONTROL_OPS", "ControlEmitter", "ControlPlan", "Region", "ControlOp", "emit",
           "make_emitter", "plan"]

CONTROL_OPS = frozenset({"WHILE", "IF", "CALL", "CALL_ONCE"})
"""Control-flow op types the generator emits."""

#: WHILE iterations after which the generated loop throws (the reference runtime's default)
MAX_ITERATIONS = 100_000
_MAX_RANK = 6


@dataclass
class Region:
    """The ops of one subgraph a control-flow op runs, as steps on the arena's timeline."""

    index: int        # subgraph index in the model
    graph: Graph
    steps: list[Step]


@dataclass
class ControlOp:
    """A WHILE (regions: cond, body) or IF (regions: then, else) and its span."""

    op: Op
    start: int
    end: int
    regions: list[Region]
    stages: dict[int, Tensor] = field(default_factory=dict)  # WHILE: output index -> stage


@dataclass
class ControlPlan:
    """Where the tensors of the called subgraphs live and how the control-flow ops run.

    ``lifetimes`` are ``[first, last]`` positions of every temporary (main graph and
    subgraphs, staging buffers included) on the timeline; ``sizes`` their bytes;
    ``aliases`` maps a subgraph input to the tensor it reads; ``dynamic`` maps a tensor of
    run-time shape to its capacity in bytes."""

    controls: dict[Op, ControlOp]
    lifetimes: dict[Tensor, list[int]]
    sizes: dict[Tensor, int]
    aliases: dict[Tensor, Tensor]
    dynamic: dict[Tensor, int]


def _refuse(op: Op, what: str, fix: str) -> UnsupportedOpError:
    return UnsupportedOpError(what, where=f"op {op.kind} {op.name!r}", fix=fix)


def _subgraph_index(op: Op, name: str, n: int) -> int:
    opts = op.options
    value = getattr(opts, name, None) if opts is not None else None
    if value is None or not 0 < int(value) < n:
        raise _refuse(op, f"{op.type} has no valid {name} ({value!r}; the model has {n} "
                          "subgraphs)", "the model file is damaged: re-convert it")
    return int(value)


def _is_dynamic(t: Tensor) -> bool:
    return t.shape_signature is not None and any(d < 0 for d in t.shape_signature)


def _same_type(op: Op, what: str, ts: list[Tensor]) -> None:
    """Refuse unless every tensor of ``ts`` has the first's static shape and dtype."""
    first = ts[0]
    for t in ts:
        if _is_dynamic(t) or t.shape != first.shape or t.dtype != first.dtype:
            seen = ", ".join(f"{u.name!r} {u.dtype} {list(u.shape_signature or u.shape)}"
                             for u in ts)
            raise _refuse(op, f"{what} changes shape or type, or is not static ({seen}); "
                              "shapes are fixed at generation time",
                          "fix the loop's shapes (e.g. a fixed sequence length and batch) "
                          "before generating code, or run the model with the reference "
                          "runtime")


class _Planner:
    """Walks the main sequence and the subgraphs it calls, numbering positions."""

    def __init__(self, model: Model, special: set[Tensor]) -> None:
        self.model = model
        self.special = special
        self.pos = 0
        self.life: dict[Tensor, list[int]] = {}
        self.sizes: dict[Tensor, int] = {}
        self.aliases: dict[Tensor, Tensor] = {}
        self.dynamic: dict[Tensor, int] = {}
        self.controls: dict[Op, ControlOp] = {}
        self.claimed: dict[int, Op] = {}

    def next(self) -> int:
        self.pos += 1
        return self.pos - 1

    def resolve(self, t: Tensor) -> Tensor:
        while t in self.aliases:
            t = self.aliases[t]
        return t

    def write(self, t: Tensor | None, p: int, size: int | None = None) -> None:
        if t is None or t.data is not None or t in self.special or t in self.aliases:
            return
        span = self.life.setdefault(t, [p, p])
        span[0], span[1] = min(span[0], p), max(span[1], p)
        if t not in self.sizes:
            self.sizes[t] = nbytes(t) if size is None else size

    def read(self, t: Tensor | None, p: int) -> None:
        if t is None:
            return
        t = self.resolve(t)
        if t in self.life:
            self.life[t][1] = max(self.life[t][1], p)

    def op(self, op: Op) -> None:
        """Number one op (a control-flow op takes a span)."""
        if op.type in CONTROL_OPS:
            self.control(op)
            return
        p = self.next()
        for u in op.inputs:
            self.read(u, p)
        for t in op.outputs:
            self.write(t, p, self._dynamic_size(op, t))

    def _dynamic_size(self, op: Op, t: Tensor) -> int | None:
        """Capacity of an output of run-time shape (None for a static one)."""
        if not _is_dynamic(t):
            return None
        x = op.inputs[0] if op.inputs else None
        if op.type != "SLICE" or x is None or _is_dynamic(x):
            raise _refuse(op, f"output {t.name!r} has a run-time shape "
                              f"{list(t.shape_signature or ())}; the generator takes run-time "
                              "shapes only from a SLICE of a static tensor into a "
                              "CONCATENATION", FREE_DIMS_FIX)
        if len(x.shape) > _MAX_RANK:
            raise _refuse(op, f"SLICE of rank {len(x.shape)} (at most {_MAX_RANK})",
                          "reshape to fewer dimensions")
        self.dynamic[t] = nbytes(x)
        return nbytes(x)

    def claim(self, op: Op, index: int) -> Graph:
        if index in self.claimed:
            raise _refuse(op, f"subgraph {index} is also run by {self.claimed[index].kind} "
                              f"{self.claimed[index].name!r}; the generator gives each "
                              "subgraph one caller", "duplicate the subgraph for each caller")
        self.claimed[index] = op
        g = self.model.subgraphs[index]
        for t in g.inputs:
            if _is_dynamic(t):
                raise _refuse(op, f"subgraph {index} input {t.name!r} has a run-time shape",
                              FREE_DIMS_FIX)
        return g

    def region(self, index: int, g: Graph) -> Region:
        steps = []
        for i, op in enumerate(g.ops):
            start = self.pos
            self.op(op)
            steps.append(Step(start, -1, op, i, {}))
        return Region(index, g, steps)

    def control(self, op: Op) -> None:
        n = len(self.model.subgraphs)
        if any(u is None for u in op.inputs):
            raise _refuse(op, f"{op.type} with an omitted input", "re-convert the model")
        if op.type == "WHILE":
            self._while(op, _subgraph_index(op, "condSubgraphIndex", n),
                        _subgraph_index(op, "bodySubgraphIndex", n))
        elif op.type == "IF":
            self._if(op, _subgraph_index(op, "thenSubgraphIndex", n),
                     _subgraph_index(op, "elseSubgraphIndex", n))
        elif op.type == "CALL":
            self._call(op, _subgraph_index(op, "subgraph", n))
        else:
            self._call_once(op, _subgraph_index(op, "initSubgraphIndex", n))

    def _while(self, op: Op, cond_i: int, body_i: int) -> None:
        cond, body = self.claim(op, cond_i), self.claim(op, body_i)
        ins = [u for u in op.inputs if u is not None]
        k = len(ins)
        if not len(op.outputs) == len(cond.inputs) == len(body.inputs) == len(body.outputs) \
                == k or len(cond.outputs) != 1:
            raise _refuse(op, f"WHILE of {k} inputs, {len(op.outputs)} outputs; cond "
                              f"{len(cond.inputs)} inputs, {len(cond.outputs)} outputs; body "
                              f"{len(body.inputs)} inputs, {len(body.outputs)} outputs",
                          "the model file is damaged: re-convert it")
        for j in range(k):
            _same_type(op, f"loop-carried value {j}", [ins[j], op.outputs[j], cond.inputs[j],
                                                       body.inputs[j], body.outputs[j]])
        flag = cond.outputs[0]
        if flag.dtype != np.dtype(np.bool_) or int(np.prod(flag.shape)) != 1:
            raise _refuse(op, f"cond output {flag.name!r} is {flag.dtype} "
                              f"{list(flag.shape)}, not one bool", "re-convert the model")
        start = self.next()
        for u in ins:
            self.read(u, start)
        for t in op.outputs:
            self.write(t, start)
        for j, carried in enumerate(op.outputs):
            self.aliases[cond.inputs[j]] = carried
            self.aliases[body.inputs[j]] = carried
        regions = [self.region(cond_i, cond)]
        self.read(flag, self.next())
        regions.append(self.region(body_i, body))
        end = self.next()
        c = ControlOp(op, start, end, regions)
        for j, src in enumerate(body.outputs):
            self.read(src, end)
            r = self.resolve(src)
            if r in op.outputs and r is not op.outputs[j]:  # another carried value: stage it
                stage = Tensor(f"{op.outputs[j].name}/stage", op.outputs[j].shape,
                               op.outputs[j].type_code)
                c.stages[j] = stage
                self.write(stage, end)
        for t in op.outputs:
            self.write(t, end)
        self.controls[op] = c

    def _if(self, op: Op, then_i: int, else_i: int) -> None:
        branches = [self.claim(op, then_i), self.claim(op, else_i)]
        flag, args = op.inputs[0], [u for u in op.inputs[1:] if u is not None]
        assert flag is not None
        if flag.dtype != np.dtype(np.bool_) or int(np.prod(flag.shape)) != 1:
            raise _refuse(op, f"condition {flag.name!r} is {flag.dtype} {list(flag.shape)}, "
                              "not one bool", "re-convert the model")
        for g in branches:
            if len(g.inputs) != len(args) or len(g.outputs) != len(op.outputs):
                raise _refuse(op, f"IF of {len(args)} arguments and {len(op.outputs)} outputs "
                                  f"runs subgraph {g.name!r} of {len(g.inputs)} inputs and "
                                  f"{len(g.outputs)} outputs", "re-convert the model")
        for j, a in enumerate(args):
            _same_type(op, f"argument {j}", [a, *(g.inputs[j] for g in branches)])
        for j, t in enumerate(op.outputs):
            _same_type(op, f"output {j}", [t, *(g.outputs[j] for g in branches)])
        start = self.next()
        self.read(flag, start)
        for t in op.outputs:
            self.write(t, start)
        for g in branches:
            for a, b in zip(args, g.inputs):
                self.aliases[b] = a
        regions = [self.region(i, g) for i, g in zip((then_i, else_i), branches)]
        end = self.next()
        for g in branches:
            for t in g.outputs:
                self.read(t, end)
        for a in args:
            self.read(a, end)
        for t in op.outputs:
            self.write(t, end)
        self.controls[op] = ControlOp(op, start, end, regions)


    def _call(self, op: Op, index: int) -> None:
        g = self.claim(op, index)
        args = [u for u in op.inputs if u is not None]
        if len(g.inputs) != len(args) or len(g.outputs) != len(op.outputs):
            raise _refuse(op, f"CALL of {len(args)} arguments and {len(op.outputs)} outputs "
                              f"runs subgraph {g.name!r} of {len(g.inputs)} inputs and "
                              f"{len(g.outputs)} outputs", "re-convert the model")
        for j, a in enumerate(args):
            _same_type(op, f"argument {j}", [a, g.inputs[j]])
        for j, t in enumerate(op.outputs):
            _same_type(op, f"output {j}", [t, g.outputs[j]])
        start = self.next()
        for a, b in zip(args, g.inputs):
            self.aliases[b] = a
        region = self.region(index, g)
        end = self.next()
        for t in g.outputs:
            self.read(t, end)
        for a in args:
            self.read(a, end)
        for t in op.outputs:
            self.write(t, start)
            self.write(t, end)
        self.controls[op] = ControlOp(op, start, end, [region])

    def _call_once(self, op: Op, index: int) -> None:
        g = self.claim(op, index)
        if op.inputs or op.outputs or g.inputs or g.outputs:
            raise _refuse(op, "CALL_ONCE with inputs or outputs", "re-convert the model")
        start = self.next()
        region = self.region(index, g)
        self.controls[op] = ControlOp(op, start, self.next(), [region])


def plan(model: Model, steps: list[Step], special: set[Tensor]) -> ControlPlan:
    """The timeline of the main sequence ``steps`` and every subgraph its control-flow ops
    run; ``special`` are the graph's inputs and outputs (buffers of their own). Raises
    UnsupportedOpError for what the generator cannot run (named, with a fix)."""
    for t in model.graph.tensors:
        if _is_dynamic(t):
            raise UnsupportedOpError(f"tensor {t.name!r} has a dynamic shape "
                                     f"{list(t.shape_signature or ())}",
                                     where=f"tensor {t.name!r}",
                                     fix=FREE_DIMS_FIX)
    p = _Planner(model, special)
    for s in steps:
        if s.op.type in CONTROL_OPS and s.rows is not None:
            raise _refuse(s.op, f"{s.op.type} split into stripes",
                          "compile without striping control-flow ops")
        p.op(s.op)
    return ControlPlan(p.controls, p.life, p.sizes, p.aliases, p.dynamic)


# ------------------------------------------------------------------ emission
@dataclass
class ControlEmitter(Emitter):
    """An :class:`Emitter` that follows the aliases of subgraph inputs and keeps the
    run-time shapes of dynamic tensors (members ``tk_dsN_``)."""

    control: ControlPlan | None = None
    shapes: dict[Tensor, str] = field(default_factory=dict)
    depth: int = 0

    def resolve(self, t: Tensor) -> Tensor:
        """The tensor whose storage ``t`` names."""
        if self.control is not None:
            while t in self.control.aliases:
                t = self.control.aliases[t]
        return t

    def ptr(self, t: Tensor | None, const: bool = True) -> str:
        return super().ptr(None if t is None else self.resolve(t), const)

    def shape_of(self, t: Tensor) -> str:
        """The member holding the run-time shape of the dynamic tensor ``t``."""
        name = self.shapes.get(t)
        if name is None:
            name = self.shapes[t] = f"tk_ds{len(self.shapes)}_"
            self.members.append(f"int64_t {name}[{max(len(t.shape), 1)}] = {{}};")
        return name


def make_emitter(a: Analysis, params: ParamsBuilder) -> Emitter:
    """The emitter of an analysis (a :class:`ControlEmitter`, following the control-flow
    plan when there is one)."""
    return ControlEmitter(a, params, control=a.control)


def emit(e: Emitter, step: Step) -> str:
    """The C++ statements of one step of the main sequence or of a subgraph."""
    if not isinstance(e, ControlEmitter) or e.control is None:
        return emit_step(e, step)
    op = step.op
    c = e.control.controls.get(op)
    if c is not None:
        return {"WHILE": _while, "IF": _if, "CALL": _call, "CALL_ONCE": _call_once}[op.type](
            e, c)
    dyn = e.control.dynamic
    if op.outputs and op.outputs[0] in dyn:
        return _dynamic_slice(e, step)
    if any(u is not None and e.resolve(u) in dyn for u in op.inputs):
        if op.type != "CONCATENATION":
            raise _refuse(op, f"{op.kind} reads a tensor of run-time shape; the generator "
                              "takes such tensors only into CONCATENATION",
                          FREE_DIMS_FIX)
        return _dynamic_concat(e, step)
    return emit_step(e, step)


def _comment(text: str) -> str:
    return repr(text.replace("*/", "* /").replace("\n", " "))[:80]


def _region(e: ControlEmitter, r: Region) -> list[str]:
    lines = []
    for s in r.steps:
        lines.append(f"{{  // subgraph {r.index} op {s.op_index}: {s.op.kind} "
                     f"{_comment(s.op.name)}")
        lines += ["  " + ln for ln in emit(e, s).splitlines()]
        lines.append("}")
    return lines


def _cstr(text: str) -> str:
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\?' else "_"
                   for c in text)


def _copy(e: ControlEmitter, dst: Tensor, src: Tensor) -> str:
    return f"std::memcpy({e.ptr(dst)}, {e.ptr(src)}, {nbytes(dst)});"


def _while(e: ControlEmitter, c: ControlOp) -> str:
    op = c.op
    cond, body = c.regions
    it = f"tk_iter{e.depth}"
    lines = [f"// WHILE: cond subgraph {cond.index}, body subgraph {body.index}; the "
             "outputs carry the loop's values"]
    lines += [_copy(e, t, u) for t, u in zip(op.outputs, op.inputs) if u is not None]
    e.depth += 1
    try:
        cond_code = _region(e, cond)
        body_code = _region(e, body)
    finally:
        e.depth -= 1
    lines.append(f"for (int64_t {it} = 0;; ++{it}) {{")
    lines += ["  " + ln for ln in cond_code]
    lines.append(f"  if (!*{e.ptr(cond.graph.outputs[0])}) break;")
    lines.append(f"  if ({it} == {MAX_ITERATIONS}) throw std::runtime_error(\"WHILE "
                 f"'{_cstr(op.name)}' did not terminate within {MAX_ITERATIONS} "
                 "iterations\");")
    lines += ["  " + ln for ln in body_code]
    outs = body.graph.outputs
    lines += [f"  {_copy(e, st, outs[j])}" for j, st in c.stages.items()]
    for j, (t, src) in enumerate(zip(op.outputs, outs)):
        if j not in c.stages and e.resolve(src) is not t:
            lines.append(f"  {_copy(e, t, src)}")
    lines += [f"  {_copy(e, op.outputs[j], st)}" for j, st in c.stages.items()]
    lines.append("}")
    return "\n".join(lines)


def _if(e: ControlEmitter, c: ControlOp) -> str:
    op = c.op
    flag = op.inputs[0]
    assert flag is not None
    lines = [f"if (*{e.ptr(flag)}) {{  // then: subgraph {c.regions[0].index}"]
    for k, r in enumerate(c.regions):
        if k:
            lines.append(f"}} else {{  // else: subgraph {r.index}")
        body = _region(e, r)
        body += [_copy(e, t, src) for t, src in zip(op.outputs, r.graph.outputs)]
        lines += ["  " + ln for ln in body]
    lines.append("}")
    return "\n".join(lines)


def _call(e: ControlEmitter, c: ControlOp) -> str:
    (r,) = c.regions
    lines = [f"// CALL: subgraph {r.index}", *_region(e, r)]
    lines += [_copy(e, t, src) for t, src in zip(c.op.outputs, r.graph.outputs)]
    return "\n".join(lines)


def _call_once(e: ControlEmitter, c: ControlOp) -> str:
    """The init subgraph, run by the first inference of the model object only."""
    (r,) = c.regions
    flag = f"tk_once{len(e.members)}_"
    e.members.append(f"bool {flag} = false;")
    return "\n".join([f"if (!{flag}) {{  // CALL_ONCE: subgraph {r.index}",
                      *("  " + ln for ln in _region(e, r)), f"  {flag} = true;", "}"])


def _arr(values: list[int] | tuple[int, ...]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _dynamic_slice(e: ControlEmitter, step: Step) -> str:
    """SLICE with begin/size read at run time into a buffer of the input's capacity; records
    the run-time shape (the reference runtime's bounds and ``-1`` rule)."""
    op = step.op
    x, begin, size = (*op.inputs, None, None, None)[:3]
    out = op.outputs[0]
    if x is None or begin is None or size is None or x.dtype != out.dtype:
        raise _refuse(op, "SLICE needs an input, begin and size of the output's type",
                      "re-convert the model")
    rank = len(x.shape)
    if int(np.prod(begin.shape)) != rank or int(np.prod(size.shape)) != rank \
            or len(out.shape_signature or out.shape) != rank:
        raise _refuse(op, f"begin/size need {rank} values", "re-convert the model")
    ds = e.shape_of(out)
    item = x.dtype.itemsize  # type: ignore[union-attr]
    pad = _MAX_RANK - rank
    name = _cstr(op.name)
    return "\n".join([
        f"static const int64_t tk_dim[{rank}] = {_arr(x.shape)};",
        f"static const int64_t tk_stride[{rank}] = {_arr(_strides(x.shape))};",
        "int64_t tk_s6[6] = {1, 1, 1, 1, 1, 1}, tk_t6[6] = {0, 0, 0, 0, 0, 0}, tk_off = 0;",
        f"for (int tk_k = 0; tk_k < {rank}; ++tk_k) {{",
        f"  const int64_t tk_b = static_cast<int64_t>({e.ptr(begin)}[tk_k]);",
        f"  const int64_t tk_n = static_cast<int64_t>({e.ptr(size)}[tk_k]);",
        "  const int64_t tk_stop = tk_n == -1 ? tk_dim[tk_k] : tk_b + tk_n;",
        "  if (tk_b < 0 || tk_stop > tk_dim[tk_k] || tk_stop < tk_b)",
        f"    throw std::runtime_error(\"SLICE '{name}': slice [\" + std::to_string(tk_b) + "
        "\", \" + std::to_string(tk_stop) + \") is out of range for axis \" + "
        "std::to_string(tk_k) + \" of size \" + std::to_string(tk_dim[tk_k]));",
        f"  {ds}[tk_k] = tk_stop - tk_b;",
        f"  tk_s6[{pad} + tk_k] = tk_stop - tk_b;",
        f"  tk_t6[{pad} + tk_k] = tk_stride[tk_k];",
        "  tk_off += tk_b * tk_stride[tk_k];",
        "}",
        f"tk::transpose({e.ptr(x)} + tk_off, {e.ptr(out)}, {item}, tk_s6, tk_t6);",
    ])


def _dynamic_concat(e: ControlEmitter, step: Step) -> str:
    """CONCATENATION of inputs some of run-time shape into a static output: checks every
    input against the output (other axes equal, the axis filled exactly), then copies."""
    op = step.op
    out = op.outputs[0]
    assert e.control is not None
    rank = len(out.shape)
    axis = int(getattr(op.options, "axis", 0) or 0) if op.options is not None else 0
    axis = axis + rank if axis < 0 else axis
    if out in e.control.dynamic or _is_dynamic(out) or not 0 <= axis < rank:
        raise _refuse(op, "CONCATENATION of run-time shapes into an output of run-time "
                          "shape (or a bad axis)", FREE_DIMS_FIX)
    if op.activation:
        raise _refuse(op, "fused activation on a CONCATENATION of run-time shapes",
                      "apply the activation as its own op")
    qs = {(None if t.quant is None else (tuple(np.ravel(t.quant.scale)),
                                          tuple(np.ravel(t.quant.zero_point))))
          for t in (*op.inputs, out) if t is not None}
    if len(qs) > 1:
        raise _refuse(op, "CONCATENATION of run-time shapes with inputs quantized unlike the "
                          "output", "requantize the inputs first")
    item = out.dtype.itemsize  # type: ignore[union-attr]
    outer = int(np.prod(out.shape[:axis], dtype=np.int64))
    y_block = int(np.prod(out.shape[axis:], dtype=np.int64))
    ins = [t for t in op.inputs if t is not None]
    name = _cstr(op.name)
    lines = [f"static const int64_t tk_out[{rank}] = {_arr(out.shape)};",
             f"int64_t tk_inner[{len(ins)}], tk_total = 0;"]
    for k, t in enumerate(ins):
        r = e.resolve(t)
        if len(t.shape_signature or t.shape) != rank or r.dtype != out.dtype:
            raise _refuse(op, f"input {t.name!r} is not of the output's rank and type",
                          "re-convert the model")
        shape = e.shape_of(r) if r in e.control.dynamic else None
        lines.append("{")
        if shape is None:
            lines.append(f"  const int64_t tk_sh[{rank}] = {_arr(r.shape)};")
        else:
            lines.append(f"  const int64_t* tk_sh = {shape};")
        lines += [
            f"  tk_inner[{k}] = 1;",
            f"  for (int tk_k = 0; tk_k < {rank}; ++tk_k) {{",
            f"    if (tk_k != {axis} && tk_sh[tk_k] != tk_out[tk_k])",
            f"      throw std::runtime_error(\"CONCATENATION '{name}': input {k} has size \" + "
            "std::to_string(tk_sh[tk_k]) + \" on axis \" + std::to_string(tk_k) + \", the "
            "output \" + std::to_string(tk_out[tk_k]));",
            f"    if (tk_k >= {axis}) tk_inner[{k}] *= tk_sh[tk_k];",
            "  }",
            f"  tk_total += tk_inner[{k}];",
            "}",
        ]
    lines += [f"if (tk_total != {y_block})",
              f"  throw std::runtime_error(\"CONCATENATION '{name}': the inputs make \" + "
              f"std::to_string(tk_total) + \" values per block, the output takes {y_block}\");",
              "int64_t tk_at = 0;"]
    for k, t in enumerate(ins):
        lines += [f"tk::copy_blocks({e.ptr(t)}, tk_inner[{k}], {e.ptr(out)} + tk_at, "
                  f"{y_block}, {outer}, tk_inner[{k}], {item});",
                  f"tk_at += tk_inner[{k}];"]
    return "\n".join(lines)
