"""A run's event stream (``GET /runs/{id}/events``): the store's history, then live events.

Each event is the row ``RunStore.events`` returns, as one SSE message::

    id: 12
    event: attempt
    data: {"seq": 12, "session": 1, "subtask_id": "market", "kind": "attempt", ...}

``id`` is the store's sequence number, so ``Last-Event-ID`` resumes after it. The last
message is ``event: end`` (no ``id``; its data names the run's status and outcome); a
comment (``: ping``) comes after every ``ping_interval_s`` of silence.

A run this server executes is followed in memory: its recorder appends every event to
the run's :class:`EventLog` as it records it, so a stream never waits on the disk and
never misses an event the writer thread has not committed yet. Earlier sessions of a
resumed run, finished runs and runs another process is running are read from the store
(the last kind woken by the store's notifications on Postgres, by polling on SQLite,
until it stops running). When the server stops, streams end
without ``end``; an ``EventSource`` reconnects with ``Last-Event-ID`` by itself.

A run a person may decide in (docs/design.md §17) also has *notes* in its log: the
desk's ``decision.needed``, ``decision.made`` and ``request.made``, each one message
without ``id`` (so ``Last-Event-ID`` still counts stored events only), in order among
the events, live only: nothing of them is in the store, and ``GET /runs/{id}/pending``
says what waits whenever a client (re)connects.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol

import anyio
import anyio.to_thread

from coordinator.serve.records import ServiceRecords
from coordinator.store.backend import Backend
from coordinator.store.recorder import RunRecorder
from coordinator.store.runs import RunStore
from coordinator.store.writer import LEASE_S, StoreWriter
from subagents.telemetry import record_event_delivery

PING: Final = b": ping\n\n"
RETRY: Final = b"retry: 2000\n\n"  # reconnect after 2 s rather than the browser's default


def frame(payload: dict[str, Any]) -> bytes:
    """One stored event as an SSE message (``id`` = seq, ``event`` = kind)."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"id: {payload['seq']}\nevent: {payload['kind']}\ndata: {data}\n\n".encode()


def note_frame(event: str, data: dict[str, Any]) -> bytes:
    """A live note (a desk's event) as an SSE message: no ``id``, so a reconnect's
    ``Last-Event-ID`` still names the last stored event."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {text}\n\n".encode()


def end_frame(summary: dict[str, Any]) -> bytes:
    """The last message of a stream: the run's status (and outcome once finished)."""
    data = json.dumps(summary, ensure_ascii=False, separators=(",", ":"))
    return f"event: end\ndata: {data}\n\n".encode()


PublishHook = Callable[[str, int], None]


class EventLog:
    """The events of one session of a run, in order, for every stream following it."""

    def __init__(self, run_id: str, base_seq: int) -> None:
        self.run_id = run_id
        self.base_seq = base_seq  # events up to here are in the store (earlier sessions)
        self.frames: list[bytes] = []  # frames[i] is event base_seq + i + 1
        self.published: list[float] = []  # when frames[i] was appended (delivery latency)
        # Live notes: (number of frames before it, the message), in order.
        self.notes: list[tuple[int, bytes]] = []
        self.end: bytes | None = None
        self.closed = False
        self._changed = anyio.Event()

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest event."""
        return self.base_seq + len(self.frames)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def append(self, seq: int, data: bytes) -> None:
        """Add the next event; every follower wakes."""
        if seq != self.last_seq + 1:  # a recorder numbers events one by one
            raise RuntimeError(f"run {self.run_id}: event {seq} after {self.last_seq}")
        self.frames.append(data)
        self.published.append(time.monotonic())
        self._wake()

    def note(self, data: bytes) -> None:
        """Add a live note after the events so far; every follower wakes."""
        self.notes.append((len(self.frames), data))
        self._wake()

    def finish(self, end: bytes) -> None:
        """The run ended: followers get ``end`` after the last event."""
        self.end = end
        self._wake()

    def close(self) -> None:
        """The server stops: followers end without ``end`` (they will reconnect)."""
        self.closed = True
        self._wake()

    async def wait(self, seen: int, seen_notes: int = 0) -> None:
        """Return once there are more than ``seen`` frames or ``seen_notes`` notes, an
        end, or a close."""
        changed = self._changed
        if (len(self.frames) > seen or len(self.notes) > seen_notes or self.end is not None
                or self.closed):
            return
        await changed.wait()

    def first_note_at(self, index: int) -> int:
        """The number of the first note that came after frame ``index`` was appended."""
        for i, (at, _) in enumerate(self.notes):
            if at >= index:
                return i
        return len(self.notes)


class Bells:
    """Wake-ups per run for streams of runs another process writes (rung by the store's
    notifications; where the store cannot notify, streams poll instead)."""

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}

    def ring(self, run_id: str) -> None:
        """New events (or the end) of ``run_id`` are in the store."""
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()

    def armed(self, run_id: str) -> bool:
        """Whether a stream waits for ``run_id`` (safe to ask from the listener's thread:
        a stale answer only costs, or saves, one hop into the event loop)."""
        return run_id in self._events

    def ring_all(self) -> None:
        """Wake every waiting stream (the server stops, or notifications were lost)."""
        events, self._events = self._events, {}
        for event in events.values():
            event.set()

    def arm(self, run_id: str) -> anyio.Event:
        """The event the next ring for ``run_id`` sets (armed before reading the store,
        so a ring between the read and the wait is not missed)."""
        return self._events.setdefault(run_id, anyio.Event())


class ServedRecorder(RunRecorder):
    """A run recorder that also appends every event to the run's :class:`EventLog`."""

    def __init__(
        self,
        backend: Backend,
        run_id: str,
        session: int,
        log: EventLog,
        on_publish: PublishHook | None = None,
        *,
        writer: StoreWriter | None = None,
    ) -> None:
        super().__init__(backend, run_id, session, writer=writer)
        if self.seq != log.base_seq:
            # Someone else recorded events for this run since it was claimed.
            self.close()
            raise RuntimeError(f"run {run_id}: store at event {self.seq}, log at {log.base_seq}")
        self.log = log
        self.on_publish = on_publish

    def event(self, subtask_id: str, kind: str, at: float, data: dict[str, Any]) -> None:
        """Record the event, then hand it to the streams."""
        super().event(subtask_id, kind, at, data)
        seq = self.seq
        payload = {"seq": seq, "session": self.session, "subtask_id": subtask_id,
                   "kind": kind, "at": at} | data
        self.log.append(seq, frame(payload))
        if self.on_publish is not None:
            self.on_publish(self.run_id, seq)


