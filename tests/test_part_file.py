"""The .part format (parse, validate, write) and the connection file formats."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import PartitionError, ToolkitError
from toolkit.formats.conn_file import (
    Connection,
    ConnPart,
    format_conn_ini,
    format_conn_json,
    parse_conn_ini,
    parse_conn_json,
    read_connection,
)
from toolkit.formats.part_file import (
    PartSpec,
    as_part_spec,
    format_part,
    parse_part,
    read_part,
    write_part,
)

REFERENCE_PART = """\
[partition]
backends=cpu,acl_cl
default=cpu
comply=opcode

[OPCODE]
DIV=acl_cl
"""


def test_reference_part_file() -> None:
    spec = parse_part(REFERENCE_PART, "Net_InstanceNorm_003.part").validate()
    assert spec.backends == ["cpu", "acl_cl"]
    assert spec.default == "cpu" and spec.default_backend == "cpu"
    assert spec.comply == "opcode"
    assert spec.opcode == {"DIV": "acl_cl"} and spec.opname == {}
    assert spec.where("OPCODE", "DIV") == "Net_InstanceNorm_003.part:7"
    assert spec.where("partition", "default") == "Net_InstanceNorm_003.part:3"


def test_comments_blanks_whitespace_and_underscore_default() -> None:
    text = """
# a comment
; another comment
  [partition]
backends = cpu , npu
default=npu
   comply=opcode

[OPCODE]
_=cpu
  ; DIV=npu is commented out
