"""A job with its lead agent: decompose when there are no subtasks, fan out, follow up
on the gaps, synthesize.

:func:`run_research` is what replay, ``fanout run``/``resume``, ``fanout ask`` and the
service call: ``run_job`` for the fan-out, with the lead's decomposition before it, one
round of follow-ups planned from the gaps after it (docs/design.md §11), and its synthesis last
when the job has a model. The lead's time counts in the job's time (and against its
deadline); its model calls are traced as subtask ``lead``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from coordinator.fanout import EscalationHandler, ResultHook, cancelled_by, run_job
from coordinator.job import JobSpec
from coordinator.jobfile.scenario import Scenario
from coordinator.lead.decompose import (
    LeadContext,
    cancelled_planning,
    decompose,
    degraded_plan,
    with_lead_gap,
)
from coordinator.lead.extractive import with_extractive_answer
from coordinator.lead.followups import plan_followups, with_followups
from coordinator.lead.planning import JobPlanning
from coordinator.lead.synthesis import synthesize
from coordinator.report import CoverageReport, with_tokens
from coordinator.rules import asks_for_followups, follows_up, followup_job
from shared.clock import Clock, JobClock
from shared.ids import TraceIds
from subagents.executor import ExecEvent
from subagents.models.base import ToolSpec
from subagents.planners.prompt import tool_specs
from subagents.result import LEAD, ProgressEvent, ProgressObserver, SubagentResult, SubagentState
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec
from subagents.telemetry.run import instrumented_run
from subagents.toolsource import ToolSource

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider


class PlanHook(Protocol):
    """Hears the lead's subtasks, the job time they were decided at, and the lead's gap
    when it could not plan (the subtasks are then the degraded plan, docs/design.md §7)."""

    def __call__(
        self, subtasks: list[SubtaskSpec], at: float, lead_gap: SubagentResult | None = None
    ) -> None: ...


class FollowupHook(Protocol):
    """Hears the follow-ups the lead planned (none is a plan too) and the job time."""

    def __call__(self, specs: list[SubtaskSpec], at: float) -> None: ...


def catalogue(source: ToolSource) -> list[ToolSpec]:
    """Every tool the job may give a subtask (simulated and MCP), with its schema."""
    tools = source.for_subtask(LEAD)
    every = SubtaskSpec(id=LEAD, query="", tools=list(tools))
    return [s for s in tool_specs(every, tools) if s.name != "escalate"]


def planned_job(job: JobSpec, subtasks: Sequence[SubtaskSpec]) -> JobSpec:
    """The job with the lead's plan as its subtasks; a job the lead decomposed follows
    up once unless its file says otherwise (docs/design.md §11)."""
    update: dict[str, Any] = {"subtasks": list(subtasks)}
    if job.followups is None:
        update["followups"] = 1
    return job.model_copy(update=update)


def with_subtasks(scenario: Scenario, subtasks: Sequence[SubtaskSpec]) -> Scenario:
    """The scenario with the lead's plan as its subtasks (how it then runs and records)."""
    job = planned_job(scenario.job, subtasks)
    return scenario.model_copy(update={"job": job})


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


