"""The scripted model of ``provider: scripted``: a file's turns replayed in virtual time."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import anyio

from shared.categories import ErrorCategory
from shared.clock import Clock
from subagents.models.base import (
    ModelCallFailed,
    ModelFailureKind,
    ModelRequest,
    ModelTurn,
    TextSink,
    ToolCall,
    Usage,
    UserMessage,
)
from subagents.models.spec import ModelSpec, ScriptedError, ScriptedTurn

PLAN_TOOL = "plan_subtasks"
"""The planning tool a ``subtasks`` turn calls when the request forces none."""
FOLLOWUP_TOOL = "plan_followups"
"""The planning tool a ``followups`` turn calls when the request forces none
(docs/design.md §11)."""

# A scripted error as the HTTP answer it stands for (docs/design.md §7): kind, category, status.
_ERRORS: Mapping[ScriptedError, tuple[ModelFailureKind, ErrorCategory, int | None]] = {
    "overloaded": ("overloaded", "transient", 529),
    "rate_limited": ("rate_limited", "transient", 429),
    "timeout": ("timeout", "transient", None),
    "unavailable": ("unavailable", "transient", 503),
    "connection_reset": ("connection_reset", "transient", None),
    "auth": ("auth", "permission", 401),
    "forbidden": ("forbidden", "permission", 403),
    "model_not_found": ("model_not_found", "validation", 404),
    "quota": ("quota", "business", 429),
    "context_length": ("context_length", "validation", 400),
    "bad_request": ("bad_request", "internal", 400),
}


class ScriptedModel:
    """Each call consumes the next turn of its subtask (failed calls included).

    A turn with ``hinted`` is replaced by it when the request brings a person's hint
    since the model's last turn (docs/design.md §17): a scenario shows what a hint changes.

    A call first waits ``latency_s`` on the clock; a ``timeout`` turn waits
    ``timeout_s`` instead and then fails, so the caller's per-attempt
    ``fail_after(timeout_s)`` cuts it at that same instant (and a caller without one
    still gets a timeout, never a hang). Positions are checkpointable with
    :meth:`snapshot` / :meth:`restore`, so a killed run resumes where it stopped.
    """

    provider = "scripted"
    simulated = True  # its latency is simulated time: --speed scales it

    def __init__(self, spec: ModelSpec, *, clock: Clock | None = None) -> None:
        self.name = spec.model_name
        self.latency_s = spec.latency_s
        self.timeout_s = spec.timeout_s
        self._turns = spec.turns
        self._sleep = clock.sleep if clock is not None else anyio.sleep
        self._positions: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, subtasks={sorted(self._turns)!r})"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """The next turn of ``request.subtask_id``: its text, calls or failure."""
        subtask = request.subtask_id
        # The turn is taken before any wait: a call cut by a deadline still used it up.
        n = self._positions.get(subtask, 0)
        turns = self._turns.get(subtask, [])
        if request.force_tool != FOLLOWUP_TOOL:
            # A followups turn answers plan_followups only: a lead that is not asked (no
            # gap left, no time before the deadline) passes over it to its synthesis.
            while n < len(turns) and turns[n].followups is not None:
                n += 1
        self._positions[subtask] = n + 1
        turn = turns[n] if n < len(turns) else None
        if turn is not None and turn.hinted is not None and _hinted(request):
            turn = turn.hinted
        if turn is not None and turn.error == "timeout":
            await self._sleep(self.timeout_s)
            raise _failure(turn.error, turn, subtask)
        await self._sleep(
            self.latency_s if turn is None or turn.latency_s is None else turn.latency_s
        )
        if turn is None:
            return ModelTurn(text="", stop_reason="end_turn", model=self.name)
        if turn.error is not None:
            raise _failure(turn.error, turn, subtask)
        return self._turn(turn, request, subtask, n)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """:meth:`complete`, its text handed over a sentence at a time once the turn's
        latency has passed (the same pieces every replay)."""
        turn = await self.complete(request)
        for piece in text_pieces(turn.text):
            on_text(piece)
        return turn

    async def aclose(self) -> None:
        """Nothing to release."""

    def snapshot(self) -> dict[str, Any]:
        """How many turns each subtask has consumed, as plain JSON."""
        return {"positions": dict(sorted(self._positions.items()))}

    def seek(self, subtask_id: str, position: int) -> None:
        """Continue ``subtask_id`` at its ``position``-th call (a restored planner's count)."""
        self._positions[subtask_id] = position

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume from a :meth:`snapshot`."""
        positions = state.get("positions", {})
        if not isinstance(positions, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in positions.items()
        ):
            raise ValueError(f"not a ScriptedModel snapshot: {state!r}")
        self._positions = dict(positions)

    def _turn(self, turn: ScriptedTurn, request: ModelRequest, subtask: str, n: int) -> ModelTurn:
        usage = None
        if turn.usage is not None:
            usage = Usage(
                input_tokens=turn.usage.get("input_tokens", 0),
                output_tokens=turn.usage.get("output_tokens", 0),
            )
        if turn.subtasks is not None:
            plan = ToolCall(
                id=_call_id(subtask, n, 0),
                name=request.force_tool or PLAN_TOOL,
                arguments={"subtasks": [dict(s) for s in turn.subtasks]},
            )
            calls: tuple[ToolCall, ...] = (plan,)
        elif turn.followups is not None:
            followups = ToolCall(
                id=_call_id(subtask, n, 0),
                name=request.force_tool or FOLLOWUP_TOOL,
                arguments={"followups": [dict(f) for f in turn.followups]},
            )
            calls = (followups,)
        else:
            calls = tuple(
                ToolCall(id=_call_id(subtask, n, i), name=c.tool, arguments=dict(c.args))
                if isinstance(c.args, dict)
                else ToolCall(
                    id=_call_id(subtask, n, i), name=c.tool, arguments=None, raw_arguments=c.args
                )
                for i, c in enumerate(turn.calls or ())
            )
        stop = turn.stop or ("tool_use" if calls else "end_turn")
        return ModelTurn(
            text=turn.text or "", calls=calls, stop_reason=stop, usage=usage, model=self.name
        )


def _hinted(request: ModelRequest) -> bool:
    """Whether a person's hint came after the model's last turn in ``request``."""
    for message in reversed(request.messages):
        if isinstance(message, UserMessage) and message.hint:
            return True
        if message.role == "assistant":
            return False
    return False


def _failure(error: ScriptedError, turn: ScriptedTurn, subtask: str) -> ModelCallFailed:
    kind, category, status = _ERRORS[error]
    return ModelCallFailed(
        turn.message or f"scripted model ({subtask}): {error}",
        kind=kind,
        category=category,
        status=status,
        retry_after_s=turn.retry_after_s,
        field="model.name" if error == "model_not_found" else None,
        expected="a model the provider serves" if error == "model_not_found" else None,
    )


def _call_id(subtask: str, n: int, i: int) -> str:
    """Deterministic: the same file gives the same ids, so reports match byte for byte."""
    return f"call_{subtask}_{n}_{i}"


_SENTENCE_END = re.compile(r"(?<=[.!?:\n])(?=\s)")


def text_pieces(text: str) -> list[str]:
    """``text`` cut after each sentence (the whitespace goes with the next): joined, the
    pieces are the text."""
    return [piece for piece in _SENTENCE_END.split(text) if piece]
