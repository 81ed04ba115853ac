"""What the door shows of stored runs: their rows, and a run's report in a format.

Reads of the run store as ``fanout runs`` and ``fanout report`` make them (blocking: the
server calls them on a worker thread). A run that has not finished shows what it has so
far: committed results, and a gap for each subtask still going.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from coordinator.engine import interrupted_report
from coordinator.jobfile.loader import load_scenario_text
from coordinator.mcpserve.config import refused
from coordinator.report import CoverageReport
from coordinator.store import RunNotFound, RunRow, RunStore
from shared.errors import InputFileError

ReportFormat = Literal["md", "json"]
# The shape of the ids the store makes (new_run_id): nothing else reaches a query.
_RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4,8}")


def report_uri(run_id: str, fmt: ReportFormat = "md") -> str:
    """The resource that holds a run's report."""
    return f"fanout://runs/{run_id}/report.{fmt}"


def check_run_id(run_id: str) -> None:
    """Refuse what is not a run id before anything is looked up.

    Raises:
        ArgumentRefused: ``run_id`` has not the shape of the ids the store makes.
    """
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise refused("run_id", "a run id as list_runs gives them (YYYYMMDD-HHMMSS-hex)",
                      repr(run_id))


def run_row(store: RunStore, run_id: str) -> RunRow:
    """The stored run ``run_id``.

    Raises:
        ArgumentRefused: not a run id, or no run of the store has it.
    """
    check_run_id(run_id)
    try:
        return store.get(run_id)
    except RunNotFound:
        raise refused("run_id", "the id of a run in this server's store (see list_runs)",
                      repr(run_id)) from None


def was_cancelled(report: CoverageReport) -> bool:
    """Whether a report is a cancelled run's: a subtask was cut with trigger cancelled."""
    return any(gap.trigger == "cancelled" for gap in report.gaps)


def check_cancellable(row: RunRow) -> None:
    """Refuse to cancel a run this server does not run: it has ended (unless it ended
    cancelled: cancelling again is no error), it was interrupted, or another process
    runs it.

    Raises:
        ArgumentRefused: naming ``run_id`` and why there is nothing to cancel.
    """
    expected = "the id of a run still going in this server"
    if row.status == "finished":
        report = CoverageReport.model_validate(row.report) if row.report is not None else None
        if report is not None and was_cancelled(report):
            return
        raise refused("run_id", expected, f"{row.id!r}, which has finished (outcome "
                      f"{row.outcome}): there is nothing to cancel")
    if row.status == "interrupted":
        raise refused("run_id", expected, f"{row.id!r}, which was interrupted (the process "
                      "running it stopped): nothing runs it to cancel")
    raise refused("run_id", expected, f"{row.id!r}, which another process runs (fanout "
                  "run, or another server on this store): only it can cancel it")


def stored_report(store: RunStore, row: RunRow) -> CoverageReport:
    """The run's report: the final one, or what an unfinished run has so far."""
    if row.report is not None:
        return CoverageReport.model_validate(row.report)
    try:
        scenario = load_scenario_text(row.spec_text, row.file)
    except InputFileError:
        raise refused("run_id", "a run whose job still loads", repr(row.id)) from None
    hint = ("still running: this subtask has not finished yet" if row.status == "running"
            else f"the run was interrupted before this subtask finished; `fanout resume "
            f"{row.id}` continues it")
    return interrupted_report(scenario, store, row.id, resume_hint=hint)


def render_report(store: RunStore, row: RunRow, fmt: ReportFormat) -> str:
    """The run's report as Markdown (``fanout report --format md``) or JSON."""
    wire = stored_report(store, row).to_wire()
    if fmt == "json":
        return json.dumps({"run_id": row.id, "status": row.status, **wire}, indent=2,
                          ensure_ascii=False)
    from coordinator.views.markdown import render_markdown

    return render_markdown(wire, row.summary())


def run_rows(store: RunStore, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` runs, as ``fanout runs --json`` lists them (plus the query)."""
    rows = store.runs() if store.exists() else []
    return [{**row.summary(), "query": row.query} for row in rows[:limit]]
