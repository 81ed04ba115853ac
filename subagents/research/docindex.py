"""A folder of documents indexed as passages in SQLite FTS5, refreshed incrementally.

The index lives beside the run store (``<store folder>/docs/``), one database per folder,
named after the folder's absolute path: the folder itself is never written to. A file is
read again only when its size or modification time changed; files gone from the folder
leave the index. Each file is a row of ``files`` (its shown path, its raw path, title,
kind, length, signature — or why it is not indexed); its text is cut into passages
(:mod:`subagents.research.documents`), one FTS5 row each (title, heading, body). Searches
and reads are in :mod:`subagents.research.docsearch`.

Concurrency (DESIGN §10, "Work that can be cut off"):

- **One writer.** A refresh holds an exclusive lock on ``<index>.lock`` (``flock``): a
  second refresh — another ``fanout index``, another run opening the same folder —
  waits for it, then finds nothing left to do. Readers never wait: the database is in
  WAL mode, so they read the index as it was when their query began.
- **Interruptible readers.** Searches and reads run on pooled connections; a call made
  with an :class:`Interrupt` can be cut off from another thread (``interrupt()``, and a
  progress handler for the moment before its statement starts). An interrupted call
  holds nothing afterwards.
- **Bounded.** Files over ``max_bytes`` and binary files are not indexed, and are
  listed with the reason (:class:`IndexStats`); a read holds one window of text.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.research import docsearch
from subagents.research.documents import (
    DEFAULT_MAX_BYTES,
    SUFFIXES,
    Entry,
    NotIndexed,
    read_file,
    scan,
    shown,
)
from subagents.research.writelock import WriteLock

__all__ = [
    "SUFFIXES",
    "DocIndex",
    "DocumentError",
    "IndexStats",
    "Interrupt",
    "Interrupted",
    "index_path",
]

SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    raw BLOB NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL DEFAULT '',
    length INTEGER NOT NULL DEFAULT 0,
    signature BLOB NOT NULL DEFAULT x'',
    skipped TEXT
);
CREATE TABLE passages (id INTEGER PRIMARY KEY, file INTEGER NOT NULL, start INTEGER NOT NULL);
CREATE INDEX passages_by_file ON passages (file, start);
CREATE VIRTUAL TABLE passage_text USING fts5(
    title, heading, body, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""
_BATCH = 2000  # passages written at a time
_COMMIT_CHARS = 8_000_000  # characters of text written between commits
_POOL = 4  # idle reader connections kept
_TOO_LARGE = "larger than docs.max_bytes"  # how a skip for size begins (reading.py)


def index_path(folder: str | os.PathLike[str], store_dir: str | os.PathLike[str]) -> Path:
    """Where the index of ``folder`` lives under ``store_dir``."""
    root = os.path.realpath(folder)
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(root))[:40] or "root"
    return Path(store_dir) / "docs" / f"{name}-{digest}.sqlite"


@dataclass
class IndexStats:
    """What one refresh did, and what the index leaves out (``skipped``: every file not
    indexed, with the reason — too large, binary, unreadable)."""

    folder: str
    index: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    documents: int = 0
    passages: int = 0
    size_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        """The stats as ``fanout index --json`` prints them."""
        return {
            "folder": self.folder, "index": self.index, "added": self.added,
            "updated": self.updated, "removed": self.removed, "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "elapsed_s": round(self.elapsed_s, 3), "documents": self.documents,
            "passages": self.passages, "size_bytes": self.size_bytes,
        }


class Interrupted(Exception):
    """A search or read that was cut off before it finished."""


class DocumentError(Exception):
    """``docs.read`` of a path that is no document of the index: ``field`` and
    ``error_type`` say what the model should correct (the message names no folder)."""

    def __init__(self, message: str, error_type: str, *, field: str = "path",
                 expected: str = "a path docs.search returned") -> None:
        super().__init__(message)
        self.error_type = error_type
        self.field = field
        self.expected = expected


class Interrupt:
    """Cuts off one call's index work from another thread (a timeout, a cancellation)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.stopped = False

    def stop(self) -> None:
        """Interrupt the statement running now, and any the call would start next."""
        with self._lock:
            self.stopped = True
            if self._conn is not None:
                self._conn.interrupt()

    @contextmanager
    def attached(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Make ``conn``'s statements interruptible by :meth:`stop` while inside."""
        with self._lock:
            if self.stopped:
                raise Interrupted("interrupted before it began")
            self._conn = conn
        conn.set_progress_handler(lambda: 1 if self.stopped else 0, 1000)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if self.stopped or "interrupted" in str(exc):
                raise Interrupted(str(exc)) from None
            raise
        finally:
            with self._lock:
                self._conn = None
            conn.set_progress_handler(None, 0)


class DocIndex:
    """The passage index of one folder."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        db_path: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.root = Path(os.path.realpath(folder))
        self._root_raw = os.fsencode(self.root)
        self.shown_root = shown(self._root_raw)
        self.db_path = Path(db_path)
        self.max_bytes = max_bytes
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = WriteLock(self.db_path.with_name(self.db_path.name + ".lock"))
        self._pool: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._ensure_schema()

    @classmethod
    def for_folder(
        cls, folder: str | os.PathLike[str], store_dir: str | os.PathLike[str],
        *, max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> DocIndex:
        """The index of ``folder`` kept under ``store_dir``."""
        return cls(folder, index_path(folder, store_dir), max_bytes=max_bytes)

    # -- connections ---------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=60, check_same_thread=False,
                               isolation_level=None)
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _version(self) -> tuple[int, int]:
        conn = self._connect()
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            tables = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
        finally:
            conn.close()
        return version, tables

    def _ensure_schema(self) -> None:
        if self._version()[0] == SCHEMA_VERSION:
            return
        with self._lock.held():
            version, tables = self._version()
            if version == SCHEMA_VERSION:
                return  # another process made it while this one waited
            if tables:
                # An index of another version is a cache of the folder: made anew.
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)
            conn = self._connect()
            try:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(
                    f"BEGIN; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            finally:
                conn.close()

    @contextmanager
    def _reader(self, interrupt: Interrupt | None) -> Iterator[sqlite3.Connection]:
        """A pooled connection for one call, interruptible through ``interrupt``."""
        with self._pool_lock:
            if self._closed:
                raise Interrupted("the index is closed")
            conn = self._pool.pop() if self._pool else None
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = 1")
        healthy = False
        try:
            if interrupt is None:
                yield conn
            else:
                with interrupt.attached(conn):
                    yield conn
            healthy = True
        finally:
            with self._pool_lock:
                keep = healthy and not self._closed and len(self._pool) < _POOL
                if keep:
                    self._pool.append(conn)
            if not keep:
                conn.close()

    def close(self) -> None:
        """Close the idle connections; calls still running close theirs when they end."""
        with self._pool_lock:
            self._closed = True
            idle, self._pool = self._pool, []
        for conn in idle:
            conn.close()

    # -- refresh -------------------------------------------------------------------

    def files(self) -> dict[str, Entry]:
        """Every indexable file under the folder, by its shown relative path."""
        return scan(self.root)

    def is_stale(self) -> bool:
        """Whether any file was added, changed or removed since the last refresh (or
        would be judged otherwise under this index's ``max_bytes``)."""
        with self._reader(None) as conn:
            known = {p: (m, s, k) for p, m, s, k in conn.execute(
                "SELECT path, mtime_ns, size, skipped FROM files")}
        current = self.files()
        return known.keys() != current.keys() or any(
            not self._unchanged(known[p], e) for p, e in current.items())

    def _unchanged(self, old: tuple[int, int, str | None], entry: Entry) -> bool:
        """Whether a file's row still stands: same time and size, and judged the same
        way about its size (a file skipped as too large under another limit is not)."""
        mtime, size, skipped = old
        too_large = skipped is not None and skipped.startswith(_TOO_LARGE)
        return (mtime, size) == (entry.mtime_ns, entry.size) and too_large == (
            entry.size > self.max_bytes)

    def refresh(self, stop: threading.Event | None = None) -> IndexStats:
        """Index what changed since the last refresh; drop what is gone.

        Waits while another refresh of the same index runs (then usually finds nothing
        left to do). ``stop`` ends the refresh early: what was written stays.
        """
        stopped = stop.is_set if stop is not None else (lambda: False)
        began = time.perf_counter()
        stats = IndexStats(folder=self.shown_root, index=shown(os.fsencode(self.db_path)))
        with self._lock.held(stopped) as acquired:
            if acquired:
                conn = self._connect()
                try:
                    self._refresh(conn, stats, stopped)
                finally:
                    conn.close()
        stats.elapsed_s = time.perf_counter() - began
        stats.size_bytes = self.db_path.stat().st_size
        return stats

    def _refresh(
        self, conn: sqlite3.Connection, stats: IndexStats, stopped: Callable[[], bool]
    ) -> None:
        current = self.files()
        known = {
            p: (i, m, s, k) for i, p, m, s, k in conn.execute(
                "SELECT id, path, mtime_ns, size, skipped FROM files")
        }
        next_id = int(conn.execute("SELECT coalesce(max(id), 0) FROM passages").fetchone()[0])
        changed = 0
        written = 0
        conn.execute("BEGIN IMMEDIATE")
        done = False
        try:
            for path, (file_id, _m, _s, _k) in known.items():
                if path not in current:
                    changed += _delete(conn, file_id)
                    stats.removed += 1
            for path, entry in sorted(current.items()):
                old = known.get(path)
                if old is not None and self._unchanged(old[1:], entry):
                    stats.unchanged += 1
                    if old[3] is not None:
                        stats.skipped.append((path, old[3]))
                    continue
                if stopped():
                    break
                if old is not None:
                    changed += _delete(conn, old[0])
                next_id, chars, reason = self._write(conn, path, entry, next_id, stopped)
                written += chars
                if reason is not None:
                    stats.skipped.append((path, reason))
                if old is None:
                    stats.added += 1
                else:
                    stats.updated += 1
                if written >= _COMMIT_CHARS:
                    conn.execute("COMMIT")
                    conn.execute("BEGIN IMMEDIATE")
                    written = 0
            conn.execute("COMMIT")
            done = True
        finally:
            if not done and conn.in_transaction:
                conn.execute("ROLLBACK")
        stats.documents, stats.passages = (int(x) for x in conn.execute(
            "SELECT (SELECT count(*) FROM files WHERE skipped IS NULL), "
            "(SELECT count(*) FROM passages)").fetchone())
        if changed:
            _tidy(conn, changed, stats.passages)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _write(
        self, conn: sqlite3.Connection, path: str, entry: Entry, next_id: int,
        stopped: Callable[[], bool],
    ) -> tuple[int, int, str | None]:
        """Index one file (inside the refresh's transaction): (next passage id,
        characters written, why it was not indexed or None)."""
        first = next_id
        file_id: int | None = None
        try:
            doc = read_file(self._root_raw + b"/" + entry.raw, size=entry.size,
                            max_bytes=self.max_bytes, stopped=stopped)
            file_id = conn.execute(
                "INSERT INTO files (path, raw, mtime_ns, size, title, kind, signature) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (path, entry.raw, entry.mtime_ns, entry.size, doc.title, doc.kind,
                 doc.signature),
            ).lastrowid
            assert file_id is not None
            length = 0
            batch: list[tuple[int, int, str, str]] = []
            for passage in doc.passages:
                next_id += 1
                batch.append((next_id, passage.start, passage.heading, passage.text))
                length = passage.start + len(passage.text)
                if len(batch) >= _BATCH:
                    _insert(conn, file_id, doc.title, batch)
                    batch = []
            _insert(conn, file_id, doc.title, batch)
            conn.execute("UPDATE files SET length = ? WHERE id = ?", (length, file_id))
            return next_id, length, None
        except (NotIndexed, OSError, UnicodeError, ValueError) as exc:
            # No savepoint per file (FTS5 flushes its pending terms at every one, which
            # made indexing three times slower): what was written of it is taken back.
            if file_id is not None:
                _delete(conn, file_id)
            conn.execute("DELETE FROM passage_text WHERE rowid > ? AND rowid <= ?",
                         (first, next_id))
            reason = str(exc) if isinstance(exc, NotIndexed) else _unreadable(exc)
            conn.execute(
                "INSERT INTO files (path, raw, mtime_ns, size, skipped) VALUES (?, ?, ?, ?, ?)",
                (path, entry.raw, entry.mtime_ns, entry.size, reason),
            )
            return first, 0, reason

    # -- reads ---------------------------------------------------------------------

    def search(
        self, query: str, limit: int = 8, interrupt: Interrupt | None = None
    ) -> list[dict[str, Any]]:
        """The best ``limit`` passages for ``query`` (see :mod:`docsearch`)."""
        with self._reader(interrupt) as conn:
            return docsearch.search(conn, query, limit)

    def title_of(self, path: str) -> str | None:
        """The indexed title of ``path``, or None when it is not indexed."""
        with self._reader(None) as conn:
            row = conn.execute("SELECT title FROM files WHERE path = ?", (path,)).fetchone()
        return None if row is None else str(row[0])

    def read(
        self, path: str, start: int, window: int, interrupt: Interrupt | None = None
    ) -> dict[str, Any]:
        """``window`` characters of the document ``path`` from ``start``: ``{path, title,
        text, truncated, start, next_start, length}``. A file changed (or added) since
        the last refresh is indexed again first — unless a refresh holds the index, when
        the indexed text is read.

        Raises:
            DocumentError: ``path`` is no document of the folder, or ``start`` is past
                its end.
        """
        row = self._row(path, interrupt)
        full = self._full(path, row)
        try:
            st = os.stat(full)
        except OSError:
            raise DocumentError(f"no document {path!r} in the folder", "not_found") from None
        if row is None or (row[2], row[3]) != (st.st_mtime_ns, st.st_size):
            raw = row[1] if row is not None else os.fsencode(path)
            if self._refresh_one(path, Entry(raw, st.st_mtime_ns, st.st_size)):
                row = self._row(path, interrupt)
            if row is None:
                raise DocumentError(f"{path!r} is not indexed yet (a refresh is running)",
                                    "not_indexed")
        file_id, _raw, _m, _s, title, length, skipped = row
        if skipped is not None:
            raise DocumentError(f"{path!r} is not indexed: {skipped}", "unreadable_content",
                                expected="a document of the folder that is indexed")
        if start > length:
            raise DocumentError(f"start {start} is past the end of {path!r}", "out_of_range",
                                field="start", expected=f"at most {length} (the text's length)")
        end = min(length, start + window)
        with self._reader(interrupt) as conn:
            text = docsearch.read_window(conn, file_id, start, end)
        return {
            "path": path, "title": title, "text": text, "truncated": end < length,
            "start": start, "next_start": end if end < length else None, "length": length,
        }

    def _row(self, path: str, interrupt: Interrupt | None) -> tuple[Any, ...] | None:
        with self._reader(interrupt) as conn:
            row = conn.execute(
                "SELECT id, raw, mtime_ns, size, title, length, skipped FROM files "
                "WHERE path = ?", (path,)).fetchone()
        return None if row is None else tuple(row)

    def _full(self, path: str, row: tuple[Any, ...] | None) -> bytes:
        """The file's absolute path (bytes), confined to the folder."""
        raw = bytes(row[1]) if row is not None else os.fsencode(path)
        full = self._root_raw + b"/" + raw
        real = os.path.realpath(full)
        if not real.startswith(self._root_raw.rstrip(b"/") + b"/"):
            # A symlink on the way leads out: the folder's own files only.
            raise DocumentError(f"{path!r} leads out of the folder", "outside_corpus")
        if os.path.splitext(raw)[1].lower().decode("ascii", "replace") not in SUFFIXES:
            raise DocumentError(f"{path!r} is not an indexed kind of document",
                                "outside_corpus",
                                expected="a document of the folder (text, Markdown, HTML "
                                "or PDF)")
        return full

    def _refresh_one(self, path: str, entry: Entry) -> bool:
        """Index one changed or new file now, if no refresh holds the index (False)."""
        with self._lock.held(wait=False) as acquired:
            if not acquired:
                return False
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                done = False
                try:
                    old = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
                    if old is not None:
                        _delete(conn, int(old[0]))
                    next_id = int(conn.execute(
                        "SELECT coalesce(max(id), 0) FROM passages").fetchone()[0])
                    self._write(conn, path, entry, next_id, lambda: False)
                    conn.execute("COMMIT")
                    done = True
                finally:
                    if not done and conn.in_transaction:
                        conn.execute("ROLLBACK")
            finally:
                conn.close()
        return True


def _insert(
    conn: sqlite3.Connection, file_id: int, title: str, batch: list[tuple[int, int, str, str]]
) -> None:
    if not batch:
        return
    conn.executemany("INSERT INTO passages (id, file, start) VALUES (?, ?, ?)",
                     [(i, file_id, start) for i, start, _, _ in batch])
    conn.executemany(
        "INSERT INTO passage_text (rowid, title, heading, body) VALUES (?, ?, ?, ?)",
        [(i, title, heading, body) for i, _, heading, body in batch],
    )


def _delete(conn: sqlite3.Connection, file_id: int) -> int:
    """Remove a file and its passages; how many passages went."""
    conn.execute(
        "DELETE FROM passage_text WHERE rowid IN (SELECT id FROM passages WHERE file = ?)",
        (file_id,),
    )
    # Counted on the plain table: a virtual table's rowcount says nothing.
    gone = conn.execute("DELETE FROM passages WHERE file = ?", (file_id,)).rowcount
    conn.execute("DELETE FROM files WHERE id = ?", (file_id,))
    return max(gone, 1)


def _tidy(conn: sqlite3.Connection, changed: int, total: int) -> None:
    """After deletions: merge FTS5's segments (an update-only refresh must not grow the
    index) and give the freed pages back to the file system."""
    if changed * 8 >= total:
        conn.execute("INSERT INTO passage_text (passage_text) VALUES ('optimize')")
    else:
        conn.execute("INSERT INTO passage_text (passage_text, rank) VALUES ('merge', 500)")
    # executescript steps it to the end (execute() would free one page per call).
    conn.executescript("PRAGMA incremental_vacuum;")


def _unreadable(exc: BaseException) -> str:
    """Why a file could not be read, without its absolute path."""
    if isinstance(exc, OSError):
        return f"unreadable ({exc.strerror or type(exc).__name__})"
    return f"unreadable ({type(exc).__name__})"
