"""The job's flow in this process: the local backend of :mod:`coordinator.flow`.

:class:`LocalBackend` gives :class:`~coordinator.flow.Flow` what the local engine does
differently from Temporal: the lanes are tasks of an anyio task group under the
deadline's cancel scope and the cancel's watcher (:func:`cancelled_by`); a subtask's
round is :func:`subagents.loop.run_subagent` here, a failing one (even a bug) becomes an
``internal`` escalation and never cancels a sibling; the lead's plan, follow-up plan and
synthesis are its model calls here; time is a :class:`~shared.clock.JobClock` (virtual in
replays).

:func:`run_research` (replay, ``fanout run``/``resume``/``ask``, the service) runs a whole
job with its lead; :func:`run_job` only the fan-out of a job's subtasks (tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio

from coordinator.decision import DEADLINE
from coordinator.flow import Decided, Flow, Lane, Plan, Waited
from coordinator.job import JobSpec
from coordinator.jobfile.scenario import Scenario
from coordinator.lead.decompose import (
    LeadContext,
    cancelled_planning,
    decompose,
    degraded_plan,
    rejected_plan,
)
from coordinator.lead.followups import plan_followups
from coordinator.lead.planning import JobPlanning
from coordinator.lead.research import FollowupHook, PlanHook, catalogue, with_subtasks
from coordinator.lead.synthesis import synthesize
from coordinator.people import DECISION_CHANGED, DECISION_MADE, DECISION_NEEDED, Desk
from coordinator.report import CoverageReport, Decision, with_tokens
from coordinator.routing import EscalationHandler, RecordingHandler
from coordinator.rules import (
    CutTrigger,
    cut,
    handed_up,
    retried_later,
    review_wait,
    split_followups,
)
from coordinator.scripted_person import ScriptedPerson
from shared.clock import AnyioClock, Clock, JobClock
from shared.escalation import Escalation
from shared.ids import RandomTraceIds, TraceIds
from shared.tokens import TokenCounter
from subagents.executor import ExecEvent
from subagents.loop import run_subagent
from subagents.planners import Hint, Planner, reads_hints
from subagents.result import (
    LEAD,
    ProgressEvent,
    ProgressObserver,
    SubagentResult,
    SubagentState,
)
from subagents.run import SubagentRun, crashed
from subagents.spec import SubtaskSpec
from subagents.telemetry.run import instrumented_run
from subagents.tool import Tool
from subagents.toolsource import StaticTools, ToolSource

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

ResultHook = Callable[[SubagentResult], Awaitable[None]]
DecisionHook = Callable[[str, str, float, dict[str, Any]], None]
"""Hears ``(subtask_id, kind, at, data)`` of a person's escalation: ``decision.needed``
(``{"escalation": ...}``), ``decision.made`` (``{"decision": ...}``) and
``decision.changed`` (``{"decision": ...}`` with its ``change``), at job time."""
PlannerFactory = Callable[[SubtaskSpec], Planner]

__all__ = [
    "LocalBackend",
    "ResearchHooks",
    "Resumed",
    "cancelled_by",
    "run_job",
    "run_research",
]


@asynccontextmanager
async def cancelled_by(event: anyio.Event | None) -> AsyncIterator[None]:
    """A scope whose body ends once ``event`` is set: a person cancelled the run
    (docs/design.md §8). The rounds run in one, and so do the lead's plans."""
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


@dataclass(frozen=True)
class ResearchHooks:
    """What a caller of :func:`run_research` hears of the run and how it steers it.

    ``on_plan`` hears the lead's subtasks once they are decided (the run store keeps
    them, so a resumed run does not plan again); ``on_followups`` the follow-ups the
    lead planned from the gaps; ``checkpoint`` each subagent's state after a logical
    call; ``tracer_provider`` gets the run's one trace (docs/design.md §13; None: the global
    provider, when the application set one).
    """

    observer: ProgressObserver | None = None
    handler: EscalationHandler | None = None
    on_result: ResultHook | None = None
    on_plan: PlanHook | None = None
    on_followups: FollowupHook | None = None
    checkpoint: Callable[[SubagentRun], None] | None = None
    tracer_provider: TracerProvider | None = None
    on_continued: FollowupHook | None = None
    """Hears the follow-ups that continue subtasks a person decided use_tool/requery for."""
    desk: Desk | None = None
    """The person attached to the run (docs/design.md §17): escalations routed
    ``escalate`` wait at this desk for a decision, and running subtasks hear its requests."""
    on_decision: DecisionHook | None = None
    """Hears the desk's escalation events and the flow's measured decisions, to record
    them (a resumed run waits again for an escalation that waited when it stopped, and
    lists the decisions made before)."""


