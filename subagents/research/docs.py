"""``docs.search`` and ``docs.read``: a local folder, searched and read, never left.

``docs.read`` takes a path relative to the folder and refuses, as a ``validation``
failure naming ``path``, anything that would leave it: ``..``, an absolute path, a
symlink (file or folder on the way) that resolves outside, a file that is not one of the
indexed kinds. It reads the file as it is now (not the indexed copy), a window of
``WINDOW`` characters from ``start``.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from subagents.research.docindex import SUFFIXES, DocIndex, read_document
from subagents.research.errors import invalid

__all__ = ["WINDOW", "DocsReader", "confine"]

WINDOW = 20_000  # characters of one docs.read


def confine(root: Path, path: str) -> Path:
    """``path`` inside ``root`` (resolved), or a validation failure naming ``path``."""
    expected = "a path relative to the documents folder, as docs.search returns it"
    if not path or "\x00" in path:
        raise invalid("docs.read", "path", expected, f"{path!r} is not a path", "invalid_path")
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or os.path.isabs(path) or (len(path) > 1 and path[1] == ":"):
        raise invalid("docs.read", "path", expected, f"{path!r} is absolute", "outside_corpus")
    if ".." in pure.parts:
        raise invalid("docs.read", "path", expected, f"{path!r} leaves the folder",
                      "outside_corpus")
    full = (root / Path(*pure.parts)).resolve()
    if not full.is_relative_to(root):
        # A symlink on the way leads out: the folder's own files only.
        raise invalid("docs.read", "path", expected, f"{path!r} leads out of the folder",
                      "outside_corpus")
    if any(part.startswith(".") for part in pure.parts):
        raise invalid("docs.read", "path", expected, f"{path!r} is hidden", "outside_corpus")
    if not full.is_file():
        raise invalid("docs.read", "path", expected, f"no document {path!r} in the folder",
                      "not_found")
    if full.suffix.lower() not in SUFFIXES:
        raise invalid(
            "docs.read", "path", "a document of the folder (text, Markdown, HTML or PDF)",
            f"{path!r} is not an indexed kind of document", "outside_corpus",
        )
    return full


class DocsReader:
    """The bodies of ``docs.search`` and ``docs.read`` over one folder's index."""

    def __init__(self, index: DocIndex) -> None:
        self.index = index
        self.root = index.root

    def search(self, query: str, limit: int) -> dict[str, Any]:
        """``{results: [{path, title, snippet, score}]}``, best first."""
        if not query.strip():
            raise invalid("docs.search", "query", "a non-empty query", "the query is empty",
                          "invalid_query")
        return {"results": self.index.search(query, limit)}

    def read(self, path: str, start: int) -> dict[str, Any]:
        """``{path, title, text, truncated, start, next_start, length}`` of one document."""
        full = confine(self.root, path)
        try:
            doc = read_document(full)
        except (OSError, ValueError) as exc:
            raise invalid("docs.read", "path", "a readable document",
                          f"{path!r} cannot be read ({exc})", "unreadable_content") from None
        text = doc.text
        if start > len(text):
            raise invalid("docs.read", "start", f"at most {len(text)} (the text's length)",
                          f"start {start} is past the end of {path!r}", "out_of_range")
        window = text[start:start + WINDOW]
        end = start + len(window)
        rel = full.relative_to(self.root).as_posix()
        return {
            "path": rel,
            "title": self.index.title_of(rel) or doc.title,
            "text": window,
            "truncated": end < len(text),
            "start": start,
            "next_start": end if end < len(text) else None,
            "length": len(text),
        }
