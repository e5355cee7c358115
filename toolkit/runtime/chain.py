"""Run a partitioned model: chain its parts in order, feeding tensors by name.

The parts come from a connection file (``.conn.json`` / ``.conn.ini``; part files are read
from its folder), a :class:`~toolkit.formats.conn_file.Connection` or a
:class:`~toolkit.partitioner.PartitionResult` (its in-memory part models). Each part runs with a
per-model runner ``run(model, inputs) -> {name: array}``: by default the reference runtime;
:func:`litert_runner` gives one backed by LiteRT.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import PartitionError, RuntimeInputError
from toolkit.formats.conn_file import Connection, ConnPart, file_digest, read_connection
from toolkit.ir import Model
from toolkit.progress import progress
from toolkit.runtime.result import RunResult
from toolkit.util.args import check_bool, check_int
from toolkit.util.files import read_bytes

__all__ = ["run_connection", "litert_runner", "Runner"]

Runner = Callable[[Model, dict[str, np.ndarray]], Mapping[str, np.ndarray]]


@dataclass
class _Stage:
    index: int
    file: str
    backend: str
    model: Model
    inputs: list[str]
    outputs: list[str]
    offset: int


def _backend_of(file: str) -> str:
    stem = file.rsplit(".", 1)[0]
    tail = stem.rsplit(".", 1)[-1]
    return tail.split("_", 1)[1] if "_" in tail and tail[:5].isdigit() else ""


def _stages(conn: Any) -> tuple[list[_Stage], Connection, Model | None]:
    """Return the parts to run, the connection and the source model when at hand."""
    from toolkit.partitioner import PartitionResult

    if isinstance(conn, PartitionResult):
        c = conn.connection()
        models = [p.model for p in conn.parts]
        backends = [p.backend for p in conn.parts]
        source: Model | None = conn.source
    else:
        if isinstance(conn, (str, os.PathLike)):
            _finish_interrupted(Path(conn).parent)
            conn = read_connection(conn)
        if not isinstance(conn, Connection):
            raise PartitionError(f"cannot chain a {type(conn).__name__}",
                                 fix="pass a .conn.json/.conn.ini path, a Connection or a "
                                     "PartitionResult")
        c = conn
        from toolkit.formats.flatbuffer_read import load

        folder = c.folder
        models = []
        for p in c.parts:
            path = c.member(p.file)
            if not path.is_file():
                raise PartitionError(f"part file {p.file!r} not found in {str(folder)!r}",
                                     where=c.path or "<connection>",
                                     fix=("keep the part files beside the connection file, or "
                                          "partition the model again (`toolkit partition`)"))
            models.append(load(_checked_part(path, p, c.path or "<connection>")))
        backends = [_backend_of(p.file) for p in c.parts]
        src_path = c.member(c.source.file)
        source = load(src_path) if src_path.is_file() else None
    stages, offset = [], 0
    for i, (p, m, b) in enumerate(zip(c.parts, models, backends), start=1):
        stages.append(_Stage(i, p.file, b, m, list(p.inputs), list(p.outputs), offset))
        offset += len(m.graph)
    return stages, c, source


def _finish_interrupted(folder: Path) -> None:
    """Complete a partition set whose writer was killed while renaming it into place (see
    :func:`toolkit.util.atomic.finish_interrupted_set`), under the folder's lock; a set still
    being written by a live process is refused by the lock."""
    from toolkit.util.atomic import JOURNAL_NAME, finish_interrupted_set, folder_lock

    if (folder / JOURNAL_NAME).is_file():
        with folder_lock(folder):
            finish_interrupted_set(folder)


def _checked_part(path: Path, part: ConnPart, where: str) -> bytes:
    """The bytes of a part file, checked against the connection's manifest when it has one."""
    data = read_bytes(path, what=f"part file {part.file!r} of {where}", error=PartitionError,
                      fix="partition the model again into this folder")
    if part.size is not None and part.sha256 is not None and (
            len(data) != part.size or file_digest(data) != part.sha256):
        raise PartitionError(
            f"part file {part.file!r} does not match the connection file ({len(data)} bytes, "
            f"sha256 {file_digest(data)[:12]}..; the connection lists {part.size} bytes, "
            f"{part.sha256[:12]}..): the set was left mixed or edited", where=where,
            fix="partition the model again into this folder")
    return data


