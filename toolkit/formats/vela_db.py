"""Vela's debug database (``<stem>_debug.xml``, written by ``vela --enable-debug-db``).

The file is an XML container: a ``<debug>`` root whose ``<table name=...>`` children each hold a
CSV table in a CDATA section, header row first. Vela 5 writes two variants:

- legacy core (``--debug-force-legacy-core``): ``<debug source=INPUT optimised=OUTPUT>``, tables
  ``source``, ``optimised``, ``queue`` (``offset, cmdstream_id, optimised_id``) and
  ``cmdstream`` (``id, file_offset``); ids count from 0; cells written with Python's
  ``csv.QUOTE_NONNUMERIC`` (every string quoted) and ``\\r\\n`` row ends.
- default core: ``<debug source=OUTPUT_BASENAME>`` (no ``optimised`` attribute), more tables
  (``group``, ``perf``, ``perf_debug*``, ``tensors``, ...) in varying order, ``queue`` has a
  ``scheduled_id`` column, ``cmdstream`` only ``id``; ids count from 1; every cell that is not
  purely digits is quoted (so ``"-1"``), ``\\n`` row ends.

This module is format code only: it reads every table whatever its columns, and writes the legacy
variant (plus any extra tables). Joining the tables is left to callers.

XML is parsed with ``defusedxml``'s parser: a document type declaration, an entity declaration or
an external entity reference is refused (``VelaError``) before anything is expanded.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError

import numpy as np
import pandas as pd
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from toolkit.errors import VelaError
from toolkit.util.atomic import atomic_write
from toolkit.util.files import check_path, read_bytes

__all__ = [
    "LEGACY_TABLES",
    "DEFAULT_CORE_TABLES",
    "VelaDebugDB",
    "detect_core",
    "read_debug_db",
    "write_debug_db",
]

#: Tables (and their columns, in Vela's order) of the legacy core's database.
LEGACY_TABLES: dict[str, list[str]] = {
    "source": ["id", "operator", "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d", "ext_key"],
    "optimised": ["id", "source_id", "operator", "kernel_w", "kernel_h", "ofm_w", "ofm_h", "ofm_d"],
    "queue": ["offset", "cmdstream_id", "optimised_id"],
    "cmdstream": ["id", "file_offset"],
}

#: Tables that only the default (C++) core writes; any one of them marks a default-core file.
DEFAULT_CORE_TABLES: frozenset[str] = frozenset(
    {"group", "perf", "perf_debug", "perf_debug_main", "perf_debug_conn", "perf_debug_wd",
     "tensors"}
)

_INT_RE = re.compile(r"-?[0-9]+\Z")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Characters XML 1.0 cannot carry at all, not even as character references.
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


@dataclass
class VelaDebugDB:
    """The tables of one Vela debug database.

    Attributes:
        source_file: the root's ``source`` attribute (legacy core: the input model path; default
            core: the output basename, without extension), or None when absent.
        optimised_file: the root's ``optimised`` attribute (legacy core: the optimised
            ``*_vela.tflite`` path); None when absent, as in every default-core file.
        tables: every table by name, in file order. Columns are as in the file (any order, any
            extra column); a column is int64 when it has at least one row and every cell is a
            decimal integer that fits in int64 (quoted or not), else str.
        core: ``"legacy"`` or ``"default"`` (see :func:`detect_core`).
        path: the file read, or None when read from bytes.
    """

    source_file: str | None
    optimised_file: str | None
    tables: dict[str, pd.DataFrame]
    core: str
    path: str | None = field(default=None)

    def table(self, name: str) -> pd.DataFrame:
        """Return table ``name``; VelaError naming the tables present when it is missing."""
        try:
            return self.tables[name]
        except KeyError:
            raise VelaError(
                f"the debug database has no table '{name}' (tables: {', '.join(self.tables)})",
                where=self.path,
                fix="re-run vela with --enable-debug-db; the default core and the legacy core "
                "write different tables",
            ) from None


def detect_core(tables: Mapping[str, pd.DataFrame]) -> str:
    """Return ``"default"`` or ``"legacy"``: which Vela core wrote ``tables``.

    Default core when a default-core-only table is present, when ``queue`` has a ``scheduled_id``
    column or ``cmdstream`` has no ``file_offset`` column; legacy core when ``cmdstream`` has a
    ``file_offset`` column. Otherwise decided by the smallest ``source`` (or ``optimised``) id:
    0 for legacy, 1 for default; legacy when nothing tells.
    """
    if DEFAULT_CORE_TABLES.intersection(tables):
        return "default"
    queue = tables.get("queue")
    if queue is not None and "scheduled_id" in queue.columns:
        return "default"
    stream = tables.get("cmdstream")
    if stream is not None:
        return "legacy" if "file_offset" in stream.columns else "default"
    for name in ("source", "optimised"):
        t = tables.get(name)
        if t is not None and "id" in t.columns and len(t) and t["id"].dtype.kind == "i":
            return "legacy" if int(t["id"].min()) == 0 else "default"
    return "legacy"


# ---------------------------------------------------------------------------------------------
# Reading


class _DebugTarget:
    """ElementTree parser target that collects ``<table>`` texts and where they start."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.parser: DefusedXMLParser | None = None
        self.depth = 0
        self.root_tag: str | None = None
        self.root_attrib: dict[str, str] = {}
        # (name, start line of the tag, first line of its text, text chunks)
        self.tables: list[tuple[str, int, int | None, list[str]]] = []
        self._current: tuple[str, int, int | None, list[str]] | None = None

    def _line(self) -> int:
        assert self.parser is not None
        return int(self.parser.parser.CurrentLineNumber)

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.depth += 1
        if self.depth == 1:
            self.root_tag = tag
            self.root_attrib = dict(attrib)
        elif self.depth == 2 and tag == "table":
            name = attrib.get("name")
            line = self._line()
            if not name:
                raise VelaError("a <table> element has no name attribute",
                                where=f"{self.where}:{line}",
                                fix=("the file is damaged or hand-edited: re-run vela "
                                     "--enable-debug-db"))
            self._current = (name, line, None, [])
        elif self._current is not None:
            raise VelaError(f"unexpected element <{tag}> inside table '{self._current[0]}'",
                            where=f"{self.where}:{self._line()}",
                            fix="the file is damaged or hand-edited: re-run vela --enable-debug-db")

    def end(self, tag: str) -> None:
        if self.depth == 2 and self._current is not None:
            self.tables.append(self._current)
            self._current = None
        self.depth -= 1

    def data(self, text: str) -> None:
        if self._current is not None:
            name, line, first, chunks = self._current
            if first is None:
                self._current = (name, line, self._line(), chunks)
            chunks.append(text)

    def close(self) -> None:
        return None


