"""job.budget through Temporal: the workflow meters the job, lends what is left to the
rounds it starts, settles new subagents as budget gaps, and the synthesis keeps its
reserve; the report equals the local replay's but for what running activities cannot
know of each other (docs/design.md §13, coordinator.temporal.budget)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import ROOT, Workers, normalized, submit

LIBRARY = ROOT / "scenarios"
ONE_AT_A_TIME = ROOT / "tests" / "e2e" / "data" / "model_budget_resumable.yaml"
SPEED = 20.0


def _no_reserve(tmp: Path) -> Path:
    """Two subtasks one at a time, a budget of 1,500 with no reserve: the second hands up
    and the synthesis finds the whole budget spent."""
    data = yaml.safe_load((LIBRARY / "model_budget.yaml").read_text())
    data.pop("expect")
    data["job"]["budget"] = {"total_tokens": 1500, "synthesis_reserve": 0}
    data["job"]["concurrency"] = 1
    data["job"]["subtasks"] = data["job"]["subtasks"][:2]
    for sid in "cde":
        del data["model"]["turns"][sid]
    path = tmp / "no_reserve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _decomposed(tmp: Path) -> Path:
    """lead_decomposes with usage on every turn, one lane, a budget of 3,000 (share 2,400):
    the lead's two plans spend 2,200, so market hands up after one call and patents never
    starts; the synthesis runs in the reserve."""
    data = yaml.safe_load((LIBRARY / "lead_decomposes.yaml").read_text())
    data.pop("expect")
    turns = data["model"]["turns"]
    for turn in turns["lead"][:2]:
        turn["usage"] = {"input_tokens": 1000, "output_tokens": 100}
    turns["lead"][2]["usage"] = {"input_tokens": 300, "output_tokens": 50}
    for sid in ("market", "patents"):
        for turn in turns[sid]:
            turn["usage"] = {"input_tokens": 250, "output_tokens": 50}
    data["job"]["concurrency"] = 1
    data["job"]["budget"] = {"total_tokens": 3000, "synthesis_reserve": 0.2}
    path = tmp / "decomposed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def budget_runs(
    dev_server: DevServer, workers: Workers, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """The budget scenarios through one worker, submitted at once, each to its report."""
    workers.start("budget")
    tmp = tmp_path_factory.mktemp("budget")
    files = [LIBRARY / "model_budget.yaml", ONE_AT_A_TIME, _no_reserve(tmp), _decomposed(tmp)]
    lines = submit(dev_server.address, "budget", tmp / "runs.sqlite", files, speed=SPEED)
    return {Path(line["file"]).name: line["report"] for line in lines}


def _without_messages(report: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    """The report with the hand-up messages of subtasks ``ids`` left out."""
    out: dict[str, Any] = normalized(report)
    for key in ("gaps", "escalations"):
        for item in out[key]:
            if item["subtask_id"] in ids:
                item.pop("message")
    return out


@pytest.mark.parametrize("name", [ONE_AT_A_TIME.name, "no_reserve.yaml", "decomposed.yaml"])
def test_one_subagent_at_a_time_the_budget_holds_exactly_as_locally(
    name: str, budget_runs: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With one lane nothing runs beside a round, so the workflow's meter is the local
    one: the same budget gaps (0 attempts, the same message), tokens per subtask and in
    all (the lead's plans included), and the synthesis within its reserve or refused as
    locally."""
    report = budget_runs[name]
    made = {"no_reserve.yaml": _no_reserve, "decomposed.yaml": _decomposed}
    tmp = tmp_path_factory.mktemp("local")
    path = ONE_AT_A_TIME if name == ONE_AT_A_TIME.name else made[name](tmp)
    local = replay(load_scenario(path)).report
    assert normalized(report) == normalized(local)
    assert report["tokens"]["input_tokens"] > 0
    assert {g["trigger"] for g in report["gaps"]} == {"threshold_breach"}


def test_subagents_running_at_once_share_what_is_left(
    budget_runs: dict[str, dict[str, Any]],
) -> None:
    """model_budget at concurrency 2: statuses, attempts, findings, gaps, tokens and the
    answer equal the local replay's; only the hand-up message of the subagents stopped
    while running differs (they stop on what the workflow lent them, not on the others'
    spend they cannot see); the one never started says what the local one says."""
    report = budget_runs["model_budget.yaml"]
    local = replay(load_scenario(LIBRARY / "model_budget.yaml")).report
    assert _without_messages(report, {"c", "d"}) == _without_messages(local, {"c", "d"})
    gaps = {g["subtask_id"]: g for g in report["gaps"]}
    local_gaps = {g["subtask_id"]: g for g in local["gaps"]}
    assert gaps["e"]["message"] == local_gaps["e"]["message"]
    for sid in "cd":
        assert "the workflow lent it" in gaps[sid]["message"]
        assert "the workflow lent it" not in local_gaps[sid]["message"]
    # The budget held: the subagents overshot their share by the calls under way only.
    spent = report["tokens"]
    assert spent["input_tokens"] + spent["output_tokens"] <= 4000
    assert report["answer"]["text"] == local["answer"]["text"]
