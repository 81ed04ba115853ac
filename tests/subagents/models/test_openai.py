"""The OpenAI-compatible client against a loopback chat completions API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from subagents.models import (
    AssistantMessage,
    ModelRequest,
    ModelTurn,
    OpenAIClient,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    TranscriptMessage,
    Usage,
    UserMessage,
)
from tests.loopback import OpenAIServer
from tests.loopback.openai_server import completion, tool_call
from tests.subagents.models.conftest import KEY

pytestmark = pytest.mark.anyio

SEARCH = ToolSpec(
    name="web_search",
    description="Search the web.",
    input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
)
ASK = ModelRequest(system="", messages=[UserMessage("q")])


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture
async def client(openai_server: OpenAIServer) -> AsyncIterator[OpenAIClient]:
    """A client pointed at the loopback server."""
    client = OpenAIClient(name="gpt-4.1", api_key=KEY, base_url=openai_server.base_url, timeout_s=5)
    yield client
    await client.aclose()


async def test_a_tool_round_trip_sends_the_chat_completions_shape(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """System first, assistant tool_calls, one role-tool message per result with its call id."""
    turn = ModelTurn(
        text="",
        calls=(
            ToolCall(id="call_1", name="web_search", arguments={"query": "market"}),
            ToolCall(id="call_2", name="web_search", arguments=None, raw_arguments="{broken"),
        ),
        stop_reason="tool_use",
    )
    transcript: list[TranscriptMessage] = [
        UserMessage("solid-state batteries"),
        AssistantMessage(turn),
        ToolResultMessage(call_id="call_1", name="web_search", content='{"isError":false}'),
        ToolResultMessage(
            call_id="call_2", name="web_search", content='{"isError":true}', is_error=True
        ),
    ]
    openai_server.push(completion("Done."))
    request = ModelRequest(
        system="You research.", messages=transcript, tools=[SEARCH], max_tokens=321
    )
    assert (await client.complete(request)).text == "Done."
    sent = openai_server.requests[-1].json()
    assert sent["messages"] == [
        {"role": "system", "content": "You research."},
        {"role": "user", "content": "solid-state batteries"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "web_search", "arguments": '{"query": "market"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "web_search", "arguments": "{broken"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"isError":false}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"isError":true}'},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "web_search",
                "description": "Search the web.",
                "parameters": SEARCH.input_schema,
            },
        }
    ]
    # A compatible server (not api.openai.com) gets the widely known max_tokens.
    assert sent["max_tokens"] == 321
    assert sent["temperature"] == 0
    assert "tool_choice" not in sent


async def test_a_forced_tool_is_sent_as_a_named_function(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """force_tool becomes tool_choice naming the function; its call comes back decoded."""
    openai_server.push(
        completion(tool_calls=[tool_call("plan_subtasks", {"subtasks": []}, id="call_7")])
    )
    turn = await client.complete(
        ModelRequest(system="Plan.", messages=[UserMessage("q")], force_tool="plan_subtasks")
    )
    assert openai_server.requests[-1].json()["tool_choice"] == {
        "type": "function",
        "function": {"name": "plan_subtasks"},
    }
    assert turn.calls == (ToolCall(id="call_7", name="plan_subtasks", arguments={"subtasks": []}),)
    assert turn.stop_reason == "tool_use"


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param('{"query": "market"', id="broken-json"),
        pytest.param('["market"]', id="a-list"),
        pytest.param('"market"', id="a-string"),
        pytest.param("null", id="null"),
    ],
)
async def test_arguments_that_are_not_a_json_object_come_back_raw(
    client: OpenAIClient, openai_server: OpenAIServer, arguments: str
) -> None:
    """Arguments that do not decode to an object are kept as raw text, never a crash."""
    openai_server.push(completion(tool_calls=[tool_call("web_search", arguments)]))
    call = (await client.complete(ASK)).calls[0]
    assert (call.arguments, call.raw_arguments) == (None, arguments)


@pytest.mark.parametrize(
    ("finish_reason", "refusal", "expected"),
    [
        pytest.param("stop", None, "end_turn", id="stop"),
        pytest.param("length", None, "max_tokens", id="length"),
        pytest.param("content_filter", None, "refusal", id="content-filter"),
        pytest.param("stop", "I can't help with that.", "refusal", id="refusal-field"),
    ],
)
async def test_finish_reasons_map_to_fanouts_four(
    client: OpenAIClient,
    openai_server: OpenAIServer,
    finish_reason: str,
    refusal: str | None,
    expected: str,
) -> None:
    """stop, length, content_filter and a message.refusal become the normalised stop reason."""
    content = None if refusal else "some text"
    openai_server.push(completion(content, finish_reason=finish_reason, refusal=refusal))
    turn = await client.complete(ASK)
    assert turn.stop_reason == expected
    assert turn.text == (refusal or "some text")


async def test_usage_is_read_and_may_be_absent(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """prompt/completion tokens become usage; a server that sends none gives None."""
    openai_server.push(
        completion("a", prompt_tokens=40, completion_tokens=2), completion("b", usage=False)
    )
    assert (await client.complete(ASK)).usage == Usage(input_tokens=40, output_tokens=2)
    assert (await client.complete(ASK)).usage is None


async def test_tool_calls_with_finish_reason_stop_are_still_tool_use(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """Some compatible servers say "stop" after tool calls: the turn is still tool_use."""
    openai_server.push(
        completion(tool_calls=[tool_call("web_search", {"query": "x"})], finish_reason="stop")
    )
    assert (await client.complete(ASK)).stop_reason == "tool_use"


def test_the_official_endpoint_gets_max_completion_tokens() -> None:
    """api.openai.com's reasoning models refuse max_tokens, so it gets max_completion_tokens."""
    official = OpenAIClient(name="gpt-4.1", api_key=KEY)
    gateway = OpenAIClient(name="llama3", api_key=KEY, base_url="http://localhost:11434/v1")
    assert official.max_tokens_param == "max_completion_tokens"
    assert gateway.max_tokens_param == "max_tokens"
