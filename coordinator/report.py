"""The coverage report: a pure function of the subagents' results (docs/design.md §4, §7).

Nothing here does I/O or looks at a clock, so another executor (a Temporal workflow)
can assemble the same report from the same subagent results. A finished report is
changed only by what the lead knows besides those results, here too: its own failed
plan's rows (:func:`prepend_rows`), a follow-up round's rows (:func:`combine`) and the
job's token meter (:func:`with_tokens`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coordinator.answer_checks import AnswerChecks, AnswerKind
from coordinator.job import JobSpec
from coordinator.routing import Route, RoutingTable
from shared.categories import ErrorCategory, Trigger
from shared.envelope import Finding
from shared.escalation import Do, Escalation
from shared.trusted import Prevalidated
from subagents.alternatives import alternatives_for
from subagents.models.spend import TokenBudget, TokenMeter
from subagents.result import LEAD, SubagentResult
from subagents.spec import SubtaskSpec

SubtaskStatus = Literal["complete", "empty", "partial", "gap"]
Outcome = Literal["complete", "partial", "failed"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)


class TokenCount(BaseModel):
    """Tokens the model calls spent: input (prompts) and output (answers)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0


class TokenSpend(TokenCount):
    """The job's tokens in all (the lead's included), and the budget they were held to."""

    lead: TokenCount | None = Field(default=None, exclude_if=lambda v: v is None)
    budget: TokenBudget | None = Field(default=None, exclude_if=lambda v: v is None)


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
    # The tokens of this subtask's model calls; left out of the wire for a job whose
    # model reported no usage and that has no budget, so such reports stay as they were.
    tokens: TokenCount | None = Field(default=None, exclude_if=lambda v: v is None)
    # A follow-up's row names the gap it was planned for (docs/design.md §11).
    followup_of: str | None = Field(default=None, exclude_if=lambda v: v is None)


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
    # The follow-ups that covered this gap, with evidence (docs/design.md §11): the gap stays
    # listed, its subtask's weight counts as covered.
    filled_by: list[str] | None = Field(default=None, exclude_if=lambda v: v is None)
    # The escalation whose decision settled this gap (``accept``: kept, decided); the
    # report's ``decisions`` say who and when (docs/design.md §17).
    decided: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The follow-ups the lead planned for this gap that did not run: a person had decided
    # it, or their continuation had filled it (docs/design.md §17).
    skipped_followups: list[str] | None = Field(default=None, exclude_if=lambda v: v is None)


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


class Source(BaseModel):
    """One numbered source of the answer: a page, a document, or a tool's result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int
    url: str | None = Field(default=None, exclude_if=lambda v: v is None)
    path: str | None = Field(default=None, exclude_if=lambda v: v is None)
    title: str
    subtask: str
    tool: str


class Answer(BaseModel):
    """The assembled answer: every finding, every gap, nothing silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    coverage: float
    summary: str
    sections: list[Section]
    missing: list[str]
    # The lead agent's synthesis (docs/design.md §7), for jobs with a model. Left out of the wire
    # when absent, so a job without a model reports exactly as before.
    text: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The sources the text cites by number ([n]), as the synthesis numbered them.
    sources: list[Source] | None = Field(default=None, exclude_if=lambda v: v is None)
    synthesis_error: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    # Who wrote ``text`` (a model, or extractive: quoted from the findings), the model's
    # text when it was rejected, and its checks (docs/design.md §7 "Answer checks"); each left
    # out of the wire when absent, so a report without a written answer stays as it was.
    kind: AnswerKind | None = Field(default=None, exclude_if=lambda v: v is None)
    rejected: str | None = Field(default=None, exclude_if=lambda v: v is None)
    checks: AnswerChecks | None = Field(default=None, exclude_if=lambda v: v is None)
    # True: a model read the evidence and its text passed its checks; false: no model read
    # it (retrieval only, an extractive fallback), and no view calls it "fully covered".
    verified: bool | None = Field(default=None, exclude_if=lambda v: v is None)


def _absent(value: object) -> bool:
    return value is None


