"""A person's hint on each provider's wire (docs/design.md §17): the conversation the
loopback Anthropic and OpenAI servers receive stays valid, the hint in it once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from subagents.models.anthropic import AnthropicClient
from subagents.models.openai import OpenAIClient
from subagents.models.spec import ModelSpec
from subagents.planners import Hint
from subagents.planners.model import HINT_INTRO
from tests.loopback import AnthropicServer, OpenAIServer
from tests.loopback._server import RecordedRequest, Reply
from tests.loopback.anthropic_server import message, tool_use
from tests.loopback.openai_server import completion, tool_call
from tests.subagents.models.conftest import KEY
from tests.subagents.planners.test_hints import HINT, SPEC, run_with_hints

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture
async def anthropic(anthropic_server: AnthropicServer) -> AsyncIterator[AnthropicClient]:
    """A client of the loopback Messages API."""
    client = AnthropicClient(name="claude-sonnet-4-6", api_key=KEY,
                             base_url=anthropic_server.base_url, timeout_s=5)
    yield client
    await client.aclose()


@pytest.fixture
async def openai(openai_server: OpenAIServer) -> AsyncIterator[OpenAIClient]:
    """A client of the loopback chat completions API."""
    client = OpenAIClient(name="gpt-4.1", api_key=KEY, base_url=openai_server.base_url,
                          timeout_s=5)
    yield client
    await client.aclose()


def _given(hints: list[Hint], reply: Reply) -> Callable[[RecordedRequest], Reply]:
    """A reply that gives the hint while the model's turn runs."""

    def answer(request: RecordedRequest) -> Reply:
        hints.append(Hint(HINT, "ana"))
        return reply

    return answer


def _roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


async def test_anthropic_gets_the_hint_in_the_tool_results_user_turn(
    anthropic: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """On the Messages API the hint after a tool result joins the same user message, as a
    text block after the tool_result block, so user and assistant still alternate."""
    hints: list[Hint] = []
    anthropic_server.push(
        _given(hints, message(tool_uses=[tool_use("web_search", {"query": "price"})])),
        message("About $150/kWh per cell."))
    result, _, _ = await run_with_hints(anthropic, hints, ModelSpec(provider="anthropic"))
    assert result.escalation is None
    body = anthropic_server.requests[1].json()
    assert _roles(body) == ["user", "assistant", "user"]
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert last[1]["text"] == HINT_INTRO + HINT
    assert json.dumps(body).count(HINT) == 1
    assert HINT not in json.dumps(anthropic_server.requests[0].json())


async def test_anthropic_gets_a_first_turn_hint_in_the_subtasks_message(
    anthropic: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """A hint before the first turn is a second text block of the first user message."""
    anthropic_server.push(message("done"))
    await run_with_hints(anthropic, [Hint(HINT, "ana")], ModelSpec(provider="anthropic"))
    body = anthropic_server.requests[0].json()
    assert _roles(body) == ["user"]
    assert [b["text"] for b in body["messages"][0]["content"]] == [SPEC.query,
                                                                  HINT_INTRO + HINT]


async def test_openai_gets_the_hint_as_a_user_message_after_the_tool_messages(
    openai: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """On chat completions the hint is a user message after the turn's tool message (a
    tool message answers every tool call first, as the API requires)."""
    hints: list[Hint] = []
    openai_server.push(
        _given(hints, completion(tool_calls=[tool_call("web_search", {"query": "price"})])),
        completion("About $150/kWh per cell."))
    result, _, _ = await run_with_hints(openai, hints, ModelSpec(provider="openai"))
    assert result.escalation is None
    body = openai_server.requests[1].json()
    assert _roles(body) == ["system", "user", "assistant", "tool", "user"]
    assert body["messages"][-1]["content"] == HINT_INTRO + HINT
    assert json.dumps(body).count(HINT) == 1


async def test_openai_gets_a_first_turn_hint_in_the_subtasks_message(
    openai: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """A hint before the first turn joins the subtask's user message: chat templates that
    insist on alternating roles take the conversation."""
    openai_server.push(completion("done"))
    await run_with_hints(openai, [Hint(HINT, "ana")], ModelSpec(provider="openai"))
    body = openai_server.requests[0].json()
    assert _roles(body) == ["system", "user"]
    assert body["messages"][1]["content"] == f"{SPEC.query}\n\n{HINT_INTRO}{HINT}"
