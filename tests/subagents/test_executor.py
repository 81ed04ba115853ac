"""execute_tool_safely end to end, in virtual time: every failure is an envelope."""

from __future__ import annotations

import email.utils
import random
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from shared import (
    BusinessRuleViolation,
    ErrorCategory,
    InvalidToolInput,
    ToolPermissionDenied,
    ToolResult,
    TransientToolError,
)
from subagents import CallContext, ExecEvent, RetryPolicy, Tool, ToolOutput, execute_tool_safely

HANG = object()
"""A scripted outcome that never answers: the attempt's timeout decides what it costs."""

NO_JITTER = RetryPolicy(max_attempts=4, initial_backoff_s=0.5, multiplier=2, jitter="none")


class Status503(Exception):
    """An upstream error carrying ``.status_code = 503``."""

    status_code = 503


class Status403(Exception):
    """An upstream error carrying ``.status_code = 403``."""

    status_code = 403


class FakeResponse:
    """The response of a fake HTTP client error."""

    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.headers = headers


class FakeHTTPError(Exception):
    """A fake HTTP client error carrying its response, like httpx.HTTPStatusError."""

    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status_code}")
        self.response = FakeResponse(status_code, headers)


class Script:
    """A scripted tool body: one outcome per execution (exceptions are raised), the last repeats.

    It records every execution (attempt number, idempotency key, start time), so tests
    can count how often the body really ran.
    """

    def __init__(self, *outcomes: Any, latency: float = 0.0) -> None:
        self.outcomes = outcomes
        self.latency = latency
        self.calls: list[CallContext] = []
        self.started: list[float] = []
        self.ended: list[float] = []

    async def __call__(self, query: str, ctx: CallContext) -> Any:
        self.calls.append(ctx)
        self.started.append(anyio.current_time())
        try:
            outcome = self.outcomes[min(len(self.calls), len(self.outcomes)) - 1]
            await anyio.sleep(self.latency)
            if outcome is HANG:
                await anyio.sleep_forever()
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        finally:
            self.ended.append(anyio.current_time())

    @property
    def runs(self) -> int:
        """How many times the body executed."""
        return len(self.calls)


def _tool(script: Script, *, name: str = "web_search", **flags: Any) -> Tool:
    return Tool.from_schema(name, script, {"query": {"type": "string"}}, **flags)


async def _call(tool: Tool, args: dict[str, Any] | None = None, **kwargs: Any) -> ToolResult:
    kwargs.setdefault("timeout", 30)
    return await execute_tool_safely(tool, {"query": "q"} if args is None else args, **kwargs)


def _waits(events: list[ExecEvent]) -> list[float]:
    return [e.wait_s for e in events if e.kind == "wait" and e.wait_s is not None]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exc", "category", "error_type", "action"),
    [
        pytest.param(TimeoutError("upstream slow"), "transient", "timeout",
                     "retry_with_smaller_input", id="timeout-error"),
        pytest.param(ConnectionResetError("reset"), "transient", "connection_reset",
                     "retry_with_backoff", id="connection-reset"),
        pytest.param(TransientToolError("overloaded"), "transient", "unavailable",
                     "retry_with_backoff", id="transient-tool-error"),
        pytest.param(Status503("unavailable"), "transient", "unavailable",
                     "retry_with_backoff", id="status-503"),
        pytest.param(ConnectionRefusedError("refused"), "transient", "unavailable",
                     "retry_with_backoff", id="unreachable-source"),
        pytest.param(InvalidToolInput("query", "a non-empty query"), "validation",
                     "invalid_input", "correct_input", id="invalid-tool-input"),
        pytest.param(BusinessRuleViolation("max_results", limit=10, requested=50), "business",
                     "business_rule", "escalate", id="business-rule"),
        pytest.param(ToolPermissionDenied("role analyst lacks search:read"), "permission",
                     "forbidden", "stop_and_report", id="tool-permission-denied"),
        pytest.param(PermissionError("read-only"), "permission", "forbidden",
                     "stop_and_report", id="permission-error"),
        pytest.param(Status403("forbidden"), "permission", "forbidden", "stop_and_report",
                     id="status-403"),
        pytest.param(KeyError("user_id"), "internal", "KeyError", "escalate", id="key-error"),
    ],
)
async def test_every_category_end_to_end(
    exc: Exception, category: ErrorCategory, error_type: str, action: str
) -> None:
    """A raised exception comes back as a failed envelope of its category, never raised."""
    result = await _call(_tool(Script(exc)))
    assert result.ok is False
    assert result.is_error is True
    assert result.category == category
    assert result.error_type == error_type
    assert result.retryable is (category == "transient")
    assert result.next_safe_action == action
    assert result.attempts == 1
    wire = result.to_wire()
    assert wire["errorCategory"] == category
    assert wire["isRetryable"] is (category == "transient")


