"""The coordinator: fan out one subagent per subtask, isolate them, route, assemble.

Subagents run in an anyio task group on a fixed pool of ``concurrency`` workers that
take subtasks in order (FIFO by construction). A failing subagent, even one with a bug,
becomes an ``internal`` escalation; it never cancels a sibling. Subtasks routed
``retry_later`` run once more after the first round, resuming at the failed step. A job
deadline cuts whatever still runs; each cut subagent hands up what it found.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Protocol

import anyio

from coordinator.job import JobSpec
from coordinator.report import CoverageReport, Decision, ReportBuilder
from coordinator.rules import cut, next_round_starts, retried_later, time_left
from shared.clock import AnyioClock, Clock, JobClock
from shared.escalation import Escalation
from shared.ids import RandomTraceIds, TraceIds
from shared.tokens import TokenCounter
from subagents.loop import run_subagent
from subagents.planners import Planner
from subagents.result import ProgressEvent, ProgressObserver, SubagentResult, SubagentState
from subagents.run import SubagentRun, crashed
from subagents.spec import SubtaskSpec
from subagents.tool import Tool
from subagents.toolsource import StaticTools, ToolSource


class EscalationHandler(Protocol):
    """Receives every escalation routed ``escalate`` (a person, a ticket, a privileged path)."""

    async def handle(self, escalation: Escalation) -> str | None:
        """Take charge of ``escalation``; return the alternative chosen, if any."""
        ...


class RecordingHandler:
    """The default handler: keeps the escalations; the report lists them."""

    def __init__(self) -> None:
        self.received: list[Escalation] = []

    async def handle(self, escalation: Escalation) -> str | None:
        """Record ``escalation``; choose nothing."""
        self.received.append(escalation)
        return None


ResultHook = Callable[[SubagentResult], Awaitable[None]]
PlannerFactory = Callable[[SubtaskSpec], Planner]


@asynccontextmanager
async def cancelled_by(event: anyio.Event | None) -> AsyncIterator[None]:
    """A scope whose body ends once ``event`` is set: a person cancelled the run
    (docs/design.md §8).
    The fan-out's rounds run in one, and so does the lead's planning before them."""
    if event is None:
        yield
        return
    async with anyio.create_task_group() as tg:
        if event.is_set():
            tg.cancel_scope.cancel()

        async def watch() -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        yield
        tg.cancel_scope.cancel()


async def run_job(
    job: JobSpec,
    tools: ToolSource | Mapping[str, Tool],
    *,
    clock: Clock | None = None,
    seed: object = 0,
    trace_ids: TraceIds | None = None,
    observer: ProgressObserver | None = None,
    handler: EscalationHandler | None = None,
    on_result: ResultHook | None = None,
    planner_factory: PlannerFactory | None = None,
    runs: Mapping[str, SubagentRun] | None = None,
    checkpoint: Callable[[SubagentRun], None] | None = None,
    elapsed_offset: float = 0.0,
    cancel: anyio.Event | None = None,
) -> CoverageReport:
    """Run ``job`` to a coverage report; never raises for a failure inside the job.

    Args:
        job: the job, its subtasks with merged settings.
        tools: a tool source (per-subtask tools) or one mapping shared by every subtask.
        clock: the clock; virtual in replays and tests.
        seed: seeds each subtask's jitter stream (``f"{seed}/{subtask_id}"``).
        trace_ids: where trace ids come from (seeded in replays).
        observer: hears every state change, attempt and wait of every subagent.
        handler: receives the escalations routed ``escalate``.
        on_result: awaited with each subagent's result before the coordinator counts it.
        planner_factory: a planner per subtask (the scripted plan by default).
        runs: existing subagent states to continue (a resumed run): finished ones are
            counted as they are, unfinished ones continue their round.
        checkpoint: called with a subagent's state after each logical call it survives.
        elapsed_offset: the job time already spent (a resumed run continues from it);
            every time in the report is seconds since the job started.
        cancel: once set, the run ends like a deadline cut but with trigger ``cancelled``:
            running subagents hand up what they found, queued ones are gaps with 0
            attempts, and the retry round does not start.
    """
    clock = JobClock(clock or AnyioClock(), offset=elapsed_offset)
    source: ToolSource = StaticTools(tools) if isinstance(tools, Mapping) else tools
    trace_ids = trace_ids or RandomTraceIds()
    handler = handler or RecordingHandler()
    table = job.routes
    deadline = job.deadline_s
    # Subagent states exist only while they matter: a fresh one is made when its subtask
    # starts, and dropped once its result is counted unless the retry round needs it.
    # Holding all of them to the end kept every context (each envelope's JSON text) of
    # the job alive, and made the garbage collector walk them over and over.
    live: dict[str, SubagentRun] = dict(runs or {})
    planners: dict[str, Planner] = {}
    if planner_factory is not None:
        # Asked up front, in subtask order, as before: a factory that fails, fails the job
        # before anything runs.
        for spec in job.subtasks:
            if spec.id not in live:
                planners[spec.id] = planner_factory(spec)
    if len(live) < len(job.subtasks):
        TokenCounter()  # load the encoding now: a missing one fails here, not in a subagent
    # A subagent's final result becomes its report rows at once; only a result the
    # retry round may still replace is kept as it is.
    report_rows = ReportBuilder(job)
    results: dict[str, SubagentResult] = {}

    def run_of(spec: SubtaskSpec) -> SubagentRun:
        run = live.get(spec.id)
        if run is None:
            planner = planners.pop(spec.id, None)
            run = live[spec.id] = SubagentRun.for_subtask(spec, seed=seed, planner=planner)
        return run

    def emit_state(run: SubagentRun, state: SubagentState) -> None:
        run.state = state
        if observer is not None:
            trigger = run.escalation.trigger if run.escalation and state == "escalated" else None
            observer(
                ProgressEvent(run.spec.id, "state", clock.now(), state=state, trigger=trigger)
            )

    def retry_later(run: SubagentRun) -> bool:
        return retried_later(run.escalation, run.rounds, table)

    def cancelled() -> bool:
        return cancel is not None and cancel.is_set()

    async def counted(run: SubagentRun, result: SubagentResult) -> None:
        if on_result is not None:
            await on_result(result)
        sid = run.spec.id
        if run.finished and not retry_later(run):
            report_rows.add(result)
            results.pop(sid, None)
            del live[sid]
        else:
            results[sid] = result

    async def round_of(batch: list[SubtaskSpec]) -> None:
        queue = deque(batch)
        for spec in batch:
            run = live.get(spec.id)
            if run is not None:
                run.state = "queued"
            # A subagent not made yet is queued already.
            if observer is not None:
                observer(ProgressEvent(spec.id, "state", clock.now(), state="queued"))

        async def worker() -> None:
            while queue and not cancelled():
                # Each subagent's run is written out here rather than in a helper the
                # worker awaits: a frame fewer per live subagent (at full fan-out every
                # worker holds one).
                run = run_of(queue.popleft())
                try:
                    result = await run_subagent(
                        run,
                        source.for_subtask(run.spec.id),
                        clock=clock,
                        trace_ids=trace_ids,
                        observer=observer,
                        checkpoint=checkpoint,
                    )
                except Exception as exc:  # a bug in a planner, tool source or loop: isolate it
                    crashed(run, exc, clock.now())
                    # Observers (the live display) must hear this subagent end like any other.
                    emit_state(run, "escalated")
                    result = run.result()
                await counted(run, result)

        with clock.move_on_after(time_left(deadline, clock.now())):
            async with cancelled_by(cancel), anyio.create_task_group() as tg:
                for _ in range(min(job.concurrency, len(queue))):
                    tg.start_soon(worker)
        for spec in batch:
            if spec.id in report_rows:
                continue  # finished and counted
            run = run_of(spec)
            if not run.finished:
                cut(run, clock.now(), cancelled=cancelled())
                emit_state(run, "escalated")
                await counted(run, run.result())

    first = [
        s for s in job.subtasks
        if (r := live.get(s.id)) is None or (r.rounds < 2 and not r.finished)
    ]
    if first:
        await round_of(first)
    # A resumed run may have been cut inside the retry round: those continue in it.
    retry = [
        s for s in job.subtasks
        if (r := live.get(s.id)) is not None
        and (retry_later(r) or (r.rounds == 2 and not r.finished))
    ]
    if retry and next_round_starts(deadline, clock.now(), cancelled=cancelled()):
        await round_of(retry)
    for s in job.subtasks:
        if s.id not in report_rows:
            report_rows.add(results.pop(s.id) if s.id in results else live[s.id].result())
    report = report_rows.report(elapsed_s=clock.now())
    decisions: list[Decision] = []
    for escalation in report.escalations:
        choice = await handler.handle(escalation)
        if choice is not None:
            decisions.append(Decision(subtask_id=escalation.subtask_id, choice=choice))
    if decisions:
        report = report.model_copy(update={"decisions": decisions})
    return report
