"""Chaos properties: generated jobs with faults everywhere, replayed twice in virtual time."""

from __future__ import annotations

import pytest
from hypothesis import given

from coordinator.jobfile.scenario import Scenario
from tests.reliability import jobs
from tests.reliability.counts import count
from tests.reliability.invariants import check
from tests.reliability.profiles import scaled
from tests.reliability.trace import Observed, observe


def counted(observed: Observed) -> None:
    """Count one case and the faults it injected, by kind."""
    count("cases")
    for ex in observed.executions:
        if ex.kind not in ("ok", "empty"):
            kind = ex.error or ex.kind
            count("faults")
            count(f"fault:{kind}")
    for e in observed.events:
        if e.kind == "attempt" and e.result is not None:
            refused = e.result.error_type
            if refused in ("not_allowed", "invalid_argument"):
                count("faults")
                count(f"fault:{refused}")


def replay_checked(scenario: Scenario) -> Observed:
    """Replay twice, check byte-identical output and every invariant; return the first."""
    first = observe(scenario)
    second = observe(scenario)
    assert first.wire() == second.wire(), "two replays give byte-identical reports"
    assert first.trace_text() == second.trace_text(), "two replays give identical traces"
    check(scenario, first)
    return first


@pytest.mark.slow  # hundreds of generated jobs: seconds (tests/tiers.py)
@scaled(4)
@given(jobs.scenarios())
def test_every_generated_job_keeps_the_promises(scenario: Scenario) -> None:
    """Any job, any faults: one status and at most one gap per subtask, routing, retries and
    side effects as docs/design.md §5.1 says, findings handed up whole, the same report twice."""
    counted(replay_checked(scenario))
