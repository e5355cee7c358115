"""Synthetic compiled models and device-session traces, for trying fleet joins at any size.

    model = synthetic_model(ops=40)
    paths = write_synthetic_fleet("fleet/", model, files=8, events_per_file=20_000)
    fleet = trace_join_many(paths, model)

Each session (one file, one device) repeats the model's command queue run after run on its
own track (``pid`` = device): per run a ``Method::execute`` span without a key (dispatch
overhead) holds one span per command (keyed by ``command_id``). With ``anomalies`` every kind
the join handles appears: a warm-up first run (3x slower), commands nested in commands (three
levels), unknown command ids, negative durations and spans that overlap without nesting.
Run values are ``device * runs_per_file + i``: no run appears in two files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.join.tables import ProvenanceTables

__all__ = ["synthetic_model", "synthetic_session", "write_synthetic_fleet"]


def synthetic_model(ops: int = 24, seed: int = 0) -> ProvenanceTables:
    """Return provenance tables of ``ops`` compiled ops (1-3 source ops each, 1-3 stripes
    (commands) each, 10% of source ops with two layers, backends ``npu`` and ``cpu``, one
    removed source op)."""
    if ops < 1:
        raise ToolkitError(f"ops must be >= 1, got {ops}", fix="pass ops >= 1")
    rng = np.random.default_rng(seed)
    fuse = rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2], size=ops)
    n_src = int(fuse.sum())
    total = n_src + 1
    source_ids = np.arange(total, dtype=np.int64)
    macs = rng.integers(1_000, 5_000_000, size=total)
    macs[rng.random(total) < 0.15] = 0
    two = rng.random(total) < 0.1
    stripes = rng.choice([1, 2, 3], p=[0.7, 0.2, 0.1], size=ops)
    cmd_op = np.repeat(np.arange(ops), stripes)
    first = np.repeat(np.cumsum(stripes) - stripes, stripes)
    return ProvenanceTables.build(
        source_ops=pd.DataFrame({
            "source_id": source_ids, "op_index": source_ids,
            "operator": np.where(macs > 0, "CONV_2D", "RESHAPE"),
            "name": [f"model/layer{i}/op" for i in range(total)], "macs": macs,
            "output_bytes": rng.integers(64, 1 << 20, size=total)}),
        layers=pd.DataFrame({
            "source_id": np.concatenate([source_ids, source_ids[two]]),
            "layer": [f"model/layer{i}" for i in source_ids]
            + [f"model/extra{i}" for i in source_ids[two]]}),
        optimised_ops=pd.DataFrame({
            "optimised_id": np.arange(ops), "operator": ["FUSED"] * ops,
            "name": [f"op{i}" for i in range(ops)],
            "backend": np.where(np.arange(ops) % 5 == 4, "cpu", "npu")}),
        origins=pd.DataFrame({"optimised_id": np.repeat(np.arange(ops), fuse),
                              "source_id": np.arange(n_src)}),
        commands=pd.DataFrame({"command_id": np.arange(len(cmd_op)), "optimised_id": cmd_op,
                               "stripe": np.arange(len(cmd_op)) - first,
                               "stripes": np.repeat(stripes, stripes)}),
        removed=pd.DataFrame({"source_id": [n_src], "reason": ["no-op reshape"]}))


def synthetic_session(model: ProvenanceTables, device: int, runs: int, seed: int = 0,
                      anomalies: bool = True, noise_seed: int | None = None,
                      slow: Mapping[int, float] | None = None) -> pd.DataFrame:
    """Return the events of one device session: ``runs`` runs of the model's commands.

    Each command has a base duration (drawn from ``seed`` and ``device``) times a run-to-run
    noise factor in [0.8, 1.25]. ``noise_seed`` draws the noise (and the anomalies) from
    another stream over the same base durations: two sessions that differ only by noise.
    ``slow`` multiplies the base duration of the commands it names (``{command_id:
    factor}``).

    Columns: ``name`` (str), ``pid`` (int64, the device), ``tid`` (int64, 1), ``device``
    (str), ``run`` (int64: ``device * runs + i``), ``command_id`` (nullable ``Int64``;
    missing for the ``Method::execute`` wrappers), ``start_ns``, ``dur_ns`` (int64).
    """
    if runs < 1:
        raise ToolkitError(f"runs must be >= 1, got {runs}", fix="pass runs >= 1")
    rng = np.random.default_rng([seed, device])
    cmds = model.commands_df["command_id"].to_numpy(dtype=np.int64)
    k = len(cmds)
    base = rng.integers(1_000, 40_000, size=k)
    if slow:
        factor = np.array([float(slow.get(int(c), 1.0)) for c in cmds.tolist()])
        base = (base * factor).astype(np.int64)
    if noise_seed is not None:
        rng = np.random.default_rng([seed, device, noise_seed])
    dur = (base[None, :] * rng.uniform(0.8, 1.25, size=(runs, k))).astype(np.int64)
    if anomalies:
        dur[0] *= 3  # warm-up
    gap = rng.integers(50, 400, size=(runs, k))
    lead = 500
    offsets = lead + np.cumsum(dur + gap, axis=1) - (dur + gap)
    run_len = offsets[:, -1] + dur[:, -1] + lead
    run_start = np.cumsum(run_len + 1_000) - (run_len + 1_000) + device * 10_000_000_000
    start = run_start[:, None] + offsets
    key = np.broadcast_to(cmds, (runs, k)).copy()
    names = np.broadcast_to(np.array([f"cmd{c}" for c in cmds], dtype=object),
                            (runs, k)).copy()
    extra_start: list[np.ndarray] = []
    extra_dur: list[np.ndarray] = []
    extra_key: list[np.ndarray] = []
    extra_run: list[np.ndarray] = []
    if anomalies:
        n = runs * k
        flat = rng.choice(n, size=max(1, n // 200), replace=False)
        key.ravel()[flat] = cmds.max() + 1 + rng.integers(0, 5, size=len(flat))  # unknown
        neg = rng.choice(n, size=max(1, n // 500), replace=False)
        dur.ravel()[neg] = -rng.integers(1, 1_000, size=len(neg))  # negative
        # nested: a child span (same command) inside a command, three levels deep
        host = rng.choice(n, size=max(1, n // 100), replace=False)
        host = host[dur.ravel()[host] > 100]
        child = dur.ravel()[host] // 3
        extra_start.append(start.ravel()[host] + child)
        extra_dur.append(child)
        extra_key.append(key.ravel()[host])
        extra_run.append(np.repeat(np.arange(runs), k)[host])
        # overlapping without nesting: a span from the middle of a command past its end
        cross = rng.choice(n, size=max(1, n // 300), replace=False)
        cross = cross[(cross % k < k - 1) & (dur.ravel()[cross] > 100)]
        extra_start.append(start.ravel()[cross] + dur.ravel()[cross] // 2)
        extra_dur.append(dur.ravel()[cross])
        extra_key.append(key.ravel()[cross])
        extra_run.append(np.repeat(np.arange(runs), k)[cross])
    run_ids = device * runs + np.arange(runs, dtype=np.int64)
    ev_start = np.concatenate([run_start, start.ravel(), *extra_start])
    ev_dur = np.concatenate([run_len, dur.ravel(), *extra_dur])
    ev_run = np.concatenate([np.arange(runs), np.repeat(np.arange(runs), k), *extra_run])
    keys = np.concatenate([np.zeros(runs, np.int64), key.ravel(), *extra_key])
    has_key = np.ones(len(keys), dtype=bool)
    has_key[:runs] = False
    extra_names = [np.array([f"cmd{c}" for c in e.tolist()], dtype=object) for e in extra_key]
    ev_name = np.concatenate([np.full(runs, "Method::execute", dtype=object), names.ravel(),
                              *extra_names])
    order = np.lexsort((-ev_dur, ev_start))
    n_ev = len(order)
    return pd.DataFrame({
        "name": pd.Series(ev_name[order], dtype=str),
        "pid": np.full(n_ev, device, dtype=np.int64),
        "tid": np.ones(n_ev, dtype=np.int64),
        "device": pd.Series([f"dev{device:04d}"] * n_ev, dtype=str),
        "run": run_ids[ev_run[order]],
        "command_id": pd.arrays.IntegerArray(keys[order].astype(np.int64), ~has_key[order]),
        "start_ns": ev_start[order].astype(np.int64),
        "dur_ns": ev_dur[order].astype(np.int64),
    })


def write_synthetic_fleet(folder: str | os.PathLike[str], model: ProvenanceTables,
                          files: int, runs_per_file: int, seed: int = 0,
                          anomalies: bool = True, fmt: str = "parquet") -> list[Path]:
    """Write ``files`` sessions (device ``i`` in ``session_<i>.<fmt>``) of
    ``runs_per_file`` runs each; return their paths. ``fmt``: ``parquet`` or ``csv``."""
    if fmt not in ("parquet", "csv"):
        raise ToolkitError(f"unknown fleet file format {fmt!r}", fix="use 'parquet' or 'csv'")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        frame = synthetic_session(model, i, runs_per_file, seed, anomalies)
        path = out / f"session_{i:04d}.{fmt}"
        if fmt == "parquet":
            from toolkit.formats.trace_parquet import write_trace_parquet

            write_trace_parquet(frame, path)
        else:
            from toolkit.util.atomic import atomic_open

            with atomic_open(path) as f:
                frame.to_csv(f, index=False)
        paths.append(path)
    return paths
