"""Reading job and scenario files: YAML with line marks, line-precise input errors, expect."""

from typing import TYPE_CHECKING, Any

from coordinator.jobfile.expect import Mismatch, check_expect
from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.jobfile.scenario import Expect, Scenario, scenario_json_schema

if TYPE_CHECKING:
    from coordinator.jobfile.mcp import job_servers, list_job_tools

__all__ = [
    "Expect",
    "Mismatch",
    "Scenario",
    "check_expect",
    "job_servers",
    "list_job_tools",
    "load_scenario",
    "load_scenario_text",
    "scenario_json_schema",
]

_MCP = ("job_servers", "list_job_tools")


def __getattr__(name: str) -> Any:
    # The MCP side loads the MCP SDK (about 50 MiB): only for jobs that use it.
    if name in _MCP:
        from coordinator.jobfile import mcp

        return getattr(mcp, name)
    raise AttributeError(f"module 'coordinator.jobfile' has no attribute {name!r}")
