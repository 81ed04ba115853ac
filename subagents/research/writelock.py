"""One writer per index: an exclusive ``flock`` on a file beside it, across processes.

SQLite lets one writer in at a time too, but a second writer waiting on it gives up
after its busy timeout with ``database is locked``; a refresh of a large folder takes
longer than any timeout. This lock is waited for as long as it takes — in short sleeps,
so a waiter can be stopped — and it is released by the operating system if its holder
dies. Where ``fcntl`` does not exist (Windows), SQLite's own locking is all there is.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["WriteLock"]

_POLL_S = 0.05


class WriteLock:
    """The exclusive lock of one index, held by one refresh (in any process) at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # flock locks belong to an open file: two threads of this process are kept
        # apart by this lock first, each holding the file lock through its own open.
        self._local = threading.Lock()

    @contextmanager
    def held(
        self, stopped: Callable[[], bool] = lambda: False, *, wait: bool = True
    ) -> Iterator[bool]:
        """Hold the lock inside; yields False when it was not acquired (``wait`` False
        and another writer holds it, or ``stopped`` became true while waiting)."""
        if not self._take_local(stopped, wait):
            yield False
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if not self._take_file(fd, stopped, wait):
                    yield False
                    return
                yield True
            finally:
                os.close(fd)  # releases the flock
        finally:
            self._local.release()

    def _take_local(self, stopped: Callable[[], bool], wait: bool) -> bool:
        while not self._local.acquire(timeout=_POLL_S if wait else 0):
            if not wait or stopped():
                return False
        return True

    @staticmethod
    def _take_file(fd: int, stopped: Callable[[], bool], wait: bool) -> bool:
        if fcntl is None:  # pragma: no cover - Windows
            return True
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if not wait or stopped():
                    return False
                time.sleep(_POLL_S)
