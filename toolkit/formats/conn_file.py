"""Connection files of a partitioned model: ``<stem>.conn.json`` and ``<stem>.conn.ini``.

Both say the same thing: the source model's file, inputs and outputs, then each part model's
file, inputs and outputs, in the order the parts run. The text layout is that of ONE's
circle-partitioner (crew's writers)::

    {
      "source" : {
        "file" : "Net_InstanceNorm_003.circle",
        "inputs" : [ "Input" ],
        "outputs" : [ "Add_as_terminal" ]
      },
      "parts" : [
        {
          "file" : "Net_InstanceNorm_003.00001_cpu.circle",
          ...
        }
      ]
    }

and the INI form has ``[source]`` (``file``, ``i1``.., ``o1``..), ``[models]`` (``m1``..) and
one section per part file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import PartitionError
from toolkit.formats.part_file import ini_lines

__all__ = ["ConnPart", "Connection", "format_conn_json", "format_conn_ini", "parse_conn_json",
           "parse_conn_ini", "read_connection"]


@dataclass
class ConnPart:
    """One model of a connection: its file name and input/output tensor names in order."""

    file: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass
class Connection:
    """A source model and the part models that, chained in order, compute what it computes.

    ``path`` is the connection file it was read from (part files are relative to its folder).
    """

    source: ConnPart
    parts: list[ConnPart]
    path: str | None = None

    @property
    def folder(self) -> Path:
        """Folder that holds the part files: the connection file's folder (or the CWD)."""
        return Path(self.path).parent if self.path else Path(".")


# ------------------------------------------------------------------ JSON
def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _names(items: list[str]) -> str:
    return "[ " + ", ".join(_q(s) for s in items) + " ]" if items else "[  ]"


def _json_part(p: ConnPart, pad: str) -> list[str]:
    return [f'{pad}"file" : {_q(p.file)},',
            f'{pad}"inputs" : {_names(p.inputs)},',
            f'{pad}"outputs" : {_names(p.outputs)}']


def format_conn_json(conn: Connection) -> str:
    """Return the ``.conn.json`` text: 2-space indent, ``"key" : value``, ``[ "a", "b" ]``."""
    lines = ["{", '  "source" : {', *_json_part(conn.source, "    "), "  },", '  "parts" : [']
    for i, p in enumerate(conn.parts):
        lines.append("    {")
        lines += _json_part(p, "      ")
        lines.append("    }," if i + 1 < len(conn.parts) else "    }")
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _str_list(v: object, what: str, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise PartitionError(f"{what} is not a list of names", where=where)
    return list(v)


def _json_conn_part(obj: object, what: str, where: str) -> ConnPart:
    if not isinstance(obj, dict) or not isinstance(obj.get("file"), str) or not obj["file"]:
        raise PartitionError(f"{what} has no \"file\"", where=where)
    return ConnPart(obj["file"], _str_list(obj.get("inputs", []), f"{what} inputs", where),
                    _str_list(obj.get("outputs", []), f"{what} outputs", where))


def parse_conn_json(text: str, where: str = "<conn.json>") -> Connection:
    """Return the :class:`Connection` of ``.conn.json`` text (a trailing comma before ``}``
    or ``]`` is tolerated). Raises :class:`PartitionError` naming the line when malformed."""
    try:
        obj = json.loads(_TRAILING_COMMA.sub(r"\1", text))
    except json.JSONDecodeError as e:
        raise PartitionError(f"not JSON: {e.msg}", where=f"{where}:{e.lineno}") from None
    if not isinstance(obj, dict) or "source" not in obj or "parts" not in obj:
        raise PartitionError('expected an object with "source" and "parts"', where=where)
    parts = obj["parts"]
    if not isinstance(parts, list):
        raise PartitionError('"parts" is not a list', where=where)
    return Connection(_json_conn_part(obj["source"], "source", where),
                      [_json_conn_part(p, f"part {i + 1}", where) for i, p in enumerate(parts)],
                      path=None if where.startswith("<") else where)


# ------------------------------------------------------------------ INI
def _ini_section(name: str, p: ConnPart) -> list[str]:
    return [f"[{name}]", f"file={p.file}",
            *(f"i{i}={s}" for i, s in enumerate(p.inputs, start=1)),
            *(f"o{i}={s}" for i, s in enumerate(p.outputs, start=1))]


def format_conn_ini(conn: Connection) -> str:
    """Return the ``.conn.ini`` text: ``[source]``, ``[models]`` with ``m1=...``, then one
    section per part file with ``file``, ``i1``.. and ``o1``..; sections separated by a blank
    line."""
    blocks = [_ini_section("source", conn.source),
              ["[models]", *(f"m{i}={p.file}" for i, p in enumerate(conn.parts, start=1))]]
    blocks += [_ini_section(p.file, p) for p in conn.parts]
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


def _numbered(items: dict[str, str], prefix: str) -> list[str]:
    out = []
    i = 1
    while f"{prefix}{i}" in items:
        out.append(items[f"{prefix}{i}"])
        i += 1
    return out


def parse_conn_ini(text: str, where: str = "<conn.ini>") -> Connection:
    """Return the :class:`Connection` of ``.conn.ini`` text (as crew reads it: ``iN``/``oN``/
    ``mN`` counted from 1 until the first gap)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for _no, section, key, value in ini_lines(text, where):
        assert section is not None
        if not key:
            current = sections.setdefault(section, {})
        else:
            current.setdefault(key, value)

    def part(name: str) -> ConnPart:
        items = sections.get(name)
        if items is None or not items.get("file"):
            raise PartitionError(f"section [{name}] is missing or has no file=", where=where)
        return ConnPart(items["file"], _numbered(items, "i"), _numbered(items, "o"))

    if "models" not in sections:
        raise PartitionError("section [models] is missing", where=where)
    models = _numbered(sections["models"], "m")
    return Connection(part("source"), [part(m) for m in models],
                      path=None if where.startswith("<") else where)


def read_connection(path: str | os.PathLike[str]) -> Connection:
    """Read a ``.conn.json`` or ``.conn.ini`` file (by extension) into a :class:`Connection`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PartitionError("connection file not found", where=str(p)) from None
    except UnicodeDecodeError as e:
        raise PartitionError(f"not UTF-8 text ({e})", where=str(p)) from None
    if p.suffix.lower() == ".json":
        return parse_conn_json(text, where=str(p))
    if p.suffix.lower() == ".ini":
        return parse_conn_ini(text, where=str(p))
    raise PartitionError(f"cannot tell the connection format from {p.suffix!r}", where=str(p),
                         fix="use a .conn.json or .conn.ini file")
