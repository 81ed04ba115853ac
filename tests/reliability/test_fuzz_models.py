"""Fuzzed model replies: a loopback provider answers the real SDK clients badly.

The Anthropic and OpenAI-compatible clients (subagents/models/) call a stub server on
127.0.0.1 that answers with any status, any ``retry-after``, and bodies that are valid
replies with fields deleted or retyped, malformed JSON, HTML, huge or deep documents,
bytes that are not UTF-8. Every model call ends in an envelope (``tool: "model"``) that
is one JSON document, its category one of the five, the key nowhere in it.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.clock import AnyioClock
from shared.envelope import ToolResult
from subagents.models.anthropic import AnthropicClient
from subagents.models.base import ModelClient, ModelRequest, ToolSpec, UserMessage
from subagents.models.call import call_model
from subagents.models.openai import OpenAIClient
from subagents.models.spec import ModelSpec
from tests.reliability.counts import count
from tests.reliability.profiles import scaled

KEY = "sk-reliability-secret-0123456789"
OPENAI_REPLY: dict[str, Any] = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{
        "index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "thinking", "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "search", "arguments": "{\"q\": \"x\"}"},
        }]},
    }],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}
ANTHROPIC_REPLY: dict[str, Any] = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "text", "text": "thinking"},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
STATUSES = [200, 200, 200, 201, 204, 301, 400, 401, 403, 404, 408, 409, 413, 422, 429,
            500, 502, 503, 504, 529, 599]
RETRY_AFTER = [None, "5", "0", "-1", "nan", "1e999", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"]
RAW_BODIES = [
    b"", b"{", b"[]", b"null", b"42", b'"text"', b"<html><body>502 Bad Gateway</body></html>",
    b"\xff\xfe\xfd", b'{"choices": NaN}', b"[" * 5000 + b"]" * 5000,
    json.dumps({"error": {"type": "overloaded_error", "message": "Overloaded"}}).encode(),
    json.dumps({"error": {"code": "insufficient_quota", "message": "quota"}}).encode(),
    json.dumps({"error": {"message": "context_length_exceeded: prompt is too long"}}).encode(),
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=10,
)


class _Stub(BaseHTTPRequestHandler):
    """Answers every POST with the reply the test set."""

    reply: ClassVar[tuple[int, dict[str, str], bytes]] = (200, {}, b"{}")

    def do_POST(self) -> None:
        """Read the request, send the scripted reply."""
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status, headers, body = type(self).reply
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    """The stub provider's base URL (127.0.0.1, a free port)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*here, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*here, index))
    return out


@st.composite
def replies(draw: st.DrawFn, base: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """A status, headers and a body: a valid reply mutated, or raw bytes."""
    status = draw(st.sampled_from(STATUSES))
    headers = {"Content-Type": draw(st.sampled_from(
        ["application/json", "application/json", "text/plain", "text/html"]))}
    retry_after = draw(st.sampled_from(RETRY_AFTER))
    if retry_after is not None:
        headers[draw(st.sampled_from(["retry-after", "retry-after-ms"]))] = retry_after
    if draw(st.integers(0, 4)) == 0:
        return status, headers, draw(st.sampled_from(RAW_BODIES))
    body = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 4))):
        path = draw(st.sampled_from(_paths(body)[1:]))
        parent = body
        for part in path[:-1]:
            parent = parent[part]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(JSON | st.just("x" * 100_000))
    return status, headers, json.dumps(body).encode()


REQUEST = ModelRequest(
    system="be brief",
    messages=[UserMessage(text="hello")],
    tools=[ToolSpec(name="search", description="search", input_schema={
        "type": "object", "properties": {"q": {"type": "string"}}})],
    subtask_id="s",
)


def _client(provider: str, url: str) -> ModelClient:
    if provider == "openai":
        return OpenAIClient(name="m", api_key=KEY, base_url=f"{url}/v1", timeout_s=5)
    return AnthropicClient(name="m", api_key=KEY, base_url=url, timeout_s=5)


async def _call(provider: str, url: str) -> ToolResult:
    client = _client(provider, url)
    spec = ModelSpec.model_validate(
        {"provider": provider, "timeout_s": 5, "retry": {"max_attempts": 1}}
    )
    try:
        with anyio.fail_after(20):
            result, turn = await call_model(client, REQUEST, spec=spec, clock=AnyioClock(),
                                            rng=random.Random(0), trace_id="tr_model")
    finally:
        await client.aclose()
    assert (turn is not None) == result.ok
    return result


# The class each status must end in whatever the body says (docs/design.md §7's table): the
# fuzzer asserts the outcome, not only that an envelope came back.
STATUS_CLASS = {401: "permission", 403: "permission", 408: "transient", 409: "transient",
                500: "transient", 502: "transient", 503: "transient", 504: "transient",
                529: "transient"}
TIMEOUT_S = 5.0


def _check(result: ToolResult, status: int | None = None, took: float = 0.0) -> None:
    wire = result.to_wire()
    text = json.dumps(wire, allow_nan=False)
    assert KEY not in text, "the key leaked into an envelope"
    assert result.tool == "model"
    # Fast: the stub answers at once, so no reply may be left to the call's timeout
    # (a "timeout" is only the provider's own 408 Request Timeout).
    assert took < TIMEOUT_S, (took, wire)
    assert result.error_type != "timeout" or status in (None, 408), (status, wire)
    if not result.ok:
        assert result.category in ("transient", "validation", "business", "permission",
                                   "internal"), wire
        assert result.retry_after_s is None or 0 <= result.retry_after_s < float("inf")
    if status in STATUS_CLASS:
        assert not result.ok and result.category == STATUS_CLASS[status], (status, wire)
    if status is not None and status >= 400:
        assert not result.ok, (status, wire)  # an error status is never a turn


@pytest.mark.slow  # hundreds of fuzzed replies: seconds (tests/tiers.py)
@scaled(2)
@given(st.sampled_from(["openai", "anthropic"]), st.data())
def test_any_provider_reply_ends_in_a_model_envelope(
    stub: str, provider: str, data: st.DataObject
) -> None:
    """Deleted and retyped fields, bad JSON, HTML, huge or deep bodies, any status and
    retry-after: the model call ends at once in one envelope, of the class its status
    calls for (401/403 permission, 408/409/5xx transient, any 4xx/5xx a failure),
    without the key."""
    base = OPENAI_REPLY if provider == "openai" else ANTHROPIC_REPLY
    _Stub.reply = data.draw(replies(base), label="reply")
    count("model")
    started = time.monotonic()
    result = anyio.run(_call, provider, stub, backend="asyncio")
    _check(result, _Stub.reply[0], time.monotonic() - started)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_valid_reply_is_a_turn(stub: str, provider: str) -> None:
    """The unmutated reply is a successful call with its tool call (the fuzzer's baseline)."""
    base = OPENAI_REPLY if provider == "openai" else ANTHROPIC_REPLY
    _Stub.reply = (200, {"Content-Type": "application/json"}, json.dumps(base).encode())
    result = anyio.run(_call, provider, stub, backend="asyncio")
    assert result.ok, result.message
    assert result.data["calls"][0]["name"] == "search"
