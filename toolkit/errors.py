"""The one error hierarchy of the toolkit.

Every error a user can provoke with bad input is a :class:`ToolkitError` whose message says
*what* is wrong, *where* (file, offset, line, op or tensor) and *how to fix it*.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """Base class of every error the toolkit raises on bad input or bad configuration.

    Its text is ``<where>: <what>. Fix: <fix>`` (the parts given).

    Args:
        what: what is wrong, one sentence.
        where: the file, offset, line, op or tensor concerned (optional).
        fix: what the user can do about it (optional).
    """

    def __init__(self, what: str, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        head = f"{where}: {what}" if where else what
        if fix:
            head = head.rstrip()
            if not head.endswith((".", "?", "!")):
                head += "."
            head = f"{head} Fix: {fix}"
        super().__init__(head)


class ModelFormatError(ToolkitError):
    """A model file (.tflite / .circle) or one of its metadata entries cannot be decoded."""


class GraphError(ToolkitError):
    """A graph breaks an invariant (no origin, no producer, a cycle, a dangling reference)."""


class UnsupportedOpError(ToolkitError):
    """An op type or op configuration that the toolkit cannot handle here."""


class RuntimeInputError(ToolkitError):
    """Inputs given to the reference runtime do not match the model (name, shape, dtype)."""


class PartitionError(ToolkitError):
    """A `.part` file, partition request or connection file is invalid."""


class TraceError(ToolkitError):
    """A trace file cannot be read."""


class PassError(ToolkitError):
    """A compiler pass raised; the message names the pass and the passes run before it."""


class VelaError(ToolkitError):
    """A Vela output (debug database, per-layer CSV) cannot be read or joined."""


class LimitError(ToolkitError):
    """What a file claims exceeds a bound of :mod:`toolkit.limits` (the message names the
    bound and how to raise it)."""


class NumericsError(ToolkitError):
    """Two runs cannot be compared tensor by tensor (nothing matches, other inputs, another
    model's capture), or a capture cannot be made."""


class UsageError(ToolkitError):
    """A command-line flag or argument is missing, unknown or has a bad value (the message
    names the verb and the flag)."""
