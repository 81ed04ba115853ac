"""Running an open run in this process, every step recorded in the run store.

``fanout run``, ``resume`` and ``ask``, the service and ``ask()``/``run_file()`` with a
store all run here (:func:`drive`): the trace (every state change, attempt and wait) and
each subagent's checkpoint stream to the store as they happen, each subagent's result
is committed before the coordinator counts it, the lead's plan and follow-ups are
recorded before they run (a resume runs the same ones), and the final report closes the
run. A run without a recorder (``ask()`` without a store) runs the same job unrecorded.
"""

from __future__ import annotations

from typing import Any

from coordinator.checkpoint import state_of
from coordinator.engine.run import Hooks, Run
from coordinator.fanout import ResearchHooks, run_research
from coordinator.job import JobSpec
from coordinator.report import CoverageReport
from coordinator.rules import lead_position
from coordinator.store.events import event_data, followups_data, plan_data
from coordinator.store.recorder import RunRecorder
from shared.ids import SeededTraceIds
from subagents.result import LEAD, ProgressEvent, ProgressObserver, SubagentResult
from subagents.run import SubagentRun
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

__all__ = ["RecordedJob", "drive"]

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
        self.recorder.checkpoint(
            run.spec.id, state_of(run, self.tools, self.trace_ids), durable=durable
        )

    async def on_result(self, result: SubagentResult) -> None:
        """Commit the result and final state before the coordinator counts it."""
        run = self.runs[result.subtask_id]
        await self.recorder.commit_result(
            result.subtask_id, result.model_dump(mode="json"),
            state_of(run, self.tools, self.trace_ids),
        )


async def drive(run: Run, hooks: Hooks | None = None) -> CoverageReport:
    """Run (or continue) ``run`` to its report; a recorded run is closed at the end.

    A job without subtasks is planned by its lead agent first: the plan is recorded (a
    ``plan`` event of subtask ``lead``) so a resume runs the same subtasks, and
    ``hooks.on_plan`` hears it too (a live display). A lead that could not plan records
    its gap with the degraded plan; a resumed run gets it back from its ``start``. The
    lead's follow-ups are recorded like its plan (a ``followups`` event of ``lead``).
    ``hooks.cancel``, once set, ends the run early with its report (docs/design.md §8).
    A person's escalations are recorded as events of their subtask (``decision.needed``,
    ``decision.made``): a resumed run waits again for one that waited (docs/design.md §17).
    """
    hooks = hooks or Hooks()
    start = run.start
    if run.recorder is None:
        return await run_research(
            run.scenario, run.source, planning=start.planning, clock=run.clock,
            trace_ids=run.trace_ids, cancel=hooks.cancel, resumed=start.resumed(),
            hooks=ResearchHooks(observer=hooks.observer, handler=hooks.handler,
                                on_plan=hooks.on_plan, on_followups=hooks.on_followups,
                                tracer_provider=hooks.tracer_provider, desk=hooks.desk),
        )
    recorder, runs, planning = run.recorder, start.runs, start.planning
    wiring = RecordedJob(
        recorder, run.scenario.job, start.simulated, run.trace_ids, runs, also=hooks.observer
    )
    lead_state: dict[str, Any] = {}

    def lead_reached(key: str) -> None:
        # Where the lead stands once it has planned (or followed up): a resume that runs
        # this plan gives the synthesis the lead's next model turn and trace id, not its
        # first ones again. Durable before the event: without it a resume plans again.
        lead_state[key] = lead_position(wiring.lead_attempts, run.trace_ids.position(LEAD),
                                        planning.meter.by_subtask.get(LEAD))
        recorder.checkpoint(LEAD, dict(lead_state), durable=True)

    def planned(
        subtasks: list[SubtaskSpec], at: float, lead_gap: SubagentResult | None = None
    ) -> None:
        lead_reached("lead")
        recorder.event(LEAD, "plan", at, plan_data(subtasks, lead_gap))
        for spec in subtasks:
            runs[spec.id] = planning.fresh_run(spec)
        if hooks.on_plan is not None:
            hooks.on_plan(subtasks, at, lead_gap)

    def followed(specs: list[SubtaskSpec], at: float) -> None:
        lead_reached("followups")
        recorder.event(LEAD, "followups", at, followups_data(specs))
        for spec in specs:
            runs[spec.id] = planning.fresh_run(spec)
        if hooks.on_followups is not None:
            hooks.on_followups(specs, at)

    def continued(specs: list[SubtaskSpec], at: float) -> None:
        # A person's use_tool/requery: their subagents are recorded like the job's own
        # (a resumed run's continuation that had started goes on from its checkpoint).
        for spec in specs:
            if spec.id not in runs:
                runs[spec.id] = planning.fresh_run(spec)

    if run.catalogue:
        recorder.event(LEAD, "catalogue", start.elapsed_offset, {"tools": dict(run.catalogue)})
    report = await run_research(
        run.scenario, run.source, planning=planning, clock=run.clock, trace_ids=run.trace_ids,
        run_id=recorder.run_id, cancel=hooks.cancel, resumed=start.resumed(),
        hooks=ResearchHooks(observer=wiring.observer, handler=hooks.handler,
                            on_result=wiring.on_result, on_plan=planned, on_followups=followed,
                            on_continued=continued,
                            checkpoint=wiring.checkpoint, tracer_provider=hooks.tracer_provider,
                            desk=hooks.desk, on_decision=recorder.event),
    )
    table = run.scenario.job.routes
    escalations = [
        (e.subtask_id, table.route(e).route, e.model_dump_json(by_alias=True))
        for e in report.escalations
    ]
    await recorder.finish(report.to_wire(), escalations)
    return report
