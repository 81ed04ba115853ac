"""Rate-limit headers, read through the real SDKs from loopback servers that send them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from subagents.models import (
    AnthropicClient,
    ModelCallFailed,
    ModelRequest,
    OpenAIClient,
    UserMessage,
)
from subagents.models.ratelimit_headers import parse_reset, read_rate_headers
from tests.loopback import AnthropicServer, OpenAIServer
from tests.loopback import anthropic_server as anthropic_wire
from tests.loopback import openai_server as openai_wire
from tests.subagents.models.conftest import KEY

REQUEST = ModelRequest(system="", messages=[UserMessage("hello")])


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1s", 1.0, id="seconds"),
        pytest.param("6m0s", 360.0, id="minutes"),
        pytest.param("20ms", 0.02, id="millis"),
        pytest.param("1h2m3.5s", 3723.5, id="compound"),
        pytest.param("2.5", 2.5, id="plain-number"),
        pytest.param("soon", None, id="nonsense"),
        pytest.param("inf", None, id="infinite"),
    ],
)
def test_reset_durations_are_read_as_openai_writes_them(text: str, seconds: float | None) -> None:
    """OpenAI's Go-style durations, plain seconds, and nothing for what is neither."""
    assert parse_reset(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_an_rfc3339_reset_is_seconds_from_now() -> None:
    """Anthropic's resets are instants: 30 s ahead reads as 30 s, the past as 0."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    later = (now + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    assert parse_reset(later, now=now.timestamp) == pytest.approx(30.0)
    assert parse_reset("2020-01-01T00:00:00Z", now=now.timestamp) == 0.0


@pytest.mark.anyio
async def test_openai_limits_are_read_from_a_successful_answer(
    openai_server: OpenAIServer,
) -> None:
    """The SDK's raw response carries x-ratelimit-* through to the turn."""
    headers = {
        "x-ratelimit-limit-requests": "180",
        "x-ratelimit-remaining-requests": "179",
        "x-ratelimit-reset-requests": "333ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "29000",
        "x-ratelimit-reset-tokens": "2s",
    }
    openai_server.push(openai_wire.completion("hi", headers=headers))
    client = OpenAIClient(name="gpt-x", api_key=KEY, base_url=openai_server.base_url)
    try:
        turn = await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert turn.rate is not None
    requests = turn.rate.dimensions["requests"]
    assert (requests.limit, requests.remaining, requests.reset_s) == (180, 179, 0.333)
    assert turn.rate.dimensions["tokens"].limit == 30000
    assert turn.text == "hi"


@pytest.mark.anyio
async def test_openai_429_carries_retry_after_ms_and_the_limits(
    openai_server: OpenAIServer,
) -> None:
    """A 429's retry-after-ms (more precise than retry-after) and its limits reach the limiter."""
    headers = {
        "retry-after": "2",
        "retry-after-ms": "1250",
        "x-ratelimit-limit-requests": "180",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
    }
    openai_server.push(openai_wire.error(429, "Rate limit reached", headers=headers))
    client = OpenAIClient(name="gpt-x", api_key=KEY, base_url=openai_server.base_url)
    try:
        with pytest.raises(ModelCallFailed) as failed:
            await client.complete(REQUEST)
    finally:
        await client.aclose()
    rate = failed.value.rate
    assert rate is not None and rate.retry_after_s == pytest.approx(1.25)
    assert rate.dimensions["requests"].remaining == 0
    assert failed.value.status == 429


@pytest.mark.anyio
async def test_anthropic_limits_are_read_per_dimension(
    anthropic_server: AnthropicServer,
) -> None:
    """anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-* all reach the turn."""
    reset = (datetime.now(UTC) + timedelta(seconds=20)).isoformat().replace("+00:00", "Z")
    headers = {"anthropic-ratelimit-requests-limit": "50"}
    for dim, limit in (("tokens", 90000), ("input-tokens", 80000), ("output-tokens", 16000)):
        headers[f"anthropic-ratelimit-{dim}-limit"] = str(limit)
        headers[f"anthropic-ratelimit-{dim}-remaining"] = str(limit - 100)
        headers[f"anthropic-ratelimit-{dim}-reset"] = reset
    anthropic_server.push(anthropic_wire.message("hi", headers=headers))
    client = AnthropicClient(
        name="claude-x", api_key=KEY, base_url=anthropic_server.base_url, timeout_s=5
    )
    try:
        turn = await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert turn.rate is not None
    dims = turn.rate.dimensions
    assert dims["requests"].limit == 50
    assert dims["input_tokens"].limit == 80000
    assert dims["output_tokens"].remaining == 15900
    reset_s = dims["tokens"].reset_s
    assert reset_s is not None and 15 < reset_s <= 20


@pytest.mark.anyio
async def test_anthropic_429_retry_after_reaches_the_failure(
    anthropic_server: AnthropicServer,
) -> None:
    """Anthropic's 429 (retry-after in seconds) is read as the pause the endpoint takes."""
    headers = {"retry-after": "3", "anthropic-ratelimit-requests-remaining": "0"}
    anthropic_server.push(anthropic_wire.error(429, "rate limited", headers=headers))
    client = AnthropicClient(
        name="claude-x", api_key=KEY, base_url=anthropic_server.base_url, timeout_s=5
    )
    try:
        with pytest.raises(ModelCallFailed) as failed:
            await client.complete(REQUEST)
    finally:
        await client.aclose()
    rate = failed.value.rate
    assert rate is not None and rate.retry_after_s == 3.0


def test_headers_say_nothing_when_no_limit_is_sent() -> None:
    """An answer without limit headers (llama.cpp, Ollama) reports nothing."""
    assert read_rate_headers({"content-type": "application/json"}).empty