def _convert_column(values: list[str]) -> pd.Series:
    """Return ``values`` as an int64 Series when all are integers in range, else as str."""
    # 20 characters hold every int64 ("-9223372036854775808"); longer ones are text
    if values and all(len(v) <= 20 and _INT_RE.match(v) for v in values):
        ints = [int(v) for v in values]
        if min(ints) >= _INT64_MIN and max(ints) <= _INT64_MAX:
            return pd.Series(np.array(ints, dtype=np.int64))
    return pd.Series(values, dtype="str")


def _parse_table(name: str, text: str, where: str, first_line: int) -> pd.DataFrame:
    """Return the DataFrame of one table's CSV ``text`` (see :class:`VelaDebugDB` for dtypes).

    ``first_line`` is the file line where ``text`` starts, used in error messages.
    """
    # Leading and trailing blank lines (the default core puts the CDATA on lines of its own).
    stripped = text.lstrip(" \t\r\n")
    first_line += text[: len(text) - len(stripped)].count("\n")
    stripped = stripped.rstrip(" \t\r\n")
    if not stripped:
        raise VelaError(f"table '{name}' is empty (no header row)", where=f"{where}:{first_line}",
                        fix="the file is truncated or not written by vela; re-run vela")
    reader = csv.reader(io.StringIO(stripped, newline=""), strict=True)
    header: list[str] | None = None
    rows: list[list[str]] = []
    while True:
        line = first_line + reader.line_num  # file line where the next record starts
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise VelaError(f"table '{name}' is not valid CSV from this line on ({exc})",
                            where=f"{where}:{line}",
                            fix="the file is damaged; re-run vela --enable-debug-db") from None
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if header is None:
            header = [c.strip() for c in row]
            dup = sorted({c for c in header if header.count(c) > 1})
            if dup or any(not c for c in header):
                raise VelaError(
                    f"table '{name}' has a bad header (empty or repeated column names "
                    f"{dup or ['']})",
                    where=f"{where}:{line}",
                    fix="the file is damaged or hand-edited: re-run vela --enable-debug-db",
                )
            continue
        if len(row) != len(header):
            raise VelaError(
                f"table '{name}' row has {len(row)} cells but the header has {len(header)}",
                where=f"{where}:{line}",
                fix="the file is damaged; re-run vela --enable-debug-db",
            )
        rows.append(row)
    if header is None:  # every row blank to str.strip (Unicode spaces, not stripped above)
        raise VelaError(f"table '{name}' has no header row (only blank rows)",
                        where=f"{where}:{first_line}",
                        fix="the file is truncated or not written by vela; re-run vela")
    columns = list(zip(*rows)) if rows else [() for _ in header]
    data = {col: _convert_column(list(vals)) for col, vals in zip(header, columns)}
    return pd.DataFrame(data, columns=header)


