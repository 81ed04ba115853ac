"""Recording a run as it happens: one writer thread, so the event loop never waits on disk."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread

from coordinator.store.schema import StoreError, connect


def now_iso() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


_Op = Callable[[sqlite3.Connection], object]

# A test hook, inert unless set (tests/reliability/test_kill_anywhere.py): with
# FANOUT_TEST_KILL_AT_WRITE=N the process SIGKILLs itself inside its Nth store write,
# after the write's statement ran and before its transaction commits.
_KILL_AT_WRITE = int(os.environ.get("FANOUT_TEST_KILL_AT_WRITE") or 0)


class _Writer:
    """One thread that owns the writing connection and applies queued operations in order."""

    def __init__(self, path: Path) -> None:
        self._queue: queue.SimpleQueue[tuple[_Op, threading.Event | None] | None] = (
            queue.SimpleQueue()
        )
        self._conn = connect(path)
        self.error: Exception | None = None
        self._writes = 0
        self._thread = threading.Thread(target=self._loop, name="fanout-store", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            ops = [item]
            # Batch what is already queued into one transaction: one fsync for many events.
            while len(ops) < 512:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                ops.append(nxt)
            try:
                self._conn.execute("BEGIN")
                for op, _ in ops:
                    op(self._conn)
                    if _KILL_AT_WRITE:
                        self._writes += 1
                        if self._writes == _KILL_AT_WRITE:
                            os.kill(os.getpid(), signal.SIGKILL)
                self._conn.execute("COMMIT")
            except Exception as exc:  # recorded, and raised in the waiting caller's thread
                self.error = exc
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            for _, done in ops:
                if done is not None:
                    done.set()
        self._conn.close()

    def submit(self, op: _Op) -> None:
        """Queue ``op``; it will be applied in order, in a transaction."""
        self._queue.put((op, None))

    def submit_and_wait(self, op: _Op) -> None:
        """Queue ``op`` and block until it (and all before it) is committed."""
        done = threading.Event()
        self._queue.put((op, done))
        done.wait()
        if self.error is not None:
            raise StoreError(f"writing the run store failed: {self.error}")

    def close(self) -> None:
        """Flush everything queued and stop the thread."""
        self._queue.put(None)
        self._thread.join()


class RunRecorder:
    """Records one run (or one resumed session of it) as it happens."""

    def __init__(self, path: Path, run_id: str, session: int) -> None:
        self.path = path
        self.run_id = run_id
        self.session = session
        self._writer = _Writer(path)
        self._seq = self._last_seq()

    @property
    def seq(self) -> int:
        """The sequence number of the last event recorded (0 before the first)."""
        return self._seq

    def _last_seq(self) -> int:
        conn = connect(self.path)
        try:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (self.run_id,)
            ).fetchone()
            return int(row[0])
        finally:
            conn.close()

    def event(self, subtask_id: str, kind: str, at: float, data: dict[str, Any]) -> None:
        """Append one trace event (never blocks on the disk)."""
        self._seq += 1
        row = (self.run_id, self._seq, self.session, subtask_id, kind, at, json.dumps(data))
        self._writer.submit(lambda c: c.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?)", row))

    def checkpoint(self, subtask_id: str, state: dict[str, Any], *, durable: bool = False) -> None:
        """Record a subagent's latest resumable state (never blocks on the disk, unless
        ``durable``: then it returns once the state is committed)."""
        row = (self.run_id, subtask_id, json.dumps(state))

        def op(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?,?)", row)

        if durable:
            self._writer.submit_and_wait(op)
        else:
            self._writer.submit(op)

    async def commit_result(
        self, subtask_id: str, result: dict[str, Any], state: dict[str, Any]
    ) -> None:
        """Commit a subagent's result and final state; returns once it is on disk."""
        rrow = (self.run_id, subtask_id, self.session, json.dumps(result))
        crow = (self.run_id, subtask_id, json.dumps(state))

        def op(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR REPLACE INTO results VALUES (?,?,?,?)", rrow)
            c.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?,?)", crow)

        await anyio.to_thread.run_sync(self._writer.submit_and_wait, op)

    async def finish(
        self, report: dict[str, Any], escalations: Sequence[tuple[str, str, str]]
    ) -> None:
        """Record the final report and its escalations; the run is finished."""
        run_id = self.run_id

        def op(c: sqlite3.Connection) -> None:
            for subtask_id, route, payload in escalations:
                c.execute(
                    "INSERT OR REPLACE INTO escalations VALUES (?,?,?,?)",
                    (run_id, subtask_id, route, payload),
                )
            c.execute(
                "UPDATE runs SET status='finished', finished_at=?, outcome=?, coverage=?, "
                "elapsed_s=?, report_json=?, pid=NULL WHERE id=?",
                (
                    now_iso(),
                    report["outcome"],
                    report["coverage"],
                    report["elapsed_s"],
                    json.dumps(report),
                    run_id,
                ),
            )

        await anyio.to_thread.run_sync(self._writer.submit_and_wait, op)

    def close(self) -> None:
        """Flush and stop the writer."""
        self._writer.close()


