"""A model planner's transcript as its checkpoint holds it: entries in, JSON out, and back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.envelope import ToolError
from subagents.models.base import AssistantMessage, ModelTurn, ToolCall, Usage, UserMessage
from subagents.planners.base import CallAction


@dataclass
class ResultEntry:
    """A tool result in the transcript: its content is the context message at ``index``."""

    call_id: str
    name: str
    index: int
    is_error: bool


Entry = UserMessage | AssistantMessage | ResultEntry


def call_out(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "name": c.name, "arguments": c.arguments, "raw": c.raw_arguments}


def call_in(d: dict[str, Any]) -> ToolCall:
    return ToolCall(d["id"], d["name"], d["arguments"], d.get("raw"))


def action_out(a: CallAction) -> dict[str, Any]:
    return {
        "tool": a.tool,
        "args": a.args,
        "step": a.step,
        "call_id": a.call_id,
        "invalid": None if a.invalid is None else a.invalid.model_dump(mode="json", by_alias=True),
    }


def action_in(d: dict[str, Any]) -> CallAction:
    invalid = None if d["invalid"] is None else ToolError.model_validate(d["invalid"])
    return CallAction(d["tool"], dict(d["args"]), int(d["step"]), d["call_id"], invalid)


def entry_out(e: Entry) -> dict[str, Any]:
    if isinstance(e, UserMessage):
        return {"user": e.text, "hint": True} if e.hint else {"user": e.text}
    if isinstance(e, ResultEntry):
        return {"result": [e.call_id, e.name, e.index, e.is_error]}
    t = e.turn
    usage = None if t.usage is None else [t.usage.input_tokens, t.usage.output_tokens]
    return {
        "assistant": {
            "text": t.text,
            "calls": [call_out(c) for c in t.calls],
            "stop": t.stop_reason,
            "usage": usage,
            "model": t.model,
        }
    }


def entry_in(d: dict[str, Any]) -> Entry:
    if "user" in d:
        return UserMessage(d["user"], hint=bool(d.get("hint", False)))
    if "result" in d:
        call_id, name, index, is_error = d["result"]
        return ResultEntry(call_id, name, int(index), bool(is_error))
    a = d["assistant"]
    usage = None if a["usage"] is None else Usage(*a["usage"])
    turn = ModelTurn(
        text=a["text"],
        calls=tuple(call_in(c) for c in a["calls"]),
        stop_reason=a["stop"],
        usage=usage,
        model=a["model"],
    )
    return AssistantMessage(turn)
