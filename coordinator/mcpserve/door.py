"""The runs this door opened: a slot each, a queue, their progress, their cancellation.

Each run executes through the Python API (:func:`coordinator.api.run.execute`: the job's
tools, its recorder in the run store, its report) in the door's own task group, not in
the request's: a request that stops waiting (``wait_s``) leaves its run going, and
``get_report`` reads it later. A run is cancelled by the request waiting for it (MCP
``notifications/cancelled``) or by ``cancel_run`` (:meth:`Door.cancel`): running
subagents hand up what they found with trigger ``cancelled``, the rest become gaps, and
the partial report is recorded. A run a killed server left going is resumed here too
(:meth:`Door.resume`, :mod:`~coordinator.mcpserve.resume`), driven as ``fanout resume``
drives one and cancelled the same way; but as the server stops it is cut and left
interrupted, for the next start, rather than ended (no client of this server asked for
it).

    Busy                the queue is full (``--max-queued`` runs wait for a slot)
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import anyio
import anyio.abc

from coordinator.api.run import ExecutorName, Prepared, execute
from coordinator.engine.executor import LocalExecutor
from coordinator.engine.run import Hooks, RunRequest
from coordinator.mcpserve.config import STORED_FILES
from coordinator.mcpserve.resume import Resumption
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store import RunRecorder, RunStore
from shared.clock import AnyioClock
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
    """The door's store, telling its run which id the store gave it when it opens, and
    naming the tool that made the run as its job file (``fanout mcp run_job``)."""

    def __init__(self, store: RunStore, on_open: Callable[[str], None], file: str) -> None:
        super().__init__(store.backend)
        self._on_open = on_open
        self._file = file

    def create_run(self, *, job: str, query: str, file: str, spec_text: str, seed: str,
                   speed: float) -> RunRecorder:
        recorder = super().create_run(job=job, query=query, file=self._file,
                                      spec_text=spec_text, seed=seed, speed=speed)
        self._on_open(recorder.run_id)
        return recorder


class Ticket:
    """One run the door took (a new job, or a run resumed): its id once opened, its
    progress, its end."""

    def __init__(self, job: Prepared | Resumption, speed: float, *, had_slot: bool,
                 tool: str = "run_job", person: bool = False) -> None:
        self.job = job
        self.speed = speed
        self.tool = tool  # ask or run_job: the store names it as the run's job file
        self.had_slot = had_slot  # a slot was free when it came: it opens at once
        # A person is attached (docs/design.md §17): the client can elicit, or the job sets
        # escalations. The desk is made as the run takes its slot (its clock starts then).
        self.person = person or _sets_escalations(job)
        self.desk: Desk | None = None
        self.run_id: str | None = None
        self.report: CoverageReport | None = None
        self.error: Exception | None = None
        self.opened = anyio.Event()  # the run has its id (or ended before it had one)
        self.ended = anyio.Event()
        self.scope = anyio.CancelScope()
        self.cancelling = anyio.Event()  # a cancel reached it: it ends with what it has
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
        """Cancel the run: it winds down, hands up what it found and records its report
        (idempotent)."""
        self.cancelling.set()
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
        # The runs going here, by id, from the moment each has one until it ends.
        self.live: dict[str, Ticket] = {}
        # The runs cancel_run cancelled here: cancelling one again is no error.
        self.cancelled: set[str] = set()

    def submit(self, job: Prepared, *, tool: str = "run_job", speed: float = 1.0,
               person: bool = False) -> Ticket:
        """Start ``job`` (made by the MCP tool ``tool``) as soon as a slot is free; with
        ``person`` (a client that can elicit) a desk is attached to it, as to a job that
        sets ``escalations``.

        Raises:
            Busy: every slot is taken and ``max_queued`` runs wait already.
        """
        # Runs submitted but not yet in a slot count as waiting until they take one: two
        # submissions in a row both see the one free slot, and only one gets it.
        free = int(self._slots.available_tokens) - self.waiting
        if free <= 0 and -free >= self._max_queued:
            raise Busy(f"{-free} runs are waiting for one of "
                       f"{int(self._slots.total_tokens)} slots; try again later")
        ticket = Ticket(job, speed, had_slot=free > 0, tool=tool, person=person)
        self.waiting += 1
        self._tg.start_soon(self._run, ticket)
        return ticket

    def resume(self, resumed: Resumption) -> Ticket:
        """Continue a run a killed server left going, in the next free slot (it was
        admitted before: the queue's bound does not refuse it)."""
        free = int(self._slots.available_tokens) - self.waiting
        ticket = Ticket(resumed, resumed.speed, had_slot=free > 0)
        ticket.updates.close()  # no request waits for it: its progress goes nowhere
        self.waiting += 1
        self._opened(ticket, resumed.run_id)
        self._tg.start_soon(self._run, ticket)
        return ticket

    def cancel(self, run_id: str) -> Ticket | None:
        """Cancel run ``run_id`` if it goes on here (its ticket, to wait for its end);
        None when no run of this door has that id."""
        ticket = self.live.get(run_id)
        if ticket is not None:
            self.cancelled.add(run_id)
            ticket.cancel()
        return ticket

    def _opened(self, ticket: Ticket, run_id: str) -> None:
        self.live[run_id] = ticket
        ticket.open(run_id)

    async def _run(self, ticket: Ticket) -> None:
        job = ticket.job
        try:
            if isinstance(job, Resumption):
                await self._continue(ticket, job)
            else:
                await self._start(ticket, job)
        except Exception as exc:
            # What stops a job before it runs (a missing key, a folder that cannot be
            # indexed) is the request's answer; a job's own failures are in its report.
            if isinstance(exc, FanoutError) and isinstance(job, Resumption):
                log.warning("run %s could not go on, and stays interrupted: %s",
                            job.run_id, exc)
            elif isinstance(exc, FanoutError):
                log.info("a run did not start: %s", exc)
            else:
                log.exception("a run failed outside its job")
            ticket.error = exc
        finally:
            if isinstance(job, Resumption) and ticket.report is None:
                # Stopped before it had a report (the server stopped, or its tools failed
                # to open): flushed and let go, it reads interrupted, for the next start of
                # the server (or `fanout resume`).
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_let_go, self.store, job.recorder)
            if ticket.run_id is not None:
                self.live.pop(ticket.run_id, None)
            ticket.finish()

    async def _start(self, ticket: Ticket, job: Prepared) -> None:
        """A new run, in a slot: a cancel (the ticket's, or the door's as the server
        stops) winds it down to its partial report, which is recorded."""
        queued = True
        try:
            with ticket.scope:
                async with self._slots:
                    self.waiting -= 1
                    queued = False
                    store = _Announcing(self.store, partial(self._opened, ticket),
                                        STORED_FILES[ticket.tool])
                    desk = _desk(ticket)
                    await execute(job, on_event=ticket.hear, store=store, speed=ticket.speed,
                                  on_report=ticket.keep, executor=self.executor,
                                  temporal=self.temporal, desk=desk)
        finally:
            if queued:
                self.waiting -= 1

    async def _continue(self, ticket: Ticket, resumed: Resumption) -> None:
        """A resumed run, in a slot: driven as ``fanout resume`` drives one.

        A cancel (``cancel_run``) winds it down to its partial report, at once when it
        still waits for a slot (without taking one). The server stopping cuts it instead
        and leaves it interrupted: no client of this server started it, so none leaving
        ends it; the next start resumes it again.
        """
        slot = False
        try:
            with ticket.scope:  # cancelled by cancel_run: stop waiting for a slot
                await self._slots.acquire_on_behalf_of(ticket)
                slot = True
        finally:
            self.waiting -= 1
        try:
            request = RunRequest(resumed.start.scenario, resumed.spec_text, resumed.file,
                                 speed=resumed.speed)
            executor = LocalExecutor(recorder=resumed.recorder, start=resumed.start,
                                     clock=resumed.clock)
            report = await executor.execute(
                request, Hooks(observer=ticket.hear, cancel=ticket.cancelling,
                               desk=_desk(ticket)))
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(resumed.recorder.close)
            ticket.keep(report)
        finally:
            if slot:
                self._slots.release_on_behalf_of(ticket)


def _sets_escalations(job: Prepared | Resumption) -> bool:
    """Whether the job waits for a person whoever the client is: it sets escalations, or
    asks for its plan to be reviewed (``review_plan``, or ``decide`` and ``get_report``
    for a client that cannot elicit)."""
    scenario = job.start.scenario if isinstance(job, Resumption) else job.scenario
    # A ticket made for its progress alone (a unit test's) may carry no scenario.
    return scenario is not None and (scenario.job.escalations is not None
                                     or scenario.job.review_plan)


def _desk(ticket: Ticket) -> Desk | None:
    """The ticket's desk, made now on the run's clock when it has a person."""
    if ticket.person and ticket.desk is None:
        job = ticket.job
        clock = job.clock if isinstance(job, Resumption) else AnyioClock(speed=ticket.speed)
        ticket.desk = Desk(clock, wall=lambda: datetime.now(UTC))
    return ticket.desk


def _let_go(store: RunStore, recorder: RunRecorder) -> None:
    recorder.close()
    store.release(recorder.run_id)
