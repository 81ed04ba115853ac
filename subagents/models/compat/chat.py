"""Reading what an OpenAI-compatible server answers: a whole chat completion, or a
streamed one gathered into one (docs/design.md §7 "Real servers: profiles", §8 "Streaming").

:func:`to_turn` normalises a completion whatever the server bent; :func:`gather_stream`
adds up ``stream: true`` chunks into a completion first, text handed over as it comes.

``stream: true`` answers with ``chat.completion.chunk`` events. The servers bend them as
they bend whole answers (docs/design.md §7, "Real servers: profiles"), and what is gathered here
is then normalised by :func:`to_turn` exactly as a whole answer:

- text comes as ``delta.content`` pieces (``on_text`` hears each at once);
- tool calls come as ``delta.tool_calls`` pieces, keyed by ``index``: the id and name
  in the first, the arguments' text spread over the rest. A server that leaves out
  ``index`` continues the call it began unless the piece names a new id; one that sends
  ``arguments`` as an object, or repeats the name in every piece, is taken as it is;
  missing ids are minted later, as for a whole answer;
- ``finish_reason`` comes in a late chunk, sometimes null or ``stop`` beside calls;
- usage comes in a last chunk with no choices (``stream_options.include_usage``), or in
  the chunk of the finish (some servers), or never: the turn then has no usage.

An ``error`` object inside the stream (the server broke off) fails the attempt as a
transient failure; fanout's retry writes the answer again from the start.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from subagents.models.base import ModelCallFailed, ModelTurn, StopReason, TextSink, ToolCall, Usage
from subagents.models.compat.profiles import PROFILES, ServerProfile, text_tool_calls

_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


async def gather_stream(chunks: AsyncIterable[Any], on_text: TextSink) -> ChatCompletion:
    """The completion the chunks add up to; ``on_text`` hears each text piece as it comes."""
    text: list[str] = []
    refusal: list[str] = []
    calls: list[dict[str, str]] = []
    by_index: dict[int, dict[str, str]] = {}
    finish: str | None = None
    usage: Any = None
    model = ""
    ident = ""
    try:
        async for chunk in chunks:
            model = getattr(chunk, "model", None) or model
            ident = getattr(chunk, "id", None) or ident
            usage = getattr(chunk, "usage", None) or usage
            for choice in getattr(chunk, "choices", None) or ():
                if (getattr(choice, "index", 0) or 0) != 0:
                    continue  # fanout asks for one choice; a second is not its answer
                delta = getattr(choice, "delta", None)
                if delta is not None:
                    piece = getattr(delta, "content", None)
                    if piece:
                        text.append(piece)
                        on_text(piece)
                    said = getattr(delta, "refusal", None)
                    if said:
                        refusal.append(said)
                    for part in getattr(delta, "tool_calls", None) or ():
                        _add_call_piece(part, calls, by_index)
                finish = getattr(choice, "finish_reason", None) or finish
    except openai.APIError as exc:
        if isinstance(exc, openai.APIStatusError | openai.APIConnectionError):
            raise  # classified by the caller, as for a whole answer
        raise ModelCallFailed(
            f"the server broke off its streamed answer: {exc.message}",
            kind="unavailable",
            category="transient",
        ) from exc
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(text) or None,
        "refusal": "".join(refusal) or None,
    }
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
    body: dict[str, Any] = {
        "id": ident or "chatcmpl-stream",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish or "stop"}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
            "total_tokens": getattr(usage, "total_tokens", 0) or 0,
        }
    return ChatCompletion.model_validate(body)


def _add_call_piece(
    part: Any, calls: list[dict[str, str]], by_index: dict[int, dict[str, str]]
) -> None:
    """Add one ``delta.tool_calls`` piece to the call it continues (or a new one)."""
    index = getattr(part, "index", None)
    call_id = getattr(part, "id", None) or ""
    function = getattr(part, "function", None)
    name = (getattr(function, "name", None) or "") if function is not None else ""
    arguments: object = getattr(function, "arguments", None) if function is not None else None
    if isinstance(index, int) and index in by_index:
        call = by_index[index]
    elif not isinstance(index, int) and calls and (not call_id or call_id == calls[-1]["id"]):
        call = calls[-1]  # no index: a piece without a new id continues the last call
    else:
        call = {"id": "", "name": "", "arguments": ""}
        calls.append(call)
        if isinstance(index, int):
            by_index[index] = call
    if call_id and not call["id"]:
        call["id"] = call_id
    if name and not call["name"]:
        call["name"] = name  # a name repeated in every piece is the same name
    if isinstance(arguments, str):
        call["arguments"] += arguments
    elif arguments is not None:
        # A lax server sent the arguments as an object: its JSON text.
        call["arguments"] += json.dumps(arguments)


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
