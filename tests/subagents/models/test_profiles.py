"""Server profiles: every quirk of docs/design.md §7's list, through the openai SDK on loopback."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shared.clock import AnyioClock
from subagents.models import (
    AssistantMessage,
    ModelCallFailed,
    ModelRequest,
    ModelTurn,
    OpenAIClient,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from subagents.models.call import call_model
from subagents.models.compat.profiles import text_tool_calls
from subagents.models.spec import ModelSpec
from tests.loopback import OpenAIServer
from tests.loopback._server import RecordedRequest, Reply
from tests.loopback.openai_server import completion, error, tool_call
from tests.subagents.models.conftest import KEY

pytestmark = pytest.mark.anyio

SEARCH = ToolSpec(
    name="web_search",
    description="Search the web.",
    input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
)
CALLED = ModelTurn(
    calls=(ToolCall("call_1", "web_search", {"query": "market"}),), stop_reason="tool_use"
)
FOLLOW_UP = ModelRequest(
    system="You research.",
    messages=[
        UserMessage("battery market?"),
        AssistantMessage(CALLED),
        ToolResultMessage("call_1", "web_search", '{"ok":true}'),
    ],
    tools=[SEARCH],
)
# What llama-cpp-python answered on 2026-12-01 for `content: null` beside tool calls.
LLAMA_REFUSAL = (
    "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
    "string', 'input': None}"
)


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture
async def client(openai_server: OpenAIServer) -> AsyncIterator[OpenAIClient]:
    """An ``auto`` client on the loopback server (which says what it is per test)."""
    client = OpenAIClient(name="gemma", api_key=KEY, base_url=openai_server.base_url, timeout_s=5)
    yield client
    await client.aclose()


def _messages(request: RecordedRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = request.json()["messages"]
    return messages


def _like_llama_cpp_python(request: RecordedRequest) -> Reply:
    """Refuses a null assistant content with llama-cpp-python's 500, else answers."""
    for message in _messages(request):
        if message["role"] == "assistant" and message.get("content") is None:
            return error(500, LLAMA_REFUSAL, type="internal_server_error")
    return completion("fine")


def _without_system_role(request: RecordedRequest) -> Reply:
    """A chat template that knows no system role (Gemma 2's, Mistral's)."""
    if any(m["role"] == "system" for m in _messages(request)):
        return error(500, "jinja2.exceptions.TemplateError: System role not supported")
    return completion("fine")