def read_debug_db(path_or_bytes: str | os.PathLike[str] | bytes) -> VelaDebugDB:
    """Read a Vela debug database from a file path or from its bytes.

    Returns:
        a :class:`VelaDebugDB`: the root's ``source`` and ``optimised`` attributes, every table as
        a DataFrame (columns and order as in the file; int64 columns where every cell is an
        integer, str otherwise) and the core that wrote it.

    Raises:
        VelaError: unreadable file, malformed XML or CSV (message names the file and the table and
            line), a DTD, entity declaration or external entity (refused, never expanded).
    """
    if isinstance(path_or_bytes, bytes | bytearray | memoryview):
        data = bytes(path_or_bytes)
        where = "<debug database bytes>"
        path = None
    else:
        path = check_path(path_or_bytes, what="debug database", error=VelaError)
        where = path
        data = read_bytes(path, what="debug database", error=VelaError,
                          fix="pass the <stem>_debug.xml written by vela --enable-debug-db")

    target = _DebugTarget(where)
    parser = DefusedXMLParser(target=target, forbid_dtd=True, forbid_entities=True,
                              forbid_external=True)
    target.parser = parser
    # Deliver text as expat reads it, so CurrentLineNumber is where each piece starts.
    parser.parser.buffer_text = False
    try:
        parser.feed(data)
        parser.close()
    except DefusedXmlException as exc:
        raise VelaError(f"refused unsafe XML construct ({type(exc).__name__}: {exc})",
                        where=where,
                        fix="a Vela debug database has no DTD or entities; do not read this file"
                        ) from None
    except ParseError as exc:
        line, _col = getattr(exc, "position", (None, None))
        raise VelaError(f"malformed XML ({exc})", where=f"{where}:{line}" if line else where,
                        fix="the file is truncated or damaged; re-run vela --enable-debug-db"
                        ) from None
    except (LookupError, ValueError) as exc:  # an unknown encoding, a bad declaration
        raise VelaError(f"cannot decode the XML ({type(exc).__name__}: {exc})", where=where,
                        fix="Vela writes UTF-8; the file is damaged or not a debug database"
                        ) from None
    except RecursionError:
        raise VelaError("elements nest too deeply", where=where,
                        fix="the file is damaged or not a debug database") from None

    if target.root_tag != "debug":
        raise VelaError(f"the root element is <{target.root_tag}>, not <debug>", where=where,
                        fix="pass the <stem>_debug.xml written by vela --enable-debug-db")
    tables: dict[str, pd.DataFrame] = {}
    for name, tag_line, text_line, chunks in target.tables:
        if name in tables:
            raise VelaError(
                f"table '{name}' appears twice", where=f"{where}:{tag_line}",
                fix="the file is damaged or hand-edited: re-run vela --enable-debug-db",
            )
        tables[name] = _parse_table(name, "".join(chunks), where, text_line or tag_line)
    return VelaDebugDB(
        source_file=target.root_attrib.get("source"),
        optimised_file=target.root_attrib.get("optimised"),
        tables=tables,
        core=detect_core(tables),
        path=path,
    )


# ---------------------------------------------------------------------------------------------
# Writing


def _check_text(text: str, what: str) -> str:
    """Return ``text`` unchanged; VelaError when XML cannot carry one of its characters."""
    m = _XML_INVALID_RE.search(text)
    if m:
        raise VelaError(f"{what} holds character U+{ord(m.group()):04X}, which XML cannot carry",
                        fix="remove control characters from names before writing")
    return text


