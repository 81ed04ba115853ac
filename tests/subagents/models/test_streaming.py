"""Streamed answers through the real SDKs against loopback servers that stream as the APIs do."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from subagents.models import AnthropicClient, ModelRequest, OpenAIClient, ToolSpec, UserMessage
from subagents.models.base import ModelCallFailed, StreamingClient
from subagents.models.scripted import ScriptedModel
from subagents.models.spec import ModelSpec
from tests.loopback import AnthropicServer, OpenAIServer
from tests.loopback._server import RecordedRequest, Reply
from tests.loopback.anthropic_server import message, stream_error, tool_use
from tests.loopback.openai_server import completion, tool_call
from tests.subagents.models.conftest import KEY

pytestmark = pytest.mark.anyio

ASK = ModelRequest(system="Answer briefly.", messages=[UserMessage("q")])
TEXT = "Sodium-ion cells keep 90 percent of their capacity at -20 °C [1]. They cost less [2]."
SEARCH = ToolSpec("web_search", "Search the web.",
                  {"type": "object", "properties": {"query": {"type": "string"}}})


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture
async def openai(openai_server: OpenAIServer) -> AsyncIterator[OpenAIClient]:
    """An OpenAI client pointed at the loopback server."""
    client = OpenAIClient(name="gpt-4.1", api_key=KEY, base_url=openai_server.base_url,
                          timeout_s=5)
    yield client
    await client.aclose()


@pytest.fixture
async def anthropic(anthropic_server: AnthropicServer) -> AsyncIterator[AnthropicClient]:
    """An Anthropic client pointed at the loopback server."""
    client = AnthropicClient(name="claude-sonnet-4-5", api_key=KEY,
                             base_url=anthropic_server.base_url, timeout_s=5)
    yield client
    await client.aclose()


def test_every_client_can_stream() -> None:
    """The two providers and the scripted model are streaming clients."""
    scripted = ScriptedModel(ModelSpec(provider="scripted"))
    assert isinstance(scripted, StreamingClient)
    assert all(hasattr(c, "stream") for c in (AnthropicClient, OpenAIClient))


async def test_openai_text_streams_in_order_with_usage_at_the_end(
    openai: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """The text arrives word by word, in order; usage comes from the last chunk."""
    openai_server.push(completion(TEXT, prompt_tokens=40, completion_tokens=20))
    pieces: list[str] = []
    turn = await openai.stream(ASK, pieces.append)
    assert len(pieces) > 5 and "".join(pieces) == TEXT == turn.text
    assert turn.stop_reason == "end_turn"
    assert turn.usage is not None and (turn.usage.input_tokens, turn.usage.output_tokens) == (
        40, 20)
    sent = openai_server.requests[-1].json()
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("no_index", [pytest.param(False, id="indexed"),
                                      pytest.param(True, id="no-index")])
async def test_openai_tool_call_deltas_add_up_to_the_calls(
    openai: OpenAIClient, openai_server: OpenAIServer, no_index: bool
) -> None:
    """Tool calls streamed in pieces (with or without index) become whole calls."""
    openai_server.no_index = no_index
    openai_server.push(completion(tool_calls=[
        tool_call("web_search", {"query": "sodium-ion cells in the cold"}, id="call_a"),
        tool_call("web_search", {"query": "sodium-ion cost"}, id="call_b"),
    ]))
    request = ModelRequest(system="", messages=[UserMessage("q")], tools=[SEARCH])
    turn = await openai.stream(request, lambda text: None)
    assert [(c.id, c.arguments) for c in turn.calls] == [
        ("call_a", {"query": "sodium-ion cells in the cold"}),
        ("call_b", {"query": "sodium-ion cost"}),
    ]
    assert turn.stop_reason == "tool_use"


async def test_openai_missing_ids_are_minted_and_a_stop_beside_calls_is_tool_use(
    openai: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """A streamed call without an id gets fanout's own; finish_reason stop still means calls."""
    call = tool_call("web_search", {"query": "x"})
    del call["id"]  # the server sends none
    openai_server.push(completion(tool_calls=[call], finish_reason="stop"))
    request = ModelRequest(system="", messages=[UserMessage("q")], tools=[SEARCH])
    turn = await openai.stream(request, lambda text: None)
    assert turn.calls[0].id.startswith("fo_call_") and turn.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("in_finish", "usage"),
    [pytest.param(True, True, id="usage-in-the-finish-chunk"),
     pytest.param(False, False, id="usage-never")],
)
async def test_openai_usage_where_the_server_puts_it_or_nowhere(
    openai: OpenAIClient, openai_server: OpenAIServer, in_finish: bool, usage: bool
) -> None:
    """Usage read from the finish chunk (llama.cpp's way), or absent without complaint."""
    openai_server.usage_in_finish = in_finish
    openai_server.push(completion("ok then", usage=usage, prompt_tokens=9))
    turn = await openai.stream(ASK, lambda text: None)
    assert turn.text == "ok then"
    assert (turn.usage is not None) is usage
    if usage:
        assert turn.usage is not None and turn.usage.input_tokens == 9


