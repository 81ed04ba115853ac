"""A loopback OpenAI-compatible API: ``POST /v1/chat/completions`` with the real JSON shapes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.loopback._server import LoopbackServer, RecordedRequest, Reply, sse, words

CONTEXT_LENGTH_EXCEEDED = (
    "This model's maximum context length is 128000 tokens. However, your messages "
    "resulted in 130412 tokens. Please reduce the length of the messages."
)
"""OpenAI's wording (code ``context_length_exceeded``, a 400 invalid_request_error)."""

INSUFFICIENT_QUOTA = "You exceeded your current quota, please check your plan and billing details."
"""OpenAI's 429 for a spent budget (type and code ``insufficient_quota``)."""

_ids = itertools.count(1)


def tool_call(
    name: str, arguments: str | Mapping[str, Any], *, id: str | None = None
) -> dict[str, Any]:
    """A function tool call; ``arguments`` is sent as given when a string (broken JSON too)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": id or f"call_{next(_ids):04d}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    finish_reason: str | None = None,
    refusal: str | None = None,
    model: str = "gpt-loopback",
    prompt_tokens: int = 12,
    completion_tokens: int = 7,
    usage: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A 200 with a ChatCompletion of one choice; finish_reason follows from its content."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids):04d}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return Reply(200, body, {"x-request-id": f"req_{next(_ids):04d}", **(headers or {})})


def error(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An error as OpenAI sends it: ``{"error": {"message", "type", "param", "code"}}``."""
    default = "server_error" if status >= 500 else "invalid_request_error"
    body = {"error": {"message": message, "type": type or default, "param": param, "code": code}}
    return Reply(status, body, dict(headers or {}))


class OpenAIServer(LoopbackServer):
    """``POST /v1/chat/completions``; the SDK's ``base_url`` ends in ``/v1``."""

    path = "/v1/chat/completions"

    def __init__(self, *, api_key: str | None = None, owned_by: str | None = "openai") -> None:
        super().__init__(api_key=api_key)
        # What `GET /v1/models` says owns the models: the client's `auto` profile reads it
        # ("openai": the official API's behaviour; None: no model list, a 404).
        self.owned_by = owned_by
        self._no_server_facts()
        self._stream_quirks()

    def _stream_quirks(self) -> None:
        # How a server bends a stream (docs/design.md §8): usage in the chunk of the finish rather
        # than a last chunk of its own (llama.cpp, vLLM without stream_options); tool-call
        # pieces without an `index`; a chunk delay for every streamed answer.
        self.usage_in_finish = False
        self.no_index = False
        self.chunk_delay_s = 0.0

    def _no_server_facts(self) -> None:
        # What a server says of itself (docs/design.md §7, "Fitting a local server"): extra fields
        # of its model-list entry (vLLM's max_model_len), llama.cpp's GET /props and
        # Ollama's POST /api/show answers; None: that route is a 404.
        self.model_fields: dict[str, Any] = {}
        self.props: dict[str, Any] | None = None
        self.ollama_show: dict[str, Any] | None = None

    def clear(self) -> None:
        """Forget queued replies and requests; the model list says "openai" again."""
        super().clear()
        self.owned_by = "openai"
        self._no_server_facts()
        self._stream_quirks()

    def streamed(self, request: RecordedRequest, reply: Reply) -> Reply:
        """A 200 chat completion as ``stream: true`` sends it: ``chat.completion.chunk``
        events (the role, then the text word by word, each tool call's id and name then
        its arguments in pieces, then the finish), usage in a last chunk of its own when
        ``stream_options.include_usage`` asks (and the completion has usage), then
        ``data: [DONE]``."""
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
            chunks=tuple(self._chunks(reply.body, asked)),
            chunk_delay_s=reply.chunk_delay_s or self.chunk_delay_s,
        )

    def _chunks(self, body: Mapping[str, Any], asked: Mapping[str, Any]) -> list[bytes]:
        head = {"id": body.get("id", "chatcmpl-stream"), "object": "chat.completion.chunk",
                "created": body.get("created", 0), "model": body.get("model", "")}
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        include_usage = bool((asked.get("stream_options") or {}).get("include_usage"))
        usage = body.get("usage")

        def chunk(delta: Mapping[str, Any], finish: str | None = None,
                  **extra: Any) -> bytes:
            data = {**head, "choices": [{"index": 0, "delta": dict(delta), "logprobs": None,
                                         "finish_reason": finish}], **extra}
            if include_usage and "usage" not in extra:
                data["usage"] = None
            return sse(data)

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in words(message.get("content") or "")]
        if message.get("refusal"):
            out.append(chunk({"refusal": message["refusal"]}))
        for i, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            first: dict[str, Any] = {"type": "function",
                                     "function": {"name": function.get("name"), "arguments": ""}}
            if call.get("id"):
                first["id"] = call["id"]
            arguments = function.get("arguments")
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            pieces = [{"function": {"arguments": text[k:k + 8]}} for k in range(0, len(text), 8)]
            for part in [first, *pieces]:
                if not self.no_index:
                    part = {"index": i, **part}
                out.append(chunk({"tool_calls": [part]}))
        finish_extra: dict[str, Any] = {}
        if usage is not None and self.usage_in_finish:
            finish_extra["usage"] = usage
        out.append(chunk({}, choice.get("finish_reason") or "stop", **finish_extra))
        if usage is not None and include_usage and not self.usage_in_finish:
            out.append(sse({**head, "choices": [], "usage": usage}))
        out.append(sse("[DONE]"))
        return out

    def side_route(self, request: RecordedRequest) -> Reply | None:
        """``GET /v1/models``: one model, owned by :attr:`owned_by`; ``GET /props`` and
        ``POST /api/show`` where :attr:`props` / :attr:`ollama_show` are set."""
        route = (request.method, request.path.split("?")[0])
        if route == ("GET", "/props"):
            return error(404, "no /props") if self.props is None else Reply(200, self.props)
        if route == ("POST", "/api/show"):
            shown = self.ollama_show
            return error(404, "no /api/show") if shown is None else Reply(200, shown)
        if route != ("GET", "/v1/models"):
            return None
        if self.owned_by is None:
            return error(404, f"no route for GET {request.path}")
        model = {
            "id": "gpt-loopback",
            "object": "model",
            "created": 0,
            "owned_by": self.owned_by,
            **self.model_fields,
        }
        return Reply(200, {"object": "list", "data": [model]})

    @property
    def base_url(self) -> str:
        """The origin plus ``/v1``, as for any OpenAI-compatible server."""
        return f"{self.origin}/v1"

    def default_reply(self, request: RecordedRequest) -> Reply:
        """A short answer naming the model asked for."""
        return completion("ok", model=str(request.json().get("model", "gpt-loopback")))

    def error_reply(self, status: int, message: str) -> Reply:
        """An error in OpenAI's shape."""
        return error(status, message)

    def unauthorized(self, request: RecordedRequest) -> Reply:
        """The 401 OpenAI sends for a wrong key (it shows only the key's last characters)."""
        shown = (request.api_key or "")[-4:]
        return error(
            401,
            f"Incorrect API key provided: sk-...{shown}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        )
