"""A person's part of a report in every view: decisions, and findings given by a person."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from coordinator.decision import DecisionRequest, answered, decide, with_change
from coordinator.job import JobSpec
from coordinator.report import CoverageReport, ReportBuilder, with_decisions
from coordinator.views.decisions import decision_line, person_line, split_findings
from coordinator.views.html import render_html
from coordinator.views.markdown import render_markdown
from coordinator.views.terminal import report_view
from shared.envelope import Finding
from shared.escalation import Escalation
from shared.options import offer
from subagents.result import SubagentResult
from subagents.spec import SubtaskSpec


def _report() -> CoverageReport:
    esc = offer(Escalation(subtask_id="patents", category="permission",
                           trigger="permission_denied", message="denied",
                           attempted_query="battery patents", tool="db"), ["db"], 1)
    decision = decide(esc, DecisionRequest("patents:1", do="answer",
                                           text="412 patents filed in 2025",
                                           source="https://patents.example/2025"),
                      by="ana", at="2026-12-04T10:00:00+00:00", at_s=30)
    decision = with_change(decision, status_before="partial", status_after="complete",
                           coverage_before=0.5, coverage_after=1.0)
    job = JobSpec(query="q", subtasks=[SubtaskSpec(id="patents", query="battery patents")])
    builder = ReportBuilder(job)
    tool = Finding(tool="web_search", data={"results": ["a"]})
    builder.add(answered(SubagentResult(subtask_id="patents", findings=[tool], escalation=esc),
                         decision))
    return with_decisions(builder.report(elapsed_s=31), [decision])


def test_a_decision_says_what_who_when_and_what_changed() -> None:
    """The line names the escalation, the kind, who and when, and the change."""
    line = decision_line(_report().to_wire()["decisions"][0])
    assert line == ("patents:1: answered it (answer) by ana, 2026-12-04: "
                    "'412 patents filed in 2025'; patents partial → complete, "
                    "coverage 50% → 100%")


def test_a_bare_choice_reads_as_before() -> None:
    """A handler's choice without a kind reads "decision for SUBTASK: CHOICE"."""
    assert decision_line({"subtask_id": "doc", "choice": "ask"}) == "decision for doc: ask"


def test_findings_of_a_person_are_apart_from_tool_findings() -> None:
    """split_findings separates the person's answer from what tools found."""
    findings: list[dict[str, Any]] = _report().to_wire()["answer"]["sections"][0]["findings"]
    tools, people = split_findings(findings)
    assert [f["tool"] for f in tools] == ["web_search"]
    assert person_line(people[0]) == ("given by ana, 2026-12-04: 412 patents filed in 2025 "
                                      "(source https://patents.example/2025)")


def test_markdown_shows_the_answer_given_by_the_person() -> None:
    """The Markdown report lists the person's finding apart, with who and when."""
    text = render_markdown(_report().to_wire())
    assert "*Given by a person:*" in text
    assert "given by ana, 2026-12-04: 412 patents filed in 2025" in text
    assert "answered it (answer) by ana" in text


def test_html_shows_the_answer_given_by_the_person() -> None:
    """The HTML report shows the person's finding in its own block, escaped, linked."""
    page = render_html(_report().to_wire(), [])
    assert '<div class="given">' in page
    assert "given by ana, 2026-12-04" in page
    assert 'href="https://patents.example/2025"' in page
    assert "answered it (answer) by ana" in page


def test_terminal_shows_the_decision() -> None:
    """The terminal report prints the decision line."""
    console = Console(width=200, record=True)
    console.print(report_view(_report()))
    assert "patents:1: answered it (answer) by ana, 2026-12-04" in console.export_text()
