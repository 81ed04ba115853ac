"""The counterexamples the suites found, shrunk, kept as plain tests (one per defect fixed)."""

from __future__ import annotations

import anyio
import pytest

from coordinator.jobfile.loader import load_scenario_text
from coordinator.replay import replay
from shared.clock import AnyioClock, JobClock, run_in_virtual_time
from shared.errors import InputFileErrors
from subagents.executor import execute_tool_safely
from subagents.retry import RetryPolicy
from subagents.tool import Tool
from tests.reliability import jobs
from tests.reliability.invariants import check
from tests.reliability.trace import observe

LATENCY_EQUALS_TIMEOUT = {
    "scenario": "chaos",
    "job": {
        "query": "chaos",
        "defaults": {"tool_timeout_s": 1.0},
        "subtasks": [{"id": "s0", "query": "subtask 0", "tools": ["t0", "t1"],
                      "plan": [{"call": "t0", "args": {"q": "a"}},
                               {"call": "t1", "args": {"q": "a"}}]}],
    },
    "tools": {
        "t0": {"params": {"q": {"type": "string"}}, "responses": [{"ok": {"results": ["r1"]}}]},
        "t1": {"params": {"q": {"type": "string"}}, "latency_s": 1.0,
               "responses": [{"ok": {"results": ["r1"]}}]},
    },
}


def test_a_latency_equal_to_the_tool_timeout_is_in_time() -> None:
    """docs/design.md §5.1: only a latency *above* tool_timeout_s is a timeout (trio cancelled the
    tie)."""
    scenario = jobs.load(LATENCY_EQUALS_TIMEOUT)
    observed = observe(scenario)
    check(scenario, observed)
    (line,) = observed.report.subtasks
    assert (line.status, line.attempts, observed.report.elapsed_s) == ("complete", 2, 1.0)


def test_backoff_never_overflows() -> None:
    """Retry 1,000 of a policy that multiplies by 10 waits max_backoff_s (was OverflowError)."""
    policy = RetryPolicy(max_attempts=1000, initial_backoff_s=0, multiplier=10, max_backoff_s=8)
    assert policy.backoff(999) == 8
    assert RetryPolicy(initial_backoff_s=1, multiplier=2).backoff(1100) == 8


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        pytest.param("      since: {type: string, pattern: '^[0--9]{4}'}", "regular expression",
                     id="set-difference-pattern"),
        pytest.param("      since: {type: string, pattern: '[[:alpha:]]'}", "regular expression",
                     id="nested-set-pattern"),
    ],
)
def test_a_pattern_python_warns_about_is_refused_at_load(line: str, fragment: str) -> None:
    """A regex Python warns about (FutureWarning) is a load error with its line, not a
    warning at every call (a mutated library file found it)."""
    text = "\n".join([
        "scenario: p", "job:", "  query: q", "  subtasks:", "    - id: a", "      query: q",
        "      tools: [t]", "      plan: [{call: t, args: {since: '2024'}}]", "tools:", "  t:",
        "    params:", line, "    responses: [{ok: 1}]",
    ])
    with pytest.raises(InputFileErrors) as caught:
        load_scenario_text(text, "p.yaml")
    (error,) = caught.value.errors
    assert error.line == 12 and fragment in error.describe()


def test_a_nel_line_break_counts_as_a_line() -> None:
    """YAML breaks lines at NEL (U+0085): an error after one names line 2 (the fuzzer's
    shrunk file was `#<NEL> f`)."""
    with pytest.raises(InputFileErrors) as caught:
        load_scenario_text("#\x85 f", "nel.yaml")
    assert caught.value.errors[0].line == 2


def test_the_library_replays_unchanged() -> None:
    """The fixes leave every library scenario meeting its expect (a latency equal to a
    timeout appears nowhere in it)."""
    from coordinator.replay import scenario_files
    from tests.reliability.test_fuzz_files import ROOT

    for file in scenario_files([ROOT / "scenarios"]):
        scenario = load_scenario_text(file.read_text(encoding="utf-8"), str(file))
        if scenario.mcp_servers or (scenario.model and scenario.model.provider != "scripted"):
            continue
        assert replay(scenario).passed, file.name


async def _attempts_at(offset: float) -> int:
    """Attempts of one logical call that times out, on a job clock started at ``offset``."""

    async def hang(q: str) -> str:
        await anyio.sleep_forever()
        return q

    policy = RetryPolicy(max_attempts=2, initial_backoff_s=0, max_backoff_s=0, multiplier=1,
                         max_total_s=1.0)
    result = await execute_tool_safely(
        Tool.from_function(hang), {"q": "x"}, timeout=1.0, retry=policy,
        clock=JobClock(AnyioClock(), offset=offset),
    )
    return result.attempts


@pytest.mark.parametrize("offset", [0.0, 1.7, 7.8, 15.025958451, 127.076418713])
def test_the_time_budget_decides_the_same_whatever_the_clock_reads(offset: float) -> None:
    """A retry exactly at max_total_s is made at any clock offset (a resumed run's clock
    starts at its offset: at 1.7, 2.7 - 1.7 > 1.0 in floats stopped it; shrunk from the
    kill-anywhere property: one attempt fewer after the resume)."""
    assert run_in_virtual_time(_attempts_at, offset) == 2
