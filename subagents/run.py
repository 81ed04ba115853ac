"""A subagent's state, held outside its task: what it found, counted and escalated.

The caller owns a :class:`SubagentRun`, so a subagent that is cancelled (deadline) or
crashes still hands up everything it found (:func:`cut_by_deadline`, :func:`crashed`);
:func:`subagents.loop.run_subagent` runs one, the calls of its turns
(:mod:`subagents.turns.batch`) record themselves on it, a checkpoint saves it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shared.categories import ErrorCategory, Trigger
from shared.envelope import Finding, ToolResult
from shared.escalation import Escalation
from subagents.alternatives import alternatives_for
from subagents.context import Context
from subagents.jitter import DeferredRandom, Jitter
from subagents.planners import CallAction, Observation, Planner, ScriptedPlanner
from subagents.result import RESULT_PROTOTYPE, SubagentResult, SubagentState
from subagents.spec import SubtaskSpec


@dataclass
class SubagentRun:
    """A subagent's mutable state, held outside its task."""

    spec: SubtaskSpec
    planner: Planner
    context: Context
    rng: Jitter
    findings: list[Finding] = field(default_factory=list)
    escalation: Escalation | None = None
    incomplete_tool: str | None = None
    attempts: int = 0
    steps: int = 0
    rounds: int = 0
    trace_ids: list[str] = field(default_factory=list)
    in_flight: CallAction | None = None
    last_call: CallAction | None = None
    state: SubagentState = "queued"
    started_s: float | None = None
    ended_s: float | None = None
    # Set on a run restored from a checkpoint taken mid-round: the loop continues the
    # round (rounds is not counted again) from the observation it had last.
    resuming: bool = False
    pending: Observation | None = None
    # Names the subagent's jitter stream ("{seed}/{subtask id}"): a call of a turn that
    # runs beside others draws from its own stream named after it (subagents/turns/batch.py).
    jitter_key: str = ""

    @classmethod
    def for_subtask(
        cls, spec: SubtaskSpec, *, seed: object = 0, planner: Planner | None = None
    ) -> SubagentRun:
        """A fresh run: scripted planner, empty context, the subtask's own jitter stream."""
        return cls(
            spec=spec,
            planner=planner or ScriptedPlanner(list(spec.plan)),
            context=Context(
                spec.query, window=spec.context_window, active_tool_budget=spec.active_tool_budget
            ),
            rng=DeferredRandom(f"{seed}/{spec.id}"),
            jitter_key=f"{seed}/{spec.id}",
        )

    @property
    def finished(self) -> bool:
        """True once the subagent returned (done or escalated)."""
        return self.state in ("done", "escalated")

    def count_call(self, trace_id: str) -> int:
        """Count a logical call, with its trace id: its step number."""
        self.steps += 1
        self.trace_ids.append(trace_id)
        return self.steps

    def found(self, action: CallAction, result: ToolResult) -> None:
        """Keep an ok result as a finding (partial data marks the subtask incomplete)."""
        self.findings.append(Finding.from_result(result, action.args))
        if not result.complete and self.incomplete_tool is None:
            self.incomplete_tool = action.tool

    def result(self) -> SubagentResult:
        """The report the coordinator counts."""
        # Built from the loop's own typed state: copy a prototype, no validation (hot path).
        return RESULT_PROTOTYPE.model_copy(
            update={
                "subtask_id": self.spec.id,
                "findings": list(self.findings),
                "escalation": self.escalation,
                "incomplete": self.incomplete_tool is not None,
                "attempts": self.attempts,
                "steps": self.steps,
                "rounds": self.rounds,
                "started_s": self.started_s,
                "ended_s": self.ended_s,
                "trace_ids": list(self.trace_ids),
                "compactions": self.context.compactions,
            }
        )

    def attempted_query(self) -> str:
        """The query and the call that was being attempted, for a person to read."""
        call = self.in_flight or self.last_call
        if call is None:
            return self.spec.query
        args = json.dumps(call.args, separators=(",", ":"), ensure_ascii=False)
        return f"{self.spec.query} [{call.tool} {args}]"

    def escalate(
        self,
        trigger: Trigger,
        message: str,
        *,
        result: ToolResult | None = None,
        category: ErrorCategory | None = None,
        call: CallAction | None = None,
        detail: dict[str, Any] | None = None,
        alternatives: tuple[str, ...] = (),
        partial: tuple[Finding, ...] = (),
    ) -> Escalation:
        """Build, record and return this subagent's escalation: ``alternatives`` (a model's
        own) come first, then fanout's; ``partial`` joins ``partial_results`` unfound."""
        call = call or self.in_flight or self.last_call
        error = result.error if result is not None else None
        suggested = alternatives_for(
            trigger,
            self.spec,
            tool=call.tool if call else None,
            args=call.args if call else None,
            result=result,
            detail=detail,
        )
        escalation = Escalation(
            subtask_id=self.spec.id,
            category=error.category if error else category,
            error_type=error.error_type if error else None,
            retryable=bool(error and error.retryable and trigger == "retries_exhausted"),
            trigger=trigger,
            message=message,
            attempted_query=self.attempted_query(),
            partial_results=[*self.findings, *partial],
            alternatives=list(dict.fromkeys([*alternatives, *suggested])),
            attempts=self.attempts,
            trace_ids=list(self.trace_ids),
            field=error.field if error else None,
            expected=error.expected if error else None,
            tool=call.tool if call else None,
            step=call.step if call else None,
        )
        self.escalation = escalation
        return escalation


def crashed(run: SubagentRun, exc: Exception, now: float) -> Escalation:
    """Hand up a subagent whose planner, tools or loop raised: an ``internal_error``."""
    run.ended_s = now
    bug = f"{type(exc).__name__}: {exc}"
    return run.escalate(
        "internal_error", f"subagent crashed: {bug}", category="internal", detail={"message": bug}
    )


def cut_by_deadline(run: SubagentRun, now: float) -> Escalation:
    """Hand up what a subagent cut by the job deadline has found (trigger ``deadline``)."""
    run.ended_s = now
    run.state = "escalated"
    return run.escalate("deadline", "the job deadline passed before this subtask finished")
