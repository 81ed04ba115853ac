"""What a subagent reports: progress events as it works, and its result when it ends."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.envelope import Finding, ToolResult
from shared.escalation import Escalation

# "thinking": waiting on its model (a model-driven planner deciding the next step);
# "throttled": waiting for the model endpoint's rate limit (docs/design.md §13), not an attempt.
SubagentState = Literal[
    "queued", "running", "thinking", "throttled", "retrying", "done", "escalated"
]

# "answer.delta": a piece of the lead's answer as it is written (``text``, in order;
# ``restart`` when a retried call writes it again from the start); "answer": the
# checked answer (``text``; ``answer_kind`` model or extractive; ``reason`` why the
# model's was rejected), which replaces the streamed text (docs/design.md §8, "Streaming").
# "hint": a person's hint its model read before a turn (``text``, ``by``, ``turn``: the
# model turn that read it, 1 for its first; ``step``: the calls made before it);
# "hint.unread": one it never read, the round ending before its next turn (docs/design.md §17).
ProgressKind = Literal[
    "state", "call", "start", "attempt", "wait", "answer.delta", "answer", "hint", "hint.unread"
]


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """What a live display or a trace hears from a subagent."""

    subtask_id: str
    kind: ProgressKind
    at: float
    state: SubagentState | None = None
    tool: str | None = None
    attempt: int | None = None
    wait_s: float | None = None
    result: ToolResult | None = None
    step: int | None = None
    trigger: str | None = None
    # A call's arguments (``call`` events): for traces that capture content (docs/design.md §13);
    # the run store does not keep them here (the findings do).
    args: Mapping[str, Any] | None = None
    text: str | None = None
    restart: bool | None = None
    answer_kind: str | None = None
    reason: str | None = None
    by: str | None = None
    turn: int | None = None


ProgressObserver = Callable[[ProgressEvent], None]

LEAD = "lead"
"""The lead agent's subtask id: its progress events, trace, checkpoint, model turns and
gap go by it (it is no subtask of the job)."""


class SubagentResult(BaseModel):
    """What one subagent hands the coordinator: findings, escalation, counters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subtask_id: str
    findings: list[Finding] = Field(default_factory=list)
    escalation: Escalation | None = None
    incomplete: bool = False
    attempts: int = 0
    steps: int = 0
    rounds: int = 0
    started_s: float | None = None
    ended_s: float | None = None
    trace_ids: list[str] = Field(default_factory=list)
    compactions: int = 0


RESULT_PROTOTYPE = SubagentResult(subtask_id="")
