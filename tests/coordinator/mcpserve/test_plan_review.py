"""The MCP client reviews the lead's plan (coordinator.mcpserve.plan): asked with
elicitation/create through the official client's elicitation callback (approve, reject,
or edit as a text field holding the edited subtasks, checked as a job file's), or,
for a client that cannot elicit, shown by get_report and taken by review_plan."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client
from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult

from coordinator.mcpserve import render
from coordinator.mcpserve.plan import edit_of, plan_schema
from coordinator.mcpserve.server import App, build_server
from coordinator.plan_review import PlanEditError
from tests.coordinator.mcpserve.conftest import text_of
from tests.coordinator.mcpserve.test_person import CLIENT, _live, _served

pytestmark = pytest.mark.anyio

# A scripted lead plans patents and market; the job asks for its plan to be reviewed.
PLANNED_JOB = """\
scenario: mcp-plan-review
seed: 1
model:
  provider: scripted
  latency_s: 0.01
  turns:
    lead:
      - subtasks:
          - {id: patents, query: "battery patents", tools: [web_search]}
          - {id: market, query: "battery market", tools: [web_search]}
      - text: "Done."
    patents:
      - calls: [{tool: web_search, args: {query: "battery patents"}}]
      - text: "found"
    market:
      - calls: [{tool: web_search, args: {query: "battery market"}}]
      - text: "found"
    licences:
      - calls: [{tool: web_search, args: {query: "battery licences"}}]
      - text: "found"
job:
  query: "battery patents"
  review_plan: true
tools:
  web_search: {latency_s: 0.01, responses: [{ok: {results: ["found"]}}]}
"""
PLAN = [{"id": "patents", "query": "battery patents", "tools": ["web_search"], "weight": 1.0},
        {"id": "market", "query": "battery market", "tools": ["web_search"], "weight": 1.0}]
# market removed, patents' query changed, licences added.
EDITED = yaml.safe_dump([
    {"id": "patents", "query": "solid-state battery patents", "tools": ["web_search"],
     "weight": 1.0},
    {"id": "licences", "query": "battery licences", "tools": ["web_search"]},
])


def _rows(app: App, run_id: str) -> dict[str, str]:
    """The finished run's subtasks and their queries."""
    report = app.store.get(run_id).report
    assert report is not None
    return {s["id"]: s["query"] for s in report["subtasks"]}


async def _with_client(tmp: Path, callback: Any,
                       body: Callable[[App, Client], Awaitable[Any]]) -> Any:
    async with _served(tmp) as app, Client(build_server(app), mode="legacy",
                                           client_info=CLIENT,
                                           elicitation_callback=callback) as client:
        return await body(app, client)


# --- the edit, unit ------------------------------------------------------------------

def test_an_edited_list_becomes_the_desks_edit() -> None:
    """Items missing are removed, changed keys are changes, new ids are added."""
    assert edit_of(PLAN, EDITED) == {"edit": {
        "remove": ["market"], "change": {"patents": {"query": "solid-state battery patents"}},
        "add": [{"id": "licences", "query": "battery licences", "tools": ["web_search"]}]}}
    assert edit_of(PLAN, json.dumps({"subtasks": PLAN}))["edit"] == {
        "remove": [], "change": {}, "add": []}


@pytest.mark.parametrize(("text", "field"), [
    pytest.param("", "edit", id="empty"),
    pytest.param("[{id: patents", "edit", id="not-yaml"),
    pytest.param("{id: patents}", "edit", id="not-a-list"),
    pytest.param("[{query: x}]", "edit[0].id", id="no-id"),
    pytest.param("[{id: a, query: x}, {id: a, query: y}]", "edit[1].id", id="duplicate"),
    pytest.param("[{id: patents, plan: []}]", "edit[0].plan", id="unknown-key"),
])
def test_a_bad_edit_names_its_field(text: str, field: str) -> None:
    """Text that is no list of subtasks is refused naming where."""
    with pytest.raises(PlanEditError) as refused:
        edit_of(PLAN, text)
    assert refused.value.field == field


def test_a_run_left_waiting_for_its_plan_says_so() -> None:
    """A call that stops waiting while the plan waits lists plan in waiting and names
    review_plan."""
    answer = render.unfinished("r1", {"escalations": [], "plan": {"subtasks": PLAN}})
    assert answer.waiting == ["plan"]
    assert "review_plan(run_id, verdict)" in render.as_text(answer)
    assert "decide(" not in render.as_text(answer)


# --- elicitation -----------------------------------------------------------------------

