"""The scenario library in scenarios/: every file validates and teaches what it should.

That each scenario replays and meets its expect is checked by fanout's own pytest plugin,
which collects scenarios/ as test items (pyproject.toml: testpaths, fanout_scenarios).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from coordinator.jobfile.loader import load_scenario, scenario_json_schema
from coordinator.replay import replay, scenario_files
from shared.categories import ERROR_CATEGORIES, TRIGGERS

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
# Live jobs (real MCP servers) are run by `fanout run`, not replayed.
FILES = [f for f in scenario_files([LIBRARY]) if "live" not in f.parts]


def test_library_is_substantial() -> None:
    """The library holds at least 15 scenarios, each with an expect block and a description."""
    assert len(FILES) >= 15
    for file in FILES:
        scenario = load_scenario(file)
        assert scenario.expect is not None, file.name
        assert len(scenario.description) > 20, file.name


@functools.cache
def _schema_validator() -> Any:
    """`fanout schema`'s validator, checked once: checking the schema itself took ~0.3 s, which
    ``jsonschema.validate`` did again for every file."""
    schema = scenario_json_schema()
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(schema)


@pytest.mark.parametrize("file", [pytest.param(f, id=f.stem) for f in FILES])
def test_scenario_validates_against_the_json_schema(file: Path) -> None:
    """The file is valid under `fanout schema`, so editors can check it as people type."""
    _schema_validator().validate(yaml.safe_load(file.read_text()))


def test_library_teaches_every_category_and_trigger() -> None:
    """Across the library every error category and every trigger appears in some gap."""
    categories: set[str] = set()
    triggers: set[str] = set()
    for file in FILES:
        report = replay(load_scenario(file)).report
        for gap in report["gaps"]:
            if gap["errorCategory"]:
                categories.add(gap["errorCategory"])
            triggers.add(gap["trigger"])
            if gap.get("original_trigger"):
                triggers.add(gap["original_trigger"])
    assert set(ERROR_CATEGORIES) <= categories
    # `interrupted` only arises when a stored run is killed (tests/coordinator/store/test_store.py),
    # `cancelled` when a person cancels a run of the service (tests/coordinator/serve/).
    assert set(TRIGGERS) - {"interrupted", "cancelled"} <= triggers


def test_demo_scenario_is_a_flagship() -> None:
    """research_demo.yaml has at least 8 subtasks and mixed outcomes."""
    scenario = load_scenario(LIBRARY / "research_demo.yaml")
    assert len(scenario.job.subtasks) >= 8
    report = replay(scenario).report
    statuses = {s["status"] for s in report["subtasks"]}
    assert {"complete", "gap"} <= statuses or {"complete", "partial"} <= statuses
