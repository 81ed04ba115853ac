"""docs/design.md §7's failure table, through the real SDK clients against loopback servers."""

from __future__ import annotations

import email.utils
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.classify import classify_exception
from subagents.models import (
    AnthropicClient,
    ModelCallFailed,
    ModelClient,
    ModelRequest,
    OpenAIClient,
    UserMessage,
)
from tests.loopback import AnthropicServer, LoopbackServer, OpenAIServer, Reply
from tests.loopback import anthropic_server as wire_a
from tests.loopback import openai_server as wire_o
from tests.subagents.models.conftest import KEY

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(system="You research.", messages=[UserMessage("battery market?")])


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@dataclass
class Harness:
    """One provider: its loopback server, a client pointed at it, its error builder."""

    provider: str
    server: LoopbackServer
    client: ModelClient
    error: Callable[..., Reply]

    async def fail(self, *replies: Reply) -> ModelCallFailed:
        """Queue ``replies``, make one call, return what it raised."""
        self.server.push(*replies)
        with pytest.raises(ModelCallFailed) as caught:
            await self.client.complete(REQUEST)
        return caught.value


def _client(provider: str, base_url: str, timeout_s: float = 5.0, key: str = KEY) -> ModelClient:
    if provider == "anthropic":
        return AnthropicClient(
            name="claude-sonnet-4-6", api_key=key, base_url=base_url, timeout_s=timeout_s
        )
    return OpenAIClient(name="gpt-4.1", api_key=key, base_url=base_url, timeout_s=timeout_s)


@pytest.fixture(params=["anthropic", "openai"])
async def harness(
    request: pytest.FixtureRequest, anthropic_server: AnthropicServer, openai_server: OpenAIServer
) -> AsyncIterator[Harness]:
    """Each provider in turn, with a fresh client."""
    provider: str = request.param
    server: LoopbackServer = anthropic_server if provider == "anthropic" else openai_server
    error = wire_a.error if provider == "anthropic" else wire_o.error
    client = _client(provider, server.base_url)
    yield Harness(provider, server, client, error)
    await client.aclose()


def _http_date(seconds_ahead: int) -> str:
    return email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_ahead))


@pytest.mark.parametrize(
    ("status", "message", "headers", "kind", "category", "retry_after_s"),
    [
        pytest.param(408, "request timeout", {}, "timeout", "transient", None, id="408"),
        pytest.param(409, "lock conflict", {}, "unavailable", "transient", None, id="409"),
        pytest.param(
            429, "slow down", {"retry-after": "7"}, "rate_limited", "transient", 7.0, id="429"
        ),
        pytest.param(
            429,
            "slow down",
            {"retry-after-ms": "1500", "retry-after": "9"},
            "rate_limited",
            "transient",
            1.5,
            id="429-retry-after-ms-wins",
        ),
        pytest.param(500, "internal", {}, "unavailable", "transient", None, id="500"),
        pytest.param(502, "bad gateway", {}, "unavailable", "transient", None, id="502"),
        pytest.param(
            503, "unavailable", {"retry-after": "3"}, "unavailable", "transient", 3.0, id="503"
        ),
        pytest.param(503, "Overloaded", {}, "overloaded", "transient", None, id="503-overloaded"),
        pytest.param(504, "gateway timeout", {}, "timeout", "transient", None, id="504"),
        pytest.param(529, "Overloaded", {}, "overloaded", "transient", None, id="529"),
        pytest.param(
            529,
            "Overloaded",
            {"x-should-retry": "false"},
            "overloaded",
            "business",
            None,
            id="529-x-should-retry-false",
        ),
        pytest.param(401, "invalid x-api-key", {}, "auth", "permission", None, id="401"),
        pytest.param(403, "not allowed", {}, "forbidden", "permission", None, id="403"),
        pytest.param(
            413,
            "Request exceeds the maximum size",
            {},
            "context_length",
            "validation",
            None,
            id="413",
        ),
        pytest.param(400, "tools.0: bad schema", {}, "bad_request", "internal", None, id="400"),
        pytest.param(422, "unprocessable", {}, "bad_request", "internal", None, id="422"),
    ],
)
async def test_each_status_fails_as_the_table_says_in_one_request(
    harness: Harness,
    status: int,
    message: str,
    headers: dict[str, str],
    kind: str,
    category: str,
    retry_after_s: float | None,
) -> None:
    """Every status of the table gives its kind, category and wait, and the SDK never retries."""
    failed = await harness.fail(harness.error(status, message, headers=headers))
    assert (failed.kind, failed.category, failed.status) == (kind, category, status)
    assert failed.retry_after_s == retry_after_s
    assert message in failed.message
    assert len(harness.server.requests) == 1


async def test_retry_after_as_an_http_date_is_read_as_seconds(harness: Harness) -> None:
    """A Retry-After that is an HTTP date becomes the seconds until then."""
    failed = await harness.fail(
        harness.error(429, "slow down", headers={"retry-after": _http_date(30)})
    )
    assert failed.retry_after_s is not None
    assert 25 <= failed.retry_after_s <= 30


async def test_a_timeout_is_transient_after_one_request(harness: Harness) -> None:
    """A server that does not answer within timeout_s is one transient timeout."""
    client = _client(harness.provider, harness.server.base_url, timeout_s=0.2)
    harness.server.push(Reply(delay_s=5))
    try:
        with pytest.raises(ModelCallFailed) as caught:
            await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert (caught.value.kind, caught.value.category) == ("timeout", "transient")
    assert len(harness.server.requests) == 1


