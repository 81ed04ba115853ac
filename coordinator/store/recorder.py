"""Recording a run as it happens, through the store's one writer (never waiting on disk)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from coordinator.store.backend import Backend
from coordinator.store.writer import StoreWriter, Tx, now_iso

__all__ = ["RunRecorder", "now_iso"]


def _nothing(tx: Tx) -> None:
    """A write that writes nothing: committed once everything queued before it is."""


class RunRecorder:
    """Records one run (or one resumed session of it) as it happens.

    The recorder owns the run while it lives: it numbers the run's events itself (no
    other process writes them) and keeps the run's lease.

    By default it starts a writer of its own (``fanout run``: one run in the process).
    A process recording many runs at once passes its one ``writer`` instead (``fanout
    serve``): their writes then share transactions, one commit for all of them, rather
    than one writer thread, connection and commit (an fsync, on Postgres) per run
    competing for the disk and the GIL; closing the recorder then flushes the shared
    writer and leaves it running.
    """

    def __init__(
        self, backend: Backend, run_id: str, session: int, *, writer: StoreWriter | None = None
    ) -> None:
        self.backend = backend
        self.run_id = run_id
        self.session = session
        self._seq = self._last_seq()
        self._own_writer = writer is None
        self._writer = StoreWriter(backend) if writer is None else writer
        self._writer.hold(run_id)

    @property
    def seq(self) -> int:
        """The sequence number of the last event recorded (0 before the first)."""
        return self._seq

    def _last_seq(self) -> int:
        with self.backend.connection() as conn:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (self.run_id,)
            ).fetchone()
        return int(row[0])

    def event(self, subtask_id: str, kind: str, at: float, data: dict[str, Any]) -> None:
        """Append one trace event (never blocks on the disk)."""
        self._seq += 1
        self._writer.event(self.run_id, self.session, subtask_id, kind, at, data, seq=self._seq)

    def checkpoint(self, subtask_id: str, state: dict[str, Any], *, durable: bool = False) -> None:
        """Record a subagent's latest resumable state (never blocks on the disk, unless
        ``durable``: then it returns once the state is committed)."""
        self._writer.checkpoint(self.run_id, subtask_id, state, durable=durable)

    async def commit_result(
        self, subtask_id: str, result: dict[str, Any], state: dict[str, Any]
    ) -> None:
        """Commit a subagent's result and final state; returns once it is on disk."""
        await self._writer.commit_result(self.run_id, subtask_id, self.session, result, state)

    async def finish(
        self, report: dict[str, Any], escalations: Sequence[tuple[str, str, str]]
    ) -> None:
        """Record the final report and its escalations; the run is finished."""
        await self._writer.finish(self.run_id, report, escalations)

    def close(self) -> None:
        """Flush the writer; stop it too when it is the recorder's own."""
        if self._own_writer:
            self._writer.close()
        else:
            self._writer.call(_nothing)

    async def aclose(self) -> None:
        """:meth:`close` from async code; a cancelled run's too: what it recorded before
        it was cut (a person's decision, a wait) is on disk when this returns."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)
