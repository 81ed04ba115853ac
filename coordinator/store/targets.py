"""Which backend a ``--store`` value names: a ``postgresql://`` (or ``postgres://``) URL
is Postgres, a path (or a ``sqlite:`` URL) is SQLite, anything else that looks like a URL
is a :class:`~coordinator.store.schema.StoreError` naming it (never a file named like a
URL).

It sits beside the backends rather than in their base module, so that imports flow one
way: ``targets`` → ``sqlite``/``postgres`` → ``backend``.
"""

from __future__ import annotations

import re
from pathlib import Path

from coordinator.store.backend import Backend, redact
from coordinator.store.schema import StoreError

__all__ = ["open_backend"]

# "scheme://…" or "scheme:…" with a scheme of two letters or more (C:\ is a path).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(//)?")


def open_backend(target: str) -> Backend:
    """The backend a ``--store`` value names (not yet migrated).

    Raises:
        StoreError: a URL of a database fanout cannot use, or Postgres support missing.
    """
    match = _URL.match(target)
    if match is None:
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
