"""Plain words for the wire's vocabulary, for views a person reads.

``permission_denied``, ``incomplete_data`` or ``end_turn`` are what programs match on
(``--json``, the trace, the gap table of the HTML report keep them); a newcomer reading the
demo's answer or its live view gets ``access denied``, ``partial data``, ``answered``.
One table, so every view says the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "failure_words",
    "gap_line",
    "gap_words",
    "model_words",
    "route_words",
    "trigger_words",
]

_TRIGGERS = {
    "retries_exhausted": "failed after retries",
    "no_progress": "made no progress",
    "threshold_breach": "hit a limit",
    "business_rule": "refused by a business rule",
    "permission_denied": "access denied",
    "unknown_state": "unknown whether it took effect",
    "missing_policy": "no rule for this case",
    "human_request": "asked for a person",
    "step_budget": "ran out of steps",
    "context_budget": "ran out of context",
    "deadline": "deadline reached",
    "incomplete_data": "partial data",
    "internal_error": "internal error",
    "interrupted": "interrupted",
    "model_refusal": "the model refused",
    "cancelled": "cancelled",
    "no_evidence": "no tool gave evidence",
    "answer_rejected": "answer rejected",
}
_ROUTES = {
    "escalate": "handed to a person",
    "gap": "left open",
    "retry_later": "to retry later",
}
_CATEGORIES = {
    "transient": "a temporary failure",
    "validation": "invalid input",
    "business": "a business rule",
    "permission": "no permission",
    "internal": "an internal error",
}
_ERRORS = {
    "timeout": "timed out",
    "unavailable": "unavailable",
    "connection_reset": "connection reset",
    "rate_limited": "rate limited",
    "overloaded": "overloaded",
    "forbidden": "access denied",
    "not_found": "not found",
    "invalid_input": "invalid input",
    "bad_request": "bad request",
    "context_length": "too long for the model",
}
# The triggers whose words say nothing of how the tool failed: their category is added.
_NEEDS_CATEGORY = frozenset({"retries_exhausted", "no_progress", "missing_policy"})
_STOPS = {
    "end_turn": "answered",
    "stop": "answered",
    "max_tokens": "answer cut off",
    "length": "answer cut off",
    "refusal": "refused",
}


def trigger_words(trigger: object) -> str:
    """What ended a subtask's work, in plain words (an unknown trigger: itself, spaced)."""
    return _TRIGGERS.get(str(trigger), str(trigger).replace("_", " "))


def route_words(route: object) -> str:
    """Where a gap went: handed to a person, left open, to retry later."""
    return _ROUTES.get(str(route), str(route).replace("_", " "))


def gap_words(category: object, trigger: object) -> str:
    """A gap's cause: its trigger's words, with its category's where they add to them."""
    words = trigger_words(trigger)
    if category and str(trigger) in _NEEDS_CATEGORY:
        words += f" ({_CATEGORIES.get(str(category), str(category))})"
    return words


def failure_words(category: object, error_type: object) -> str:
    """A failed attempt: ``access denied``, ``timed out``, ``rate limited``…"""
    if error_type and str(error_type) in _ERRORS:
        return _ERRORS[str(error_type)]
    if error_type:
        return str(error_type).replace("_", " ")
    return _CATEGORIES.get(str(category), str(category))


def model_words(data: Mapping[str, Any]) -> str:
    """What a model call that succeeded did: the tools it called, or how it answered."""
    calls = [str(c.get("name", "?")) for c in data.get("calls") or []]
    if calls:
        return "model → " + ", ".join(calls)
    stop = str(data.get("stop_reason") or "end_turn")
    return "model " + _STOPS.get(stop, f"stopped ({stop})")


def gap_line(gap: Mapping[str, Any]) -> str:
    """A gap (its wire form) in one line: "access denied → handed to a person: role
    analyst lacks patents:read"."""
    cause = gap_words(gap.get("errorCategory"), gap.get("trigger"))
    decided = f" (decided: kept, {gap['decided']})" if gap.get("decided") else ""
    return f"{cause} → {route_words(gap.get('route'))}: {gap.get('message', '')}{decided}"
