"""One store interface over two databases: what every backend does, and what differs.

As DBOS keeps its system database (a base class and one subclass per database that
overrides only what differs), :class:`Backend` holds everything the store does in
portable SQL (``?`` placeholders, ``INSERT … ON CONFLICT``, ``IS NOT DISTINCT FROM``);
:class:`~coordinator.store.sqlite.SqliteBackend` and
:class:`~coordinator.store.postgres.PostgresBackend` override connecting, the
serialised migration, the transaction that takes the write lock, the per-run lock that
numbers events, notifications, and their error classes.

:func:`~coordinator.store.targets.open_backend` turns a ``--store`` value into one (in
a module of its own: the base module imports neither database's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit, urlunsplit

from coordinator.store.schema import APP_ID, StoreError, statements

__all__ = ["Backend", "Conn", "redact"]

EVENTS_CHANNEL = "fanout_events"
CANCELS_CHANNEL = "fanout_cancels"


class Conn(Protocol):
    """A connection as the store uses it: ``execute`` with ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...


class Backend:
    """A run store's database: connections, migrations, transactions, notifications."""

    kind: ClassVar[str]
    migrations: ClassVar[Sequence[str]]
    errors: ClassVar[tuple[type[Exception], ...]]
    # Whether other processes' writes can wake a reader (else readers poll).
    notifies: ClassVar[bool] = False

    #: What messages name (a path, or a URL without its password).
    where: str
    #: What to hand another process so it opens the same store (no password in it).
    target: str

    def home(self) -> Path:
        """Where this machine keeps files that go with the store (a folder's document
        index, docs/design.md §10): beside a SQLite file; ``.fanout`` in the working folder for a
        database server, since an index is per machine, not shared."""
        return Path(".fanout")

    @property
    def schema_version(self) -> int:
        """The version this fanout writes."""
        return len(self.migrations)

    # -- overridden by each database --------------------------------------------------

    def exists(self) -> bool:
        """True when the store has been created (a database server always exists)."""
        return True

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A connection for reads and single autocommitted writes."""
        raise NotImplementedError
        yield  # pragma: no cover

    def writer_connection(self) -> Conn:
        """A connection of its own for a writer thread (closed with :meth:`release`)."""
        raise NotImplementedError

    def release(self, conn: Conn) -> None:
        """Close a connection from :meth:`writer_connection`."""
        raise NotImplementedError

    @contextmanager
    def transaction(self, conn: Conn) -> Iterator[None]:
        """A write transaction that holds the write lock from its start."""
        raise NotImplementedError
        yield  # pragma: no cover

    def sync(self, conn: Conn) -> None:
        """Inside a transaction: return once every statement sent so far has been
        answered, raising what failed (a backend that pipelines its statements; others
        answer each one as it is sent)."""

    def lock_run(self, conn: Conn, run_id: str) -> None:
        """Inside a transaction: serialise with every other writer numbering this run's
        events (SQLite's write lock already does)."""

    def notify(self, conn: Conn, channel: str, payload: str) -> None:
        """Inside a transaction: wake listeners of ``channel`` once it commits."""

    def listen(
        self, channels: Sequence[str], on_message: Callable[[str, str], None],
        stop: threading.Event,
    ) -> None:
        """Call ``on_message(channel, payload)`` per notification until ``stop`` is set
        (blocking; run it in a thread). Only backends that notify implement it."""
        raise NotImplementedError(f"{self.kind} cannot notify; poll instead")

    def migrate(self) -> None:
        """Create the schema or move it to this version, serialised with other processes.

        Raises:
            StoreError: the database belongs to something else, or a newer fanout.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release the backend's connections."""

    # -- shared by every database ------------------------------------------------------

    def apply_migrations(self, conn: Conn, version_of: Callable[[], dict[str, str]]) -> None:
        """With the migration lock held: check the store is ours, then apply what is new."""
        rows = version_of()
        if rows and rows.get("app") != APP_ID:
            raise StoreError(f"{self.where}: fanout_meta does not describe a fanout run store")
        version = int(rows.get("schema_version", "0"))
        if version > self.schema_version:
            raise StoreError(
                f"{self.where}: written by a newer fanout (schema {version}, this one knows "
                f"{self.schema_version}); upgrade fanout to read it"
            )
        for target in range(version, self.schema_version):
            for statement in statements(self.migrations[target]):
                conn.execute(statement)
        if version == self.schema_version and rows:
            return
        upsert = (
            "INSERT INTO fanout_meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        conn.execute(upsert, ("app", APP_ID))
        conn.execute(upsert, ("schema_version", str(self.schema_version)))

    def migrate_to(self, version: int) -> None:
        """Tests: create the schema only up to ``version`` (an older fanout's store)."""
        keep = self.migrations
        try:
            type(self).migrations = keep[:version]  # tests only
            self.migrate()
        finally:
            type(self).migrations = keep


def redact(url: str) -> str:
    """``url`` without its password (what messages and other processes may see)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[1]}"))
