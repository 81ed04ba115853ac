"""Fan-out, routing on errorCategory, coverage gaps, answer assembly and the CLI."""

from coordinator.loader import load_scenario, load_scenario_text
from coordinator.scenario import Expect, Scenario, scenario_json_schema

__all__ = [
    "Expect",
    "Scenario",
    "load_scenario",
    "load_scenario_text",
    "scenario_json_schema",
]
