"""A run on Temporal is one trace: from its submission through the workflow into every
activity, exported by the CLI and the worker to a loopback OTLP receiver (docs/design.md §13)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import ROOT, Workers, fanout
from tests.loopback.otlp_receiver import ExportedSpan, OtlpReceiver

LEAD_JOB = ROOT / "scenarios" / "research_lead.yaml"
SUBTASKS = ("market", "players", "news", "funding", "patents", "supply_chain", "regulation",
            "recalls")


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    """A loopback OTLP/HTTP receiver for this test."""
    with OtlpReceiver() as found:
        yield found


def spans_once_complete(receiver: OtlpReceiver, timeout: float = 30) -> list[ExportedSpan]:
    """The spans received once every subagent's span and the synthesis have arrived."""
    deadline = time.monotonic() + timeout
    wanted = {f"invoke_agent {sid}" for sid in SUBTASKS} | {"invoke_agent lead"}
    while True:
        spans = receiver.spans()
        names = {s.name for s in spans}
        if wanted <= names and "RunActivity:fanout.synthesize" in names:
            return spans
        assert time.monotonic() < deadline, sorted(names)
        time.sleep(0.1)  # the worker's batch processor exports every 50 ms


def test_a_temporal_run_is_one_trace_across_client_workflow_and_activities(
    dev_server: DevServer, workers: Workers, receiver: OtlpReceiver, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job span (client) → the workflow's spans → each round's activity span → the
    subagent's invoke_agent span → its chat and execute_tool spans, all one trace."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.origin)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    workers.start("otel")  # it inherits the OTEL_* variables
    done = fanout(
        "run", LEAD_JOB, "--executor", "temporal", "--address", dev_server.address,
        "--task-queue", "otel", "--speed", "50", "--json", "--store", tmp_path / "runs.sqlite",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "partial"
    spans = spans_once_complete(receiver)
    assert len({s.trace_id for s in spans}) == 1
    by_id = {s.span_id: s for s in spans}
    (root,) = [s for s in spans if s.name == "invoke_agent lead"]
    assert root.parent_id == ""
    assert root.attributes["fanout.run_id"]

    def ancestors(span: ExportedSpan) -> list[str]:
        chain = []
        while span.parent_id:
            span = by_id[span.parent_id]
            chain.append(span.name)
        return chain

    for sid in SUBTASKS:
        agents = [s for s in spans if s.name == f"invoke_agent {sid}"]
        assert agents, sid
        for agent in agents:
            chain = ancestors(agent)
            assert chain[0] == "RunActivity:fanout.subagent_round", chain
            assert chain[-1] == "invoke_agent lead", chain
    (patents,) = [s for s in spans if s.name == "invoke_agent patents"]
    assert patents.attributes["error.type"] == "permission"
    assert patents.attributes["fanout.route"] == "escalate"
    lead_chats = [s for s in spans if s.name == "chat scripted-demo"
                  and s.attributes["fanout.subtask_id"] == "lead"]
    assert {ancestors(s)[0] for s in lead_chats} == {
        "RunActivity:fanout.decompose", "RunActivity:fanout.plan_followups",
        "RunActivity:fanout.synthesize",
    }
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert tools and all(ancestors(s)[0].startswith("invoke_agent ") for s in tools)
