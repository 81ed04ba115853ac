"""The subagent loop: plan, gate the context, execute safely, escalate what it cannot fix.

A subagent's state lives in a :class:`~subagents.run.SubagentRun` owned by the caller,
so a subagent that is cancelled (deadline) still hands up everything it found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from shared.clock import Clock
from shared.envelope import Finding
from shared.ids import RandomTraceIds, TraceIds
from subagents.executor import ExecEvent, unknown_effect
from subagents.planners import (
    EscalateAction,
    FinishAction,
    Hint,
    Observation,
    PlanEnv,
    PlannerState,
    TurnPlanner,
)
from subagents.result import (
    ProgressEvent,
    ProgressKind,
    ProgressObserver,
    SubagentResult,
    SubagentState,
)
from subagents.run import SubagentRun
from subagents.tool import Tool
from subagents.turns.batch import call_one, may_lead, room_for, take_together, trigger_for


async def run_subagent(
    run: SubagentRun,
    tools: Mapping[str, Tool],
    *,
    clock: Clock,
    trace_ids: TraceIds | None = None,
    observer: ProgressObserver | None = None,
    checkpoint: Callable[[SubagentRun], None] | None = None,
    hints: Callable[[], Sequence[Hint]] | None = None,
) -> SubagentResult:
    """Run (or resume) one subagent until it finishes or escalates.

    ``checkpoint`` is called after every logical call whose outcome lets the subagent go
    on, with its state complete enough to continue from there after a crash.

    ``hints`` hands over what a person said to the subtask since it was last asked (each
    hint once; docs/design.md §17): a model-driven planner asks it before each model turn
    and the model reads them then, each recorded as a ``hint`` progress event.

    Called again on the same ``run`` it resumes at the step that failed, with its
    findings, step count and context kept (the coordinator's retry round).
    """
    trace_ids = trace_ids or RandomTraceIds()
    spec = run.spec
    last: Observation | None = None
    # A non-idempotent call the process died during (its intent was checkpointed).
    interrupted = run.in_flight if run.resuming else None
    if run.resuming:
        run.resuming = False
        last = run.pending
    else:
        run.rounds += 1
    run.pending = None
    run.escalation = None
    if run.started_s is None:
        run.started_s = clock.now()

    if not run.jitter_key:
        run.jitter_key = f"0/{spec.id}"

    # ``at``: when it happened, for an event relayed after the fact (a turn's calls that
    # ran together go out in call order); None: now.
    def emit(kind: ProgressKind, at: float | None = None, **kw: Any) -> None:
        if observer is not None:
            observer(ProgressEvent(spec.id, kind, clock.now() if at is None else at, **kw))

    def set_state(state: SubagentState, at: float | None = None) -> None:
        run.state = state
        if state == "escalated" and run.escalation is not None:
            emit("state", at, state=state, trigger=run.escalation.trigger)
        else:
            emit("state", at, state=state)

    def on_exec(event: ExecEvent, at: float | None = None) -> None:
        if event.kind == "start":
            run.attempts += 1
            if event.attempt > 1:
                set_state("running", at)
        elif event.kind == "wait":
            set_state("retrying", at)
        emit(
            event.kind,
            at,
            tool=event.tool,
            attempt=event.attempt,
            wait_s=event.wait_s,
            result=event.result,
        )

    def saved(observation: Observation) -> None:
        run.pending = observation
        if checkpoint is not None:
            checkpoint(run)

    def planner_state(state: PlannerState) -> None:
        if run.state != state:
            set_state(state)

    def heard(turn: int) -> list[str]:
        given = hints() if hints is not None else ()
        for hint in given:
            emit("hint", text=hint.text, by=hint.by, turn=turn, step=run.steps)
        return [hint.text for hint in given]

    env = PlanEnv(
        spec=spec,
        tools=tools,
        context=run.context,
        clock=clock,
        trace_ids=trace_ids,
        observer=on_exec,
        trace_sink=run.trace_ids.append,
        set_state=planner_state,
        hints=heard,
    )
    set_state("running")
    if interrupted is not None:
        # Its effect may have happened before the process died: never sent again
        # (docs/design.md §2).
        # The attempt under way then counts, as one cut by a deadline does.
        trace_id = run.trace_ids[-1] if run.trace_ids else ""
        result = unknown_effect(interrupted.tool, trace_id=trace_id)
        on_exec(ExecEvent("start", interrupted.tool, trace_id, 1, clock.now()))
        on_exec(ExecEvent("attempt", interrupted.tool, trace_id, 1, clock.now(), result))
        run.in_flight, run.last_call = None, interrupted
        run.context.add_result(result)
        run.escalate("unknown_state", result.message or "", result=result, call=interrupted)
    while run.escalation is None:
        action = await run.planner.next_action(last, env)
        if action is None or isinstance(action, FinishAction):
            if isinstance(action, FinishAction):
                _finish(run, action)
            if last is not None and last.result.category == "validation":
                # Giving up on a refused call is no correction (docs/design.md §3); ending quietly
                # would report a failure as "nothing there".
                run.escalate(
                    "no_progress",
                    f"{last.action.tool}: no correction for {last.result.field}: "
                    f"{last.result.message}",
                    result=last.result,
                    call=last.action,
                    detail={"step": last.action.step},
                )
            break
        if isinstance(action, EscalateAction):
            run.escalate(
                action.trigger,
                action.message or f"the plan asks: {action.trigger}",
                result=action.result,
                category=action.category,
                alternatives=action.alternatives,
                partial=action.partial,
            )
            break
        if (
            last is not None
            and last.result.category == "validation"
            and action.tool == last.action.tool
            and action.args == last.action.args
        ):
            # The same input would fail the same way: it is not sent.
            run.escalate(
                "no_progress",
                f"{action.tool}: no correction for {last.result.field}: {last.result.message}",
                result=last.result,
                call=last.action,
                detail={"step": action.step},
            )
            break
        if run.steps >= spec.max_steps:
            run.escalate(
                "step_budget",
                f"the next call would exceed max_steps={spec.max_steps}",
                call=action,
            )
            break
        batch = [action]
        room = min(spec.parallel_calls, spec.max_steps - run.steps) - 1
        if room > 0 and isinstance(run.planner, TurnPlanner) and may_lead(action, tools, spec):
            batch += run.planner.more_calls(room, env)
        n, decision = room_for(run, len(batch))
        if decision is not None and decision.decision != "continue":
            run.escalate(
                "context_budget",
                f"{decision.remaining_tokens} tokens left of {spec.context_window}, "
                f"{decision.required_margin:g} needed even after compaction",
                call=action,
            )
            break
        if n > 1:
            # The turn's calls run together; their results are taken in the order asked
            # (calls the gate held back are proposed again, after these).
            taken = await take_together(
                run, batch[:n], tools, clock, trace_ids, on_exec, emit, env
            )
            if taken is None:
                break
            last = taken
            saved(last)
            continue
        result = await call_one(run, action, tools, clock, trace_ids, on_exec, emit,
                                None if checkpoint is None else partial(checkpoint, run))
        last = Observation(action, result)
        if result.ok:
            run.found(action, result)
            saved(last)
            continue
        if result.category == "validation":
            saved(last)
            continue
        trigger = trigger_for(result)
        run.escalate(trigger, result.message or trigger, result=result, call=action)
        break
    run.ended_s = clock.now()
    set_state("escalated" if run.escalation else "done")
    return run.result()


def _finish(run: SubagentRun, action: FinishAction) -> None:
    """Keep a written conclusion as a finding; a cut-off one is incomplete data."""
    if action.text:
        if action.tool == "finish":
            run.findings.append(Finding(tool="finish", data=action.text))
        else:
            run.findings.append(
                Finding(tool=action.tool, data={"text": action.text}, complete=action.complete)
            )
    if not action.complete and run.incomplete_tool is None:
        run.incomplete_tool = action.tool
