"""A loopback Anthropic Messages API: ``POST /v1/messages`` with the real JSON shapes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.loopback._server import LoopbackServer, RecordedRequest, Reply, sse, words

# The error types the API names for each status (docs: "Errors").
ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

PROMPT_TOO_LONG = "prompt is too long: 208310 tokens > 200000 maximum"
"""The API's wording for a context that does not fit (a 400 invalid_request_error)."""

CREDIT_BALANCE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)

_ids = itertools.count(1)


def tool_use(name: str, input: Any, *, id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` content block."""
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def message(
    text: str = "",
    *,
    tool_uses: Sequence[Mapping[str, Any]] = (),
    stop_reason: str | None = None,
    model: str = "claude-loopback",
    input_tokens: int = 12,
    output_tokens: int = 7,
    usage: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A 200 with a Message: text, then tool_use blocks; stop_reason follows from them."""
    content: list[Any] = [{"type": "text", "text": text}] if text else []
    content += list(tool_uses)
    body = {
        "id": f"msg_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": dict(usage or {"input_tokens": input_tokens, "output_tokens": output_tokens}),
    }
    return Reply(200, body, {"request-id": f"req_{next(_ids):04d}", **(headers or {})})


def error(
    status: int,
    message: str,
    *,
    type: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An error as the API sends it: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {
        "type": "error",
        "error": {"type": type or ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": f"req_{next(_ids):04d}",
    }
    return Reply(status, body, dict(headers or {}))


class AnthropicServer(LoopbackServer):
    """``POST /v1/messages``; the SDK's ``base_url`` is the bare origin."""

    path = "/v1/messages"

    def default_reply(self, request: RecordedRequest) -> Reply:
        """A short end_turn answer naming the model asked for."""
        return message("ok", model=str(request.json().get("model", "claude-loopback")))

    def error_reply(self, status: int, message: str) -> Reply:
        """An error in Anthropic's shape."""
        return error(status, message)

    def unauthorized(self, request: RecordedRequest) -> Reply:
        """The 401 the API sends for a wrong key."""
        return error(401, "invalid x-api-key")

    chunk_delay_s = 0.0
    """The pause between the events of every streamed answer (a slow model)."""

    def streamed(self, request: RecordedRequest, reply: Reply) -> Reply:
        """A 200 Message as ``stream: true`` sends it: ``message_start`` (no content, the
        input usage), each block as ``content_block_start``, its deltas (text word by
        word, a tool's input as ``input_json_delta`` pieces) and ``content_block_stop``,
        a ``ping``, then ``message_delta`` (the stop reason, the output usage) and
        ``message_stop``."""
        try:
            asked = request.json()
        except ValueError:
            return reply
        if not asked.get("stream") or reply.status != 200 or not isinstance(reply.body, dict):
            return reply
        return Reply(
            200,
            headers=reply.headers,
            delay_s=reply.delay_s,
            chunks=tuple(_events(reply.body)),
            chunk_delay_s=reply.chunk_delay_s or self.chunk_delay_s,
        )


def _events(body: Mapping[str, Any]) -> list[bytes]:
    """A Message as the API's event stream."""
    usage = dict(body.get("usage") or {})
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    out = [sse({"type": "message_start", "message": start}, "message_start")]
    for i, block in enumerate(body.get("content") or ()):
        if block.get("type") == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": w} for w in words(block.get("text", ""))]
        else:
            opened = {**block, "input": {}}
            text = json.dumps(block.get("input"))
            deltas = [{"type": "input_json_delta", "partial_json": text[k:k + 8]}
                      for k in range(0, len(text), 8)]
        out.append(sse({"type": "content_block_start", "index": i, "content_block": opened},
                       "content_block_start"))
        if i == 0:
            out.append(sse({"type": "ping"}, "ping"))
        out += [sse({"type": "content_block_delta", "index": i, "delta": d},
                    "content_block_delta") for d in deltas]
        out.append(sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    out.append(sse({"type": "message_delta",
                    "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": None},
                    "usage": {"output_tokens": usage.get("output_tokens", 0)}},
                   "message_delta"))
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out


def stream_error(type: str = "overloaded_error", message: str = "Overloaded") -> bytes:
    """An ``error`` event as the API sends one mid-stream."""
    return sse({"type": "error", "error": {"type": type, "message": message}}, "error")
