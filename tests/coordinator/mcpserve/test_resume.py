"""A killed `fanout mcp`'s runs are resumed by the next one on the store: over stdio with
the official MCP client (a process killed mid-run), and the choice of which runs, in
process (only a dead server's runs of this door, held to today's settings)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import ClientSession

from coordinator.mcpserve import DoorConfig
from coordinator.mcpserve.config import STORED_FILES
from coordinator.mcpserve.door import Door
from coordinator.mcpserve.resume import claim, left_running
from coordinator.store import RunStore
from tests.coordinator.mcpserve.conftest import HALF_DONE_JOB, make_papers, over_stdio, text_of

# One subtask ends at once; the other's tool answers 2 s after it is called (2000 s of
# job time at speed 1000): the server is killed between the two, and the resumed run
# calls it again from its checkpoint and finishes.
LONG_JOB = """\
scenario: mcp-killed-mid-run
seed: 1
job:
  query: "one quick subtask, one long"
  concurrency: 2
  defaults: {tool_timeout_s: 7200}
  subtasks:
    - {id: quick, query: "the quick one", tools: [fast], plan: [{call: fast, args: {}}]}
    - {id: long, query: "the long one", tools: [slow], plan: [{call: slow, args: {}}]}
tools:
  fast: {latency_s: 0.01, responses: [{ok: {results: ["found at once"]}}]}
  slow: {latency_s: 2000, responses: [{ok: {results: ["found later"]}}]}
"""
DOCS_JOB = """\
scenario: mcp-docs
seed: 1
job:
  query: "q"
  subtasks:
    - {id: a, query: "q", tools: [docs.search], plan: [{call: docs.search, args: {query: q}}]}
research_tools:
  docs: {path: %s}
"""


async def _report(session: ClientSession, run_id: str) -> dict[str, Any]:
    result = await session.call_tool("get_report", {"run_id": run_id, "format": "json"})
    assert not result.is_error, text_of(result)
    report: dict[str, Any] = json.loads(text_of(result))
    return report


async def _finished(session: ClientSession, run_id: str) -> dict[str, Any]:
    """The run's report once it has finished (polled, as a client that came back would;
    the test's fail_after bounds it)."""
    for _ in range(10_000):
        report = await _report(session, run_id)
        if report["status"] == "finished":
            return report
        await anyio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish")


async def _kill_mid_run(tmp_path: Path, store: RunStore, job: str, speed: float) -> str:
    """Start ``job`` on a `fanout mcp`, SIGKILL it once the quick subtask's result is in
    the store, and return the run's id: the run is left marked running."""
    run_ids: list[str] = []
    half_done = anyio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("run "):
            run_ids.append(message.split()[1])
        elif message and message.startswith("1/2 subtasks"):
            half_done.set()

    async with over_stdio(tmp_path) as session, anyio.create_task_group() as tg:

        async def run_it() -> None:
            # Its answer never comes: the server dies under it.
            with contextlib.suppress(Exception):
                await session.call_tool("run_job", {"job": job, "speed": speed},
                                        progress_callback=progress)

        tg.start_soon(run_it)
        await half_done.wait()
        # The subtask's end is announced just before its result is committed: polled
        # until it is (the caller's fail_after bounds it).
        for _ in range(10_000):
            if "quick" in await anyio.to_thread.run_sync(store.results, run_ids[0]):
                break
            await anyio.sleep(0.02)
        killed = await anyio.to_thread.run_sync(store.get, run_ids[0])
        assert killed.pid is not None and killed.pid != os.getpid()
        os.kill(killed.pid, signal.SIGKILL)
        tg.cancel_scope.cancel()
    left = await anyio.to_thread.run_sync(store.get, run_ids[0])
    assert left.status == "interrupted" and left.report is None
    return run_ids[0]


@pytest.mark.anyio
@pytest.mark.process
async def test_a_killed_servers_run_is_resumed_by_the_next_and_finishes(tmp_path: Path) -> None:
    """SIGKILL the server once the quick subtask has ended: the next `fanout mcp` on the
    store says it resumes the run (stderr), the run finishes whole in a second session,
    and get_report and list_runs read it."""
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        with anyio.fail_after(120):
            run_id = await _kill_mid_run(tmp_path, store, LONG_JOB, 1000)
            async with over_stdio(tmp_path) as session:
                report = await _finished(session, run_id)
                runs = await session.call_tool("list_runs", {})
        said = (tmp_path / "stdio-stderr.log").read_text()
    finally:
        store.close()
    # Rich wraps the log line to its width: its words, not the line, are compared.
    assert "resuming run" in said and run_id in said
    assert "1 of 2 subtasks already finished" in " ".join(said.split())
    assert report["outcome"] == "complete" and report["coverage"] == 1.0
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "quick": "complete", "long": "complete"}
    [row] = (runs.structured_content or {})["runs"]
    assert row["id"] == run_id and row["status"] == "finished"
    assert row["sessions"] == 2 and row["file"] == "fanout mcp run_job"


@pytest.mark.anyio
@pytest.mark.process
async def test_a_resumed_run_is_cancelled_by_cancel_run_with_both_sessions_findings(
    tmp_path: Path,
) -> None:
    """A resumed run whose other subtask is stuck: cancel_run ends it with the first
    session's finding kept and a cancelled gap for the stuck one."""
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        with anyio.fail_after(120):
            run_id = await _kill_mid_run(tmp_path, store, HALF_DONE_JOB, 1)
            async with over_stdio(tmp_path) as session:
                cancelled = await session.call_tool("cancel_run", {"run_id": run_id})
                report = await _report(session, run_id)
    finally:
        store.close()
    assert not cancelled.is_error, text_of(cancelled)
    data = cancelled.structured_content
    assert data is not None and data["status"] == "finished" and data["outcome"] == "partial"
    assert [(g["subtask_id"], g["trigger"]) for g in data["gaps"]] == [("stuck", "cancelled")]
    assert report["status"] == "finished"
    assert {s["id"]: s["status"] for s in report["subtasks"]}["quick"] == "complete"
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [("stuck", "cancelled")]


