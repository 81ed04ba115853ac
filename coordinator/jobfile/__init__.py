"""Reading job and scenario files: YAML with line marks, line-precise input errors, expect."""

from coordinator.jobfile.expect import Mismatch, check_expect
from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.jobfile.mcp import JobTools, job_servers, list_job_tools
from coordinator.jobfile.scenario import Expect, Scenario, scenario_json_schema

__all__ = [
    "Expect",
    "JobTools",
    "Mismatch",
    "Scenario",
    "check_expect",
    "job_servers",
    "list_job_tools",
    "load_scenario",
    "load_scenario_text",
    "scenario_json_schema",
]
