"""What an endpoint says of itself (docs/design.md §7): its window and slots, read or learned, and
the client sending nothing that cannot fit."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from subagents.models import ModelCallFailed, ModelRequest, OpenAIClient, UserMessage
from subagents.models.endpoints.facts import (
    MIN_ANSWER_TOKENS,
    SAFETY_TOKENS,
    EndpointFacts,
    fitted_max_tokens,
    read_refusal,
)
from subagents.models.factory import build_client
from subagents.models.limiter import limiter_of
from subagents.models.spec import ModelSpec
from tests.loopback import OpenAIServer
from tests.loopback.openai_server import completion, error
from tests.subagents.models.conftest import KEY

pytestmark = pytest.mark.anyio

LLAMA_CPP_PYTHON = (
    "This model's maximum context length is 2048 tokens. However, you requested 4566 tokens "
    "(2518 in the messages, 2048 in the completion). Please reduce the length of the "
    "messages or completion."
)


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.mark.parametrize(
    ("message", "window", "prompt"),
    [
        pytest.param(LLAMA_CPP_PYTHON, 2048, 2518, id="llama-cpp-python"),
        pytest.param(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130412 tokens.", 128000, 130412, id="openai",
        ),
        pytest.param(
            "request (4476 tokens) exceeds the available context size (4096 tokens)",
            4096, 4476, id="llama.cpp",
        ),
        pytest.param("Requested tokens (3000) exceed context window of 2048", 2048, 3000,
                     id="llama-cpp-python-raw"),
        pytest.param("prompt is too long", None, None, id="silent"),
    ],
)
def test_a_refusal_names_the_window_in_each_servers_words(
    message: str, window: int | None, prompt: int | None
) -> None:
    """OpenAI's, vLLM's, llama.cpp's and llama-cpp-python's wordings all give the window."""
    assert read_refusal(message) == (window, prompt)


def test_an_answer_gets_a_quarter_of_a_known_window() -> None:
    """max_tokens is cut to a quarter of the window; unknown: as asked, or 512 locally."""
    assert fitted_max_tokens(2048, 2048) == 512
    assert fitted_max_tokens(200, 2048) == 200
    assert fitted_max_tokens(2048, None) == 2048
    assert fitted_max_tokens(2048, None, local=True) == 512


def test_a_turn_cut_short_infers_a_window_but_states_none() -> None:
    """A turn cut at fewer tokens than allowed may have ended at the window: prompt +
    written is kept as an inferred window, a hint; the stated window stays unknown."""
    facts = EndpointFacts()
    facts.learn_from_cut(asked=2048, prompt=1335, written=713)
    assert (facts.inferred_window, facts.inferred_from) == (2048, "cut")
    assert (facts.window, facts.window_from, facts.room(1000)) == (None, None, None)
    facts.learn_from_cut(asked=512, prompt=100, written=512)  # max_tokens itself: nothing
    assert facts.inferred_window == 2048


def test_an_inferred_window_is_never_below_what_the_server_held() -> None:
    """A usage that under-counts the prompt cannot infer a window smaller than a prompt the
    server accepted, and a larger prompt accepted later raises the inferred window."""
    facts = EndpointFacts()
    facts.accepted(prompt=536, written=20)
    facts.learn_from_cut(asked=512, prompt=100, written=20)
    assert facts.inferred_window == 556
    facts.accepted(prompt=900, written=12)
    assert facts.inferred_window == 912 and facts.window is None


def test_an_inferred_window_hints_max_tokens_and_never_refuses() -> None:
    """The hint cuts max_tokens to the room it leaves, never below the least worth asking
    for; a prompt that outgrew it goes with max_tokens as asked."""
    facts = EndpointFacts()
    facts.learn_from_cut(asked=2048, prompt=1000, written=1048)
    assert facts.hinted_max_tokens(2048, 1000) == 2048 - 1000 - SAFETY_TOKENS
    assert facts.hinted_max_tokens(256, 1000) == 256
    assert facts.hinted_max_tokens(2048, 2000) == 2048  # outgrown: the server decides
    assert facts.hinted_max_tokens(2048, 2048 - SAFETY_TOKENS - 10) == 2048
    assert facts.hinted_max_tokens(2048, 2048 - SAFETY_TOKENS - MIN_ANSWER_TOKENS) == (
        MIN_ANSWER_TOKENS
    )


@pytest.fixture
async def opened() -> AsyncIterator[list[OpenAIClient]]:
    """The clients a test made, closed after it."""
    clients: list[OpenAIClient] = []
    yield clients
    for client in clients:
        await client.aclose()


def _client(server: OpenAIServer, opened: list[OpenAIClient]) -> OpenAIClient:
    client = build_client(
        ModelSpec(provider="openai", name="gemma", base_url=server.base_url,
                  api_key_env="FANOUT_TEST_KEY"),
        environ={"FANOUT_TEST_KEY": KEY},
    )
    assert isinstance(client, OpenAIClient)
    opened.append(client)
    return client


def _request(chars: int = 40, max_tokens: int = 2048) -> ModelRequest:
    return ModelRequest(system="Answer.", messages=[UserMessage("x" * chars)],
                        max_tokens=max_tokens)


async def test_llama_cpp_python_is_sent_one_request_at_a_time(
    openai_server: OpenAIServer, opened: list[OpenAIClient],
) -> None:
    """llama-cpp-python (owned_by me) serves one request at a time: the endpoint's
    concurrency becomes 1."""
    openai_server.owned_by = "me"
    client = _client(openai_server, opened)
    await client.complete(_request())
    limiter = limiter_of(client)
    assert limiter is not None and limiter.limits.concurrency == 1
    assert client.facts.slots == 1 and client.facts.window is None


async def test_llama_cpp_props_give_the_window_and_the_slots(
    openai_server: OpenAIServer, opened: list[OpenAIClient],
) -> None:
    """llama.cpp's /props: n_ctx is the window, total_slots the concurrency."""
    openai_server.owned_by = "llamacpp"
    openai_server.props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}
    client = _client(openai_server, opened)
    await client.complete(_request())
    assert (client.facts.window, client.facts.window_from, client.facts.slots) == (
        4096, "props", 2
    )
    limiter = limiter_of(client)
    assert limiter is not None and limiter.limits.concurrency == 2
    sent = openai_server.requests[-1].json()
    assert sent["max_tokens"] < 4096  # cut to the room the prompt leaves