@pytest.mark.anyio
async def test_validation_by_schema_rejection_end_to_end() -> None:
    """A schema rejection is a validation envelope with the field and the expectation."""
    script = Script({"results": ["x"]})
    result = await _call(_tool(script), {"query": 42})
    assert (result.category, result.field, result.next_safe_action) == (
        "validation", "query", "correct_input",
    )
    assert result.expected == "a string"
    assert result.retryable is False
    assert script.runs == 0


@pytest.mark.anyio
async def test_business_details_travel_in_the_envelope() -> None:
    """A business violation's rule, limit and requested amount are in the wire envelope."""
    result = await _call(_tool(Script(BusinessRuleViolation("max_seats", limit=5, requested=9))))
    wire = result.to_wire()
    assert (wire["rule"], wire["limit"], wire["requested"]) == ("max_seats", 5, 9)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "data",
    [
        pytest.param([], id="empty-list"),
        pytest.param({"results": []}, id="empty-results"),
        pytest.param(None, id="none"),
        pytest.param(ToolOutput(data={"results": ["ignored"]}, empty=True), id="declared-empty"),
    ],
)
async def test_valid_empty_result_is_ok_and_empty(data: Any) -> None:
    """A valid result with nothing in it is ok, empty and not an error."""
    result = await _call(_tool(Script(data)), retry=NO_JITTER)
    assert (result.ok, result.is_error, result.empty) == (True, False, True)
    assert result.attempts == 1
    wire = result.to_wire()
    assert (wire["ok"], wire["isError"], wire["empty"]) == (True, False, True)
    assert result.next_safe_action == "continue"


@pytest.mark.anyio
async def test_non_empty_and_partial_results() -> None:
    """Data is not empty; ToolOutput(complete=False) marks a partial result that is ok."""
    full = await _call(_tool(Script({"results": ["a"]})))
    assert (full.ok, full.empty, full.complete) == (True, False, True)
    assert full.data == {"results": ["a"]}
    partial = await _call(_tool(Script(ToolOutput({"page": 1, "of": 3}, complete=False))))
    assert (partial.ok, partial.empty, partial.complete) == (True, False, False)
    assert partial.data == {"page": 1, "of": 3}


@pytest.mark.anyio
async def test_unreachable_source_is_transient_not_empty() -> None:
    """A source that refuses the connection is a retried transient failure, not 'nothing'."""
    script = Script(ConnectionRefusedError("connection refused"))
    result = await _call(_tool(script), retry=RetryPolicy(max_attempts=3, jitter="none"))
    assert result.ok is False
    assert result.category == "transient"
    assert result.retryable is True
    assert result.attempts == 3 == script.runs


@pytest.mark.anyio
async def test_backoff_waits_and_attempts_in_virtual_time() -> None:
    """Three transient failures then success: 4 attempts, waits 0.5+1+2 plus latency."""
    script = Script(
        TransientToolError("busy"), TimeoutError(), ConnectionResetError(), {"results": ["x"]},
        latency=0.25,
    )
    events: list[ExecEvent] = []
    start = anyio.current_time()
    result = await _call(_tool(script), retry=NO_JITTER, observer=events.append)
    elapsed = anyio.current_time() - start
    assert result.ok
    assert result.attempts == 4 == script.runs
    assert [c.attempt for c in script.calls] == [1, 2, 3, 4]
    assert _waits(events) == [0.5, 1, 2]
    assert elapsed == 0.5 + 1 + 2 + 4 * 0.25
    assert result.elapsed_s == elapsed
    assert [e.attempt for e in events if e.kind == "attempt"] == [1, 2, 3, 4]


