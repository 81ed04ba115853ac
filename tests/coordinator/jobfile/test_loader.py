"""The scenario loader: valid files load merged, malformed ones name line, field and fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.jobfile.loader import load_scenario, load_scenario_text, scenario_json_schema
from coordinator.jobfile.scenario import Scenario
from shared.errors import InputFileError, InputFileErrors

HERE = Path(__file__).resolve().parents[1]
MALFORMED = sorted((HERE / "malformed").glob("*.yaml"))
DESIGN_EXAMPLE = HERE / "data" / "design_example.yaml"
_HEADER = re.compile(r"^# expect: (\d+) (\S+) (.+)$")


def _expectation(path: Path) -> tuple[int, str, str]:
    match = _HEADER.match(path.read_text(encoding="utf-8").splitlines()[0])
    assert match, f"{path.name} must start with '# expect: LINE FIELD FRAGMENT'"
    return int(match[1]), match[2], match[3]


def _errors(path: Path) -> list[InputFileError]:
    with pytest.raises(InputFileErrors) as info:
        load_scenario(path)
    return info.value.errors


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in MALFORMED])
def test_malformed_file_reports_its_one_problem(path: Path) -> None:
    """Each malformed file yields exactly its one error: the line, the field and the fix."""
    line, field, fragment = _expectation(path)
    errors = _errors(path)
    described = [e.describe() for e in errors]
    assert len(errors) == 1, described
    (error,) = errors
    assert (error.file, error.line, error.field) == (str(path), line, field), described
    assert fragment in error.describe(), described
    assert error.describe().startswith(f"{path}:{line}: {field}: expected ")


def test_corpus_is_large_enough() -> None:
    """The malformed corpus covers at least fifteen distinct problems."""
    assert len(MALFORMED) >= 15


BASE = """\
scenario: base
job:
  query: "battery research"
  defaults:
    max_steps: 5
    retry: {max_attempts: 6, initial_backoff_s: 2, jitter: none}
  subtasks:
    - id: market
      query: "market size"
      tools: [search]
      retry: {max_attempts: 2}
      plan:
        - call: search
          args: {q: market}
    - id: patents
      query: "patents"
      max_steps: 3
      context_window: 9000
tools:
  search:
    params:
      q: {type: string}
    responses:
      - ok: {results: [a]}
model: {provider: scripted}  # plans patents, which has no plan
"""


def _load(text: str) -> Scenario:
    return load_scenario_text(text, "inline.yaml")


def _problems(text: str) -> list[str]:
    with pytest.raises(InputFileErrors) as info:
        _load(text)
    return [e.describe() for e in info.value.errors]


def test_design_example_loads_with_merged_defaults() -> None:
    """The docs/design.md §5 example loads; each subtask carries the job's defaults."""
    scenario = load_scenario(DESIGN_EXAMPLE)
    assert scenario.scenario == "partial-outage"
    assert scenario.seed == 7
    assert scenario.source == str(DESIGN_EXAMPLE)
    assert scenario.job.routing == {"transient": "retry_later"}
    assert scenario.job.defaults.retry.jitter == "none"
    assert [s.id for s in scenario.job.subtasks] == ["market", "patents"]
    for sub in scenario.job.subtasks:
        assert sub.retry == scenario.job.defaults.retry
        assert (sub.max_steps, sub.context_window, sub.tool_timeout_s) == (8, 16000, 30)
    assert scenario.tools["patent_db"].responses[0].error == "permission"
    assert scenario.expect is not None
    assert scenario.expect.gaps["patents"]["route"] == "escalate"


def test_retry_override_is_merged_key_by_key() -> None:
    """A subtask overriding only retry.max_attempts keeps the job's other retry defaults."""
    market, patents = _load(BASE).job.subtasks
    assert market.retry.max_attempts == 2
    assert (market.retry.initial_backoff_s, market.retry.jitter) == (2, "none")
    assert market.retry.max_backoff_s == 8  # built in: neither the job nor the subtask sets it
    assert patents.retry.max_attempts == 6


def test_settings_fall_back_from_subtask_to_job_to_built_in() -> None:
    """Each setting comes from the subtask, else job.defaults, else the built-in default."""
    scenario = _load(BASE)
    market, patents = scenario.job.subtasks
    assert (market.max_steps, market.context_window) == (5, 16000)
    assert (patents.max_steps, patents.context_window) == (3, 9000)
    assert scenario.job.defaults.max_steps == 5
    assert scenario.job.defaults.retry.max_attempts == 6
    assert scenario.job.defaults.retry.max_backoff_s == 8


def test_source_is_not_serialized() -> None:
    """The file a scenario came from is kept but never part of its dump."""
    scenario = _load(BASE)
    assert scenario.source == "inline.yaml"
    assert "source" not in scenario.model_dump()


