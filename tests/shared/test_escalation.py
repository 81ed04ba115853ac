"""The escalation a subagent hands up: wire names and the trigger vocabulary."""

from __future__ import annotations

import pydantic
import pytest

from shared import TRIGGERS, Escalation, Finding


def _escalation() -> Escalation:
    return Escalation(
        subtask_id="patents",
        category="permission",
        error_type="forbidden",
        trigger="permission_denied",
        message="role analyst lacks patents:read",
        attempted_query="solid-state battery patents since 2024",
        partial_results=[Finding(tool="web_search", data={"results": ["x"]})],
        alternatives=["request patents:read for role analyst"],
        attempts=1,
        trace_ids=["tr_1"],
    )


def test_escalation_wire_uses_the_wire_names() -> None:
    """errorCategory and isRetryable appear under their wire names, with docs/design.md's fields."""
    wire = _escalation().to_wire()
    assert wire["errorCategory"] == "permission"
    assert wire["isRetryable"] is False
    assert "category" not in wire and "retryable" not in wire
    for key in ("subtask_id", "error_type", "trigger", "message", "attempted_query",
                "partial_results", "alternatives", "attempts", "trace_ids"):
        assert key in wire
    assert wire["partial_results"][0]["tool"] == "web_search"
    assert wire["partial_results"][0]["data"] == {"results": ["x"]}


def test_escalation_round_trips() -> None:
    """Validating an escalation's wire form gives back an equal escalation."""
    escalation = _escalation()
    assert Escalation.model_validate(escalation.to_wire()) == escalation


def test_escalation_without_category_is_allowed() -> None:
    """A trigger-only escalation (a human request) has a null errorCategory."""
    wire = Escalation(
        subtask_id="s", trigger="human_request", message="m", attempted_query="q"
    ).to_wire()
    assert wire["errorCategory"] is None


def test_triggers_are_the_design_vocabulary() -> None:
    """The trigger vocabulary is docs/design.md §2's list (model_refusal, cancelled, interrupted and
    no_evidence, answer_rejected, no_match and plan_rejected included)."""
    assert set(TRIGGERS) == {
        "retries_exhausted", "no_progress", "threshold_breach", "business_rule",
        "permission_denied", "unknown_state", "missing_policy", "human_request",
        "step_budget", "context_budget", "deadline", "incomplete_data", "internal_error",
        "interrupted", "model_refusal", "cancelled", "no_evidence", "answer_rejected",
        "no_match", "plan_rejected",
    }


def test_a_self_rated_confidence_is_not_a_trigger() -> None:
    """An escalation refuses a trigger outside the vocabulary."""
    with pytest.raises(pydantic.ValidationError):
        Escalation.model_validate(
            {"subtask_id": "s", "trigger": "low_confidence", "message": "m",
             "attempted_query": "q"}
        )
