"""The one writer: a thread that owns a connection and applies queued writes in order.

Every write of a run goes through a :class:`StoreWriter`, whoever makes it: a local run's
recorder, the service's submissions, a Temporal worker's rounds. Writes queued while a
transaction commits go into the next one together (one commit for many events, one for
many submissions), so the event loop never waits on the database except where it must
(a result committed before it is counted), and then in a worker thread.

Two things make it safe for several processes writing one run (Temporal workers): an
event given no sequence number takes the run's next one inside the transaction, under
the backend's per-run lock; and the transaction notifies listeners (Postgres) of the runs
it wrote, so readers elsewhere wake without polling.

The writer also keeps the leases of the runs it holds (see ``coordinator.store.runs``):
while this process lives, their ``lease_until`` stays ahead of the clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import anyio
import anyio.to_thread

from coordinator.store.backend import CANCELS_CHANNEL, EVENTS_CHANNEL, Backend, Conn
from coordinator.store.schema import StoreError

T = TypeVar("T")

# How long a run stays ``running`` for readers on other hosts after its holder last
# renewed it; renewed every third of that.
LEASE_S: Final = 30.0
_RENEW_S: Final = LEASE_S / 3
_BATCH: Final = 512

# A test hook, inert unless set (tests/reliability/test_kill_anywhere.py): with
# FANOUT_TEST_KILL_AT_WRITE=N the process SIGKILLs itself inside its Nth store write,
# after the write's statement ran and before its transaction commits.
_KILL_AT_WRITE = int(os.environ.get("FANOUT_TEST_KILL_AT_WRITE") or 0)
# Its twin: with FANOUT_TEST_STOP_AFTER_EVENTS=N the process stops itself (SIGSTOP) once
# its commits hold N trace events, wherever its other threads are; the test, told by
# waitpid that it stopped, SIGKILLs it. A kill from outside at the Nth event, without
# a poller racing the run (which needed a slow run, and lost under load).
_STOP_AFTER_EVENTS = int(os.environ.get("FANOUT_TEST_STOP_AFTER_EVENTS") or 0)


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio (the tests' virtual time)
        return False
    return True


def now_iso() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def lease_end() -> float:
    """When a lease taken or renewed now ends (epoch seconds)."""
    return time.time() + LEASE_S


class Tx:
    """What an operation sees inside the writer's transaction."""

    def __init__(self, backend: Backend, conn: Conn) -> None:
        self.backend = backend
        self.conn = conn
        self.events_of: set[str] = set()  # runs whose events this transaction wrote
        self.events = 0  # how many
        self.cancels_of: set[str] = set()
        # The last event number this transaction gave each run it locked: the run's lock
        # is held to the commit, so the next one is this plus one, without asking again
        # (on Postgres two round trips fewer per event of a batch).
        self._last_seq: dict[str, int] = {}

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement of the transaction."""
        return self.conn.execute(sql, params)

    def next_seq(self, run_id: str) -> int:
        """The run's next event number, under the run's lock (taken on first use)."""
        last = self._last_seq.get(run_id)
        if last is None:
            self.backend.lock_run(self.conn, run_id)
            last = int(self.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()[0])
        self._last_seq[run_id] = last + 1
        return last + 1

    def took_seq(self, run_id: str, seq: int) -> int:
        """``seq``, given by the caller: a number :meth:`next_seq` must not give again."""
        last = self._last_seq.get(run_id)
        if last is not None and seq > last:
            self._last_seq[run_id] = seq
        return seq

    def forget_seqs(self) -> None:
        """Ask the database again (after a savepoint undid events this transaction
        numbered)."""
        self._last_seq.clear()


Op = Callable[[Tx], Any]


@dataclass(frozen=True)
class _Failed:
    """What a waited-for write raised (undone alone, inside its savepoint)."""

    error: Exception

_Item = tuple[Op, "Future[Any] | None"]
# What the queue holds: an item, and whether it was queued ``first`` (applied ahead of
# the others taken with it).
_Queued = tuple[Op, "Future[Any] | None", bool]


class StoreWriter:
    """One process's writes to one store, applied in order by a thread of its own."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._queue: queue.SimpleQueue[_Queued | None] = queue.SimpleQueue()
        self._conn = backend.writer_connection()
        self.error: Exception | None = None
        self._writes = 0
        self._events = 0
        self._held: set[str] = set()
        self._pid = os.getpid()
        self._host = socket.gethostname()
        self._thread = threading.Thread(target=self._loop, name="fanout-store", daemon=True)
        self._thread.start()

    # -- the thread ------------------------------------------------------------------

    def _loop(self) -> None:
        renew_at = time.monotonic() + _RENEW_S
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, renew_at - time.monotonic()))
            except queue.Empty:
                item = (self._renew, None, False)
            if item is None:
                break
            taken = [item]
            stopping = False
            while len(taken) < _BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                taken.append(nxt)
            firsts: list[_Item] = [(op, future) for op, future, first in taken if first]
            items: list[_Item] = [(op, future) for op, future, first in taken if not first]
            if time.monotonic() >= renew_at:
                items.append((self._renew, None))
                renew_at = time.monotonic() + _RENEW_S
            if firsts:
                self._apply(firsts)
            if items:
                self._apply(items)
            if stopping:
                break
        self.backend.release(self._conn)

    def _apply(self, items: list[_Item]) -> None:
        failed: Exception | None = None
        try:
            results = self._transaction(items, isolate=False)
        except Exception as exc:
            failed = exc
        if failed is not None and sum(future is not None for _, future in items) > 1:
            # Which write failed? Again, each waited-for one in a savepoint of its own:
            # only that one is undone and only its caller hears of it. (The first try
            # has no savepoints: each costs a round trip and, with the event loop
            # busy, a wait for the GIL; 50 submissions at once took 2.5 ms each.)
            try:
                results = self._transaction(items, isolate=True)
                failed = None
            except Exception as exc:
                failed = exc
        if failed is not None:  # recorded, and raised in the callers that wait
            self.error = failed
            results = [_Failed(failed)] * len(items)
        for index, (_, future) in enumerate(items):
            if future is None:
                continue
            own = results[index]
            if isinstance(own, _Failed):
                future.set_exception(StoreError(
                    f"{self.backend.where}: writing the run store failed: {own.error}"))
            else:
                future.set_result(own)

    def _transaction(self, items: list[_Item], *, isolate: bool) -> list[Any]:
        """Apply ``items`` in one transaction; their results (or, isolated, what a
        waited-for one raised)."""
        results: list[Any] = []
        with self.backend.transaction(self._conn):
            tx = Tx(self.backend, self._conn)
            for op, future in items:
                isolated = isolate and future is not None
                results.append(self._isolated(op, tx) if isolated else op(tx))
                if _KILL_AT_WRITE:
                    self._writes += 1
                    if self._writes == _KILL_AT_WRITE:
                        os.kill(os.getpid(), signal.SIGKILL)
            for run_id in sorted(tx.events_of):
                self.backend.notify(self._conn, EVENTS_CHANNEL, run_id)
            for run_id in sorted(tx.cancels_of):
                self.backend.notify(self._conn, CANCELS_CHANNEL, run_id)
        if _STOP_AFTER_EVENTS:  # committed
            self._events += tx.events
            if self._events >= _STOP_AFTER_EVENTS:
                os.kill(os.getpid(), signal.SIGSTOP)
        return results

    @staticmethod
    def _isolated(op: Op, tx: Tx) -> Any:
        """Apply a waited-for ``op`` inside a savepoint: when it fails (a submission whose
        id or key another server took a moment before), only it is undone and only its
        caller hears of it; the others in the transaction (other runs' events, other
        submissions) still commit. Writes nobody waits for run bare: their failure is the
        store's, and fails the transaction."""
        tx.execute("SAVEPOINT fanout_op")
        try:
            result = op(tx)
            tx.backend.sync(tx.conn)  # its statements' errors surface here, as its own
        except Exception as exc:
            # The error may surface mid-op (Postgres reads a pipelined statement's error
            # when a later one is sent, or at a read): the pipeline then refuses all
            # sent after it until a sync. Sync first (what it raises are those
            # refusals), or the rollback itself is refused and fails the whole batch.
            with suppress(*tx.backend.errors):
                tx.backend.sync(tx.conn)
            tx.execute("ROLLBACK TO SAVEPOINT fanout_op")
            tx.forget_seqs()
            result = _Failed(exc)
        tx.execute("RELEASE SAVEPOINT fanout_op")
        return result

    def _renew(self, tx: Tx) -> None:
        if self._held:
            held = sorted(self._held)
            marks = ",".join("?" * len(held))
            tx.execute(
                f"UPDATE runs SET lease_until = ? WHERE id IN ({marks}) "
                "AND status IN ('queued', 'running') AND pid = ? AND host = ?",
                (lease_end(), *held, self._pid, self._host),
            )

    # -- queueing --------------------------------------------------------------------

    def submit(self, op: Op) -> None:
        """Queue ``op``; it is applied in order, in a transaction (never blocks)."""
        self._queue.put((op, None, False))

    def call(self, op: Callable[[Tx], T]) -> T:
        """Queue ``op`` and block until it (and all before it) is committed; its result.

        Raises:
            StoreError: the transaction that held it failed.
        """
        return self.enqueue(op).result()

    def enqueue(self, op: Callable[[Tx], T], *, first: bool = False) -> Future[T]:
        """Queue ``op``; a future of its result (set once its transaction commits).
        ``first``: see :meth:`acall`."""
        future: Future[T] = Future()
        self._queue.put((op, future, first))
        return future

    async def acall(self, op: Callable[[Tx], T], *, first: bool = False) -> T:
        """:meth:`call` from async code. On asyncio the task awaits the commit itself (no
        worker thread is held per waiting caller: fifty submissions at once would
        otherwise queue for anyio's forty threads); elsewhere a worker thread waits.
        Either way the wait is not cut by cancellation: the write is queued already.

        ``first``: ``op`` depends on nothing queued before it (a new run's submission),
        so it goes into a transaction of its own ahead of the writes queued with it, and
        its caller does not wait for another run's events to commit too.
        """
        future = self.enqueue(op, first=first)
        with anyio.CancelScope(shield=True):
            if _on_asyncio():
                waiting = asyncio.wrap_future(future)
                await asyncio.wait([waiting])
                waiting.exception()  # retrieved here; raised below, from the original
            else:
                await anyio.to_thread.run_sync(future.exception)
        return future.result()

    async def flush(self) -> None:
        """Return once everything submitted so far is committed (raise what failed)."""
        await self.acall(lambda tx: None)

    def close(self) -> None:
        """Flush everything queued and stop the thread."""
        self._queue.put(None)
        self._thread.join()

    # -- the writes --------------------------------------------------------------------

    def hold(self, run_id: str) -> None:
        """Keep ``run_id``'s lease while this process lives (and it is not finished)."""
        self._held.add(run_id)

    def let_go(self, run_id: str) -> None:
        """Stop renewing ``run_id``'s lease."""
        self._held.discard(run_id)

    def event(
        self, run_id: str, session: int, subtask_id: str, kind: str, at: float,
        data: dict[str, Any], *, seq: int | None = None,
    ) -> None:
        """Append one trace event; with no ``seq``, it takes the run's next number."""
        payload = json.dumps(data)

        def op(tx: Tx) -> None:
            number = tx.next_seq(run_id) if seq is None else tx.took_seq(run_id, seq)
            tx.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?)",
                       (run_id, number, session, subtask_id, kind, at, payload))
            tx.events_of.add(run_id)
            tx.events += 1

        self.submit(op)

    def checkpoint(self, run_id: str, subtask_id: str, state: dict[str, Any],
                   *, durable: bool = False) -> None:
        """Record a subagent's latest resumable state (``durable``: wait for the commit)."""
        row = (run_id, subtask_id, json.dumps(state))

        def op(tx: Tx) -> None:
            tx.execute(
                "INSERT INTO checkpoints VALUES (?,?,?) ON CONFLICT (run_id, subtask_id) "
                "DO UPDATE SET state_json = excluded.state_json", row)

        if durable:
            self.call(op)
        else:
            self.submit(op)

    async def commit_result(
        self, run_id: str, subtask_id: str, session: int, result: dict[str, Any],
        state: dict[str, Any],
    ) -> None:
        """Commit a subagent's result and final state; returns once both are committed."""
        rrow = (run_id, subtask_id, session, json.dumps(result))
        crow = (run_id, subtask_id, json.dumps(state))

        def op(tx: Tx) -> None:
            tx.execute(
                "INSERT INTO results VALUES (?,?,?,?) ON CONFLICT (run_id, subtask_id) "
                "DO UPDATE SET session = excluded.session, result_json = excluded.result_json",
                rrow)
            tx.execute(
                "INSERT INTO checkpoints VALUES (?,?,?) ON CONFLICT (run_id, subtask_id) "
                "DO UPDATE SET state_json = excluded.state_json", crow)

        await self.acall(op)

    async def finish(
        self, run_id: str, report: dict[str, Any], escalations: Sequence[tuple[str, str, str]]
    ) -> None:
        """Record the final report and its escalations; the run is finished."""

        def op(tx: Tx) -> None:
            for subtask_id, route, payload in escalations:
                tx.execute(
                    "INSERT INTO escalations VALUES (?,?,?,?) ON CONFLICT (run_id, subtask_id) "
                    "DO UPDATE SET route = excluded.route, "
                    "escalation_json = excluded.escalation_json",
                    (run_id, subtask_id, route, payload))
            tx.execute(
                "UPDATE runs SET status='finished', finished_at=?, outcome=?, coverage=?, "
                "elapsed_s=?, report_json=?, pid=NULL, lease_until=NULL WHERE id=?",
                (now_iso(), report["outcome"], report["coverage"], report["elapsed_s"],
                 json.dumps(report), run_id))
            tx.events_of.add(run_id)  # followers elsewhere learn that it ended

        await self.acall(op)
        self.let_go(run_id)

    def claim(self, run_id: str) -> None:
        """Name this process as the one running ``run_id`` (while it is not finished)."""
        row = (self._pid, self._host, lease_end(), run_id)
        self.hold(run_id)
        self.submit(lambda tx: tx.execute(
            "UPDATE runs SET pid=?, host=?, lease_until=? WHERE id=? "
            "AND status IN ('queued', 'running')", row))
