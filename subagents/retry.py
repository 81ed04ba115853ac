"""Local retry of transient failures: the one place fanout retries (tenacity underneath).

The wait before retry k (k = 1 for the first retry) is
``min(initial × multiplier^(k−1), max_backoff)``; with full jitter it is a uniform draw
in [0, that] from the subtask's own random stream; it is never shorter than the
failure's ``retry_after_s``. Attempts are bounded by ``max_attempts`` and, optionally, by
``max_total_s`` measured from the logical call's first attempt. Only results whose
``isRetryable`` is true are retried; sleeping goes through the injected clock.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.clock import MAX_SECONDS, Clock
from shared.envelope import ToolResult
from subagents.jitter import Jitter

if TYPE_CHECKING:
    from tenacity import RetryCallState


class RetryPolicy(BaseModel):
    """How a subagent retries transient failures of one logical call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Bounded so a policy always ends: a million instant attempts is a hang, not a retry.
    max_attempts: int = Field(default=4, ge=1, le=1000)
    initial_backoff_s: float = Field(default=0.5, ge=0, le=MAX_SECONDS)
    multiplier: float = Field(default=2.0, ge=1, le=MAX_SECONDS)
    max_backoff_s: float = Field(default=8.0, ge=0, le=MAX_SECONDS)
    jitter: Literal["full", "none"] = "full"
    max_total_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)

    def backoff(self, k: int) -> float:
        """The un-jittered wait before retry ``k`` (k ≥ 1)."""
        try:
            grown = self.initial_backoff_s * self.multiplier ** (k - 1)
        except OverflowError:  # 2.0 ** 1024: long past any max_backoff_s
            return self.max_backoff_s
        return min(grown, self.max_backoff_s)

    @classmethod
    def no_retry(cls) -> RetryPolicy:
        """A single attempt: for callers that retry elsewhere, or tests."""
        return cls(max_attempts=1)


WaitHook = Callable[[float, int], None]
"""Called before each wait with (seconds, number of the attempt that follows)."""


async def run_with_retry(
    attempt: Callable[[int], Awaitable[ToolResult]],
    policy: RetryPolicy,
    *,
    clock: Clock,
    rng: Jitter | None = None,
    on_wait: WaitHook | None = None,
) -> tuple[ToolResult, int]:
    """Run ``attempt(n)`` until it succeeds, fails for good, or the bounds are reached.

    Returns the last envelope and the number of attempts made. Cancellation propagates.
    """
    started = clock.now()
    first = await attempt(1)
    if isinstance(first, ToolResult) and (not first.retryable or policy.max_attempts <= 1):
        # Fast path: most calls succeed (or fail for good) at once, and building the
        # retry machinery for them was most of a call's overhead. What tenacity would
        # decide here is the same: no retry, and no wait drawn from the jitter stream.
        return first, 1
    return await _retry(attempt, policy, first, started, clock=clock, rng=rng, on_wait=on_wait)


async def _retry(
    attempt: Callable[[int], Awaitable[ToolResult]],
    policy: RetryPolicy,
    first: ToolResult,
    started: float,
    *,
    clock: Clock,
    rng: Jitter | None,
    on_wait: WaitHook | None,
) -> tuple[ToolResult, int]:
    """Continue a logical call whose first attempt failed retryably (it is tenacity's first)."""
    # Imported on the first retry: a process whose calls never fail retryably (most
    # replays, `fanout --version`) does not load it.
    from tenacity import AsyncRetrying

    jitter_rng: Jitter = rng if rng is not None else random.Random()
    count = 1
    pending: ToolResult | None = first
    # The envelope of the attempt tenacity is judging. tenacity keeps outcomes in
    # concurrent.futures Futures, whose every read takes a lock; attempts never raise
    # (only cancellation escapes, and tenacity re-raises it), so reading our own copy
    # gives the same answers for less.
    last: object = None

    async def once() -> ToolResult:
        nonlocal count, pending, last
        last = None
        if pending is not None:
            # Attempt 1 already ran: hand tenacity its outcome, so attempt numbers, waits
            # and bounds are exactly those of a call tenacity ran from the start.
            result, pending = pending, None
        else:
            count += 1
            result = await attempt(count)
        last = result
        return result

    def retryable(state: RetryCallState) -> bool:
        # retry_if_result(lambda r: isinstance(r, ToolResult) and r.retryable): a raised
        # outcome (last is None) is not retried.
        return isinstance(last, ToolResult) and last.retryable

    def wait(state: RetryCallState) -> float:
        if state.attempt_number >= policy.max_attempts:
            # No retry will follow, so no wait is drawn: the jitter stream has one draw
            # per wait that is actually considered.
            return 0.0
        base = policy.backoff(state.attempt_number)
        if policy.jitter == "full":
            base = jitter_rng.uniform(0, base)
        floor = last.retry_after_s if isinstance(last, ToolResult) and last.retry_after_s else 0.0
        return max(base, floor)

    def stop(state: RetryCallState) -> bool:
        if state.attempt_number >= policy.max_attempts:
            return True
        if policy.max_total_s is None:
            return False
        next_start = clock.now() + (state.upcoming_sleep or 0.0)
        # To the clock's own nanosecond: the same call must stop the same way whenever it
        # starts (a resumed run's clock runs from an offset; 14.1 - 13.1 is not 1.0).
        return round(next_start - started, 9) > policy.max_total_s

    def before_sleep(state: RetryCallState) -> None:
        if on_wait is not None:
            on_wait(state.upcoming_sleep, state.attempt_number + 1)

    retrying = AsyncRetrying(
        retry=retryable,
        wait=wait,
        stop=stop,
        sleep=clock.sleep,
        before_sleep=before_sleep,
        retry_error_callback=lambda state: last,
    )
    result: object = await retrying(once)
    if not isinstance(result, ToolResult):  # pragma: no cover - attempt() always returns one
        raise TypeError("a retried attempt must return a ToolResult")
    return result, count
