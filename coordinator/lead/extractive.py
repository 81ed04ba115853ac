"""The extractive answer: the sentences of the findings that best answer the question.

What the report shows when a model's answer is rejected (docs/design.md §7 "Answer checks"), and
the whole answer of a run without a model (retrieval only, "Search first"). It needs no
model and no synthesis: only the report's findings, numbered as the synthesis numbers
them (:mod:`coordinator.sources`). Decisions:

- **Sentences, not snippets.** Candidates are the *segments* of what the findings say
  (:mod:`subagents.research.relevance`): sentences of prose, code blocks and command
  lines whole, list items, a label line with the sentence it introduces. They come from
  every passage a search returned (several of one document when the search gave
  several), from a page or document read whole, and from a tool's data (as ``key:
  value``). Each is scored against its subtask's query by weighted term coverage, a
  term found in most candidates counting less, a term of the passage's title or heading,
  or of the label of the entry the sentence is in ("The default setting … is 2000."
  under "Maximum Number Of Columns"), counting (nearly) as if the sentence said it,
  raised a little by its passage's rank. A
  sentence that loses what the question asks to keep (``relevance.contradicts``: "Undo
  commits permanently" for "… but keep the changes") keeps a fifth of its score.
  A sentence that refers back ("… with this code, …") is one candidate with the
  sentence before it.
- **Shown in document order.** The best few of each subtask (:data:`PER_SUBTASK`, up
  to :data:`MAX_PASSAGES` when the question is the only subtask) are shown grouped by
  source and, within a source, in the order the document has them; each line cites its
  ``[n]``.
- **Quoted exactly.** A segment is the source's text with its whitespace collapsed,
  nothing else changed: a page's own brackets stay as written (views escape them where
  their markup needs it). A code block keeps its lines and is shown fenced as code.
- Subtasks are taken by weight (a follow-up by the weight of the gap it was for), the
  covered before the not covered, then in job order, within :data:`MAX_CHARS`, so every
  subtask with evidence is heard before any says more. Nothing is written in fanout's
  words.

:func:`with_extractive_answer` puts it in a report: ``answer.kind: extractive``,
``answer.verified: false`` (no model read it), the sources it cites, and, when a model's
text was rejected, a gap of ``lead`` naming why.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from typing import Any

from coordinator.job import JobSpec
from coordinator.report import CoverageReport, Section, Source, prepend_rows
from coordinator.sources import Evidence, evidence, number_sources
from subagents.research.relevance import (
    NUMBER,
    Segment,
    Terms,
    asks_for,
    contradicting,
    entry_labels,
    held_terms,
    introduces,
    refers_back,
    segments,
)
from subagents.result import LEAD
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec

__all__ = [
    "MAX_CHARS",
    "MAX_PASSAGES",
    "PER_SUBTASK",
    "extractive_answer",
    "passage",
    "with_extractive_answer",
]

MAX_PASSAGES = 8  # lines of the answer, at most
MAX_CHARS = 2000  # of all lines together
PER_SUBTASK = 3  # lines per subtask when there are several …
_ALONE = MAX_PASSAGES  # … and when the question is the only one (within MAX_CHARS)
_SEGMENT_CHARS = 600  # of one line (a longer code block is cut at a line end)
_TEXT_CHARS = 20_000  # of a document read whole, looked at for sentences
_DENSE = 120  # characters a segment may have before its length lowers its score
_CONTRADICTED = 0.2  # of its score a sentence keeps that loses what the question keeps
# A sentence's similarity to the question (its piece's) above the floor, times the
# weight, is added to its score, before the kind of answer asked for multiplies it.
# Measured on the answers benchmark's sets: a "how do I" question is asked in the
# user's words about a task and answered in a manual's words about an option ("stash
# the new files I haven't added" — "-u, --include-untracked"), where meaning decides
# more (5: git .68 → .76 against 3); a question naming the property it asks about
# ("the maximum number of columns", "the default threading mode") is answered in its
# own words, where MiniLM's similarity is the noisier judge (5 there: sqlite .74 → .63,
# and a wrong answer claiming coverage).
_MEANING = 3.0
_MEANING_WAY = 5.0
_MEANING_FLOOR = 0.3


def _similarity(item: Evidence, start: int, end: int) -> float:
    """The similarity to the question of the pieces of ``item``'s snippet that characters
    ``start:end`` overlap (0.0 without embeddings)."""
    return max((sim for s, e, sim in item.pieces if s < end and start < e), default=0.0)


def _compact(data: Any) -> str:
    """A tool's data as words: ``key: value; …``, lists joined by commas."""
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        return "; ".join(f"{k}: {_compact(v)}" for k, v in data.items())
    if isinstance(data, list):
        return ", ".join(_compact(v) for v in data)
    return json.dumps(data, ensure_ascii=False, default=str)


def _printable(text: str) -> str:
    """``text`` with control characters (but newlines) as spaces."""
    return "".join(c if c.isprintable() or c == "\n" else " " for c in text)


