"""What the service keeps in the run store besides the runs: keys, cancels, and reads.

The ``served_runs`` table (schema migration 2) marks the runs submitted through the
service, with the ``Idempotency-Key`` that made each and a cancel request that must
survive a restart. Every method here is blocking SQLite: call it from a worker thread.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from coordinator.store.recorder import now_iso
from coordinator.store.runs import RunStore, connect

# The format of coordinator.store.runs.new_run_id (UTC time and four hex digits). A path
# segment that is not one is a 404 before anything is looked up.
RUN_ID: Final = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")


def valid_run_id(text: str) -> bool:
    """True when ``text`` has the shape of a run id the store makes."""
    return RUN_ID.fullmatch(text) is not None


class KeyReused(Exception):
    """An Idempotency-Key already made a run from a different request."""

    def __init__(self, key: str, run_id: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} already made run {run_id} from another body")
        self.key = key
        self.run_id = run_id


@dataclass(frozen=True, slots=True)
class KeyedRun:
    """The run an Idempotency-Key made, and the digest of the request that made it."""

    run_id: str
    request_sha256: str


class ServiceRecords:
    """The service's reads and writes of the run store."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        conn = connect(self.store.path)
        try:
            yield conn
        finally:
            conn.close()

    def by_key(self, key: str) -> KeyedRun | None:
        """The run ``key`` made before, if any."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT run_id, request_sha256 FROM served_runs WHERE idempotency_key = ?",
                (key,),
            ).fetchone()
        return None if row is None else KeyedRun(row[0], row[1])

    def register(self, run_id: str, key: str | None, request_sha256: str) -> None:
        """Mark ``run_id`` as submitted through the service (with its key, if any)."""
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO served_runs (run_id, idempotency_key, request_sha256, "
                "submitted_at) VALUES (?,?,?,?)",
                (run_id, key, request_sha256, now_iso()),
            )

    def request_cancel(self, run_id: str) -> None:
        """Record that a person cancelled ``run_id`` (a restarted server honours it)."""
        with self._conn() as conn:
            conn.execute(
                "UPDATE served_runs SET cancel_requested_at = COALESCE(cancel_requested_at, ?) "
                "WHERE run_id = ?",
                (now_iso(), run_id),
            )

    def cancel_requested(self, run_id: str) -> bool:
        """True once a cancel of ``run_id`` was recorded."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT cancel_requested_at FROM served_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return row is not None and row[0] is not None

    def left_running(self) -> list[str]:
        """Served runs the store still marks running, oldest first (candidates to resume)."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT r.id FROM runs r JOIN served_runs s ON s.run_id = r.id "
                "WHERE r.status = 'running' ORDER BY r.started_at, r.id"
            ).fetchall()
        return [r[0] for r in rows]

    def release(self, run_id: str) -> None:
        """Give up this process's claim on an unfinished run: it reads ``interrupted``.

        Done when the server stops (SIGTERM) and at start for runs whose recorded owner
        is this very pid (a restarted container is often pid 1 again): the store would
        otherwise take the dead server for a live one and refuse to resume them.
        """
        with self._conn() as conn:
            conn.execute(
                "UPDATE runs SET pid = NULL WHERE id = ? AND status = 'running' "
                "AND pid = ? AND host = ?",
                (run_id, os.getpid(), socket.gethostname()),
            )

    def last_states(self, run_id: str) -> dict[str, str]:
        """Each subtask's latest state event (queued, running, retrying, done, escalated)."""
        with self._conn() as conn:
            # SQLite returns the other columns of the row holding MAX(seq).
            rows = conn.execute(
                "SELECT subtask_id, data_json, MAX(seq) FROM events "
                "WHERE run_id = ? AND kind = 'state' GROUP BY subtask_id",
                (run_id,),
            ).fetchall()
        return {r[0]: str(json.loads(r[1]).get("state", "queued")) for r in rows}

    def events_after(
        self, run_id: str, after: int, upto: int | None = None
    ) -> list[dict[str, Any]]:
        """The run's events with ``after < seq <= upto``, in order, as ``store.events``."""
        upper = upto if upto is not None else 2**62
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT seq, session, subtask_id, kind, at, data_json FROM events "
                "WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                (run_id, after, upper),
            ).fetchall()
        return [
            {"seq": r[0], "session": r[1], "subtask_id": r[2], "kind": r[3], "at": r[4]}
            | json.loads(r[5])
            for r in rows
        ]
