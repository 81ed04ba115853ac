"""The Anthropic client: the Messages API with tool use, one attempt per call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import anthropic
from anthropic.types import Message, MessageParam, ToolParam

from subagents.models.base import (
    ModelRequest,
    ModelTurn,
    StopReason,
    TextSink,
    ToolCall,
    ToolResultMessage,
    TranscriptMessage,
    Usage,
    UserMessage,
)
from subagents.models.classify import MODEL_ERRORS, classify_model_error
from subagents.models.ratelimit_headers import read_rate_headers

DEFAULT_BASE_URL = "https://api.anthropic.com"

# Anthropic's stop reasons in fanout's four. A turn cut short for any reason (a paused
# server-tool turn, a full context window) is unfinished text: `max_tokens`.
_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "pause_turn": "max_tokens",
    "refusal": "refusal",
}


class AnthropicClient:
    """Claude through the official SDK, its own retries off (fanout retries once, above).

    The key lives only inside the SDK client: it is never an attribute of this object,
    never in its repr, and cut out of every error message.
    """

    provider = "anthropic"

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
        self._sdk = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout_s
        )

    def __repr__(self) -> str:
        return f"AnthropicClient(name={self.name!r}, base_url={self.base_url!r})"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """One ``POST /v1/messages``; a failure raises :class:`ModelCallFailed`."""
        try:
            # The raw response: its headers tell the endpoint's limits (docs/design.md §13).
            raw = await self._sdk.messages.with_raw_response.create(**self._params(request))
            message = await raw.parse()
        except MODEL_ERRORS as exc:
            raise self._failed(exc) from None if self._leaks(exc) else exc
        return replace(to_turn(message), rate=read_rate_headers(raw.headers))

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """One streamed ``POST /v1/messages`` (docs/design.md §8): ``on_text`` gets each text delta
        as it comes; the turn is the stream's final message, as :meth:`complete` gives it.

        An ``error`` event mid-stream, or a connection that breaks, fails the attempt
        like a failed request (the retry writes again from the start).
        """
        try:
            async with self._sdk.messages.stream(**self._params(request)) as stream:
                async for event in stream:
                    if event.type == "text":
                        on_text(event.text)
                message = await stream.get_final_message()
                headers = stream.response.headers
        except MODEL_ERRORS as exc:
            raise self._failed(exc) from None if self._leaks(exc) else exc
        return replace(to_turn(message), rate=read_rate_headers(headers))

    def _failed(self, exc: Exception) -> Exception:
        return classify_model_error(
            exc, provider=self.provider, model=self.name, secrets=self._secrets()
        )

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API parameters of ``request``."""
        tools: list[ToolParam] = [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": cast(Any, t.input_schema),
            }
            for t in request.tools
        ]
        extra: dict[str, Any] = {}
        if request.system:
            extra["system"] = request.system
        if tools:
            extra["tools"] = tools
        if request.force_tool is not None:
            extra["tool_choice"] = {"type": "tool", "name": request.force_tool}
        # The SDK's create() has no `temperature` any more (newer models reject it), so it
        # travels in the body only when a file asks for a non-default value.
        body = {"temperature": request.temperature} if request.temperature else None
        return {
            "model": self.name,
            "max_tokens": request.max_tokens,
            "messages": to_messages(request.messages),
            "extra_body": body,
            **extra,
        }

    async def aclose(self) -> None:
        """Close the SDK's connection pool."""
        await self._sdk.close()

    def _secrets(self) -> tuple[str, ...]:
        return (self._sdk.api_key,) if self._sdk.api_key else ()

    def _leaks(self, exc: BaseException) -> bool:
        """Whether the SDK error's own text holds the key (then it is not chained)."""
        return any(secret in f"{exc} {getattr(exc, 'body', '')}" for secret in self._secrets())


def to_messages(transcript: Sequence[TranscriptMessage]) -> list[MessageParam]:
    """The transcript as Messages API turns.

    Assistant turns are text plus ``tool_use`` blocks; tool results and user text that
    follow one another become ONE user message (``tool_result`` blocks first, as the API
    requires), so roles always alternate.
    """
    out: list[dict[str, Any]] = []
    for message in transcript:
        role, blocks = _blocks(message)
        if not blocks:
            continue  # an empty turn: the API refuses empty content
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return cast(list[MessageParam], out)


def _blocks(message: TranscriptMessage) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        return "user", [{"type": "text", "text": message.text}] if message.text else []
    if isinstance(message, ToolResultMessage):
        return "user", [
            {
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "content": message.content,
                "is_error": message.is_error,
            }
        ]
    turn = message.turn
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    for call in turn.calls:
        # A call whose arguments were not a JSON object (possible only from another
        # provider's transcript) is replayed with its raw text kept visible.
        arguments = call.arguments
        if arguments is None:
            arguments = {"raw_arguments": call.raw_arguments or ""}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return "assistant", blocks


def to_turn(message: Message) -> ModelTurn:
    """A Messages API response as a :class:`ModelTurn`."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(_call(block.id, block.name, block.input))
    usage = message.usage
    # The context the model saw is every input token, cached or not.
    input_tokens = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    return ModelTurn(
        text="".join(texts),
        calls=tuple(calls),
        stop_reason=_STOP.get(message.stop_reason or "end_turn", "end_turn"),
        usage=Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens),
        model=message.model,
    )


def _call(call_id: str, name: str, arguments: object) -> ToolCall:
    if isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, arguments=arguments)
    return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=json.dumps(arguments))
