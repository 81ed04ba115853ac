"""Each attempt's envelope in the trace carries its own attempt number and duration."""

from __future__ import annotations

import pytest

from shared import AnyioClock
from subagents.executor import ExecEvent, execute_tool_safely
from subagents.retry import RetryPolicy
from subagents.simulated.spec import ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools

pytestmark = pytest.mark.anyio


async def test_per_attempt_envelopes_have_their_own_number_and_elapsed_time() -> None:
    """Attempt 1 waits 2 s and fails, attempt 2 takes 3 s; the final envelope has the totals."""
    clock = AnyioClock()
    spec = SimToolSpec(
        latency_s=2,
        responses=[
            ResponseSpec(error="unavailable"),
            ResponseSpec(ok={"results": ["x"]}, latency_s=3),
        ],
    )
    tool = SimulatedTools({"search": spec}, clock).for_subtask("s")["search"]
    events: list[ExecEvent] = []
    result = await execute_tool_safely(
        tool,
        {},
        timeout=30,
        retry=RetryPolicy(max_attempts=3, initial_backoff_s=1, jitter="none"),
        clock=clock,
        scope="s",
        observer=events.append,
    )
    attempts = [e.result for e in events if e.kind == "attempt" and e.result is not None]
    assert [(r.attempts, r.elapsed_s) for r in attempts] == [(1, 2.0), (2, 3.0)]
    assert (result.attempts, result.elapsed_s) == (2, 6.0)  # 2 + 1 (wait) + 3
