"""A person decides through ``fanout mcp --executor temporal`` (docs/design.md §16, §17):
a client that cannot elicit sees the escalation waiting in the workflow in
``get_report`` and decides it with the ``decide`` tool, and the run carries it out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import ClientSession

from coordinator.temporal.dev import DevServer
from tests.coordinator.mcpserve.conftest import over_stdio, text_of
from tests.coordinator.temporal.conftest import Workers
from tests.coordinator.temporal.test_serve_person import ASK_RETRY, job

pytestmark = [pytest.mark.anyio, pytest.mark.process]

QUEUE = "mcpperson"


async def _report(session: ClientSession, run_id: str) -> dict[str, Any]:
    result = await session.call_tool("get_report", {"run_id": run_id, "format": "json"})
    assert not result.is_error, text_of(result)
    report: dict[str, Any] = json.loads(text_of(result))
    return report


async def _until(session: ClientSession, run_id: str, done: Any) -> dict[str, Any]:
    """``get_report`` polled until ``done(report)`` holds (the run goes on on the
    workers, on its own time; the test's fail_after bounds the wait)."""
    while True:
        report = await _report(session, run_id)
        if done(report):
            return report
        await anyio.sleep(0.1)


async def _started(session: ClientSession, text: str) -> str:
    """The id of the run ``run_job`` started for the job ``text`` (not waited for)."""
    started = await session.call_tool("run_job", {"job": text, "wait_s": 0})
    assert not started.is_error, text_of(started)
    run_id: str = started.structured_content["run_id"]
    return run_id


async def test_a_decision_through_mcp_on_temporal_is_carried_out(
    dev_server: DevServer, workers: Workers, tmp_path: Path,
) -> None:
    """patents' escalation waits in the workflow: get_report lists it as pending, decide
    retry is carried out (patents completes), and the stored report holds the decision."""
    workers.start(QUEUE, concurrency=8)
    text = yaml.safe_dump(job(ASK_RETRY, escalations={"wait_s": 600}), sort_keys=False)
    with anyio.fail_after(120):
        async with over_stdio(tmp_path, "--executor", "temporal", "--address",
                              dev_server.address, "--task-queue", QUEUE) as session:
            run_id = await _started(session, text)
            waiting = await _until(session, run_id, lambda r: r.get("pending", {}).get(
                "escalations"))
            [esc] = waiting["pending"]["escalations"]
            assert (esc["id"], esc["trigger"]) == ("patents:1", "permission_denied")
            decided = await session.call_tool(
                "decide", {"run_id": run_id, "escalation": esc["id"], "do": "retry"})
            assert not decided.is_error, text_of(decided)
            assert decided.structured_content["do"] == "retry"
            again = await session.call_tool(
                "decide", {"run_id": run_id, "escalation": esc["id"], "do": "accept"})
            assert again.is_error
            assert "does not wait" in text_of(again)
            report = await _until(session, run_id, lambda r: r["status"] == "finished")
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "licence_prices": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"]) == ("patents:1", "retry")
    assert decision["by"] == decided.structured_content["by"]
    assert decision["change"]["status_after"] == "complete"


async def test_cancel_run_on_temporal_ends_a_waiting_run_with_its_partial_report(
    dev_server: DevServer, workers: Workers, tmp_path: Path,
) -> None:
    """cancel_run of a run whose escalation waits in the workflow: the workflow's cancel
    ends it with its partial report, nothing decided, the waiting subtask's gap kept."""
    workers.start(QUEUE, concurrency=8)
    text = yaml.safe_dump(job(ASK_RETRY, escalations={"wait_s": 600}), sort_keys=False)
    with anyio.fail_after(120):
        async with over_stdio(tmp_path, "--executor", "temporal", "--address",
                              dev_server.address, "--task-queue", QUEUE) as session:
            run_id = await _started(session, text)
            await _until(session, run_id, lambda r: r.get("pending", {}).get("escalations"))
            cancelled = await session.call_tool("cancel_run", {"run_id": run_id})
            assert not cancelled.is_error, text_of(cancelled)
            report = await _until(session, run_id, lambda r: r["status"] == "finished")
    assert report["decisions"] == []
    assert "patents" in {g["subtask_id"] for g in report["gaps"]}
    assert report["outcome"] != "complete"
