"""What an endpoint says of itself (DESIGN §7): its window and slots, read or learned, and
the client sending nothing that cannot fit."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from subagents.models import ModelCallFailed, ModelRequest, OpenAIClient, UserMessage
from subagents.models.endpoints.facts import EndpointFacts, fitted_max_tokens, read_refusal
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


def test_a_turn_cut_short_names_the_window() -> None:
    """A turn cut at fewer tokens than allowed ended at the window: prompt + written."""
    facts = EndpointFacts()
    facts.learn_from_cut(asked=2048, prompt=1335, written=713)
    assert (facts.window, facts.window_from) == (2048, "cut")
    facts.learn_from_cut(asked=512, prompt=100, written=512)  # max_tokens itself: nothing
    assert facts.window == 2048


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
