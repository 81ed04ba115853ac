"""Postgres, for many machines: psycopg 3 with a connection pool, LISTEN/NOTIFY.

Several servers and workers share one database and nothing else. What differs from
SQLite, and only that, is here: the pool, the migration serialised by an advisory lock
(two processes starting at once do not both create the tables), the per-run advisory
lock that numbers a run's events when several workers write them, ``NOTIFY`` in the
writing transaction, and a listening connection that wakes readers without polling.

The URL may hold a password; it is kept in memory only. What messages show and what
is handed to other processes (``target``) is the URL without it: those processes find
the password as libpq does (``PGPASSWORD``, ``~/.pgpass``) or in their own ``--store``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, ClassVar

from coordinator.store.backend import Backend, Conn, redact
from coordinator.store.schema import POSTGRES_MIGRATIONS, StoreError

try:
    import psycopg
    import psycopg_pool
except ImportError:  # the postgres extra is not installed
    psycopg = None  # type: ignore[assignment]
    psycopg_pool = None  # type: ignore[assignment]

# Any constant: every fanout process takes this advisory lock to migrate.
_MIGRATION_LOCK = 0x66616E6F7574  # "fanout"
_CONNECT_TIMEOUT_S = 5.0


@lru_cache(maxsize=256)
def _pg_sql(sql: str) -> str:
    """The store's portable SQL with psycopg's placeholders."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Row(tuple[Any, ...]):
    """A row readable by position and by column name, as ``sqlite3.Row``."""

    _index: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names."""
        return list(self._index)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], _Row]:
    index = {d.name: i for i, d in enumerate(cursor.description or ())}
    cls = type("Row", (_Row,), {"_index": index})

    def make(values: Sequence[Any]) -> _Row:
        return cls(values)  # type: ignore[no-any-return]

    return make


class _PgConn:
    """A psycopg connection that takes the store's ``?`` placeholders."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn
        self.pipeline: Any = None  # inside the writer's transaction: its pipeline

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(_pg_sql(sql), tuple(params), prepare=False)


class PostgresBackend(Backend):
    """A run store in a Postgres database, shared by every server and worker."""

    kind: ClassVar[str] = "postgresql"
    migrations = POSTGRES_MIGRATIONS
    notifies: ClassVar[bool] = True

    def __init__(self, url: str, *, pool_size: int = 8) -> None:
        if psycopg is None or psycopg_pool is None:
            raise StoreError(
                f"--store {redact(url)}: Postgres support is not installed; "
                "pip install 'fanout[postgres]'"
            )
        self.url = url
        self.where = redact(url)
        self.target = self.where
        self._pool_size = pool_size
        self._pool: Any = None
        self._lock = threading.Lock()
        self._migrated = False

    def _ready(self) -> None:
        # The schema is checked (and moved to this version) once per backend object.
        if not self._migrated:
            self.migrate()
            self._migrated = True

    @property
    def errors(self) -> tuple[type[Exception], ...]:  # type: ignore[override]
        assert psycopg is not None
        return (psycopg.Error, psycopg_pool.PoolTimeout)

    def _connect_raw(self, *, autocommit: bool = True) -> Any:
        assert psycopg is not None
        try:
            return psycopg.connect(self.url, autocommit=autocommit,
                                   connect_timeout=int(_CONNECT_TIMEOUT_S),
                                   row_factory=_row_factory)
        except psycopg.Error as exc:
            raise StoreError(f"{self.where}: cannot connect to the run store ({_why(exc)})") \
                from None

    def _pool_or_open(self) -> Any:
        with self._lock:
            if self._pool is None:
                self._ready()
                assert psycopg_pool is not None
                self._pool = psycopg_pool.ConnectionPool(
                    self.url, min_size=1, max_size=self._pool_size, open=True,
                    kwargs={"autocommit": True, "row_factory": _row_factory},
                    timeout=30, name="fanout-store",
                )
            return self._pool

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        pool = self._pool_or_open()
        with pool.connection() as conn:
            yield _PgConn(conn)

    def writer_connection(self) -> Conn:
        with self._lock:
            self._ready()
        return _PgConn(self._connect_raw())

    def release(self, conn: Conn) -> None:
        assert isinstance(conn, _PgConn)
        conn.raw.close()

    @contextmanager
    def transaction(self, conn: Conn) -> Iterator[None]:
        assert isinstance(conn, _PgConn)
        # Pipeline mode: the writer's statements go out without waiting for each answer
        # (a batch of inserts is a few round trips, not one per statement); a read, or
        # the end of a savepoint (Backend.sync), waits for what was sent before it.
        with conn.raw.pipeline() as pipeline, conn.raw.transaction():
            conn.pipeline = pipeline
            try:
                yield
            finally:
                conn.pipeline = None

    def sync(self, conn: Conn) -> None:
        assert isinstance(conn, _PgConn)
        if conn.pipeline is not None:
            conn.pipeline.sync()

    def lock_run(self, conn: Conn, run_id: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 7))", (run_id,))

    def notify(self, conn: Conn, channel: str, payload: str) -> None:
        conn.execute("SELECT pg_notify(?, ?)", (channel, payload))

    def listen(
        self, channels: Sequence[str], on_message: Callable[[str, str], None],
        stop: threading.Event,
    ) -> None:
        conn = self._connect_raw()
        try:
            for channel in channels:
                conn.execute(f"LISTEN {channel}")  # channel names are ours, not input
            while not stop.is_set():
                for note in conn.notifies(timeout=0.5, stop_after=64):
                    on_message(note.channel, note.payload)
        finally:
            conn.close()

    def migrate(self) -> None:
        conn = self._connect_raw()
        try:
            with conn.transaction():
                # Serialised: a second process waits here, then finds the schema current.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                tables = {r[0] for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
                if tables and "fanout_meta" not in tables:
                    raise StoreError(
                        f"{self.where}: a database of something else "
                        f"(tables: {', '.join(sorted(tables)[:8])}); give fanout its own"
                    )
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS fanout_meta (key TEXT PRIMARY KEY, value TEXT)"
                )
                wrapped = _PgConn(conn)

                def version_of() -> dict[str, str]:
                    rows = wrapped.execute("SELECT key, value FROM fanout_meta").fetchall()
                    return {r[0]: r[1] for r in rows}

                self.apply_migrations(wrapped, version_of)
        except StoreError:
            raise
        except Exception as exc:
            if psycopg is not None and isinstance(exc, psycopg.Error):
                raise StoreError(f"{self.where}: cannot migrate the run store ({_why(exc)})") \
                    from None
            raise
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def _why(exc: BaseException) -> str:
    """The driver's message, first line only (libpq's hints follow on later lines)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
