"""The coverage report: a pure function of the subagents' results (DESIGN §4, §7).

Nothing here does I/O or looks at a clock, so another executor (a Temporal workflow)
can assemble the same report from the same subagent results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coordinator.job import JobSpec, Route
from coordinator.routing import RoutingTable
from shared.categories import ErrorCategory, Trigger
from shared.envelope import Finding
from shared.escalation import Escalation
from subagents.alternatives import alternatives_for
from subagents.loop import SubagentResult
from subagents.spec import SubtaskSpec

SubtaskStatus = Literal["complete", "empty", "partial", "gap"]
Outcome = Literal["complete", "partial", "failed"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)


class SubtaskOutcome(BaseModel):
    """One subtask's line in the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    query: str
    weight: float
    status: SubtaskStatus
    attempts: int
    rounds: int
    steps: int
    findings: int
    started_s: float | None = None
    ended_s: float | None = None
    compactions: int = 0


class Gap(BaseModel):
    """What is missing and why: one per subtask that is not fully covered."""

    model_config = _FROZEN

    subtask_id: str
    category: ErrorCategory | None = Field(default=None, alias="errorCategory")
    trigger: Trigger
    route: Route
    attempted_query: str
    partial_results: list[Finding] = Field(default_factory=list)
    alternatives: list[str] = Field(default_factory=list)
    message: str
    original_trigger: Trigger | None = None


class Section(BaseModel):
    """A part of the answer: one subtask's findings, marked with its coverage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subtask_id: str
    query: str
    status: SubtaskStatus
    covered: bool
    weight: float
    findings: list[Finding]
    gap: str | None = None


class Answer(BaseModel):
    """The assembled answer: every finding, every gap, nothing silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    coverage: float
    summary: str
    sections: list[Section]
    missing: list[str]
    # The lead agent's synthesis (DESIGN §7), for jobs with a model. Left out of the wire
    # when absent, so a job without a model reports exactly as before.
    text: str | None = Field(default=None, exclude_if=lambda v: v is None)
    sources: list[str] | None = Field(default=None, exclude_if=lambda v: v is None)
    synthesis_error: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class Decision(BaseModel):
    """What an escalation handler chose for an escalation (an alternative, or a note)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subtask_id: str
    choice: str


class CoverageReport(BaseModel):
    """The job's result: outcome, coverage, per-subtask status, gaps, escalations, answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    outcome: Outcome
    coverage: float
    elapsed_s: float
    subtasks: list[SubtaskOutcome]
    gaps: list[Gap]
    escalations: list[Escalation]
    answer: Answer
    decisions: list[Decision] = Field(default_factory=list)

    def to_wire(self) -> dict[str, Any]:
        """The report as JSON-ready data with the wire names."""
        return self.model_dump(mode="json", by_alias=True)


# Validated prototypes: the report copies them per subtask instead of validating again.
_OUTCOME = SubtaskOutcome(
    id="", query="", weight=0, status="gap", attempts=0, rounds=0, steps=0, findings=0
)
_SECTION = Section(subtask_id="", query="", status="gap", covered=False, weight=0, findings=[])


def subtask_status(result: SubagentResult) -> SubtaskStatus:
    """complete, empty (answered: nothing matches), partial (findings and a gap), or gap."""
    has_gap = result.escalation is not None or result.incomplete
    if has_gap:
        return "partial" if result.findings else "gap"
    if all(f.empty for f in result.findings):
        return "empty"
    return "complete"


def _gap(
    result: SubagentResult, spec: SubtaskSpec, table: RoutingTable, route: Route | None
) -> Gap | None:
    esc = result.escalation
    if esc is not None:
        decision = table.route(esc)
        return Gap(
            subtask_id=result.subtask_id,
            category=esc.category,
            trigger=decision.trigger,
            route=route or decision.route,
            attempted_query=esc.attempted_query,
            partial_results=list(esc.partial_results),
            alternatives=list(esc.alternatives),
            message=esc.message,
            original_trigger=esc.trigger if decision.trigger != esc.trigger else None,
        )
    if result.incomplete:
        partial = [f for f in result.findings if not f.complete]
        tool = partial[0].tool if partial else "a tool"
        return Gap(
            subtask_id=result.subtask_id,
            trigger="incomplete_data",
            route="gap",
            attempted_query=spec.query,
            partial_results=list(result.findings),
            alternatives=alternatives_for("incomplete_data", spec, tool=tool),
            message=f"{tool} returned partial data (complete: false)",
        )
    return None


