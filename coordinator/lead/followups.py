"""The lead's third phase: follow-up subtasks planned from the gaps (docs/design.md §11).

After the retry round, the lead is shown every gap — category, trigger, what was tried,
the partial results and the alternatives fanout already knows — and answers through the
planning tool ``plan_followups``: ``{"followups": [{"for": GAP_ID, "id", "query",
"tools"}]}``. The plan is checked like a plan (``for`` names a gap, ids are new and
unique, tools are known); a bad plan goes back once with every problem named. A lead
that answers in words, plans none, plans badly twice or cannot be reached runs no
follow-up: the report stays what the fan-out made it.

The lead is shown only the gaps still open (:func:`coordinator.rules.open_gaps`): never
one a person decided (``accept``, ``stop``, ``answer``: the decision is the person's word
on that gap, docs/design.md §17), nor one a person's ``use_tool``/``requery``
continuation filled. A plan naming such a subtask anyway (a scripted lead plans by its
script) is not refused for it: the follow-up is checked as any, and the run drops it
(:func:`coordinator.rules.split_followups`) and says so on the gap (``skipped_followups``).

Follow-ups run as model-planned subtasks of weight 0 (``followup_of: GAP_ID``). One that
is covered — complete or empty, which for a model-planned subtask with tools means an ok
envelope, the no_evidence rule of docs/design.md §7 — fills its gap: the gap gets ``filled_by`` and
its
weight counts as covered. The gap stays listed and an escalation stays an escalation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from coordinator.job import JobSpec
from coordinator.lead.decompose import _ID, QUESTION, LeadContext, planned_subtasks
from coordinator.report import CoverageReport, Gap, combine
from coordinator.rules import closed, open_gaps
from subagents.models.base import (
    AssistantMessage,
    ToolResultMessage,
    ToolSpec,
    TranscriptMessage,
    UserMessage,
)
from subagents.models.scripted import FOLLOWUP_TOOL
from subagents.result import LEAD
from subagents.spec import SubtaskSpec

_PARTIAL_CHARS = 600  # of one gap's partial results, as the lead is shown them
_FIELDS = {"for", "id", "query", "tools"}


def followup_schema(job: JobSpec, gap_ids: Sequence[str]) -> dict[str, Any]:
    """The input schema of ``plan_followups``."""
    item = {
        "type": "object",
        "properties": {
            "for": {"type": "string", "enum": list(gap_ids)},
            "id": {"type": "string", "pattern": _ID.pattern},
            "query": {"type": "string", "minLength": 1},
            "tools": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
        "required": ["for", "id", "query", "tools"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "followups": {"type": "array", "items": item, "maxItems": job.max_followups}
        },
        "required": ["followups"],
        "additionalProperties": False,
    }


def followup_prompt(
    job: JobSpec, gaps: Sequence[Gap], catalogue: Sequence[ToolSpec]
) -> tuple[str, str]:
    """The system prompt and the user message the lead plans its follow-ups from."""
    tools = "\n".join(f"- {t.name}: {t.description or '(no description)'}" for t in catalogue)
    system = f"""You are the lead of a research job. Some subtasks did not get covered; \
for each gap you know why and what could fix it. Plan at most {job.max_followups} \
follow-up subtasks that could close gaps another way (another tool, a narrower query), \
each for one gap, with the tools it needs (at least one, by exact name):
{tools or "- (none)"}

Answer by calling {FOLLOWUP_TOOL} once. Each follow-up has "for" (the gap's subtask id), a \
new short unique id (letters, digits, _ and -), a self-contained query and its tools. \
Plan none (an empty list) when no follow-up could help."""
    lines = [f"Question: {job.query}", "", "Gaps:"]
    for gap in gaps:
        lines.append(
            f"[{gap.subtask_id}] {gap.category or 'no category'} / {gap.trigger}: {gap.message}"
        )
        lines.append(f"  tried: {gap.attempted_query}")
        if gap.partial_results:
            data = json.dumps(
                [f.model_dump(mode="json", by_alias=True) for f in gap.partial_results],
                ensure_ascii=False,
                default=str,
            )
            shown = data if len(data) <= _PARTIAL_CHARS else data[: _PARTIAL_CHARS - 1] + "…"
            lines.append(f"  partial results: {shown}")
        if gap.alternatives:
            lines.append("  alternatives: " + "; ".join(gap.alternatives))
    return system, "\n".join(lines)


def check_followups(
    args: Any,
    job: JobSpec,
    gap_ids: Sequence[str],
    known_tools: Sequence[str],
    taken: Sequence[str],
    decided: Sequence[str] = (),
) -> tuple[list[dict[str, Any]], list[str]]:
    """The follow-ups of a plan, and every problem with them.

    ``taken`` are the ids already in the job (its subtasks); a follow-up may not reuse
    one, nor ``lead`` or ``question``. ``decided``: subtasks not shown as gaps (a person
    decided them, or they are filled); a follow-up ``for`` one is no problem here (the
    run drops it).
    """
    raw = args.get("followups") if isinstance(args, dict) else None
    if not isinstance(raw, list):
        return [], ["followups: expected a list of follow-ups (empty to plan none)"]
    problems: list[str] = []
    if len(raw) > job.max_followups:
        problems.append(f"followups: at most {job.max_followups} follow-ups, got {len(raw)}")
    reserved = {*taken, LEAD, QUESTION}
    seen: set[str] = set()
    plan: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        where = f"followups[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected an object with for, id, query, tools")
            continue
        unknown = sorted(set(item) - _FIELDS)
        if unknown:
            problems.append(f"{where}: unknown fields {', '.join(unknown)}")
        gap, fid, query, tools = item.get("for"), item.get("id"), item.get("query"), item.get(
            "tools"
        )
        if gap not in gap_ids and gap not in decided:
            problems.append(
                f"{where}.for: {gap!r} is not a gap (gaps: {', '.join(gap_ids) or 'none'})"
            )
        if not isinstance(fid, str) or not _ID.match(fid):
            problems.append(f"{where}.id: expected a short id of letters, digits, _ and -")
        elif fid in seen or fid in reserved:
            problems.append(f"{where}.id: {fid!r} is taken (a subtask, follow-up or reserved id)")
        else:
            seen.add(fid)
        if not isinstance(query, str) or not query.strip():
            problems.append(f"{where}.query: expected a non-empty question")
        if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
            # At least one tool: a follow-up fills a gap only with evidence (docs/design.md §11).
            problems.append(f"{where}.tools: expected a non-empty list of tool names")
            tools = []
        for name in tools:
            if name not in known_tools:
                problems.append(
                    f"{where}.tools: unknown tool {name!r} (known: {', '.join(known_tools)})"
                )
        plan.append({"for": gap, "id": fid, "query": query, "weight": 0.0, "tools": tools})
    return plan, problems


