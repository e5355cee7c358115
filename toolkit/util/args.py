"""Checks of the arguments of public functions: a wrong type or range is a ToolkitError
naming the function, the argument and what it takes (never a TypeError from deep inside)."""

from __future__ import annotations

from typing import Any

from toolkit.errors import ToolkitError

__all__ = ["check_bool", "check_int", "check_optional_bool", "check_optional_str"]


def check_bool(value: Any, name: str, where: str) -> bool:
    """Return ``value`` when it is a bool; ToolkitError otherwise."""
    if not isinstance(value, bool):
        raise ToolkitError(f"{name} must be True or False, got {value!r:.80}", where=where,
                           fix=f"pass {name}=True or {name}=False")
    return value


def check_optional_bool(value: Any, name: str, where: str) -> bool | None:
    """Return ``value`` when it is a bool or None; ToolkitError otherwise."""
    return None if value is None else check_bool(value, name, where)


def check_int(value: Any, name: str, where: str, low: int = 0,
              high: int | None = None) -> int:
    """Return ``value`` when it is an int (not a bool) in ``[low, high]``; ToolkitError
    otherwise."""
    if (isinstance(value, bool) or not isinstance(value, int) or value < low
            or (high is not None and value > high)):
        span = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ToolkitError(f"{name} must be an integer {span}, got {value!r:.80}",
                           where=where, fix=f"pass {name}={max(low, 1)}")
    return value


def check_optional_str(value: Any, name: str, where: str) -> str | None:
    """Return ``value`` when it is a non-empty str or None; ToolkitError otherwise."""
    if value is not None and (not isinstance(value, str) or not value):
        raise ToolkitError(f"{name} must be a non-empty string, got {value!r:.80}",
                           where=where, fix=f"pass {name}=None or a name")
    return value