CONV_2D = npu
CUSTOM(MyOp)=npu
"""
    spec = parse_part(text, "x.part").validate()
    assert spec.backends == ["cpu", "npu"]
    assert spec.default == "npu" and spec.opcode_default == "cpu"
    assert spec.default_backend == "cpu"
    assert spec.opcode == {"CONV_2D": "npu", "CUSTOM(MyOp)": "npu"}
    assert "x.part:10" in spec.describe_default()


def test_opname_section_and_escaped_semicolon() -> None:
    text = ("[partition]\nbackends=cpu,npu\ndefault=cpu\ncomply=opname\n\n[OPNAME]\n"
            "model/relu/Relu\\;model/conv/Conv2D=npu\nSub=npu\n")
    spec = parse_part(text).validate()
    assert spec.opname == {"model/relu/Relu;model/conv/Conv2D": "npu", "Sub": "npu"}
    assert spec.rules is spec.opname
    again = parse_part(format_part(spec)).validate()
    assert again.opname == spec.opname


def test_overrides_like_the_command_line() -> None:
    spec = parse_part(REFERENCE_PART.replace("DIV=acl_cl", "_=acl_cl\nDIV=acl_cl"), "f.part")
    over = spec.with_overrides(backends="cpu,acl_cl,npu", default="npu").validate()
    assert over.backends == ["cpu", "acl_cl", "npu"]
    assert over.default_backend == "npu"  # --default beats [OPCODE] _
    assert spec.default_backend == "acl_cl"  # the original is unchanged
    with pytest.raises(PartitionError, match="--default gpu"):
        spec.with_overrides(default="gpu").validate()


def test_mapping_and_text_are_equivalent_objects(tmp_path) -> None:
    a = as_part_spec({"backends": "cpu,acl_cl", "default": "cpu", "opcode": {"DIV": "acl_cl"}})
    b = as_part_spec({"partition": {"backends": ["cpu", "acl_cl"], "default": "cpu"},
                      "OPCODE": {"DIV": "acl_cl"}})
    c = as_part_spec(REFERENCE_PART)
    p = write_part(c, tmp_path / "r.part")
    d = as_part_spec(p)
    for s in (a, b, c, d):
        s.validate()
        assert (s.backends, s.default_backend, s.comply, s.opcode) == \
            (["cpu", "acl_cl"], "cpu", "opcode", {"DIV": "acl_cl"})
    assert p.read_text() == REFERENCE_PART
    assert as_part_spec(a) is a


BAD = [
    ("unknown section", "[partition]\nbackends=cpu\ndefault=cpu\n[OPCODES]\nDIV=cpu\n", 4,
     "unknown section"),
    ("unknown key", "[partition]\nbackends=cpu\ndefault=cpu\ncomplies=opcode\n", 4,
     "unknown key"),
    ("default not listed", "[partition]\nbackends=cpu,npu\ndefault=gpu\n", 3,
     "not one of the backends"),
    ("opcode backend not listed", "[partition]\nbackends=cpu\ndefault=cpu\n\n[OPCODE]\n"
     "DIV=npu\n", 6, "not one of the backends"),
    ("opname backend not listed", "[partition]\nbackends=cpu\ndefault=cpu\ncomply=opname\n"
     "[OPNAME]\nSub=npu\n", 6, "not one of the backends"),
    ("underscore backend not listed", "[partition]\nbackends=cpu\ndefault=cpu\n[OPCODE]\n"
     "_=npu\n", 5, "not one of the backends"),
    ("unknown comply", "[partition]\nbackends=cpu\ndefault=cpu\ncomply=sequence\n", 4,
     "unknown comply"),
    ("duplicate key", "[partition]\nbackends=cpu\ndefault=cpu\n[OPCODE]\nDIV=cpu\nDIV=cpu\n", 6,
     "set twice"),
    ("not key=value", "[partition]\nbackends=cpu\ndefault cpu\n", 3, "not key=value"),
    ("before any section", "backends=cpu\n[partition]\n", 1, "before any"),
    ("unclosed header", "[partition\nbackends=cpu\n", 1, "closing"),
    ("empty value", "[partition]\nbackends=\ndefault=cpu\n", 2, "no value"),
    ("unknown opcode", "[partition]\nbackends=cpu\ndefault=cpu\n[OPCODE]\nDIVV=cpu\n", 5,
     "not an op type"),
    ("lower-case opcode", "[partition]\nbackends=cpu\ndefault=cpu\n[OPCODE]\ndiv=cpu\n", 5,
     "did you mean DIV"),
    ("backend escaping the work path", "[partition]\nbackends=cpu,../npu\ndefault=cpu\n", 2,
     "file name"),
    ("backend listed twice", "[partition]\nbackends=cpu,cpu\ndefault=cpu\n", 2, "twice"),
]


@pytest.mark.parametrize(("case", "text", "line", "what"), BAD, ids=[b[0] for b in BAD])
def test_bad_part_files_name_file_and_line(tmp_path, case: str, text: str, line: int,
                                           what: str) -> None:
    p = tmp_path / "bad.part"
    p.write_text(text)
    with pytest.raises(PartitionError, match=re.escape(what)) as e:
        read_part(p).validate()
    assert isinstance(e.value, ToolkitError)
    assert f"{p}:{line}" in str(e.value)


def test_missing_partition_section_and_file(tmp_path) -> None:
    with pytest.raises(PartitionError, match=r"no \[partition\]"):
        parse_part("[OPCODE]\nDIV=cpu\n")
    with pytest.raises(PartitionError, match="not found"):
        read_part(tmp_path / "nope.part")
    with pytest.raises(PartitionError, match="no backends"):
        parse_part("[partition]\ndefault=cpu\n").validate()
    with pytest.raises(PartitionError, match="no default"):
        parse_part("[partition]\nbackends=cpu\n").validate()


_name = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="_-/;:."),
                min_size=1, max_size=12).filter(lambda s: s[0] not in "#;[")


@settings(max_examples=60, deadline=None)
@given(backends=st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), min_size=1,
                         max_size=4, unique=True),
       names=st.lists(_name, max_size=6, unique=True), data=st.data())
def test_format_parse_round_trip(backends: list[str], names: list[str], data) -> None:
    pick = st.sampled_from(backends)
    spec = PartSpec(backends=backends, default=data.draw(pick),
                    comply=data.draw(st.sampled_from(["opcode", "opname"])),
                    opcode={k: data.draw(pick) for k in data.draw(
                        st.lists(st.sampled_from(["ADD", "DIV", "CONV_2D", "CUSTOM(x)"]),
                                 unique=True))},
                    opname={n: data.draw(pick) for n in names})
    spec.validate()
    again = parse_part(format_part(spec)).validate()
    assert (again.backends, again.default, again.comply, again.opcode, again.opname) == \
        (spec.backends, spec.default, spec.comply, spec.opcode, spec.opname)


# ---------------------------------------------------------------- connection files
REFERENCE_JSON = """\
{
  "source" : {
    "file" : "Net_InstanceNorm_003.circle",
    "inputs" : [ "Input" ],
    "outputs" : [ "Add_as_terminal" ]
  },
  "parts" : [
    {
      "file" : "Net_InstanceNorm_003.00001_cpu.circle",
      "inputs" : [ "Input" ],
      "outputs" : [ "Pow", "Sub" ]
    },
    {
      "file" : "Net_InstanceNorm_003.00002_acl_cl.circle",
      "inputs" : [ "Sub", "Pow" ],
      "outputs" : [ "Div" ]
    },
    {
      "file" : "Net_InstanceNorm_003.00003_cpu.circle",
      "inputs" : [ "Div" ],
      "outputs" : [ "Add_as_terminal" ]
    }
  ]
}
"""

REFERENCE_INI = """\
[source]
file=Net_InstanceNorm_003.circle
i1=Input
o1=Add_as_terminal

