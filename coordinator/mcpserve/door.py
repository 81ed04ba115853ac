"""The runs this door opened: a slot each, a queue, their progress, their cancellation.

Each run executes through the Python API (:func:`coordinator.api.run.execute`: the job's
tools, its recorder in the run store, its report) in the door's own task group, not in
the request's: a request that stops waiting (``wait_s``) leaves its run going, and
``get_report`` reads it later. A request cancelled while it waits (MCP
``notifications/cancelled``) cancels its run: running subagents hand up what they found
with trigger ``cancelled``, the rest become gaps, and the partial report is recorded.

    Busy                the queue is full (``--max-queued`` runs wait for a slot)
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio
import anyio.abc

from coordinator.api.run import ExecutorName, Prepared, execute
from coordinator.report import CoverageReport
from coordinator.store import RunRecorder, RunStore
from shared.errors import FanoutError
from subagents.result import LEAD, ProgressEvent

log = logging.getLogger("fanout.mcp")
_ENDED = frozenset({"done", "escalated"})


class Busy(Exception):
    """Every slot is taken and the queue is full: the request may try again later."""


@dataclass(frozen=True, slots=True)
class Update:
    """One MCP progress notification: ``progress`` only ever grows (the spec asks it)."""

    progress: float
    total: float | None
    message: str


class _Announcing(RunStore):
    """The door's store, telling its run which id the store gave it when it opens."""

    def __init__(self, store: RunStore, on_open: Callable[[str], None]) -> None:
        super().__init__(store.backend)
        self._on_open = on_open

    def create_run(self, *, job: str, query: str, file: str, spec_text: str, seed: str,
                   speed: float) -> RunRecorder:
        recorder = super().create_run(job=job, query=query, file=file, spec_text=spec_text,
                                      seed=seed, speed=speed)
        self._on_open(recorder.run_id)
        return recorder


class Ticket:
    """One run the door took: its id once opened, its progress, its end."""

    def __init__(self, job: Prepared, speed: float, *, had_slot: bool) -> None:
        self.job = job
        self.speed = speed
        self.had_slot = had_slot  # a slot was free when it came: it opens at once
        self.run_id: str | None = None
        self.report: CoverageReport | None = None
        self.error: Exception | None = None
        self.opened = anyio.Event()  # the run has its id (or ended before it had one)
        self.ended = anyio.Event()
        self.scope = anyio.CancelScope()
        self._send, self.updates = anyio.create_memory_object_stream[Update](math.inf)
        self._states: dict[str, str] = {}
        self._ends = 0

    def open(self, run_id: str) -> None:
        """The store made the run: its id is known from now on."""
        self.run_id = run_id
        self.opened.set()
        self._push(Update(0, None, f"run {run_id} started"))

    def hear(self, event: ProgressEvent) -> None:
        """A progress event of the run: a notification when a subtask ends."""
        sid = event.subtask_id
        if event.kind != "state" or sid == LEAD or event.state is None:
            return
        state = event.state
        self._states[sid] = state
        if state not in _ENDED:
            return
        self._ends += 1
        ended = [s for s in self._states.values() if s in _ENDED]
        done = sum(1 for s in ended if s == "done")
        total = len(self._states)
        self._push(Update(
            self._ends, max(total, self._ends),
            f"{len(ended)}/{total} subtasks, coverage {done / total:.2g}",
        ))

    def keep(self, report: CoverageReport) -> None:
        """The run's report, whole or, for a cancelled run, partial."""
        self.report = report

    def _push(self, update: Update) -> None:
        # Nobody listens once the request has stopped waiting: the run goes on regardless.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._send.send_nowait(update)

    def finish(self) -> None:
        """The run has ended (or never started)."""
        self._send.close()
        self.opened.set()
        self.ended.set()

    def cancel(self) -> None:
        """Cancel the run: it winds down, hands up what it found and records its report."""
        self.scope.cancel()


class Door:
    """The runs of one ``fanout mcp``: at most ``max_runs`` at once, ``max_queued`` waiting."""

    def __init__(self, store: RunStore, task_group: anyio.abc.TaskGroup, *, max_runs: int,
                 max_queued: int, executor: ExecutorName = "local",
                 temporal: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.executor, self.temporal = executor, temporal
        self._tg = task_group
        self._slots = anyio.CapacityLimiter(max_runs)
        self._max_queued = max_queued
        self.waiting = 0

    def submit(self, job: Prepared, *, speed: float = 1.0) -> Ticket:
        """Start ``job`` as soon as a slot is free.

        Raises:
            Busy: every slot is taken and ``max_queued`` runs wait already.
        """
        # Runs submitted but not yet in a slot count as waiting until they take one: two
        # submissions in a row both see the one free slot, and only one gets it.
        free = int(self._slots.available_tokens) - self.waiting
        if free <= 0 and -free >= self._max_queued:
            raise Busy(f"{-free} runs are waiting for one of "
                       f"{int(self._slots.total_tokens)} slots; try again later")
        ticket = Ticket(job, speed, had_slot=free > 0)
        self.waiting += 1
        self._tg.start_soon(self._run, ticket)
        return ticket

    async def _run(self, ticket: Ticket) -> None:
        queued = True
        try:
            with ticket.scope:
                async with self._slots:
                    self.waiting -= 1
                    queued = False
                    await execute(ticket.job, on_event=ticket.hear,
                                  store=_Announcing(self.store, ticket.open),
                                  speed=ticket.speed, on_report=ticket.keep,
                                  executor=self.executor, temporal=self.temporal)
        except Exception as exc:
            # What stops a job before it runs (a missing key, a folder that cannot be
            # indexed) is the request's answer; a job's own failures are in its report.
            if isinstance(exc, FanoutError):
                log.info("a run did not start: %s", exc)
            else:
                log.exception("a run failed outside its job")
            ticket.error = exc
        finally:
            if queued:
                self.waiting -= 1
            ticket.finish()
