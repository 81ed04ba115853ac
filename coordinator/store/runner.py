"""Running a scenario for real with every step recorded in the run store, and resuming it.

``fanout run`` and ``fanout resume`` both go through :func:`run_recorded`: the trace
(every state change, attempt and wait) and each subagent's checkpoint stream to the
store as they happen, each subagent's result is committed before the coordinator counts
it, and the final report closes the run.

A job that declares ``mcp_servers`` gets its servers' tools next to its simulated ones.
``fanout run`` starts the servers before it records the run and passes them in; a
resume starts them here (MCP tools keep no counters: resuming just reconnects).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from coordinator.fanout import EscalationHandler, ToolSource
from coordinator.job import JobSpec
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import (
    LEAD,
    FollowupHook,
    JobPlanning,
    PlanHook,
    run_research,
    with_followups,
    with_lead_gap,
    with_subtasks,
)
from coordinator.report import CoverageReport, assemble_report
from coordinator.routing import RoutingTable
from coordinator.rules import lead_position
from coordinator.store.runs import RunRecorder, RunStore
from shared.clock import Clock
from shared.ids import SeededTraceIds
from subagents.checkpoint import restore_run, snapshot_run
from subagents.loop import ProgressEvent, ProgressObserver, SubagentResult, SubagentRun
from subagents.planners.model import Seekable
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec
from subagents.tool import Tool

if TYPE_CHECKING:
    import anyio
    from opentelemetry.trace import TracerProvider

    from coordinator.jobfile.research import ResearchPolicy
    from subagents.mcp.tools import McpToolSource
    from subagents.research.tools import ResearchTools


_EVENT_FIELDS = (
    "state", "tool", "attempt", "wait_s", "step", "trigger",
    "text", "restart", "answer_kind", "reason",
)


def event_data(event: ProgressEvent) -> dict[str, Any]:
    """The JSON the trace stores for one progress event (besides subtask, kind, time)."""
    data: dict[str, Any] = {
        name: value for name in _EVENT_FIELDS if (value := getattr(event, name)) is not None
    }
    if event.result is not None:
        data["result"] = event.result.to_wire()
    return data


class RecordedJob:
    """Connects one run_job call to a RunRecorder."""

    def __init__(
        self,
        recorder: RunRecorder,
        job: JobSpec,
        tools: SimulatedTools,
        trace_ids: SeededTraceIds,
        runs: dict[str, SubagentRun],
        also: ProgressObserver | None = None,
    ) -> None:
        self.recorder = recorder
        self.job = job
        self.tools = tools
        self.trace_ids = trace_ids
        self.runs = runs
        self.also = also
        # The lead's model attempts so far: a decomposed run's resume continues after them.
        self.lead_attempts = 0

    def state_of(self, run: SubagentRun) -> dict[str, Any]:
        """Everything needed to continue ``run``: its state, tool counters, trace ids."""
        sid = run.spec.id
        return {
            "run": snapshot_run(run),
            "sim": self.tools.snapshot(sid),
            "trace": self.trace_ids.position(sid),
        }

    def observer(self, event: ProgressEvent) -> None:
        """Stream the event to the trace, then to the live display."""
        if event.subtask_id == LEAD and event.kind == "start":
            self.lead_attempts += 1
        self.recorder.event(event.subtask_id, event.kind, event.at, event_data(event))
        if self.also is not None:
            self.also(event)

    def checkpoint(self, run: SubagentRun) -> None:
        """Record a subagent's resumable state after a logical call, or before a call
        whose effect must not happen twice (``in_flight``): that one is durable first."""
        durable = run.in_flight is not None
        self.recorder.checkpoint(run.spec.id, self.state_of(run), durable=durable)

    async def on_result(self, result: SubagentResult) -> None:
        """Commit the result and final state before the coordinator counts it."""
        run = self.runs[result.subtask_id]
        await self.recorder.commit_result(
            result.subtask_id, result.model_dump(mode="json"), self.state_of(run)
        )


def fresh_runs(scenario: Scenario, planning: JobPlanning | None = None) -> dict[str, SubagentRun]:
    """A new SubagentRun per subtask, seeded like a replay, each with its planner."""
    return (planning or JobPlanning(scenario)).fresh_runs()


def restored_runs(
    scenario: Scenario,
    checkpoints: dict[str, dict[str, Any]],
    tools: SimulatedTools,
    trace_ids: SeededTraceIds,
    planning: JobPlanning | None = None,
    followups: list[SubtaskSpec] | None = None,
) -> dict[str, SubagentRun]:
    """SubagentRuns continued from the store's checkpoints (fresh where there is none).

    ``followups`` are the follow-ups the lead planned before the run stopped (None: it
    had not planned them yet); their runs continue too.
    """
    planning = planning or JobPlanning(scenario)
    runs = planning.fresh_runs()
    saved_lead = checkpoints.get(LEAD, {})
    # After its follow-up plan the lead continues from there; else after its first plan.
    lead = saved_lead.get("followups") if followups is not None else None
    lead = lead or saved_lead.get("lead")
    if lead is not None and scenario.job.subtasks and scenario.model is not None:
        # A decomposed run resumed with its recorded plan: the lead continues after it.
        trace_ids.set_position(LEAD, int(lead["trace"]))
        client = planning.client
        if isinstance(client, Seekable):
            client.seek(LEAD, int(lead["model_attempts"]))
        # What the lead's calls spent before the run stopped counts against job.budget.
        planning.meter.record(LEAD, lead.get("spent", [0, 0, 0]))
    for spec in followups or ():
        runs[spec.id] = planning.fresh_run(spec)
    for spec in [*scenario.job.subtasks, *(followups or ())]:
        saved = checkpoints.get(spec.id)
        if saved is None:
            continue
        runs[spec.id] = planning.restored_run(spec, saved["run"])
        tools.restore(spec.id, saved["sim"])
        trace_ids.set_position(spec.id, int(saved["trace"]))
    return runs


async def run_recorded(
    scenario: Scenario,
    recorder: RunRecorder,
    *,
    clock: Clock,
    runs: dict[str, SubagentRun] | None = None,
    tools: SimulatedTools | None = None,
    mcp: McpToolSource | None = None,
    trace_ids: SeededTraceIds | None = None,
    elapsed_offset: float = 0.0,
    observer: ProgressObserver | None = None,
    handler: EscalationHandler | None = None,
    cancel: anyio.Event | None = None,
    planning: JobPlanning | None = None,
    on_plan: PlanHook | None = None,
    lead_gap: SubagentResult | None = None,
    tracer_provider: TracerProvider | None = None,
    research: ResearchTools | None = None,
    research_policy: ResearchPolicy | None = None,
    extra_tools: Mapping[str, Tool] | None = None,
    on_followups: FollowupHook | None = None,
    followups: list[SubtaskSpec] | None = None,
) -> CoverageReport:
    """Run (or continue) ``scenario`` with everything recorded; close the run at the end.

    ``research`` is the job's built-in research tools, open (DESIGN §10); when the
    scenario declares ``research_tools`` and none are given, they are opened for this
    run under ``research_policy`` (the store's folder holds the document index).

    ``mcp`` is the job's running MCP servers; when the scenario declares servers and
    none are given, they are started for this run and stopped after it. ``cancel``, once
    set, ends the run early with its report (``run_job``'s cancel, DESIGN §8).

    ``planning`` makes each subtask's planner (the job's model client for subtasks without
    a plan); one is made on ``clock`` when none is given. Its client is closed at the end.
    A job without subtasks is planned by its lead agent first: the plan is recorded (a
    ``plan`` event of subtask ``lead``) so a resume runs the same subtasks, and
    ``on_plan`` hears it too (a live display). A lead that could not plan records its
    gap with the degraded plan; ``lead_gap`` gives it back to a resumed run.
    ``extra_tools`` are served to every subtask beside the job's own (the Python API's
    functions); they win a name clash. The lead's follow-ups are recorded like its plan
    (a ``followups`` event of ``lead``); ``followups`` gives them back to a resumed run.

    Raises:
        McpServerStartError: a declared server cannot start (nothing ran).
    """
    tools = tools or SimulatedTools(scenario.tools, clock)
    trace_ids = trace_ids or SeededTraceIds(f"{scenario.seed}/{recorder.run_id}")
    if planning is None:
        planning = JobPlanning(scenario, clock=clock)
    runs = runs if runs is not None else planning.fresh_runs()
    wiring = RecordedJob(recorder, scenario.job, tools, trace_ids, runs, also=observer)
    lead_state: dict[str, Any] = {}

    def planned(
        subtasks: list[SubtaskSpec], at: float, lead_gap: SubagentResult | None = None
    ) -> None:
        # Where the lead stands once it has planned: a resume that runs this plan gives
        # the synthesis the lead's next model turn and trace id, not its first ones
        # again. Durable before the plan: without the plan a resume plans again anyway.
        lead = lead_position(wiring.lead_attempts, trace_ids.position(LEAD),
                             planning.meter.by_subtask.get(LEAD))
        lead_state["lead"] = lead
        recorder.checkpoint(LEAD, dict(lead_state), durable=True)
        recorder.event(LEAD, "plan", at, plan_data(subtasks, lead_gap))
        for spec in subtasks:
            runs[spec.id] = planning.fresh_run(spec)
        if on_plan is not None:
            on_plan(subtasks, at, lead_gap)

    def followed(specs: list[SubtaskSpec], at: float) -> None:
        # Like the plan: where the lead stands after it (durable first), then the event;
        # a resume then runs these follow-ups and the synthesis takes the lead's next turn.
        lead = lead_position(wiring.lead_attempts, trace_ids.position(LEAD),
                             planning.meter.by_subtask.get(LEAD))
        lead_state["followups"] = lead
        recorder.checkpoint(LEAD, dict(lead_state), durable=True)
        recorder.event(LEAD, "followups", at, followups_data(specs))
        for spec in specs:
            runs[spec.id] = planning.fresh_run(spec)
        if on_followups is not None:
            on_followups(specs, at)

    async with AsyncExitStack() as stack:
        stack.push_async_callback(planning.aclose)
        source: ToolSource = tools
        listed: dict[str, Any] = {}
        if scenario.mcp_servers:
            # Imported here: the MCP SDK is loaded only by jobs that use it.
            from coordinator.jobfile.mcp import JobTools, job_servers

            if mcp is None:
                mcp = await stack.enter_async_context(job_servers(scenario))
            if mcp is not None:
                source = JobTools(tools, mcp)
                # The MCP tools' schemas, so a recording can stand simulated tools in.
                listed = {
                    name: {"description": tool.description, "schema": dict(tool.schema)}
                    for name, tool in mcp.tools.items()
                }
        if scenario.research_tools is not None:
            from coordinator.jobfile.research import (
                CombinedTools,
                job_research_tools,
                research_catalogue,
            )

            if research is None:
                research = await stack.enter_async_context(
                    job_research_tools(scenario, recorder.backend.home(), research_policy)
                )
            if research is not None:
                source = CombinedTools(source, research)
                # Recorded like MCP tools: a recording replays them as simulated tools.
                listed.update(research_catalogue(research.tools))
        if listed:
            recorder.event(LEAD, "catalogue", elapsed_offset, {"tools": listed})
        if extra_tools:
            from coordinator.api.tools import WithTools

            source = WithTools(source, extra_tools)
        report = await run_research(
            scenario,
            source,
            planning=planning,
            clock=clock,
            trace_ids=trace_ids,
            observer=wiring.observer,
            handler=handler,
            on_result=wiring.on_result,
            on_plan=planned,
            runs=runs,
            checkpoint=wiring.checkpoint,
            elapsed_offset=elapsed_offset,
            cancel=cancel,
            lead_gap=lead_gap,
            run_id=recorder.run_id,
            tracer_provider=tracer_provider,
            on_followups=followed,
            followups=followups,
        )
    table = RoutingTable(scenario.job.routing)
    escalations = [
        (e.subtask_id, table.route(e).route, e.model_dump_json(by_alias=True))
        for e in report.escalations
    ]
    await recorder.finish(report.to_wire(), escalations)
    return report


def planned_scenario(scenario: Scenario, store: RunStore, run_id: str) -> Scenario:
    """The scenario as it ran: a decomposed job gets the subtasks its lead recorded."""
    if scenario.job.subtasks:
        return scenario
    for event in store.events(run_id):
        if event["subtask_id"] == LEAD and event["kind"] == "plan":
            subtasks = [SubtaskSpec.model_validate(s) for s in event["subtasks"]]
            return with_subtasks(scenario, subtasks)
    return scenario


def plan_data(subtasks: list[SubtaskSpec], gap: SubagentResult | None) -> dict[str, Any]:
    """The ``plan`` event's data: the subtasks, and the lead's gap of a degraded plan."""
    data: dict[str, Any] = {"subtasks": [s.model_dump(mode="json") for s in subtasks]}
    if gap is not None:
        data["lead_gap"] = gap.model_dump(mode="json")
    return data


def followups_data(specs: list[SubtaskSpec]) -> dict[str, Any]:
    """The ``followups`` event's data: the follow-ups the lead planned (maybe none)."""
    return {"followups": [s.model_dump(mode="json") for s in specs]}


