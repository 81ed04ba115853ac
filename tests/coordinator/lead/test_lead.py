"""The lead agent: a plan checked like a file's, corrected once; a synthesis that sees every gap."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead import JobPlanning
from coordinator.replay import run_scenario
from coordinator.report import CoverageReport
from shared import AnyioClock
from subagents.models.base import (
    ModelCallFailed,
    ModelRequest,
    ModelTurn,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from subagents.result import ProgressEvent

pytestmark = pytest.mark.anyio

JOB = """\
scenario: lead
model: {provider: scripted, retry: {max_attempts: 2, jitter: none, initial_backoff_s: 1}}
job:
  query: "State of solid-state batteries"
  max_subtasks: 3
tools:
  web_search:
    description: "Search the web."
    params: {query: {type: string}}
    responses: [{ok: {results: ["USD 9bn by 2034"]}}]
  patent_db:
    description: "Search patents."
    params: {since: {type: string}}
    responses: [{error: permission, message: "role analyst lacks patents:read"}]
"""

GOOD = [
    {"id": "market", "query": "market size", "tools": ["web_search"]},
    {"id": "patents", "query": "patents since 2024", "tools": ["patent_db"]},
]


class FunctionModel:
    """A model client answering with a function of (request, n); records every request."""

    provider = "function"
    name = "function"

    def __init__(self, answer: Callable[[ModelRequest, int], ModelTurn]) -> None:
        self.answer = answer
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """Record and answer."""
        self.requests.append(request)
        return self.answer(request, sum(r.subtask_id == request.subtask_id for r in self.requests))

    async def aclose(self) -> None:
        """Nothing to close."""


def plan(subtasks: list[dict[str, Any]]) -> ModelTurn:
    return ModelTurn(
        calls=(ToolCall("plan1", "plan_subtasks", {"subtasks": subtasks}),), stop_reason="tool_use"
    )


def subagent(request: ModelRequest, n: int) -> ModelTurn:
    """Each subtask calls its one tool, then answers."""
    if n == 1:
        tool = "web_search" if request.subtask_id == "market" else "patent_db"
        args = {"query": "q"} if tool == "web_search" else {"since": "2024-01-01"}
        return ModelTurn(calls=(ToolCall("t1", tool, args),), stop_reason="tool_use")
    return ModelTurn(text=f"answer of {request.subtask_id}")


async def _run(
    answer: Callable[[ModelRequest, int], ModelTurn], events: list[ProgressEvent] | None = None
) -> tuple[CoverageReport, FunctionModel]:
    scenario = load_scenario_text(JOB, "lead.yaml")
    client = FunctionModel(answer)
    planning = JobPlanning(scenario, client=client)
    report = await run_scenario(
        scenario,
        clock=AnyioClock(),
        planning=planning,
        observer=None if events is None else events.append,
    )
    return report, client


def _lead(client: FunctionModel) -> list[ModelRequest]:
    return [r for r in client.requests if r.subtask_id == "lead"]


async def test_a_bad_plan_is_corrected_and_the_second_request_names_what_was_wrong() -> None:
    """An unknown tool and a duplicate id go back to the model; its second plan runs."""
    bad = [
        {"id": "market", "query": "market size", "tools": ["google"]},
        {"id": "market", "query": "again", "tools": ["web_search"]},
    ]

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id != "lead":
            return subagent(request, n)
        return {1: plan(bad), 2: plan(GOOD)}.get(n, ModelTurn(text="[market] USD 9bn."))

    report, client = await _run(answer)
    second = _lead(client)[1]
    feedback = [m for m in second.messages if isinstance(m, ToolResultMessage)]
    assert feedback and feedback[0].is_error
    errors = json.loads(feedback[0].content)["errors"]
    assert any("unknown tool 'google'" in e for e in errors)
    assert any("duplicate" in e and "'market'" in e for e in errors)
    assert second.force_tool == "plan_subtasks"
    assert [s.id for s in report.subtasks] == ["market", "patents"]
    # Cited by subtask id: shown as the number of that subtask's source.
    assert report.answer.text == "[1] USD 9bn."
    assert [(s.n, s.subtask) for s in report.answer.sources or []] == [(1, "market")]


async def test_a_plan_that_never_becomes_valid_degrades_to_the_question() -> None:
    """Two bad plans: the question runs as one subtask with every tool, the lead's gap
    stays visible with weight 0, and coverage is that of what was researched."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id == "lead":
            if n <= 2:
                return plan([{"id": "x", "query": "", "tools": []}])
            return ModelTurn(text="The market is known [question].")
        if n == 1:
            return ModelTurn(calls=(ToolCall("t1", "web_search", {"query": "q"}),))
        return ModelTurn(text="answer of the question")

    report, client = await _run(answer)
    assert [(s.id, s.weight, s.status) for s in report.subtasks] == [
        ("lead", 0.0, "gap"),
        ("question", 1.0, "complete"),
    ]
    assert [(g.subtask_id, g.trigger, g.route) for g in report.gaps] == [
        ("lead", "no_progress", "gap")
    ]
    asked = [r for r in client.requests if r.subtask_id == "question"]
    assert {t.name for t in asked[0].tools} == {"web_search", "patent_db", "escalate"}
    assert report.coverage == 1.0 and report.answer.missing[0].startswith("lead:")


