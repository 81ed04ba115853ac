"""What a subagent is given: a subtask with its plan, allowlist, budgets and retry policy."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.categories import Trigger
from shared.clock import MAX_SECONDS
from subagents.retry import RetryPolicy

_SPEC = ConfigDict(frozen=True, extra="forbid")

# Frozen, so one default policy serves every subtask that sets none (100,000 subtasks
# used to carry 100,000 equal copies of it).
_DEFAULT_RETRY = RetryPolicy()

PARALLEL_CALLS = 4
"""How many calls of one model turn run at once unless a job says otherwise."""


class CallStep(BaseModel):
    """Call a tool; ``on_validation`` is merged into the arguments after a validation error."""

    model_config = _SPEC

    call: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    on_validation: dict[str, Any] | None = None


class EscalateStep(BaseModel):
    """Hand the subtask up on purpose (a question only a person can answer)."""

    model_config = _SPEC

    escalate: Trigger
    message: str | None = None


class FinishStep(BaseModel):
    """End the subtask with a written conclusion (a finding when not empty)."""

    model_config = _SPEC

    finish: str


PlanStep = CallStep | EscalateStep | FinishStep


class SubtaskSettings(BaseModel):
    """Budgets and retry policy; a job's ``defaults`` and each subtask's overrides."""

    model_config = _SPEC

    max_steps: int = Field(default=8, ge=0)
    context_window: int = Field(default=16000, gt=0)
    active_tool_budget: int = Field(default=2000, ge=0)
    tool_timeout_s: float = Field(default=30.0, gt=0, le=MAX_SECONDS)
    retry: RetryPolicy = Field(default_factory=lambda: _DEFAULT_RETRY)
    # How many calls of one model turn run at once (docs/design.md §7, "Parallel calls"); 1 runs
    # them one after another. Left out of dumps at its default, so stored specs and
    # recordings written before it stay as they were.
    parallel_calls: int = Field(
        default=PARALLEL_CALLS, ge=1, le=64, exclude_if=lambda v: v == PARALLEL_CALLS
    )


class SubtaskSpec(SubtaskSettings):
    """One subtask: a query, the tools it may use, the plan it follows, its budgets."""

    id: str = Field(min_length=1)
    query: str
    # Bounded so that any number of weights sums to a finite total (coverage stays a share).
    weight: float = Field(default=1.0, ge=0, le=MAX_SECONDS)
    tools: list[str] = Field(default_factory=list)
    plan: list[PlanStep] = Field(default_factory=list)
    # Who plans the subtask: its ``plan`` (scripted), or the job's model. The loader sets
    # it from whether the file gives a plan (docs/design.md §7: a subtask without plan is planned
    # by the job's model).
    planner: Literal["scripted", "model"] = "scripted"
    # The gap a lead's follow-up was planned for (docs/design.md §11); left out of dumps when
    # absent, so plans and recordings without follow-ups stay as they were.
    followup_of: str | None = Field(default=None, exclude_if=lambda v: v is None)
