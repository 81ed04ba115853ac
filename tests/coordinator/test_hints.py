"""A person's hint to a running subtask reaches its model at the next turn, on the local
engine, end to end (docs/design.md §17): the desk, the flow, the loop, the transcript."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.lead.planning import JobPlanning
from coordinator.replay import replay, run_scenario
from coordinator.report import CoverageReport
from shared.clock import AnyioClock, run_in_virtual_time
from subagents.models.base import ModelRequest, ModelTurn, ToolResultMessage, UserMessage
from subagents.models.scripted import ScriptedModel
from subagents.planners.model import HINT_INTRO
from subagents.result import ProgressEvent

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
PERSON_HINT = LIBRARY / "person_hint.yaml"
HINT = ("The report needs cell-level prices in USD/kWh from 2025 sources; "
        "pack prices mislead.")


class RecordingModel(ScriptedModel):
    """The scripted model, keeping every request it is sent (what the model saw)."""

    def __init__(self, scenario: Scenario, clock: AnyioClock) -> None:
        assert scenario.model is not None
        super().__init__(scenario.model, clock=clock)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """Record ``request``, then answer it as the scripted model does."""
        self.requests.append(request)
        return await super().complete(request)


def _run(scenario: Scenario) -> tuple[CoverageReport, RecordingModel, list[ProgressEvent]]:
    """``scenario`` in virtual time: its report, its model's requests and its events."""
    seen: dict[str, Any] = {}
    events: list[ProgressEvent] = []

    async def main() -> CoverageReport:
        clock = AnyioClock()
        model = seen["model"] = RecordingModel(scenario, clock)
        planning = JobPlanning(scenario, clock=clock, client=model)
        return await run_scenario(scenario, clock=clock, planning=planning,
                                  observer=events.append)

    report = run_in_virtual_time(main)
    return report, seen["model"], events


def _edited(path: Path, **changes: Any) -> Scenario:
    """The library's ``path`` with top-level keys replaced (None: removed)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return load_scenario_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                              str(path))


def _hints(request: ModelRequest) -> list[UserMessage]:
    return [m for m in request.messages if isinstance(m, UserMessage) and m.hint]


def _kinds(events: list[ProgressEvent], *kinds: str) -> list[ProgressEvent]:
    return [e for e in events if e.kind in kinds]


def test_a_hint_reaches_the_models_next_turn_exactly_once() -> None:
    """A hint given while pricing's first search runs is in the next request its model
    receives, once, after the search's result, saying a person speaks; the request before
    has none, the one after keeps it once as history; a hint event records the turn."""
    report, model, events = _run(load_scenario(PERSON_HINT))
    first, second, third = (r for r in model.requests if r.subtask_id == "pricing")
    assert _hints(first) == []
    assert [m.text for m in _hints(second)] == [HINT_INTRO + HINT]
    assert isinstance(second.messages[-2], ToolResultMessage)
    assert second.messages[-1] == _hints(second)[0]
    assert [m.text for m in _hints(third)] == [HINT_INTRO + HINT]
    assert sum(HINT in getattr(m, "text", "") for m in second.messages) == 1
    read = _kinds(events, "hint", "hint.unread")
    assert [(e.kind, e.subtask_id, e.at, e.turn, e.step, e.by, e.text) for e in read] == [
        ("hint", "pricing", 1.5, 2, 1, "scenario", HINT)]
    assert report.subtasks[0].steps == 2


def test_the_hint_scenario_replays_byte_identically_and_passes() -> None:
    """person_hint.yaml meets its expect block, and two replays give the same bytes (the
    hint read at the same virtual time, the same turn each time)."""
    first, second = (replay(load_scenario(PERSON_HINT)) for _ in range(2))
    assert first.passed, first.mismatches
    assert json.dumps(first.report) == json.dumps(second.report)


def test_without_the_hint_the_model_answers_from_its_first_search() -> None:
    """The same scenario without its person: the second turn answers at once, so the hint
    is what made the model search again for cell prices."""
    report, model, events = _run(_edited(PERSON_HINT, people=None, expect=None))
    assert not any(_hints(r) for r in model.requests)
    assert _kinds(events, "hint", "hint.unread") == []
    (pricing,) = report.subtasks
    assert (pricing.status, pricing.steps, pricing.findings) == ("complete", 1, 2)


def test_a_hint_after_the_last_turn_is_recorded_unread() -> None:
    """A hint given while the model writes its final answer is never read: the round ends
    first, and a hint.unread event says so (it is not kept for a later round)."""
    scenario = _edited(
        PERSON_HINT,
        model={"provider": "scripted", "latency_s": 1,
               "turns": {"pricing": [{"text": "About $150/kWh (2026)."}]}},
        job={"query": "q", "escalations": {"wait_s": 60},
             "subtasks": [{"id": "pricing", "query": "price", "tools": []}]},
        people=[{"after_s": 0.5, "request": {"subtask": "pricing", "hint": "in USD"}}],
        expect=None,
    )
    report, model, events = _run(scenario)
    assert [_hints(r) for r in model.requests] == [[]]
    unread = _kinds(events, "hint", "hint.unread")
    assert [(e.kind, e.at, e.text, e.by, e.turn) for e in unread] == [
        ("hint.unread", 1.0, "in USD", "scenario", None)]
    assert report.subtasks[0].status == "complete"


def test_a_hint_to_a_scripted_plan_is_refused_and_said(caplog: pytest.LogCaptureFixture) -> None:
    """A subtask that follows a scripted plan has no model turn to read a hint at: the
    scenario's request is refused (a warning names the step), nothing is recorded as read,
    and the plan runs as written."""
    scenario = _edited(
        PERSON_HINT,
        model=None,
        job={"query": "q", "escalations": {"wait_s": 60}, "subtasks": [
            {"id": "pricing", "query": "price", "tools": ["web_search"],
             "plan": [{"call": "web_search", "args": {"query": "solid-state battery price"}}]}]},
        people=[{"after_s": 0.2, "request": {"subtask": "pricing", "hint": "in USD"}}],
        expect=None,
    )
    events: list[ProgressEvent] = []

    async def main() -> CoverageReport:
        return await run_scenario(scenario, observer=events.append)

    with caplog.at_level(logging.WARNING, logger="fanout.people"):
        report = run_in_virtual_time(main)
    assert _kinds(events, "hint", "hint.unread") == []
    assert report.subtasks[0].status == "complete"
    said = [r.getMessage() for r in caplog.records if r.name == "fanout.people"]
    assert len(said) == 1 and "people[0]" in said[0] and "scripted plan" in said[0]
