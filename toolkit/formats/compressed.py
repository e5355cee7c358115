"""Reading compressed inputs within bounds: one place that opens a gzip stream for every
reader (Chrome JSON, CSV, records, ORT profiles), stopping at
``toolkit.limits.max_decompressed_bytes``, and counts the lines of a CSV before it is parsed
(``max_events_per_file``).

A 1 MB ``.gz`` can unpack to gigabytes; the bound fails fast with a
:class:`~toolkit.errors.LimitError` naming the limit and how to raise it, instead of
exhausting memory.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import IO, Any

from toolkit.errors import ToolkitError, TraceError
from toolkit.limits import check, current
from toolkit.util.files import open_regular, os_error

__all__ = ["GZIP_MAGIC", "BoundedReader", "is_gzip", "open_decompressed", "open_input",
           "count_lines"]

GZIP_MAGIC = b"\x1f\x8b"


RATIO_FLOOR = 64 << 20
"""Bytes unpacked before ``max_compression_ratio`` is checked (small files may be all zeros)."""


class BoundedReader(io.RawIOBase):
    """A read-only stream over ``inner`` (a decompressing stream) that raises
    :class:`~toolkit.errors.LimitError` once more than ``max_decompressed_bytes`` came out, or
    once past :data:`RATIO_FLOOR` bytes when more than ``max_compression_ratio`` bytes came
    out per compressed byte read from ``also`` (a bomb fails within its first megabytes).

    ``label`` names the input in the error (a path, ``"<file> (gzip)"``); ``also`` is closed
    with the stream (the file under a GzipFile, which leaves it open)."""

    def __init__(self, inner: Any, label: str, also: IO[bytes] | None = None) -> None:
        super().__init__()
        self._inner = inner
        self._also = also
        self._label = label
        self._count = 0
        self._bound = current().max_decompressed_bytes
        self._ratio = current().max_compression_ratio
        self.name = label

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        # never unpack more than one byte past the bound
        room = self._bound - self._count + 1
        try:
            n = self._inner.readinto(view[:room] if room < len(view) else view)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise TraceError(f"cannot unpack the gzip data ({exc})", where=self._label,
                             fix="the compressed data is damaged or cut short; write the "
                                 "file again") from None
        self._count += n
        if self._count > self._bound:
            check("max_decompressed_bytes", self._count, where=self._label,
                  what="bytes the compressed input unpacks to (at least)")
        if self._count > RATIO_FLOOR and self._also is not None:
            try:
                packed = max(int(self._also.tell()), 1)
            except OSError:  # a stream that cannot tell: the size bound still holds
                packed = self._count
            check("max_compression_ratio", self._count // packed, where=self._label,
                  what=f"bytes unpacked per compressed byte ({self._count:,} from {packed:,})")
        return int(n)

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                if self._also is not None:
                    self._also.close()
        super().close()


def is_gzip(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts a gzip stream."""
    return head[:2] == GZIP_MAGIC


def open_decompressed(raw: IO[bytes], label: str) -> io.BufferedReader:
    """A buffered binary stream of ``raw`` (a gzip stream, positioned at its start)
    decompressed, stopping at ``max_decompressed_bytes``. Closing it closes ``raw``."""
    gz = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.BufferedReader(BoundedReader(gz, label, raw), 1 << 16)


def count_lines(stream: IO[bytes], *, label: str, bound: int | None = None) -> int:
    """Count the lines of ``stream`` (read to its end in 1 MiB blocks, constant memory);
    :class:`~toolkit.errors.LimitError` once more than ``bound`` (default
    ``max_events_per_file`` + 1, for a header line) were seen."""
    limit = current().max_events_per_file + 1 if bound is None else bound
    lines = 0
    last = b""
    while True:
        block = stream.read(1 << 20)
        if not block:
            break
        lines += block.count(b"\n")
        last = block[-1:]
        if lines > limit:
            check("max_events_per_file", lines - 1, where=label,
                  what="rows of the CSV (at least)")
    return lines + (1 if last not in (b"", b"\n") else 0)



def open_input(path: str | os.PathLike[str], *, what: str = "trace",
               error: type[ToolkitError] = TraceError) -> tuple[str, IO[bytes]]:
    """Open the input file ``path`` (a regular file: never blocks on a FIFO), decompressed
    within bounds when it is gzip (recognised by content, whatever its name).

    Returns ``(label, stream)``: the label names the file (``"<path> (gzip)"`` when
    compressed) and the binary stream reads its (decompressed) bytes; the caller closes it.

    Raises:
        ``error``: the path cannot be opened (missing, a folder, permission ...).
    """
    raw = open_regular(path, what=what, error=error)
    try:
        head = raw.read(2)
        raw.seek(0)
    except OSError as exc:
        raw.close()
        raise os_error(path, exc, what=what, error=error) from None
    if is_gzip(head):
        label = f"{os.fspath(path)} (gzip)"
        return label, open_decompressed(raw, label)
    return os.fspath(path), raw
