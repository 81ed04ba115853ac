"""A person's hint reaches the model at its next turn (docs/design.md §17): where it goes
in the transcript and what the loop records (each provider's wire:
tests/subagents/models/test_hints_wire.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from shared import AnyioClock, SeededTraceIds
from subagents.checkpoint import restore_run, snapshot_run
from subagents.loop import run_subagent
from subagents.models.base import (
    AssistantMessage,
    ModelClient,
    ModelRequest,
    ModelTurn,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from subagents.models.spec import ModelSpec
from subagents.planners import Hint, ScriptedPlanner, reads_hints
from subagents.planners.model import HINT_INTRO, ModelPlanner
from subagents.result import ProgressEvent, SubagentResult
from subagents.retry import RetryPolicy
from subagents.run import SubagentRun
from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

pytestmark = pytest.mark.anyio

SEARCH = {
    "web_search": SimToolSpec(
        params={"query": ParamSpec(type="string")},
        responses=[ResponseSpec(ok={"results": ["$150/kWh cell (2025)"]})],
    )
}
SPEC = SubtaskSpec(id="pricing", query="solid-state battery price", tools=["web_search"],
                   planner="model")
HINT = "cell-level prices in USD/kWh, please"


class FunctionModel:
    """A model client backed by a function of the request (the test seam, no HTTP)."""

    provider = "function"
    name = "function"

    def __init__(self, answer: Callable[[ModelRequest, int], ModelTurn]) -> None:
        self.answer = answer
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """Record the request and answer it."""
        self.requests.append(request)
        return self.answer(request, len(self.requests))

    async def aclose(self) -> None:
        """Nothing to close."""


def _search(n: int, query: str = "price") -> ModelTurn:
    return ModelTurn(calls=(ToolCall(f"c{n}", "web_search", {"query": query}),),
                     stop_reason="tool_use")


async def run_with_hints(
    client: ModelClient, hints: list[Hint], model: ModelSpec | None = None
) -> tuple[SubagentResult, SubagentRun, list[ProgressEvent]]:
    """``SPEC`` planned by ``client``; ``hints`` is what the person said so far (taken
    as the loop asks)."""
    clock = AnyioClock()
    events: list[ProgressEvent] = []
    model = model or ModelSpec(provider="scripted", retry=RetryPolicy(max_attempts=1))
    run = SubagentRun.for_subtask(SPEC, planner=ModelPlanner(client, model, SPEC.id))

    def take() -> list[Hint]:
        given = list(hints)
        hints.clear()
        return given

    result = await run_subagent(run, SimulatedTools(SEARCH, clock).for_subtask(SPEC.id),
                                clock=clock, trace_ids=SeededTraceIds(0),
                                observer=events.append, hints=take)
    return result, run, events


def _hints(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, UserMessage) and m.hint]


def _read(events: list[ProgressEvent]) -> list[tuple[Any, ...]]:
    return [(e.kind, e.text, e.by, e.turn, e.step) for e in events
            if e.kind in ("hint", "hint.unread")]


async def test_a_hint_given_during_a_turn_is_read_once_after_its_results() -> None:
    """A hint given while the model's first turn runs goes into the second request once,
    after the turn's tool result, and stays in the transcript once after that; the loop
    records it read at turn 2, after 1 call."""
    hints: list[Hint] = []

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if n == 1:
            hints.append(Hint(HINT, "ana"))
            return _search(n)
        if n == 2:
            return _search(n, "cell price USD/kWh")
        return ModelTurn(text="About $150/kWh per cell.")

    client = FunctionModel(answer)
    result, _, events = await run_with_hints(client, hints)
    assert [_hints(r) for r in client.requests] == [[], [HINT_INTRO + HINT],
                                                    [HINT_INTRO + HINT]]
    second = client.requests[1].messages
    assert [type(m) for m in second[-3:]] == [AssistantMessage, ToolResultMessage, UserMessage]
    assert _read(events) == [("hint", HINT, "ana", 2, 1)]
    assert result.escalation is None and result.steps == 2


async def test_hints_before_the_first_turn_follow_the_subtask_in_order() -> None:
    """Hints given before the model was first asked follow the subtask's query, oldest
    first, each read at turn 1 after no call."""
    hints = [Hint("first", "ana"), Hint("second", "bo")]
    client = FunctionModel(lambda request, n: ModelTurn(text="done"))
    _, _, events = await run_with_hints(client, hints)
    request = client.requests[0]
    assert [(type(m), getattr(m, "hint", None)) for m in request.messages] == [
        (UserMessage, False), (UserMessage, True), (UserMessage, True)]
    assert _hints(request) == [HINT_INTRO + "first", HINT_INTRO + "second"]
    assert _read(events) == [("hint", "first", "ana", 1, 0), ("hint", "second", "bo", 1, 0)]


async def test_a_hint_is_kept_by_a_checkpoint() -> None:
    """A restored planner's transcript still marks the hint as a person's, and counts the
    turns the model answered."""
    hints = [Hint(HINT, "ana")]

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        return _search(n) if n == 1 else ModelTurn(text="done")

    client = FunctionModel(answer)
    _, run, _ = await run_with_hints(client, hints)
    again = restore_run(SPEC, snapshot_run(run), planner=ModelPlanner(
        client, ModelSpec(provider="scripted"), SPEC.id))
    planner = again.planner
    assert isinstance(planner, ModelPlanner) and isinstance(run.planner, ModelPlanner)
    assert planner.entries == run.planner.entries
    assert planner.turns == run.planner.turns == 2
    assert [e.text for e in planner.entries if isinstance(e, UserMessage) and e.hint] == [
        HINT_INTRO + HINT]


def test_only_a_model_reads_hints() -> None:
    """A model planner reads hints; a scripted plan has no turn to read one at."""
    assert reads_hints(ModelPlanner(FunctionModel(lambda r, n: ModelTurn()),
                                    ModelSpec(provider="scripted"), "a"))
    assert not reads_hints(ScriptedPlanner([]))
