"""Job files for the end-to-end tests, and running one for real in this process.

A job is written as YAML text exactly as a user would (``model`` block pointed at a
loopback server, the key named by ``api_key_env``), loaded by the real loader and run by
:func:`coordinator.lead.run_research` on the asyncio backend in real time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from coordinator.fanout import ResearchHooks, run_research
from coordinator.jobfile.loader import load_scenario_text
from coordinator.lead import JobPlanning
from shared.clock import AnyioClock
from shared.envelope import ToolResult
from shared.ids import SeededTraceIds
from subagents.result import ProgressEvent
from subagents.simulated.tools import SimulatedTools
from tests.e2e.wire import KEY_ENV, Wire
from tests.loopback import LoopbackServer, RecordedRequest

FAST_RETRY: Mapping[str, Any] = {
    "max_attempts": 4,
    "initial_backoff_s": 0.01,
    "multiplier": 2,
    "max_backoff_s": 0.05,
    "jitter": "none",
}
"""Small backoffs, no jitter: waits long enough to see, short enough to keep tests fast."""

SEARCH: Mapping[str, Any] = {
    "web_search": {
        "description": "Search the web; returns result titles.",
        "params": {"query": {"type": "string"}},
        "latency_s": 0,
        # Numbered answers: the n-th execution answers n, so a call that never ran shows.
        "responses": [{"ok": {"execution": n}} for n in (1, 2, 3)],
    }
}
PATENTS: Mapping[str, Any] = {
    "patent_db": {
        "description": "Search patent filings since a date.",
        "params": {"since": {"type": "string", "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}$"}},
        "latency_s": 0,
        "responses": [{"ok": {"results": ["QuantumScape", "Toyota"]}}],
    }
}
SUBAGENT_PROMPT = "You are a research subagent."


def job_text(
    wire: Wire,
    server: LoopbackServer,
    *,
    tools: Mapping[str, Any] = SEARCH,
    subtask: str = "market",
    retry: Mapping[str, Any] = FAST_RETRY,
    seed: int = 1,
) -> str:
    """A one-subtask job planned by ``wire``'s provider at ``server``, as YAML text."""
    document = {
        "scenario": f"e2e-{wire.provider}",
        "seed": seed,
        "model": {
            "provider": wire.provider,
            "name": wire.model_name,
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "max_tokens": 256,
            "timeout_s": 5,
            "retry": dict(retry),
        },
        "job": {
            "query": "solid-state batteries",
            "subtasks": [{"id": subtask, "query": f"solid-state battery {subtask}",
                          "tools": list(tools)}],
        },
        "tools": {name: dict(spec) for name, spec in tools.items()},
    }
    return yaml.safe_dump(document, sort_keys=False)


@dataclass
class Outcome:
    """A finished job: its report (wire form) and every progress event it emitted."""

    report: dict[str, Any]
    events: list[ProgressEvent] = field(default_factory=list)

    def subtask(self, sid: str = "market") -> dict[str, Any]:
        """The report row of subtask ``sid``."""
        return next(s for s in self.report["subtasks"] if s["id"] == sid)

    def gap(self, sid: str = "market") -> dict[str, Any]:
        """The gap of subtask ``sid``."""
        return next(g for g in self.report["gaps"] if g["subtask_id"] == sid)

    def findings(self, sid: str = "market") -> list[dict[str, Any]]:
        """The findings of subtask ``sid``'s section."""
        section = next(s for s in self.report["answer"]["sections"] if s["subtask_id"] == sid)
        findings: list[dict[str, Any]] = section["findings"]
        return findings

    def envelopes(self, tool: str, sid: str = "market") -> list[ToolResult]:
        """Every attempt's envelope for ``tool`` in subtask ``sid``, in order (the trace)."""
        return [
            e.result
            for e in self.events
            if e.kind == "attempt" and e.subtask_id == sid and e.tool == tool
            if e.result is not None
        ]


async def run_job_text(text: str) -> Outcome:
    """Load ``text`` and run its job for real; the key comes from the environment."""
    scenario = load_scenario_text(text, "e2e.yaml")
    clock = AnyioClock()
    events: list[ProgressEvent] = []
    planning = JobPlanning(scenario, clock=clock)
    try:
        report = await run_research(
            scenario,
            SimulatedTools(scenario.tools, clock),
            planning=planning,
            clock=clock,
            trace_ids=SeededTraceIds(scenario.seed),
            hooks=ResearchHooks(observer=events.append),
        )
    finally:
        await planning.aclose()
    return Outcome(report.to_wire(), events)


def subagent_requests(
    wire: Wire, requests: Sequence[RecordedRequest]
) -> list[RecordedRequest]:
    """The requests a subagent's model got (the lead's synthesis left out)."""
    return [r for r in requests if wire.system(r).startswith(SUBAGENT_PROMPT)]
