"""The public surface of each package is pinned, so a change to it is a visible decision."""

from __future__ import annotations

import importlib

import pytest

import coordinator
import shared
import subagents

WINGS = [
    "coordinator.api",
    "coordinator.cli",
    "coordinator.jobfile",
    "coordinator.serve",
    "coordinator.store",
    "coordinator.views",
    "subagents.mcp",
    "subagents.models",
    "subagents.planners",
    "subagents.research",
    "subagents.research.search",
    "subagents.simulated",
    "subagents.telemetry",
]


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


def test_the_coordinator_entry_points_are_exported() -> None:
    """run_job, the report and the scenario loader are the coordinator's public API."""
    assert {"run_job", "CoverageReport", "load_scenario", "replay", "RunStore"} <= set(
        coordinator.__all__
    )


def test_the_python_api_is_exported() -> None:
    """ask, run_file and their event streams are what a Python user imports (DESIGN §14)."""
    assert {"ask", "run_file", "ask_events", "run_file_events", "JobEvents"} <= set(
        coordinator.__all__
    )


@pytest.mark.parametrize("name", WINGS)
def test_every_wing_names_its_surface(name: str) -> None:
    """Each wing's __init__ lists what the rest of the house may use, and each name resolves."""
    wing = importlib.import_module(name)
    assert wing.__all__, name
    for member in wing.__all__:
        assert hasattr(wing, member), f"{name}.{member}"
