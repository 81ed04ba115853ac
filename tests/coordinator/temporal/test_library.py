"""The scenario library through Temporal: the local replay's report, deadlines included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay, scenario_files
from coordinator.store.runs import RunStore
from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import ROOT, Workers, normalized, submit

LIBRARY = ROOT / "scenarios"
# Simulated latencies run this many times faster than written: the longest scenario
# (74 virtual seconds) takes under 4 s, and the closest race in the library (an attempt
# 1.5 virtual seconds past a retry budget) still has 75 ms of real time to spare.
SPEED = 20.0
# The deadline scenarios race the job's deadline against tool latencies of a few
# seconds; a slower speed keeps scheduling overhead well inside those margins.
DEADLINE_SPEED = 4.0


def _library(*, deadline: bool) -> list[Path]:
    """Library scenarios that replay (no MCP servers, subtasks given), with or without a
    deadline; model-planned ones included (their scripted model replays anywhere)."""
    files = []
    for path in scenario_files([LIBRARY]):
        scenario = load_scenario(path)
        if scenario.mcp_servers or not scenario.job.subtasks:
            continue
        if (scenario.job.deadline_s is not None) == deadline:
            files.append(path)
    return files


WITHOUT_DEADLINE = _library(deadline=False)
WITH_DEADLINE = _library(deadline=True)


@pytest.fixture(scope="module")
def library_queue(workers: Workers) -> str:
    """One worker for the library's runs."""
    workers.start("library")
    return "library"


@pytest.fixture(scope="module")
def library_runs(
    dev_server: DevServer, library_queue: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, dict[str, Any]]]:
    """Every scenario without a deadline, submitted at once and run to its report."""
    store = tmp_path_factory.mktemp("library") / "runs.sqlite"
    lines = submit(dev_server.address, library_queue, store, WITHOUT_DEADLINE, speed=SPEED)
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


@pytest.mark.parametrize("path", WITHOUT_DEADLINE, ids=lambda p: p.stem)
def test_a_scenario_through_temporal_reports_what_its_replay_reports(
    path: Path, library_runs: tuple[Path, dict[str, dict[str, Any]]]
) -> None:
    """Statuses, attempts, rounds, gaps, routes, coverage and findings equal the local
    replay's report; only times and trace ids differ (DESIGN §9)."""
    _store, runs = library_runs
    local = replay(load_scenario(path)).report
    assert normalized(runs[path.name]["report"]) == normalized(local)


def test_temporal_runs_are_recorded_like_local_ones(
    library_runs: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    """Each run is finished in the store with the workflow's report, every subagent's
    result, a checkpoint per subtask and a trace with every attempt's envelope."""
    path, runs = library_runs
    store = RunStore(path)
    for line in runs.values():
        row = store.get(line["run_id"])
        assert row.status == "finished"
        assert row.report == line["report"]
        ids = {s["id"] for s in line["report"]["subtasks"]}
        assert set(store.results(row.id)) == ids
        assert set(store.checkpoints(row.id)) == ids
        # The lead's model calls are traced too (subtask "lead"), as in a local run.
        attempts = [e for e in store.events(row.id)
                    if e["kind"] == "attempt" and e["subtask_id"] in ids]
        assert len(attempts) == sum(s["attempts"] for s in line["report"]["subtasks"])


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
