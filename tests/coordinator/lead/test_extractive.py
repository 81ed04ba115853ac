"""The extractive answer: the findings' best passages, each cited, and a rejected model
answer replaced by it through the lead's synthesis (scripted lead turns)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead.checks import check_answer
from coordinator.lead.extractive import (
    MAX_PASSAGES,
    PER_SUBTASK,
    extractive_answer,
    with_extractive_answer,
)
from coordinator.lead.synthesis_prompt import SYSTEM
from coordinator.replay import run_scenario
from coordinator.report import Answer, CoverageReport, Gap, Section, SubtaskOutcome
from coordinator.sources import evidence, number_sources, source_texts
from shared import AnyioClock
from shared.envelope import Finding, ToolResult

pytestmark = pytest.mark.anyio


def _finding(tool: str, data: Any) -> Finding:
    return Finding.from_result(ToolResult.success(tool, data, trace_id="tr_1"), {})


SEARCH = _finding("docs.search", {"results": [
    {"path": "cold.md", "title": "Cold", "snippet": "Cells keep 90% at -20 °C [4]."},
    {"path": "makers.md", "title": "Makers", "snippet": ""},
]})
DOC = _finding("docs.read", {"path": "cold.md", "title": "Cold", "text": (
    "# Sodium-ion in the cold\n\nCells keep 90% of capacity at -20 °C. They charge slowly"
    " below 0 °C. Heating helps. A fourth sentence is not quoted.")})
TOOL = _finding("cell_db", {"makers": ["CATL", "BYD"], "gwh_2025": 10.5})


def _report(sections: list[Section], gaps: list[Gap] | None = None) -> CoverageReport:
    rows = [SubtaskOutcome(id=s.subtask_id, query=s.query, weight=s.weight, status=s.status,
                           attempts=1, rounds=1, steps=1, findings=len(s.findings))
            for s in sections]
    answer = Answer(query="How do sodium-ion cells do in the cold?", coverage=1.0, summary="",
                    sections=sections, missing=[])
    return CoverageReport(query=answer.query, outcome="complete", coverage=1.0, elapsed_s=1.0,
                          subtasks=rows, gaps=gaps or [], escalations=[], answer=answer)


def _section(sid: str, findings: list[Finding], weight: float = 1.0,
             covered: bool = True) -> Section:
    return Section(subtask_id=sid, query=f"about {sid}", status="complete" if covered else "gap",
                   covered=covered, weight=weight, findings=findings)


REPORT = _report([_section("makers", [TOOL]), _section("cold", [SEARCH, DOC], weight=2.0)])


def test_sentences_are_cited_the_heavier_subtask_first_and_quote_their_source() -> None:
    """The heavier subtask first; its sentence that holds the query's term leads (a
    heading joined to the sentence it introduces); a tool's data is key: value; every line
    cites its [n], numbered 1, 2 as the lines cite them."""
    text, sources = extractive_answer(REPORT)
    assert text is not None
    lines = text.split("\n")
    assert lines[0] == "# Sodium-ion in the cold Cells keep 90% of capacity at -20 °C. [1]"
    assert lines[-1] == "makers: CATL, BYD; gwh_2025: 10.5 [2]"
    assert all(line.rstrip(":").endswith(("[1]", "[2]")) for line in lines)
    # Numbered as the lines cite them: no holes in the list.
    assert [(s.n, s.path or s.tool) for s in sources] == [(1, "cold.md"), (2, "cell_db")]


def test_a_sources_own_brackets_stay_as_written() -> None:
    """A snippet's "[4]" is quoted exactly (views escape it); only fanout's [n] cite, and
    the sources are those fanout cited."""
    text, sources = extractive_answer(_report([_section("cold", [SEARCH])]))
    assert text is not None and "Cells keep 90% at -20 °C [4]. [1]" in text
    assert [s.n for s in sources] == [1]


def test_the_extractive_answer_passes_its_own_checks() -> None:
    """Every number of a passage is in the source it cites, and every [n] is a source."""
    report = _report([_section("makers", [TOOL]), _section("cold", [DOC], weight=2.0)])
    text, cited = extractive_answer(report)
    assert text is not None
    sections = report.answer.sections
    sources, _ = number_sources(sections)
    # The run's numbers of the sources the answer numbered 1, 2, 3.
    run_n = {s.n: next(o.n for o in sources if (o.path, o.tool, o.subtask)
                       == (s.path, s.tool, s.subtask)) for s in cited}
    texts = source_texts(sections)
    checks = check_answer(text, stop_reason=None, sources=cited,
                          texts={n: texts[old] for n, old in run_n.items()},
                          subtask_ids=["makers", "cold"])
    assert checks.numbers.ok and checks.citations.ok and checks.cites_anything
    assert checks.not_prompt.ok


def test_the_answer_is_bounded() -> None:
    """At most PER_SUBTASK passages per subtask and MAX_PASSAGES in all."""
    sections = [_section(f"s{k}", [_finding("docs.search", {"results": [
        {"path": f"{k}-{i}.md", "title": f"T{i}", "snippet": f"Passage {k}.{i}."}
        for i in range(9)]})]) for k in range(4)]
    text, sources = extractive_answer(_report(sections))
    assert text is not None
    lines = text.split("\n")
    assert len(lines) == MAX_PASSAGES == len(sources)
    assert sum(line.startswith("Passage 0.") for line in lines) == PER_SUBTASK


def test_nothing_to_quote_is_no_text() -> None:
    """A report whose findings have no source (none, or only empty ones) quotes nothing."""
    empty = _finding("recall_db", None)
    assert extractive_answer(_report([_section("recalls", [])])) == (None, [])
    assert extractive_answer(_report([_section("recalls", [empty.model_copy(
        update={"empty": True})])])) == (None, [])


def test_evidence_is_numbered_as_the_sources_are() -> None:
    """Evidence and the synthesis agree on every source's number."""
    sections = REPORT.answer.sections
    sources, _ = number_sources(sections)
    assert {e.n for e in evidence(sections)} == {s.n for s in sources}


