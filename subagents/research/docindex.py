"""A folder of documents indexed as passages in SQLite FTS5, refreshed incrementally.

The index lives beside the run store (``<store folder>/docs/``), one database per folder,
named after the folder's absolute path: the folder itself is never written to. A file is
read again only when its size or modification time changed; files gone from the folder
leave the index. Each file is a row of ``files`` (its shown path, its raw path, title,
kind, length, signature — or why it is not indexed); its text is cut into passages
(:mod:`subagents.research.documents`), one FTS5 row each (title, heading, body). Searches
and reads are in :mod:`subagents.research.docsearch`.

Concurrency (docs/design.md §10, "Work that can be cut off"):

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

import functools
import hashlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.research.documents import (
    DEFAULT_MAX_BYTES,
    SUFFIXES,
    Entry,
    NotIndexed,
    read_file,
    scan,
    shown,
)
from subagents.research.docwriter import (
    PIECES_FROM,
    SCHEMA_VERSION,
    VECTORS_TABLE,
    IndexStats,
    IndexWriter,
    create_schema,
    embed_missing,
    unchanged,
)
from subagents.research.writelock import WriteLock

if TYPE_CHECKING:  # the reads' module is imported by the reads: indexing never needs it
    from subagents.research import docsearch

__all__ = [
    "SUFFIXES",
    "DocIndex",
    "DocumentError",
    "IndexStats",
    "Interrupt",
    "Interrupted",
    "index_path",
]

_POOL = 4  # idle reader connections kept


def index_path(folder: str | os.PathLike[str], store_dir: str | os.PathLike[str]) -> Path:
    """Where the index of ``folder`` lives under ``store_dir``."""
    root = os.path.realpath(folder)
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(root))[:40] or "root"
    return Path(store_dir) / "docs" / f"{name}-{digest}.sqlite"


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
        semantic: str = "auto",
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
        # "auto": hybrid search where the semantic extra is installed; "off" (or the
        # operator's FANOUT_SEMANTIC=off): lexical only.
        self.semantic = "off" if os.environ.get("FANOUT_SEMANTIC") == "off" else semantic
        self._vectors: tuple[tuple[int, int], Any, Any] | None = None  # (version, spans, matrix)
        self._vectors_lock = threading.Lock()
        self._ensure_schema()
        if self.semantic != "off":
            # Its first search or refresh needs the model: its load (~0.35 s from the
            # checked copy, ~0.9 s from the zip) starts now, beside the caller's own work.
            try:
                from subagents.research.embedding import preload
            except ImportError:  # a tree without the semantic part: lexical
                pass
            else:
                preload(self.model_dir)

    @classmethod
    def for_folder(
        cls, folder: str | os.PathLike[str], store_dir: str | os.PathLike[str],
        *, max_bytes: int = DEFAULT_MAX_BYTES, semantic: str = "auto",
    ) -> DocIndex:
        """The index of ``folder`` kept under ``store_dir``."""
        return cls(folder, index_path(folder, store_dir), max_bytes=max_bytes,
                   semantic=semantic)

    @property
    def model_dir(self) -> Path:
        """Where the checked copy of the embedding model's weights is kept, beside the
        indexes (:mod:`subagents.research.modelcopy`)."""
        return self.db_path.parent / "model"

    def embedder(self) -> Any:
        """The embedding model hybrid search uses, or None (lexical search)."""
        if self.semantic == "off":
            return None
        try:
            from subagents.research.embedding import load_embedder
        except ImportError:  # a tree without the semantic part: lexical
            return None
        return load_embedder(copy_dir=self.model_dir)

    def search_kind(self) -> str:
        """How this index searches: "semantic: MODEL" or "lexical: why"."""
        if self.semantic == "off":
            return "lexical: docs.semantic is off"
        try:
            from subagents.research.embedding import semantic_unavailable_reason
        except ImportError:
            return "lexical: no semantic part in this installation"
        reason = semantic_unavailable_reason(self.model_dir)
        if reason is not None:
            return f"lexical: {reason}"
        embedder = self.embedder()
        return f"semantic: {embedder.model_id}" if embedder is not None else "lexical"

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
            if version == PIECES_FROM - 1 and SCHEMA_VERSION == PIECES_FROM:
                # Only the vectors changed (one per piece of a passage, not one per
                # passage): the text stays, the passages are embedded again. (A later
                # version makes a version-5 index anew: this step alone would not do.)
                conn = self._connect()
                try:
                    conn.executescript(
                        f"BEGIN IMMEDIATE; DROP TABLE vectors; {VECTORS_TABLE}"
                        "DELETE FROM meta WHERE key = 'model'; "
                        f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
                finally:
                    conn.close()
                return
            if tables:
                # An index of another version is a cache of the folder: made anew.
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)
            conn = self._connect()
            try:
                create_schema(conn)
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
            not unchanged(known[p], e, self.max_bytes) for p, e in current.items())

    def refresh(
        self, stop: threading.Event | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> IndexStats:
        """Index what changed since the last refresh; drop what is gone; embed the new
        passages (hybrid search, where the semantic extra is installed).

        Waits while another refresh of the same index runs (then usually finds nothing
        left to do). ``stop`` ends the refresh early: what was written stays.
        ``progress(stage, done, total)`` hears how far a long refresh has got ("files",
        then "embeddings").
        """
        stopped = stop.is_set if stop is not None else (lambda: False)
        began = time.perf_counter()
        stats = IndexStats(folder=self.shown_root, index=shown(os.fsencode(self.db_path)))
        with self._lock.held(stopped) as acquired:
            if acquired:
                conn = self._connect()
                try:
                    writer = IndexWriter(conn, self._root_raw, self.max_bytes, stopped,
                                         progress=progress)
                    writer.refresh(self.files(), stats)
                    embedder = self.embedder()
                    stats.search = self.search_kind()
                    if embedder is not None:
                        stats.embedded = embed_missing(
                            conn, embedder, stopped,
                            None if progress is None else functools.partial(
                                progress, "embeddings"))
                        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    conn.close()
        stats.elapsed_s = time.perf_counter() - began
        stats.size_bytes = self.db_path.stat().st_size
        return stats

    # -- reads ---------------------------------------------------------------------

    def search(
        self, query: str, limit: int = 8, interrupt: Interrupt | None = None
    ) -> list[dict[str, Any]]:
        """The best ``limit`` passages for ``query`` (see :mod:`docsearch`)."""
        return self.find(query, limit, interrupt).results

    def find(
        self, query: str, limit: int = 8, interrupt: Interrupt | None = None
    ) -> docsearch.Found:
        """The best ``limit`` passages for ``query`` and whether they answer it."""
        from subagents.research import docsearch

        with self._reader(interrupt) as conn:
            dense = self._dense(conn, query)
            return docsearch.search(conn, query, limit, dense)

    def _dense(self, conn: sqlite3.Connection, query: str) -> docsearch.Dense | None:
        """The query's semantic similarity to every embedded piece of a passage, or None
        (lexical)."""
        embedder = self.embedder()
        if embedder is None:
            return None
        import numpy as np

        generation = int(conn.execute("PRAGMA data_version").fetchone()[0])
        count = int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
        with self._vectors_lock:
            cached = self._vectors
            if cached is None or cached[0] != (generation, count):
                rows = conn.execute(
                    "SELECT passage, start, end, vec FROM vectors ORDER BY passage, start")
                spans, blobs = [], []
                for pid, start, end, vec in rows:
                    spans.append((int(pid), int(start), int(end)))
                    blobs.append(vec)
                if not spans:
                    return None
                matrix = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(
                    len(spans), embedder.dim).astype(np.float32)
                cached = self._vectors = ((generation, count), np.asarray(spans), matrix)
        _key, spans_arr, matrix = cached
        q = embedder.encode([query])[0]
        from subagents.research import docsearch

        return docsearch.Dense(spans_arr[:, 0], spans_arr[:, 1], spans_arr[:, 2], matrix @ q,
                               measure=lambda texts: embedder.encode(texts) @ q)

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
        file_id, _raw, _m, size, title, length, skipped, twin = row
        if skipped is not None:
            raise DocumentError(f"{path!r} is not indexed: {skipped}", "unreadable_content",
                                expected="a document of the folder that is indexed")
        whole: str | None = None
        if twin is not None:
            # A page's source: searched as the page, read from its own file.
            whole = self._source_text(path, full, size)
            length = len(whole)
        if start > length:
            raise DocumentError(f"start {start} is past the end of {path!r}", "out_of_range",
                                field="start", expected=f"at most {length} (the text's length)")
        end = min(length, start + window)
        if whole is not None:
            text = whole[start:end]
        else:
            from subagents.research import docsearch

            with self._reader(interrupt) as conn:
                text = docsearch.read_window(conn, file_id, start, end)
        return {
            "path": path, "title": title, "text": text, "truncated": end < length,
            "start": start, "next_start": end if end < length else None, "length": length,
        }

    def _row(self, path: str, interrupt: Interrupt | None) -> tuple[Any, ...] | None:
        with self._reader(interrupt) as conn:
            row = conn.execute(
                "SELECT id, raw, mtime_ns, size, title, length, skipped, twin FROM files "
                "WHERE path = ?", (path,)).fetchone()
        return None if row is None else tuple(row)

    def _source_text(self, path: str, full: bytes, size: int) -> str:
        """The text of a file indexed as its page's source (its passages, joined), read
        from the file: the index keeps only the page's."""
        try:
            doc = read_file(full, size=size, max_bytes=self.max_bytes)
        except NotIndexed as exc:
            raise DocumentError(f"{path!r} cannot be read: {exc}",
                                "unreadable_content") from None
        return "".join(p.text for p in doc.passages)

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
                IndexWriter(conn, self._root_raw, self.max_bytes).reindex(path, entry)
            finally:
                conn.close()
        return True
