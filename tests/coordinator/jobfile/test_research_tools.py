"""The research_tools block: loaded, checked against the calls, in the schema; errors with lines."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from coordinator.jobfile.ask import build_ask_job
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import scenario_json_schema
from shared.errors import InputFileError, InputFileErrors

JOB = """\
scenario: research
research_tools:
{block}
job:
  query: q
  subtasks:
    - id: a
      query: q
      tools: [{tools}]
      plan: [{{finish: done}}]
"""


def _load(block: str, tools: str = "docs.search") -> object:
    return load_scenario_text(JOB.format(block=block, tools=tools), "job.yaml")


def _errors(block: str, tools: str = "docs.search") -> list[InputFileError]:
    with pytest.raises(InputFileErrors) as info:
        _load(block, tools)
    return info.value.errors


def test_a_full_block_loads_and_matches_the_schema() -> None:
    """web (search, url, key variable, fetch settings) and docs load, and validate."""
    block = ("  web:\n    search: brave\n    api_key_env: MY_BRAVE\n"
             "    fetch: {timeout_s: 5, max_bytes: 100000, allow_private: false}\n"
             "  docs: {path: ./papers}")
    scenario = _load(block, "web.search, web.fetch, docs.search, docs.read")
    spec = scenario.research_tools  # type: ignore[attr-defined]
    assert spec.web.key_env() == "MY_BRAVE" and spec.web.fetch.max_bytes == 100000
    document = yaml.safe_load(JOB.format(block=block, tools="docs.read"))
    jsonschema.validate(document, scenario_json_schema())


@pytest.mark.parametrize(
    ("block", "tools", "line", "needle"),
    [
        pytest.param("  web: {search: searxng}", "web.fetch", 3, "searxng needs url",
                     id="searxng-without-url"),
        pytest.param("  web: {search: bing}", "web.fetch", 3, "searxng", id="unknown-backend"),
        pytest.param("  web: {search: brave, api_key: sk-123}", "web.fetch", 3, "api_key",
                     id="inline-key"),
        pytest.param("  web: {fetch: {}}", "web.search", 9, "research_tools.web.search",
                     id="search-not-declared"),
        pytest.param("  docs: {path: .}", "docs.serch", 9, "did you mean", id="typo"),
    ],
)
def test_mistakes_name_their_line_and_field(block: str, tools: str, line: int, needle: str) -> None:
    """Each mistake in a research_tools block, or a call it does not declare, has a line."""
    errors = _errors(block, tools)
    text = " ".join(e.describe() for e in errors)
    assert needle in text, text
    assert errors[0].line == line, text


def test_an_mcp_server_cannot_take_a_research_namespace() -> None:
    """An MCP server named web beside research_tools.web is refused (web.* is taken)."""
    text = JOB.format(block="  web: {fetch: {}}", tools="web.fetch")
    text += "mcp_servers:\n  web: {command: [x]}\n"
    with pytest.raises(InputFileErrors) as info:
        load_scenario_text(text, "job.yaml")
    assert "research_tools declares web.* tools" in info.value.describe()


def test_ask_composes_research_tools_from_flags_file_and_environment(tmp_path: Path) -> None:
    """--docs and --search add tools; FANOUT_SEARCH yields to a file's web; --search wins."""
    papers = tmp_path / "papers"
    papers.mkdir()
    tools = tmp_path / "tools.yaml"
    tools.write_text("research_tools:\n  web: {search: searxng, url: http://127.0.0.1:8888}\n"
                     "model: {provider: scripted}\n")
    scenario, text, _ = build_ask_job("q?", tools, docs=str(papers), env_search="brave")
    spec = scenario.research_tools
    assert spec is not None and spec.web is not None and spec.docs is not None
    assert (spec.web.search, spec.docs.path) == ("searxng", str(papers.resolve()))
    assert "research_tools" in yaml.safe_load(text)
    flagged, _, _ = build_ask_job("q?", tools, search="tavily", env_search="brave")
    assert flagged.research_tools is not None and flagged.research_tools.web is not None
    assert flagged.research_tools.web.search == "tavily"
    env_only, _, _ = build_ask_job("q?", None, env_search="searxng:http://s:1")  # no model
    assert env_only.research_tools is not None and env_only.research_tools.web is not None
    assert env_only.research_tools.web.url == "http://s:1"
