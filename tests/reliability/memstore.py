"""A run recorder that keeps its writes in memory and can "die" at its Nth write.

It stands in for :class:`~coordinator.store.recorder.RunRecorder` at the one seam
``LocalExecutor`` takes, so a killed run can be simulated in virtual time: writes up to
the Nth persist (JSON round-tripped, as SQLite would hold them), later ones are lost,
and the job is cancelled where it stands, as SIGKILL would stop it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio


class MemoryRecorder:
    """The recorder's interface over dictionaries; writes past ``die_at`` are lost."""

    def __init__(self, run_id: str, *, die_at: int | None = None) -> None:
        self.run_id = run_id
        self.session = 1
        self.die_at = die_at
        self.writes = 0
        self.dead = False
        self.scope: anyio.CancelScope | None = None
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.last_at = 0.0
        self.report: dict[str, Any] | None = None
        self.seq = 0
        self.kinds: list[str] = []
        """What each write was (``event:KIND``, ``checkpoint``, ``result``, ``finish``)."""

    def _persist(self, kind: str) -> bool:
        """Count one write; False (and the run cancelled) once past ``die_at``."""
        if self.dead:
            return False
        self.kinds.append(kind)
        self.writes += 1
        if self.die_at is not None and self.writes > self.die_at:
            self.dead = True
            if self.scope is not None:
                self.scope.cancel()
            return False
        return True

    def event(self, subtask_id: str, kind: str, at: float, data: dict[str, Any]) -> None:
        """Record one trace event."""
        json.dumps(data)  # the real recorder serialises every event
        if self._persist(f"event:{kind}"):
            self.seq += 1
            self.last_at = max(self.last_at, at)

    def checkpoint(self, subtask_id: str, state: dict[str, Any], *, durable: bool = False) -> None:
        """Record a subagent's latest resumable state (in memory, every write is durable)."""
        text = json.dumps(state)
        if self._persist("checkpoint:durable" if durable else "checkpoint"):
            self.checkpoints[subtask_id] = json.loads(text)

    async def commit_result(
        self, subtask_id: str, result: dict[str, Any], state: dict[str, Any]
    ) -> None:
        """Commit a result and its final state (one transaction: both or neither)."""
        rtext, stext = json.dumps(result), json.dumps(state)
        if self._persist("result"):
            self.results[subtask_id] = json.loads(rtext)
            self.checkpoints[subtask_id] = json.loads(stext)
        await anyio.lowlevel.checkpoint()

    async def finish(
        self, report: dict[str, Any], escalations: Sequence[tuple[str, str, str]]
    ) -> None:
        """Record the final report."""
        text = json.dumps(report)
        if self._persist("finish"):
            self.report = json.loads(text)
        await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        """Nothing to flush."""
