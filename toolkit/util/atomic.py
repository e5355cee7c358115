"""Atomic file writes: a file (or a set of files) appears whole at its final name, or not at all.

Every writer of the package goes through these helpers. A file is written to a temporary name
in the target folder, flushed to disk, then renamed over its final name (``os.replace``), so a
reader or a crash never sees a half-written file; the temporary file is removed on every error
path. Permissions are those a plain ``open()`` would give (or the replaced file's).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

from toolkit.errors import ToolkitError

__all__ = ["atomic_write", "atomic_open", "write_file_set", "finish_interrupted_set",
           "folder_lock", "remove_stale_temps"]

LOCK_NAME = ".toolkit.lock"
JOURNAL_NAME = ".toolkit.journal"
"""A set's rename plan, present only while its files are being renamed into place."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def _write_error(path: Path, exc: OSError) -> ToolkitError:
    return ToolkitError(f"cannot write the file ({exc.strerror or exc})", where=str(path),
                        fix="check that the folder exists, is writable and has space")


def _quiet_unlink(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _temp_beside(path: Path, suffix: str = ".tmp") -> tuple[int, str]:
    """A temporary file beside ``path``: ``.<name>.<pid>.<random><suffix>`` (the pid lets a
    later write tell the temporary files of killed writers, see :func:`_remove_dead_temps`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=suffix,
                            dir=path.parent)


def _remove_dead_temps(path: Path) -> None:
    """Remove temporary files of ``path`` left by writers that were killed (their process is
    gone); those of live writers, and names without a pid, are left alone."""
    prefix = f".{path.name}."
    try:
        stale = [e for e in os.scandir(path.parent)
                 if e.name.startswith(prefix) and e.name.endswith(".tmp")]
    except OSError:
        return
    for entry in stale:
        pid = entry.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            _quiet_unlink(entry.path)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """Yield a binary file whose content appears at ``path`` only when the block ends
    without error (temporary file beside it, fsync, then ``os.replace``).

    Raises:
        ToolkitError: the folder cannot be created or written (an ``OSError``, named with the
            path); any other error of the block is raised as it is, with nothing left behind.
    """
    p = Path(path)
    try:
        fd, tmp = _temp_beside(p)
    except OSError as exc:
        raise _write_error(p, exc) from None
    _remove_dead_temps(p)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(p))
        os.replace(tmp, p)
    except OSError as exc:
        _quiet_unlink(tmp)
        raise _write_error(p, exc) from None
    except BaseException:
        _quiet_unlink(tmp)
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`); return the path."""
    p = Path(path)
    with atomic_open(p) as f:
        f.write(data)
    return p


def write_file_set(payload: Mapping[Path, bytes], *, journal: bool = False) -> list[Path]:
    """Write every ``{path: bytes}`` or none of them; return the paths in order.

    Every file is first written in full to a temporary name beside its target and flushed;
    only then is each renamed over its final name (never deleted first). When a rename fails,
    the targets already replaced get their previous content back and every temporary file is
    removed, so the set on disk is the old one or the new one.

    With ``journal`` (every path in one folder, whose :func:`folder_lock` the caller holds),
    the rename plan is written to ``<folder>/.toolkit.journal`` once every temporary file is
    whole and flushed, and removed once every rename is done: a process killed between two
    renames leaves the plan, and :func:`finish_interrupted_set` completes the new set.

    Raises:
        ToolkitError: an ``OSError`` while writing (named with the path).
    """
    temps: dict[Path, str] = {}
    backups: dict[Path, str] = {}
    placed: list[Path] = []
    current: Path | None = None
    try:
        for path, data in payload.items():
            current = path
            fd, tmp = _temp_beside(path)
            temps[path] = tmp
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, _mode_for(path))
        plan: Path | None = None
        if journal and payload:
            folder = next(iter(payload)).parent
            if any(path.parent != folder for path in payload):
                raise ValueError("a journalled file set lies in one folder")
            plan = folder / JOURNAL_NAME
            current = plan
            atomic_write(plan, json.dumps(
                {"renames": [[Path(tmp).name, path.name] for path, tmp in temps.items()]}
            ).encode())
        for path, tmp in temps.items():
            current = path
            if path.exists():
                fd, bak = _temp_beside(path, ".bak")
                os.close(fd)
                backups[path] = bak
                shutil.copyfile(path, bak)  # the name keeps its old content until replaced
            os.replace(tmp, path)
            placed.append(path)
    except BaseException as exc:
        if journal and payload:  # the old set is restored below: nothing to finish
            _quiet_unlink(next(iter(payload)).parent / JOURNAL_NAME)
        for path in placed:
            if path in backups:
                with contextlib.suppress(OSError):
                    os.replace(backups.pop(path), path)
            else:
                _quiet_unlink(path)
        for leftover in (*temps.values(), *backups.values()):
            _quiet_unlink(leftover)
        if isinstance(exc, OSError):
            raise _write_error(current or Path("."), exc) from None
        raise
    if plan is not None:
        _quiet_unlink(plan)  # the set is whole: nothing to finish
    for bak in backups.values():
        _quiet_unlink(bak)
    return list(payload)


