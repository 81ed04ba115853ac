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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from shared.clock import MAX_SECONDS, Clock
from shared.envelope import ToolResult
from subagents.jitter import Jitter


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


class _Backoff(wait_base):
    """The wait after attempt k: the policy's backoff for retry k, jittered from the
    subtask's stream, never shorter than the failure's ``retry_after_s``.

    Each wait is drawn once and kept, so stop (:class:`_TotalTime`) can weigh the same
    wait tenacity sleeps, whichever of the two tenacity asks first. After the last
    attempt no wait is drawn: the stream has one draw per wait that may be slept.
    """

    def __init__(self, policy: RetryPolicy, rng: Jitter) -> None:
        self.policy = policy
        self.rng = rng
        self.drawn: dict[int, float] = {}

    def __call__(self, retry_state: RetryCallState) -> float:
        k = retry_state.attempt_number
        if k >= self.policy.max_attempts:
            return 0.0
        seconds = self.drawn.get(k)
        if seconds is None:
            base = self.policy.backoff(k)
            if self.policy.jitter == "full":
                base = self.rng.uniform(0, base)
            outcome = retry_state.outcome
            last = outcome.result() if outcome is not None and not outcome.failed else None
            floor = last.retry_after_s if isinstance(last, ToolResult) else None
            seconds = self.drawn[k] = max(base, floor or 0.0)
        return seconds


class _TotalTime(stop_base):
    """Stop when the next attempt would start more than ``max_total_s`` after the first
    attempt started, on the injected clock, counting the coming wait."""

    def __init__(self, limit: float, started: float, clock: Clock, wait: _Backoff) -> None:
        self.limit = limit
        self.started = started
        self.clock = clock
        self.wait = wait

    def __call__(self, retry_state: RetryCallState) -> bool:
        next_start = self.clock.now() + self.wait(retry_state)
        # To the clock's own nanosecond: the same call must stop the same way whenever it
        # starts (a resumed run's clock runs from an offset; 14.1 - 13.1 is not 1.0).
        return round(next_start - self.started, 9) > self.limit


def _retryable(result: object) -> bool:
    return isinstance(result, ToolResult) and result.retryable


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
    count = 1
    pending: ToolResult | None = first

    async def once() -> ToolResult:
        nonlocal count, pending
        if pending is not None:
            # Attempt 1 already ran: hand tenacity its outcome, so attempt numbers, waits
            # and bounds are exactly those of a call tenacity ran from the start.
            result, pending = pending, None
            return result
        count += 1
        return await attempt(count)

    wait = _Backoff(policy, rng if rng is not None else random.Random())
    stop: stop_base = stop_after_attempt(policy.max_attempts)
    if policy.max_total_s is not None:
        stop = stop | _TotalTime(policy.max_total_s, started, clock, wait)

    def before_sleep(state: RetryCallState) -> None:
        if on_wait is not None:
            on_wait(wait(state), state.attempt_number + 1)

    retrying = AsyncRetrying(
        retry=retry_if_result(_retryable),
        wait=wait,
        stop=stop,
        sleep=clock.sleep,
        before_sleep=before_sleep,
        # Out of attempts or time: the call's result is the last envelope.
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    result: object = await retrying(once)
    if not isinstance(result, ToolResult):  # pragma: no cover - attempt() always returns one
        raise TypeError("a retried attempt must return a ToolResult")
    return result, count