class StreamSource(Protocol):
    """What a stream needs from the run manager."""

    store: RunStore
    records: ServiceRecords
    stopping: bool
    bells: Bells

    def log_of(self, run_id: str) -> EventLog | None:
        """The live log of a run this server executes (None otherwise)."""
        ...

    def end_summary(self, run_id: str) -> Awaitable[dict[str, Any]]:
        """The data of the ``end`` message of a run that stopped."""
        ...


async def run_events(
    source: StreamSource, run_id: str, after: int, *, ping_s: float, poll_s: float
) -> AsyncIterator[bytes]:
    """The SSE body of ``GET /runs/{run_id}/events``, resuming after event ``after``."""
    yield RETRY
    log = source.log_of(run_id)
    stream = (
        _follow(source, log, after, ping_s)
        if log is not None
        else _poll(source, run_id, after, ping_s=ping_s, poll_s=poll_s)
    )
    async for chunk in stream:
        yield chunk


async def _follow(
    source: StreamSource, log: EventLog, last: int, ping_s: float
) -> AsyncIterator[bytes]:
    """A run this server executes: earlier sessions from the store, then from memory."""
    if last < log.base_seq:
        events = await anyio.to_thread.run_sync(
            source.records.events_after, log.run_id, last, log.base_seq
        )
        if events:
            yield b"".join(frame(e) for e in events)
        last = log.base_seq
    index = last - log.base_seq
    noted = log.first_note_at(index)
    while True:
        if index < len(log.frames) or noted < len(log.notes):
            upto = len(log.frames)
            # Notes go between the frames they came between.
            parts: list[bytes] = []
            start = index
            while noted < len(log.notes):
                at, note = log.notes[noted]
                parts.append(b"".join(log.frames[index:at]))
                parts.append(note)
                index = max(index, at)
                noted += 1
            parts.append(b"".join(log.frames[index:upto]))
            yield b"".join(parts)
            delivered(log.published[start:upto])
            index = upto
            continue
        if log.end is not None:
            yield log.end
            return
        if log.closed or source.stopping:
            return
        with anyio.move_on_after(ping_s) as quiet:
            await log.wait(index, noted)
        if quiet.cancelled_caught:
            yield PING


def delivered(published: list[float]) -> None:
    """Events written to a stream: their delivery latency goes to /metrics."""
    now = time.monotonic()
    for at in published:
        record_event_delivery(now - at)


async def _poll(
    source: StreamSource, run_id: str, last: int, *, ping_s: float, poll_s: float
) -> AsyncIterator[bytes]:
    """A run this server does not execute, from the store: polled while it still runs."""
    quiet = 0.0
    orphaned_at: float | None = None
    while True:
        bell = source.bells.arm(run_id)
        events = await anyio.to_thread.run_sync(source.records.events_after, run_id, last)
        if events:
            last = events[-1]["seq"]
            quiet = 0.0
            yield b"".join(frame(e) for e in events)
        row = await anyio.to_thread.run_sync(source.store.get, run_id)
        if row.status == "interrupted" and orphaned_at is None:
            orphaned_at = anyio.current_time()
        elif row.status != "interrupted":
            orphaned_at = None
        # A holder that died is replaced by another (a server adopts the run, Temporal
        # gives the rounds to a live worker): the stream waits for that as long as a
        # lease lasts before it ends with the run `interrupted`.
        orphaned = orphaned_at is not None and anyio.current_time() - orphaned_at >= LEASE_S
        if row.status == "finished" or orphaned:
            # Whatever it wrote before it stopped is in the store now.
            tail = await anyio.to_thread.run_sync(source.records.events_after, run_id, last)
            if tail:
                yield b"".join(frame(e) for e in tail)
            yield end_frame(await source.end_summary(run_id))
            return
        if source.stopping:
            return
        log = source.log_of(run_id)
        if log is not None:
            # This server took the run over (a resume): follow it from here.
            async for chunk in _follow(source, log, last, ping_s):
                yield chunk
            return
        if source.store.backend.notifies:
            # Postgres tells when the run's holder commits events: no polling. The
            # poll interval still bounds the wait, in case a notification is missed.
            started = anyio.current_time()
            with anyio.move_on_after(min(ping_s, max(poll_s, 5.0))):
                await bell.wait()
            quiet += anyio.current_time() - started
        else:
            await anyio.sleep(poll_s)
            quiet += poll_s
        if quiet >= ping_s:
            quiet = 0.0
            yield PING
