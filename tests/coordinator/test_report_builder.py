"""The report built one result at a time equals the report of all results at once."""

from __future__ import annotations

import pytest

from coordinator.job import JobSpec
from coordinator.report import ReportBuilder, SubtaskOutcome, assemble_report
from shared import Escalation, Finding
from subagents.result import SubagentResult
from subagents.spec import SubtaskSpec

FOUND = Finding(tool="web_search", data={"results": ["x"]})


def _job() -> JobSpec:
    weights = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.7}
    return JobSpec(
        query="the job",
        subtasks=[SubtaskSpec(id=i, query=f"{i} query", weight=w) for i, w in weights.items()],
    )


def _results() -> list[SubagentResult]:
    def escalation(sid: str) -> Escalation:
        return Escalation(subtask_id=sid, category="permission", trigger="permission_denied",
                          message="no", attempted_query=f"{sid} query")

    return [
        SubagentResult(subtask_id="a", findings=[FOUND], attempts=1, rounds=1, steps=1),
        SubagentResult(subtask_id="b", escalation=escalation("b"), attempts=2, rounds=1),
        SubagentResult(subtask_id="c", findings=[FOUND], escalation=escalation("c")),
    ]


@pytest.mark.parametrize("order", [pytest.param((0, 1, 2), id="in-order"),
                                   pytest.param((2, 0, 1), id="shuffled")])
def test_any_order_gives_the_report_of_assemble_report(order: tuple[int, ...]) -> None:
    """Rows built as results arrive, in any order, give the very same report (and wire)."""
    job, results = _job(), _results()
    builder = ReportBuilder(job)
    for i in order:
        builder.add(results[i])
    built = builder.report(elapsed_s=3.25)
    expected = assemble_report(job, results, elapsed_s=3.25)
    assert built == expected
    assert built.to_wire() == expected.to_wire()
    assert [s.status for s in built.subtasks] == ["complete", "gap", "partial", "gap"]


def test_a_later_result_replaces_an_earlier_one() -> None:
    """The retry round's result for a subtask replaces its first round's."""
    job = _job()
    builder = ReportBuilder(job)
    builder.add(SubagentResult(subtask_id="a", escalation=None, rounds=1))
    builder.add(SubagentResult(subtask_id="a", findings=[FOUND], rounds=2))
    assert "a" in builder and "b" not in builder
    (first, *_) = builder.report(elapsed_s=0.0).subtasks
    assert (first.status, first.rounds) == ("complete", 2)


def test_rows_are_the_models_validation_would_make() -> None:
    """A report row built without validation equals the validated one, fields-set included."""
    report = assemble_report(_job(), _results(), elapsed_s=1.0)
    row = report.subtasks[0]
    assert row == SubtaskOutcome.model_validate(row.model_dump())
    assert row.model_fields_set == set(SubtaskOutcome.model_fields)
    assert row.model_copy(update={"attempts": 9}).attempts == 9
