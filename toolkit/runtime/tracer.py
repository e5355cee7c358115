"""Event tracer of the runtimes: one timed event per op (or command, or delegate call).

Modelled on ExecuTorch's delegate profiling API, in its two styles:

1. ``entry = tracer.begin(key)`` ... ``tracer.end(entry)`` when the caller can mark the start and
   the end (or ``with tracer.event(key): ...``);
2. ``tracer.log(key, start_ns, end_ns)`` when the times are known only afterwards (a delegate's
   own counters).

``key`` is a debug handle (``int``) or a name (``str``), as ExecuTorch's
``delegate_debug_identifier``. Times are integer nanoseconds of a monotonic clock
(:func:`time.perf_counter_ns` unless another clock is given). Events are stored column-wise in
append-only lists (a ``begin``/``end`` pair costs a few hundred nanoseconds; a runtime
recording the same steps at every inference packs its clock readings through a
:class:`StepSink` instead, for the cost of the readings);
:meth:`EventTracer.to_frame` turns them into a DataFrame, and
:func:`toolkit.formats.chrome_trace.write_chrome_trace` writes that frame for Perfetto.

Safe to record into from many threads: each thread appends to a buffer of its own (no lock
on the recording path), the buffers are merged once when the events are read, and an event's
track is the thread that recorded it (the tracer's ``track`` for the thread that created it).

Mistakes are never dropped: ending an entry twice or ending an unknown entry raises
:class:`~toolkit.errors.TraceError` at once; entries never ended make :meth:`to_frame` raise (or
become rows flagged in ``problem`` with ``open_events="keep"``).
"""

from __future__ import annotations

import operator
import struct
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError, TraceError
from toolkit.formats.event_columns import arg_column

__all__ = ["EVENT_COLUMNS", "EventEntry", "EventTracer", "StepSink"]

#: What :meth:`EventTracer.begin` returns and :meth:`EventTracer.end` takes: the event's index
#: in its thread's buffer, the buffer's number in the bits from 40 up (0 for the first thread).
EventEntry = int

#: Columns of :meth:`EventTracer.to_frame`, in order; argument columns go before ``problem``.
EVENT_COLUMNS: tuple[str, ...] = (
    "run", "key", "name", "track", "start_ns", "end_ns", "dur_ns", "problem",
)

_OPEN = -(2**63)  # end time of an entry not ended yet
_SHIFT = 40  # an entry is (thread buffer number << _SHIFT) | index in that buffer
_MASK = (1 << _SHIFT) - 1
_STR_DTYPE = pd.Series([""]).dtype


