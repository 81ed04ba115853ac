"""Workers come and go: a killed worker's job finishes on another; two workers share a job."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

from temporalio.service import RPCError

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import RunStore, StoreError, wait_for
from coordinator.temporal import connect
from coordinator.temporal.client import workflow_id
from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import ROOT, Workers, fanout, normalized

RESUMABLE = ROOT / "tests" / "coordinator" / "data" / "resumable.yaml"
SHARED = Path(__file__).parent / "data" / "shared_queue.yaml"


async def _heartbeats(address: str, run_id: str) -> dict[str, int | None]:
    """What the Temporal server holds of each subtask's running round, by subtask: the
    steps of its last heartbeat checkpoint (None: the round has beaten its end)."""
    client = await connect(address)
    described = await client.get_workflow_handle(workflow_id(run_id)).describe()
    held: dict[str, int | None] = {}
    for pending in described.raw_description.pending_activities:
        if not pending.HasField("heartbeat_details"):
            continue
        details = await client.data_converter.decode(pending.heartbeat_details.payloads)
        beat = details[-1] if details else None
        if not isinstance(beat, dict) or not isinstance(beat.get("state"), dict):
            continue  # a lead activity, or a keep-alive before the round's first checkpoint
        run = beat["state"]["run"]
        held[run["subtask_id"]] = None if beat.get("done") else int(run["steps"])
    return held


class KillMoment:
    """Says when to kill: two subtasks done, an unfinished one past a finished call, and
    the Temporal server holding what the store holds. Every unfinished subtask's last
    checkpoint in the store is its round's last heartbeat on the server, and no finished
    subtask's round is still pending there. The kill then lands neither between a
    checkpoint and its heartbeat (heartbeats are throttled, so that instant can last
    seconds on a busy machine) nor between a result and its round's completion: events,
    read from both sides, not a quiet time."""

    def __init__(self, runs: RunStore, run_id: str, address: str) -> None:
        self.runs = runs
        self.run_id = run_id
        self.address = address

    def __call__(self) -> bool:
        """True when the moment has come."""
        try:
            results = set(self.runs.results(self.run_id))
            checkpoints = self.runs.checkpoints(self.run_id)
        except StoreError:  # the worker has not created the tables yet
            return False
        steps = {sid: int(saved["run"]["steps"]) for sid, saved in checkpoints.items()
                 if sid not in results}
        if len(results) < 2 or not any(n >= 1 for n in steps.values()):
            return False
        try:
            held = asyncio.run(_heartbeats(self.address, self.run_id))
        except RPCError:  # the workflow is not described yet
            return False
        return not results & held.keys() and all(held.get(sid) == n for sid, n in steps.items())


def test_a_job_survives_its_worker_being_killed(
    dev_server: DevServer, workers: Workers, tmp_path: Path
) -> None:
    """SIGKILL the only worker mid-job: a new one finishes it with the uninterrupted
    report; no finished subtask runs again, and a subtask that was mid-way continues
    from its heartbeat checkpoint instead of starting over."""
    store = tmp_path / "runs.sqlite"
    first = workers.start("kill")
    submitted = fanout(
        "run", RESUMABLE, "--executor", "temporal", "--address", dev_server.address,
        "--task-queue", "kill", "--speed", "2", "--heartbeat-timeout", "2", "--detach",
        "--json", "--store", store,
    )
    assert submitted.returncode == 0, submitted.stderr
    run_id = json.loads(submitted.stdout)["run_id"]
    runs = RunStore(store)
    moment = KillMoment(runs, run_id, dev_server.address)
    assert wait_for(moment, timeout=60), "the run never got going"
    os.kill(first.pid, signal.SIGKILL)
    first.wait(15)
    finished_before = set(runs.results(run_id))
    mid_way = {
        sid: saved for sid, saved in runs.checkpoints(run_id).items()
        if sid not in finished_before and saved["run"]["steps"] >= 1
    }
    seen = max(e["seq"] for e in runs.events(run_id))  # all the killed worker wrote
    assert 2 <= len(finished_before) < 8 and mid_way

    workers.start("kill")
    assert wait_for(lambda: runs.get(run_id).status == "finished", timeout=90)
    report = runs.get(run_id).report
    assert report is not None
    assert normalized(report) == normalized(replay(load_scenario(RESUMABLE)).report)

    events = runs.events(run_id)
    after = [e for e in events if e["seq"] > seen]
    assert {e["subtask_id"] for e in after} & finished_before == set()
    attempts = {s["id"]: s["attempts"] for s in report["subtasks"]}
    for sid in finished_before:
        started = [e for e in events if e["subtask_id"] == sid and e["kind"] == "start"]
        assert len(started) == attempts[sid], f"{sid} ran an attempt twice"
    for sid, saved in mid_way.items():
        resumed = [e for e in after if e["subtask_id"] == sid]
        # Temporal retried the round (activity attempt 2, the trace's session)...
        assert resumed and all(e["session"] >= 2 for e in resumed), sid
        # ...and it went on from the step after its last finished call.
        position = saved["run"]["planner"]["position"]
        calls = [e for e in resumed if e["kind"] == "call"]
        assert all(e["step"] >= position for e in calls), (sid, position, calls)

    shown = fanout("report", run_id, "--format", "json", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == report


def _workers_in(events: list[dict[str, Any]]) -> set[str]:
    return {e["worker"] for e in events if e["kind"] == "state" and e.get("state") == "running"}


def test_two_workers_on_one_task_queue_share_a_jobs_subagents(
    dev_server: DevServer, workers: Workers, tmp_path: Path
) -> None:
    """With each worker limited to 2 rounds at once and the job running 4, both workers
    run some of its subagents; `fanout run --executor temporal` waits for the report."""
    store = tmp_path / "runs.sqlite"
    a = workers.start("shared", concurrency=2)
    b = workers.start("shared", concurrency=2)
    done = fanout(
        "run", SHARED, "--executor", "temporal", "--address", dev_server.address,
        "--task-queue", "shared", "--speed", "4", "--json", "--store", store,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "complete" and len(report["subtasks"]) == 8
    runs = RunStore(store)
    [row] = runs.runs()
    host = socket.gethostname()
    assert _workers_in(runs.events(row.id)) == {f"{a.pid}@{host}", f"{b.pid}@{host}"}
    listed = fanout("runs", "--json", "--store", store)
    assert json.loads(listed.stdout)[0]["status"] == "finished"
