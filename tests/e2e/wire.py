"""Each provider's replies in one shape, so a test says what the model does, not how.

A :class:`Wire` builds the loopback server's replies for one provider (a tool-call turn,
an answer, a cut-off answer, an error in the provider's own wording) and reads back
what fanout sent (the tool results of a request, who asked).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tests.loopback import AnthropicServer, LoopbackServer, OpenAIServer, RecordedRequest, Reply
from tests.loopback import anthropic_server as wire_a
from tests.loopback import openai_server as wire_o

Provider = Literal["anthropic", "openai"]
KEY = "sk-e2e-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
"""The key the servers accept; the tests check it never leaves the request headers."""
KEY_ENV = "FANOUT_E2E_MODEL_KEY"
"""The variable the job files name in ``model.api_key_env``."""


@dataclass(frozen=True)
class ToolResultSeen:
    """One tool result as a request carried it back to the model."""

    call_id: str
    content: str
    is_error: bool | None  # None: the provider has no such flag (OpenAI)

    @property
    def envelope(self) -> dict[str, Any]:
        """The envelope the content holds (its compact JSON)."""
        decoded: dict[str, Any] = json.loads(self.content)
        return decoded


class Wire:
    """One provider's replies and request shapes."""

    provider: Provider
    model_name: str

    def tool(self, name: str, args: Any, *, id: str | None = None) -> Reply:
        """A turn that calls one tool (``args`` a string: sent as raw, broken, JSON)."""
        raise NotImplementedError

    def text(self, text: str, *, cut_off: bool = False) -> Reply:
        """A turn that answers in text (``cut_off``: stopped by the token limit)."""
        raise NotImplementedError

    def error(self, status: int, message: str, **options: Any) -> Reply:
        """An error in the provider's shape."""
        raise NotImplementedError

    def context_too_long(self) -> Reply:
        """The provider's real 400 for a prompt that does not fit."""
        raise NotImplementedError

    def quota(self) -> Reply:
        """The provider's real answer for an account that has run out of money."""
        raise NotImplementedError

    def no_such_model(self) -> Reply:
        """The provider's real 404 for an unknown model id."""
        raise NotImplementedError

    def overloaded(self) -> Reply:
        """The provider's overload answer."""
        return self.error(529, "Overloaded")

    def tool_results(self, request: RecordedRequest) -> list[ToolResultSeen]:
        """The tool results a request carried back to the model, in order."""
        raise NotImplementedError

    def system(self, request: RecordedRequest) -> str:
        """The request's system prompt."""
        raise NotImplementedError

    def server(self) -> LoopbackServer:
        """A loopback server of this provider that accepts :data:`KEY` only."""
        raise NotImplementedError


class AnthropicWire(Wire):
    """The Messages API."""

    provider: Provider = "anthropic"
    model_name = "claude-sonnet-4-6"

    def tool(self, name: str, args: Any, *, id: str | None = None) -> Reply:
        """A ``tool_use`` turn; a string input is sent as the string (not an object)."""
        return wire_a.message(tool_uses=[wire_a.tool_use(name, args, id=id)])

    def text(self, text: str, *, cut_off: bool = False) -> Reply:
        """An ``end_turn`` (or ``max_tokens``) message."""
        return wire_a.message(text, stop_reason="max_tokens" if cut_off else None)

    def error(self, status: int, message: str, **options: Any) -> Reply:
        """``{"type": "error", "error": {...}}``."""
        return wire_a.error(status, message, **options)

    def context_too_long(self) -> Reply:
        """400 invalid_request_error: "prompt is too long: N tokens > M maximum"."""
        return wire_a.error(400, wire_a.PROMPT_TOO_LONG)

    def quota(self) -> Reply:
        """400 invalid_request_error: the credit balance is too low."""
        return wire_a.error(400, wire_a.CREDIT_BALANCE)

    def no_such_model(self) -> Reply:
        """404 not_found_error naming the model."""
        return wire_a.error(404, f"model: {self.model_name}")

    def tool_results(self, request: RecordedRequest) -> list[ToolResultSeen]:
        """Every ``tool_result`` block of the request's user turns."""
        return [
            ToolResultSeen(block["tool_use_id"], block["content"], block.get("is_error"))
            for message in request.json()["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block["type"] == "tool_result"
        ]

    def system(self, request: RecordedRequest) -> str:
        """The top-level ``system`` field."""
        return str(request.json().get("system", ""))

    def server(self) -> LoopbackServer:
        """An AnthropicServer (``x-api-key``)."""
        return AnthropicServer(api_key=KEY)


class OpenAIWire(Wire):
    """Chat completions (any OpenAI-compatible server)."""

    provider: Provider = "openai"
    model_name = "gpt-4.1"

    def tool(self, name: str, args: Any, *, id: str | None = None) -> Reply:
        """A ``tool_calls`` completion; a string is sent as the arguments text itself."""
        return wire_o.completion(tool_calls=[wire_o.tool_call(name, args, id=id)])

    def text(self, text: str, *, cut_off: bool = False) -> Reply:
        """A ``stop`` (or ``length``) completion."""
        return wire_o.completion(text, finish_reason="length" if cut_off else None)

    def error(self, status: int, message: str, **options: Any) -> Reply:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return wire_o.error(status, message, **options)

    def context_too_long(self) -> Reply:
        """400 with code ``context_length_exceeded``."""
        return wire_o.error(400, wire_o.CONTEXT_LENGTH_EXCEEDED, code="context_length_exceeded")

    def quota(self) -> Reply:
        """429 with type and code ``insufficient_quota``."""
        return wire_o.error(
            429, wire_o.INSUFFICIENT_QUOTA, type="insufficient_quota", code="insufficient_quota"
        )

    def no_such_model(self) -> Reply:
        """404 with code ``model_not_found``."""
        return wire_o.error(
            404,
            f"The model `{self.model_name}` does not exist or you do not have access to it.",
            code="model_not_found",
        )

    def overloaded(self) -> Reply:
        """503 as OpenAI words an overload."""
        return wire_o.error(503, "The server is overloaded or not ready yet.")

    def tool_results(self, request: RecordedRequest) -> list[ToolResultSeen]:
        """Every ``role: tool`` message (no is_error flag: the envelope says it)."""
        return [
            ToolResultSeen(m["tool_call_id"], m["content"], None)
            for m in request.json()["messages"]
            if m["role"] == "tool"
        ]

    def system(self, request: RecordedRequest) -> str:
        """The first message when it is the system's."""
        messages = request.json()["messages"]
        return str(messages[0]["content"]) if messages and messages[0]["role"] == "system" else ""

    def server(self) -> LoopbackServer:
        """An OpenAIServer (``Authorization: Bearer``)."""
        return OpenAIServer(api_key=KEY)


WIRES: Mapping[Provider, Wire] = {"anthropic": AnthropicWire(), "openai": OpenAIWire()}
