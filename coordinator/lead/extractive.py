"""The extractive answer: the best passages of the findings, each with its ``[n]``.

What the report shows when a model's answer is rejected (DESIGN §7 "Answer checks"), and
the whole answer of a run without a model (retrieval only, "Search first"). It needs no
model and no synthesis: only the report's findings, numbered as the synthesis numbers
them (:mod:`coordinator.sources`). Decisions:

- A passage is what a finding says of one source: a search result's snippet (its title
  when it has none), the first sentences of a page or document read whole (its heading
  lines left out), a compact ``key: value`` rendering of a tool's data. One passage per
  source; a page or document read whole is preferred over its snippet.
- Subtasks are taken by weight (a follow-up by the weight of the gap it was for), the
  covered before the not covered, then in job order; at most :data:`PER_SUBTASK` passages
  each, :data:`MAX_PASSAGES` and :data:`MAX_CHARS` in all, so every subtask with evidence
  is heard before any says more.
- Brackets in a passage become parentheses: a page's own "[3]" must not read as a
  citation of this run's source 3.
- One passage a line, each of its sentences cited (``… [n].``): the answer meets the
  bar a model's does, sentence by sentence. Nothing else is written in fanout's words.

:func:`with_extractive_answer` puts it in a report: ``answer.kind: extractive``, the
sources it cites, and, when a model's text was rejected, a gap of ``lead`` naming why.
"""

from __future__ import annotations

import json
import re
from typing import Any

from coordinator.answer_checks import sentence_spans
from coordinator.job import JobSpec
from coordinator.lead.decompose import LEAD
from coordinator.report import CoverageReport, Section, Source
from coordinator.report_edits import prepend_rows
from coordinator.sources import Evidence, evidence, number_sources, renumbered
from subagents.loop import SubagentRun
from subagents.spec import SubtaskSpec

__all__ = [
    "MAX_CHARS",
    "MAX_PASSAGES",
    "PER_SUBTASK",
    "extractive_answer",
    "passage",
    "with_extractive_answer",
]

MAX_PASSAGES = 8
MAX_CHARS = 2000  # of all passages together
PER_SUBTASK = 3
_PASSAGE_CHARS = 400  # of one passage
_SENTENCES = 3  # of a page or document read whole


def _clip(text: str, limit: int = _PASSAGE_CHARS) -> str:
    """``text`` cut at a word boundary to ``limit`` characters (… marks the cut)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def _plain(text: str) -> str:
    """One line of text: whitespace collapsed, control characters and brackets out."""
    text = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(text.replace("[", "(").replace("]", ")").split())


def _compact(data: Any) -> str:
    """A tool's data as words: ``key: value; …``, lists joined by commas."""
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        return "; ".join(f"{k}: {_compact(v)}" for k, v in data.items())
    if isinstance(data, list):
        return ", ".join(_compact(v) for v in data)
    return json.dumps(data, ensure_ascii=False, default=str)


def _lead_sentences(text: str) -> str:
    """The first sentences of a page or document, its heading lines left out."""
    lines = [ln for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]
    body = " ".join(" ".join(lines).split())
    spans = sentence_spans(body)[:_SENTENCES]
    return body[spans[0][0] : spans[-1][1]] if spans else ""


def _snippet(item: Evidence, text: str) -> str:
    """A search result's snippet as prose. A snippet is a window of its passage, which
    may open with its Markdown heading ("## Why they cope with the cold Sodium ions …"),
    or the end of it where the window cut it: the heading becomes "Why they cope with
    the cold: …", and goes when it only repeats the title or was cut (so does the cut
    mark before it); a sentence cut at its end goes too."""
    text = " ".join(text.split())
    cut = text.startswith("…")  # the window opens mid-passage: the mark stays
    text = text.removeprefix("…").lstrip()
    # A sentence the window cut at its end ("Charging below 0 …") goes when whole
    # sentences come before it.
    whole_sentences = re.match(r"(.*[.!?])\s+[^.!?]*…$", text)
    if whole_sentences is not None:
        text = whole_sentences.group(1)
    for heading in dict.fromkeys(h for h in (item.heading, item.title) if h):
        words = heading.split()
        # The whole heading (its marks before it), or its last words where it was cut.
        for k in range(len(words), 1 if len(words) > 2 else len(words) - 1, -1):
            said = " ".join(words[-k:])
            opening = re.match(rf"(?:#{{1,6}}\s+)?{re.escape(said)}(?:\s+|$)", text)
            if opening is None:
                continue
            rest = text[opening.end():]
            if not rest:
                return heading  # a heading alone: the result's section, in words
            whole = k == len(words) and heading != item.title
            return f"{heading}: {rest}" if whole else rest
    return ("… " if cut else "") + re.sub(r"^#{1,6}\s+", "", text)


