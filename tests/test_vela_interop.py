"""Vela interop: run the real Vela, read what it wrote, attribute it to the input model's ops.

Module-scoped fixtures run the installed ``ethos-u-vela`` once per (model, configuration):
the int8 samples ``sample_models/cnn_int8.tflite`` (toolkit builder) and
``sample_models/tf/tf_cnn_int8.tflite`` (TensorFlow converter) on Ethos-U55-128 and
Ethos-U85-256 (default core) and Ethos-U55-128 with ``--debug-force-legacy-core``; a small int8
model with a SIN op (which Vela leaves on the CPU) on the same three; the float ``cnn.tflite``
(all on the CPU) on the default and legacy cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import ToolkitError, VelaError
from toolkit.formats.chrome_trace import read_chrome_trace, write_chrome_trace
from toolkit.layer_names import NO_LAYER
from toolkit.provenance import COMMAND_COLUMNS, OPTIMISED_COLUMNS, SOURCE_COLUMNS, Provenance
from toolkit.vela import (
    POLICIES,
    VelaAttribution,
    VelaProvenance,
    VelaResult,
    make_npu_trace,
    read_vela,
    run_vela,
)
from toolkit.vela.estimates import match_per_layer_rows, read_estimates, split_int

ROOT = Path(__file__).resolve().parent.parent
INT8_SAMPLES = {
    "cnn_int8": ROOT / "sample_models" / "cnn_int8.tflite",
    "tf_cnn_int8": ROOT / "sample_models" / "tf" / "tf_cnn_int8.tflite",
}
FLOAT_SAMPLE = ROOT / "sample_models" / "cnn.tflite"
CONFIGS: dict[str, tuple[str, bool]] = {
    "u55": ("ethos-u55-128", False),
    "u85": ("ethos-u85-256", False),
    "u55-legacy": ("ethos-u55-128", True),
}
SHARED_AC = ("sram_ac", "dram_ac", "on_chip_flash_ac", "off_chip_flash_ac")


@dataclass
class Run:
    """One real Vela run and what read_vela made of it."""

    model: str
    config: str
    model_path: Path
    outdir: Path
    res: VelaResult


_RUNS: dict[tuple[str, str], Run] = {}


def _run(tmp_path_factory: pytest.TempPathFactory, name: str, path: Path, config: str) -> Run:
    """Run Vela once per (model, configuration) in this process and read what it wrote."""
    if (name, config) not in _RUNS:
        accelerator, legacy = CONFIGS[config]
        out = run_vela(path, tmp_path_factory.mktemp(f"vela-{name}-{config}"),
                       accelerator=accelerator, legacy=legacy)
        _RUNS[name, config] = Run(name, config, path, out, read_vela(out, model=path))
    return _RUNS[name, config]


@pytest.fixture(scope="module", params=[(m, c) for m in INT8_SAMPLES for c in CONFIGS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def int8_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Vela on an int8 sample, once per configuration."""
    name, config = request.param
    return _run(tmp_path_factory, name, INT8_SAMPLES[name], config)


LEGACY_CONFIGS = [c for c, (_, legacy) in CONFIGS.items() if legacy]
DEFAULT_CONFIGS = [c for c, (_, legacy) in CONFIGS.items() if not legacy]


