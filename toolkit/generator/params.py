"""The parameters file of an artifact: a header, then every constant array 64-byte aligned.

Layout (little-endian)::

    0   magic      8 bytes  b"TKPARAMS"
    8   version    u32      PARAMS_VERSION
    12  header     u32      64 (bytes before the first array)
    16  size       u64      size of the whole file in bytes
    24  model hash 32 bytes ASCII hex: the first 128 bits of SHA-256 over the payload and the
                            generated code, so a parameters file goes with its code only
    56  reserved   8 bytes  zero
    64  payload    arrays at 64-byte aligned offsets (from the start of the file)
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from toolkit.errors import ToolkitError

__all__ = ["PARAMS_MAGIC", "PARAMS_VERSION", "HEADER_BYTES", "ParamsBuilder", "read_header"]

PARAMS_MAGIC = b"TKPARAMS"
PARAMS_VERSION = 1
HEADER_BYTES = 64
_ALIGN = 64


class ParamsBuilder:
    """Collects constant arrays; identical arrays are stored once."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = HEADER_BYTES
        self._seen: dict[tuple[str, bytes], int] = {}

    def add(self, array: np.ndarray) -> int:
        """Store ``array`` (C order, its own dtype) and return its offset in the file."""
        a = np.ascontiguousarray(array)
        raw = a.tobytes()
        key = (a.dtype.str, raw)
        if key in self._seen:
            return self._seen[key]
        pad = (-self._size) % _ALIGN
        if pad:
            self._chunks.append(b"\0" * pad)
            self._size += pad
        offset = self._size
        self._chunks.append(raw)
        self._size += len(raw)
        self._seen[key] = offset
        return offset

    @property
    def size(self) -> int:
        """Size of the file so far (header included), padded to the alignment."""
        return self._size + (-self._size) % _ALIGN

    def payload(self) -> bytes:
        """The bytes after the header, padded to the alignment."""
        body = b"".join(self._chunks)
        return body + b"\0" * ((-self._size) % _ALIGN)

    def model_hash(self, code: str) -> str:
        """32 hex digits identifying this payload together with ``code``."""
        h = hashlib.sha256(self.payload())
        h.update(code.encode())
        return h.hexdigest()[:32]

    def to_bytes(self, model_hash: str) -> bytes:
        """The whole file."""
        if len(model_hash) != 32:
            raise ToolkitError(f"model hash {model_hash!r} is not 32 hex digits",
                               where="the parameters file",
                               fix="pass the hash ParamsBuilder.model_hash() returns")
        header = PARAMS_MAGIC + struct.pack("<IIQ", PARAMS_VERSION, HEADER_BYTES, self.size) \
            + model_hash.encode("ascii") + b"\0" * 8
        return header + self.payload()


def read_header(data: bytes, where: str) -> dict[str, object]:
    """Decode a parameters file header: ``version``, ``size``, ``model_hash``.

    Raises:
        ToolkitError: not a parameters file (bad magic or too short).
    """
    if len(data) < HEADER_BYTES or data[:8] != PARAMS_MAGIC:
        raise ToolkitError("not a toolkit parameters file (bad magic)", where=where,
                           fix="use the .params file generated with the code")
    version, _, size = struct.unpack_from("<IIQ", data, 8)
    return {"version": version, "size": size, "model_hash": data[24:56].decode("ascii", "replace")}
