"""One logical model call: per-attempt timeout, classification, fanout's one retry layer.

A model call goes through :func:`subagents.executor.execute_tool_safely` as a tool named
``model``: the same per-attempt ``fail_after``, the same classification (a
:class:`ModelCallFailed` carries its category), the same tenacity-backed retry with the
model's retry policy and its own jitter stream, the same observer. So a model call is
traced, counted and retried exactly like a tool call, and there is one retry layer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from shared.clock import Clock
from shared.envelope import ToolResult
from subagents.executor import ExecObserver, execute_tool_safely
from subagents.jitter import Jitter
from subagents.models.base import (
    ModelCallFailed,
    ModelClient,
    ModelRequest,
    ModelTurn,
    StreamingClient,
)
from subagents.models.compat.names import WireNames
from subagents.models.limiter import EndpointLimiter, Permit, estimate_tokens, limiter_of
from subagents.models.spec import ModelSpec
from subagents.tool import Tool

MODEL_TOOL = "model"


class StreamSink(Protocol):
    """Where a streamed turn's text goes (the lead's answer: ``answer.delta`` events)."""

    def delta(self, text: str) -> None:
        """The next piece of the text."""
        ...

    def restart(self) -> None:
        """The call is made again: the text written so far is void, it starts anew."""
        ...
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_MAX_TRACE_TEXT = 2000  # characters of a turn's text kept in its envelope (the trace)


_NAMED_APIS = ("anthropic", "openai")
"""The providers whose APIs restrict tool names (see subagents/models/compat/names.py)."""


def _named(turn: ModelTurn, names: WireNames | None) -> ModelTurn:
    return turn if names is None else names.decode(turn)


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
    rng: Jitter,
    trace_id: str,
    observer: ExecObserver | None = None,
    on_limit_wait: Callable[[bool], None] | None = None,
    stream: StreamSink | None = None,
) -> tuple[ToolResult, ModelTurn | None]:
    """Call the model until it answers or fails for good; the envelope and the turn.

    The turn is None when the call failed; the envelope (``tool: "model"``) says how.
    Each attempt first waits for the endpoint's limiter, if its client has one;
    ``on_limit_wait(True)`` is called when an attempt has to wait for it, and
    ``on_limit_wait(False)`` when the wait is over (the live view shows it).

    With ``stream``, a client that can stream (:class:`StreamingClient`) hands the
    turn's text to it as it is written; an attempt after one that wrote text (a stream
    cut mid-way and retried) first says so (``stream.restart()``): it writes again from
    the start.
    """
    turns: list[ModelTurn] = []
    limiter = limiter_of(client)
    permits: list[Permit] = []
    sent = request
    names = WireNames.of(request) if client.provider in _NAMED_APIS else None
    if names is not None and names.needed:
        # `time.get_current_time` is not a name these APIs take: sent as one they do,
        # and the model's calls named back (docs/design.md §7: the loop sees fanout's names).
        sent = names.encode(request)
    else:
        names = None

    streaming = stream is not None and isinstance(client, StreamingClient)
    wrote = False

    def on_text(text: str) -> None:
        nonlocal wrote
        if text:
            assert stream is not None
            wrote = True
            stream.delta(text)

    def answer() -> Awaitable[ModelTurn]:
        nonlocal wrote
        if not streaming:
            return client.complete(sent)
        assert stream is not None and isinstance(client, StreamingClient)
        if wrote:
            stream.restart()
            wrote = False
        return client.stream(sent, on_text)

    async def body() -> dict[str, Any]:
        if not permits:
            turn = _named(await answer(), names)
            turns.append(turn)
            return turn_data(turn)
        permit = permits[-1]
        try:
            turn = _named(await answer(), names)
        except ModelCallFailed as exc:
            permit.refused(status=exc.status, report=exc.rate)
            raise
        permit.answered(turn.usage, turn.rate)
        turns.append(turn)
        return turn_data(turn)

    admit: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    if limiter is not None:
        admit = _admission(limiter, request, permits, on_limit_wait)

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
        admit=admit,
    )
    return result, (turns[-1] if result.ok and turns else None)


def _admission(
    limiter: EndpointLimiter,
    request: ModelRequest,
    permits: list[Permit],
    on_wait: Callable[[bool], None] | None,
) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """Each attempt's way in: the endpoint's permit, and the caller told of any wait."""
    waited = False

    def waiting() -> None:
        nonlocal waited
        waited = True
        if on_wait is not None:
            on_wait(True)

    @asynccontextmanager
    async def admit() -> AsyncIterator[None]:
        nonlocal waited
        waited = False
        async with limiter.permit(
            lambda: estimate_tokens(request), on_wait=waiting, key=request.subtask_id
        ) as permit:
            if waited and on_wait is not None:
                on_wait(False)
            permits.append(permit)
            yield

    return admit