@pytest.mark.anyio
async def test_full_jitter_follows_the_seeded_stream() -> None:
    """With full jitter the waits are rng.uniform(0, base) from the given seeded stream."""
    policy = RetryPolicy(max_attempts=4, initial_backoff_s=0.5, multiplier=2, jitter="full")
    events: list[ExecEvent] = []
    start = anyio.current_time()
    result = await _call(
        _tool(Script(TransientToolError("busy"))), retry=policy, rng=random.Random("7/market"),
        observer=events.append,
    )
    reference = random.Random("7/market")
    expected = [reference.uniform(0, 0.5), reference.uniform(0, 1), reference.uniform(0, 2)]
    assert result.attempts == 4
    assert _waits(events) == expected
    assert anyio.current_time() - start == pytest.approx(sum(expected))


@pytest.mark.anyio
async def test_max_backoff_caps_waits_end_to_end() -> None:
    """max_backoff_s caps every wait of a logical call."""
    policy = RetryPolicy(
        max_attempts=5, initial_backoff_s=2, multiplier=3, max_backoff_s=5, jitter="none"
    )
    events: list[ExecEvent] = []
    start = anyio.current_time()
    result = await _call(_tool(Script(Status503())), retry=policy, observer=events.append)
    assert result.attempts == 5
    assert _waits(events) == [2, 5, 5, 5]
    assert anyio.current_time() - start == 17


@pytest.mark.anyio
async def test_max_total_stops_further_attempts_end_to_end() -> None:
    """No attempt starts after max_total_s from the first; timed-out attempts count."""
    policy = RetryPolicy(
        max_attempts=10, initial_backoff_s=1, multiplier=2, jitter="none", max_total_s=40
    )
    script = Script(HANG)
    start = anyio.current_time()
    result = await _call(_tool(script), retry=policy)
    # Attempt 1: 0–30, wait 1, attempt 2: 31–61; attempt 3 would start at 63 > 40.
    assert result.error_type == "timeout"
    assert result.attempts == 2 == script.runs
    assert script.started == pytest.approx([start, start + 31])
    assert anyio.current_time() - start == pytest.approx(61)


@pytest.mark.anyio
async def test_retry_after_from_transient_tool_error_is_honoured() -> None:
    """TransientToolError(retry_after_s=5) makes the next attempt wait at least 5s."""
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.5, jitter="full")
    script = Script(TransientToolError("slow down", error_type="rate_limited", retry_after_s=5),
                    {"results": ["x"]})
    events: list[ExecEvent] = []
    result = await _call(_tool(script), retry=policy, rng=random.Random(1),
                         observer=events.append)
    assert result.ok and result.attempts == 2
    assert _waits(events)[0] >= 5
    assert script.started[1] - script.started[0] >= 5


@pytest.mark.anyio
async def test_retry_after_header_in_seconds_is_honoured() -> None:
    """A 429 whose response carries Retry-After: 7 waits 7 seconds before the retry."""
    script = Script(FakeHTTPError(429, {"Retry-After": "7"}), {"results": ["x"]})
    events: list[ExecEvent] = []
    start = anyio.current_time()
    result = await _call(_tool(script), retry=NO_JITTER, observer=events.append)
    assert result.ok and result.attempts == 2
    assert _waits(events) == [7]
    assert anyio.current_time() - start == 7
    first = next(e.result for e in events if e.kind == "attempt")
    assert first is not None
    assert (first.error_type, first.retry_after_s) == ("rate_limited", 7)


@pytest.mark.anyio
async def test_retry_after_header_as_http_date_is_honoured() -> None:
    """A 503 whose Retry-After is an HTTP date two minutes ahead waits about two minutes."""
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    script = Script(FakeHTTPError(503, {"Retry-After": when}), {"results": ["x"]})
    events: list[ExecEvent] = []
    result = await _call(_tool(script), retry=NO_JITTER, observer=events.append)
    assert result.ok and result.attempts == 2
    # The date has one-second resolution and the wall clock moves while the test runs.
    assert 115 <= _waits(events)[0] <= 120


