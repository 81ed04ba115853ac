"""Reading job and scenario files: YAML with line marks, line-precise input errors, expect."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.jobfile.expect import Mismatch, check_expect
    from coordinator.jobfile.loader import load_scenario, load_scenario_text
    from coordinator.jobfile.mcp import job_servers, list_job_tools
    from coordinator.jobfile.scenario import Expect, Scenario, scenario_json_schema

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

# Each name is imported from its module on first use (shared/lazy.py): the MCP side loads
# the MCP SDK (about 50 MiB), only for jobs that use it, and importing one part of the
# package loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.jobfile.expect": ("Mismatch", "check_expect"),
    "coordinator.jobfile.loader": ("load_scenario", "load_scenario_text"),
    "coordinator.jobfile.mcp": ("job_servers", "list_job_tools"),
    "coordinator.jobfile.scenario": ("Expect", "Scenario", "scenario_json_schema"),
})
