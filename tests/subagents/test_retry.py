"""Local retry: waits, jitter stream, bounds by attempts and by time, in virtual time."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import anyio
import pydantic
import pytest

from shared import AnyioClock, ToolError, ToolResult
from subagents import RetryPolicy, run_with_retry

Attempt = Callable[[int], Awaitable[ToolResult]]


def _transient(retry_after_s: float | None = None) -> ToolResult:
    error = ToolError.of("transient", "unavailable", "down", retry_after_s=retry_after_s)
    return ToolResult.failure("t", error, trace_id="tr_1")


def _ok() -> ToolResult:
    return ToolResult.success("t", {"x": 1}, trace_id="tr_1")


def _failing(times: int, *, latency: float = 0.0, retry_after_s: float | None = None) -> Attempt:
    """An attempt function failing transiently ``times`` times, then succeeding."""

    async def attempt(n: int) -> ToolResult:
        await anyio.sleep(latency)
        return _transient(retry_after_s) if n <= times else _ok()

    return attempt


async def _run(
    attempt: Attempt, policy: RetryPolicy, rng: random.Random | None = None
) -> tuple[ToolResult, int, list[float], float]:
    waits: list[float] = []
    start = anyio.current_time()
    result, attempts = await run_with_retry(
        attempt, policy, clock=AnyioClock(), rng=rng, on_wait=lambda s, _n: waits.append(s)
    )
    return result, attempts, waits, anyio.current_time() - start


def test_backoff_schedule() -> None:
    """The un-jittered wait before retry k is min(initial × multiplier^(k−1), max)."""
    policy = RetryPolicy(initial_backoff_s=0.5, multiplier=2, max_backoff_s=3)
    assert [policy.backoff(k) for k in range(1, 6)] == [0.5, 1, 2, 3, 3]


def test_policy_defaults_are_the_design_defaults() -> None:
    """Where a file says nothing, the retry policy is docs/design.md §5.1's default."""
    assert RetryPolicy() == RetryPolicy(
        max_attempts=4, initial_backoff_s=0.5, multiplier=2, max_backoff_s=8, jitter="full",
        max_total_s=None,
    )
    assert RetryPolicy.no_retry().max_attempts == 1


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"max_attempts": 0}, id="zero-attempts"),
        pytest.param({"initial_backoff_s": -1}, id="negative-backoff"),
        pytest.param({"jitter": "equal"}, id="unknown-jitter"),
        pytest.param({"max_total_s": 0}, id="zero-total"),
        pytest.param({"retries": 3}, id="unknown-field"),
    ],
)
def test_policy_refuses_nonsense(fields: dict[str, object]) -> None:
    """A policy that cannot bound its retries is refused when built."""
    with pytest.raises(pydantic.ValidationError):
        RetryPolicy.model_validate(fields)


@pytest.mark.anyio
async def test_exponential_waits_without_jitter() -> None:
    """Three transient failures then success: four attempts, waits 0.5, 1, 2."""
    policy = RetryPolicy(max_attempts=4, initial_backoff_s=0.5, multiplier=2, jitter="none")
    result, attempts, waits, elapsed = await _run(_failing(3), policy)
    assert result.ok
    assert attempts == 4
    assert waits == [0.5, 1, 2]
    assert elapsed == 3.5


@pytest.mark.anyio
async def test_exhausted_attempts_return_the_last_failure() -> None:
    """When attempts run out, the last transient failure comes back; no wait follows it."""
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=1, multiplier=2, jitter="none")
    result, attempts, waits, elapsed = await _run(_failing(10), policy)
    assert not result.ok and result.retryable
    assert attempts == 3
    assert waits == [1, 2]
    assert elapsed == 3


@pytest.mark.anyio
async def test_full_jitter_draws_from_the_given_stream() -> None:
    """With full jitter each wait is rng.uniform(0, base), one draw per wait, in order."""
    policy = RetryPolicy(max_attempts=4, initial_backoff_s=1, multiplier=2, jitter="full")
    rng = random.Random(1234)
    _, attempts, waits, elapsed = await _run(_failing(10), policy, rng=rng)
    reference = random.Random(1234)
    expected = [reference.uniform(0, 1), reference.uniform(0, 2), reference.uniform(0, 4)]
    assert attempts == 4
    assert waits == expected
    assert elapsed == pytest.approx(sum(expected))
    # Exactly one draw per wait: the two streams are still in step.
    assert rng.random() == reference.random()


