"""The run store's schema: numbered migrations per backend, and the store's errors.

    StoreError              the store cannot be used (exit 2 on the command line)
    ├── RunNotFound         no run with that id
    └── ResumeRefused       the run is finished, or a live process runs it

Each backend has its own numbered list (the dialects differ in types, not in meaning):
entry ``i`` moves a store from version ``i`` to ``i + 1``. Never edit one that shipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from shared.errors import FanoutError

APP_ID: Final = "fanout-run-store"

SQLITE_MIGRATIONS: Final[Sequence[str]] = (
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
    # 2: runs submitted to `fanout serve` (docs/design.md §8): the Idempotency-Key that made each
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
    # 3: many machines (docs/design.md §12). A lease (its holder and its end, epoch seconds) says
    # a run is alive where the holder's pid cannot be checked (another host); the
    # Temporal side table, made on demand before, is part of the schema now.
    """
    ALTER TABLE runs ADD COLUMN lease_until REAL;
    CREATE TABLE IF NOT EXISTS temporal_runs (
        run_id TEXT PRIMARY KEY,
        workflow_id TEXT NOT NULL,
        address TEXT NOT NULL,
        namespace TEXT NOT NULL,
        task_queue TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, started_at)
    """,
)

# Postgres: the same tables, with Postgres's types (REAL is single precision there).
POSTGRES_MIGRATIONS: Final[Sequence[str]] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        job TEXT NOT NULL,
        query TEXT NOT NULL,
        file TEXT NOT NULL,
        spec_text TEXT NOT NULL,
        seed TEXT NOT NULL,
        speed DOUBLE PRECISION NOT NULL DEFAULT 1.0,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        outcome TEXT,
        coverage DOUBLE PRECISION,
        elapsed_s DOUBLE PRECISION,
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
        at DOUBLE PRECISION NOT NULL,
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
    CREATE TABLE served_runs (
        run_id TEXT PRIMARY KEY REFERENCES runs(id),
        idempotency_key TEXT UNIQUE,
        request_sha256 TEXT NOT NULL,
        submitted_at TEXT NOT NULL,
        cancel_requested_at TEXT
    );
    """,
    # 2: as SQLite's 3: leases, the Temporal side table, the status index.
    """
    ALTER TABLE runs ADD COLUMN lease_until DOUBLE PRECISION;
    CREATE TABLE IF NOT EXISTS temporal_runs (
        run_id TEXT PRIMARY KEY,
        workflow_id TEXT NOT NULL,
        address TEXT NOT NULL,
        namespace TEXT NOT NULL,
        task_queue TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, started_at)
    """,
)


def statements(migration: str) -> list[str]:
    """The statements of one migration (none of them holds a ``;`` of its own)."""
    return [s.strip() for s in migration.split(";") if s.strip()]


class StoreError(FanoutError):
    """The store cannot be used: not ours, too new, unreachable, locked, or misnamed."""


class RunNotFound(StoreError):
    """No run with that id (or no runs at all for ``latest``)."""


class ResumeRefused(StoreError):
    """The run cannot be resumed: finished already, or another process is running it."""