@dataclass(frozen=True)
class Resumed:
    """Where a resumed run continues: its subagents' runs, the job time it had reached,
    the gap of a lead that could not plan (its degraded plan runs again), and the
    follow-ups its lead had planned (None: not planned yet), the escalations that waited
    for a person when it stopped and how many escalations each subtask had offered, and
    the decisions a person had made (docs/design.md §17). The default: a fresh run."""

    runs: Mapping[str, SubagentRun] | None = None
    elapsed_offset: float = 0.0
    lead_gap: SubagentResult | None = None
    followups: Sequence[SubtaskSpec] | None = None
    waited: Mapping[str, Waited] | None = None
    numbers: Mapping[str, int] | None = None
    decided: Sequence[Decided] = ()


class LocalBackend:
    """The flow's backend in this process (:class:`coordinator.flow.Backend`)."""

    def __init__(
        self,
        source: ToolSource,
        *,
        clock: Clock,
        seed: object,
        trace_ids: TraceIds,
        hooks: ResearchHooks,
        resumed: Resumed = Resumed(),
        cancel: anyio.Event | None = None,
        scenario: Scenario | None = None,
        planning: JobPlanning | None = None,
        planner_factory: PlannerFactory | None = None,
    ) -> None:
        self.source = source
        self.base = clock
        self.seed = seed
        self.trace_ids = trace_ids
        self.hooks = hooks
        self.resumed = resumed
        self.cancel = cancel
        self.scenario = scenario
        self.planning = planning
        self.planner_factory = planner_factory
        self.desk = hooks.desk
        if self.desk is not None:
            if self.cancel is None:
                self.cancel = anyio.Event()  # a person's stop ends the run as a cancel does
            # The desk's seconds are job time (a resumed run's go on), and a resumed
            # run's escalations are numbered on from those it offered before.
            self.desk.align(resumed.elapsed_offset)
            self.desk.restore_numbers(resumed.numbers or {})
        # A resumed run's escalations that wait again, by escalation id.
        self.waited = {w.escalation.id: w for w in (resumed.waited or {}).values()}
        self.job: JobSpec | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        # Escalated subagents a person may send back to work (retry), by subtask.
        self.decidable: dict[str, SubagentRun] = {}
        # Whether a counted result waits for a person (the flow's ``Flow.waits``, set by
        # whoever makes both); its escalation, offered and opened before the result is
        # committed, by subtask, until its wait begins in :meth:`decision`.
        self.waits: Callable[[JobSpec, SubagentResult], bool] | None = None
        self.opened: dict[str, Escalation] = {}
        # Waits the deadline cut, decided ``by: deadline``, by subtask (Flow.cut_decision).
        self.cut: dict[str, Decision] = {}
        self._deadline_at: float | None = None
        # Job time of the lead; each fan-out reads its own clock from where it starts.
        self.job_clock = JobClock(clock, offset=resumed.elapsed_offset)
        self.clock: JobClock | None = None
        self.table = scenario.job.routes if scenario is not None else None
        self.lead = self._lead() if scenario is not None and scenario.model is not None else None
        # Subagent states exist only while they matter: a fresh one is made when its
        # subtask starts, and dropped once its result is counted unless the retry round
        # needs it (holding all of them kept every context of the job alive).
        self.live: dict[str, SubagentRun] = {}
        self.planners: dict[str, Planner] = {}

    # -- the lead ---------------------------------------------------------------------

    def _lead(self) -> LeadContext:
        """The lead's model calls, traced as subtask ``lead``, timed in job time."""
        assert self.scenario is not None and self.scenario.model is not None
        assert self.planning is not None
        observer = self.hooks.observer
        job_clock = self.job_clock

        def lead_events(event: ExecEvent) -> None:
            if observer is not None:
                observer(ProgressEvent(LEAD, event.kind, job_clock.now(), tool=event.tool,
                                       attempt=event.attempt, wait_s=event.wait_s,
                                       result=event.result))

        def lead_throttled(waiting: bool) -> None:
            if observer is not None:
                state: SubagentState = "throttled" if waiting else "thinking"
                observer(ProgressEvent(LEAD, "state", job_clock.now(), state=state))

        return LeadContext(
            self.planning.client, self.scenario.model, job_clock, self.trace_ids,
            observer=lead_events, seed=self.scenario.seed, on_limit_wait=lead_throttled,
            meter=self.planning.meter, progress=observer,
        )

    @property
    def has_lead(self) -> bool:
        return self.lead is not None

    @property
    def lead_plans_followups(self) -> bool:
        return self.planning is not None and self.planning.plans_followups

    @property
    def synthesizes(self) -> bool:
        return self.lead is not None and self.planning is not None and self.planning.synthesizes

    async def plan(self, job: JobSpec) -> Plan:
        """The lead's plan; a cancel reaches its model call as it reaches a subagent's,
        and the job then has the degraded plan (cut at once) beside a cancelled gap."""
        assert self.lead is not None and self.scenario is not None  # the loader's promise
        assert self.planning is not None
        tools = catalogue(self.source)
        planned = None
        async with cancelled_by(self.cancel):
            planned = await decompose(job, tools, self.lead)
        if planned is not None:
            plan = Plan(planned[0], planned[1])
        else:
            plan = Plan(degraded_plan(job, [t.name for t in tools]),
                        cancelled_planning(job, self.lead), cut=True)
        assert plan.subtasks is not None
        if self.desk is not None and job.review_plan and not plan.cut:
            # The plan waits for a person (docs/design.md §17), before it is recorded,
            # for wait_s but never past the job's deadline (then approved by: timeout, as
            # on Temporal); a cancel ends the wait as it ends the planning.
            review = None
            async with cancelled_by(self.cancel):
                review = await self.desk.review_plan(
                    plan.subtasks, defaults=job.defaults, tools=[t.name for t in tools],
                    planner="model", timeout_s=review_wait(
                        job.escalation_wait().wait_s, job.deadline_s, self.job_clock.now()))
            if review is None:  # nothing reviewed: as a cancel while it planned
                plan = Plan(plan.subtasks, cancelled_planning(job, self.lead), cut=True)
            elif review.verdict == "reject":
                return Plan(None, rejected_plan(job, self.lead, review.by))
            elif review.subtasks is not None:
                plan = Plan(review.subtasks, plan.gap)
        assert plan.subtasks is not None
        if self.hooks.on_plan is not None:
            self.hooks.on_plan(plan.subtasks, self.job_clock.now(), plan.gap)
        self.scenario = with_subtasks(self.scenario, plan.subtasks)
        self.planning.scenario = self.scenario
        return plan

    def known_followups(self) -> Sequence[SubtaskSpec] | None:
        return self.resumed.followups

    async def plan_followups(
        self, report: CoverageReport, job: JobSpec
    ) -> Sequence[SubtaskSpec] | None:
        """The lead's follow-ups; as its first plan, this one hears a cancel."""
        assert self.lead is not None
        planned = None
        async with cancelled_by(self.cancel):
            planned = await plan_followups(report, job, catalogue(self.source), self.lead)
        if planned is not None and self.hooks.on_followups is not None:
            # Recorded: those that run (one for a gap a person decided does not).
            self.hooks.on_followups(split_followups(planned, report)[0], self.job_clock.now())
        return planned

    async def synthesize(self, report: CoverageReport) -> CoverageReport:
        assert self.lead is not None
        report = await synthesize(report, self.lead)
        return report.model_copy(update={"elapsed_s": self.job_clock.now()})

    def tokens(self, report: CoverageReport) -> CoverageReport:
        return report if self.planning is None else with_tokens(report, self.planning.meter)

    async def record(self, report: CoverageReport) -> CoverageReport:
        return report  # the run store's recorder closes the run (engine/recorded.py)

    # -- time and lanes ---------------------------------------------------------------

    def now(self) -> float:
        return (self.clock or self.job_clock).now()

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def stopped(self) -> bool:
        return self.cancelled()  # a deadline cancels the lanes' scope itself

    async def lanes(self, n: int, lane: Lane, left: float | None) -> None:
        assert self.clock is not None
        self._deadline_at = None if left is None else self.clock.now() + left
        if left is not None and left <= 0:
            # The deadline has passed (a plan approved by timeout at it): no lane starts,
            # and the flow settles the batch as queued deadline gaps with 0 attempts, as
            # the workflow's zero timer does (a cut at once still let each lane's first
            # subtask begin its attempt).
            return
        with self.clock.move_on_after(left):
            async with cancelled_by(self.cancel), anyio.create_task_group() as tg:
                self._tg = tg
                for _ in range(n):
                    tg.start_soon(lane)
        self._tg = None

    def spawn(self, lane: Lane) -> None:
        assert self._tg is not None
        self._tg.start_soon(lane)

    # -- a person (docs/design.md §17) ------------------------------------------------

    @property
    def attended(self) -> bool:
        return self.desk is not None

    async def decision(self, escalation: Escalation, spec: SubtaskSpec) -> Decision | None:
        """The desk's decision (offered with its id and options, waited for with the
        job's bounds); None without a desk."""
        desk = self.desk
        if desk is None:
            return None
        assert self.job is not None
        wait = self.job.escalation_wait()
        since_s: float | None = None
        waited = self.waited.pop(escalation.id, None) if escalation.id is not None else None
        opened = self.opened.pop(spec.id, None)
        if waited is not None:  # it waited when the run stopped: the same id, options, since
            offered, since_s = waited.escalation, waited.since_s
        elif opened is not None:  # opened as it was counted, before its result was committed
            offered = opened
        else:
            offered = desk.offer(escalation, list(spec.tools))
        try:
            return await desk.wait(offered, timeout_s=wait.wait_s, on_timeout=wait.on_timeout,
                                   since_s=since_s, cut_by=self._cut_by)
        except anyio.get_cancelled_exc_class():
            decided = next((d for d in reversed(desk.decisions)
                            if d.escalation == offered.id and d.by == DEADLINE), None)
            if decided is not None:
                self.cut[spec.id] = decided  # the deadline decided it: Flow.cut_decision
            raise

    def _cut_by(self) -> str | None:
        """Who decides a wait cancelled now: the deadline when it has come (a cancel, a
        process stopping where it stands: nobody; a resumed run waits again)."""
        at = self._deadline_at
        if at is None or self.cancelled() or self.clock is None:
            return None
        return DEADLINE if self.clock.now() >= at - 1e-9 else None

    def cut_decision(self, subtask_id: str) -> Decision | None:
        """The ``by: deadline`` decision of ``subtask_id``'s wait, when the deadline cut it."""
        return self.cut.pop(subtask_id, None)

    def rounds_of(self, subtask_id: str) -> int | None:
        """The rounds ``subtask_id``'s subagent has run (None: it has none here)."""
        run = self.live.get(subtask_id) or self.decidable.get(subtask_id)
        return None if run is None else run.rounds

    def again(self, spec: SubtaskSpec) -> None:
        # (A resumed run's escalated subagent is its restored run, never counted here.)
        run = self.decidable.pop(spec.id, None) or self.live[spec.id]
        run.state = "queued"
        self.live[spec.id] = run

    def stop(self) -> None:
        if self.cancel is None:  # (made with a desk; a resumed run's stop may have none)
            self.cancel = anyio.Event()
        self.cancel.set()

    def continuing(self, specs: Sequence[SubtaskSpec]) -> None:
        if self.hooks.on_continued is not None:
            self.hooks.on_continued(list(specs), self.job_clock.now())

    # -- the rounds -------------------------------------------------------------------

    @contextmanager
    def fanning_out(self, job: JobSpec, *, followups: bool) -> Iterator[None]:
        """A fan-out's own job clock, subagent states and planners."""
        factory = self.planner_factory
        if self.planning is not None:
            planning = self.planning
            factory = planning.planner if followups or planning.model_planned else None
        self.clock = JobClock(self.base, offset=self.job_clock.now())
        self.table = job.routes
        self.job = job
        self.live = dict(self.resumed.runs or {})
        self.planners = {}
        if factory is not None:
            # Asked up front, in subtask order: a factory that fails, fails the job
            # before anything runs.
            for spec in job.subtasks:
                if spec.id not in self.live:
                    self.planners[spec.id] = factory(spec)
        if len(self.live) < len(job.subtasks):
            TokenCounter()  # load the encoding now: a missing one fails here, not in a subagent
        try:
            yield
        finally:
            self.clock = None

    def _run_of(self, spec: SubtaskSpec) -> SubagentRun:
        run = self.live.get(spec.id)
        if run is None:
            planner = self.planners.pop(spec.id, None)
            run = self.live[spec.id] = SubagentRun.for_subtask(spec, seed=self.seed,
                                                               planner=planner)
        return run

    def _retry_later(self, run: SubagentRun) -> bool:
        assert self.table is not None
        return retried_later(run.escalation, run.rounds, self.table)

    def due(self, spec: SubtaskSpec, round_no: int) -> bool:
        run = self.live.get(spec.id)
        if round_no == 1:
            return run is None or (run.rounds < 2 and not run.finished)
        return run is not None and (
            self._retry_later(run) or (run.rounds == 2 and not run.finished))

    def _emit_state(self, run: SubagentRun, state: SubagentState) -> None:
        run.state = state
        observer = self.hooks.observer
        if observer is not None:
            assert self.clock is not None
            trigger = run.escalation.trigger if run.escalation and state == "escalated" else None
            observer(
                ProgressEvent(run.spec.id, "state", self.clock.now(), state=state,
                              trigger=trigger)
            )

    async def queued(self, batch: Sequence[SubtaskSpec], round_no: int) -> None:
        observer = self.hooks.observer
        for spec in batch:
            run = self.live.get(spec.id)
            if run is not None:
                run.state = "queued"
            # A subagent not made yet is queued already.
            if observer is not None:
                assert self.clock is not None
                observer(ProgressEvent(spec.id, "state", self.clock.now(), state="queued"))

    async def round(
        self, spec: SubtaskSpec, round_no: int, sharers: Callable[[], int]
    ) -> SubagentResult:
        assert self.clock is not None
        run = self._run_of(spec)
        desk = self.desk
        if desk is None:
            return await self._run(run)
        # A person may ask it to stop and hand up what it has (trigger human_request), or
        # give its model a hint, read before its next turn (a scripted plan refuses one).
        desk.started(spec.id, hints=reads_hints(run.planner))

        def hints() -> list[Hint]:
            return [Hint(r.hint or "", r.by) for r in desk.take_hint_requests(spec.id)]

        try:
            result: SubagentResult | None = None
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    await desk.stopping(spec.id).wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                result = await self._run(run, hints)
                tg.cancel_scope.cancel()
            if result is None:
                request = desk.stop_requested(spec.id)
                handed_up(run, self.clock.now(), request.by if request else None)
                self._emit_state(run, "escalated")
                result = run.result()
            return result
        finally:
            # A hint its model never read (the round ended first) is said, not lost.
            for unread in desk.finished(spec.id):
                if self.hooks.observer is not None:
                    self.hooks.observer(ProgressEvent(spec.id, "hint.unread", self.clock.now(),
                                                      text=unread.hint, by=unread.by))

    async def _run(
        self, run: SubagentRun, hints: Callable[[], list[Hint]] | None = None
    ) -> SubagentResult:
        """``run``'s round here; a bug in it becomes an ``internal`` escalation."""
        assert self.clock is not None
        try:
            return await run_subagent(
                run,
                self.source.for_subtask(run.spec.id),
                clock=self.clock,
                trace_ids=self.trace_ids,
                observer=self.hooks.observer,
                checkpoint=self.hooks.checkpoint,
                hints=hints,
            )
        except Exception as exc:  # a bug in a planner, tool source or loop: isolate it
            crashed(run, exc, self.clock.now())
            # Observers (the live display) must hear this subagent end like any other.
            self._emit_state(run, "escalated")
            return run.result()

    async def counted(self, result: SubagentResult) -> bool:
        run = self.live[result.subtask_id]
        opened = self._open(run, result)
        if self.hooks.on_result is not None:
            committed = False
            try:
                await self.hooks.on_result(result)
                committed = True
            finally:
                if not committed and opened is not None and self.desk is not None:
                    self.desk.withdraw(opened)  # the run stops here: its wait never begins
                    self.opened.pop(result.subtask_id, None)
        if run.finished and not self._retry_later(run):
            del self.live[result.subtask_id]
            if self.desk is not None and run.escalation is not None:
                self.decidable[run.spec.id] = run  # a person may send it back to work
            return True
        return False

    def _open(self, run: SubagentRun, result: SubagentResult) -> str | None:
        """Offer and open ``result``'s escalation at the desk when it will wait for a
        person, before the result is committed: the ``decision.needed`` is queued to the
        run store ahead of the result, so a process killed once the escalated result is
        stored has stored what waits too, and a resumed run waits again
        (docs/design.md §17). Its id, or None."""
        desk, escalation, job = self.desk, result.escalation, self.job
        if (desk is None or escalation is None or job is None or self.waits is None
                or not run.finished or self._retry_later(run)
                or not self.waits(job, result)):
            return None
        offered = desk.offer(escalation, list(run.spec.tools))
        assert offered.id is not None
        desk.open(offered)
        self.opened[result.subtask_id] = offered
        return offered.id

    async def settle(
        self, specs: Sequence[SubtaskSpec], trigger: CutTrigger
    ) -> AsyncIterator[SubagentResult]:
        assert self.clock is not None
        for spec in specs:
            run = self._run_of(spec)
            if not run.finished:  # (a finished one waits for the retry round it lost)
                cut(run, self.clock.now(), cancelled=trigger == "cancelled")
                self._emit_state(run, "escalated")
                yield run.result()

    def last(self, spec: SubtaskSpec) -> SubagentResult | None:
        return self.live[spec.id].result()


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
    """Fan ``job``'s subtasks out to their coverage report (no lead): the rounds of
    :class:`~coordinator.flow.Flow` on the local backend; never raises for a failure
    inside the job.

    Args:
        job: the job, its subtasks with merged settings.
        tools: a tool source (per-subtask tools) or one mapping shared by every subtask.
        clock: the clock; virtual in replays and tests.
        seed: seeds each subtask's jitter stream (``f"{seed}/{subtask_id}"``).
        trace_ids: where trace ids come from (seeded in replays).
        observer: hears every state change, attempt and wait of every subagent.
        handler: receives the escalations routed ``escalate``, as each is counted.
        on_result: awaited with each subagent's result before the coordinator counts it.
        planner_factory: a planner per subtask (the scripted plan by default).
        runs: existing subagent states to continue (a resumed run).
        checkpoint: called with a subagent's state after each logical call it survives.
        elapsed_offset: the job time already spent (a resumed run continues from it).
        cancel: once set, the run ends like a deadline cut but with trigger ``cancelled``.
    """
    source: ToolSource = StaticTools(tools) if isinstance(tools, Mapping) else tools
    backend = LocalBackend(
        source, clock=clock or AnyioClock(), seed=seed, trace_ids=trace_ids or RandomTraceIds(),
        hooks=ResearchHooks(observer=observer, on_result=on_result, checkpoint=checkpoint),
        resumed=Resumed(runs=runs, elapsed_offset=elapsed_offset), cancel=cancel,
        planner_factory=planner_factory,
    )
    backend.table = job.routes
    flow = Flow(backend, handler or RecordingHandler())
    return flow.decided(await flow.fan_out(job, followups=False))


