"""The lead's answer in every view: first, with its sources and what is not covered, escaped."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.report import CoverageReport
from coordinator.views.html import render_html
from coordinator.views.markdown import render_markdown
from coordinator.views.terminal import report_view

LEAD = Path(__file__).resolve().parents[3] / "scenarios" / "lead_decomposes.yaml"
HOSTILE = "<script>alert(1)</script> USD 9bn [market]"


def _report(text: str | None = None) -> CoverageReport:
    wire = replay(load_scenario(LEAD)).report
    report = CoverageReport.model_validate(wire)
    if text is not None:
        report = report.model_copy(
            update={"answer": report.answer.model_copy(update={"text": text})}
        )
    return report


def test_the_terminal_shows_the_answer_before_the_subtasks() -> None:
    """The Answer panel, its sources and the Not covered list come before the table."""
    console = Console(record=True, width=120)
    console.print(report_view(_report()))
    out = console.export_text()
    assert out.index("Answer") < out.index("Subtasks")
    # The scripted lead cites [market]: that subtask's sources, numbered, with their subtask.
    assert "Sources" in out and "[1] " in out and "(market)" in out
    assert "patents: access denied" in out  # plain words; --json keeps permission_denied


def test_markdown_puts_the_answer_first_and_escapes_it() -> None:
    """The model's text is escaped Markdown; the gaps follow as Not covered."""
    md = render_markdown(_report(HOSTILE).to_wire())
    assert md.index("## The lead's answer") < md.index("## Subtasks")
    assert "<script>" not in md
    assert "**Not covered**" in md


def test_html_shows_the_models_text_as_text() -> None:
    """A model's <script> reaches the page as escaped text, never as markup."""
    page = render_html(_report(HOSTILE).to_wire(), [])
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.index('id="synthesis"') < page.index('id="answer"')


def test_a_job_without_a_model_has_no_answer_section() -> None:
    """Without a lead there is no synthesis block, and the wire has no text field."""
    design = Path(__file__).resolve().parents[2] / "coordinator" / "data" / "design_example.yaml"
    wire = replay(load_scenario(design)).report
    assert "text" not in wire["answer"]
    assert 'id="synthesis"' not in render_html(wire, [])
