"""Build an artifact's shared library with the system C++ compiler.

The op library (``tk_ops.cpp``, ``tk_ops_f32_avx2.cpp``, ``tk_ops_f32_conv_avx2.cpp``,
``tk_ops_f32_dw_avx2.cpp``, ``tk_ops_f32_gemm.cpp``,
``tk_ops_int8_avx2.cpp``, ``tk_runtime.cpp``) is compiled once per compiler, flags and source
and kept as object files in a cache directory (``TOOLKIT_CODEGEN_CACHE``, else
``~/.cache/toolkit/codegen``); each artifact then compiles its own code and links. A linked
library is kept there too (``lib/<digest>.so``, keyed by compiler, flags, op library and the
artifact's code), so building identical code again is a copy. Everything is built in a
temporary directory and renamed into place, so a failed build leaves no library that looks
built.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from toolkit.errors import ToolkitError

__all__ = ["find_compiler", "build_library", "build_bundle", "compile_flags", "BuildError"]

_LIB_SOURCES = ("tk_ops.cpp", "tk_ops_f32_avx2.cpp", "tk_ops_f32_conv_avx2.cpp",
                "tk_ops_f32_dw_avx2.cpp", "tk_ops_f32_gemm.cpp", "tk_ops_int8_avx2.cpp",
                "tk_runtime.cpp")
_LIB_HEADERS = ("tk_ops.h", "tk_ops_int8.h", "tk_runtime.h")


class BuildError(ToolkitError):
    """The C++ compiler is missing or failed."""


def find_compiler() -> str:
    """The C++ compiler to use: ``$CXX``, else ``c++``, ``g++`` or ``clang++`` on the PATH.

    Raises:
        BuildError: none is found.
    """
    cxx = os.environ.get("CXX")
    if cxx:
        found = shutil.which(cxx)
        if found is None:
            raise BuildError(f"the compiler CXX={cxx!r} is not found", where="$CXX",
                             fix="set CXX to an installed C++17 compiler, or unset it")
        return found
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise BuildError("no C++ compiler found (looked for $CXX, c++, g++, clang++)",
                     where="PATH",
                     fix="install one (Debian/Ubuntu: apt-get install g++; macOS: "
                         "xcode-select --install) or set CXX")


def compile_flags(opt: str, native: bool) -> list[str]:
    """Compiler flags of a build: C++17, position-independent, ``opt`` (e.g. ``-O2``), and
    ``-march=native`` when ``native``."""
    flags = ["-std=c++17", "-fPIC", "-pthread", opt]
    if native:
        flags.append("-march=native")
    return flags


def _cache_dir() -> Path:
    env = os.environ.get("TOOLKIT_CODEGEN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "toolkit" / "codegen"


def _run(cmd: list[str], where: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BuildError(f"cannot run the compiler: {exc}", where=where,
                         fix="check the compiler installation or CXX") from None
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip()
        if len(message) > 4000:
            message = message[:4000] + "\n..."
        raise BuildError(f"the C++ compiler failed (exit {proc.returncode}):\n{message}",
                         where=where, fix="see the compiler's message above")


@functools.lru_cache(maxsize=8)
def _target_id(cxx: str, flags: tuple[str, ...]) -> str:
    """What the compiler targets with these flags: its version and the macros it predefines
    (``__AVX512F__``, ``__ARM_NEON`` ...), so that a cache shared by machines of different CPUs
    never hands one an object built with ``-march=native`` for another."""
    try:
        out = subprocess.run([cxx, *flags, "-dM", "-E", "-x", "c++", os.devnull],
                             capture_output=True, text=True, check=False, timeout=60)
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                 check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""  # the build itself reports a compiler that cannot run
    return version.stdout + "".join(sorted(out.stdout.splitlines(keepends=True)))


def _library_objects(cxx: str, flags: list[str]) -> list[Path]:
    """Object files of the op library, compiled once into the cache."""
    pkg = resources.files("toolkit.generator").joinpath("cpp")
    h = hashlib.sha256()
    h.update(" ".join([cxx, *flags, platform.machine(), platform.processor()]).encode())
    h.update(_target_id(cxx, tuple(flags)).encode())
    for name in (*_LIB_HEADERS, *_LIB_SOURCES):
        h.update(pkg.joinpath(name).read_bytes())
    key = h.hexdigest()[:20]
    cache = _cache_dir() / key
    objects = [cache / (Path(src).stem + ".o") for src in _LIB_SOURCES]
    if all(o.exists() for o in objects):
        return objects
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        t = Path(tmp)
        for name in (*_LIB_HEADERS, *_LIB_SOURCES):
            (t / name).write_bytes(pkg.joinpath(name).read_bytes())
        for src, obj in zip(_LIB_SOURCES, objects):
            tmp_obj = t / obj.name
            _run([cxx, *flags, "-c", str(t / src), "-o", str(tmp_obj)], where=f"op library {src}")
            os.replace(tmp_obj, obj)
    return objects


def _digest(cxx: str, flags: list[str], objects: list[Path], sources: list[Path]) -> str:
    """Key of a linked library: compiler, flags, the op library's objects (their cache key)
    and the bytes of every artifact's code and header."""
    h = hashlib.sha256(" ".join([cxx, *flags, *(str(o) for o in objects)]).encode())
    for src in sources:
        for f in (src, src.with_suffix(".h")):
            h.update(f.name.encode())
            h.update(f.read_bytes() if f.exists() else b"")
    return h.hexdigest()[:32]