async def test_a_reset_connection_is_transient_after_one_request(harness: Harness) -> None:
    """A connection reset before the answer is transient kind connection_reset."""
    failed = await harness.fail(Reply(drop=True))
    assert (failed.kind, failed.category) == ("connection_reset", "transient")
    assert len(harness.server.requests) == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_no_server_is_transient_unavailable(provider: str) -> None:
    """Nothing listening on the port: the provider is unavailable, for now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = _client(provider, f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(ModelCallFailed) as caught:
            await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert (caught.value.kind, caught.value.category) == ("unavailable", "transient")


@pytest.mark.parametrize(
    ("provider", "reply"),
    [
        pytest.param(
            "anthropic", wire_a.error(400, wire_a.PROMPT_TOO_LONG), id="anthropic-prompt-too-long"
        ),
        pytest.param(
            "openai",
            wire_o.error(400, wire_o.CONTEXT_LENGTH_EXCEEDED, code="context_length_exceeded"),
            id="openai-context-length-exceeded",
        ),
        pytest.param(
            "openai",
            wire_o.error(400, "the request exceeds the available context size, try increasing it"),
            id="llama-cpp-context-size",
        ),
    ],
)
async def test_a_prompt_too_long_is_context_length(
    provider: str,
    reply: Reply,
    anthropic_server: AnthropicServer,
    openai_server: OpenAIServer,
) -> None:
    """Each provider's real wording for an oversized prompt is kind context_length."""
    server: LoopbackServer = anthropic_server if provider == "anthropic" else openai_server
    harness = Harness(provider, server, _client(provider, server.base_url), wire_a.error)
    try:
        failed = await harness.fail(reply)
    finally:
        await harness.client.aclose()
    assert (failed.kind, failed.category) == ("context_length", "validation")
    assert classify_exception(failed).next_safe_action == "retry_with_smaller_input"


@pytest.mark.parametrize(
    ("provider", "reply", "kind", "category"),
    [
        pytest.param(
            "openai",
            wire_o.error(
                429, wire_o.INSUFFICIENT_QUOTA, type="insufficient_quota", code="insufficient_quota"
            ),
            "quota",
            "business",
            id="openai-insufficient-quota",
        ),
        pytest.param(
            "openai",
            wire_o.error(429, "Rate limit reached for gpt-4.1 on tokens per min (TPM)"),
            "rate_limited",
            "transient",
            id="openai-rate-limit",
        ),
        pytest.param(
            "anthropic",
            wire_a.error(429, "Your organization has reached its monthly spend limit"),
            "quota",
            "business",
            id="anthropic-spend-limit",
        ),
        pytest.param(
            "anthropic",
            wire_a.error(400, wire_a.CREDIT_BALANCE),
            "quota",
            "business",
            id="anthropic-credit-balance",
        ),
        pytest.param(
            "anthropic",
            wire_a.error(429, "This request would exceed your organization's rate limit"),
            "rate_limited",
            "transient",
            id="anthropic-rate-limit",
        ),
    ],
)
async def test_a_spent_quota_is_business_and_a_rate_limit_is_transient(
    provider: str,
    reply: Reply,
    kind: str,
    category: str,
    anthropic_server: AnthropicServer,
    openai_server: OpenAIServer,
) -> None:
    """A 429 for money escalates as threshold_breach; a 429 for speed is retried."""
    server: LoopbackServer = anthropic_server if provider == "anthropic" else openai_server
    client = _client(provider, server.base_url)
    server.push(reply)
    try:
        with pytest.raises(ModelCallFailed) as caught:
            await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert (caught.value.kind, caught.value.category) == (kind, category)
    error = classify_exception(caught.value)
    assert error.retryable is (category == "transient")
    if kind == "quota":
        assert error.limit is not None  # the loop's trigger: threshold_breach


async def test_a_missing_model_is_a_validation_error_on_model_name(harness: Harness) -> None:
    """A 404 for the model names the field model.name and the model asked for."""
    failed = await harness.fail(
        harness.error(404, f"model: {harness.client.name}", type="not_found_error")
    )
    assert (failed.kind, failed.category) == ("model_not_found", "validation")
    assert failed.field == "model.name"
    assert failed.expected is not None and repr(harness.client.name) in failed.expected
    error = classify_exception(failed)
    assert (error.field, error.error_type) == ("model.name", "model_not_found")


async def test_a_404_without_a_model_points_at_the_base_url(harness: Harness) -> None:
    """A wrong path (no model mentioned) is a validation error on model.base_url."""
    harness.server.path = "/elsewhere"
    try:
        failed = await harness.fail()
    finally:
        harness.server.path = type(harness.server).path
    assert (failed.kind, failed.field) == ("model_not_found", "model.base_url")


def _leaks(value: Any) -> bool:
    return KEY in str(value) or KEY in repr(value)


async def test_the_key_travels_in_the_header_and_nowhere_else(harness: Harness) -> None:
    """The server sees the key; the client's repr and an error that echoes it do not."""
    await harness.client.complete(REQUEST)
    assert harness.server.requests[-1].api_key == KEY
    assert not _leaks(harness.client)
    failed = await harness.fail(harness.error(400, f"bad key {KEY} in request"))
    assert not _leaks(failed) and not any(_leaks(arg) for arg in failed.args)
    assert failed.__cause__ is None or not _leaks(failed.__cause__)
    assert not _leaks(classify_exception(failed).model_dump())


async def test_a_wrong_key_is_a_permission_failure(harness: Harness) -> None:
    """A key the server does not know is a 401: permission, kind auth."""
    client = _client(harness.provider, harness.server.base_url, key="sk-wrong-key")
    try:
        with pytest.raises(ModelCallFailed) as caught:
            await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert (caught.value.kind, caught.value.category) == ("auth", "permission")
    assert "sk-wrong-key" not in str(caught.value)