async def test_openai_a_profile_without_stream_options_is_not_sent_them(
    openai_server: OpenAIServer,
) -> None:
    """llama-cpp-python takes no stream_options: the stream is asked without them."""
    openai_server.owned_by = "me"
    client = OpenAIClient(name="gemma", api_key=KEY, base_url=openai_server.base_url,
                          timeout_s=5)
    try:
        openai_server.push(completion("fine"))
        turn = await client.stream(ASK, lambda text: None)
    finally:
        await client.aclose()
    assert turn.text == "fine"
    sent = openai_server.requests[-1].json()
    assert sent["stream"] is True and "stream_options" not in sent


async def test_openai_a_stream_that_breaks_off_is_a_transient_failure(
    openai: OpenAIClient, openai_server: OpenAIServer
) -> None:
    """A connection reset mid-stream fails the attempt as transient (retried above)."""
    streamed = openai_server.streamed(_streaming_request(openai_server), completion(TEXT))
    openai_server.push(Reply(200, chunks=streamed.chunks, drop_after=3))
    pieces: list[str] = []
    with pytest.raises(ModelCallFailed) as failed:
        await openai.stream(ASK, pieces.append)
    assert failed.value.category == "transient"
    assert pieces  # what came before the break was heard


async def test_anthropic_text_streams_in_order(
    anthropic: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """Text deltas arrive word by word; the final message is the turn, usage included."""
    anthropic_server.push(message(TEXT, input_tokens=50, output_tokens=21))
    pieces: list[str] = []
    turn = await anthropic.stream(ASK, pieces.append)
    assert len(pieces) > 5 and "".join(pieces) == TEXT == turn.text
    assert turn.usage is not None and turn.usage.input_tokens == 50
    assert turn.usage.output_tokens == 21 and turn.stop_reason == "end_turn"
    assert anthropic_server.requests[-1].json()["stream"] is True


async def test_anthropic_tool_use_streams_as_input_json_deltas(
    anthropic: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """A tool_use block streamed as partial JSON becomes a whole call."""
    anthropic_server.push(message("Let me look.", tool_uses=[
        tool_use("web_search", {"query": "sodium-ion cells"}, id="toolu_1")]))
    request = ModelRequest(system="", messages=[UserMessage("q")], tools=[SEARCH])
    turn = await anthropic.stream(request, lambda text: None)
    assert turn.text == "Let me look."
    assert [(c.id, c.arguments) for c in turn.calls] == [("toolu_1", {"query": "sodium-ion cells"})]
    assert turn.stop_reason == "tool_use"


async def test_anthropic_an_error_event_mid_stream_is_overloaded(
    anthropic: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """An `error` event after some text fails the attempt as overloaded (transient)."""
    whole = anthropic_server.streamed(_streaming_request(anthropic_server), message(TEXT))
    assert whole.chunks is not None
    anthropic_server.push(Reply(200, chunks=(*whole.chunks[:5], stream_error())))
    with pytest.raises(ModelCallFailed) as failed:
        await anthropic.stream(ASK, lambda text: None)
    assert (failed.value.kind, failed.value.category) == ("overloaded", "transient")


async def test_anthropic_a_stream_that_breaks_off_is_a_transient_failure(
    anthropic: AnthropicClient, anthropic_server: AnthropicServer
) -> None:
    """A connection reset mid-stream fails the attempt as transient."""
    whole = anthropic_server.streamed(_streaming_request(anthropic_server), message(TEXT))
    anthropic_server.push(Reply(200, chunks=whole.chunks, drop_after=4))
    with pytest.raises(ModelCallFailed) as failed:
        await anthropic.stream(ASK, lambda text: None)
    assert failed.value.category == "transient"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_first_words_come_before_the_whole_answer(
    provider: str,
    openai: OpenAIClient,
    anthropic: AnthropicClient,
    openai_server: OpenAIServer,
    anthropic_server: AnthropicServer,
) -> None:
    """With 20 ms between chunks, the first text is heard long before the answer ends."""
    text = " ".join(f"word{i}" for i in range(30))
    reply = completion(text) if provider == "openai" else message(text)
    server = openai_server if provider == "openai" else anthropic_server
    server.push(Reply(reply.status, reply.body, reply.headers, chunk_delay_s=0.02))
    client: OpenAIClient | AnthropicClient = openai if provider == "openai" else anthropic
    began = time.perf_counter()
    first: list[float] = []
    turn = await client.stream(ASK, lambda piece: first.append(time.perf_counter()))
    whole = time.perf_counter() - began
    assert turn.text == text
    assert first[0] - began < whole / 3


def _streaming_request(server: OpenAIServer | AnthropicServer) -> RecordedRequest:
    """A recorded request that asks for a stream (to build a server's streamed reply)."""
    body = b'{"stream": true, "stream_options": {"include_usage": true}}'
    return RecordedRequest("POST", server.path, {}, body)
