"""The run manager: runs execute in the server's process, at most ``max_runs`` at a time.

Each submitted run is recorded as ``fanout run`` records it, so ``fanout runs``,
``report``, ``gaps`` and ``trace`` read it like any other. Submissions go through the
server's one store writer, so fifty that arrive together are committed together (one
transaction), not one by one. A run that finds every slot taken is recorded ``queued``
(the store and the API say the same) and waits, FIFO, in a bounded queue: when
``max_queued`` wait already, a submission is refused with 503 and ``Retry-After``.

Several servers may share one store (Postgres, or one SQLite file on one machine). Each
executes the runs submitted to it; every server reads, streams and cancels any run. A
cancel is recorded first (the holder hears it: a notification on Postgres, its watch
loop on SQLite; a restart honours it too), then the run's cancel event is set. On start,
and every ``adopt_interval_s`` after, a server claims the served runs whose holder died
(a compare-and-set on the holder and session: one claimant wins) and resumes them as
``fanout resume`` does; on stop it cuts its runs, flushes their recorders and releases
them, ``interrupted``, for the next start or another live server.

With ``--executor temporal`` the workers run a run whatever happens to the server that
submitted it, so nothing is resumed: on start a server takes back every served run whose
workflow still runs on its namespace (docs/design.md §9): it follows the workflow again
(its events, a desk mirroring what waits, its end) as the server that started it did.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import TaskGroup

from coordinator.engine.executor import (
    LocalExecutor,
    TemporalExecutor,
    not_on_temporal,
    runs_on_temporal,
)
from coordinator.engine.resume import Start
from coordinator.engine.run import Hooks, RunRequest
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.people import Desk
from coordinator.serve.desks import desk_for, wants_a_person
from coordinator.serve.events import (
    Bells,
    EventLog,
    PublishHook,
    ServedRecorder,
    end_frame,
    frame,
)
from coordinator.serve.intake import IntakeGate, JobRejected, request_digest
from coordinator.serve.records import KeyReused, NotCancellable, QueueFull, ServiceRecords
from coordinator.serve.refusals import SUBMITTED, problem
from coordinator.serve.server import ServeConfig
from coordinator.store.backend import CANCELS_CHANNEL, EVENTS_CHANNEL
from coordinator.store.runs import ResumeRefused, RunStatus, RunStore, new_run_id, run_values
from coordinator.store.writer import StoreWriter
from shared.clock import AnyioClock
from shared.errors import InputFileError
from shared.tokens import load_encoding

if TYPE_CHECKING:
    from coordinator.temporal import JobHandle

log = logging.getLogger("fanout.serve")


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
    resumed: bool = False
    holds_slot: bool = False
    # The run's person (docs/design.md §17): set while it executes here, when its job
    # lets people decide (coordinator/serve/desks.py).
    desk: Desk | None = None
    # A run taken back on Temporal: its workflow, already running, and when it started.
    workflow: tuple[JobHandle, datetime] | None = None


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
        self.bells = Bells()
        self.intake = IntakeGate()  # the app counts submissions in; runs start after them
        self._queue: deque[LiveRun] = deque()
        self._active = 0  # slots taken (and reserved by submissions being written)
        self._queuing = 0  # submissions being written that will wait
        self._tg: TaskGroup | None = None
        self._writer: StoreWriter | None = None

    # -- lifetime -------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Execute runs while the body runs; resume left-over runs first."""
        await anyio.to_thread.run_sync(load_encoding)  # load the encoding before any job
        self._writer = await anyio.to_thread.run_sync(StoreWriter, self.store.backend)
        stop_listening = threading.Event()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._adopt(starting=True)
                tg.start_soon(self._watch, stop_listening, name="store watch")
                try:
                    yield
                finally:
                    self.begin_shutdown()
                    stop_listening.set()
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._writer.close)
                await anyio.to_thread.run_sync(self.store.close)

    def begin_shutdown(self) -> None:
        """Stop taking work and end every event stream (runs stop when ``running`` ends)."""
        self.stopping = True
        for live in self.live.values():
            live.log.close()
        self.bells.ring_all()

    @property
    def writer(self) -> StoreWriter:
        """The server's store writer (submissions, cancels, leases of queued runs)."""
        assert self._writer is not None, "used outside running()"
        return self._writer

    # -- reading --------------------------------------------------------------------

    @property
    def queue_depth(self) -> int:
        """Runs admitted but waiting for a slot (``--max-runs``)."""
        return len(self._queue)

    def log_of(self, run_id: str) -> EventLog | None:
        """The live event log of a run this server executes."""
        live = self.live.get(run_id)
        return None if live is None else live.log

    async def end_summary(self, run_id: str) -> dict[str, Any]:
        """The data of a stream's ``end`` message: the status, and outcome when finished."""
        row = await anyio.to_thread.run_sync(self.store.get, run_id)
        return {"run_id": row.id, "status": row.status, "outcome": row.outcome,
                "coverage": row.coverage, "elapsed_s": row.elapsed_s}

    # -- submitting -----------------------------------------------------------------

    async def submit(
        self, body: bytes, parse: Callable[[], Scenario], *, speed: float, key: str | None,
        inline: bool = False, file: str = SUBMITTED,
    ) -> tuple[str, RunStatus, bool]:
        """Record and admit the job ``parse`` reads from ``body``; with a known ``key``,
        the run that key made before (and nothing is parsed or recorded). ``parse`` runs
        on a worker thread, or here when ``inline`` (it is known to be cheap); ``file``: the
        request it comes from, what the store names as its job file (and ``parse``'s).

        Returns:
            The run id, its status as recorded, and whether the run was made before.

        Raises:
            KeyReused: ``key`` made a run from a different request.
            JobRejected: the job cannot run (from ``parse``); nothing is recorded.
            QueueFull: no slot and the queue is full; nothing is recorded.
        """
        digest = request_digest(body, speed)
        if key is not None and (earlier := await self._earlier(key, digest, file)) is not None:
            return earlier, "queued", True
        scenario = parse() if inline else await anyio.to_thread.run_sync(parse)
        if self.config.temporal is not None and (
            reason := not_on_temporal(RunRequest(scenario, "", file))
        ):  # 422: the workers cannot run it (nothing is recorded)
            raise JobRejected([problem(reason.partition(": ")[0], "a job the workers run",
                                       reason.partition(": ")[2], file=file)])
        # A slot (or a place in the queue) is reserved before the write, so the status
        # recorded is the one the run has: running at once, or queued.
        slot = not self.stopping and self._active < self.config.max_runs
        if not slot:
            waiting = len(self._queue) + self._queuing
            if waiting >= self.config.max_queued:
                raise QueueFull(waiting, self.config.retry_after_s)
            self._queuing += 1
        else:
            self._active += 1
        status: RunStatus = "running" if slot else "queued"
        run_id = new_run_id()
        values = run_values(run_id, job=scenario.scenario, query=scenario.job.query,
                            file=file, spec_text=body.decode("utf-8"),
                            seed=str(scenario.seed), speed=speed, status=status)
        try:
            made = await self.writer.acall(self.records.submission(values, key, digest), first=True)
        finally:
            self._unreserve(slot)
        if made.run_id != run_id:  # the key was taken meanwhile (here or elsewhere)
            if made.request_sha256 != digest:
                raise KeyReused(key or "", made.run_id, file)
            return made.run_id, "queued", True
        self.writer.hold(run_id)
        self._admit(LiveRun(run_id, scenario, speed, session=1, log=EventLog(run_id, 0),
                            cancel=anyio.Event()), slot=slot)
        return run_id, status, False

    def _unreserve(self, slot: bool) -> None:
        if slot:
            self._active -= 1
        else:
            self._queuing -= 1

    async def _earlier(self, key: str, digest: str, file: str) -> str | None:
        earlier = await anyio.to_thread.run_sync(self.records.by_key, key)
        if earlier is None:
            return None
        if earlier.request_sha256 != digest:
            raise KeyReused(key, earlier.run_id, file)
        return earlier.run_id

    def _admit(self, live: LiveRun, *, slot: bool | None = None) -> None:
        self.live[live.run_id] = live
        if self.stopping:
            live.log.close()
            return
        if slot is None:
            slot = self._active < self.config.max_runs
        if live.cancel.is_set() or slot:
            self._start(live, slot=slot and not live.cancel.is_set())
        else:
            if live.resumed:  # claimed as running; it waits here first
                self.writer.submit(self.records.status_op(live.run_id, "queued"))
            self._queue.append(live)

    def _start(self, live: LiveRun, *, slot: bool) -> None:
        assert self._tg is not None
        if slot:
            self._active += 1
        live.holds_slot = slot
        self._tg.start_soon(self._execute, live, name=f"run {live.run_id}")

    def _next(self) -> None:
        while self._queue and self._active < self.config.max_runs and not self.stopping:
            live = self._queue.popleft()
            self.writer.submit(self.records.status_op(live.run_id, "running"))
            self._start(live, slot=True)

    # -- cancelling -----------------------------------------------------------------

    async def cancel(self, run_id: str, stored: str, *, wait_s: float = 5.0) -> None:
        """Cancel a run: recorded first, then told to its holder (this server, or another
        through the store); wait up to ``wait_s`` for its report when it runs here.

        Raises:
            NotCancellable: the run has ended, or no one holds it to be told.
        """
        live = self.live.get(run_id)
        if live is None and stored not in ("queued", "running"):
            raise NotCancellable(run_id, stored)
        await self.writer.acall(self.records.cancel_op(run_id))
        if live is None:
            return  # its holder hears it through the store
        self._cancel_here(live)
        with anyio.move_on_after(wait_s):
            await live.done.wait()

    def _cancel_here(self, live: LiveRun) -> None:
        if live.cancel.is_set():
            return
        live.cancel.set()
        if live in self._queue:
            self._queue.remove(live)
            self._start(live, slot=False)

    # -- watching the store -----------------------------------------------------------

    async def _watch(self, stop: threading.Event) -> None:
        """Hear what other processes did: cancels of our runs, new events of runs we
        stream, and runs whose holder died (adopted here)."""
        async with anyio.create_task_group() as tg:
            if self.store.backend.notifies:
                tg.start_soon(self._listen, stop)
            tg.start_soon(self._sweep)

    async def _listen(self, stop: threading.Event) -> None:
        def heard(channel: str, run_id: str) -> None:
            # Every commit of a run's events notifies, this server's own runs' included
            # (four runs: a few hundred a second). Only a stream waiting on the store
            # needs them; the hop into the event loop is skipped for the others.
            # (A bell armed just after this check is not missed: a stream arms before it
            # reads the store, so it reads these events itself.)
            if channel == EVENTS_CHANNEL and not self.bells.armed(run_id):
                return
            anyio.from_thread.run_sync(self._heard, channel, run_id)

        while not stop.is_set():
            try:
                await anyio.to_thread.run_sync(
                    self.store.backend.listen, (EVENTS_CHANNEL, CANCELS_CHANNEL), heard, stop,
                    abandon_on_cancel=True)
            except Exception as exc:  # the database restarted: listen again shortly
                log.warning("listening to the store failed (%s); polling until it is back", exc)
                self.bells.ring_all()
                await anyio.sleep(self.config.poll_interval_s)

    def _heard(self, channel: str, run_id: str) -> None:
        if channel == EVENTS_CHANNEL:
            self.bells.ring(run_id)
        elif (live := self.live.get(run_id)) is not None:
            self._cancel_here(live)

    async def _sweep(self) -> None:
        """Every adopt interval: adopt orphaned runs; on SQLite, look for cancels too."""
        while True:
            await anyio.sleep(self.config.adopt_interval_s)
            if self.stopping:
                return
            if not self.store.backend.notifies and self.live:
                ids = list(self.live)
                for run_id in await anyio.to_thread.run_sync(self.records.cancels_among, ids):
                    if (live := self.live.get(run_id)) is not None:
                        self._cancel_here(live)
            await self._adopt()

    # -- executing ------------------------------------------------------------------

    async def _execute(self, live: LiveRun) -> None:
        """Run (or continue) one run to its report; on any stop, leave it resumable."""
        finished = False
        try:
            await self.intake.quiet()  # the burst it came with is answered first
            finished = await self._run(live)
        except Exception:  # a bug or a broken store: this run stops, the server does not
            log.exception("run %s stopped", live.run_id)
        finally:
            with anyio.CancelScope(shield=True):
                self.writer.let_go(live.run_id)
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
        if self.config.temporal is not None:
            return await self._run_on_temporal(live)
        scenario, run_id = live.scenario, live.run_id
        clock = AnyioClock(speed=live.speed)
        if live.resumed:
            # As `fanout resume` does: a decomposed job keeps the subtasks its lead planned,
            # finished subtasks are kept, unfinished ones continue from their checkpoint.
            start = await anyio.to_thread.run_sync(
                Start.resumed_from, scenario, self.store, run_id, clock
            )
        else:
            start = Start.fresh(scenario, clock)
        recorder = await anyio.to_thread.run_sync(partial(
            ServedRecorder, self.store.backend, run_id, live.session, live.log,
            self.on_publish, writer=self.writer,
        ))
        request = RunRequest(start.scenario, "", scenario.source, speed=live.speed,
                             policy=self.config.research_policy())
        unlisten = None
        if wants_a_person(start.scenario):
            live.desk, unlisten = desk_for(start.scenario, clock, live.log)
        try:
            executor = LocalExecutor(recorder=recorder, start=start, clock=clock)
            await executor.execute(request, Hooks(cancel=live.cancel, desk=live.desk))
        finally:
            if unlisten is not None:
                unlisten()
            live.desk = None  # nothing waits once the run has ended
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(recorder.close)
        live.log.finish(end_frame(await self.end_summary(run_id)))
        return True

    async def _run_on_temporal(self, live: LiveRun) -> bool:
        """``serve --executor temporal``: start the submitted run's workflow (a run taken
        back on start has one running already), then stream what the workers record in
        the store until its report is there.

        A cancel (``POST /runs/{id}/cancel``) is the workflow's ``cancel`` signal, as a
        local run's cancel: running subagents hand up, the partial report is stored.
        A job that lets people decide gets a
        desk here as a local run does (docs/design.md §17): the workflow waits, the
        executor mirrors what waits on the desk, and the people routes act on it.
        """
        assert self.config.temporal is not None
        executor = TemporalExecutor(self.store, self.config.temporal)
        person = wants_a_person(live.scenario)
        if live.workflow is None:
            request = RunRequest(live.scenario, "", live.scenario.source, speed=live.speed)
            handle = await executor.start_registered(live.run_id, request, attended=person)
        else:  # taken back: the workers went on with it while no server followed it
            handle, started = live.workflow

        def stored(event: dict[str, Any]) -> None:
            live.log.append(event["seq"], frame(event))
            if self.on_publish is not None:
                self.on_publish(live.run_id, event["seq"])

        unlisten = None
        if person:
            live.desk, unlisten = desk_for(live.scenario, AnyioClock(speed=live.speed), live.log)
            if live.workflow is not None:
                # The desk counts job time from the workflow's start, as the workflow
                # does: a decision's at_s goes on from where the run stands.
                live.desk.align((datetime.now(UTC) - started).total_seconds() * live.speed)
        try:
            await executor.follow(live.run_id, handle, Hooks(cancel=live.cancel, desk=live.desk),
                                  on_row=stored, after=live.log.base_seq)
        finally:
            if unlisten is not None:
                unlisten()
            live.desk = None  # nothing waits once the run has ended
        live.log.finish(end_frame(await self.end_summary(live.run_id)))
        return True

    # -- resuming -------------------------------------------------------------------

    async def _adopt(self, *, starting: bool = False) -> None:
        """Claim and admit the served runs a stopped or killed server left unfinished;
        ``starting``: on Temporal, take back those whose workflow still runs."""
        for run_id in await anyio.to_thread.run_sync(self.records.left_running):
            if run_id in self.live or self.stopping:
                continue
            if (starting and self.config.temporal is not None
                    and await self._take_back(run_id)):
                continue
            claimed = await anyio.to_thread.run_sync(self._claim, run_id)
            if claimed is None:
                continue
            scenario, speed, session, base, cancelled = claimed
            # A warning: a run changing hands is worth seeing in any log.
            log.warning("resuming run %s (session %d)", run_id, session)
            live = LiveRun(run_id, scenario, speed, session=session,
                           log=EventLog(run_id, base), cancel=anyio.Event(), resumed=True)
            if cancelled:
                live.cancel.set()
            self.writer.hold(run_id)
            self._admit(live)

    async def _take_back(self, run_id: str) -> bool:
        """Follow again run ``run_id`` if its workflow still runs on this server's
        Temporal namespace (docs/design.md §9): it is held here (``running``), its events
        stream from the last one stored, its job's desk mirrors what waits in the
        workflow again, and its end is heard. False when it has no running workflow."""
        assert self.config.temporal is not None
        executor = TemporalExecutor(self.store, self.config.temporal)
        try:
            workflow = await executor.take_back(run_id)
        except Exception as exc:  # Temporal unreachable: the run is left as it stands
            log.warning("not taking back run %s: its workflow cannot be read (%s)", run_id, exc)
            return False
        if workflow is None:
            return False
        row = await anyio.to_thread.run_sync(self.store.get, run_id)
        try:
            scenario = load_scenario_text(row.spec_text, row.file)
        except InputFileError as exc:
            log.warning("not taking back run %s: %s", run_id, exc)
            return False
        base = await anyio.to_thread.run_sync(self.records.last_seq, run_id)
        log.warning("taking back run %s: its workflow runs on Temporal", run_id)
        live = LiveRun(run_id, scenario, row.speed, session=row.sessions,
                       log=EventLog(run_id, base), cancel=anyio.Event(), resumed=True,
                       workflow=workflow)
        if await anyio.to_thread.run_sync(self.records.cancel_requested, run_id):
            live.cancel.set()  # recorded while no server followed it: signalled now
        self.writer.claim(run_id)  # held by this server: it reads running again
        self.live[run_id] = live
        # The workflow runs already: it takes a slot, never a place in the queue.
        self._start(live, slot=True)
        return True

    def _claim(self, run_id: str) -> tuple[Scenario, float, int, int, bool] | None:
        """Take over an interrupted served run: its job, speed, session, last event and
        whether it was cancelled; None when it is not ours to resume."""
        row = self.store.get(run_id)
        if (row.status in ("queued", "running") and row.pid == os.getpid()
                and row.host == socket.gethostname() and run_id not in self.live):
            self.records.release(run_id)  # recorded by a dead process that had our pid
            row = self.store.get(run_id)
        if row.status != "interrupted":
            return None  # finished, or another live server has it
        if runs_on_temporal(self.store, run_id):
            log.info("not resuming run %s: it runs on Temporal, whose workers continue it",
                     run_id)
            return None
        try:
            scenario = load_scenario_text(row.spec_text, row.file)
            claimed = self.store.claim_for_resume(run_id)
        except (InputFileError, ResumeRefused) as exc:
            log.info("not resuming run %s: %s", run_id, exc)
            return None
        base, session = claimed.seq, claimed.session
        claimed.close()
        return scenario, row.speed, session, base, self.records.cancel_requested(run_id)