@pytest.mark.anyio
async def test_timeout_is_transient_and_costs_exactly_the_timeout() -> None:
    """An attempt that outlives its timeout is cut at exactly the timeout: transient timeout."""
    script = Script(HANG)
    start = anyio.current_time()
    result = await _call(_tool(script, name="slow_search"), timeout=30)
    assert result.ok is False
    assert (result.category, result.error_type) == ("transient", "timeout")
    assert result.retryable is True
    assert result.next_safe_action == "retry_with_smaller_input"
    assert result.message == "slow_search timed out after 30s"
    assert result.changed_state is False
    assert anyio.current_time() - start == pytest.approx(30)
    assert result.elapsed_s == 30


@pytest.mark.anyio
async def test_each_timed_out_attempt_costs_the_timeout() -> None:
    """Retried timeouts each cost exactly the timeout, plus the backoff between them."""
    policy = RetryPolicy(max_attempts=3, initial_backoff_s=0.5, multiplier=2, jitter="none")
    script = Script(HANG)
    start = anyio.current_time()
    result = await _call(_tool(script), retry=policy, timeout=30)
    assert result.attempts == 3 == script.runs
    assert [end - begin for begin, end in zip(script.started, script.ended, strict=True)] == (
        pytest.approx([30, 30, 30])
    )
    assert anyio.current_time() - start == pytest.approx(30 + 0.5 + 30 + 1 + 30)
    assert result.message == "web_search timed out after 30s"


@pytest.mark.anyio
async def test_fractional_timeout_in_the_message() -> None:
    """The timeout message shows a fractional timeout as given."""
    result = await _call(_tool(Script(HANG), name="t"), timeout=0.5)
    assert result.message == "t timed out after 0.5s"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("outcome", "error_type"),
    [
        pytest.param(HANG, "timeout", id="timeout"),
        pytest.param(ConnectionResetError("reset mid-request"), "connection_reset",
                     id="connection-reset"),
    ],
)
async def test_non_idempotent_side_effect_failure_leaves_unknown_state(
    outcome: Any, error_type: str
) -> None:
    """A non-idempotent side-effect tool whose effect may have happened is tried once only."""
    script = Script(outcome, {"booked": True})
    tool = _tool(script, name="book_flight", side_effects=True, idempotent=False)
    result = await _call(tool, retry=NO_JITTER)
    assert script.runs == 1
    assert result.attempts == 1
    assert result.category == "transient"
    assert result.error_type == error_type
    assert result.changed_state == "unknown"
    assert result.retryable is False
    assert result.next_safe_action == "verify_state_before_retry"
    wire = result.to_wire()
    assert (wire["changed_state"], wire["isRetryable"]) == ("unknown", False)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(TransientToolError("slow down", error_type="rate_limited"),
                     id="rate-limited"),
        pytest.param(TransientToolError("down"), id="unavailable"),
        pytest.param(Status503(), id="status-503"),
    ],
)
async def test_non_idempotent_side_effect_refusal_is_retried(refusal: Exception) -> None:
    """A refusal before any effect (rate limited, unavailable) is retried as usual."""
    script = Script(refusal, {"booked": True})
    tool = _tool(script, name="book_flight", side_effects=True, idempotent=False)
    result = await _call(tool, retry=NO_JITTER)
    assert result.ok
    assert result.attempts == 2 == script.runs
    assert result.changed_state is True


@pytest.mark.anyio
async def test_idempotent_side_effect_tool_is_retried_with_one_key() -> None:
    """An idempotent side-effect tool that times out is retried with the same key each time."""
    script = Script(HANG, HANG, {"charged": True})
    tool = _tool(script, name="charge", side_effects=True, idempotent=True)
    result = await _call(tool, retry=NO_JITTER, trace_id="tr_000000000001", scope="billing")
    calls = script.calls
    assert result.ok
    assert result.attempts == 3
    assert [c.attempt for c in calls] == [1, 2, 3]
    assert len({c.idempotency_key for c in calls}) == 1
    assert result.idempotency_key == calls[0].idempotency_key
    assert {(c.trace_id, c.scope, c.tool) for c in calls} == {
        ("tr_000000000001", "billing", "charge"),
    }


