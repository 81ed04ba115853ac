"""The public surface of each package is pinned, so a change to it is a visible decision."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

import coordinator
import shared
import subagents

# Exactly what each package's __all__ lists today: a name added or dropped fails here,
# so a change to the surface is a decision made in this file, not a side effect.
SURFACE: dict[str, list[str]] = {
    "shared": [
        "AnyioClock", "BusinessRuleViolation", "ChangedState", "Clock", "ContextDecision",
        "ERROR_CATEGORIES", "ErrorCategory", "Escalation", "FanoutError", "Finding",
        "InputFileError", "InputFileErrors", "InvalidToolInput", "NextSafeAction",
        "RandomTraceIds", "SeededTraceIds", "TRIGGERS", "TokenCounter", "ToolError", "ToolFailure",
        "ToolPermissionDenied", "ToolResult", "TraceIds", "TransientToolError", "Trigger",
        "classify_exception", "default_next_action", "new_trace_id", "parse_retry_after",
        "register_classifier", "required_margin", "run_in_virtual_time", "should_compact_or_stop",
        "unregister_classifier",
    ],
    "subagents": [
        "Action", "CallAction", "CallContext", "CallStep", "Context", "EscalateAction",
        "EscalateStep", "ExecEvent", "ExecObserver", "FinishAction", "FinishStep", "Observation",
        "PlanStep", "Planner", "ProgressEvent", "ProgressObserver", "RetryPolicy",
        "SchemaViolation", "ScriptedPlanner", "SimulatedTools", "SubagentResult", "SubagentRun",
        "SubtaskSettings", "SubtaskSpec", "Tool", "ToolOutput", "execute_tool_safely",
        "params_to_schema", "run_subagent", "run_with_retry", "validate",
    ],
    "coordinator": [
        "Answer", "CoverageReport", "Gap", "JobEvents", "Section", "SubtaskOutcome", "ask",
        "ask_events", "run_file", "run_file_events",
    ],
    "coordinator.api": [
        "EscalationCallback", "EventCallback", "JobEvents", "PlanCallback", "StoreLike",
        "ToolLike", "ask",
        "ask_events", "research_tools", "run_file", "run_file_events",
    ],
    "coordinator.cli": [
        "build_parser", "main",
    ],
    "coordinator.engine": [
        "Executor", "Hooks", "LocalExecutor", "Run", "RunRequest", "Start", "TemporalExecutor",
        "TemporalTarget", "drive", "interrupted_report", "open_run", "restored_runs",
    ],
    "coordinator.jobfile": [
        "Expect", "Mismatch", "Scenario", "check_expect", "job_servers",
        "list_job_tools", "load_scenario", "load_scenario_text", "scenario_json_schema",
    ],
    "coordinator.mcpserve": [
        "ArgumentRefused", "Busy", "Door", "DoorConfig", "RunAnswer", "build_server",
        "serve_http", "serve_stdio",
    ],
    "coordinator.serve": [
        "BindRefused", "RunManager", "ServeConfig", "ServeError", "TokenError", "bind_socket",
        "check_bind", "create_app", "is_loopback", "read_token", "run_server", "url_of",
        "valid_run_id",
    ],
    "coordinator.store": [
        "Backend", "ResumeRefused", "RunNotFound", "RunRecorder", "RunRow", "RunStatus",
        "RunStore", "StoreError", "StoreWriter", "new_run_id", "open_backend", "redact",
        "store_path",
    ],
    "coordinator.views": [
        "LiveBoard", "render_html", "render_markdown", "report_view", "runs_table",
    ],
    "subagents.mcp": [
        "McpServer", "McpServerError", "McpServerSpec", "McpServerStartError", "McpToolError",
        "McpToolSource", "classify_text", "open_mcp_tools",
    ],
    "subagents.models": [
        "AnthropicClient", "AssistantMessage", "EndpointLimiter", "FOLLOWUP_TOOL", "MODEL_ERRORS",
        "MissingModelKey", "ModelCallFailed", "ModelClient", "ModelFailureKind", "ModelLimits",
        "ModelRequest", "ModelSpec", "ModelTurn", "OpenAIClient", "PLAN_TOOL", "PlannedSubtask",
        "Provider", "RateReport", "ScriptedCall", "ScriptedError", "ScriptedModel", "ScriptedTurn",
        "StopReason", "TokenBudget", "TokenMeter", "ToolCall", "ToolResultMessage", "ToolSpec",
        "TranscriptMessage", "Usage", "UserMessage", "build_client", "classify_model_error",
        "forget_shared_limiters", "limiter_of", "model_failure_error", "read_rate_headers",
    ],
    "subagents.planners": [
        "Action", "CallAction", "EscalateAction", "FinishAction", "Hint", "Observation",
        "PlanEnv", "Planner", "PlannerState", "ScriptedPlanner", "TurnPlanner", "reads_hints",
    ],
    "subagents.research": [
        "AddressGuard", "DocIndex", "DocsSpec", "FetchSpec", "IndexStats", "ResearchToolError",
        "ResearchTools", "ResearchToolsSpec", "WebSpec", "blocked_reason", "index_path",
        "open_research_tools", "research_tool_names", "resolve_docs_folder",
    ],
    "subagents.research.search": [
        "BRAVE_URL", "BraveBackend", "SearchBackend", "SearchHit", "SearchRequest",
        "SearxngBackend", "TAVILY_URL", "TavilyBackend", "make_backend", "run_search",
    ],
    "subagents.simulated": [
        "ParamSpec", "ResponseSpec", "SimToolSpec", "SimulatedCrash", "SimulatedTools", "WhenRule",
    ],
    "subagents.telemetry": [
        "CAPTURE_CONTENT_ENV", "FLUSH_TIMEOUT_S", "FanoutMetrics", "RunMetrics", "RunTracer",
        "SEMCONV_VERSION", "Telemetry", "TelemetryUnavailable", "capture_content_from_env",
        "configure_from_env", "current_metrics", "enable_metrics", "record_event_delivery",
        "record_limiter_wait", "reset_metrics", "tool_kind", "tracer_of", "tracing_enabled",
        "tracing_requested",
    ],
}
WINGS = [name for name in SURFACE if "." in name]


def test_every_exported_name_resolves() -> None:
    """Each name in a package's __all__ is importable from it."""
    for module in (shared, subagents, coordinator):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_the_issue_two_contract_is_exported() -> None:
    """The names issue 2 promises are exported from shared and subagents."""
    assert {
        "ToolResult",
        "ToolError",
        "Escalation",
        "ErrorCategory",
        "classify_exception",
        "should_compact_or_stop",
        "TokenCounter",
    } <= set(shared.__all__)
    assert {"Tool", "RetryPolicy", "execute_tool_safely"} <= set(subagents.__all__)