@pytest.fixture(scope="module", params=[(m, c) for m in INT8_SAMPLES for c in LEGACY_CONFIGS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def legacy_int8_run(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Vela's legacy core on an int8 sample."""
    name, config = request.param
    return _run(tmp_path_factory, name, INT8_SAMPLES[name], config)


@pytest.fixture(scope="module", params=[(m, c) for m in INT8_SAMPLES for c in DEFAULT_CONFIGS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def default_int8_run(request: pytest.FixtureRequest,
                     tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Vela's default core on an int8 sample."""
    name, config = request.param
    return _run(tmp_path_factory, name, INT8_SAMPLES[name], config)


def _sin_model(path: Path) -> Path:
    """Write an int8 conv -> SIN -> conv -> add model (SIN has no NPU support in Vela)."""
    import toolkit as tk
    from toolkit.builder import ModelBuilder
    from toolkit.ir import Quantization

    q = Quantization.make(0.05, 0)
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 8], np.int8, quant=q)
    rng = np.random.default_rng(0)
    w = mb.const("w", rng.integers(-64, 64, (8, 3, 3, 8)).astype(np.int8),
                 quant=Quantization.make([0.01] * 8, [0] * 8))
    b = mb.const("b", np.zeros(8, np.int32), quant=Quantization.make([0.0005] * 8, [0] * 8))
    y = mb.conv2d(x, w, b, activation="RELU", name="blk_conv", quant=q)
    z = mb.unary("SIN", y, name="blk_sin")
    v = mb.conv2d(z, w, b, name="blk_conv2", quant=q)
    mb.output(mb.add(v, y, name="blk_res"))
    tk.save(mb.build(), path)
    return path


@pytest.fixture(scope="module")
def sin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sin_model(tmp_path_factory.mktemp("sin") / "sin_int8.tflite")


@pytest.fixture(scope="module", params=list(CONFIGS))
def sin_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            sin_path: Path) -> Run:
    """Vela on the int8 model with a CPU op, once per configuration."""
    return _run(tmp_path_factory, "sin_int8", sin_path, request.param)


@pytest.fixture(scope="module", params=["u55", "u55-legacy"])
def float_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Vela on the float sample: every op stays on the CPU."""
    return _run(tmp_path_factory, "cnn", FLOAT_SAMPLE, request.param)


def _model_ops(res: VelaResult) -> list[tuple[str, str]]:
    return [(op.kind, op.name) for op in res.model.graph.ops]


def _csv_totals(res: VelaResult) -> dict[str, float]:
    """Column sums of the per-layer CSV for the figures the attribution also has."""
    csv = res.per_layer
    assert csv is not None
    cols = ["op_cycles", "npu_cycles", "mac_count",
            *[c for c in SHARED_AC if c in csv and c in res.estimates.metrics]]
    return {c: csv[c].sum() for c in cols}


# ---------------------------------------------------------------------------------------------
# Done-when: every operator appears, cycles sum to Vela's own per-layer CSV


def test_core_matches_configuration(int8_run: Run) -> None:
    import toolkit as tk

    res = int8_run.res
    again = tk.read_vela(int8_run.outdir, model=int8_run.model_path)
    assert isinstance(again, VelaResult) and again.db.tables.keys() == res.db.tables.keys()
    assert res.core == ("legacy" if CONFIGS[int8_run.config][1] else "default")
    assert res.per_layer is not None and len(res.per_layer) > 0
    assert res.summary is not None and res.summary["network"] == int8_run.model_path.stem


def test_every_operator_of_the_input_model_appears(int8_run: Run) -> None:
    res = int8_run.res
    ops = _model_ops(res)
    att = res.attribution()
    by_src = att.by_source_op()
    assert by_src["source_id"].tolist() == list(range(len(ops)))
    assert by_src["op_index"].tolist() == list(range(len(ops)))
    assert list(zip(by_src["operator"], by_src["name"])) == ops
    assert (by_src["backend"] == "npu").all()  # every op of these samples runs on the NPU
    # every op gets NPU figures, except what Vela removed (a RESHAPE becomes a memory alias)
    removed = by_src["removed"] != ""
    assert set(by_src.loc[removed, "operator"]) <= {"RESHAPE"}
    assert (by_src.loc[~removed, "op_cycles"] > 0).all()
    assert (by_src.loc[removed, "op_cycles"] == 0).all()


@pytest.mark.parametrize("policy", POLICIES)
def test_per_source_op_figures_sum_to_vela_per_layer_csv(int8_run: Run, policy: str) -> None:
    res = int8_run.res
    att = res.attribution(policy=policy)
    att.check()
    assert att.unattributed().empty
    by_src, by_layer = att.by_source_op(), att.by_layer()
    for col, total in _csv_totals(res).items():
        # exact: cycles are multiples of 1/scale (halves for the legacy core) in float64
        assert by_src[col].sum() == total, col
        assert by_layer[col].sum() == total, col
        assert att.totals()[col] == total, col
    assert by_src["op_cycles"].sum() == res.summary["cycles_total"]
    assert by_src["npu_cycles"].sum() == res.summary["cycles_npu"]
    assert by_src["mac_count"].sum() == res.summary["nn_macs"]
    assert by_src["mac_count"].dtype == np.int64 and by_src["op_cycles"].dtype == np.float64
    assert by_src["share"].sum() == pytest.approx(1.0)
    if res.core == "default":  # every memory column of the perf table, the CSV's or not
        perf = res.db.tables["perf"]
        for col in [c for c in perf.columns if c.endswith("_ac")]:
            snake = {"Sram_ac": "sram_ac", "Dram_ac": "dram_ac",
                     "OffChipFlash_ac": "off_chip_flash_ac"}.get(col, col)
            assert by_src[snake].sum() == perf[col].sum(), col


def test_legacy_core_reports_half_cycles_exactly(int8_run: Run) -> None:
    res = int8_run.res
    values = res.per_layer[["op_cycles", "sram_ac"]].to_numpy().ravel()
    halves = bool((values != np.floor(values)).any())
    assert res.estimates.scale == (2 if halves else 1)
    if halves:
        assert res.core == "legacy"
        by_src = res.attribution().by_source_op()
        assert (by_src["op_cycles"] * 2 == np.round(by_src["op_cycles"] * 2)).all()
        assert (by_src["op_cycles"] != np.floor(by_src["op_cycles"])).any() or \
            (by_src["sram_ac"] != np.floor(by_src["sram_ac"])).any()


def test_vela_policy_reproduces_vela_rows_per_original_op(int8_run: Run) -> None:
    """Policy ``vela`` gives each op exactly the CSV rows Vela attributes to it."""
    res = int8_run.res
    csv = res.per_layer
    names = [n for _, n in _model_ops(res)]
    if res.core == "default":
        perf = res.db.tables["perf"]
        ext = dict(zip(res.db.tables["source"]["id"], res.db.tables["source"]["ext_key"]))
        assert csv["name"].tolist() == perf["name"].tolist()
        owner = [ext[s] for s in perf["source_id"]]
    else:
        # independent oracle for the legacy matching: the op whose name the row name starts
        # with (longest such name)
        owner = [max((i for i, n in enumerate(names) if row.startswith(n)),
                     key=lambda i: len(names[i])) for row in csv["name"]]
    expected = csv.assign(owner=owner).groupby("owner")["op_cycles"].sum()
    got = res.attribution(policy="vela").by_source_op().set_index("source_id")["op_cycles"]
    for i in range(len(names)):
        assert got[i] == expected.get(i, 0.0), names[i]


def test_legacy_rows_match_optimised_ops_in_queue_order(legacy_int8_run: Run) -> None:
    res = legacy_int8_run.res
    sched = res.provenance.scheduled()
    csv_rows = sched[sched["scheduled_id"] < len(res.per_layer)]
    assert (csv_rows["optimised_id"] >= 0).all()  # every CSV row found its op
    opt = res.db.tables["optimised"].set_index("id")["operator"]
    assert csv_rows["operator"].tolist() == [opt[i] for i in csv_rows["optimised_id"]]
    queue_order = list(dict.fromkeys(res.provenance.queue()["optimised_id"]))
    assert csv_rows["optimised_id"].tolist() == queue_order
    for name, src in zip(csv_rows["name"], csv_rows["source_id"]):
        assert name.startswith(res.model.graph.ops[src].name), name


def test_legacy_extra_csv_row_is_unattributed_not_dropped(legacy_int8_run: Run) -> None:
    res = legacy_int8_run.res
    csv = res.per_layer
    extra = csv.iloc[[0]].assign(nng_operator="Mystery", name="not/in/the/db", op_cycles=7.5)
    bigger = pd.concat([csv.iloc[:3], extra, csv.iloc[3:]], ignore_index=True)
    est = read_estimates(res.db, bigger)
    prov = VelaProvenance(res.db, res.model, est)
    from toolkit.vela.estimates import estimate_attribution

    att = estimate_attribution(est, prov)
    att.check()
    un = att.unattributed()
    assert un["name"].tolist() == ["not/in/the/db"]
    assert un["op_cycles"].tolist() == [7.5]
    assert "not matched" in un["reason"].iloc[0]
    assert att.by_source_op()["op_cycles"].sum() + 7.5 == bigger["op_cycles"].sum()


# ---------------------------------------------------------------------------------------------
# The provenance tables


def test_provenance_tables_follow_the_contract(int8_run: Run) -> None:
    prov = int8_run.res.provenance
    assert isinstance(prov, Provenance)
    assert list(prov.source_ops().columns) == SOURCE_COLUMNS
    assert list(prov.optimised_ops().columns) == OPTIMISED_COLUMNS
    assert list(prov.commands().columns) == COMMAND_COLUMNS
    assert list(prov.origins().columns) == ["optimised_id", "source_id"]
    assert list(prov.layers().columns) == ["source_id", "layer", "main"]
    assert list(prov.removed().columns) == ["source_id", "reason"]
    dh = prov.debug_handles()
    assert dh.empty and list(dh.columns) == ["handle", "optimised_id", "source_id"]
    for df in (prov.source_ops(), prov.optimised_ops(), prov.commands(), prov.origins()):
        for col in df.columns:
            if col not in ("operator", "name", "backend"):
                assert df[col].dtype == np.int64, col
    src = prov.source_ops()
    assert (src["macs"] >= 0).all() and src["macs"].sum() > 0
    opt = prov.optimised_ops()
    assert set(prov.origins()["optimised_id"]) <= set(opt["optimised_id"])
    assert set(prov.origins()["source_id"]) <= set(src["source_id"])


def test_commands_are_the_queue_in_execution_order(int8_run: Run) -> None:
    res = int8_run.res
    cmds = res.provenance.commands()
    queue = res.db.tables["queue"].sort_values(["cmdstream_id", "offset"], kind="stable")
    assert cmds["command_id"].tolist() == list(range(len(queue)))
    assert cmds["queue_offset"].tolist() == queue["offset"].tolist()
    total = res.per_layer["op_cycles"].sum()
    assert cmds["est_cycles"].sum() == pytest.approx(total, abs=len(cmds))  # whole cycles
    assert cmds["macs"].sum() == res.per_layer["mac_count"].sum()
    assert set(cmds["optimised_id"]) <= set(res.provenance.optimised_ops()["optimised_id"])


def test_group_sub_ops_fold_into_their_primary(default_int8_run: Run) -> None:
    res = default_int8_run.res
    group = res.db.tables["group"]
    assert len(group) > 0  # fused activations (U55), chained ops (U85)
    sched = res.provenance.scheduled().set_index("scheduled_id")
    origins = set(map(tuple, res.provenance.origins().to_numpy().tolist()))
    for sub, primary in zip(group["id"], group["group_id"]):
        pair = (int(sched.loc[primary, "optimised_id"]), int(sched.loc[sub, "source_id"]))
        assert pair in origins
        assert sched.loc[sub, "primary_optimised_id"] == sched.loc[primary, "optimised_id"]
    # the group's figures are shared by its members under "macs", kept by Vela's rows under
    # "vela": same totals either way
    a, b = res.attribution(policy="macs"), res.attribution(policy="vela")
    assert a.by_source_op()["op_cycles"].sum() == b.by_source_op()["op_cycles"].sum()


def test_layers_split_converter_names(int8_run: Run) -> None:
    res = int8_run.res
    layers = res.provenance.layers()
    by_layer = res.attribution().by_layer()
    expected = [layer for op in res.model.graph.ops for o in sorted(op.origins)
                for layer in res.model.origin(o).layers or (NO_LAYER,)]
    assert layers["layer"].tolist() == expected
    assert not any("/" in x or ";" in x for x in expected)
    assert by_layer["layer"].tolist() == list(dict.fromkeys(expected))
    if int8_run.model == "tf_cnn_int8":
        assert len(layers) > len(res.model.graph.ops)  # "a;b;c" names give several layers


# ---------------------------------------------------------------------------------------------
# NPU traces: qread -> queue rows -> scheduled, optimised, source ops


def _synthetic_trace(res: VelaResult, **kw: object) -> pd.DataFrame:
    q = res.provenance.queue()
    cycles = dict(zip(q["command_id"].tolist(), q["op_cycles"].tolist()))
    # 1 ns per fixed-point unit: the trace's ns are the estimates' integers
    return make_npu_trace(res.db, cycles, clock_hz=10**9 // res.estimates.scale, **kw)


@pytest.mark.parametrize("commands_per_event", [1, 3])
@pytest.mark.parametrize("policy", ["macs", "vela"])
def test_npu_trace_join_through_qread(int8_run: Run, tmp_path: Path, commands_per_event: int,
                                      policy: str) -> None:
    res = int8_run.res
    frame = _synthetic_trace(res, commands_per_event=commands_per_event)
    assert ("arg_qread_end" in frame.columns) == (commands_per_event > 1)
    assert (frame["arg_qread"] * 4).isin(res.db.tables["queue"]["offset"]).all()
    path = write_chrome_trace(frame, tmp_path / "npu.json")
    back = read_chrome_trace(path)
    att = res.npu_trace_join(path, policy=policy)
    att.check()
    assert att.unattributed().empty
    assert att.total_ns == int(back["dur_ns"].sum()) == int(frame["dur_ns"].sum())
    got = att.by_source_op().set_index("source_id")["total_ns"]
    est = res.attribution(policy=policy).by_source_op().set_index("source_id")["op_cycles"]
    expected = (est * res.estimates.scale).round().astype(np.int64)
    pd.testing.assert_series_equal(got, expected, check_names=False)
    if policy == "vela":
        return  # joined on source op indices: no per-command view
    cmd = att.by_command()
    assert cmd["command_id"].tolist() == list(range(len(res.provenance.commands())))
    q = res.provenance.queue()
    scaled = (q["op_cycles"] * res.estimates.scale).round().astype(np.int64)
    assert cmd["total_ns"].tolist() == scaled.tolist()


def test_npu_trace_point_rules(int8_run: Run) -> None:
    res = int8_run.res
    frame = _synthetic_trace(res, ranges=True)
    base = res.npu_trace_join(frame.drop(columns=["arg_qread_end"]))
    # a read position inside a block maps to that block ("at")
    inside = frame.drop(columns=["arg_qread_end"]).assign(arg_qread=frame["arg_qread"] + 1)
    gaps = np.diff(np.append(frame["arg_qread"].to_numpy(), frame["arg_qread_end"].iloc[-1]))
    inside = inside[gaps > 1]
    att = res.npu_trace_join(inside)
    assert att.unattributed().empty
    assert att.by_command().query("events > 0")["command_id"].tolist() == \
        frame.index[gaps > 1].tolist()
    # a position sampled at the end of a block maps to it with point="before"
    after = frame.drop(columns=["arg_qread_end"]).assign(arg_qread=frame["arg_qread_end"])
    att = res.npu_trace_join(after, point="before")
    pd.testing.assert_frame_equal(att.by_source_op(), base.by_source_op())
    with pytest.raises(VelaError, match="point rule"):
        res.npu_trace_join(after, point="middle")


def test_npu_trace_events_that_map_nowhere_are_unattributed(int8_run: Run) -> None:
    res = int8_run.res
    frame = _synthetic_trace(res)
    first = int(res.db.tables["queue"]["offset"].min()) // 4
    odd = pd.DataFrame({
        "name": ["cpu op", "too early", "bad stream"], "cat": "x", "pid": 1, "tid": 2,
        "start_ns": [10, 20, 30], "dur_ns": [5, 6, 7],
        "arg_qread": pd.array([None, first - 1, first], dtype="Int64"),
        "arg_cmdstream_id": pd.array([None, None, 99], dtype="Int64"), "problem": ""})
    att = res.npu_trace_join(pd.concat([frame, odd], ignore_index=True))
    att.check()
    un = att.unattributed()
    assert un["name"].astype(str).tolist() == ["cpu op", "too early", "bad stream"]
    reasons = un["reason"].astype(str).tolist()
    assert "no args.qread" in reasons[0]
    assert "before the first command" in reasons[1]
    assert "unknown command stream 99" in reasons[2]
    assert att.unattributed_ns == 18
    assert att.attributed_ns == int(frame["dur_ns"].sum())


# ---------------------------------------------------------------------------------------------
# Ops Vela leaves on the CPU


def test_cpu_op_listed_as_cpu_with_zero_npu_figures(sin_run: Run) -> None:
    res = sin_run.res
    att = res.attribution()
    att.check()
    by_src = att.by_source_op().set_index("name")
    assert list(by_src.index) == ["blk_conv", "blk_sin", "blk_conv2", "blk_res"]
    assert by_src.loc["blk_sin", "backend"] == "cpu"
    assert by_src.loc["blk_sin", ["op_cycles", "npu_cycles", "mac_count"]].sum() == 0
    assert (by_src.drop(index="blk_sin")["backend"] == "npu").all()
    assert (by_src.drop(index="blk_sin")["op_cycles"] > 0).all()
    for col, total in _csv_totals(res).items():
        assert by_src[col].sum() == total, col
    layers = att.by_layer().set_index("layer")
    assert layers.loc["blk_sin", "backend"] == "cpu"
    opt = res.provenance.optimised_ops()
    cpu_ops = opt[opt["backend"] == "cpu"]
    assert len(cpu_ops) >= 1
    origins = res.provenance.origins()
    carriers = origins.loc[origins["source_id"] == 1, "optimised_id"]  # op 1 is the SIN
    assert set(carriers) <= set(cpu_ops["optimised_id"])
    if res.core == "default":
        assert set(cpu_ops["operator"]) == {"Passthrough"}
        assert (res.per_layer["target"] == "CPU").sum() == 1


def test_cpu_op_splits_the_npu_graph_into_two_command_streams(sin_run: Run) -> None:
    res = sin_run.res
    q = res.provenance.queue()
    assert q["cmdstream_id"].nunique() == 2
    frame = _synthetic_trace(res)
    att = res.npu_trace_join(frame)
    assert att.unattributed().empty
    # without the stream id, offsets are ambiguous between the two streams
    att = res.npu_trace_join(frame.drop(columns=["arg_cmdstream_id"]))
    assert att.attributed_ns == 0
    assert set(att.unattributed()["reason"].astype(str)) == {
        "several command streams: the event needs args.cmdstream_id"}


def test_float_model_stays_on_the_cpu(float_run: Run) -> None:
    res = float_run.res
    att = res.attribution()
    att.check()
    by_src = att.by_source_op()
    assert len(by_src) == len(res.model.graph.ops)
    assert (by_src["backend"] == "cpu").all()
    assert (by_src["op_cycles"] == 0).all() and (by_src["mac_count"] == 0).all()
    assert res.provenance.commands().empty
    assert att.unattributed().empty


# ---------------------------------------------------------------------------------------------
# Command line


@pytest.mark.parametrize("by", ["layer", "source_op"])
def test_cli_prints_the_attribution(int8_run: Run, capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path, by: str) -> None:
    from toolkit.cli import main

    out_csv = tmp_path / "att.csv"
    code = main(["vela", str(int8_run.outdir), "--model", str(int8_run.model_path),
                 "--by", by, "--csv", str(out_csv)])
    text = capsys.readouterr().out
    assert code == 0
    assert f"Vela estimates by {by}" in text
    model = int8_run.res.model
    first = model.origin(min(model.graph.ops[0].origins)).layers[0]
    assert first in text
    assert "op_cycles" in text
    back = pd.read_csv(out_csv)
    assert back["op_cycles"].sum() == pytest.approx(int8_run.res.per_layer["op_cycles"].sum())


def test_cli_reports_a_missing_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli import main

    (tmp_path / "other.txt").write_text("x")
    code = main(["vela", str(tmp_path), "--model", str(INT8_SAMPLES["cnn_int8"])])
    err = capsys.readouterr().err
    assert code == 2
    assert "cnn_int8_debug.xml" in err and "other.txt" in err


# ---------------------------------------------------------------------------------------------
# Errors


def test_read_vela_errors(int8_run: Run, tmp_path: Path) -> None:
    with pytest.raises(VelaError, match="does not exist"):
        read_vela(tmp_path / "nope", model=int8_run.model_path)
    with pytest.raises(VelaError, match=r"no cnn_int8_debug\.xml"):
        read_vela(tmp_path, model=INT8_SAMPLES["cnn_int8"])
    if int8_run.model == "cnn_int8":  # 14 ops; the TF sample has 7
        with pytest.raises(VelaError, match="pass the model that vela compiled"):
            read_vela(int8_run.outdir, model=INT8_SAMPLES["tf_cnn_int8"],
                      stem=int8_run.model_path.stem)
    with pytest.raises(VelaError, match="unknown metric"):
        int8_run.res.attribution(metric="joules")
    with pytest.raises(VelaError, match="unknown split policy"):
        int8_run.res.attribution(policy="vibes")
    assert isinstance(int8_run.res.attribution(metric="mac_count"), VelaAttribution)


def test_run_vela_errors(tmp_path: Path) -> None:
    with pytest.raises(VelaError, match="does not exist"):
        run_vela(tmp_path / "missing.tflite", tmp_path / "out")
    with pytest.raises(VelaError, match="exited with status") as info:
        run_vela(INT8_SAMPLES["cnn_int8"], tmp_path / "out", accelerator="ethos-u99-1")
    assert "ethos-u99-1" in str(info.value)
    assert isinstance(info.value, ToolkitError)


def test_legacy_output_needs_its_per_layer_csv(legacy_int8_run: Run, tmp_path: Path) -> None:
    assert legacy_int8_run.res.core == "legacy"
    stem = legacy_int8_run.model_path.stem
    (tmp_path / f"{stem}_debug.xml").write_bytes(
        (legacy_int8_run.outdir / f"{stem}_debug.xml").read_bytes())
    with pytest.raises(VelaError, match=r"per-layer\.csv"):
        read_vela(tmp_path, model=legacy_int8_run.model_path)


# ---------------------------------------------------------------------------------------------
# Exact splitting and matching


@settings(max_examples=200, deadline=None)
@given(totals=st.lists(st.one_of(st.integers(-1000, 1000), st.integers(-(10**15), 10**15)),
                      min_size=1, max_size=5),
       data=st.data())
def test_split_int_is_exact(totals: list[int], data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    unit = data.draw(st.lists(st.integers(0, len(totals) - 1), min_size=n, max_size=n))
    big = data.draw(st.booleans())  # int64 path or exact Python-integer path
    weights = data.draw(st.lists(st.integers(0, 10**12 if big else 50), min_size=n, max_size=n))
    share = split_int(np.array(totals, dtype=np.int64), np.array(unit), np.array(weights))
    for u, t in enumerate(totals):
        rows = [i for i in range(n) if unit[i] == u]
        if not rows:
            continue
        assert sum(int(share[i]) for i in rows) == t
        wsum = sum(weights[i] for i in rows)
        for i in rows:
            ideal = abs(t) * (weights[i] if wsum else 1) / (wsum or len(rows))
            assert abs(abs(int(share[i])) - ideal) < 1 + 1e-6 * abs(t)


def test_match_per_layer_rows() -> None:
    ops = ["Conv2DBias", "Add", "AvgPool", "MaxPool"]
    assert match_per_layer_rows(ops, ops).tolist() == [0, 1, 2, 3]
    assert match_per_layer_rows(["Conv2DBias", "Mystery", "Add", "MaxPool"], ops).tolist() == \
        [0, -1, 1, 3]
    assert match_per_layer_rows([], ops).tolist() == []


def test_vela_compiler_and_partition_agree_per_source_op(int8_run: Run) -> None:
    """One vocabulary: the real Vela's output, the compiler and the partitioner give the same
    operator, name, MACs, bytes, kernel/OFM dims and original layers for every source op."""
    import toolkit as tk

    cols = ["operator", "name", "macs", "output_bytes", "kernel_w", "kernel_h", "ofm_w",
            "ofm_h", "ofm_d"]
    model = tk.load(int8_run.model_path)
    compiled = tk.compile(model)
    part = tk.partition(model, {"partition": {"backends": "npu,cpu", "default": "npu"},
                                "OPCODE": {"SOFTMAX": "cpu"}})
    prov = int8_run.res.provenance
    want = compiled.source_ops().set_index("source_id")[cols]
    for other in (prov, part):
        pd.testing.assert_frame_equal(other.source_ops().set_index("source_id")[cols], want)
        pd.testing.assert_frame_equal(other.layers().reset_index(drop=True),
                                      compiled.layers().reset_index(drop=True))
    assert want["macs"].sum() > 0
