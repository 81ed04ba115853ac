"""The lead agent on a worker: its model context, and the decomposition of a job
(docs/design.md §7).

A local run keeps one :class:`~coordinator.lead.LeadContext` from the decomposition to
the synthesis. On Temporal each is an activity of its own, maybe on another worker, so
what the lead has consumed travels between them as a
:class:`~coordinator.temporal.payloads.LeadPosition`: its model calls (a scripted
model's next ``lead`` turn), its trace-id position and its jitter stream. The
synthesis then asks the model exactly what a local run's would.

:func:`decompose_job` is the body of the ``decompose`` activity without Temporal in it
(as :mod:`coordinator.temporal.rounds` is for rounds). It records the plan as the
engine's ``drive`` does — a ``lead`` checkpoint with where the lead stands, then a
``plan`` event of subtask ``lead`` with the subtasks — so ``fanout report`` and
``planned_scenario`` read the subtasks the run ran. The plan is heartbeaten before it
is recorded: a retried decomposition (a lost worker) returns that plan instead of
asking the model again, which, live, could plan differently from the plan on record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coordinator.job import JobSpec
from coordinator.lead import LeadContext, catalogue, decompose, lead_subtask, plan_followups
from coordinator.lead.decompose import rejected_gap
from coordinator.rules import lead_position, split_followups
from coordinator.store.events import event_data, followups_data, plan_data
from coordinator.store.writer import StoreWriter
from coordinator.temporal.payloads import (
    Decomposition,
    DecompositionInput,
    FollowupInput,
    FollowupPlan,
    LeadPosition,
)
from coordinator.temporal.resources import WorkerResources
from coordinator.temporal.rounds import job_clock, job_tools, simulated_tools
from shared.clock import JobClock
from shared.ids import SeededTraceIds
from subagents import ProgressEvent, SubagentResult, SubagentRun
from subagents.executor import ExecEvent
from subagents.models.spec import ModelSpec
from subagents.models.spend import TokenMeter
from subagents.planners.model import Seekable
from subagents.result import LEAD
from subagents.spec import SubtaskSpec
from subagents.telemetry.run import activity_tracer
from subagents.toolsource import StaticTools

Beat = dict[str, Any]
"""The decomposition's heartbeat: ``{}``, or ``{"decided": Decomposition as JSON}``."""


class Lead:
    """A lead agent on this worker: its context, and its trace ids (to say where it stands)."""

    def __init__(
        self,
        resources: WorkerResources,
        model: Mapping[str, Any],
        *,
        run_id: str,
        seed: int | str,
        store: str | None,
        clock: JobClock,
        session: int,
        position: LeadPosition | None = None,
        meter: TokenMeter | None = None,
    ) -> None:
        writer = resources.writer(store) if store else None
        spec = ModelSpec.model_validate(dict(model))
        # The lead's model attempts hang under this activity's span (the run's trace).
        tracer = activity_tracer(run_id=run_id, model=spec)

        def observe(event: ExecEvent) -> None:
            if writer is None and tracer is None:
                return
            progress = ProgressEvent(LEAD, event.kind, clock.now(), tool=event.tool,
                                     attempt=event.attempt, wait_s=event.wait_s,
                                     result=event.result)
            if tracer is not None:
                tracer.observe(progress)
            if writer is not None:
                writer.event(run_id, session, LEAD, event.kind, progress.at,
                             event_data(progress))

        def progressed(event: ProgressEvent) -> None:
            # What the lead's synthesis streams (``answer.delta``, ``answer``): into the
            # store, where the door's tail hears it as a local run's observer does.
            if writer is not None:
                writer.event(run_id, session, event.subtask_id, event.kind, event.at,
                             event_data(event))

        client = resources.models.client(model, clock)
        self.trace_ids = SeededTraceIds(f"{seed}/{run_id}")
        # What the lead spends (and, for the synthesis, the job's meter as the workflow
        # knows it): its position carries the lead's spend to its next activity.
        self.meter = meter if meter is not None else TokenMeter()
        self.context = LeadContext(client, spec, clock, self.trace_ids, observer=observe,
                                   seed=seed, meter=self.meter, progress=progressed)
        if position is not None:
            # The lead continues where its last activity left it, as a local run's one
            # LeadContext would: the next scripted turn, trace id and jitter draw.
            if isinstance(client, Seekable):
                client.seek(LEAD, position.model_attempts)
            self.context.attempts = position.model_attempts
            self.trace_ids.set_position(LEAD, position.trace)
            self.context.rng.setstate(_rng_state(position.rng))
            self.meter.record(LEAD, position.spent)

    def position(self) -> LeadPosition:
        """Where the lead stands now."""
        version, internal, gauss = self.context.rng.getstate()
        return LeadPosition(
            model_attempts=self.context.attempts,
            trace=self.trace_ids.position(LEAD),
            rng=[version, list(internal), gauss],
            spent=list(self.meter.by_subtask.get(LEAD, [0, 0, 0])),
        )


def _rng_state(saved: list[Any]) -> tuple[Any, ...]:
    version, internal, gauss = saved
    return (version, tuple(internal), gauss)


