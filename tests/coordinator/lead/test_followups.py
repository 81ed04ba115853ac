"""The lead's follow-ups (docs/design.md §11): planned from the gaps, checked like a plan, filling
a gap only with evidence, seen by the synthesis and named in every view."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.lead import JobPlanning
from coordinator.lead.followups import check_followups
from coordinator.replay import replay, run_scenario
from coordinator.report import CoverageReport
from coordinator.views import render_html, render_markdown, report_view
from shared import AnyioClock
from subagents.models.base import ModelRequest, ModelTurn, ToolCall, ToolResultMessage, UserMessage
from tests.coordinator.lead.test_lead import GOOD, JOB, FunctionModel, plan, subagent

pytestmark = pytest.mark.anyio

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
FILLED = "patents — access denied → filled by patents_web (web_search)"


def _replayed(name: str) -> CoverageReport:
    return CoverageReport.model_validate(replay(load_scenario(SCENARIOS / name)).report)


def _text(message: object) -> str:
    assert isinstance(message, UserMessage)
    return message.text


def followups(items: list[dict[str, object]]) -> ModelTurn:
    return ModelTurn(
        calls=(ToolCall("fu1", "plan_followups", {"followups": items}),), stop_reason="tool_use"
    )


WEB: dict[str, object] = {
    "for": "patents",
    "id": "patents_web",
    "query": "patents on the web",
    "tools": ["web_search"],
}


def lead_answers(*followup_turns: ModelTurn) -> Callable[[ModelRequest, int], ModelTurn]:
    """The lead plans GOOD, answers the follow-up calls in turn, then writes the answer."""

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id == "patents_web":
            if n == 1:
                return ModelTurn(
                    calls=(ToolCall("w1", "web_search", {"query": "patents"}),),
                    stop_reason="tool_use",
                )
            return ModelTurn(text="Toyota leads (web_search)")
        if request.subtask_id != "lead":
            return subagent(request, n)
        if n == 1:
            return plan(GOOD)
        if request.force_tool == "plan_followups":
            return followup_turns[n - 2]
        return ModelTurn(text="USD 9bn [market]; Toyota leads [patents_web]")

    return answer


async def _run(
    answer: Callable[[ModelRequest, int], ModelTurn], job: str = JOB
) -> tuple[CoverageReport, FunctionModel]:
    client = FunctionModel(answer)
    planning = JobPlanning(load_scenario_text(job, "lead.yaml"), client=client)
    report = await run_scenario(planning.scenario, clock=AnyioClock(), planning=planning)
    return report, client


async def test_a_plan_for_a_non_gap_goes_back_once_then_the_follow_up_fills_its_gap() -> None:
    """`for: market` (covered) is refused with the gaps named; the corrected plan runs and
    its evidence fills patents: filled_by, weight counted, the gap and escalation kept."""
    bad = followups([{**WEB, "for": "market"}])
    report, client = await _run(lead_answers(bad, followups([WEB])))
    asked = [r for r in client.requests if r.force_tool == "plan_followups"]
    assert len(asked) == 2
    feedback = [m for m in asked[1].messages if isinstance(m, ToolResultMessage)]
    errors = json.loads(feedback[-1].content)["errors"]
    assert errors == ["followups[0].for: 'market' is not a gap (gaps: patents)"]
    prompt = _text(asked[0].messages[0])
    assert "[patents] permission / permission_denied" in prompt
    assert "tried: patents since 2024" in prompt and "alternatives:" in prompt
    rows = {s.id: s for s in report.subtasks}
    assert rows["patents_web"].followup_of == "patents" and rows["patents_web"].weight == 0
    assert [(g.subtask_id, g.filled_by) for g in report.gaps] == [("patents", ["patents_web"])]
    assert [e.subtask_id for e in report.escalations] == ["patents"]
    assert report.coverage == 1.0 and report.answer.missing == []
    assert [s.subtask for s in report.answer.sources or []] == ["market", "patents_web"]
    synthesis = [r for r in client.requests if r.subtask_id == "lead" and not r.tools][-1]
    seen = _text(synthesis.messages[0])
    assert "subtask patents_web (covered, follow-up of patents)" in seen
    assert "filled by the follow-up patents_web" in seen


async def test_a_lead_answering_in_words_or_planning_none_runs_no_follow_up() -> None:
    """Words instead of plan_followups, or an empty list: the report is the fan-out's."""
    for turn in (ModelTurn(text="nothing to add"), followups([])):
        report, _ = await _run(lead_answers(turn))
        assert [s.id for s in report.subtasks] == ["market", "patents"]
        assert report.coverage == 0.5 and report.gaps[0].filled_by is None
        assert len(report.answer.missing) == 1