class DecisionChange(BaseModel):
    """What a decision changed: its subtask's status and the job's coverage, before → after."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status_before: SubtaskStatus
    status_after: SubtaskStatus
    coverage_before: float
    coverage_after: float


class Decision(BaseModel):
    """What a person (or a handler, or a timed-out wait) chose for an escalation.

    ``choice`` says it in words (the option's text, or an alternative a handler
    returned); a decision on an escalation's options (docs/design.md §17) also names the
    escalation, the option and its kind, who decided and when, and what it changed. Each
    of those is left out of the wire when absent, so a handler's bare choice serialises
    as before.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    subtask_id: str
    choice: str
    escalation: str | None = Field(default=None, exclude_if=_absent)
    option: str | None = Field(default=None, exclude_if=_absent)
    do: Do | None = Field(default=None, exclude_if=_absent)
    # answer: the person's text and its source URL; requery: the changed query.
    text: str | None = Field(default=None, exclude_if=_absent)
    source: str | None = Field(default=None, exclude_if=_absent)
    tool: str | None = Field(default=None, exclude_if=_absent)
    args: dict[str, Any] | None = Field(default=None, exclude_if=_absent)
    query: str | None = Field(default=None, exclude_if=_absent)
    # Who decided: a token's name, an OS user, an MCP client, "scenario", or "timeout".
    by: str | None = Field(default=None, exclude_if=_absent)
    # When: the wall time (ISO 8601, UTC) where the door knows it, and the run's seconds.
    at: str | None = Field(default=None, exclude_if=_absent)
    at_s: float | None = Field(default=None, exclude_if=_absent)
    change: DecisionChange | None = Field(default=None, exclude_if=_absent)


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
    tokens: TokenSpend | None = Field(default=None, exclude_if=lambda v: v is None)

    def to_wire(self) -> dict[str, Any]:
        """The report as JSON-ready data with the wire names."""
        return self.model_dump(mode="json", by_alias=True)


# A report row per subtask is built from typed state, not validated again; every row of
# a kind shares one fields-set (see shared.trusted: it was half of a row's memory).
_OUTCOME = Prevalidated(SubtaskOutcome)
_SECTION = Prevalidated(Section)


def unmatched(result: SubagentResult) -> dict[str, Any] | None:
    """The judgement of a search whose passages do not answer its query, when every
    finding with content is such a search (found is not answered: a ``no_match`` gap)."""
    judged: dict[str, Any] | None = None
    for finding in result.findings:
        if finding.empty:
            continue
        data = finding.data
        match = data.get("match") if isinstance(data, dict) else None
        if not isinstance(match, dict) or match.get("matched") is not False:
            return None  # evidence that answers, or that no search judged
        if judged is None:
            judged = match
    return judged


