"""The run store: every run, its trace and its results, in SQLite or Postgres.

``--store`` / ``FANOUT_STORE`` name it: a path (SQLite, the embedded default
``.fanout/runs.sqlite``) or a ``postgresql://`` URL (many machines, docs/design.md §12). Both
hold the same runs with the same meaning; the differences live in the backends.

A run is ``queued`` (submitted to a server, waiting for a slot), ``running``,
``interrupted`` (its holder is gone) or ``finished``. The store writes the first two and
the last; ``interrupted`` is read: a queued or running run whose holder is dead. On the
holder's own host that is its pid; elsewhere, its lease (kept by the holder's writer,
see ``coordinator.store.writer``) has run out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import secrets
import socket
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from coordinator.store.backend import Backend, Conn
from coordinator.store.recorder import RunRecorder, now_iso
from coordinator.store.schema import (
    APP_ID,
    POSTGRES_MIGRATIONS,
    SQLITE_MIGRATIONS,
    ResumeRefused,
    RunNotFound,
    StoreError,
)
from coordinator.store.sqlite import SqliteBackend
from coordinator.store.targets import open_backend
from coordinator.store.writer import Tx, lease_end

__all__ = [
    "APP_ID",
    "DEFAULT_STORE",
    "SCHEMA_VERSIONS",
    "ResumeRefused",
    "RunNotFound",
    "RunRecorder",
    "RunRow",
    "RunStatus",
    "RunStore",
    "StoreError",
    "connect",
    "new_run_id",
    "store_path",
    "wait_for",
]

DEFAULT_STORE: Final = Path(".fanout") / "runs.sqlite"
# The schema version each database writes, by backend kind: each numbers its own
# migrations (docs/design.md §12), so one number for both would be right for one of them only.
SCHEMA_VERSIONS: Final[dict[str, int]] = {
    "sqlite": len(SQLITE_MIGRATIONS),
    "postgresql": len(POSTGRES_MIGRATIONS),
}

# The one status vocabulary, shared by the store, the CLI and the service's API.
RunStatus = Literal["queued", "running", "interrupted", "finished"]
_HELD = ("queued", "running")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run as ``fanout runs`` lists it."""

    id: str
    job: str
    query: str
    file: str
    spec_text: str
    seed: str
    speed: float
    started_at: str
    finished_at: str | None
    status: RunStatus
    outcome: str | None
    coverage: float | None
    elapsed_s: float | None
    pid: int | None
    host: str | None
    sessions: int
    report: dict[str, Any] | None
    waiting: int = 0
    """How many of its escalations wait for a person (docs/design.md §17): a running
    run's, those offered in its session and not decided; an interrupted or queued run's,
    those a resumed run with a person waits for again; a finished run's, none."""

    def summary(self) -> dict[str, Any]:
        """The fields ``fanout runs --json`` prints."""
        return {
            "id": self.id,
            "job": self.job,
            "file": self.file,
            "started": self.started_at,
            "finished": self.finished_at,
            "status": self.status,
            "outcome": self.outcome,
            "coverage": self.coverage,
            "elapsed_s": self.elapsed_s,
            "sessions": self.sessions,
            "waiting": self.waiting,
        }


def store_path(explicit: str | os.PathLike[str] | None = None) -> str:
    """The store to use: ``--store``, else ``FANOUT_STORE``, else ``.fanout/runs.sqlite``
    (a path or a URL, as given)."""
    if explicit:
        return os.fspath(explicit)
    return os.environ.get("FANOUT_STORE") or str(DEFAULT_STORE)


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """A sqlite3 connection to the SQLite store at ``path``, created or migrated first."""
    return SqliteBackend(path).connect(create=create)


def new_run_id() -> str:
    """A short, sortable run id: UTC time and eight random hex digits.

    Four digits collided: fifty submissions in one second to one server (or several
    servers on one Postgres) share a second, and 50 draws from 65,536 meet about once in
    50 such seconds (a 503 "UNIQUE constraint failed", seen in the store benchmark).
    Thirty-two bits make that about once in 3.4 million such seconds.
    """
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + f"{_ids.getrandbits(32):08x}"


