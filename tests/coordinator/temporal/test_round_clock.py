"""A round's clock on Temporal: what it decides from its readings does not depend on how
busy the worker is (the library's retry_time_budget lost an attempt at load 4)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from trio.testing import MockClock

from coordinator.temporal.payloads import RoundInput
from coordinator.temporal.rounds import round_clock
from shared.clock import AnyioClock, Clock, JobClock, PacedClock
from shared.envelope import ToolError, ToolResult
from subagents.retry import RetryPolicy, run_with_retry
from subagents.spec import SubtaskSpec

# scenarios/retry_time_budget.yaml: attempts of 1.5 s, backoff 1, 2, 4 …, at most 10 s
# from the first attempt's start: attempts at 0, 2.5 and 6; a fourth would start at 11.5.
BUDGET = RetryPolicy(max_attempts=10, initial_backoff_s=1, multiplier=2, max_backoff_s=8,
                     jitter="none", max_total_s=10)
SPEED = 20.0  # the library test's


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """Virtual time (the suite's default; this folder's other tests talk to processes):
    a busy worker is simulated by waits the round's clock does not own."""
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


async def _attempts_on_a_busy_worker(clock: Clock, busy_s: float) -> int:
    """retry_time_budget's call on ``clock``, the worker losing ``busy_s`` real seconds to
    other work around every attempt; how many attempts the budget allowed."""

    async def attempt(n: int) -> ToolResult:
        await anyio.sleep(busy_s)  # the worker at other work: no sleep of this clock's
        await clock.sleep(1.5)
        return ToolResult.failure("press_wire", ToolError.of("transient", "unavailable", "503"),
                                  trace_id="tr_1")

    _, attempts = await run_with_retry(attempt, BUDGET, clock=clock)
    return attempts


@pytest.mark.anyio
async def test_a_busy_worker_takes_no_attempt_from_a_paced_round() -> None:
    """Paced virtual time allows the replay's three attempts whatever the worker's load;
    the wall's readings (the round's clock before) lost the third to 0.15 s of overhead
    per attempt at speed 20."""
    assert await _attempts_on_a_busy_worker(PacedClock(SPEED), busy_s=0.0) == 3
    assert await _attempts_on_a_busy_worker(PacedClock(SPEED), busy_s=0.15) == 3
    assert await _attempts_on_a_busy_worker(AnyioClock(SPEED), busy_s=0.0) == 3
    assert await _attempts_on_a_busy_worker(AnyioClock(SPEED), busy_s=0.15) == 2


@pytest.mark.anyio
async def test_paced_time_reads_its_sleeps_and_timeouts_at_the_pace_asked() -> None:
    """Readings move by exactly what was slept or timed out, never by other waits; a
    sleep takes seconds/speed of real time; waits at once end at the latest of them."""
    clock = PacedClock(10, start=5.0)
    loop = anyio.current_time()
    await clock.sleep(3)
    await anyio.sleep(7)  # time the clock does not own
    assert clock.now() == 8.0 and anyio.current_time() - loop == pytest.approx(7.3)
    with pytest.raises(TimeoutError), clock.fail_after(2):
        await clock.sleep(100)
    assert clock.now() == 10.0
    with clock.move_on_after(1) as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught and clock.now() == 11.0
    with clock.fail_after(4):
        await clock.sleep(4)  # exactly the limit: not a timeout (docs/design.md §5.1)
    async with anyio.create_task_group() as tg:
        for seconds in (1, 3, 2):
            tg.start_soon(clock.sleep, seconds)
    assert clock.now() == 18.0


def _round(**over: Any) -> RoundInput:
    spec = SubtaskSpec(id="s", query="q", tools=["t"], planner=over.pop("planner", "scripted"))
    return RoundInput(run_id="r", round=1, subtask=spec, started_at=time.time() - 2,
                      speed=SPEED, **over)


@pytest.mark.parametrize(("over", "paced"), [
    pytest.param({}, True, id="scripted-plan"),
    pytest.param({"planner": "model", "model": {"provider": "scripted"}}, True,
                 id="scripted-model"),
    pytest.param({"planner": "model", "model": {"provider": "anthropic"}}, False,
                 id="real-model"),
    pytest.param({"mcp_servers": {"time": {"command": ["x"]}}}, False, id="mcp-tools"),
])
@pytest.mark.anyio
async def test_a_round_is_paced_only_when_everything_it_runs_is_simulated(
    over: dict[str, Any], paced: bool
) -> None:
    """Simulated tools with a script or a scripted model: paced virtual time, starting
    at the job's time; a real model or MCP tools: the wall, as before."""
    clock = round_clock(_round(**over))
    assert isinstance(clock, JobClock)
    assert isinstance(clock.base, PacedClock if paced else AnyioClock)
    assert clock.now() == pytest.approx(2 * SPEED, abs=SPEED)  # 2 s into the job


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_stalled_worker_does_not_time_out_a_call_that_ended_in_time() -> None:
    """A loop held up past both a paced sleep's wake-up and its timeout's real deadline
    (a busy worker) wakes the sleeper, not the timeout: a paced timeout cuts in the
    clock's own time. Cut by a real timer, the call timed out at 1.5 s of its 4."""
    clock = PacedClock(SPEED)

    async def stall() -> None:
        await anyio.sleep(0.01)
        time.sleep(0.5)  # noqa: ASYNC251 - the worker's loop held up by other work

    async with anyio.create_task_group() as tg:
        tg.start_soon(stall)
        with clock.fail_after(4):  # 0.2 s of real time
            await clock.sleep(1.5)  # 0.075 s of real time
            await anyio.lowlevel.checkpoint()  # the call goes on (its result handed back)
    assert clock.now() == 1.5
    with pytest.raises(TimeoutError), clock.fail_after(4):
        await clock.sleep(5)  # past the end: cut at it, in the clock's time
    assert clock.now() == 5.5
