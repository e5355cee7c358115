"""ExecuTorch-style debug handle maps: delegate debug identifier → tuple of origin ids.

A runtime logs events under a *delegate debug identifier* (an int or a str); the map says which
source ops (origin ids) each identifier stands for. Built with :class:`DelegateMappingBuilder`
(ExecuTorch's API: generated or manual identifiers, never both in one builder) and stored as
JSON (``<stem>.debug_handles.json``)::

    {
      "version": 1,
      "identifier_type": "int",          # or "str": how to read the keys back
      "handles": {"1": [0, 3], "2": [1]},  # identifier -> sorted origin ids
      "optimised_ids": {"1": 0, "2": 1}   # optional: identifier -> compiled op index
    }

JSON object keys are strings, so ``identifier_type`` records whether they are ints; all
identifiers of one map have one type. An ``int`` key is written in canonical decimal form and
read back as ``int``; a ``str`` key is kept as is. Reading rejects anything else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.ir import Op
from toolkit.util.atomic import atomic_write
from toolkit.util.files import check_path, parse_json, read_bytes

__all__ = [
    "FORMAT_VERSION", "DelegateMappingBuilder", "DebugHandleMap", "encode_debug_handles",
    "decode_debug_handles", "write_debug_handles", "read_debug_handles",
]

FORMAT_VERSION = 1
_MAX_BYTES = 1 << 30  # a map of a few million handles; anything larger is not one
Identifier = int | str


# The fix for a stored map whose JSON has the wrong structure
_RECOMPILE = ("the debug handle map is damaged or hand-edited: compile the model again "
              "(`toolkit compile` writes <stem>.debug_handles.json)")


def _origin_ids(ops_or_origin_ids: Any) -> frozenset[int]:
    if isinstance(ops_or_origin_ids, Op):
        return ops_or_origin_ids.origins
    if isinstance(ops_or_origin_ids, int) and not isinstance(ops_or_origin_ids, bool):
        return frozenset((ops_or_origin_ids,))
    if isinstance(ops_or_origin_ids, Iterable) and not isinstance(ops_or_origin_ids,
                                                                  (str, bytes)):
        ids: set[int] = set()
        for x in ops_or_origin_ids:
            if isinstance(x, Op):
                ids |= x.origins
            elif isinstance(x, int) and not isinstance(x, bool):
                ids.add(int(x))
            else:
                raise ToolkitError(f"cannot map {type(x).__name__} {x!r} to origin ids",
                                   fix="pass ops or int origin ids")
        return frozenset(ids)
    raise ToolkitError(f"cannot map {type(ops_or_origin_ids).__name__} to origin ids",
                       fix="pass an Op, a list of Ops, an int origin id or a list of them")


def _identifier_type(ident: Any) -> str:
    if isinstance(ident, bool) or not isinstance(ident, (int, str)):
        raise ToolkitError(f"a delegate debug identifier must be an int or a str, got "
                           f"{type(ident).__name__} {ident!r}",
                           fix=("use ints (generated or manual) or strs as delegate debug "
                                "identifiers"))
    return "int" if isinstance(ident, int) else "str"


class DelegateMappingBuilder:
    """Build a debug handle map, as ExecuTorch's ``DelegateMappingBuilder`` does.

    Args:
        generated_identifiers: True to let the builder number identifiers 1, 2, 3, ...;
            False (default) to pass an int or str ``identifier`` with every entry.
    """

    def __init__(self, generated_identifiers: bool = False) -> None:
        self._generated = generated_identifiers
        self._map: dict[Identifier, frozenset[int]] = {}
        self._type: str | None = "int" if generated_identifiers else None

    def insert_delegate_mapping_entry(self, ops_or_origin_ids: Any,
                                      identifier: Identifier | None = None) -> Identifier:
        """Map an identifier to the origins of ``ops_or_origin_ids`` (an Op, Ops, an origin
        id or ids); return the identifier (the generated one with generated identifiers).

        Raises ToolkitError on an identifier given to a generating builder, a missing one
        for a manual builder, a repeated identifier, mixed int/str identifiers, or no origin.
        """
        if self._generated and identifier is not None:
            raise ToolkitError("this builder generates identifiers; do not pass one",
                               fix="use DelegateMappingBuilder() for manual identifiers")
        if not self._generated and identifier is None:
            raise ToolkitError("this builder takes manual identifiers; pass identifier=",
                               fix="use DelegateMappingBuilder(generated_identifiers=True)")
        ids = _origin_ids(ops_or_origin_ids)
        if not ids:
            raise ToolkitError(
                "a debug handle needs at least one origin id",
                fix="pass an Op with origins, a list of Ops, or origin ids (ints >= 0)",
            )
        if identifier is None:
            identifier = len(self._map) + 1
        kind = _identifier_type(identifier)
        if self._type is not None and kind != self._type:
            raise ToolkitError(f"identifier {identifier!r} is a {kind}, earlier ones are "
                               f"{self._type}s", fix="use one identifier type per map")
        if identifier in self._map:
            raise ToolkitError(
                f"identifier {identifier!r} was already inserted",
                fix=(
                    "give each identifier once: use a new identifier for this entry, or merge the "
                    "origin ids into the existing one"
                ),
            )
        self._type = kind
        self._map[identifier] = ids
        return identifier

    def get_delegate_mapping(self) -> dict[Identifier, tuple[int, ...]]:
        """Return ``{identifier: tuple of sorted origin ids}``, in insertion order."""
        return {k: tuple(sorted(v)) for k, v in self._map.items()}


@dataclass
class DebugHandleMap:
    """A decoded debug handle map: ``handles`` (identifier → origin ids) and, when stored,
    ``optimised_ids`` (identifier → compiled op index)."""

    handles: dict[Identifier, tuple[int, ...]]
    optimised_ids: dict[Identifier, int] | None = field(default=None)

    @property
    def identifier_type(self) -> str:
        """``"int"`` or ``"str"`` (``"int"`` for an empty map)."""
        first = next(iter(self.handles), 0)
        return _identifier_type(first)


def encode_debug_handles(handles: Mapping[Identifier, Iterable[int]],
                         optimised_ids: Mapping[Identifier, int] | None = None) -> bytes:
    """Return the JSON bytes of a debug handle map (see the module docstring)."""
    kinds = {_identifier_type(k) for k in handles}
    if len(kinds) > 1:
        raise ToolkitError("a debug handle map mixes int and str identifiers",
                           fix="use one identifier type per map")
    kind = kinds.pop() if kinds else "int"
    body: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "identifier_type": kind,
        "handles": {str(k): sorted(int(i) for i in v) for k, v in handles.items()},
    }
    if optimised_ids is not None:
        unknown = [k for k in optimised_ids if k not in handles]
        if unknown:
            raise ToolkitError(
                f"optimised_ids names identifiers {unknown[:5]} without handles",
                fix="give optimised_ids only for identifiers that are keys of handles",
            )
        body["optimised_ids"] = {str(k): int(v) for k, v in optimised_ids.items()}
    return (json.dumps(body, separators=(",", ":")) + "\n").encode("utf-8")


def _key(text: str, kind: str, where: str) -> Identifier:
    if kind == "str":
        return text
    try:
        v = int(text)
    except ValueError:
        v = None
    if v is None or str(v) != text:
        raise ToolkitError(
            f"key {text!r} is not a canonical int identifier", where=where,
            fix=_RECOMPILE,
        )
    return v


def decode_debug_handles(data: bytes | str, where: str = "<debug handles>") -> DebugHandleMap:
    """Return the :class:`DebugHandleMap` in JSON ``data`` (ToolkitError when malformed)."""
    body: Any = parse_json(data, where=where, what="debug handle map",
                           fix="pass the .debug_handles.json written by toolkit compile")
    version = body.get("version") if isinstance(body, dict) else None
    if type(version) is not int or version != FORMAT_VERSION:
        raise ToolkitError(f"not a version-{FORMAT_VERSION} debug handle map", where=where,
                           fix="expected {'version': 1, 'identifier_type': ..., 'handles': ...}")
    kind = body.get("identifier_type")
    if kind not in ("int", "str"):
        raise ToolkitError(
            f"identifier_type is {kind!r}, expected 'int' or 'str'", where=where,
            fix=_RECOMPILE,
        )
    raw = body.get("handles")
    if not isinstance(raw, dict):
        raise ToolkitError("'handles' is not an object", where=where, fix=_RECOMPILE)
    handles: dict[Identifier, tuple[int, ...]] = {}
    for k, v in raw.items():
        if not isinstance(v, list) or not v or not all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v):
            raise ToolkitError(f"handle {k!r} does not map to a non-empty list of origin ids",
                               where=where,
                               fix=_RECOMPILE)
        handles[_key(k, kind, where)] = tuple(v)
    opt = body.get("optimised_ids")
    optimised: dict[Identifier, int] | None = None
    if opt is not None:
        if not isinstance(opt, dict):
            raise ToolkitError("'optimised_ids' is not an object", where=where, fix=_RECOMPILE)
        optimised = {}
        for k, v in opt.items():
            key = _key(k, kind, where)
            if key not in handles or not isinstance(v, int) or isinstance(v, bool):
                raise ToolkitError(
                    f"optimised_ids entry {k!r} is invalid", where=where,
                    fix=_RECOMPILE,
                )
            optimised[key] = v
    return DebugHandleMap(handles, optimised)


def write_debug_handles(path: str | os.PathLike[str],
                        handles: Mapping[Identifier, Iterable[int]],
                        optimised_ids: Mapping[Identifier, int] | None = None) -> Path:
    """Write a debug handle map as JSON to ``path`` atomically; return the path."""
    p = Path(path)
    atomic_write(p, encode_debug_handles(handles, optimised_ids))
    return p


def read_debug_handles(path_or_bytes: str | os.PathLike[str] | bytes) -> DebugHandleMap:
    """Read a debug handle map from a JSON file or its bytes."""
    if isinstance(path_or_bytes, (bytes, bytearray)):
        return decode_debug_handles(bytes(path_or_bytes))
    p = check_path(path_or_bytes, what="debug handle map")
    data = read_bytes(p, what="debug handle map", max_bytes=_MAX_BYTES,
                      fix="pass the .debug_handles.json written by toolkit compile")
    return decode_debug_handles(data, where=p)
