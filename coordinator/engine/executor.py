"""The two engines behind one interface: a run in this process, or on Temporal workers.

Every door hands its :class:`~coordinator.engine.run.RunRequest` and its
:class:`~coordinator.engine.run.Hooks` to an :class:`Executor` and renders the report
that comes back:

- :class:`LocalExecutor` opens the run here (:func:`~coordinator.engine.run.open_run`)
  and drives it (:func:`~coordinator.engine.recorded.drive`);
- :class:`TemporalExecutor` registers the run in the store, starts its workflow, and
  follows it there: the workers record the trace, and the hooks hear it as it lands in
  the store (:mod:`coordinator.engine.follow`), the report at the end.

On Temporal the workflow runs the same flow as a local run (:mod:`coordinator.flow`):

- a cancel of the door is the workflow's ``cancel`` signal: running subagents hand up
  with ``cancelled``, queued ones are gaps, and the partial report is stored and
  returned as locally;
- the escalation handler lives in the door's process, which the workflow cannot call:
  the run starts with ``asks`` when the door has one, the executor reads each
  escalation from the workflow's ``escalations`` query as it is counted, asks the
  handler, and sends the choice back (the ``decide`` signal), so the stored report
  carries the ``decisions``. Without a handler the escalations are recorded only;
- a person (``hooks.desk``, docs/design.md §17): the run starts ``attended``, and the
  door's desk mirrors what waits in the workflow (:meth:`TemporalExecutor.follow`):
  each escalation the workflow offers (the ``waiting`` query) waits on the desk as it
  is, with the workflow's id and options, and the desk's decision goes back whole (the
  ``decided`` signal); the lead's plan waiting for review (the ``plan`` query) waits on
  the desk with what the workflow checks an edit with, and the desk's review goes back
  as the ``review_plan`` update, whose validator checks the edit again; one the
  workflow stopped waiting for (its timer, the deadline, a stop) stops waiting on the
  desk too. The subtasks whose round runs (the ``running`` query) are started on the
  desk, so a person may ask one to stop or give it a hint; each request the desk takes
  goes to the workflow (the ``asked`` signal), where the round reads it
  (:mod:`coordinator.temporal.requests`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from coordinator.engine.recorded import drive
from coordinator.engine.resume import Start
from coordinator.engine.run import Hooks, RunRequest, open_run, record_run
from coordinator.people import REQUEST_MADE, Desk
from coordinator.report import CoverageReport
from coordinator.scripted_person import ScriptedPerson
from coordinator.store.recorder import RunRecorder
from coordinator.store.runs import RunStore
from shared.clock import AnyioClock, Clock
from shared.escalation import Escalation
from subagents.spec import SubtaskSettings, SubtaskSpec

if TYPE_CHECKING:
    from coordinator.temporal import JobHandle, TemporalRunRef, TemporalSettings

log = logging.getLogger(__name__)

__all__ = [
    "Executor",
    "LocalExecutor",
    "TemporalExecutor",
    "TemporalTarget",
    "not_on_temporal",
    "runs_on_temporal",
]


def not_on_temporal(request: RunRequest) -> str | None:
    """Why ``request`` cannot run on Temporal workers, or None (the one place that says).

    Python functions exist only in the caller's process. (Research tools run on the
    workers: each opens the job's documents folder at the path it resolved to on the
    submitting machine, :mod:`coordinator.temporal.resources` says why.)
    """
    if request.python_tools:
        names = ", ".join(sorted(request.python_tools))
        return f"Python tools ({names}) run only in this process; use executor='local'"
    return None


class Executor(Protocol):
    """Runs a parsed job to its report; the hooks hear it as it goes."""

    async def execute(self, request: RunRequest, hooks: Hooks) -> CoverageReport:
        """Run ``request`` to its report; a failure inside the job is in the report."""
        ...


class LocalExecutor:
    """Runs a job in this process, recorded in ``store`` (or through ``recorder``).

    ``start`` and ``clock`` let a door prepare the run before it executes: the CLI
    opens the model client first (a missing key is exit 2 with nothing recorded), a
    resume restores the stored state; by default a fresh start on a clock at the
    request's speed.
    """

    def __init__(
        self,
        store: RunStore | None = None,
        *,
        recorder: RunRecorder | None = None,
        start: Start | None = None,
        clock: Clock | None = None,
    ) -> None:
        if start is not None and clock is None:
            # The start's planners and simulated tools run on a clock: the run must too.
            raise ValueError("LocalExecutor: a start is given with the clock it was made on")
        self.store = store
        self.recorder = recorder
        self.start = start
        self.clock = clock

    async def execute(self, request: RunRequest, hooks: Hooks) -> CoverageReport:
        """Open the run here and drive it to its report."""
        clock = self.clock or AnyioClock(speed=request.speed)
        start = self.start or Start.fresh(request.scenario, clock)
        async with open_run(
            request, start, clock=clock, store=self.store, recorder=self.recorder,
            on_recorded=hooks.on_recorded,
        ) as run:
            return await drive(run, hooks)


@dataclass(frozen=True)
class TemporalTarget:
    """Where a run goes on Temporal: the frontend, the namespace, the task queue."""

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "fanout"

    @classmethod
    def of(cls, options: dict[str, Any] | None) -> TemporalTarget:
        """The target a Python caller's ``temporal={...}`` names (defaults elsewhere).

        Raises:
            ValueError: a key that is not address, namespace or task_queue.
        """
        options = dict(options or {})
        unknown = sorted(set(options) - {"address", "namespace", "task_queue"})
        if unknown:
            raise ValueError(
                f"temporal: expected address, namespace and task_queue, got {unknown[0]!r}"
            )
        for key, value in options.items():
            if not isinstance(value, str) or not value:
                raise ValueError(f"temporal.{key}: expected a non-empty string, got {value!r}")
        return cls(**options)


class TemporalExecutor:
    """Runs a job on Temporal workers, recorded in ``store`` (which they must reach).

    ``client`` is a connected Temporal client (one is connected to ``target`` when
    None); ``settings`` how the workflow runs its activities.
    """

    def __init__(
        self,
        store: RunStore,
        target: TemporalTarget | None = None,
        *,
        settings: TemporalSettings | None = None,
        client: Any = None,
        poll_s: float = 0.25,
    ) -> None:
        self.store = store
        self.target = target or TemporalTarget()
        self.settings = settings
        self.client = client
        self.poll_s = poll_s

    async def connect(self) -> Any:
        """The Temporal client (connected once).

        Raises:
            RuntimeError: nothing answers at the target's address.
        """
        if self.client is None:
            from coordinator.temporal import connect

            self.client = await connect(self.target.address, self.target.namespace)
        return self.client

    async def submit(
        self, request: RunRequest, *, asks: bool = False, attended: bool = False
    ) -> tuple[TemporalRunRef, JobHandle]:
        """Register the run in the store and start its workflow; the workers run it.

        Raises:
            ValueError: the job cannot run on Temporal (:func:`not_on_temporal`).
        """
        reason = not_on_temporal(request)
        if reason is not None:
            raise ValueError(reason)
        await self.connect()  # unreachable: nothing registered
        # The run is created as a local one is (``fanout runs`` lists it at once); from
        # then on the workers record it: trace, checkpoints, results and, last, the report.
        recorder = record_run(self.store, request)
        await anyio.to_thread.run_sync(recorder.close)  # this process records nothing more
        return await self._start(recorder.run_id, request, asks=asks, attended=attended)

    async def start_registered(
        self, run_id: str, request: RunRequest, *, attended: bool = False
    ) -> JobHandle:
        """Start run ``run_id``, already registered in the store (the service records its
        submissions itself), on Temporal; ``attended``: a person is attached (the door
        follows it with a desk).

        Raises:
            ValueError: the job cannot run on Temporal (:func:`not_on_temporal`).
        """
        reason = not_on_temporal(request)
        if reason is not None:
            raise ValueError(reason)
        _, handle = await self._start(run_id, request, attended=attended)
        return handle

    async def _start(
        self, run_id: str, request: RunRequest, *, asks: bool = False, attended: bool = False
    ) -> tuple[TemporalRunRef, JobHandle]:
        from coordinator.temporal.client import start_recorded

        return await start_recorded(
            await self.connect(), request.scenario, self.store, run_id,
            task_queue=self.target.task_queue, speed=request.speed, settings=self.settings,
            policy=request.policy, asks=asks, attended=attended,
        )

    async def take_back(self, run_id: str) -> tuple[JobHandle, datetime] | None:
        """The workflow of run ``run_id`` and when it started, while it still runs on
        this executor's namespace: a restarted ``fanout serve`` follows it again
        (docs/design.md §9). None for a local run, a workflow of another namespace, or
        one that has ended."""
        from coordinator.temporal.client import still_running
        from coordinator.temporal.records import temporal_run

        ref = await anyio.to_thread.run_sync(temporal_run, self.store, run_id)
        if ref is None or ref.namespace != self.target.namespace:
            return None
        return await still_running(await self.connect(), ref.workflow_id)

    async def follow(
        self,
        run_id: str,
        handle: JobHandle,
        hooks: Hooks,
        *,
        on_row: Callable[[dict[str, Any]], None] | None = None,
        after: int = 0,
    ) -> CoverageReport:
        """Wait for the run's report; meanwhile the hooks hear the trace the workers
        record, from the store (the last events before the report too), from event
        ``after`` on (a door that takes a run back has the earlier ones). ``on_row``
        hears every stored event as the store holds it (the service streams those)."""
        from coordinator.engine.follow import StoreTail, no_worker_hint

        tail = StoreTail(
            self.store, run_id, hooks.observer, hooks.on_plan, hooks.on_followups, on_row=on_row
        )
        tail.seq = after

        async def watch() -> None:
            if hooks.on_notice is not None:
                await no_worker_hint(
                    self.client, self.target.task_queue, self.target.address,
                    lambda: tail.seen, hooks.on_notice,
                )

        async def cancel() -> None:
            if hooks.cancel is not None:
                await hooks.cancel.wait()
                await handle.signal("cancel")

        async def attend() -> None:
            if hooks.desk is not None:
                await _Attending(hooks.desk, handle, self.poll_s).run()

        async def answer() -> None:
            handler = hooks.handler
            if handler is None:
                return
            asked = 0
            while True:
                published = await handle.query("escalations")
                for wire in published[asked:]:
                    escalation = Escalation.model_validate(wire)
                    choice = await handler.handle(escalation)
                    await handle.signal(
                        "decide", {"subtask_id": escalation.subtask_id, "choice": choice}
                    )
                asked = len(published)
                await anyio.sleep(self.poll_s)

        async with anyio.create_task_group() as tg:
            tg.start_soon(tail.follow, self.poll_s)
            tg.start_soon(watch)
            tg.start_soon(cancel)
            tg.start_soon(answer)
            tg.start_soon(attend)
            report = await handle.result()
            tg.cancel_scope.cancel()
        await anyio.to_thread.run_sync(tail.feed)
        return report

    async def execute(self, request: RunRequest, hooks: Hooks) -> CoverageReport:
        """Submit the run and follow it to its report. A scenario's ``people:`` block
        attaches a person, as locally: played here, on the door's desk, at its times
        on a clock at the request's speed (docs/design.md §17)."""
        people = request.scenario.people if hooks.desk is None else []
        ref, handle = await self.submit(
            request, asks=hooks.handler is not None,
            attended=hooks.desk is not None or bool(people))
        if hooks.on_recorded is not None:
            hooks.on_recorded(ref.run_id)
        if not people:
            return await self.follow(ref.run_id, handle, hooks)
        desk = Desk(AnyioClock(speed=request.speed))
        async with anyio.create_task_group() as tg:
            # A step for something that never happens is left undelivered at the end.
            tg.start_soon(ScriptedPerson(desk, people).run)
            report = await self.follow(ref.run_id, handle, replace(hooks, desk=desk))
            tg.cancel_scope.cancel()
        return report


