"""The model-driven planner in the loop: transcript, corrections, gate, compaction, resume."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from shared import AnyioClock, SeededTraceIds
from subagents.checkpoint import restore_run, snapshot_run
from subagents.loop import run_subagent
from subagents.models.base import (
    ModelRequest,
    ModelTurn,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from subagents.models.spec import ModelSpec
from subagents.planners.model import ModelPlanner
from subagents.result import SubagentResult
from subagents.retry import RetryPolicy
from subagents.run import SubagentRun
from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

pytestmark = pytest.mark.anyio

MODEL = ModelSpec(provider="scripted", retry=RetryPolicy(max_attempts=3, jitter="none"))
SEARCH = {
    "web_search": SimToolSpec(
        params={"query": ParamSpec(type="string")},
        responses=[ResponseSpec(ok={"results": ["IDTechEx: USD 9bn by 2034"]})],
    )
}


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


def call(name: str, args: dict[str, Any] | None, n: int, raw: str | None = None) -> ModelTurn:
    return ModelTurn(calls=(ToolCall(f"c{n}", name, args, raw),), stop_reason="tool_use")


def _spec(**settings: Any) -> SubtaskSpec:
    return SubtaskSpec(
        id="market",
        query="solid-state battery market",
        tools=["web_search"],
        planner="model",
        **settings,
    )


async def _run(
    client: FunctionModel,
    spec: SubtaskSpec | None = None,
    sim: dict[str, SimToolSpec] | None = None,
) -> tuple[SubagentResult, SubagentRun, SimulatedTools]:
    spec = spec or _spec()
    clock = AnyioClock()
    tools = SimulatedTools(sim or SEARCH, clock)
    run = SubagentRun.for_subtask(spec, planner=ModelPlanner(client, MODEL, spec.id))
    result = await run_subagent(
        run, tools.for_subtask(spec.id), clock=clock, trace_ids=SeededTraceIds(0)
    )
    return result, run, tools


def _results(request: ModelRequest) -> list[ToolResultMessage]:
    return [m for m in request.messages if isinstance(m, ToolResultMessage)]


async def test_a_validation_error_reaches_the_model_and_its_correction_succeeds() -> None:
    """The model sees the envelope naming the field as an error result; its fix runs."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if n == 1:
            return call("web_search", {"query": 42}, n)
        if n == 2:
            return call("web_search", {"query": "market size"}, n)
        return ModelTurn(text="USD 9bn by 2034 (web_search).")

    client = FunctionModel(answer)
    result, _, _tools = await _run(client)
    error = _results(client.requests[1])[0]
    envelope = json.loads(error.content)
    assert error.is_error and error.call_id == "c1"
    assert (envelope["errorCategory"], envelope["field"]) == ("validation", "query")
    assert result.escalation is None
    assert [f.tool for f in result.findings] == ["web_search", "model"]
    assert result.findings[-1].data == {"text": "USD 9bn by 2034 (web_search)."}


async def test_the_same_call_after_a_validation_error_is_not_sent() -> None:
    """Repeating a refused call verbatim ends the subagent with no_progress."""
    client = FunctionModel(lambda request, n: call("web_search", {"query": 42}, n))
    result, _, _ = await _run(client)
    assert result.escalation is not None
    assert result.escalation.trigger == "no_progress"
    assert len(client.requests) == 2


@pytest.mark.parametrize(
    ("turn", "field"),
    [
        pytest.param(call("google", {"q": "x"}, 1), "name", id="invented-tool"),
        pytest.param(call("web_search", None, 1, raw='{"query": '), "arguments", id="not-json"),
        pytest.param(
            call("escalate", {"trigger": "confident", "message": "sure"}, 1),
            "trigger",
            id="bad-escalate",
        ),
    ],
)
async def test_what_the_model_gets_wrong_never_executes(turn: ModelTurn, field: str) -> None:
    """An invented tool, non-JSON arguments or a bad escalate come back as validation."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if n == 1:
            return turn
        if n == 2:
            return call("web_search", {"query": "market"}, n)
        return ModelTurn(text="done")

    client = FunctionModel(answer)
    result, _, _ = await _run(client)
    envelope = json.loads(_results(client.requests[1])[0].content)
    assert (envelope["errorCategory"], envelope["field"]) == ("validation", field)
    # Only the corrected call ran: one finding from the tool, then the answer.
    assert [f.tool for f in result.findings] == ["web_search", "model"]
    assert result.escalation is None


async def test_answering_instead_of_correcting_is_no_progress() -> None:
    """A model that answers after a refused call keeps its text, but the gap says why."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        return call("web_search", {"query": 42}, n) if n == 1 else ModelTurn(text="no data")

    result, _, _ = await _run(FunctionModel(answer))
    assert result.escalation is not None and result.escalation.trigger == "no_progress"
    assert result.findings[0].data == {"text": "no data"}