async def plan_followups(
    report: CoverageReport, job: JobSpec, catalogue: Sequence[ToolSpec], lead: LeadContext
) -> list[SubtaskSpec]:
    """The follow-ups the lead plans for ``report``'s open gaps (none when it cannot
    plan); a follow-up for a subtask a person decided is among them when planned, for
    the run to drop (:func:`coordinator.rules.split_followups`)."""
    gaps = open_gaps(report)
    if not gaps:
        return []
    gap_ids = [g.subtask_id for g in gaps]
    names = [t.name for t in catalogue]
    taken = [s.id for s in job.subtasks]
    tool = ToolSpec(
        name=FOLLOWUP_TOOL,
        description="Submit the follow-ups: subtasks that could close the gaps another way.",
        input_schema=followup_schema(job, gap_ids),
    )
    system, prompt = followup_prompt(job, gaps, catalogue)
    messages: list[TranscriptMessage] = [UserMessage(prompt)]
    for round_ in (1, 2):
        _, turn = await lead.call(system, messages, [tool], force_tool=FOLLOWUP_TOOL)
        if turn is None:
            return []  # the lead cannot be reached: no follow-up (its call is in the trace)
        calls = [c for c in turn.calls if c.name == FOLLOWUP_TOOL]
        if not calls:
            return []  # an answer in words plans none (docs/design.md §11)
        args = calls[0].arguments
        if args is None:
            plan: list[dict[str, Any]] = []
            problems = ["the arguments are not a JSON object"]
        else:
            plan, problems = check_followups(args, job, gap_ids, names, taken,
                                             decided=closed(report))
        if not problems:
            return followup_specs(plan, job)
        if round_ == 2:
            break
        # The plan goes back once, with every problem named.
        feedback = json.dumps({"ok": False, "errors": problems}, ensure_ascii=False)
        messages = [
            *messages,
            AssistantMessage(turn),
            ToolResultMessage(calls[0].id, FOLLOWUP_TOOL, feedback, is_error=True),
        ]
    return []


def followup_specs(plan: Sequence[dict[str, Any]], job: JobSpec) -> list[SubtaskSpec]:
    """The checked follow-ups as model-planned subtasks of weight 0."""
    specs = planned_subtasks(plan, job)
    return [
        s.model_copy(update={"followup_of": p["for"]})
        for s, p in zip(specs, plan, strict=True)
    ]


def with_skipped_followups(
    report: CoverageReport, skipped: Sequence[SubtaskSpec]
) -> CoverageReport:
    """``report`` with each gap's ``skipped_followups``: the follow-ups the lead planned
    for it that did not run, because a person had decided it or their continuation had
    filled it (docs/design.md §17).
    Unchanged when none was skipped."""
    if not skipped:
        return report
    by_gap: dict[str, list[str]] = {}
    for spec in skipped:
        if spec.followup_of is not None:
            by_gap.setdefault(spec.followup_of, []).append(spec.id)
    gaps = [g.model_copy(update={"skipped_followups": [*(g.skipped_followups or []),
                                                        *by_gap[g.subtask_id]]})
            if g.subtask_id in by_gap else g for g in report.gaps]
    return report.model_copy(update={"gaps": gaps})


def with_followups(
    report: CoverageReport, followups: CoverageReport, specs: Sequence[SubtaskSpec]
) -> CoverageReport:
    """``report`` with the follow-ups' rows after its own, and each gap a covered
    follow-up filled marked ``filled_by`` (the gap stays; so does an escalation).

    A follow-up of a follow-up (a person's ``use_tool``/``requery`` continuing the lead's
    follow-up, docs/design.md §17) fills the gaps up its chain too: it does what the
    follow-up it continues was planned to do."""
    parent = {row.id: row.followup_of for row in report.subtasks if row.followup_of}
    filled: dict[str, list[str]] = {}
    for spec, row in zip(specs, followups.subtasks, strict=True):
        if row.status in ("complete", "empty") and spec.followup_of is not None:
            gap: str | None = spec.followup_of
            seen: set[str] = set()
            while gap is not None and gap not in seen:
                seen.add(gap)
                filled.setdefault(gap, []).append(spec.id)
                gap = parent.get(gap)
    gaps = [
        g.model_copy(update={"filled_by": filled[g.subtask_id]}) if g.subtask_id in filled else g
        for g in report.gaps
    ]
    gaps += followups.gaps
    return combine(
        report,
        report,
        followups,
        gaps,
        elapsed_s=followups.elapsed_s,
        decisions=[*report.decisions, *followups.decisions],
    )
