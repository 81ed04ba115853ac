"""A subagent's logical calls: one at a time, or the calls of one model turn together.

A lone call (:func:`call_one`) is what every scripted step and every single-call turn
makes. Several calls of one model turn (:func:`call_together`, docs/design.md §7 "Parallel
calls") run at once, each exactly as a lone call would (allowlist, schema check,
``execute_tool_safely`` with its timeout and retry); the loop takes their results in the
order the model asked. What stays exact, and how:

- *Steps, trace ids, idempotency keys* are given in call order before any call starts.
- *Events* go out in call order (:class:`subagents.turns.ordering.Relay`), attempts that start
  at one instant start in call order (:class:`subagents.turns.ordering.TurnOrder`), so a replay
  is byte-identical whatever order the event loop wakes tasks in.
- *Jitter*: a call of a batch draws its waits from its own stream,
  ``random.Random(f"{seed}/{subtask_id}/call/{step}")`` (``step``: the logical call's
  number in the subagent), so which call waits first cannot change any draw. A lone call
  draws from the subagent's stream, as ever (docs/design.md §5.1).
- *Checkpoints* are never taken while calls of a batch are in flight: a checkpoint is
  a consistent cut, and their tools' counters would be ahead of the transcript. A run
  killed during a batch runs that batch again on resume; its calls are reads (a tool
  with side effects never shares a batch), and the calls of the turn that had answered
  before the batch are not made again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from shared.budget import ContextDecision
from shared.categories import ErrorCategory, Trigger
from shared.clock import Clock
from shared.envelope import ToolError, ToolResult
from shared.escalation import Escalation
from shared.ids import TraceIds
from subagents.context import Context
from subagents.executor import ExecEvent, execute_tool_safely, rejected
from subagents.jitter import DeferredRandom, Jitter
from subagents.planners import CallAction, Observation, PlanEnv, Planner, TurnPlanner
from subagents.result import ProgressKind
from subagents.spec import SubtaskSpec
from subagents.tool import Tool
from subagents.turns.ordering import Post, run_together


class CallLedger(Protocol):
    """What a subagent's calls read of its run, and what they record on it as they go
    (:class:`subagents.run.SubagentRun` is the one)."""

    @property
    def spec(self) -> SubtaskSpec: ...
    @property
    def planner(self) -> Planner: ...
    @property
    def context(self) -> Context:
        """The transcript: each call and its result join it, in the order asked."""
    @property
    def rng(self) -> Jitter:
        """The subagent's jitter stream (a lone call's waits draw from it)."""
    @property
    def jitter_key(self) -> str:
        """Names the stream a call of a batch draws from, beside its step."""
    in_flight: CallAction | None
    """The call under way: a side effect a checkpoint must know may have happened."""
    last_call: CallAction | None

    def count_call(self, trace_id: str) -> int:
        """Count a logical call, with its trace id: its step number."""
    def found(self, action: CallAction, result: ToolResult) -> None:
        """Keep an ok result as a finding (partial data marks the subtask incomplete)."""
    def escalate(self, trigger: Trigger, message: str, *, result: ToolResult | None = None,
                 call: CallAction | None = None) -> Escalation:
        """Record the subagent's escalation: a failure its calls cannot fix."""


OnExec = Callable[[ExecEvent, float | None], None]
"""The loop's handler of an executor event, given the job-clock time it happened."""


class Emit(Protocol):
    """The loop's ``emit``: a progress event of ``kind``, at ``at`` (None: now)."""

    def __call__(self, kind: ProgressKind, at: float | None = None, **fields: Any) -> None: ...


_TRIGGER_BY_CATEGORY: Mapping[ErrorCategory, Trigger] = {
    "transient": "retries_exhausted",
    "permission": "permission_denied",
    "internal": "internal_error",
}


def trigger_for(result: ToolResult) -> Trigger:
    """The escalation trigger a failed envelope leads to (validation aside)."""
    if result.changed_state == "unknown":
        return "unknown_state"
    if result.category == "business":
        return "threshold_breach" if result.limit is not None else "business_rule"
    return _TRIGGER_BY_CATEGORY.get(result.category or "internal", "internal_error")


