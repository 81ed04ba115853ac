"""A live run recorded as a scenario replays offline to the same statuses, attempts and gaps.

The live run goes through the official ``openai`` SDK against a loopback server that
speaks its wire protocol (overloads, a validation error the model corrects, a permission
stop) and a real MCP server (mcp-server-time); the replay runs with the server stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.loopback._server import RecordedRequest, Reply
from tests.loopback.openai_server import OpenAIServer, completion, error, tool_call

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

KEY = "sk-test-recording-0123456789abcdefghij"

JOB = """\
scenario: recorded-live
seed: 5
mcp_servers:
  time:
    command: [python, -m, mcp_server_time, --local-timezone, UTC]
    startup_timeout_s: 30
model:
  provider: openai
  name: gpt-loopback
  base_url: {base_url}
  api_key_env: FANOUT_RECORD_TEST_KEY
  retry: {{max_attempts: 3, initial_backoff_s: 0.05, multiplier: 2, max_backoff_s: 1, jitter: none}}
job:
  query: "battery research, with the time"
  subtasks:
    - {{id: clock, query: "what time is it in UTC", tools: [time.get_current_time]}}
    - {{id: market, query: "solid-state battery market size", tools: [web_search]}}
    - {{id: patents, query: "solid-state battery patents", tools: [patent_db]}}
tools:
  web_search:
    params: {{query: {{type: string}}}}
    latency_s: 0.02
    responses: [{{ok: {{results: ["IDTechEx: USD 9bn by 2034"]}}}}]
  patent_db:
    params: {{since: {{type: string}}}}
    latency_s: 0.01
    responses: [{{error: permission, message: "role analyst lacks patents:read"}}]
"""


class ResearchServer(OpenAIServer):
    """Answers each subagent by its subtask, as a model would, with two overloads."""

    def __init__(self) -> None:
        super().__init__(api_key=KEY)
        self.seen: dict[str, int] = defaultdict(int)

    def default_reply(self, request: RecordedRequest) -> Reply:
        """Route on the request's system prompt and its tool results so far."""
        messages = request.json()["messages"]
        system = str(messages[0]["content"])
        if system.startswith("You are the lead"):
            return completion("USD 9bn by 2034 [market]; checked at a UTC time [clock].")
        sid = next(s for s in ("clock", "market", "patents") if f"Subtask {s!r}" in system)
        n = self.seen[sid]
        self.seen[sid] += 1
        results = [m for m in messages if m["role"] == "tool"]
        if sid == "clock":
            if not results:
                return completion(
                    tool_calls=[tool_call("time.get_current_time", {"timezone": "UTC"})]
                )
            return completion("It is the time the tool said (time.get_current_time).")
        if sid == "market":
            if n < 2:
                return error(503, "The server is overloaded, please try again later.")
            if not results:
                return completion(tool_calls=[tool_call("web_search", {"query": 2026})])
            if len(results) == 1:
                return completion(tool_calls=[tool_call("web_search", {"query": "market size"})])
            return completion("USD 9bn by 2034 (web_search).")
        return completion(tool_calls=[tool_call("patent_db", {"since": "2024-01-01"})])


