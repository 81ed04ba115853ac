"""A cancel reaches a lead that is still planning (its subtasks, or their follow-ups): its
model call stops, the run ends with its report, recorded as a served run is."""

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
from subagents.models.base import ModelRequest, ModelTurn, ToolCall

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


FOLLOWING = """\
scenario: following
model: {provider: scripted}
job:
  query: "State of solid-state batteries"
  max_subtasks: 3
tools:
  web_search:
    description: "Search the web."
    params: {query: {type: string}}
    responses: [{ok: {results: ["USD 9bn by 2034"]}}]
  patent_db:
    description: "Search patents."
    params: {since: {type: string}}
    responses: [{error: permission, message: "role analyst lacks patents:read"}]
"""


class FollowingForever(PlanningForever):
    """A model that plans two subtasks, answers them, and never answers the lead's call
    for follow-ups (``asked`` is set by that one); the synthesis is answered."""

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """The plan, each subtask's tool call and answer; the follow-ups never."""
        self.requests.append(request)
        sid = request.subtask_id
        mine = sum(r.subtask_id == sid for r in self.requests)
        if sid == "lead" and request.force_tool == "plan_followups":
            self.asked.set()
            await anyio.sleep_forever()
        if sid == "lead":
            if mine == 1:
                return ModelTurn(calls=(ToolCall("p1", "plan_subtasks", {"subtasks": [
                    {"id": "market", "query": "market size", "tools": ["web_search"]},
                    {"id": "patents", "query": "patents since 2024", "tools": ["patent_db"]},
                ]}),), stop_reason="tool_use")
            return ModelTurn(text="The market is USD 9bn by 2034 [1].")
        if mine == 1:
            tool, args = (("web_search", {"query": "q"}) if sid == "market"
                          else ("patent_db", {"since": "2024-01-01"}))
            return ModelTurn(calls=(ToolCall("t1", tool, args),), stop_reason="tool_use")
        return ModelTurn(text=f"answer of {sid}")


async def test_a_cancel_while_the_lead_plans_follow_ups_ends_the_run_with_its_round(
    tmp_path: Path,
) -> None:
    """The lead's call for follow-ups is cut by the cancel (not retried until it times
    out): the round it had stands, no follow-up runs, and the report is written up from
    what was found."""
    scenario = load_scenario_text(FOLLOWING, "following.yaml")
    model = FollowingForever()
    clock = AnyioClock()
    start = Start.fresh(scenario, clock, planning=JobPlanning(scenario, client=model))
    cancel = anyio.Event()
    executor = LocalExecutor(RunStore(tmp_path / "runs.sqlite"), start=start, clock=clock)
    reports = []

    async def run() -> None:
        reports.append(await executor.execute(
            RunRequest(scenario, FOLLOWING, "following.yaml"), Hooks(cancel=cancel)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await model.asked.wait()
        cancel.set()
    (report,) = reports
    assert [(s.id, s.status) for s in report.subtasks] == [
        ("market", "complete"), ("patents", "gap")]
    assert not any(s.followup_of for s in report.subtasks)
    # One call for follow-ups, cut; not one attempt after another until they time out.
    lead = [r.force_tool for r in model.requests if r.subtask_id == "lead"]
    assert lead == ["plan_subtasks", "plan_followups", None]
    assert report.answer.text == "The market is USD 9bn by 2034 [1]."