class _Buffer:
    """The events one thread recorded, column-wise in append-only lists (only that thread
    appends to them, so recording takes no lock).

    ``base`` is added to an index to make the thread's entries (``number << _SHIFT``).
    ``runs``/``firsts``: run ``runs[k]`` begins at event ``firsts[k]`` of this buffer; a mark
    is added when the thread records its first event of a new run. ``track`` is the default
    track of the thread's events (``None``: the tracer's own ``track``).
    """

    __slots__ = ("args", "base", "chunks", "ends", "firsts", "keys", "run", "runs", "sink_ids",
                 "sinks", "starts", "state", "track", "tracks")

    def __init__(self, number: int, run: int, track: str | None) -> None:
        self.base = number << _SHIFT
        self.track = track
        self.keys: list[int | str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.tracks: dict[int, str] = {}  # only events on another than the default track
        self.args: list[dict[str, Any] | None] = []  # per event: its arguments or None
        self.run = run
        self.runs = [run]
        self.firsts = [0]
        # step sinks (see step_sink) and their batches (int64s in byte chunks), unpacked
        # when the events are next used: [bytes used, current chunk], the full chunks
        self.sinks: list[StepSink] = []
        self.sink_ids: dict[tuple[int, int, str | None, bool], int] = {}
        self.state: list[Any] = [0, bytearray()]
        self.chunks: list[tuple[bytearray, int]] = []

    def mark(self, run: int) -> None:
        """Events appended from now on belong to ``run``."""
        if len(self.keys) == self.firsts[-1]:
            self.runs[-1] = run
        else:
            self.firsts.append(len(self.keys))
            self.runs.append(run)
        self.run = run

    def in_run(self, run: int) -> bool:
        """True when this buffer holds (or has packed, not yet unpacked) events of ``run``."""
        return (self.run == run and len(self.keys) > self.firsts[-1]) or bool(
            self.state[0] or self.chunks)

    def new_chunk(self, size: int) -> None:
        """Retire the current chunk and start one with room for at least ``size`` bytes."""
        state = self.state
        if state[0]:
            self.chunks.append((state[1], state[0]))
        state[1] = bytearray(max(_CHUNK_BYTES, size))
        state[0] = 0

    def clear(self, run: int) -> None:
        self.chunks.clear()
        self.state[0] = 0
        for column in (self.keys, self.starts, self.ends, self.args):
            column.clear()
        self.tracks.clear()
        self.run = run
        self.runs = [run]
        self.firsts = [0]


class EventTracer:
    """Records timed events with integer-nanosecond times, cheaply, from any thread.

    Each thread records into a buffer of its own (no lock on the recording path); the
    buffers are merged when the events are read (:meth:`to_frame`, ``len``,
    :meth:`open_entries`), which should happen after the recording threads are done. The
    track of an event is the thread that recorded it: the tracer's ``track`` for the thread
    that created the tracer, the thread's name for any other (unless ``track=`` is given).
    Runs (:meth:`new_run`) are numbered for the whole tracer.

    Args:
        track: name of the track (Perfetto thread) of events logged without ``track=`` by the
            thread that creates the tracer.
        clock: monotonic clock returning integer nanoseconds.

    Attributes:
        track: the default track name.
    """

    __slots__ = ("_buffers", "_clock", "_local", "_lock", "_owner", "_run", "track")

    def __init__(self, *, track: str = "main",
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.track = track
        self._clock = clock
        self._run = 0
        self._owner = threading.get_ident()
        self._local = threading.local()
        self._lock = threading.Lock()  # taken only when a thread records its first event
        self._buffers: list[_Buffer] = []

    def __getstate__(self) -> dict[str, Any]:
        """The events (step-sink batches unpacked), for pickling: a tracer sent to another
        process keeps its events, tracks and runs; its sinks stay behind."""
        return {"track": self.track, "clock": self._clock, "run": self._run,
                "buffers": [(b.track, b.keys, b.starts, b.ends, b.tracks, b.args, b.runs,
                             b.firsts) for b in self._flushed()]}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(track=state["track"], clock=state["clock"])  # type: ignore[misc]
        self._run = state["run"]
        for number, (track, keys, starts, ends, tracks, args, runs, firsts) in enumerate(
                state["buffers"]):
            buf = _Buffer(number, runs[-1], track)
            buf.keys, buf.starts, buf.ends, buf.tracks, buf.args = (keys, starts, ends, tracks,
                                                                    args)
            buf.runs, buf.firsts = runs, firsts
            self._buffers.append(buf)

    @property
    def clock(self) -> Callable[[], int]:
        """The tracer's clock (integer nanoseconds); runtimes time their events with it."""
        return self._clock

    # -- per-thread buffers -----------------------------------------------------------------

    def _buffer(self) -> _Buffer:
        """The calling thread's buffer, made on its first event."""
        try:
            return self._local.buf
        except AttributeError:
            pass
        thread = threading.current_thread()
        with self._lock:
            if threading.get_ident() == self._owner:
                track = None
            else:
                taken = {b.track for b in self._buffers}
                track = thread.name
                if track in taken or track == self.track:
                    track = f"{thread.name} ({thread.native_id})"
            buf = _Buffer(len(self._buffers), self._run, track)
            self._buffers.append(buf)
        self._local.buf = buf
        return buf

    def _sync(self, buf: _Buffer) -> None:
        """Unpack the buffer's step-sink batches, and mark a new run in it when one began."""
        if buf.state[0] or buf.chunks:
            self._flush(buf)
        if buf.run != self._run:
            buf.mark(self._run)

    # -- recording (hot path) ---------------------------------------------------------------

    def begin(self, key: int | str, /, track: str | None = None, **args: Any) -> EventEntry:
        """Start an event now; returns the entry to give to :meth:`end`.

        ``key`` is an ``int`` debug handle or a ``str`` name; ``track`` overrides the default
        track; ``args`` (op index, command id, op type ...) become columns of :meth:`to_frame`.
        """
        try:  # _open, inlined: this is the hot path
            buf = self._local.buf
        except AttributeError:
            buf = self._buffer()
        if buf.run != self._run or buf.state[0]:
            self._sync(buf)
        keys = buf.keys
        index = len(keys)
        keys.append(key)
        if track is not None:
            buf.tracks[index] = track
        buf.args.append(args or None)
        buf.ends.append(_OPEN)
        buf.starts.append(self._clock())
        return index | buf.base

    def _open(self, key: int | str, track: str | None,
              args: dict[str, Any]) -> tuple[_Buffer, EventEntry]:
        """Add an event not ended yet, all but its start time; return its buffer and entry."""
        try:
            buf = self._local.buf
        except AttributeError:
            buf = self._buffer()
        if buf.run != self._run or buf.state[0]:
            self._sync(buf)
        keys = buf.keys
        index = len(keys)
        keys.append(key)
        if track is not None:
            buf.tracks[index] = track
        buf.args.append(args or None)
        buf.ends.append(_OPEN)
        return buf, index | buf.base

    def end(self, entry: EventEntry) -> None:
        """End the event ``entry`` (from :meth:`begin`, in any thread) now.

        Raises:
            TraceError: the entry was ended before, was logged complete, or is not an entry of
                this tracer.
        """
        now = self._clock()
        try:  # 40 and 2**40 - 1 are _SHIFT and _MASK, as literals for speed
            ends = self._buffers[entry >> 40].ends
            index = entry & 0xFF_FFFF_FFFF
            if entry >= 0 and ends[index] == _OPEN:
                ends[index] = now
                return
        except (IndexError, TypeError):
            pass
        raise self._end_error(entry)

    def log(self, key: int | str, start_ns: int, end_ns: int, /, track: str | None = None,
            **args: Any) -> None:
        """Record a complete event whose start and end times (nanoseconds) are known.

        The times must come from the same clock as the tracer's for the events to line up. An
        end before the start is kept and flagged in ``problem`` by :meth:`to_frame`.
        """
        start = operator.index(start_ns)
        end = operator.index(end_ns)
        buf = self._buffer()
        if buf.run != self._run or buf.state[0]:
            self._sync(buf)
        keys = buf.keys
        index = len(keys)
        keys.append(key)
        if track is not None:
            buf.tracks[index] = track
        buf.args.append(args or None)
        buf.starts.append(start)
        buf.ends.append(end)

    def record(self, key: int | str, start_ns: int, end_ns: int,
               args: dict[str, Any] | None = None) -> None:
        """Like :meth:`log`, for a runtime's hot loop: ``args`` is a prepared dict that the
        tracer keeps (not copies), and the times must be ints from the tracer's clock."""
        try:
            buf = self._local.buf
        except AttributeError:
            buf = self._buffer()
        if buf.run != self._run or buf.state[0]:
            self._sync(buf)
        buf.keys.append(key)
        buf.args.append(args or None)
        buf.starts.append(start_ns)
        buf.ends.append(end_ns)

    def record_steps(self, keys: Sequence[int | str], times: Sequence[int],
                     args: Sequence[dict[str, Any] | None]) -> None:
        """Record back-to-back events at once: event ``i`` (key ``keys[i]``, arguments
        ``args[i]``) runs from ``times[i]`` to ``times[i + 1]``; ``times`` holds one more clock
        reading than there are events (fewer readings record fewer events)."""
        buf = self._buffer()
        self._sync(buf)
        self._append_steps(buf, _Steps(keys, args, None), times)

    def step_sink(self, keys: Sequence[int | str], args: Sequence[dict[str, Any] | None], *,
                  track: str | None = None, new_run: bool = False) -> StepSink:
        """A sink for a runtime that records the same back-to-back events at every inference:
        event ``i`` (key ``keys[i]``, arguments ``args[i]``, on ``track`` or the default track)
        runs from ``t[i]`` to ``t[i + 1]`` of the ``len(keys) + 1`` clock readings the runtime
        gives :meth:`StepSink.record` after each inference. With ``new_run=True`` each batch
        begins a new run, as if :meth:`new_run` were called before it.

        Batches are packed as int64s into byte chunks (8 bytes a reading, no Python object
        kept per inference) and unpacked when the events are next read or another event is
        recorded. ``keys`` and ``args`` are kept, not copied: do not change them afterwards.
        Asking again with the same ``keys`` and ``args`` objects returns the same sink. A sink
        belongs to the thread that asked for it: record into it from that thread only."""
        buf = self._buffer()
        ident = (id(keys), id(args), track, new_run)
        index = buf.sink_ids.get(ident)
        if index is None:  # the sink keeps keys and args alive, so their ids stay theirs
            index = buf.sink_ids[ident] = len(buf.sinks)
            buf.sinks.append(StepSink(buf, -1 - index, keys, args, track, new_run))
        return buf.sinks[index]

    def _flush(self, buf: _Buffer) -> None:
        """Unpack the batches of the buffer's step sinks into its event lists."""
        state, sinks = buf.state, buf.sinks
        chunks = [*buf.chunks, (state[1], state[0])]
        buf.chunks = []
        state[0] = 0
        for chunk, used in chunks:
            flat = np.frombuffer(chunk, np.int64, used // 8).tolist()
            p, end = 0, len(flat)
            while p < end:
                sink = sinks[-1 - flat[p]]
                q = p + len(sink.keys) + 2
                if sink.new_run:
                    self._start_run()
                self._append_steps(buf, sink, flat[p + 1:q])
                p = q

    def _append_steps(self, buf: _Buffer, sink: StepSink | _Steps,
                      times: Sequence[int]) -> None:
        n = min(len(times) - 1, len(sink.keys))
        if n <= 0:
            return
        if buf.run != self._run:
            buf.mark(self._run)
        keys = buf.keys
        if sink.track is not None:
            buf.tracks.update(dict.fromkeys(range(len(keys), len(keys) + n), sink.track))
        keys.extend(sink.keys[:n])
        buf.args.extend(sink.args[:n])
        buf.starts.extend(times[:n])
        buf.ends.extend(times[1:n + 1])

    def event(self, key: int | str, /, track: str | None = None, **args: Any) -> _Span:
        """Context manager timing its block as one event (ended even if the block raises).

        ``with tracer.event(7, op_index=3): run_op()``; ``as`` gives the entry. The event
        begins when ``event()`` is called, that is when the ``with`` statement starts.
        """
        buf, entry = self._open(key, track, args)
        span = _Span(self, entry)
        buf.starts.append(self._clock())
        return span

    # -- runs -------------------------------------------------------------------------------

    @property
    def run(self) -> int:
        """Index of the current run (inference); 0 at first."""
        buf = self._buffer()
        if buf.state[0] or buf.chunks:
            self._flush(buf)
        return self._run

    def new_run(self) -> int:
        """Start a new run (one inference) and return its index.

        Calling it before any event of the current run was recorded keeps the current index, so
        calling it at the start of every inference numbers the runs 0, 1, 2 ...
        """
        buf = self._buffer()
        if buf.state[0] or buf.chunks:
            self._flush(buf)
        self._start_run()
        return self._run

    def _start_run(self) -> None:
        run = self._run
        if any(b.in_run(run) for b in self._buffers):
            self._run = run + 1

    # -- inspection -------------------------------------------------------------------------

    def _flushed(self) -> list[_Buffer]:
        """Every buffer, its step-sink batches unpacked (read after recording is done)."""
        buffers = list(self._buffers)
        for buf in buffers:
            if buf.state[0] or buf.chunks:
                self._flush(buf)
        return buffers

    def __len__(self) -> int:
        """Number of events recorded (open ones included), by every thread."""
        return sum(len(b.keys) for b in self._flushed())

    def open_entries(self) -> list[EventEntry]:
        """Entries begun and not ended yet, oldest first (per thread, the threads in the order
        they first recorded)."""
        return [i | b.base for b in self._flushed() for i, end in enumerate(b.ends)
                if end == _OPEN]

    def clear(self) -> None:
        """Forget every event and reset the run index to 0 (old entries become invalid)."""
        self._run = 0
        for buf in self._buffers:
            buf.clear(0)

    def _merged(self) -> tuple[list[int | str], np.ndarray, np.ndarray, np.ndarray,
                               list[str], list[dict[str, Any] | None], list[EventEntry]]:
        """The events of every thread in the order they began: keys, starts, ends, runs,
        tracks, args and entries (one per event)."""
        buffers = [b for b in self._flushed() if b.keys]
        parts = []
        for buf in buffers:
            n = len(buf.keys)
            first = np.array(buf.firsts, dtype=np.int64)
            runs = np.array(buf.runs, dtype=np.int64)
            run = runs[np.searchsorted(first, np.arange(n), side="right") - 1]
            tracks = [buf.track or self.track] * n
            for index, track in buf.tracks.items():
                tracks[index] = track
            parts.append((buf, np.array(buf.starts[:n], dtype=np.int64),
                          np.array(buf.ends[:n], dtype=np.int64), run, tracks))
        if len(parts) == 1:
            buf, starts, ends, run, tracks = parts[0]
            return buf.keys, starts, ends, run, tracks, buf.args, list(range(len(buf.keys)))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return [], empty, empty, empty, [], [], []
        # each thread's order is kept; threads interleave by start (the running maximum of a
        # thread's starts, so a logged event out of order does not move its neighbours)
        order_key = np.concatenate([np.maximum.accumulate(p[1]) for p in parts])
        order = np.argsort(order_key, kind="stable")
        keys = [k for p in parts for k in p[0].keys]
        args = [a for p in parts for a in p[0].args]
        entries = [i | p[0].base for p in parts for i in range(len(p[0].keys))]
        tracks = [t for p in parts for t in p[4]]
        pick = order.tolist()
        return ([keys[i] for i in pick], np.concatenate([p[1] for p in parts])[order],
                np.concatenate([p[2] for p in parts])[order],
                np.concatenate([p[3] for p in parts])[order], [tracks[i] for i in pick],
                [args[i] for i in pick], [entries[i] for i in pick])

    def to_frame(self, *, open_events: Literal["raise", "keep"] = "raise") -> pd.DataFrame:
        """The events as a DataFrame, one row per event in the order they began (or were logged).

        Args:
            open_events: what to do with entries never ended: ``"raise"`` a
                :class:`~toolkit.errors.TraceError`, or ``"keep"`` them as rows with
                ``end_ns = start_ns``, ``dur_ns = 0`` and ``problem = "never ended"``.

        Returns:
            Columns: ``run`` (int64, run index), ``key`` (object: the ``int`` or ``str`` key as
            given), ``name`` (categorical ``str`` of the key), ``track`` (categorical ``str``),
            ``start_ns``, ``end_ns``, ``dur_ns`` (int64 nanoseconds of the tracer's clock), one
            column per argument name used (see
            :func:`~toolkit.formats.event_columns.arg_column`: ``int64`` when every event has an
            int, nullable ``Int64`` when some lack it, ...), then ``problem`` (``str``, ``""``
            when fine, else ``"never ended"`` or ``"negative duration"``). An empty tracer gives
            these columns with these dtypes and no rows.
        """
        raw_keys, starts, ends, run, tracks, all_args, entries = self._merged()
        n = len(raw_keys)
        problem = np.full(n, "", dtype=object)
        is_open = ends == _OPEN
        if is_open.any():
            opened = np.flatnonzero(is_open)
            if open_events == "raise":
                shown = ", ".join(f"{entries[int(i)]} (key {raw_keys[int(i)]!r})"
                                  for i in opened[:5])
                raise TraceError(f"{len(opened)} event(s) were begun and never ended: {shown}"
                                 + (" ..." if len(opened) > 5 else ""),
                                 where="EventTracer.to_frame",
                                 fix="call end(entry) for each, or to_frame(open_events='keep')")
            if open_events != "keep":
                raise ToolkitError(
                    f"open_events must be 'raise' or 'keep', not {open_events!r}",
                    fix="pass open_events='raise' (the default) or 'keep'",
                )
            ends[opened] = starts[opened]
            problem[opened] = "never ended"
        durations = ends - starts
        # int64 subtraction wraps when the operands have opposite signs and the result has
        # the sign of the subtrahend: such a duration is a problem row of 0 ns
        wrapped = ((ends ^ starts) < 0) & ((durations ^ ends) < 0)
        if wrapped.any():
            problem[wrapped & (problem == "")] = "duration overflows int64"
            durations[wrapped] = 0
        problem[(durations < 0) & (problem == "")] = "negative duration"

        keys = self._checked_keys(raw_keys)
        uniques = list(dict.fromkeys(keys))
        unique_names = [k if type(k) is str else str(k) for k in uniques]
        categories = list(dict.fromkeys(unique_names))
        position = {c: i for i, c in enumerate(categories)}
        code_of = {k: position[name] for k, name in zip(uniques, unique_names)}
        names = pd.Categorical.from_codes(
            np.fromiter(map(code_of.__getitem__, keys), np.int32, n),
            categories=pd.Index(categories, dtype=_STR_DTYPE))
        columns: dict[str, Any] = {
            "run": run,
            "key": pd.Series(np.fromiter(keys, object, n), dtype=object),
            "name": names,
            "track": pd.Categorical(tracks),
            "start_ns": starts,
            "end_ns": ends,
            "dur_ns": durations,
        }
        # runtimes give the same argument dicts at every inference: work per distinct dict
        ids = list(map(id, all_args))
        dict_of = dict(zip(ids, all_args))
        slot = dict.fromkeys(ids, 0)
        distinct = [dict_of[i] or {} for i in slot]
        for k, i in enumerate(slot):
            slot[i] = k
        codes = np.fromiter(map(slot.__getitem__, ids), np.intp, n)
        arg_names: dict[str, None] = {}
        for args in distinct:
            arg_names.update(dict.fromkeys(args))
        for arg in arg_names:
            if arg in EVENT_COLUMNS:
                raise ToolkitError(f"argument {arg!r} has the name of a column of the frame",
                                   where="EventTracer", fix=f"rename the argument {arg!r}")
            values = np.empty(len(distinct), dtype=object)  # filled one by one: no nesting
            for k, args in enumerate(distinct):
                values[k] = args.get(arg)
            columns[arg] = arg_column(values[codes].tolist())
        columns["problem"] = pd.Series(problem, dtype=_STR_DTYPE)
        frame = pd.DataFrame(columns)
        if n == 0:
            frame["track"] = pd.Categorical([], categories=pd.Index([], dtype=_STR_DTYPE))
        return frame

    @staticmethod
    def _checked_keys(keys: list[int | str]) -> list[int | str]:
        """The keys, numpy integers turned into ``int``; ``ToolkitError`` for other kinds."""
        if set(map(type, keys)) <= {int, str}:
            return keys
        checked: list[int | str] = []
        for index, key in enumerate(keys):
            if type(key) is str or (isinstance(key, (int, np.integer))
                                    and not isinstance(key, (bool, np.bool_))):
                checked.append(key if type(key) is str else int(key))
            else:
                raise ToolkitError(f"event key {key!r} is a {type(key).__name__}",
                                   where=f"event {index}",
                                   fix="use an int debug handle or a str name")
        return checked

    # -- errors -----------------------------------------------------------------------------

    def _end_error(self, entry: Any) -> TraceError:
        number, index = (entry >> _SHIFT, entry & _MASK) if type(entry) is int else (-1, -1)
        if (entry < 0 if type(entry) is int else True) or not (
                0 <= number < len(self._buffers) and index < len(self._buffers[number].ends)):
            return TraceError(f"end() got {entry!r}, which is not an entry of this tracer",
                              where="EventTracer.end",
                              fix="pass the value that begin() returned")
        key = self._buffers[number].keys[index]
        return TraceError(f"entry {entry} (key {key!r}) was already ended "
                          "(ended twice, or it was logged complete)",
                          where="EventTracer.end", fix="end each entry from begin() once")


_CHUNK_BYTES = 1 << 20  # step-sink batches are packed into chunks of this size


class _Steps(NamedTuple):
    """Keys, arguments and track of a batch of back-to-back events."""

    keys: Sequence[int | str]
    args: Sequence[dict[str, Any] | None]
    track: str | None


class StepSink:
    """What :meth:`EventTracer.step_sink` returns: records one inference's clock readings.

    ``record(t0, t1, ..., tn)`` is the plain call. Generated code does the same inline, with
    no Python call of its own::

        st = sink.state
        o = st[0]
        try:
            sink.pack_into(st[1], o, sink.id, t0, t1, ..., tn)
            st[0] = o + sink.size
        except struct.error:  # the chunk is full (or the readings are miscounted)
            sink.spill(t0, t1, ..., tn)

    Attributes:
        id: the sink's number (negative), first of each packed batch.
        size: bytes of a batch: ``8 * (len(keys) + 2)``.
        state: ``[bytes used, current chunk]``, shared by the tracer's sinks.
        pack_into: packs ``id`` and the readings as int64s into a chunk at an offset.
        keys, args, track, new_run: as given to :meth:`EventTracer.step_sink`.
    """

    __slots__ = ("_buffer", "args", "id", "keys", "new_run", "pack_into", "size", "state",
                 "track")

    def __init__(self, buffer: _Buffer, ident: int, keys: Sequence[int | str],
                 args: Sequence[dict[str, Any] | None], track: str | None,
                 new_run: bool) -> None:
        packer = struct.Struct(f"={len(keys) + 2}q")
        self._buffer = buffer
        self.id = ident
        self.keys = keys
        self.args = args
        self.track = track
        self.new_run = new_run
        self.size = packer.size
        self.pack_into = packer.pack_into
        self.state = buffer.state

    def record(self, *times: int) -> None:
        """Record one inference: ``len(keys) + 1`` clock readings (int nanoseconds).

        Raises:
            TraceError: the count of readings is wrong, or one is not an int64.
        """
        state = self.state
        offset = state[0]
        try:
            self.pack_into(state[1], offset, self.id, *times)
            state[0] = offset + self.size
        except struct.error:
            self.spill(*times)

    def spill(self, *times: int) -> None:
        """Record one inference in a new chunk: for when the current one is full."""
        if len(times) != len(self.keys) + 1:
            raise TraceError(f"a step sink of {len(self.keys)} event(s) got {len(times)} clock "
                             f"reading(s), not {len(self.keys) + 1}", where="StepSink.record",
                             fix="give one reading before the first step and one after each")
        batch = bytearray(self.size)
        try:
            self.pack_into(batch, 0, self.id, *times)
        except struct.error as e:
            raise TraceError(f"clock readings must be int64 nanoseconds: {e}",
                             where="StepSink.record", fix="use an integer-nanosecond clock"
                             ) from None
        self._buffer.new_chunk(self.size)
        state = self.state
        state[1][:self.size] = batch
        state[0] = self.size


class _Span:
    """What ``tracer.event()`` returns: ``with`` gives the entry and ends it on exit."""

    __slots__ = ("_entry", "_tracer")

    def __init__(self, tracer: EventTracer, entry: EventEntry) -> None:
        self._tracer = tracer
        self._entry = entry

    def __enter__(self) -> EventEntry:
        return self._entry

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._tracer.end(self._entry)
