"""The writes of the passage index: its schema, a refresh's rows, one file re-indexed.

Callers hold the index's write lock (:mod:`subagents.research.writelock`) for the whole
of a refresh. A refresh is a few long transactions (a commit every few million
characters, so readers see it advance and the WAL stays small), not one per file:
FTS5 flushes its pending terms at every savepoint and commit, which made indexing three
times slower. A file that fails half-way is taken back by hand instead. After deletions
the FTS5 segments are merged and the freed pages given back, so re-indexing the same
files does not grow the index. A page's source beside it (``git-push.txt`` beside
``git-push.html``, the same text) is a row naming the page, with no passages of its own
(docs/design.md §10).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subagents.research.documents import (
    Entry,
    NotIndexed,
    read_file,
    same_text,
    sketches,
    twin_stem,
)
from subagents.research.relevance import segments

__all__ = ["PIECES_FROM", "PIECE_CHARS", "SCHEMA_VERSION", "VECTORS_TABLE", "IndexStats",
           "IndexWriter", "create_schema", "embed_missing", "piece_text", "pieces",
           "unchanged"]

SCHEMA_VERSION = 6
PIECES_FROM = 6  # the version whose vectors are a passage's pieces' (5: one, its beginning)
VECTORS_TABLE = """CREATE TABLE vectors (
    passage INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (passage, start)
);
"""
_SCHEMA = f"""
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
    skipped TEXT,
    twin INTEGER
);
CREATE INDEX files_by_twin ON files (twin) WHERE twin IS NOT NULL;
CREATE TABLE passages (id INTEGER PRIMARY KEY, file INTEGER NOT NULL, start INTEGER NOT NULL);
CREATE INDEX passages_by_file ON passages (file, start);
CREATE VIRTUAL TABLE passage_text USING fts5(
    title, heading, body, tokenize = 'porter unicode61 remove_diacritics 2'
);
{VECTORS_TABLE}CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_BATCH = 2000  # passages written at a time
_COMMIT_CHARS = 8_000_000  # characters of text written between commits
_TOO_LARGE = "larger than docs.max_bytes"  # how a skip for size begins (reading.py)


def create_schema(conn: sqlite3.Connection) -> None:
    """Make the tables of an empty database (incremental vacuum, WAL)."""
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")


def unchanged(old: tuple[int, int, str | None], entry: Entry, max_bytes: int) -> bool:
    """Whether a file's row still stands: same time and size, and judged the same way
    about its size (a file skipped as too large under another limit is not)."""
    mtime, size, skipped = old
    too_large = skipped is not None and skipped.startswith(_TOO_LARGE)
    return (mtime, size) == (entry.mtime_ns, entry.size) and too_large == (
        entry.size > max_bytes)


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
    # The semantic part: passages embedded by this refresh, and whether search is hybrid
    # ("semantic: all-MiniLM-L6-v2@…") or lexical, and why ("lexical: …").
    embedded: int = 0
    search: str = "lexical"

    def to_json(self) -> dict[str, Any]:
        """The stats as ``fanout index --json`` prints them."""
        return {
            "folder": self.folder, "index": self.index, "added": self.added,
            "updated": self.updated, "removed": self.removed, "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "elapsed_s": round(self.elapsed_s, 3), "documents": self.documents,
            "passages": self.passages, "size_bytes": self.size_bytes,
            "embedded": self.embedded, "search": self.search,
        }


