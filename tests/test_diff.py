"""tk.diff: two attributions compared per layer, op and backend, with the run-to-run noise."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from support import SAMPLES

import toolkit as tk
from toolkit.layer_names import NO_LAYER
from toolkit.trace.fleet.synthetic import synthetic_model, synthetic_session
from toolkit.trace.views._ranktest import _u_cdf, bh_reject, mann_whitney_p, min_p_value

PAIR = SAMPLES / "pair"


# ------------------------------------------------------------------ the rank test
@pytest.mark.parametrize(("na", "nb"), [(1, 1), (3, 4), (4, 4), (2, 6), (5, 3)])
def test_exact_u_distribution_matches_enumeration(na: int, nb: int) -> None:
    counts = np.zeros(na * nb + 1)
    for picked in itertools.combinations(range(na + nb), na):
        counts[int(sum(picked) - na * (na - 1) / 2)] += 1
    assert np.allclose(np.cumsum(counts) / counts.sum(), _u_cdf(na, nb))
    assert math.isclose(min_p_value(na, nb), min(1.0, 2 * counts[0] / counts.sum()))


def test_rank_test_exact_and_normal_agree_and_ties_are_handled() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=(200, 25))
    b = rng.normal(size=(200, 25)) + np.linspace(0, 1.5, 200)[:, None]
    exact = mann_whitney_p(a, b)  # 50 runs, no ties: exact
    tied = mann_whitney_p(np.round(a, 1), np.round(b, 1))  # ties: normal approximation
    assert np.all((exact >= 0) & (exact <= 1))
    assert np.corrcoef(np.log(exact), np.log(tied))[0, 1] > 0.98
    assert np.median(exact[:20]) > 0.1 and exact[-20:].max() < 0.01
    # every run of a below every run of b: the smallest p there is
    lo = np.arange(8.0)[None, :]
    assert math.isclose(mann_whitney_p(lo, lo + 100)[0], min_p_value(8, 8))
    assert mann_whitney_p(np.ones((1, 5)), np.ones((1, 5)))[0] == 1.0


def test_benjamini_hochberg() -> None:
    p = np.array([0.001, 0.012, 0.03, 0.04, 0.5, np.nan])
    assert bh_reject(p, 0.05).tolist() == [True, True, True, True, False, False]
    assert not bh_reject(np.array([0.02, 0.5, 0.6, 0.7, 0.8]), 0.05).any()


# ------------------------------------------------------------------ synthetic pairs
def _solo_layer(model: object) -> tuple[str, dict[int, float]]:
    """A layer whose source op is alone in its compiled op, and its commands slowed 2x."""
    org, lay, cmd = model.origins_df, model.layers_df, model.commands_df  # type: ignore[attr-defined]
    per_op = org.groupby("optimised_id")["source_id"].count()
    per_src = lay.groupby("source_id")["layer"].count()
    for op in per_op.index[per_op == 1]:
        sid = int(org.loc[org["optimised_id"] == op, "source_id"].iloc[0])
        if per_src.get(sid, 0) == 1:
            layer = str(lay.loc[lay["source_id"] == sid, "layer"].iloc[0])
            return layer, {int(c): 2.0 for c in cmd.loc[cmd["optimised_id"] == op,
                                                          "command_id"]}
    raise AssertionError("no compiled op with one source op of one layer")


def _join(model: object, runs: int, **kw: object) -> tk.Attribution:
    frame = synthetic_session(model, 0, runs, anomalies=False, **kw)  # type: ignore[arg-type]
    return tk.trace_join(tk.read_trace(frame), model)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_layer_made_twice_as_slow_ranks_first_beyond_noise(seed: int) -> None:
    model = synthetic_model(ops=24, seed=seed)
    layer, slow = _solo_layer(model)
    a, b = _join(model, 20), _join(model, 20, noise_seed=7, slow=slow)
    d = tk.diff(a, b)
    t = d.by_layer()
    assert t["layer"].iloc[0] == layer
    first = t.iloc[0]
    assert bool(first["beyond_noise"]) and first["verdict"] == "slower in b"
    assert 80 < first["delta_pct"] < 125  # twice the base time, within the noise band
    assert set(t.loc[t["beyond_noise"].fillna(False).astype(bool), "layer"]) == {layer}
    # the columns agree with each side's own by_layer()
    la = a.by_layer().set_index("layer")
    row = t.set_index("layer").loc[layer]
    assert math.isclose(row["a_mean_ms"], la.loc[layer, "avg_ms"], rel_tol=1e-9)
    assert math.isclose(row["a_p50_ms"], la.loc[layer, "p50_ms"], rel_tol=1e-9)
    assert math.isclose(t["delta_share"].sum(), 1.0)
    assert d.summary()["beyond_noise"] == 1
    # the same change seen by op and by backend
    assert bool(d.by_op()["beyond_noise"].iloc[0])
    assert d.moved_ops().empty  # one compile: nothing moved


@pytest.mark.parametrize("noise_seed", [1, 2, 3])
def test_a_pair_differing_only_by_noise_marks_nothing(noise_seed: int) -> None:
    model = synthetic_model(ops=24)
    d = tk.diff(_join(model, 20), _join(model, 20, noise_seed=noise_seed))
    t = d.by_layer()
    timed = t["present"] != "neither"
    assert timed.sum() > 30
    assert not t.loc[timed, "beyond_noise"].isna().any()
    assert not t["beyond_noise"].fillna(False).any()
    assert (t.loc[timed, "verdict"] == "within noise").all()
    assert (t.loc[~timed, "reason"] == "no time on either side").all()
    assert not d.by_backend()["beyond_noise"].any()


def test_too_few_runs_give_the_delta_without_a_verdict() -> None:
    model = synthetic_model(ops=12)
    layer, slow = _solo_layer(model)
    d = tk.diff(_join(model, 3), _join(model, 3, noise_seed=1, slow=slow))
    t = d.by_layer()
    assert t["layer"].iloc[0] == layer and t["delta_ns"].iloc[0] > 0
    assert t["beyond_noise"].isna().all() and (t["verdict"] == "no verdict").all()
    assert t["reason"].str.contains("too few runs for a noise estimate: 3 in a and 3 in b").all()
    assert "too few runs" in d.summary()["verdict_reason"]
    assert "too few runs" in d._repr_html_()


# ------------------------------------------------------------------ real compiles
@pytest.fixture(scope="module")
def two_compiles() -> tuple[tk.Model, tk.Attribution, tk.Attribution]:
    source = tk.load(SAMPLES / "cnn.tflite")
    fused, plain = tk.compile(source), tk.compile(source, passes=[])
    _, ta = tk.run(fused, trace=True, repeat=8, warmup=2)
    _, tb = tk.run(plain, trace=True, repeat=8, warmup=2)
    return source, tk.trace_join(ta, fused), tk.trace_join(tb, plain)


def test_a_diff_across_two_compiles_lists_the_moved_ops(two_compiles: tuple) -> None:
    source, a, b = two_compiles
    d = tk.diff(a, b, labels=("fused", "unfused"))
    moved = d.moved_ops()
    fused_ops = a.by_op()
    fused_groups = {tuple(sorted(s)) for s in fused_ops["source_ids"] if len(s) > 1}
    assert fused_groups, "the default passes fuse something in cnn.tflite"
    on_a = moved[moved["side"] == "a"]
    listed = {tuple(sorted(int(x) for x in s.strip("{}").split(", ")))
              for s in on_a["source_ops"]}
    assert listed == fused_groups
    assert (on_a["change"] == "fused").all()
    for _, row in on_a.iterrows():  # layers as the model's origin records name them
        ids = [int(x) for x in row["source_ops"].strip("{}").split(", ")]
        want = tuple(dict.fromkeys(x for i in sorted(ids) for x in source.origin(i).layers))
        assert row["layers"] == want
    on_b = moved[moved["side"] == "b"]
    assert len(on_b) == sum(len(g) for g in fused_groups)  # each runs apart without passes
    assert (on_b["change"] == "split").all()
    # by_op: the fused op is a row of a alone, its parts rows of b alone
    ops = d.by_op().set_index("op")
    for g in fused_groups:
        key = "{" + ", ".join(str(i) for i in g) + "}"
        assert ops.loc[key, "present"] == "a only"
        assert all(ops.loc["{" + str(i) + "}", "present"] == "b only" for i in g)
    layers = d.by_layer()
    assert set(layers["layer"]) == set(a.by_layer()["layer"])
    assert (layers["present"] == "both").all()
    assert "ops that moved" in d._repr_html_()


def test_two_different_source_models_are_refused_unless_matched_by_name(
        two_compiles: tuple) -> None:
    _, a, _ = two_compiles
    other = tk.compile(tk.load(SAMPLES / "two_branch.tflite"))
    _, t = tk.run(other, trace=True, repeat=4)
    b = tk.trace_join(t, other)
    with pytest.raises(tk.ToolkitError, match="different source models") as err:
        tk.diff(a, b)
    assert "match='name'" in str(err.value)
    d = tk.diff(a, b, match="name")
    names_a, names_b = set(a.by_layer()["layer"]), set(b.by_layer()["layer"])
    un = d.unmatched()
    assert set(un.loc[un["side"] == "a", "layer"]) == names_a - names_b
    assert set(un.loc[un["side"] == "b", "layer"]) == names_b - names_a
    assert d.moved_ops().empty
    t = d.by_layer()
    lonely = t[t["layer"].isin(names_a ^ names_b)]
    assert lonely["beyond_noise"].isna().all()
    assert lonely["reason"].str.startswith("no layer of this name").all()


def test_bad_arguments() -> None:
    with pytest.raises(tk.ToolkitError, match="not an attribution"):
        tk.diff("trace.json", "other.json")
    model = synthetic_model(ops=4)
    a = _join(model, 4)
    with pytest.raises(tk.ToolkitError, match="unknown match"):
        tk.diff(a, a, match="layers")
    with pytest.raises(tk.ToolkitError, match="alpha"):
        tk.diff(a, a, alpha=5)


# ------------------------------------------------------------------ two runtimes
def test_executorch_and_onnx_runtime_profiles_of_one_module_match_by_name() -> None:
    et = tk.read_executorch(PAIR / "cnn_xnnpack.etdp", PAIR / "cnn_xnnpack.etrecord.bin",
                            PAIR / "cnn_xnnpack.pte").attribution()
    ort = tk.join_ort(PAIR / "cnn.all.prof.json.gz", PAIR / "cnn.onnx",
                      PAIR / "cnn.all.opt.onnx")
    modules = set(json.loads((PAIR / "layers.json").read_text())["layers"])
    et_rows = et.by_layer()
    # the nodes of the top module are under the one (no layer) row in both joins (in
    # ExecuTorch's, the row without a module type)
    et_layers = set(et_rows.loc[et_rows["module_type"] != "", "layer"])
    assert set(et_rows["layer"]) - et_layers == {NO_LAYER}
    ort_layers = set(ort.by_layer()["layer"]) - {NO_LAYER}
    assert et_layers <= modules and ort_layers <= modules
    # the TorchScript exporter folds every BatchNorm into its convolution
    assert et_layers - ort_layers == {"bn1", "bn2", "stem.1"}
    with pytest.raises(tk.ToolkitError, match="different source models"):
        tk.diff(et, ort)
    d = tk.diff(et, ort, match="name", labels=("executorch", "onnxruntime"))
    t = d.by_layer().set_index("layer")
    assert set(t.index) == et_layers | ort_layers | {NO_LAYER}
    both = sorted(et_layers & ort_layers)
    assert len(both) >= 7
    for layer in both:
        row = t.loc[layer]
        assert row["a_mean_ms"] == pytest.approx(
            et.by_layer().set_index("layer").loc[layer, "avg_ms"])
        assert row["b_mean_ms"] == pytest.approx(
            ort.by_layer().set_index("layer").loc[layer, "avg_ms"])
        assert row["verdict"] in ("slower in b", "faster in b", "within noise")
    # (no layer) is matched by name like any layer: the folded norms are all that is left
    assert set(d.unmatched()["layer"]) == {"bn1", "bn2", "stem.1"}
    assert t.loc[NO_LAYER, "present"] == t.loc[both[0], "present"]
    assert t.loc[["bn1", "bn2", "stem.1"], "present"].eq("a only").all()
    # each runtime's backends (the one join's by_backend): no name in common
    backends = d.by_backend().set_index("backend")["present"]
    assert backends.to_dict() == {
        **{b: "a only" for b in et.by_backend()["backend"] if b},
        **{b: "b only" for b in ort.by_backend()["backend"] if b}}
    summary = d.summary()
    assert summary["runs_a"] == summary["runs_b"] == 20 and not summary["same_model"]


def test_per_run_tables_sum_to_the_views() -> None:
    et = tk.read_executorch(PAIR / "cnn_xnnpack.etdp", PAIR / "cnn_xnnpack.etrecord.bin",
                            PAIR / "cnn_xnnpack.pte").attribution()
    ort = tk.join_ort(PAIR / "cnn.all.prof.json.gz", PAIR / "cnn.onnx",
                      PAIR / "cnn.all.opt.onnx")
    for att in (et, ort):
        for by in ("layer", "op"):
            view = getattr(att, f"by_{by}")()
            pr = att.per_run(by)
            sums = pr.groupby("row")["ns"].sum().reindex(range(len(view)), fill_value=0)
            assert np.array_equal(sums.to_numpy(), view["total_ns"].to_numpy())
            assert pr["run"].between(0, att.runs - 1).all()
        # no command queue: the one join's per-run table of commands is empty
        assert att.per_run("command").empty and att.by_command().empty
        with pytest.raises(tk.ToolkitError, match="per-run view"):
            att.per_run("layers")
    assert isinstance(et.per_run()["layer"].iloc[0], str)
    assert pd.api.types.is_integer_dtype(ort.per_run("op")["optimised_id"])


# ------------------------------------------------------------------ other sources
def test_a_fleet_against_the_one_join_of_its_traces_differs_by_nothing(tmp_path) -> None:
    from toolkit.trace.fleet.synthetic import write_synthetic_fleet

    model = synthetic_model(ops=10)
    paths = write_synthetic_fleet(tmp_path, model, files=3, runs_per_file=6)
    fleet = tk.trace_join_many(paths, model)
    frames = [pd.read_parquet(p) for p in paths]
    one = tk.trace_join(tk.read_trace(pd.concat(frames, ignore_index=True)), model)
    d = tk.diff(fleet, one)
    for view in (d.by_layer(), d.by_op(), d.by_backend()):
        assert (view["delta_ns"] == 0).all()
        timed = view["present"] == "both"
        assert timed.any() and (view.loc[timed, "verdict"] == "within noise").all()
    assert d.summary()["runs_a"] == d.summary()["runs_b"] == 18


def test_vela_estimates_have_one_run_and_get_no_verdict(tmp_path) -> None:
    pytest.importorskip("ethosu.vela")
    from toolkit.vela import read_vela, run_vela

    int8 = SAMPLES / "cnn_int8.tflite"
    out = run_vela(int8, tmp_path / "vela")
    est = read_vela(out, model=int8).attribution()
    d = tk.diff(est, est)
    t = d.by_layer()
    assert set(t["layer"]) == set(est.by_layer()["layer"])
    assert (t["delta_ns"] == 0).all() and t["beyond_noise"].isna().all()
    assert t["reason"].str.contains("1 in a and 1 in b").all()
