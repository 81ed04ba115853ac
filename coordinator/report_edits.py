"""Changes to a finished coverage report: rows outside the fan-out, tokens spent.

The report stays a pure function of results (:mod:`coordinator.report`); these add what
the lead knows besides them: its own failed plan (DESIGN §7) and the job's token meter
(DESIGN §13).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordinator.job import JobSpec, Route
from coordinator.report import (
    CoverageReport,
    Gap,
    TokenCount,
    TokenSpend,
    assemble_report,
    coverage_of,
    missing_of,
    summary_of,
)
from subagents.loop import SubagentResult
from subagents.models.spend import TokenMeter

__all__ = ["combine", "prepend_rows", "with_tokens"]


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
    """The report with the tokens spent per subtask and in all (DESIGN §13, job.budget).

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
    lead = spent.get("lead")
    total = TokenSpend(
        input_tokens=meter.input_tokens,
        output_tokens=meter.output_tokens,
        lead=None if lead is None else TokenCount(input_tokens=lead[0], output_tokens=lead[1]),
        budget=meter.budget,
    )
    return report.model_copy(update={"subtasks": rows, "tokens": total})
