"""One subagent round on a worker: run or resume it, checkpointing after every logical call.

This is the body of the ``subagent_round`` activity without Temporal in it: the
activity passes the heartbeat details it was retried with (``resumed``) and a ``beat``
function that heartbeats. The state beaten after every logical call is the checkpoint a
local run writes to the store, by the same writer (:func:`coordinator.checkpoint.state_of`:
the subagent, its simulated tools' counters, its trace-id position, and here its model
client's state), and read by the same reader, so a round retried on another worker
continues after its last finished call: finished calls are not made again, their
responses are not consumed again, and trace ids carry on where they were.

A round that finished but was not reported (the worker died in between) beats
``done``; its retry returns the result without running anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from temporalio.exceptions import ActivityError, TimeoutError

from coordinator.checkpoint import restored, spent_in, state_of
from coordinator.routing import RoutingTable
from coordinator.rules import cut, handed_up, retried_later, time_left
from coordinator.store.events import event_data
from coordinator.temporal.budget import AllowanceMeter
from coordinator.temporal.payloads import (
    DecompositionInput,
    FollowupInput,
    RoundInput,
    RoundOutput,
    State,
)
from coordinator.temporal.requests import Fetch, RoundRequests
from coordinator.temporal.resources import WorkerResources
from shared.clock import AnyioClock, JobClock, PacedClock
from shared.ids import SeededTraceIds
from subagents import ProgressEvent, SubagentRun, run_subagent
from subagents.models.spec import ModelSpec
from subagents.planners.model import ModelPlanner
from subagents.run import crashed
from subagents.simulated.spec import SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.telemetry.run import activity_tracer
from subagents.tool import Tool
from subagents.toolsource import combine

Beat = dict[str, Any]
"""Heartbeat details: ``{"round": n, "done": bool, "state": State | None}``."""

Heartbeat = Callable[[Beat], None]


def job_clock(speed: float, started_at: float) -> JobClock:
    """Job time on this worker: seconds since the job started (epoch ``started_at``).

    Every worker reads the wall clock, so the skew between machines shows in a
    subtask's ``started_s``/``ended_s`` (and the deadline cut) and nowhere else.
    """
    return JobClock(AnyioClock(speed), offset=(time.time() - started_at) * speed)


def round_clock(inp: RoundInput) -> JobClock:
    """The round's job time: paced virtual time when all it runs is simulated, else the
    wall (:func:`job_clock`).

    A round of simulated tools, planned by its script or a scripted model, reads the time
    it slept (:class:`~shared.clock.PacedClock`), at the pace ``--speed`` asks: what it
    decides from the clock (a retry's ``max_total_s``, its deadline) is then what a replay
    decides, on any worker however loaded. It read the wall, and on a busy machine 200 ms
    of overhead in a round at speed 20 took a retry budget's third attempt away. A real
    tool or model keeps real time.
    """
    scripted = inp.subtask.planner != "model" or (
        inp.model is not None and inp.model.get("provider") == "scripted")
    if inp.mcp_servers or inp.research is not None or not scripted:
        return job_clock(inp.speed, inp.started_at)
    offset = (time.time() - inp.started_at) * inp.speed
    return JobClock(PacedClock(inp.speed), offset=offset)


def simulated_tools(specs: Mapping[str, Mapping[str, Any]], clock: JobClock) -> SimulatedTools:
    """The round's simulated tools from their JSON specs."""
    return SimulatedTools(
        {name: SimToolSpec.model_validate(dict(spec)) for name, spec in specs.items()}, clock
    )


def _beaten(resumed: Beat | None, round_no: int) -> tuple[State | None, bool]:
    """The state an earlier attempt at this round heartbeat last, and whether it was final."""
    if resumed is None or resumed.get("round") != round_no or resumed.get("state") is None:
        return None, False
    state: State = resumed["state"]
    return state, bool(resumed.get("done"))


async def run_round(
    inp: RoundInput,
    resources: WorkerResources,
    *,
    session: int,
    resumed: Beat | None,
    beat: Heartbeat,
    asked: Fetch | None = None,
) -> RoundOutput:
    """Run (or resume) the round ``inp`` describes to its result.

    Args:
        inp: the round.
        resources: the worker's MCP servers, model clients and store writers.
        session: which attempt at this round this is (Temporal's activity attempt);
            the trace's ``session`` column, so a resumed round reads as one.
        resumed: the details of the last heartbeat of an earlier attempt, if any.
        beat: records (heartbeats) the round's latest state.
        asked: asks the workflow for a person's requests to the round (an attended
            round, :mod:`coordinator.temporal.requests`): a stop hands up with trigger
            ``human_request``, a hint reaches the model at its next turn.

    Raises:
        McpServerStartError: the job's MCP servers cannot start on this worker.
        ModelPlanningUnavailable: a model-planned subtask in a job without a model.
        MissingModelKey: the model's key is not in this worker's environment.
        StoreError: the run store cannot be written.
    """
    spec, sid, run_id = inp.subtask, inp.subtask.id, inp.run_id
    clock = round_clock(inp)
    sim = simulated_tools(inp.tools, clock)
    trace_ids = SeededTraceIds(f"{inp.seed}/{run_id}")
    writer = resources.writer(inp.store) if inp.store else None
    client = resources.model_client(spec, inp.model, clock)
    planner = resources.planner(spec, inp.model, client, seed=inp.seed)
    if isinstance(planner, ModelPlanner):
        planner.search_first = inp.search_first
    if inp.budget is not None and isinstance(planner, ModelPlanner):
        # Set before the restore: the subagent's earlier spend is counted on it.
        planner.meter = round_meter(inp)
    beaten, done_before = _beaten(resumed, inp.round)
    state = beaten if beaten is not None else inp.state
    requests = None
    if inp.attended and asked is not None:
        requests = RoundRequests(asked, start=inp.asked_from, poll_s=inp.request_poll_s,
                                 taken=int((resumed or {}).get("asked", 0)) if beaten else 0)
    run = restored(
        spec, state, seed=inp.seed, sim=sim, trace_ids=trace_ids, planner=planner, client=client
    )

    routing = RoutingTable(inp.routing)
    tracer = activity_tracer(
        run_id=run_id,
        model=ModelSpec.model_validate(dict(inp.model)) if inp.model else None,
        route=lambda escalation: routing.route(escalation).route,
    )

    def observer(event: ProgressEvent) -> None:
        if tracer is not None:
            tracer.observe(event)
        if writer is not None:
            data = event_data(event)
            if event.kind == "state":
                data["worker"] = resources.identity  # which worker ran this (pid@host)
            writer.event(run_id, session, sid, event.kind, event.at, data)

    def taken() -> int:
        return requests.taken if requests is not None else 0

    def checkpoint(_run: SubagentRun) -> None:
        latest = state_of(run, sim, trace_ids, client)
        # What the subagent took of a person's requests goes with the state it took them in.
        beat({"round": inp.round, "done": False, "state": latest, "asked": taken()})
        if writer is not None:
            writer.checkpoint(run_id, sid, latest)

    def escalated() -> None:
        # Observers (the trace, the live view) hear this subagent end like any other.
        run.state = "escalated"
        trigger = run.escalation.trigger if run.escalation else None
        observer(ProgressEvent(sid, "state", clock.now(), state="escalated", trigger=trigger))

    if not done_before:
        if writer is not None:
            writer.claim(run_id)
        remaining = time_left(inp.deadline_s, clock.now())
        if remaining is not None and remaining <= 0 and beaten is None:
            # Started after the deadline fell: the subagent was still queued (docs/design.md §5.1).
            cut(run, clock.now())
            escalated()
        else:
            tools = await _tools_of(inp, resources, sim)
            async with anyio.create_task_group() as watching:
                person = anyio.CancelScope()
                if requests is not None:
                    await requests.poll()  # a stop or hint made before the round began
                    watching.start_soon(requests.watch)
                    watching.start_soon(_cancel_on, requests.stop, person)
                with clock.move_on_after(remaining), person:
                    try:
                        await run_subagent(
                            run,
                            tools,
                            clock=clock,
                            trace_ids=trace_ids,
                            observer=observer,
                            checkpoint=checkpoint,
                            hints=requests.hints if requests is not None else None,
                        )
                    except Exception as exc:  # a bug in a planner, tool or the loop: isolate it
                        crashed(run, exc, clock.now())
                        escalated()
                watching.cancel_scope.cancel()
            if not run.finished:
                if requests is not None and requests.stop.is_set():
                    # A person asked it to stop: it hands up what it found, as locally.
                    handed_up(run, clock.now(), requests.stopped_by)
                else:
                    # The deadline cut it: it hands up what it found (the attempt under
                    # way counts), exactly as the local coordinator's cancel scope does.
                    cut(run, clock.now())
                escalated()
    result = run.result()
    if tracer is not None and not done_before:
        tracer.finished(result)  # the subagent's span for this round ends with its result
    final = state_of(run, sim, trace_ids, client)
    if not done_before:
        beat({"round": inp.round, "done": True, "state": final, "asked": taken()})
    if writer is not None:
        await writer.commit_result(run_id, sid, session, result.model_dump(mode="json"), final)
    # The retry round continues from this state; so does a person's retry (attended).
    keep = retried_later(run.escalation, run.rounds, routing) or (
        inp.attended and run.escalation is not None)
    spent = list(run.planner.spent) if isinstance(run.planner, ModelPlanner) else None
    return RoundOutput(result=result, state=final if keep else None, spent=spent,
                       asked=taken())


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once ``event`` is set (a person asked the round to stop)."""
    await event.wait()
    scope.cancel()


def round_meter(inp: RoundInput) -> AllowanceMeter:
    """The round's meter: the job's spend as the workflow knew it, the allowance it lent."""
    before = inp.spent_before
    return AllowanceMeter(
        inp.budget,
        input_tokens=before[0],
        output_tokens=before[1],
        calls=before[2],
        subtask_id=inp.subtask.id,
        allowance=inp.allowance,
        base=spent_in(inp.state) or [0, 0, 0],
    )


async def _tools_of(
    inp: RoundInput, resources: WorkerResources, sim: SimulatedTools
) -> Mapping[str, Tool]:
    return await job_tools(inp.subtask.id, sim, inp, resources)


async def job_tools(
    subtask_id: str,
    sim: SimulatedTools,
    inp: RoundInput | DecompositionInput | FollowupInput,
    resources: WorkerResources,
) -> dict[str, Tool]:
    """The simulated tools as ``subtask_id`` sees them, then the MCP tools of the job's
    servers and its research tools if it declares any (opened on this worker on first
    use), in the order a local run combines them.

    Raises:
        McpServerStartError: the job's MCP servers cannot start on this worker.
        ResearchToolsUnavailable: the job's research tools cannot open on this worker.
    """
    mcp = research = None
    if inp.mcp_servers:
        mcp = await resources.mcp.source(inp.mcp_servers, base_dir(inp.source))
    if inp.research is not None:
        home = resources.index_home(inp.store)
        research = await resources.research.tools(inp.research, home)
    # The one combine() a local run's tool source is made with (coordinator.engine.run).
    return dict(combine(sim, mcp, research).for_subtask(subtask_id))


def base_dir(source: str) -> str | None:
    """The job file's folder: relative MCP ``cwd`` values resolve against it."""
    return str(Path(source).resolve().parent) if source else None


def last_beat(err: ActivityError) -> dict[str, Any] | None:
    """The last heartbeat of a round that timed out, if it sent one."""
    cause = err.cause
    if isinstance(cause, TimeoutError) and cause.last_heartbeat_details:
        beat = cause.last_heartbeat_details[-1]
        return beat if isinstance(beat, dict) else None
    return None


def failure(err: ActivityError) -> str:
    """What made an activity fail for good, said for a person."""
    cause = err.cause
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err)
