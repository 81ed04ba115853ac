"""``docs.search`` and ``docs.read``: a local folder, searched and read, never left.

``docs.read`` takes a path as ``docs.search`` shows it (relative to the folder; a name
that is not UTF-8 shown escaped) and refuses, as a ``validation`` failure naming
``path``, anything that would leave the folder: ``..``, an absolute path, a symlink
(file or folder on the way) that resolves outside, a hidden file, a file that is not
one of the indexed kinds. It reads the indexed text — the file indexed again first if
it changed — a window of ``WINDOW`` characters from ``start``.

Both run in worker threads (a limiter of their own, so a burst of them never takes the
threads the rest of the process needs) and never block the event loop. A call that is
cancelled — the executor's timeout, a cancelled run — interrupts its SQLite statement
at once: the thread ends, and no connection or lock stays held. Messages name paths
relative to the folder, never the folder itself.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from shared.clock import in_virtual_time
from shared.envelope import ToolError
from subagents.research.docindex import DocIndex, DocumentError, Interrupt, Interrupted
from subagents.research.errors import ResearchToolError, invalid

__all__ = ["WINDOW", "DocsReader", "check_path"]

WINDOW = 20_000  # characters of one docs.read
_THREADS = 4  # index calls running at once per folder
_T = TypeVar("_T")


def check_path(path: str) -> None:
    """Refuse a ``docs.read`` path that is not a relative path inside the folder (a
    validation failure naming ``path``)."""
    expected = "a path relative to the documents folder, as docs.search returns it"
    if not path or "\x00" in path:
        raise invalid("docs.read", "path", expected, f"{path!r} is not a path", "invalid_path")
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or os.path.isabs(path) or (len(path) > 1 and path[1] == ":"):
        raise invalid("docs.read", "path", expected, f"{path!r} is absolute", "outside_corpus")
    if ".." in pure.parts:
        raise invalid("docs.read", "path", expected, f"{path!r} leaves the folder",
                      "outside_corpus")
    if any(part.startswith(".") for part in PurePosixPath(path).parts):
        raise invalid("docs.read", "path", expected, f"{path!r} is hidden", "outside_corpus")


class DocsReader:
    """The bodies of ``docs.search`` and ``docs.read`` over one folder's index."""

    def __init__(self, index: DocIndex) -> None:
        self.index = index
        self.root = index.root
        self._limiter = anyio.CapacityLimiter(_THREADS)

    async def _call(self, work: Callable[[Interrupt], _T], tool: str) -> _T:
        """``work`` in a worker thread; interrupted (and its thread ended) when this call
        is cancelled."""
        interrupt = Interrupt()
        finished = False
        try:
            if in_virtual_time():
                # A worker thread's real time would let the mock clock jump past the
                # call's timeout (as the executor runs sync bodies there): on the loop.
                result = work(interrupt)
            else:
                result = await anyio.to_thread.run_sync(
                    work, interrupt, abandon_on_cancel=True, limiter=self._limiter
                )
            finished = True
            return result
        except Interrupted:
            finished = True
            raise ResearchToolError(ToolError.of(
                "transient", "timeout", f"{tool}: the index stopped the call")) from None
        except (sqlite3.Error, OSError) as exc:
            finished = True
            # The index's own failure (a damaged file, a full disk): named without the
            # server's paths.
            detail = f"{type(exc).__name__}: {exc}"
            for where in (str(self.index.db_path), str(self.root), self.index.shown_root):
                detail = detail.replace(where, "<docs>")
            raise ResearchToolError(ToolError.of(
                "internal", "index_failed", f"{tool}: the document index failed ({detail})"
            )) from None
        finally:
            if not finished:
                interrupt.stop()  # cancelled: the thread's statement stops now

    async def search(self, query: str, limit: int) -> dict[str, Any]:
        """``{results: [{path, title, heading, snippet, score, start, match}], match}``,
        best first; ``match`` says whether the best passage answers the query."""
        if not query.strip():
            raise invalid("docs.search", "query", "a non-empty query", "the query is empty",
                          "invalid_query")
        work = functools.partial(_search, self.index, query, limit)
        found = await self._call(work, "docs.search")
        if not found.results:
            return {"results": []}  # nothing found: empty, as any tool's empty result
        return {"results": found.results, "match": found.match}

    async def read(self, path: str, start: int) -> dict[str, Any]:
        """``{path, title, text, truncated, start, next_start, length}`` of one document."""
        check_path(path)
        work = functools.partial(_read, self.index, path, start)
        try:
            return await self._call(work, "docs.read")
        except DocumentError as exc:
            raise invalid("docs.read", exc.field, exc.expected, str(exc),
                          exc.error_type) from None


def _search(index: DocIndex, query: str, limit: int, interrupt: Interrupt) -> Any:
    return index.find(query, limit, interrupt)


def _read(index: DocIndex, path: str, start: int, interrupt: Interrupt) -> Any:
    return index.read(path, start, WINDOW, interrupt)
