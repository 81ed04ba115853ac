"""The run manager: runs execute in the server's process, at most ``max_runs`` at a time.

Each submitted run is recorded as ``fanout run`` records it (``RunStore.create_run``,
then :func:`~coordinator.store.runner.run_recorded`), so ``fanout runs``, ``report``,
``gaps`` and ``trace`` read it like any other. Runs past the capacity wait, FIFO,
``queued`` (the store says ``running``: its owner, this server, is alive and will run
it). On start the manager resumes the served runs a killed server left running, exactly
as ``fanout resume`` does; on stop it cuts the runs still going, flushes their
recorders and leaves them ``interrupted`` for the next start.

A cancel is recorded first (a restart honours it), then the run's cancel event is set:
``run_job`` cuts its running subagents with trigger ``cancelled`` and makes the queued
ones gaps with 0 attempts. A run still waiting for a slot does no work, so it is started
at once, past the capacity, and ends with that report straight away.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning
from coordinator.serve.events import EventLog, PublishHook, ServedRecorder, end_frame
from coordinator.serve.intake import SUBMITTED
from coordinator.serve.records import KeyReused, ServiceRecords
from coordinator.serve.server import ServeConfig
from coordinator.store.runner import (
    elapsed_so_far,
    planned_scenario,
    recorded_followups,
    recorded_lead_gap,
    restored_runs,
    run_recorded,
)
from coordinator.store.runs import ResumeRefused, RunStore
from shared.clock import AnyioClock
from shared.errors import InputFileError
from shared.ids import SeededTraceIds
from shared.tokens import TokenCounter
from subagents.simulated.tools import SimulatedTools

log = logging.getLogger("fanout.serve")

LiveStatus = Literal["queued", "running"]


class NotCancellable(Exception):
    """The run is not one this server executes (finished, or someone else's)."""

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id} is {status}: there is nothing here to cancel")
        self.status = status


@dataclass(eq=False)
class LiveRun:
    """A run this server executes, from its submission (or claim) to its end."""

    run_id: str
    scenario: Scenario
    speed: float
    session: int
    log: EventLog
    cancel: anyio.Event
    done: anyio.Event = field(default_factory=anyio.Event)
    status: LiveStatus = "queued"
    resumed: bool = False
    holds_slot: bool = False


def request_digest(body: bytes, speed: float) -> str:
    """What an Idempotency-Key is bound to: the body and the options of the request."""
    return hashlib.sha256(body + f"\n--speed={speed!r}".encode()).hexdigest()


