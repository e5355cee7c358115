"""Every error the toolkit raises says how to fix it.

The static check parses every module under ``toolkit/`` and lists each construction of a
:class:`~toolkit.errors.ToolkitError` class (``raise SomeError(...)``, or an error built and
returned by a helper) that has no ``fix=`` keyword. A call through a helper passes when the
helper supplies the fix (``raise self._err(...)`` whose ``fix`` has a default text); a helper
whose ``fix`` defaults to None and is handed on as ``fix=fix`` must be given one by each
caller. The error classes are those of :mod:`toolkit.errors` and the project's own subclasses
(found in the source, confirmed by importing their module and ``issubclass``).

The behavioural tests provoke real errors and check that the fix follows "Fix:" while the
*what* stays as it was.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import toolkit
import toolkit.errors
from toolkit.errors import GraphError, ModelFormatError, PartitionError, ToolkitError
from toolkit.formats.conn_file import parse_conn_json
from toolkit.formats.debug_handles import decode_debug_handles
from toolkit.formats.origin_tables import decode_op_table, decode_source_table
from toolkit.ir import Graph

ROOT = Path(toolkit.__file__).parent
SAMPLES = ROOT.parent / "sample_models"

# Modules (a path ending in "/" is a folder) whose errors may still lack a fix while work on
# them is under way; none now. Remove an entry as soon as its files are clean (the test below
# insists).
TO_BE_DONE: frozenset[str] = frozenset()


@dataclass
class _Call:
    line: int
    name: str
    has_fix: bool  # a ``fix=`` keyword, or ``**kwargs`` (which may hold it)
    positional: int  # positional arguments given


@dataclass
class _Helper:
    """A function with a ``fix`` parameter that defaults to None and builds an error with
    ``fix=fix``: a call of it without a fix builds an error without one."""

    fix_index: int  # position of ``fix`` among the positional parameters (self left out)
    builds: set[str]  # names of the classes it builds with ``fix=fix``


@dataclass
class _Module:
    """What the check needs of one module: its classes with their base names, the error
    classes it imports under another name, its calls and its fix-forwarding functions."""

    classes: list[tuple[str, list[str]]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    calls: list[_Call] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    helpers: dict[str, _Helper] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # name: (module, name)


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _helper(fn: ast.FunctionDef) -> _Helper | None:
    """The :class:`_Helper` view of ``fn`` when its ``fix`` parameter defaults to None."""
    args = fn.args
    params = [*args.posonlyargs, *args.args]
    names = [a.arg for a in params]
    if "fix" in names:
        defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
        default = defaults.get("fix")
        index = names.index("fix") - (1 if names[0] in ("self", "cls") else 0)
    elif "fix" in (kw := [a.arg for a in args.kwonlyargs]):
        default = args.kw_defaults[kw.index("fix")]
        index = 1 << 30  # keyword-only: never given by position
    else:
        return None
    if not (isinstance(default, ast.Constant) and default.value is None):
        return None
    builds = {name for node in ast.walk(fn) if isinstance(node, ast.Call)
              and (name := _base_name(node.func))
              and any(k.arg == "fix" and isinstance(k.value, ast.Name) and k.value.id == "fix"
                      for k in node.keywords)}
    return _Helper(index, builds) if builds else None


def scan(tree: ast.Module) -> _Module:
    """Return the classes, import aliases, calls and fix-forwarding functions of a parsed
    module (one walk)."""
    m = _Module()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            m.classes.append((node.name, [b for b in map(_base_name, node.bases) if b]))
        elif isinstance(node, ast.ImportFrom):
            m.aliases.update({a.asname: a.name for a in node.names if a.asname})
            m.imports.update({a.asname or a.name: (node.module or "", a.name)
                              for a in node.names})
        elif isinstance(node, ast.FunctionDef):
            m.functions.add(node.name)
            if h := _helper(node):
                m.helpers[node.name] = h
        elif isinstance(node, ast.Call) and (name := _base_name(node.func)):
            has_fix = any(k.arg == "fix" or k.arg is None for k in node.keywords)
            m.calls.append(_Call(node.lineno, name, has_fix, len(node.args)))
    return m


def _modules() -> dict[str, _Module]:
    """``{path relative to the repository: scanned module}`` for every module of toolkit."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.name.startswith("caffe_pb2"):
            continue  # generated by protoc
        rel = path.relative_to(ROOT.parent).as_posix()
        out[rel] = scan(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
    return out


def _module_name(rel: str) -> str:
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def error_classes(modules: dict[str, _Module]) -> set[str]:
    """Names of the ToolkitError classes: those of toolkit.errors plus every class of the
    project that derives from one of them (checked with ``issubclass`` on the imported class)."""
    names = {n for n, c in vars(toolkit.errors).items()
             if inspect.isclass(c) and issubclass(c, ToolkitError)}
    found = True
    while found:
        found = False
        for rel, m in modules.items():
            for name, bases in m.classes:
                if name not in names and any(b in names for b in bases):
                    cls = getattr(importlib.import_module(_module_name(rel)), name)
                    assert issubclass(cls, ToolkitError), f"{rel}: {name}"
                    names.add(name)
                    found = True
    return names


def missing_fixes(modules: dict[str, _Module], classes: set[str]) -> list[str]:
    """``path:line: Name(...) has no fix=`` for each construction of an error class (also
    under an ``import ... as`` name) without a ``fix=`` keyword, and for each call without a
    fix of a helper whose ``fix`` defaults to None and is passed on to an error class; in
    file and line order."""
    by_name = {_module_name(rel): m for rel, m in modules.items()}

    def helper(m: _Module, name: str) -> _Helper | None:
        # a function of the module itself, else one imported from a toolkit module
        if name in m.functions:
            h = m.helpers.get(name)
        elif name in m.imports and (src := by_name.get(m.imports[name][0])):
            h = src.helpers.get(m.imports[name][1])
        else:
            h = None
        return h if h is not None and h.builds & classes else None

    out = []
    for rel, m in sorted(modules.items()):
        for c in sorted(m.calls, key=lambda c: c.line):
            name = m.aliases.get(c.name, c.name)
            if c.has_fix:
                continue
            if name in classes:
                out.append(f"{rel}:{c.line}: {name}(...) has no fix=")
            elif (h := helper(m, c.name)) and c.positional <= h.fix_index:
                out.append(f"{rel}:{c.line}: {c.name}(...) has no fix=, nor has its helper")
    return out


@pytest.fixture(scope="module")
def modules() -> dict[str, _Module]:
    return _modules()


@pytest.fixture(scope="module")
def classes(modules: dict[str, _Module]) -> set[str]:
    return error_classes(modules)


@pytest.fixture(scope="module")
def missing(modules: dict[str, _Module], classes: set[str]) -> list[str]:
    return missing_fixes(modules, classes)


def test_the_project_error_classes_are_found(classes: set[str]) -> None:
    # toolkit.errors' own, and subclasses defined beside the formats that raise them
    assert {"ToolkitError", "ModelFormatError", "UsageError", "LimitError"} <= classes
    assert {"ETRecordError", "ProgramError"} <= classes


def _to_be_done(path: str, entry: str) -> bool:
    return path.startswith(entry) if entry.endswith("/") else path == entry


def test_every_error_says_how_to_fix_it(missing: list[str]) -> None:
    bad = [m for m in missing
           if not any(_to_be_done(m.split(":", 1)[0], e) for e in TO_BE_DONE)]
    assert not bad, "errors without fix=:\n" + "\n".join(bad)


def test_the_allowlist_holds_only_files_still_to_do(modules: dict[str, _Module],
                                                    missing: list[str]) -> None:
    left = {m.split(":", 1)[0] for m in missing}
    stale = sorted(e for e in TO_BE_DONE if not any(_to_be_done(p, e) for p in left))
    unknown = sorted(e for e in TO_BE_DONE if not any(_to_be_done(p, e) for p in modules))
    assert not unknown, f"no such module: {unknown}"
    assert not stale, f"clean now, drop from TO_BE_DONE: {stale}"


def test_the_check_flags_a_raise_without_fix(classes: set[str]) -> None:
    src = '''
from toolkit.errors import TraceError as TE
import toolkit.errors as errors

def f(x):
    if x == 1:
        raise ModelFormatError("bad", where="here")
    if x == 2:
        raise TE("bad")
    if x == 3:
        raise errors.GraphError("bad", where="g")
    if x == 4:
        raise ModelFormatError("bad", fix="do this")
    if x == 5:
        raise self._err("a helper that supplies the fix")
    if x == 6:
        raise ValueError("not a toolkit error")
    if x == 7:
        raise ToolkitError("bad", **context)
    if x == 8:
        raise _bad("no fix from the caller, none from the helper")
    if x == 9:
        raise _bad("a fix by position", "do this")
    if x == 10:
        raise _bad("a fix by keyword", fix="do this")
    return ModelFormatError("built by a helper")

def _bad(what, fix=None):
    return ModelFormatError(what, where="here", fix=fix)
'''
    got = missing_fixes({"toolkit/x.py": scan(ast.parse(src))}, classes)
    assert got == ["toolkit/x.py:7: ModelFormatError(...) has no fix=",
                   "toolkit/x.py:9: TraceError(...) has no fix=",
                   "toolkit/x.py:11: GraphError(...) has no fix=",
                   "toolkit/x.py:21: _bad(...) has no fix=, nor has its helper",
                   "toolkit/x.py:26: ModelFormatError(...) has no fix="]


# ------------------------------------------------------------------ real errors, real fixes
def test_a_damaged_origin_table_says_to_compile_again() -> None:
    data = struct.pack("<III", 1, 7, 50) + b"conv\0"  # claims 50 name bytes, holds 5
    with pytest.raises(ModelFormatError) as e:
        decode_source_table(data, where="m.circle: ONE_source_table")
    assert e.value.what == "entry 0 (id 7) claims 50 name bytes but 5 remain"
    assert e.value.where == "m.circle: ONE_source_table"
    assert str(e.value).startswith("m.circle: ONE_source_table: entry 0 (id 7) claims 50 name "
                                   "bytes but 5 remain. Fix: ")
    assert "toolkit compile" in (e.value.fix or "")
    with pytest.raises(ModelFormatError, match=r"duplicate op id 3\. Fix: .*ONE_op_table"):
        decode_op_table(struct.pack("<I" + "III" * 2, 2, 3, 1, 0, 3, 1, 0))


def test_a_graph_misuse_names_the_method_to_call() -> None:
    g = Graph("g")
    x = g.add_tensor("x", (1, 4))
    y = g.add_tensor("y", (1, 4))
    g.inputs, g.outputs = [x], [y]
    with g.origin_from([0]):
        g.add_op("RELU", [x], [y])
    with pytest.raises(GraphError) as e:
        g.remove_tensor(x)
    assert e.value.what == "tensor 'x' is still in use"
    assert e.value.where == "graph 'g'"
    assert "replace_all_uses_with" in (e.value.fix or "")
    with (pytest.raises(GraphError, match=r"already has a producer.*Fix: give this op a new"),
          g.origin_from([1])):
        g.add_op("RELU", [x], [y])


def test_a_bad_connection_file_says_to_partition_again() -> None:
    text = json.dumps({"source": {"file": "m.circle", "inputs": [], "outputs": []},
                       "parts": {"file": "p.circle"}})
    with pytest.raises(PartitionError) as e:
        parse_conn_json(text, where="m.conn.json")
    assert e.value.what == '"parts" is not a list'
    assert "toolkit partition" in (e.value.fix or "")


def test_a_bad_debug_handle_map_says_to_compile_again() -> None:
    body = {"version": 1, "identifier_type": "float", "handles": {}}
    with pytest.raises(ToolkitError) as e:
        decode_debug_handles(json.dumps(body), where="m.debug_handles.json")
    assert e.value.what == "identifier_type is 'float', expected 'int' or 'str'"
    assert e.value.where == "m.debug_handles.json"
    assert "toolkit compile" in (e.value.fix or "")


def test_a_tampered_attribution_says_it_was_modified_or_is_a_bug() -> None:
    compiled = toolkit.compile(SAMPLES / "cnn.tflite")
    att = toolkit.trace_join(toolkit.run(compiled, trace=True).trace, compiled)
    att.check()
    att.total_ns += 1
    with pytest.raises(ToolkitError) as e:
        att.check()
    assert "!= total" in e.value.what
    assert (e.value.fix or "").startswith("the attribution was modified after the join, or "
                                          "this is a bug")


def test_a_caffe_layer_with_a_bad_parameter_says_which_values_work() -> None:
    from toolkit.formats.caffe.writer import NetBuilder
    from toolkit.importers.caffe import import_net

    nb = NetBuilder("one")
    nb.input("data", [1, 3, 4, 4])
    nb.layer("norm", "LRN", ["data"], ["out"], lrn_param={"local_size": 4})
    with pytest.raises(ToolkitError) as e:
        import_net(nb.net())
    assert e.value.what == "local_size 4 must be odd and positive"
    assert "'norm' (LRN)" in (e.value.where or "")
    assert e.value.fix == "set local_size to an odd positive number (the default is 5)"
