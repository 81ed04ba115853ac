"""The answer checks itself (docs/design.md §7 "Answer checks"): pure functions, no I/O.

:func:`check_answer` computes ``answer.checks`` from the model's text, its stop reason,
the run's numbered sources and their texts, so a replay of a recorded run gives the same
checks. Decisions where the contract is silent, taken as a demanding reader would:

- ``not_prompt``: the instructions are fanout's own prompts (the lead's synthesis,
  decomposition and follow-up prompts, a subagent's system prompt, its reminders, the
  escalate tool's description, the tool-call format of text-only profiles), rendered
  with a placeholder in every slot; only the fixed word runs between placeholders count,
  so an answer that repeats the question (or a source) is not an echo. Words are compared
  lowercased, without punctuation, every digit run as one token ``0`` (budgets differ per
  run, an echo is still an echo). The synthesis prompt's scaffolding is fanout's too, but
  its fixed runs are short and interleaved with data, so an echo of the lead's user
  message ("Question: … Sources: [1] … <findings> …") has few 12-word runs: the
  ``<findings>`` fence, which no answer has reason to write, counts as an echoed run too.
- ``numbers``: a number is its value, the unit's spelling is not compared ("3 GWh" =
  "3GWh" = 3; "45%" = "45 %" = "45 percent" = 45, and also 0.45); ``1,000`` = ``1000``,
  ``2.50`` = ``2.5``; a scale word or suffix adds its scaled value ("USD 0.6bn" is 0.6
  and 600000000). Years count. Not numbers: the citation markers, a list marker opening a
  line ("1." / "2)"), digits inside a word ("Li6PS5Cl", "H01M10") or a URL, and a sign. A
  decimal comma is read as two numbers ("2,5"). A number found in the question is the
  reader's own and passes. A sentence with a number that cites no source is unverified:
  without a cited source there is nothing to find the number in.
- ``citations``: a bracket is a citation when each of its parts (``,``/``;``) is a
  number, a range (``2-4``) or a subtask id; ``[sic]`` is not one. A range longer than
  50 (the citation parser ignores those) fails as a whole.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation

from coordinator.answer_checks import (
    AnswerChecks,
    CitationCheck,
    CompleteCheck,
    NumberCheck,
    PromptCheck,
    sentence_spans,
)
from coordinator.report import Source
from coordinator.sources import cited_sources

__all__ = ["WINDOW", "check_answer", "instruction_grams", "instruction_texts", "number_values"]

WINDOW = 12
"""An answer with this many consecutive words of fanout's instructions echoes its prompt."""

_FENCE = re.compile(r"</?findings>", re.IGNORECASE)  # the synthesis prompt's data fence
_SLOT = "zqzslotzqz"  # what every placeholder of a prompt is rendered as: no word of ours
_WORD = re.compile(r"[^\W_]+")
_CITE = re.compile(r"\[([^\[\]\n]{1,200})\]")
_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
_RANGE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")
_LIST_MARKER = re.compile(r"\s*(?:\d{1,3}[.)]|[-*•])\s+")
_SCALES = {
    "k": 3, "thousand": 3, "m": 6, "mn": 6, "million": 6, "b": 9, "bn": 9, "billion": 9,
    "t": 12, "tn": 12, "trillion": 12,
}
_NUMBER = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(\.\d+)?"
    r"(?:\s?(%|per\s?cent\b|percent\b|thousand\b|million\b|billion\b|trillion\b"
    r"|bn\b|mn\b|tn\b)|([kmbt])\b)?",
    re.IGNORECASE,
)


# --- check 1: not the prompt ---------------------------------------------------------