async def run_research(
    scenario: Scenario,
    source: ToolSource,
    *,
    planning: JobPlanning,
    clock: Clock,
    trace_ids: TraceIds,
    hooks: ResearchHooks = ResearchHooks(),
    resumed: Resumed = Resumed(),
    run_id: str | None = None,
    cancel: anyio.Event | None = None,
) -> CoverageReport:
    """Run ``scenario``'s job with its lead agent (:class:`~coordinator.flow.Flow` on the
    local backend); never raises for a failure inside it.

    ``hooks`` hear it as it goes; ``resumed`` continues a run that stopped; ``run_id``
    names the recorded run in its spans; ``cancel``, once set, cuts the run (docs/design.md §8).
    """
    table = scenario.job.routes
    with instrumented_run(
        job=scenario.scenario,
        query=scenario.job.query,
        run_id=run_id,
        model=scenario.model,
        route=lambda escalation: table.route(escalation).route,
        observer=hooks.observer,
        on_result=hooks.on_result,
        tracer_provider=hooks.tracer_provider,
    ) as instrumented:
        desk = hooks.desk
        if desk is None and scenario.people:
            desk = Desk(clock)  # a scenario's people: block attaches a person
        traced = replace(hooks, observer=instrumented.observer, on_result=instrumented.on_result,
                         desk=desk)
        backend = LocalBackend(
            source, clock=clock, seed=scenario.seed, trace_ids=trace_ids, hooks=traced,
            resumed=resumed, cancel=cancel, scenario=scenario, planning=planning,
        )
        on_decision = hooks.on_decision
        flow = Flow(
            backend, hooks.handler, lead_gap=resumed.lead_gap, waited=resumed.waited,
            decided=resumed.decided,
            on_change=None if on_decision is None else (
                lambda d: on_decision(d.subtask_id, DECISION_CHANGED, backend.now(),
                                      {"decision": d.model_dump(mode="json")})),
            cut_decision=backend.cut_decision,
        )
        backend.waits = flow.waits
        unlisten = None
        if desk is not None and on_decision is not None:
            unlisten = desk.listen(_recording(on_decision, backend.now, backend.rounds_of))
        try:
            report = await _run_flow(flow, scenario, desk)
        finally:
            if unlisten is not None:
                unlisten()
        instrumented.outcome(
            report.outcome, report.coverage, len(report.subtasks), len(report.gaps)
        )
    return report


