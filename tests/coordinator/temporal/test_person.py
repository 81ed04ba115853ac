"""A person decides on Temporal (docs/design.md §17): the plan waits for review in the
workflow (an edit checked by the ``review_plan`` update's validator; approve, edit and
reject through the Python door on both engines are in test_parity.py), a person's stop and
hint reach a running round, ``fanout run --executor temporal --ask``/``--review`` prompt
as the run goes on, and a worker killed while a decision waits loses nothing.

Every client runs in a process of its own (``person_door.py``, ``submit.py``, the CLI),
as the other Temporal tests keep them out of pytest's process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.api.person import os_user
from coordinator.cli.common import EXIT_FAILED
from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import RunStore, StoreError, wait_for
from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import ROOT, Workers, fanout, normalized, submit

QUEUE = "person"
DATA = ROOT / "tests" / "coordinator" / "data"
ASK_RETRY = DATA / "ask_retry.yaml"  # patent_db denies once, then answers
REVIEW_PLAN = DATA / "review_plan.yaml"  # a scripted lead plans market and patents
REQUESTS = Path(__file__).parent / "data" / "person_requests.yaml"


@pytest.fixture(scope="module")
def temporal(dev_server: DevServer, workers: Workers) -> str:
    """The dev server's address, with one worker polling the module's task queue."""
    workers.start(QUEUE, concurrency=8)
    return dev_server.address


def door(address: str, *args: str | Path) -> dict[str, Any]:
    """One ``person_door.py`` command; its JSON line."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.coordinator.temporal.person_door", "--address", address,
         *map(str, args)],
        capture_output=True, text=True, timeout=150, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr
    line: dict[str, Any] = json.loads(out.stdout)
    return line


def test_a_bad_plan_edit_is_refused_by_the_workflow_naming_the_field(
    temporal: str, tmp_path: Path
) -> None:
    """The ``review_plan`` update's validator checks an edit as the local engine does:
    a bad one is refused naming its field and changes nothing (the plan still waits);
    a good one is carried out, and the run has the edited plan, recorded as such."""
    store = tmp_path / "runs.sqlite"
    run_id = door(temporal, "start", REVIEW_PLAN, "--task-queue", QUEUE, "--store", store,
                  "--speed", "10", "--review")["run_id"]
    bad = door(temporal, "review", run_id, json.dumps({"edit": {"change": {"market": {
        "weight": -1}}}}))
    assert bad["refused"] == "PlanEditError"
    assert bad["details"][0]["field"] == "edit.change.market.weight"
    unknown = door(temporal, "review", run_id, json.dumps({"edit": {"add": [
        {"id": "prices", "query": "cell prices", "tools": ["no_such_tool"]}]}}))
    assert unknown["refused"] == "PlanEditError"
    assert unknown["details"][0]["field"] == "edit.add[0].tools[0]"
    made = door(temporal, "review", run_id, json.dumps({"edit": {"remove": ["patents"]}}))
    assert made["review"]["verdict"] == "edit" and made["review"]["by"] == "tester"
    report = door(temporal, "result", run_id)["report"]
    assert [s["id"] for s in report["subtasks"]] == ["market"]
    assert report["outcome"] == "complete"
    plans = [e for e in RunStore(store).events(run_id) if e["kind"] == "plan"]
    assert [[s["id"] for s in e["subtasks"]] for e in plans] == [["market"]]


def test_a_stop_and_a_hint_reach_running_rounds_on_temporal(
    temporal: str, tmp_path: Path
) -> None:
    """A scripted person's hint reaches pricing's model at its next turn (it searches
    again, a ``hint`` event records the turn), and their stop hands survey up with
    trigger ``human_request``: the report is the replay's, where the local engine does
    the same in virtual time."""
    store = tmp_path / "runs.sqlite"
    [line] = submit(temporal, QUEUE, store, [REQUESTS], speed=1.0)
    report = line["report"]
    assert normalized(report) == normalized(replay(load_scenario(REQUESTS)).report)
    pricing = next(s for s in report["subtasks"] if s["id"] == "pricing")
    assert (pricing["status"], pricing["steps"]) == ("complete", 2)
    [gap] = report["gaps"]
    assert (gap["subtask_id"], gap["trigger"]) == ("survey", "human_request")
    hints = [e for e in RunStore(store).events(line["run_id"]) if e["kind"] == "hint"]
    assert [(e["subtask_id"], e["turn"]) for e in hints] == [("pricing", 2)]


