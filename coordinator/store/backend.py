"""One store interface over two databases: what every backend does, and what differs.

As DBOS keeps its system database (a base class and one subclass per database that
overrides only what differs), :class:`Backend` holds everything the store does in
portable SQL (``?`` placeholders, ``INSERT … ON CONFLICT``, ``IS NOT DISTINCT FROM``);
:class:`~coordinator.store.sqlite.SqliteBackend` and
:class:`~coordinator.store.postgres.PostgresBackend` override connecting, the
serialised migration, the transaction that takes the write lock, the per-run lock that
numbers events, notifications, and their error classes.

:func:`open_backend` turns a ``--store`` value into one: a ``postgresql://`` (or
``postgres://``) URL is Postgres, a path is SQLite, anything else that looks like a URL
is a :class:`StoreError` naming it (never a file named like a URL).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit, urlunsplit

from coordinator.store.schema import APP_ID, StoreError, statements

__all__ = ["Backend", "Conn", "Cursor", "is_url", "open_backend", "redact"]

# "scheme://…" or "scheme:…" with a scheme of two letters or more (C:\ is a path).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(//)?")
EVENTS_CHANNEL = "fanout_events"
CANCELS_CHANNEL = "fanout_cancels"


class Cursor(Protocol):
    """What a statement's result offers, on both drivers."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


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
        index, DESIGN §10): beside a SQLite file; ``.fanout`` in the working folder for a
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


def is_url(target: str) -> bool:
    """True when ``target`` is written as a URL (``scheme:`` or ``scheme://``)."""
    return _URL.match(target) is not None


def open_backend(target: str) -> Backend:
    """The backend a ``--store`` value names (not yet migrated).

    Raises:
        StoreError: a URL of a database fanout cannot use, or Postgres support missing.
    """
    match = _URL.match(target)
    if match is None:
        from pathlib import Path

        from coordinator.store.sqlite import SqliteBackend

        if "://" in target:  # "://runs", ":://x": a URL gone wrong, never a file to make
            raise StoreError(f"--store {redact(target)}: not a path nor a URL fanout can open; "
                             "give a file path (SQLite) or a postgresql://user@host:port/dbname "
                             "URL")
        return SqliteBackend(Path(target))
    scheme = match.group(1).lower()
    if scheme in ("postgresql", "postgres"):
        from coordinator.store.postgres import PostgresBackend

        return PostgresBackend(target)
    if scheme == "sqlite":
        from pathlib import Path

        from coordinator.store.sqlite import SqliteBackend

        path = target[match.end():]  # sqlite:///abs/runs.db → /abs/runs.db
        if match.group(2) is not None:
            host, _, rest = path.partition("/")
            if host:
                raise StoreError(f"--store {target}: a sqlite: URL names a file, not a host "
                                 f"({host!r}); sqlite:///abs/path/runs.db or a path")
            path = "/" + rest
        if path.strip("/") == "":
            raise StoreError(f"--store {target}: a sqlite: URL needs a path (sqlite:///runs.db)")
        if path.startswith(":") or "://" in path:
            # sqlite:://bad made a folder ":" holding a file "bad"; sqlite::memory: would
            # make a file ":memory:" (an in-memory store keeps nothing between commands).
            raise StoreError(f"--store {target}: not a sqlite: URL fanout can open; "
                             "sqlite:///abs/path/runs.db or a path")
        return SqliteBackend(Path(path))
    raise StoreError(
        f"--store {redact(target)}: fanout cannot open a {scheme!r} store; give a file "
        "path (SQLite) or a postgresql://user@host:port/dbname URL"
    )


def redact(url: str) -> str:
    """``url`` without its password (what messages and other processes may see)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[1]}"))
