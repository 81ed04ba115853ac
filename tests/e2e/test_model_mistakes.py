"""What the model gets wrong goes back to it, and the tool never runs; how it stops.

Real jobs through the official SDKs against loopback servers: the second request's body
shows what the model was told, and the simulated tools' numbered answers show which
calls really executed.
"""

from __future__ import annotations

import pytest

from tests.e2e.jobs import PATENTS, job_text, run_job_text, subagent_requests
from tests.e2e.wire import Wire
from tests.loopback import LoopbackServer

pytestmark = pytest.mark.anyio


async def test_a_field_error_reaches_the_model_and_its_correction_succeeds(
    wire: Wire, server: LoopbackServer
) -> None:
    """Month 13 comes back as an error tool result naming ``since``; the fixed date runs."""
    server.push(
        wire.tool("patent_db", {"since": "2024-13-01"}, id="call_bad"),
        wire.tool("patent_db", {"since": "2024-12-01"}, id="call_good"),
        wire.text("Two filings [patents]"),
    )
    outcome = await run_job_text(job_text(wire, server, tools=PATENTS, subtask="patents"))
    asked = subagent_requests(wire, server.requests)
    assert len(asked) == 3
    (seen,) = wire.tool_results(asked[1])
    assert seen.call_id == "call_bad"
    envelope = seen.envelope
    assert (envelope["ok"], envelope["errorCategory"], envelope["field"]) == (
        False,
        "validation",
        "since",
    )
    if wire.provider == "anthropic":
        assert seen.is_error is True
    else:
        assert '"field":"since"' in seen.content
    (_, fixed) = wire.tool_results(asked[2])
    assert fixed.envelope["ok"] is True and fixed.is_error in (False, None)
    assert outcome.subtask("patents")["status"] == "complete"
    tools = [f["tool"] for f in outcome.findings("patents")]
    assert tools == ["patent_db", "model"]


async def test_an_invented_tool_and_broken_arguments_never_execute(
    wire: Wire, server: LoopbackServer
) -> None:
    """An unknown tool name, then arguments that are no JSON object: neither runs."""
    broken = '{"query": "market"' if wire.provider == "openai" else "market size, please"
    server.push(
        wire.tool("google_search", {"q": "market"}),
        wire.tool("web_search", broken),
        wire.tool("web_search", {"query": "market size 2026"}),
        wire.text("USD 9bn [market]"),
    )
    outcome = await run_job_text(job_text(wire, server))
    asked = subagent_requests(wire, server.requests)
    assert len(asked) == 4
    invented = wire.tool_results(asked[1])[-1].envelope
    assert (invented["errorCategory"], invented["field"]) == ("validation", "name")
    assert "web_search" in invented["expected"]
    not_json = wire.tool_results(asked[2])[-1].envelope
    assert (not_json["errorCategory"], not_json["field"]) == ("validation", "arguments")
    # The one call that ran got the tool's FIRST answer: nothing executed before it.
    executed = [f for f in outcome.findings() if f["tool"] == "web_search"]
    assert [f["data"] for f in executed] == [{"execution": 1}]
    assert len(outcome.envelopes("google_search")) == 1
    assert not outcome.envelopes("google_search")[0].ok
    assert outcome.subtask()["status"] == "complete"


async def test_escalate_carries_the_model_alternatives_into_the_gap(
    wire: Wire, server: LoopbackServer
) -> None:
    """The built-in escalate tool: its trigger, message and alternatives reach the gap."""
    alternatives = ["report cell-level USD/kWh", "report pack-level EUR/kWh"]
    server.push(
        wire.tool("web_search", {"query": "price per kWh"}),
        wire.tool(
            "escalate",
            {
                "trigger": "human_request",
                "message": "USD or EUR, cell or pack?",
                "alternatives": alternatives,
            },
        ),
        wire.text("never asked for"),
    )
    outcome = await run_job_text(job_text(wire, server))
    assert len(subagent_requests(wire, server.requests)) == 2
    gap = outcome.gap()
    assert gap["trigger"] == "human_request"
    assert gap["alternatives"][:2] == alternatives
    assert "USD or EUR" in gap["message"]
    assert [f["tool"] for f in gap["partial_results"]] == ["web_search"]


async def test_a_cut_off_answer_is_incomplete_data(wire: Wire, server: LoopbackServer) -> None:
    """max_tokens / finish_reason length: the text kept as an incomplete finding."""
    server.push(
        wire.tool("web_search", {"query": "timeline"}),
        wire.text("Toyota targets 2027-28; QuantumScape ships B-samples and", cut_off=True),
    )
    outcome = await run_job_text(job_text(wire, server))
    assert outcome.subtask()["status"] == "partial"
    assert outcome.gap()["trigger"] == "incomplete_data"
    written = outcome.findings()[-1]
    assert written["tool"] == "model" and written["complete"] is False
    assert written["data"]["text"].endswith("B-samples and")
