"""The closed vocabularies both sides speak: categories, next actions, triggers."""

from __future__ import annotations

from typing import Final, Literal, get_args

ErrorCategory = Literal["transient", "validation", "business", "permission", "internal"]
"""How a failure happened; the coordinator routes on it (docs/design.md §2)."""

NextSafeAction = Literal[
    "continue",
    "retry_with_backoff",
    "retry_with_smaller_input",
    "correct_input",
    "escalate",
    "stop_and_report",
    "verify_state_before_retry",
]
"""What a caller may safely do next with a result."""

Trigger = Literal[
    "retries_exhausted",
    "no_progress",
    "threshold_breach",
    "business_rule",
    "permission_denied",
    "unknown_state",
    "missing_policy",
    "human_request",
    "step_budget",
    "context_budget",
    "deadline",
    "incomplete_data",
    "internal_error",
    "interrupted",
    "model_refusal",
    "cancelled",
    # A model-planned subtask with tools ended without an ok envelope from any of them
    # (it answered in its own words, or said nothing): coverage is evidence (docs/design.md §7).
    "no_evidence",
    # The lead's answer failed its checks (an echo of the prompt, cut off, or citing
    # nothing while sources exist) and an extractive answer is shown instead (docs/design.md §7).
    "answer_rejected",
    # A search found passages, but the best of them does not answer its query (too few
    # of the query's weighted terms, or too far in meaning): found is not answered.
    "no_match",
    # A person rejected the lead's plan under review (docs/design.md §17): nothing ran.
    "plan_rejected",
]
"""The concrete condition that ended a subagent's work; never a self-rated confidence."""

ChangedState = bool | Literal["unknown"]

ERROR_CATEGORIES: Final[tuple[ErrorCategory, ...]] = get_args(ErrorCategory)
NEXT_SAFE_ACTIONS: Final[tuple[NextSafeAction, ...]] = get_args(NextSafeAction)
TRIGGERS: Final[tuple[Trigger, ...]] = get_args(Trigger)

RETRYABLE: Final[dict[ErrorCategory, bool]] = {
    "transient": True,
    "validation": False,
    "business": False,
    "permission": False,
    "internal": False,
}

DEFAULT_NEXT_ACTION: Final[dict[ErrorCategory, NextSafeAction]] = {
    "transient": "retry_with_backoff",
    "validation": "correct_input",
    "business": "escalate",
    "permission": "stop_and_report",
    "internal": "escalate",
}

TRANSIENT_ERROR_TYPES: Final[frozenset[str]] = frozenset(
    {"timeout", "unavailable", "connection_reset", "rate_limited"}
)
"""The transient error types of the scenario format (docs/design.md §5)."""

EFFECT_MAY_HAVE_HAPPENED: Final[frozenset[str]] = frozenset({"timeout", "connection_reset"})
"""Transient failures after which a side effect may or may not have taken place."""


def default_next_action(category: ErrorCategory, error_type: str | None = None) -> NextSafeAction:
    """The next safe action for a failure, as docs/design.md §2 tabulates it."""
    if category == "transient" and error_type == "timeout":
        return "retry_with_smaller_input"
    return DEFAULT_NEXT_ACTION[category]
