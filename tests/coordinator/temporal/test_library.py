"""The scenario library through Temporal: the local replay's report, deadlines and the
lead's decomposition included."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli import main
from coordinator.engine.resume import planned_scenario
from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay, scenario_files
from coordinator.store.runs import RunStore
from coordinator.temporal.dev import DevServer
from subagents.result import LEAD
from tests.coordinator.temporal.conftest import ROOT, Workers, normalized, submit

LIBRARY = ROOT / "scenarios"
NO_KEY = Path(__file__).parent / "data" / "lead_without_key.yaml"
# Simulated latencies run this many times faster than written: the longest scenario
# (74 virtual seconds) takes under 4 s. A round of simulated tools reads paced virtual time
# (coordinator.temporal.rounds.round_clock), so a busy worker's overhead cannot move a
# decision (retry_time_budget's third attempt is 4 virtual seconds inside its budget).
SPEED = 20.0
PERSON_SPEED = 5.0
# The deadline scenarios race the workflow's deadline timer, a real Temporal timer, against
# the job's progress, and the hops between activities (the plan, then the rounds) are
# Temporal's scheduling in real time: no clock of fanout's can take them out. A margin is
# unavoidable here: at speed 2 a virtual second is 0.5 s of real time (at 4, a loaded
# machine's scheduling ate followup_no_time's 2 s between its plan and its deadline).
DEADLINE_SPEED = 2.0


# What a person does that Temporal does not do as a local run does (docs/design.md §15):
NOT_ON_TEMPORAL = {
    # A stop is a cancel: on Temporal the round under way is cancelled with its activity
    # and hands up what its last finished round left (test_parity.py checks the rest).
    "person_stop.yaml",
    # Its hint comes 0.3 virtual seconds before the model's next turn: 15 ms of real time
    # at the library's speed, less than a running round takes to hear it from its
    # workflow (coordinator/temporal/requests.py). test_person.py gives a hint room.
    "person_hint.yaml",
}


def _library(*, deadline: bool) -> list[Path]:
    """Library scenarios that replay (no MCP servers), with or without a deadline;
    model-planned and lead-decomposed ones included (their scripted model replays
    anywhere)."""
    files = []
    for path in scenario_files([LIBRARY]):
        scenario = load_scenario(path)
        if scenario.mcp_servers:
            continue
        if scenario.job.budget is not None:
            # job.budget through Temporal has its own test (test_budget.py): rounds
            # running at once cannot see each other's spend, so the hand-up message of
            # a subagent stopped while running differs; everything else is pinned equal.
            continue
        if path.name in NOT_ON_TEMPORAL:
            continue
        if (scenario.job.deadline_s is not None) == deadline:
            files.append(path)
    return files


WITHOUT_DEADLINE = _library(deadline=False)
WITH_DEADLINE = _library(deadline=True)
DECOMPOSED = [p for p in WITHOUT_DEADLINE if not load_scenario(p).job.subtasks]


@pytest.fixture(scope="module")
def library_queue(workers: Workers) -> str:
    """One worker for the library's runs."""
    workers.start("library")
    return "library"


@pytest.fixture(scope="module")
def library_runs(
    dev_server: DevServer, library_queue: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, dict[str, Any]]]:
    """Every scenario without a deadline (and a lead the workers cannot run), submitted
    at once and run to its report."""
    store = tmp_path_factory.mktemp("library") / "runs.sqlite"
    files = [*WITHOUT_DEADLINE, NO_KEY]
    people = [p for p in files if p.name.startswith("person_")]
    lines = submit(dev_server.address, library_queue, store,
                   [p for p in files if p not in people], speed=SPEED)
    # A scripted person's decision (a signal from the door, after_s into the run) races
    # another escalation's wait timeout, a real Temporal timer: at SPEED a 60 s wait is
    # 3 s of real time, which a loaded machine's scheduling of the activities before the
    # decision can outlast, and the decisions then come in the other order. At
    # PERSON_SPEED it is 12 s.
    lines += submit(dev_server.address, library_queue, store, people, speed=PERSON_SPEED)
    return store, {Path(line["file"]).name: line for line in lines}


def essentials(report: dict[str, Any]) -> dict[str, Any]:
    """What a deadline run must share with the local one: statuses, counts, gaps, coverage."""
    return {
        "outcome": report["outcome"],
        "coverage": report["coverage"],
        "subtasks": [
            (s["id"], s["status"], s["attempts"], s["rounds"], s["steps"], s["findings"])
            for s in report["subtasks"]
        ],
        "gaps": [
            (g["subtask_id"], g["errorCategory"], g["trigger"], g["route"],
             len(g["partial_results"]))
            for g in report["gaps"]
        ],
        "escalations": [e["subtask_id"] for e in report["escalations"]],
    }


def test_the_library_has_scenarios_for_both_tests() -> None:
    """Both sets are non-empty, so neither test below passes by checking nothing."""
    assert len(WITHOUT_DEADLINE) >= 20
    assert {p.name for p in WITH_DEADLINE} >= {"deadline.yaml", "deadline_retry_round.yaml"}
    assert {p.name for p in DECOMPOSED} >= {
        "lead_decomposes.yaml", "lead_plan_never_valid.yaml", "research_lead.yaml",
        # The lead's follow-ups (docs/design.md §11): Temporal equals local for them too.
        "followup_fills_gap.yaml", "followup_fails_too.yaml", "followup_plan_refused.yaml",
    }
    assert "followup_no_time.yaml" in {p.name for p in WITH_DEADLINE}


