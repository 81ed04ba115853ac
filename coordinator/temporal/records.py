"""Recording a Temporal run in the run store, from whichever worker runs its subagents.

A local run has one recorder in one process. A Temporal run is written by every worker
that runs one of its rounds, so two things differ, and only those:

- an event's sequence number is taken inside the transaction that inserts it
  (``MAX(seq) + 1``), so concurrent writers in several processes never collide;
- the run's ``pid``/``host`` name the worker that last started one of its rounds, so
  ``fanout runs`` shows it running while a live worker holds it.

A side table, ``temporal_runs``, names the workflow behind each Temporal run, so
``fanout resume`` can refuse a run that Temporal owns and ``fanout report`` users can
find it. Everything else (results, checkpoints, the final report) is written exactly as
a local run writes it, so ``fanout runs``, ``report``, ``gaps`` and ``trace`` read a
Temporal run like any other.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sqlite3
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from coordinator.routing import RoutingTable
from coordinator.store.recorder import RunRecorder
from coordinator.store.schema import StoreError, connect
from coordinator.temporal.payloads import FinishInput

_TEMPORAL_RUNS = (
    "CREATE TABLE IF NOT EXISTS temporal_runs ("
    "run_id TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, address TEXT NOT NULL, "
    "namespace TEXT NOT NULL, task_queue TEXT NOT NULL)"
)

_Op = Callable[[sqlite3.Connection], object]


@dataclass(frozen=True, slots=True)
class TemporalRunRef:
    """Where a Temporal run's workflow lives."""

    run_id: str
    workflow_id: str
    address: str
    namespace: str
    task_queue: str


def register_run(path: Path, ref: TemporalRunRef) -> None:
    """Note that run ``ref.run_id`` of the store at ``path`` runs on Temporal."""
    conn = connect(path)
    try:
        conn.execute(_TEMPORAL_RUNS)
        conn.execute(
            "INSERT OR REPLACE INTO temporal_runs VALUES (?,?,?,?,?)",
            (ref.run_id, ref.workflow_id, ref.address, ref.namespace, ref.task_queue),
        )
    finally:
        conn.close()


def temporal_run(path: Path, run_id: str) -> TemporalRunRef | None:
    """The workflow behind run ``run_id``, or None for a local run."""
    if not path.exists():
        return None
    conn = connect(path, create=False)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "temporal_runs" not in tables:
            return None
        row = conn.execute(
            "SELECT run_id, workflow_id, address, namespace, task_queue FROM temporal_runs "
            "WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    finally:
        conn.close()
    return None if row is None else TemporalRunRef(*row)


class StoreWriter:
    """One worker's writes to one store file: a thread applies them in order, batched."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[tuple[_Op, threading.Event | None] | None] = (
            queue.SimpleQueue()
        )
        self._conn = connect(path)
        self._error: Exception | None = None
        self._pid = os.getpid()
        self._host = socket.gethostname()
        self._thread = threading.Thread(target=self._loop, name="fanout-temporal-store")
        self._thread.daemon = True
        self._thread.start()

    def _loop(self) -> None:
        while (item := self._queue.get()) is not None:
            ops = [item]
            # What is queued already goes into the same transaction: one commit for many.
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
                # IMMEDIATE: take the write lock first, so MAX(seq) is read under it.
                self._conn.execute("BEGIN IMMEDIATE")
                for op, _ in ops:
                    op(self._conn)
                self._conn.execute("COMMIT")
            except Exception as exc:  # kept, and raised in the next caller that waits
                self._error = exc
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            for _, done in ops:
                if done is not None:
                    done.set()
        self._conn.close()

    def _submit(self, op: _Op) -> None:
        self._queue.put((op, None))

    def _submit_and_wait(self, op: _Op) -> None:
        done = threading.Event()
        self._queue.put((op, done))
        done.wait()
        error, self._error = self._error, None
        if error is not None:
            raise StoreError(f"{self.path}: writing the run store failed: {error}")

    async def flush(self) -> None:
        """Return once everything submitted so far is on disk (raise what failed)."""
        await anyio.to_thread.run_sync(self._submit_and_wait, lambda c: None)

    def claim(self, run_id: str) -> None:
        """Name this worker as the process running ``run_id`` (while it is not finished)."""
        row = (self._pid, self._host, run_id)
        self._submit(
            lambda c: c.execute(
                "UPDATE runs SET pid=?, host=? WHERE id=? AND status='running'", row
            )
        )

    def event(
        self,
        run_id: str,
        session: int,
        subtask_id: str,
        kind: str,
        at: float,
        data: dict[str, Any],
    ) -> None:
        """Append one trace event; its sequence number is the run's next."""
        row = (run_id, session, subtask_id, kind, at, json.dumps(data), run_id)
        self._submit(
            lambda c: c.execute(
                "INSERT INTO events SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? "
                "FROM events WHERE run_id = ?",
                row,
            )
        )

    def checkpoint(self, run_id: str, subtask_id: str, state: dict[str, Any]) -> None:
        """Record a subagent's latest resumable state."""
        row = (run_id, subtask_id, json.dumps(state))
        self._submit(lambda c: c.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?,?)", row))

    async def commit_result(
        self,
        run_id: str,
        subtask_id: str,
        session: int,
        result: dict[str, Any],
        state: dict[str, Any],
    ) -> None:
        """Commit a subagent's result and final state; returns once both are on disk."""
        rrow = (run_id, subtask_id, session, json.dumps(result))
        crow = (run_id, subtask_id, json.dumps(state))

        def op(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR REPLACE INTO results VALUES (?,?,?,?)", rrow)
            c.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?,?)", crow)

        await anyio.to_thread.run_sync(self._submit_and_wait, op)

    def close(self) -> None:
        """Flush what is queued and stop the thread."""
        self._queue.put(None)
        self._thread.join()


async def record_report(inp: FinishInput) -> None:
    """Close the run with its report, as a local run's recorder does."""
    routing = RoutingTable(inp.routing)
    recorder = RunRecorder(Path(inp.store), inp.run_id, session=1)
    try:
        escalations = [
            (e.subtask_id, routing.route(e).route, e.model_dump_json(by_alias=True))
            for e in inp.report.escalations
        ]
        await recorder.finish(inp.report.to_wire(), escalations)
    finally:
        await anyio.to_thread.run_sync(recorder.close)


def events_after(path: Path, run_id: str, seq: int) -> list[dict[str, Any]]:
    """The run's trace events after sequence number ``seq``, in order (for a live view)."""
    conn = connect(path, create=False)
    try:
        rows = conn.execute(
            "SELECT seq, session, subtask_id, kind, at, data_json FROM events "
            "WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, seq),
        ).fetchall()
    finally:
        conn.close()
    return [
        {"seq": r[0], "session": r[1], "subtask_id": r[2], "kind": r[3], "at": r[4]}
        | json.loads(r[5])
        for r in rows
    ]
