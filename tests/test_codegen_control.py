"""Control flow in the native backend: WHILE and IF models built op by op (and the zoo's
``control_flow``) generated, built and run; outputs equal the reference runtime's and
LiteRT's, the trace joins to source layers, the arena plan keeps live tensors apart, and what
the generator cannot run is refused.

Builds use ``-O1`` with the op library from the object cache.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support import litert_run

from toolkit.builder import ModelBuilder
from toolkit.errors import ToolkitError, UnsupportedOpError
from toolkit.formats.flatbuffer_read import load
from toolkit.formats.flatbuffer_write import write_model
from toolkit.generator import Artifact, codegen
from toolkit.generator.analysis import analyse
from toolkit.generator.build import build_bundle
from toolkit.generator.control import MAX_ITERATIONS
from toolkit.ir import Model
from toolkit.runtime.interpreter import Interpreter
from toolkit.runtime.native import run_native
from toolkit.trace import trace_join

ZOO = Path(__file__).resolve().parent.parent / "sample_models" / "zoo"
OPT = "-O1"
I32 = np.int32


def _subgraph(main: ModelBuilder, name: str,
              body: Callable[[ModelBuilder], None]) -> int:
    """Build a subgraph with ``body`` (a builder of its own, origins after the main graph's)
    and append it to ``main``'s model; returns its index."""
    mb = ModelBuilder(name)
    mb._next_origin = 1000 * (len(main.model.subgraphs) + 1)
    body(mb)
    main.model.subgraphs.append(mb.graph)
    main.model.source_table.update(mb.model.source_table)
    return len(main.model.subgraphs) - 1


def _while_model(swap: bool) -> Model:
    """``y, z = x, 0.5 * x; for i in range(n): y, z = tanh(1.5 * y + z), y`` (with ``swap``:
    the body's second output is its carried ``y`` itself, a value carried at another index)
    or ``z = y`` computed by a copy op; the loop counter and the ``n`` passed through."""

    def cond(mb: ModelBuilder) -> None:
        i = mb.input("i", [], I32)
        n = mb.input("n", [], I32)
        mb.input("y", [2, 4])
        mb.input("z", [2, 4])
        mb.output(mb.op("LESS", [i, n], [], name="less", dtype=np.bool_))

    def body(mb: ModelBuilder) -> None:
        i = mb.input("i", [], I32)
        n = mb.input("n", [], I32)
        y = mb.input("y", [2, 4])
        z = mb.input("z", [2, 4])
        i1 = mb.add(i, mb.const("one", np.asarray(1, I32)), name="next")
        h = mb.unary("TANH", mb.add(mb.mul(y, mb.const("k", np.full((1, 4), 1.5, np.float32)),
                                           name="scale"), z, name="sum"), name="tanh")
        old = y if swap else mb.op("RESHAPE", [y, mb.const("shape", np.asarray([2, 4], I32))],
                                   [2, 4], name="keep")
        mb.output(i1, n, h, old)

    mb = ModelBuilder("loop")
    x = mb.input("x", [2, 4])
    n = mb.input("n", [], I32)
    half = mb.mul(x, mb.const("half", np.asarray(0.5, np.float32)), name="half")
    c = _subgraph(mb, "cond", cond)
    b = _subgraph(mb, "body", body)
    outs = mb.op("WHILE", [mb.const("zero", np.asarray(0, I32)), n, x, half],
                 outputs=[("count", []), ("n_out", []), ("y", [2, 4]), ("z", [2, 4])],
                 dtype=np.float32,
                 options=_options("WhileOptions", condSubgraphIndex=c, bodySubgraphIndex=b))
    for t, dt in zip(outs, (I32, I32)):
        t.type_code = _type_code(dt)
    y = mb.unary("RELU", outs[2], name="relu")
    mb.output(outs[0], y, outs[3])
    return mb.build()


def _options(name: str, **fields: int) -> object:
    """A builtin options object the builder has no default for (WhileOptions, IfOptions)."""
    from toolkit.schema import OPTIONS_CLASS

    obj = OPTIONS_CLASS[name]()
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj


def _type_code(dt: type) -> int:
    from toolkit.ir import tensor_type_of

    return int(tensor_type_of(np.dtype(dt)))


def _if_model() -> Model:
    """``x * 2 if sum(x) > 0 else relu(x) - 1``, then ``+ 1``."""

    def then(mb: ModelBuilder) -> None:
        a = mb.input("a", [2, 3])
        mb.output(mb.mul(a, mb.const("two", np.asarray(2.0, np.float32)), name="double"))

    def other(mb: ModelBuilder) -> None:
        a = mb.input("a", [2, 3])
        mb.output(mb.sub(mb.unary("RELU", a, name="relu"),
                         mb.const("one", np.asarray(1.0, np.float32)), name="less_one"))

    mb = ModelBuilder("branch")
    x = mb.input("x", [2, 3])
    s = mb.reduce("SUM", x, [0, 1], keep_dims=False, name="sum")
    flag = mb.op("GREATER", [s, mb.const("zero", np.asarray(0.0, np.float32))], [],
                 name="positive", dtype=np.bool_)
    t = _subgraph(mb, "then", then)
    e = _subgraph(mb, "else", other)
    y = mb.op("IF", [flag, x], [2, 3], name="choose", dtype=np.float32,
              options=_options("IfOptions", thenSubgraphIndex=t, elseSubgraphIndex=e))
    mb.output(mb.add(y, mb.const("one", np.asarray(1.0, np.float32)), name="plus_one"))
    return mb.build()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Model, Artifact]]:
    """The hand-built models and the zoo's control_flow, generated and built as one
    bundle."""
    root = tmp_path_factory.mktemp("control")
    models = {"loop": _while_model(False), "swap": _while_model(True), "branch": _if_model(),
              "nested": _nested_model(), "int8_loop": _int8_loop_model(), "call": _call_model(),
              "control_flow": load(ZOO / "control_flow.tflite")}
    arts = {k: (m, codegen(m, root / k, name=k)) for k, m in models.items()}
    build_bundle([(a.out_dir, a.name, a.library.name) for _, a in arts.values()],
                 root / "bundle", opt=OPT)
    return arts