def room_for(run: CallLedger, calls: int) -> tuple[int, ContextDecision | None]:
    """How many of a turn's next ``calls`` may start together, and the gate's decision.

    The gate runs once for calls that start together, with room for all their results
    (docs/design.md §7: it accounts for all of them before any starts): the margin is
    max(15% of the window, calls × active tool budget), compacting once if it asks.
    When even compaction cannot make room for all, fewer start (the largest number that
    fits; the others wait for the next gate, after these answered). One call is the
    gate of docs/design.md §5.1 exactly; its decision is None when the byte bounds prove room.
    """
    while True:
        if run.context.has_room(calls):
            return calls, None
        decision = run.context.ensure_room(calls)
        if decision.decision == "continue" or calls == 1:
            return calls, decision
        calls -= 1


async def take_together(
    run: CallLedger,
    batch: list[CallAction],
    tools: Mapping[str, Tool],
    clock: Clock,
    trace_ids: TraceIds,
    on_exec: OnExec,
    emit: Emit,
    env: PlanEnv,
) -> Observation | None:
    """Run a turn's calls together and take their results in the order asked.

    Each call and its result join the context in that order, as if made one after
    another; each ok result is a finding. The planner is told of every result but the
    last that lets the subagent go on, which is returned (the loop's next observation).
    When a result ends the subagent (a failure it cannot fix), the first such in call
    order is its escalation, the others' findings are kept (they are evidence, and
    their calls ran), and None is returned; the calls that failed are made again in the
    retry round.
    """
    done: list[ToolResult | None] = [None] * len(batch)
    try:
        results = await call_together(run, batch, tools, clock, trace_ids, on_exec, emit, done)
    finally:
        if any(result is None for result in done):
            # Cut before every call answered (the job's deadline, a cancel): what the
            # calls that did answer found is kept, in call order, as a lone call's would be.
            for action, result in zip(batch, done, strict=True):
                if result is not None and result.ok:
                    run.found(action, result)
    goes_on = [r.ok or r.category == "validation" for r in results]
    fatal: Observation | None = None
    last: Observation | None = None
    for i, (action, result) in enumerate(zip(batch, results, strict=True)):
        run.context.add_call(action.tool, action.args)
        run.context.add_result(result)
        run.last_call = action
        observation = Observation(action, result)
        if result.ok:
            run.found(action, result)
        if not goes_on[i]:
            fatal = fatal or observation
        elif all(goes_on) and i == len(batch) - 1:
            last = observation
        else:
            assert isinstance(run.planner, TurnPlanner)  # only a TurnPlanner's calls batch
            run.planner.observe(observation, env)
    if fatal is not None:
        run.last_call = fatal.action
        trigger = trigger_for(fatal.result)
        run.escalate(trigger, fatal.result.message or trigger, result=fatal.result,
                     call=fatal.action)
        return None
    return last


def refusal(name: str, tool: Tool | None, spec: SubtaskSpec) -> ToolError | None:
    """Why a call may not run at all: a tool that does not exist, or one not allowed."""
    if tool is None:
        # Scenario files cannot name an undefined tool (a load error): this is a model
        # that invented one. It goes back to the model as a correctable input error.
        allowed = ", ".join(spec.tools) or "none"
        return ToolError.of(
            "validation",
            "unknown_tool",
            f"no tool named {name!r}; subtask {spec.id!r} may call: {allowed}",
            field="name",
            expected=f"one of {allowed}",
        )
    if name not in spec.tools:
        return ToolError.of(
            "permission", "not_allowed", f"{name} is not on subtask {spec.id!r}'s allowlist"
        )
    return None


def may_lead(action: CallAction, tools: Mapping[str, Tool], spec: SubtaskSpec) -> bool:
    """Whether ``action`` may start together with the calls after it in its turn.

    A tool with side effects runs alone (docs/design.md §7), and so does a call that is refused
    for good before it runs (off the allowlist: nothing after it would run).
    """
    tool = tools.get(action.tool)
    return tool is not None and not tool.side_effects and action.tool in spec.tools