@pytest.mark.parametrize(
    ("parameters", "window"),
    [pytest.param("num_ctx 8192\nstop <eos>", 8192, id="num_ctx"),
     pytest.param("stop <eos>", 2048, id="ollama-default")],
)
async def test_ollama_says_its_num_ctx(
    openai_server: OpenAIServer, opened: list[OpenAIClient], parameters: str, window: int
) -> None:
    """Ollama's /api/show: num_ctx (else its smallest default), never more than the model's."""
    openai_server.owned_by = "library"
    openai_server.ollama_show = {"model_info": {"gemma3.context_length": 32768},
                                 "parameters": parameters}
    client = _client(openai_server, opened)
    await client.complete(_request())
    assert (client.facts.window, client.facts.window_from) == (window, "ollama")


async def test_a_prompt_refused_for_its_length_is_not_sent_again_unchanged(
    openai_server: OpenAIServer, opened: list[OpenAIClient],
) -> None:
    """llama-cpp-python refuses a prompt over its window: the window and the server's token
    count are learned; the same prompt is not sent again, a smaller one is, fitted."""
    openai_server.owned_by = "me"
    openai_server.push(error(400, LLAMA_CPP_PYTHON, code="context_length_exceeded"))
    client = _client(openai_server, opened)
    big = _request(chars=6000)
    with pytest.raises(ModelCallFailed) as caught:
        await client.complete(big)
    assert caught.value.kind == "context_length"
    assert len(openai_server.requests) == 1
    assert (client.facts.window, client.facts.window_from) == (2048, "refusal")
    with pytest.raises(ModelCallFailed):
        await client.complete(big)  # known too long: refused here, never sent
    assert len(openai_server.requests) == 1
    openai_server.push(completion("fits"))
    turn = await client.complete(_request(chars=400))
    assert turn.text == "fits"
    sent = openai_server.requests[-1].json()
    assert client.facts.tokens(110) + sent["max_tokens"] <= 2048


async def test_an_answer_cut_short_with_usage_too_low_stops_no_later_request(
    openai_server: OpenAIServer, opened: list[OpenAIClient],
) -> None:
    """A `length` finish after 20 tokens whose usage counts 100 prompt tokens of about 500
    infers no window below that prompt: the next, larger request is sent as asked, and a
    smaller one has its max_tokens cut to the room the hint leaves."""
    openai_server.owned_by = "compatible-gateway"
    openai_server.push(
        completion("It keeps", finish_reason="length", prompt_tokens=100, completion_tokens=20),
        completion("sent"),
        completion("sent too"),
    )
    client = _client(openai_server, opened)
    first = await client.complete(_request(chars=2000, max_tokens=512))
    assert first.stop_reason == "max_tokens"
    assert client.facts.window is None and client.facts.inferred_window is not None
    assert client.facts.inferred_window >= 500
    turn = await client.complete(_request(chars=2400, max_tokens=512))
    assert turn.text == "sent" and openai_server.requests[-1].json()["max_tokens"] == 512
    smaller = await client.complete(_request(chars=400, max_tokens=512))
    assert smaller.text == "sent too"
    assert MIN_ANSWER_TOKENS <= openai_server.requests[-1].json()["max_tokens"] < 512
    assert len([r for r in openai_server.requests if r.path.endswith("/completions")]) == 3


async def test_a_refusal_for_max_tokens_alone_is_refitted_and_sent_once_more(
    openai_server: OpenAIServer, opened: list[OpenAIClient],
) -> None:
    """vLLM and OpenAI count max_tokens in: the request is sent again once, with
    max_tokens cut to what the prompt leaves."""
    openai_server.owned_by = "vllm"
    message = ("This model's maximum context length is 1000 tokens. However, you requested "
               "1012 tokens (12 in the messages, 1000 in the completion).")
    openai_server.push(error(400, message), completion("ok"))
    client = _client(openai_server, opened)
    turn = await client.complete(_request(max_tokens=1000))
    assert turn.text == "ok" and len(openai_server.requests) == 2
    assert openai_server.requests[1].json()["max_tokens"] + 12 <= 1000


async def test_openai_base_url_is_honoured_as_the_sdk_does() -> None:
    """A model block without base_url goes where OPENAI_BASE_URL says, and a local one
    needs no key (the placeholder is sent)."""
    client = build_client(
        ModelSpec(provider="openai", name="gemma"),
        environ={"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"},
    )
    assert isinstance(client, OpenAIClient)
    try:
        assert client.base_url == "http://127.0.0.1:8080/v1"
        assert client.facts.local
    finally:
        await client.aclose()