def _fanout(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _outcome(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "outcome": report["outcome"],
        "coverage": report["coverage"],
        "subtasks": [
            (s["id"], s["status"], s["attempts"], s["rounds"], s["findings"])
            for s in report["subtasks"]
        ],
        "gaps": [
            (g["subtask_id"], g["errorCategory"], g["trigger"], g["route"]) for g in report["gaps"]
        ],
    }


def test_a_recorded_live_run_replays_offline_to_the_same_report(tmp_path: Path) -> None:
    """Overloads, a correction, a permission stop and an MCP call all replay the same."""
    env = {**os.environ, "FANOUT_RECORD_TEST_KEY": KEY, "FANOUT_STORE": str(tmp_path / "s.db")}
    job = tmp_path / "job.yaml"
    out = tmp_path / "recorded.yaml"
    with ResearchServer() as server:
        job.write_text(JOB.format(base_url=server.base_url))
        live = _fanout("run", str(job), "--json", "--record", str(out), env=env, cwd=tmp_path)
        requests = list(server.requests)
    assert live.returncode == 0, live.stderr
    live_report = json.loads(live.stdout)
    assert all(r.api_key == KEY for r in requests)
    assert _outcome(live_report)["gaps"] == [
        ("patents", "permission", "permission_denied", "escalate")
    ]
    market = next(s for s in live_report["subtasks"] if s["id"] == "market")
    assert market["status"] == "complete"

    text = out.read_text()
    assert KEY not in text and "Authorization" not in text and "api_key_env" not in text
    recorded = yaml.safe_load(text)
    assert recorded["model"]["provider"] == "scripted"
    assert "mcp_servers" not in recorded and "time.get_current_time" in recorded["tools"]

    # The loopback server is stopped: the replay needs no model, no MCP server, no key.
    bare = {k: v for k, v in env.items() if k != "FANOUT_RECORD_TEST_KEY"}
    first = _fanout("replay", str(out), "--json", env=bare, cwd=tmp_path)
    second = _fanout("replay", str(out), "--json", env=bare, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout == second.stdout
    replayed = json.loads(first.stdout)["scenarios"][0]["report"]
    assert _outcome(replayed) == _outcome(live_report)


def test_a_recorded_run_with_follow_ups_replays_them(tmp_path: Path) -> None:
    """The lead's follow-up plan is written as a followups turn, the follow-ups' turns and
    expectations by their ids, and the job keeps following up: the recording replays to
    the same report, the gap filled as it was (docs/design.md §11)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "FANOUT_STORE": str(tmp_path / "runs.sqlite")}
    out = tmp_path / "followups.yaml"
    job = str(root / "scenarios" / "followup_fills_gap.yaml")
    ran = _fanout("run", job, "--speed", "20", "--record", str(out), "--json", env=env,
                  cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    live = json.loads(ran.stdout)
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert data["job"]["followups"] == 1
    lead = data["model"]["turns"]["lead"]
    assert [t["followups"][0]["id"] for t in lead if "followups" in t] == ["patents_web"]
    assert data["expect"]["gaps"]["patents"]["filled_by"] == ["patents_web"]
    replayed = _fanout("replay", str(out), "--json", env=env, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)["scenarios"][0]["report"]
    assert _outcome(report) == _outcome(live)
    assert report["gaps"][0]["filled_by"] == ["patents_web"]


def test_a_run_whose_plan_degraded_records_a_job_that_degrades_again(tmp_path: Path) -> None:
    """A lead that could not plan is recorded as a job to decompose with its failed plans
    as turns: the replay degrades the same way, the lead's row and gap included."""
    env = {**os.environ, "FANOUT_STORE": str(tmp_path / "s.db")}
    out = tmp_path / "recorded.yaml"
    source = Path(__file__).resolve().parents[2] / "scenarios" / "lead_plan_never_valid.yaml"
    live = _fanout("run", str(source), "--json", "--speed", "50", "--record", str(out),
                   env=env, cwd=tmp_path)
    assert live.returncode == 0, live.stderr
    live_report = json.loads(live.stdout)
    assert [s["id"] for s in live_report["subtasks"]] == ["lead", "question"]
    recorded = yaml.safe_load(out.read_text())
    assert "subtasks" not in recorded["job"] and recorded["job"]["max_subtasks"] == 6
    assert [list(t) for t in recorded["model"]["turns"]["lead"][:2]] == [
        ["subtasks", "latency_s"], ["subtasks", "latency_s"],
    ]
    replayed = _fanout("replay", str(out), "--json", env=env, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)["scenarios"][0]["report"]
    assert _outcome(report) == _outcome(live_report)
