"""What the service shows of a stored run: rows, progress, coverage so far, gaps, report.

Pure reads of the run store (blocking: call them from a worker thread). They work for
every run in the store, whoever ran it: this server, ``fanout run``, or a killed process.
"""

from __future__ import annotations

from typing import Any

from coordinator.engine.resume import interrupted_report, planned_scenario
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.report import CoverageReport, subtask_status
from coordinator.serve.records import ServiceRecords
from coordinator.serve.schemas import Progress, SubtaskInfo
from coordinator.store.runs import RunRow, RunStore
from shared.errors import InputFileError
from subagents.result import SubagentResult

# Every other state (running, retrying, thinking: waiting on its model) is at work.
_COUNTED = frozenset({"queued", "done", "escalated"})


def scenario_of(store: RunStore, row: RunRow) -> Scenario | None:
    """The job a run was started with, with the subtasks its lead planned if it was
    decomposed (None if today's loader no longer reads it)."""
    try:
        return planned_scenario(load_scenario_text(row.spec_text, row.file), store, row.id)
    except InputFileError:
        return None


def subtasks_of(scenario: Scenario | None) -> list[SubtaskInfo]:
    """The subtasks as the job declares them."""
    if scenario is None:
        return []
    return [SubtaskInfo(id=s.id, query=s.query, weight=s.weight) for s in scenario.job.subtasks]


def progress_of(records: ServiceRecords, row: RunRow, subtask_ids: list[str]) -> Progress:
    """How many subagents are queued, at work (running, retrying, thinking), done and
    escalated."""
    states = records.last_states(row.id)
    counts = {"queued": 0, "running": 0, "done": 0, "escalated": 0}
    for sid in dict.fromkeys([*subtask_ids, *states]):
        state = states.get(sid, "queued")
        counts[state if state in _COUNTED else "running"] += 1
    return Progress(**counts)


def coverage_so_far(store: RunStore, row: RunRow, scenario: Scenario | None) -> float:
    """The weighted share of subtasks whose committed result covers them."""
    if row.report is not None:
        return float(row.report["coverage"])
    if scenario is None:
        return 0.0
    results = store.results(row.id)
    weights = {s.id: s.weight for s in scenario.job.subtasks}
    total = sum(weights.values()) or 1.0
    covered = 0.0
    for sid, raw in results.items():
        if subtask_status(SubagentResult.model_validate(raw)) in ("complete", "empty"):
            covered += weights.get(sid, 0.0)
    return covered / total


def report_of(store: RunStore, row: RunRow, scenario: Scenario | None) -> CoverageReport:
    """The finished run's report, or what an unfinished one has (``fanout report``'s)."""
    if row.report is not None:
        return CoverageReport.model_validate(row.report)
    if scenario is None:
        raise ValueError(f"run {row.id}: its job file no longer loads")
    hint = (
        "the run was interrupted before this subtask finished; a restarted `fanout serve` "
        f"resumes runs submitted to it, `fanout resume {row.id}` any other"
        if row.status == "interrupted"
        else "still running: this subtask has not finished yet"
    )
    return interrupted_report(scenario, store, row.id, resume_hint=hint)


def gaps_so_far(store: RunStore, row: RunRow, scenario: Scenario | None) -> list[dict[str, Any]]:
    """The gaps of the report, or, while the run goes on, those of finished subtasks."""
    if row.report is not None:
        return list(row.report["gaps"])
    if scenario is None:
        return []
    report = report_of(store, row, scenario)
    gaps = [g.model_dump(mode="json", by_alias=True) for g in report.gaps]
    if row.status == "interrupted":
        return gaps  # what the run lacks until it is resumed, as `fanout gaps` shows
    finished = set(store.results(row.id))
    return [g for g in gaps if g["subtask_id"] in finished]
