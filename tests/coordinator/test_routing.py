"""Routing escalations on errorCategory, and on the trigger when there is no category."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.routing import DEFAULT_ROUTES, Route, RoutingTable
from shared import ERROR_CATEGORIES, Escalation


def _escalation(category: Any, trigger: Any) -> Escalation:
    return Escalation(
        subtask_id="s", category=category, trigger=trigger, message="m", attempted_query="q"
    )


@pytest.mark.parametrize(
    ("category", "trigger", "route"),
    [
        pytest.param("transient", "retries_exhausted", "retry_later", id="transient"),
        pytest.param("validation", "no_progress", "gap", id="validation"),
        pytest.param("business", "threshold_breach", "escalate", id="business"),
        pytest.param("permission", "permission_denied", "escalate", id="permission"),
        pytest.param("internal", "internal_error", "escalate", id="internal"),
    ],
)
def test_default_routes(category: str, trigger: str, route: str) -> None:
    """Each category has docs/design.md §4's default route, and the trigger is kept."""
    decision = RoutingTable().route(_escalation(category, trigger))
    assert (decision.route, decision.trigger) == (route, trigger)


def test_every_category_has_a_default_route() -> None:
    """The default table covers the whole category vocabulary."""
    assert set(DEFAULT_ROUTES) == set(ERROR_CATEGORIES)


def test_an_override_replaces_one_route_only() -> None:
    """Overriding one category leaves the others on their defaults."""
    table = RoutingTable({"transient": "gap", "validation": "escalate"})
    assert table.route(_escalation("transient", "retries_exhausted")).route == "gap"
    assert table.route(_escalation("validation", "no_progress")).route == "escalate"
    assert table.route(_escalation("permission", "permission_denied")).route == "escalate"


def test_a_removed_route_is_a_missing_policy_escalation() -> None:
    """An override of None removes the category's route: escalate with missing_policy."""
    table = RoutingTable({"validation": None})
    decision = table.route(_escalation("validation", "no_progress"))
    assert (decision.route, decision.trigger) == ("escalate", "missing_policy")
    assert table.route(_escalation("transient", "retries_exhausted")).route == "retry_later"


@pytest.mark.parametrize(
    ("trigger", "route"),
    [
        pytest.param("human_request", "escalate", id="human_request"),
        pytest.param("step_budget", "gap", id="step_budget"),
        pytest.param("context_budget", "gap", id="context_budget"),
        pytest.param("deadline", "gap", id="deadline"),
        pytest.param("incomplete_data", "gap", id="incomplete_data"),
        pytest.param("no_progress", "escalate", id="unlisted-trigger"),
        pytest.param("internal_error", "escalate", id="unlisted-internal"),
    ],
)
def test_category_less_escalations_route_by_trigger(trigger: str, route: str) -> None:
    """Without a category the trigger decides; a trigger docs/design.md §4 does not list
    escalates."""
    decision = RoutingTable().route(_escalation(None, trigger))
    assert (decision.route, decision.trigger) == (route, trigger)


@pytest.mark.parametrize(
    "transient",
    [
        pytest.param("retry_later", id="retry_later"),
        pytest.param("gap", id="gap"),
        pytest.param(None, id="removed"),
    ],
)
def test_unknown_state_always_escalates(transient: Route | None) -> None:
    """A side effect in an unknown state goes to a person whatever transient's route is."""
    table = RoutingTable({"transient": transient})
    decision = table.route(_escalation("transient", "unknown_state"))
    assert (decision.route, decision.trigger) == ("escalate", "unknown_state")


def test_a_deadline_is_a_gap_even_with_a_category() -> None:
    """A subagent cut by the deadline is a gap, whatever category its last failure had."""
    decision = RoutingTable().route(_escalation("transient", "deadline"))
    assert (decision.route, decision.trigger) == ("gap", "deadline")
