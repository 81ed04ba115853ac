"""Kill anywhere, in virtual time: a recorded run cut at any store write resumes to the same report.

The SIGKILL tests (test_kill_anywhere.py) kill the real process at 20 points; this
property kills generated jobs at *every kind* of point: the recorder stops persisting
at its Nth write and the job is cancelled there, then the run is resumed from what was
persisted, through the same ``LocalExecutor`` and ``restored_runs`` as ``fanout resume``.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.engine import Hooks, LocalExecutor, RunRequest, Start, restored_runs
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning
from coordinator.store.recorder import RunRecorder
from shared.clock import AnyioClock, run_in_virtual_time
from shared.ids import SeededTraceIds
from subagents.run import SubagentRun
from tests.reliability import jobs
from tests.reliability.counts import count
from tests.reliability.invariants import EFFECT_MAY_HAVE_HAPPENED
from tests.reliability.memstore import MemoryRecorder
from tests.reliability.profiles import scaled
from tests.reliability.trace import Execution, ObservedTools

RUN_ID = "run-1"
TIMES = frozenset({"started_s", "ended_s", "elapsed_s"})


def normalized(value: Any) -> Any:
    """A report without its times (a resumed run redoes lost work later, on its own clock)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def session(
    scenario: Scenario,
    recorder: MemoryRecorder,
    tools: ObservedTools,
    *,
    runs: dict[str, SubagentRun] | None = None,
    trace_ids: SeededTraceIds | None = None,
    offset: float = 0.0,
) -> dict[str, Any] | None:
    """Run (or resume) the scenario recorded in ``recorder``; None when the recorder died."""

    async def main() -> dict[str, Any] | None:
        with anyio.CancelScope() as scope:
            recorder.scope = scope
            clock = AnyioClock()
            planning = JobPlanning(scenario, clock=clock)
            start = Start(
                scenario, planning, tools,
                runs if runs is not None else planning.fresh_runs(),
                trace_ids or SeededTraceIds(f"{scenario.seed}/{RUN_ID}"),
                elapsed_offset=offset,
            )
            executor = LocalExecutor(
                recorder=cast(RunRecorder, recorder), start=start, clock=clock
            )
            report = await executor.execute(RunRequest(scenario, "", ""), Hooks())
            return report.to_wire()
        return None

    return run_in_virtual_time(functools.partial(main))


def at_most_once(scenario: Scenario, executions: list[Execution]) -> None:
    """Across sessions, a non-idempotent tool with side effects has ≤ 1 effect per logical call."""
    effects: dict[tuple[str, str], int] = {}
    for ex in executions:
        spec = scenario.tools[ex.tool]
        if not spec.side_effects or spec.is_idempotent:
            continue
        if ex.kind != "error" or ex.error in EFFECT_MAY_HAVE_HAPPENED:
            key = (ex.subtask_id, ex.key)
            effects[key] = effects.get(key, 0) + 1
            assert effects[key] == 1, f"{ex.tool} {ex.key}: executed twice across the kill"


def kill_and_resume(
    scenario: Scenario, die_at: int
) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """The uninterrupted report, the report of a run killed after ``die_at`` writes, and
    the subtasks killed during a non-idempotent call (which must end unknown_state)."""
    clean = session(scenario, MemoryRecorder(RUN_ID), ObservedTools(scenario.tools, AnyioClock()))
    assert clean is not None
    killed = MemoryRecorder(RUN_ID, die_at=die_at)
    first = ObservedTools(scenario.tools, AnyioClock(), alive=lambda: not killed.dead)
    assert session(scenario, killed, first) is None, "the run died"
    count("kills:virtual")
    second = ObservedTools(scenario.tools, AnyioClock())
    trace_ids = SeededTraceIds(f"{scenario.seed}/{RUN_ID}")
    runs = restored_runs(scenario, killed.checkpoints, second, trace_ids)
    resumed = session(
        scenario,
        MemoryRecorder(RUN_ID),
        second,
        runs=runs,
        trace_ids=trace_ids,
        offset=killed.last_at,
    )
    assert resumed is not None
    at_most_once(scenario, first.log + second.log)
    during = {
        sid
        for sid, saved in killed.checkpoints.items()
        if saved["run"].get("in_flight") and saved["run"]["state"] not in ("done", "escalated")
    }
    return clean, resumed, during


