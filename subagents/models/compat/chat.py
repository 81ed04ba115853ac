"""Chat Completions on the wire: fanout's transcript as messages, a completion as a turn.

What every OpenAI-compatible server is sent (shaped by its profile, :mod:`.profiles`)
and how what it answers is normalised: tool-call ids missing, empty or repeated are
minted anew, arguments sent as an object are taken as is, tool calls written as text are
read as calls where the profile allows, ``finish_reason`` beside tool calls is tool use.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from subagents.models.base import (
    AssistantMessage,
    ModelTurn,
    StopReason,
    ToolCall,
    ToolResultMessage,
    TranscriptMessage,
    Usage,
    UserMessage,
)
from subagents.models.compat.profiles import PROFILES, ServerProfile, text_tool_calls

__all__ = ["call_ids", "to_messages", "to_turn"]

_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def call_ids(transcript: Iterable[TranscriptMessage]) -> set[str]:
    """The tool-call ids already used in a transcript (a repeated one is minted anew)."""
    return {
        call.id
        for message in transcript
        if isinstance(message, AssistantMessage)
        for call in message.turn.calls
    }


def to_messages(
    system: str,
    transcript: Sequence[TranscriptMessage],
    profile: ServerProfile = PROFILES["openai"],
    *,
    ask: str | None = None,
) -> list[ChatCompletionMessageParam]:
    """The system prompt first, then the transcript as chat messages.

    OpenAI has no ``is_error`` on a tool result: the content is the envelope's JSON,
    whose ``isError`` says it. A profile without the system role gets the instructions
    at the head of the first user message; ``ask`` (a tool asked for in words) ends the
    conversation as a user message.
    """
    out: list[dict[str, Any]] = []
    fold = system if system and not profile.system_role else ""
    if system and profile.system_role:
        out.append({"role": "system", "content": system})
    for message in transcript:
        if isinstance(message, UserMessage):
            text = f"{fold}\n\n{message.text}" if fold else message.text
            fold = ""
            out.append({"role": "user", "content": text})
        elif isinstance(message, ToolResultMessage):
            out.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )
        else:
            out.append(_assistant(message, profile))
    if fold:
        out.insert(0, {"role": "user", "content": fold})
    if ask:
        last = out[-1] if out else None
        if last is not None and last["role"] == "user":
            last["content"] = f"{last['content']}{ask}"
        else:
            out.append({"role": "user", "content": ask.strip()})
    return cast(list[ChatCompletionMessageParam], out)


def _assistant(message: AssistantMessage, profile: ServerProfile) -> dict[str, Any]:
    turn = message.turn
    # Some servers refuse `content: null` beside tool calls (llama-cpp-python's schema
    # wants a string): those get "", which every server takes.
    empty = None if profile.null_content else ""
    out: dict[str, Any] = {"role": "assistant", "content": turn.text or empty}
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


def to_turn(
    completion: ChatCompletion,
    *,
    profile: ServerProfile = PROFILES["openai"],
    offered: Sequence[str] = (),
    used: set[str] | None = None,
    mint: Callable[[], str] | None = None,
) -> ModelTurn:
    """A chat completion (its first choice) as a :class:`ModelTurn`, normalised.

    Tool-call ids that are missing, empty, repeated in the turn or already used in the
    transcript are replaced by minted ones; tool calls written as text are read as calls
    when the profile allows it; ``finish_reason`` beside tool calls is ``tool_use``.
    """
    usage = None
    if completion.usage is not None:
        usage = Usage(
            input_tokens=completion.usage.prompt_tokens or 0,
            output_tokens=completion.usage.completion_tokens or 0,
        )
    if not completion.choices:
        return ModelTurn(usage=usage, model=completion.model)
    choice = completion.choices[0]
    message = choice.message
    text = message.content or message.refusal or ""
    calls = [_call(call) for call in message.tool_calls or ()]
    if not calls and profile.text_tool_calls and text and not message.refusal:
        written = text_tool_calls(text, offered)
        if written:
            calls = [_written(c.name, c.arguments) for c in written]
            text = ""
    taken = set(used or ())
    fresh = mint or _default_mint()
    normalised: list[ToolCall] = []
    for call in calls:
        if not call.id or call.id in taken:
            call = ToolCall(fresh(), call.name, call.arguments, call.raw_arguments)
        taken.add(call.id)
        normalised.append(call)
    stop = _STOP.get(choice.finish_reason or "", "end_turn")
    if message.refusal:
        stop = "refusal"
    elif normalised:
        # Servers answer tool calls with finish_reason "stop", null, or their own word.
        stop = "tool_use"
    return ModelTurn(
        text=text,
        calls=tuple(normalised),
        stop_reason=stop,
        usage=usage,
        model=completion.model,
    )


def _default_mint() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"fo_call_{next(counter)}"


def _written(name: str, arguments: object) -> ToolCall:
    """A call written as text: arguments as an object, as JSON text, or raw."""
    if isinstance(arguments, dict):
        return ToolCall(id="", name=name, arguments=arguments)
    if isinstance(arguments, str):
        return _parsed("", name, arguments)
    return ToolCall(id="", name=name, arguments=None, raw_arguments=json.dumps(arguments))


def _call(call: Any) -> ToolCall:
    """One tool call; arguments that are not a JSON object come back raw, never raise."""
    call_id = str(getattr(call, "id", None) or "")
    if getattr(call, "type", "function") == "custom":
        return ToolCall(
            id=call_id, name=call.custom.name, arguments=None, raw_arguments=call.custom.input
        )
    function = call.function
    raw: object = function.arguments
    name = str(function.name or "")
    if isinstance(raw, dict):  # a lax server sent the object itself, not its JSON text
        return ToolCall(id=call_id, name=name, arguments=raw)
    return _parsed(call_id, name, str(raw) if raw is not None else "")


def _parsed(call_id: str, name: str, text: str) -> ToolCall:
    if not text.strip():
        # An empty string is how some servers spell "no arguments" for a tool without any.
        return ToolCall(id=call_id, name=name, arguments={})
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        return ToolCall(id=call_id, name=name, arguments=decoded)
    return ToolCall(id=call_id, name=name, arguments=None, raw_arguments=text)
