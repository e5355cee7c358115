"""The native backend: generate a C++ artifact from a model (the soft backend of nnc).

``codegen(model_or_compiled, out_dir)`` analyses the model (inference sequence, tensor
lifetimes, one arena for the temporaries), serialises its constants into a parameters file
(header with magic, version, model hash and size; arrays 64-byte aligned), and writes a header
with a model class (constructor taking the parameters file, ``set_<input>``, ``get_<output>``,
``doInference``), the code, a manifest, a stand-alone ``main.cpp`` and a ``CMakeLists.txt``,
together with the op library (``cpp/`` in this package). :meth:`Artifact.build` compiles a
shared library with the system compiler; :func:`toolkit.runtime.native.run_native` runs it.

Each step of the code is bracketed by the artifact's tracer (begin/end by the step's integer
key: the op index of a plain model, the command id of a compiled one), off unless enabled at
run time, and compiled out with ``-DTK_TRACE_DISABLE``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.generator.analysis import analyse
from toolkit.generator.build import BuildError, build_library
from toolkit.generator.generate import MANIFEST_FORMAT, write_artifact
from toolkit.generator.prepare import prepare_weights
from toolkit.ir import Model

__all__ = ["Artifact", "BuildError", "codegen", "is_artifact_dir", "load_artifact"]


@dataclass(repr=False)
class Artifact:
    """A generated C++ artifact in ``out_dir``; ``manifest`` is its ``<name>.json``;
    ``model`` is the Model or CompiledModel it was generated from (None for an artifact
    loaded from its folder), which ``tk.trace_join(trace, artifact)`` joins against.
    ``opened`` keeps the runtime's loaded model of the artifact per thread (by thread
    ident), which ``tk.run`` reuses; :meth:`build` empties it."""

    out_dir: Path
    name: str
    manifest: dict[str, Any]
    model: Any = field(default=None, compare=False)
    opened: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)

    def __repr__(self) -> str:
        return (f"Artifact({self.name!r} in {str(self.out_dir)!r}: "
                f"{len(self.manifest['steps'])} steps keyed by {self.manifest['key_name']}, "
                f"arena {self.arena_bytes} bytes of {self.temporaries_bytes}, "
                f"{'built' if self.built else 'not built'})")

    @property
    def cname(self) -> str:
        """The C++ class name (and prefix of the C ABI functions)."""
        return str(self.manifest["cname"])

    @property
    def header(self) -> Path:
        """Path of ``<name>.h``."""
        return self.out_dir / f"{self.name}.h"

    @property
    def source(self) -> Path:
        """Path of ``<name>.cpp``."""
        return self.out_dir / f"{self.name}.cpp"

    @property
    def params(self) -> Path:
        """Path of the parameters file."""
        return self.out_dir / str(self.manifest["params"])

    @property
    def library(self) -> Path:
        """Path of the shared library :meth:`build` makes (``lib<name>.so``)."""
        return self.out_dir / f"lib{self.name}.so"

    @property
    def built(self) -> bool:
        """True when the library exists and is newer than the code."""
        return self.library.exists() and \
            self.library.stat().st_mtime_ns >= self.source.stat().st_mtime_ns

    @property
    def debug(self) -> bool:
        """True for a debug build (every step's outputs copied out, see :func:`codegen`)."""
        return "debug_tensors" in self.manifest

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena holding every temporary tensor."""
        return int(self.manifest["arena_bytes"])

    @property
    def temporaries_bytes(self) -> int:
        """Sum of the sizes of the temporary tensors (what they would take unshared)."""
        return int(self.manifest["temporaries_bytes"])

    @property
    def input_names(self) -> list[str]:
        """Model input names, in order."""
        return [i["name"] for i in self.manifest["inputs"]]

    @property
    def output_names(self) -> list[str]:
        """Model output names, in order."""
        return [o["name"] for o in self.manifest["outputs"]]

    def build(self, *, opt: str = "-O3", native: bool = True, cache: bool = True) -> Path:
        """Compile the shared library with the system C++ compiler; returns its path.

        ``opt`` is the optimisation flag (default ``-O3``), ``native`` adds
        ``-march=native`` (turn it off for a library that must run on other machines).
        ``cache`` reuses the library linked earlier from the same code and flags (see
        :func:`toolkit.generator.build.build_library`). Raises
        :class:`BuildError` (a ToolkitError) naming what to install when no compiler is
        found, or with the compiler's message when it fails (no library is left then)."""
        self.opened.clear()
        return build_library(self.out_dir, self.name, self.library.name, opt=opt,
                             native=native, cache=cache)

    def compiler_command(self) -> str:
        """The plain compiler command building the stand-alone runner in ``out_dir``."""
        return (f"c++ -std=c++17 -O2 -pthread -o {self.name}_main main.cpp {self.name}.cpp "
                "tk_ops.cpp tk_ops_f32_avx2.cpp tk_ops_f32_conv_avx2.cpp tk_ops_f32_dw_avx2.cpp "
                "tk_ops_f32_gemm.cpp tk_ops_int8_avx2.cpp "
                "tk_runtime.cpp")


def _model_name(obj: Any) -> str:
    path = getattr(obj, "path", None) or getattr(getattr(obj, "model", None), "path", None)
    if path:
        return Path(str(path)).stem
    return "model"


def codegen(model_or_compiled: Any, out_dir: str | os.PathLike[str],
            name: str | None = None, *, debug: bool = False, threads: int = 1) -> Artifact:
    """Generate the C++ artifact of a model into ``out_dir`` and return it.

    ``model_or_compiled`` is a Model, a CompiledModel (run command by command, stripes
    included) or a path to a .tflite/.circle file. A Model's constant weight DENSIFY and
    float16 DEQUANTIZE ops are computed at generation time (:mod:`.prepare`); the artifact's
    ``model`` is then that prepared copy, which its traces join against. ``name`` (default:
    the model file's stem, else ``model``) names the files; the class name is its C++
    identifier. ``debug`` makes a debug build that copies every step's output tensors into
    buffers the caller sets (``<cname>_debug_buffers``; the manifest's ``debug_tensors`` lists
    them), as ``tk.capture(..., runtime="native")`` uses. ``threads`` is the number of threads
    a model of the artifact starts with (the rows of its large windowed ops split across them;
    ``set_threads`` of the C++ class and ``threads=`` of ``tk.run`` change it; results do not
    depend on it).

    Raises:
        UnsupportedOpError: an op the generator has no kernel for (named, with the list).
        ToolkitError: an unreadable model or an unusable name.
    """
    obj = model_or_compiled
    if isinstance(obj, (str, Path)):
        from toolkit.formats.flatbuffer_read import load

        obj = load(Path(obj))
        if name is None:
            name = Path(model_or_compiled).stem
    name = name or _model_name(obj)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ToolkitError(f"artifact name {name!r} cannot name files",
                           fix="use letters, digits, '_', '-' and '.'")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256:
        raise ToolkitError(f"threads must be an int from 1 to 256, got {threads!r}",
                           where="codegen", fix="pass threads=1 (one core) or the cores to use")
    if isinstance(obj, Model):
        obj = prepare_weights(obj)
    analysis = analyse(obj, fuse=not debug)
    out = Path(out_dir)
    manifest = write_artifact(analysis, out, name, threads, debug=debug)
    return Artifact(out, name, manifest, model=obj)


def load_artifact(out_dir: str | os.PathLike[str], name: str | None = None) -> Artifact:
    """The artifact generated in ``out_dir`` (its only manifest, or ``<name>.json``)."""
    d = Path(out_dir)
    if name is not None:
        candidates = [d / f"{name}.json"]
    else:
        candidates = sorted(d.glob("*.json"))
    found = []
    for p in candidates:
        try:
            m = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and m.get("format") == MANIFEST_FORMAT:
            found.append(m)
    if len(found) != 1:
        raise ToolkitError(f"{'no' if not found else len(found)} artifact manifests found",
                           where=str(d), fix="pass the directory given to codegen (and name=)")
    return Artifact(d, str(found[0]["name"]), found[0])


def is_artifact_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory holding one artifact manifest."""
    try:
        load_artifact(path)
    except ToolkitError:
        return False
    return True