def test_fanout_run_ask_on_temporal_prompts_as_the_run_goes_on(
    temporal: str, tmp_path: Path
) -> None:
    """``fanout run --executor temporal --ask``: the escalation is shown as it waits in
    the workflow, the option typed at stdin is carried out there (retry: patents
    completes) and the decision is the terminal user's."""
    done = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "run", str(ASK_RETRY), "--executor",
         "temporal", "--address", temporal, "--task-queue", QUEUE, "--speed", "10", "--ask",
         "--json", "--store", str(tmp_path / "runs.sqlite")],
        input="o1\n", capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "licence_prices": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"], decision["by"]) == (
        "patents:1", "retry", os_user())
    assert "escalation patents:1: patents" in done.stderr


def test_fanout_run_review_on_temporal_rejects_the_plan(temporal: str, tmp_path: Path) -> None:
    """``fanout run --executor temporal --review``: the lead's plan is shown as it waits
    in the workflow, and rejecting it ends the run failed with the lead's gap."""
    done = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "run", str(REVIEW_PLAN), "--executor",
         "temporal", "--address", temporal, "--task-queue", QUEUE, "--speed", "10",
         "--review", "--json", "--store", str(tmp_path / "runs.sqlite")],
        input="reject\n", capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == EXIT_FAILED, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "failed"
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [
        ("lead", "plan_rejected")]
    assert "the lead's plan waits for your review" in done.stderr


def test_detach_with_ask_is_refused(temporal: str, tmp_path: Path) -> None:
    """``--ask`` with ``--detach`` leaves nobody to ask: exit 2, saying so."""
    done = fanout("run", ASK_RETRY, "--executor", "temporal", "--address", temporal,
                  "--task-queue", QUEUE, "--ask", "--detach", "--store",
                  tmp_path / "runs.sqlite")
    assert done.returncode == 2
    assert "--detach leaves none" in done.stderr


def test_a_decision_made_after_the_worker_was_killed_applies(
    dev_server: DevServer, workers: Workers, tmp_path: Path
) -> None:
    """SIGKILL the only worker while patents' escalation waits for a person: the wait
    is the workflow's, so once a new worker starts, the decision made then (retry) is
    carried out and stored with what it changed; nothing ran twice."""
    store = tmp_path / "runs.sqlite"
    first = workers.start("waitkill")
    run_id = door(dev_server.address, "start", ASK_RETRY, "--task-queue", "waitkill",
                  "--store", store, "--speed", "4", "--heartbeat-timeout", "2")["run_id"]
    runs = RunStore(store)

    def waiting() -> bool:
        # patents waits, and licence_prices (the other subtask) is done: no round runs.
        try:
            needed = [e for e in runs.events(run_id) if e["kind"] == "decision.needed"]
            return bool(needed) and "licence_prices" in runs.results(run_id)
        except StoreError:
            return False

    assert wait_for(waiting, timeout=60), "patents never came to wait"
    os.kill(first.pid, signal.SIGKILL)
    first.wait(15)
    workers.start("waitkill")
    decided = door(dev_server.address, "decide", run_id, "patents", "retry")
    assert decided["decision"]["do"] == "retry"
    report = door(dev_server.address, "result", run_id)["report"]
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "licence_prices": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"], decision["by"]) == (
        "patents:1", "retry", "tester")
    assert (decision["change"]["status_before"], decision["change"]["status_after"]) == (
        "partial", "complete")
    assert runs.get(run_id).report == report
    starts = [e for e in runs.events(run_id)
              if e["subtask_id"] == "licence_prices" and e["kind"] == "start"]
    assert len(starts) == 1  # the finished subtask did not run again