def _attr(text: str, quote: str, what: str) -> str:
    """Return ``text`` escaped for an XML attribute delimited by ``quote``."""
    text = _check_text(text, what)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\r", "&#13;").replace("\n", "&#10;").replace("\t", "&#9;")
    return text.replace(quote, "&quot;" if quote == '"' else "&apos;")


def _cell_values(df: pd.DataFrame, col: Any, table: str) -> list[Any]:
    """Return column ``col`` of ``df`` as Python values for ``csv.QUOTE_NONNUMERIC``.

    Integer and boolean columns give ints (written bare), float columns floats (bare), every
    other column strings (quoted; missing values as empty strings).
    """
    s = df[col]
    kind = s.dtype.kind
    if kind in "iu":
        return [int(v) for v in s.to_numpy()]
    if kind == "b":
        return [int(bool(v)) for v in s.to_numpy()]
    if kind == "f":
        return [float(v) for v in s.to_numpy()]
    out: list[str | int] = []
    for v in s.tolist():
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            out.append("")
        elif isinstance(v, bool | int | np.bool_ | np.integer):
            out.append(int(v))
        else:
            out.append(_check_text(str(v), f"a cell of table '{table}' column '{col}'"))
    return out


def _cdata_row(body: str) -> str:
    """Return one CSV row (without its line end) made safe for a CDATA section.

    ``]]>`` is split over two sections and a carriage return inside a cell is written as a
    character reference between sections, so both read back unchanged.
    """
    body = body.replace("]]>", "]]]]><![CDATA[>")
    return body.replace("\r", "]]>&#13;<![CDATA[")


def _table_xml(name: str, df: pd.DataFrame) -> str:
    """Return one ``<table>`` element as Vela's legacy core writes it (two-space indent)."""
    if not isinstance(df, pd.DataFrame):
        raise VelaError(
            f"table '{name}' is a {type(df).__name__}, not a pandas DataFrame",
            fix="pass each table as a pandas DataFrame (e.g. pd.DataFrame(rows))",
        )
    header = [str(c) for c in df.columns]
    if len(set(header)) != len(header) or any(not c for c in header):
        raise VelaError(
            f"table '{name}' has empty or repeated column names: {header}",
            fix="give every column a distinct, non-empty name (df.columns)",
        )
    for c in header:
        _check_text(c, f"a column name of table '{name}'")
    columns = [_cell_values(df, c, name) for c in df.columns]
    rows = [header, *(list(r) for r in zip(*columns))] if columns else [header]
    lines = []
    for row in rows:
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\r\n").writerow(row)
        text = buf.getvalue()
        lines.append(_cdata_row(text[:-2]) + "\r\n")
    quoted_name = _attr(name, "'", "a table name")
    return f"  <table name='{quoted_name}'><![CDATA[{''.join(lines)}]]></table>\n"


def write_debug_db(
    path: str | os.PathLike[str],
    tables: Mapping[str, pd.DataFrame],
    source: str,
    optimised: str,
) -> None:
    """Write ``tables`` as a debug database in the legacy core's format, atomically.

    The bytes are those Vela's legacy core writes for the same tables: an XML declaration, a
    ``<debug source=... optimised=...>`` root, one ``<table name='...'>`` line per table in the
    order of ``tables`` with its CSV (``csv.QUOTE_NONNUMERIC``, ``\\r\\n`` row ends) in a CDATA
    section. Tables beyond Vela's four (for example an ``origins`` table) are written the same way.
    Unlike Vela, special characters in the attributes are escaped and ``]]>`` or a carriage
    return inside a cell survive, so :func:`read_debug_db` reads back what was written.

    Integer columns are written bare, other columns as quoted strings (floats bare). The file is
    written to a temporary file beside ``path`` and moved over it, so readers never see half a
    file.

    Raises:
        VelaError: a table that is not a DataFrame, bad column names, or characters XML cannot
            carry; also when the file cannot be written.
    """
    out = [
        "<?xml version='1.0' encoding='UTF-8'?>\n",
        f'<debug source="{_attr(source, chr(34), "source")}" '
        f'optimised="{_attr(optimised, chr(34), "optimised")}">\n',
    ]
    for name, df in tables.items():
        if not isinstance(name, str) or not name:
            raise VelaError(
                f"table name {name!r} is not a non-empty string",
                fix="key the tables by non-empty str names",
            )
        out.append(_table_xml(name, df))
    out.append("</debug>\n")
    payload = "".join(out).encode("utf-8")

    atomic_write(Path(os.fspath(path)), payload)