def finish_interrupted_set(folder: str | os.PathLike[str]) -> int:
    """Complete a file set whose writer was killed while renaming it into place (the
    ``.toolkit.journal`` that :func:`write_file_set` leaves): every temporary file still there
    is renamed over its final name, then the plan is removed. Call it while holding
    :func:`folder_lock`. Returns how many files it renamed (0 with no plan).

    Raises:
        ToolkitError: the plan is damaged or names files outside the folder.
    """
    root = Path(folder)
    plan = root / JOURNAL_NAME
    try:
        text = plan.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolkitError(f"cannot read the interrupted write's plan ({exc})", where=str(plan),
                           fix=f"remove {plan} and write the files again") from None
    try:
        renames = json.loads(text)["renames"]
        pairs = [(str(tmp), str(final)) for tmp, final in renames]
    except (ValueError, KeyError, TypeError):
        pairs = []
        renames = None
    if renames is None or any(
            not final or os.sep in final or "/" in final or final in (".", "..")
            or not (tmp.startswith(f".{final}.") and tmp.endswith(".tmp")) or "/" in tmp
            or os.sep in tmp for tmp, final in pairs):
        raise ToolkitError("the interrupted write's plan is damaged", where=str(plan),
                           fix=f"remove {plan} and write the files again")
    done = 0
    try:
        for tmp, final in pairs:
            if (root / tmp).is_file():
                os.replace(root / tmp, root / final)
                done += 1
        plan.unlink()
    except OSError as exc:
        raise _write_error(plan, exc) from None
    return done



def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``<folder>/.toolkit.lock`` for the block, so two runs never write one set of files
    into a folder at once. A lock whose process is gone (a killed run) is taken over.

    Raises:
        ToolkitError: another live process holds the lock, or the folder is not writable.
    """
    root = Path(folder)
    lock = root / LOCK_NAME
    for _attempt in range(2):
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text(encoding="ascii").split()[0])
            except (OSError, ValueError, IndexError):
                pid = -1
            if pid > 0 and _pid_alive(pid):
                raise ToolkitError(f"another toolkit run (process {pid}) is writing into this "
                                   "folder", where=str(root),
                                   fix=f"wait for it to finish, or remove {lock} if no such "
                                       "process is running") from None
            _quiet_unlink(lock)  # stale: its process is gone
            continue
        except OSError as exc:
            raise _write_error(lock, exc) from None
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
        try:
            yield lock
        finally:
            _quiet_unlink(lock)
        return
    raise ToolkitError("could not take the folder's lock", where=str(lock),
                       fix=f"remove {lock} if no toolkit run is writing there")


def remove_stale_temps(folder: str | os.PathLike[str], names: Iterator[str] | list[str]) -> int:
    """Remove the temporary files that killed writers of ``names`` left in ``folder``
    (``.<name>.*.tmp`` and ``.bak``); call it while holding :func:`folder_lock`. Returns how
    many were removed."""
    root = Path(folder)
    removed = 0
    for name in names:
        for pattern in (f".{name}.*.tmp", f".{name}.*.bak"):
            for stale in root.glob(pattern):
                _quiet_unlink(stale)
                removed += 1
    return removed