class RunManager:
    """Admits, queues, executes, cancels and resumes the service's runs."""

    def __init__(self, config: ServeConfig, *, on_publish: PublishHook | None = None) -> None:
        self.config = config
        self.store = RunStore(config.store)
        self.records = ServiceRecords(self.store)
        self.on_publish = on_publish
        self.live: dict[str, LiveRun] = {}
        self.stopping = False
        self.streams = 0  # open event streams, for the limit
        self._queue: deque[LiveRun] = deque()
        self._active = 0
        self._tg: TaskGroup | None = None
        self._submitting: anyio.Lock | None = None

    # -- lifetime -------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Execute runs while the body runs; resume left-over runs first."""
        await anyio.to_thread.run_sync(TokenCounter)  # load the encoding before any job
        self._submitting = anyio.Lock()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self._resume_left_running()
            try:
                yield
            finally:
                self.begin_shutdown()
                tg.cancel_scope.cancel()

    def begin_shutdown(self) -> None:
        """Stop taking work and end every event stream (runs stop when ``running`` ends)."""
        self.stopping = True
        for live in self.live.values():
            live.log.close()

    # -- reading --------------------------------------------------------------------

    def log_of(self, run_id: str) -> EventLog | None:
        """The live event log of a run this server executes."""
        live = self.live.get(run_id)
        return None if live is None else live.log

    def status_of(self, run_id: str, stored: str) -> str:
        """The run's status as the service shows it: ``queued`` while it waits here."""
        live = self.live.get(run_id)
        if live is None or stored == "finished":
            return stored
        return live.status

    async def end_summary(self, run_id: str) -> dict[str, Any]:
        """The data of a stream's ``end`` message: the status, and outcome when finished."""
        row = await anyio.to_thread.run_sync(self.store.get, run_id)
        return {"run_id": row.id, "status": row.status, "outcome": row.outcome,
                "coverage": row.coverage, "elapsed_s": row.elapsed_s}

    # -- submitting -----------------------------------------------------------------

    async def submit(
        self, body: bytes, parse: Callable[[], Scenario], *, speed: float, key: str | None
    ) -> tuple[str, bool]:
        """Record and admit the job ``parse`` reads from ``body``; with a known ``key``,
        the run that key made before (and nothing is parsed or recorded).

        Returns:
            The run id, and whether the run was made before.

        Raises:
            KeyReused: ``key`` made a run from a different request.
            JobRejected: the job cannot run (from ``parse``); nothing is recorded.
        """
        assert self._submitting is not None, "submit() outside running()"
        digest = request_digest(body, speed)
        if key is not None and (earlier := await self._earlier(key, digest)) is not None:
            return earlier, True
        scenario = await anyio.to_thread.run_sync(parse)
        async with self._submitting:  # a key is checked again, then taken, one at a time
            if key is not None and (earlier := await self._earlier(key, digest)) is not None:
                return earlier, True
            text = body.decode("utf-8")

            def record() -> str:
                recorder = self.store.create_run(
                    job=scenario.scenario, query=scenario.job.query, file=SUBMITTED,
                    spec_text=text, seed=str(scenario.seed), speed=speed,
                )
                recorder.close()  # reopened (as a ServedRecorder) when the run starts
                self.records.register(recorder.run_id, key, digest)
                return recorder.run_id

            run_id = await anyio.to_thread.run_sync(record)
            self._admit(LiveRun(run_id, scenario, speed, session=1, log=EventLog(run_id, 0),
                                cancel=anyio.Event()))
        return run_id, False

    async def _earlier(self, key: str, digest: str) -> str | None:
        earlier = await anyio.to_thread.run_sync(self.records.by_key, key)
        if earlier is None:
            return None
        if earlier.request_sha256 != digest:
            raise KeyReused(key, earlier.run_id)
        return earlier.run_id

    def _admit(self, live: LiveRun) -> None:
        self.live[live.run_id] = live
        if self.stopping:
            live.log.close()
            return
        if live.cancel.is_set() or self._active < self.config.max_runs:
            self._start(live, slot=not live.cancel.is_set())
        else:
            self._queue.append(live)

    def _start(self, live: LiveRun, *, slot: bool) -> None:
        assert self._tg is not None
        if slot:
            self._active += 1
        live.holds_slot = slot
        live.status = "running"
        self._tg.start_soon(self._execute, live, name=f"run {live.run_id}")

    def _next(self) -> None:
        while self._queue and self._active < self.config.max_runs and not self.stopping:
            self._start(self._queue.popleft(), slot=True)

    # -- cancelling -----------------------------------------------------------------

    async def cancel(self, run_id: str, stored: str, *, wait_s: float = 5.0) -> None:
        """Cancel a run this server executes; wait up to ``wait_s`` for its report.

        Raises:
            NotCancellable: the run is finished, or not executed here.
        """
        live = self.live.get(run_id)
        if live is None or stored == "finished":
            raise NotCancellable(run_id, stored)
        await anyio.to_thread.run_sync(self.records.request_cancel, run_id)
        live.cancel.set()
        if live in self._queue:
            self._queue.remove(live)
            self._start(live, slot=False)
        with anyio.move_on_after(wait_s):
            await live.done.wait()

    # -- executing ------------------------------------------------------------------

    async def _execute(self, live: LiveRun) -> None:
        """Run (or continue) one run to its report; on any stop, leave it resumable."""
        finished = False
        try:
            finished = await self._run(live)
        except Exception:  # a bug or a broken store: this run stops, the server does not
            log.exception("run %s stopped", live.run_id)
        finally:
            with anyio.CancelScope(shield=True):
                if not finished:
                    await anyio.to_thread.run_sync(self.records.release, live.run_id)
                    if self.stopping:
                        live.log.close()
                    else:
                        live.log.finish(end_frame(await self.end_summary(live.run_id)))
                self.live.pop(live.run_id, None)
                live.done.set()
                if live.holds_slot:
                    self._active -= 1
                self._next()

    async def _run(self, live: LiveRun) -> bool:
        scenario, run_id = live.scenario, live.run_id
        clock = AnyioClock(speed=live.speed)
        resume: dict[str, Any] = {}
        if live.resumed:
            # As `fanout resume` does: a decomposed job keeps the subtasks its lead planned,
            # finished subtasks are kept, unfinished ones continue from their checkpoint.
            def restore() -> tuple[Scenario, dict[str, Any]]:
                planned = planned_scenario(scenario, self.store, run_id)
                tools = SimulatedTools(planned.tools, clock)
                trace_ids = SeededTraceIds(f"{planned.seed}/{run_id}")
                planning = JobPlanning(planned, clock=clock)
                followups = recorded_followups(self.store, run_id)
                runs = restored_runs(planned, self.store.checkpoints(run_id), tools, trace_ids,
                                     planning, followups)
                return planned, {"tools": tools, "trace_ids": trace_ids, "runs": runs,
                                 "planning": planning,
                                 "elapsed_offset": elapsed_so_far(self.store, run_id),
                                 "lead_gap": recorded_lead_gap(self.store, run_id),
                                 "followups": followups}

            scenario, resume = await anyio.to_thread.run_sync(restore)
        recorder = await anyio.to_thread.run_sync(
            ServedRecorder, self.store.path, run_id, live.session, live.log, self.on_publish
        )
        try:
            await run_recorded(scenario, recorder, clock=clock, cancel=live.cancel, **resume)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(recorder.close)
        live.log.finish(end_frame(await self.end_summary(run_id)))
        return True

    # -- resuming -------------------------------------------------------------------

    async def _resume_left_running(self) -> None:
        """Claim and admit the served runs a stopped or killed server left running."""
        for run_id in await anyio.to_thread.run_sync(self.records.left_running):
            claimed = await anyio.to_thread.run_sync(self._claim, run_id)
            if claimed is None:
                continue
            scenario, speed, session, base, cancelled = claimed
            log.info("resuming run %s (session %d)", run_id, session)
            live = LiveRun(run_id, scenario, speed, session=session,
                           log=EventLog(run_id, base), cancel=anyio.Event(), resumed=True)
            if cancelled:
                live.cancel.set()
            self._admit(live)

    def _claim(self, run_id: str) -> tuple[Scenario, float, int, int, bool] | None:
        """Take over an interrupted served run: its job, speed, session, last event and
        whether it was cancelled; None when it is not ours to resume."""
        row = self.store.get(run_id)
        if row.status == "running" and row.pid == os.getpid() and row.host == socket.gethostname():
            self.records.release(run_id)  # recorded by a dead process that had our pid
            row = self.store.get(run_id)
        if row.status != "interrupted":
            return None  # finished, or another live server has it
        try:
            scenario = load_scenario_text(row.spec_text, row.file)
            claimed = self.store.claim_for_resume(run_id)
        except (InputFileError, ResumeRefused) as exc:
            log.warning("not resuming run %s: %s", run_id, exc)
            return None
        base, session = claimed.seq, claimed.session
        claimed.close()
        return scenario, row.speed, session, base, self.records.cancel_requested(run_id)
