"""The answer's checks as a report carries them (docs/design.md §7 "Answer checks"), and the
sentences they name.

``answer.checks`` holds, for the text a model wrote, four checks with counts and the
sentences that fail: ``not_prompt`` (no run of 12 or more words of fanout's own
instructions), ``complete`` (not cut off), ``citations`` (every ``[n]`` names a source
of this run), ``numbers`` (every number of a sentence is in a source it cites); and
``cites_anything``. They are computed by :mod:`coordinator.lead.checks`; this module
holds only the wire models and the sentence splitter, so the report and the views can
import them without the lead. One splitter for the checks and the views: a view finds
the sentences a check names by splitting the text the same way.

``answer.kind`` says who wrote ``answer.text``: ``model`` (a model's text that passed
checks 1, 2 and 3 and cites something when there are sources) or ``extractive`` (passages
quoted from the findings, each with its ``[n]``: the model's text was rejected, or there
was no model). Absent when nobody wrote an answer (no model, or a synthesis that failed),
so such reports are byte-identical to before; an extractive answer with nothing to quote
is ``kind: extractive`` with ``text`` null. The rejected text is ``answer.rejected``, and
``answer.checks`` are always the model's text's (of ``rejected`` when it was rejected):
the extractive answer quotes its sources, each sentence cited, and is not checked again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AnswerChecks",
    "AnswerKind",
    "CitationCheck",
    "CompleteCheck",
    "NumberCheck",
    "PromptCheck",
    "rejection_reason",
    "sentence_spans",
]

AnswerKind = Literal["model", "extractive"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class PromptCheck(BaseModel):
    """Check 1: no run of 12 or more consecutive words of fanout's own instructions.

    ``count`` is the number of echoed runs (each 12 words or longer).
    """

    model_config = _FROZEN

    ok: bool
    count: int = 0
    sentences: list[str] = Field(default_factory=list)


class CompleteCheck(BaseModel):
    """Check 2: the model was not cut off (``stop_reason`` is named when it was)."""

    model_config = _FROZEN

    ok: bool
    stop_reason: str | None = Field(default=None, exclude_if=lambda v: v is None)


class CitationCheck(BaseModel):
    """Check 3: every ``[n]`` names a source of this run.

    ``count`` is the number of citations that name none; ``numbers`` the numbers they use.
    """

    model_config = _FROZEN

    ok: bool
    count: int = 0
    numbers: list[int] = Field(default_factory=list)
    sentences: list[str] = Field(default_factory=list)


class NumberCheck(BaseModel):
    """Check 4: every number of a sentence appears in a source that sentence cites.

    ``count`` is the number of unverified numbers; ``values`` them as written.
    """

    model_config = _FROZEN

    ok: bool
    count: int = 0
    values: list[str] = Field(default_factory=list)
    sentences: list[str] = Field(default_factory=list)


class AnswerChecks(BaseModel):
    """``answer.checks``: what the model's text was checked for, and what failed."""

    model_config = _FROZEN

    not_prompt: PromptCheck
    complete: CompleteCheck
    citations: CitationCheck
    numbers: NumberCheck
    cites_anything: bool


# A sentence ends at . ! ? (or …) followed by space and not by a lowercase letter; a
# decimal point never is, nor the full stop of a common abbreviation ("e.g.", "approx.")
# or of an initial ("J. Smith"). The text is split into lines first: a sentence never
# spans a line break (a list item is a sentence).
_END = re.compile(r"[.!?…][\"')\]]*\s+(?=[^\s])")
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "vs", "cf", "approx", "ca", "no", "nos", "fig", "figs", "dr", "mr",
     "mrs", "ms", "st", "u.s", "u.k", "e.u", "incl", "esp", "al", "vol", "p", "pp", "ed"}
)
_WORD_BEFORE = re.compile(r"([\w.]+)$")
# Citations written after the full stop ("… 45 %. [2]") belong to the sentence before.
_LEADING_CITES = re.compile(r"(?:\[[^\[\]\n]{1,200}\]\s*)+")


def _ends_sentence(line: str, stop: int, after: int) -> bool:
    """Whether the punctuation at ``stop``, followed by space up to ``after``, ends one."""
    if line[after].islower():
        return False
    if line[stop] != ".":
        return True
    word = _WORD_BEFORE.search(line, 0, stop)
    if word is None:
        return True
    token = word.group(1).lower().strip(".")
    if token in _ABBREVIATIONS:
        return False
    if token.isdigit() and not line[: word.start()].strip():
        return False  # "1. " opening a line is a list marker, not a sentence
    # An initial ("J. Smith"): one capital after a space; "-20 °C. Then" ends a sentence.
    initial = len(token) == 1 and token.isalpha() and line[word.start()].isupper()
    return not (initial and (word.start() == 0 or line[word.start() - 1].isspace()))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``, stripped, in order; never across lines."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        line_spans: list[list[int]] = []
        start = 0
        for match in _END.finditer(line):
            if _ends_sentence(line, match.start(), match.end()):
                line_spans.append([start, match.end()])
                start = match.end()
        line_spans.append([start, len(line)])
        merged: list[list[int]] = []
        for span in line_spans:
            lead = _LEADING_CITES.match(line, span[0], span[1])
            if merged and lead is not None:
                merged[-1][1] = lead.end()
                span[0] = lead.end()
            merged.append(span)
        for start, end in merged:
            piece = line[start:end]
            stripped = piece.strip()
            if stripped:
                first = start + (len(piece) - len(piece.lstrip()))
                spans.append((offset + first, offset + first + len(stripped)))
        offset += len(line) + 1
    return spans


def rejection_reason(checks: Mapping[str, Any] | None, *, has_sources: bool) -> str | None:
    """Why a model's answer (its checks, as wire data) is not the answer; None if it is.

    ``has_sources``: whether the run has sources (citing nothing fails only then).
    """
    if not checks:
        return None
    reasons: list[str] = []
    prompt = checks.get("not_prompt") or {}
    if prompt.get("ok") is False:
        runs = int(prompt.get("count", 0))
        reasons.append(
            f"it repeats fanout's own instructions ({runs} run{'s' if runs != 1 else ''} "
            "of 12 or more words)"
        )
    complete = checks.get("complete") or {}
    if complete.get("ok") is False:
        reasons.append("it was cut off by model.max_tokens")
    # Decision (docs/design.md §7 names checks 1, 2 and citing nothing; issue #30 asks that a
    # shown answer pass checks 1-3): a ``[n]`` that names no source of this run is a
    # citation the reader cannot follow, as unverifiable as none, so it rejects too.
    citations = checks.get("citations") or {}
    if citations.get("ok") is False:
        count = int(citations.get("count", 0))
        reasons.append(
            f"it cites {count} source{'s' if count != 1 else ''} this run does not have"
        )
    if has_sources and checks.get("cites_anything") is False:
        reasons.append("it cites none of the sources")
    return "; ".join(reasons) or None