async def call_one(
    run: CallLedger,
    action: CallAction,
    tools: Mapping[str, Tool],
    clock: Clock,
    trace_ids: TraceIds,
    on_exec: OnExec,
    emit: Emit,
    checkpoint: Callable[[], None] | None = None,
) -> ToolResult:
    """Make one logical call; its call and final envelope join the context
    (``checkpoint`` saves the run before a call whose effect may not happen twice)."""
    spec = run.spec
    run.context.add_call(action.tool, action.args)
    trace_id = trace_ids.next(spec.id)
    step = run.count_call(trace_id)
    run.in_flight = action
    emit("call", tool=action.tool, step=action.step, args=action.args)

    def observer(event: ExecEvent) -> None:
        on_exec(event, None)

    tool = tools.get(action.tool)
    error = action.invalid or refusal(action.tool, tool, spec)
    if error is not None or tool is None:
        assert error is not None  # refusal() refuses every undefined tool
        result = rejected(action.tool, error, trace_id=trace_id)
        observer(ExecEvent("start", action.tool, trace_id, 1, clock.now()))
        observer(ExecEvent("attempt", action.tool, trace_id, 1, clock.now(), result))
    else:
        if checkpoint is not None and tool.side_effects and not tool.idempotent:
            # The effect may happen from here on: checkpoint the call (in_flight) first,
            # so a run killed during it resumes to unknown_state instead of sending it
            # twice. The store makes this one checkpoint durable before returning.
            checkpoint()
        result = await execute_tool_safely(
            tool,
            action.args,
            timeout=spec.tool_timeout_s,
            retry=spec.retry,
            trace_id=trace_id,
            clock=clock,
            rng=run.rng,
            idempotency_key=f"{spec.id}/{step}",
            scope=spec.id,
            observer=observer,
        )
    run.in_flight = None
    run.last_call = action
    run.context.add_result(result)
    return result


async def call_together(
    run: CallLedger,
    batch: Sequence[CallAction],
    tools: Mapping[str, Tool],
    clock: Clock,
    trace_ids: TraceIds,
    on_exec: OnExec,
    emit: Emit,
    done: list[ToolResult | None] | None = None,
) -> list[ToolResult]:
    """Make the calls of ``batch`` at once; their final envelopes in the batch's order
    (``done`` holds each as it comes: what a cut batch had).

    The steps are counted and the trace ids given before any call starts; the calls and
    their results join the context when the loop takes them, in order.
    """
    spec = run.spec
    launched: list[tuple[CallAction, str, int]] = []
    for action in batch:
        trace_id = trace_ids.next(spec.id)
        launched.append((action, trace_id, run.count_call(trace_id)))

    async def one(i: int, own_clock: Clock, post: Post) -> ToolResult:
        action, trace_id, step = launched[i]
        called = clock.now()
        post(lambda: emit("call", at=called, tool=action.tool, step=action.step,
                          args=action.args))

        def observer(event: ExecEvent) -> None:
            at = clock.now()  # the job's clock: a real tool's events are in real seconds
            post(lambda: on_exec(event, at))

        tool = tools.get(action.tool)
        error = action.invalid or refusal(action.tool, tool, spec)
        if error is not None or tool is None:
            assert error is not None  # refusal() refuses every undefined tool
            result = rejected(action.tool, error, trace_id=trace_id)
            observer(ExecEvent("start", action.tool, trace_id, 1, clock.now()))
            observer(ExecEvent("attempt", action.tool, trace_id, 1, clock.now(), result))
            return result
        return await execute_tool_safely(
            tool,
            action.args,
            timeout=spec.tool_timeout_s,
            retry=spec.retry,
            trace_id=trace_id,
            clock=own_clock,
            rng=DeferredRandom(f"{run.jitter_key}/call/{step}"),
            idempotency_key=f"{spec.id}/{step}",
            scope=spec.id,
            observer=observer,
        )

    return await run_together(len(launched), clock, one, done)
