"""The ``.part`` file of ONE's circle-partitioner: which backend each op goes to.

An INI file (the *crew* dialect)::

    [partition]
    # comma-separated backend names
    backends=cpu,acl_cl
    # backend of ops that no rule names; one of the backends
    default=cpu
    # opcode: rules of [OPCODE] apply; opname: rules of [OPNAME] apply
    comply=opcode

    [OPCODE]
    # '_' overrides the default backend
    _=cpu
    DIV=acl_cl

    [OPNAME]
    # op name = name of the op's (first) output tensor
    Sub=acl_cl

Lines whose first non-blank character is ``#`` or ``;`` are comments (a comment is a whole
line: names may contain ``#`` and ``;``). In keys, ``\\;`` stands for ``;`` as in ONE. Every
value keeps the line it came from, so errors name ``file:line``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolkit.errors import PartitionError
from toolkit.schema import BUILTIN_CODES
from toolkit.util.files import check_path, read_text

__all__ = ["PartSpec", "read_part", "parse_part", "format_part", "write_part", "as_part_spec",
           "ini_lines", "SECTIONS", "COMPLY"]

PARTITION, OPCODE, OPNAME = "partition", "OPCODE", "OPNAME"
SECTIONS = (PARTITION, OPCODE, OPNAME)
PARTITION_KEYS = ("backends", "default", "comply")
COMPLY = ("opcode", "opname")
_CUSTOM = re.compile(r"^CUSTOM\((.+)\)$")
_BAD_NAME_CHARS = re.compile(r"[/\\\x00:*?\"<>|\s]")


@dataclass
class PartSpec:
    """A partition request: backends, the default backend and the per-op rules.

    ``opcode`` maps op types (``DIV``, ``CONV_2D``; ``CUSTOM`` or ``CUSTOM(code)`` for custom
    ops) to backends; ``opname`` maps op names to backends. ``opcode_default`` is the ``_``
    entry of ``[OPCODE]`` (it overrides ``default``). ``path`` and ``lines`` (``(section,
    key) → line``) locate every value for messages; ``overrides`` names keys set on the command
    line (``backends``/``default`` → flag text).
    """

    backends: list[str]
    default: str | None
    comply: str = "opcode"
    opcode: dict[str, str] = field(default_factory=dict)
    opname: dict[str, str] = field(default_factory=dict)
    opcode_default: str | None = None
    path: str | None = None
    lines: dict[tuple[str, str], int] = field(default_factory=dict)
    overrides: dict[str, str] = field(default_factory=dict)

    # ----------------------------------------------------------- queries
    @property
    def default_backend(self) -> str | None:
        """The backend of ops no rule names: ``[OPCODE] _`` when set, else ``default``."""
        return self.opcode_default if self.opcode_default is not None else self.default

    @property
    def rules(self) -> dict[str, str]:
        """The rule table in force: ``opcode`` or ``opname`` according to ``comply``."""
        return self.opname if self.comply == "opname" else self.opcode

    def where(self, section: str, key: str | None = None) -> str:
        """Return ``file:line`` (or the command-line flag) of a section/key for messages."""
        if section == PARTITION and key in self.overrides:
            return f"command line {self.overrides[key]}"
        name = self.path or "<part>"
        line = self.lines.get((section, key if key is not None else ""))
        if line is None and key is not None:
            line = self.lines.get((section, ""))
        return f"{name}:{line}" if line is not None else name

    def describe_default(self) -> str:
        """Return where the default backend comes from, e.g. ``[OPCODE] _=cpu (f.part:6)``."""
        if self.opcode_default is not None:
            return f"[OPCODE] _={self.opcode_default} ({self.where(OPCODE, '_')})"
        return f"default={self.default} ({self.where(PARTITION, 'default')})"

    # ---------------------------------------------------------- changes
    def with_overrides(self, backends: str | list[str] | None = None,
                       default: str | None = None) -> PartSpec:
        """Return a copy with ``backends`` (CSV or list) and/or ``default`` replaced, as the
        ``--backends``/``--default`` flags do (``--default`` also beats ``[OPCODE] _``)."""
        spec = replace(self, opcode=dict(self.opcode), opname=dict(self.opname),
                       lines=dict(self.lines), overrides=dict(self.overrides))
        if backends is not None:
            spec.backends = _split_csv(backends) if isinstance(backends, str) else list(backends)
            spec.overrides["backends"] = f"--backends {','.join(spec.backends)}"
        if default is not None:
            spec.default = default
            spec.opcode_default = None
            spec.overrides["default"] = f"--default {default}"
        return spec

    def validate(self) -> PartSpec:
        """Check the request; raise :class:`PartitionError` naming ``file:line``. Returns self.

        Backends must be non-empty names usable in a file name; ``default`` (or ``_``) one of
        them; ``comply`` ``opcode`` or ``opname``; every rule's backend listed; every
        ``[OPCODE]`` key a known op type.
        """
        if not self.backends:
            raise PartitionError("no backends given", where=self.where(PARTITION, "backends"),
                                 fix="set backends=a,b in [partition] or pass --backends")
        seen: set[str] = set()
        for b in self.backends:
            if not b or _BAD_NAME_CHARS.search(b) or b in (".", ".."):
                raise PartitionError(
                    f"backend name {b!r} cannot be part of a file name",
                    where=self.where(PARTITION, "backends"),
                    fix="use letters, digits, '_', '-' or '.' in backend names")
            if b in seen:
                raise PartitionError(f"backend {b!r} is listed twice",
                                     where=self.where(PARTITION, "backends"),
                                     fix="list each backend once in backends=")
            seen.add(b)
        if not self.default:
            raise PartitionError("no default backend", where=self.where(PARTITION),
                                 fix="set default=<backend> in [partition] or pass --default")
        if self.default not in seen:
            raise PartitionError(f"default backend {self.default!r} is not one of the backends "
                                 f"{self.backends}", where=self.where(PARTITION, "default"),
                                 fix="add it to backends or pick a listed backend")
        if self.opcode_default is not None and self.opcode_default not in seen:
            raise PartitionError(f"[OPCODE] _ names backend {self.opcode_default!r}, which is "
                                 f"not one of the backends {self.backends}",
                                 where=self.where(OPCODE, "_"),
                                 fix="add it to backends or pick a listed backend")
        if self.comply not in COMPLY:
            raise PartitionError(f"unknown comply {self.comply!r}",
                                 where=self.where(PARTITION, "comply"),
                                 fix="use comply=opcode or comply=opname")
        for section, table in ((OPCODE, self.opcode), (OPNAME, self.opname)):
            for key, backend in table.items():
                if backend not in seen:
                    raise PartitionError(
                        f"[{section}] {key} is assigned to backend {backend!r}, which is not "
                        f"one of the backends {self.backends}", where=self.where(section, key),
                        fix=f"add {backend!r} to backends or use a listed backend")
        for key in self.opcode:
            if not _known_opcode(key):
                hint = key.upper() if _known_opcode(key.upper()) else None
                raise PartitionError(
                    f"[OPCODE] {key!r} is not an op type", where=self.where(OPCODE, key),
                    fix=f"did you mean {hint}?" if hint else
                    "use schema names such as CONV_2D, DIV, or CUSTOM(code); for a model "
                    "imported from ONNX, ONNX op types such as Conv, MatMul")
        return self


def _known_opcode(key: str) -> bool:
    return key in BUILTIN_CODES or bool(_CUSTOM.match(key)) or is_onnx_op_type(key)


def is_onnx_op_type(key: str) -> bool:
    """True when ``key`` is an ONNX op type (``Conv``, ``MatMul``; needs the ``onnx``
    package): a ``[OPCODE]`` rule for it places the ops lowered from nodes of that type."""
    if not key[:1].isupper() or key.isupper():
        return False
    try:
        from onnx import defs
    except ImportError:
        return False
    return bool(defs.has(key))


def _split_csv(text: str) -> list[str]:
    return [s.strip() for s in text.split(",")] if text.strip() else []


# ------------------------------------------------------------------ reading
def ini_lines(text: str, where: str) -> Iterator[tuple[int, str | None, str, str]]:
    """Yield ``(line, section, key, value)`` for each entry of crew-style INI text, and
    ``(line, name, "", "")`` for each section header (``section`` is then the header name).

    Blank lines and whole-line ``#``/``;`` comments are skipped; ``\\;`` in a key becomes
    ``;``. Raises :class:`PartitionError` for a line outside any section, a header without
    ``]`` and a line without ``=``.
    """
    section: str | None = None
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            if not line.endswith("]"):
                raise PartitionError(f"section header {line!r} lacks its closing ']'",
                                     where=f"{where}:{no}",
                                     fix="close the section header with ']', e.g. [partition]")
            section = line[1:-1].strip()
            yield no, section, "", ""
            continue
        if section is None:
            raise PartitionError(f"{line!r} comes before any [section]", where=f"{where}:{no}",
                                 fix="start the file with [partition]")
        key, eq, value = line.partition("=")
        if not eq:
            raise PartitionError(
                f"{line!r} is not key=value", where=f"{where}:{no}",
                fix="write each line as key=value (';' or '#' starts a comment)",
            )
        key = key.strip().replace("\\;", ";")
        if not key:
            raise PartitionError(
                f"{line!r} has an empty key", where=f"{where}:{no}",
                fix=(
                    "write each line as key=value with a non-empty key (escape a ';' in a key as "
                    "\\;)"
                ),
            )
        yield no, section, key, value.strip()


def parse_part(text: str, where: str = "<part>") -> PartSpec:
    """Return the :class:`PartSpec` of ``.part`` text (not yet validated: see
    :meth:`PartSpec.validate`). ``where`` names the file in messages.

    Raises :class:`PartitionError` with ``file:line`` for an unknown section or key, a
    duplicate key, an empty value and malformed lines.
    """
    spec = PartSpec(backends=[], default=None, comply="opcode", path=where)
    tables = {OPCODE: spec.opcode, OPNAME: spec.opname}
    found_partition = False
    for no, section, key, value in ini_lines(text, where):
        assert section is not None
        if not key:
            if section not in SECTIONS:
                raise PartitionError(f"unknown section [{section}]", where=f"{where}:{no}",
                                     fix=f"sections are {', '.join(f'[{s}]' for s in SECTIONS)}")
            found_partition |= section == PARTITION
            spec.lines.setdefault((section, ""), no)
            continue
        if (section, key) in spec.lines:
            raise PartitionError(f"[{section}] {key} is set twice (first on line "
                                 f"{spec.lines[(section, key)]})", where=f"{where}:{no}",
                                 fix="keep one of the two lines")
        if not value:
            raise PartitionError(
                f"[{section}] {key} has no value", where=f"{where}:{no}",
                fix=f"give [{section}] {key} a value after '=', or remove the line",
            )
        spec.lines[(section, key)] = no
        if section == PARTITION:
            if key == "backends":
                spec.backends = _split_csv(value)
            elif key == "default":
                spec.default = value
            elif key == "comply":
                spec.comply = value
            else:
                raise PartitionError(f"unknown key {key!r} in [partition]",
                                     where=f"{where}:{no}",
                                     fix=f"keys are {', '.join(PARTITION_KEYS)}")
        elif section == OPCODE and key == "_":
            spec.opcode_default = value
        else:
            tables[section][key] = value
    if not found_partition:
        raise PartitionError("no [partition] section", where=where,
                             fix="add [partition] with backends=, default= and comply=")
    return spec


def read_part(path: str | os.PathLike[str]) -> PartSpec:
    """Read a ``.part`` file and return its :class:`PartSpec` (not yet validated)."""
    p = Path(check_path(path, what="partition file", error=PartitionError))
    text = read_text(p, what="partition file", error=PartitionError,
                     fix="pass a .part file (INI text with a [partition] section)")
    return parse_part(text, where=str(p))


def as_part_spec(part: Any) -> PartSpec:
    """Return a :class:`PartSpec` from a spec, a ``.part`` path, ``.part`` text (a string with
    a newline) or a mapping with keys ``backends``, ``default``, ``comply``, ``opcode``,
    ``opname`` (or INI-like ``partition``/``OPCODE``/``OPNAME`` sub-mappings)."""
    if isinstance(part, PartSpec):
        return part
    if isinstance(part, str) and "\n" in part:
        return parse_part(part)
    if isinstance(part, (str, os.PathLike)):
        return read_part(part)
    if isinstance(part, Mapping):
        return _from_mapping(part)
    raise PartitionError(f"cannot read a partition request from a {type(part).__name__}",
                         fix="pass a .part path, a PartSpec or a mapping")


def _from_mapping(m: Mapping[str, Any]) -> PartSpec:
    flat: dict[str, Any] = dict(m.get(PARTITION, {}))
    flat.update({k: v for k, v in m.items() if k not in SECTIONS})
    unknown = set(flat) - {*PARTITION_KEYS, "opcode", "opname"}
    if unknown:
        raise PartitionError(f"unknown partition keys {sorted(unknown)}",
                             fix="use backends, default, comply, opcode, opname")
    backends = flat.get("backends", [])
    opcode = dict(flat.get("opcode", {}))
    opcode.update(m.get(OPCODE, {}))
    opname = dict(flat.get("opname", {}))
    opname.update(m.get(OPNAME, {}))
    return PartSpec(
        backends=_split_csv(backends) if isinstance(backends, str) else list(backends),
        default=flat.get("default"), comply=flat.get("comply", "opcode"),
        opcode={k: v for k, v in opcode.items() if k != "_"}, opname=opname,
        opcode_default=opcode.get("_"), path="<mapping>")


# ------------------------------------------------------------------ writing
def format_part(spec: PartSpec) -> str:
    """Return the ``.part`` text of ``spec`` (``;`` in names written as ``\\;``)."""
    out = ["[partition]", f"backends={','.join(spec.backends)}"]
    if spec.default is not None:
        out.append(f"default={spec.default}")
    out.append(f"comply={spec.comply}")
    for section, table, extra in ((OPCODE, spec.opcode, spec.opcode_default),
                                  (OPNAME, spec.opname, None)):
        if not table and extra is None:
            continue
        out += ["", f"[{section}]"]
        if extra is not None:
            out.append(f"_={extra}")
        for key, backend in table.items():
            if key[0] in "#[" or "=" in key or "\n" in key:
                raise PartitionError(f"[{section}] key {key!r} cannot be written to a .part "
                                     "file", fix="rename the op")
            out.append(f"{key.replace(';', chr(92) + ';')}={backend}")
    return "\n".join(out) + "\n"


def write_part(spec: PartSpec, path: str | os.PathLike[str]) -> Path:
    """Write ``spec`` as a ``.part`` file (atomically) and return the path."""
    from toolkit.util.atomic import atomic_write

    p = Path(path)
    atomic_write(p, format_part(spec).encode("utf-8"))
    return p
