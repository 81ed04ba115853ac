"""Fan-out, routing on errorCategory, coverage gaps, answer assembly, run store and CLI."""

from coordinator.api import (
    JobEvents,
    ask,
    ask_events,
    run_file,
    run_file_events,
)
from coordinator.fanout import (
    EscalationHandler,
    RecordingHandler,
    StaticTools,
    ToolSource,
    run_job,
)
from coordinator.job import JobSpec, Route
from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.jobfile.scenario import Expect, Scenario, scenario_json_schema
from coordinator.replay import replay, replay_all, run_scenario
from coordinator.report import (
    Answer,
    CoverageReport,
    Gap,
    Section,
    SubtaskOutcome,
    assemble_report,
    subtask_status,
)
from coordinator.routing import DEFAULT_ROUTES, RoutingTable
from coordinator.store.runs import RunStore, store_path
from coordinator.views.html import render_html
from coordinator.views.markdown import render_markdown

__all__ = [
    "DEFAULT_ROUTES",
    "Answer",
    "CoverageReport",
    "EscalationHandler",
    "Expect",
    "Gap",
    "JobEvents",
    "JobSpec",
    "RecordingHandler",
    "Route",
    "RoutingTable",
    "RunStore",
    "Scenario",
    "Section",
    "StaticTools",
    "SubtaskOutcome",
    "ToolSource",
    "ask",
    "ask_events",
    "assemble_report",
    "load_scenario",
    "load_scenario_text",
    "render_html",
    "render_markdown",
    "replay",
    "replay_all",
    "run_file",
    "run_file_events",
    "run_job",
    "run_scenario",
    "scenario_json_schema",
    "store_path",
    "subtask_status",
]
