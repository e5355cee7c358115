"""Exact decimal text <-> integer nanoseconds, with no float on the way.

Trace files carry times as decimals in some unit (Chrome traces: microseconds such as
``12.345``; CSVs: ns, us, ms or s). :func:`us_texts` prints integer nanoseconds as exact
microsecond decimals, :func:`numbers_to_ns` parses decimal texts (or JSON integers) into
``int64`` nanoseconds exactly (rounded half to even at 1 ns, exponents allowed), so times
survive a round trip bit for bit for every ``int64`` value.
"""

from __future__ import annotations

import decimal
import operator
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["INT64_MAX", "INT64_MIN", "PLAIN_DECIMAL", "UNIT_DIGITS", "us_texts",
           "numbers_to_ns", "number_texts_to_ns"]


INT64_MAX = np.iinfo(np.int64).max


INT64_MIN = np.iinfo(np.int64).min


PLAIN_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")


UNIT_DIGITS = {"ns": 0, "us": 3, "ms": 6, "s": 9}


def _fraction_text(ns: int) -> str:
    """``".123"`` style text for ``ns % 1000`` with trailing zeros removed (``""`` for 0)."""
    return f".{ns:03d}".rstrip("0").rstrip(".")


_FRACTIONS = np.array([_fraction_text(i) for i in range(1000)], dtype=object)


