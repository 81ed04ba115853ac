"""`fanout mcp`'s cancel_run over stdio through the official MCP client: a run a call
stopped waiting for is cancelled with its partial report kept, twice is no error, and a
run that is not going here is a tool error naming run_id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from coordinator.api.run import ExecutorName
from tests.coordinator.mcpserve.conftest import HALF_DONE_JOB, QUICK_JOB, over_stdio, text_of

pytestmark = pytest.mark.anyio
# A test marked `process` starts `fanout mcp` over stdio as a process of its own
# (tests/tiers.py); the others reach the server in this process.


async def _report(session: ClientSession, run_id: str) -> dict[str, Any]:
    result = await session.call_tool("get_report", {"run_id": run_id, "format": "json"})
    assert not result.is_error, text_of(result)
    report: dict[str, Any] = json.loads(text_of(result))
    return report


async def _quick_one_done(session: ClientSession, run_id: str) -> None:
    """Until the run's quick subtask has its result in the store (polled, as a client
    that came back would: the test's fail_after bounds it)."""
    for _ in range(10_000):
        report = await _report(session, run_id)
        if {s["id"]: s["status"] for s in report["subtasks"]}.get("quick") == "complete":
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"run {run_id}'s quick subtask did not finish")


@pytest.mark.process
async def test_a_run_left_going_after_wait_s_is_cancelled_with_its_partial_report(
    tmp_path: Path,
) -> None:
    """run_job with wait_s 0 leaves the run going; cancel_run ends it: the quick subtask's
    findings are kept, the stuck one is a gap with trigger cancelled, the answer says so,
    and get_report reads the same; a second cancel_run answers alike, no error."""
    with anyio.fail_after(90):
        async with over_stdio(tmp_path) as session:
            started = await session.call_tool("run_job", {"job": HALF_DONE_JOB, "wait_s": 0})
            run_id = (started.structured_content or {})["run_id"]
            assert (started.structured_content or {})["status"] == "running", text_of(started)
            await _quick_one_done(session, run_id)
            cancelled = await session.call_tool("cancel_run", {"run_id": run_id})
            again = await session.call_tool("cancel_run", {"run_id": run_id})
            stored = await _report(session, run_id)
            runs = await session.call_tool("list_runs", {})
    assert not cancelled.is_error, text_of(cancelled)
    data = cancelled.structured_content
    assert data is not None and data["run_id"] == run_id
    assert data["status"] == "finished" and data["outcome"] == "partial"
    assert data["coverage"] == 0.5
    assert [(g["subtask_id"], g["trigger"]) for g in data["gaps"]] == [("stuck", "cancelled")]
    assert text_of(cancelled).startswith(f"Run {run_id} is cancelled")
    assert not again.is_error, text_of(again)
    assert again.structured_content == data
    assert stored["status"] == "finished"
    statuses = {s["id"]: s["status"] for s in stored["subtasks"]}
    assert statuses["quick"] == "complete" and statuses["stuck"] != "complete"
    assert [(g["subtask_id"], g["trigger"]) for g in stored["gaps"]] == [("stuck", "cancelled")]
    listed = {r["id"]: r for r in (runs.structured_content or {})["runs"]}
    assert listed[run_id]["status"] == "finished" and listed[run_id]["outcome"] == "partial"


@pytest.mark.process
async def test_a_call_still_waiting_answers_with_the_report_cancel_run_cut(
    tmp_path: Path,
) -> None:
    """cancel_run from another call while run_job still waits: both answer with the
    cancelled run's partial report."""
    run_ids: list[str] = []
    half_done = anyio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("run "):
            run_ids.append(message.split()[1])
        elif message and message.startswith("1/2 subtasks"):
            half_done.set()

    waited: list[Any] = []
    with anyio.fail_after(90):
        async with over_stdio(tmp_path) as session, anyio.create_task_group() as tg:

            async def wait_for_it() -> None:
                waited.append(await session.call_tool(
                    "run_job", {"job": HALF_DONE_JOB}, progress_callback=progress))

            tg.start_soon(wait_for_it)
            await half_done.wait()
            cancelled = await session.call_tool("cancel_run", {"run_id": run_ids[0]})
    assert not cancelled.is_error, text_of(cancelled)
    [answer] = waited
    assert not answer.is_error, text_of(answer)
    for data in (answer.structured_content, cancelled.structured_content):
        assert data is not None and data["run_id"] == run_ids[0]
        assert data["status"] == "finished" and data["outcome"] == "partial"
        assert [(g["subtask_id"], g["trigger"]) for g in data["gaps"]] == [
            ("stuck", "cancelled")]


@pytest.mark.process
async def test_cancelling_what_does_not_run_here_is_a_tool_error_naming_run_id(
    tmp_path: Path,
) -> None:
    """An id of no run, a malformed id, and a run that finished on its own: each is an
    isError result whose text names run_id and says why; nothing is changed."""
    with anyio.fail_after(90):
        async with over_stdio(tmp_path) as session:
            done = await session.call_tool("run_job", {"job": QUICK_JOB, "speed": 100})
            run_id = (done.structured_content or {})["run_id"]
            unknown = await session.call_tool("cancel_run",
                                              {"run_id": "20260101-000000-0000abcd"})
            malformed = await session.call_tool("cancel_run", {"run_id": "nope"})
            missing = await session.call_tool("cancel_run", {})
            finished = await session.call_tool("cancel_run", {"run_id": run_id})
            stored = await _report(session, run_id)
    assert unknown.is_error
    assert "run_id: expected the id of a run in this server's store" in text_of(unknown)
    assert malformed.is_error and "run_id: expected a run id" in text_of(malformed)
    assert missing.is_error and "run_id: required" in text_of(missing)
    assert finished.is_error, text_of(finished)
    assert "run_id: expected the id of a run still going" in text_of(finished)
    assert f"'{run_id}', which has finished (outcome complete)" in text_of(finished)
    for result in (unknown, malformed, missing, finished):
        assert "Traceback" not in text_of(result)
    assert stored["outcome"] == "complete" and stored["gaps"] == []


@pytest.mark.parametrize(("executor", "said"), [
    pytest.param("local", "which another process runs", id="held-elsewhere"),
    pytest.param("temporal", "which another process runs", id="on-temporal"),
])
async def test_a_run_this_server_does_not_execute_is_refused_in_process(
    tmp_path: Path, executor: ExecutorName, said: str,
) -> None:
    """Through the SDK's in-process client: a run another live process holds is a tool
    error naming run_id, on either executor, and the run is left as it was."""
    from mcp import Client

    from coordinator.mcpserve import DoorConfig, build_server
    from coordinator.mcpserve.door import Door
    from coordinator.mcpserve.server import App
    from coordinator.store import RunStore

    config = DoorConfig(store=str(tmp_path / "runs.sqlite"), executor=executor)
    store = RunStore(config.store)
    try:
        # Held by this test's process: alive, and not the server's own run.
        recorder = store.create_run(job="j", query="q", file="job.yaml", spec_text="x",
                                    seed="1", speed=1.0)
        recorder.close()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                door = Door(store, tg, max_runs=1, max_queued=1)
                async with Client(build_server(App(config, store, door))) as client:
                    result = await client.call_tool("cancel_run", {"run_id": recorder.run_id})
                tg.cancel_scope.cancel()
        row = store.get(recorder.run_id)
    finally:
        store.close()
    assert result.is_error and "run_id: expected" in text_of(result)
    assert said in text_of(result) and recorder.run_id in text_of(result)
    assert row.status == "running" and row.report is None
