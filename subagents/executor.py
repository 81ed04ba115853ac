"""Safe execution of one logical tool call: validate, run, time out, classify, retry.

Every failure of the tool comes back as a :class:`ToolResult` (never raised);
cancellation of the caller propagates and cancels the tool.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

import anyio.to_thread
import pydantic_core

from shared.categories import EFFECT_MAY_HAVE_HAPPENED
from shared.classify import classify_exception
from shared.clock import AnyioClock, Clock, in_virtual_time, real_time
from shared.envelope import ToolError, ToolResult
from shared.ids import new_trace_id
from shared.wire import is_plain
from subagents.jitter import Jitter
from subagents.retry import RetryPolicy, run_with_retry
from subagents.schema import SchemaViolation
from subagents.tool import CallContext, Tool, ToolOutput


@dataclass(frozen=True, slots=True)
class ExecEvent:
    """Something that happened while a call ran: an attempt began or ended, a wait began."""

    kind: Literal["start", "attempt", "wait"]
    tool: str
    trace_id: str
    attempt: int
    at: float
    result: ToolResult | None = None
    wait_s: float | None = None


ExecObserver = Callable[[ExecEvent], None]

_SUCCESS = ToolResult.success("", None, trace_id="")


def _is_empty(data: Any) -> bool:
    if data is None:
        return True
    if isinstance(data, list | tuple | dict | str | set) and not data:
        return True
    # {"results": []} and the like: a container whose every value is an empty container.
    return (
        isinstance(data, dict)
        and all(isinstance(v, list | tuple | dict) and not v for v in data.values())
    )


def rejected(tool: str, error: ToolError, *, trace_id: str) -> ToolResult:
    """The envelope of a call refused before execution: one attempt, no time, no effect."""
    return ToolResult.failure(tool, error, trace_id=trace_id, attempts=1)


def unknown_effect(tool: str, *, trace_id: str) -> ToolResult:
    """The envelope of a non-idempotent call its process died during: the effect may or
    may not have happened, so it is not retried (docs/design.md §2, unknown state)."""
    error = ToolError.of(
        "transient",
        "interrupted",
        f"{tool}: the run stopped during this call; its effect may or may not have happened",
        retryable=False,
        next_safe_action="verify_state_before_retry",
    )
    return ToolResult.failure(tool, error, trace_id=trace_id, changed_state="unknown")


async def execute_tool_safely(
    tool: Tool,
    args: Mapping[str, Any],
    *,
    timeout: float | None,
    retry: RetryPolicy | None = None,
    trace_id: str | None = None,
    clock: Clock | None = None,
    rng: Jitter | None = None,
    idempotency_key: str | None = None,
    scope: str = "",
    observer: ExecObserver | None = None,
    admit: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
) -> ToolResult:
    """Run one logical call of ``tool`` and return its envelope; never raise for a failure.

    Args:
        tool: the tool; its schema is checked first and a bad argument is a
            ``validation`` envelope naming the field, without running the body.
        args: the call's arguments.
        timeout: seconds per attempt (None: no limit).
        retry: the policy for transient failures; None means a single attempt.
        trace_id: the call's trace id (a fresh one by default).
        clock: where time comes from; virtual in replays and tests.
        rng: the jitter stream (the subtask's own, for reproducible replays).
        idempotency_key: sent unchanged to every attempt of this logical call.
        scope: who is calling (a subtask id), passed to tools that ask for context.
        observer: told of every attempt and every wait, for traces and live displays.
        admit: entered before each attempt and held through it (a model endpoint's rate
            limiter): waiting to get in is not part of the attempt, nor of its timeout.
    """
    clock = clock or AnyioClock()
    if tool.real_time:
        clock = real_time(clock)
    trace_id = trace_id or new_trace_id()
    key = idempotency_key or f"idem_{trace_id}"
    policy = retry or RetryPolicy.no_retry()

    accepted = tool.accept(args)
    if isinstance(accepted, SchemaViolation):
        violation = accepted
        error = ToolError.of(
            "validation",
            "invalid_argument",
            f"{tool.name}: {violation.message}",
            field=violation.field,
            expected=violation.expected,
        )
        result = rejected(tool.name, error, trace_id=trace_id)
        if observer is not None:
            observer(ExecEvent("start", tool.name, trace_id, 1, clock.now()))
            observer(ExecEvent("attempt", tool.name, trace_id, 1, clock.now(), result))
        return result
    prepared = accepted
    start = clock.now()

    def quiet(n: int) -> Coroutine[Any, Any, ToolResult]:
        # No observer: the attempt's own coroutine, without a frame around it (at full
        # fan-out every subagent has a call in flight at once).
        return _attempt_once(tool, prepared, CallContext(tool.name, n, trace_id, key, scope),
                             timeout, clock)

    async def attempt(n: int) -> ToolResult:
        assert observer is not None
        ctx = CallContext(tool.name, n, trace_id, key, scope)
        began = clock.now()
        observer(ExecEvent("start", tool.name, trace_id, n, began))
        result = await _attempt_once(tool, prepared, ctx, timeout, clock)
        # The trace shows each attempt's own envelope: its number and its own duration
        # (the final envelope, below, carries the totals of the logical call).
        ended = clock.now()
        result = result.model_copy(update={"attempts": n, "elapsed_s": round(ended - began, 9)})
        observer(ExecEvent("attempt", tool.name, trace_id, n, ended, result))
        return result

    def on_wait(seconds: float, next_attempt: int) -> None:
        assert observer is not None
        observer(ExecEvent("wait", tool.name, trace_id, next_attempt, clock.now(), wait_s=seconds))

    once: Callable[[int], Awaitable[ToolResult]] = quiet if observer is None else attempt
    if admit is not None:
        plain = once

        async def admitted(n: int) -> ToolResult:
            assert admit is not None
            async with admit():
                return await plain(n)

        once = admitted
    result, attempts = await run_with_retry(
        once, policy, clock=clock, rng=rng, on_wait=None if observer is None else on_wait
    )
    update: dict[str, Any] = {"attempts": attempts, "elapsed_s": round(clock.now() - start, 9)}
    if tool.side_effects:
        update["idempotency_key"] = key
    return result.model_copy(update=update)


async def _attempt_once(
    tool: Tool, args: dict[str, Any], ctx: CallContext, timeout: float | None, clock: Clock
) -> ToolResult:
    """One attempt: a success or a classified failure. Only cancellation escapes."""
    scope: Any = None
    try:
        with clock.fail_after(timeout) as scope:
            # The call inline, not in a helper coroutine: one frame fewer per live call.
            kwargs = {**args, "ctx": ctx} if tool.wants_context else args
            if tool.is_async:
                raw = await tool.body(**kwargs)
            elif in_virtual_time():
                # In virtual time a worker thread's real seconds would let the mock clock
                # jump past the timeout while the thread works: run it on the loop.
                raw = tool.body(**kwargs)
            else:
                # A sync body runs in a worker thread so a slow one cannot stall the loop;
                # on timeout the thread is abandoned (Python threads cannot be killed) and
                # its result ignored.
                raw = await anyio.to_thread.run_sync(
                    functools.partial(tool.body, **kwargs), abandon_on_cancel=True
                )
    except Exception as exc:  # a tool failure is data; BaseException (cancellation) is not
        error = classify_exception(exc)
        # Only our own limit gets the "timed out after Ns" message; a tool's own
        # TimeoutError keeps its text.
        ours = bool(getattr(scope, "cancelled_caught", False))
        if isinstance(exc, TimeoutError) and error.error_type == "timeout" and timeout and ours:
            error = error.model_copy(
                update={"message": f"{tool.name} timed out after {timeout:g}s"}
            )
        changed: bool | Literal["unknown"] = False
        if tool.side_effects and not tool.idempotent and error.error_type in (
            EFFECT_MAY_HAVE_HAPPENED
        ):
            # The effect may or may not have happened: retrying could do it twice.
            changed = "unknown"
            error = error.model_copy(
                update={"retryable": False, "next_safe_action": "verify_state_before_retry"}
            )
        return ToolResult.failure(tool.name, error, trace_id=ctx.trace_id, changed_state=changed)
    if isinstance(raw, ToolOutput):
        data, empty, complete = raw.data, raw.empty, raw.complete
    else:
        data, empty, complete = raw, False, True
    if not is_plain(data):
        # Data that is not JSON cannot travel in an envelope, a context or a report: it
        # becomes JSON where it has an obvious form (a tuple, a set, a date, NaN as null);
        # what has none (an object, a cycle, bytes that are not text) is the tool's bug.
        try:
            data = json.loads(pydantic_core.to_json(data, inf_nan_mode="null"))
        except Exception as exc:  # the data's own methods may raise anything
            detail = f"{type(exc).__name__}: {exc}"[:300]
            error = ToolError.of(
                "internal",
                "unserializable_result",
                f"{tool.name} returned data that is not JSON ({detail})",
            )
            return ToolResult.failure(
                tool.name, error, trace_id=ctx.trace_id, changed_state=tool.side_effects
            )
    empty = empty or _is_empty(data)
    # Every field is one of ours, already typed: copy a validated prototype instead of
    # validating again (the hot path; model_copy is about 4x cheaper than model_construct).
    return _SUCCESS.model_copy(
        update={
            "tool": tool.name,
            "trace_id": ctx.trace_id,
            "data": data,
            "empty": bool(empty),
            "complete": bool(complete),
            "changed_state": tool.side_effects,
        }
    )