def us_texts(ns: np.ndarray) -> list[str]:
    """JSON number texts of ``ns / 1000`` printed exactly (``12345`` -> ``"12.345"``).

    Returns one ``str`` per element of the ``int64`` array ``ns``.
    """
    ns = np.asarray(ns, dtype=np.int64)
    neg = ns < 0
    mag = np.abs(ns).view(np.uint64)  # abs(INT64_MIN) wraps to itself; as uint64 it is 2**63
    whole = (mag // np.uint64(1000)).tolist()
    frac = _FRACTIONS[(mag % np.uint64(1000)).astype(np.intp)].tolist()
    texts = list(map(operator.add, map(str, whole), frac))
    for i in np.flatnonzero(neg).tolist():
        texts[i] = "-" + texts[i]
    return texts


def _scaled_decimal(text: str, digits: int) -> int | None:
    """``round_half_even(value(text) * 10**digits)`` for a decimal number text, else ``None``.

    Accepts exponents (``1.5e3``); returns ``None`` for text that is not a finite number.
    """
    try:
        value = decimal.Decimal(text.strip())
    except (decimal.InvalidOperation, ValueError):
        return None
    if not value.is_finite():
        return None
    if value.adjusted() > 40:  # far outside int64 either way; don't build a huge int
        return INT64_MAX + 1
    return int(value.scaleb(digits).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def _bytes_to_scaled(texts: Sequence[bytes | int], digits: int) -> np.ndarray:
    """Plain decimal texts (``b"-12.5"``, no exponent) or ints -> ``int64`` ``value * 10**digits``,
    exactly.

    Works on the texts as one byte matrix. Raises ``ValueError`` when a text is not a plain
    decimal with at most ``digits`` fractional digits, or ``OverflowError`` when a value does not
    fit, so that the caller can take the exact one-by-one path (:func:`_scaled_decimal`).
    """
    n = len(texts)
    array = np.array(texts, dtype=bytes)
    width = array.dtype.itemsize
    if n == 0 or width == 0:
        raise ValueError("empty text")
    chars = array.view(np.uint8).reshape(n, width)
    if np.any((chars | 0x20) == ord("e")):
        raise ValueError("exponent")
    is_dot = chars == ord(".")
    dot = is_dot.argmax(axis=1)
    has_dot = is_dot[np.arange(n), dot]
    dot = np.where(has_dot, dot, width)
    length = np.count_nonzero(chars, axis=1)
    frac_digits = np.where(has_dot, length - dot - 1, 0)
    if frac_digits.max() > digits:
        raise ValueError("more fractional digits than kept")
    column = np.arange(width)
    whole_chars = np.where(column[None, :] >= dot[:, None], np.uint8(0), chars)
    whole = whole_chars.view(f"S{width}").ravel().astype(np.int64)  # ValueError if not digits
    scale = 10**digits
    limit = (INT64_MAX - (scale - 1)) // scale
    if np.any((whole > limit) | (whole < -limit)):
        raise OverflowError("does not fit int64")
    magnitude = np.abs(whole) * scale
    for j in range(digits):  # fractional digits, missing ones count as 0
        position = np.minimum(dot + 1 + j, width - 1)
        digit = chars[np.arange(n), position].astype(np.int64) - ord("0")
        present = j < frac_digits
        if np.any(present & ((digit < 0) | (digit > 9))):
            raise ValueError("not a digit")
        magnitude += np.where(present, digit, 0) * 10 ** (digits - 1 - j)
    return np.where(chars[:, 0] == ord("-"), -magnitude, magnitude)


def numbers_to_ns(values: Sequence[Any], digits: int) -> tuple[np.ndarray, dict[int, str]]:
    """JSON-decoded numbers in a unit of ``10**-digits`` s -> ``int64`` nanoseconds.

    ``values`` holds ``int`` (JSON integers), ``bytes`` (the text of JSON numbers with a fraction
    or an exponent), ``None`` (absent) or anything else (invalid). Returns the nanoseconds
    (``0`` where invalid) and ``{position: problem}`` for the invalid ones.
    """
    n = len(values)
    out = np.zeros(n, dtype=np.int64)
    problems: dict[int, str] = {}
    if n == 0:
        return out, problems
    kinds = set(map(type, values))
    if kinds <= {int, bytes}:
        try:
            if kinds == {int}:
                number = np.fromiter(values, np.int64, n)
                scale = 10**digits
                if number.max() > INT64_MAX // scale or number.min() < -(INT64_MAX // scale):
                    raise OverflowError("does not fit int64")
                return number * scale, problems
            return _bytes_to_scaled(values, digits), problems  # numpy prints the ints
        except (ValueError, OverflowError):
            pass  # exponents, rounding, overflow: exact path below, one value at a time
    for i, value in enumerate(values):
        kind = type(value)
        if kind is int:
            scaled: int | None = value * 10**digits
        elif kind is bytes:
            value = value.decode("utf-8", "replace")
            scaled = _scaled_decimal(value, digits)
        elif value is None:
            problems[i] = "missing"
            continue
        else:
            problems[i] = f"not a number ({value!r})"
            continue
        if scaled is None:
            problems[i] = f"not a number ({value!r})"
        elif not INT64_MIN <= scaled <= INT64_MAX:
            problems[i] = "outside the int64 nanosecond range"
        else:
            out[i] = scaled
    return out, problems


_NUMBER_BYTES = b"0123456789.-+eE"


def number_texts_to_ns(texts: Sequence[Any], digits: int
                       ) -> tuple[np.ndarray, dict[int, str]] | None:
    """:func:`numbers_to_ns` of JSON values given as their text (``bytes`` or ``msgspec.Raw``,
    any object with the buffer protocol), or ``None`` when one of them is not a JSON number
    (a string, ``null``, an object ...), whose problem the caller words itself.

    The texts are joined into one buffer: plain decimals (``-12.5``) that fit ``int64`` once
    scaled are read by numpy's C parser with their dot removed, then scaled by the fractional
    digits they lack; exponents, more fractional digits than ``digits`` and values near or
    beyond the ``int64`` range take the exact path of :func:`numbers_to_ns`. Same result as
    the decoded values.
    """
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=np.int64), {}
    joined = b" ".join(texts)
    if joined.translate(None, _NUMBER_BYTES + b" "):
        return None  # a value that is not a number
    buffer = np.frombuffer(joined, dtype=np.uint8)
    gaps = np.flatnonzero(buffer == ord(" "))
    if len(gaps) != n - 1:
        return None
    if joined.translate(None, b"0123456789.- "):  # exponents: the exact path
        return numbers_to_ns(joined.split(), digits)
    ends = np.append(gaps, len(buffer))
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = gaps + 1
    dots = np.flatnonzero(buffer == ord("."))
    owner = np.searchsorted(gaps, dots)  # the number each dot belongs to
    fraction = np.zeros(n, dtype=np.int64)
    fraction[owner] = ends[owner] - dots - 1
    has_dot = np.zeros(n, dtype=np.int64)
    has_dot[owner] = 1
    # digits of the value once scaled to 10**-digits units
    scaled_digits = (ends - starts - has_dot - (buffer[starts] == ord("-"))
                     + (digits - fraction))
    if (fraction.max() > digits or np.any(np.diff(owner) == 0)
            or scaled_digits.max() > 19):
        return numbers_to_ns(joined.split(), digits)
    values = np.fromstring(joined.translate(None, b"."), dtype=np.int64, sep=" ")
    if len(values) != n:
        return numbers_to_ns(joined.split(), digits)
    power = _POWERS[digits - fraction]
    big = scaled_digits == 19  # may not fit: the parser clamps, the product wraps
    if big.any():
        value, scale = values[big], power[big]
        if np.any((value == INT64_MAX) | (value == INT64_MIN)
                  | (np.abs(value) > INT64_MAX // scale)):
            return numbers_to_ns(joined.split(), digits)
    return values * power, {}


_POWERS = 10 ** np.arange(19, dtype=np.int64)