def instruction_texts() -> list[str]:
    """fanout's own instructions, every placeholder rendered as a slot word."""
    # Imported here: the prompts load the lead's wing, which is not needed to check.
    from coordinator.job import JobSpec
    from coordinator.lead.decompose import decomposition_prompt
    from coordinator.lead.followups import followup_prompt
    from coordinator.lead.synthesis_prompt import SYSTEM, synthesis_prompt
    from coordinator.report import Answer, CoverageReport, Gap, Section
    from shared.envelope import Finding
    from subagents.models.base import ToolSpec
    from subagents.models.compat.profiles import ask_in_words, tools_text
    from subagents.planners.model import REMINDER, SILENCE_REMINDER
    from subagents.planners.prompt import ESCALATE_SPEC, system_prompt
    from subagents.spec import SubtaskSpec

    s = _SLOT
    tool = ToolSpec(name=s, description=s, input_schema={})
    job = JobSpec(query=s)
    finding = Finding(tool=s, data=s, url=s, title=s, complete=False)
    gap = Gap(subtask_id=s, trigger="no_evidence", route="gap", attempted_query=s,
              partial_results=[finding], alternatives=[s], message=s, filled_by=[s])
    sections = [
        Section(subtask_id=s, query=s, status="partial", covered=False, weight=1,
                findings=[finding]),
        Section(subtask_id=s, query=s, status="complete", covered=True, weight=1, findings=[]),
    ]
    texts = [SYSTEM, REMINDER, SILENCE_REMINDER, ESCALATE_SPEC.description,
             tools_text([tool]), ask_in_words(s), system_prompt(SubtaskSpec(id=s, query=s))]
    for tools in ([tool], []):
        texts.append(decomposition_prompt(job, tools))
        texts.extend(followup_prompt(job, [gap], tools))
    for found, gaps in ((sections, [gap]), ([], [])):
        answer = Answer(query=s, coverage=0.0, summary=s, sections=found, missing=[])
        report = CoverageReport(query=s, outcome="partial", coverage=0.0, elapsed_s=0.0,
                                subtasks=[], gaps=gaps, escalations=[], answer=answer)
        texts.append(synthesis_prompt(report))
    return texts


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """The words of ``text`` as compared (lowercase, a digit run is ``0``), with spans."""
    out = []
    for m in _WORD.finditer(text):
        word = m.group().lower()
        out.append(("0" if word.isdigit() else word, m.start(), m.end()))
    return out


@functools.cache
def instruction_grams() -> frozenset[tuple[str, ...]]:
    """Every run of :data:`WINDOW` consecutive words of fanout's instructions."""
    grams: set[tuple[str, ...]] = set()
    for text in instruction_texts():
        run: list[str] = []
        for word, _, _ in [*_tokens(text), (_SLOT, 0, 0)]:
            if word == _SLOT:
                grams.update(tuple(run[i : i + WINDOW]) for i in range(len(run) - WINDOW + 1))
                run = []
            else:
                run.append(word)
    return frozenset(grams)


def _prompt_check(text: str, spans: Sequence[tuple[int, int]]) -> PromptCheck:
    words = _tokens(text)
    grams = instruction_grams()
    echoed = [False] * len(words)
    for i in range(len(words) - WINDOW + 1):
        if tuple(w for w, _, _ in words[i : i + WINDOW]) in grams:
            echoed[i : i + WINDOW] = [True] * WINDOW
    runs = sum(1 for i, e in enumerate(echoed) if e and (i == 0 or not echoed[i - 1]))
    hit = [(a, b) for (_, a, b), e in zip(words, echoed, strict=True) if e]
    fences = [m.span() for m in _FENCE.finditer(text)]
    runs += len(fences)
    hit += fences
    sentences = [text[s:e] for s, e in spans if any(a < e and b > s for a, b in hit)]
    return PromptCheck(ok=runs == 0, count=runs, sentences=sentences)


# --- check 3: citations ----------------------------------------------------------------


def _citation(group: str, subtasks: set[str]) -> list[tuple[int, int]] | None:
    """The number ranges a bracket's text cites, or None when it is not a citation."""
    out: list[tuple[int, int]] = []
    for part in re.split(r"[,;]", group):
        part = part.strip()
        span = _RANGE.fullmatch(part)
        if span:
            out.append((int(span.group(1)), int(span.group(2))))
        elif part.isdigit():
            out.append((int(part), int(part)))
        elif part not in subtasks:
            return None
    return out