@pytest.mark.anyio
async def test_given_idempotency_key_reaches_every_attempt() -> None:
    """An idempotency key passed by the caller is the one every attempt receives."""
    script = Script(TransientToolError("busy"), {"ok": 1})
    tool = _tool(script, side_effects=True, idempotent=True)
    result = await _call(tool, retry=NO_JITTER, idempotency_key="order-42")
    assert [c.idempotency_key for c in script.calls] == ["order-42", "order-42"]
    assert result.to_wire()["idempotency_key"] == "order-42"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(ToolPermissionDenied("no"), id="tool-permission-denied"),
        pytest.param(PermissionError("no"), id="permission-error"),
        pytest.param(Status403(), id="status-403"),
        pytest.param(BusinessRuleViolation("max_seats", limit=5, requested=9), id="business"),
        pytest.param(InvalidToolInput("query", "shorter"), id="tool-validation"),
    ],
)
async def test_permission_and_business_errors_are_attempted_once(exc: Exception) -> None:
    """Non-retryable failures run the body exactly once, however generous the policy."""
    script = Script(exc, {"results": ["never"]})
    start = anyio.current_time()
    result = await _call(_tool(script), retry=RetryPolicy(max_attempts=10, jitter="none"))
    assert script.runs == 1
    assert result.attempts == 1
    assert result.retryable is False
    assert anyio.current_time() == start


def _search_tool(runs: list[str]) -> Tool:
    """A hint-built tool that records each execution in ``runs``."""

    async def search(query: str, limit: Annotated[int, Field(ge=1, le=20)] = 5) -> list[str]:
        runs.append(query)
        return [query] * limit

    return Tool.from_function(search)


PATENT_PARAMS = {
    "since": {"type": "string", "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}$"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "required": False},
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("use_hints", "args", "field", "expected_part"),
    [
        pytest.param(True, {"query": "x", "limit": 50}, "limit", "20", id="hints-maximum"),
        pytest.param(True, {"limit": 3}, "query", "required", id="hints-missing"),
        pytest.param(True, {"query": "x", "lang": "en"}, "lang", "no such argument",
                     id="hints-unknown"),
        pytest.param(False, {"since": "2024-12-01", "limit": 50}, "limit", "20",
                     id="params-maximum"),
        pytest.param(False, {"limit": 3}, "since", "required", id="params-missing"),
        pytest.param(False, {"since": "2024-12-01", "lang": "en"}, "lang", "no such argument",
                     id="params-unknown"),
        pytest.param(False, {"since": "2024-13-01"}, "since",
                     "^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}$", id="params-pattern"),
    ],
)
async def test_validation_rejects_before_the_body_runs(
    use_hints: bool, args: dict[str, Any], field: str, expected_part: str
) -> None:
    """Bad arguments give a validation envelope naming field and expectation; no body runs."""
    runs: list[str] = []

    async def patents(since: str, limit: int = 5) -> list[str]:
        runs.append(since)
        return []

    tool = _search_tool(runs) if use_hints else Tool.from_schema("patent_db", patents,
                                                                  PATENT_PARAMS)
    start = anyio.current_time()
    result = await _call(tool, args, retry=NO_JITTER)
    assert runs == []
    assert result.ok is False
    assert result.category == "validation"
    assert result.field == field
    assert result.expected is not None and expected_part in result.expected
    assert result.retryable is False
    assert result.next_safe_action == "correct_input"
    assert result.attempts == 1
    assert result.elapsed_s == 0
    assert anyio.current_time() == start
    assert tool.name in (result.message or "")


@pytest.mark.anyio
async def test_valid_arguments_reach_the_body_coerced() -> None:
    """Arguments that pass validation reach the body with defaults filled in."""
    runs: list[str] = []
    result = await _call(_search_tool(runs), {"query": "cells"})
    assert result.ok
    assert result.data == ["cells"] * 5
    assert runs == ["cells"]