async def test_a_lead_that_cannot_reach_its_model_fails_the_run() -> None:
    """Only a job that could research nothing at all ends failed: the question's model
    fails as the lead's did, and both gaps say so."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        raise ModelCallFailed("401 invalid key", kind="auth", category="permission")

    report, _ = await _run(answer)
    assert report.outcome == "failed" and report.coverage == 0
    assert [(g.subtask_id, g.trigger, g.route) for g in report.gaps] == [
        ("lead", "permission_denied", "gap"),
        ("question", "permission_denied", "escalate"),
    ]


async def test_the_synthesis_request_shows_every_gap_and_the_answer_is_the_models() -> None:
    """The lead sees each gap's subtask, trigger and alternatives; missing stays fanout's."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id != "lead":
            return subagent(request, n)
        return plan(GOOD) if n == 1 else ModelTurn(text="Only the market is known [market].")

    report, client = await _run(answer)
    prompt = _lead(client)[-1].messages[0]
    assert isinstance(prompt, UserMessage)
    assert "[patents] permission / permission_denied" in prompt.text
    assert "request patents:read for role analyst" in prompt.text
    assert "USD 9bn by 2034" in prompt.text
    assert report.answer.text == "Only the market is known [1]."
    assert report.answer.missing and "patents" in report.answer.missing[0]


async def test_a_failed_synthesis_leaves_the_report_whole() -> None:
    """A lead overloaded on every attempt: text null, synthesis_error set, gaps intact."""
    from subagents.models.base import ModelCallFailed

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id != "lead":
            return subagent(request, n)
        if n == 1:
            return plan(GOOD)
        raise ModelCallFailed("529 overloaded", kind="overloaded", category="transient", status=529)

    report, _ = await _run(answer)
    assert report.answer.text is None
    assert report.answer.synthesis_error is not None
    assert report.answer.synthesis_error["errorCategory"] == "transient"
    assert [g.subtask_id for g in report.gaps] == ["patents"]
    assert report.coverage == 0.5


async def test_the_leads_model_calls_are_traced_as_subtask_lead() -> None:
    """Decomposition, follow-up plan and synthesis attempts reach the observer with
    subtask_id lead (a lead asked for follow-ups that answers in words plans none)."""
    events: list[ProgressEvent] = []

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id != "lead":
            return subagent(request, n)
        return plan(GOOD) if n == 1 else ModelTurn(text="done [market]")

    report, _ = await _run(answer, events)
    lead = [e for e in events if e.subtask_id == "lead" and e.kind == "attempt"]
    assert [e.tool for e in lead] == ["model", "model", "model"]
    assert not any(s.followup_of for s in report.subtasks)
