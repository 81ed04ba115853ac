"""Jobs on real MCP servers: `fanout run` and `fanout tools`, start failures, replay, loading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from coordinator.cli import main
from coordinator.engine import Hooks, LocalExecutor, RunRequest
from coordinator.jobfile.loader import load_scenario, load_scenario_text, scenario_json_schema
from coordinator.replay import scenario_files
from coordinator.store.runs import RunStore
from shared.errors import InputFileErrors
from subagents.mcp.spec import McpServerSpec

ROOT = Path(__file__).resolve().parents[3]
OFFICE_CLOCKS = ROOT / "scenarios" / "live" / "office_clocks.yaml"


@pytest.fixture
def anyio_backend() -> str:
    """MCP servers are real subprocesses: these tests run on asyncio, in real time."""
    return "asyncio"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the fanout CLI in-process; returns (exit code, stdout, stderr)."""
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def by_id(items: list[dict[str, Any]], key: str = "id") -> dict[str, dict[str, Any]]:
    """Report entries keyed by subtask id."""
    return {item[key]: item for item in items}


@pytest.mark.process
def test_fanout_run_office_clocks_on_the_real_time_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example job runs for real: offices answer, bad input becomes validation gaps."""
    store = str(tmp_path / "runs.sqlite")
    code, out, _err = run_cli(["run", str(OFFICE_CLOCKS), "--json", "--store", store], capsys)
    assert code == 0
    report = json.loads(out)
    subtasks = by_id(report["subtasks"])
    for office in ("oslo", "new-york", "tokyo", "sydney", "standup"):
        assert subtasks[office]["status"] == "complete", office
    assert subtasks["mumbai"]["status"] == "complete"  # corrected after the server's error
    assert subtasks["mumbai"]["attempts"] == 2
    gaps = by_id(report["gaps"], "subtask_id")
    assert set(gaps) == {"atlantis", "unnamed-office"}
    atlantis = gaps["atlantis"]
    assert (atlantis["errorCategory"], atlantis["route"]) == ("validation", "gap")
    assert "timezone" in atlantis["message"] and "Atlantis/Poseidonis" in atlantis["message"]
    unnamed = gaps["unnamed-office"]
    assert unnamed["errorCategory"] == "validation"
    assert "required argument" in unnamed["message"]
    assert subtasks["unnamed-office"]["attempts"] == 1
    standup = next(
        s for s in report["answer"]["sections"] if s["subtask_id"] == "standup"
    )["findings"][0]["data"]
    assert standup["source"]["timezone"] == "Europe/Oslo"
    assert standup["target"]["timezone"] == "America/New_York"


@pytest.mark.process
def test_fanout_tools_json_lists_each_servers_tools_with_schemas(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fanout tools --json` prints one document with every tool's input schema."""
    code, out, _err = run_cli(["tools", str(OFFICE_CLOCKS), "--json"], capsys)
    assert code == 0
    document = json.loads(out)
    [server] = document["servers"]
    assert server["server"] == "time" and server["server_name"] == "mcp-time"
    tools = by_id(server["tools"], "name")
    schema = tools["time.get_current_time"]["input_schema"]
    assert schema["required"] == ["timezone"]
    assert tools["time.convert_time"]["side_effects"] is False