@pytest.mark.anyio
async def test_unknown_exception_is_internal_and_not_retried() -> None:
    """An unexpected exception is an internal error, escalated, and attempted once."""
    script = Script(KeyError("user_id"))
    result = await _call(_tool(script), retry=NO_JITTER)
    assert result.category == "internal"
    assert result.error_type == "KeyError"
    assert result.next_safe_action == "escalate"
    assert result.retryable is False
    assert script.runs == 1
    assert "KeyError" in (result.message or "")


@pytest.mark.anyio
async def test_cancelling_the_caller_cancels_the_tool() -> None:
    """A cancelled caller cancels the running tool; nothing comes back as a result."""
    seen: list[str] = []
    results: list[ToolResult] = []

    async def slow(query: str) -> str:
        try:
            await anyio.sleep(100)
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        finally:
            seen.append("finally")
        return "done"

    start = anyio.current_time()
    with anyio.move_on_after(1) as scope:
        results.append(
            await execute_tool_safely(
                Tool.from_function(slow), {"query": "q"}, timeout=30, retry=NO_JITTER
            )
        )
    assert scope.cancelled_caught
    assert seen == ["cancelled", "finally"]
    assert results == []
    assert anyio.current_time() - start == 1


@pytest.mark.anyio
async def test_cancelling_during_a_backoff_wait_stops_the_call() -> None:
    """Cancellation during the wait between attempts ends the call without another attempt."""
    script = Script(TransientToolError("busy"))
    with anyio.move_on_after(0.25) as scope:
        await _call(_tool(script), retry=NO_JITTER)
    assert scope.cancelled_caught
    assert script.runs == 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sync_body_runs_in_a_worker_thread(anyio_backend: str) -> None:
    """Live, a sync tool body runs off the event loop's thread and its result is enveloped."""
    loop_thread = threading.get_ident()
    body_threads: list[int] = []

    def lookup(query: str) -> dict[str, list[str]]:
        body_threads.append(threading.get_ident())
        return {"results": [query.upper()]}

    def broken(query: str) -> None:
        raise ValueError("bad state")

    # No timeout: a worker thread does not run on the virtual clock.
    result = await execute_tool_safely(Tool.from_function(lookup), {"query": "q"}, timeout=None)
    assert result.ok
    assert result.data == {"results": ["Q"]}
    assert body_threads and body_threads[0] != loop_thread
    failure = await execute_tool_safely(Tool.from_function(broken), {"query": "q"}, timeout=None)
    assert (failure.category, failure.error_type) == ("internal", "ValueError")


@pytest.mark.anyio
async def test_sync_body_runs_on_the_loop_in_virtual_time() -> None:
    """In virtual time a sync body runs on the loop: a worker thread's real seconds would
    let the mock clock jump past the attempt's timeout while the thread works."""
    loop_thread = threading.get_ident()
    body_threads: list[int] = []

    def lookup(query: str) -> dict[str, list[str]]:
        body_threads.append(threading.get_ident())
        return {"results": [query.upper()]}

    for _ in range(20):
        result = await execute_tool_safely(Tool.from_function(lookup), {"query": "q"}, timeout=30)
        assert result.ok and result.data == {"results": ["Q"]}
    assert set(body_threads) == {loop_thread}


@pytest.mark.anyio
async def test_trace_ids_default_and_given() -> None:
    """A call gets a fresh tr_ id by default, or keeps the one it was given."""
    fresh = await _call(_tool(Script([1])))
    assert re.fullmatch(r"tr_[0-9a-f]{12}", fresh.trace_id)
    given = await _call(_tool(Script([1])), trace_id="tr_5f2c9a41d0b3")
    assert given.trace_id == "tr_5f2c9a41d0b3"
    assert given.idempotency_key is None  # only side-effect tools carry their key


@pytest.mark.anyio
async def test_success_of_a_side_effect_tool_reports_changed_state() -> None:
    """A successful call of a tool with side effects says the world changed."""
    result = await _call(_tool(Script({"id": 1}), side_effects=True))
    assert result.changed_state is True
    assert result.idempotency_key is not None
