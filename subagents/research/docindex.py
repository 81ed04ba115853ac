"""A folder of documents indexed in SQLite FTS5, searched with BM25, refreshed incrementally.

The index lives beside the run store (``<store folder>/docs/``), one database per folder,
named after the folder's absolute path: the folder itself is never written to. A file
is read again only when its size or modification time changed; files gone from the
folder leave the index. Text, Markdown, reStructuredText, HTML and PDF are indexed
(through :mod:`subagents.research.extract`, as ``web.fetch`` reads them); a file that
cannot be read is reported, not fatal. Hidden files and folders, and symlinks that lead
out of the folder, are skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.research.extract import Extracted, decode, extract_html, extract_pdf, title_of_text

__all__ = ["SUFFIXES", "DocIndex", "IndexStats", "index_path"]

SUFFIXES = frozenset({".md", ".markdown", ".txt", ".text", ".rst", ".html", ".htm", ".pdf"})
_WORD = re.compile(r"\w+", re.UNICODE)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    title TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(
    title, body, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


def index_path(folder: str | os.PathLike[str], store_dir: str | os.PathLike[str]) -> Path:
    """Where the index of ``folder`` lives under ``store_dir``."""
    root = Path(folder).resolve()
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", root.name)[:40] or "root"
    return Path(store_dir) / "docs" / f"{name}-{digest}.sqlite"


@dataclass
class IndexStats:
    """What one refresh did."""

    folder: str
    index: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    documents: int = 0
    size_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        """The stats as ``fanout index --json`` prints them."""
        return {
            "folder": self.folder, "index": self.index, "added": self.added,
            "updated": self.updated, "removed": self.removed, "unchanged": self.unchanged,
            "failed": [{"path": p, "reason": r} for p, r in self.failed],
            "elapsed_s": round(self.elapsed_s, 3), "documents": self.documents,
            "size_bytes": self.size_bytes,
        }


def read_document(path: Path) -> Extracted:
    """A file's title and text, by its suffix.

    Raises:
        ValueError: the file is not readable as its kind (a damaged PDF).
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return extract_pdf(data)
    text = decode(data)
    if suffix in (".html", ".htm"):
        extracted = extract_html(text)
        return extracted if extracted.title else Extracted(path.stem, extracted.text)
    return Extracted(title_of_text(text) or path.stem, text)


class DocIndex:
    """The FTS5 index of one folder."""

    def __init__(self, folder: str | os.PathLike[str], db_path: str | os.PathLike[str]) -> None:
        self.root = Path(folder).resolve()
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the worker threads tool bodies run in, behind a lock.
        self._db = sqlite3.connect(self.db_path, timeout=30, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.executescript(_SCHEMA)

    @classmethod
    def for_folder(
        cls, folder: str | os.PathLike[str], store_dir: str | os.PathLike[str]
    ) -> DocIndex:
        """The index of ``folder`` kept under ``store_dir``."""
        return cls(folder, index_path(folder, store_dir))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def files(self) -> dict[str, tuple[int, int]]:
        """Every indexable file under the folder: relative path → (mtime_ns, size)."""
        found: dict[str, tuple[int, int]] = {}
        root = self.root
        # os.scandir: one directory read gives names, kinds and (cached) stats; a refresh
        # that finds nothing changed is this walk and one SELECT.
        pending = [(str(root), "")]
        while pending:
            folder, prefix = pending.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, f"{prefix}{name}/"))
                    continue
                if os.path.splitext(name)[1].lower() not in SUFFIXES:
                    continue
                if entry.is_symlink() and not Path(entry.path).resolve().is_relative_to(root):
                    continue  # a link out of the folder is not part of it
                try:
                    st = entry.stat()
                except OSError:
                    continue
                if not entry.is_file():
                    continue
                found[prefix + name] = (st.st_mtime_ns, st.st_size)
        return found

    def is_stale(self) -> bool:
        """Whether any file was added, changed or removed since the last refresh."""
        with self._lock:
            known = {
                p: (m, s) for p, m, s in self._db.execute("SELECT path, mtime_ns, size FROM files")
            }
        return known != self.files()

    def refresh(self) -> IndexStats:
        """Index what changed since the last refresh; drop what is gone."""
        began = time.perf_counter()
        stats = IndexStats(folder=str(self.root), index=str(self.db_path))
        current = self.files()
        with self._lock, self._db:
            db = self._db
            known = {
                p: (i, m, s)
                for i, p, m, s in db.execute("SELECT id, path, mtime_ns, size FROM files")
            }
            for path, (rowid, _m, _s) in known.items():
                if path not in current:
                    db.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))
                    db.execute("DELETE FROM files WHERE id = ?", (rowid,))
                    stats.removed += 1
            for path, (mtime, size) in sorted(current.items()):
                old = known.get(path)
                if old is not None and old[1:] == (mtime, size):
                    stats.unchanged += 1
                    continue
                try:
                    doc = read_document(self.root / path)
                except (OSError, ValueError) as exc:
                    stats.failed.append((path, str(exc)[:200]))
                    doc = None
                if old is not None:
                    db.execute("DELETE FROM docs WHERE rowid = ?", (old[0],))
                    db.execute("DELETE FROM files WHERE id = ?", (old[0],))
                if doc is None:
                    continue
                cur = db.execute(
                    "INSERT INTO files (path, mtime_ns, size, title) VALUES (?, ?, ?, ?)",
                    (path, mtime, size, doc.title),
                )
                db.execute(
                    "INSERT INTO docs (rowid, title, body) VALUES (?, ?, ?)",
                    (cur.lastrowid, doc.title, doc.text),
                )
                if old is None:
                    stats.added += 1
                else:
                    stats.updated += 1
            stats.documents = int(db.execute("SELECT count(*) FROM files").fetchone()[0])
        stats.elapsed_s = time.perf_counter() - began
        stats.size_bytes = self.db_path.stat().st_size
        return stats

    def search(self, query: str, limit: int = 8) -> list[dict[str, Any]]:
        """The best ``limit`` documents for ``query`` by BM25 (titles weigh 4× the text).

        Every word of the query must appear; when no document has them all, any word will
        do (ranked by BM25, so documents with more of them come first). The query is
        words, never FTS5 syntax: quotes and operators a model writes cannot break it.
        """
        words = _WORD.findall(query)
        if not words:
            return []
        terms = [f'"{w}"' for w in words[:32]]
        rows: list[Any] = []
        for match in (" AND ".join(terms), " OR ".join(terms)):
            with self._lock:
                rows = self._db.execute(
                    "SELECT f.path, f.title, snippet(docs, 1, '', '', '…', 24), "
                    "bm25(docs, 4.0, 1.0) AS rank FROM docs JOIN files f ON f.id = docs.rowid "
                    "WHERE docs MATCH ? ORDER BY rank LIMIT ?",
                    (match, limit),
                ).fetchall()
            if rows or len(terms) == 1:
                break
        return [
            {"path": p, "title": t, "snippet": " ".join(s.split()), "score": round(-r, 4)}
            for p, t, s, r in rows
        ]

    def title_of(self, path: str) -> str | None:
        """The indexed title of ``path``, or None when it is not indexed."""
        with self._lock:
            row = self._db.execute("SELECT title FROM files WHERE path = ?", (path,)).fetchone()
        return None if row is None else str(row[0])