[models]
m1=Net_InstanceNorm_003.00001_cpu.circle
m2=Net_InstanceNorm_003.00002_acl_cl.circle
m3=Net_InstanceNorm_003.00003_cpu.circle

[Net_InstanceNorm_003.00001_cpu.circle]
file=Net_InstanceNorm_003.00001_cpu.circle
i1=Input
o1=Pow
o2=Sub

[Net_InstanceNorm_003.00002_acl_cl.circle]
file=Net_InstanceNorm_003.00002_acl_cl.circle
i1=Sub
i2=Pow
o1=Div

[Net_InstanceNorm_003.00003_cpu.circle]
file=Net_InstanceNorm_003.00003_cpu.circle
i1=Div
o1=Add_as_terminal
"""


def _reference_conn() -> Connection:
    s = "Net_InstanceNorm_003"
    return Connection(ConnPart(f"{s}.circle", ["Input"], ["Add_as_terminal"]), [
        ConnPart(f"{s}.00001_cpu.circle", ["Input"], ["Pow", "Sub"]),
        ConnPart(f"{s}.00002_acl_cl.circle", ["Sub", "Pow"], ["Div"]),
        ConnPart(f"{s}.00003_cpu.circle", ["Div"], ["Add_as_terminal"]),
    ])


def test_connection_files_match_the_reference_text() -> None:
    conn = _reference_conn()
    assert format_conn_json(conn) == REFERENCE_JSON
    assert format_conn_ini(conn) == REFERENCE_INI
    assert parse_conn_json(REFERENCE_JSON) == conn
    assert parse_conn_ini(REFERENCE_INI) == conn


def test_connection_reader_tolerates_the_reference_sketch(tmp_path) -> None:
    sketch = REFERENCE_JSON.replace('"outputs" : [ "Pow", "Sub" ]',
                                    '"outputs" : [ "Pow", "Sub" ],')
    p = tmp_path / "m.conn.json"
    p.write_text(sketch)
    conn = read_connection(p)
    assert conn.parts[0].outputs == ["Pow", "Sub"] and conn.folder == tmp_path
    q = tmp_path / "m.conn.ini"
    q.write_text(REFERENCE_INI + "\n")  # crew also ends the last section with a blank line
    assert read_connection(q).parts == conn.parts


def test_bad_connection_files(tmp_path) -> None:
    with pytest.raises(PartitionError, match="not JSON"):
        parse_conn_json("{ nope")
    with pytest.raises(PartitionError, match="source"):
        parse_conn_json("{}")
    with pytest.raises(PartitionError, match=r"\[models\]"):
        parse_conn_ini("[source]\nfile=a.circle\n")
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(PartitionError, match="format"):
        read_connection(tmp_path / "x.txt")
    empty = Connection(ConnPart("a.circle"), [ConnPart("a.00001_cpu.circle")])
    assert '"inputs" : [  ]' in format_conn_json(empty)
    assert parse_conn_json(format_conn_json(empty)) == empty