def assemble_report(
    job: JobSpec,
    results: Sequence[SubagentResult],
    *,
    elapsed_s: float,
    route_overrides: Mapping[str, Route] | None = None,
) -> CoverageReport:
    """Build the coverage report from the subagents' results, in subtask order.

    ``route_overrides`` pins a subtask's route (a retry round that failed again keeps
    ``retry_later``).
    """
    table = RoutingTable(job.routing)
    by_id = {r.subtask_id: r for r in results}
    overrides = route_overrides or {}
    outcomes: list[SubtaskOutcome] = []
    gaps: list[Gap] = []
    escalations: list[Escalation] = []
    sections: list[Section] = []
    covered_weight = total_weight = 0.0
    for spec in job.subtasks:
        result = by_id.get(spec.id) or _missing(spec.id, spec.query)
        status = subtask_status(result)
        gap = _gap(result, spec, table, overrides.get(spec.id))
        outcomes.append(
            _OUTCOME.model_copy(
                update={
                    "id": spec.id,
                    "query": spec.query,
                    "weight": spec.weight,
                    "status": status,
                    "attempts": result.attempts,
                    "rounds": result.rounds,
                    "steps": result.steps,
                    "findings": len(result.findings),
                    "started_s": result.started_s,
                    "ended_s": result.ended_s,
                    "compactions": result.compactions,
                }
            )
        )
        covered = status in ("complete", "empty")
        total_weight += spec.weight
        covered_weight += spec.weight if covered else 0.0
        if gap is not None:
            gaps.append(gap)
            if gap.route == "escalate" and result.escalation is not None:
                escalations.append(result.escalation)
        sections.append(
            _SECTION.model_copy(
                update={
                    "subtask_id": spec.id,
                    "query": spec.query,
                    "status": status,
                    "covered": covered,
                    "weight": spec.weight,
                    "findings": list(result.findings),
                    "gap": None if gap is None else _gap_line(gap),
                }
            )
        )
    if total_weight > 0:
        coverage = covered_weight / total_weight
    else:
        coverage = sum(o.status in ("complete", "empty") for o in outcomes) / len(outcomes)
    coverage = round(coverage, 12)
    if coverage == 1:
        outcome: Outcome = "complete"
    elif coverage == 0 and not any(o.findings for o in outcomes):
        outcome = "failed"
    else:
        outcome = "partial"
    missing = [_gap_line(g) for g in gaps]
    answer = Answer(
        query=job.query,
        coverage=coverage,
        summary=_summary(outcomes, coverage, gaps),
        sections=sections,
        missing=missing,
    )
    return CoverageReport(
        query=job.query,
        outcome=outcome,
        coverage=coverage,
        elapsed_s=round(elapsed_s, 9),
        subtasks=outcomes,
        gaps=gaps,
        escalations=escalations,
        answer=answer,
    )


def _missing(subtask_id: str, query: str) -> SubagentResult:
    """A subtask no result was reported for: a gap, never silently covered."""
    return SubagentResult(
        subtask_id=subtask_id,
        escalation=Escalation(
            subtask_id=subtask_id,
            trigger="interrupted",
            message="no result was reported for this subtask",
            attempted_query=query,
            alternatives=["run the subtask again (`fanout resume` continues a stored run)"],
        ),
    )


def _gap_line(gap: Gap) -> str:
    category = gap.category or "no category"
    return (
        f"{gap.subtask_id}: {category}/{gap.trigger} → {gap.route}; tried "
        f"{gap.attempted_query!r}; {len(gap.partial_results)} partial result(s)"
        + (f"; alternatives: {'; '.join(gap.alternatives)}" if gap.alternatives else "")
    )


def _summary(outcomes: Sequence[SubtaskOutcome], coverage: float, gaps: Sequence[Gap]) -> str:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in counts.items())
    text = f"{coverage:.0%} covered ({parts} of {len(outcomes)} subtasks)"
    if gaps:
        text += f"; missing: {', '.join(g.subtask_id for g in gaps)}"
    return text
