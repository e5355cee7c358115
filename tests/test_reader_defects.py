"""Reader defects found by fuzzing, each reproduced on a minimal input."""

from __future__ import annotations

import pytest

from toolkit.errors import VelaError
from toolkit.formats.vela_db import read_debug_db


@pytest.mark.parametrize("blank", ["\u00a0", "\u00a0\n\u2003", " \u3000 \n\u00a0,"[:-1]])
def test_vela_table_of_blank_looking_rows_is_a_vela_error(blank: str) -> None:
    """Rows of Unicode spaces look non-empty to the first strip and blank to the row check:
    the table has no header, which is a VelaError naming the table, not an assertion."""
    xml = ('<?xml version="1.0"?><debug source="a"><table name="queue"><![CDATA['
           f"{blank}]]></table></debug>").encode()
    with pytest.raises(VelaError, match=r"table 'queue'.*header") as info:
        read_debug_db(xml)
    assert info.value.fix
