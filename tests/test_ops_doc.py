"""docs/ops.md is the op-support table the code gives today."""

from __future__ import annotations

from pathlib import Path

from toolkit.op_support import op_support, op_support_markdown
from toolkit.runtime.kernels import KERNELS

DOC = Path(__file__).resolve().parent.parent / "docs" / "ops.md"


def test_ops_doc_is_up_to_date() -> None:
    assert DOC.read_text() == op_support_markdown(), \
        "regenerate with: python -m toolkit.op_support docs/ops.md"


def test_table_follows_the_registries() -> None:
    df = op_support().set_index("op")
    assert df.loc["CONV_2D", "runtime"] == "yes"
    assert df.loc["WHILE", "runtime"].startswith("yes")
    assert df.loc["WHILE", "partitioner"].startswith("yes (with the subgraphs")
    assert "striped" in df.loc["CONV_2D", "compiler"]
    supported = set(df.index[df.runtime.str.startswith("yes")])
    assert supported - {"WHILE", "IF", "CALL", "CALL_ONCE"} <= set(KERNELS)
    assert "STABLEHLO_WHILE" in df.index and df.loc["STABLEHLO_WHILE", "runtime"] == "no"
