"""The compiled model's debug database, read back by the same parser that reads a debug
database written by the real Vela compiler (legacy core) for the int8 sample."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from toolkit.compiler import CompiledModel, compile_model
from toolkit.compiler.compiled import DEBUG_DB_TABLES
from toolkit.formats.vela_db import LEGACY_TABLES, VelaDebugDB, read_debug_db

ROOT = Path(__file__).resolve().parent.parent
INT8 = ROOT / "sample_models" / "cnn_int8.tflite"
VELA_COLUMNS = ["id", "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d", "ext_key"]


@pytest.fixture(scope="module")
def vela_db(tmp_path_factory: pytest.TempPathFactory) -> VelaDebugDB:
    out = tmp_path_factory.mktemp("vela")
    vela = Path(sys.executable).parent / "vela"
    cmd = [str(vela), str(INT8), "--output-dir", str(out), "--enable-debug-db",
           "--debug-force-legacy-core"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return read_debug_db(out / f"{INT8.stem}_debug.xml")


@pytest.fixture(scope="module")
def compiled() -> CompiledModel:
    return compile_model(INT8)


@pytest.fixture(scope="module")
def our_db(compiled: CompiledModel, tmp_path_factory: pytest.TempPathFactory) -> VelaDebugDB:
    out = tmp_path_factory.mktemp("ours")
    compiled.save(out)
    return read_debug_db(out / f"{INT8.stem}_debug.xml")


def _chain(db: VelaDebugDB) -> pd.DataFrame:
    """Queue → optimised → source, as a trace join would walk it."""
    q = db.table("queue").merge(db.table("optimised")[["id", "source_id"]],
                                left_on="optimised_id", right_on="id", how="left")
    return q.merge(db.table("source")[["id", "ext_key"]], left_on="source_id",
                   right_on="id", how="left", suffixes=("", "_src"))


def test_vela_db_is_read(vela_db: VelaDebugDB) -> None:
    assert vela_db.core == "legacy"
    for name, cols in LEGACY_TABLES.items():
        assert list(vela_db.table(name).columns) == cols
    assert vela_db.table("source")["ext_key"].tolist() == list(range(14))
    chain = _chain(vela_db)
    # Vela's queue also names optimised ids that its optimised table lacks (ops it made
    # while scheduling), so only most commands reach a source op
    assert chain["ext_key"].notna().mean() > 0.5


def test_our_db_has_vela_layout(our_db: VelaDebugDB, vela_db: VelaDebugDB) -> None:
    assert our_db.core == vela_db.core == "legacy"
    assert our_db.source_file == INT8.name and our_db.optimised_file == f"{INT8.stem}.circle"
    for name in LEGACY_TABLES:
        assert list(our_db.table(name).columns) == list(vela_db.table(name).columns)
        assert [str(d) for d in our_db.table(name).dtypes] == \
            [str(d) for d in vela_db.table(name).dtypes], name
    for name, cols in DEBUG_DB_TABLES.items():
        assert list(our_db.table(name).columns) == cols


def test_source_table_matches_vela(our_db: VelaDebugDB, vela_db: VelaDebugDB) -> None:
    """Same model, same source ops: ids, kernel and OFM dims and ext_key agree with Vela's."""
    ours = our_db.table("source")[VELA_COLUMNS].sort_values("id").reset_index(drop=True)
    theirs = vela_db.table("source")[VELA_COLUMNS].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)


def test_our_db_matches_the_compiled_tables(our_db: VelaDebugDB,
                                            compiled: CompiledModel) -> None:
    src = compiled.source_ops()
    t = our_db.table("source")
    assert t["id"].tolist() == src["source_id"].tolist()
    assert t["ext_key"].tolist() == src["op_index"].tolist()
    assert t["operator"].tolist() == src["operator"].tolist()
    opt = our_db.table("optimised")
    assert opt["id"].tolist() == list(range(len(compiled.ops)))
    assert opt["source_id"].tolist() == [min(o.origins) for o in compiled.ops]
    pd.testing.assert_frame_equal(our_db.table("queue"), compiled.queue())
    pd.testing.assert_frame_equal(our_db.table("origins"), compiled.origins())
    assert our_db.table("cmdstream").values.tolist() == [[0, -1]]
    assert _chain(our_db)["ext_key"].notna().all()


def test_every_pair_is_in_the_origins_table(tmp_path: Path) -> None:
    c = compile_model(ROOT / "sample_models" / "cnn.tflite")
    c.save(tmp_path)
    db = read_debug_db((tmp_path / "cnn_debug.xml").read_bytes())
    pairs = db.table("origins")
    fused = pairs.groupby("optimised_id").size()
    assert fused.max() > 1  # conv + batch norm + relu: several source ops per compiled op
    assert set(map(tuple, pairs.values.tolist())) == {
        (i, s) for i, op in enumerate(c.ops) for s in op.origins}
    opt = db.table("optimised").set_index("id")["source_id"]
    assert all(opt[i] == min(g) for i, g in pairs.groupby("optimised_id")["source_id"])