def _bind(inputs: Any, names: list[str], source: Model | None) -> dict[str, np.ndarray]:
    if inputs is None:
        if source is None:
            raise RuntimeInputError("no inputs given and the source model is not at hand",
                                    fix=f"pass a dict with keys {names}")
        from toolkit.runtime.interpreter import Interpreter

        return dict(Interpreter(source).random_inputs())
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs]
        if missing:
            raise RuntimeInputError(f"inputs lack {missing}", fix=f"source inputs are {names}")
        return {n: np.asarray(inputs[n]) for n in names}
    inputs = list(inputs)
    if len(inputs) != len(names):
        raise RuntimeInputError(f"{len(inputs)} inputs given, the source model takes "
                                f"{len(names)} ({names})",
                                where="inputs",
                                fix=(f"pass {len(names)} arrays in the source model's input "
                                     f"order, or a dict keyed by {names}"))
    return {n: np.asarray(x) for n, x in zip(names, inputs)}


class _PartTracer:
    """Forward events of one part to a shared tracer, keyed by ``optimised_id``."""

    def __init__(self, inner: Any, stage: _Stage) -> None:
        self._inner = inner
        self._stage = stage
        self._part = {"part": stage.index, "part_file": stage.file, "backend": stage.backend,
                      "key_kind": "part_op"}

    def _key(self, key: Any) -> Any:
        return int(key) + self._stage.offset if isinstance(key, (int, np.integer)) else key

    def _track(self, track: str | None) -> str | None:
        return track or self._stage.backend or None

    def log(self, key: Any, t0: int, t1: int, track: str | None = None, **args: Any) -> Any:
        args.update(self._part)
        return self._inner.log(self._key(key), t0, t1, track=self._track(track), **args)

    def record(self, key: Any, t0: int, t1: int, args: dict[str, Any] | None = None) -> Any:
        return self.log(key, t0, t1, **(args or {}))

    def record_steps(self, keys: list[Any], times: list[int],
                     args: list[dict[str, Any] | None]) -> None:
        for key, t0, t1, a in zip(keys, times, times[1:], args):
            self.log(key, t0, t1, **(a or {}))

    def step_sink(self, keys: list[Any], args: list[dict[str, Any] | None], *,
                  track: str | None = None, new_run: bool = False) -> Any:
        """The inner tracer's step sink for this part's keys and arguments (the interpreter
        asks once per tracer)."""
        return self._inner.step_sink([self._key(k) for k in keys],
                                     [{**(a or {}), **self._part} for a in args],
                                     track=self._track(track), new_run=new_run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def run_connection(conn: Any, inputs: Any = None, *, run: Runner | None = None,
                   trace: bool = False, repeat: int = 1, warmup: int = 0, tracer: Any = None
                   ) -> RunResult:
    """Run the parts of ``conn`` in order on ``inputs`` and return the source outputs by name.

    ``conn`` is a ``.conn.json``/``.conn.ini`` path, a Connection or a PartitionResult.
    ``inputs`` is a dict by source input name, a list in source input order, one array, or
    None (random inputs of the reference runtime, seed 0; needs the source model). ``run`` is
    the per-model runner (default: the reference runtime). Each part's inputs are taken by
    name from the source inputs and the outputs of earlier parts.

    Returns a :class:`~toolkit.runtime.result.RunResult` ``(outputs, trace)``. ``warmup``
    inferences run first, untraced; ``repeat`` runs that many inferences (the outputs are those
    of the last). With ``trace=True`` (or a ``tracer``), the trace of the reference runtime is
    its event tracer (one event per part op, keyed by the op's ``optimised_id``: its position
    over all parts, as in ``PartitionResult.optimised_ops()``; on the track of the part's
    backend; the event also carries ``part``, ``part_file``, ``backend`` and the runtime's
    ``op_index`` in the part); with another runner, a DataFrame with one row per part call:
    ``run`` (int64), ``part`` (int64, from 1), ``file`` (str), ``backend`` (str),
    ``start_ns`` (int64, start since the first call), ``dur_ns`` (int64), integer nanoseconds
    as every event table; ``None`` when not traced.
    Raises :class:`PartitionError` when a part needs a tensor no
    earlier part made or a runner does not return a listed output.
    """
    check_int(repeat, "repeat", "run", low=1)
    check_int(warmup, "warmup", "run", low=0)
    check_bool(trace, "trace", "run")
    stages, c, source = _stages(conn)
    env0 = _bind(inputs, list(c.source.inputs), source)
    where = c.path or "<connection>"
    if run is None:
        return _run_reference(stages, c, env0, trace, repeat, warmup, tracer, where)
    rows: list[dict[str, Any]] = []
    env: dict[str, np.ndarray] = {}
    for _ in progress(range(warmup), desc="chained warm-up inferences", unit="run"):
        env = dict(env0)
        for s in stages:
            _take(s, run(s.model, _feed(s, env, where)), env, where)
    start = time.perf_counter_ns()
    for r in progress(range(repeat), desc="chained inferences", unit="run"):
        env = dict(env0)
        for s in stages:
            feed = _feed(s, env, where)
            t0 = time.perf_counter_ns()
            out = run(s.model, feed)
            t1 = time.perf_counter_ns()
            _take(s, out, env, where)
            if trace:
                rows.append({"run": r, "part": s.index, "file": s.file, "backend": s.backend,
                             "start_ns": t0 - start, "dur_ns": t1 - t0})
    outs = _outputs(c, env, where)
    if trace:
        df = pd.DataFrame(rows, columns=["run", "part", "file", "backend", "start_ns", "dur_ns"])
        df = df.astype({"run": "int64", "part": "int64", "start_ns": "int64",
                        "dur_ns": "int64"})
        return RunResult(outs, df)
    return RunResult(outs, None)


def _run_reference(stages: list[_Stage], c: Connection, env0: dict[str, np.ndarray],
                   trace: bool, repeat: int, warmup: int, tracer: Any, where: str
                   ) -> RunResult:
    from toolkit.runtime.interpreter import Interpreter

    interps = [Interpreter(s.model) for s in stages]
    if trace and tracer is None:
        from toolkit.runtime.tracer import EventTracer

        tracer = EventTracer()
    part_tracers = [None if tracer is None else _PartTracer(tracer, s) for s in stages]
    env: dict[str, np.ndarray] = {}
    for _ in progress(range(warmup), desc="chained warm-up inferences", unit="run"):
        env = dict(env0)
        for s, it in zip(stages, interps):
            _take(s, it.invoke(_feed(s, env, where)), env, where)
    for _ in progress(range(repeat), desc="chained inferences", unit="run"):
        if tracer is not None:
            tracer.new_run()
        env = dict(env0)
        for s, it, part_tracer in zip(stages, interps, part_tracers):
            feed = _feed(s, env, where)
            out = it.invoke(feed, part_tracer)  # type: ignore[arg-type]  # records alike
            _take(s, out, env, where)
    outs = _outputs(c, env, where)
    return RunResult(outs, tracer)


def _feed(s: _Stage, env: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    try:
        return {n: env[n] for n in s.inputs}
    except KeyError as e:
        raise PartitionError(f"part {s.index} ({s.file}) needs tensor {e.args[0]!r}, which "
                             "neither the source inputs nor an earlier part provide",
                             where=where, fix="the parts are out of order or the connection "
                                              "file is wrong") from None


def _take(s: _Stage, out: Mapping[str, np.ndarray], env: dict[str, np.ndarray],
          where: str) -> None:
    for n in s.outputs:
        if n not in out:
            raise PartitionError(f"part {s.index} ({s.file}) did not return its output {n!r}",
                                 where=where, fix=f"it returned {sorted(out)}")
        env[n] = out[n]


def _outputs(c: Connection, env: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    missing = [n for n in c.source.outputs if n not in env]
    if missing:
        raise PartitionError(
            f"no part produces source output(s) {missing}", where=where,
            fix=(
                "the connection file does not cover the whole source model: partition the model "
                "again (`toolkit partition`)"
            ),
        )
    return {n: env[n] for n in c.source.outputs}


def litert_runner(num_threads: int = 1) -> Runner:
    """Return a runner that runs a model in LiteRT (``ai_edge_litert``) with ``num_threads``.

    A model whose file is a ``.tflite`` is run from that file; any other is serialized as
    TFLite first (circle-only ops cannot run there). Interpreters are cached per model, so
    repeated chained runs do not rebuild them. Returns outputs by tensor name.

    A part with no outputs (ops whose results nothing uses) is not invoked: it has nothing
    to produce, and LiteRT's default XNNPACK delegate fails to invoke such a model.
    """
    from ai_edge_litert.interpreter import Interpreter

    from toolkit.formats.flatbuffer_write import write_model

    cache: dict[int, tuple[Model, Any]] = {}

    def run(model: Model, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not model.graph.outputs:
            return {}
        hit = cache.get(id(model))
        if hit is None or hit[0] is not model:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if model.path and Path(model.path).suffix == ".tflite":
                    it = Interpreter(model_path=model.path, num_threads=num_threads)
                else:
                    data = bytes(write_model(model, "tflite"))
                    it = Interpreter(model_content=data, num_threads=num_threads)
            it.allocate_tensors()
            hit = cache[id(model)] = (model, it)
        it = hit[1]
        for d in it.get_input_details():
            if d["name"] not in inputs:
                raise RuntimeInputError(f"LiteRT input {d['name']!r} was not given",
                                        fix=f"inputs are {sorted(inputs)}")
            value = np.asarray(inputs[d["name"]], d["dtype"])  # a scalar stays 0-d
            it.set_tensor(d["index"], value if value.flags.c_contiguous else value.copy())
        it.invoke()
        return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}

    return run
