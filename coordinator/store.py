"""The run store: an embedded SQLite file recording every run, its trace and its results.

One file (default ``.fanout/runs.sqlite``; ``--store PATH`` or ``FANOUT_STORE``), WAL
mode, a schema version with forward migrations. All writes go through one writer
thread fed by a queue, so the event loop never waits on the disk except where it must:
a subagent's result is committed (with its final checkpoint) before the coordinator
counts it, and that wait happens in a worker thread.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import anyio.to_thread

from shared.errors import FanoutError

DEFAULT_STORE: Final = Path(".fanout") / "runs.sqlite"
APP_ID: Final = "fanout-run-store"

RunStatus = Literal["running", "interrupted", "finished"]

# Each entry moves the schema from version i to i + 1; never edit one that shipped.
MIGRATIONS: Final[Sequence[str]] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        job TEXT NOT NULL,
        query TEXT NOT NULL,
        file TEXT NOT NULL,
        spec_text TEXT NOT NULL,
        seed TEXT NOT NULL,
        speed REAL NOT NULL DEFAULT 1.0,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        outcome TEXT,
        coverage REAL,
        elapsed_s REAL,
        pid INTEGER,
        host TEXT,
        sessions INTEGER NOT NULL DEFAULT 1,
        report_json TEXT
    );
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(id),
        seq INTEGER NOT NULL,
        session INTEGER NOT NULL,
        subtask_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        at REAL NOT NULL,
        data_json TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE checkpoints (
        run_id TEXT NOT NULL REFERENCES runs(id),
        subtask_id TEXT NOT NULL,
        state_json TEXT NOT NULL,
        PRIMARY KEY (run_id, subtask_id)
    );
    CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id),
        subtask_id TEXT NOT NULL,
        session INTEGER NOT NULL,
        result_json TEXT NOT NULL,
        PRIMARY KEY (run_id, subtask_id)
    );
    CREATE TABLE escalations (
        run_id TEXT NOT NULL REFERENCES runs(id),
        subtask_id TEXT NOT NULL,
        route TEXT NOT NULL,
        escalation_json TEXT NOT NULL,
        PRIMARY KEY (run_id, subtask_id)
    );
    """,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)


class StoreError(FanoutError):
    """The store file cannot be used: not SQLite, not ours, too new, or locked."""


class RunNotFound(StoreError):
    """No run with that id (or no runs at all for ``latest``)."""


class ResumeRefused(StoreError):
    """The run cannot be resumed: finished already, or another process is running it."""


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


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (and if needed create or migrate) the store at ``path``.

    Raises:
        StoreError: the file is not SQLite, belongs to something else, or is newer.
    """
    if not path.exists():
        if not create:
            raise StoreError(f"{path}: no run store here (run a job first, or pass --store)")
        path.parent.mkdir(parents=True, exist_ok=True)
    elif path.is_dir():
        raise StoreError(f"{path}: is a directory, not a run store file")
    try:
        conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 10000")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a fanout run store ({exc})") from None
    if tables and "fanout_meta" not in tables:
        conn.close()
        raise StoreError(
            f"{path}: a SQLite database of something else (tables: {', '.join(sorted(tables))})"
        )
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        _migrate(conn, path)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path}: the run store is damaged ({exc})") from None
    return conn


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS fanout_meta (key TEXT PRIMARY KEY, value TEXT)")
        rows = dict(conn.execute("SELECT key, value FROM fanout_meta").fetchall())
        if rows and rows.get("app") != APP_ID:
            raise StoreError(f"{path}: fanout_meta does not describe a fanout run store")
        version = int(rows.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: written by a newer fanout (schema {version}, this one knows "
                f"{SCHEMA_VERSION}); upgrade fanout to read it"
            )
        for target in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[target].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO fanout_meta VALUES ('app', ?)", (APP_ID,))
        conn.execute(
            "INSERT OR REPLACE INTO fanout_meta VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


_Op = Callable[[sqlite3.Connection], object]


class _Writer:
    """One thread that owns the writing connection and applies queued operations in order."""

    def __init__(self, path: Path) -> None:
        self._queue: queue.SimpleQueue[tuple[_Op, threading.Event | None] | None] = (
            queue.SimpleQueue()
        )
        self._conn = connect(path)
        self.error: Exception | None = None
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

    def checkpoint(self, subtask_id: str, state: dict[str, Any]) -> None:
        """Record a subagent's latest resumable state (never blocks on the disk)."""
        row = (self.run_id, subtask_id, json.dumps(state))
        self._writer.submit(
            lambda c: c.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?,?)", row)
        )

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
                    _now_iso(),
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
                    run_id, job, query, file, spec_text, seed, speed, _now_iso(), "running",
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
        return RunRow(
            id=r["id"],
            job=r["job"],
            query=r["query"],
            file=r["file"],
            spec_text=r["spec_text"],
            seed=r["seed"],
            speed=r["speed"],
            started_at=r["started_at"],
            finished_at=r["finished_at"],
            status=status,
            outcome=r["outcome"],
            coverage=r["coverage"],
            elapsed_s=r["elapsed_s"],
            pid=r["pid"],
            host=r["host"],
            sessions=r["sessions"],
            report=json.loads(r["report_json"]) if r["report_json"] else None,
        )

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

    def results(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The committed subagent results of a run, by subtask id."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT subtask_id, result_json FROM results WHERE run_id = ?", (run_id,)
            ).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def checkpoints(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The latest resumable state of each subagent of a run, by subtask id."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT subtask_id, state_json FROM checkpoints WHERE run_id = ?", (run_id,)
            ).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

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
