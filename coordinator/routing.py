"""Routing escalations on errorCategory (and, without one, on the trigger)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from shared.categories import ErrorCategory, Trigger
from shared.escalation import Escalation

Route = Literal["retry_later", "gap", "escalate"]

DEFAULT_ROUTES: Final[Mapping[ErrorCategory, Route]] = {
    "transient": "retry_later",
    "validation": "gap",
    "business": "escalate",
    "permission": "escalate",
    "internal": "escalate",
}

_TRIGGER_ROUTES: Final[Mapping[Trigger, Route]] = {
    "human_request": "escalate",
    "step_budget": "gap",
    "context_budget": "gap",
    "deadline": "gap",
    "incomplete_data": "gap",
    "interrupted": "gap",
    "cancelled": "gap",
    "model_refusal": "escalate",
    # Words without a tool's evidence are a gap in coverage, not a fault to page about.
    "no_evidence": "gap",
    # A rejected answer is replaced by the sources' own words: a gap, nothing to page about.
    "answer_rejected": "gap",
    "no_match": "gap",
    # A person's own choice: recorded as the run's gap, nobody to page.
    "plan_rejected": "gap",
}


class RoutingDecision(BaseModel):
    """Where an escalation goes, and the trigger the gap report shows for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    route: Route
    trigger: Trigger


class RoutingTable:
    """The default table with a job's overrides; ``None`` removes a category's route."""

    def __init__(self, overrides: Mapping[ErrorCategory, Route | None] | None = None) -> None:
        routes: dict[ErrorCategory, Route | None] = dict(DEFAULT_ROUTES)
        routes.update(overrides or {})
        self.routes = routes

    def route(self, escalation: Escalation) -> RoutingDecision:
        """Route ``escalation``: by category, else by trigger (docs/design.md §4)."""
        trigger = escalation.trigger
        if trigger == "unknown_state":
            # The world may have changed: never retried automatically, a person decides.
            return RoutingDecision(route="escalate", trigger=trigger)
        if trigger in ("deadline", "cancelled"):
            # Cut from outside (the job deadline, a person's cancel): whatever the subagent
            # was doing, it is a gap, never a retry or a page to a human.
            return RoutingDecision(route="gap", trigger=trigger)
        category = escalation.category
        if category is None:
            return RoutingDecision(route=_TRIGGER_ROUTES.get(trigger, "escalate"), trigger=trigger)
        route = self.routes.get(category)
        if route is None:
            return RoutingDecision(route="escalate", trigger="missing_policy")
        return RoutingDecision(route=route, trigger=trigger)


class EscalationHandler(Protocol):
    """Receives every escalation routed ``escalate`` (a person, a ticket, a privileged path)."""

    async def handle(self, escalation: Escalation) -> str | None:
        """Take charge of ``escalation``; return the alternative chosen, if any."""
        ...


class RecordingHandler:
    """The default handler: keeps the escalations; the report lists them."""

    def __init__(self) -> None:
        self.received: list[Escalation] = []

    async def handle(self, escalation: Escalation) -> str | None:
        """Record ``escalation``; choose nothing."""
        self.received.append(escalation)
        return None