def _recording(
    hook: DecisionHook, now: Callable[[], float], rounds: Callable[[str], int | None]
) -> Callable[[str, dict[str, Any]], None]:
    """A desk listener handing its escalation events to ``hook`` (the run store records
    them as events of the subtask), at job time. A ``decision.needed`` carries the
    escalated subagent's ``rounds`` too: a resumed run tells a ``retry`` whose new result
    was counted (more rounds) from one not run yet, even when it escalated the same way
    without a call (``engine/resume.py`` ``recorded_decisions``)."""

    def heard(event: str, data: dict[str, Any]) -> None:
        if event == DECISION_NEEDED and "escalation" in data:
            sid = data["escalation"]["subtask_id"]
            n = rounds(sid)
            hook(sid, event, now(), data if n is None else {**data, "rounds": n})
        elif event == DECISION_MADE and "decision" in data:
            hook(data["decision"]["subtask_id"], event, now(), data)

    return heard


async def _run_flow(flow: Flow, scenario: Scenario, desk: Desk | None) -> CoverageReport:
    """The flow's run of ``scenario``'s job, its scripted person playing beside it."""
    if desk is not None and scenario.people:
        async with anyio.create_task_group() as people:
            # The scripted person plays beside the job; a step for something that
            # never happens is left undelivered when the job ends.
            people.start_soon(ScriptedPerson(desk, scenario.people).run)
            report = await flow.run(scenario.job)
            people.cancel_scope.cancel()
        return report
    return await flow.run(scenario.job)