@dataclass(frozen=True)
class Resumed:
    """Where a resumed run continues: its subagents' runs, the job time it had reached,
    the gap of a lead that could not plan (its degraded plan runs again), and the
    follow-ups its lead had planned (None: not planned yet). The default: a fresh run."""

    runs: Mapping[str, SubagentRun] | None = None
    elapsed_offset: float = 0.0
    lead_gap: SubagentResult | None = None
    followups: Sequence[SubtaskSpec] | None = None


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
    **run_job_options: Any,
) -> CoverageReport:
    """Run ``scenario``'s job with its lead agent; never raises for a failure inside it.

    ``hooks`` hear it as it goes (:class:`ResearchHooks`); ``resumed`` continues a run
    that stopped (:class:`Resumed`); ``run_id`` names the recorded run in its spans.
    ``run_job_options`` go to :func:`coordinator.fanout.run_job` (``cancel``, ...).
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
        traced = replace(hooks, observer=instrumented.observer, on_result=instrumented.on_result)
        report = await _research(scenario, source, planning, clock, trace_ids, traced, resumed,
                                 **run_job_options)
        instrumented.outcome(
            report.outcome, report.coverage, len(report.subtasks), len(report.gaps)
        )
    return report


async def _research(
    scenario: Scenario,
    source: ToolSource,
    planning: JobPlanning,
    clock: Clock,
    trace_ids: TraceIds,
    hooks: ResearchHooks,
    resumed: Resumed,
    **run_job_options: Any,
) -> CoverageReport:
    job = scenario.job
    model = scenario.model
    observer = hooks.observer
    lead_gap = resumed.lead_gap
    job_clock = JobClock(clock, offset=resumed.elapsed_offset)
    lead: LeadContext | None = None
    if model is not None:

        def lead_events(event: ExecEvent) -> None:
            if observer is not None:
                observer(
                    ProgressEvent(
                        LEAD,
                        event.kind,
                        job_clock.now(),
                        tool=event.tool,
                        attempt=event.attempt,
                        wait_s=event.wait_s,
                        result=event.result,
                    )
                )

        def lead_throttled(waiting: bool) -> None:
            if observer is not None:
                state: SubagentState = "throttled" if waiting else "thinking"
                observer(ProgressEvent(LEAD, "state", job_clock.now(), state=state))

        lead = LeadContext(
            planning.client,
            model,
            job_clock,
            trace_ids,
            observer=lead_events,
            seed=scenario.seed,
            on_limit_wait=lead_throttled,
            meter=planning.meter,
            progress=observer,
        )
    cut_while_planning = False
    if not job.subtasks:
        assert lead is not None  # the loader refuses a job with neither
        subtasks, lead_gap, cut_while_planning = await _plan(
            job, source, lead, run_job_options.get("cancel"))
        if hooks.on_plan is not None:
            hooks.on_plan(subtasks, job_clock.now(), lead_gap)
        scenario = with_subtasks(scenario, subtasks)
        job = scenario.job
        planning.scenario = scenario
    # What every run_job of this job (its round and its follow-ups) runs with.
    options = {
        "clock": clock, "seed": scenario.seed, "trace_ids": trace_ids, "observer": observer,
        "handler": hooks.handler, "on_result": hooks.on_result, "runs": resumed.runs,
        "checkpoint": hooks.checkpoint, **run_job_options,
    }
    report = await run_job(
        job,
        source,
        planner_factory=planning.planner if planning.model_planned else None,
        elapsed_offset=job_clock.now(),
        **options,
    )
    if lead is not None and follows_up(
        job, lead=True, lead_failed=lead_gap is not None, lead_plans=planning.plans_followups
    ):
        report = await _follow_up(report, job, source, lead, planning, job_clock,
                                  resumed.followups, hooks.on_followups, **options)
    if lead_gap is not None:
        # The plan failed, the job went on (docs/design.md §7): the lead's gap stays visible.
        report = with_lead_gap(report, job, lead_gap)
    if lead is not None and planning.synthesizes and not cut_while_planning:
        # (A run cancelled before its lead had planned found nothing to write up.)
        report = await synthesize(report, lead)
        report = report.model_copy(update={"elapsed_s": job_clock.now()})
    elif job.answer == "extractive":
        # Retrieval only (no model, docs/design.md §7): the best passages of the findings, cited.
        report = with_extractive_answer(report, None)
    return with_tokens(report, planning.meter)


async def _plan(
    job: JobSpec, source: ToolSource, lead: LeadContext, cancel: anyio.Event | None
) -> tuple[list[SubtaskSpec], SubagentResult | None, bool]:
    """The lead's subtasks and its gap (:func:`decompose`), and whether a cancel cut the
    planning: the cancel reaches the lead's model call as it reaches a subagent's, and
    the job then has the degraded plan (cut at once, a cancelled gap) beside the lead's
    gap, trigger ``cancelled``."""
    tools = catalogue(source)
    planned = None
    async with cancelled_by(cancel):
        planned = await decompose(job, tools, lead)
    if planned is not None:
        return planned[0], planned[1], False
    return degraded_plan(job, [t.name for t in tools]), cancelled_planning(job, lead), True


async def _follow_up(
    report: CoverageReport,
    job: JobSpec,
    source: ToolSource,
    lead: LeadContext,
    planning: JobPlanning,
    job_clock: JobClock,
    followups: Sequence[SubtaskSpec] | None,
    on_followups: FollowupHook | None,
    **run_job_options: Any,
) -> CoverageReport:
    """``report`` after one round of follow-ups planned from its gaps (docs/design.md §11)."""
    cancel = run_job_options.get("cancel")
    cancelled = cancel is not None and cancel.is_set()
    if cancelled:
        return report  # a cancelled run starts nothing more, follow-ups included
    if followups is None:
        if not asks_for_followups(report, job.deadline_s, job_clock.now(), cancelled=cancelled):
            return report
        planned = None
        async with cancelled_by(cancel):  # as its first plan, this one hears a cancel
            planned = await plan_followups(report, job, catalogue(source), lead)
        if planned is None:
            return report  # cancelled while it planned them: nothing more starts
        followups = planned
        if on_followups is not None:
            on_followups(list(followups), job_clock.now())
    if not followups:
        return report
    # Their own run_job: the same deadline, concurrency and routing as the job's.
    extra = await run_job(
        followup_job(job, followups),
        source,
        planner_factory=planning.planner,
        elapsed_offset=job_clock.now(),
        **run_job_options,
    )
    return with_followups(report, extra, followups)
