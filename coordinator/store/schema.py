"""The run store's file: opening it, recognising it, and migrating its schema."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from shared.errors import FanoutError

APP_ID: Final = "fanout-run-store"

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
    # 2: runs submitted to `fanout serve` (DESIGN §8): the Idempotency-Key that made each
    # (with a digest of the request, so a reused key with another body is refused), and a
    # cancel request that must survive a restart of the server.
    """
    CREATE TABLE served_runs (
        run_id TEXT PRIMARY KEY REFERENCES runs(id),
        idempotency_key TEXT UNIQUE,
        request_sha256 TEXT NOT NULL,
        submitted_at TEXT NOT NULL,
        cancel_requested_at TEXT
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


