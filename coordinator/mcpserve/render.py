"""What ``ask`` and ``run_job`` answer: the report as text for a model, and as data.

The text is the answer with its numbered sources and what is not covered; the
structured content (:class:`RunAnswer`, the tools' ``outputSchema``) holds the same: the
answer, sources, gaps and coverage, the run id and where the whole report is. A run the
request stopped waiting for answers with its status and id instead.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coordinator.mcpserve.reading import report_uri
from coordinator.report import CoverageReport
from coordinator.views.answer_marks import NOT_CHECKED

_OUT = ConfigDict(extra="forbid", frozen=True)


class SourceOut(BaseModel):
    """One numbered source the answer cites as ``[n]``."""

    model_config = _OUT
    n: int
    title: str
    url: str | None = None
    path: str | None = None
    subtask: str


class GapOut(BaseModel):
    """What is not covered: a subtask that did not find what it was after, and why."""

    model_config = _OUT
    subtask_id: str
    query: str = Field(description="What the subtask was looking for.")
    message: str
    trigger: str
    category: str | None = Field(default=None, description="The failure's errorCategory.")


class RunAnswer(BaseModel):
    """The structured content of ``ask`` and ``run_job``."""

    model_config = _OUT
    run_id: str | None = Field(description="The stored run: get_report(run_id) reads it.")
    status: Literal["finished", "running", "queued"] = Field(
        description="running or queued: the call stopped waiting (wait_s); the run goes on.")
    report_uri: str | None = Field(default=None, description="fanout://runs/{id}/report.md")
    outcome: str | None = Field(default=None, description="complete, partial or failed.")
    coverage: float | None = Field(default=None, description="Weighted share covered, 0..1.")
    answer: str | None = Field(default=None, description="The answer, citing sources [n].")
    answer_kind: str | None = Field(default=None, description="model or extractive.")
    verified: bool | None = Field(
        default=None, description="false: no model read the passages (found, not checked).")
    sources: list[SourceOut] = Field(default_factory=list)
    gaps: list[GapOut] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list, description="What is not covered.")
    waiting: list[str] = Field(
        default_factory=list,
        description="Escalations of a running run that wait for a decision (their ids), "
        "and plan when the lead's plan waits for review: get_report lists them with their "
        "options, decide takes an escalation, review_plan the plan.")


def finished(run_id: str | None, report: CoverageReport) -> RunAnswer:
    """The answer of a run that ended (whole, failed or cancelled: a report either way)."""
    answer = report.answer
    return RunAnswer(
        run_id=run_id, status="finished",
        report_uri=report_uri(run_id) if run_id else None,
        outcome=report.outcome, coverage=report.coverage,
        answer=answer.text if answer.text is not None else answer.summary,
        answer_kind=answer.kind, verified=answer.verified,
        sources=[SourceOut(n=s.n, title=s.title, url=s.url, path=s.path, subtask=s.subtask)
                 for s in answer.sources or []],
        gaps=[GapOut(subtask_id=g.subtask_id, query=g.attempted_query, message=g.message,
                     trigger=g.trigger, category=g.category) for g in report.gaps],
        missing=list(answer.missing),
    )


def unfinished(run_id: str | None, pending: dict[str, Any] | None = None) -> RunAnswer:
    """The answer of a run still going when the request stopped waiting (``pending``:
    what waits for a person on it, as the desk lists it)."""
    waiting = [str(e["id"]) for e in (pending or {}).get("escalations") or []]
    if (pending or {}).get("plan") is not None:
        waiting.insert(0, "plan")
    return RunAnswer(run_id=run_id, status="running" if run_id else "queued",
                     report_uri=report_uri(run_id) if run_id else None, waiting=waiting)


def as_text(result: RunAnswer) -> str:
    """The answer for a model to read: text, numbered sources, what is not covered."""
    if result.status != "finished":
        if result.run_id is None:
            return ("The run is queued behind others; it starts when a slot frees up. "
                    "list_runs shows it once it has started.")
        said = (f"Run {result.run_id} is still running. Call get_report(run_id="
                f"\"{result.run_id}\") later, or read {result.report_uri}, for its report.")
        if "plan" in result.waiting:
            said += (" Its lead's plan waits for review: get_report shows it, and "
                     "review_plan(run_id, verdict) takes the review.")
        escalations = [w for w in result.waiting if w != "plan"]
        if escalations:
            said += (f" It waits for a decision on {', '.join(escalations)}: get_report "
                     "lists the options, and decide(run_id, escalation, option) takes one.")
        return said
    lines = [result.answer or "(no answer)", ""]
    if result.verified is False:
        lines[1:1] = [f"({NOT_CHECKED}: no model read these passages; whether they answer the "
                      "question is for you to judge.)", ""]
    if result.sources:
        lines.append("Sources:")
        lines += [f"[{s.n}] {s.title}" + (f" — {s.url or s.path}" if s.url or s.path else "")
                  for s in result.sources]
        lines.append("")
    if not result.gaps and not result.missing and result.verified is False:
        lines += [f"Not covered: no gap in the search, but the passages were {NOT_CHECKED}.",
                  ""]
    if result.gaps or result.missing:
        lines.append("Not covered:")
        lines += [f"- {g.subtask_id}: {g.message} (tried {g.query})" for g in result.gaps]
        # The answer's missing list says each gap again, longer: only what else it holds.
        told = tuple(f"{g.subtask_id}:" for g in result.gaps)
        lines += [f"- {m}" for m in result.missing if not m.startswith(told)]
        lines.append("")
    coverage = f"{result.coverage:.0%}" if result.coverage is not None else "?"
    lines.append(f"Outcome {result.outcome}, coverage {coverage}. Run {result.run_id}: the "
                 f"whole report is {result.report_uri}.")
    return "\n".join(lines)


def structured(result: RunAnswer) -> dict[str, Any]:
    """The structured content: :class:`RunAnswer` as JSON data."""
    return result.model_dump(mode="json")
