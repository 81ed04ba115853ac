"""A cancel reaches a lead that is still planning: its model call stops, the run ends with
its report (every gap ``cancelled``), recorded as a served run is."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from coordinator.engine import RunRequest
from coordinator.engine.executor import LocalExecutor
from coordinator.engine.resume import Start
from coordinator.engine.run import Hooks
from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead import JobPlanning
from coordinator.store.runs import RunStore
from shared.clock import AnyioClock
from subagents.models.base import ModelRequest, ModelTurn

pytestmark = pytest.mark.anyio

JOB = """\
scenario: planning
model: {provider: scripted}
job:
  query: "State of solid-state batteries"
  max_subtasks: 3
tools:
  web_search:
    description: "Search the web."
    params: {query: {type: string}}
    responses: [{ok: {results: ["USD 9bn by 2034"]}}]
"""


class PlanningForever:
    """A model whose every call waits until it is cancelled; ``asked`` is set by the first."""

    provider = "function"
    name = "function"

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """Record the request, say so, and never answer."""
        self.requests.append(request)
        self.asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Nothing to close."""


async def test_a_cancel_while_the_lead_plans_ends_the_run_cancelled(tmp_path: Path) -> None:
    """The lead's first model call is cut by the cancel; the run ends with its report: the
    lead and the question it could not plan are both gaps with trigger cancelled, no
    subagent and no synthesis ran, and the store holds the finished run."""
    scenario = load_scenario_text(JOB, "planning.yaml")
    model = PlanningForever()
    clock = AnyioClock()
    start = Start.fresh(scenario, clock, planning=JobPlanning(scenario, client=model))
    store = RunStore(tmp_path / "runs.sqlite")
    cancel = anyio.Event()
    executor = LocalExecutor(store, start=start, clock=clock)
    reports = []

    async def run() -> None:
        reports.append(await executor.execute(RunRequest(scenario, JOB, "planning.yaml"),
                                              Hooks(cancel=cancel)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await model.asked.wait()
        cancel.set()
    (report,) = reports
    assert [(g.subtask_id, g.trigger) for g in report.gaps] == [
        ("lead", "cancelled"), ("question", "cancelled")]
    assert [(s.id, s.attempts) for s in report.subtasks] == [("lead", 1), ("question", 0)]
    assert [r.subtask_id for r in model.requests] == ["lead"]  # neither a subagent nor a synthesis
    assert report.answer.text is None
    (row,) = store.runs()
    assert row.status == "finished" and row.report is not None
    assert {g["trigger"] for g in row.report["gaps"]} == {"cancelled"}
