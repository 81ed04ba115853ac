"""The pytest plugin through pytest's own pytester: scenario files as test items."""

from __future__ import annotations

import pytest

# fanout's modules are imported by this test run already, so the inner pytest cannot
# assertion-rewrite them as it would for an installed plugin's distribution.
QUIET = ("-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:cacheprovider")

PASSING = """\
scenario: search-works
seed: 1
job:
  query: "q"
  subtasks:
    - id: a
      query: "a"
      tools: [search]
      plan: [{call: search, args: {q: "x"}}]
tools:
  search:
    params: {q: {type: string}}
    latency_s: 2
    responses: [{ok: {results: [1]}}]
expect:
  outcome: complete
  elapsed_s: 2
"""

FAILING = (
    PASSING.replace("search-works", "search-fails")
    .replace("outcome: complete", "outcome: failed")
    .replace("elapsed_s: 2", "elapsed_s: 5")
)

NOT_A_SCENARIO = """\
name: ci
on: [push]
jobs: {build: {runs-on: ubuntu-latest}}
"""

BROKEN = """\
scenario: broken
job:
  query: "q"
  subtasks:
    - id: a
      query: "a"
      plan: [{call: serch}]
tools:
  search:
    responses: [{ok: 1}]
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project holding a passing, a failing and a broken scenario, and other YAML."""
    pytester.makefile(".yaml", ok=PASSING, bad=FAILING, workflow=NOT_A_SCENARIO)
    pytester.makefile(".yml", broken=BROKEN)
    return pytester


def test_passing_and_failing_scenarios_are_items_named_after_them(
    project: pytest.Pytester,
) -> None:
    """Each scenario file is one item named after its scenario; other YAML is no item, and
    is named in one line after the collection (it was passed over without a word)."""
    result = project.runpytest("-v", *QUIET)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["*bad.yaml::search-fails FAILED*", "*ok.yaml::search-works PASSED*"]
    )
    result.stdout.fnmatch_lines(["fanout: 1 YAML file(s) not collected, not scenarios "
                                 "(no top-level `scenario` key): workflow.yaml"])
    assert "workflow.yaml::" not in result.stdout.str()


def test_a_flow_style_scenario_is_collected_as_replay_runs_it(
    pytester: pytest.Pytester,
) -> None:
    """A scenario written in YAML's flow style ({"scenario": ..., "job": ...}, JSON too)
    is an item like any other: `fanout replay` runs it, and it was dropped unseen."""
    import json

    import yaml

    from coordinator.cli import main

    flow = json.dumps(yaml.safe_load(PASSING))
    assert not flow.startswith("scenario")
    pytester.makefile(".yaml", flow=flow)
    assert main(["replay", str(pytester.path / "flow.yaml")]) == 0
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*flow.yaml::search-works PASSED*"])
    assert "not collected" not in result.stdout.str()


def test_no_yaml_file_in_scope_is_passed_over_without_a_word(
    pytester: pytest.Pytester,
) -> None:
    """Not a scenario (a word "scenario" in a comment included), a list at the top, a file
    under live/: no item, and each is named after the collection, also with -q."""
    pytester.makefile(".yaml", ok=PASSING, workflow=NOT_A_SCENARIO,
                      notes="# a scenario: not this one\nname: x\n",
                      listed="- {scenario: x}\n")
    pytester.mkdir("live").joinpath("real.yaml").write_text(PASSING)
    result = pytester.runpytest("-q", *QUIET)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "fanout: 3 YAML file(s) not collected, not scenarios (no top-level `scenario` key): "
        "listed.yaml, notes.yaml, workflow.yaml",
        "fanout: 1 YAML file(s) not collected, under live/ *: live/real.yaml",
    ])


def test_a_failing_expect_shows_path_expected_actual_without_a_traceback(
    project: pytest.Pytester,
) -> None:
    """The failure lists each mismatch as path, expected, actual; no Python traceback."""
    result = project.runpytest("-k", "search-fails", *QUIET)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "outcome: expected 'failed', got 'complete'" in out
    assert "elapsed_s: expected 5.0, got 2.0" in out
    assert "Traceback" not in out and "runtest" not in out


def test_a_file_that_does_not_load_names_its_line_and_field(project: pytest.Pytester) -> None:
    """A broken scenario fails with the loader's file:line: field message."""
    result = project.runpytest("-k", "broken", *QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*broken.yml:7: job.subtasks[[]0[]].plan[[]0[]].call*"])


def test_dash_k_selects_by_scenario_name(project: pytest.Pytester) -> None:
    """-k matches the scenario's name, not only its file's."""
    result = project.runpytest("-k", "search-works", *QUIET)
    result.assert_outcomes(passed=1, deselected=2)


def test_the_ini_option_limits_collection_to_its_paths(pytester: pytest.Pytester) -> None:
    """With fanout_scenarios set, only scenarios under it are collected, also without args."""
    pytester.mkdir("library").joinpath("ok.yaml").write_text(PASSING)
    pytester.mkdir("fixtures").joinpath("bad.yaml").write_text(FAILING)
    pytester.mkdir("live")
    pytester.path.joinpath("library", "live").mkdir()
    pytester.path.joinpath("library", "live", "real.yaml").write_text(FAILING)
    pytester.makeini("[pytest]\nfanout_scenarios = library\ntestpaths = fixtures\n")
    result = pytester.runpytest("-v", *QUIET)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*library/ok.yaml::search-works PASSED*"])