@pytest.mark.parametrize("owned_by", ["me", "llamacpp", None, "library", "organization_owner"])
async def test_content_null_is_never_sent_where_it_is_refused(
    client: OpenAIClient, openai_server: OpenAIServer, owned_by: str | None
) -> None:
    """Every non-official profile sends "" beside tool calls; the server accepts it."""
    openai_server.owned_by = owned_by
    openai_server.push(_like_llama_cpp_python)
    turn = await client.complete(FOLLOW_UP)
    assert turn.text == "fine" and len(openai_server.requests) == 1
    assistant = next(m for m in _messages(openai_server.requests[0]) if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_1"


async def test_llama_cpp_python_gets_instructions_and_tools_in_the_first_user_message(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """Its chat formats drop the system role and render no tools: both are folded into
    the first user message, tools with the text format fanout reads back as calls."""
    openai_server.owned_by = "me"
    await client.complete(FOLLOW_UP)
    messages = _messages(openai_server.requests[0])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    first = messages[0]["content"]
    assert first.startswith("You research.\n\nYou can call these tools.")
    assert "- web_search: Search the web." in first and first.endswith("battery market?")


async def test_the_official_form_keeps_content_null(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """A server that says it is OpenAI gets the official form: null beside tool calls."""
    await client.complete(FOLLOW_UP)
    assert _messages(openai_server.requests[0])[2]["content"] is None
    assert (await client.server_profile()).name == "openai"


async def test_the_model_list_is_asked_once(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """auto asks GET /models once per client, whatever the number of calls."""
    openai_server.owned_by = "vllm"
    for _ in range(3):
        await client.complete(FOLLOW_UP)
    assert [r.path for r in openai_server.side_requests] == ["/v1/models"]
    assert (await client.server_profile()).name == "vllm"


async def test_a_shape_refusal_is_sent_once_more_in_the_strictest_form_and_kept(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """A template without a system role refuses once; the strict form folds the system
    prompt into the first user message, and later calls use it at once."""
    openai_server.owned_by = "vllm"
    openai_server.push(_without_system_role, _without_system_role, _without_system_role)
    assert (await client.complete(FOLLOW_UP)).text == "fine"
    assert (await client.complete(FOLLOW_UP)).text == "fine"
    assert len(openai_server.requests) == 3  # refused, strict, strict
    first_user = _messages(openai_server.requests[1])[0]
    assert first_user["role"] == "user"
    assert first_user["content"].startswith("You research.\n\nbattery market?")
    assert (await client.server_profile()).name == "strict"


@pytest.mark.parametrize("status", [400, 422, 500])
async def test_a_request_refused_for_its_shape_is_internal_and_never_retried(
    openai_server: OpenAIServer, status: int
) -> None:
    """Whatever status the server chose, a refused shape is fanout's bug: internal, one
    request in the form asked for (no fallback for an explicit profile), no retry."""
    openai_server.owned_by = "me"
    openai_server.push(*[error(status, LLAMA_REFUSAL)] * 5)
    client = OpenAIClient(
        name="gemma", api_key=KEY, base_url=openai_server.base_url, profile="llama-cpp-python"
    )
    spec = ModelSpec(provider="openai", name="gemma", retry={"max_attempts": 4})
    try:
        result, turn = await call_model(
            client, FOLLOW_UP, spec=spec, clock=AnyioClock(), rng=random.Random(0),
            trace_id="tr_1",
        )
    finally:
        await client.aclose()
    assert turn is None and result.category == "internal" and result.error_type == "bad_request"
    assert result.attempts == 1 and len(openai_server.requests) == 1


async def test_auto_tries_the_strict_form_once_then_gives_up(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """Under auto a shape refusal costs at most one more request, never a retry loop."""
    openai_server.owned_by = None
    openai_server.push(*[error(500, LLAMA_REFUSAL)] * 5)
    with pytest.raises(ModelCallFailed) as caught:
        await client.complete(FOLLOW_UP)
    assert (caught.value.kind, caught.value.category) == ("bad_request", "internal")
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param([None, None], id="missing"),
        pytest.param(["", ""], id="empty"),
        pytest.param(["call_0", "call_0"], id="repeated-in-the-turn"),
        pytest.param(["call_1", "call_9"], id="repeated-from-the-transcript"),
    ],
)
async def test_tool_call_ids_fanout_cannot_use_are_minted(
    client: OpenAIClient, openai_server: OpenAIServer, ids: list[str | None]
) -> None:
    """Every call of a turn gets an id unique in the transcript; good ids are kept."""
    openai_server.owned_by = "library"
    calls = [tool_call("web_search", {"query": f"q{n}"}) for n in range(2)]
    for call, id_ in zip(calls, ids, strict=True):
        if id_ is None:
            del call["id"]
        else:
            call["id"] = id_
    openai_server.push(completion(None, tool_calls=calls))
    turn = await client.complete(FOLLOW_UP)
    got = [c.id for c in turn.calls]
    assert len(set(got)) == 2 and "call_1" not in got and all(got)
    if ids == ["call_1", "call_9"]:
        assert got[1] == "call_9"


async def test_arguments_as_an_object_finish_reason_and_no_usage_are_normalised(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """An arguments object, finish_reason stop / null / other beside calls, no usage."""
    openai_server.owned_by = "library"
    for finish in ("stop", None, "eos"):
        call = {"id": "x1", "type": "function",
                "function": {"name": "web_search", "arguments": {"query": "q"}}}
        reply = completion(None, tool_calls=[call], usage=False)
        reply.body["choices"][0]["finish_reason"] = finish
        del reply.body["choices"][0]["message"]["content"]
        openai_server.push(reply)
        turn = await client.complete(ModelRequest(system="", messages=[UserMessage("q")]))
        assert turn.stop_reason == "tool_use" and turn.usage is None and turn.text == ""
        assert turn.calls[0].arguments == {"query": "q"}


async def test_a_named_tool_choice_is_asked_in_words_where_it_is_not_honoured(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """llama.cpp's server: no named tool_choice; the last user message asks for the tool."""
    openai_server.owned_by = "llamacpp"
    await client.complete(ModelRequest(
        system="Plan.", messages=[UserMessage("the question")], tools=[SEARCH],
        force_tool="web_search",
    ))
    body = openai_server.requests[0].json()
    assert "tool_choice" not in body
    asked = body["messages"][-1]["content"]
    assert asked.endswith("one call of the tool `web_search` (not with text).")


async def test_a_named_tool_choice_is_sent_where_it_is_honoured(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """llama-cpp-python and vLLM constrain the answer to the named tool."""
    openai_server.owned_by = "me"
    await client.complete(ModelRequest(
        system="Plan.", messages=[UserMessage("q")], tools=[SEARCH], force_tool="web_search",
    ))
    body = openai_server.requests[0].json()
    assert body["tool_choice"] == {"type": "function", "function": {"name": "web_search"}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('<tool_call>\n{"name": "web_search", "arguments": {"query": "x"}}\n'
                     "</tool_call>", [("web_search", {"query": "x"})], id="hermes"),
        pytest.param('<tool_call>{"name": "invented", "arguments": {}}</tool_call>',
                     [("invented", {})], id="hermes-unknown-name-is-still-a-call"),
        pytest.param('{"name": "web_search", "parameters": {"query": "y"}}',
                     [("web_search", {"query": "y"})], id="bare-json"),
        pytest.param(
            '```json\n[{"name": "web_search", "arguments": "{\\"query\\": \\"z\\"}"}]\n```',
            [("web_search", {"query": "z"})],
            id="fenced-list-with-string-arguments",
        ),
        pytest.param('{"name": "invented", "arguments": {}}', [], id="bare-json-unknown-is-text"),
        pytest.param("The market is {big}.", [], id="prose"),
    ],
)
async def test_tool_calls_written_as_text_are_read_where_the_profile_allows(
    client: OpenAIClient, openai_server: OpenAIServer, text: str,
    expected: list[tuple[str, dict[str, Any]]],
) -> None:
    """Hermes tags and bare JSON calls of an offered tool become calls with minted ids."""
    openai_server.owned_by = "vllm"
    openai_server.push(completion(text))
    turn = await client.complete(ModelRequest(system="", messages=[UserMessage("q")],
                                              tools=[SEARCH]))
    assert [(c.name, c.arguments) for c in turn.calls] == expected
    if expected:
        assert turn.stop_reason == "tool_use"
        assert all(c.id.startswith("fo_call_") for c in turn.calls)
    else:
        assert turn.text == text


async def test_the_official_api_never_reads_text_as_a_call(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """A model's JSON answer on the official API stays an answer."""
    text = '{"name": "web_search", "arguments": {"query": "x"}}'
    openai_server.push(completion(text))
    turn = await client.complete(ModelRequest(system="", messages=[UserMessage("q")],
                                              tools=[SEARCH]))
    assert turn.calls == () and turn.text == text


def test_text_calls_with_arguments_that_are_not_an_object_stay_raw() -> None:
    """A written call whose arguments are a list reaches the loop as raw arguments."""
    calls = text_tool_calls('<tool_call>{"name": "web_search", "arguments": [1]}</tool_call>',
                            ["web_search"])
    assert [(c.name, c.arguments) for c in calls] == [("web_search", [1])]
    assert json.dumps(calls[0].arguments) == "[1]"


async def test_dotted_tool_names_go_out_as_names_the_api_takes_and_come_back(
    client: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """`web.search` is sent as `web__search` (the APIs take letters, digits, _ and -)
    and the model's call of `web__search` reaches the loop as `web.search`."""
    dotted = ToolSpec("web.search", "Search the web.", SEARCH.input_schema)
    earlier = ModelTurn(calls=(ToolCall("c0", "web.search", {"query": "a"}),))
    request = ModelRequest(
        system="", tools=[dotted], force_tool="web.search",
        messages=[UserMessage("q"), AssistantMessage(earlier),
                  ToolResultMessage("c0", "web.search", "{}")],
    )
    openai_server.push(completion(None, tool_calls=[tool_call("web__search", {"query": "b"})]))
    spec = ModelSpec(provider="openai", name="gpt-4.1")
    result, turn = await call_model(
        client, request, spec=spec, clock=AnyioClock(), rng=random.Random(0), trace_id="tr_1"
    )
    body = openai_server.requests[0].json()
    assert [t["function"]["name"] for t in body["tools"]] == ["web__search"]
    assert body["tool_choice"]["function"]["name"] == "web__search"
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "web__search"
    assert turn is not None and [c.name for c in turn.calls] == ["web.search"]
    assert result.data["calls"][0]["name"] == "web.search"
