"""Did-you-mean: the closest spelling of a verb, a flag or a path (``difflib``)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["closest", "did_you_mean", "path_suggestion"]


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """Return the choice closest to ``word`` (``difflib`` ratio at least ``cutoff``), or
    None."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """Return ``" (did you mean X?)"`` for the closest choice, or ``""`` when none is close."""
    best = closest(word, choices, cutoff)
    return f" (did you mean {best}?)" if best else ""


def path_suggestion(path: str | os.PathLike[str], limit: int = 2000) -> str | None:
    """Return the existing path closest to a missing ``path`` (same folder, a close name; the
    folder's first ``limit`` entries are compared), or None. The deepest existing ancestor
    is searched when the folder itself is missing."""
    p = Path(path)
    parent = p.parent
    try:
        if not parent.is_dir():
            return None
        names = []
        for i, entry in enumerate(os.scandir(parent)):
            if i >= limit:
                break
            names.append(entry.name)
    except OSError:
        return None
    best = closest(p.name, names, cutoff=0.7)
    return None if best is None else str(parent / best)