def _same(want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype and g.shape == w.shape, k
        if w.dtype == np.float32:
            assert float(np.abs(g - w).max()) <= 1e-5 * max(float(np.abs(w).max()), 1e-30), k
        else:
            np.testing.assert_array_equal(g, w, err_msg=k)


def _check_join(art: Artifact, model: Model, inputs: dict[str, np.ndarray]) -> None:
    """The native trace: one event per step of the main graph (a loop is one event), all of
    its time on source layers."""
    _, trace = run_native(art, inputs, trace=True, repeat=2)
    assert trace is not None and len(trace) == 2 * len(model.graph.ops)
    att = trace_join(trace, model)
    att.check()
    assert att.unattributed_ns == 0 and att.attributed_ns == att.total_ns > 0


@pytest.mark.parametrize("swap", [False, True], ids=["copy", "swap"])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_loop_matches_the_reference_and_litert(
        built: dict[str, tuple[Model, Artifact]], swap: bool, n: int) -> None:
    """The loop against the reference runtime and NumPy; against LiteRT too when the body's
    outputs are its own values (LiteRT copies them back one by one, so a body output that is
    another carried input reads the value just written: the reference runtime and the
    generated code give every carried value the body's outputs of the same iteration)."""
    model, art = built["swap" if swap else "loop"]
    x = np.random.default_rng(n).uniform(-1, 1, (2, 4)).astype(np.float32)
    inputs = {"x": x, "n": np.asarray(n, I32)}
    want = Interpreter(model).invoke(inputs)
    assert int(want["count"]) == n
    got = run_native(art, inputs).outputs
    _same(want, got)
    if not swap:  # LiteRT copies a swapped body output after overwriting its source
        lite = litert_run(write_model(model, "tflite"), [x, inputs["n"]])
        _same({k: lite[k] for k in want}, got)
    y, z = x, x * np.float32(0.5)
    for _ in range(n):
        y, z = np.tanh(np.float32(1.5) * y + z), y
    np.testing.assert_allclose(got["relu"], np.maximum(y, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["z"], z, rtol=1e-5, atol=1e-6)
    _check_join(art, model, inputs)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_if_runs_the_branch_the_condition_picks(
        built: dict[str, tuple[Model, Artifact]], sign: float) -> None:
    model, art = built["branch"]
    x = (np.abs(np.random.default_rng(1).uniform(0.1, 1, (2, 3))) * sign).astype(np.float32)
    want = Interpreter(model).invoke({"x": x})
    expected = x * 2 + 1 if sign > 0 else np.maximum(x, 0)
    np.testing.assert_allclose(want["plus_one"], expected, rtol=1e-6)
    got = run_native(art, {"x": x}).outputs
    _same(want, got)
    lite = litert_run(write_model(model, "tflite"), [x])
    _same({k: lite[k] for k in want}, got)
    _check_join(art, model, {"x": x})


def test_zoo_control_flow_over_its_loop_bounds(
        built: dict[str, tuple[Model, Artifact]]) -> None:
    """The zoo's tf.cond + tf.while_loop model: a data-dependent bound (0 to 5 runs of the
    body) and both branches, against the reference runtime and LiteRT."""
    model, art = built["control_flow"]
    rng = np.random.default_rng(7)
    for n in range(6):
        x = rng.uniform(-1, 1, (2, 5)).astype(np.float32) + np.float32(0.6 if n % 2 else -0.6)
        inputs = {"x": x, "n": np.asarray([n], I32)}
        want = Interpreter(model).invoke(inputs)
        got = run_native(art, inputs).outputs
        _same(want, got)
        lite = litert_run(ZOO / "control_flow.tflite", [x, inputs["n"]])
        _same({k: lite[k] for k in want}, got)


def test_a_loop_that_does_not_end_throws(built: dict[str, tuple[Model, Artifact]]) -> None:
    _, art = built["loop"]
    inputs = {"x": np.zeros((2, 4), np.float32), "n": np.asarray(MAX_ITERATIONS + 1, I32)}
    with pytest.raises(ToolkitError, match=f"did not terminate within {MAX_ITERATIONS}"):
        run_native(art, inputs)


def _spans_meet(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return not (a[1] < b[0] or b[1] < a[0])


@pytest.mark.parametrize("stem", ["lstm", "bi_gru_b1"])
def test_arena_keeps_live_tensors_apart_across_the_loop(stem: str) -> None:
    """Every pair of temporaries (main graph, cond, body, staging) whose lifetimes meet is
    placed apart; the carried values live over their loop's whole span and the body's
    temporaries inside it."""
    a = analyse(load(ZOO / f"{stem}.tflite"))
    cp = a.control
    assert cp is not None and a.arena_bytes < a.temporaries_bytes
    ts = a.temporaries
    assert set(ts) == set(a.arena_offsets)
    for i, t in enumerate(ts):
        for u in ts[i + 1:]:
            if _spans_meet(a.lifetimes[t], a.lifetimes[u]):
                ot, ou = a.arena_offsets[t], a.arena_offsets[u]
                assert ot + a.size_of(t) <= ou or ou + a.size_of(u) <= ot, (t.name, u.name)
    assert {c.op.type for c in cp.controls.values()} == {"WHILE"}
    for c in cp.controls.values():
        body = c.regions[1]
        inside = [t for s in body.steps for t in s.op.outputs if t in a.lifetimes]
        assert inside and cp.dynamic
        for t in c.op.outputs:
            first, last = a.lifetimes[t]
            assert first <= c.start and last >= c.end
        for t in inside:
            assert c.start < a.lifetimes[t][0] <= a.lifetimes[t][1] <= c.end


def _retarget(model: Model, op_type: str, **fields: int) -> None:
    op = next(o for o in model.graph.ops if o.type == op_type)
    for k, v in fields.items():
        setattr(op.options, k, v)


def test_a_carried_value_changing_shape_is_refused(tmp_path: Path) -> None:
    model = _while_model(False)
    body = model.subgraphs[2]
    old = body.outputs[3]
    new = body.add_tensor("wider", [2, 5])
    body.add_op("TILE", [old, body.add_const("reps", np.asarray([1, 1], I32))], [new],
                origins=(5000,))
    body.outputs[3] = new
    with pytest.raises(UnsupportedOpError, match="loop-carried value 3 changes shape"):
        codegen(model, tmp_path / "m", name="m")
    assert not (tmp_path / "m" / "m.cpp").exists()


def test_a_subgraph_with_two_callers_is_refused(tmp_path: Path) -> None:
    model = _if_model()
    _retarget(model, "IF", elseSubgraphIndex=1)
    with pytest.raises(UnsupportedOpError, match="subgraph 1 is also run by IF"):
        codegen(model, tmp_path / "m", name="m")


def test_a_run_time_shape_read_by_another_op_is_refused(tmp_path: Path) -> None:
    """A SLICE whose size comes from the loop counter may feed CONCATENATION only."""

    def body(mb: ModelBuilder) -> None:
        i = mb.input("i", [], I32)
        y = mb.input("y", [4])
        size = mb.op("RESHAPE", [i, mb.const("s", np.asarray([1], I32))], [1], name="size")
        part = mb.op("SLICE", [y, mb.const("b", np.asarray([0], I32)), size], [1],
                     name="head")
        part.shape_signature = (-1,)
        mb.unary("TANH", part, name="bad")
        mb.output(mb.add(i, mb.const("one", np.asarray(1, I32)), name="next"), y)

    def cond(mb: ModelBuilder) -> None:
        i = mb.input("i", [], I32)
        mb.input("y", [4])
        mb.output(mb.op("LESS", [i, mb.const("k", np.asarray(3, I32))], [], name="less",
                        dtype=np.bool_))

    mb = ModelBuilder("dyn")
    x = mb.input("x", [4])
    c = _subgraph(mb, "cond", cond)
    b = _subgraph(mb, "body", body)
    outs = mb.op("WHILE", [mb.const("zero", np.asarray(0, I32)), x],
                 outputs=[("count", []), ("y", [4])], dtype=np.float32,
                 options=_options("WhileOptions", condSubgraphIndex=c, bodySubgraphIndex=b))
    outs[0].type_code = _type_code(I32)
    mb.output(outs[1])
    with pytest.raises(UnsupportedOpError, match="TANH reads a tensor of run-time shape"):
        codegen(mb.build(), tmp_path / "m", name="m")


def test_body_inputs_alias_the_carried_buffers(built: dict[str, tuple[Model, Artifact]]) -> None:
    """Subgraph inputs have no storage of their own: the body reads the carried buffers."""
    model, art = built["loop"]
    a = analyse(model)
    assert a.control is not None
    body = model.subgraphs[2]
    loop = next(o for o in model.graph.ops if o.type == "WHILE")
    for b_in, carried in zip(body.inputs, loop.outputs):
        assert a.control.aliases[b_in] is carried
        assert b_in not in a.arena_offsets
    assert "for (int64_t tk_iter0 = 0;; ++tk_iter0)" in art.source.read_text()


def test_partition_chain_with_the_loops_on_the_cpp_backend(tmp_path: Path) -> None:
    """The zoo's SimpleRNN partitioned with its WHILE ops (and their subgraphs) on "cpp":
    the chain's outputs equal the whole model's on the reference runtime."""
    from toolkit.formats.part_file import PartSpec
    from toolkit.partitioner import partition
    from toolkit.runtime.chain import run_connection
    from toolkit.runtime.native import native_runner

    model = load(ZOO / "simple_rnn.tflite")
    spec = PartSpec(["cpu", "cpp"], "cpu", "opcode", opcode={"WHILE": "cpp"})
    result = partition(model, spec, work_path=tmp_path / "parts")
    loops = [p for p in result.parts if p.backend == "cpp"]
    assert [[op.type for op in p.model.graph.ops] for p in loops] == [["WHILE", "WHILE"]]
    conn = next((tmp_path / "parts").glob("*.conn.json"))
    inputs = Interpreter(model).random_inputs(4)
    runner = native_runner(tmp_path / "native", backends=["cpp"], opt=OPT)
    got = run_connection(conn, inputs, run=runner).outputs
    _same(Interpreter(model).invoke(inputs), got)
    assert len(list((tmp_path / "native").glob("part*/libpart*.so"))) == 1


def _nested_model() -> Model:
    """``for i in range(3): for j in range(2): y = y * 0.5 + 1 if sum(y) > 2 else y + 1``: a
    WHILE whose body runs a WHILE whose body runs an IF."""

    def counter_cond(limit: int) -> Callable[[ModelBuilder], None]:
        def cond(mb: ModelBuilder) -> None:
            i = mb.input("i", [], I32)
            mb.input("y", [3])
            mb.output(mb.op("LESS", [i, mb.const("k", np.asarray(limit, I32))], [],
                            name="less", dtype=np.bool_))
        return cond

    def branch(scale: float) -> Callable[[ModelBuilder], None]:
        def body(mb: ModelBuilder) -> None:
            y = mb.input("y", [3])
            s = mb.mul(y, mb.const("s", np.asarray(scale, np.float32)), name="scale")
            mb.output(mb.add(s, mb.const("one", np.asarray(1.0, np.float32)), name="plus"))
        return body

    mb = ModelBuilder("nested")
    x = mb.input("x", [3])
    then_i = _subgraph(mb, "halve", branch(0.5))
    else_i = _subgraph(mb, "keep", branch(1.0))

    def inner_body(sb: ModelBuilder) -> None:
        i = sb.input("i", [], I32)
        y = sb.input("y", [3])
        total = sb.reduce("SUM", y, [0], keep_dims=False, name="total")
        big = sb.op("GREATER", [total, sb.const("two", np.asarray(2.0, np.float32))], [],
                    name="big", dtype=np.bool_)
        z = sb.op("IF", [big, y], [3], name="pick", dtype=np.float32,
                  options=_options("IfOptions", thenSubgraphIndex=then_i,
                                   elseSubgraphIndex=else_i))
        sb.output(sb.add(i, sb.const("one", np.asarray(1, I32)), name="next"), z)

    inner_c = _subgraph(mb, "inner_cond", counter_cond(2))
    inner_b = _subgraph(mb, "inner_body", inner_body)

    def outer_body(sb: ModelBuilder) -> None:
        i = sb.input("i", [], I32)
        y = sb.input("y", [3])
        outs = sb.op("WHILE", [sb.const("zero", np.asarray(0, I32)), y],
                     outputs=[("j", []), ("inner", [3])], dtype=np.float32,
                     options=_options("WhileOptions", condSubgraphIndex=inner_c,
                                      bodySubgraphIndex=inner_b))
        outs[0].type_code = _type_code(I32)
        sb.output(sb.add(i, sb.const("one", np.asarray(1, I32)), name="next"), outs[1])

    outer_c = _subgraph(mb, "outer_cond", counter_cond(3))
    outer_b = _subgraph(mb, "outer_body", outer_body)
    outs = mb.op("WHILE", [mb.const("zero", np.asarray(0, I32)), x],
                 outputs=[("i", []), ("y", [3])], dtype=np.float32,
                 options=_options("WhileOptions", condSubgraphIndex=outer_c,
                                  bodySubgraphIndex=outer_b))
    outs[0].type_code = _type_code(I32)
    mb.output(outs[1])
    return mb.build()


def test_nested_loops_and_a_branch_inside_a_loop(
        built: dict[str, tuple[Model, Artifact]]) -> None:
    model, art = built["nested"]
    code = art.source.read_text()
    assert "tk_iter0" in code and "tk_iter1" in code
    x = np.asarray([0.25, -0.5, 0.75], np.float32)
    y = x.copy()
    for _ in range(3 * 2):
        y = y * np.float32(0.5) + 1 if float(y.sum()) > 2 else y + 1
    want = Interpreter(model).invoke({"x": x})
    np.testing.assert_allclose(want["y"], y, rtol=1e-6)
    got = run_native(art, {"x": x}).outputs
    _same(want, got)
    lite = litert_run(write_model(model, "tflite"), [x])
    _same({k: lite[k] for k in want}, got)


def _call_model() -> Model:
    """``y = relu(x) * 2 + 1`` where the multiply-add is a subgraph run by CALL, and an
    empty init subgraph run by CALL_ONCE first."""

    def twice_plus_one(mb: ModelBuilder) -> None:
        a = mb.input("a", [2, 3])
        d = mb.mul(a, mb.const("two", np.asarray(2.0, np.float32)), name="double")
        mb.output(mb.add(d, mb.const("one", np.asarray(1.0, np.float32)), name="plus"), a)

    mb = ModelBuilder("call")
    x = mb.input("x", [2, 3])
    init = _subgraph(mb, "init", lambda sb: None)
    mb.op("CALL_ONCE", [], outputs=[], options=_options("CallOnceOptions",
                                                        initSubgraphIndex=init))
    r = mb.unary("RELU", x, name="relu")
    f = _subgraph(mb, "fn", twice_plus_one)
    y, same = mb.op("CALL", [r], outputs=[("y", [2, 3]), ("same", [2, 3])],
                    options=_options("CallOptions", subgraph=f))
    mb.output(y, same)
    return mb.build()


def test_call_and_call_once(built: dict[str, tuple[Model, Artifact]]) -> None:
    model, art = built["call"]
    assert "// CALL_ONCE: subgraph 1" in art.source.read_text()
    x = np.random.default_rng(2).uniform(-1, 1, (2, 3)).astype(np.float32)
    want = Interpreter(model).invoke({"x": x})
    np.testing.assert_allclose(want["y"], np.maximum(x, 0) * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(want["same"], np.maximum(x, 0))
    got = run_native(art, {"x": x}, repeat=2).outputs
    _same(want, got)


def _int8_loop_model() -> Model:
    """An int8 recurrence: ``for i in range(n): y = (y + c) * k`` in TFLite's integer
    arithmetic (rescaled and saturated at every step), ``y`` carried in int8."""
    from toolkit.ir import Quantization as Q

    qy = Q.make(0.05, 3)

    def cond(mb: ModelBuilder) -> None:
        i = mb.input("i", [], I32)
        n = mb.input("n", [], I32)
        mb.input("y", [2, 8], np.int8, quant=qy)
        mb.output(mb.op("LESS", [i, n], [], name="less", dtype=np.bool_))

    def body(mb: ModelBuilder) -> None:
        i = mb.input("i", [], I32)
        n = mb.input("n", [], I32)
        y = mb.input("y", [2, 8], np.int8, quant=qy)
        c = mb.const("c", np.arange(-8, 8, dtype=np.int8).reshape(2, 8) * 5,
                     quant=Q.make(0.02, -4))
        k = mb.const("k", np.asarray([[90, -70, 110, 60, -30, 127, 45, -100]], np.int8),
                     quant=Q.make(0.011, 0))
        s = mb.add(y, c, name="shift", quant=Q.make(0.06, -2))
        mb.output(mb.add(i, mb.const("one", np.asarray(1, I32)), name="next"), n,
                  mb.mul(s, k, name="scale", quant=qy))

    mb = ModelBuilder("int8_loop")
    x = mb.input("x", [2, 8], np.int8, quant=qy)
    n = mb.input("n", [], I32)
    c = _subgraph(mb, "cond", cond)
    b = _subgraph(mb, "body", body)
    outs = mb.op("WHILE", [mb.const("zero", np.asarray(0, I32)), n, x],
                 outputs=[("count", []), ("n_out", []), ("y", [2, 8])], dtype=np.int8,
                 quant=qy, options=_options("WhileOptions", condSubgraphIndex=c,
                                            bodySubgraphIndex=b))
    for t in outs[:2]:
        t.type_code, t.quant = _type_code(I32), None
    mb.output(outs[2])
    return mb.build()


def test_int8_loop_is_bit_exact(built: dict[str, tuple[Model, Artifact]]) -> None:
    """Against the reference runtime and LiteRT, over 0, 1 and 4 iterations."""
    model, art = built["int8_loop"]
    rng = np.random.default_rng(4)
    for n in (0, 1, 4):
        x = rng.integers(-128, 128, (2, 8)).astype(np.int8)
        inputs = {"x": x, "n": np.asarray(n, I32)}
        want = Interpreter(model).invoke(inputs)
        got = run_native(art, inputs).outputs
        np.testing.assert_array_equal(got["y"], want["y"])
        lite = litert_run(write_model(model, "tflite"), [x, inputs["n"]])
        np.testing.assert_array_equal(got["y"], lite["y"])
        assert (n == 0) == np.array_equal(got["y"], x)
