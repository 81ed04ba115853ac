"""The OpenAI-compatible client: chat completions with tools, against any base_url."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast
from urllib.parse import urlsplit

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
)

from subagents.models.base import (
    AssistantMessage,
    ModelRequest,
    ModelTurn,
    StopReason,
    ToolCall,
    ToolResultMessage,
    TranscriptMessage,
    Usage,
    UserMessage,
)
from subagents.models.classify import MODEL_ERRORS, classify_model_error
from subagents.models.ratelimit_headers import read_rate_headers

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIClient:
    """Any OpenAI-compatible server (OpenAI, a gateway, vLLM, llama.cpp, Ollama).

    The SDK's retries are off. The key lives only inside the SDK client, never in this
    object's repr, and is cut out of every error message.
    """

    provider = "openai"

    def __init__(
        self,
        *,
        name: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.name = name
        self.base_url = base_url or DEFAULT_BASE_URL
        self.timeout_s = timeout_s
        # OpenAI's own API wants `max_completion_tokens` (its reasoning models refuse
        # `max_tokens`); the compatible servers know `max_tokens`, some nothing else.
        official = urlsplit(self.base_url).hostname == "api.openai.com"
        self.max_tokens_param = "max_completion_tokens" if official else "max_tokens"
        self._sdk = openai.AsyncOpenAI(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout_s
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(name={self.name!r}, base_url={self.base_url!r})"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """One ``POST {base_url}/chat/completions``; a failure raises ModelCallFailed."""
        options: dict[str, Any] = {self.max_tokens_param: request.max_tokens}
        tools: list[ChatCompletionToolUnionParam] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
        if tools:
            options["tools"] = tools
        if request.force_tool is not None:
            options["tool_choice"] = {"type": "function", "function": {"name": request.force_tool}}
        try:
            # The raw response: its headers tell the endpoint's limits (DESIGN §13).
            raw = await self._sdk.chat.completions.with_raw_response.create(
                model=self.name,
                messages=to_messages(request.system, request.messages),
                temperature=request.temperature,
                **options,
            )
            completion = raw.parse()
        except MODEL_ERRORS as exc:
            raise classify_model_error(
                exc, provider=self.provider, model=self.name, secrets=self._secrets()
            ) from None if self._leaks(exc) else exc
        return replace(to_turn(completion), rate=read_rate_headers(raw.headers))

    async def aclose(self) -> None:
        """Close the SDK's connection pool."""
        await self._sdk.close()

    def _secrets(self) -> tuple[str, ...]:
        return (self._sdk.api_key,) if self._sdk.api_key else ()

    def _leaks(self, exc: BaseException) -> bool:
        """Whether the SDK error's own text holds the key (then it is not chained)."""
        return any(secret in f"{exc} {getattr(exc, 'body', '')}" for secret in self._secrets())


def to_messages(
    system: str, transcript: Sequence[TranscriptMessage]
) -> list[ChatCompletionMessageParam]:
    """The system prompt first, then the transcript as chat messages.

    OpenAI has no ``is_error`` on a tool result: the content is the envelope's JSON,
    whose ``isError`` says it.
    """
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in transcript:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.text})
        elif isinstance(message, ToolResultMessage):
            out.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )
        else:
            out.append(_assistant(message))
    return cast(list[ChatCompletionMessageParam], out)


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    turn = message.turn
    out: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    # Sent back as the model wrote it, broken JSON included.
                    "arguments": (
                        json.dumps(call.arguments)
                        if call.arguments is not None
                        else call.raw_arguments or ""
                    ),
                },
            }
            for call in turn.calls
        ]
    return out


def to_turn(completion: ChatCompletion) -> ModelTurn:
    """A chat completion (its first choice) as a :class:`ModelTurn`."""
    usage = None
    if completion.usage is not None:
        usage = Usage(
            input_tokens=completion.usage.prompt_tokens,
            output_tokens=completion.usage.completion_tokens,
        )
    if not completion.choices:
        return ModelTurn(usage=usage, model=completion.model)
    choice = completion.choices[0]
    message = choice.message
    calls = tuple(_call(call) for call in message.tool_calls or ())
    stop = _STOP.get(choice.finish_reason, "end_turn")
    if message.refusal:
        stop = "refusal"
    elif calls and stop == "end_turn":
        # Some compatible servers answer tool calls with finish_reason "stop".
        stop = "tool_use"
    return ModelTurn(
        text=message.content or message.refusal or "",
        calls=calls,
        stop_reason=stop,
        usage=usage,
        model=completion.model,
    )


def _call(call: Any) -> ToolCall:
    """One tool call; arguments that are not a JSON object come back raw, never raise."""
    if call.type == "custom":
        return ToolCall(
            id=call.id, name=call.custom.name, arguments=None, raw_arguments=call.custom.input
        )
    raw: object = call.function.arguments
    if isinstance(raw, dict):  # a lax server sent the object itself, not its JSON text
        return ToolCall(id=call.id, name=call.function.name, arguments=raw)
    text = str(raw) if raw is not None else ""
    if not text.strip():
        # An empty string is how some servers spell "no arguments" for a tool without any.
        return ToolCall(id=call.id, name=call.function.name, arguments={})
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        return ToolCall(id=call.id, name=call.function.name, arguments=decoded)
    return ToolCall(id=call.id, name=call.function.name, arguments=None, raw_arguments=text)
