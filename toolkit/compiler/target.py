"""The machine a model is compiled for: buffer size, throughput and clock of the cost model.

A :class:`Target` is a plain, validated value. The lowering reads ``buffer_bytes`` (when to cut
an op into stripes), ``command_bytes`` (size of one command in the queue) and the throughput
figures of the cost model (see :mod:`toolkit.compiler.lowering`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any

from toolkit.errors import ToolkitError

__all__ = ["Target"]


@dataclass(frozen=True)
class Target:
    """A compilation target.

    Attributes:
        name: target name; the ``backend`` column of ``optimised_ops()``.
        buffer_bytes: on-chip buffer for one op's output (bytes); an op whose output is larger
            is split into stripes of output rows where its type allows.
        macs_per_cycle: multiply-accumulates per cycle.
        bytes_per_cycle: bytes moved between memory and the buffer per cycle.
        clock_hz: clock frequency (Hz), to turn cycles into time.
        command_bytes: size of one command in the queue (bytes, a multiple of 4); a command's
            queue offset is ``command_id * command_bytes``.
    """

    name: str = "npu"
    buffer_bytes: int = 256 * 1024
    macs_per_cycle: int = 256
    bytes_per_cycle: int = 16
    clock_hz: float = 500e6
    command_bytes: int = 16

    def __post_init__(self) -> None:
        self.validate()
        for f in ("buffer_bytes", "macs_per_cycle", "bytes_per_cycle", "command_bytes"):
            object.__setattr__(self, f, int(getattr(self, f)))
        object.__setattr__(self, "clock_hz", float(self.clock_hz))

    def validate(self) -> None:
        """Raise :class:`ToolkitError` naming the first invalid field."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise ToolkitError(f"target name must be a non-empty string, got {self.name!r}",
                               where="Target.name",
                               fix="give the target a name, e.g. Target(name='npu') (the default)")
        for f in ("buffer_bytes", "macs_per_cycle", "bytes_per_cycle", "command_bytes"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
                raise ToolkitError(f"{f} must be a positive integer, got {v!r}",
                                   where=f"Target.{f}",
                                   fix=f"give {f} as a positive integer")
        if self.command_bytes % 4:
            raise ToolkitError(f"command_bytes must be a multiple of 4, got {self.command_bytes}",
                               where="Target.command_bytes",
                               fix="NPU command streams are made of 32-bit words")
        hz = self.clock_hz
        if isinstance(hz, bool) or not isinstance(hz, numbers.Real) or not math.isfinite(hz) \
                or hz <= 0:
            raise ToolkitError(f"clock_hz must be a positive finite number, got {hz!r}",
                               where="Target.clock_hz",
                               fix="give clock_hz in hertz as a positive number, e.g. 1e9")

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> Target:
        """Return a Target from a mapping (e.g. parsed JSON); unknown keys are an error."""
        if not isinstance(config, dict):
            raise ToolkitError(
                f"a target config must be a mapping, got {type(config).__name__}",
                fix="pass a dict of Target fields (e.g. parsed from the target JSON file)",
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ToolkitError(f"unknown target field(s) {unknown}",
                               fix=f"fields are {sorted(known)}")
        return cls(**config)

    def cycles_to_us(self, cycles: float) -> float:
        """Return ``cycles`` as microseconds at ``clock_hz``."""
        return float(cycles) / self.clock_hz * 1e6