def passage(item: Evidence) -> str:
    """The text one piece of evidence offers the answer ('' if nothing): a search's
    passage, a document's text, a tool's data as words."""
    body = item.body
    if isinstance(body, str):
        text = body[:_TEXT_CHARS] if item.document else body
        return _printable(text) if text.strip() else (_printable(item.title) if not
                                                        item.document else "")
    return _printable(_compact(body))


def _line(text: str, seg: Segment, n: int) -> str:
    """One line of the answer: the segment quoted, whitespace collapsed (a code block's
    lines kept, fenced), cited."""
    quoted = text[seg.start:seg.end]
    if seg.kind == "code":
        lines = quoted.split("\n")
        label = ""
        if lines and lines[0].strip() and not lines[0].startswith((" ", "\t")):
            label, lines = " ".join(lines[0].split()), lines[1:]  # the label line
        code = textwrap.dedent("\n".join(ln.rstrip() for ln in lines)).strip("\n")
        if len(code) > _SEGMENT_CHARS:
            code = code[:code.rfind("\n", 0, _SEGMENT_CHARS)].rstrip() or code[:_SEGMENT_CHARS]
        head = f"{label} [{n}]:\n" if label else ""
        tail = "" if label else f" [{n}]"
        return f"{head}```\n{code}\n```{tail}"
    words = " ".join(quoted.split())
    if len(words) > _SEGMENT_CHARS:
        cut = words[:_SEGMENT_CHARS]
        words = cut[:cut.rfind(" ")] if " " in cut else cut
    return f"{words} [{n}]"


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


def _candidate(text: str, segs: list[Segment], at: int) -> Segment:
    """Segment ``at`` as the answer quotes it: with the sentence before it when it refers
    back to it."""
    seg = segs[at]
    if refers_back(text, segs, at):
        return Segment(segs[at - 1].start, seg.end, "sentence", segs[at - 1].labelled)
    return seg


def _pick(items: list[Evidence], query: str, count: int) -> list[tuple[Evidence, str, Segment]]:
    """The ``count`` segments of ``items`` that best answer ``query``, in the order their
    sources and documents have them."""
    terms = Terms.of(query)
    numeric = _ASKS_VALUE.search(query) is not None
    meaning = _MEANING_WAY if asks_for(query) == "way" else _MEANING
    place = _ASKS_PLACE.search(query) is not None
    cands: list[tuple[float, int, Evidence, str, Segment]] = []
    texts = [passage(item) for item in items]
    seen: set[str] = set()
    local = _local_weights(terms, texts)
    for rank, (item, text) in enumerate(zip(items, texts, strict=True)):
        # What the page and section are about, every sentence under them is about
        # ("The default mode is serialized." under "Multi-Threaded"): a term of their
        # title or heading counts for each nearly as if it said it — the sentences are
        # told apart by the rest of the question, not by repeating the page's subject
        # (one that says it wins a tie).
        context = terms.present(f"{item.title} {item.heading}")
        segs = segments(text)
        against = contradicting(query, text, segs)
        said = held_terms(terms, text, segs)
        # An entry's label says what its sentences are about, as a heading does ("The
        # default setting … is 2000." under "Maximum Number Of Columns").
        about = [[c or h for c, h in zip(context, terms.present(label), strict=True)]
                 if label else context for label in entry_labels(text, segs)]
        announced: float | None = None  # the score of a sentence announcing this one
        before: float | None = None  # the score of the sentence before, in its paragraph
        for at in range(len(segs)):
            # "If the script exits with this code, …" says nothing without the sentence
            # before it ("The special exit code 125 …"): quoted together.
            seg = _candidate(text, segs, at)
            key = " ".join(text[seg.start:seg.end].split()).lower()
            if not key or key in seen:
                announced = before = None
                continue  # the same words from another passage or another name
            seen.add(key)
            hits = said[at]
            if seg.start < segs[at].start:  # with the sentence it refers back to
                hits = [a or b for a, b in zip(hits, said[at - 1], strict=True)]
            score = sum(w * lw * (1.0 if h else 0.9 if c else 0.0) for w, lw, h, c in
                        zip(terms.weights, local, hits, about[at], strict=True))
            # A long sentence holds more words by its length alone: the denser one wins.
            score /= 1.0 + max(0, seg.end - seg.start - _DENSE) / (4 * _DENSE)
            quoted = text[seg.start:seg.end]
            # Near the question in meaning (the search's embeddings of the snippet's
            # pieces): what the words alone miss ("like pop, but do not remove the
            # state" for "… back without deleting the stash").
            score += meaning * max(0.0, _similarity(item, segs[at].start, seg.end)
                                   - _MEANING_FLOOR)
            # The kind of answer asked for, of two sentences alike in words and meaning.
            if numeric and NUMBER.search(quoted):
                score *= 1.3  # "how many", "what … by default": a value answers
            if place and _PATH.search(quoted):
                score *= 1.3  # "where does … save": a path answers
            score += 0.15 * _pairs(terms, quoted)
            # A passage the search ranked higher is a little more likely to answer.
            score += 0.1 / (1 + rank)
            if against[at]:
                # "Undo commits permanently: git reset --hard" for "undo … but keep the
                # changes": the question's words, and the opposite of its answer.
                score *= _CONTRADICTED
            if announced is not None:
                # "… configure APT as the following:" is answered by the command after
                # it: what a sentence announces is worth (just less than) the sentence.
                score = max(score, announced - 1e-6)
            if introduces(text, segs, at):
                if before is not None:
                    # "… so other programs can invoke it. You can change it by the
                    # following." The announcement continues the sentence before it.
                    score = max(score, before - 1e-6)
                announced = score
            else:
                announced = None
            joined = at + 1 < len(segs) and not _BLANK.search(
                text, seg.end, segs[at + 1].start)
            before = score if joined and seg.kind == "sentence" else None
            cands.append((score, rank, item, text, seg))
    cands.sort(key=lambda c: (-c[0], c[1], c[4].start))
    # A sentence far weaker than the best is no part of the answer (the best of an
    # unrelated passage is not quoted to fill the lines).
    floor = 0.3 * cands[0][0] if cands and terms else 0.0
    chosen: list[tuple[float, int, Evidence, str, Segment]] = []
    for cand in cands:
        if len(chosen) == count or cand[0] < floor:
            break
        if any(c[3] is cand[3] and c[4].start < cand[4].end and cand[4].start < c[4].end
               for c in chosen):
            continue  # a sentence quoted already, with the one that refers back to it
        chosen.append(cand)
    # Document order: by source number, then by where the passage is in its document.
    chosen.sort(key=lambda c: (c[2].n, c[2].start or 0, c[4].start))
    return [(item, text, seg) for _, _, item, text, seg in chosen]


