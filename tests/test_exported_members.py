"""The public surface of each package is pinned, so a change to it is a visible decision."""

from __future__ import annotations

import coordinator
import shared
import subagents


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


def test_shared_imports_nothing_from_the_other_packages() -> None:
    """The dependency rule of DESIGN §1: shared → nothing; subagents → shared only."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    for path in (root / "shared").glob("*.py"):
        text = path.read_text()
        assert "from subagents" not in text and "from coordinator" not in text, path
    for path in (root / "subagents").glob("*.py"):
        assert "from coordinator" not in path.read_text(), path