def by_id(report: dict[str, Any], section: str, key: str) -> dict[str, Any]:
    """One section of a report (subtasks, gaps, escalations) by subtask id, normalized."""
    return {entry[key]: normalized(entry) for entry in report[section]}


def writes_of(scenario: Scenario) -> int:
    """How many store writes an uninterrupted run of ``scenario`` makes."""
    recorder = MemoryRecorder(RUN_ID)
    session(scenario, recorder, ObservedTools(scenario.tools, AnyioClock()))
    return recorder.writes


@pytest.mark.slow  # a resume at every write of generated jobs: seconds (tests/tiers.py)
@scaled(2)
@given(jobs.scenario_documents(max_subtasks=10), st.data())
def test_a_run_killed_at_any_write_resumes_to_the_uninterrupted_report(
    doc: dict[str, Any], data: st.DataObject
) -> None:
    """Killed after any number of store writes and resumed: the same statuses, attempts,
    findings, gaps and trace ids, and no non-idempotent effect twice."""
    # A deadline is wall-clock-like: a resumed run redoes lost work later, so a job with
    # one may legitimately end differently. Everything else must not.
    doc["job"].pop("deadline_s", None)
    scenario = jobs.load(doc)
    die_at = data.draw(st.integers(0, writes_of(scenario) - 1), label="die_at")
    clean, resumed, during = kill_and_resume(scenario, die_at)
    if not during:
        assert normalized(resumed) == normalized(clean)
        return
    # Killed during a non-idempotent call: whether its effect happened is unknown, so it
    # is not sent again and the subtask escalates unknown_state; the others are unchanged.
    count("kills:during_effect")
    gaps = by_id(resumed, "gaps", "subtask_id")
    for sid in during:
        gap = gaps[sid]
        assert (gap["errorCategory"], gap["trigger"], gap["route"]) == (
            "transient", "unknown_state", "escalate"
        ), sid
    for section, key in (("subtasks", "id"), ("gaps", "subtask_id")):
        want = {k: v for k, v in by_id(clean, section, key).items() if k not in during}
        got = {k: v for k, v in by_id(resumed, section, key).items() if k not in during}
        assert got == want, section


BOOKING = {
    "scenario": "booking",
    "job": {
        "query": "book the venue",
        "subtasks": [{"id": "venue", "query": "book it", "tools": ["book"],
                      "plan": [{"call": "book", "args": {"q": "a"}}]}],
    },
    "tools": {"book": {"params": {"q": {"type": "string"}}, "side_effects": True,
                       "latency_s": 1.0, "responses": [{"ok": {"booked": True}}]}},
}


def test_a_run_killed_during_a_non_idempotent_call_never_sends_it_twice() -> None:
    """Killed after the booking ran but before its result was saved, the resumed run
    escalates unknown_state instead of booking again (the shrunk chaos counterexample)."""
    scenario = jobs.load(BOOKING)
    probe = MemoryRecorder(RUN_ID)
    session(scenario, probe, ObservedTools(scenario.tools, AnyioClock()))
    assert "checkpoint:durable" in probe.kinds, "the intent is checkpointed before the call"
    # Die at the write that ends the attempt: the tool has run, its result is lost.
    die_at = probe.kinds.index("event:attempt")
    clean, resumed, during = kill_and_resume(scenario, die_at)
    assert during == {"venue"}
    (gap,) = resumed["gaps"]
    assert (gap["trigger"], gap["route"]) == ("unknown_state", "escalate")
    assert resumed["subtasks"][0]["attempts"] == 1
    assert clean["outcome"] == "complete"
