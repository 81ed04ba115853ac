"""What every view marks in the answer (docs/design.md §7 "Answer checks"): an extractive answer
as such, and the sentences whose numbers or citations failed their check.

Pure functions of the answer's wire data, shared by the terminal, Markdown and HTML
views (the service page shows the HTML report), so they mark the same sentences with the
same words. The sentences are found again by splitting the text as the checks did
(:func:`coordinator.answer_checks.sentence_spans`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator.answer_checks import rejection_reason, sentence_spans

__all__ = ["NOT_CHECKED", "UNVERIFIED", "extractive_note", "marked_lines", "nothing_missing"]

UNVERIFIED = "⚠ unverified number"
NOT_CHECKED = "found, not checked"
"""What every view says of an answer no model read (``answer.verified: false``)."""
NO_SUCH_SOURCE = "⚠ cites no source of this run"


def extractive_note(answer: Mapping[str, Any]) -> str | None:
    """The line that marks an extractive answer, or None for any other."""
    if answer.get("kind") != "extractive":
        return None
    if "rejected" in answer or "checks" in answer:
        reason = rejection_reason(answer.get("checks"), has_sources=bool(answer.get("sources")))
        note = (
            f"extractive: the model's answer was rejected because {reason}"
            if reason
            else "extractive: the model's answer was rejected"
        )
    else:
        note = "extractive: no model wrote or read this answer"
    if answer.get("text"):
        return (f"{note}; {NOT_CHECKED}: each passage below is quoted from its source [n], "
                "whether it answers the question is for you to judge")
    return note + "; no finding had a passage to quote"


def nothing_missing(answer: Mapping[str, Any]) -> str:
    """What a view says where no gap is open: "fully covered" only of an answer a model
    read and that passed its checks, or of a report without a written answer."""
    if answer.get("verified") is False:
        return f"no gap in the search, but the passages were {NOT_CHECKED}"
    return "nothing: fully covered"


def _marks(sentence: str, checks: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    numbers = checks.get("numbers") or {}
    if sentence in (numbers.get("sentences") or []):
        values = [str(v) for v in numbers.get("values") or [] if str(v) in sentence]
        out.append(UNVERIFIED + (f": {', '.join(dict.fromkeys(values))}" if values else ""))
    citations = checks.get("citations") or {}
    if sentence in (citations.get("sentences") or []):
        bad = [f"[{n}]" for n in citations.get("numbers") or [] if str(n) in sentence]
        out.append(NO_SUCH_SOURCE + (f": {' '.join(bad)}" if bad else ""))
    return out


def marked_lines(answer: Mapping[str, Any]) -> list[list[tuple[str, list[str]]]] | None:
    """A model's answer, line by line (blank lines left out), as its sentences with their
    marks; None when nothing is marked (views then show the text as they always did)."""
    checks = answer.get("checks")
    text = answer.get("text")
    if answer.get("kind") != "model" or not checks or not text:
        return None
    numbers = (checks.get("numbers") or {}).get("sentences") or []
    citations = (checks.get("citations") or {}).get("sentences") or []
    if not numbers and not citations:
        return None
    lines: list[list[tuple[str, list[str]]]] = []
    for line in str(text).split("\n"):
        if line.strip():
            lines.append([(line[a:b], _marks(line[a:b], checks)) for a, b in sentence_spans(line)])
    return lines
