"""The argument parser every ``toolkit`` verb uses, and the one shape of its error lines.

* Multi-word flags are accepted with hyphens and with underscores (``--part-file`` and ONE's
  ``--part_file``, ``--skip-runs`` and ``--skip_runs``); ``--help`` shows the declared one.
* A bad flag or a missing argument raises :class:`~toolkit.errors.UsageError` naming the
  verb and the flag, what is wrong and how to fix it, instead of argparse's usage dump.
* :func:`error_line` renders any :class:`~toolkit.errors.ToolkitError` as
  ``error: <where>: <what>. Fix: <how>``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from toolkit.errors import ToolkitError, UsageError

__all__ = ["ToolkitParser", "normalize_flags", "error_line", "generic_fix", "positive_int",
           "count_arg", "read_inputs", "SPELLING_NOTE"]

SPELLING_NOTE = ("Multi-word flags may be spelled with hyphens or underscores "
                 "(--skip-runs or --skip_runs).")


def normalize_flags(known: Sequence[str], args: Sequence[str]) -> list[str]:
    """Return ``args`` with every ``--long_flag`` (or ``--long-flag``) that is not one of the
    option strings ``known`` rewritten to the known spelling with ``-``/``_`` swapped;
    ``--flag=value`` keeps its value; tokens after a bare ``--`` are left alone."""
    names = set(known)
    out: list[str] = []
    for i, tok in enumerate(args):
        if tok == "--":
            out.extend(args[i:])
            break
        if tok.startswith("--") and len(tok) > 2:
            name, eq, value = tok.partition("=")
            if name not in names:
                body = name[2:]
                for alt in ("--" + body.replace("_", "-"), "--" + body.replace("-", "_")):
                    if alt in names:
                        tok = alt + eq + value
                        break
        out.append(tok)
    return out


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (ArgumentTypeError otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def count_arg(text: str) -> int:
    """argparse type: an integer >= 0 (ArgumentTypeError otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def read_inputs(path: Path | None, flag: str = "--inputs") -> dict[str, np.ndarray] | None:
    """Return the arrays of the ``.npz`` at ``path`` by name (None when ``path`` is None);
    ToolkitError naming ``flag`` when it is missing or not an array archive."""
    if path is None:
        return None
    from toolkit.util.sniff import KIND_NAMES, path_kind
    from toolkit.util.suggest import path_suggestion

    fix = f"pass an .npz written by numpy.savez(path, input_name=array, ...) with {flag}"
    kind = path_kind(path)
    if kind is None and not path.is_file():
        near = path_suggestion(path)
        raise ToolkitError(f"no such inputs file (given with {flag})", where=str(path),
                           fix=f"did you mean {near}?" if near else f"check the {flag} path "
                               "(an .npz with one array per input name)")
    if kind == "npy":
        raise ToolkitError(f"this is a single .npy array; {flag} takes an .npz archive with "
                           "one array per input name", where=str(path),
                           fix="write it with numpy.savez(path, input_name=array) (the model's "
                               "input names: toolkit inspect MODEL --tensors)")
    if kind not in (None, "npz"):
        raise ToolkitError(f"this is {KIND_NAMES[kind]}, not an inputs archive "
                           "(arguments swapped?)", where=str(path), fix=fix)
    if kind is None:
        raise ToolkitError("the file is not an .npz (zip) archive", where=str(path), fix=fix)
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ToolkitError(f"cannot read inputs ({type(e).__name__}: {e})"[:200],
                           where=str(path), fix=fix) from None


def _plain(text: str) -> str:
    return text.rstrip(".").strip()


class ToolkitParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` that accepts both spellings of multi-word flags and
    raises :class:`~toolkit.errors.UsageError` (``where`` = the verb and the flag) instead of
    printing the usage and exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        epilog = kwargs.pop("epilog", None)
        kwargs["epilog"] = f"{epilog}\n\n{SPELLING_NOTE}" if epilog else SPELLING_NOTE
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args`` (default ``sys.argv[1:]``) after :func:`normalize_flags`; return
        the namespace and the arguments left over, as argparse does."""
        argv = list(sys.argv[1:] if args is None else args)
        argv = normalize_flags(list(self._option_string_actions), argv)
        return super().parse_known_args(argv, namespace)

    def _action_for(self, name: str) -> argparse.Action | None:
        for flag in name.split("/"):
            if flag in self._option_string_actions:
                return self._option_string_actions[flag]
        for action in self._actions:
            if name in (action.metavar, action.dest):
                return action
        return None

    def _suggest_flags(self, extra: list[str]) -> str:
        """``"did you mean --x? "`` for the unknown flags among ``extra`` that are close to a
        known flag (``""`` when none is)."""
        from toolkit.util.suggest import closest

        known = [f for f in self._option_string_actions if f.startswith("--")]
        hints = []
        for tok in extra:
            if tok.startswith("--"):
                near = closest(tok.split("=", 1)[0], known)
                if near:
                    hints.append(near)
        return f"did you mean {', '.join(hints)}? " if hints else ""

    def error(self, message: str) -> NoReturn:
        """Raise :class:`~toolkit.errors.UsageError` for argparse's ``message``: where is
        ``<prog> <flag>``, the fix says what the flag takes or which flags are missing."""
        helps = f"`{self.prog} --help` lists every argument"
        m = re.match(r"argument (\S+): (.*)$", message, re.S)
        if m:
            name, what = m.group(1), m.group(2)
            action = self._action_for(name)
            shown = name.split("/")[-1]
            choice = re.search(r"invalid choice: (.*) \(choose from (.*)\)", what)
            if choice:
                options = choice.group(2).replace("'", "")
                from toolkit.util.suggest import closest

                near = closest(choice.group(1).strip("'"), options.split(", "))
                raise UsageError(f"{choice.group(1)} is not a choice of {shown}",
                                 where=f"{self.prog} {shown}",
                                 fix=(f"did you mean {shown} {near}? " if near else "")
                                 + f"use one of: {options}")
            if "expected one argument" in what or "expected at least one" in what:
                what_it_is = _plain(action.help) if action is not None and action.help \
                    else "a value"
                raise UsageError(f"{shown} needs a value", where=f"{self.prog} {shown}",
                                 fix=f"give {shown} a value: {what_it_is}")
            if "not allowed with argument" in what:
                raise UsageError(what, where=f"{self.prog} {shown}",
                                 fix="give only one of the two")
            desc = _plain(action.help) if action is not None and action.help else ""
            raise UsageError(_plain(what), where=f"{self.prog} {shown}",
                             fix=f"give {shown} a valid value: {desc}" if desc else helps)
        if message.startswith("the following arguments are required:"):
            missing = message.split(":", 1)[1].strip()
            raise UsageError(f"missing {missing}", where=self.prog,
                             fix=f"give {missing} ({helps})")
        if message.startswith("unrecognized arguments:"):
            extra = message.split(":", 1)[1].strip()
            raise UsageError(f"unknown argument(s) {extra}", where=self.prog,
                             fix=self._suggest_flags(extra.split())
                             + f"drop them or correct the spelling ({helps})")
        if message.startswith("ambiguous option:"):
            raise UsageError(message.split(":", 1)[1].strip(), where=self.prog,
                             fix="spell the flag out in full")
        raise UsageError(_plain(message), where=self.prog, fix=helps)


def generic_fix(verb: str) -> str:
    """The fix printed when an error names none: where to read what ``verb`` takes."""
    return f"see `toolkit {verb} --help` for what each argument takes"


def error_line(error: ToolkitError, verb: str) -> str:
    """Return ``error: <where>: <what>. Fix: <how>`` for ``error`` raised by ``toolkit
    verb`` (``where`` defaults to ``toolkit <verb>``, the fix to :func:`generic_fix`)."""
    where = error.where or f"toolkit {verb}"
    what = " ".join(str(error.what).split())
    if not what.endswith((".", "?", "!")):
        what += "."
    fix = " ".join(error.fix.split()) if error.fix else generic_fix(verb)
    return f"error: {where}: {what} Fix: {fix}"
