"""A job with its lead agent: decompose when there are no subtasks, fan out, synthesize.

:func:`run_research` is what replay, ``fanout run``/``resume``, ``fanout ask`` and the
service call: ``run_job`` for the fan-out, with the lead's decomposition before it and
its synthesis after it when the job has a model. The lead's time counts in the job's
time (and against its deadline); its model calls are traced as subtask ``lead``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from coordinator.fanout import EscalationHandler, ResultHook, ToolSource, run_job
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import LEAD, LeadContext, decompose, with_lead_gap
from coordinator.planning import JobPlanning
from coordinator.report import CoverageReport
from coordinator.synthesis import synthesize
from shared.clock import Clock, JobClock
from shared.ids import TraceIds
from subagents.executor import ExecEvent
from subagents.loop import ProgressEvent, ProgressObserver, SubagentResult, SubagentRun
from subagents.models.base import ToolSpec
from subagents.planners.prompt import tool_specs
from subagents.spec import SubtaskSpec


class PlanHook(Protocol):
    """Hears the lead's subtasks, the job time they were decided at, and the lead's gap
    when it could not plan (the subtasks are then the degraded plan, DESIGN §7)."""

    def __call__(
        self, subtasks: list[SubtaskSpec], at: float, lead_gap: SubagentResult | None = None
    ) -> None: ...


def catalogue(source: ToolSource) -> list[ToolSpec]:
    """Every tool the job may give a subtask (simulated and MCP), with its schema."""
    tools = source.for_subtask(LEAD)
    every = SubtaskSpec(id=LEAD, query="", tools=list(tools))
    return [s for s in tool_specs(every, tools) if s.name != "escalate"]


def with_subtasks(scenario: Scenario, subtasks: Sequence[SubtaskSpec]) -> Scenario:
    """The scenario with the lead's plan as its subtasks (how it then runs and records)."""
    job = scenario.job.model_copy(update={"subtasks": list(subtasks)})
    return scenario.model_copy(update={"job": job})


async def run_research(
    scenario: Scenario,
    source: ToolSource,
    *,
    planning: JobPlanning,
    clock: Clock,
    trace_ids: TraceIds,
    observer: ProgressObserver | None = None,
    handler: EscalationHandler | None = None,
    on_result: ResultHook | None = None,
    on_plan: PlanHook | None = None,
    runs: Mapping[str, SubagentRun] | None = None,
    checkpoint: Callable[[SubagentRun], None] | None = None,
    elapsed_offset: float = 0.0,
    lead_gap: SubagentResult | None = None,
    **run_job_options: Any,
) -> CoverageReport:
    """Run ``scenario``'s job with its lead agent; never raises for a failure inside it.

    ``on_plan`` hears the lead's subtasks once they are decided (the run store keeps
    them, so a resumed run does not plan again). ``lead_gap`` is the gap of a lead that
    could not plan, for a resumed run of its degraded plan.
    """
    job = scenario.job
    model = scenario.model
    job_clock = JobClock(clock, offset=elapsed_offset)
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

        lead = LeadContext(
            planning.client,
            model,
            job_clock,
            trace_ids,
            observer=lead_events,
            seed=scenario.seed,
        )
    if not job.subtasks:
        assert lead is not None  # the loader refuses a job with neither
        subtasks, lead_gap = await decompose(job, catalogue(source), lead)
        if on_plan is not None:
            on_plan(subtasks, job_clock.now(), lead_gap)
        scenario = with_subtasks(scenario, subtasks)
        job = scenario.job
        planning.scenario = scenario
    report = await run_job(
        job,
        source,
        clock=clock,
        seed=scenario.seed,
        trace_ids=trace_ids,
        observer=observer,
        handler=handler,
        on_result=on_result,
        planner_factory=planning.planner if planning.model_planned else None,
        runs=runs,
        checkpoint=checkpoint,
        elapsed_offset=job_clock.now(),
        **run_job_options,
    )
    if lead_gap is not None:
        # The plan failed, the job went on (DESIGN §7): the lead's gap stays visible.
        report = with_lead_gap(report, job, lead_gap)
    if lead is not None and planning.synthesizes:
        report = await synthesize(report, lead)
        report = report.model_copy(update={"elapsed_s": job_clock.now()})
    return report
