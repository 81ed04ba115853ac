"""`fanout ask`: a question on a tools file's tools, decomposed, fanned out and synthesized."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The CLI and MCP servers, as subprocesses.
pytestmark = pytest.mark.process

TOOLS = """\
# Real MCP servers and a scripted model: the whole ask path, no key, no network.
mcp_servers:
  time:
    command: [python, -m, mcp_server_time, --local-timezone, UTC]
    startup_timeout_s: 30
  git:
    command: [python, -m, mcp_server_git, --repository, .]
    cwd: repo
    startup_timeout_s: 30
model:
  provider: scripted
  latency_s: 0.01
  turns:
    lead:
      - subtasks:
          - {id: clock, query: "the time in UTC", tools: [time.get_current_time]}
          - {id: repo, query: "the repository's status", tools: [git.git_status]}
      - text: "The repository is clean [repo] as of the UTC time [clock]."
    clock:
      - calls: [{tool: time.get_current_time, args: {timezone: UTC}}]
      - text: "The time tool answered (time.get_current_time)."
    repo:
      - calls: [{tool: git.git_status, args: {repo_path: .}}]
      - text: "Working tree clean (git.git_status)."
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Fan Out", "-c", "user.email=fanout@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _ask(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FANOUT_STORE": str(tmp_path / "runs.sqlite")}
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "ask", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def test_ask_runs_end_to_end_on_mcp_tools_with_a_scripted_model(tmp_path: Path) -> None:
    """The lead plans two subtasks on two real MCP servers; the answer is the lead's."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "README").write_text("hello\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "first")
    tools = tmp_path / "tools.yaml"
    tools.write_text(TOOLS)
    done = _ask(tmp_path, "Is the repository clean, and when?", "--tools", str(tools), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(s["id"], s["status"]) for s in report["subtasks"]] == [
        ("clock", "complete"),
        ("repo", "complete"),
    ]
    git_finding = report["answer"]["sections"][1]["findings"][0]
    assert git_finding["tool"] == "git.git_status"
    # The lead cited [repo] then [clock]: their sources, numbered as the answer cites them.
    assert report["answer"]["text"].startswith("The repository is clean [1]")
    assert [s["subtask"] for s in report["answer"]["sources"]] == ["repo", "clock"]
    runs = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "runs", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
        env={**os.environ, "FANOUT_STORE": str(tmp_path / "runs.sqlite")},
    )
    assert json.loads(runs.stdout)[0]["status"] == "finished"


@pytest.mark.parametrize(
    ("text", "args", "needle"),
    [
        pytest.param(
            "job: {query: x}\ntools: {}\n",
            [],
            "tools.yaml:1: job: expected only tools",
            id="job-key",
        ),
        pytest.param(
            "tools: {}\n",
            ["--model", "scripted"],
            "--model: model: expected a model block with provider: scripted and its turns",
            id="scripted-without-turns",
        ),
        pytest.param(
            "tools: {}\n", ["--model", "openai:"], "--model: name: expected a model name",
            id="empty-model-name",
        ),
        pytest.param(
            "tools: {}\n",
            ["--model", "openai:gemma", "--base-url", "127.0.0.1:8080/v1"],
            "--base-url: base_url: expected an http(s) URL",
            id="base-url-without-scheme",
        ),
        pytest.param(
            "tools: {}\n",
            ["--model", "mistral:large"],
            "--model: provider: expected one",
            id="unknown-provider",
        ),
        pytest.param(
            "tools: {}\nmodel: {provider: openai, api_key_env: NOPE_NOT_SET_1}\n",
            [],
            "NOPE_NOT_SET_1, which is not set",
            id="missing-key",
        ),
    ],
)
def test_bad_ask_input_exits_2_naming_what_is_wrong(
    tmp_path: Path, text: str, args: list[str], needle: str
) -> None:
    """A tools file with a job, no model, an unknown provider or a missing key: exit 2."""
    tools = tmp_path / "tools.yaml"
    tools.write_text(text)
    # --docs gives it a tool (an empty folder): the problem is the file's or the model's.
    docs = tmp_path / "papers"
    docs.mkdir()
    done = _ask(tmp_path, "a question", "--tools", str(tools), "--docs", str(docs), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs.sqlite").exists()
