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

Written by the partitioner, each part entry also carries ``"size"`` (bytes) and ``"sha256"``
of the part file: the connection file is the manifest of the set, written last, and a reader
refuses parts that do not match it (a set left mixed by a crash, or edited by hand). ONE's
readers ignore the two keys. Files are named relative to the connection file's folder and
must stay inside it (:func:`member_path`); names the INI form cannot carry (line breaks,
surrounding blanks, a leading ``[``, ``;`` or ``#``) are refused when writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import PartitionError
from toolkit.formats.part_file import ini_lines
from toolkit.util.files import check_path, read_text

_MAX_CONN_BYTES = 64 << 20
"""A connection file names a few models; anything larger is not one."""

__all__ = ["ConnPart", "Connection", "format_conn_json", "format_conn_ini", "parse_conn_json",
           "parse_conn_ini", "read_connection", "member_path", "check_ini_name", "file_digest"]


# The fix for a connection file whose structure is wrong
_REPARTITION = ("the connection file is damaged or hand-edited: partition the model again "
                "(`toolkit partition`) to rewrite it and its parts")


@dataclass
class ConnPart:
    """One model of a connection: its file name and input/output tensor names in order."""

    file: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    size: int | None = None
    sha256: str | None = None


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

    def member(self, file: str) -> Path:
        """The path of ``file`` (a part or the source) inside :attr:`folder`; see
        :func:`member_path`."""
        return member_path(self.folder, file, where=self.path or "<connection>")


def member_path(folder: Path, name: str, *, where: str) -> Path:
    """Return ``folder / name`` for a plain file name that stays inside ``folder``.

    Raises:
        PartitionError: an absolute name, a name with a folder part or ``..``, a NUL, or a
            symbolic link that leads out of ``folder``.
    """
    if (not name or "\0" in name or "/" in name or "\\" in name or name in (".", "..")
            or Path(name).is_absolute()):
        raise PartitionError(f"the connection names {name!r}, which is not a plain file name "
                             "in its folder", where=where,
                             fix="connection files may only name files beside them")
    if len(os.fsencode(name)) > 255:
        raise PartitionError(f"the connection names a file of {len(os.fsencode(name))} bytes; "
                             "file names have at most 255", where=where,
                             fix="connection files may only name files beside them")
    path = folder / name
    try:
        leads_out = path.is_symlink() and path.resolve().parent != folder.resolve()
    except (OSError, RuntimeError) as e:  # a link loop, a folder that cannot be read
        raise PartitionError(f"cannot follow {name!r} ({e})", where=where,
                             fix="connection files may only name plain files beside them"
                             ) from None
    if leads_out:
        raise PartitionError(f"{name!r} is a link that leads out of the connection's folder",
                             where=where, fix="copy the file into the folder instead")
    return path


def file_digest(data: bytes) -> str:
    """The ``sha256`` of a part file's bytes, as the manifest records it (hex)."""
    return hashlib.sha256(data).hexdigest()


_INI_BAD = re.compile(r"[\r\n\0]")


def check_ini_name(name: str, what: str) -> None:
    """Raise :class:`PartitionError` when ``name`` cannot be written as an INI value."""
    if (_INI_BAD.search(name) or name != name.strip() or name[:1] in ("[", ";", "#")
            or not name):
        raise PartitionError(f"{what} {name!r} cannot be written to a .conn.ini (line breaks, "
                             "NULs, surrounding blanks and a leading '[', ';' or '#' would "
                             "change its meaning)", fix="rename it in the model")


# ------------------------------------------------------------------ JSON
def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _names(items: list[str]) -> str:
    return "[ " + ", ".join(_q(s) for s in items) + " ]" if items else "[  ]"


def _json_part(p: ConnPart, pad: str) -> list[str]:
    lines = [f'{pad}"file" : {_q(p.file)},',
             f'{pad}"inputs" : {_names(p.inputs)},',
             f'{pad}"outputs" : {_names(p.outputs)}']
    if p.size is not None and p.sha256 is not None:
        lines[-1] += ","
        lines += [f'{pad}"size" : {int(p.size)},', f'{pad}"sha256" : {_q(p.sha256)}']
    return lines


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
        raise PartitionError(
            f"{what} is not a list of names", where=where,
            fix=(
                f"give {what} as a list of tensor names, or partition "
                "again (`toolkit partition`)"
            ),
        )
    return list(v)


def _json_conn_part(obj: object, what: str, where: str) -> ConnPart:
    if not isinstance(obj, dict) or not isinstance(obj.get("file"), str) or not obj["file"]:
        raise PartitionError(f"{what} has no \"file\"", where=where, fix=_REPARTITION)
    size, digest = obj.get("size"), obj.get("sha256")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise PartitionError(f"{what} size is not a byte count", where=where, fix=_REPARTITION)
    if digest is not None and not (isinstance(digest, str) and _HEX64.fullmatch(digest)):
        raise PartitionError(f"{what} sha256 is not 64 hex digits", where=where, fix=_REPARTITION)
    return ConnPart(obj["file"], _str_list(obj.get("inputs", []), f"{what} inputs", where),
                    _str_list(obj.get("outputs", []), f"{what} outputs", where), size, digest)


_HEX64 = re.compile(r"[0-9a-f]{64}")
_SIZE = re.compile(r"[0-9]{1,19}")  # a byte count (ASCII digits, at most int64)


def parse_conn_json(text: str, where: str = "<conn.json>") -> Connection:
    """Return the :class:`Connection` of ``.conn.json`` text (a trailing comma before ``}``
    or ``]`` is tolerated). Raises :class:`PartitionError` naming the line when malformed."""
    try:
        obj = json.loads(_TRAILING_COMMA.sub(r"\1", text))
    except json.JSONDecodeError as e:
        raise PartitionError(
            f"not JSON: {e.msg}", where=f"{where}:{e.lineno}",
            fix=(
                "fix the JSON syntax at that line, or partition the model again (`toolkit "
                "partition`)"
            ),
        ) from None
    except (RecursionError, ValueError) as e:  # nesting too deep, an integer too long
        raise PartitionError(f"not a connection file ({type(e).__name__})", where=where,
                             fix="pass the .conn.json written by `toolkit partition`") from None
    if not isinstance(obj, dict) or "source" not in obj or "parts" not in obj:
        raise PartitionError(
            'expected an object with "source" and "parts"', where=where,
            fix=_REPARTITION,
        )
    parts = obj["parts"]
    if not isinstance(parts, list):
        raise PartitionError('"parts" is not a list', where=where, fix=_REPARTITION)
    return Connection(_json_conn_part(obj["source"], "source", where),
                      [_json_conn_part(p, f"part {i + 1}", where) for i, p in enumerate(parts)],
                      path=None if where.startswith("<") else where)


# ------------------------------------------------------------------ INI
def _ini_section(name: str, p: ConnPart) -> list[str]:
    for what, names in (("file name", [p.file]), ("tensor name", [*p.inputs, *p.outputs])):
        for n in names:
            check_ini_name(n, what)
    lines = [f"[{name}]", f"file={p.file}",
             *(f"i{i}={s}" for i, s in enumerate(p.inputs, start=1)),
             *(f"o{i}={s}" for i, s in enumerate(p.outputs, start=1))]
    if p.size is not None and p.sha256 is not None:
        lines += [f"size={int(p.size)}", f"sha256={p.sha256}"]
    return lines


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
            raise PartitionError(
                f"section [{name}] is missing or has no file=", where=where,
                fix=_REPARTITION,
            )
        size, digest = items.get("size"), items.get("sha256")
        if size is not None and not _SIZE.fullmatch(size):
            raise PartitionError(
                f"section [{name}] size is not a byte count", where=where,
                fix=_REPARTITION,
            )
        if digest is not None and not _HEX64.fullmatch(digest):
            raise PartitionError(
                f"section [{name}] sha256 is not 64 hex digits", where=where,
                fix=_REPARTITION,
            )
        return ConnPart(items["file"], _numbered(items, "i"), _numbered(items, "o"),
                        None if size is None else int(size), digest)

    if "models" not in sections:
        raise PartitionError(
            "section [models] is missing", where=where,
            fix=(
                "add a [models] section listing the part files (m1=..., m2=...), or partition the "
                "model again (`toolkit partition`)"
            ),
        )
    models = _numbered(sections["models"], "m")
    return Connection(part("source"), [part(m) for m in models],
                      path=None if where.startswith("<") else where)


def read_connection(path: str | os.PathLike[str]) -> Connection:
    """Read a ``.conn.json`` or ``.conn.ini`` file (by extension) into a :class:`Connection`."""
    p = Path(check_path(path, what="connection file", error=PartitionError))
    text = read_text(p, what="connection file", error=PartitionError, max_bytes=_MAX_CONN_BYTES,
                     fix="pass the .conn.json or .conn.ini written by `toolkit partition`")
    if p.suffix.lower() == ".json":
        return parse_conn_json(text, where=str(p))
    if p.suffix.lower() == ".ini":
        return parse_conn_ini(text, where=str(p))
    raise PartitionError(f"cannot tell the connection format from {p.suffix!r}", where=str(p),
                         fix="use a .conn.json or .conn.ini file")
