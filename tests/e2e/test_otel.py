"""`fanout run` exports its trace over OTLP/HTTP as the OTEL_* variables ask (docs/design.md §13).

Each run is a real subprocess (the CLI configures the SDK only as a process of its own)
against a loopback model server and a loopback OTLP receiver whose exports are decoded
with ``opentelemetry-proto``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from subagents.telemetry import SEMCONV_VERSION
from tests.e2e.jobs import job_text
from tests.e2e.wire import KEY, KEY_ENV, WIRES, Wire
from tests.loopback import LoopbackServer
from tests.loopback.otlp_receiver import ExportedSpan, OtlpReceiver

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

ANSWER = "USD 9bn by 2034 [market]"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    """A loopback OTLP/HTTP receiver, for one test."""
    with OtlpReceiver() as found:
        yield found


@pytest.fixture
def openai_server(_servers: dict[str, LoopbackServer]) -> LoopbackServer:
    """The OpenAI loopback server alone (the tests that need one provider only)."""
    found = _servers["openai"]
    found.clear()
    return found


def _fanout_run(job: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str],
                                                               float]:
    # PYTHONFAULTHANDLER: a run that has not ended after 60 s is aborted, and the test
    # fails with every thread's stack. Seen once beside `stress --cpu 2` at load ~10: the
    # report printed whole, then no exit within the 60 s (the stacks will say where).
    environ = {**os.environ, KEY_ENV: KEY, "FANOUT_STORE": str(tmp_path / "runs.sqlite"),
               "OTEL_SERVICE_NAME": "fanout-e2e", "PYTHONFAULTHANDLER": "1", **env}
    command = [sys.executable, "-m", "coordinator.cli", "run", str(job), "--json", "--speed",
               "50"]
    began = time.monotonic()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=environ, cwd=tmp_path) as proc:
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"fanout run had not ended after 60 s; its output:\n{out[-2000:]}\n"
                        f"its stacks:\n{err}")
    took = time.monotonic() - began
    return subprocess.CompletedProcess(command, proc.returncode, out, err), took


def _job(wire: Wire, server: LoopbackServer, tmp_path: Path) -> Path:
    server.push(
        wire.error(503, f"overloaded while checking key {KEY}"),
        wire.tool("web_search", {"query": "market size"}),
        wire.text(ANSWER),
        wire.text("The market: USD 9bn by 2034 [market]."),  # the lead's synthesis
    )
    document = yaml.safe_load(job_text(wire, server))
    # A cold process's first SDK call can take seconds on a busy machine: a model timeout
    # here would add an attempt the assertions do not expect.
    document["model"]["timeout_s"] = 60
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return job


def _by_name(spans: list[ExportedSpan]) -> dict[str, list[ExportedSpan]]:
    out: dict[str, list[ExportedSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def test_a_run_exports_one_trace_of_genai_spans_with_content_when_asked(
    wire: Wire, server: LoopbackServer, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """One trace: the job, its subagent, each model attempt and tool attempt, with gen_ai.*
    and fanout.* attributes; content is captured on request, the key never is."""
    job = _job(wire, server, tmp_path)
    run, _ = _fanout_run(
        job, tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.origin,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    spans = receiver.spans()
    for request in receiver.requests:
        assert KEY.encode() not in request.body
    names = _by_name(spans)
    assert {s.trace_id for s in spans} == {names["invoke_agent lead"][0].trace_id}
    root = names["invoke_agent lead"][0]
    agent = names["invoke_agent market"][0]
    assert root.parent_id == ""
    assert agent.parent_id == root.span_id
    assert root.service == "fanout-e2e"
    assert root.schema_url.endswith(SEMCONV_VERSION)
    assert report["outcome"] == "complete"
    # The provider SDK may add its own client spans to the trace (the Anthropic SDK does,
    # metadata only): each hangs under the chat attempt that made it.
    ours = {s.span_id: s for s in spans if s.scope == "fanout"}
    for sdk in (s for s in spans if s.scope != "fanout"):
        assert ours[sdk.parent_id].name.startswith("chat "), sdk.name
    spans = list(ours.values())
    run_ids = {s.attributes.get("fanout.run_id") for s in spans}
    assert len(run_ids) == 1 and run_ids.pop()
    assert root.attributes["fanout.outcome"] == "complete"
    chats = sorted(names[f"chat {wire.model_name}"], key=lambda s: s.attributes["fanout.attempt"])
    subagent_chats = [c for c in chats if c.parent_id == agent.span_id]
    lead_chats = [c for c in chats if c.parent_id == root.span_id]
    assert len(subagent_chats) == 3 and len(lead_chats) == 1
    failed = next(c for c in subagent_chats if c.status_code == 2)
    assert failed.attributes["error.type"] == "transient"
    assert failed.attributes["fanout.is_retryable"] is True
    assert "[redacted]" in failed.status_message  # the message, with the key taken out
    retried = next(c for c in subagent_chats if c.attributes["fanout.attempt"] == 2)
    assert retried.attributes["fanout.wait_s"] > 0
    assert retried.attributes["gen_ai.provider.name"] == wire.provider
    assert retried.attributes["gen_ai.request.model"] == wire.model_name
    assert retried.attributes["gen_ai.usage.input_tokens"] > 0
    assert retried.attributes["server.address"] == "127.0.0.1"
    assert "web_search" in retried.attributes["gen_ai.output.messages"]
    tool = names["execute_tool web_search"][0]
    assert tool.parent_id == agent.span_id
    assert tool.attributes["gen_ai.tool.name"] == "web_search"
    assert tool.attributes["gen_ai.tool.call.id"].startswith("tr_")
    assert "execution" in tool.attributes["gen_ai.tool.call.result"]
    assert any(ANSWER in str(c.attributes.get("gen_ai.output.messages")) for c in chats)


def test_without_the_switch_no_content_reaches_a_span(
    openai_server: LoopbackServer, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """By default spans say what happened (categories, counts), never what was said."""
    wire = WIRES["openai"]
    job = _job(wire, openai_server, tmp_path)
    run, _ = _fanout_run(job, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.origin)
    assert run.returncode == 0, run.stderr
    spans = receiver.spans()
    assert len(spans) >= 6
    raw = b"".join(r.body for r in receiver.requests)
    for secret in (KEY, ANSWER, "market size", "overloaded while checking", "execution"):
        assert secret.encode() not in raw, secret
    failed = [s for s in spans if s.status_code == 2]
    assert failed and all(s.status_message == "transient" for s in failed)
    for span in spans:
        assert not {"gen_ai.output.messages", "gen_ai.tool.call.result"} & set(span.attributes)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_receiver_that_is_down_neither_fails_nor_holds_up_the_run(
    openai_server: LoopbackServer, tmp_path: Path
) -> None:
    """Nothing listens at the endpoint, and the exporter would retry for 30 s: the run
    succeeds, and exits at most the flush limit (5 s) later than one without traces."""
    wire = WIRES["openai"]
    plain, plain_took = _fanout_run(_job(wire, openai_server, tmp_path), tmp_path)
    assert plain.returncode == 0, plain.stderr
    openai_server.clear()
    run, took = _fanout_run(
        _job(wire, openai_server, tmp_path), tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
        OTEL_EXPORTER_OTLP_TIMEOUT="30",
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["outcome"] == "complete"
    assert "Traceback" not in run.stderr
    assert took - plain_took < 5 + 5, (took, plain_took)  # the flush limit, and slack


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        pytest.param("OTEL_TRACES_EXPORTER", "zipkin", id="exporter"),
        pytest.param("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", id="protocol"),
    ],
)
def test_an_otel_variable_fanout_cannot_use_is_refused_before_the_run(
    variable: str, value: str, openai_server: LoopbackServer, tmp_path: Path
) -> None:
    """A bad OTEL_* value exits 2 naming the variable; nothing runs, no traceback."""
    job = tmp_path / "job.yaml"
    job.write_text(job_text(WIRES["openai"], openai_server), encoding="utf-8")
    run, _ = _fanout_run(job, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
                         **{variable: value})
    assert run.returncode == 2
    assert variable in run.stderr and "Traceback" not in run.stderr
    assert not openai_server.requests