async def test_the_calls_of_one_turn_run_in_order_before_the_model_is_asked_again() -> None:
    """Two calls in one turn are two logical calls, in order, then one more model call."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if n == 1:
            return ModelTurn(
                calls=(
                    ToolCall("a", "web_search", {"query": "first"}),
                    ToolCall("b", "web_search", {"query": "second"}),
                ),
                stop_reason="tool_use",
            )
        return ModelTurn(text="both seen")

    client = FunctionModel(answer)
    result, _, _ = await _run(client)
    assert [f.args for f in result.findings[:2]] == [{"query": "first"}, {"query": "second"}]
    assert [m.call_id for m in _results(client.requests[1])] == ["a", "b"]
    assert result.steps == 2 and len(client.requests) == 2


async def test_escalate_carries_the_models_alternatives() -> None:
    """The built-in escalate tool ends the subagent with the model's trigger and options."""
    args = {"trigger": "human_request", "message": "which currency?", "alternatives": ["USD"]}
    client = FunctionModel(lambda request, n: call("escalate", args, n))
    result, _, _ = await _run(client)
    assert result.escalation is not None
    assert result.escalation.trigger == "human_request"
    assert result.escalation.alternatives[0] == "USD"
    assert result.steps == 0


async def test_a_cut_off_answer_is_an_incomplete_finding() -> None:
    """Stop reason max_tokens keeps the text as a finding marked incomplete."""
    client = FunctionModel(
        lambda request, n: ModelTurn(text="Toyota targets", stop_reason="max_tokens")
    )
    result, _, _ = await _run(client)
    assert result.incomplete
    assert result.findings[0].complete is False


async def test_compaction_keeps_every_call_paired_with_its_result() -> None:
    """Old results shrink to summaries in the transcript; each call keeps its result."""
    big = {"results": [" ".join(f"{i}-{j}" for j in range(60)) for i in range(10)]}
    sim = {
        "web_search": SimToolSpec(
            params={"query": ParamSpec(type="string")}, responses=[ResponseSpec(ok=big)]
        )
    }

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        return call("web_search", {"query": f"q{n}"}, n) if n <= 8 else ModelTurn(text="done")

    client = FunctionModel(answer)
    spec = _spec(context_window=8000, active_tool_budget=1000, max_steps=10)
    result, run, _ = await _run(client, spec, sim)
    assert result.compactions >= 1
    last = client.requests[-1]
    results = _results(last)
    assert [m.call_id for m in results] == [f"c{n}" for n in range(1, 9)]
    assert any(m.content.startswith("[compacted]") for m in results)
    # The instructions and the query are pinned: never compacted.
    assert [m.kind for m in run.context.messages[:2]] == ["query", "system"]
    assert not results[-1].content.startswith("[compacted]")
    assert result.escalation is None


async def test_the_context_budget_stops_before_the_call() -> None:
    """When compaction cannot restore the margin the tool is not called."""
    # Each query differs: the same ok call a third time would be no_progress first.
    client = FunctionModel(lambda request, n: call("web_search", {"query": f"{n}" + "x" * 3000}, n))
    spec = _spec(context_window=4000, active_tool_budget=2000)
    result, _, _tools = await _run(client, spec)
    assert result.escalation is not None
    assert result.escalation.trigger == "context_budget"
    # The model proposed one call more than ran: the gate stopped it before the call.
    assert len(client.requests) == result.steps + 1
    assert len(result.findings) == result.steps


async def test_provider_usage_sets_the_count() -> None:
    """The provider's input token count replaces fanout's estimate of what was sent."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        return ModelTurn(text="done", usage=Usage(input_tokens=5000, output_tokens=3))

    client = FunctionModel(answer)
    _, run, _ = await _run(client)
    added = run.context.counter.count("done")
    assert run.context.tokens == 5000 + added


async def test_a_checkpoint_mid_turn_resumes_with_the_same_transcript() -> None:
    """A run restored from its checkpoint sends the model the transcript it had."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        return call("web_search", {"query": "market"}, n) if n == 1 else ModelTurn(text="ok")

    saved: list[dict[str, Any]] = []
    client = FunctionModel(answer)
    spec = _spec()
    clock = AnyioClock()
    tools = SimulatedTools(SEARCH, clock)
    run = SubagentRun.for_subtask(spec, planner=ModelPlanner(client, MODEL, spec.id))
    await run_subagent(
        run,
        tools.for_subtask(spec.id),
        clock=clock,
        trace_ids=SeededTraceIds(0),
        checkpoint=lambda r: saved.append(json.loads(json.dumps(snapshot_run(r)))),
    )
    again = FunctionModel(lambda request, n: ModelTurn(text="ok"))
    restored = restore_run(spec, saved[0], planner=ModelPlanner(again, MODEL, spec.id))
    result = await run_subagent(
        restored, tools.for_subtask(spec.id), clock=clock, trace_ids=SeededTraceIds(0)
    )
    assert result.escalation is None
    assert again.requests[0].messages == client.requests[1].messages
