"""Every view marks what the answer checks found: an extractive answer as such, and the
sentences with an unverified number, escaped like the rest of the model's text."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.replay import replay
from coordinator.report import CoverageReport
from coordinator.views.answer_marks import UNVERIFIED, marked_lines
from coordinator.views.html import render_html
from coordinator.views.markdown import render_markdown
from coordinator.views.terminal import report_view

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
ECHO = SCENARIOS / "lead_echoes_prompt.yaml"
# A model's answer: the first sentence is in its source, the second's 75% is in none.
ANSWER = ("CATL says its cells keep 90% at -40 °C [1]. <b>Sodium-ion</b> keeps 75% "
          "at -20 °C [2].")


def _terminal(wire: dict[str, object]) -> str:
    console = Console(record=True, width=200)
    console.print(report_view(CoverageReport.model_validate(wire)))
    return console.export_text()


def _echo() -> dict[str, object]:
    return replay(load_scenario(ECHO)).report


def _model_answer() -> dict[str, object]:
    text = ECHO.read_text(encoding="utf-8")
    start, end = text.index("      - text: >-"), text.index("job:")
    scripted = f"      - text: {ANSWER!r}\n".replace("'", '"')
    source = text[:start] + scripted + text[end : text.index("expect:")]
    return replay(load_scenario_text(source, "model_answer.yaml")).report


def test_only_the_sentence_with_an_unverified_number_is_marked() -> None:
    """The checks name the second sentence, and only it carries the mark."""
    wire = _model_answer()
    answer = wire["answer"]
    assert isinstance(answer, dict) and answer["kind"] == "model"
    lines = marked_lines(answer)
    assert lines is not None
    (line,) = lines
    assert [bool(marks) for _, marks in line] == [False, True]
    assert line[1][1] == [f"{UNVERIFIED}: 75%"]


def test_the_terminal_marks_the_sentence() -> None:
    """The terminal shows the mark after the sentence, the text as text."""
    out = _terminal(_model_answer())
    assert "<b>Sodium-ion</b> keeps 75% at -20 °C [2]. ⚠ unverified number: 75%" in out
    assert out.count("⚠") == 1


def test_markdown_marks_the_sentence_escaped() -> None:
    """Markdown escapes the model's markup and follows the sentence with the mark."""
    md = render_markdown(_model_answer())
    assert "\\<b\\>Sodium-ion\\</b\\> keeps 75% at -20 °C \\[2\\]. _⚠ unverified number: 75%_" in md
    assert "<b>" not in md


def test_html_marks_the_sentence_with_a_class_escaped() -> None:
    """The HTML report (and so the service page, which shows it) wraps the sentence in a
    span of class unverified and escapes it."""
    page = render_html(_model_answer(), [])
    assert ('<span class="unverified" title="⚠ unverified number: 75%">&lt;b&gt;Sodium-ion'
            "&lt;/b&gt; keeps 75% at -20 °C [2].</span>") in page
    assert '<span class="check-mark">⚠ unverified number: 75%</span>' in page
    assert "<b>Sodium-ion" not in page


def test_every_view_says_an_answer_is_extractive_and_why() -> None:
    """Terminal, Markdown and HTML name the extractive answer and the rejection's reason;
    the HTML report keeps the rejected text, escaped, folded away."""
    wire = _echo()
    why = "extractive: the model's answer was rejected because it repeats fanout's own"
    assert why in _terminal(wire)
    assert why in render_markdown(wire)
    page = render_html(wire, [])
    assert why.replace("'", "&#x27;") in page
    assert '<details class="rejected">' in page and "You are the lead of a research job" in page


def test_a_report_without_a_written_answer_is_unchanged() -> None:
    """A job without a model has no kind, checks or marks on the wire or in a view."""
    design = Path(__file__).resolve().parents[2] / "coordinator" / "data" / "design_example.yaml"
    wire = replay(load_scenario(design)).report
    answer = wire["answer"]
    assert isinstance(answer, dict)
    assert not {"kind", "checks", "rejected"} & set(answer)
    assert "unverified number" not in render_markdown(wire)
    assert 'class="extractive-note"' not in render_html(wire, [])
