"""What a model-planned subtask hands up when its model cannot go on (docs/design.md §7's table),
or when its job's token budget is spent."""

from __future__ import annotations

from shared.envelope import ToolResult
from subagents.models.spec import ModelSpec
from subagents.planners.base import EscalateAction

__all__ = ["budget_spent", "model_failure"]


def budget_spent(why: str) -> EscalateAction:
    """The hand-up of a subagent whose job has spent its token budget (less the reserve)."""
    return EscalateAction(
        "threshold_breach",
        f"the job's token budget is spent: {why}",
        category="business",
        alternatives=(
            "raise job.budget (fanout ask --budget) and run the job again",
            "narrow the question, so fewer subtasks share the budget",
        ),
    )


def model_failure(result: ToolResult, model: ModelSpec) -> EscalateAction:
    """The escalation a model call that failed for good leads to (docs/design.md §7's table)."""
    message = f"model: {result.message or 'the model call failed'}"
    name, provider = model.model_name, model.provider
    other = f"plan the subtask with another model (model.name, now {name!r}) or provider"
    if result.error_type == "context_length":
        # The transcript outgrew the model's window: a budget stop, not a fault.
        return EscalateAction(
            "context_budget",
            message,
            alternatives=(f"use a model with a larger context window than {name!r}",),
        )
    if result.category == "business":
        return EscalateAction(
            "threshold_breach",
            message,
            result=result,
            alternatives=(
                f"raise the {provider} account's quota or spend limit, or wait for it to reset",
                other,
            ),
        )
    if result.category == "validation":
        # Nothing the model can correct (no such model): a validation error with no
        # correction is no_progress; it routes as a gap.
        return EscalateAction(
            "no_progress",
            message,
            result=result,
            alternatives=(f"set model.name to a model {provider} serves (not {name!r})",),
        )
    if result.category == "permission":
        key = model.key_env or "the key variable"
        return EscalateAction(
            "permission_denied",
            message,
            result=result,
            alternatives=(f"set {key} to a {provider} key allowed to use {name!r}", other),
        )
    if result.category == "transient":
        return EscalateAction(
            "retries_exhausted",
            message,
            result=result,
            alternatives=(
                f"retry later: {provider} answered {result.error_type} "
                f"{result.attempts} times",
                f"raise model.retry.max_attempts (now {model.retry.max_attempts})",
                other,
            ),
        )
    return EscalateAction(
        "internal_error",
        message,
        result=result,
        alternatives=(f"report a bug in fanout's {provider} request: {result.message}",),
    )