@pytest.mark.anyio
async def test_max_total_weighs_the_jittered_wait_it_sleeps() -> None:
    """With jitter and a time bound, stop weighs the very wait that is slept, drawn once:
    the attempts stop where the drawn waits say, and the stream stays in step."""
    policy = RetryPolicy(max_attempts=10, initial_backoff_s=1, multiplier=2, jitter="full",
                         max_total_s=5)
    rng = random.Random(7)
    _, attempts, waits, elapsed = await _run(_failing(20), policy, rng=rng)
    reference = random.Random(7)
    drawn: list[float] = []
    while sum(drawn) <= 5:
        drawn.append(reference.uniform(0, policy.backoff(len(drawn) + 1)))
    assert waits == drawn[:-1]  # the last draw would have started an attempt after 5 s
    assert attempts == len(drawn)
    assert elapsed == pytest.approx(sum(waits))
    assert rng.random() == reference.random()


@pytest.mark.anyio
async def test_max_backoff_caps_the_wait() -> None:
    """No wait exceeds max_backoff_s."""
    policy = RetryPolicy(
        max_attempts=5, initial_backoff_s=1, multiplier=10, max_backoff_s=3, jitter="none"
    )
    _, attempts, waits, _ = await _run(_failing(10), policy)
    assert attempts == 5
    assert waits == [1, 3, 3, 3]


@pytest.mark.anyio
async def test_max_total_stops_further_attempts() -> None:
    """No attempt starts later than max_total_s after the first one began."""
    policy = RetryPolicy(
        max_attempts=10, initial_backoff_s=1, multiplier=2, max_backoff_s=100, jitter="none",
        max_total_s=3.5,
    )
    # Attempts start at 0, 1 and 3; the next would start at 7, past 3.5.
    result, attempts, waits, elapsed = await _run(_failing(10), policy)
    assert not result.ok
    assert attempts == 3
    assert waits == [1, 2]
    assert elapsed == 3


@pytest.mark.anyio
async def test_max_total_counts_attempt_latency() -> None:
    """Time spent inside attempts counts toward max_total_s."""
    policy = RetryPolicy(
        max_attempts=10, initial_backoff_s=1, multiplier=2, jitter="none", max_total_s=3.5
    )
    # Attempt 1 runs 0–0.5, waits 1, attempt 2 runs 1.5–2; attempt 3 would start at 4.
    _, attempts, _, elapsed = await _run(_failing(10, latency=0.5), policy)
    assert attempts == 2
    assert elapsed == 2


@pytest.mark.anyio
async def test_an_attempt_may_start_exactly_at_max_total() -> None:
    """An attempt starting exactly max_total_s after the first is still allowed."""
    policy = RetryPolicy(max_attempts=10, initial_backoff_s=1, multiplier=2, jitter="none",
                         max_total_s=3)
    _, attempts, _, _ = await _run(_failing(10), policy)
    assert attempts == 3


@pytest.mark.anyio
@pytest.mark.parametrize(
    "jitter",
    [pytest.param("none", id="no-jitter"), pytest.param("full", id="full-jitter")],
)
async def test_retry_after_is_a_floor(jitter: str) -> None:
    """A failure asking for retry_after_s is never retried sooner."""
    policy = RetryPolicy.model_validate(
        {"max_attempts": 3, "initial_backoff_s": 0.5, "jitter": jitter}
    )
    result, attempts, waits, elapsed = await _run(
        _failing(1, retry_after_s=5), policy, rng=random.Random(0)
    )
    assert result.ok
    assert attempts == 2
    assert waits == [5]
    assert elapsed == 5


@pytest.mark.anyio
async def test_non_retryable_results_are_not_retried() -> None:
    """A failure whose isRetryable is false ends the logical call at once."""
    calls: list[int] = []

    async def attempt(n: int) -> ToolResult:
        calls.append(n)
        error = ToolError.of("business", "business_rule", "no")
        return ToolResult.failure("t", error, trace_id="tr_1")

    result, attempts, waits, elapsed = await _run(attempt, RetryPolicy(max_attempts=5))
    assert result.category == "business"
    assert (attempts, calls, waits, elapsed) == (1, [1], [], 0)


@pytest.mark.anyio
async def test_wait_hook_is_told_the_next_attempt_number() -> None:
    """on_wait receives each wait and the number of the attempt that follows it."""
    seen: list[tuple[float, int]] = []
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=1, multiplier=2, jitter="none")
    await run_with_retry(
        _failing(5), policy, clock=AnyioClock(), on_wait=lambda s, n: seen.append((s, n))
    )
    assert seen == [(1, 2), (2, 3)]
