"""The answer checks itself: not the prompt, not cut off, real citations, numbers found."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.answer_checks import AnswerChecks, rejection_reason, sentence_spans
from coordinator.lead.checks import WINDOW, check_answer, instruction_grams, number_values
from coordinator.lead.synthesis_prompt import SYSTEM
from coordinator.report import Section
from coordinator.sources import number_sources, source_texts
from shared.envelope import Finding, ToolResult
from subagents.planners.model import REMINDER
from subagents.planners.prompt import system_prompt
from subagents.spec import SubtaskSpec


def _finding(tool: str, data: Any) -> Finding:
    return Finding.from_result(ToolResult.success(tool, data, trace_id="tr_1"), {})


SECTIONS = [
    Section(subtask_id="cold", query="q", status="complete", covered=True, weight=1.0,
            findings=[_finding("web.search", {"results": [
                {"title": "Naxtra", "url": "https://a.example/1",
                 "snippet": "Cells keep 90% of capacity at -40 °C; 1,000 cycles; 2.5 Ah."},
                {"title": "Winter", "url": "https://b.example/2",
                 "snippet": "Shipments reached 3GWh in 2024, about USD 0.6bn."},
            ]})]),
    Section(subtask_id="makers", query="q", status="complete", covered=True, weight=1.0,
            findings=[_finding("cell_db", {"makers": ["CATL", "BYD"], "share": "45%"})]),
]
SOURCES, _ = number_sources(SECTIONS)
TEXTS = source_texts(SECTIONS)
IDS = ["cold", "makers"]


def _check(text: str, stop: str | None = "end_turn", question: str = "q") -> AnswerChecks:
    return check_answer(text, stop_reason=stop, sources=SOURCES, texts=TEXTS,
                        subtask_ids=IDS, question=question)


def _words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


@pytest.mark.parametrize(
    ("words", "ok"),
    [pytest.param(WINDOW - 1, True, id="11-words-pass"), pytest.param(WINDOW, False, id="12-fail")],
)
def test_an_echo_of_the_prompt_fails_from_twelve_words(words: int, ok: bool) -> None:
    """11 consecutive words of the lead's instructions pass; 12 are an echo."""
    echo = _words(SYSTEM, words)
    checks = _check(f"Cells keep 90% [1]. {echo}")
    assert checks.not_prompt.ok is ok
    assert checks.not_prompt.count == (0 if ok else 1)
    assert (checks.not_prompt.sentences == []) is ok


def test_case_punctuation_and_budgets_do_not_hide_an_echo() -> None:
    """A subagent's prompt echoed in capitals, without punctuation, with other budgets
    and another subtask still fails; the echoed sentences are named."""
    spec = SubtaskSpec(id="other", query="something else entirely", max_steps=99)
    echo = " ".join(system_prompt(spec).upper().replace(".", " ").replace(",", " ").split())
    checks = _check(echo[:400])
    assert not checks.not_prompt.ok and checks.not_prompt.sentences
    assert not _check(" ".join(REMINDER.split()[:WINDOW])).not_prompt.ok


def test_repeating_the_question_is_not_an_echo() -> None:
    """Placeholders are not instructions: the question repeated in full is the answer's."""
    question = "How do sodium ion cells do in the cold and which makers sell them in Europe today?"
    assert _check(f"{question} They keep 90% [1].", question=question).not_prompt.ok
    assert len(instruction_grams()) > 100


def test_an_echo_of_the_findings_fence_fails() -> None:
    """The lead's user message echoed (its <findings> fence) is the prompt too, though its
    fixed runs are short."""
    echo = "Question: q\nCoverage: 0%\nSources:\n  [1] Naxtra\n<findings>\nsubtask cold"
    checks = _check(echo)
    assert not checks.not_prompt.ok and checks.not_prompt.sentences == ["<findings>"]


@pytest.mark.parametrize(
    ("stop", "ok"),
    [pytest.param("max_tokens", False, id="cut-off"), pytest.param("end_turn", True, id="done"),
     pytest.param(None, True, id="unknown")],
)
def test_an_answer_cut_off_by_max_tokens_fails_complete(stop: str | None, ok: bool) -> None:
    """Only a stop at max_tokens is cut off, and the check names it."""
    checks = _check("Cells keep 90% [1].", stop=stop)
    assert checks.complete.ok is ok
    assert checks.complete.stop_reason == (None if ok else "max_tokens")


