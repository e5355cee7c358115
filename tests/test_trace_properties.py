"""Property tests: on random provenance, random fusions and random traces, trace-join conserves
time exactly and agrees with a plain per-event reference implementation."""

from __future__ import annotations

import math
from collections import defaultdict
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkit.trace.join._resolve as resolve_mod
import toolkit.trace.join.attribution as attribution_mod
import toolkit.trace.join.join as join_mod
import toolkit.trace.join.overlaps as overlaps_mod
from toolkit.trace import POLICIES, trace_join
from toolkit.trace.join.split import split_by_weights
from toolkit.trace.join.tables import ProvenanceTables

LAYER_POOL = ["l/a", "l/b", "l/c", "l/d", "l/e", "l/f"]


@contextmanager
def tiny_blocks(size: int):
    """Run the block-by-block code paths with blocks of ``size`` events."""
    mods = (join_mod, attribution_mod, overlaps_mod, resolve_mod)
    old = [m._BLOCK for m in mods]
    try:
        for m in mods:
            m._BLOCK = size
        yield
    finally:
        for m, v in zip(mods, old):
            m._BLOCK = v


@st.composite
def provenances(draw: Any) -> dict[str, Any]:
    n_src = draw(st.integers(1, 10))
    n_ops = draw(st.integers(1, 6))
    macs = draw(st.lists(st.integers(0, 50), min_size=n_src, max_size=n_src))
    nbytes = draw(st.lists(st.integers(0, 50), min_size=n_src, max_size=n_src))
    layers = [draw(st.lists(st.sampled_from(LAYER_POOL), min_size=0, max_size=3, unique=True))
              for _ in range(n_src)]
    # random fusions: every op carries a non-empty random set of source ops (sets may share)
    origins = [sorted(draw(st.sets(st.integers(0, n_src - 1), min_size=1, max_size=4)))
               for _ in range(n_ops)]
    stripes = draw(st.lists(st.integers(1, 3), min_size=n_ops, max_size=n_ops))
    return {"n_src": n_src, "macs": macs, "bytes": nbytes, "layers": layers,
            "origins": origins, "stripes": stripes}


def build(p: dict[str, Any]) -> ProvenanceTables:
    n_src = p["n_src"]
    carried = {s for o in p["origins"] for s in o}
    lay = [(s, layer) for s in range(n_src) for layer in p["layers"][s]]
    cmd_op = [o for o, k in enumerate(p["stripes"]) for _ in range(k)]
    return ProvenanceTables.build(
        source_ops=pd.DataFrame({"source_id": np.arange(n_src) * 3 + 1,  # sparse ids
                                 "name": [f"s{i}" for i in range(n_src)],
                                 "macs": p["macs"], "output_bytes": p["bytes"]}),
        layers=pd.DataFrame({"source_id": [s * 3 + 1 for s, _ in lay],
                             "layer": [x for _, x in lay]}),
        optimised_ops=pd.DataFrame({"optimised_id": np.arange(len(p["origins"])),
                                    "name": [f"op{i}" for i in range(len(p["origins"]))]}),
        origins=pd.DataFrame({"optimised_id": [o for o, ss in enumerate(p["origins"])
                                               for _ in ss],
                              "source_id": [s * 3 + 1 for ss in p["origins"] for s in ss]}),
        commands=pd.DataFrame({"command_id": np.arange(len(cmd_op)), "optimised_id": cmd_op}),
        removed=pd.DataFrame({"source_id": [s * 3 + 1 for s in range(n_src)
                                            if s not in carried],
                              "reason": "removed"}))


@st.composite
def traces(draw: Any, n_commands: int, n_ops: int) -> pd.DataFrame:
    n = draw(st.integers(0, 40))
    rows = []
    t = 0
    for _ in range(n):
        kind = draw(st.sampled_from(["command", "command", "command", "unknown", "name",
                                     "none"]))
        if kind == "command":
            key: dict[str, Any] = {"command_id": draw(st.integers(0, n_commands - 1))}
        elif kind == "unknown":
            key = {"command_id": draw(st.integers(n_commands, n_commands + 5))}
        elif kind == "name":
            key = {"name": draw(st.sampled_from([f"op{i}" for i in range(n_ops)] + ["zz"]))}
        else:
            key = {}
        t += draw(st.integers(0, 30))
        dur = draw(st.one_of(st.integers(-20, 10**6), st.integers(0, 10**13)))
        rows.append({**key, "start_ns": t, "dur_ns": dur, "run": draw(st.integers(0, 3)),
                     "tid": draw(st.integers(0, 1))})
    frame = pd.DataFrame({
        "command_id": pd.Series([r.get("command_id") for r in rows], dtype=object),
        "name": pd.Series([r.get("name") for r in rows], dtype=object),
        **{c: np.array([r[c] for r in rows], dtype=np.int64)
           for c in ("start_ns", "dur_ns", "run", "tid")}})
    return frame


# --------------------------------------------------------------------------------------------
# The reference: the documented algorithm, one event at a time in plain Python.

