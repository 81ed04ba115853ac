"""The service's person at a run (docs/design.md §17): a desk for each run whose job lets
people decide, its events on the run's stream.

``fanout serve``'s people come and go, so a served run gets a
:class:`~coordinator.people.Desk` when its job sets ``escalations`` (its escalations
wait for a decision) or ``review_plan`` (its plan waits for review). The desk runs on
the run's clock with the wall time (a decision's ``at``), goes to the executor in the
run's :class:`~coordinator.engine.run.Hooks`, and lives in the run manager's registry
(``LiveRun.desk``) while the run does. Runs execute on uvicorn's event loop, the one the
request handlers run on, so a handler calls the desk directly: no hand-over between
threads is needed.

An escalation's ``decision.needed`` and ``decision.made`` are recorded in the store as
events of its subtask (``coordinator/engine/recorded.py``), so the stream sends them as
stored events; the plan's and a request's stay live notes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from coordinator.jobfile.scenario import Scenario
from coordinator.people import DECISION_MADE, DECISION_NEEDED, Desk
from coordinator.serve.events import EventLog, note_frame
from shared.clock import Clock

__all__ = ["NOTHING_WAITS", "desk_for", "recorded", "wants_a_person"]

NOTHING_WAITS: dict[str, Any] = {"escalations": [], "plan": None}
"""``GET /runs/{id}/pending`` of a run where nothing waits (or no person is attached)."""


def wants_a_person(scenario: Scenario) -> bool:
    """Whether a served run of ``scenario`` gets a desk: its job sets ``escalations`` or
    ``review_plan``."""
    job = scenario.job
    return job.escalations is not None or job.review_plan


def _wall() -> datetime:
    return datetime.now(UTC)


def desk_for(scenario: Scenario, clock: Clock, log: EventLog) -> tuple[Desk, Callable[[], None]]:
    """A desk for a served run of ``scenario`` on ``clock``, whose events not recorded
    in the store go to ``log`` as live notes; and what stops them (when the run ends)."""
    desk = Desk(clock, wall=_wall)

    def heard(event: str, data: dict[str, Any]) -> None:
        if recorded(event, data):
            return  # a stored event: the stream has it from the recorder
        log.note(note_frame(event, data))

    return desk, desk.listen(heard)


def recorded(event: str, data: dict[str, Any]) -> bool:
    """Whether the desk's event is one the run store records (an escalation's)."""
    return ((event == DECISION_NEEDED and "escalation" in data)
            or (event == DECISION_MADE and "decision" in data))
