"""One logical model call: per-attempt timeout, classification, fanout's one retry layer.

A model call goes through :func:`subagents.executor.execute_tool_safely` as a tool named
``model``: the same per-attempt ``fail_after``, the same classification (a
:class:`ModelCallFailed` carries its category), the same tenacity-backed retry with the
model's retry policy and its own jitter stream, the same observer. So a model call is
traced, counted and retried exactly like a tool call, and there is one retry layer.
"""

from __future__ import annotations

import random
from typing import Any

from shared.clock import Clock
from shared.envelope import ToolResult
from subagents.executor import ExecObserver, execute_tool_safely
from subagents.models.base import ModelClient, ModelRequest, ModelTurn
from subagents.models.spec import ModelSpec
from subagents.tool import Tool

MODEL_TOOL = "model"
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_MAX_TRACE_TEXT = 2000  # characters of a turn's text kept in its envelope (the trace)


def turn_data(turn: ModelTurn) -> dict[str, Any]:
    """What a successful model call's envelope holds: enough for a trace to show it."""
    text = turn.text
    data: dict[str, Any] = {
        "model": turn.model,
        "stop_reason": turn.stop_reason,
        "text": text if len(text) <= _MAX_TRACE_TEXT else text[:_MAX_TRACE_TEXT] + "…",
        "calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments}
            if c.arguments is not None
            else {"id": c.id, "name": c.name, "raw_arguments": c.raw_arguments}
            for c in turn.calls
        ],
    }
    if turn.usage is not None:
        data["usage"] = {
            "input_tokens": turn.usage.input_tokens,
            "output_tokens": turn.usage.output_tokens,
        }
    return data


async def call_model(
    client: ModelClient,
    request: ModelRequest,
    *,
    spec: ModelSpec,
    clock: Clock,
    rng: random.Random,
    trace_id: str,
    observer: ExecObserver | None = None,
) -> tuple[ToolResult, ModelTurn | None]:
    """Call the model until it answers or fails for good; the envelope and the turn.

    The turn is None when the call failed; the envelope (``tool: "model"``) says how.
    """
    turns: list[ModelTurn] = []

    async def body() -> dict[str, Any]:
        turn = await client.complete(request)
        turns.append(turn)
        return turn_data(turn)

    # A provider's model keeps its real timeout under --speed; the scripted one is simulated.
    real = not getattr(client, "simulated", False)
    tool = Tool(name=MODEL_TOOL, body=body, schema=_NO_ARGS, is_async=True, real_time=real)
    result = await execute_tool_safely(
        tool,
        {},
        timeout=spec.timeout_s,
        retry=spec.retry,
        trace_id=trace_id,
        clock=clock,
        rng=rng,
        scope=request.subtask_id,
        observer=observer,
    )
    return result, (turns[-1] if result.ok and turns else None)