class IndexWriter:
    """Writes one refresh, or one file, on a connection whose write lock is held."""

    def __init__(self, conn: sqlite3.Connection, root: bytes, max_bytes: int,
                 stopped: Callable[[], bool] = lambda: False,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        self.conn = conn
        self.root = root
        self.max_bytes = max_bytes
        self.stopped = stopped
        self.progress = progress

    def refresh(self, current: dict[str, Entry], stats: IndexStats) -> None:
        """Bring the rows to ``current`` (the folder's files now), counting in ``stats``."""
        conn = self.conn
        known = {
            p: (i, m, s, k, t) for i, p, m, s, k, t in conn.execute(
                "SELECT id, path, mtime_ns, size, skipped, twin FROM files")
        }
        # A source whose page changed or went is read again: it may be a text of its own
        # now (docs/design.md §10, a page and its source).
        moved = {i for p, (i, m, s, k, _t) in known.items()
                 if p not in current or not unchanged((m, s, k), current[p], self.max_bytes)}
        again = {p for p, (*_r, t) in known.items() if t is not None and t in moved}
        next_id = int(conn.execute("SELECT coalesce(max(id), 0) FROM passages").fetchone()[0])
        changed = 0
        written = 0
        conn.execute("BEGIN IMMEDIATE")
        done = False
        try:
            for path, (file_id, *_rest) in known.items():
                if path not in current:
                    changed += _delete(conn, file_id)
                    stats.removed += 1
            total = len(current)
            for seen, (path, entry) in enumerate(sorted(current.items(), key=_pages_first), 1):
                if self.progress is not None and seen % 16 == 0:
                    self.progress("files", seen, total)
                old = known.get(path)
                if old is not None and path not in again and unchanged(
                        old[1:4], entry, self.max_bytes):
                    stats.unchanged += 1
                    if old[3] is not None:
                        stats.skipped.append((path, old[3]))
                    continue
                if self.stopped():
                    break
                if old is not None:
                    changed += _delete(conn, old[0])
                next_id, chars, reason = self.write(path, entry, next_id)
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

    def write(self, path: str, entry: Entry, next_id: int) -> tuple[int, int, str | None]:
        """Index one file (inside the caller's transaction): (the last passage id used,
        characters written, why it was not indexed or None)."""
        conn = self.conn
        first = next_id
        file_id: int | None = None
        try:
            doc = read_file(self.root + b"/" + entry.raw, size=entry.size,
                            max_bytes=self.max_bytes, stopped=self.stopped)
            page = self._page_of(path, doc.kind, doc.signature)
            file_id = conn.execute(
                "INSERT INTO files (path, raw, mtime_ns, size, title, kind, signature, twin) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (path, entry.raw, entry.mtime_ns, entry.size, doc.title, doc.kind,
                 doc.signature, page),
            ).lastrowid
            assert file_id is not None
            if page is not None:
                # The source of a page indexed already: its text is the page's, searched
                # there (and read from the file when asked for by its name).
                doc.close()
                return next_id, 0, None
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
            conn.execute("DELETE FROM vectors WHERE passage > ? AND passage <= ?",
                         (first, next_id))
            reason = str(exc) if isinstance(exc, NotIndexed) else _unreadable(exc)
            conn.execute(
                "INSERT INTO files (path, raw, mtime_ns, size, skipped) VALUES (?, ?, ?, ?, ?)",
                (path, entry.raw, entry.mtime_ns, entry.size, reason),
            )
            return first, 0, reason


    def _page_of(self, path: str, kind: str, signature: bytes) -> int | None:
        """The id of the rendered page (HTML, indexed, in the same folder under the same
        name) whose text a source file of ``path`` is, by their signatures; None when it
        is a text of its own."""
        stem = twin_stem(path)
        if kind not in _SOURCE_KINDS or stem is None:
            return None
        for page_id, page_signature in self.conn.execute(
                "SELECT id, signature FROM files WHERE path IN (?, ?) AND kind = 'html' "
                "AND skipped IS NULL AND twin IS NULL", (f"{stem}.html", f"{stem}.htm")):
            if same_text(sketches(signature), sketches(page_signature)):
                return int(page_id)
        return None

    def reindex(self, path: str, entry: Entry) -> None:
        """Index one changed or new file now, in a transaction of its own."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        done = False
        try:
            old = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
            if old is not None:
                _delete(conn, int(old[0]))
            next_id = int(conn.execute(
                "SELECT coalesce(max(id), 0) FROM passages").fetchone()[0])
            self.write(path, entry, next_id)
            conn.execute("COMMIT")
            done = True
        finally:
            if not done and conn.in_transaction:
                conn.execute("ROLLBACK")


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


_SOURCE_KINDS = frozenset({"text", "markdown"})
_PAGE_SUFFIXES = (".html", ".htm")


def _pages_first(item: tuple[str, Entry]) -> tuple[str, int, str]:
    """The order a refresh reads files in: a rendered page before the sources beside it
    under its name (then each source can be told the page's text), else by path."""
    path = item[0]
    stem = twin_stem(path)
    if stem is None:
        return path, 0, path
    return stem, 0 if path.lower().endswith(_PAGE_SUFFIXES) else 1, path


def _delete(conn: sqlite3.Connection, file_id: int) -> int:
    """Remove a file and its passages (and the rows of the sources whose text it was:
    the next refresh reads them again); how many passages went."""
    conn.execute("DELETE FROM files WHERE twin = ?", (file_id,))
    conn.execute(
        "DELETE FROM passage_text WHERE rowid IN (SELECT id FROM passages WHERE file = ?)",
        (file_id,),
    )
    conn.execute(
        "DELETE FROM vectors WHERE passage IN (SELECT id FROM passages WHERE file = ?)",
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


_EMBED_BATCH = 64  # passages embedded, and written, at a time
PIECE_CHARS = 400
"""Characters of a passage one vector stands for, at most (whole segments: a longer one
is a piece of its own, embedded by its beginning)."""


def pieces(body: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the pieces of a passage's text that are embedded one by one:
    its segments (sentences, code blocks, list items) run together up to
    :data:`PIECE_CHARS`.

    Why pieces and not the passage: a passage of a manual runs to a thousand characters
    and more, the model reads 128 word pieces (about 500 characters) of a text, and an
    answer sits anywhere in it ("the 10 most recent tags" in the fourth entry of an
    OPTIONS section). Measured on the git set of the answers benchmark: the fact in one
    of the 20 passages nearest in meaning for 20 of 25 questions by pieces, against 17
    of 25 in the whole results by passages.
    """
    out: list[tuple[int, int]] = []
    current: list[int] | None = None
    for seg in segments(body):
        if current is None:
            current = [seg.start, seg.end]
        elif seg.end - current[0] <= PIECE_CHARS:
            current[1] = seg.end
        else:
            out.append((current[0], current[1]))
            current = [seg.start, seg.end]
    if current is not None:
        out.append((current[0], current[1]))
    else:  # no words to quote: the passage is still one piece (its title says it)
        out.append((0, len(body)))
    return out


def piece_text(title: str, heading: str, body: str, start: int, end: int) -> str:
    """What one piece is embedded as: the document's title and its own section's name
    before its words (a heading path's last part: "OPTIONS", not the whole path, which
    took a third of the 128 word pieces)."""
    section = heading.rsplit("›", 1)[-1].strip() if heading else ""
    return ". ".join(p for p in (title, section, body[start:end].strip()) if p)


def embed_missing(
    conn: sqlite3.Connection, embedder: Any, stopped: Callable[[], bool],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed the passages that have no vectors yet (every one, when the model changed):
    what an incremental refresh added. Each passage is embedded by its :func:`pieces`;
    vectors are float16, unit length, beside the FTS index; a stop leaves the passages
    written whole. How many passages were embedded."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()
    if row is None or row[0] != embedder.model_id:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM vectors")
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('model', ?)",
                     (embedder.model_id,))
        conn.execute("COMMIT")
    todo = [int(r[0]) for r in conn.execute(
        "SELECT p.id FROM passages p WHERE NOT EXISTS "
        "(SELECT 1 FROM vectors v WHERE v.passage = p.id) ORDER BY p.id")]
    done = 0
    for at in range(0, len(todo), _EMBED_BATCH):
        if stopped():
            break
        ids = todo[at:at + _EMBED_BATCH]
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT rowid, title, heading, body FROM passage_text WHERE rowid IN ({marks})",
            ids).fetchall()
        spans = [(int(pid), start, end, piece_text(title, heading, body, start, end))
                 for pid, title, heading, body in rows for start, end in pieces(body)]
        vectors = embedder.encode([text for *_, text in spans])
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT OR REPLACE INTO vectors (passage, start, end, vec) VALUES (?, ?, ?, ?)",
            [(pid, start, end, v.astype("<f2").tobytes())
             for (pid, start, end, _), v in zip(spans, vectors, strict=True)])
        conn.execute("COMMIT")
        done += len(rows)
        if progress is not None:
            progress(done, len(todo))
    return done