def subtask_status(result: SubagentResult) -> SubtaskStatus:
    """complete, empty (answered: nothing matches), partial (findings and a gap), or gap."""
    has_gap = result.escalation is not None or result.incomplete or (
        unmatched(result) is not None)
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
            message=f"{tool} returned partial data (it marked its answer incomplete)",
        )
    if (match := unmatched(result)) is not None:
        missing = [str(m) for m in match.get("missing") or []]
        lacks = f"; no passage holds {', '.join(missing)}" if missing else ""
        by, score, threshold = match.get("by"), match.get("score"), match.get("threshold")
        terms, needed = match.get("terms"), match.get("terms_threshold")
        if isinstance(score, (int, float)) and isinstance(threshold, (int, float)) and \
                score >= threshold and terms is not None:
            by, score, threshold = "terms", terms, needed  # similar, but the words fell short
        return Gap(subtask_id=result.subtask_id, trigger="no_match", route=route or "gap",
                   attempted_query=spec.query, partial_results=list(result.findings),
                   alternatives=alternatives_for("no_match", spec, detail={"missing": missing}),
                   message=f"passages were found, but none answers the query ({by}"
                   f" score {score} under {threshold}{lacks})")
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
    ``retry_later``). A subtask with several results is reported by the last.
    """
    builder = ReportBuilder(job, route_overrides=route_overrides)
    for result in results:
        builder.add(result)
    return builder.report(elapsed_s=elapsed_s)


@dataclass(slots=True)
class _Rows:
    """What one subtask contributes to the report (its result is not kept)."""

    outcome: SubtaskOutcome
    section: Section
    gap: Gap | None
    escalation: Escalation | None  # listed under escalations: routed escalate


class ReportBuilder:
    """The coverage report of a job, built as its subagents' results come in.

    Each result becomes its subtask's report rows at once, so a coordinator holds the
    rows instead of every result until the end (at 100,000 subtasks the results were
    a third of the peak). Results may come in any order; a later one for the same
    subtask replaces the earlier (the retry round's). :meth:`report` assembles the
    rows in subtask order, exactly as :func:`assemble_report` does.
    """

    def __init__(self, job: JobSpec, *, route_overrides: Mapping[str, Route] | None = None):
        self.job = job
        self._table = job.routes
        self._overrides = route_overrides or {}
        self._specs = {spec.id: spec for spec in job.subtasks}
        self._rows: dict[str, _Rows] = {}

    def __contains__(self, subtask_id: object) -> bool:
        return subtask_id in self._rows

    def status(self, subtask_id: str) -> SubtaskStatus:
        """The subtask's status so far ("gap" while it has no result)."""
        rows = self._rows.get(subtask_id)
        return "gap" if rows is None else rows.outcome.status

    def coverage(self) -> float:
        """The job's coverage so far, every subtask without a result counted not covered
        (a decision's before → after, docs/design.md §17)."""
        outcomes = [rows.outcome for rows in self._rows.values()]
        gaps = [rows.gap for rows in self._rows.values() if rows.gap is not None]
        covered = total = 0.0
        filled = {g.subtask_id for g in gaps if g.filled_by}
        for spec in self.job.subtasks:
            total += spec.weight
        for o in outcomes:
            if o.status in ("complete", "empty") or o.id in filled:
                covered += o.weight
        if total > 0:
            return round(covered / total, 12)
        if not self.job.subtasks:
            return 0.0
        done = sum(o.status in ("complete", "empty") or o.id in filled for o in outcomes)
        return round(done / len(self.job.subtasks), 12)

    def add(self, result: SubagentResult) -> None:
        """Count ``result`` (a result for no subtask of the job is ignored)."""
        spec = self._specs.get(result.subtask_id)
        if spec is not None:
            self._rows[spec.id] = self._rows_of(result, spec)

    def escalation(self, subtask_id: str) -> Escalation | None:
        """The escalation a counted subtask's rows list under ``escalations`` (routed
        ``escalate``), or None."""
        rows = self._rows.get(subtask_id)
        return None if rows is None else rows.escalation

    def _rows_of(self, result: SubagentResult, spec: SubtaskSpec) -> _Rows:
        status = subtask_status(result)
        gap = _gap(result, spec, self._table, self._overrides.get(spec.id))
        outcome = _OUTCOME(
            {
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
                "tokens": None,
                "followup_of": spec.followup_of,
            }
        )
        section = _SECTION(
            {
                "subtask_id": spec.id,
                "query": spec.query,
                "status": status,
                "covered": status in ("complete", "empty"),
                "weight": spec.weight,
                # The result's own list, not a copy: both models are frozen and nothing
                # appends to a result's findings (100,000 subtasks: 10 MiB of copies).
                "findings": result.findings,
                "gap": None if gap is None else _gap_line(gap),
            }
        )
        escalated = gap is not None and gap.route == "escalate"
        return _Rows(outcome, section, gap, result.escalation if escalated else None)

    def report(self, *, elapsed_s: float) -> CoverageReport:
        """The report, in subtask order; a subtask without a result is a gap.

        The builder is spent: its rows now belong to the report.
        """
        job = self.job
        outcomes: list[SubtaskOutcome] = []
        gaps: list[Gap] = []
        escalations: list[Escalation] = []
        sections: list[Section] = []
        for spec in job.subtasks:
            rows = self._rows.pop(spec.id, None)
            if rows is None:
                rows = self._rows_of(_missing(spec.id, spec.query), spec)
            outcomes.append(rows.outcome)
            if rows.gap is not None:
                gaps.append(rows.gap)
                if rows.escalation is not None:
                    escalations.append(rows.escalation)
            sections.append(rows.section)
        self._rows.clear()
        coverage, outcome = coverage_of(outcomes, gaps)
        answer = Answer(
            query=job.query,
            coverage=coverage,
            summary=summary_of(outcomes, coverage, gaps),
            sections=sections,
            missing=missing_of(gaps),
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



def coverage_of(
    outcomes: Sequence[SubtaskOutcome], gaps: Sequence[Gap] = ()
) -> tuple[float, Outcome]:
    """Coverage (the weighted share of complete and empty subtasks, and of gaps a
    follow-up filled with evidence, docs/design.md §11) and the outcome."""
    filled = {g.subtask_id for g in gaps if g.filled_by}

    def covered(o: SubtaskOutcome) -> bool:
        return o.status in ("complete", "empty") or o.id in filled

    if not outcomes:
        # No subtask yet (a lead still planning, a run cut before it planned): nothing is
        # covered and nothing was found.
        return 0.0, "failed"
    covered_weight = total_weight = 0.0
    for o in outcomes:
        total_weight += o.weight
        covered_weight += o.weight if covered(o) else 0.0
    if total_weight > 0:
        coverage = covered_weight / total_weight
    else:
        coverage = sum(covered(o) for o in outcomes) / len(outcomes)
    coverage = round(coverage, 12)
    if coverage == 1:
        return coverage, "complete"
    if coverage == 0 and not any(o.findings for o in outcomes):
        return coverage, "failed"
    return coverage, "partial"



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


def missing_of(gaps: Sequence[Gap]) -> list[str]:
    """``answer.missing``: a line per gap still open (a gap a follow-up filled is not)."""
    return [_gap_line(g) for g in gaps if not g.filled_by]


def _gap_line(gap: Gap) -> str:
    category = gap.category or "no category"
    return (
        f"{gap.subtask_id}: {category}/{gap.trigger} → {gap.route}; tried "
        f"{gap.attempted_query!r}; {len(gap.partial_results)} partial result(s)"
        + (f"; alternatives: {'; '.join(gap.alternatives)}" if gap.alternatives else "")
    )


def summary_of(outcomes: Sequence[SubtaskOutcome], coverage: float, gaps: Sequence[Gap]) -> str:
    """The answer's one-line summary: coverage, statuses, the gaps still open."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    parts = ", ".join(f"{n} {status}" for status, n in counts.items())
    text = f"{coverage:.0%} covered ({parts} of {len(outcomes)} subtasks)"
    open_gaps = [g.subtask_id for g in gaps if not g.filled_by]
    if open_gaps:
        text += f"; missing: {', '.join(open_gaps)}"
    return text


# --- changes to a finished report -----------------------------------------------------


def prepend_rows(
    report: CoverageReport,
    job: JobSpec,
    results: Sequence[SubagentResult],
    *,
    route_overrides: Mapping[str, Route] | None = None,
) -> CoverageReport:
    """``report`` with the rows of ``job``'s subtasks (built from ``results``) first.

    For rows outside the fan-out (the lead's failed plan): coverage stays the report's
    when they weigh 0; the summary, ``missing`` and the outcome are recomputed.
    """
    extra = assemble_report(
        job, results, elapsed_s=report.elapsed_s, route_overrides=route_overrides
    )
    return combine(report, extra, report, [*extra.gaps, *report.gaps])


def combine(
    base: CoverageReport,
    first: CoverageReport,
    second: CoverageReport,
    gaps: Sequence[Gap],
    **update: Any,
) -> CoverageReport:
    """``base`` with the rows of ``first`` then ``second`` and ``gaps``; coverage, the
    outcome, the summary and ``missing`` recomputed from them (``update``: other fields)."""
    outcomes = [*first.subtasks, *second.subtasks]
    coverage, outcome = coverage_of(outcomes, gaps)
    answer = base.answer.model_copy(
        update={
            "coverage": coverage,
            "summary": summary_of(outcomes, coverage, gaps),
            "sections": [*first.answer.sections, *second.answer.sections],
            "missing": missing_of(gaps),
        }
    )
    return base.model_copy(
        update={
            "outcome": outcome,
            "coverage": coverage,
            "subtasks": outcomes,
            "gaps": list(gaps),
            "escalations": [*first.escalations, *second.escalations],
            "answer": answer,
            **update,
        }
    )


def with_tokens(report: CoverageReport, meter: TokenMeter) -> CoverageReport:
    """The report with the tokens spent per subtask and in all (docs/design.md §13, job.budget).

    Unchanged when nothing was counted and there is no budget: a job whose model
    reports no usage keeps its report byte for byte.
    """
    if not meter.calls and meter.budget is None:
        return report
    spent = meter.by_subtask
    rows = [
        row.model_copy(update={"tokens": TokenCount(input_tokens=c[0], output_tokens=c[1])})
        if (c := spent.get(row.id)) is not None
        else row.model_copy(update={"tokens": TokenCount()})
        for row in report.subtasks
    ]
    lead = spent.get(LEAD)
    total = TokenSpend(
        input_tokens=meter.input_tokens,
        output_tokens=meter.output_tokens,
        lead=None if lead is None else TokenCount(input_tokens=lead[0], output_tokens=lead[1]),
        budget=meter.budget,
    )
    return report.model_copy(update={"subtasks": rows, "tokens": total})


def with_decisions(report: CoverageReport, decisions: Sequence[Decision]) -> CoverageReport:
    """The report with ``decisions`` listed after its own; a gap whose escalation was
    decided ``accept`` is kept and marked ``decided`` (docs/design.md §17).

    Unchanged when ``decisions`` is empty, so a run nobody decided for keeps its report
    byte for byte.
    """
    if not decisions:
        return report
    accepted = {d.subtask_id: d.escalation or d.subtask_id for d in decisions if d.do == "accept"}
    gaps = [
        gap.model_copy(update={"decided": accepted[gap.subtask_id]})
        if gap.subtask_id in accepted and gap.decided is None
        else gap
        for gap in report.gaps
    ]
    return report.model_copy(
        update={"decisions": [*report.decisions, *decisions], "gaps": gaps}
    )
