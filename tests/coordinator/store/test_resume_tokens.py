"""A resumed run's token meter starts from its checkpoints: each model planner's spend and
the lead's (job.budget; the kill/resume test is tests/e2e/test_resume.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coordinator.engine.resume import restored_runs
from coordinator.jobfile.loader import load_scenario
from coordinator.lead import JobPlanning
from shared.clock import AnyioClock
from shared.ids import SeededTraceIds
from subagents.checkpoint import snapshot_run
from subagents.result import LEAD
from subagents.simulated.tools import SimulatedTools

LIBRARY = Path(__file__).resolve().parents[3] / "scenarios"


def test_restored_runs_seed_the_meter_with_what_was_spent() -> None:
    """A checkpointed subagent's spend and the lead's recorded spend are on the meter
    before anything runs again; subtasks without a checkpoint spent nothing."""
    scenario = load_scenario(LIBRARY / "model_budget.yaml")
    planning = JobPlanning(scenario)
    clock = AnyioClock()
    run = planning.fresh_run(scenario.job.subtasks[0])
    run.planner.spent = [400, 100, 1]  # type: ignore[attr-defined]
    checkpoints: dict[str, dict[str, Any]] = {
        "a": {"run": snapshot_run(run), "sim": {}, "trace": 1},
        LEAD: {"lead": {"model_attempts": 1, "trace": 1, "spent": [600, 150, 1]}},
    }
    again = JobPlanning(scenario)
    restored_runs(scenario, checkpoints, SimulatedTools(scenario.tools, clock),
                  SeededTraceIds("t"), planning=again)
    assert again.meter.by_subtask == {"a": [400, 100, 1], LEAD: [600, 150, 1]}
    assert (again.meter.input_tokens, again.meter.output_tokens) == (1000, 250)
