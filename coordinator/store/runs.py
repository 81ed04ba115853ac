"""The run store: an embedded SQLite file recording every run, its trace and its results.

One file (default ``.fanout/runs.sqlite``; ``--store PATH`` or ``FANOUT_STORE``), WAL
mode, a schema version with forward migrations. All writes go through one writer
thread fed by a queue, so the event loop never waits on the disk except where it must:
a subagent's result is committed (with its final checkpoint) before the coordinator
counts it, and that wait happens in a worker thread.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from coordinator.store.recorder import RunRecorder, now_iso
from coordinator.store.schema import (
    APP_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    ResumeRefused,
    RunNotFound,
    StoreError,
    connect,
)

__all__ = [
    "APP_ID",
    "DEFAULT_STORE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "ResumeRefused",
    "RunNotFound",
    "RunRecorder",
    "RunRow",
    "RunStore",
    "StoreError",
    "connect",
    "new_run_id",
    "store_path",
    "wait_for",
]

DEFAULT_STORE: Final = Path(".fanout") / "runs.sqlite"

RunStatus = Literal["running", "interrupted", "finished"]

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
        }


def store_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store to use: ``--store``, else ``FANOUT_STORE``, else ``.fanout/runs.sqlite``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("FANOUT_STORE")
    return Path(env) if env else DEFAULT_STORE


def new_run_id() -> str:
    """A short, sortable run id: UTC time and four random hex digits."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _pid_alive(pid: int | None, host: str | None) -> bool:
    if pid is None or host != socket.gethostname():
        return False
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


_ROW_COLUMNS = tuple(
    f.name for f in dataclasses.fields(RunRow) if f.name not in ("status", "report")
)


class RunStore:
    """Reading runs, and opening or resuming one for recording."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = connect(self.path, create=False)
        try:
            yield conn
        finally:
            conn.close()

    def create_run(
        self, *, job: str, query: str, file: str, spec_text: str, seed: str, speed: float
    ) -> RunRecorder:
        """Register a new run owned by this process and return its recorder."""
        run_id = new_run_id()
        conn = connect(self.path)
        try:
            conn.execute(
                "INSERT INTO runs (id, job, query, file, spec_text, seed, speed, started_at, "
                "status, pid, host) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id, job, query, file, spec_text, seed, speed, now_iso(), "running",
                    os.getpid(), socket.gethostname(),
                ),
            )
        finally:
            conn.close()
        return RunRecorder(self.path, run_id, session=1)

    def claim_for_resume(self, run_id: str) -> RunRecorder:
        """Take over an interrupted run; refuse a finished one or one that is running.

        The claim is a compare-and-set on the owning pid, so two resumers racing for the
        same run cannot both win.
        """
        row = self.get(run_id)
        if row.status == "finished":
            raise ResumeRefused(f"run {run_id} already finished; nothing to resume")
        if row.status == "running":
            raise ResumeRefused(
                f"run {run_id} is being run by process {row.pid} on {row.host}; "
                "wait for it or stop it first"
            )
        conn = connect(self.path)
        try:
            cur = conn.execute(
                "UPDATE runs SET pid=?, host=?, sessions=sessions+1 "
                "WHERE id=? AND status='running' AND pid IS ? AND sessions=?",
                (os.getpid(), socket.gethostname(), run_id, row.pid, row.sessions),
            )
            if cur.rowcount != 1:
                raise ResumeRefused(f"run {run_id} was claimed by another process just now")
        finally:
            conn.close()
        return RunRecorder(self.path, run_id, session=row.sessions + 1)

    def _row(self, r: sqlite3.Row) -> RunRow:
        status: RunStatus = r["status"]
        if status == "running" and not _pid_alive(r["pid"], r["host"]):
            status = "interrupted"
        report = json.loads(r["report_json"]) if r["report_json"] else None
        plain = {f: r[f] for f in _ROW_COLUMNS}
        return RunRow(**plain, status=status, report=report)

    def runs(self) -> list[RunRow]:
        """Every run, newest first."""
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY started_at DESC, id DESC").fetchall()
        return [self._row(r) for r in rows]

    def get(self, run_id: str | None) -> RunRow:
        """One run by id; ``latest`` or None for the newest."""
        with self._read() as conn:
            if run_id in (None, "latest"):
                row = conn.execute(
                    "SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT 1"
                ).fetchone()
                if row is None:
                    raise RunNotFound(f"{self.path}: no runs recorded yet")
            else:
                row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                if row is None:
                    raise RunNotFound(f"{self.path}: no run {run_id!r} (see `fanout runs`)")
        return self._row(row)

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
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, session, subtask_id, kind, at, data_json FROM events "
                "WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [
            {"seq": r[0], "session": r[1], "subtask_id": r[2], "kind": r[3], "at": r[4]}
            | json.loads(r[5])
            for r in rows
        ]


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (for tests and tools)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