def passage(item: Evidence) -> str:
    """What one piece of evidence says, as a passage of the extractive answer ('' if
    nothing)."""
    body = item.body
    if item.document:
        text = _lead_sentences(body) if isinstance(body, str) else _compact(body)
    elif isinstance(body, str):  # a search result: its snippet, else its title
        text = _snippet(item, body) or item.title
    else:
        text = _compact(body)
    return _clip(_plain(text))


def _cited(text: str, n: int) -> str:
    """``text`` with ``[n]`` after each of its sentences, inside the full stop ("… [1].")."""
    out = []
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        if not any(c.isalnum() for c in sentence):
            out.append(sentence)  # a cut mark ("…") says nothing to cite
            continue
        out.append(f"{sentence[:-1]} [{n}]." if sentence.endswith(".") else f"{sentence} [{n}]")
    return " ".join(out)


def _order(report: CoverageReport) -> list[Section]:
    """The sections by weight (a follow-up by its gap's, if heavier), the covered before
    the not covered, then in job order."""
    weights = {o.id: o.weight for o in report.subtasks}
    parent = {o.id: o.followup_of for o in report.subtasks if o.followup_of}
    sections = report.answer.sections

    def key(pair: tuple[int, Section]) -> tuple[float, bool, int]:
        i, s = pair
        weight = weights.get(parent.get(s.subtask_id, ""), s.weight)
        return (-max(weight, s.weight), not s.covered, i)

    return [s for _, s in sorted(enumerate(sections), key=key)]


def extractive_answer(report: CoverageReport) -> tuple[str | None, list[Source]]:
    """The best passages of ``report``'s findings, one a line with its ``[n]``, and the
    sources they cite; ``(None, [])`` when no finding has a passage to quote.

    Works on any report: with or without a model, before or without a synthesis.
    """
    sections = report.answer.sections
    sources, _ = number_sources(sections)
    by_subtask: dict[str, list[Evidence]] = {}
    for item in evidence(sections):
        by_subtask.setdefault(item.subtask_id, []).append(item)
    lines: list[str] = []
    used: set[int] = set()
    chars = 0
    for section in _order(report):
        items = by_subtask.get(section.subtask_id, [])
        # One passage per source: a page or document read whole before its snippet.
        best: dict[int, tuple[str, bool]] = {}
        for item in items:
            text = passage(item)
            if text and (item.n not in best or (item.document and not best[item.n][1])):
                best[item.n] = (text, item.document)
        taken = 0
        for n, (text, _) in best.items():
            if taken == PER_SUBTASK or len(lines) == MAX_PASSAGES:
                break
            if n in used or chars + len(text) > MAX_CHARS:
                continue
            lines.append(_cited(text, n))
            used.add(n)
            chars += len(text)
            taken += 1
    if not lines:
        return None, []
    # Numbered 1, 2, … as the passages cite them: the list under them has no holes.
    text, cited, _ = renumbered("\n".join(lines), sources, ())
    return text, cited


def with_extractive_answer(report: CoverageReport, reason: str | None) -> CoverageReport:
    """``report`` answered extractively (``answer.kind: extractive``).

    ``reason`` says why a model's answer was rejected: a gap of ``lead`` names it
    (trigger ``answer_rejected``, no category, route ``gap``, weight 0: coverage stays
    what the research earned). When ``lead`` has a gap already (its plan failed), that
    gap stays what it is, first failure first, and its message adds the rejection: one
    gap per subtask. ``None``: nothing was rejected (a run without a model), no gap.
    The rest of the answer (``rejected``, ``checks``) is left as it is.
    """
    text, sources = extractive_answer(report)
    answer = report.answer.model_copy(
        update={"text": text, "sources": sources, "kind": "extractive"}
    )
    report = report.model_copy(update={"answer": answer})
    if reason is None:
        return report
    return _with_rejection_gap(report, reason)


def _with_rejection_gap(report: CoverageReport, reason: str) -> CoverageReport:
    message = f"the model's answer was rejected: {reason}; the answer shown is extractive"
    gaps = report.gaps
    existing = next((i for i, g in enumerate(gaps) if g.subtask_id == LEAD), None)
    if existing is not None:
        old = gaps[existing]
        merged = old.model_copy(update={"message": f"{old.message}; and {message}"})
        return report.model_copy(
            update={"gaps": [*gaps[:existing], merged, *gaps[existing + 1 :]]}
        )
    spec = SubtaskSpec(id=LEAD, query=report.query, planner="model", weight=0.0)
    run = SubagentRun.for_subtask(spec)
    run.state = "escalated"
    run.escalate("answer_rejected", message, alternatives=_alternatives(reason))
    job = JobSpec(query=report.query, subtasks=[spec])
    return prepend_rows(report, job, [run.result()], route_overrides={LEAD: "gap"})


def _alternatives(reason: str) -> tuple[str, ...]:
    out = ["read the extractive answer: each passage is quoted from its source [n]"]
    if "cut off" in reason:
        out.append("raise model.max_tokens (ask --max-tokens N), or ask a shorter question")
    if "instructions" in reason or "cites none" in reason:
        out.append("synthesize with a model that follows instructions (a larger one)")
    return tuple(out)
