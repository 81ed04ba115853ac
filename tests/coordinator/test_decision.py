"""A person's decision (coordinator.decision): the request, its option, what the run does."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.decision import (
    TIMEOUT,
    DecisionError,
    DecisionRequest,
    action_for,
    answered,
    decide,
    given_by,
    parse_request,
    person_finding,
    with_change,
)
from coordinator.job import JobSpec
from coordinator.report import Decision, ReportBuilder, subtask_status, with_decisions
from coordinator.sources import number_sources
from shared.envelope import PERSON, Finding
from shared.escalation import Escalation
from shared.options import offer
from subagents.result import SubagentResult
from subagents.spec import SubtaskSpec


def _offered() -> Escalation:
    esc = Escalation(
        subtask_id="patents", category="permission", trigger="permission_denied",
        message="role analyst lacks patents:read", attempted_query="battery patents",
        tool="patent_db",
        alternatives=["request patents:read for role analyst (needed by patent_db)",
                      "try web_search, also on this subtask's allowlist"],
    )
    return offer(esc, ["patent_db", "web_search"], 1)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param({"option": "o1"}, "escalation", id="no-escalation"),
        pytest.param({"escalation": "patents:1"}, "option", id="neither"),
        pytest.param({"escalation": "patents:1", "option": "o1", "do": "retry"}, "do",
                     id="both"),
        pytest.param({"escalation": "patents:1", "do": "retyr"}, "do", id="unknown-kind"),
        pytest.param({"escalation": "patents:1", "do": "answer", "text": 3}, "text",
                     id="text-not-string"),
        pytest.param({"escalation": "patents:1", "do": "accept", "why": "x"}, "why",
                     id="unknown-key"),
        pytest.param({"escalation": "", "do": "accept"}, "escalation", id="empty-id"),
    ],
)
def test_a_malformed_request_names_its_field(data: dict[str, Any], field: str) -> None:
    """Each malformed request is refused with the field at fault."""
    with pytest.raises(DecisionError) as info:
        parse_request(data)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: expected ")


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        pytest.param(DecisionRequest("patents:1", option="o9"), "option", id="no-such-option"),
        pytest.param(DecisionRequest("patents:1", do="requery"), "do", id="kind-not-offered"),
        pytest.param(DecisionRequest("patents:1", do="answer"), "text", id="answer-no-text"),
        pytest.param(DecisionRequest("patents:1", do="accept", text="x"), "text",
                     id="text-on-accept"),
        pytest.param(DecisionRequest("patents:1", do="answer", text="x", source="ftp://a"),
                     "source", id="source-not-http"),
        pytest.param(DecisionRequest("patents:1", do="retry", source="https://a.example"),
                     "source", id="source-on-retry"),
        pytest.param(DecisionRequest("news:1", do="retry"), "escalation", id="other-escalation"),
    ],
)
def test_a_request_the_escalation_cannot_take_names_its_field(
    request_: DecisionRequest, field: str
) -> None:
    """A request choosing what the escalation does not offer is refused, naming the field."""
    with pytest.raises(DecisionError) as info:
        decide(_offered(), request_, by="ana")
    assert info.value.field == field


def test_by_kind_chooses_the_first_option_of_that_kind() -> None:
    """do: use_tool resolves to the first use_tool option, with its tool."""
    d = decide(_offered(), DecisionRequest("patents:1", do="use_tool"), by="ana",
               at="2026-12-04T10:00:00+00:00", at_s=30)
    assert (d.option, d.do, d.tool, d.by, d.at, d.at_s) == (
        "o2", "use_tool", "web_search", "ana", "2026-12-04T10:00:00+00:00", 30)
    assert d.choice == "try web_search, also on this subtask's allowlist"
    assert action_for(d).tool == "web_search"


def test_a_bare_handler_choice_serialises_as_before() -> None:
    """A Decision with only subtask_id and choice keeps its old wire form."""
    assert Decision(subtask_id="doc", choice="x").model_dump(mode="json") == {
        "subtask_id": "doc", "choice": "x"}
    with pytest.raises(ValueError, match="nothing to do"):
        action_for(Decision(subtask_id="doc", choice="x"))


def test_requery_text_is_the_changed_query() -> None:
    """A requery decision with text carries that text as its query."""
    esc = offer(_offered().model_copy(update={"alternatives": ['search for "x"']}), [], 1)
    d = decide(esc, DecisionRequest("patents:1", do="requery", text="patents 2025"), by="ana")
    assert (d.do, d.query, d.text) == ("requery", "patents 2025", None)


def _answer(**extra: Any) -> Decision:
    request = DecisionRequest("patents:1", do="answer", text="412 patents filed in 2025",
                              source="https://patents.example/2025", **extra)
    return decide(_offered(), request, by="ana", at="2026-12-04T10:00:00+00:00", at_s=30)


def test_an_answer_becomes_a_finding_given_by_the_person() -> None:
    """answer: the text is a finding of tool person, with who, when and the source URL."""
    finding = person_finding(_answer())
    assert finding.tool == PERSON and finding.by_person
    assert finding.data == {"text": "412 patents filed in 2025"}
    assert finding.url == "https://patents.example/2025"
    assert finding.title == "given by ana, 2026-12-04"
    action = action_for(_answer())
    assert action.do == "answer" and action.finding == finding


def test_answered_result_is_covered_and_keeps_its_partial_findings() -> None:
    """A result answered by a person keeps its findings, adds the person's, closes the gap."""
    partial = Finding(tool="web_search", data={"results": ["a"]})
    result = SubagentResult(subtask_id="patents", findings=[partial], escalation=_offered())
    assert subtask_status(result) == "partial"
    after = answered(result, _answer())
    assert after.escalation is None
    assert after.findings[0] == partial and after.findings[1].by == "ana"
    assert subtask_status(after) == "complete"
    with pytest.raises(ValueError, match="applied to"):
        answered(result.model_copy(update={"subtask_id": "news"}), _answer())


