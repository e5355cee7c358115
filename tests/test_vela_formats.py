"""Vela debug database and per-layer CSV: read what the real Vela writes, write it back.

The module-scoped ``vela_run`` fixture runs the installed Vela once per configuration on
``sample_models/tf/tf_cnn_int8.tflite``; the other tests use small hand-made files from
``tests/fixtures/vela``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.errors import ToolkitError, VelaError
from toolkit.formats.vela_csv import (
    DEFAULT_CORE_HEADER,
    LEGACY_CORE_HEADER,
    PER_LAYER_COLUMNS,
    read_per_layer_csv,
    read_summary_csv,
)
from toolkit.formats.vela_db import LEGACY_TABLES, VelaDebugDB, read_debug_db, write_debug_db

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "sample_models" / "tf" / "tf_cnn_int8.tflite"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vela"

CONFIGS: dict[str, tuple[list[str], str]] = {
    "u55": (["--accelerator-config", "ethos-u55-128"], "default"),
    "u85": (["--accelerator-config", "ethos-u85-256"], "default"),
    "u55-legacy": (["--accelerator-config", "ethos-u55-128", "--debug-force-legacy-core"],
                   "legacy"),
}


@dataclass
class VelaRun:
    """One real Vela run: its configuration name, expected core and output files."""

    config: str
    core: str
    out_dir: Path
    debug_xml: Path
    per_layer_csv: Path
    summary_csv: Path
    optimised_tflite: Path
    db: VelaDebugDB


def _model_ops(path: Path) -> list[tuple[str, tuple[int, ...]]]:
    """Return (output tensor name, output shape) of every op of subgraph 0 of a .tflite file."""
    from circle_schema import circle

    model = circle.Model.Model.GetRootAs(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    out = []
    for i in range(sg.OperatorsLength()):
        tensor = sg.Tensors(sg.Operators(i).Outputs(0))
        out.append((tensor.Name().decode(), tuple(int(d) for d in tensor.ShapeAsNumpy())))
    return out


@pytest.fixture(scope="module", params=list(CONFIGS))
def vela_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> VelaRun:
    """Run Vela once for this configuration (per test module) and read its debug database."""
    config = request.param
    args, core = CONFIGS[config]
    out = tmp_path_factory.mktemp(f"vela-{config}")
    cmd = [sys.executable, "-m", "ethosu.vela", *args, "--enable-debug-db",
           "--verbose-performance", "--output-dir", str(out), str(MODEL)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"vela failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    stem = MODEL.stem
    summaries = sorted(out.glob(f"{stem}_summary_*.csv"))
    assert len(summaries) == 1, sorted(p.name for p in out.iterdir())
    debug_xml = out / f"{stem}_debug.xml"
    return VelaRun(config, core, out, debug_xml, out / f"{stem}_per-layer.csv", summaries[0],
                   out / f"{stem}_vela.tflite", read_debug_db(debug_xml))


# ---------------------------------------------------------------------------------------------
# The real Vela's debug database


def test_core_and_tables(vela_run: VelaRun) -> None:
    db = vela_run.db
    assert db.core == vela_run.core
    assert db.path == str(vela_run.debug_xml)
    if db.core == "legacy":
        assert list(db.tables) == list(LEGACY_TABLES)
        for name, cols in LEGACY_TABLES.items():
            assert list(db.tables[name].columns) == cols
        assert db.source_file == str(MODEL)
        assert db.optimised_file == str(vela_run.optimised_tflite)
    else:
        assert {"source", "optimised", "group", "queue", "cmdstream", "perf", "perf_debug",
                "perf_debug_main", "perf_debug_conn", "perf_debug_wd",
                "tensors"} <= set(db.tables)
        assert list(db.table("queue").columns) == ["offset", "cmdstream_id", "optimised_id",
                                                   "scheduled_id"]
        assert list(db.table("cmdstream").columns) == ["id"]
        assert list(db.table("group").columns) == ["id", "group_id"]
        perf_cols = list(db.table("perf").columns)
        assert perf_cols[:9] == ["id", "source_id", "optimised_id", "operator", "name",
                                 "staging_usage", "op_cycles", "npu_cycles", "mac_count"]
        assert perf_cols[9:] and all(c.endswith("_ac") for c in perf_cols[9:])
        # The default core names the output basename, not the input, and no optimised file.
        assert db.source_file == str(vela_run.out_dir / MODEL.stem)
        assert db.optimised_file is None
    for name in ("source", "optimised"):
        assert list(db.table(name).columns[:1]) == ["id"]
    with pytest.raises(VelaError, match="no table 'nope'"):
        db.table("nope")


def test_id_columns_are_int64(vela_run: VelaRun) -> None:
    t = vela_run.db.tables
    for name, cols in {"source": ["id", "ext_key", "ofm_d"], "optimised": ["id", "source_id"],
                       "queue": ["offset", "cmdstream_id", "optimised_id"],
                       "cmdstream": ["id"]}.items():
        for col in cols:
            assert t[name][col].dtype == np.int64, (name, col)
    assert pd.api.types.is_string_dtype(t["source"]["operator"])
    first = 0 if vela_run.core == "legacy" else 1
    assert int(t["source"]["id"].min()) == first
    assert int(t["optimised"]["id"].min()) == first


def test_queue_offsets_increase_and_refer_to_known_ops(vela_run: VelaRun) -> None:
    t = vela_run.db.tables
    queue, optimised = t["queue"], t["optimised"]
    assert len(queue) > 0
    for _, q in queue.groupby("cmdstream_id", sort=False):
        assert q["offset"].is_monotonic_increasing and q["offset"].is_unique
    assert (queue["offset"] % 4 == 0).all()  # 32-bit command words
    assert set(queue["optimised_id"]) <= set(optimised["id"])
    assert set(queue["cmdstream_id"]) <= set(t["cmdstream"]["id"])
    assert optimised["id"].is_unique
    assert set(optimised["source_id"]) <= set(t["source"]["id"]) | {-1}


def test_source_ext_keys_are_ops_of_the_input_model(vela_run: VelaRun) -> None:
    ops = _model_ops(MODEL)
    source = vela_run.db.tables["source"]
    keys = source["ext_key"].tolist()
    assert all(0 <= k < len(ops) for k in keys)
    assert sorted(keys) == list(range(len(ops)))  # every op of this model is a source op once
    for row in source.itertuples():
        assert row.ofm_d == ops[row.ext_key][1][-1], row  # output depth of that very op


def test_default_core_perf_group_and_queue_agree(vela_run: VelaRun) -> None:
    t = vela_run.db.tables
    if vela_run.core == "legacy":
        assert not {"perf", "group"} & set(t)  # the legacy core writes neither
        return
    perf, queue, group = t["perf"], t["queue"], t["group"]
    assert perf["id"].is_unique
    scheduled = set(queue["scheduled_id"])
    folded = set(group["id"])
    # Every scheduled op issues commands or is grouped with one that does. On Ethos-U55 a grouped
    # op (a fused activation) issues none; on Ethos-U85 chained ops are grouped and still do.
    assert set(perf["id"]) == scheduled | folded
    if vela_run.config == "u55":
        assert scheduled.isdisjoint(folded)
    assert set(group["group_id"]) <= scheduled
    merged = queue.merge(perf, left_on="scheduled_id", right_on="id", suffixes=("_q", "_p"))
    assert (merged["optimised_id_q"] == merged["optimised_id_p"]).all()
    assert set(perf["source_id"]) <= set(t["source"]["id"])
    # A scheduled op of each source op carries that op's output tensor name.
    ops = _model_ops(MODEL)
    src = t["source"].set_index("id")
    for sid, rows in perf.groupby("source_id"):
        assert ops[src.loc[sid, "ext_key"]][0] in set(rows["name"]), sid
    conn = t["perf_debug_conn"]
    assert conn["input_op_id"].dtype == np.int64  # written quoted ("-1") and still int


# ---------------------------------------------------------------------------------------------
# The real Vela's per-layer and summary CSV


def test_per_layer_csv_header_variant(vela_run: VelaRun) -> None:
    header = vela_run.per_layer_csv.read_text().splitlines()[0].split(",")
    expected = LEGACY_CORE_HEADER if vela_run.core == "legacy" else DEFAULT_CORE_HEADER
    assert header == expected
    df = read_per_layer_csv(vela_run.per_layer_csv)
    assert df.attrs["core"] == vela_run.core
    assert list(df.columns) == list(PER_LAYER_COLUMNS)
    assert len(df) > 0
    assert (df["target"] == "NPU").all()  # every op of this model runs on the NPU
    for col in ("op_cycles", "npu_cycles", "sram_ac", "network_cycles_pct", "mac_util_pct"):
        assert df[col].dtype == np.float64, col
    assert df["mac_count"].dtype == np.int64
    assert (df["op_cycles"] >= 0).all() and df["op_cycles"].sum() > 0
    assert df["network_cycles_pct"].sum() == pytest.approx(100.0, abs=0.01)


def test_per_layer_cycles_match_summary(vela_run: VelaRun) -> None:
    df = read_per_layer_csv(vela_run.per_layer_csv)
    summary = read_summary_csv(vela_run.summary_csv)
    assert summary["network"] == MODEL.stem
    assert df["op_cycles"].sum() == pytest.approx(summary["cycles_total"])
    assert df["npu_cycles"].sum() == pytest.approx(summary["cycles_npu"])
    assert df["mac_count"].sum() == summary["nn_macs"]


def test_per_layer_matches_perf_table(vela_run: VelaRun) -> None:
    t = vela_run.db.tables
    df = read_per_layer_csv(vela_run.per_layer_csv)
    if vela_run.core == "legacy":
        # No perf table to compare with; the rows still name the source ops' types.
        assert "perf" not in t
        assert df["original_operator"].iloc[0] == "CONV_2D"
        assert df["nng_operator"].iloc[0] == "Conv2DBias"
        assert "Conv2DBias" in set(t["source"]["operator"])
        return
    perf = t["perf"]
    assert len(df) == len(perf)
    assert df["op_cycles"].sum() == perf["op_cycles"].sum()
    assert df["npu_cycles"].sum() == perf["npu_cycles"].sum()
    assert df["name"].tolist() == perf["name"].tolist()
    assert df["nng_operator"].tolist() == perf["operator"].tolist()
    src_op = t["source"].set_index("id")["operator"]
    assert df["original_operator"].tolist() == [src_op[s] for s in perf["source_id"]]
    if "Sram_ac" in perf.columns:
        assert df["sram_ac"].tolist() == perf["Sram_ac"].astype(float).tolist()


# ---------------------------------------------------------------------------------------------
# Writer


def test_writer_reproduces_legacy_vela_bytes(vela_run: VelaRun, tmp_path: Path) -> None:
    db = vela_run.db
    out = tmp_path / "again_debug.xml"
    write_debug_db(out, db.tables, db.source_file or "", db.optimised_file or "")
    again = read_debug_db(out)
    assert list(again.tables) == list(db.tables)
    for name, df in db.tables.items():
        pd.testing.assert_frame_equal(again.tables[name], df, check_names=False)
    assert again.core == db.core
    if db.core == "legacy":
        assert out.read_bytes() == vela_run.debug_xml.read_bytes()


def test_writer_extra_origins_table(vela_run: VelaRun, tmp_path: Path) -> None:
    db = vela_run.db
    optimised = db.tables["optimised"]
    origins = pd.DataFrame({"optimised_id": optimised["id"].to_numpy(),
                            "source_id": optimised["source_id"].to_numpy()})
    tables = {**db.tables, "origins": origins}
    out = tmp_path / "with_origins_debug.xml"
    write_debug_db(out, tables, "in.tflite", "out_vela.tflite")
    back = read_debug_db(out)
    assert list(back.tables) == list(tables)
    pd.testing.assert_frame_equal(back.tables["origins"], origins)
    assert back.core == db.core
    assert (back.source_file, back.optimised_file) == ("in.tflite", "out_vela.tflite")


def test_writer_escapes_awkward_text(tmp_path: Path) -> None:
    names = ['plain', 'with "quotes"', "comma, here", "line\nbreak", "cr\r\nlf", "cdata ]]> end",
             "<tag>&amp;", "unicodé ✓", "", "  spaced  ", "]]]]>"]
    df = pd.DataFrame({"id": np.arange(len(names), dtype=np.int64),
                       "name": pd.Series(names, dtype="str"),
                       "neg": np.array([-5] * len(names), dtype=np.int64)})
    out = tmp_path / "odd_debug.xml"
    write_debug_db(out, {"source": df, "we'ird \"table\" <&>": df.iloc[:0]},
                   'a&b"<c>.tflite', "o'p\n.tflite")
    back = read_debug_db(out)
    pd.testing.assert_frame_equal(back.tables["source"], df)
    assert list(back.tables) == ["source", "we'ird \"table\" <&>"]
    assert back.tables["we'ird \"table\" <&>"].empty
    assert list(back.tables["we'ird \"table\" <&>"].columns) == ["id", "name", "neg"]
    assert back.source_file == 'a&b"<c>.tflite'
    assert back.optimised_file == "o'p\n.tflite"


def test_writer_is_atomic_and_refuses_unwritable_text(tmp_path: Path) -> None:
    out = tmp_path / "db.xml"
    good = pd.DataFrame({"id": np.array([0, 1], dtype=np.int64)})
    write_debug_db(out, {"source": good}, "a", "b")
    before = out.read_bytes()
    assert (out.stat().st_mode & 0o777) == 0o644
    bad = pd.DataFrame({"id": [0], "name": ["nul\x00byte"]})
    with pytest.raises(VelaError, match="U\\+0000"):
        write_debug_db(out, {"source": bad}, "a", "b")
    with pytest.raises(VelaError, match="repeated"):
        write_debug_db(out, {"t": pd.DataFrame([[1, 2]], columns=["x", "x"])}, "a", "b")
    with pytest.raises(VelaError, match="not a pandas DataFrame"):
        write_debug_db(out, {"t": [1, 2]}, "a", "b")  # type: ignore[dict-item]
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.xml"]  # no temporary file left
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ToolkitError, match="cannot write"):
        write_debug_db(tmp_path / "a_file" / "db.xml", {"source": good}, "a", "b")


_xml_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",),
                           blacklist_characters="".join(map(chr, [*range(0, 9), 11, 12,
                                                                  *range(14, 32)]))
                           + "\ufffe\uffff"),
    max_size=12,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ints=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=8),
    texts=st.lists(_xml_text, min_size=1, max_size=8),
)
def test_writer_round_trip_property(tmp_path: Path, ints: list[int], texts: list[str]) -> None:
    n = min(len(ints), len(texts))
    # A str column reads back as int64 only when every cell is an integer: keep one that is not.
    texts = [*texts[: n - 1], "x" + texts[n - 1]]
    df = pd.DataFrame({"i": np.array(ints[:n], dtype=np.int64),
                       "s": pd.Series(texts, dtype="str")})
    out = tmp_path / "prop_debug.xml"
    write_debug_db(out, {"t": df}, "s", "o")
    pd.testing.assert_frame_equal(read_debug_db(out).tables["t"], df)


# ---------------------------------------------------------------------------------------------
# Reader tolerance and errors


def test_reads_reordered_columns_extra_tables_and_quoting() -> None:
    db = read_debug_db(FIXTURES / "default_core_reordered_debug.xml")
    assert db.core == "default"
    assert list(db.tables) == ["queue", "notes_from_a_later_vela", "source", "optimised",
                               "perf", "cmdstream", "perf_debug_conn"]
    q = db.tables["queue"]
    assert list(q.columns) == ["scheduled_id", "optimised_id", "cmdstream_id", "offset"]
    assert q["offset"].tolist() == [328, 440]
    assert db.tables["source"]["ext_key"].tolist() == [0, 1, 2]
    notes = db.tables["notes_from_a_later_vela"]
    assert notes["value"].tolist() == ["-1", 'x, "quoted"']  # mixed column stays str
    assert db.tables["perf_debug_conn"]["input_op_id"].tolist() == [-1, 10]
    assert db.tables["perf"]["name"].tolist() == ["conv/out", "soft,max"]
    assert db.optimised_file is None and db.source_file == "out/tiny"


def test_crlf_and_bytes_input_read_the_same(tmp_path: Path) -> None:
    raw = (FIXTURES / "default_core_reordered_debug.xml").read_bytes()
    crlf = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    a = read_debug_db(raw)
    b = read_debug_db(crlf)
    assert a.path is None
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name])


def test_detects_legacy_from_ids_when_little_else(tmp_path: Path) -> None:
    xml = (b"<?xml version='1.0' encoding='UTF-8'?>\n<debug source=\"a\" optimised=\"b\">\n"
           b"  <table name='source'><![CDATA[\"id\",\"operator\"\r\n0,\"Conv2DBias\"\r\n]]>"
           b"</table>\n</debug>\n")
    assert read_debug_db(xml).core == "legacy"
    assert read_debug_db(xml.replace(b"\r\n0,", b"\r\n1,")).core == "default"


@pytest.mark.parametrize("fixture", ["billion_laughs.xml", "external_entity.xml",
                                     "external_dtd.xml"])
def test_malicious_xml_is_refused_without_expansion(fixture: str) -> None:
    path = FIXTURES / fixture
    start = time.perf_counter()
    with pytest.raises(VelaError) as info:
        read_debug_db(path)
    assert time.perf_counter() - start < 2.0
    message = str(info.value)
    assert str(path) in message
    assert "lollol" not in message and "root:" not in message
    assert isinstance(info.value, ToolkitError)


def test_undeclared_entity_and_non_debug_root_are_errors() -> None:
    with pytest.raises(VelaError, match="malformed XML"):
        read_debug_db(b'<debug source="&nope;"/>')
    with pytest.raises(VelaError, match="not <debug>"):
        read_debug_db(b"<html/>")
    with pytest.raises(VelaError, match="no name attribute"):
        read_debug_db(b"<debug><table><![CDATA[\"id\"\n1\n]]></table></debug>")
    with pytest.raises(VelaError, match="appears twice"):
        read_debug_db(b"<debug><table name='a'>\"id\"\n1</table>"
                      b"<table name='a'>\"id\"\n2</table></debug>")
    with pytest.raises(VelaError, match="empty"):
        read_debug_db(b"<debug><table name='a'><![CDATA[\n]]></table></debug>")


def test_truncated_and_missing_files_name_the_file(tmp_path: Path) -> None:
    raw = (FIXTURES / "default_core_reordered_debug.xml").read_bytes()
    cut = tmp_path / "cut_debug.xml"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(VelaError, match=r"cut_debug\.xml:[0-9]+: malformed XML"):
        read_debug_db(cut)
    with pytest.raises(VelaError, match="cannot read"):
        read_debug_db(tmp_path / "absent.xml")


def test_bad_rows_name_table_and_line(tmp_path: Path) -> None:
    lines = (FIXTURES / "default_core_reordered_debug.xml").read_text().splitlines(True)
    i = next(k for k, line in enumerate(lines) if line.startswith("12,4,1,440"))
    bad = tmp_path / "bad_debug.xml"
    bad.write_text("".join([*lines[:i], "12,4,1\n", *lines[i + 1:]]))
    with pytest.raises(VelaError, match=rf"bad_debug.xml:{i + 1}: table 'queue' row has 3 cells"):
        read_debug_db(bad)
    bad.write_text("".join([*lines[:i], '12,4,"1,440\n', *lines[i + 1:]]))
    with pytest.raises(VelaError, match=rf"bad_debug.xml:{i + 1}: table 'queue' is not valid CSV"):
        read_debug_db(bad)
    j = next(k for k, line in enumerate(lines) if line.startswith('"id","source_id","operator"'))
    bad.write_text("".join([*lines[:j], '"id","id"\n', *lines[j + 1:]]))
    with pytest.raises(VelaError, match=rf"bad_debug.xml:{j + 1}: table 'optimised' has a bad"):
        read_debug_db(bad)


# ---------------------------------------------------------------------------------------------
# Per-layer CSV variants


def test_default_per_layer_keeps_commas_in_names() -> None:
    df = read_per_layer_csv(FIXTURES / "per_layer_default_comma_name.csv")
    assert df.attrs["core"] == "default"
    assert df["name"].tolist() == ["block/conv;block/bn", "a name, with commas, inside",
                                   "logits"]
    assert df["target"].tolist() == ["NPU", "CPU", "NPU"]
    assert np.isnan(df["staging_peak_pct"].iloc[1])
    assert df["op_cycles"].tolist() == [3360.0, 0.0, 373.0]
    assert df["staging_usage_bytes"].dtype == np.int64


def test_legacy_per_layer_repeated_header_and_quoted_name(tmp_path: Path) -> None:
    path = FIXTURES / "per_layer_legacy_two_subgraphs.csv"
    df = read_per_layer_csv(path)
    assert df.attrs["core"] == "legacy"
    assert list(df.columns) == list(PER_LAYER_COLUMNS)
    assert df["name"].tolist() == ["conv", "soft,max", "second_subgraph/add"]
    assert df["original_operator"].tolist() == ["CONV_2D", "SOFTMAX", "ADD"]
    assert df["op_cycles"].tolist() == [3520.0, 16.5, 863.5]
    assert df["network_cycles_pct"].tolist() == [80.0, 0.4, 19.6]
    assert df["network_mac_pct"].tolist() == [90.0, 0.0, 0.0]
    assert (df["target"] == "NPU").all()
    lf = tmp_path / "lf.csv"
    lf.write_bytes(path.read_bytes().replace(b"\r\n", b"\n"))
    pd.testing.assert_frame_equal(read_per_layer_csv(lf), df)


def test_per_layer_keeps_unknown_columns(tmp_path: Path) -> None:
    path = tmp_path / "new_per-layer.csv"
    path.write_text("Original Operator,NNG Operator,Target,Op Cycles,Energy (nJ),Name\n"
                    "Conv2D,Conv2D,NPU,10,1.5,x\n")
    df = read_per_layer_csv(path)
    assert list(df.columns) == ["original_operator", "nng_operator", "target", "op_cycles",
                                "energy_n_j", "name"]
    assert df["energy_n_j"].tolist() == [1.5]


def test_per_layer_errors(tmp_path: Path) -> None:
    path = tmp_path / "x_per-layer.csv"
    path.write_text("")
    with pytest.raises(VelaError, match="empty"):
        read_per_layer_csv(path)
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(VelaError, match="not a Vela per-layer header"):
        read_per_layer_csv(path)
    header = ",".join(DEFAULT_CORE_HEADER)
    path.write_text(f"{header}\nConv2D,Conv2D,NPU,1\n")
    with pytest.raises(VelaError, match=r"x_per-layer.csv:2: row has 4 cells"):
        read_per_layer_csv(path)
    path.write_text(",".join(LEGACY_CORE_HEADER) + "\nCONV_2D,Conv2DBias\n")
    with pytest.raises(VelaError, match=r"x_per-layer.csv:2: row has 2 cells"):
        read_per_layer_csv(path)
    with pytest.raises(VelaError, match="cannot read"):
        read_per_layer_csv(tmp_path / "absent.csv")
    path.write_text(header + "\n")
    assert read_per_layer_csv(path).empty


def test_fixture_dir_is_small() -> None:
    assert all(p.stat().st_size < 4096 for p in FIXTURES.iterdir())
    assert os.path.getsize(MODEL) < 200 * 1024
