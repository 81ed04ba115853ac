"""A replayed run's spans through the SDK's in-memory exporter (a provider per test)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import run_scenario
from shared.clock import run_in_virtual_time
from subagents.executor import ExecEvent, execute_tool_safely
from subagents.result import ProgressEvent, SubagentResult
from subagents.telemetry import CAPTURE_CONTENT_ENV, RunTracer, record_limiter_wait, tracer_of
from subagents.tool import Tool

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def replayed(name: str) -> tuple[list[ReadableSpan], str]:
    """Replay a library scenario with a provider of its own; its spans and outcome."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scenario = load_scenario(SCENARIOS / name)
    report = run_in_virtual_time(
        functools.partial(run_scenario, scenario, tracer_provider=provider)
    )
    return list(exporter.get_finished_spans()), report.outcome


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_one_trace_with_the_job_its_subagents_and_every_attempt() -> None:
    """The lead's span is the root of one trace; subagents hang under it, attempts under them."""
    spans, outcome = replayed("research_lead.yaml")
    assert len({s.context.trace_id for s in spans}) == 1
    (root,) = named(spans, "invoke_agent lead")
    assert root.parent is None
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["fanout.outcome"] == outcome
    agents = [s for s in spans if s.name.startswith("invoke_agent ") and s is not root]
    assert {s.attributes["gen_ai.agent.name"] for s in agents if s.attributes} == {
        "market", "players", "news", "funding", "patents", "supply_chain", "regulation",
        "recalls", "patents_web", "supply_chain_pages",  # the last two: the lead's follow-ups
    }
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in agents)
    by_id = {s.context.span_id: s for s in spans}
    lead_chats = [s for s in named(spans, "chat scripted-demo")
                  if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert len(lead_chats) == 3  # the decomposition, the follow-ups and the synthesis
    for span in spans:
        if span.name.startswith(("chat ", "execute_tool ")) and span not in lead_chats:
            assert span.parent is not None
            assert by_id[span.parent.span_id].name.startswith("invoke_agent ")


def test_a_failed_attempt_is_an_error_of_its_category_and_the_retry_says_its_wait() -> None:
    """The rate-limited model call: error.type transient, ERROR; the next attempt waited."""
    spans, _ = replayed("research_lead.yaml")
    funding = [s for s in named(spans, "chat scripted-demo")
               if s.attributes and s.attributes["fanout.subtask_id"] == "funding"]
    first, second = sorted(funding, key=lambda s: s.start_time or 0)[:2]
    assert first.status.status_code is StatusCode.ERROR
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["error.type"] == "transient"
    assert first.attributes["fanout.error_type"] == "rate_limited"
    assert first.attributes["fanout.is_retryable"] is True
    assert second.attributes["fanout.attempt"] == 2
    assert second.attributes["fanout.wait_s"] == 10
    assert second.attributes["gen_ai.provider.name"] == "fanout.scripted"
    assert second.status.status_code is StatusCode.UNSET


def test_an_escalated_subagent_carries_category_trigger_and_route() -> None:
    """The permission denial ends the patents agent span ERROR, routed escalate."""
    spans, _ = replayed("research_lead.yaml")
    (patents,) = named(spans, "invoke_agent patents")
    assert patents.status.status_code is StatusCode.ERROR
    assert patents.attributes is not None
    assert patents.attributes["error.type"] == "permission"
    assert patents.attributes["fanout.trigger"] == "permission_denied"
    assert patents.attributes["fanout.route"] == "escalate"
    denied = [s for s in named(spans, "execute_tool patent_db")
              if s.status.status_code is StatusCode.ERROR]
    assert denied and denied[0].attributes is not None
    assert denied[0].attributes["gen_ai.tool.name"] == "patent_db"
    assert str(denied[0].attributes["gen_ai.tool.call.id"]).startswith("tr_")


def test_a_retry_round_is_a_second_invocation_of_the_agent() -> None:
    """A subtask routed retry_later gets one agent span per round."""
    spans, _ = replayed("retry_round_recovers.yaml")
    rounds = sorted(
        (int(str(s.attributes["fanout.round"])) for s in spans
         if s.name.startswith("invoke_agent ") and s.attributes
         and s.attributes.get("fanout.route") == "retry_later"),
    )
    assert rounds == [1]
    assert any(s.attributes and s.attributes.get("fanout.round") == 2 for s in spans)


def test_no_content_by_default_and_content_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tool results and model text reach spans only with the capture switch on."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    spans, _ = replayed("research_lead.yaml")
    text = repr([dict(s.attributes or {}) for s in spans])
    assert "QuantumScape" not in text and "gen_ai.output.messages" not in text
    assert all(s.status.description in (None, "transient", "permission", "validation",
                                        "internal", "business") or "no subtask" in str(
                                            s.status.description) for s in spans)
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    spans, _ = replayed("research_lead.yaml")
    text = repr([dict(s.attributes or {}) for s in spans])
    assert "QuantumScape" in text
    assert any(s.attributes and "gen_ai.tool.call.result" in s.attributes for s in spans)


def test_fanout_never_sets_the_global_provider() -> None:
    """A library run traces to the provider it was given and leaves the global one alone."""
    replayed("transient_backoff.yaml")
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def test_tool_arguments_are_content_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool call's arguments reach its span only with the capture switch on."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    spans, _ = replayed("research_lead.yaml")
    assert not any(s.attributes and "gen_ai.tool.call.arguments" in s.attributes for s in spans)
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    spans, _ = replayed("research_lead.yaml")
    (patent,) = [s for s in named(spans, "execute_tool patent_db")]
    assert patent.attributes is not None
    assert "H01M10/0562" in str(patent.attributes["gen_ai.tool.call.arguments"])


@pytest.mark.anyio
async def test_an_attempt_is_the_current_span_while_it_runs() -> None:
    """What a tool body traces (a limiter wait, an SDK's own span) hangs under its attempt."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = RunTracer(tracer_of(provider), run_id="r1")

    async def search(query: str) -> dict[str, list[str]]:
        record_limiter_wait("https://api.example.test", 0.25)
        with provider.get_tracer("sdk").start_as_current_span("sdk.request"):
            return {"results": [query]}

    tool = Tool(name="search", body=search, schema={
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
    }, is_async=True)

    def observe(event: ExecEvent) -> None:
        tracer.observe(ProgressEvent("s1", event.kind, event.at, tool=event.tool,
                                     attempt=event.attempt, result=event.result))

    tracer.observe(ProgressEvent("s1", "state", 0, state="running"))
    result = await execute_tool_safely(tool, {"query": "q"}, timeout=5, observer=observe)
    assert result.ok
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached
    tracer.close()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    attempt, sdk = spans["execute_tool search"], spans["sdk.request"]
    assert sdk.parent is not None and sdk.parent.span_id == attempt.context.span_id
    (wait,) = attempt.events
    assert wait.name == "fanout.limiter_wait"
    assert wait.attributes is not None and wait.attributes["fanout.wait_s"] == 0.25


class _BrokenTracer(trace.NoOpTracer):
    """A tracer with a bug: every span it is asked for raises."""

    def start_span(self, *args: object, **kwargs: object) -> trace.Span:
        raise RuntimeError("exporter bug")


def test_a_telemetry_bug_loses_spans_never_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """The observer and the result hook swallow (and log) what the tracer raises."""
    tracer = RunTracer(_BrokenTracer(), run_id="r1")
    tracer.observe(ProgressEvent("s1", "state", 0, state="running"))
    tracer.observe(ProgressEvent("s1", "start", 0, tool="search", attempt=1))
    tracer.finished(SubagentResult(subtask_id="s1"))
    assert "a span was lost" in caplog.text