_ASKS_VALUE = re.compile(
    r"\bhow (?:many|much|long|large|big|old|often)\b|\b(?:default|maximum|minimum|limit|"
    r"port|size|number|exit code|priority)\b", re.IGNORECASE)
_BLANK = re.compile(r"\n\s*\n")
_ASKS_PLACE = re.compile(r"\bwhere (?:is|are|does|do|can|should|will)\b", re.IGNORECASE)
# A file's path: "~/.git-credentials", "$XDG_CONFIG_HOME/git/credentials", "/etc/fstab".
_PATH = re.compile(r"(?<![\w<>/])(?:~|\$\{?[A-Za-z_]\w*\}?|\.{1,2})?/[\w.-]*[\w-]")


def _pairs(terms: Terms, text: str) -> float:
    """The weight of the query's neighbouring terms found side by side in ``text``
    ("page size", "default mode"): a phrase of the question, not just its words."""
    words = [w.lower() for w in re.findall(r"[\w-]+", text)]
    stems = terms.stems
    total = 0.0
    for k in range(len(stems) - 1):
        a, b = stems[k].split("|")[0], stems[k + 1].split("|")[0]
        for i in range(len(words) - 1):
            if words[i].startswith(a) and any(w.startswith(b) for w in words[i + 1:i + 3]):
                total += terms.weights[k] + terms.weights[k + 1]
                break
    return total


def _local_weights(terms: Terms, texts: list[str]) -> list[float]:
    """Per term: how well it tells these texts apart (a term in all of them, little)."""
    held = [terms.present(t) for t in texts]
    n = len(texts)
    return [math.log(1.0 + n / (1 + sum(h[k] for h in held))) + 0.5
            for k in range(len(terms.words))]


def extractive_answer(report: CoverageReport) -> tuple[str | None, list[Source]]:
    """The sentences of ``report``'s findings that best answer each subtask's query, one
    a line with its ``[n]``, and the sources they cite; ``(None, [])`` when no finding
    has a sentence to quote.

    Works on any report: with or without a model, before or without a synthesis.
    """
    sections = report.answer.sections
    sources, _ = number_sources(sections)
    by_subtask: dict[str, list[Evidence]] = {}
    for item in evidence(sections):
        by_subtask.setdefault(item.subtask_id, []).append(item)
    per = _ALONE if len(sections) == 1 else PER_SUBTASK
    picked: list[tuple[int, str, Segment]] = []
    chars = 0
    for section in _order(report):
        items = by_subtask.get(section.subtask_id, [])
        if not items:
            continue
        for item, text, seg in _pick(items, section.query, per):
            if len(picked) == MAX_PASSAGES:
                break
            size = len(_line(text, seg, item.n))
            if chars + size > MAX_CHARS:
                continue
            picked.append((item.n, text, seg))
            chars += size
    if not picked:
        return None, []
    # Numbered 1, 2, … in the order the lines cite them, so the list under them has no
    # holes; only fanout's own citations are numbered (a page's "[4]" stays as written).
    new: dict[int, int] = {}
    for n, _, _ in picked:
        new.setdefault(n, len(new) + 1)
    lines = [_line(text, seg, new[n]) for n, text, seg in picked]
    cited = sorted((s.model_copy(update={"n": new[s.n]}) for s in sources if s.n in new),
                   key=lambda s: s.n)
    return "\n".join(lines), cited


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
        update={"text": text, "sources": sources, "kind": "extractive", "verified": False}
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