def test_a_citation_of_no_source_fails_and_is_named() -> None:
    """[7] names no source of three: its number and sentence are listed; [sic] is no citation."""
    checks = _check("Cells keep 90% [1][2-3]. It sold well [7]. Quoted [sic] [cold].")
    assert not checks.citations.ok
    assert checks.citations.numbers == [7] and checks.citations.count == 1
    assert checks.citations.sentences == ["It sold well [7]."]
    assert checks.cites_anything


def test_a_range_past_the_parser_limit_fails() -> None:
    """A range the citation parser ignores (over 50 numbers) cites nothing real."""
    assert _check("All of them [1-99].").citations.numbers == [1, 99]


@pytest.mark.parametrize(
    ("sentence", "ok"),
    [
        pytest.param("Capacity stays at 90 % [1].", True, id="percent-spaced"),
        pytest.param("Capacity stays at 90 percent [1].", True, id="percent-word"),
        pytest.param("Capacity stays at 91% [1].", False, id="another-number"),
        pytest.param("They last 1000 cycles [1].", True, id="thousands-separator"),
        pytest.param("Each cell holds 2.50 Ah [1].", True, id="trailing-zero"),
        pytest.param("Shipments reached 3 GWh in 2024 [2].", True, id="unit-spacing-and-year"),
        pytest.param("Shipments reached 3 GWh in 2023 [2].", False, id="wrong-year"),
        pytest.param("Sales were USD 600 million [2].", True, id="scale-words"),
        pytest.param("Sales were USD 0.6 bn [2].", True, id="scale-suffix"),
        pytest.param("CATL holds 0.45 of the market [makers].", True, id="share-as-fraction"),
        pytest.param("CATL holds 45% of the market [3].", True, id="tool-data"),
        pytest.param("CATL holds 45% of the market [1].", False, id="cites-the-wrong-source"),
        pytest.param("CATL holds 45% of the market.", False, id="cites-nothing"),
        pytest.param("1. Cells keep their capacity in Li6PS5Cl tests [1].", True,
                     id="list-marker-and-formula"),
        pytest.param("Cells were tested in 2026 [1].", True, id="the-question's-number"),
        pytest.param("Cells keep 90% [1] [2].", True, id="citation-markers-are-no-numbers"),
        pytest.param("See https://a.example/2031/x: 90% [1].", True, id="a-url-is-no-number"),
    ],
)
def test_numbers_must_be_in_a_cited_source(sentence: str, ok: bool) -> None:
    """A number passes when a source the sentence cites has it, formats and units aside."""
    checks = _check(sentence, question="How do cells fare in 2026?")
    assert checks.numbers.ok is ok, checks.numbers
    assert checks.numbers.sentences == ([] if ok else [sentence])


def test_number_values_normalise_formats() -> None:
    """1,000 is 1000, 2.50 is 2.5, 45 % is 45 (and 0.45), 0.6bn is 0.6 and 600000000."""
    values = dict(number_values("1,000 2.50 45 % 0.6bn 3GWh"))
    assert values == {"1,000": {"1000"}, "2.50": {"2.5"}, "45 %": {"45", "0.45"},
                      "0.6bn": {"0.6", "600000000"}, "3": {"3"}}


def test_sentences_keep_their_citations_and_abbreviations() -> None:
    """A citation after the full stop stays with its sentence; e.g. and decimals split none."""
    text = "Cells keep 90%. [1] Prices fell 2.5%, e.g. in Europe [2].\n2. Next line [3]."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Cells keep 90%. [1]", "Prices fell 2.5%, e.g. in Europe [2].", "2. Next line [3].",
    ]


def test_the_rejection_reason_names_every_failed_check() -> None:
    """An echo that was cut off and cites nothing is rejected for all three; citing nothing
    without sources is no reason."""
    checks = _check(_words(SYSTEM, 20), stop="max_tokens").model_dump()
    reason = rejection_reason(checks, has_sources=True)
    assert reason is not None
    assert "instructions" in reason and "cut off" in reason and "cites none" in reason
    plain = _check("Nothing was found.").model_dump()
    assert rejection_reason(plain, has_sources=False) is None
    assert rejection_reason(plain, has_sources=True) == "it cites none of the sources"


def test_a_citation_of_no_source_rejects_the_answer() -> None:
    """A ``[n]`` naming no source of the run is as unverifiable as no citation: rejected,
    saying how many (issue #30: a shown answer passes checks 1-3)."""
    checks = _check("Cells keep 90% [1]. They also last long [7].").model_dump()
    assert checks["citations"]["ok"] is False
    assert rejection_reason(checks, has_sources=True) == "it cites 1 source this run does not have"
