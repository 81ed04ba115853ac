"""The coverage report: a pure function of subagent results (status, coverage, gaps, answer)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.job import JobSpec
from coordinator.report import assemble_report, subtask_status
from shared import Escalation, Finding
from subagents.result import SubagentResult
from subagents.spec import SubtaskSpec

FOUND = Finding(tool="web_search", data={"results": ["x"]})
NOTHING = Finding(tool="registry", data=None, empty=True)
PAGE_ONE = Finding(tool="news", data=["page 1"], complete=False)


def _escalation(sid: str, category: Any, trigger: Any, **kw: Any) -> Escalation:
    return Escalation(
        subtask_id=sid,
        category=category,
        trigger=trigger,
        message=f"{sid} failed",
        attempted_query=f"{sid} query",
        alternatives=[f"fix {sid}"],
        **kw,
    )


def _job(*ids: str, weights: dict[str, float] | None = None, **fields: Any) -> JobSpec:
    weights = weights or {}
    subtasks = [SubtaskSpec(id=i, query=f"{i} query", weight=weights.get(i, 1)) for i in ids]
    return JobSpec(query="the job", subtasks=subtasks, **fields)


@pytest.mark.parametrize(
    ("findings", "escalated", "incomplete", "status"),
    [
        pytest.param([FOUND], False, False, "complete", id="complete"),
        pytest.param([FOUND, NOTHING], False, False, "complete", id="some-empty"),
        pytest.param([NOTHING], False, False, "empty", id="empty"),
        pytest.param([], False, False, "empty", id="finished-with-nothing"),
        pytest.param([FOUND], True, False, "partial", id="findings-and-escalation"),
        pytest.param([PAGE_ONE], False, True, "partial", id="incomplete-data"),
        pytest.param([NOTHING], True, False, "partial", id="empty-finding-and-escalation"),
        pytest.param([], True, False, "gap", id="nothing-and-escalation"),
    ],
)
def test_subtask_status(
    findings: list[Finding], escalated: bool, incomplete: bool, status: str
) -> None:
    """complete, empty, partial or gap, from the findings and whether a gap remains."""
    result = SubagentResult(
        subtask_id="s",
        findings=findings,
        escalation=_escalation("s", "permission", "permission_denied") if escalated else None,
        incomplete=incomplete,
    )
    assert subtask_status(result) == status


def test_coverage_is_weighted_and_counts_empty() -> None:
    """Coverage is the weighted share of complete and empty subtasks."""
    job = _job("a", "b", "c", weights={"a": 3, "b": 1, "c": 4})
    results = [
        SubagentResult(subtask_id="a", findings=[FOUND]),
        SubagentResult(subtask_id="b", findings=[NOTHING]),
        SubagentResult(
            subtask_id="c", escalation=_escalation("c", "transient", "retries_exhausted")
        ),
    ]
    report = assemble_report(job, results, elapsed_s=1.0)
    assert report.coverage == pytest.approx(0.5)
    assert report.answer.coverage == report.coverage
    assert report.outcome == "partial"
    assert [s.covered for s in report.answer.sections] == [True, True, False]


@pytest.mark.parametrize(
    ("results", "outcome"),
    [
        pytest.param(
            [SubagentResult(subtask_id="a", findings=[FOUND])] * 2, "complete", id="complete"
        ),
        pytest.param(
            [
                SubagentResult(
                    subtask_id="a",
                    findings=[FOUND],
                    escalation=_escalation("a", "transient", "retries_exhausted"),
                ),
                SubagentResult(
                    subtask_id="b", escalation=_escalation("b", "permission", "permission_denied")
                ),
            ],
            "partial",
            id="findings-without-coverage",
        ),
        pytest.param(
            [
                SubagentResult(
                    subtask_id="a", escalation=_escalation("a", "permission", "permission_denied")
                ),
                SubagentResult(
                    subtask_id="b", escalation=_escalation("b", "internal", "internal_error")
                ),
            ],
            "failed",
            id="failed",
        ),
    ],
)
def test_outcome(results: list[SubagentResult], outcome: str) -> None:
    """complete at coverage 1, failed with no findings at all, partial otherwise."""
    results = [
        r.model_copy(update={"subtask_id": sid}) for r, sid in zip(results, "ab", strict=True)
    ]
    report = assemble_report(_job("a", "b"), results, elapsed_s=0.0)
    assert report.outcome == outcome


def test_every_gap_is_in_the_answer_and_escalations_follow_their_route() -> None:
    """Each gap is listed with its route; only those routed escalate are escalations, in order."""
    job = _job("ok", "perm", "down", "tight", "biz")
    results = [
        SubagentResult(subtask_id="ok", findings=[FOUND]),
        SubagentResult(
            subtask_id="perm", escalation=_escalation("perm", "permission", "permission_denied")
        ),
        SubagentResult(
            subtask_id="down", escalation=_escalation("down", "transient", "retries_exhausted")
        ),
        SubagentResult(
            subtask_id="tight",
            findings=[FOUND],
            escalation=_escalation("tight", None, "context_budget", partial_results=[FOUND]),
        ),
        SubagentResult(
            subtask_id="biz", escalation=_escalation("biz", "business", "threshold_breach")
        ),
    ]
    report = assemble_report(job, results, elapsed_s=3.0)
    assert [(g.subtask_id, g.route) for g in report.gaps] == [
        ("perm", "escalate"),
        ("down", "retry_later"),
        ("tight", "gap"),
        ("biz", "escalate"),
    ]
    assert [e.subtask_id for e in report.escalations] == ["perm", "biz"]
    tight = report.gaps[2]
    assert (tight.attempted_query, tight.alternatives, len(tight.partial_results)) == (
        "tight query",
        ["fix tight"],
        1,
    )
    missing = report.answer.missing
    assert len(missing) == 4
    assert all(
        sid in line for sid, line in zip(["perm", "down", "tight", "biz"], missing, strict=True)
    )
    assert "fix tight" in missing[2] and "context_budget" in missing[2]
    assert [s.gap is None for s in report.answer.sections] == [True, False, False, False, False]
    assert "missing: perm, down, tight, biz" in report.answer.summary


def test_incomplete_data_is_a_gap_and_an_escalation_wins_over_it() -> None:
    """Partial data alone leaves an incomplete_data gap; with an escalation the escalation shows."""
    job = _job("partial", "both")
    results = [
        SubagentResult(subtask_id="partial", findings=[PAGE_ONE, FOUND], incomplete=True),
        SubagentResult(
            subtask_id="both",
            findings=[PAGE_ONE],
            incomplete=True,
            escalation=_escalation("both", "permission", "permission_denied"),
        ),
    ]
    report = assemble_report(job, results, elapsed_s=0.0)
    partial, both = report.gaps
    assert (partial.category, partial.trigger, partial.route) == (None, "incomplete_data", "gap")
    assert len(partial.partial_results) == 2
    assert any("news" in a for a in partial.alternatives)
    assert both.trigger == "permission_denied"


def test_a_removed_route_shows_missing_policy_and_keeps_the_original_trigger() -> None:
    """With a category's route removed the gap is missing_policy, escalated, naming the cause."""
    job = _job("down", routing={"transient": None})
    results = [
        SubagentResult(
            subtask_id="down", escalation=_escalation("down", "transient", "retries_exhausted")
        )
    ]
    report = assemble_report(job, results, elapsed_s=0.0)
    gap = report.gaps[0]
    assert (gap.trigger, gap.route, gap.original_trigger) == (
        "missing_policy",
        "escalate",
        "retries_exhausted",
    )
    assert [e.subtask_id for e in report.escalations] == ["down"]