async def decompose_job(
    inp: DecompositionInput,
    resources: WorkerResources,
    *,
    session: int,
    resumed: Beat | None,
    beat: Callable[[Beat], None],
) -> Decomposition:
    """The job's subtasks from its lead agent (recorded in the store), or the lead's gap.

    Args:
        inp: the job to plan.
        resources: the worker's model clients, MCP servers and store writers.
        session: which attempt at the decomposition this is (the trace's ``session``).
        resumed: the last heartbeat of an earlier attempt, if any.
        beat: records (heartbeats) the plan once decided.

    Raises:
        McpServerStartError: the job's MCP servers cannot start on this worker.
        MissingModelKey: the model's key is not in this worker's environment.
        StoreError: the run store cannot be written.
    """
    writer = resources.writer(inp.store) if inp.store else None
    if writer is not None:
        writer.claim(inp.run_id)
    decided = (resumed or {}).get("decided")
    if decided is not None:
        out = Decomposition.model_validate(decided)
    else:
        clock = job_clock(inp.speed, inp.started_at)
        lead = Lead(resources, inp.model, run_id=inp.run_id, seed=inp.seed, store=inp.store,
                    clock=clock, session=session)
        sim = simulated_tools(inp.tools, clock)
        tools = await job_tools(LEAD, sim, inp, resources)
        listed = catalogue(StaticTools(tools))
        subtasks, gap = await decompose(inp.job, listed, lead.context)
        out = Decomposition(subtasks=subtasks, gap=gap, lead=lead.position(),
                            tools=[t.name for t in listed])
        beat({"decided": out.model_dump(mode="json")})
    if writer is not None and out.subtasks is not None and not inp.review:
        # (A plan a person reviews is recorded once reviewed: record_plan.)
        assert out.lead is not None
        await record_plan(writer, inp.run_id, session, out.subtasks, out.gap, out.lead,
                          job_clock(inp.speed, inp.started_at).now())
    return out


async def record_plan(
    writer: StoreWriter, run_id: str, session: int, subtasks: Sequence[SubtaskSpec],
    gap: SubagentResult | None, lead: LeadPosition, at_s: float,
) -> None:
    """Record the plan the run goes on with as drive's planned() does: where the lead
    stands, then the ``plan`` event (``fanout report`` and a recording read it)."""
    writer.checkpoint(run_id, LEAD, {"lead": _stored(lead)})
    writer.event(run_id, session, LEAD, "plan", at_s, plan_data(list(subtasks), gap))
    await writer.flush()


async def plan_job_followups(
    inp: FollowupInput,
    resources: WorkerResources,
    *,
    session: int,
    resumed: Beat | None,
    beat: Callable[[Beat], None],
) -> FollowupPlan:
    """The follow-ups the lead plans from the report's gaps (docs/design.md §11), recorded as
    ``drive`` records them: where the lead stands, then a ``followups`` event.

    Like :func:`decompose_job`, the plan is heartbeaten before it is recorded, so a
    retried activity returns it instead of asking the model again.
    """
    writer = resources.writer(inp.store) if inp.store else None
    if writer is not None:
        writer.claim(inp.run_id)
    decided = (resumed or {}).get("decided")
    if decided is not None:
        out = FollowupPlan.model_validate(decided)
    else:
        clock = job_clock(inp.speed, inp.started_at)
        lead = Lead(resources, inp.model, run_id=inp.run_id, seed=inp.seed, store=inp.store,
                    clock=clock, session=session, position=inp.lead)
        sim = simulated_tools(inp.tools, clock)
        tools = await job_tools(LEAD, sim, inp, resources)
        specs = await plan_followups(
            inp.report, inp.job, catalogue(StaticTools(tools)), lead.context
        )
        out = FollowupPlan(followups=specs, lead=lead.position())
        beat({"decided": out.model_dump(mode="json")})
    if writer is not None:
        at = job_clock(inp.speed, inp.started_at).now()
        assert out.lead is not None
        state: dict[str, Any] = {"followups": _stored(out.lead)}
        if inp.lead is not None:
            state["lead"] = _stored(inp.lead)
        writer.checkpoint(inp.run_id, LEAD, state)
        # Recorded as locally: those that run (one for a gap a person decided does not).
        kept = split_followups(out.followups, inp.report)[0]
        writer.event(inp.run_id, session, LEAD, "followups", at, followups_data(kept))
        await writer.flush()
    return out


def _stored(position: LeadPosition) -> dict[str, Any]:
    """``position`` as the lead's checkpoint keeps it, locally and here alike."""
    return lead_position(position.model_attempts, position.trace, position.spent)


def rejected_on_temporal(
    job: JobSpec, lead: LeadPosition | None, *, seed: int | str, run_id: str, at_s: float,
    by: str,
) -> SubagentResult:
    """The lead's gap when a person rejected its plan on Temporal: what
    :func:`coordinator.lead.decompose.rejected_plan` makes locally, from where the lead
    stood after planning (its model attempts, and its trace ids: seeded, so drawn again
    here as the decomposition drew them)."""
    ids = SeededTraceIds(f"{seed}/{run_id}")
    trace = [ids.next(LEAD) for _ in range(lead.trace if lead is not None else 0)]
    return rejected_gap(job, by, attempts=lead.model_attempts if lead is not None else 0,
                        trace=trace, at_s=at_s)


def lost_decomposition(job: JobSpec, message: str, at_s: float) -> SubagentResult:
    """The lead's gap when its decomposition failed on Temporal for good (a lost worker,
    no model key on the workers): the run ends ``failed``, as for a plan never valid."""
    run = SubagentRun.for_subtask(lead_subtask(job))
    run.started_s = 0.0
    run.ended_s = at_s
    run.state = "escalated"
    run.escalate("internal_error", message, category="internal", detail={"message": message})
    return run.result()