async def test_a_plan_bad_twice_runs_no_follow_up() -> None:
    """Two invalid plans (an unknown tool, then a taken id): no follow-up, gap open."""
    first = followups([{**WEB, "tools": ["google"]}])
    second = followups([{**WEB, "id": "market"}])
    report, client = await _run(lead_answers(first, second))
    assert sum(r.force_tool == "plan_followups" for r in client.requests) == 2
    assert [s.id for s in report.subtasks] == ["market", "patents"]
    assert report.coverage == 0.5


async def test_a_job_with_subtasks_follows_up_only_when_its_file_says_so() -> None:
    """job.followups defaults to 0 for a file's subtasks; `followups: 1` asks the lead."""
    with_subtasks = JOB.replace(
        "  max_subtasks: 3\n",
        "  max_subtasks: 3\n  subtasks:\n"
        "    - {id: market, query: market size, tools: [web_search]}\n"
        "    - {id: patents, query: patents since 2024, tools: [patent_db]}\n",
    )

    def answer(request: ModelRequest, n: int) -> ModelTurn:
        if request.subtask_id == "lead" and request.force_tool == "plan_followups":
            return followups([WEB])
        return lead_answers()(request, n + (request.subtask_id == "lead"))

    _, client = await _run(answer, with_subtasks)
    assert not any(r.force_tool == "plan_followups" for r in client.requests)
    asked = with_subtasks.replace("  max_subtasks", "  followups: 1\n  max_subtasks")
    report, client = await _run(answer, asked)
    assert sum(r.force_tool == "plan_followups" for r in client.requests) == 1
    assert report.gaps[0].filled_by == ["patents_web"]


@pytest.mark.parametrize(
    ("problem", "item"),
    [
        ("is taken", {**WEB, "id": "patents"}),
        ("is taken", {**WEB, "id": "lead"}),
        ("non-empty list of tool names", {**WEB, "tools": []}),
        ("unknown tool 'google'", {**WEB, "tools": ["google"]}),
        ("unknown fields weight", {**WEB, "weight": 2}),
        ("non-empty question", {**WEB, "query": " "}),
    ],
)
def test_each_follow_up_is_checked_like_a_plan(problem: str, item: dict[str, object]) -> None:
    """Taken or reserved ids, no tools, unknown tools or fields, an empty query: named."""
    job = load_scenario_text(JOB, "lead.yaml").job
    _, problems = check_followups(
        {"followups": [item]}, job, ["patents"], ["web_search", "patent_db"], ["market", "patents"]
    )
    assert any(problem in p for p in problems), problems


def test_more_than_max_followups_is_refused() -> None:
    """At most job.max_followups follow-ups (3 by default)."""
    job = load_scenario_text(JOB, "lead.yaml").job
    items = [{**WEB, "id": f"w{i}"} for i in range(4)]
    _, problems = check_followups({"followups": items}, job, ["patents"], ["web_search"], [])
    assert problems == ["followups: at most 3 follow-ups, got 4"]


def test_every_view_names_the_follow_up_that_filled_a_gap() -> None:
    """Terminal, Markdown and HTML say "patents — access denied → filled by
    patents_web (web_search)"."""
    report = _replayed("followup_fills_gap.yaml")
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(report_view(report))
    assert FILLED in console.export_text()
    assert FILLED in render_markdown(report.to_wire())
    assert FILLED in render_html(report.to_wire(), [])


def test_a_follow_up_without_evidence_leaves_its_gap_open_in_the_views() -> None:
    """A follow-up that found no evidence is shown as such; the gap stays in missing."""
    report = _replayed("followup_fails_too.yaml")
    text = render_markdown(report.to_wire())
    assert "patents — access denied → not filled (follow-up patents_web: gap)" in text
    assert [m.split(":")[0] for m in report.answer.missing] == ["patents", "patents_web"]


def test_a_deadline_with_no_time_left_skips_the_follow_ups_and_the_synthesis_still_runs() -> None:
    """The lead is not asked; its unused followups turn does not become the answer."""
    report = _replayed("followup_no_time.yaml")
    assert [s.id for s in report.subtasks] == ["market", "patents"]
    assert report.answer.text is not None and report.answer.text.startswith("Nothing is covered")