def _from_cache(key: str, target: Path) -> bool:
    """Copy the library built earlier from the same code and flags to ``target`` (through
    a temporary file and a rename); False when there is none."""
    cached = _cache_dir() / "lib" / f"{key}.so"
    if not cached.exists():
        return False
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(cached, tmp)
    os.replace(tmp, target)
    return True


def _to_cache(key: str, built: Path) -> None:
    d = _cache_dir() / "lib"
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{key}.{os.getpid()}.tmp"
    shutil.copyfile(built, tmp)
    os.replace(tmp, d / f"{key}.so")


def build_library(out_dir: Path, name: str, library: str, *, opt: str = "-O3",
                  native: bool = True, cache: bool = True) -> Path:
    """Compile ``out_dir/<name>.cpp`` with the op library into ``out_dir/<library>``.

    With ``cache`` a library linked earlier from the same code, header, compiler and flags
    (kept by content digest in the cache directory's ``lib/``) is copied instead of compiling
    again. Returns the library's path. Raises :class:`BuildError` with the compiler's message
    when the compiler is missing or fails; the library is then absent (any earlier one is
    removed first)."""
    cxx = find_compiler()
    flags = compile_flags(opt, native)
    target = out_dir / library
    if target.exists():
        target.unlink()
    objects = _library_objects(cxx, flags)
    key = _digest(cxx, flags, objects, [out_dir / f"{name}.cpp"])
    if cache and _from_cache(key, target):
        return target
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        tmp_lib = Path(tmp) / library
        _run([cxx, *flags, "-shared", "-I", str(out_dir), str(out_dir / f"{name}.cpp"),
              *map(str, objects), "-o", str(tmp_lib)], where=str(out_dir / f"{name}.cpp"))
        if cache:
            _to_cache(key, tmp_lib)
        os.replace(tmp_lib, target)
    return target


def build_bundle(artifacts: list[tuple[Path, str, str]], bundle_dir: Path, *,
                 opt: str = "-O3", native: bool = True, cache: bool = True) -> Path:
    """Compile several artifacts into one shared library (one translation unit including
    every artifact's code: the headers are parsed once) and link it as each artifact's
    library. ``artifacts`` holds ``(out_dir, name, library file name)``; their class names
    must differ. ``cache`` as for :func:`build_library`. Returns the bundle's path in
    ``bundle_dir``."""
    cxx = find_compiler()
    flags = compile_flags(opt, native)
    objects = _library_objects(cxx, flags)
    bundle_dir.mkdir(parents=True, exist_ok=True)
    for out_dir, _, library in artifacts:
        if (out_dir / library).exists():
            (out_dir / library).unlink()
    key = _digest(cxx, flags, objects, [d / f"{n}.cpp" for d, n, _ in artifacts])
    target = bundle_dir / "libbundle.so"
    if cache and _from_cache(key, target):
        for out_dir, _, library in artifacts:
            shutil.copyfile(target, out_dir / library)
        return target
    with tempfile.TemporaryDirectory(dir=bundle_dir, prefix=".build-") as tmp:
        unity = Path(tmp) / "bundle.cpp"
        unity.write_text("".join(f'#include "{(d / n).resolve()}.cpp"\n'
                                 for d, n, _ in artifacts))
        tmp_lib = Path(tmp) / "libbundle.so"
        _run([cxx, *flags, "-shared", "-I", str(artifacts[0][0].resolve()), str(unity),
              *map(str, objects), "-o", str(tmp_lib)], where="bundle of " + ", ".join(
                  n for _, n, _ in artifacts))
        if cache:
            _to_cache(key, tmp_lib)
        os.replace(tmp_lib, target)
    for out_dir, _, library in artifacts:
        shutil.copyfile(target, out_dir / library)
    return target