def _config(tmp_path: Path, *docs: Path) -> DoorConfig:
    return DoorConfig(store=str(tmp_path / "runs.sqlite"), docs=docs)


def _left_by_a_dead_server(store: RunStore, text: str, file: str) -> str:
    """A run recorded as a server records one, then left: it holds this process's pid,
    which a restarted server takes for a dead predecessor's (as a container's pid 1)."""
    recorder = store.create_run(job="j", query="q", file=file, spec_text=text, seed="1",
                                speed=1.0)
    recorder.close()
    return recorder.run_id


def test_only_the_runs_a_fanout_mcp_left_are_candidates(tmp_path: Path) -> None:
    """A `fanout run` run left in the same store is not this door's to resume."""
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        ours = _left_by_a_dead_server(store, "x", STORED_FILES["run_job"])
        _left_by_a_dead_server(store, "x", "job.yaml")
        assert left_running(store) == [ours]
    finally:
        store.close()


def test_a_run_whose_folder_is_no_longer_served_is_left_interrupted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """A run_job reading a folder the restarted server no longer serves is not resumed:
    a warning names the run and the refused field, and the run stays interrupted; the
    same run on a server that still serves the folder is claimed, in a second session."""
    papers = make_papers(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        run_id = _left_by_a_dead_server(store, DOCS_JOB % papers, STORED_FILES["run_job"])
        with caplog.at_level(logging.WARNING, logger="fanout.mcp"):
            refused = claim(_config(tmp_path, other), store, run_id)
        assert refused is None
        assert store.get(run_id).status == "interrupted"
        said = " ".join(r.getMessage() for r in caplog.records)
        assert f"not resuming run {run_id}" in said and "research_tools.docs.path" in said
        resumed = claim(_config(tmp_path, papers), store, run_id)
        assert resumed is not None
        resumed.recorder.close()
        row = store.get(run_id)
        assert row.status == "running" and row.sessions == 2
    finally:
        store.close()


@pytest.mark.anyio
async def test_cancelling_resumed_runs_in_a_slot_or_waiting_for_one_records_their_reports(
    tmp_path: Path,
) -> None:
    """One slot, two resumed runs: the one waiting for the slot is cancelled first and
    ends at once, without it; then the one in the slot; each records its report, the
    stuck subtask a gap with trigger cancelled, and neither is left going."""
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        ids = [_left_by_a_dead_server(store, HALF_DONE_JOB, STORED_FILES["run_job"])
               for _ in range(2)]
        claimed = [claim(_config(tmp_path), store, run_id) for run_id in ids]
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                door = Door(store, tg, max_runs=1, max_queued=4)
                tickets = [door.resume(r) for r in claimed if r is not None]
                await anyio.wait_all_tasks_blocked()  # the first has the slot
                for ticket in reversed(tickets):
                    assert door.cancel(ids[tickets.index(ticket)]) is ticket
                    await ticket.ended.wait()
        rows = [store.get(run_id) for run_id in ids]
    finally:
        store.close()
    assert door.live == {} and door.waiting == 0
    for ticket, row in zip(tickets, rows, strict=True):
        assert ticket.error is None and ticket.report is not None
        assert row.status == "finished" and row.sessions == 2
        assert ("stuck", "cancelled") in [(g.subtask_id, g.trigger) for g in ticket.report.gaps]
        assert row.report is not None and row.report["outcome"] in ("partial", "failed")


@pytest.mark.anyio
async def test_a_resumed_run_outlives_a_server_that_stops_left_interrupted(
    tmp_path: Path,
) -> None:
    """The server stops (its task group cancelled, as when the client leaves) while a
    resumed run is stuck: the run is cut without a report and reads interrupted, and the
    next start claims it again."""
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        run_id = _left_by_a_dead_server(store, HALF_DONE_JOB, STORED_FILES["run_job"])
        resumed = claim(_config(tmp_path), store, run_id)
        assert resumed is not None
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                door = Door(store, tg, max_runs=1, max_queued=4)
                ticket = door.resume(resumed)
                await anyio.wait_all_tasks_blocked()  # it runs, stuck
                tg.cancel_scope.cancel()
        row = store.get(run_id)
        again = claim(_config(tmp_path), store, run_id)
        assert again is not None
        again.recorder.close()
    finally:
        store.close()
    assert ticket.ended.is_set() and ticket.report is None and door.live == {}
    assert row.status == "interrupted" and row.report is None and row.sessions == 2


def test_an_asks_stored_job_resumes_only_while_its_folder_is_served(tmp_path: Path) -> None:
    """The job an ask composed is read back as it ran (its folder, its model) while the
    folder is served, and refused naming docs once the server serves another."""
    from coordinator.mcpserve.config import ArgumentRefused
    from coordinator.mcpserve.intake import ask_job, stored_job

    papers = make_papers(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    asked = ask_job(_config(tmp_path, papers), "q?", docs=None, web=False, max_subtasks=3,
                    budget=None)
    again = stored_job(_config(tmp_path, papers), STORED_FILES["ask"], asked.spec_text)
    assert again.scenario.research_tools == asked.scenario.research_tools
    with pytest.raises(ArgumentRefused, match="docs: expected a folder the server serves"):
        stored_job(_config(tmp_path, other), STORED_FILES["ask"], asked.spec_text)