def recorded_followups(store: RunStore, run_id: str) -> list[SubtaskSpec] | None:
    """The follow-ups the lead of run ``run_id`` planned; None when it had not yet."""
    for event in store.events(run_id):
        if event["subtask_id"] == LEAD and event["kind"] == "followups":
            return [SubtaskSpec.model_validate(s) for s in event["followups"]]
    return None


def recorded_lead_gap(store: RunStore, run_id: str) -> SubagentResult | None:
    """The gap of a lead that could not plan run ``run_id`` (its plan was degraded)."""
    for event in store.events(run_id):
        if event["subtask_id"] == LEAD and event["kind"] == "plan":
            gap = event.get("lead_gap")
            return None if gap is None else SubagentResult.model_validate(gap)
    return None


def elapsed_so_far(store: RunStore, run_id: str) -> float:
    """The job time a run had reached when it stopped: its last recorded event."""
    return store.last_event_at(run_id)


def interrupted_report(
    scenario: Scenario, store: RunStore, run_id: str, *, resume_hint: str
) -> CoverageReport:
    """The report of a run that did not finish: committed results, and gaps for the rest."""
    scenario = planned_scenario(scenario, store, run_id)
    out = _results_of(scenario.job, store, run_id, resume_hint, seed=scenario.seed)
    elapsed = elapsed_so_far(store, run_id)
    report = assemble_report(scenario.job, out, elapsed_s=elapsed)
    followups = recorded_followups(store, run_id)
    if followups:
        job = scenario.job.model_copy(update={"subtasks": followups})
        found = _results_of(job, store, run_id, resume_hint, seed=scenario.seed)
        extra = assemble_report(job, found, elapsed_s=elapsed)
        report = with_followups(report, extra, followups)
    lead_gap = recorded_lead_gap(store, run_id)
    return report if lead_gap is None else with_lead_gap(report, scenario.job, lead_gap)


def _results_of(
    job: JobSpec, store: RunStore, run_id: str, resume_hint: str, *, seed: object
) -> list[SubagentResult]:
    """Each subtask's committed result, or what its checkpoint held, cut as interrupted."""
    results = store.results(run_id)
    checkpoints = store.checkpoints(run_id)
    out: list[SubagentResult] = []
    for spec in job.subtasks:
        if spec.id in results:
            out.append(SubagentResult.model_validate(results[spec.id]))
            continue
        saved = checkpoints.get(spec.id)
        if saved is not None:
            # Only the result is read: the planner's own state is not needed.
            run = restore_run(spec, saved["run"], with_planner=False)
        else:
            run = SubagentRun.for_subtask(spec, seed=seed)
        run.escalate("interrupted", resume_hint)
        out.append(run.result())
    return out