def test_a_persons_finding_is_cited_as_given_by_them() -> None:
    """The numbered sources name a person's answer "given by NAME, DATE", with its URL."""
    job = JobSpec(query="q", subtasks=[SubtaskSpec(id="patents", query="p")])
    builder = ReportBuilder(job)
    builder.add(answered(SubagentResult(subtask_id="patents", escalation=_offered()), _answer()))
    report = builder.report(elapsed_s=1)
    sources, _ = number_sources(report.answer.sections)
    assert [(s.title, s.url, s.tool) for s in sources] == [
        ("given by ana, 2026-12-04", "https://patents.example/2025", PERSON)]


def test_a_tool_finding_serialises_without_by_and_at() -> None:
    """Tool findings keep their wire form: no by, no at."""
    wire = Finding(tool="t", data=1).model_dump(mode="json")
    assert "by" not in wire and "at" not in wire


@pytest.mark.parametrize(
    ("by", "at", "said"),
    [
        pytest.param("ana", "2026-12-04T10:00:00+00:00", "given by ana, 2026-12-04", id="iso"),
        pytest.param("scenario", "+30s", "given by scenario, +30s", id="run-seconds"),
        pytest.param(None, None, "given by a person", id="nobody"),
    ],
)
def test_given_by_says_who_and_when(by: str | None, at: str | None, said: str) -> None:
    """A person's citation names who and the date (or the run's seconds)."""
    assert given_by(by, at) == said


def test_without_wall_time_the_finding_says_the_runs_seconds() -> None:
    """A replay's answer (no wall time) is dated by the run's seconds."""
    d = decide(_offered(), DecisionRequest("patents:1", do="answer", text="x"), by="scenario",
               at_s=12.5)
    assert person_finding(d).at == "+12.5s"


def test_builder_says_status_and_coverage_so_far() -> None:
    """Before every result is in, missing subtasks count as gaps in the coverage."""
    job = JobSpec(query="q", subtasks=[SubtaskSpec(id="a", query="a", weight=3),
                                       SubtaskSpec(id="b", query="b")])
    builder = ReportBuilder(job)
    assert (builder.status("a"), builder.coverage()) == ("gap", 0.0)
    builder.add(SubagentResult(subtask_id="a", findings=[Finding(tool="t", data=1)]))
    assert (builder.status("a"), builder.coverage()) == ("complete", 0.75)


def test_decisions_join_the_report_and_an_accepted_gap_is_marked_decided() -> None:
    """with_decisions lists the decisions with their change; accept marks the gap."""
    job = JobSpec(query="q", subtasks=[SubtaskSpec(id="patents", query="p")])
    builder = ReportBuilder(job)
    builder.add(SubagentResult(subtask_id="patents", escalation=_offered()))
    report = builder.report(elapsed_s=1)
    assert with_decisions(report, []) is report
    accept = decide(_offered(), DecisionRequest("patents:1", do="accept"), by=TIMEOUT, at_s=900)
    accept = with_change(accept, status_before="gap", status_after="gap", coverage_before=0,
                         coverage_after=0)
    after = with_decisions(report, [accept])
    assert after.gaps[0].decided == "patents:1"
    wire = after.to_wire()
    assert wire["decisions"] == [{
        "subtask_id": "patents", "choice": accept.choice, "escalation": "patents:1",
        "option": "o4", "do": "accept", "by": "timeout", "at_s": 900.0,
        "change": {"status_before": "gap", "status_after": "gap", "coverage_before": 0.0,
                   "coverage_after": 0.0},
    }]
    assert "decided" not in report.to_wire()["gaps"][0]
