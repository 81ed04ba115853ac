"""Cancelling the caller's task cancels the job cleanly, and the cancellation propagates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from coordinator import ask, ask_events
from coordinator.store.runs import RunStore
from subagents.result import ProgressEvent

pytestmark = pytest.mark.anyio


async def slow(query: str) -> dict[str, Any]:
    """A search that takes an hour."""
    await anyio.sleep(3600)
    return {"results": [query]}


async def quick(query: str) -> dict[str, Any]:
    """A search that answers at once."""
    return {"results": [query]}


def job() -> dict[str, Any]:
    return {
        "tools": [slow, quick],
        "model": "scripted",
        "concurrency": 1,
        "subtasks": [
            {
                "id": "fast",
                "query": "f",
                "tools": ["quick"],
                "plan": [{"call": "quick", "args": {"query": "f"}}],
            },
            {
                "id": "long",
                "query": "l",
                "tools": ["slow"],
                "plan": [{"call": "slow", "args": {"query": "l"}}],
            },
            {
                "id": "queued",
                "query": "q",
                "tools": ["quick"],
                "plan": [{"call": "quick", "args": {"query": "q"}}],
            },
        ],
    }


async def test_cancelling_the_caller_propagates_and_records_the_whole_report(
    tmp_path: Path,
) -> None:
    """The caller's cancel reaches it as a cancellation; the store holds the whole report."""
    store = tmp_path / "runs.sqlite"
    events: list[ProgressEvent] = []
    with anyio.move_on_after(60) as scope:
        await ask("q", store=store, on_event=events.append, **job())
    assert scope.cancelled_caught  # the cancellation propagated out of ask()
    [row] = RunStore(store).runs()
    assert row.status == "finished"
    assert row.report is not None
    statuses = {s["id"]: s["status"] for s in row.report["subtasks"]}
    assert statuses["fast"] == "complete"
    gaps = {g["subtask_id"]: g for g in row.report["gaps"]}
    assert gaps["long"]["trigger"] == "cancelled"
    assert gaps["queued"]["trigger"] == "cancelled"
    # The live view hears the wind-down too.
    assert any(e.subtask_id == "long" and e.trigger == "cancelled" for e in events)


async def test_leaving_an_event_stream_early_cancels_the_job_with_its_report() -> None:
    """Breaking out of ask_events ends the job; run.report holds its cancelled report."""
    async with ask_events("q", **job()) as run:
        async for event in run:
            if event.subtask_id == "long" and event.kind == "call":
                break
    report = run.report
    gaps = {g.subtask_id: g.trigger for g in report.gaps}
    assert gaps == {"long": "cancelled", "queued": "cancelled"}
    assert [s.status for s in report.subtasks if s.id == "fast"] == ["complete"]


async def test_event_stream_to_the_end_gives_the_report() -> None:
    """Iterating ask_events to the end yields every event, then run.report is set."""
    tools = [quick]
    subtasks = [
        {
            "id": "a",
            "query": "a",
            "tools": ["quick"],
            "plan": [{"call": "quick", "args": {"query": "a"}}],
        }
    ]
    async with ask_events("q", tools=tools, model="scripted", subtasks=subtasks) as run:
        with pytest.raises(RuntimeError, match="has not ended"):
            _ = run.report
        kinds = [e.kind async for e in run]
    assert "call" in kinds
    assert run.report.outcome == "complete"
