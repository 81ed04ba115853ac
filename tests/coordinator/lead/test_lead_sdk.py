"""The lead agent through the official anthropic SDK against a loopback Messages API.

A job without subtasks is decomposed; the first plan is bad and the second request
names what was wrong; the subtasks run model-planned; the synthesis request shows the
lead every gap; ``answer.text`` is the model's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead import JobPlanning
from coordinator.replay import run_scenario
from shared import AnyioClock
from tests.loopback._server import RecordedRequest, Reply
from tests.loopback.anthropic_server import AnthropicServer, message, tool_use

KEY = "sk-ant-test-lead-0123456789"

JOB = """\
scenario: lead-over-the-wire
model:
  provider: anthropic
  name: claude-loopback
  base_url: {base_url}
  api_key_env: FANOUT_LEAD_TEST_KEY
  retry: {{max_attempts: 2, initial_backoff_s: 0.01, jitter: none}}
job:
  query: "State of solid-state batteries"
  max_subtasks: 3
tools:
  web_search:
    description: "Search the web."
    params: {{query: {{type: string}}}}
    responses: [{{ok: {{results: ["IDTechEx: USD 9bn by 2034"]}}}}]
  patent_db:
    description: "Search patents."
    params: {{since: {{type: string}}}}
    responses: [{{error: permission, message: "role analyst lacks patents:read"}}]
"""

BAD = [
    {"id": "market", "query": "market size", "tools": ["google"]},
    {"id": "market", "query": "again", "tools": ["web_search"]},
]
GOOD = [
    {"id": "market", "query": "market size", "tools": ["web_search"]},
    {"id": "patents", "query": "patents since 2024", "tools": ["patent_db"]},
]
ANSWER = "USD 9bn by 2034 [market]. Not covered: patents (access denied) [patents]."


class LeadServer(AnthropicServer):
    """Plays the lead (plan, then synthesis) and each subagent (one call, then text)."""

    def __init__(self) -> None:
        super().__init__(api_key=KEY)
        self.lead_requests: list[dict[str, Any]] = []
        self.seen: dict[str, int] = defaultdict(int)

    def default_reply(self, request: RecordedRequest) -> Reply:
        """Route on the system prompt: the lead's two kinds of call, or a subagent's."""
        body = request.json()
        system = str(body.get("system", ""))
        if system.startswith("You are the lead"):
            self.lead_requests.append(body)
            if body.get("tool_choice", {}).get("name") == "plan_subtasks":
                plan = GOOD if len(self.lead_requests) > 1 else BAD
                return message(tool_uses=[tool_use("plan_subtasks", {"subtasks": plan})])
            return message(ANSWER)
        sid = "market" if "Subtask 'market'" in system else "patents"
        n = self.seen[sid]
        self.seen[sid] += 1
        if n == 0:
            call = (
                ("web_search", {"query": "q"}) if sid == "market" else ("patent_db", {"since": "x"})
            )
            return message(tool_uses=[tool_use(*call)])
        return message(f"{sid}: done")


@pytest.fixture
def anyio_backend() -> str:
    """Real time on asyncio: the SDK's HTTP client talks to a real socket."""
    return "asyncio"


@pytest.mark.anyio
async def test_a_decomposed_job_over_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan corrected once, subtasks model-planned, the lead shown every gap."""
    monkeypatch.setenv("FANOUT_LEAD_TEST_KEY", KEY)
    with LeadServer() as server:
        scenario = load_scenario_text(JOB.format(base_url=server.origin), "lead.yaml")
        planning = JobPlanning(scenario, clock=AnyioClock())
        report = await run_scenario(scenario, clock=AnyioClock(), planning=planning)
        requests = list(server.requests)
        lead = server.lead_requests
    assert all(r.api_key == KEY for r in requests)
    # The second planning request carries the first plan's problems as a tool_result.
    feedback = [
        block
        for m in lead[1]["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    assert feedback and feedback[0]["is_error"] is True
    errors = json.loads(str(feedback[0]["content"]))["errors"]
    assert any("unknown tool 'google'" in e for e in errors)
    assert any("duplicate" in e for e in errors)
    assert [(s.id, s.status) for s in report.subtasks] == [
        ("market", "complete"),
        ("patents", "gap"),
    ]
    # The synthesis request shows the lead the gap: subtask, trigger, what could fix it.
    synthesis = json.dumps(lead[-1]["messages"])
    assert "[patents] permission / permission_denied" in synthesis
    assert "request patents:read for role analyst" in synthesis
    # Cited by subtask id: [market] is its source's number; [patents] (a gap without
    # findings) cites nothing and goes.
    assert report.answer.text == (
        "USD 9bn by 2034 [1]. Not covered: patents (access denied)."
    )
    assert [(s.n, s.subtask) for s in report.answer.sources or []] == [(1, "market")]
    assert [g.subtask_id for g in report.gaps] == ["patents"]