def test_source_key_in_file_is_refused() -> None:
    """A file cannot set the loader's own ``source`` field."""
    assert _problems(BASE + "source: elsewhere.yaml\n") == [
        "inline.yaml:26: source: expected a known field "
        "(the loader sets source to the file's path)"
    ]


def test_routing_null_removes_a_route() -> None:
    """A routing override of null loads as None (the category then has no route)."""
    text = BASE.replace('  query: "battery research"\n',
                        '  query: "battery research"\n  routing: {business: null}\n')
    assert _load(text).job.routing == {"business": None}


def test_defined_tool_outside_allowlist_loads() -> None:
    """A call to a defined tool outside the allowlist fails at run time, not at load time."""
    text = BASE.replace("tools: [search]", "tools: []")
    assert _load(text).job.subtasks[0].tools == []


def test_mcp_server_tools_need_no_definition() -> None:
    """A dotted tool whose prefix is a declared MCP server may be called and allowlisted."""
    text = BASE.replace("tools: [search]", "tools: [search, papers.find]") + (
        "mcp_servers:\n  papers: {command: [papers-mcp]}\n"
    )
    assert _load(text).job.subtasks[0].tools == ["search", "papers.find"]
    undeclared = BASE.replace("tools: [search]", "tools: [search, papers.find]")
    assert _problems(undeclared) == [
        "inline.yaml:10: job.subtasks[0].tools[1]: expected a tool defined under tools "
        "(defined: search), or a server 'papers' declared under mcp_servers, got 'papers.find'"
    ]


def test_every_problem_is_reported_in_line_order() -> None:
    """Several mistakes in one file come back together, sorted by line."""
    text = (
        BASE.replace("max_steps: 3", "max_step: 3")
        .replace('query: "market size"', "query: 42")
        .replace("- ok: {results: [a]}", "- error: crashed")
    )
    assert _problems(text) == [
        "inline.yaml:9: job.subtasks[0].query: expected a string, got 42",
        "inline.yaml:17: job.subtasks[1].max_step: expected a known field "
        "(did you mean 'max_steps'?)",
        "inline.yaml:24: tools.search.responses[0].error: expected one of timeout, unavailable, "
        "connection_reset, rate_limited, validation, business, permission, crash, "
        "got 'crashed'",
    ]


def test_dotted_tool_names_are_quoted_in_paths() -> None:
    """A tool name with a dot is shown as a quoted key so the path stays unambiguous."""
    text = BASE.replace("  search:\n", '  "srv.search":\n').replace(
        "tools: [search]", "tools: []"
    ).replace("- call: search", "- finish: done").replace("args: {q: market}", "")
    text = text.replace("q: {type: string}", "q: {type: text}")
    assert _problems(text) == [
        'inline.yaml:22: tools["srv.search"].params.q.type: expected one of string, integer, '
        "number, boolean, array, object, got 'text'"
    ]


def test_yaml_merge_keys_are_not_duplicates() -> None:
    """Keys written beside a ``<<`` merge override it without counting as duplicates."""
    text = BASE.replace(
        '    - id: patents\n      query: "patents"\n',
        '    - &p {id: patents, query: "patents"}\n    - <<: *p\n      id: designs\n'
        '      query: "designs"\n',
    )
    subtasks = _load(text).job.subtasks
    assert [s.id for s in subtasks] == ["market", "patents", "designs"]
    assert subtasks[2].max_steps == 3


def test_missing_file_names_the_file() -> None:
    """A path that does not exist is one error on the pseudo-field <file>."""
    errors = _errors(HERE / "no-such-scenario.yaml")
    assert [(e.line, e.field, e.got) for e in errors] == [(None, "<file>", "no such file")]


def test_error_is_also_an_input_file_error() -> None:
    """Callers may catch the single-error base class and still see every problem."""
    with pytest.raises(InputFileError) as info:
        _load("scenario: x\n")
    assert str(info.value) == "inline.yaml:1: job: expected a mapping (this field is required)"


def test_json_schema_describes_the_file_format() -> None:
    """The schema is draft 2020-12 and names every top-level key of the design example."""
    schema = scenario_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    example = load_scenario(DESIGN_EXAMPLE).model_dump(exclude_defaults=True, by_alias=True)
    assert set(example) <= set(schema["properties"])
    assert "source" not in schema["properties"]
    assert schema["required"] == ["scenario", "job"]
    defs = schema["$defs"]
    assert set(defs["JobSpec"]["properties"]) >= {"query", "defaults", "routing", "subtasks"}
    assert [s["$ref"] for s in defs["SubtaskSpec"]["properties"]["plan"]["items"]["oneOf"]] == [
        "#/$defs/CallStep", "#/$defs/EscalateStep", "#/$defs/FinishStep"
    ]
    assert "required" not in defs["SubtaskSettings"]  # defaults are partial
    assert "default" not in defs["SubtaskSpec"]["properties"]["max_steps"]
    assert {"required": ["ok"]} in defs["ResponseSpec"]["oneOf"]
