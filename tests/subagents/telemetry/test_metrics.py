"""The process's metrics: off until turned on, fed by a run's events and by the limiter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.envelope import ToolError, ToolResult
from subagents.result import ProgressEvent
from subagents.telemetry import (
    RunMetrics,
    current_metrics,
    enable_metrics,
    record_limiter_wait,
    reset_metrics,
)


@pytest.fixture
def fresh() -> Iterator[None]:
    """Metrics off before and after the test."""
    reset_metrics()
    yield
    reset_metrics()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text) for s in f.samples
    }


def test_metrics_are_off_until_a_process_turns_them_on(fresh: None) -> None:
    """A library process builds no registry; recording a limiter wait then does nothing."""
    assert current_metrics() is None
    record_limiter_wait("https://api.anthropic.com", 1.5)
    assert current_metrics() is None


def test_limiter_waits_and_attempts_are_counted(fresh: None) -> None:
    """record_limiter_wait feeds the histogram; a run's events feed attempts, 429s, states."""
    metrics = enable_metrics()
    assert metrics is not None
    record_limiter_wait("http://127.0.0.1:8000/v1", 0.3)
    run = RunMetrics(metrics)
    limited = ToolResult.failure(
        "model", ToolError.of("transient", "rate_limited", "429"), trace_id="tr_1"
    )
    ok = ToolResult.success("web.search", {"results": []}, trace_id="tr_2")
    for event in (
        ProgressEvent("a", "state", 0, state="running"),
        ProgressEvent("a", "attempt", 1, tool="model", result=limited),
        ProgressEvent("a", "state", 1, state="retrying"),
        ProgressEvent("a", "attempt", 2, tool="web.search", result=ok),
        ProgressEvent("b", "state", 2, state="running"),
        ProgressEvent("a", "state", 3, state="done"),
    ):
        run.observe(event)
    got = samples(metrics.render()[0].decode())
    assert got[("fanout_limiter_wait_seconds_count",
                (("endpoint", "http://127.0.0.1:8000/v1"),))] == 1
    assert got[("fanout_attempts_total", (("category", "transient"), ("kind", "model")))] == 1
    assert got[("fanout_attempts_total", (("category", "none"), ("kind", "builtin")))] == 1
    assert got[("fanout_rate_limited_total", (("kind", "model"),))] == 1
    assert got[("fanout_subagents", (("state", "running"),))] == 1
    assert got[("fanout_subagents_finished_total", (("state", "done"),))] == 1
    run.close()
    got = samples(metrics.render()[0].decode())
    assert got[("fanout_subagents", (("state", "running"),))] == 0