async def test_an_edit_elicited_is_checked_and_the_run_goes_on_with_it(tmp_path: Path) -> None:
    """The plan is asked as elicitation/create (verdict, edit); an edit with a bad
    weight is refused naming edit[0].weight and asked again; the edit then runs."""
    asked: list[ElicitRequestParams] = []
    bad = EDITED.replace("weight: 1.0", "weight: heavy", 1)
    replies = [ElicitResult(action="accept", content={"verdict": "edit", "edit": bad}),
               ElicitResult(action="accept", content={"verdict": "edit", "edit": EDITED})]

    async def callback(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return replies.pop(0)

    async def body(app: App, client: Client) -> tuple[Any, str]:
        result = await client.call_tool("run_job", {"job": PLANNED_JOB})
        return result, str(result.structured_content["run_id"])

    with anyio.fail_after(60):
        async with _served(tmp_path) as app, Client(
                build_server(app), mode="legacy", client_info=CLIENT,
                elicitation_callback=callback) as client:
            result, run_id = await body(app, client)
            rows = _rows(app, run_id)
    assert not result.is_error, text_of(result)
    assert rows == {"patents": "solid-state battery patents", "licences": "battery licences"}
    first, second = asked
    assert isinstance(first, ElicitRequestFormParams)
    assert first.requested_schema == plan_schema()
    assert "- id: patents" in first.message and "query: battery market" in first.message
    assert "edit[0].weight" in second.message


@pytest.mark.parametrize(("reply", "rows"), [
    pytest.param(ElicitResult(action="decline"), {"patents", "market"}, id="decline-approves"),
    pytest.param(ElicitResult(action="accept", content={"verdict": "approve"}),
                 {"patents", "market"}, id="approve"),
    pytest.param(ElicitResult(action="accept", content={"verdict": "reject"}), {"lead"},
                 id="reject"),
])
async def test_approve_reject_and_decline(tmp_path: Path, reply: ElicitResult,
                                          rows: set[str]) -> None:
    """approve and decline run the plan as planned; reject ends the run failed with the
    lead's gap."""

    async def callback(context: Any, params: ElicitRequestParams) -> ElicitResult:
        return reply

    with anyio.fail_after(60):
        async with _served(tmp_path) as app, Client(
                build_server(app), mode="legacy", client_info=CLIENT,
                elicitation_callback=callback) as client:
            result = await client.call_tool("run_job", {"job": PLANNED_JOB})
            run_id = str(result.structured_content["run_id"])
            report = app.store.get(run_id).report
    assert report is not None
    assert {s["id"] for s in report["subtasks"]} == rows
    if rows == {"lead"}:  # rejected: the lead's gap, no subtask ran
        assert report["outcome"] == "failed" and "plan_rejected" in json.dumps(report)


# --- a client that cannot elicit ---------------------------------------------------------

async def test_without_elicitation_get_report_shows_the_plan_and_review_plan_takes_it(
    tmp_path: Path,
) -> None:
    """The plan waits: get_report shows it (JSON pending.plan, Markdown with the call);
    review_plan refuses a bad edit naming the field, takes a good one, and refuses a
    second review; the run goes on with the edit."""

    async def body(app: App, client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        first = await client.call_tool("run_job", {"job": PLANNED_JOB, "wait_s": 0})
        run_id = str(first.structured_content["run_id"])
        ticket = await _live(app)
        assert ticket.desk is not None  # the job asks for a review: a person is attached
        while not ticket.desk.plan_waits():
            await ticket.desk.change().wait()
        report = await client.call_tool("get_report", {"run_id": run_id, "format": "json"})
        seen["plan"] = json.loads(text_of(report))["pending"]["plan"]
        seen["md"] = text_of(await client.call_tool("get_report", {"run_id": run_id}))
        seen["bad"] = await client.call_tool("review_plan", {
            "run_id": run_id, "verdict": "edit", "edit": "[{id: patents, tools: [fax]}]"})
        seen["ok"] = await client.call_tool("review_plan", {
            "run_id": run_id, "verdict": "edit", "edit": EDITED})
        seen["again"] = await client.call_tool("review_plan", {
            "run_id": run_id, "verdict": "approve"})
        await ticket.ended.wait()
        seen["rows"] = _rows(app, run_id)
        for other in list(app.door.live):
            app.door.cancel(other)
        return seen

    with anyio.fail_after(60):
        seen = await _with_client(tmp_path, None, body)
    assert [s["id"] for s in seen["plan"]["subtasks"]] == ["patents", "market"]
    assert "## The lead's plan waits for review" in seen["md"]
    assert "review_plan(run_id=" in seen["md"]
    assert seen["bad"].is_error
    assert "edit.change.patents.tools[0]: expected a tool of the job" in text_of(seen["bad"])
    assert not seen["ok"].is_error, text_of(seen["ok"])
    assert seen["ok"].structured_content["verdict"] == "edit"
    assert seen["again"].is_error and "does not wait for review" in text_of(seen["again"])
    assert seen["rows"] == {"patents": "solid-state battery patents",
                            "licences": "battery licences"}


async def test_cancel_run_ends_a_run_whose_plan_waits(tmp_path: Path) -> None:
    """cancel_run reaches a run whose plan waits for review: the wait ends at once,
    nothing of the plan runs, and the run ends cancelled with its report."""

    async def body(app: App, client: Client) -> Any:
        first = await client.call_tool("run_job", {"job": PLANNED_JOB, "wait_s": 0})
        run_id = str(first.structured_content["run_id"])
        ticket = await _live(app)
        assert ticket.desk is not None
        while not ticket.desk.plan_waits():
            await ticket.desk.change().wait()
        return await client.call_tool("cancel_run", {"run_id": run_id})

    with anyio.fail_after(30):
        cancelled = await _with_client(tmp_path, None, body)
    assert not cancelled.is_error, text_of(cancelled)
    assert cancelled.structured_content["status"] == "finished"
    assert "is cancelled" in text_of(cancelled)