@pytest.mark.parametrize("path", WITHOUT_DEADLINE, ids=lambda p: p.stem)
def test_a_scenario_through_temporal_reports_what_its_replay_reports(
    path: Path, library_runs: tuple[Path, dict[str, dict[str, Any]]]
) -> None:
    """Statuses, attempts, rounds, gaps, routes, coverage, findings and the answer equal
    the local replay's report, for a job its lead decomposes too; only times and trace
    ids differ (docs/design.md §9)."""
    _store, runs = library_runs
    local = replay(load_scenario(path)).report
    assert normalized(runs[path.name]["report"]) == normalized(local)


def test_temporal_runs_are_recorded_like_local_ones(
    library_runs: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    """Each run is finished in the store with the workflow's report, every subagent's
    result, a checkpoint per subtask and a trace with every attempt's envelope; a
    decomposed run has its lead's plan and position too; a run whose lead could not plan
    ran its degraded plan, the lead's row a gap with no result (as the engine's drive writes)."""
    path, runs = library_runs
    store = RunStore(path)
    for line in runs.values():
        row = store.get(line["run_id"])
        assert row.status == "finished"
        assert row.report == line["report"]
        ids = {s["id"] for s in line["report"]["subtasks"]}
        scenario = load_scenario(line["file"])
        if scenario.job.subtasks:
            # A lead row here is its rejected answer's gap (docs/design.md §7): no result of its
            # own.
            assert set(store.results(row.id)) == ids - {LEAD}
            assert set(store.checkpoints(row.id)) == ids - {LEAD}
        else:
            ran = ids - {LEAD}  # the lead's row is there only when it could not plan
            assert set(store.results(row.id)) == ran
            # A decomposition lost on Temporal (no key on the workers) ran nothing and
            # left no lead position; one that planned, or degraded, did.
            assert set(store.checkpoints(row.id)) == ran | ({LEAD} if ran else set())
            planned = planned_scenario(scenario, store, row.id).job.subtasks
            # The lead's follow-ups (docs/design.md §11) follow its plan: not part of it.
            assert [s.id for s in planned] == [
                s["id"] for s in line["report"]["subtasks"]
                if s["id"] != LEAD and not s.get("followup_of")
            ]
        # The lead's model calls are traced too (subtask "lead"), as in a local run.
        # (A lead that could not plan reports the attempts of its planning; its synthesis
        # after the degraded plan is traced too.)
        attempts = [e for e in store.events(row.id)
                    if e["kind"] == "attempt" and e["subtask_id"] in ids - {LEAD}]
        assert len(attempts) == sum(
            s["attempts"] for s in line["report"]["subtasks"] if s["id"] != LEAD
        )


@pytest.mark.parametrize("path", WITH_DEADLINE, ids=lambda p: p.stem)
def test_the_deadline_cuts_running_subagents_through_temporal(
    path: Path, dev_server: DevServer, library_queue: str, tmp_path: Path
) -> None:
    """The workflow's deadline timer ends the job: running subagents hand up what they
    found with trigger deadline (the attempt under way counted), queued ones are gaps
    with 0 attempts, as in the local replay."""
    [line] = submit(dev_server.address, library_queue, tmp_path / "runs.sqlite", [path],
                    speed=DEADLINE_SPEED)
    report = line["report"]
    local = replay(load_scenario(path)).report
    assert essentials(report) == essentials(local)
    cut = [g for g in report["gaps"] if g["trigger"] == "deadline"]
    assert cut and all(g["route"] == "gap" for g in cut)
    deadline = load_scenario(path).job.deadline_s
    assert deadline is not None and report["elapsed_s"] >= deadline


def test_fanout_report_of_a_decomposed_temporal_run_shows_its_planned_subtasks(
    dev_server: DevServer, library_queue: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fanout report` reads the lead's plan from the store: while the run is under way
    it shows the subtasks the lead planned, and once the run ends, its report has them."""
    path = LIBRARY / "lead_decomposes.yaml"
    store = tmp_path / "runs.sqlite"
    # At speed 2 the plan is made after 1 s and the run ends 1.7 s later.
    [line] = submit(dev_server.address, library_queue, store, [path], speed=2.0, wait=False)
    runs, run_id = RunStore(store), line["run_id"]
    planned = ["market", "patents"]
    deadline = time.monotonic() + 30
    while not any(e["kind"] == "plan" for e in runs.events(run_id)):
        assert time.monotonic() < deadline, "the lead's plan was never recorded"
        time.sleep(0.05)
    capsys.readouterr()
    assert main(["report", run_id, "--store", str(store), "--format", "json"]) == 0
    so_far = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in so_far["subtasks"]] == planned
    assert runs.get(run_id).status == "running"
    while runs.get(run_id).status != "finished":
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.05)
    assert main(["report", run_id, "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert all(sid in shown for sid in planned)


def test_a_lead_that_cannot_plan_on_temporal_ends_the_run_failed(
    library_runs: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    """A decomposition that fails for good on the workers (no model key there) ends the
    job failed with one internal_error gap for the lead, its report recorded."""
    path, runs = library_runs
    line = runs[NO_KEY.name]
    report = line["report"]
    assert report["outcome"] == "failed"
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [
        (LEAD, "internal_error")
    ]
    assert "FANOUT_TEST_NO_SUCH_KEY" in report["gaps"][0]["message"]
    assert RunStore(path).get(line["run_id"]).status == "finished"