@pytest.mark.process
def test_fanout_tools_table_marks_required_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fanout tools` shows a table per server, required parameters starred."""
    code, out, _err = run_cli(["tools", str(OFFICE_CLOCKS)], capsys)
    assert code == 0
    assert "time.get_current_time" in out and "timezone*" in out and "read-only" in out


def git(repo: Path, *args: str) -> None:
    """Run git in ``repo`` with a fixed identity."""
    subprocess.run(
        ["git", "-c", "user.name=Fan Out", "-c", "user.email=fanout@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


GIT_JOB = """\
scenario: repo-audit
mcp_servers:
  git:
    command: [python, -m, mcp_server_git, --repository, .]
    cwd: repo               # relative to this file
tools:
  summarize:                # a simulated tool in the same job
    params: {text: {type: string}}
    responses: [{ok: "two commits, clean tree"}]
job:
  query: "What state is the repository in?"
  defaults: {tool_timeout_s: 20}
  subtasks:
    - id: status
      query: "working tree status"
      tools: [git.git_status]
      plan: [{call: git.git_status, args: {repo_path: .}}]
    - id: log
      query: "recent commits"
      tools: [git.git_log]
      plan: [{call: git.git_log, args: {repo_path: ., max_count: 5}}]
    - id: elsewhere
      query: "a repository outside the allowed one"
      tools: [git.git_status]
      plan: [{call: git.git_status, args: {repo_path: ..}}]
    - id: summary
      query: "summarize"
      tools: [summarize]
      plan: [{call: summarize, args: {text: "status and log"}}]
"""


@pytest.mark.process
@pytest.mark.anyio
async def test_git_server_job_on_a_repository_the_test_creates(tmp_path: Path) -> None:
    """mcp-server-git answers status and log; a path outside its repository is permission."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "First commit from the fanout test")
    job_file = tmp_path / "repo_audit.yaml"
    job_file.write_text(GIT_JOB)
    scenario = load_scenario(job_file)
    store = RunStore(tmp_path / "runs.sqlite")
    recorder = store.create_run(
        job=scenario.scenario, query=scenario.job.query, file=str(job_file),
        spec_text=GIT_JOB, seed="0", speed=1.0,
    )
    try:
        # No servers passed in: the runner starts them itself, as a resume does.
        request = RunRequest(scenario, GIT_JOB, str(job_file))
        report = await LocalExecutor(recorder=recorder).execute(request, Hooks())
    finally:
        recorder.close()
    wire = report.to_wire()
    subtasks = by_id(wire["subtasks"])
    assert subtasks["status"]["status"] == "complete"
    assert subtasks["log"]["status"] == "complete"
    assert subtasks["summary"]["status"] == "complete"
    findings = {s["subtask_id"]: s["findings"] for s in wire["answer"]["sections"]}
    assert "First commit from the fanout test" in findings["log"][0]["data"]
    assert "main" in findings["status"][0]["data"]
    [gap] = wire["gaps"]
    assert gap["subtask_id"] == "elsewhere"
    assert (gap["errorCategory"], gap["route"]) == ("permission", "escalate")
    assert "outside the allowed repository" in gap["message"]


def write_job(tmp_path: Path, servers: str, call: str = "time.get_current_time") -> Path:
    """A one-subtask job file using the given mcp_servers block."""
    job = tmp_path / "job.yaml"
    job.write_text(
        f"scenario: one-call\nmcp_servers:\n{servers}\njob:\n  query: q\n  subtasks:\n"
        f"    - id: only\n      query: q\n      tools: [{call}]\n"
        f"      plan:\n        - call: {call}\n          args: {{timezone: UTC}}\n"
    )
    return job


def test_a_refusal_when_the_run_opens_names_its_line_from_the_one_read(
    tmp_path: Path,
) -> None:
    """An unknown SERVER.TOOL found once the server runs is named with its file's line
    from the load itself: the file is read and parsed once, so it may be gone by then."""
    from types import SimpleNamespace

    from coordinator.jobfile.mcp import check_server_tools

    job = write_job(tmp_path, "  time:\n    command: [python, -m, mcp_server_time]",
                    call="time.get_curent_time")
    scenario = load_scenario(job)
    job.unlink()
    listed: Any = SimpleNamespace(servers={"time": None},
                                  tools={"time.get_current_time": None})
    with pytest.raises(InputFileErrors) as caught:
        check_server_tools(scenario, listed)
    lines = sorted((e.line, e.field) for e in caught.value.errors)
    assert lines == [(10, "job.subtasks[0].tools[0]"), (12, "job.subtasks[0].plan[0].call")]


@pytest.mark.process
def test_server_that_cannot_start_exits_2_naming_server_and_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that cannot start stops `fanout run` before any subagent: exit 2, no run."""
    job = write_job(tmp_path, "  time:\n    command: [python, -m, no_such_mcp_server_module]")
    store = str(tmp_path / "runs.sqlite")
    code, out, err = run_cli(["run", str(job), "--json", "--store", store], capsys)
    assert code == 2 and out == ""
    assert "MCP server 'time'" in err
    assert "python -m no_such_mcp_server_module" in err
    assert "No module named no_such_mcp_server_module" in err
    assert "Traceback" not in err
    code, out, _ = run_cli(["runs", "--json", "--store", store], capsys)
    assert json.loads(out) == []


@pytest.mark.process
def test_tool_the_server_does_not_offer_is_refused_before_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Calling SERVER.TOOL that the running server does not list is a load error (exit 2)."""
    servers = "  time:\n    command: [python, -m, mcp_server_time, --local-timezone, UTC]"
    job = write_job(tmp_path, servers, call="time.get_curent_time")
    code, _out, err = run_cli(["run", str(job), "--store", str(tmp_path / "s.db")], capsys)
    assert code == 2
    assert f"{job}:12: job.subtasks[0].plan[0].call" in err
    assert "did you mean 'time.get_current_time'?" in err


def test_replay_skips_live_directories_and_refuses_live_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fanout replay scenarios/` leaves scenarios/live/ out; naming a live job is exit 2."""
    files = scenario_files([ROOT / "scenarios"])
    assert files and OFFICE_CLOCKS not in files
    code, _out, err = run_cli(["replay", str(OFFICE_CLOCKS)], capsys)
    assert code == 2
    assert "calls MCP servers (time)" in err and "fanout run" in err


def test_live_job_validates_against_the_json_schema() -> None:
    """The example job is valid under `fanout schema`, mcp_servers included."""
    document = yaml.safe_load(OFFICE_CLOCKS.read_text())
    jsonschema.validate(document, scenario_json_schema())
    document["mcp_servers"]["my.time"] = {"command": ["x"]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, scenario_json_schema())


def test_leading_python_is_the_running_interpreter() -> None:
    """A command starting with python runs sys.executable, so .venv servers are found."""
    spec = McpServerSpec(command=["python", "-m", "mcp_server_time"])
    assert spec.argv() == [sys.executable, "-m", "mcp_server_time"]
    assert McpServerSpec(command=["uvx", "x"]).argv() == ["uvx", "x"]


@pytest.mark.parametrize(
    ("servers", "line", "field", "expected"),
    [
        pytest.param(
            '  time: {command: "python -m x"}', 3, "mcp_servers.time.command", "a list",
            id="command-not-list",
        ),
        pytest.param(
            "  time: {command: []}", 3, "mcp_servers.time.command", "at least 1 item",
            id="empty-command",
        ),
        pytest.param(
            "  time:\n    command: [python]\n    max_concurrent_calls: 0", 5,
            "mcp_servers.time.max_concurrent_calls", "an integer ≥ 1", id="bound",
        ),
        pytest.param(
            "  time:\n    command: [python]\n    startup_timeout: 3", 5,
            "mcp_servers.time.startup_timeout", "did you mean 'startup_timeout_s'?",
            id="misspelt-field",
        ),
        pytest.param(
            "  my.time: {command: [python]}", 3, 'mcp_servers["my.time"]',
            "a server name of letters, digits", id="dotted-name",
        ),
    ],
)
def test_malformed_mcp_servers_are_load_errors_with_lines(
    servers: str, line: int, field: str, expected: str
) -> None:
    """A bad mcp_servers block is reported with its line, field path and expectation."""
    text = (
        f"scenario: s\nmcp_servers:\n{servers}\njob:\n  query: q\n  subtasks:\n"
        "    - id: a\n      query: q\n"
    )
    with pytest.raises(InputFileErrors) as caught:
        load_scenario_text(text, "job.yaml")
    problem = next(e for e in caught.value.errors if e.field == field)
    assert problem.line == line
    assert expected in problem.expected


def test_simulated_tool_inside_a_servers_namespace_is_a_load_error() -> None:
    """A simulated tool named SERVER.x for a declared SERVER would be ambiguous: refused."""
    text = (
        "scenario: s\nmcp_servers:\n  time: {command: [python]}\ntools:\n  time.now:\n"
        "    responses: [{ok: 1}]\njob:\n  query: q\n  subtasks:\n    - id: a\n      query: q\n"
    )
    with pytest.raises(InputFileErrors) as caught:
        load_scenario_text(text, "job.yaml")
    assert any(e.field == 'tools["time.now"]' for e in caught.value.errors)
