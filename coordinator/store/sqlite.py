"""SQLite, the embedded default: one file, WAL, the migration under ``BEGIN IMMEDIATE``.

SQLite cannot wake another process's reader, so live readers of runs written elsewhere
poll (``notifies`` is False).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import ClassVar

from coordinator.store.backend import Backend, Conn
from coordinator.store.schema import SQLITE_MIGRATIONS, StoreError

# Files migrated by this process already: opening one again skips the schema check.
_MIGRATED: set[tuple[Path, int]] = set()
_MIGRATING = threading.Lock()


def _inode(path: Path) -> int:
    try:
        return path.stat().st_ino
    except OSError:
        return -1


class SqliteBackend(Backend):
    """A run store in one SQLite file."""

    kind: ClassVar[str] = "sqlite"
    migrations = SQLITE_MIGRATIONS
    errors: ClassVar[tuple[type[Exception], ...]] = (sqlite3.Error,)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self.target = str(path.resolve())
        self._local = threading.local()


    def home(self) -> Path:
        """The SQLite file's folder."""
        return self.path.parent
    def exists(self) -> bool:
        return self.path.exists()

    def _open(self, *, create: bool) -> sqlite3.Connection:
        path = self.path
        if not path.exists():
            if not create:
                raise StoreError(f"{path}: no run store here (run a job first, or pass --store)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{path}: cannot create the run store ({exc})") from None
        elif path.is_dir():
            raise StoreError(f"{path}: is a directory, not a run store file")
        try:
            conn = sqlite3.connect(path, timeout=10, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout = 10000")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: cannot open the run store ({exc})") from None
        return conn

    def connect(self, *, create: bool = True) -> sqlite3.Connection:
        """A raw connection to a migrated store (kept for callers that want sqlite3)."""
        key = (self.path.resolve(), self.schema_version)
        if key not in _MIGRATED or not self.path.exists():
            self.migrate(create=create)
        conn = self._open(create=create)
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        # One reading connection per thread, kept: opening one per read cost more than
        # most reads (the service reads on every request). Autocommit, so nothing is
        # held between reads; a file replaced or removed meanwhile is opened anew.
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None or not self.path.exists() or local.inode != _inode(self.path):
            if conn is not None:
                conn.close()
            conn = local.conn = self.connect(create=False)
            local.inode = _inode(self.path)
        yield conn

    def writer_connection(self) -> Conn:
        return self.connect()

    def release(self, conn: Conn) -> None:
        assert isinstance(conn, sqlite3.Connection)
        conn.close()

    @contextmanager
    def transaction(self, conn: Conn) -> Iterator[None]:
        # IMMEDIATE: the write lock first, so what the transaction reads (an event's
        # next sequence number) no other writer changes before it commits.
        conn.execute("BEGIN IMMEDIATE")
        committed = False
        try:
            yield
            conn.execute("COMMIT")
            committed = True
        finally:
            if not committed:
                with suppress(sqlite3.Error):  # a failed statement may have ended it
                    conn.execute("ROLLBACK")

    def close(self) -> None:
        """Close this thread's reading connection (other threads' close with them)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def migrate(self, *, create: bool = True) -> None:
        with _MIGRATING:
            conn = self._open(create=create)
            try:
                self._migrate(conn)
            finally:
                conn.close()
            _MIGRATED.add((self.path.resolve(), self.schema_version))

    def _migrate(self, conn: sqlite3.Connection) -> None:
        path = self.path
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a fanout run store ({exc})") from None
        if tables and "fanout_meta" not in tables:
            raise StoreError(
                f"{path}: a SQLite database of something else "
                f"(tables: {', '.join(sorted(tables))})"
            )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            with self.transaction(conn):
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS fanout_meta (key TEXT PRIMARY KEY, value TEXT)"
                )

                def version_of() -> dict[str, str]:
                    return dict(conn.execute("SELECT key, value FROM fanout_meta").fetchall())

                self.apply_migrations(conn, version_of)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: the run store is damaged ({exc})") from None