def test_a_route_override_pins_a_subtasks_route() -> None:
    """route_overrides pins one subtask's route whatever the table says."""
    job = _job("again")
    results = [
        SubagentResult(
            subtask_id="again", escalation=_escalation("again", "permission", "permission_denied")
        )
    ]
    report = assemble_report(job, results, elapsed_s=0.0, route_overrides={"again": "retry_later"})
    assert report.gaps[0].route == "retry_later"
    assert report.escalations == []


def test_the_report_is_a_pure_function_of_the_results() -> None:
    """The same results give the same report, and its wire form uses the wire names."""
    job = _job("a", "b")
    results = [
        SubagentResult(subtask_id="a", findings=[FOUND], attempts=2, rounds=1, steps=1),
        SubagentResult(
            subtask_id="b", escalation=_escalation("b", "validation", "no_progress"), attempts=1
        ),
    ]
    first = assemble_report(job, results, elapsed_s=2.5)
    assert first == assemble_report(job, list(results), elapsed_s=2.5)
    wire = first.to_wire()
    assert wire["gaps"][0]["errorCategory"] == "validation"
    assert wire["escalations"] == []
    assert [(s["id"], s["status"], s["attempts"]) for s in wire["subtasks"]] == [
        ("a", "complete", 2),
        ("b", "gap", 1),
    ]
    assert wire["elapsed_s"] == 2.5


def test_a_subtask_without_a_result_is_a_gap_not_covered() -> None:
    """An executor that reports no result for a subtask leaves a gap; coverage never rises."""
    from coordinator.job import JobSpec
    from coordinator.report import assemble_report
    from subagents.result import SubagentResult
    from subagents.spec import SubtaskSpec

    job = JobSpec(
        query="q",
        subtasks=[SubtaskSpec(id="a", query="qa"), SubtaskSpec(id="b", query="qb")],
    )
    done = SubagentResult(subtask_id="a", findings=[], rounds=1)
    report = assemble_report(job, [done], elapsed_s=1.0)
    assert [s.status for s in report.subtasks] == ["empty", "gap"]
    assert report.coverage == 0.5
    (gap,) = report.gaps
    assert (gap.subtask_id, gap.trigger, gap.route) == ("b", "interrupted", "gap")


def test_a_job_with_no_subtasks_yet_is_not_covered_and_does_not_divide_by_zero() -> None:
    """A decomposed job whose lead is still planning has no subtasks: coverage 0, failed."""
    from coordinator.report import coverage_of

    assert coverage_of([]) == (0.0, "failed")
    report = assemble_report(JobSpec(query="q", subtasks=[]), [], elapsed_s=0.0)
    assert (report.coverage, report.outcome, report.gaps) == (0.0, "failed", [])