# Run ids draw their digits from a generator seeded from the system's randomness once per
# process (and again in a forked child, which would otherwise repeat its parent's ids).
# A run id must be unique, not secret: every route that takes one is behind the token,
# and event-stream tickets are signed. Reading os.urandom on each id let go of the GIL
# and waited to take it back from the store writer: ~0.17 ms of the event loop per
# submission, in a burst of fifty.
_ids = random.Random(secrets.token_bytes(16))
os.register_at_fork(after_in_child=lambda: _ids.seed(secrets.token_bytes(16)))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped) is not running the job.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def holder_alive(pid: int | None, host: str | None, lease_until: float | None) -> bool:
    """Whether the process holding a run still runs it: its pid on this host (known at
    once), its lease on any other."""
    if pid is None:
        return False
    if host == socket.gethostname():
        return _pid_alive(pid)
    return lease_until is not None and lease_until > time.time()


_ROW_COLUMNS = tuple(
    f.name for f in dataclasses.fields(RunRow) if f.name not in ("status", "report", "waiting")
)
# A person's escalation events, as the run's recorder writes them (coordinator/people.py
# DECISION_NEEDED and DECISION_MADE; docs/design.md §17).
_DECISION_EVENTS: Final = ("decision.needed", "decision.made")
INSERT_RUN: Final = (
    "INSERT INTO runs (id, job, query, file, spec_text, seed, speed, started_at, status, "
    "pid, host, lease_until) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)


def run_values(
    run_id: str, *, job: str, query: str, file: str, spec_text: str, seed: str, speed: float,
    status: RunStatus = "running",
) -> tuple[Any, ...]:
    """The row :data:`INSERT_RUN` inserts for a new run held by this process."""
    return (run_id, job, query, file, spec_text, seed, speed, now_iso(), status,
            os.getpid(), socket.gethostname(), lease_end())


class RunStore:
    """Reading runs, and opening or resuming one for recording."""

    def __init__(self, target: str | os.PathLike[str] | Backend) -> None:
        self.backend = target if isinstance(target, Backend) else open_backend(os.fspath(target))
        self.where = self.backend.where
        self.target = self.backend.target

    @property
    def path(self) -> Path:
        """The SQLite file (a Postgres store has none)."""
        if not isinstance(self.backend, SqliteBackend):
            raise StoreError(f"{self.where}: a Postgres store has no file")
        return self.backend.path

    def exists(self) -> bool:
        """True once the store has been created."""
        return self.backend.exists()

    def close(self) -> None:
        """Release the store's connections."""
        self.backend.close()

    def _read(self) -> Any:
        return self.backend.connection()

    def create_run(
        self, *, job: str, query: str, file: str, spec_text: str, seed: str, speed: float
    ) -> RunRecorder:
        """Register a new run owned by this process and return its recorder."""
        run_id = new_run_id()
        if isinstance(self.backend, SqliteBackend):
            self.backend.migrate()
        values = run_values(run_id, job=job, query=query, file=file, spec_text=spec_text,
                            seed=seed, speed=speed)
        with self.backend.connection() as conn:
            conn.execute(INSERT_RUN, values)
        return RunRecorder(self.backend, run_id, session=1)

    def claim_for_resume(self, run_id: str) -> RunRecorder:
        """Take over an interrupted run; refuse a finished one or one that is running.

        The claim is a compare-and-set on the holder and the session count, so two
        resumers racing for the same run (on any machines) cannot both win.
        """
        row = self.get(run_id)
        if row.status == "finished":
            raise ResumeRefused(f"run {run_id} already finished; nothing to resume")
        if row.status in _HELD:
            raise ResumeRefused(
                f"run {run_id} is being run by process {row.pid} on {row.host}; "
                "wait for it or stop it first"
            )
        with self.backend.connection() as conn:
            cur = conn.execute(
                "UPDATE runs SET pid=?, host=?, sessions=sessions+1, status='running', "
                "lease_until=? WHERE id=? AND status IN ('queued', 'running') "
                "AND pid IS NOT DISTINCT FROM ? AND host IS NOT DISTINCT FROM ? "
                "AND sessions=?",
                (os.getpid(), socket.gethostname(), lease_end(), run_id, row.pid, row.host,
                 row.sessions),
            )
            if cur.rowcount != 1:
                raise ResumeRefused(f"run {run_id} was claimed by another process just now")
        return RunRecorder(self.backend, run_id, session=row.sessions + 1)

    def release(self, run_id: str) -> None:
        """Give up this process's hold on an unfinished run: it reads ``interrupted``."""
        with self.backend.connection() as conn:
            conn.execute(
                "UPDATE runs SET pid = NULL, lease_until = NULL WHERE id = ? "
                "AND status IN ('queued', 'running') AND pid = ? AND host = ?",
                (run_id, os.getpid(), socket.gethostname()),
            )

    def _row(self, r: Any, conn: Any) -> RunRow:
        status: RunStatus = r["status"]
        if status in _HELD and not holder_alive(r["pid"], r["host"], r["lease_until"]):
            status = "interrupted"
        report = json.loads(r["report_json"]) if r["report_json"] else None
        plain = {f: r[f] for f in _ROW_COLUMNS}
        waiting = 0
        if status != "finished":
            waiting = len(_waiting(conn, r["id"], status == "running", r["sessions"]))
        return RunRow(**plain, status=status, report=report, waiting=waiting)

    def waiting(self, run_id: str, *, resumed: bool = False) -> list[str]:
        """The ids of run ``run_id``'s escalations that wait for a person (as
        :attr:`RunRow.waiting` counts them), in the order they came to wait; ``resumed``:
        those a resumed run with a person waits for again, whoever holds the run now."""
        row = self.get(run_id)
        if row.status == "finished":
            return []
        with self._read() as conn:
            return _waiting(conn, run_id, row.status == "running" and not resumed,
                            row.sessions)

    def runs(self) -> list[RunRow]:
        """Every run, newest first."""
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY started_at DESC, id DESC").fetchall()
            return [self._row(r, conn) for r in rows]

    def get(self, run_id: str | None) -> RunRow:
        """One run by id; ``latest`` or None for the newest."""
        with self._read() as conn:
            if run_id in (None, "latest"):
                row = conn.execute(
                    "SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT 1"
                ).fetchone()
                if row is None:
                    raise RunNotFound(f"{self.where}: no runs recorded yet")
            else:
                row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                if row is None:
                    raise RunNotFound(f"{self.where}: no run {run_id!r} (see `fanout runs`)")
            return self._row(row, conn)

    def _by_subtask(self, table: str, run_id: str) -> dict[str, dict[str, Any]]:
        column = {"results": "result_json", "checkpoints": "state_json"}[table]
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT subtask_id, {column} FROM {table} WHERE run_id = ?", (run_id,)
            ).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def results(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The committed subagent results of a run, by subtask id."""
        return self._by_subtask("results", run_id)

    def checkpoints(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The latest resumable state of each subagent of a run, by subtask id."""
        return self._by_subtask("checkpoints", run_id)

    def last_event_at(self, run_id: str) -> float:
        """The job time of a run's last recorded event (0 when it has none)."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT COALESCE(MAX(at), 0.0) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()
        return float(row[0])

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's trace, in order: every attempt, wait and state change."""
        return self.events_after(run_id, 0)

    def events_after(
        self, run_id: str, after: int, upto: int | None = None
    ) -> list[dict[str, Any]]:
        """The run's events with ``after < seq <= upto``, in order."""
        upper = upto if upto is not None else 2**31 - 1
        with self._read() as conn:
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

    def last_states(self, run_id: str) -> dict[str, str]:
        """Each subtask's latest state event (queued, running, retrying, done, escalated)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT e.subtask_id, e.data_json FROM events e WHERE e.run_id = ? "
                "AND e.kind = 'state' AND e.seq = (SELECT MAX(seq) FROM events i "
                "WHERE i.run_id = e.run_id AND i.subtask_id = e.subtask_id "
                "AND i.kind = 'state')",
                (run_id,),
            ).fetchall()
        return {r[0]: str(json.loads(r[1]).get("state", "queued")) for r in rows}


def _waiting(conn: Any, run_id: str, running: bool, session: int) -> list[str]:
    """The escalations of run ``run_id`` with a ``decision.needed`` and no
    ``decision.made``; of a ``running`` run, only those offered in its ``session`` (its
    process waits for them: one that waited in an earlier session waits again only once
    a person attends the resumed run)."""
    rows = conn.execute(
        "SELECT session, kind, data_json FROM events WHERE run_id = ? AND kind IN (?, ?) "
        "ORDER BY seq", (run_id, *_DECISION_EVENTS),
    ).fetchall()
    offered: dict[str, int] = {}
    decided: set[str] = set()
    for row in rows:
        data = json.loads(row[2])
        if row[1] == _DECISION_EVENTS[0] and isinstance(data.get("escalation"), dict):
            offered[str(data["escalation"].get("id"))] = int(row[0])
        elif isinstance(data.get("decision"), dict):
            decided.add(str(data["decision"].get("escalation")))
    return [esc for esc, at in offered.items()
            if esc not in decided and (not running or at == session)]


def insert_run(tx: Tx | Conn, values: tuple[Any, ...]) -> None:
    """Insert a run row made by :func:`run_values` (in the writer's transaction)."""
    tx.execute(INSERT_RUN, values)


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (for tests and tools)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


