"""The lead agent's synthesis: an answer that cites its sources and says what is missing.

The lead model is shown the numbered sources (:mod:`coordinator.sources`), every finding
(cut to a budget, each marked with its subtask, its coverage and its sources' numbers)
and every gap (subtask, category, trigger, what was tried, alternatives), and told to
cite ``[n]`` after each claim and to say what is missing. Its text is checked
(:func:`coordinator.lead.checks.check_answer`, ``answer.checks``); one that passes becomes
``answer.text`` (``answer.kind: model``, its citations renumbered over the sources it
cites) and ``answer.sources`` are the sources it cites.
One that echoes fanout's instructions, was cut off, cites a source the run does not
have, or cites nothing while there are sources is not the answer: it goes to
``answer.rejected``, the answer is extractive (:mod:`coordinator.lead.extractive`) and a
gap of ``lead`` says why. What pages and
documents say is data: it is shown inside a marked block the model is told never to take
instructions from. Everything else in the report (``answer.missing``, the gaps) stays
fanout's own, whatever the model writes. A synthesis that fails leaves the report whole,
with ``answer.synthesis_error``.
"""

from __future__ import annotations

from typing import Any

from coordinator.answer_checks import rejection_reason
from coordinator.lead.checks import check_answer
from coordinator.lead.decompose import LeadContext
from coordinator.lead.extractive import with_extractive_answer
from coordinator.lead.streaming import AnswerStream
from coordinator.lead.synthesis_prompt import SYSTEM, fitted_prompt
from coordinator.report import CoverageReport
from coordinator.sources import number_sources, renumbered, source_texts
from subagents.models.base import UserMessage
from subagents.models.endpoints.facts import EndpointFacts
from subagents.planners.search import probe_endpoint_of


async def synthesize(report: CoverageReport, lead: LeadContext) -> CoverageReport:
    """The report with the lead's answer text, or with its synthesis error."""
    answer = report.answer
    update: dict[str, Any]
    meter = lead.meter
    spent = None if meter is None else meter.spent()
    if meter is not None and spent is not None:
        # The subagents (and calls under way when they stopped) ate the reserve: the
        # report stands without the lead's text, and says why (docs/design.md §13, job.budget).
        error = {
            "errorCategory": "business",
            "error_type": "budget_spent",
            "trigger": "threshold_breach",
            "message": f"no synthesis: the job's token budget is spent ({spent})",
        }
        update = {"text": None, "synthesis_error": error}
        return report.model_copy(update={"answer": answer.model_copy(update=update)})
    left = None if meter is None else meter.output_left()
    # The synthesis may not write past the output budget: its max_tokens is cut to it.
    cap = None if left is None else max(1, min(left, lead.model.max_tokens))
    await probe_endpoint_of(lead.client)
    facts = getattr(lead.client, "facts", None)
    fitted, prompt, cut = fitted_prompt(report, facts, cap or lead.model.max_tokens)
    # No window known: the model block's own max_tokens (or the budget's cap), as ever,
    # but for a local server's bound (subagents.models.endpoints.facts.UNSTATED_LOCAL_MAX_TOKENS).
    sent = fitted if isinstance(facts, EndpointFacts) and (facts.window or facts.local) else cap
    # The answer streams as it is written (docs/design.md §8); the checks run on the final text.
    stream = None if lead.progress is None else AnswerStream(lead.progress, lead.clock)
    result, turn = await lead.call(SYSTEM, [UserMessage(prompt)], max_tokens=sent, stream=stream)
    if (
        turn is None
        and result.error_type == "context_length"
        and isinstance(facts, EndpointFacts)
        and facts.window is not None
    ):
        # The endpoint named its window in the refusal: the findings are cut to fit it
        # and the answer asked for once more (docs/design.md §7, "Fitting a local server").
        fitted, prompt, cut = fitted_prompt(report, facts, cap or lead.model.max_tokens)
        if stream is not None:
            stream.restart()
        result, turn = await lead.call(
            SYSTEM, [UserMessage(prompt)], max_tokens=fitted, stream=stream
        )
    if cut:
        answer = answer.model_copy(update={"missing": [*answer.missing, *cut]})
        report = report.model_copy(update={"answer": answer})
    if turn is None:
        update = {"text": None, "synthesis_error": result.to_wire()}
        if stream is not None:
            stream.final(None, None, f"no answer: {result.message or result.error_type}")
        return report.model_copy(update={"answer": answer.model_copy(update=update)})
    report, reason = checked_answer(report, turn.text, turn.stop_reason)
    if stream is not None:
        # Every view replaces the streamed text with the checked answer (docs/design.md §8).
        stream.final(report.answer.text, report.answer.kind, reason)
    return report


def with_model_answer(report: CoverageReport, text: str, stop_reason: str | None) -> CoverageReport:
    """``report`` with the model's answer ``text`` checked: as ``answer.text`` when it
    passes, else rejected for the extractive answer (docs/design.md §7 "Answer checks")."""
    return checked_answer(report, text, stop_reason)[0]


def checked_answer(
    report: CoverageReport, text: str, stop_reason: str | None
) -> tuple[CoverageReport, str | None]:
    """:func:`with_model_answer`, and why the text was rejected (None: it is the answer)."""
    answer = report.answer
    # Sources are those the text cites by number (or, as scripted turns written before
    # numbered sources do, by a subtask id with findings); naming a gap is not citing it.
    # The text is checked as it is shown: its citations renumbered over the sources it
    # cites (the model saw the run's numbering; the reader sees a list without holes).
    ids = [s.subtask_id for s in answer.sections if s.findings]
    sources, _ = number_sources(answer.sections)
    # Any subtask's id in brackets goes: one without sources (a gap's) cites nothing.
    shown, cited, new = renumbered(text, sources, [s.subtask_id for s in answer.sections])
    texts = source_texts(answer.sections)
    checks = check_answer(
        shown,
        stop_reason=stop_reason,
        sources=cited,
        texts={new[n]: t for n, t in texts.items() if n in new},
        subtask_ids=ids,
        question=answer.query,
    )
    reason = rejection_reason(checks.model_dump(), has_sources=bool(sources))
    if reason is None:
        update = {"text": shown, "sources": cited, "kind": "model", "checks": checks,
                  "verified": True}
        return report.model_copy(update={"answer": answer.model_copy(update=update)}), None
    rejected = answer.model_copy(update={"rejected": text, "checks": checks})
    return with_extractive_answer(report.model_copy(update={"answer": rejected}), reason), reason
