"""Opening input files safely: one place that turns every way a path can be wrong into a
:class:`~toolkit.errors.ToolkitError` naming the path and the fix.

Every reader of the package opens its input through :func:`open_regular` (or
:func:`read_bytes`). The file is opened without blocking (``O_NONBLOCK``), then checked to be
a regular file, so a FIFO, a device or a folder given where a file is expected is refused at
once instead of blocking forever or reading without end. ``OSError`` (permission denied, a
name over the system's limit, a symbolic-link loop, a missing file) and a NUL in the path
become errors of the class the caller names (``ModelFormatError``, ``PartitionError`` ...).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO

from toolkit.errors import ToolkitError

__all__ = ["check_path", "check_folder", "os_error", "open_regular", "read_bytes", "read_text",
           "parse_json"]

_BY_ERRNO: dict[int, tuple[str, str]] = {
    errno.ENOENT: ("not found (it does not exist)", "check the path"),
    errno.EACCES: ("permission denied", "make the file readable (chmod) or run as its owner"),
    errno.EPERM: ("operation not permitted", "make the file readable or run as its owner"),
    errno.ENAMETOOLONG: ("a name in the path is longer than the system allows (255 bytes "
                         "per name)", "shorten the file or folder name"),
    errno.ELOOP: ("the path has a symbolic link loop (or too many links)",
                  "point the links at a real file"),
    errno.ENOTDIR: ("a part of the path is not a folder", "check the folders of the path"),
    errno.EISDIR: ("is a folder", "pass a file, not a folder"),
    errno.ENXIO: ("no such device or address", "pass a regular file"),
}


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_path(path: object, *, what: str = "file",
               error: type[ToolkitError] = ToolkitError) -> str:
    """Return ``path`` as a ``str`` (``str``, ``bytes`` or ``os.PathLike``).

    Raises ``error`` for another type or a path holding a NUL character.
    """
    try:
        s = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raise error(f"the {what} path must be a str or os.PathLike, got "
                    f"{type(path).__name__}", fix="pass the path of the file") from None
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if "\0" in s:
        raise error(f"the {what} path holds a NUL character", where=repr(s),
                    fix="remove the NUL from the path")
    return s


def os_error(path: str | os.PathLike[str], exc: OSError, *, what: str = "file",
             fix: str | None = None, error: type[ToolkitError] = ToolkitError) -> ToolkitError:
    """Return the ``error`` that stands for ``exc`` raised on ``path``: what happened (in words,
    by errno), the path, and a fix (``fix`` when the errno has none of its own)."""
    known = _BY_ERRNO.get(exc.errno or -1)
    if exc.errno == errno.ENOENT:
        from toolkit.util.suggest import path_suggestion

        near = path_suggestion(path)
        how = f"did you mean {near}?" if near else "check the path"
        return error(f"cannot read the {what}: not found (it does not exist)",
                     where=os.fspath(path), fix=f"{how} ({fix})" if fix else how)
    if known is not None:
        text, how = known
        return error(f"cannot read the {what}: {text}", where=os.fspath(path),
                     fix=how if exc.errno != errno.ENOENT or fix is None else fix)
    return error(f"cannot read the {what} ({exc.strerror or exc})", where=os.fspath(path),
                 fix=fix or "check the path and its permissions")


def open_regular(path: str | os.PathLike[str], *, what: str = "file",
                 fix: str | None = None, error: type[ToolkitError] = ToolkitError,
                 max_bytes: int | None = None) -> IO[bytes]:
    """Open ``path`` for binary reading, refusing anything but a regular file.

    The open never blocks (a FIFO is refused, not waited on). ``what`` names the file in
    messages ("model file", "connection file" ...); ``fix`` is the advice for a missing
    file. ``max_bytes`` refuses larger files.

    Returns an open binary file (the caller closes it).

    Raises:
        ``error`` (a :class:`ToolkitError` subclass): a bad path type, a NUL in the path, any
        ``OSError`` (missing, permission denied, name too long, link loop ...), a folder,
        FIFO, socket or device, a file over ``max_bytes``.
    """
    s = check_path(path, what=what, error=error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(s, flags)
    except OSError as e:
        raise os_error(s, e, what=what, fix=fix, error=error) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"is {_kind(st.st_mode)}, not a {what}", where=s,
                        fix=fix or f"pass a regular {what}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise error(f"{st.st_size:,} bytes is too large for a {what} (at most "
                        f"{max_bytes:,})", where=s, fix=fix or f"pass a {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], *, what: str = "file", fix: str | None = None,
               error: type[ToolkitError] = ToolkitError, max_bytes: int | None = None) -> bytes:
    """Return the bytes of the regular file ``path`` (see :func:`open_regular` for the checks
    and the errors)."""
    with open_regular(path, what=what, fix=fix, error=error, max_bytes=max_bytes) as f:
        try:
            return f.read()
        except OSError as e:
            raise os_error(path, e, what=what, fix=fix, error=error) from None


def read_text(path: str | os.PathLike[str], *, what: str = "file", fix: str | None = None,
              error: type[ToolkitError] = ToolkitError, max_bytes: int | None = None) -> str:
    """Return the UTF-8 text of ``path`` (a leading BOM dropped); ``error`` when it is not
    UTF-8, naming the byte (see :func:`open_regular` for the other checks)."""
    raw = read_bytes(path, what=what, fix=fix, error=error, max_bytes=max_bytes)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"the {what} is not UTF-8 text ({e.reason} at byte {e.start})",
                    where=os.fspath(path), fix=fix or f"pass a {what} in UTF-8") from None


def parse_json(data: bytes | str, *, where: str, what: str = "file",
               error: type[ToolkitError] = ToolkitError, fix: str | None = None) -> object:
    """Return the value of JSON ``data`` (a leading BOM allowed).

    Raises ``error`` naming ``where`` (and the line) for text that is not UTF-8 or not JSON,
    nesting deeper than the interpreter can follow, and integers longer than Python converts
    (4,300 digits).
    """
    import json

    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise error(f"the {what} is not UTF-8 text ({e.reason} at byte {e.start})",
                        where=where, fix=fix) from None
    elif data.startswith("\ufeff"):
        data = data[1:]
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise error(f"the {what} is not JSON ({e.msg})", where=f"{where}:{e.lineno}",
                    fix=fix) from None
    except RecursionError:
        raise error(f"the {what} nests arrays or objects too deeply", where=where,
                    fix=fix) from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise error(f"the {what} holds a value JSON readers cannot convert ({e})",
                    where=where, fix=fix) from None


def check_folder(path: object, *, what: str = "folder", fix: str | None = None,
                 error: type[ToolkitError] = ToolkitError) -> str:
    """Return ``path`` as a ``str`` after checking it names an existing folder.

    Raises ``error`` for a bad path type, a NUL, an ``OSError`` (missing, a name too long, a
    link loop ...) and anything that is not a folder.
    """
    s = check_path(path, what=what, error=error)
    try:
        mode = os.stat(s).st_mode
    except OSError as e:
        raise os_error(s, e, what=what, fix=fix, error=error) from None
    if not stat.S_ISDIR(mode):
        raise error(f"is {_kind(mode) if not stat.S_ISREG(mode) else 'a file'}, not a {what}",
                    where=s, fix=fix or f"pass a {what}")
    return s
