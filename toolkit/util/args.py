"""Checks of the arguments of public functions: a wrong type or range is a ToolkitError
naming the function, the argument and what it takes (never a TypeError from deep inside)."""

from __future__ import annotations

import os
from typing import Any

from toolkit.errors import ToolkitError

__all__ = ["check_bool", "check_int", "check_optional_bool", "check_optional_str",
           "check_path_arg", "check_names", "check_model_arg", "check_inputs",
           "check_number"]


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


def check_path_arg(value: Any, name: str, where: str, *, optional: bool = False,
                   allow_bytes: bool = False) -> Any:
    """Return ``value`` when it is a path (``str`` or ``os.PathLike``; ``None`` when
    ``optional``; ``bytes``-like when ``allow_bytes``); ToolkitError otherwise."""
    if value is None and optional:
        return value
    if allow_bytes and isinstance(value, (bytes, bytearray, memoryview)):
        return value
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text and "\0" not in text:
            return value
        raise ToolkitError(f"{name} must be a path without NUL characters, got {value!r:.80}",
                           where=where, fix=f"pass {name} as the path of a file or folder")
    takes = "a path (str or os.PathLike)" + (" or bytes" if allow_bytes else "") + (
        " or None" if optional else "")
    raise ToolkitError(f"{name} must be {takes}, got a {type(value).__name__}", where=where,
                       fix=f"pass {name} as the path of a file or folder")


def check_names(value: Any, name: str, where: str, *, optional: bool = True,
                allow_str: bool = True) -> Any:
    """Return ``value`` when it is a str (when ``allow_str``), a list or tuple of non-empty
    strs (``None`` when ``optional``); ToolkitError otherwise."""
    if value is None and optional:
        return value
    if allow_str and isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
        return value
    takes = ("a str or " if allow_str else "") + "a list of non-empty strs"
    raise ToolkitError(f"{name} must be {takes}, got {value!r:.80}", where=where,
                       fix=f"pass {name}=['a', 'b']" + (" or 'a,b'" if allow_str else ""))


def check_model_arg(value: Any, name: str, where: str, *, optional: bool = False) -> Any:
    """Return ``value`` when it is a path or a toolkit object (a model, compiled model,
    partition, artifact ...: anything defined by the package); ToolkitError for a number, a
    list, a dict or another foreign value."""
    if (value is None and optional) or isinstance(value, (str, os.PathLike)):
        return check_path_arg(value, name, where, optional=optional)
    if type(value).__module__.split(".")[0] == "toolkit":
        return value
    raise ToolkitError(f"{name} cannot be a {type(value).__name__}", where=where,
                       fix=f"pass {name} as a model object or the path of a model file")


def check_inputs(value: Any, name: str, where: str) -> Any:
    """Return ``value`` when it is None, a mapping, a list or tuple, or an array (anything
    with ``__array__``); ToolkitError otherwise."""
    from collections.abc import Mapping

    if value is None or isinstance(value, (Mapping, list, tuple)) or hasattr(value,
                                                                             "__array__"):
        return value
    raise ToolkitError(f"{name} must be a dict name -> array, a list of arrays or one array, "
                       f"got a {type(value).__name__}", where=where,
                       fix=f"pass {name}={{'input': array}} or None for random inputs")


def check_number(value: Any, name: str, where: str) -> float:
    """Return ``value`` as a float when it is a finite number > 0 (not a bool);
    ToolkitError otherwise."""
    import math

    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ToolkitError(f"{name} must be a finite number > 0, got {value!r:.80}",
                           where=where, fix=f"pass {name}=1e9 (for example)")
    return float(value)
