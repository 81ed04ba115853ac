"""The Markdown report: structure, the gap report, the answer and escaping."""

from __future__ import annotations

import re
from typing import Any

import pytest

from coordinator.views.markdown import md_cell, md_text, render_markdown
from tests.coordinator.report_inputs import hostile, traced

RUN = {"id": "20261129-demo", "file": "scenarios/research_demo.yaml", "status": "finished",
       "started": "2026-11-29T09:00:00Z"}
_PIPE = re.compile(r"(?<!\\)\|")


def _demo() -> dict[str, Any]:
    return traced("research_demo")[0]


def _section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}", 1)[1].split("\n## ", 1)[0]


def test_title_outcome_and_subtasks_table() -> None:
    """The title is the query; one line gives outcome and coverage; one table row per subtask."""
    report = _demo()
    text = render_markdown(report, RUN)
    assert text.startswith("# State of solid-state battery commercialisation\n")
    assert "**Outcome:** partial · **Coverage:** 75% · **Elapsed:** 74s" in text
    assert "**Run:** `20261129-demo` (finished)" in text
    table = [line for line in _section(text, "## Subtasks").splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(report["subtasks"])
    assert table[1].startswith("| --- | --- | ---: |")
    for line, s in zip(table[2:], report["subtasks"], strict=True):
        assert line.startswith(f"| {s['id']} | {s['status']} |")
    assert "| pilot_lines | complete | 1 | 5 | 2 | 3 | 2 | 35–74s |" in text


def test_gap_report() -> None:
    """Each gap lists category, trigger, route, attempted query, partials and alternatives."""
    report = _demo()
    gaps = _section(render_markdown(report), "## Coverage gaps (2)")
    patents = gaps.split("### patents", 1)[1].split("###", 1)[0]
    assert "- **Category:** permission" in patents
    assert "- **Trigger:** `permission_denied` (access denied)" in patents
    assert "- **Route:** `escalate`" in patents
    assert "- **Attempted query:** patent families on sulfide" in patents
    assert "- **Partial results:** 1" in patents
    assert "- **Message:** role analyst lacks patents:read" in patents
    for alternative in report["gaps"][0]["alternatives"]:
        assert f"  - {md_text(alternative)}" in patents
    supply = gaps.split("### supply_chain", 1)[1]
    assert "- **Category:** none" in supply and "`incomplete_data`" in supply
    assert "- **Partial results:** 2" in supply


def test_escalations_and_answer() -> None:
    """The escalations are counted; every answer section shows its status and its findings."""
    report = _demo()
    text = render_markdown(report)
    assert "## Escalations (1)" in text
    assert "- **patents**: permission / `permission_denied`" in text
    answer = _section(text, "## What each subtask found")
    for section in report["answer"]["sections"]:
        covered = "covered" if section["covered"] else "not covered"
        assert f"### {section['subtask_id']} — {section['status']}, {covered}" in answer
    assert "- **news_api**\n  - articles:\n    - Honda opens all-solid-state pilot line" in answer
    assert "  - cagr_pct: 71" in answer
    assert "- **recall_db** (empty: no matches)" in answer
    assert "- **trade_data** (partial data)" in answer
    # The gap in plain words (the gap report above keeps the wire's trigger).
    assert "> gap: access denied → handed to a person: role analyst lacks" in answer
    assert "### Missing" in answer


def test_no_gaps() -> None:
    """A fully covered report says there are no gaps and no escalations."""
    report = traced("transient_backoff")[0]
    assert report["gaps"] == []
    text = render_markdown(report)
    assert "## Coverage gaps (0)\n\nNo coverage gaps" in text
    assert "## Escalations (0)\n\nNothing was handed to a person." in text
    assert "Nothing is missing." in text


def test_interrupted_run() -> None:
    """An interrupted run says how to continue it."""
    text = render_markdown(_demo(), {**RUN, "id": "20261129-crash", "status": "interrupted"})
    assert "> **Interrupted** — `fanout resume 20261129-crash` continues it." in text
    assert "Interrupted" not in render_markdown(_demo(), RUN)


def test_table_cells_escape_pipes() -> None:
    """A ``|`` in a cell is escaped, so every row keeps the header's column count."""
    report = _demo()
    report["subtasks"][0]["query"] = "a | b || c"
    text = render_markdown(report)
    table = [line for line in _section(text, "## Subtasks").splitlines() if line.startswith("|")]
    assert {len(_PIPE.findall(line)) for line in table} == {10}
    assert r"a \| b \|\| c" in table[2]


def test_markup_is_escaped() -> None:
    """HTML and Markdown in report text is shown literally, not interpreted."""
    report, events = traced("research_demo")
    hostile(report, events)
    text = render_markdown(report, RUN)
    assert "<script>" not in text and "</script>" not in text
    assert r"\<script\>alert(1)\</script\>" in text
    assert '"quotes" & ampersands' in text  # plain punctuation needs no escaping
    assert r"a \| b \<script\>" in text


@pytest.mark.parametrize(
    ("raw", "cell"),
    [
        pytest.param("plain", "plain", id="plain"),
        pytest.param("a|b", r"a\|b", id="pipe"),
        pytest.param("line\nbreak", "line break", id="newline"),
        pytest.param("", " ", id="empty"),
        pytest.param("**bold** [x](y)", r"\*\*bold\*\* \[x\](y)", id="markdown"),
        pytest.param("supply_chain", "supply_chain", id="intraword-underscore"),
    ],
)
def test_md_cell(raw: str, cell: str) -> None:
    """Cells are one line, with Markdown punctuation escaped and words left readable."""
    assert md_cell(raw) == cell


def test_search_results_read_as_text_and_open_gaps_in_plain_words() -> None:
    """A search result is its title, its link or path and its snippet (it was inline
    JSON); Not covered says "partial data" where it said "no category/incomplete_data"."""
    report = traced("research_lead")[0]
    section = report["answer"]["sections"][0]
    section["findings"][0].update(tool="web.search", data={"results": [
        {"url": "https://example.org/cold", "title": "Cold cells", "snippet": "90% at -20 °C"},
        {"path": "notes/x.md", "title": "Notes", "snippet": "agree"}]})
    text = render_markdown(report)
    found = _section(text, "## What each subtask found")
    assert "    - Cold cells — <https://example.org/cold>: 90% at -20 °C" in found
    assert "    - Notes — `notes/x.md`: agree" in found
    assert '{"' not in found
    answer = _section(text, "## The lead's answer")
    assert "- supply_chain: partial data — trade_data returned partial data" in answer
    assert "incomplete_data" not in answer and "no category" not in answer
    covered = answer.split("**Covered by a follow-up**", 1)[1]
    assert "- patents: access denied — filled by patents_web (web_search)" in covered
    assert r"\[1, 2\]" in answer and "market\\]" not in answer
