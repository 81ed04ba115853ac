"""The files of a documents folder, by names in any encoding.

A file name is bytes to the operating system; Python shows an undecodable one as a
string with lone surrogates, which no UTF-8 writer (SQLite, a terminal, JSON) accepts.
The folder is therefore walked in bytes (``os.fsencode``), every file keeps its raw
relative path, and is *shown* — in the index, in results, in messages — as UTF-8 with
any other byte escaped (``caf\\xe9.md``). Hidden files and folders, and symlinks that
lead out of the folder, are not part of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["SUFFIXES", "Entry", "scan", "shown", "twin_stem"]

SUFFIXES = frozenset({".md", ".markdown", ".txt", ".text", ".rst", ".html", ".htm", ".pdf"})
_SUFFIXES = frozenset(s.encode() for s in SUFFIXES)
# The names one text has in two forms in one folder: a rendered page and its source.
_TWIN_SUFFIXES = sorted((".html", ".htm", ".txt", ".rst", ".md", ".markdown", ".adoc",
                         ".rst.txt"), key=len, reverse=True)


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of the folder: its raw relative path, modification time and size."""

    raw: bytes
    mtime_ns: int
    size: int


def shown(raw: bytes | str) -> str:
    """A path as text anything can write: UTF-8, other bytes escaped (``\\xe9``)."""
    if isinstance(raw, str):
        raw = os.fsencode(raw)
    return raw.decode("utf-8", "backslashreplace")


def twin_stem(path: str) -> str | None:
    """The path without the suffix that tells a page from its source (``user-manual``
    of ``user-manual.html`` and ``user-manual.txt``), or None for another kind of file.
    A documentation set ships its rendered pages beside their sources under such
    names."""
    lowered = path.lower()
    for suffix in _TWIN_SUFFIXES:
        if lowered.endswith(suffix):
            return path[: -len(suffix)]
    return None


def scan(root: str | os.PathLike[str]) -> dict[str, Entry]:
    """Every indexable file under ``root``: its shown relative path → :class:`Entry`."""
    base = os.fsencode(os.path.realpath(root))
    found: dict[str, Entry] = {}
    # os.scandir: one directory read gives names, kinds and (cached) stats; a refresh
    # that finds nothing changed is this walk and one SELECT.
    pending = [(base, b"")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if name.startswith(b"."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, prefix + name + b"/"))
                    continue
                if os.path.splitext(name)[1].lower() not in _SUFFIXES:
                    continue
                if entry.is_symlink() and not _inside(base, entry.path):
                    continue  # a link out of the folder is not part of it
                if not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue
            raw = prefix + name
            found[shown(raw)] = Entry(raw, st.st_mtime_ns, st.st_size)
    return found


def _inside(base: bytes, path: bytes) -> bool:
    real = os.path.realpath(path)
    return real == base or real.startswith(base.rstrip(b"/") + b"/")