def test_a_run_without_a_model_answers_extractively_without_a_gap() -> None:
    """Retrieval only: kind extractive, the sources it cites, no gap, coverage unchanged."""
    report = with_extractive_answer(REPORT, None)
    assert report.answer.kind == "extractive" and report.answer.text
    assert report.answer.sources and report.gaps == [] and report.coverage == 1.0
    assert "rejected" not in report.to_wire()["answer"]


def test_a_rejection_adds_a_lead_gap_of_weight_zero() -> None:
    """The lead's gap names why, routed gap, no category; coverage and outcome stay."""
    report = with_extractive_answer(REPORT, "it was cut off by model.max_tokens")
    (gap,) = report.gaps
    assert (gap.subtask_id, gap.trigger, gap.route, gap.category) == (
        "lead", "answer_rejected", "gap", None)
    assert "cut off" in gap.message and any("max_tokens" in a for a in gap.alternatives)
    lead = next(o for o in report.subtasks if o.id == "lead")
    assert lead.weight == 0 and report.coverage == 1.0 and report.outcome == "complete"


def test_a_lead_with_a_failed_plan_keeps_one_gap() -> None:
    """The plan's gap stays first and whole; its message adds the rejection."""
    plan = Gap(subtask_id="lead", category="validation", trigger="no_progress", route="gap",
               attempted_query="q", message="the lead's plan was not valid twice")
    report = with_extractive_answer(_report(REPORT.answer.sections, [plan]), "it cites none")
    (gap,) = report.gaps
    assert (gap.trigger, gap.category) == ("no_progress", "validation")
    assert gap.message.startswith("the lead's plan was not valid twice; and the model's answer")


JOB = """\
scenario: synthesis-checks
model: {provider: scripted, latency_s: 1, turns: {lead: [LEAD]}}
job:
  query: "How do sodium-ion cells do in the cold?"
  subtasks:
    - id: cold
      query: "capacity in the cold"
      tools: [cell_lab]
      plan: [{call: cell_lab, args: {}}]
tools:
  cell_lab:
    params: {}
    responses: [{ok: {capacity_pct_at_minus_20: "90%"}}]
"""


async def _synthesized(turn: str) -> CoverageReport:
    scenario = load_scenario_text(JOB.replace("LEAD", turn), "job.yaml")
    return await run_scenario(scenario, clock=AnyioClock())


@pytest.mark.parametrize(
    ("turn", "why"),
    [
        pytest.param('{text: "' + " ".join(SYSTEM.split()[:30]) + '"}', "instructions",
                     id="echoes-the-prompt"),
        pytest.param('{text: "Cells keep 90% [1], and", stop: max_tokens}', "cut off",
                     id="cut-off"),
        pytest.param('{text: "Cells keep most of their capacity."}', "cites none",
                     id="cites-nothing"),
    ],
)
async def test_a_rejected_synthesis_is_replaced_by_the_extractive_answer(
    turn: str, why: str
) -> None:
    """The model's text goes to answer.rejected, the answer quotes the findings, and the
    lead's gap says why; coverage is what the research earned."""
    report = await _synthesized(turn)
    answer = report.answer
    assert answer.kind == "extractive" and answer.rejected and answer.checks is not None
    assert answer.text == "capacity_pct_at_minus_20: 90% [1]"
    assert [s.n for s in answer.sources or []] == [1]
    (gap,) = report.gaps
    assert gap.trigger == "answer_rejected" and why in gap.message
    assert report.coverage == 1.0 and report.outcome == "complete"


async def test_a_synthesis_that_passes_is_the_models_answer() -> None:
    """A cited answer stays kind model; a number its source lacks (-20) is marked in
    answer.checks, never a reason to reject it."""
    report = await _synthesized('{text: "Cells keep 90% at -20 °C [1]."}')
    answer = report.answer
    assert answer.kind == "model" and answer.text == "Cells keep 90% at -20 °C [1]."
    assert answer.checks is not None and answer.checks.numbers.ok is False  # -20 is not there
    assert answer.checks.numbers.values == ["20"] and answer.rejected is None
    assert report.gaps == []




def _one_search_report(query: str, snippet: str) -> CoverageReport:
    found = _finding("docs.search", {"results": [
        {"path": "bisect.md", "title": "Bisect", "snippet": snippet}]})
    section = Section(subtask_id="question", query=query, status="complete", covered=True,
                      weight=1.0, findings=[found])
    return _report([section])


def test_a_sentence_that_refers_back_is_quoted_with_the_one_before() -> None:
    """"If the script exits with this code, …" is quoted with the sentence that names the
    code, once, as one line."""
    snippet = ("The special exit code 125 should be used when the source cannot be tested. "
               "If the script exits with this code, the current revision is skipped. "
               "Other codes mark it bad.")
    text, _ = extractive_answer(_one_search_report(
        "Which exit code makes the script skip a revision?", snippet))
    assert text is not None
    lines = [ln for ln in text.split("\n") if "this code" in ln]
    assert len(lines) == 1 and lines[0].startswith("The special exit code 125")
    assert text.count("The special exit code 125") == 1
