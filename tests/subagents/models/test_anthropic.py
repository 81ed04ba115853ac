"""The Anthropic client against a loopback Messages API: request shape and turns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from subagents.models import (
    AnthropicClient,
    AssistantMessage,
    ModelRequest,
    ModelTurn,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TranscriptMessage,
    Usage,
    UserMessage,
)
from tests.loopback import AnthropicServer
from tests.loopback.anthropic_server import message, tool_use
from tests.subagents.models.conftest import KEY

pytestmark = pytest.mark.anyio

SEARCH = ToolSpec(
    name="web_search",
    description="Search the web.",
    input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
)


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture
async def client(anthropic_server: AnthropicServer) -> AsyncIterator[AnthropicClient]:
    """A client pointed at the loopback server."""
    client = AnthropicClient(
        name="claude-sonnet-4-6", api_key=KEY, base_url=anthropic_server.base_url, timeout_s=5
    )
    yield client
    await client.aclose()


def _round_trip_transcript() -> list[TranscriptMessage]:
    turn = ModelTurn(
        text="Searching twice.",
        calls=(
            ToolCall(id="toolu_1", name="web_search", arguments={"query": "market"}),
            ToolCall(id="toolu_2", name="web_search", arguments={"query": "patents"}),
        ),
        stop_reason="tool_use",
    )
    return [
        UserMessage("solid-state batteries"),
        AssistantMessage(turn),
        ToolResultMessage(call_id="toolu_1", name="web_search", content='{"ok":true}'),
        ToolResultMessage(
            call_id="toolu_2", name="web_search", content='{"ok":false}', is_error=True
        ),
    ]


async def test_a_tool_round_trip_sends_the_messages_api_shape(
    client: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """System on top, tools with input_schema, tool results as ONE user message with is_error."""
    anthropic_server.push(message("Done."))
    request = ModelRequest(
        system="You research.",
        messages=_round_trip_transcript(),
        tools=[SEARCH],
        max_tokens=321,
    )
    turn = await client.complete(request)
    assert (turn.text, turn.stop_reason) == ("Done.", "end_turn")
    sent = anthropic_server.requests[-1].json()
    assert sent["system"] == "You research."
    assert sent["model"] == "claude-sonnet-4-6"
    assert sent["max_tokens"] == 321
    assert sent["tools"] == [
        {
            "name": "web_search",
            "description": "Search the web.",
            "input_schema": SEARCH.input_schema,
        }
    ]
    assert "tool_choice" not in sent
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"] == [
        {"type": "text", "text": "Searching twice."},
        {"type": "tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "market"}},
        {"type": "tool_use", "id": "toolu_2", "name": "web_search", "input": {"query": "patents"}},
    ]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"ok":true}',
         "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": '{"ok":false}',
         "is_error": True},
    ]  # fmt: skip


async def test_a_forced_tool_is_sent_as_tool_choice(
    client: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """force_tool asks for that tool by name, and the tool_use comes back as a call."""
    plan = {"subtasks": [{"id": "market", "query": "market size"}]}
    anthropic_server.push(message(tool_uses=[tool_use("plan_subtasks", plan, id="toolu_9")]))
    request = ModelRequest(
        system="Plan.", messages=[UserMessage("q")], tools=[SEARCH], force_tool="plan_subtasks"
    )
    turn = await client.complete(request)
    assert anthropic_server.requests[-1].json()["tool_choice"] == {
        "type": "tool",
        "name": "plan_subtasks",
    }
    assert turn.calls == (ToolCall(id="toolu_9", name="plan_subtasks", arguments=plan),)
    assert turn.stop_reason == "tool_use"


async def test_tool_input_that_is_not_an_object_comes_back_raw(
    client: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """A tool_use whose input is not a JSON object is a call with raw_arguments, not a crash."""
    anthropic_server.push(message(tool_uses=[tool_use("web_search", ["not", "an", "object"])]))
    turn = await client.complete(ModelRequest(system="", messages=[UserMessage("q")]))
    assert turn.calls[0].arguments is None
    assert turn.calls[0].raw_arguments == '["not", "an", "object"]'


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        pytest.param("end_turn", "end_turn", id="end-turn"),
        pytest.param("stop_sequence", "end_turn", id="stop-sequence"),
        pytest.param("max_tokens", "max_tokens", id="max-tokens"),
        pytest.param("model_context_window_exceeded", "max_tokens", id="window-exceeded"),
        pytest.param("refusal", "refusal", id="refusal"),
    ],
)
async def test_stop_reasons_map_to_fanouts_four(
    client: AnthropicClient, anthropic_server: AnthropicServer, stop_reason: str, expected: str
) -> None:
    """Anthropic's stop reasons become end_turn, max_tokens or refusal; the text is kept."""
    anthropic_server.push(message("partial answer", stop_reason=stop_reason))
    turn = await client.complete(ModelRequest(system="", messages=[UserMessage("q")]))
    assert (turn.text, turn.stop_reason) == ("partial answer", expected)


async def test_usage_counts_every_input_token_cached_or_not(
    client: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """Input tokens are the sum of plain, cache-write and cache-read tokens."""
    anthropic_server.push(
        message(
            "ok",
            usage={
                "input_tokens": 10,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 1000,
                "output_tokens": 5,
            },
        )
    )
    turn = await client.complete(ModelRequest(system="", messages=[UserMessage("q")]))
    assert turn.usage == Usage(input_tokens=1110, output_tokens=5)


async def test_user_text_after_tool_results_joins_their_message(
    client: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """Roles alternate: a note after tool results is a text block after the tool_result ones."""
    transcript = [*_round_trip_transcript(), UserMessage("Context is nearly full.")]
    await client.complete(ModelRequest(system="", messages=transcript))
    sent = anthropic_server.requests[-1].json()
    assert "system" not in sent
    last = sent["messages"][-1]["content"]
    assert [block["type"] for block in last] == ["tool_result", "tool_result", "text"]


@pytest.mark.parametrize(
    ("temperature", "sent"),
    [pytest.param(0.0, None, id="default-not-sent"), pytest.param(0.7, 0.7, id="asked-for")],
)
async def test_temperature_travels_only_when_asked_for(
    client: AnthropicClient, anthropic_server: AnthropicServer, temperature: float, sent: Any
) -> None:
    """The SDK no longer has a temperature argument: a non-default one goes in the body."""
    request = ModelRequest(system="", messages=[UserMessage("q")], temperature=temperature)
    await client.complete(request)
    assert anthropic_server.requests[-1].json().get("temperature") == sent
