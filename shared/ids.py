"""Short unique trace ids, random for live runs and derived for replays."""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Protocol

_ID_HEX = 12
_IDS_PER_READ = 256


class _TraceIdPool:
    """Random hex ids cut from one ``os.urandom`` read per 256 ids.

    A live fan-out draws a trace id per tool call; one system call each was a visible
    share of a call's overhead. The bytes are the same kind (the OS's CSPRNG).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: list[str] = []

    def take(self) -> str:
        with self._lock:
            if not self._ids:
                block = os.urandom(_ID_HEX // 2 * _IDS_PER_READ).hex()
                self._ids = [block[i : i + _ID_HEX] for i in range(0, len(block), _ID_HEX)]
            return self._ids.pop()


_pool = _TraceIdPool()


def _after_fork() -> None:
    # A forked child must not hand out the ids its parent will also hand out.
    global _pool
    _pool = _TraceIdPool()


os.register_at_fork(after_in_child=_after_fork)


def new_trace_id() -> str:
    """A fresh random trace id, ``tr_`` and 12 hex digits."""
    return "tr_" + _pool.take()


class TraceIds(Protocol):
    """Where trace ids come from; replays need them to be reproducible."""

    def next(self, scope: str) -> str:
        """The next trace id for ``scope`` (a subtask id)."""
        ...


class RandomTraceIds:
    """Random trace ids: the default for live runs."""

    def next(self, scope: str) -> str:
        """A fresh random trace id."""
        return new_trace_id()


class SeededTraceIds:
    """Trace ids derived from a seed, a scope and a counter: same run, same ids."""

    def __init__(self, seed: object) -> None:
        self._seed = str(seed)
        self._counters: dict[str, int] = {}

    def next(self, scope: str) -> str:
        """The next id of ``scope``; independent of how scopes interleave."""
        n = self._counters.get(scope, 0) + 1
        self._counters[scope] = n
        digest = hashlib.blake2b(f"{self._seed}/{scope}/{n}".encode(), digest_size=6)
        return "tr_" + digest.hexdigest()

    def position(self, scope: str) -> int:
        """How many ids ``scope`` has drawn (for checkpoints)."""
        return self._counters.get(scope, 0)

    def set_position(self, scope: str, n: int) -> None:
        """Continue ``scope`` after ``n`` ids (restoring a checkpoint)."""
        self._counters[scope] = n
