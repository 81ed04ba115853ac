"""The lead agent's synthesis: an answer that names its sources and what is missing.

The lead model is shown every finding (cut to a budget, each marked with its subtask and
coverage) and every gap (subtask, category, trigger, what was tried, alternatives), and
told to name the subtask behind each claim and to say what is missing. Its text becomes
``answer.text``; ``answer.sources`` are the subtask ids the text names. Everything else
in the report (``answer.missing``, the gaps) stays fanout's own, whatever the model
writes. A synthesis that fails leaves the report whole, with ``answer.synthesis_error``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from coordinator.lead.decompose import LeadContext
from coordinator.report import CoverageReport
from subagents.models.base import UserMessage

_FINDING_CHARS = 1200  # of one finding's data
_TOTAL_CHARS = 24000  # of all findings together

SYSTEM = """You are the lead of a research job. Subagents researched parts of the question; \
their findings and the gaps in their coverage follow. Write the answer to the question \
from the findings only.

- After each claim, name the subtask it comes from in square brackets, e.g. [market].
- Do not state anything the findings do not support.
- End with a section "Not covered" that says, for each gap, what is missing and why, in \
plain words; if there are no gaps, say the answer is fully covered."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def synthesis_prompt(report: CoverageReport) -> str:
    """The findings and the gaps, as the lead model is shown them."""
    answer = report.answer
    lines = [f"Question: {answer.query}", f"Coverage: {answer.coverage:.0%}", "", "Findings:"]
    budget = _TOTAL_CHARS
    followup_of = {o.id: o.followup_of for o in report.subtasks if o.followup_of}
    for section in answer.sections:
        mark = "covered" if section.covered else f"{section.status}, not covered"
        if section.subtask_id in followup_of:
            mark += f", follow-up of {followup_of[section.subtask_id]}"
        lines.append(f"[{section.subtask_id}] ({mark}) {section.query}")
        if not section.findings:
            lines.append("  (no findings)")
        for finding in section.findings:
            data = json.dumps(finding.data, ensure_ascii=False, default=str)
            shown = _clip(data, min(_FINDING_CHARS, max(budget, 80)))
            budget -= len(shown)
            partial = "" if finding.complete else " (partial)"
            lines.append(f"  - {finding.tool}{partial}: {shown}")
    lines += ["", "Gaps:"]
    if not report.gaps:
        lines.append("  (none)")
    for gap in report.gaps:
        lines.append(
            f"[{gap.subtask_id}] {gap.category or 'no category'} / {gap.trigger} "
            f"(route {gap.route}): {gap.message}"
        )
        lines.append(f"  tried: {gap.attempted_query}")
        if gap.alternatives:
            lines.append("  alternatives: " + "; ".join(gap.alternatives))
        if gap.filled_by:
            lines.append("  filled by the follow-up " + ", ".join(gap.filled_by))
    return "\n".join(lines)


def cited(text: str, subtask_ids: list[str]) -> list[str]:
    """The subtask ids the text names in square brackets, in job order."""
    named = set(re.findall(r"\[([A-Za-z0-9_, -]+)\]", text))
    parts = {p.strip() for group in named for p in group.split(",")}
    return [sid for sid in subtask_ids if sid in parts]


async def synthesize(report: CoverageReport, lead: LeadContext) -> CoverageReport:
    """The report with the lead's answer text, or with its synthesis error."""
    prompt = synthesis_prompt(report)
    result, turn = await lead.call(SYSTEM, [UserMessage(prompt)])
    answer = report.answer
    update: dict[str, Any]
    if turn is None:
        update = {"text": None, "synthesis_error": result.to_wire()}
    else:
        # Sources are the subtasks with findings the text names; naming a gap is not
        # citing it.
        ids = [s.subtask_id for s in answer.sections if s.findings]
        update = {"text": turn.text, "sources": cited(turn.text, ids)}
        if turn.stop_reason == "max_tokens":
            update["synthesis_error"] = {
                "message": "the answer was cut off by model.max_tokens",
                "stop_reason": "max_tokens",
            }
    return report.model_copy(update={"answer": answer.model_copy(update=update)})