def _bad_numbers(ranges: Iterable[tuple[int, int]], known: set[int]) -> list[int]:
    bad: list[int] = []
    for low, high in ranges:
        if low == high:
            bad += [] if low in known else [low]
        elif not 0 < low <= high or high - low > 50:
            bad += [low, high]
        else:
            bad += [n for n in (low, high) if n not in known]
    return bad


# --- check 4: numbers ------------------------------------------------------------------


def _canonical(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def number_values(text: str) -> list[tuple[str, set[str]]]:
    """Each number of ``text`` as written, with the values it may stand for."""
    out: list[tuple[str, set[str]]] = []
    for m in _NUMBER.finditer(text):
        digits, fraction, unit, suffix = m.groups()
        try:
            value = Decimal(digits.replace(",", "") + (fraction or ""))
        except InvalidOperation:  # pragma: no cover - the pattern only matches digits
            continue
        values = {_canonical(value)}
        scale = (unit or suffix or "").lower().replace(" ", "")
        if scale.startswith("%") or "cent" in scale:
            values.add(_canonical(value / 100))
        elif scale in _SCALES:
            values.add(_canonical(value.scaleb(_SCALES[scale])))
        out.append((m.group().strip(), values))
    return out


def _all_values(text: str) -> set[str]:
    return {v for _, values in number_values(text) for v in values}


# --- the checks ------------------------------------------------------------------------


def check_answer(
    text: str,
    *,
    stop_reason: str | None,
    sources: Sequence[Source],
    texts: Mapping[int, Sequence[str]],
    subtask_ids: Sequence[str] = (),
    question: str = "",
) -> AnswerChecks:
    """``answer.checks`` of a model's ``text``.

    Args:
        text: what the model wrote.
        stop_reason: why it stopped (``max_tokens``: cut off).
        sources: the run's numbered sources (:func:`coordinator.sources.number_sources`).
        texts: per source number, its texts (:func:`coordinator.sources.source_texts`).
        subtask_ids: the subtasks with findings (``[market]`` cites their sources).
        question: the job's query (its numbers are the reader's own).
    """
    spans = sentence_spans(text)
    known = {s.n for s in sources}
    subtasks = set(subtask_ids)
    asked = _all_values(question)
    values_of: dict[int, set[str]] = {}
    bad_numbers: list[int] = []
    bad_cites: list[str] = []
    unverified: list[str] = []
    unverified_sentences: list[str] = []
    for start, end in spans:
        sentence = text[start:end]
        # Citations out before numbers are read; so is a list marker opening a line.
        plain, bad = sentence, []
        for m in _CITE.finditer(sentence):
            ranges = _citation(m.group(1), subtasks)
            if ranges is not None:
                bad += _bad_numbers(ranges, known)
                plain = plain.replace(m.group(), " ")
        if bad:
            bad_numbers += bad
            bad_cites.append(sentence)
        plain = _URL.sub(" ", plain)  # a URL's digits are its address, not a claim
        if start == 0 or text[start - 1] == "\n":
            marker = _LIST_MARKER.match(plain)
            plain = plain[marker.end() :] if marker else plain
        numbers = number_values(plain)
        if not numbers:
            continue
        allowed = set(asked)
        for source in cited_sources(sentence, sources, subtask_ids):
            if source.n not in values_of:
                values_of[source.n] = {v for t in texts.get(source.n, ()) for v in _all_values(t)}
            allowed |= values_of[source.n]
        missing = [written for written, values in numbers if not values & allowed]
        if missing:
            unverified += missing
            unverified_sentences.append(sentence)
    cut = stop_reason == "max_tokens"
    return AnswerChecks(
        not_prompt=_prompt_check(text, spans),
        complete=CompleteCheck(ok=not cut, stop_reason=stop_reason if cut else None),
        citations=CitationCheck(
            ok=not bad_numbers, count=len(bad_numbers),
            numbers=sorted(set(bad_numbers)), sentences=bad_cites,
        ),
        numbers=NumberCheck(
            ok=not unverified, count=len(unverified), values=unverified,
            sentences=unverified_sentences,
        ),
        cites_anything=bool(cited_sources(text, sources, subtask_ids)),
    )
