"""A fanout worker's activities: the lead's plan, subagent rounds, settling cut ones,
synthesis, the report.

Each subagent round is one activity (:meth:`FanoutActivities.subagent_round`). It
heartbeats its checkpoint after every logical call, and between calls a keep-alive
task re-sends the latest one, so a long tool call on a live worker never looks like a
lost worker. A retried round reads ``activity.info().heartbeat_details`` and continues
from there (:mod:`coordinator.temporal.rounds`).

Tool and model failures are data in the round's result. An activity raises only for
what is the worker's own trouble: the job's MCP servers cannot start here, the store
cannot be written (Temporal retries those, bounded), or a subtask this worker cannot
plan — no model block, no model key in its environment (not retried: no other attempt
would do better). A round that fails for good is settled by the workflow as an
``internal_error`` gap, so the job still ends with its report; a decomposition that
fails for good ends the job ``failed`` with an ``internal_error`` gap for ``lead``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from temporalio import activity
from temporalio.exceptions import ApplicationError

from coordinator.checkpoint import restored, state_of
from coordinator.report import CoverageReport
from coordinator.rules import cut
from coordinator.store.events import event_data
from coordinator.temporal.lead import Lead, decompose_job, plan_job_followups, record_plan
from coordinator.temporal.payloads import (
    CatalogueInput,
    DecisionEventInput,
    Decomposition,
    DecompositionInput,
    FinishInput,
    FollowupInput,
    FollowupPlan,
    PlanInput,
    QueuedInput,
    RoundInput,
    RoundOutput,
    SettleInput,
    SynthesisInput,
)
from coordinator.temporal.records import record_report
from coordinator.temporal.resources import ModelPlanningUnavailable, WorkerResources
from coordinator.temporal.rounds import (
    Beat,
    base_dir,
    job_clock,
    run_round,
    simulated_tools,
)
from shared.clock import AnyioClock, JobClock
from shared.ids import SeededTraceIds
from subagents import ProgressEvent, SubagentResult
from subagents.models.factory import MissingModelKey
from subagents.models.spend import TokenMeter
from subagents.planners.failures import budget_spent
from subagents.result import LEAD
from subagents.tool import described

DECOMPOSE = "fanout.decompose"
ROUND = "fanout.subagent_round"
SETTLE = "fanout.settle"
QUEUED = "fanout.record_queued"
DECISION = "fanout.record_decision"
SYNTHESIZE = "fanout.synthesize"
FOLLOWUPS = "fanout.plan_followups"
FINISH = "fanout.record_report"
CATALOGUE = "fanout.record_catalogue"
PLAN = "fanout.record_plan"

REQUESTS_QUERY = "requests"
"""The workflow's query of a person's requests to one subtask (its id the argument)."""

T = TypeVar("T")

# No other attempt would do better: the job or this worker's environment lacks something.
_NOT_RETRIED = (ModelPlanningUnavailable, MissingModelKey)


class FanoutActivities:
    """The worker's activities; they share its :class:`WorkerResources`."""

    def __init__(self, resources: WorkerResources) -> None:
        self.resources = resources

    @activity.defn(name=CATALOGUE)
    async def record_catalogue(self, inp: CatalogueInput) -> None:
        """Record the job's tool catalogue (its MCP and research tools' descriptions and
        schemas, opened on this worker) as the run's first event, as a local run records
        it: a recording of the run stands simulated tools in for them."""
        resources = self.resources
        catalogue: dict[str, object] = {}
        if inp.mcp_servers:
            mcp = await resources.mcp.source(inp.mcp_servers, base_dir(inp.source))
            catalogue.update(described(mcp.tools))
        if inp.research is not None:
            research = await resources.research.tools(
                inp.research, resources.index_home(inp.store))
            catalogue.update(described(research.tools))
        if catalogue:
            writer = resources.writer(inp.store)
            writer.event(inp.run_id, 1, LEAD, "catalogue", 0.0, {"tools": catalogue})
            await writer.flush()

    @activity.defn(name=DECOMPOSE)
    async def decompose(self, inp: DecompositionInput) -> Decomposition:
        """The lead agent plans a job without subtasks (docs/design.md §7); the plan is recorded.

        A failed plan is data (the lead's gap), never an exception.
        """
        info = activity.info()
        details = list(info.heartbeat_details)
        resumed: Beat | None = details[-1] if details and isinstance(details[-1], dict) else None
        latest: list[Beat] = [resumed or {}]

        def beat(details: Beat) -> None:
            latest[0] = details
            activity.heartbeat(details)

        async def body() -> Decomposition:
            return await decompose_job(
                inp, self.resources, session=info.attempt, resumed=resumed, beat=beat
            )

        return await _alive(body, latest)

    @activity.defn(name=FOLLOWUPS)
    async def plan_followups(self, inp: FollowupInput) -> FollowupPlan:
        """The lead plans follow-ups from the gaps (docs/design.md §11); the plan is recorded.

        A lead that cannot plan plans none: data, never an exception.
        """
        info = activity.info()
        details = list(info.heartbeat_details)
        resumed: Beat | None = details[-1] if details and isinstance(details[-1], dict) else None
        latest: list[Beat] = [resumed or {}]

        def beat(details: Beat) -> None:
            latest[0] = details
            activity.heartbeat(details)

        async def body() -> FollowupPlan:
            return await plan_job_followups(
                inp, self.resources, session=info.attempt, resumed=resumed, beat=beat
            )

        return await _alive(body, latest)

    @activity.defn(name=ROUND)
    async def subagent_round(self, inp: RoundInput) -> RoundOutput:
        """Run one subagent round, or resume it from its last heartbeat."""
        info = activity.info()
        details = list(info.heartbeat_details)
        resumed: Beat | None = details[-1] if details and isinstance(details[-1], dict) else None
        # Until the round's first checkpoint, keep-alive beats re-send the one it resumed
        # from: a fresh empty beat would erase it if this attempt were lost too.
        latest: list[Beat] = [resumed or {"round": inp.round, "done": False, "state": None}]

        def beat(details: Beat) -> None:
            latest[0] = details
            activity.heartbeat(details)

        async def asked() -> list[dict[str, Any]]:
            # A person's requests to this subtask, as its workflow holds them
            # (coordinator.temporal.requests says why a query).
            assert info.workflow_id is not None  # a round is always a workflow's activity
            handle = activity.client().get_workflow_handle(info.workflow_id)
            got: list[dict[str, Any]] = await handle.query(REQUESTS_QUERY, inp.subtask.id)
            return got

        async def body() -> RoundOutput:
            return await run_round(
                inp, self.resources, session=info.attempt, resumed=resumed, beat=beat,
                asked=asked if inp.attended else None,
            )

        return await _alive(body, latest)

    @activity.defn(name=QUEUED)
    async def record_queued(self, inp: QueuedInput) -> None:
        """Record a round's subtasks as queued (the trace a local run has)."""
        writer = self.resources.writer(inp.store)
        for sid in inp.subtask_ids:
            event = ProgressEvent(sid, "state", inp.at_s, state="queued")
            writer.event(inp.run_id, 1, sid, "state", inp.at_s, event_data(event))
        await writer.flush()

    @activity.defn(name=DECISION)
    async def record_decision(self, inp: DecisionEventInput) -> None:
        """Record an escalation waiting for a person, or its decision, as an event of its
        subtask (what a local run's desk records; a resumed or served run reads them)."""
        writer = self.resources.writer(inp.store)
        writer.event(inp.run_id, 1, inp.subtask_id, inp.kind, inp.at_s, dict(inp.data))
        await writer.flush()

    @activity.defn(name=PLAN)
    async def record_plan(self, inp: PlanInput) -> None:
        """Record the plan a person reviewed (approved or edited) as the decomposition
        records one nobody reviews (docs/design.md §17)."""
        writer = self.resources.writer(inp.store)
        writer.claim(inp.run_id)
        await record_plan(writer, inp.run_id, activity.info().attempt, inp.subtasks, inp.gap,
                          inp.lead, inp.at_s)

    @activity.defn(name=SETTLE)
    async def settle(self, inp: SettleInput) -> list[SubagentResult]:
        """End subagents the workflow cut or lost: each hands up the state last known."""
        clock = JobClock(AnyioClock())
        writer = self.resources.writer(inp.store) if inp.store else None
        out: list[SubagentResult] = []
        for item in inp.items:
            spec = item.subtask
            sim = simulated_tools({}, clock)
            trace_ids = SeededTraceIds(f"{inp.seed}/{inp.run_id}")
            run = restored(spec, item.state, seed=inp.seed, sim=sim, trace_ids=trace_ids)
            if not item.done:
                if inp.trigger in ("deadline", "cancelled"):
                    cut(run, inp.at_s, cancelled=inp.trigger == "cancelled")
                elif inp.trigger == "threshold_breach":
                    # Not started: the job's token budget is spent. As a local subagent
                    # that took its lane and found it so at its first model call.
                    run.rounds += 1
                    run.started_s = run.ended_s = inp.at_s
                    run.state = "escalated"
                    hand_up = budget_spent(inp.message)
                    run.escalate(hand_up.trigger, hand_up.message, category=hand_up.category,
                                 alternatives=hand_up.alternatives)
                else:
                    run.ended_s = inp.at_s
                    run.state = "escalated"
                    run.escalate(
                        "internal_error",
                        inp.message,
                        category="internal",
                        detail={"message": inp.message},
                    )
            result = run.result()
            out.append(result)
            if writer is not None:
                if not item.done and inp.trigger == "threshold_breach":
                    # Its trace is the local one's too: it took its lane (running), then
                    # found the budget spent (docs/design.md §15, the same event kinds).
                    started = ProgressEvent(spec.id, "state", inp.at_s, state="running")
                    writer.event(inp.run_id, 1, spec.id, "state", inp.at_s,
                                 event_data(started))
                esc = run.escalation
                event = ProgressEvent(
                    spec.id,
                    "state",
                    inp.at_s,
                    state=run.state,
                    trigger=esc.trigger if esc is not None else None,
                )
                writer.event(inp.run_id, 1, spec.id, "state", inp.at_s, event_data(event))
                await writer.commit_result(
                    inp.run_id,
                    spec.id,
                    1,
                    result.model_dump(mode="json"),
                    state_of(run, sim, trace_ids),
                )
        return out

    @activity.defn(name=SYNTHESIZE)
    async def synthesize(self, inp: SynthesisInput) -> CoverageReport:
        """The lead agent writes the answer from the report (docs/design.md §7); never raises for
        a failed model call (the report keeps ``answer.synthesis_error``).

        After a decomposition the lead continues at ``inp.lead``: its next model turn.
        """
        from coordinator.lead import synthesize
        from coordinator.report import with_tokens

        clock = job_clock(inp.speed, inp.started_at)

        # The job's meter as the workflow holds it once every round is in: the synthesis
        # runs within the budget's reserve, and the report gets the tokens, as locally.
        meter = TokenMeter.of(inp.budget, inp.spent)

        async def body() -> CoverageReport:
            # Made inside: a worker without the model's key is not retried (_for_temporal).
            lead = Lead(self.resources, inp.model, run_id=inp.run_id, seed=inp.seed,
                        store=inp.store, clock=clock, session=activity.info().attempt,
                        position=inp.lead, meter=meter)
            return with_tokens(await synthesize(inp.report, lead.context), meter)

        # The synthesis keeps no state worth resuming from: its keep-alive beats nothing.
        report = await _alive(body, [{}])
        return report.model_copy(update={"elapsed_s": clock.now()})

    @activity.defn(name=FINISH)
    async def record_report(self, inp: FinishInput) -> None:
        """Close the run in the store with its report (the workflow's last step)."""
        writer = self.resources.writer(inp.store)
        await writer.flush()  # this worker's trace events land before the run closes
        await record_report(writer, inp)