def reference_members(p: dict[str, Any], op: int, policy: str) -> list[tuple[int, str, int]]:
    """(source id, layer, weight) of each member of compiled op ``op``."""
    sources = p["origins"][op]
    per = {"equal": [1] * p["n_src"], "macs": p["macs"], "bytes": p["bytes"]}[policy]
    w = [per[s] for s in sources]
    if sum(w) == 0:
        w = [1] * len(sources)
    names = [p["layers"][s] or [f"s{s}"] for s in sources]
    lcm = math.lcm(*[len(x) for x in names])
    return [(s * 3 + 1, layer, ws * (lcm // len(ls)))
            for s, ws, ls in zip(sources, w, names) for layer in ls]


def reference_split(dur: int, weights: list[int]) -> list[int]:
    total = sum(weights)
    shares = [dur * w // total for w in weights]
    rems = [dur * w % total for w in weights]
    for j in sorted(range(len(weights)), key=lambda j: -rems[j])[:dur - sum(shares)]:
        shares[j] += 1
    return shares


def reference_unattributed(p: dict[str, Any], frame: pd.DataFrame, n_commands: int
                           ) -> dict[int, str]:
    cmd_op = [o for o, k in enumerate(p["stripes"]) for _ in range(k)]
    why: dict[int, str] = {}
    matched = []
    for i, row in enumerate(frame.itertuples(index=False)):
        if row.dur_ns < 0:
            why[i] = "negative duration"
        elif row.command_id is not None:
            if row.command_id >= n_commands:
                why[i] = "unknown command_id"
            else:
                matched.append((i, cmd_op[row.command_id]))
        elif row.name is not None:
            if row.name == "zz":
                why[i] = "unknown name"
            else:
                matched.append((i, int(row.name[2:])))
        else:
            why[i] = "no key"
    # overlaps, per track, among matched events with a positive duration
    cand = [i for i, _ in matched if frame["dur_ns"].iloc[i] > 0]
    for tid in (0, 1):
        ev = sorted((int(frame["start_ns"].iloc[i]),
                     -int(frame["start_ns"].iloc[i] + frame["dur_ns"].iloc[i]), i)
                    for i in cand if frame["tid"].iloc[i] == tid)
        ends = [-e for _, e, _ in ev]
        for j, (s, _e, i) in enumerate(ev):
            prior = max(ends[:j], default=None)
            if prior is not None and s < prior and ends[j] > prior:
                why[i] = "overlaps an earlier event on its track"
        for j, (_s, _e, i) in enumerate(ev[:-1]):
            if i in why:
                continue
            s2, e2 = ev[j + 1][0], ends[j + 1]
            if s2 < ends[j] and e2 <= ends[j]:
                why[i] = "encloses other events on its track"
    return why


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(POLICIES), block=st.sampled_from([2, 5, 1 << 16]))
def test_join_conserves_time_and_matches_the_reference(data: Any, policy: str,
                                                       block: int) -> None:
    p = data.draw(provenances())
    prov = build(p)
    n_commands = sum(p["stripes"])
    frame = data.draw(traces(n_commands, len(p["origins"])))
    with tiny_blocks(block):
        att = trace_join(frame, prov, policy=policy, overlaps="leaves", strict=False)
        att.check()
        un = att.unattributed()
        long = att.events()
        layers = att.by_layer()
        sources = att.by_source_op()
        ops = att.by_op()
    # conservation, exact
    total = int(frame["dur_ns"].clip(lower=0).sum()) if len(frame) else 0  # negative: 0 ns
    assert att.total_ns == total
    assert att.attributed_ns + att.unattributed_ns == total
    assert int(un["dur_ns"].clip(lower=0).sum()) == att.unattributed_ns
    assert int(long["attributed_ns"].sum()) == att.attributed_ns
    assert int(layers["total_ns"].sum()) == att.attributed_ns
    assert int(sources["total_ns"].sum()) == att.attributed_ns
    assert int(ops["total_ns"].sum()) == att.attributed_ns
    # which events are unattributed, and why
    expected_why = reference_unattributed(p, frame, n_commands)
    assert dict(zip(un["event_id"].tolist(), un["reason"].astype(str).tolist())) == expected_why
    # every attributed event split as the reference splits it
    cmd_op = [o for o, k in enumerate(p["stripes"]) for _ in range(k)]
    want_layer: dict[str, int] = defaultdict(int)
    want_rows = []
    for i, row in enumerate(frame.itertuples(index=False)):
        if i in expected_why:
            continue
        op = cmd_op[row.command_id] if row.command_id is not None else int(row.name[2:])
        members = reference_members(p, op, policy)
        for (s, layer, _w), ns in zip(members, reference_split(row.dur_ns,
                                                               [m[2] for m in members])):
            want_layer[layer] += ns
            want_rows.append((i, op, s, layer, ns))
    got_rows = list(zip(long["event_id"], long["optimised_id"], long["source_id"],
                        long["layer"].astype(str), long["attributed_ns"]))
    assert got_rows == want_rows
    got_layer = dict(zip(layers["layer"], layers["total_ns"]))
    for layer, ns in want_layer.items():
        assert got_layer[layer] == ns
    # removed source ops get nothing
    removed = sources[sources["removed"] != ""]
    assert (removed["total_ns"] == 0).all()
    # per-run statistics: avg over runs times runs is the total
    if att.runs:
        assert np.allclose(layers["avg_ms"] * att.runs * 1e6, layers["total_ns"], rtol=1e-9,
                           atol=1e-3)
        assert (layers["min_ms"] <= layers["p50_ms"] + 1e-12).all()
        assert (layers["p50_ms"] <= layers["max_ms"] + 1e-12).all()


@settings(max_examples=300, deadline=None)
@given(weights=st.lists(st.integers(0, 2**31 // 8), min_size=1, max_size=8),
       durs=st.lists(st.integers(0, 2**62), min_size=1, max_size=6))
def test_split_is_exact_and_largest_remainder(weights: list[int], durs: list[int]) -> None:
    if sum(weights) == 0:
        weights = [w + 1 for w in weights]
    k = len(weights)
    n = len(durs)
    event, member, ns = split_by_weights(
        np.array(durs, np.int64), np.zeros(n, np.int64), np.full(n, k, np.int64),
        np.full(n, sum(weights), np.int64), np.array(weights, np.int64))
    total = sum(weights)
    for i, d in enumerate(durs):
        parts = ns[event == i].tolist()
        assert member[event == i].tolist() == list(range(k))
        assert sum(parts) == d
        for w, part in zip(weights, parts):
            floor = d * w // total
            assert part in (floor, floor + 1)
            if w == 0:
                assert part == 0
        assert parts == reference_split(d, weights)


def _random_model(draw: Any) -> Any:
    from toolkit.builder import ModelBuilder

    mb = ModelBuilder("rand")
    x = mb.input("x", [1, 8, 8, 4])
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    for i in range(draw(st.integers(1, 6))):
        choice = draw(st.sampled_from(["conv", "add", "relu", "mul"]))
        if choice == "conv":
            w = mb.const(f"w{i}", rng.standard_normal((4, 3, 3, 4)).astype(np.float32))
            b = mb.const(f"b{i}", np.zeros(4, np.float32))
            x = mb.conv2d(x, w, b, name=f"conv{i}")
        elif choice == "add":
            x = mb.add(x, mb.const(f"c{i}", np.float32(0.5)), name=f"add{i}")
        elif choice == "mul":
            x = mb.mul(x, mb.const(f"m{i}", np.float32(2.0)), name=f"mul{i}")
        else:
            x = mb.unary("RELU", x, name=f"relu{i}")
    mb.output(x)
    return mb.build()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(POLICIES))
def test_random_built_models_compiled_and_joined(data: Any, policy: str) -> None:
    from toolkit.compiler import compile_model

    model = _random_model(data.draw)
    compiled = compile_model(model)
    commands = compiled.commands()["command_id"].to_numpy()
    runs = data.draw(st.integers(1, 3))
    durs = data.draw(st.lists(st.integers(-3, 10**7), min_size=len(commands) * runs,
                              max_size=len(commands) * runs))
    frame = pd.DataFrame({"command_id": np.tile(commands, runs),
                          "run": np.repeat(np.arange(runs), len(commands)),
                          "start_ns": np.arange(len(durs)) * 10**8, "dur_ns": durs})
    att = trace_join(frame, compiled, policy=policy)
    att.check()
    assert att.attributed_ns == sum(d for d in durs if d >= 0)
    assert att.unattributed_ns == 0  # negative durations are problem rows of 0 ns
    assert len(att.unattributed()) == sum(1 for d in durs if d < 0)
    assert set(att.by_layer()["layer"]) == set(compiled.layers()["layer"])


@settings(max_examples=200, deadline=None)
@given(gaps=st.lists(st.integers(1, 20), min_size=0, max_size=60),
       durs=st.lists(st.integers(0, 60), min_size=60, max_size=60),
       keep=st.lists(st.booleans(), min_size=60, max_size=60),
       block=st.integers(1, 7))
def test_block_pass_finds_the_same_overlaps_as_sorting(gaps: list[int], durs: list[int],
                                                       keep: list[bool], block: int) -> None:
    n = len(gaps)
    start = np.cumsum(np.array(gaps, dtype=np.int64))
    dur = np.array(durs[:n], dtype=np.int64)
    candidate = np.array(keep[:n], dtype=bool)
    enc_ref, over_ref = overlaps_mod._sorting_pass(start, dur, candidate & (dur > 0), None)
    with tiny_blocks(block):
        enc, over = overlaps_mod.find_overlaps(start, dur, candidate, None)
    assert sorted(enc.tolist()) == sorted(enc_ref.tolist())
    assert sorted(over.tolist()) == sorted(over_ref.tolist())
