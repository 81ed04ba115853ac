"""docs/design.md §7's failure table end to end: real jobs, the official SDKs, loopback servers.

Every job here is a YAML file run by ``run_research`` in real time; the SDKs have
``max_retries=0``, so every request the server saw was sent by fanout's one retry layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.e2e.jobs import job_text, run_job_text, subagent_requests
from tests.e2e.wire import Wire
from tests.loopback import LoopbackServer, RecordedRequest, Reply

pytestmark = pytest.mark.anyio


def answered(wire: Wire) -> list[Reply]:
    """A model that searches once and then answers."""
    return [wire.tool("web_search", {"query": "market size"}), wire.text("USD 9bn [market]")]


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(lambda w: w.error(529, "Overloaded"), id="529"),
        pytest.param(lambda w: w.overloaded(), id="overloaded"),
        pytest.param(lambda w: w.error(500, "Internal server error"), id="500"),
        pytest.param(lambda w: w.error(503, "Service unavailable"), id="503"),
        pytest.param(
            lambda w: w.error(429, "Rate limited", headers={"retry-after": "0"}), id="429"
        ),
    ],
)
async def test_transient_failures_are_retried_by_fanout_alone(
    wire: Wire, server: LoopbackServer, failure: Callable[[Wire], Reply]
) -> None:
    """Two transient failures then success: exactly four requests, so the SDK retried none."""
    first, answer = answered(wire)
    server.push(failure(wire), failure(wire), first, answer)
    outcome = await run_job_text(job_text(wire, server))
    assert outcome.subtask()["status"] == "complete"
    assert len(subagent_requests(wire, server.requests)) == 4
    model = outcome.envelopes("model")
    assert [e.ok for e in model] == [False, False, True, True]
    assert model[0].category == "transient"
    # Three attempts of the first model call, one of the second, one of the tool.
    assert outcome.subtask()["attempts"] == 5


@pytest.mark.parametrize(
    ("headers", "wait_s"),
    [
        pytest.param({"retry-after": "1"}, 1.0, id="retry-after"),
        pytest.param({"retry-after-ms": "400", "retry-after": "30"}, 0.4, id="retry-after-ms"),
    ],
)
async def test_retry_after_is_honoured(
    wire: Wire, server: LoopbackServer, headers: dict[str, str], wait_s: float
) -> None:
    """A 429's retry-after (retry-after-ms first) is waited out between the two requests."""
    stamps: list[float] = []

    def stamped(reply: Reply) -> Callable[[RecordedRequest], Reply]:
        def respond(request: RecordedRequest) -> Reply:
            stamps.append(time.monotonic())
            return reply

        return respond

    first, answer = answered(wire)
    limited = wire.error(429, "Rate limited: slow down", headers=headers)
    server.push(stamped(limited), stamped(first), answer)
    outcome = await run_job_text(job_text(wire, server))
    assert outcome.subtask()["status"] == "complete"
    gap = stamps[1] - stamps[0]
    # Far above the 0.01 s backoff, far below the 30 s retry-after it must not read.
    assert wait_s * 0.9 <= gap < wait_s + 1.5
    assert outcome.envelopes("model")[0].retry_after_s == pytest.approx(wait_s)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        pytest.param(401, "invalid x-api-key", id="401"),
        pytest.param(403, "Your API key does not have permission to use the model", id="403"),
    ],
)
async def test_auth_failures_escalate_and_the_model_is_not_asked_again(
    wire: Wire, server: LoopbackServer, status: int, message: str
) -> None:
    """401/403: one request, gap permission_denied, the queued answer never consumed."""
    server.push(wire.error(status, message), *answered(wire))
    outcome = await run_job_text(job_text(wire, server))
    assert len(subagent_requests(wire, server.requests)) == 1
    gap = outcome.gap()
    assert (gap["trigger"], gap["errorCategory"]) == ("permission_denied", "permission")
    assert any("FANOUT_E2E_MODEL_KEY" in a for a in gap["alternatives"])
    assert outcome.subtask()["attempts"] == 1


async def test_a_context_length_400_stops_with_context_budget(
    wire: Wire, server: LoopbackServer
) -> None:
    """The provider's real "too long" wording: trigger context_budget, not retried."""
    server.push(wire.context_too_long())
    outcome = await run_job_text(job_text(wire, server))
    assert len(subagent_requests(wire, server.requests)) == 1
    assert outcome.gap()["trigger"] == "context_budget"
    assert outcome.envelopes("model")[0].error_type == "context_length"


async def test_a_spent_quota_is_a_threshold_breach(wire: Wire, server: LoopbackServer) -> None:
    """OpenAI's 429 insufficient_quota, Anthropic's credit balance: business, not retried."""
    server.push(wire.quota(), *answered(wire))
    outcome = await run_job_text(job_text(wire, server))
    assert len(subagent_requests(wire, server.requests)) == 1
    gap = outcome.gap()
    assert (gap["trigger"], gap["errorCategory"]) == ("threshold_breach", "business")
    assert outcome.envelopes("model")[0].error_type == "quota"


async def test_an_unknown_model_is_a_validation_gap(wire: Wire, server: LoopbackServer) -> None:
    """A 404 for the model id: a validation gap naming model.name, asked once."""
    server.push(wire.no_such_model(), *answered(wire))
    outcome = await run_job_text(job_text(wire, server))
    assert len(subagent_requests(wire, server.requests)) == 1
    assert outcome.gap()["errorCategory"] == "validation"
    envelope = outcome.envelopes("model")[0]
    assert (envelope.category, envelope.field) == ("validation", "model.name")
    assert outcome.report["outcome"] != "complete"