def test_the_coordinator_exports_only_the_users_api() -> None:
    """The package is the Python API (docs/design.md §14): ask, run_file, their event streams and
    the report's types; the engine's internals are imported from their own modules."""
    assert set(coordinator.__all__) == {
        "ask", "run_file", "ask_events", "run_file_events", "JobEvents",
        "CoverageReport", "Answer", "Gap", "Section", "SubtaskOutcome",
    }


def test_the_python_api_is_exported() -> None:
    """ask, run_file and their event streams are what a Python user imports (docs/design.md §14)."""
    assert {"ask", "run_file", "ask_events", "run_file_events", "JobEvents"} <= set(
        coordinator.__all__
    )


@pytest.mark.parametrize("name", list(SURFACE))
def test_the_surface_is_exactly_the_pinned_one(name: str) -> None:
    """Each package exports exactly the names pinned above, no more and no fewer."""
    assert sorted(importlib.import_module(name).__all__) == SURFACE[name]


@pytest.mark.parametrize("name", WINGS)
def test_every_wing_names_its_surface(name: str) -> None:
    """Each wing's __init__ lists what the rest of the house may use, and each name resolves."""
    wing = importlib.import_module(name)
    assert wing.__all__, name
    for member in wing.__all__:
        assert hasattr(wing, member), f"{name}.{member}"


def _shadowed_names() -> list[tuple[str, str]]:
    """(package, name) for every name a package of the house exports that is also the name
    of one of its submodules."""
    root = Path(__file__).resolve().parents[1]
    pairs = []
    for init in sorted(p for top in ("shared", "subagents", "coordinator")
                       for p in (root / top).rglob("__init__.py")):
        folder = init.parent
        package = ".".join(folder.relative_to(root).parts)
        submodules = {p.stem for p in folder.glob("*.py")} | {
            p.parent.name for p in folder.glob("*/__init__.py")}
        exported = getattr(importlib.import_module(package), "__all__", [])
        pairs += [(package, name) for name in exported if name in submodules]
    return pairs


@pytest.mark.parametrize(("package", "name"), _shadowed_names(),
                         ids=lambda v: str(v))
def test_a_name_that_is_also_a_submodule_stays_the_exported_object(
    package: str, name: str
) -> None:
    """Importing the submodule of the same name does not replace the export with the module
    (a lazily exported name would lose to it: such names are bound eagerly)."""
    importlib.import_module(f"{package}.{name}")
    assert not isinstance(getattr(importlib.import_module(package), name), ModuleType)