class _Attending:
    """The door's desk mirroring what waits in a Temporal run's workflow (docs/design.md
    §17), polled every ``poll_s``: escalations and the plan wait on the desk as the
    workflow offers them, and go back as it decides; running subtasks are started on
    the desk, whose requests to them go to the workflow."""

    def __init__(self, desk: Desk, handle: JobHandle, poll_s: float) -> None:
        self.desk = desk
        self.handle = handle
        self.poll_s = poll_s
        self.waits: dict[str, anyio.CancelScope] = {}
        self.plan: anyio.CancelScope | None = None
        self.running: set[str] = set()

    async def run(self) -> None:
        """Mirror the workflow until cancelled (the run's report is in)."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)

        def heard(event: str, data: dict[str, Any]) -> None:
            if event == REQUEST_MADE:
                send.send_nowait(data["request"])

        unlisten = self.desk.listen(heard)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._relay, receive)
                while True:
                    await self._escalations(tg)
                    await self._plan(tg)
                    await self._running()
                    await anyio.sleep(self.poll_s)
        finally:
            unlisten()
            send.close()

    async def _relay(self, requests: MemoryObjectReceiveStream[dict[str, Any]]) -> None:
        """Each request the desk took, to the workflow, in the order made."""
        async for request in requests:
            await self.handle.signal("asked", request)

    async def _escalations(self, tg: TaskGroup) -> None:
        """Each escalation the workflow offers waits on the desk as it is (its id and
        options are the workflow's); the desk's decision is signalled back. One the
        workflow stopped waiting for (timed out, cut) stops waiting here."""
        now = [Escalation.model_validate(w) for w in await self.handle.query("waiting")]
        ids = {e.id for e in now}
        new = [e for e in now if e.id not in self.waits]
        # When each began to wait, in job time (a desk attached later lists it as it was).
        since: dict[str, float] = await self.handle.query("waiting_since") if new else {}
        for escalation in new:
            assert escalation.id is not None
            scope = self.waits[escalation.id] = anyio.CancelScope()
            tg.start_soon(self._decide, escalation, since.get(escalation.id), scope)
        for eid, scope in self.waits.items():
            if eid not in ids:
                scope.cancel()

    async def _decide(
        self, escalation: Escalation, since_s: float | None, scope: anyio.CancelScope
    ) -> None:
        with scope:
            decision = await self.desk.wait(escalation, timeout_s=None, since_s=since_s)
            await self.handle.signal("decided", decision)

    async def _plan(self, tg: TaskGroup) -> None:
        """The lead's plan waiting in the workflow waits on the desk (with what the
        workflow checks an edit with, so a bad edit is refused at the door naming its
        field); the review goes back as the ``review_plan`` update. One no longer
        waiting there (its timer, a cancel) stops waiting here."""
        waiting: dict[str, Any] | None = await self.handle.query("plan")
        if waiting is not None and self.plan is None:
            self.plan = anyio.CancelScope()
            tg.start_soon(self._review, waiting, self.plan)
        elif waiting is None and self.plan is not None:
            self.plan.cancel()
            self.plan = None

    async def _review(self, waiting: dict[str, Any], scope: anyio.CancelScope) -> None:
        from temporalio.client import WorkflowUpdateFailedError

        with scope:
            while True:
                review = await self.desk.review_plan(
                    [SubtaskSpec.model_validate(s) for s in waiting["subtasks"]],
                    defaults=SubtaskSettings.model_validate(waiting["defaults"]),
                    tools=waiting["tools"], planner=waiting["planner"], timeout_s=None)
                try:
                    await self.handle.execute_update(
                        "review_plan",
                        {"verdict": review.verdict_as_given(), "by": review.by, "at": review.at})
                    return
                except WorkflowUpdateFailedError as exc:
                    # The desk checks an edit as the workflow does: this is the plan no
                    # longer waiting there (the next poll stops it here) or a bug; the
                    # plan waits on the desk again either way.
                    log.warning("the workflow refused a plan review: %s", exc.cause)

    async def _running(self) -> None:
        """The desk hears which subtasks run now (a person may ask them to stop or give
        them a hint), and which no longer do."""
        running = {r["subtask_id"]: bool(r["hints"]) for r in await self.handle.query("running")}
        for sid, hints in running.items():
            if sid not in self.running:
                self.desk.started(sid, hints=hints)
        for sid in self.running - running.keys():
            # (A hint it never read the workflow records unread once the round is back.)
            self.desk.finished(sid)
        self.running = set(running)


def runs_on_temporal(store: RunStore, run_id: str) -> bool:
    """Whether run ``run_id`` belongs to a workflow (resuming it here would fork it)."""
    try:
        from coordinator.temporal.records import temporal_run
    except ImportError:  # without the temporal extra no run here went to Temporal
        return False
    return temporal_run(store, run_id) is not None
