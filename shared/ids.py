"""Short unique trace ids, random for live runs and derived for replays."""

from __future__ import annotations

import hashlib
import secrets
from typing import Protocol


def new_trace_id() -> str:
    """A fresh random trace id, ``tr_`` and 12 hex digits."""
    return "tr_" + secrets.token_hex(6)


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