async def _alive(body: Callable[[], Awaitable[T]], latest: list[Beat]) -> T:
    """Run ``body`` while a keep-alive task re-sends ``latest[0]``, so a long tool or
    model call on a live worker never looks like a lost one; raise what it raised, as
    Temporal should see it."""
    timeout = activity.info().heartbeat_timeout
    error: Exception | None = None
    output: list[T] = []
    async with anyio.create_task_group() as tg:
        if timeout is not None and timeout.total_seconds() > 0:
            tg.start_soon(_keep_alive, timeout.total_seconds() / 3, latest)
        try:
            output.append(await body())
        except Exception as exc:  # raised below, outside the task group (no group)
            error = exc
        finally:
            tg.cancel_scope.cancel()
    if error is not None:
        translated = _for_temporal(error)
        if translated is error:
            raise error
        raise translated from error
    return output[0]


async def _keep_alive(interval: float, latest: list[Beat]) -> None:
    """Re-send the latest heartbeat every ``interval`` seconds while the round runs.

    Nothing is sent at the start: the server keeps the last details of an earlier
    attempt, and a round that ends within ``interval`` needs no keep-alive at all.
    """
    while True:
        await anyio.sleep(interval)
        activity.heartbeat(latest[0])


def _for_temporal(error: Exception) -> Exception:
    """What Temporal should see: a worker's trouble is retried, a hopeless case is not."""
    if isinstance(error, _NOT_RETRIED):
        return ApplicationError(str(error), type=type(error).__name__, non_retryable=True)
    return error
