"""A model-planned ``fanout run`` killed with SIGKILL resumes to the uninterrupted report.

The scripted model plans every subtask (and, in the decomposed job, the subtasks
themselves); ``--speed 10`` on a few virtual seconds per call makes the run last long
enough to be killed once two subtasks have committed.
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

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import RunStore, wait_for
from subagents.result import LEAD
from tests.coordinator.store.test_store import committed, normalized

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

DATA = Path(__file__).parent / "data"


def fanout(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *map(str, args)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )


def killed_run(job: Path, store: Path, env: dict[str, str]) -> None:
    """Start ``fanout run`` and SIGKILL it once two subtasks' results are committed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "run", str(job), "--speed", "10", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        assert wait_for(lambda: committed(store) >= 2, timeout=45), "the run never got going"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)


def lead_trace_ids(events: list[dict[str, Any]]) -> list[str]:
    """The trace id of every logical model call the lead made, in order."""
    ids = [e["result"]["trace_id"] for e in events
           if e["subtask_id"] == LEAD and e["kind"] == "attempt"]
    return list(dict.fromkeys(ids))


def _killed_and_resumed(
    job: Path, tmp_path: Path
) -> tuple[RunStore, str, set[str], dict[str, Any]]:
    """Run ``job``, SIGKILL it mid-run, resume it: the store, the run id, the subtasks
    finished before the kill, and the resumed run's report."""
    store = tmp_path / "runs.sqlite"
    env = {**os.environ, "FANOUT_STORE": str(store)}
    killed_run(job, store, env)
    runs = RunStore(store)
    run = runs.get("latest")
    assert run.status == "interrupted"
    finished_before = set(runs.results(run.id))
    resumed = fanout("resume", run.id, "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    return runs, run.id, finished_before, json.loads(resumed.stdout)


@pytest.mark.parametrize(
    ("job", "lead_calls"),
    [
        pytest.param(DATA / "model_resumable.yaml", 1, id="model-planned"),
        pytest.param(DATA / "model_decomposed_resumable.yaml", 2, id="lead-decomposed"),
    ],
)
def test_a_killed_model_planned_run_resumes_to_the_uninterrupted_report(
    job: Path, lead_calls: int, tmp_path: Path
) -> None:
    """SIGKILL mid-run, then resume: the clean run's report; finished subtasks not rerun."""
    runs, run_id, finished_before, report = _killed_and_resumed(job, tmp_path)
    assert 2 <= len(finished_before) < 6
    clean = replay(load_scenario(job)).report
    assert normalized(report) == normalized(clean)
    assert report["answer"]["text"] == clean["answer"]["text"] != ""

    events = runs.events(run_id)
    second = [e for e in events if e["session"] == 2]
    rerun = {e["subtask_id"] for e in second if e["kind"] == "start"} & finished_before
    assert rerun == set(), f"finished subtasks asked their model again: {rerun}"
    assert not [e for e in second if e["kind"] == "plan"], "the lead planned twice"
    # The lead's calls (plan, synthesis) each have their own trace id, across sessions.
    lead = lead_trace_ids(events)
    assert len(lead) == len(set(lead)) == lead_calls
    assert runs.get(run_id).status == "finished"



def test_a_run_killed_inside_the_follow_up_round_resumes_it(tmp_path: Path) -> None:
    """SIGKILL once a follow-up has committed and the other still runs: the resume runs
    the recorded follow-ups (no new plan), keeps the finished one, and ends with the
    uninterrupted report; the lead's plan, follow-up plan and synthesis each traced once
    (docs/design.md §11)."""
    job = DATA / "model_followup_resumable.yaml"
    store = tmp_path / "runs.sqlite"
    env = {**os.environ, "FANOUT_STORE": str(store)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "run", str(job), "--speed", "10", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        # market, patents and the fast follow-up patents_web; patents_papers runs on.
        assert wait_for(lambda: committed(store) >= 3, timeout=45), "no follow-up ran"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    runs = RunStore(store)
    run = runs.get("latest")
    assert run.status == "interrupted"
    assert set(runs.results(run.id)) == {"market", "patents", "patents_web"}
    planned = [e for e in runs.events(run.id) if e["kind"] == "followups"]
    assert [f["id"] for f in planned[0]["followups"]] == ["patents_web", "patents_papers"]

    resumed = fanout("resume", run.id, "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    clean = replay(load_scenario(job)).report
    report = json.loads(resumed.stdout)
    assert normalized(report) == normalized(clean)
    assert report["gaps"][0]["filled_by"] == ["patents_web", "patents_papers"]
    assert report["answer"]["text"] == clean["answer"]["text"]

    events = runs.events(run.id)
    second = [e for e in events if e["session"] == 2]
    assert not [e for e in second if e["kind"] in ("plan", "followups")]
    assert not [e for e in second if e["subtask_id"] == "patents_web"]
    lead = lead_trace_ids(events)
    assert len(lead) == len(set(lead)) == 3


def test_a_killed_run_resumes_with_the_tokens_it_had_spent(tmp_path: Path) -> None:
    """SIGKILL after two subtasks, then resume: the meter starts from what the store
    recorded, so d and e are budget gaps as in the clean run (a meter restarted at zero
    would let them run) and the per-subtask and total tokens equal the clean run's."""
    job = DATA / "model_budget_resumable.yaml"
    _, _, finished_before, report = _killed_and_resumed(job, tmp_path)
    assert {"a", "b"} <= finished_before < set("abcde")
    clean = replay(load_scenario(job)).report
    assert normalized(report) == normalized(clean)
    rows = {s["id"]: s for s in report["subtasks"]}
    assert [rows[s]["status"] for s in "abcde"] == ["complete"] * 3 + ["gap"] * 2
    assert [rows[s]["attempts"] for s in "de"] == [0, 0]
    assert {g["trigger"] for g in report["gaps"]} == {"threshold_breach"}
    assert {s: rows[s]["tokens"]["input_tokens"] for s in "abcde"} == {
        "a": 900, "b": 900, "c": 900, "d": 0, "e": 0
    }
    assert (report["tokens"]["input_tokens"], report["tokens"]["output_tokens"]) == (3200, 700)
    assert report["answer"]["text"] == clean["answer"]["text"] != ""
